"""Ablation sweeps: one training run per value of any dotted config key.

`sweep` trains an experiment config once per value of one key (``network.options.blocks``,
``search.num_simulations`` as in seed 000 section 4.6.4, ``train.learning_rate``,
``train.buffer_capacity``...) with the same budget (the same number of iterations), each in
its own work directory under ``workdir``, and returns one row (a plain dict) per run: the
value, the run's last line of logged training metrics, its final evaluation scores and,
when an ``evaluate`` function is given, whatever it measures on the run's exported agent.
`ladder_evaluator` makes such a function from seed 003's ladder against pure MCTS (see
`gomoku_jax.arena.ladder`); `sweep_table_markdown`, `ladder_table_markdown` (seed 003's
table IV: wins per pure-MCTS level, one column per run) and `plot_sweep` present the rows.

A run whose work directory already holds checkpoints resumes (and a finished one is not
trained again), so an interrupted sweep continues where it stopped; an ``evaluate`` with a
``fingerprint`` (`ladder_evaluator`'s: its settings) keeps its result in the run's folder
and is not played again while its settings and the run's ``final.gjx`` are unchanged.

Each run builds its own learner. A learner's traced settings (``HYPERPARAMETERS`` of
`algorithms.common.ShardedLearner`: learning rates, loss weights, the iterations of a
schedule, self-play temperatures, search constants, tactical-prior probabilities, the DQN
reward table...) and ``seed`` are inputs of its compiled programs, so runs that differ
only in them share one compile. A key that shapes the program (a network's width, the
number of simulations, a batch size, a string, a bool, a setting turned from 0 or None
to a number) compiles once per value (minutes for the CPU default). Runs run one after
another; with ``JAX_COMPILATION_CACHE_DIR`` set, a program compiled before (the same
settings, e.g. a sweep run again) is loaded from disk instead.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import math
import numbers
import os
import pathlib
import re
import reprlib
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from gomoku_jax import config as config_lib
from gomoku_jax import io as gio

__all__ = [
    "ladder_evaluator",
    "ladder_table_markdown",
    "plot_sweep",
    "sweep",
    "sweep_table_markdown",
]

# The logged training metrics `sweep_table_markdown` shows by default (those present):
# AlphaZero's, then DQN's. A row holds every column of the run's last metrics.csv line.
_METRICS = ("loss", "policy_loss", "value_loss", "entropy", "explained_variance",
            "game_length", "win_rate", "q_mean", "td_abs")
# Longest value text in a run's folder name; a longer one is cut and tagged with a hash
# of the whole value, so two values never share a folder.
_SLUG_CHARS = 40


def _slug(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    slug = re.sub(r"[^A-Za-z0-9_.+-]+", "_", text).strip("_") or "value"
    if len(slug) <= _SLUG_CHARS:
        return slug
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{slug[:_SLUG_CHARS - 9].rstrip('_')}-{digest}"


def _metrics_rows(path: pathlib.Path) -> list[dict]:
    """The lines of a run's metrics.csv (none when it is not there)."""
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def _seconds(rows: list[dict]) -> list[float]:
    """The ``seconds`` of each iteration logged in metrics.csv ``rows``."""
    return [float(row["seconds"]) for row in rows if row.get("seconds") not in ("", None)]


def _train_seconds(rows: list[dict]) -> float | None:
    """The run's training time: the sum of its iterations' ``seconds`` in metrics.csv
    (read back, what it was when the run trained; resumed, the iterations it kept, not
    those an interruption lost); None without any. It holds the compilation of the
    programs the run was the first to need."""
    seconds = _seconds(rows)
    return round(sum(seconds), 2) if seconds else None


def _iteration_seconds(rows: list[dict]) -> float | None:
    """The run's median iteration time, its first iteration (which compiles) left out
    when there are others: unlike `_train_seconds`, comparable between the runs of a
    sweep, whose first run alone pays for compiling the programs they share."""
    seconds = _seconds(rows)
    seconds = seconds[1:] if len(seconds) > 1 else seconds
    return round(float(np.median(seconds)), 3) if seconds else None


def _last_metrics(rows: list[dict]) -> dict:
    """The last line of a run's metrics.csv (`_metrics_rows`): every column but
    ``iteration`` and the periodic ``eval_*`` scores (a row's ``eval_*`` are the final
    evaluation's), numbers as floats, empty cells dropped."""
    if not rows:
        return {}
    out = {}
    for name, cell in rows[-1].items():
        if name in (None, "iteration") or name.startswith("eval_") or cell in ("", None):
            continue
        try:
            out[name] = float(cell)
        except ValueError:
            out[name] = cell
    return out


def _same_config(a, b) -> bool:
    """Whether configs ``a`` and ``b`` train the same run: equal, or equal but for network
    options that build the same network (one restates a default the other leaves out)."""
    if a == b:
        return True
    net_a, net_b = getattr(a, "network", None), getattr(b, "network", None)
    if not (dataclasses.is_dataclass(a) and hasattr(net_a, "module") and net_a != net_b
            and type(a) is type(b) and dataclasses.replace(a, network=net_b) == b):
        return False
    try:
        return net_a.module(a.game.size) == net_b.module(b.game.size)
    except (AttributeError, TypeError, ValueError):  # not comparable: not the same
        return False


def _check_run_dir(run_dir: pathlib.Path, cfg, algorithm: str, run: str) -> None:
    """ValueError when ``run_dir`` holds another config's run (its ``config.json``
    differs in a setting a resumed run may not change, see
    `training.RESUMABLE_SETTINGS`) that training would refuse to resume or overwrite, or
    that the sweep would read back as diverged: said before any run trains, naming what
    differs."""
    from gomoku_jax import training

    path = run_dir / "config.json"
    if not path.is_file():
        return  # a new run
    try:
        stored = config_lib.read_json(path)
    except config_lib.ConfigError:
        return  # unreadable: training says so
    if not isinstance(stored, dict) or not training._has_results(run_dir):
        return
    diff = training.stored_config_differences(stored, cfg, algorithm)
    if diff:
        raise ValueError(f"{run_dir} holds another experiment (its config.json differs:\n  "
                         + "\n  ".join(diff) + f"\n), not {run}; choose another workdir, or "
                         "move that folder away to train it afresh")


def _run_dir(workdir: pathlib.Path, i: int, key: str, value: Any, taken, cfg,
             algorithm: str) -> pathlib.Path:
    """Run ``i``'s folder, ``workdir/<i>_<key>=<value>``; when that is not there but the
    same value's run of the same config is, at another position (values were inserted
    or removed since) or under another name of the value (an object's keys written in
    another order: its run's config is this one exactly), that folder (not one in
    ``taken``), so its run is resumed or read back, not trained again."""
    from gomoku_jax import training

    name = f"{_slug(key)}={_slug(value)}"
    own = workdir / f"{i:02d}_{name}"
    if own.exists() or not workdir.is_dir():
        return own
    whole = json.loads(json.dumps({"algorithm": algorithm, **config_lib.to_dict(cfg)}))
    for other in sorted(workdir.iterdir()):
        position, _, rest = other.name.partition("_")
        if (not rest.startswith(f"{_slug(key)}=") or not position.isdigit()
                or other in taken or not other.is_dir()):
            continue
        try:
            stored = config_lib.read_json(other / "config.json")
        except (OSError, config_lib.ConfigError):
            continue  # no run of a config there (or an unreadable one): not taken over
        if not isinstance(stored, dict):
            continue
        if stored == whole or (rest == name and not training.stored_config_differences(
                stored, cfg, algorithm)):
            return other
    return own


def _check_budget(run_dir: pathlib.Path, iterations: int | None, run: str) -> None:
    """ValueError when ``run_dir``'s run is already past ``iterations`` (its latest
    checkpoint, from which it would resume): read back, its row would not have the
    others' budget."""
    from gomoku_jax import io as gio

    done = max(gio.checkpoint_steps(run_dir / "checkpoints"), default=0)
    if iterations is not None and done > iterations:
        raise ValueError(f"{run_dir} ({run}) is already at iteration {done}, past the "
                         f"sweep's iterations={iterations}: its row would not have the "
                         f"others' budget; ask for iterations={done} or more (or None), or "
                         "use another workdir")


def sweep(config_path, key: str, values: Sequence[Any], *, iterations: int | None = None,
          workdir, variant: str | Sequence[str] | None = None,
          overrides: Mapping[str, Any] | Sequence[str] | None = None,
          evaluate: Callable[[Any, Any], Mapping[str, Any]] | None = None,
          devices=None, progress: bool = False, tensorboard: bool = False) -> list[dict]:
    """Train ``config_path`` once per value of the dotted config ``key``; one row per run.

    Args:
      config_path: an experiment config file (its ``algorithm`` picks the learner).
      key: the dotted key to sweep, e.g. ``"network.options.blocks"``.
      values: its values (JSON values: numbers, strings, lists, objects...), at least one
        and no value twice; NumPy numbers and arrays (``np.logspace(-4, -2, 3)``) are taken
        as the Python numbers and lists they hold.
      iterations: train each run this many iterations (None: the config's own), at most
        the config's ``train.iterations``; the same for every run, so the runs get the
        same budget (a run already trained past it is refused, before anything trains)
        unless a run stops early (``eval.stop_score`` / ``eval.patience``:
        the row's ``stopped_because`` says why). A run that diverges (its loss or network
        turns NaN or infinite, `training.TrainingDiverged`) stops there; its row says
        ``"diverged: ..."`` and has no evaluation, the other values still train, and a
        later call reads it back rather than training it again (delete its folder for
        that), unless its ``iterations`` end before the divergence (then the run trains to
        them from its last checkpoint). A run folder that holds a run of another config
        (its ``config.json`` differs, e.g. after the overrides changed) is refused before
        anything trains.
      workdir: the sweep's folder; run ``i`` trains in ``workdir/<i>_<key>=<value>/`` (a
        value of more than 40 characters is cut and tagged with a hash of the whole, so
        a changed value never lands in a folder of another), or in the folder of the
        same value at another position when values were inserted since, or written
        otherwise (an object's keys in another order) (its run resumed or read back);
        the rows are also written to ``workdir/sweep.json``. Calling again with the same
        workdir resumes an interrupted sweep.
      variant: the config's variants to apply first (e.g. ``"smoke"``), a name or names.
      overrides: more dotted overrides for every run (a dict or ``key=value`` strings),
        applied before ``key``'s value; one inside ``key`` (``network.options.filters``
        when sweeping ``network.options``), which each value would replace, is refused.
      evaluate: ``evaluate(agent, env) -> dict`` called with each run's exported agent
        (``final.gjx``) and its game, on every call (a run read back is evaluated again)
        unless it has a ``fingerprint`` (JSON data naming its settings, as
        `ladder_evaluator`'s): its result is then kept in the run's folder and read back
        while the fingerprint and ``final.gjx`` are unchanged; its entries join the row
        (a name the row has already, such as ``value`` or ``loss``, is refused; see
        `ladder_evaluator`: call it, ``evaluate=ladder_evaluator()``).
      devices: the learner's devices (default: all).
      progress: progress bars of the training driver.
      tensorboard: also write TensorBoard events per run.

    Returns:
      ``[{"key", "value", "run", "iterations", "stopped_because", "train_seconds",
      "iteration_seconds", <key>: value,
      <every column of the run's last metrics.csv line but iteration and eval_*>,
      "eval_<opponent>": final score, ...}, ...]`` in ``values`` order.
    """
    import algorithms
    from gomoku_jax import training

    if not isinstance(key, str) or not key or any(not p for p in key.split(".")):
        raise ValueError(f"key must be a dotted config key like 'train.learning_rate', got {key!r}")
    given = values
    try:  # a string or an object is one value, not a sequence of them
        values = [config_lib.plain_values(v) for v in values] if not isinstance(
            values, (str, bytes, Mapping)) else None
    except TypeError:  # a number (a 0-d array too): one value too
        values = None
    if not values:
        raise ValueError(f"values must be a non-empty list of values for {key!r}, got "
                         f"{reprlib.repr(given)}")
    repeated = [v for i, v in enumerate(values) if v in values[:i]]
    if repeated:
        raise ValueError(f"values must differ (each trains its own run), but {key!r} gets "
                         f"{reprlib.repr(repeated[0])} more than once")
    if iterations is not None and (isinstance(iterations, bool) or not isinstance(
            iterations, numbers.Integral) or iterations < 1):
        raise ValueError(f"iterations must be a positive integer or None, got {iterations!r}")
    iterations = None if iterations is None else int(iterations)
    variants = [variant] if isinstance(variant, str) else list(variant or [])
    if overrides is None:
        base = {}
    elif isinstance(overrides, Mapping):
        base = {name: config_lib.plain_values(v) for name, v in overrides.items()}
    elif isinstance(overrides, str):
        raise TypeError(f"overrides must be a dict or a list of 'key=value' strings, got a "
                        f"single string {reprlib.repr(overrides)}")
    else:
        base = config_lib.parse_overrides(overrides)
    if key in base:
        raise ValueError(f"overrides also set the swept key {key!r}; leave it to values")
    inside = [name for name in base if name.startswith(key + ".")]
    if inside:  # applied first, then replaced whole by each value: lost without a word
        raise ValueError(f"overrides set {inside[0]!r}, inside the swept key {key!r}, whose "
                         f"values replace it whole; give it in each value instead")
    if evaluate is ladder_evaluator:
        raise TypeError("evaluate is ladder_evaluator itself; pass the function it makes: "
                        "evaluate=ladder_evaluator(...)")
    if evaluate is not None and not callable(evaluate):
        raise TypeError(f"evaluate must be a function evaluate(agent, env) -> dict or None, "
                        f"got {reprlib.repr(evaluate)}")

    if not isinstance(workdir, (str, os.PathLike)):
        raise TypeError(f"workdir must be the sweep's folder (a path), got "
                        f"{reprlib.repr(workdir)}")
    gio.check_folder(workdir, "workdir", "give a folder for the sweep's runs")
    algorithm = config_lib.algorithm_of(config_path)
    config_class, make_learner = algorithms.learner_entry(algorithm)
    workdir = pathlib.Path(workdir)
    # every config and its learner first: a bad one fails before any training
    configs, run_dirs, learners = [], [], []
    for i, value in enumerate(values):
        run = f"the run {key}={value!r}"
        try:
            cfg, _ = config_lib.load_file(config_class, config_path,
                                          overrides={**base, key: value}, variants=variants)
        except config_lib.ConfigError as err:
            raise config_lib.ConfigError(f"sweep ({run}): {err}") from None
        training.check_iterations(cfg, iterations, f"sweep ({run}): iterations",
                                  "through overrides")
        if hasattr(evaluate, "check_game"):  # its settings that depend on the run's game
            evaluate.check_game(cfg.game, f"sweep ({run}): ")
        same = [v for v, c in zip(values, configs) if _same_config(c, cfg)]
        if same:  # e.g. one value restates the defaults the other leaves out
            raise ValueError(f"values must give different configs (each trains its own "
                             f"run), but {key}={value!r} gives the same config as "
                             f"{key}={same[0]!r}")
        run_dirs.append(_run_dir(workdir, i, key, value, run_dirs, cfg, algorithm))
        _check_run_dir(run_dirs[-1], cfg, algorithm, run)
        _check_budget(run_dirs[-1], iterations, run)
        configs.append(cfg)
        try:  # here too: a batch that does not divide over the devices is refused
            learners.append(make_learner(cfg) if devices is None
                            else make_learner(cfg, devices=devices))
        except config_lib.ConfigError as err:
            raise config_lib.ConfigError(f"sweep ({run}): {err}") from None
        try:  # what a run checks as it starts: its opponents' files, its state's memory
            training.check_evaluation(cfg.game.env(), cfg.eval.opponents,
                                      cfg.eval.opening_stones, load_files=True)
            training.check_state_memory(learners[-1])
        except ValueError as err:
            raise ValueError(f"sweep ({run}): {err}") from None
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for value, cfg, run_dir in zip(values, configs, run_dirs):
        learner = learners.pop(0)  # not kept past its run: it holds the data it loads
        diverged = training.diverged_record(run_dir)  # diverged before, at this config: not trained again
        if (diverged is not None and iterations is not None
                and isinstance(diverged["iteration"], int) and diverged["iteration"] > iterations):
            diverged = None  # after this sweep's budget: trained to it from its checkpoint
        if diverged is None:
            try:
                report = training.run(learner, run_dir, iterations=iterations,
                                      progress=progress, tensorboard=tensorboard)
            except training.TrainingDiverged as err:  # the other values still train
                diverged = training.diverged_record(run_dir) or {"iteration": None,
                                                                 "reason": str(err)}
        logged = _metrics_rows(run_dir / "metrics.csv")
        row = {"key": key, "value": value, "run": str(run_dir),
               "iterations": diverged["iteration"] if diverged else report["iterations"],
               "stopped_because": (f"diverged: {diverged['reason']}" if diverged else
                                   report.get("stopped_because")),
               "train_seconds": _train_seconds(logged),
               "iteration_seconds": _iteration_seconds(logged), key: value}
        row.update({name: cell for name, cell in _last_metrics(logged).items()
                    if name not in row})
        for name, result in ({} if diverged else report.get("evaluation", {})).items():
            row[f"eval_{name}"] = result["score"]
        if evaluate is not None and not diverged:
            row.update(_evaluation(evaluate, run_dir, f"{key}={_slug(value)}", row))
        rows.append(row)
        (workdir / "sweep.json").write_text(json.dumps(rows, indent=2, default=str) + "\n")
    return rows


# A run's kept evaluation (see `_evaluation`).
_EVALUATION = "sweep_evaluation.json"


def _evaluation(evaluate, run_dir: pathlib.Path, name: str, row: Mapping) -> dict:
    """``evaluate(agent, env)`` of the run's ``final.gjx`` (the agent named ``name``), for
    the run's ``row``: a ValueError when it names an entry the row has already. With an
    ``evaluate.fingerprint`` (JSON data naming its settings) the result is kept in the
    run's `_EVALUATION` with the fingerprint and the file's SHA-256, and read back from
    there while both are the same: a sweep called again plays no ladder again."""
    from gomoku_jax import exported

    def check(result: Mapping, where: str = "") -> Mapping:
        taken = [entry for entry in result if entry in row]
        if taken:  # it would replace the row's own entry (its value, a metric...)
            raise ValueError(f"evaluate returned {taken[0]!r} for {run_dir}{where}, a name "
                             f"the sweep's row has already (its entries: {', '.join(row)}"
                             "); rename it in evaluate's result")
        return result

    final, kept = run_dir / "final.gjx", run_dir / _EVALUATION
    fingerprint = getattr(evaluate, "fingerprint", None)
    stamp = None
    if fingerprint is not None and final.is_file():
        stamp = json.loads(json.dumps({"evaluator": fingerprint, "final": hashlib.sha256(
            final.read_bytes()).hexdigest()}))  # as it reads back
        try:
            stored = json.loads(kept.read_text()) if kept.is_file() else None
        except (OSError, UnicodeDecodeError, ValueError):
            stored = None  # unreadable: evaluated again, and rewritten
        if (isinstance(stored, dict) and isinstance(stored.get("result"), dict)
                and {k: stored.get(k) for k in stamp} == stamp):
            return check(stored["result"], f" (kept in {kept}: remove it once renamed)")
    loaded = exported.load(final, name=name)
    result = evaluate(loaded.agent, loaded.env)
    if not isinstance(result, Mapping) or not all(isinstance(k, str) for k in result):
        raise TypeError(f"evaluate must return a dict of named results (str keys), which "
                        f"join the row; for {final} it returned {reprlib.repr(result)}")
    result = dict(check(result))
    if stamp is not None:
        try:
            text = json.dumps({**stamp, "result": result}, indent=1, allow_nan=False)
        except (TypeError, ValueError):  # not JSON data: not kept
            return result
        partial = kept.with_name(kept.name + ".partial")
        partial.write_text(text + "\n")
        partial.replace(kept)  # whole or not at all
    return result


def ladder_evaluator(start: int = 100, step: int = 100, games: int = 10, pass_wins: int = 8,
                     max_simulations: int = 5000, seed: int = 42, opening_stones: int = 0,
                     progress: bool = False, opponent: str = "pure-mcts"
                     ) -> Callable[[Any, Any], dict]:
    """An ``evaluate`` for `sweep`: seed 003's ladder against pure MCTS (``start``
    simulations, ``+step`` per level, ``games`` a level, passed with ``pass_wins`` wins;
    seed 003 used 200 / 100 / 10 / 8, seed 42 and its plain pure MCTS, ``opponent="uct"``;
    see `gomoku_jax.arena.ladder`). Adds ``ladder_cleared`` (the last
    level passed, 0 if none) and ``ladder`` (every level's result) to the row. Its
    settings are checked now, and their bound on each run's game (``opening_stones`` at
    most ``2(k-1)``) by `sweep` before it trains anything."""
    from gomoku_jax import arena

    arena.check_ladder(start, step, games, pass_wins, max_simulations)
    arena.check_ladder_opponent(opponent)
    arena.check_match_seed(seed, "ladder: seed")
    if isinstance(opening_stones, bool) or not isinstance(opening_stones, numbers.Integral) or (
            opening_stones < 0):  # its bound, 2(k-1), is checked on each run's game
        raise ValueError(f"ladder: opening_stones must be a non-negative integer, got "
                         f"{opening_stones!r}")

    def evaluate(agent, env) -> dict:
        result = arena.ladder(env, agent, start=start, step=step, games=games,
                              pass_wins=pass_wins, max_simulations=max_simulations, seed=seed,
                              opening_stones=opening_stones, progress=progress,
                              opponent=opponent)
        return {"ladder_cleared": result["cleared"], "ladder": result["levels"]}

    evaluate.check_game = lambda game, run="": arena.check_opening_stones(
        game, opening_stones, f"{run}ladder: opening_stones")  # `sweep` calls it per run
    # what the result depends on: `sweep` keeps it per run under these settings
    evaluate.fingerprint = {"ladder": {
        "start": int(start), "step": int(step), "games": int(games),
        "pass_wins": int(pass_wins), "max_simulations": int(max_simulations),
        "seed": int(seed), "opening_stones": int(opening_stones), "opponent": opponent}}
    return evaluate


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def _names(rows: Sequence[Mapping[str, Any]]) -> tuple[list, list]:
    """Every column name present in ``rows`` and the evaluation scores among them, in
    the order they first appear (a run's report lists its config's opponents in order)."""
    present = list(dict.fromkeys(name for row in rows for name in row))
    return present, [name for name in present if name.startswith("eval_")]


def _check_rows(rows, name: str) -> None:
    """TypeError unless ``rows`` is a list of `sweep`'s rows; ValueError when empty."""
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Sequence) or not all(
            isinstance(row, Mapping) and "key" in row and "value" in row for row in rows):
        raise TypeError(f"{name}: rows must be a list of sweep's rows (dicts with 'key' and "
                        f"'value'), got {reprlib.repr(rows)}")
    if not rows:
        raise ValueError(f"{name}: no rows")


def _check_columns(rows, columns: Sequence[str], name: str) -> None:
    """ValueError naming a column that no row has, and those they have."""
    present, _ = _names(rows)
    for column in columns:
        if column not in present:
            raise ValueError(f"{name}: no row has {column!r} (the rows have: "
                             f"{', '.join(present)})")


def sweep_table_markdown(rows: Sequence[Mapping[str, Any]],
                         columns: Sequence[str] | None = None) -> str:
    """A Markdown table of a sweep's rows: the swept value, then ``columns`` (default:
    iterations, time, the training metrics, the evaluation scores and the ladder level
    cleared, those present)."""
    _check_rows(rows, "sweep_table_markdown")
    key = rows[0]["key"]
    if columns is None:
        present, evals = _names(rows)
        columns = [c for c in ("iterations", "train_seconds", "iteration_seconds", *_METRICS,
                               *evals,
                               "ladder_cleared") if c in present]
    elif isinstance(columns, (str, bytes)) or not isinstance(columns, Sequence) or not all(
            isinstance(c, str) for c in columns):
        raise TypeError(f"sweep_table_markdown: columns must be a list of column names, got "
                        f"{reprlib.repr(columns)}")
    _check_columns(rows, columns, "sweep_table_markdown")
    columns = [c for c in columns if c != key]  # the swept value is the first column already
    lines = ["| " + " | ".join([key, *columns]) + " |",
             "|" + "---|" * (len(columns) + 1)]
    for row in rows:
        lines.append("| " + " | ".join([_cell(row["value"])] + [
            _cell(row.get(c, "")) for c in columns]) + " |")
    return "\n".join(lines) + "\n"


def _ladder_opponent(rows) -> str:
    """The kind of opponent of the rows' ladders, from their first level's agent name
    (``uct-200`` -> ``uct``); ``pure MCTS`` for ladders that do not name it."""
    name = rows[0]["ladder"][0].get("opponent")
    if not isinstance(name, str):
        return "pure MCTS"
    kind, _, sims = name.rpartition("-")
    return kind if kind and sims.isdigit() else name


def ladder_table_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """Seed 003's table IV: one line per pure-MCTS level, one column per run, the
    wins at that level (empty once a run's ladder has stopped)."""
    _check_rows(rows, "ladder_table_markdown")
    runs = [row for row in rows if row.get("ladder")]
    if not runs:
        raise ValueError("ladder_table_markdown: no row has a ladder (use ladder_evaluator)")
    key = runs[0]["key"]
    levels = sorted({level["simulations"] for row in runs for level in row["ladder"]})
    wins = [{level["simulations"]: level["wins"] for level in row["ladder"]} for row in runs]
    lines = [f"| {_ladder_opponent(runs)} simulations | "
             + " | ".join(f"{key}={_cell(r['value'])}" for r in runs) + " |",
             "|" + "---|" * (len(runs) + 1)]
    for sims in levels:
        lines.append(f"| {sims} | " + " | ".join(str(w.get(sims, "")) for w in wins) + " |")
    return "\n".join(lines) + "\n"


def plot_sweep(rows: Sequence[Mapping[str, Any]], metric: str | None = None, path=None,
               title: str | None = None):
    """A figure of a sweep: ``metric`` per value (default: the ladder level cleared, else
    the first evaluation score, the config's first opponent's, else the final loss) and,
    when the rows have ladders, each run's wins per pure-MCTS level. Saved to ``path`` when given; returns the
    figure, a ``matplotlib.figure.Figure`` that pyplot does not hold (nothing to close, no
    backend chosen; a notebook shows it)."""
    from matplotlib.figure import Figure

    _check_rows(rows, "plot_sweep")
    key = rows[0]["key"]
    if metric is None:
        names, evals = _names(rows)
        metric = ("ladder_cleared" if "ladder_cleared" in names else
                  evals[0] if evals else "loss")
    elif not isinstance(metric, str):
        raise TypeError(f"plot_sweep: metric must be a column name or None, got {metric!r}")
    _check_columns(rows, [metric], "plot_sweep")
    heights = []
    for row in rows:
        try:
            heights.append(float(row.get(metric, float("nan"))))
        except (TypeError, ValueError):
            raise ValueError(f"plot_sweep: metric {metric!r} is not numeric: the run "
                             f"{key}={_cell(row['value'])} has {reprlib.repr(row[metric])}"
                             ) from None
    if path is not None:
        from gomoku_jax import arena

        arena.check_picture_path(path, "plot_sweep: path")
    ladders = [row for row in rows if row.get("ladder")]
    fig = Figure(figsize=(10 if ladders else 5.5, 4))
    axes = fig.subplots(1, 2 if ladders else 1, squeeze=False)
    ax = axes[0, 0]
    labels = [_cell(row["value"]) for row in rows]
    ax.bar(range(len(rows)), heights, color="#1f5fd6")
    ax.set_xticks(range(len(rows)), labels)
    ax.set_xlabel(key)
    ax.set_ylabel(f"{metric} (simulations)" if metric == "ladder_cleared" else metric)
    ax.set_title(f"{metric} per {key}")
    if ladders:
        ax = axes[0, 1]
        for row in ladders:
            sims = [level["simulations"] for level in row["ladder"]]
            ax.plot(sims, [level["wins"] for level in row["ladder"]], marker="o",
                    label=f"{key}={_cell(row['value'])}")
        games = ladders[0]["ladder"][0]["games"]
        ax.set_ylim(-0.3, games + 0.3)
        opponent = _ladder_opponent(ladders)
        ax.set_xlabel(f"{opponent} simulations")
        ax.set_ylabel(f"wins of {games}")
        ax.set_title(f"ladder against {opponent}")
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
