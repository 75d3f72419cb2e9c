"""Experiment: seed 004's evaluation tables (5.1 to 5.3) with this framework's agents.

Command (about 45 seconds on a 2-core CPU: 47 s on an AMD EPYC, pinned to one core)::

    python -m experiments.seed004_tables --json experiments/results/seed004_tables.json

* 3x3 tic-tac-toe, 100 games each (colours alternating) against the perfect player
  (`minimax`, exact alpha-beta): the tabular value learner (3,000 self-play games), linear TD
  (3,000 games), Shared MCTS (30 self-play games on one shared tree, 200 iterations a
  move in training and at play, still writing to the tree during the match), pure MCTS
  with 1,000 simulations, the report's heuristic alpha-beta at depth 9 ("Heuristic depth
  10" in the report: a full-depth search on 3x3) and random as a control.
* 5x5, k = 4, 10 games against the report's heuristic alpha-beta (section 4.3,
  `alphabeta004-D`) at depth 4: linear TD (1,000 games) and pure MCTS 1,000.
* 10x10, k = 5, 10 games against it at depth 3: linear TD (1,000 games) and pure MCTS
  1,000.

Reported per row: win / loss / draw rates, the score (a draw counts half) with its 95%
Wilson interval, seconds a move, training seconds. Seed 004's
own figures are in its tables; on 3x3 every sound player draws against the perfect one.
"""

from __future__ import annotations

import json
import time

from algorithms.classical import LinearTDLearner, TabularValueLearner
from algorithms.shared_mcts import SharedMCTS
from experiments.common import add_json_argument, device_description, publish, run_script
from gomoku_jax import agents, arena
from gomoku_jax.cli import ArgumentParser
from gomoku_jax.config import count_argument, seed_argument
from gomoku_jax.game import Gomoku
from gomoku_jax.ratings import score_interval


def _row(match: arena.MatchResult, name: str, train_s: float | None) -> dict:
    score = match.score(name)
    return {"agent": name, **_rates(score["wins"], score["losses"], score["draws"]),
            "seconds_per_move": match.seconds_per_move(name), "training_seconds": train_s}


def _rates(wins: int, losses: int, draws: int) -> dict:
    """Rates of a row, its score (a draw counts half) and the score's 95% Wilson interval."""
    n = wins + losses + draws
    points = wins + draws / 2
    low, high = score_interval(points, n)
    return {"games": n, "win": wins / n, "loss": losses / n, "draw": draws / n,
            "score": points / n, "score_interval": [low, high]}


def _td(env: Gomoku, episodes: int, seed: int):
    learner = LinearTDLearner(env)
    start = time.perf_counter()
    learner.train(episodes, seed=seed)
    return learner.agent(), time.perf_counter() - start


def run(games_3x3: int = 100, games_big: int = 10, seed: int = 0) -> dict:
    tables = {}

    env = Gomoku(3, 3)
    perfect = agents.make("minimax", env)
    tabular = TabularValueLearner(env)
    start = time.perf_counter()
    tabular.train(3000, seed=seed)
    tab_s = time.perf_counter() - start
    td, td_s = _td(env, 3000, seed)
    shared = SharedMCTS(env, iterations=200)
    start = time.perf_counter()
    shared.train(30, seed=seed)
    shared_s = time.perf_counter() - start
    entries = [(tabular.agent("tabular-value"), tab_s), (td, td_s),
               (shared.agent("shared-mcts-200"), shared_s),
               (agents.make("pure-mcts-1000", env), None),
               (agents.make("alphabeta004-9", env), None), (agents.make("random", env), None)]
    tables["3x3 vs perfect alpha-beta"] = [
        _row(arena.play_match(env, agent, perfect, games_3x3, seed=seed), agent.name, t)
        for agent, t in entries]
    print(json.dumps(tables["3x3 vs perfect alpha-beta"], indent=1), flush=True)

    for (size, k, depth) in ((5, 4, 4), (10, 5, 3)):
        env = Gomoku(size, k)
        opponent = agents.make(f"alphabeta004-{depth}", env)
        td, td_s = _td(env, 1000, seed)
        rows = []
        for agent, t in ((td, td_s), (agents.make("pure-mcts-1000", env), None)):
            rows.append(_row(arena.play_match(env, agent, opponent, games_big, seed=seed,
                                              opening_stones=2), agent.name, t))
        key = f"{size}x{size} k={k} vs alpha-beta depth {depth}"
        tables[key] = rows
        print(key, json.dumps(rows, indent=1), flush=True)
    return {"device": device_description(), "seed": seed, "tables": tables}


def format_report(report: dict) -> str:
    lines = [f"Seed 004's tables, device: {report['device']}"]
    for title, rows in report["tables"].items():
        lines += ["", title, f"{'agent':>16} {'win':>6} {'loss':>6} {'draw':>6} "
                  f"{'score (95%)':>17} {'s/move':>8} {'train s':>8}"]
        for r in rows:
            train = "" if r["training_seconds"] is None else f"{r['training_seconds']:.1f}"
            low, high = r["score_interval"]
            score = f"{r['score']:.2f} ({low:.2f}-{high:.2f})"
            lines.append(f"{r['agent']:>16} {100 * r['win']:>5.0f}% {100 * r['loss']:>5.0f}% "
                         f"{100 * r['draw']:>5.0f}% {score:>17} {r['seconds_per_move']:>8.3f} "
                         f"{train:>8}")
    return "\n".join(lines)


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python -m experiments.seed004_tables",
                            description=__doc__.split("\n\n")[0])
    parser.add_argument("--games-3x3", type=count_argument(1), default=100,
                        help="3x3 games of each agent against the perfect player, colours "
                             "alternating (default 100)")
    parser.add_argument("--games-big", type=count_argument(1), default=10,
                        help="5x5 and 10x10 games of each agent against alpha-beta, colours "
                             "alternating (default 10)")
    parser.add_argument("--seed", type=seed_argument, default=0,
                        help="random seed of the learners' training and of the matches "
                             "(default 0)")
    add_json_argument(parser)
    return parser


def main(argv=None) -> dict:
    args = build_parser().parse_args(argv)
    report = run(args.games_3x3, args.games_big, args.seed)
    return publish(report, format_report(report), args.json)


if __name__ == "__main__":
    run_script(main)
