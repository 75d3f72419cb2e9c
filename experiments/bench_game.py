"""Benchmark: plies per second of random full games, JAX engine vs a NumPy engine.

Command (about 1 to 2 minutes on a 2-core CPU)::

    gomoku-jax bench game                      # 9x9 and 15x15, B = 256, 1024, 4096
    gomoku-jax bench game --out runs/bench_game.json
    gomoku-jax bench game --quick               # a few seconds: 9x9, B = 256

Each JAX measurement plays B complete games of uniformly random legal moves in one
jitted call (`gomoku_jax.game.random_games`): every ply draws the random move from the
legal mask, places it and checks for a win; the figure counts real plies (the no-op
steps of games that finished early are not counted, but their cost is). The reference
is `gomoku_jax.reference.NumpyGomoku`, a plain single-game NumPy engine, timed in the
same run on the same machine; the ratio is JAX / NumPy. On a GPU or TPU the batch
65536 is added.

What to expect on the 2-core CPU this project is developed on: about 4 million plies/s
on 9x9 and 2.5 million on 15x15 at B = 4096; see the README's performance table.
"""

from __future__ import annotations

import time

import jax
import numpy as np
from tqdm import tqdm

from experiments.common import (add_out_argument, device_description, fill_unset, publish,
                                run_script)
from gomoku_jax.cli import ArgumentParser
from gomoku_jax.config import count_argument, seed_argument
from gomoku_jax.game import Gomoku, random_games
from gomoku_jax.reference import NumpyGomoku

DEFAULT_SIZES = (9, 15)
DEFAULT_BATCHES = (256, 1024, 4096)
QUICK = {"sizes": [9], "batches": [256], "repeats": 1, "numpy_seconds": 0.5}
ACCELERATOR_BATCH = 65536


def time_jax(env: Gomoku, batch: int, repeats: int, seed: int) -> dict:
    """Compile once, then time ``repeats`` batches of full random games."""
    start = time.perf_counter()
    state, _ = random_games(env, jax.random.key(seed), batch)
    state.move_count.block_until_ready()
    compile_s = time.perf_counter() - start
    plies, elapsed = 0, 0.0
    for r in range(repeats):
        start = time.perf_counter()
        state, _ = random_games(env, jax.random.key(seed + 1 + r), batch)
        total = int(state.move_count.sum())  # waits for the result
        elapsed += time.perf_counter() - start
        plies += total
    return {
        "plies_per_s": plies / elapsed,
        "games_per_s": batch * repeats / elapsed,
        "mean_game_length": plies / (batch * repeats),
        "compile_and_first_call_s": compile_s,
    }


def time_numpy(size: int, k: int, rule: str, seconds: float, seed: int) -> dict:
    """Random full games with the NumPy engine for about ``seconds``."""
    engine = NumpyGomoku(size, k, rule)
    rng = np.random.default_rng(seed)
    plies, games, start = 0, 0, time.perf_counter()
    while games == 0 or time.perf_counter() - start < seconds:
        plies += engine.play_random_game(rng)
        games += 1
    elapsed = time.perf_counter() - start
    return {"plies_per_s": plies / elapsed, "games_per_s": games / elapsed}


def run(
    sizes=DEFAULT_SIZES,
    batches=None,
    k: int = 5,
    rule: str = "freestyle",
    repeats: int = 3,
    numpy_seconds: float = 3.0,
    seed: int = 0,
    progress: bool = True,
) -> dict:
    """Measure every (size, batch) and the NumPy reference per size; return a report."""
    if batches is None:
        batches = DEFAULT_BATCHES
        if jax.devices()[0].platform != "cpu":
            batches = (*batches, ACCELERATOR_BATCH)
    jobs = [(n, b) for n in sizes for b in batches]
    rows, reference = [], {}
    bar = tqdm(total=len(jobs) + len(sizes), desc="bench game", disable=not progress)
    for n in sizes:
        reference[n] = time_numpy(n, k, rule, numpy_seconds, seed)
        bar.update()
        for b in batches:
            env = Gomoku(n, k, rule)
            result = time_jax(env, b, repeats, seed)
            result.update(size=n, batch=b, ratio=result["plies_per_s"] / reference[n]["plies_per_s"])
            rows.append(result)
            bar.update()
    bar.close()
    return {
        "benchmark": "random full games",
        "device": device_description(),
        "k": k,
        "rule": rule,
        "repeats": repeats,
        "numpy_reference": {str(n): v for n, v in reference.items()},
        "jax": rows,
    }


def format_ratio(ratio: float) -> str:
    """A speed ratio for the table: two significant digits below 10 (1.6x, 0.43x, not
    the 2x and 0x of whole numbers), whole numbers from 10 on (54x)."""
    return f"{ratio:.0f}x" if ratio >= 10 else f"{ratio:.2g}x"


def format_report(report: dict) -> str:
    lines = [
        f"Random full games, k={report['k']} {report['rule']}, device: {report['device']}",
        f"{'board':>7} {'batch':>7} {'plies/s':>12} {'games/s':>10} {'mean len':>9} "
        f"{'NumPy plies/s':>14} {'ratio':>8} {'compile s':>10}",
    ]
    for row in report["jax"]:
        ref = report["numpy_reference"][str(row["size"])]
        lines.append(
            f"{row['size']:>4}x{row['size']:<2} {row['batch']:>7} {row['plies_per_s']:>12,.0f} "
            f"{row['games_per_s']:>10,.0f} {row['mean_game_length']:>9.1f} "
            f"{ref['plies_per_s']:>14,.0f} {format_ratio(row['ratio']):>8} "
            f"{row['compile_and_first_call_s']:>10.2f}"
        )
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = ArgumentParser(
        prog="gomoku-jax bench game", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=None,
                        help="board sides (default 9 15; --quick: 9)")
    parser.add_argument("--batches", type=count_argument(1), nargs="+", default=None,
                        help="batch sizes (default 256 1024 4096, plus 65536 on GPU/TPU)")
    parser.add_argument("--k", type=int, default=5, help="stones in a row to win (default 5)")
    parser.add_argument("--rule", default="freestyle", choices=["freestyle", "standard"],
                        help="default freestyle")
    parser.add_argument("--repeats", type=count_argument(1), default=None,
                        help="timed calls per batch size (default 3; --quick: 1)")
    parser.add_argument("--numpy-seconds", type=float, default=None,
                        help="seconds of NumPy reference games per board size (default 3; "
                             "--quick: 0.5)")
    parser.add_argument("--seed", type=seed_argument, default=0,
                        help="random seed of the games (default 0)")
    add_out_argument(parser, "runs/bench_game.json")
    parser.add_argument("--quick", action="store_true",
                        help="a few seconds: 9x9, batch 256, one timed call (options given "
                             "explicitly still apply)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    fill_unset(args, QUICK if args.quick else {"sizes": list(DEFAULT_SIZES), "repeats": 3,
                                               "numpy_seconds": 3.0})
    for n in args.sizes:
        Gomoku(n, args.k, args.rule)  # a clear error before any timing
    if not 0 < args.numpy_seconds < float("inf"):  # (nan fails both)
        parser.error(f"--numpy-seconds must be a finite number above 0, got "
                     f"{args.numpy_seconds}")
    report = run(args.sizes, tuple(args.batches) if args.batches else None, args.k, args.rule,
                 args.repeats, args.numpy_seconds, args.seed, progress=not args.no_progress)
    return publish(report, format_report(report), args.out)


if __name__ == "__main__":
    run_script(main)
