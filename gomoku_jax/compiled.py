"""Compiled programs in a long-lived process, and Linux's limit on memory mappings.

XLA's CPU backend loads every program it compiles as machine code in memory mappings of
its own, about three per kernel (code, constants, data): some 80 for a small jitted
function, about 4,000 for one training run of the smoke variant of the CPU default
(``az_9x9_cpu.json``, measured with jax 0.10.2). They stay mapped as long as JAX's
in-memory caches hold the program, and the learners' shared programs, the agents' and the
searches' caches keep theirs for reuse. Linux limits the mappings of one process
(``vm.max_map_count``, 65,530 by default), and a process past it does not get a Python
error: it crashes inside LLVM when it loads its next program ("LLVM compilation error:
Cannot allocate memory", then SIGSEGV or SIGABRT; seen at 65,355 mappings). A notebook
that sweeps a setting which shapes the program compiles new programs for every value;
about sixteen smoke runs of the default would reach the limit.

`release_if_crowded` drops JAX's in-memory caches once the process holds more than half
the limit. Programs needed again are compiled again, or loaded from JAX's persistent
compilation cache where ``JAX_COMPILATION_CACHE_DIR`` is set. `gomoku_jax.training.run`
calls it before each run (so every run of a sweep) and the arena before each match of a
round robin or a ladder; call it in your own loops that compile many programs.
"""

from __future__ import annotations

import gc
import numbers
import warnings

import jax

__all__ = ["ReleaseWarning", "map_limit", "memory_maps", "release_if_crowded", "releases"]

_RELEASES = [0]  # how many times release_if_crowded dropped the caches in this process


def releases() -> int:
    """How many times `release_if_crowded` has dropped JAX's caches in this process: a
    program traced again after one is traced for the release, not for its inputs."""
    return _RELEASES[0]


def map_limit() -> int | None:
    """The most memory mappings a process may have (``vm.max_map_count``); None where the
    system does not say (not Linux)."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def memory_maps() -> int | None:
    """How many memory mappings this process has; None where the system does not say."""
    try:
        with open("/proc/self/maps", "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return None


class ReleaseWarning(UserWarning):
    """`release_if_crowded` dropped JAX's in-memory caches: programs compile again."""


def release_if_crowded(limit: int | None = None, *, warn: bool = True) -> bool:
    """Drop JAX's in-memory caches of compiled programs (`jax.clear_caches`) if this
    process holds more than half of ``limit`` memory mappings (default: `map_limit`).
    Returns whether it did, and says so with a `ReleaseWarning` unless ``warn`` is False
    (the next calls of the programs compile them again, which can take minutes). Jitted
    functions stay usable. Nothing happens where the counts are unknown."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(
            limit, numbers.Integral) or limit < 1):
        raise ValueError(f"limit must be a positive integer (memory mappings) or None, "
                         f"got {limit!r}")
    limit = map_limit() if limit is None else int(limit)
    count = memory_maps()
    if limit is None or count is None or count <= limit // 2:
        return False
    jax.clear_caches()
    _RELEASES[0] += 1
    gc.collect()  # programs held only by reference cycles go now, not at some later time
    if warn:
        warnings.warn(f"this process held {count:,} memory mappings, over half of the "
                      f"{limit:,} a process may have, most of them compiled programs' "
                      f"(gomoku_jax.compiled); dropped JAX's in-memory caches, so programs "
                      f"called again compile again", ReleaseWarning, stacklevel=2)
    return True
