"""Shared test settings: small games compiled once per session."""

import os

# Fake CPU devices for sharding tests; must be set before jax is imported.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_numpy_rank_promotion", "allow")


@pytest.fixture(scope="session")
def env9():
    from gomoku_jax.game import Gomoku

    return Gomoku(9, 5)
