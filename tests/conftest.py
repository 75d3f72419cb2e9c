"""Shared test settings: small games compiled once per session, and one XLA compilation cache.

Many tests (and the notebooks, and the subprocesses some tests start) train the same smoke
configs, so they compile the same programs. A persistent compilation cache, fresh for each
session, turns every compile after the first into a load; the worker processes of
``pytest -n 2`` share it (pytest-xdist's controller loads this file first and the workers
inherit its environment). JAX writes an entry without a lock; a worker that reads one the
other is still writing gets a warning and compiles the program itself.
``GOMOKU_JAX_TEST_CACHE=<folder>`` keeps one between sessions instead.
"""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile


def _xla_knows(flag: str) -> bool:
    """Whether this jaxlib's XLA accepts ``flag`` (it aborts on one it does not know)."""
    probe = subprocess.run([sys.executable, "-c", "import jax; jax.devices('cpu')"],
                           env=dict(os.environ, XLA_FLAGS=flag, JAX_PLATFORMS="cpu"),
                           capture_output=True, timeout=300)
    return probe.returncode == 0


def _default_xla_flag(name: str, value, ask: bool = False) -> None:
    """Add ``name=value`` to the environment's XLA_FLAGS (kept) unless they name ``name``;
    with ``ask``, only if this jaxlib knows the flag. Called before jax is imported, in the
    environment that subprocesses, pytest-xdist's workers among them, inherit."""
    flags = os.environ.get("XLA_FLAGS", "")
    if name not in flags and (not ask or _xla_knows(f"{name}={value}")):
        os.environ["XLA_FLAGS"] = " ".join([*flags.split(), f"{name}={value}"])


# Fake CPU devices for sharding tests. (Other flags of the environment alone used to leave
# the suite one device.)
_default_xla_flag("--xla_force_host_platform_device_count", 4)
# The suite's programs are small and most are compiled for a call or two, so compiling is
# most of its time: with LLVM's optimisations off (XLA's own passes, fusion among them,
# still run) the suite's summed test time fell from 92 to 68 minutes on a 2-core CPU.
_default_xla_flag("--xla_backend_optimization_level", 0)
# XLA's CPU backend emits fusions through its older LLVM emitters, not its MLIR fusion
# emitters: the same programs, compiled in about half the time (the tests of
# tests/test_search.py took 97 s in place of 178 s in one process). A newer jaxlib may
# not know the flag: then the suite runs without it.
_default_xla_flag("--xla_cpu_use_fusion_emitters", "false", ask=True)
# The suite runs in several processes (`pytest -n 2`); on a GPU machine they share the GPU,
# so none of them takes most of its memory up front.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# The cache settings go in the environment (before jax is imported) so subprocesses share them.
if not os.environ.get("GOMOKU_JAX_TEST_CACHE"):
    os.environ["GOMOKU_JAX_TEST_CACHE"] = tempfile.mkdtemp(prefix="gomoku-jax-test-xla-cache-")
    atexit.register(shutil.rmtree, os.environ["GOMOKU_JAX_TEST_CACHE"], ignore_errors=True)
# Absolute, so tests and subprocesses that change directory still find the same folder.
os.environ["JAX_COMPILATION_CACHE_DIR"] = os.path.abspath(
    os.path.expanduser(os.environ["GOMOKU_JAX_TEST_CACHE"]))
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0.3"
os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_numpy_rank_promotion", "allow")


# A worker process runs about 600 tests and held 52,000 memory mappings of compiled
# programs by the end of the suite, near Linux's limit (see `gomoku_jax.compiled`), past
# which it crashes. So before each test, a worker past half the limit drops JAX's in-memory
# caches: what a later test needs again is loaded from the session's compilation cache.
@pytest.fixture(autouse=True)
def _release_compiled_programs():
    from gomoku_jax import compiled

    compiled.release_if_crowded(warn=False)
    yield


@pytest.fixture
def registries():
    """``(networks.NETWORKS, agents.AGENTS)``, each put back after the test as it was, and
    so is ``search.QTRANSFORMS``."""
    from gomoku_jax import agents, networks, search

    saved = [(registry, dict(registry))
             for registry in (networks.NETWORKS, agents.AGENTS, search.QTRANSFORMS)]
    yield networks.NETWORKS, agents.AGENTS
    for registry, before in saved:
        registry.clear()
        registry.update(before)


@pytest.fixture(scope="session")
def env9():
    from gomoku_jax.game import Gomoku

    return Gomoku(9, 5)


@pytest.fixture(scope="session")
def console():
    """The ``gomoku-jax`` command (`cli.console`) as a subprocess's argument list, Ctrl-C
    raising KeyboardInterrupt in it even when the tests run with SIGINT ignored (a
    background job of a non-interactive shell, nohup), which a child inherits. (Not a
    ``preexec_fn``: that runs Python code between fork and exec of this multithreaded
    process.)"""
    return [sys.executable, "-c", "import signal; signal.signal(signal.SIGINT, "
            "signal.default_int_handler); from gomoku_jax.cli import console; console()"]
