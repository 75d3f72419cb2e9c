"""Learners and search baselines, one module each (built on `gomoku_jax`)."""
