"""Benchmark: pure MCTS with random rollouts, JAX vs a plain Python/NumPy search.

Command (about a minute on a 2-core CPU)::

    gomoku-jax bench mcts                       # 9x9, 1000 simulations, batch 64
    gomoku-jax bench mcts --out experiments/results/bench_mcts_cpu.json
    gomoku-jax bench mcts --quick               # a few seconds

Measures, on positions from the opening (the empty board and a few random stones):

* seconds for one move of one game with ``--simulations`` (jitted `algorithms.pure_mcts.search`);
* simulations per second summed over a batch of ``--batch`` games searching in lockstep;
* simulations per second of `gomoku_jax.reference.NumpyPureMCTS`, a plain UCT search in
  Python and NumPy (node objects, move-by-move random rollouts), timed in the same run;
  the ratio is JAX / NumPy.

Targets on the 2-core CPU: at most 0.5 s a move at 1000 simulations for one game, and at
least 20,000 simulations/s over a batch of 64 (see the README's performance table).
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from algorithms import pure_mcts
from experiments.bench_game import format_ratio
from experiments.common import (add_out_argument, device_description, fill_unset, publish,
                                run_script)
from gomoku_jax.cli import ArgumentParser
from gomoku_jax.config import count_argument, seed_argument
from gomoku_jax.game import Gomoku
from gomoku_jax.reference import NumpyGomoku, NumpyPureMCTS


def _positions(env: Gomoku, count: int, seed: int) -> list:
    """The empty board and openings of 2 to 6 random stones near the centre (at most
    2 (k - 1), so that no opening is already won)."""
    rng = np.random.default_rng(seed)
    out = [[]]
    near = range(max(env.size // 2 - 2, 0), min(env.size // 2 + 3, env.size))  # on the board
    centre = [r * env.size + c for r in near for c in near]
    while len(out) < count:
        stones = min(2 * len(out) % 6 + 2, 2 * (env.k - 1))
        out.append([int(a) for a in rng.choice(centre, size=stones, replace=False)])
    return out


def _state(env: Gomoku, moves: list):
    return env.play_moves([divmod(a, env.size) for a in moves])


def run(size=9, k=5, simulations=1000, batch=64, positions=4, numpy_simulations=200,
        seed=0, progress=True) -> dict:
    env = Gomoku(size, k)
    config = pure_mcts.MCTSConfig(simulations=simulations)
    single = jax.jit(lambda key, s: pure_mcts.search(env, config, key, s).action)
    batched = jax.jit(jax.vmap(lambda key, s: pure_mcts.search(env, config, key, s).action))
    openings = _positions(env, positions, seed)
    bar = tqdm(total=3 * len(openings), desc="bench mcts", disable=not progress)
    # ``seed`` picks the openings, the NumPy reference's rollouts and the JAX searches' keys
    single_key, batch_key = jax.random.split(jax.random.key(seed))

    start = time.perf_counter()
    single(single_key, env.init()).block_until_ready()
    compile_single = time.perf_counter() - start
    move_times = []
    for i, moves in enumerate(openings):
        state = _state(env, moves)
        start = time.perf_counter()
        int(single(jax.random.fold_in(single_key, i + 1), state))
        move_times.append(time.perf_counter() - start)
        bar.update()

    start = time.perf_counter()
    stacked = jax.tree.map(lambda x: jnp.stack([x] * batch), env.init())
    batched(jax.random.split(batch_key, batch), stacked).block_until_ready()
    compile_batch = time.perf_counter() - start
    batch_seconds = 0.0
    for i, moves in enumerate(openings):
        stacked = jax.tree.map(lambda x: jnp.stack([x] * batch), _state(env, moves))
        start = time.perf_counter()
        batched(jax.random.split(jax.random.fold_in(batch_key, i + 1), batch),
                stacked).block_until_ready()
        batch_seconds += time.perf_counter() - start
        bar.update()

    numpy_seconds = 0.0
    for i, moves in enumerate(openings):
        game = NumpyGomoku(size, k)
        for a in moves:
            game.step(a)
        search = NumpyPureMCTS(size, k, simulations=numpy_simulations, seed=seed + i)
        start = time.perf_counter()
        search.search(game)
        numpy_seconds += time.perf_counter() - start
        bar.update()
    bar.close()

    single_rate = simulations / np.mean(move_times)
    batch_rate = simulations * batch * len(openings) / batch_seconds
    numpy_rate = numpy_simulations * len(openings) / numpy_seconds
    return {
        "benchmark": "pure MCTS, random rollouts",
        "device": device_description(),
        "board": f"{size}x{size}, k={k}",
        "simulations": simulations,
        "positions": len(openings),
        "seed": seed,
        "single_game": {"seconds_per_move": float(np.mean(move_times)),
                        "max_seconds_per_move": float(np.max(move_times)),
                        "simulations_per_s": single_rate, "compile_s": compile_single},
        "batch": {"games": batch, "simulations_per_s": batch_rate, "compile_s": compile_batch},
        "numpy_reference": {"simulations": numpy_simulations, "simulations_per_s": numpy_rate},
        "ratio_single": single_rate / numpy_rate,
        "ratio_batch": batch_rate / numpy_rate,
    }


def format_report(r: dict) -> str:
    s, b, n = r["single_game"], r["batch"], r["numpy_reference"]
    return "\n".join([
        f"Pure MCTS on {r['board']}, {r['simulations']} simulations a move, device: {r['device']}",
        f"  one game      : {s['seconds_per_move']:.3f} s a move (max {s['max_seconds_per_move']:.3f}), "
        f"{s['simulations_per_s']:,.0f} sims/s  = {format_ratio(r['ratio_single'])} NumPy",
        f"  batch of {b['games']:<4} : {b['simulations_per_s']:,.0f} sims/s summed  = "
        f"{format_ratio(r['ratio_batch'])} NumPy",
        f"  NumPy UCT     : {n['simulations_per_s']:,.0f} sims/s (plain Python/NumPy, same run)",
    ])


DEFAULTS = {"simulations": 1000, "batch": 64, "positions": 4, "numpy_simulations": 200}
QUICK = {"simulations": 100, "batch": 8, "positions": 2, "numpy_simulations": 50}


def main(argv=None) -> dict:
    parser = ArgumentParser(prog="gomoku-jax bench mcts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=9, help="board side (default 9)")
    parser.add_argument("--k", type=int, default=5, help="stones in a row to win (default 5)")
    parser.add_argument("--simulations", type=count_argument(1), default=None,
                        help="simulations a move (default 1000; --quick: 100)")
    parser.add_argument("--batch", type=count_argument(1), default=None,
                        help="games searching in lockstep (default 64; --quick: 8)")
    parser.add_argument("--positions", type=count_argument(1), default=None,
                        help="opening positions timed: the empty board and random stones "
                             "(default 4; --quick: 2)")
    parser.add_argument("--numpy-simulations", type=count_argument(1), default=None,
                        help="simulations a move for the slower NumPy reference (default 200; "
                             "--quick: 50)")
    parser.add_argument("--seed", type=seed_argument, default=0,
                        help="random seed (default 0)")
    add_out_argument(parser, "experiments/results/bench_mcts_cpu.json")
    parser.add_argument("--quick", action="store_true",
                        help="a few seconds: smaller search, batch and reference (options given "
                             "explicitly still apply)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    fill_unset(args, QUICK if args.quick else DEFAULTS)
    Gomoku(args.size, args.k)  # a clear error before any timing
    report = run(args.size, args.k, args.simulations, args.batch, args.positions,
                 args.numpy_simulations, args.seed, progress=not args.no_progress)
    return publish(report, format_report(report), args.out)


if __name__ == "__main__":
    run_script(main)
