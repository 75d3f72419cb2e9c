"""Experiment: how strong is seed 001's rule-based GomokuBot (alpha-beta on pattern scores)?

Command (about 10 minutes on a 2-core CPU; ``--opponents heuristic --games 20`` for a
quick check)::

    python -m experiments.gomokubot_strength --json experiments/results/gomokubot_9x9.json

On 9x9 (k = 5, freestyle) GomokuBot plays 100 games against the seed-000 heuristic and 100
against pure MCTS with 2000 simulations, colours alternating, each pair of games from the
same random 2-stone opening. Reported: wins / losses / draws, the score with its 95% Wilson
interval, wins by colour, and the seconds a move each side used. Then GomokuBot's time
per move on 15x15 over a few games against the heuristic, mean and longest (it must
answer within 2 s).

Targets: at least 90% against both opponents on 9x9 (seed 001 reports 97% on 15x15),
at most 2 s a move on 15x15.
"""

from __future__ import annotations

import json
import time

from experiments.common import add_json_argument, device_description, publish, run_script
from gomoku_jax import agents, arena
from gomoku_jax.cli import ArgumentParser
from gomoku_jax.config import count_argument, seed_argument
from gomoku_jax.game import Gomoku
from gomoku_jax.ratings import score_interval


def _summary(match: arena.MatchResult, name: str) -> dict:
    score = match.score(name)
    points = score["wins"] + 0.5 * score["draws"]
    lo, hi = score_interval(points, score["games"])
    opponent = [n for n in match.names if n != name][0]
    return {**score, "score": points / score["games"], "score_95": [lo, hi],
            "seconds_per_move": match.seconds_per_move(name),
            "opponent_seconds_per_move": match.seconds_per_move(opponent)}


class _Timed(agents.Agent):
    """An agent that also keeps the longest time it took for one move."""

    def __init__(self, inner: agents.Agent):
        self.inner, self.name, self.longest = inner, inner.name, 0.0

    def act(self, state, key, deadline=None) -> int:
        start = time.perf_counter()
        try:
            return self.inner.act(state, key, deadline)
        finally:
            self.longest = max(self.longest, time.perf_counter() - start)


def run(games: int = 100, mcts_simulations: int = 2000, timing_games: int = 4, seed: int = 0,
        opponents: tuple[str, ...] = ("heuristic", "pure-mcts")) -> dict:
    unknown = set(opponents) - {"heuristic", "pure-mcts"}
    if unknown:
        raise ValueError(f"opponents must be among heuristic, pure-mcts; got {sorted(unknown)}")
    if not opponents:
        raise ValueError("opponents names no opponent: give heuristic, pure-mcts or both")
    env = Gomoku(9, 5)
    bot = agents.make("gomokubot", env)
    results = {"device": device_description(), "board": env.id, "games": games,
               "agent": bot.name, "opening_stones": 2, "seed": seed, "matches": {}}
    chosen = []
    if "heuristic" in opponents:
        chosen.append(agents.heuristic_agent(env))
    if "pure-mcts" in opponents:
        chosen.append(agents.make(f"pure-mcts-{mcts_simulations}", env))
    for opponent in chosen:
        start = time.perf_counter()
        match = arena.play_match(env, bot, opponent, games, seed=seed, opening_stones=2,
                                 progress=True)
        results["matches"][opponent.name] = _summary(match, bot.name) | {
            "wall_seconds": time.perf_counter() - start}
        print(opponent.name, json.dumps(results["matches"][opponent.name]), flush=True)
    big = Gomoku(15, 5)
    bot15 = _Timed(agents.make("gomokubot", big))
    match = arena.play_match(big, bot15, agents.heuristic_agent(big), timing_games, seed=seed,
                             opening_stones=2)
    results["15x15_timing"] = {
        "games": timing_games,
        "seconds_per_move": match.seconds_per_move(bot15.name),
        "max_seconds_per_move": bot15.longest,
        "score": match.score(bot15.name),
    }
    return results


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python -m experiments.gomokubot_strength",
                            description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=count_argument(1), default=100,
                        help="9x9 games against each opponent, colours alternating "
                             "(default 100)")
    parser.add_argument("--mcts-simulations", type=count_argument(1), default=2000,
                        help="simulations per move of the pure MCTS opponent (default 2000)")
    parser.add_argument("--timing-games", type=count_argument(1), default=4,
                        help="15x15 games against the heuristic that time GomokuBot's moves "
                             "(default 4)")
    parser.add_argument("--seed", type=seed_argument, default=0,
                        help="random seed of the matches (default 0)")
    parser.add_argument("--opponents", default="heuristic,pure-mcts",
                        help="comma-separated subset of heuristic,pure-mcts (default both; "
                             "one for a quick check)")
    add_json_argument(parser)
    return parser


def main(argv=None) -> dict:
    args = build_parser().parse_args(argv)
    report = run(args.games, args.mcts_simulations, args.timing_games, args.seed,
                 tuple(x.strip() for x in args.opponents.split(",") if x.strip()))
    return publish(report, json.dumps(report, indent=2), args.json)


if __name__ == "__main__":
    run_script(main)
