"""Experiment configs, command-line entry points and benchmarks."""
