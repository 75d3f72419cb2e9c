"""The README's pictures of the default experiment's recorded run.

Run (from the repository root; 2 to 7 minutes on an idle 2-core CPU, most of it the round
robin)::

    python -m experiments.figures

From ``experiments/results/az_9x9_cpu/`` (the recorded CPU run of
``gomoku-jax train --config experiments/configs/az_9x9_cpu.json``) it draws

* ``training_curves.png``: the losses, the explained variance of the value head, the
  policy entropy and the evaluation scores against the heuristic and pure MCTS 1000 over
  the iterations (from ``metrics.csv`` and the final ``report.json``), and
* a round robin between the run's ``final.gjx`` and the baselines (random, heuristic,
  pure MCTS 1000, GomokuBot): ``--games`` games per pairing (20), colours alternating,
  ``--opening-stones`` random stones near the centre before each pair of games (2), with
  the machinery of ``gomoku-jax tournament``: ``tournament.json``, ``tournament.md`` and
  ``heatmap.png`` in the same folder.

``--skip-tournament`` only redraws the curves. ``--run`` names another run's folder: an
AlphaZero run's (``gomoku-jax train`` writes its ``metrics.csv`` and ``report.json``); a
DQN, imitation or pipeline run logs other columns, and is refused before anything is drawn
or played; so is, unless ``--skip-tournament``, a run without a ``final.gjx`` that loads, or
``--opening-stones`` its game cannot take.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import time
from pathlib import Path

from gomoku_jax import io as gio

RUN = Path(__file__).parent / "results" / "az_9x9_cpu"
OPPONENTS = ("random", "heuristic", "pure-mcts-1000", "gomokubot")

__all__ = ["CURVE_COLUMNS", "OPPONENTS", "RUN", "check_curve_columns", "check_tournament",
           "evaluation_points", "main", "tournament", "training_curves"]


def _read_metrics(path: Path) -> dict[str, list[float]]:
    """metrics.csv as columns of floats (NaN where a row has no value)."""
    try:
        with path.open(encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    except (UnicodeDecodeError, csv.Error) as error:  # named, not a bare codec message
        raise ValueError(f"{path} is unreadable ({gio.brief(error)}); {_REWRITE}") from None
    if not rows:
        raise ValueError(f"{path} holds no rows")
    columns: dict[str, list[float]] = {}
    for name in rows[0]:
        values = []
        for row in rows:
            cell = row.get(name, "")
            try:
                values.append(float(cell))
            except (TypeError, ValueError):
                values.append(float("nan"))
        columns[name] = values
    return columns


# The metrics.csv columns the training curves draw: those an AlphaZero run logs.
CURVE_COLUMNS = ("iteration", "loss", "policy_loss", "value_loss", "explained_variance",
                 "entropy", "game_length")


def _stored_config(run: Path) -> dict:
    """The run's ``config.json`` (`gomoku_jax.training.run` writes it); {} when it is
    missing, unreadable or no object."""
    try:
        return gio.read_json_object(run / "config.json", "")
    except gio.CheckpointError:
        return {}


def _algorithm(run: Path) -> str | None:
    """The algorithm the run's ``config.json`` names, else None."""
    algorithm = _stored_config(run).get("algorithm")
    return algorithm if isinstance(algorithm, str) and algorithm else None


def check_curve_columns(run: Path, metrics: dict) -> None:
    """ValueError unless ``metrics`` (the run's ``metrics.csv``) has every column of
    `CURVE_COLUMNS`: a DQN or imitation run logs others. It names the run's folder, its
    algorithm (from its ``config.json``) and the columns it lacks."""
    missing = [name for name in CURVE_COLUMNS if name not in metrics]
    if not missing:
        return
    algorithm = _algorithm(run)
    if algorithm is None:
        holds = "a run"
    else:
        article = "an" if algorithm[0].lower() in "aeiou" else "a"
        holds = f"{article} {algorithm} run (its config.json says so)"
    raise ValueError(
        f"{run} holds {holds}, whose metrics.csv lacks {', '.join(missing)}: figures draws "
        "an AlphaZero run's training curves (a run of gomoku-jax train with an alphazero "
        "config, such as experiments/configs/az_9x9_cpu.json)")


def evaluation_points(metrics: dict, report: dict) -> dict[str, list[tuple[int, float]]]:
    """Each opponent's evaluation scores as ``(iteration, score)``: the periodic ones
    (``metrics.csv``'s ``eval_<name>`` columns), then the final one of ``report.json``,
    which a run without periodic evaluations has alone. Opponents with neither are left out."""
    final_it = int(report["iterations"])
    finals = report.get("evaluation", {})
    periodic = [c.removeprefix("eval_") for c in metrics if c.startswith("eval_")]
    out = {}
    for name in dict.fromkeys([*finals, *periodic]):
        column = metrics.get(f"eval_{name}")
        points = [] if column is None else [
            (int(i), float(s)) for i, s in zip(metrics["iteration"], column) if math.isfinite(s)]
        final = finals.get(name)
        if final is not None:
            points.append((final_it, float(final["score"])))
        if points:
            out[name] = points
    return out


def training_curves(run: Path = RUN, out: Path | None = None,
                    device: str | None = None, figure=None) -> Path:
    """Draw the run's training curves into ``out`` (default ``run/training_curves.png``),
    titled with ``device`` (default: the training machine the run's report names, else this
    machine, as "drawn on ..."); returns ``out``. ``figure``: the run's
    `training_curves_figure`, when it is made already."""
    out = Path(out) if out is not None else Path(run) / "training_curves.png"
    figure = training_curves_figure(run, device) if figure is None else figure
    figure.savefig(out, dpi=110)
    return out


def check_run(run: Path) -> None:
    """ValueError unless ``run`` is a training run's folder: it exists and holds the
    ``metrics.csv`` and ``report.json`` that ``gomoku-jax train`` writes there."""
    if not run.is_dir():
        raise ValueError(f"{run}: {'not a folder' if run.exists() else 'no such folder'}; "
                         "give the folder of a training run (--run)")
    missing = [name for name in ("metrics.csv", "report.json") if not (run / name).is_file()]
    if missing:
        raise ValueError(f"{run} holds no {' and no '.join(missing)}: not the folder of a "
                         "finished training run (gomoku-jax train writes them there)")


_REWRITE = "it is a file gomoku-jax train writes: run the same train command to finish the run"


def _read_report(run: Path) -> dict:
    """The run's ``report.json``; a ValueError naming it when it is unreadable, not an
    object or without its iteration count."""
    path = run / "report.json"
    report = gio.read_json_object(path, _REWRITE)
    count = report.get("iterations")
    if isinstance(count, bool) or not isinstance(count, int):
        raise ValueError(f"{path} has no iteration count ('iterations': {count!r}): not the "
                         f"report of a finished training run; {_REWRITE}")
    return report


def _game_words(run: Path) -> str:
    """", 9x9 five-in-a-row" (", 15x15 five-in-a-row, standard rule") from the game the
    run's ``config.json`` holds; "" when it holds none that reads so."""
    game = _stored_config(run).get("game")
    if not isinstance(game, dict):
        return ""
    size, k, rule = game.get("size"), game.get("k", 5), game.get("rule", "freestyle")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (size, k)):
        return ""
    row = "five" if k == 5 else str(k)
    words = f", {size}x{size} {row}-in-a-row"
    return words if rule == "freestyle" else f"{words}, {rule} rule"


def training_curves_figure(run: Path = RUN, device: str | None = None):
    """The matplotlib figure `training_curves` saves: a ``matplotlib.figure.Figure`` that
    pyplot does not hold (nothing to close, no backend chosen; a notebook shows it)."""
    import numpy as np
    from matplotlib.figure import Figure

    run = Path(run)
    check_run(run)
    m = _read_metrics(run / "metrics.csv")
    check_curve_columns(run, m)  # before report.json: a DQN run has one too
    report = _read_report(run)
    if device is None:  # the training machine, which a run's report records; older ones do not
        from experiments.common import device_description

        device = report.get("device") or f"drawn on {device_description()}"
    it = np.asarray(m["iteration"])

    def smooth(values, width=5):
        values = np.asarray(values, float)
        kernel = np.ones(width) / width
        padded = np.pad(values, (width // 2, width - 1 - width // 2), mode="edge")
        return np.convolve(padded, kernel, mode="valid")

    fig = Figure(figsize=(11, 7.5))
    axes = fig.subplots(2, 2)
    ax = axes[0, 0]
    for name, colour in (("loss", "#222222"), ("policy_loss", "#1f5fd6"),
                         ("value_loss", "#e0352b")):
        ax.plot(it, m[name], color=colour, alpha=0.25, lw=1)
        ax.plot(it, smooth(m[name]), color=colour, lw=1.8, label=name.replace("_", " "))
    ax.set_title("losses (thin: per iteration, thick: 5-iteration mean)")
    ax.set_xlabel("iteration")
    ax.legend()
    ax.grid(alpha=0.3)

    ax = axes[0, 1]
    ax.plot(it, m["explained_variance"], color="#8a3ffc", alpha=0.3, lw=1)
    ax.plot(it, smooth(m["explained_variance"]), color="#8a3ffc", lw=1.8,
            label="explained variance of the value head")
    ax.axhline(0, color="#888888", lw=0.8)
    title = "explained variance of the value head"
    sparring = np.asarray(m.get("opponent_games", [0.0]), float)
    if np.nansum(sparring) > 0:  # a run with a sparring partner (selfplay.opponent)
        won = np.asarray(m["opponent_wins"], float)
        # the share over 5 iterations' finished sparring games, not a mean of shares
        share = smooth(won) / np.maximum(smooth(sparring), 1e-9)
        ax.plot(it, share, color="#007d79", lw=1.8, label="sparring games won by the learner")
        ax.legend(loc="lower right")
        title = "value head and sparring games (5-iteration means)"
    ax.set_title(title)
    ax.set_xlabel("iteration")
    ax.grid(alpha=0.3)

    ax = axes[1, 0]
    ax.plot(it, m["entropy"], color="#198038", alpha=0.3, lw=1)
    ax.plot(it, smooth(m["entropy"]), color="#198038", lw=1.8)
    ax.set_ylabel("policy entropy (nats)", color="#198038")
    ax.set_xlabel("iteration")
    ax.grid(alpha=0.3)
    twin = ax.twinx()
    twin.plot(it, m["game_length"], color="#b28600", alpha=0.3, lw=1)
    twin.plot(it, smooth(m["game_length"]), color="#b28600", lw=1.8)
    twin.set_ylabel("self-play game length (moves)", color="#b28600")
    ax.set_title("policy entropy and self-play game length")

    ax = axes[1, 1]
    final_it = int(report["iterations"])
    colours = itertools.cycle(("#e0352b", "#1f5fd6", "#198038", "#8a3ffc"))
    finals = report.get("evaluation", {})
    scores = evaluation_points(m, report)
    for (name, points), colour in zip(scores.items(), colours):
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="o", color=colour, label=f"vs {name}")
        final = finals.get(name)
        if final is not None:
            low, high = final["interval"]
            ax.errorbar([final_it], [final["score"]], yerr=[[final["score"] - low],
                        [high - final["score"]]], color=colour, capsize=4)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlim(0, final_it * 1.05 + 1)
    counts = {v.get("games") for v in finals.values()}
    final_games = f"{counts.pop()} games" if len(counts) == 1 and None not in counts \
        else "its games"
    periodic = ""
    if any(c.startswith("eval_") for c in m):
        config = run / "config.json"
        stored = gio.read_json_object(config, _REWRITE) if config.is_file() else {}
        games = stored.get("eval", {}).get("games") if isinstance(stored.get("eval"),
                                                                   dict) else None
        periodic = f"periodic: {games} games each; " if games else "periodic and final; "
    last = (f"the final: {final_games}, 95% CI" if finals else
            "no final evaluation")  # eval.final_games 0
    ax.set_title(f"evaluation score (win 1, draw 1/2)\n{periodic}{last}")
    ax.set_xlabel("iteration")
    if scores:
        ax.legend(loc="lower right")
    ax.grid(alpha=0.3)

    suffix = f" ({device})" if device else ""
    fig.suptitle(f"AlphaZero{_game_words(run)}: the run in {run.name}/{suffix}")
    fig.tight_layout()
    return fig


def check_tournament(run: Path, opening_stones: int) -> None:
    """ValueError unless `tournament` can start: the run's ``final.gjx`` loads, and
    ``opening_stones`` fit its game (``--opening-stones``)."""
    from gomoku_jax import arena, exported

    _, env, _, _ = exported.load_network(Path(run) / "final.gjx")
    arena.check_opening_stones(env, opening_stones, "--opening-stones")


def tournament(run: Path = RUN, games: int = 20, opening_stones: int = 2, seed: int = 0,
               opponents=OPPONENTS, progress: bool = True) -> dict:
    """The round robin of ``run/final.gjx`` against ``opponents``; writes the reports."""
    from gomoku_jax import agents, arena, exported
    from experiments.common import device_description, repository_path

    run = Path(run)
    loaded = exported.load(run / "final.gjx", name=f"{run.name} final")
    env = loaded.env
    players = [loaded.agent] + [agents.make(name, env) for name in opponents]
    start = time.perf_counter()
    result = arena.round_robin(env, players, games, seed=seed, opening_stones=opening_stones,
                               progress=progress)
    report = result.report()
    report["config"] = {
        "game": {"size": env.size, "k": env.k, "rule": env.rule},
        "agents": [repository_path(run / "final.gjx")] + list(opponents),
        "games_per_pair": games, "opening_stones": opening_stones, "seed": seed}
    report["device"] = device_description()
    report["wall_seconds"] = round(time.perf_counter() - start, 1)
    report["command"] = "python -m experiments.figures"
    markdown = result.to_markdown(report)
    (run / "tournament.json").write_text(json.dumps(report, indent=2) + "\n")
    (run / "tournament.md").write_text(
        f"# Round robin: the final.gjx of {run.name}/ and the baselines\n\n"
        f"`python -m experiments.figures` on {report['device']}: {games} games per pairing, "
        f"colours alternating, {opening_stones} random opening stones, seed {seed}; "
        f"{report['wall_seconds']} s.\n\n{markdown}\n")
    arena.heatmap(report, run / "heatmap.png",
                  title=f"{env.id}: {report['colours']['games']} games, {games} per pairing")
    print(markdown)
    return report


def main(argv: list[str] | None = None) -> int:
    from gomoku_jax.cli import ArgumentParser
    from gomoku_jax.config import count_argument, seed_argument

    parser = ArgumentParser(prog="python -m experiments.figures", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, default=RUN, help="the recorded run's folder")
    parser.add_argument("--games", type=count_argument(1), default=20,
                        help="games per pairing (20)")
    parser.add_argument("--opening-stones", type=count_argument(0), default=2,
                        help="random opening stones before each pair of games (2)")
    parser.add_argument("--seed", type=seed_argument, default=0, help="random seed (0)")
    parser.add_argument("--skip-tournament", action="store_true", help="only draw the curves")
    args = parser.parse_args(argv)
    figure = training_curves_figure(args.run)  # the run's files checked; nothing written yet
    if not args.skip_tournament:  # and the round robin can start, before anything is saved
        check_tournament(args.run, args.opening_stones)
    path = training_curves(args.run, figure=figure)
    print(f"training curves written to {path}")
    if not args.skip_tournament:
        tournament(args.run, args.games, args.opening_stones, args.seed)
        print(f"tournament written to {args.run}/tournament.json, tournament.md, heatmap.png")
    return 0


if __name__ == "__main__":
    from experiments.common import run_script

    run_script(main)
