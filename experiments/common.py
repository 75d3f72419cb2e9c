"""Helpers shared by the experiment and benchmark entry points."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import jax
import numpy as np

from gomoku_jax.arena import device_description  # noqa: F401  (re-exported for the entry points)
from gomoku_jax.cli import output_file
from gomoku_jax.config import count_argument, seed_argument

REPOSITORY = Path(__file__).resolve().parents[1]


def repository_path(path) -> str:
    """``path`` from the repository's root when it lies inside (reports stay portable),
    else as given."""
    try:
        return str(Path(path).resolve().relative_to(REPOSITORY))
    except ValueError:
        return str(path)


def add_search_bench_arguments(parser, batches: str, simulations: str, repeats: int,
                               repeats_help: str, report_example: str) -> None:
    """The arguments the search benchmarks share: ``--batches``, ``--simulations`` (the
    help texts ``batches`` and ``simulations``), ``--algorithms``, ``--repeats``,
    ``--opening-stones``, ``--seed`` and ``--out``, each checked by its type as it is
    read."""
    from gomoku_jax import search as search_lib

    parser.add_argument("--batches", type=count_argument(1), nargs="+", default=None,
                        help=batches)
    parser.add_argument("--simulations", type=count_argument(1), nargs="+", default=None,
                        help=simulations)
    parser.add_argument("--algorithms", nargs="+", default=list(search_lib.ALGORITHMS),
                        choices=search_lib.ALGORITHMS, help="default: puct gumbel")
    parser.add_argument("--repeats", type=count_argument(1), default=repeats, help=repeats_help)
    parser.add_argument("--opening-stones", type=count_argument(0, 8), default=4,
                        help="random stones near the centre of the searched positions, "
                             "0 to 8 so that no win is on the board (default 4)")
    parser.add_argument("--seed", type=seed_argument, default=0, help="random seed (default 0)")
    add_out_argument(parser, report_example)


def add_json_argument(parser) -> None:
    """``--json``: where an experiment (not a benchmark) also writes its report (a
    directory, or a place where no file can be made, is refused as it is read, before the
    experiment runs)."""
    parser.add_argument("--json", type=output_file, default=None,
                        help="also write the report here as JSON (default: only print it)")


def add_out_argument(parser, report_example: str) -> None:
    """``--out`` (alias ``--json``): where every benchmark writes its report as JSON."""
    parser.add_argument("--out", "--json", dest="out", type=output_file, default=None,
                        help=f"also write the report here as JSON, e.g. {report_example}")


def fill_unset(args, values: dict) -> None:
    """Options the command line left unset (None) take ``values`` (option name with
    underscores -> value): a benchmark's defaults, or its ``--quick`` ones."""
    for name, value in values.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def run_script(main) -> None:
    """An experiment script's ``__main__``: run ``main()`` and exit with its status (0
    when it returns a report rather than a status). A ValueError or OSError (bad
    settings, a missing or unwritable file) ends it with one line,
    ``SCRIPT: error: ...``, and status 2, as ``gomoku-jax`` ends; Ctrl-C with status 130."""
    script = Path(sys.argv[0]).stem or "experiment"
    try:
        status = main()
    except (ValueError, OSError) as error:
        print(f"{script}: error: {error}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print(f"\n{script}: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(status if isinstance(status, int) else 0)


def write_report(report: dict, json_path: Path) -> None:
    """Write ``report`` as JSON to ``json_path``, making its folder; through a temporary
    file renamed over it, so an interrupt leaves the old report or the new one."""
    from gomoku_jax.io import write_atomic

    json_path = Path(json_path)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(json_path, json.dumps(report, indent=2))


def publish(report: dict, text: str, json_path: Path | None) -> dict:
    """Print a report's text and, when asked, write the report as JSON."""
    print(text)
    if json_path:
        write_report(report, json_path)
        print(f"report written to {json_path}")
    return report


def time_calls(fn, args_for, repeats: int, warmup: int = 0, min_seconds: float = 0.0,
               on_call=None) -> dict:
    """Time ``fn(*args_for(i))`` (a jitted function; results blocked on).

    Call 0 compiles (its time is ``compile_and_first_call_s``); ``warmup`` more calls are
    not timed (the first few calls after compiling run slower on a CPU while caches and
    the thread pool settle); then calls are timed until there are at least ``repeats`` of
    them and they took ``min_seconds`` together. ``seconds`` is their median, so one
    slow call does not move the figure; ``seconds_all`` all of them. ``on_call()``, when
    given, runs after every call (e.g. a progress bar's ``update``), outside the timing.
    """
    tick = on_call or (lambda: None)
    start = time.perf_counter()
    jax.block_until_ready(fn(*args_for(0)))
    compile_s = time.perf_counter() - start
    tick()
    for i in range(warmup):
        jax.block_until_ready(fn(*args_for(1 + i)))
        tick()
    seconds: list[float] = []
    while len(seconds) < repeats or sum(seconds) < min_seconds:
        args = args_for(1 + warmup + len(seconds))
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        seconds.append(time.perf_counter() - start)
        tick()
    return {"seconds": float(np.median(seconds)), "seconds_all": seconds,
            "compile_and_first_call_s": compile_s}
