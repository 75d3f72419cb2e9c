"""gomoku-jax: a JAX-native, vectorised research framework for k-in-a-row games."""
