"""Keeping a long process under Linux's limit on memory mappings (`gomoku_jax.compiled`)."""

import sys

import jax
import jax.numpy as jnp
import pytest

from gomoku_jax import compiled

linux = pytest.mark.skipif(not sys.platform.startswith("linux"),
                           reason="the counts are read from Linux's /proc")


def _load(first: int, count: int) -> list:
    """``count`` distinct jitted programs, each compiled and run once."""
    programs = [jax.jit(lambda x, i=i: jnp.cumsum(jnp.sin(x) * i) + jnp.max(x))
                for i in range(first, first + count)]
    for program in programs:
        program(jnp.arange(16.0)).block_until_ready()
    return programs


@linux
def test_a_crowded_process_unmaps_its_compiled_programs_and_they_still_run():
    _load(1000, 2)  # what the first programs of a process map once (runtime, thread pool)
    with pytest.warns(compiled.ReleaseWarning, match=r"held [\d,]+ memory mappings, over "
                                                     r"half of the 2 a process may have"):
        assert compiled.release_if_crowded(limit=2)
    before = compiled.memory_maps()
    assert 0 < before < compiled.map_limit()
    programs = _load(0, 8)  # held, as the project's caches hold theirs
    loaded = compiled.memory_maps()
    assert loaded >= before + 8 * 3  # at least one kernel's code, constants and data each
    assert not compiled.release_if_crowded(limit=2 * loaded + 2)  # not past half: kept
    assert compiled.memory_maps() >= loaded and programs[3]._cache_size() == 1
    assert compiled.release_if_crowded(limit=2 * loaded - 2, warn=False)
    assert compiled.memory_maps() <= before + (loaded - before) // 8
    assert programs[3]._cache_size() == 0
    expected = jnp.cumsum(jnp.sin(jnp.arange(16.0)) * 3) + 15.0
    assert jnp.allclose(programs[3](jnp.arange(16.0)), expected)  # compiled again


@pytest.mark.parametrize("limit", [0, -5, True, 2.5, "100"])
def test_a_limit_that_is_not_a_positive_count_is_refused(limit):
    with pytest.raises(ValueError, match=r"limit must be a positive integer \(memory mappings\)"):
        compiled.release_if_crowded(limit=limit)


@linux
def test_matches_release_programs_in_a_crowded_process(monkeypatch, env9):
    from gomoku_jax import agents, arena

    probe = _load(2000, 1)[0]
    monkeypatch.setattr(compiled, "map_limit", lambda: 2)  # every process is crowded now
    with pytest.warns(compiled.ReleaseWarning):
        arena.play_match(env9, agents.random_agent("a"), agents.random_agent("b"), games=2)
    assert probe._cache_size() == 0


@linux
def test_a_learner_program_does_not_count_the_retrace_a_release_forces():
    """A learner's ``trace_count`` says whether its program was traced again for its
    inputs; the retrace after `release_if_crowded` dropped the caches is not one."""
    from algorithms.common import _Program

    class View:  # what a learner gives its program: its traced view
        def _traced_view(self, hyper):
            return hyper

    traced = []  # every trace, counted or not
    program = _Program(View(), "step", lambda view, x: traced.append(1) or x * view)
    assert float(program(jnp.float32(2.0), jnp.float32(3.0))) == 6.0
    program(jnp.float32(4.0), jnp.float32(3.0))
    assert program.traces == 1
    before = compiled.releases()
    assert compiled.release_if_crowded(limit=2, warn=False)
    assert compiled.releases() == before + 1
    assert float(program(jnp.float32(2.0), jnp.float32(5.0))) == 10.0
    assert len(traced) == 2 and program.traces == 1  # traced again, for the release
    program(jnp.ones(3), jnp.float32(1.0))  # another shape: a trace of its own
    assert program.traces == 2
