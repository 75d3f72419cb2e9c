"""Experiment: does an agent find the forced wins the heuristic leaves it, and how often
does it get one?

Command (under a minute on a 2-core CPU for 40 games of a 9x9 agent at 400 simulations)::

    python -m experiments.missed_wins --agent experiments/results/az_9x9_cpu/final.gjx \\
        --games 40 --seed 11

The seed-000 heuristic only defends: it takes a win, blocks a four, blocks an open three
(at the block nearest the centre), else plays near the centre. Its answer to a threat is
therefore fixed, and a win against it needs a *forcing move*: a move that makes a four or
an open three, after which the heuristic's answer leaves the mover a five, or an open four
or a double four (a move with two winning cells) while the heuristic has no five of its
own. (Against a player that defends better such a move need not win; against the
heuristic it does.)

The agent plays ``--games`` games against the heuristic (colours alternating, one random
opening stone a pair, as the learner's evaluation). Then every position where the agent
was to move, and neither side could win at once, is searched for forcing moves
(`forcing_moves`). Reported: how many such positions had one and in how many of those the
agent played one, and per result (won / drawn / lost) the games in which a forcing move
was ever on the board. An agent that plays the forcing moves it has and still draws lacks
the build-up that makes them, not the tactics that use them.
"""

from __future__ import annotations

import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from experiments.common import add_json_argument, device_description, publish, run_script
from gomoku_jax import agents, arena, exported, tactics
from gomoku_jax.cli import ArgumentParser
from gomoku_jax.config import count_argument, seed_argument
from gomoku_jax.game import Gomoku, State

__all__ = ["analyse", "build_parser", "forcing_moves", "main", "run"]


@functools.partial(jax.jit, static_argnums=0)
def forcing_moves(env: Gomoku, state: State) -> jax.Array:
    """``[A]`` bool: the moves of the player to move that beat the heuristic by force
    within the player's next two moves (see the module docstring)."""
    me, k, rule = state.current_player, env.k, env.rule
    actions = jnp.arange(env.num_actions)
    heuristic = agents.heuristic_agent(env)

    def beats_heuristic(action):
        after = env.step(state, action)
        threat = (tactics.winning_moves(after.board, me, k, rule).any()
                  | tactics.open_three_blocks(after.board, me, k).any())
        # The heuristic answers a threat the same way whatever its key (the key only
        # picks among central cells when nothing is to be answered).
        answer = heuristic.policy(heuristic.params, jax.random.key(0), after)
        reply = env.step(after, answer)
        five = tactics.winning_moves(reply.board, me, k, rule).any()
        its_five = tactics.winning_moves(reply.board, 1 - me, k, rule).any()
        flat = reply.board.reshape(-1)

        def two_winning_cells(cell):
            board = flat.at[cell].set((me + 1).astype(flat.dtype)).reshape(reply.board.shape)
            return (flat[cell] == 0) & (tactics.winning_moves(board, me, k, rule).sum() >= 2)

        double = jax.vmap(two_winning_cells)(actions).any()
        return (state.legal_action_mask[action] & ~after.terminated & threat
                & ~reply.terminated & (five | (~its_five & double)))

    return jax.vmap(beats_heuristic)(actions)


def analyse(env: Gomoku, records: Sequence[arena.GameRecord], name: str) -> dict:
    """Count, over ``records``, the positions where ``name`` was to move and neither side
    could win at once, those among them with a forcing move, and those where ``name``
    played one; and per result the games that ever offered ``name`` a forcing move."""
    positions = offered = taken = 0
    by_result = {r: {"games": 0, "offered": 0} for r in ("won", "drawn", "lost")}
    for record in records:
        if name not in (record.black, record.white):
            raise ValueError(f"{name!r} played neither side of a game between "
                             f"{record.black!r} and {record.white!r}")
        me = 0 if record.black == name else 1
        state = env.init()
        game_offered = 0
        for i, move in enumerate(record.moves):
            if i >= record.opening and int(state.current_player) == me and not (
                bool(tactics.winning_moves(state.board, me, env.k, env.rule).any())
                or bool(tactics.winning_moves(state.board, 1 - me, env.k, env.rule).any())
            ):
                positions += 1
                forcing = np.asarray(forcing_moves(env, state))
                if forcing.any():
                    offered += 1
                    game_offered += 1
                    taken += int(forcing[move])
            state = env.step(state, jnp.int32(move))
        result = "drawn" if record.winner < 0 else ("won" if record.winner == me else "lost")
        by_result[result]["games"] += 1
        by_result[result]["offered"] += int(game_offered > 0)
    return {"positions": positions, "with_forcing_move": offered, "forcing_move_played": taken,
            "by_result": by_result}


def run(agent_path: str, games: int = 40, seed: int = 11, opening_stones: int = 1,
        simulations: int | None = None) -> dict:
    loaded = exported.load(agent_path, simulations=simulations, name="agent")
    env = loaded.env
    match = arena.play_match(env, loaded.agent, agents.heuristic_agent(env), games, seed=seed,
                             opening_stones=opening_stones, progress=True)
    if simulations is None:  # the file's search (None: a Q network, which plays without)
        simulations = (loaded.metadata.get("search") or {}).get("num_simulations")
    return {"device": device_description(), "agent": agent_path, "board": env.id,
            "simulations": simulations, "games": games, "seed": seed,
            "opening_stones": opening_stones,
            "score": match.score("agent"), **analyse(env, match.records, "agent")}


def report_text(report: dict) -> str:
    s = report["score"]
    lines = [
        f"{report['agent']}"
        + (f" at {report['simulations']} simulations" if report.get("simulations") else "")
        + f" against the heuristic ({report['board']}, seed {report['seed']}): "
        f"won {s['wins']}, lost {s['losses']}, drawn {s['draws']} of {s['games']}",
        f"positions to move with no immediate win either side: {report['positions']}; "
        f"with a forcing move: {report['with_forcing_move']}; "
        f"one played: {report['forcing_move_played']}",
    ]
    for result, row in report["by_result"].items():
        lines.append(f"{result}: {row['games']} games, {row['offered']} of them offered a "
                     "forcing move")
    return "\n".join(lines)


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python -m experiments.missed_wins",
                            description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", required=True, help="an exported agent (.gjx; required)")
    parser.add_argument("--games", type=count_argument(1), default=40,
                        help="games against the heuristic, colours alternating (default 40)")
    parser.add_argument("--seed", type=seed_argument, default=11,
                        help="random seed of the match (default 11)")
    parser.add_argument("--opening-stones", type=count_argument(0), default=1,
                        help="random stones near the centre before each pair of games "
                             "(default 1)")
    parser.add_argument("--simulations", type=count_argument(1), default=None,
                        help="play-time simulations (default: the file's)")
    add_json_argument(parser)
    return parser


def main(argv=None) -> dict:
    args = build_parser().parse_args(argv)
    report = run(args.agent, args.games, args.seed, args.opening_stones, args.simulations)
    return publish(report, report_text(report), args.json)


if __name__ == "__main__":
    run_script(main)
