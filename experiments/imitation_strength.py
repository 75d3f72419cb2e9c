"""Experiment: an imitation-trained 9x9 network against pure MCTS (seed 001 Table I).

Command (the records are generated first when fewer than ``--games`` exist; each
chunk of ``--chunk`` games is its own file, so an interrupted run keeps what it made;
``--generate-only`` stops there, e.g. to make the data in the background)::

    python -m experiments.imitation_strength --games 20000 --json experiments/results/imitation_9x9.json
    nice -n 19 python -m experiments.imitation_strength --games 20000 --workers 2 --generate-only

Steps: (1) GomokuBot (``gomokubot-D``, ``--depth``, default 2) plays itself from random
``--opening-stones-data`` openings into ``--records`` (reused: every ``*.jsonl.gz``
there counts, whoever made it; by default the dataset that comes with the repository,
``experiments/data/gomokubot2_9x9/``, made by this same step, so only what it lacks is
played); (2) the network of
``experiments/configs/imitation_9x9_cpu.json`` is trained on them
(`algorithms.imitation`, workdir ``runs/imitation_9x9/train``, resumed if it exists;
``--set key=value`` overrides the config); (3) its final network, searching
``--simulations`` PUCT simulations per move (argmax), plays ``--match-games`` games
against ``--opponent`` (default pure MCTS with 2,000 simulations), colours alternating,
pairs of games from the same random ``--opening-stones`` opening.

Target (seed 001, 15x15: 48 wins, 1 loss, 1 draw in 50 games): at least 90 wins in 100.
The JSON report names the device, the data (games, positions, generator settings), the
training (iterations, time, final losses) and the match (score, 95% Wilson interval,
seconds per move).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import glob
import os
import time
from pathlib import Path

from experiments.common import device_description, publish, run_script
from gomoku_jax.cli import ArgumentParser, nonempty_path, output_file
from gomoku_jax.config import count_argument, seed_argument

__all__ = ["main", "run"]

CONFIG = Path(__file__).parent / "configs" / "imitation_9x9_cpu.json"
# The dataset that comes with the repository (experiments/data/gomokubot2_9x9/README.md):
# games of gomokubot-2 only, from 4-stone openings, in files of 200.
DATA = Path(__file__).parent / "data" / "gomokubot2_9x9"
DATA_DEPTH = 2
DATA_OPENING_STONES = 4
DATA_CHUNK = 200


def _count_games(files) -> int:
    from gomoku_jax import records

    return sum(len(records.read_records(f)) for f in files)


def _games_in(records_dir: Path) -> int:
    """The games of the records files (``*.jsonl.gz``) in ``records_dir``."""
    return _count_games(sorted(glob.glob(str(records_dir / "*.jsonl.gz"))))


def generate(records_dir: Path, games: int, depth: int, opening_stones: int, chunk: int,
             workers: int) -> dict:
    """Top ``records_dir`` up to ``games`` games in chunks; returns what it holds."""
    from experiments import generate_records

    records_dir.mkdir(parents=True, exist_ok=True)
    seed = 10_000
    have = _games_in(records_dir)
    start = time.perf_counter()
    bot = f"gomokubot-{depth}"
    # one pool of workers for every chunk (a pool per chunk would start them again)
    pooled = have < games and workers > 1
    with (generate_records.WorkerPool(9, 5, "freestyle", bot, bot, workers) if pooled
          else contextlib.nullcontext()) as pool:
        while have < games:
            out = records_dir / f"{bot}_s{seed:05d}.jsonl.gz"
            if not out.exists():
                n = min(chunk, games - have)
                generate_records.main(["--size", "9", "--games", str(n), "--workers", str(workers),
                                       "--opening-stones", str(opening_stones), "--black", bot,
                                       "--white", bot, "--seed", str(seed), "--out", str(out),
                                       "--no-progress"], pool=pool)
                have += _count_games([out])
            seed += 1
    return {"games_available": have, "generation_seconds": time.perf_counter() - start}


def run(args) -> dict:
    import jax

    from algorithms import imitation
    from gomoku_jax import agents, arena, exported, training
    from gomoku_jax import config as cfglib
    from gomoku_jax.ratings import score_interval

    from gomoku_jax import io as gio

    records_dir = Path(args.records)
    if args.games:  # the games are written there: a folder, or one that can be made
        gio.check_folder(records_dir, "--records", "give the folder of the records files")
    if args.games and records_dir.resolve() == DATA.resolve():
        if args.depth != DATA_DEPTH:
            raise ValueError(
                f"--depth {args.depth}: the shipped dataset ({DATA}) holds games of "
                f"gomokubot-{DATA_DEPTH} only; give another --records folder for other games")
        if args.opening_stones_data != DATA_OPENING_STONES:
            raise ValueError(
                f"--opening-stones-data {args.opening_stones_data}: the shipped dataset "
                f"({DATA}) holds games from {DATA_OPENING_STONES}-stone openings only; give "
                "another --records folder for other games")
        if args.chunk != DATA_CHUNK:
            raise ValueError(
                f"--chunk {args.chunk}: the shipped dataset ({DATA}) is in files of "
                f"{DATA_CHUNK} games, one seed each; give another --records folder for "
                "other files")
    pattern = os.path.join(os.path.relpath(records_dir), "*.jsonl.gz")  # as data.paths reads it
    overrides = {"data.paths": [pattern], "eval.simulations": args.simulations,
                 "eval.final_games": 0,
                 **cfglib.parse_overrides(args.set or [])}  # --set has the last word
    # the config, its overrides, the opponent and the match's openings: refused before the
    # games and training
    cfg, _ = cfglib.load_file(imitation.ImitationConfig, args.config, overrides=overrides)
    opponent = agents.make(args.opponent, cfg.game.env())
    arena.check_opening_stones(cfg.game.env(), args.opening_stones, "--opening-stones")
    data = generate(records_dir, args.games, args.depth, args.opening_stones_data, args.chunk,
                    args.workers) if args.games else {}
    if args.generate_only:  # (--games 0 made none: the games there are counted)
        have = data["games_available"] if data else _games_in(records_dir)
        print(f"{records_dir}: {have} games")
        return data
    learner = imitation.make_learner(cfg)
    workdir = Path(args.workdir).resolve()  # orbax wants absolute checkpoint paths
    t0 = time.perf_counter()
    training.run(learner, workdir, progress=not args.no_progress)
    train_seconds = time.perf_counter() - t0
    if learner.data_summary is None:  # a finished run restored: read the data for the report
        learner.load_data()
    with (workdir / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    last = {k: float(v) for k, v in rows[-1].items() if v not in ("", None)}
    env = learner.env
    agent = exported.load_agent(workdir / "final.gjx", simulations=args.simulations,
                                name=f"imitation@{args.simulations}")
    t0 = time.perf_counter()
    match = arena.play_match(env, agent, opponent, args.match_games, seed=args.seed,
                             opening_stones=args.opening_stones, progress=not args.no_progress)
    score = match.score(agent.name)
    points = score["wins"] + 0.5 * score["draws"]
    lo, hi = score_interval(points, score["games"])
    summary = learner.data_summary
    from gomoku_jax import records

    made = []  # what made each file, from its header
    for f in summary["files"]:
        meta = records.read_header(f).get("metadata", {})
        made.append({"file": Path(f).name, **{k: meta[k] for k in (
            "black", "white", "games", "opening_stones", "seed") if k in meta}})
    report = {
        "device": device_description(),
        "board": env.id,
        "config": os.path.relpath(args.config),
        "overrides": overrides,
        "network": {"name": cfg.network.name, "options": dict(cfg.network.options)},
        "data": {"records": pattern, "files": len(summary["files"]),
                 "train_games": summary["train"]["games"],
                 "train_positions": summary["train"]["positions"],
                 "validation_games": summary["validation"]["games"],
                 "malformed": summary["malformed"], "made_by": made,
                 "target_games": args.games, **data},
        "training": {"iterations": int(last["iteration"]),
                     "steps_per_iteration": learner.steps_per_iteration,
                     "batch_size": cfg.train.batch_size,
                     "seconds_this_call": train_seconds,
                     "seconds_logged": sum(float(r["seconds"]) for r in rows),
                     "final": {k: last[k] for k in ("loss", "policy_loss", "value_loss",
                                                    "accuracy", "val_policy_loss",
                                                    "val_value_loss", "val_accuracy")
                               if k in last}},
        "match": {"agent": agent.name, "simulations": args.simulations,
                  "opponent": args.opponent, "opening_stones": args.opening_stones,
                  **score, "score": points / score["games"], "score_95": [lo, hi],
                  "seconds_per_move": match.seconds_per_move(agent.name),
                  "opponent_seconds_per_move": match.seconds_per_move(opponent.name),
                  "wall_seconds": time.perf_counter() - t0,
                  "timing": ("both agents are batched JAX policies: the match ran as one "
                             "lockstep program and the seconds per move are its time split "
                             "evenly" if match.lockstep else "each agent's own thinking time")},
        "target": "at least 90 wins in 100 games (seed 001: 48 of 50 on 15x15)",
    }
    m = report["match"]
    text = (f"{agent.name} vs {args.opponent} on {env.id} ({jax.devices()[0].platform}): "
            f"{m['wins']}-{m['losses']}-{m['draws']} in {m['games']} games, score "
            f"{m['score']:.3f} [{lo:.3f}, {hi:.3f}]; trained on "
            f"{report['data']['train_games']} games ({report['data']['train_positions']} "
            f"positions), {report['training']['iterations']} iterations")
    return publish(report, text, args.json)


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m experiments.imitation_strength",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--records", default=str(DATA),
                   help="folder of records files (*.jsonl.gz), reused and topped up "
                        "(default: the dataset that comes with the repository)")
    p.add_argument("--games", type=count_argument(0), default=20_000,
                   help="games the folder must hold before training (0: use what is there)")
    p.add_argument("--depth", type=count_argument(1), default=DATA_DEPTH,
                   help=f"GomokuBot depth for new games (the shipped dataset's: {DATA_DEPTH})")
    p.add_argument("--opening-stones-data", type=count_argument(0),
                   default=DATA_OPENING_STONES,
                   help="random opening stones of generated games (the shipped dataset's: "
                        f"{DATA_OPENING_STONES})")
    p.add_argument("--chunk", type=count_argument(1), default=DATA_CHUNK,
                   help=f"games per generated file (the shipped dataset's: {DATA_CHUNK})")
    p.add_argument("--workers", type=count_argument(1), default=1, help="generator processes")
    p.add_argument("--generate-only", action="store_true",
                   help="stop once the folder holds --games games (no training, no match)")
    p.add_argument("--config", type=nonempty_path, default=CONFIG, help="the imitation config")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="config override")
    p.add_argument("--workdir", default="runs/imitation_9x9/train", help="training workdir")
    p.add_argument("--simulations", type=count_argument(1), default=200,
                   help="search simulations per move")
    p.add_argument("--opponent", default="pure-mcts-2000", help="the opponent's agent name")
    p.add_argument("--match-games", type=count_argument(1), default=100,
                   help="games of the match")
    p.add_argument("--opening-stones", type=count_argument(0), default=1,
                   help="random opening stones")
    p.add_argument("--seed", type=seed_argument, default=0, help="match seed")
    p.add_argument("--json", type=output_file, default=None, help="write the report here")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    return p


def main(argv: list[str] | None = None) -> int:
    """The command line; a ValueError for settings that do not fit together (run as a
    script: one line, status 2)."""
    run(build_parser().parse_args(argv))
    return 0


if __name__ == "__main__":
    run_script(main)
