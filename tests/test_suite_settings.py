"""What the suite's own settings (tests/conftest.py) rely on."""

import gc
import sys

import jax
import jax.numpy as jnp
import pytest

from conftest import memory_maps


def _load(first: int, count: int) -> list:
    """``count`` distinct jitted programs, each compiled and run once."""
    programs = [jax.jit(lambda x, i=i: jnp.cumsum(jnp.sin(x) * i) + jnp.max(x))
                for i in range(first, first + count)]
    for program in programs:
        program(jnp.arange(16.0)).block_until_ready()
    return programs


def _drop_caches() -> None:
    jax.clear_caches()
    gc.collect()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/maps is Linux's")
def test_dropping_jax_caches_unmaps_the_compiled_programs():
    # The worker-crash guard in conftest.py counts on this: the machine code of compiled
    # programs lives in memory mappings that go away with JAX's caches, even while the
    # jitted functions themselves are still held (as the project's lru_caches hold them).
    _load(1000, 2)  # what the first programs of a process map once (runtime, thread pool)
    _drop_caches()
    before = memory_maps()
    programs = _load(0, 8)
    loaded = memory_maps()
    assert loaded >= before + 8 * 3  # at least one kernel's code, constants and data each
    _drop_caches()
    assert memory_maps() <= before + (loaded - before) // 8
    assert len(programs) == 8  # still held
