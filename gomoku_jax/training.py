"""The training driver shared by the learners: progress bar, logs, checkpoints,
periodic evaluation, best model, early stopping, final report and export.

A learner (see `algorithms.alphazero.Learner`) provides ``config``, ``env``,
``init()``, ``iteration(state) -> (state, metrics)`` (one compiled program),
``state_sharding()`` and ``agent(variables, name=...)``; its state has ``iteration``
and ``variables``. The driver adds what lives on the host:

* ``<workdir>/config.json`` the full config; ``metrics.csv`` one row per iteration;
  ``tensorboard/`` the same scalars for TensorBoard; ``checkpoints/`` orbax checkpoints
  of the whole learner state plus the driver's own progress (best score, patience);
  ``eval/iter_XXXXXX.json`` each periodic evaluation (``eval.every``); ``best.gjx``
  (the best of those, its iteration the report's ``best_iteration``, null without
  them) and ``final.gjx`` exported agents; ``report.json`` / ``report.md`` the final
  evaluation (both also name the device, how many devices the learner trained on and
  how many processes ran it).
* Resuming: run the same command again. The run continues from the last checkpoint,
  rows logged after it are dropped, and everything that follows is what an
  uninterrupted run would have produced (all randomness comes from the state's key
  and from seeds derived from the iteration number). Only the settings of
  `RESUMABLE_SETTINGS` (when checkpoints are saved, how the agent is evaluated) may
  differ from the run's stored config; any other difference is refused.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import math
import functools
import os
import pathlib
import signal
import threading
import time
import types
import warnings
from typing import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from gomoku_jax import agents as agents_lib
from gomoku_jax import arena, compiled, exported, ratings
from gomoku_jax import io as gio
from gomoku_jax.config import check_int, from_dict, offset_seed, plain_values, to_dict

__all__ = ["DIVERGED", "RESUMABLE_SETTINGS", "OutOfDeviceMemory", "RunLog", "RunWarning",
           "TrainingDiverged", "diverged_record", "evaluate", "non_finite", "restore", "run",
           "sigterm_as_interrupt"]


class TrainingDiverged(FloatingPointError):
    """An iteration's loss or the network's variables turned NaN or infinite; the run
    stopped before saving that iteration, so its last checkpoint is still sound. Its
    work directory keeps the reason in ``diverged.json`` (`DIVERGED`) until the run
    finishes."""


class OutOfDeviceMemory(MemoryError):
    """An iteration ran out of its device's memory (XLA's ``RESOURCE_EXHAUSTED``): the
    settings that size an iteration's work are too large for the device. The run stopped
    before saving that iteration; its last checkpoint is kept."""


def _out_of_memory(err: Exception, iteration: int, saved: int | None,
                   config) -> OutOfDeviceMemory | None:
    """`OutOfDeviceMemory` naming the iteration, XLA's words and the batch settings, when
    ``err`` is XLA's out-of-memory error; else None."""
    text = str(err)
    if not isinstance(err, jax.errors.JaxRuntimeError) or "RESOURCE_EXHAUSTED" not in text:
        return None
    batches = getattr(config, "batch_sizes", dict)()
    now = f" ({', '.join(f'{k}={v}' for k, v in batches.items())} now)" if batches else ""
    if saved:  # a checkpoint resumes only the settings it was trained with
        what = (f"the run keeps its checkpoint of iteration {saved}. Smaller settings for "
                f"an iteration's work{now} make another experiment: train it in another "
                "--workdir")
    else:
        what = (f"the run keeps no checkpoint yet. Make the settings that size an "
                f"iteration's work smaller{now} and start it again (this --workdir may "
                "be used)")
    return OutOfDeviceMemory(
        f"iteration {iteration} ran out of memory ({gio.brief(text, 160)}); {what}")


DIVERGED = "diverged.json"  # {"iteration": N, "reason": "..."} of a run that diverged
# The files a run reads that decide its training: a learner's data files (its
# ``data_fingerprint()``, {"files": [{"path", "bytes", "sha256"}, ...]}) and, under
# "agents", those of the exported agents it plays against and is judged by (the same
# entries, the agent's name as its path); kept to refuse resuming on other files.
DATA = "data.json"
# Where each start of a run that trained ran: one JSON line per start, {"from": the
# iteration it started from, "device", "devices", "processes"}; a start resumed from an
# earlier checkpoint replaces the lines of the starts it undid. The report names every
# placement when there was more than one (a resume on other devices may differ from an
# uninterrupted run by their rounding).
STARTS = "starts.jsonl"
_PLACEMENT = ("device", "devices", "processes")


@jax.jit
def _finite_leaves(variables):
    """One boolean per floating leaf of ``variables``: all its values finite."""
    return [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(variables)
            if jnp.issubdtype(x.dtype, jnp.inexact)]


def non_finite(variables, metrics: Mapping[str, float] = {}) -> list[str]:  # noqa: B006
    """What holds NaN or infinity: each loss of ``metrics`` (``loss``, ``*_loss``) that
    does, and the network's ``variables`` (naming up to three leaves, ``params.a.b``).
    An iteration that took no step (``trained`` 0) logs NaN losses: they are not read."""
    stepped = metrics.get("trained", 1) != 0
    bad = [f"{k} is {v}" for k, v in metrics.items()
           if stepped and (k == "loss" or k.endswith("_loss")) and isinstance(v, float)
           and not math.isfinite(v)]
    flags = jax.device_get(_finite_leaves(variables))
    if not all(flags):
        names = [jax.tree_util.keystr(path, simple=True, separator=".") for path, x in
                 jax.tree_util.tree_flatten_with_path(variables)[0]
                 if jnp.issubdtype(x.dtype, jnp.inexact)]
        broken = [name for name, ok in zip(names, flags) if not ok]
        more = f" and {len(broken) - 3} more" if len(broken) > 3 else ""
        bad.append(f"the network's variables hold NaN or inf ({', '.join(broken[:3])}{more})")
    return bad


def check_finite(variables, metrics: Mapping[str, float], iteration: int,
                 saved: int | None, workdir, first_step: bool = False) -> None:
    """Raise `TrainingDiverged` if ``metrics``' losses or ``variables`` hold NaN or inf
    after ``iteration`` of the run in ``workdir``; ``saved`` is its last checkpointed
    iteration (None: none); ``first_step``: the iteration holds the run's first training
    steps, from the network as initialised (the network itself may then be the cause)."""
    bad = non_finite(variables, metrics)
    if not bad:
        return
    kept = (f"its last checkpoint, iteration {saved}, is sound" if saved else
            "it has no checkpoint yet")
    first = (" These were the run's first training steps, from the network as initialised: "
             "if its outputs are NaN or inf from the start (a log or a division in its "
             "forward pass), check the network first, as a lower learning rate will not "
             "help." if first_step else "")
    raise TrainingDiverged(
        f"training in {workdir} diverged at iteration {iteration}: {'; '.join(bad)}. The run "
        f"stopped without saving this iteration ({kept}; metrics.csv shows the iteration)."
        f"{first} Resuming repeats the same steps: train again in a new --workdir with a "
        "lower learning rate (train.learning_rate; DDQN: or a smaller train.max_grad_norm)")


class RunWarning(UserWarning):
    """Something of a run's folder that the run redoes instead of using (a damaged
    ``final.gjx`` or ``report.json`` of a finished run); the command line prints it as one
    line."""


class RunLog:
    """``metrics.csv`` plus TensorBoard scalars; on resume, rows past ``start`` go.
    ``write`` False (the processes but the first of a multi-process run) keeps the rows
    and writes nothing."""

    def __init__(self, workdir: pathlib.Path, start: int, tensorboard: bool = True,
                 write: bool = True):
        self.path = workdir / "metrics.csv"
        self.rows: list[dict] = []
        self.write = write
        if self.path.exists():
            self.rows = self._read(start)
        self._rewrite()
        self.writer = None
        if tensorboard and write:
            from tensorboardX import SummaryWriter

            self.writer = SummaryWriter(str(workdir / "tensorboard"), purge_step=start + 1)

    def _read(self, start: int) -> list[dict]:
        """The rows up to iteration ``start``; ValueError naming the file and line when
        it cannot be read (an edit, a damaged disk), before anything is rewritten. A row
        with more or fewer values than the header has columns is damage too, except a
        short last line without its line end: an append the run's end cut off, whose
        iteration was never checkpointed, so it is dropped as rows past ``start`` are."""
        advice = (f"repair {self.path} or remove it (the run then logs from its "
                  "checkpoint on)")
        try:
            text = self.path.read_text(encoding="utf-8-sig")  # (Excel's BOM)
            reader = csv.DictReader(io.StringIO(text, newline=""))
            if "iteration" not in (reader.fieldnames or []):
                raise ValueError(f"{self.path} line 1: the header has no 'iteration' "
                                 f"column (got {reader.fieldnames}); {advice}")
            rows = [(reader.line_num, row) for row in reader]
            cut_off = not text.endswith(("\n", "\r"))
            if rows and cut_off and None in rows[-1][1].values():
                rows.pop()  # a last append cut short: its values are missing
        except UnicodeDecodeError as error:  # named by its line, as other damage is
            raise ValueError(f"{self.path} line {_line_of(error)}: {_not_utf8(error)}; "
                             f"{advice}") from None
        except csv.Error as error:
            raise ValueError(f"{self.path} cannot be read ({error}); {advice}") from None
        kept = []
        for number, row in rows:
            extra = row.pop(None, [])  # values past the header's columns
            if extra or None in row.values():
                count = sum(v is not None for v in row.values()) + len(extra)
                raise ValueError(f"{self.path} line {number}: {count} value"
                                 f"{'' if count == 1 else 's'} for the header's "
                                 f"{len(reader.fieldnames)} columns; {advice}")
            try:
                iteration = int(row["iteration"])
            except (TypeError, ValueError):
                raise ValueError(
                    f"{self.path} line {number}: iteration {row['iteration']!r} is not "
                    f"a whole number; {advice}") from None
            if iteration <= start:
                kept.append(row)
        return kept

    def _rewrite(self):
        self.fields = ["iteration"]
        for row in self.rows:
            self.fields += [k for k in row if k not in self.fields]
        if not self.write:
            return
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, fieldnames=self.fields)
        writer.writeheader()
        writer.writerows(self.rows)
        gio.write_atomic(self.path, text.getvalue())

    def log(self, iteration: int, values: Mapping[str, float]):
        row = {"iteration": iteration, **{k: _plain(v) for k, v in values.items()}}
        self.rows.append(row)
        if any(k not in self.fields for k in row):
            self._rewrite()  # a new column (e.g. the first evaluation): rewrite the header
        elif self.write:
            with gio.naming(self.path), self.path.open("a", newline="") as f:
                csv.DictWriter(f, fieldnames=self.fields).writerow(row)
        if self.writer is not None:
            with gio.naming(self.writer.logdir):
                for k, v in row.items():
                    if k != "iteration" and isinstance(v, (int, float)) and math.isfinite(v):
                        self.writer.add_scalar(k, v, iteration)
                self.writer.flush()

    def close(self):
        if self.writer is not None:
            with gio.naming(self.writer.logdir):
                self.writer.close()


def _line_of(error: UnicodeDecodeError) -> int:
    """The line (from 1) of the bytes ``error`` could not decode: the line ends (``\\n``,
    ``\\r\\n`` or ``\\r``, as the csv reader counts them) before them, plus one."""
    before = bytes(error.object[:error.start])
    return before.count(b"\n") + before.count(b"\r") - before.count(b"\r\n") + 1


def _not_utf8(error: UnicodeDecodeError) -> str:
    """What ``error`` found, by byte rather than position: ``byte 0xff is not UTF-8 text
    (invalid start byte)``."""
    bad = bytes(error.object[error.start:error.end])
    shown = " ".join(f"0x{b:02x}" for b in bad[:4]) + (" ..." if len(bad) > 4 else "")
    return (f"byte {shown} is" if len(bad) == 1 else f"bytes {shown} are") + (
        f" not UTF-8 text ({error.reason})")


def _plain(v):
    """A metric as a Python number, or a list for a metric of several values
    (`config.plain_values`: metrics.csv shows 0.002, not 0.0020000000949949026)."""
    return plain_values(np.reshape(v, ()) if np.size(v) == 1 else v)


def evaluate(env, agent, opponents, games: int, seed: int, opening_stones: int,
             progress: bool = False) -> dict:
    """Matches of ``agent`` against each named opponent; scores with 95% intervals.
    ``progress`` shows a bar over the opponents (games of a batched match run as one
    compiled loop and have no bar of their own)."""
    from tqdm.auto import tqdm

    check_distinct_opponents(opponents)
    out = {}
    bar = tqdm(opponents, desc=f"evaluation, {games} games each", unit="opponent",
               disable=not progress, dynamic_ncols=True)
    for i, name in enumerate(bar):
        bar.set_postfix_str(f"{agent.name} vs {name}")
        opponent = agents_lib.make(name, env)
        result = arena.play_match(env, agent, opponent, games, seed=offset_seed(seed, 7919 * i),
                                  opening_stones=opening_stones, progress=progress)
        s = result.score(agent.name)
        points = s["wins"] + 0.5 * s["draws"]
        low, high = ratings.score_interval(points, s["games"])
        out[name] = dict(s, score=points / s["games"], interval=[low, high],
                         seconds_per_move=result.seconds_per_move(agent.name),
                         mean_length=float(np.mean([r.length for r in result.records])),
                         forfeits=[r.forfeit for r in result.records if r.forfeit])
    return out


def check_evaluation(env, opponents, opening_stones, load_files: bool = False) -> None:
    """What a run's evaluations (``eval.opponents``, ``eval.opening_stones``) need from
    the game, checked when a config is built and again when `run` starts, rather than at
    the first evaluation: openings that fit it and opponents that can play it. An
    exported opponent (``FILE.gjx[@N]``) is only read with ``load_files`` (as `run`
    does), so a config still builds where the file is not (e.g. to export a run's agent
    from elsewhere); its name is checked either way."""
    arena.check_opening_stones(env, opening_stones, "eval.opening_stones")
    check_distinct_opponents(opponents, "eval.opponents")
    for i, name in enumerate(opponents):
        check_agent_name(env, name, f"eval.opponents[{i}]", load_files)


def check_distinct_opponents(opponents, setting: str = "opponents") -> None:
    """ValueError naming ``setting`` when an opponent is listed twice: an evaluation's
    results are kept by opponent, so the second match would replace the first."""
    for i, name in enumerate(opponents):
        if name in opponents[:i]:
            raise ValueError(f"{setting}[{i}]: {name!r} is listed twice ({setting}"
                             f"[{list(opponents).index(name)}] too); each opponent is "
                             "played once, with the evaluation's number of games")


def check_agent_name(env, name, setting: str, load_files: bool = False) -> None:
    """ValueError naming ``setting`` unless ``name`` is an agent that can play ``env``
    (`gomoku_jax.agents.make`). An exported agent's file is only read with
    ``load_files``; without, only its name is checked."""
    try:
        if load_files or agents_lib.exported_path(name) is None:
            agents_lib.make(name, env)
    except (ValueError, OSError) as error:
        raise ValueError(f"{setting}: {error}") from None


def _progress_tree(best: float = -1.0, bad: int = 0, stopped: bool = False,
                   best_iteration: int = 0):
    """The evaluation progress a checkpoint keeps. ``best_score`` is float32 (as runs
    have always stored it): a score is compared with it in float32 too (`_beats`), so an
    equal score (0.9 is 0.8999999762 in float32) is never taken for progress."""
    return {"best_score": np.float32(best), "bad_evals": np.int32(bad),
            "stopped": np.bool_(stopped), "best_iteration": np.int32(best_iteration)}


def _beats(score: float, best) -> bool:
    """Whether evaluation ``score`` is above the stored float32 ``best`` (a score or
    ``eval.stop_score``), compared at the stored precision."""
    return bool(np.float32(score) > np.float32(best))


def _upgrade(learner):
    """A stored config read with today's config class: settings added to the framework
    since the run started take their defaults, so old runs still resume."""
    return _upgrade_class(type(learner.config))


def _upgrade_class(cls):
    return lambda stored: to_dict(from_dict(cls, stored))


RESUMABLE_SETTINGS: Mapping[str, str] = types.MappingProxyType({
    "checkpoint_every": "when checkpoints are saved",
    "eval.every": "when the periodic evaluations run",
    "eval.games": "the games of each periodic evaluation",
    "eval.final_games": "the games of the final evaluation",
    "eval.opponents": "the evaluations' opponents after the first",
    "eval.simulations": "the evaluated agent's search (and the exported agents' default)",
    "eval.opening_stones": "the evaluations' random opening stones",
})
"""The settings that may differ when a run resumes, by dotted name, with what each
decides; a nested config's too (a pipeline's ``imitation.eval.final_games``). Any other
difference from the run's stored config is refused, as is a changed first opponent.

None of them reaches the training state or its trajectory: the compiled programs do not
read them, the state's keys and the seeds derived from the iteration number do not
depend on them, and a run resumes exactly from any checkpoint, so the network trains as
it would have. ``seed``, ``eval.patience`` and ``eval.stop_score`` (which decide how
long a run trains) and every game, network, search, self-play, data and training
setting may not change; nor, while ``eval.patience`` or ``eval.stop_score`` is set, may
``eval.every``, ``eval.games``, ``eval.simulations`` or ``eval.opening_stones``, which
then decide where the run stops too.

What the checkpoint keeps of the evaluations (the best score, which picks ``best.gjx``;
the evaluations since it, which ``eval.patience`` counts) stays honest:

* ``eval.every`` and ``eval.games`` change when scores are measured and how precisely,
  not what they measure, so later scores are compared with the kept best as before.
* The first of ``eval.opponents`` may not change (the best score and a stop are scores
  against it, and the report's reason for a stop names it); the others may.
* A change of ``eval.simulations`` or ``eval.opening_stones`` changes what a score
  measures: a run that trains on forgets its best score (and the evaluations counted
  since), so its next periodic evaluation makes a new ``best.gjx``; until then
  ``best.gjx`` and ``best_iteration`` stay those of before. A start that trains nothing
  (``iterations`` reached) does not store such a change, so the start that trains on
  sees it and forgets then.
* ``best.gjx`` is written after the checkpoint of its iteration (an iteration with a new
  best score is always checkpointed), and a resumed run drops the periodic evaluations
  (``eval/iter_*.json``) of iterations after its checkpoint, as it drops their rows of
  ``metrics.csv``: the evaluations it keeps and ``best.gjx`` are those of its own
  checkpoint whatever the cadence it goes on with.
* A finished run given a change of what its final evaluation reads (``eval.final_games``,
  ``eval.opponents``, ``eval.simulations``, ``eval.opening_stones``) is evaluated again,
  and ``final.gjx`` and the reports are written again; with ``eval.final_games`` 0 its
  report is kept as it is (nothing is evaluated, and nothing is emptied). The report
  records the settings its final evaluation read (``final_evaluation_settings``): a run
  whose report was made with the settings given is not evaluated again, whether or not
  the change is stored yet.

A resumed run with such a change says so in one line (each setting, stored -> given) and
stores the new config (``config.json``; the checkpoints' copy with its next save, or once
a finished run's reports are written), so a later start compares with it. A pipeline's
finished stages are not run again: a change to their settings is stored, and applies to
the stages still to run."""

# what the final evaluation reads (a finished run is evaluated again when one changes)
_FINAL_EVALUATION = ("eval.final_games", "eval.opponents", "eval.simulations",
                     "eval.opening_stones")
# report.json's record of the settings of its final evaluation (`_final_settings`)
_FINAL_SETTINGS = "final_evaluation_settings"


def _evaluation_searches(config) -> bool:
    """Whether the agent of a run of ``config`` searches when it is evaluated, and so
    reads ``eval.simulations`` (DQN's plays the move of highest Q, without a search)."""
    return hasattr(config, "search")


def _final_settings(config) -> dict:
    """What the final evaluation of a run of ``config`` reads (`_FINAL_EVALUATION`; its
    search's simulations only for a learner that searches), as report.json records it."""
    ev = config.eval
    return {"final_games": ev.final_games, "opponents": list(ev.opponents),
            **({"simulations": ev.simulations} if _evaluation_searches(config) else {}),
            "opening_stones": ev.opening_stones}


# what a periodic score measures, the first opponent aside (it may not change)
_SCORE_SETTINGS = ("eval.simulations", "eval.opening_stones")
# what decides how long a run trains: refused, with a note saying so
_STOP_SETTINGS = ("eval.patience", "eval.stop_score")


# what decides when a run stops too, once eval.patience or eval.stop_score is set
_STOP_MEASURES = ("eval.every", "eval.games", "eval.simulations", "eval.opening_stones")


def _resumable(path: str, stored, given, config: Mapping | None = None) -> bool | str:
    """Whether the setting at the dotted ``path`` may change from ``stored`` to ``given``
    when a run resumes (see `RESUMABLE_SETTINGS`): True, or a note saying why not
    (False: it is not one of them). ``config``: the given config as a dict, whose
    ``eval`` section beside ``path`` says whether evaluations can stop the run."""
    def named(name):
        return path == name or path.endswith("." + name)

    if any(named(name) for name in _STOP_SETTINGS):
        return "it decides when the run stops training"
    if not any(named(name) for name in RESUMABLE_SETTINGS):
        return False
    if any(named(name) for name in _STOP_MEASURES) and config is not None:
        section, searches = config, False
        for key in path.split(".")[:-1]:  # down to the eval section, past those around it
            searches = searches or (isinstance(section, Mapping) and "search" in section)
            section = section.get(key, {}) if isinstance(section, Mapping) else {}
        if named("eval.simulations") and not searches:  # DQN's agent plays without search
            return True
        if isinstance(section, Mapping) and (section.get("patience") is not None
                                             or section.get("stop_score") is not None):
            return ("with eval.patience or eval.stop_score set, it decides when the run "
                    "stops training")
    if named("eval.opponents") and not (isinstance(stored, list) and isinstance(given, list)
                                        and stored[:1] == given[:1]):
        return ("the first opponent picks best.gjx and stops the run: only the others "
                "may change")
    return True


def stored_config_differences(stored: dict, config, algorithm: str,
                              resumable: bool = True) -> list[str]:
    """How a run's stored ``config.json`` (``stored``, its ``algorithm`` included) differs
    from ``config`` of ``algorithm``: one line per setting (see
    `gomoku_jax.io.config_differences`), none when it is the same run, settings that
    may change on resume aside (`RESUMABLE_SETTINGS`) unless ``resumable`` is False."""
    stored = dict(stored)
    stored_algorithm = stored.pop("algorithm", "alphazero")  # as config.algorithm_of
    given = to_dict(config)
    diff = gio.config_differences(stored, given, _upgrade_class(type(config)),
                                  functools.partial(_resumable, config=given)
                                  if resumable else None)
    if stored_algorithm != algorithm:
        diff.insert(0, f"algorithm: stored {json.dumps(stored_algorithm)}, "
                       f"given {json.dumps(algorithm)}")
    return diff


def restore(learner, workdir):
    """``(state, progress)`` from the latest checkpoint in ``workdir`` (placed on the
    learner's devices), or ``(None, fresh progress)`` when there is none. A checkpoint
    of another config (but for `RESUMABLE_SETTINGS`) or a corrupt one raises
    `gomoku_jax.io.CheckpointError`."""
    return _restore(learner, workdir)[:2]


def _checkpointer(learner, workdir, **kwargs) -> gio.Checkpointer:
    """The Checkpointer of the run of ``learner`` in ``workdir``."""
    return gio.Checkpointer(pathlib.Path(workdir) / "checkpoints",
                            config=to_dict(learner.config), upgrade=_upgrade(learner),
                            may_change=functools.partial(_resumable,
                                                         config=to_dict(learner.config)),
                            **kwargs)


def _restore(learner, workdir):
    """`restore`'s ``(state, progress)`` and the changed settings of the config
    (`RESUMABLE_SETTINGS`): ``[(dotted name, stored value, given value)]``."""
    prog = _progress_tree()
    directory = pathlib.Path(workdir) / "checkpoints"
    if not directory.exists():
        return None, prog, []
    with _checkpointer(learner, workdir) as ckpt:
        step = ckpt.latest_step()
        if step is None:
            return None, prog, []
        _check_algorithm(pathlib.Path(workdir), getattr(learner, "algorithm", "alphazero"))
        # A config the checkpoints refuse is said as it is, before any restore: no older
        # checkpoint nor moving the results away would let this config start there.
        changed = ckpt.config_changes()
        # before the state is read in: a resume on other devices (more CPU devices, each
        # with its copy of the buffer) may not fit where the run did
        check_state_memory(learner)
        target = {"state": jax.eval_shape(learner.init), "progress": prog}
        try:
            restored = ckpt.restore(target, step)
        except gio.CheckpointError as err:
            restored = _restore_older(learner, ckpt, prog, step)
            if restored is None:
                results = [name for name in _RUN_RESULTS
                           if (pathlib.Path(workdir) / name).exists()]
                if not results or any(s < step for s in ckpt.steps()):
                    raise
                # no older checkpoint: starting afresh also meets `_check_fresh_workdir`
                raise gio.CheckpointError(
                    f"{err}; to start afresh, move the run's results "
                    f"({', '.join(results)}) away too, as a new run would overwrite "
                    "them") from None
        held = int(restored["state"].iteration)
        if held != step:  # a step folder copied or renamed by hand
            folder = pathlib.Path(workdir) / "checkpoints" / str(step)
            raise gio.CheckpointError(
                f"{folder} holds the state of iteration {held}, not {step}: a checkpoint "
                f"folder copied or renamed by hand? Move it away (or name it {held}, if "
                "there is no such folder) to resume from the checkpoint before it")
    return (_place(restored["state"], learner.state_sharding()), restored["progress"],
            changed)


def _restore_older(learner, ckpt, prog, step):
    """Checkpoint ``step`` restored in one of the learner's older state shapes and brought
    to today's (``learner.older_states()``, see `algorithms.alphazero.Learner`), or None
    when it fits none of them."""
    for shape, upgrade in getattr(learner, "older_states", list)():
        try:
            restored = ckpt.restore({"state": shape, "progress": prog}, step)
        except gio.CheckpointError:
            continue
        return {**restored, "state": upgrade(restored["state"])}
    return None


def _changes_line(workdir, changed, forgotten: bool, deferred: bool = False) -> str:
    """The line a run resumed with changed settings (``changed``, see `_restore`) prints;
    ``forgotten``: the change forgot the best score of its periodic evaluations;
    ``deferred``: it is not stored yet (see `RESUMABLE_SETTINGS`)."""
    shown = ", ".join(f"{path} {json.dumps(old)} -> {json.dumps(new)}"
                      for path, old, new in changed)
    kept = ("stored once the run trains on, as its best score was measured otherwise"
            if deferred else "kept from now on")
    line = f"{workdir} resumes with changed settings ({kept}): {shown}"
    if forgotten:
        line += ("; the best score so far was measured otherwise, so the next periodic "
                 "evaluation makes a new best.gjx")
    return line


# The best score of a run whose evaluations changed what a score measures (see
# `RESUMABLE_SETTINGS`): every score beats it, yet ``best.gjx`` (best_iteration) is kept.
_FORGOTTEN = -0.5


def _forget_best(prog):
    """``prog`` without its best score (and the evaluations counted since it): a later
    score beats it. ``best_iteration`` stays, naming ``best.gjx`` until then."""
    if float(prog["best_score"]) < 0:  # no periodic evaluation yet: nothing to forget
        return prog
    return _progress_tree(_FORGOTTEN, 0, bool(prog["stopped"]), int(prog["best_iteration"]))


def _from_first_process(value):
    """``value`` (JSON data) of process 0, on every process of a multi-process run."""
    from jax.experimental import multihost_utils

    data = json.dumps(value).encode() if jax.process_index() == 0 else b""
    size = int(multihost_utils.broadcast_one_to_all(np.int32(len(data))))
    codes = np.zeros(size, np.int32)
    codes[:len(data)] = np.frombuffer(data, np.uint8)
    codes = multihost_utils.broadcast_one_to_all(codes)
    return json.loads(np.asarray(codes).astype(np.uint8).tobytes())


def _check_algorithm(workdir: pathlib.Path, algorithm: str) -> None:
    """A CheckpointError when the run in ``workdir`` (its ``config.json``) is another
    algorithm's: said first, before the config's differences."""
    path = workdir / "config.json"
    if not path.is_file():
        return  # the checkpoints' own config check says what differs
    stored = gio.read_json_object(path, "it belongs to this run: restore it, or train in "
                                  "a new --workdir").get("algorithm", "alphazero")
    if stored != algorithm:
        raise gio.CheckpointError(
            f"{workdir} holds a run of {stored}, and this config trains {algorithm}: "
            "choose another --workdir")


def _place(tree, shardings):
    """A host copy of ``tree`` (whole, on every process) put on ``shardings``'s devices;
    with several processes each builds only its own devices' shards."""
    if jax.process_count() == 1:
        return jax.device_put(tree, shardings)

    def put(x, sharding):
        x = np.asarray(x)
        return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])

    return jax.tree.map(put, tree, shardings)


# What a finished run leaves in its workdir besides checkpoints.
_RUN_RESULTS = ("final.gjx", "report.json", "report.md")


def _has_results(workdir: pathlib.Path) -> bool:
    """Whether ``workdir`` holds anything of an earlier start beyond what a start that
    failed (bad data, a bad opponent file) or was stopped before its first iteration
    leaves: its ``config.json``, ``starts.jsonl``, a ``metrics.csv`` without rows, empty
    ``eval/`` and ``checkpoints/`` (a save cut short aside), ``tensorboard/`` and the
    part of one of those files left by a process killed while replacing it. Only
    such a folder may be taken over by another config; anything else (a logged
    iteration, an evaluation, a model, a pipeline's stage folder, a file of the user's)
    is kept."""
    for entry in workdir.iterdir():
        name = entry.name
        if name in ("config.json", DATA, STARTS, "tensorboard") or gio.is_write_leftover(
                name, ("config.json", DATA, STARTS, "metrics.csv")):
            continue
        if name == "eval" and entry.is_dir() and not any(entry.iterdir()):
            continue
        if name == "checkpoints" and entry.is_dir() and all(
                gio.UNFINISHED_SAVE in p.name for p in entry.iterdir()):
            continue
        if name == "metrics.csv" and entry.is_file() and not _holds_rows(entry):
            continue
        return True
    return False


def _holds_rows(metrics: pathlib.Path) -> bool:
    """Whether a ``metrics.csv`` holds more than a header (an unreadable one counts: it
    is kept)."""
    try:
        with metrics.open(newline="") as f:
            rows = csv.reader(f)
            return not (next(rows, None) is not None and next(rows, None) is None)
    except (OSError, UnicodeDecodeError, csv.Error):
        return True


def _would_overwrite(workdir: pathlib.Path) -> list[str]:
    """What a run started afresh in ``workdir`` would replace there: a ``metrics.csv``
    with rows, evaluations in ``eval/``, ``best.gjx``."""
    found = []
    if (workdir / "metrics.csv").is_file() and _holds_rows(workdir / "metrics.csv"):
        found.append("metrics.csv with logged rows")
    if (workdir / "eval").is_dir() and any((workdir / "eval").iterdir()):
        found.append("eval/")
    if (workdir / "best.gjx").exists():
        found.append("best.gjx")
    return found


def _finished_report(workdir: pathlib.Path, iteration: int, stop_at: int,
                     stopped: bool) -> dict | None:
    """The stored report of a run that has nothing left to do (its checkpoint is at the
    last iteration asked for, or an evaluation stopped it) and that wrote its report and
    agent then; None otherwise (a run killed during its final evaluation does it again,
    and so does one whose ``final.gjx`` is damaged: it is written again)."""
    if iteration < stop_at and not stopped:
        return None
    if not all((workdir / name).exists() for name in _RUN_RESULTS):
        return None
    try:
        gio.read_exported(workdir / "final.gjx")
    except gio.CheckpointError as err:
        warnings.warn(f"{err}; writing it again from the checkpoint of iteration {iteration} "
                      "(and evaluating it again)", RunWarning, stacklevel=3)
        return None
    try:
        report = json.loads((workdir / "report.json").read_text())
        if not isinstance(report, dict) or report.get("iterations") != iteration:
            raise ValueError(f"it is not the report of iteration {iteration}")
    except (OSError, ValueError) as err:
        warnings.warn(f"{workdir / 'report.json'} cannot be read back ({gio.brief(str(err))}); "
                      f"evaluating the agent of iteration {iteration} again and writing it "
                      "again", RunWarning, stacklevel=3)
        return None
    return report


def check_state_memory(learner, limit_bytes: int | None = None) -> int:
    """Refuse a learner whose state (parameters, optimizer, replay buffer, games in
    progress) would not fit; returns its bytes.

    The state's size comes from ``jax.eval_shape(learner.init)`` (nothing allocated),
    per device from its sharding (parameters, optimizer and buffer are replicated, the
    games split). The limit is ``limit_bytes``, else the least free memory of the
    learner's devices (their ``memory_stats()``) against one device's part, or, for CPU
    devices, the host's available RAM (`tree_search.available_bytes`) against all of
    them. Without the check, a buffer of 10**10 positions made the first allocation wait
    forever. A learner whose ``init`` cannot be traced is not checked (returns 0).
    """
    from gomoku_jax.tree_search import available_bytes, least_available_bytes

    try:
        shapes = jax.eval_shape(learner.init)
    except Exception:  # noqa: BLE001 - an init that cannot be traced (a wrapper placing
        return 0       # given params on devices): not checked, as before the check

    def shard_bytes(leaf) -> int:  # what one device holds of the leaf
        shape = leaf.shape
        sharding = getattr(leaf, "sharding", None)
        if sharding is not None:
            try:
                shape = sharding.shard_shape(shape)
            except Exception:  # noqa: BLE001 - a sharding that cannot say: the whole leaf
                pass
        return int(np.prod(shape, dtype=np.int64)) * np.dtype(leaf.dtype).itemsize

    parts: dict[str, int] = {}  # bytes per top-level field of the state (buffer, games...)
    for path, leaf in jax.tree_util.tree_flatten_with_path(shapes)[0]:
        if hasattr(leaf, "dtype") and not jax.dtypes.issubdtype(leaf.dtype,
                                                                 jax.dtypes.prng_key):
            name = jax.tree_util.keystr(path[:1]).lstrip(".") or "state"
            parts[name] = parts.get(name, 0) + shard_bytes(leaf)
    per_device = sum(parts.values())
    devices = list(getattr(getattr(learner, "mesh", None), "devices", np.array(
        jax.local_devices())).flat)
    devices = [d for d in devices if d.process_index == jax.process_index()] or [
        jax.local_devices()[0]]
    if all(d.platform == "cpu" for d in devices):  # the host's RAM holds every device's part
        need = per_device * len(devices)
        limit, source = available_bytes(devices[0])
    else:  # each device its own part (replicated parameters and buffer: all of them)
        need = per_device
        limit, source = least_available_bytes(devices)
    if limit_bytes is not None:
        limit, source = int(limit_bytes), "limit_bytes"
    if need > limit:
        scale = need / per_device  # the devices' parts together, on a CPU host
        largest = ", ".join(f"{name} {size * scale / 2**30:.2f} GiB" for name, size in sorted(
            parts.items(), key=lambda item: -item[1])[:3] if size >= per_device / 100)
        raise ValueError(f"the learner's state (parameters, optimizer, replay buffer, games) "
                         f"needs {need / 2**30:.2f} GiB, more than the {source} of "
                         f"{limit / 2**30:.2f} GiB; the largest parts: {largest}. Make the "
                         "settings that size the largest part smaller (the replay buffer: "
                         "train.buffer_capacity; the games in progress: how many are played "
                         "at once and how long they run)")
    return need


def _check_fresh_workdir(workdir: pathlib.Path, learner, algorithm: str) -> None:
    """A run starting from scratch in ``workdir`` (no checkpoint to resume from) would
    overwrite what is there: refuse when that is another experiment's (a ``config.json``
    that differs, from a start that logged an iteration or left results; see
    `_has_results`), files a run writes but without the ``config.json`` of one (a
    ``metrics.csv`` with rows, ``eval/``, ``best.gjx``) or a finished run's results whose
    checkpoints are gone."""
    stored_path = workdir / "config.json"
    if stored_path.exists():
        stored = gio.read_json_object(stored_path, "it belongs to an earlier run: choose "
                                      "another --workdir or move it away")
        diff = stored_config_differences(stored, learner.config, algorithm)
        if diff and _has_results(workdir):
            raise ValueError(
                f"{workdir} holds another experiment (its config.json differs:\n  "
                + "\n  ".join(diff) + "\n) and no checkpoint to resume from, so this run "
                "would overwrite its files; choose another --workdir")
    else:  # not a run of ours that failed to start: files it would replace are kept
        found = _would_overwrite(workdir)
        if found:
            raise ValueError(
                f"{workdir} holds {', '.join(found)} but no config.json or checkpoint, so "
                "this run would overwrite them; choose another --workdir, or move them away")
    finished = [name for name in _RUN_RESULTS if (workdir / name).exists()]
    if finished:
        raise ValueError(
            f"{workdir} holds a run's results ({', '.join(finished)}) but no "
            "checkpoint to resume from, so starting again would overwrite them; choose "
            "another --workdir, or move those files away to train this config afresh")


def check_iterations(config, iterations: int | None, name: str, how: str) -> None:
    """ValueError when ``iterations`` (a stop asked for, named ``name``) is past the
    config's ``train.iterations``, where training stops whatever is asked; ``how`` says
    how to raise that."""
    train = getattr(config, "train", None)
    total = getattr(train, "iterations", None)
    if iterations is not None and total is not None and iterations > total:
        if not dataclasses.is_dataclass(train):  # no setting: e.g. a pipeline's stages
            raise ValueError(f"{name} {iterations} is more than the {total} iterations of "
                             f"this run, which its config fixes (train.iterations={total} is "
                             "no setting of it)")
        raise ValueError(f"{name} {iterations} is more than train.iterations={total}, where "
                         f"the run's schedule ends and training stops: raise train.iterations "
                         f"instead ({how}; it also paces learning-rate schedules)")


def agent_files(names) -> list[dict]:
    """The files of the exported agents among agent ``names`` (``FILE.gjx[@N]``, either
    ``+killer``) that exist, each once: ``{"path": FILE, "bytes", "sha256"}`` (see
    `DATA`); a missing file is the agent's own error to report."""
    out, seen = [], set()
    for name in names:
        path = agents_lib.exported_path(name)
        if path is not None and path not in seen and os.path.isfile(path):
            seen.add(path)
            out.append({"path": path, "bytes": os.path.getsize(path),
                        "sha256": gio.file_sha256(path)})
    return out


def _data_changes(stored: dict, current: dict, key: str = "files") -> list[str]:
    """What differs between two fingerprints (see `DATA`) in their ``key`` entries:
    files added, gone or changed."""
    def files(fingerprint):
        entries = fingerprint.get(key) if isinstance(fingerprint, dict) else None
        return {f.get("path"): f for f in entries if isinstance(f, dict)} if isinstance(
            entries, list) else {}

    before, now = files(stored), files(current)
    changes = [f"{path} is new" for path in now if path not in before]
    changes += [f"{path} is gone" for path in before if path not in now]
    changes += [f"{path} changed ({before[path].get('bytes')} bytes then, "
                f"{now[path].get('bytes')} now)" if before[path].get("bytes") != now[path].get(
                    "bytes") else f"{path} changed (same size, other contents)"
                for path in now if path in before and before[path] != now[path]]
    return changes


def _check_data(workdir: pathlib.Path, current: dict, resuming: bool, write) -> None:
    """Keep the learner's data fingerprint in ``workdir``; a resumed run whose files are
    no longer those it started with is refused (its batches and its validation split
    would change), naming what changed."""
    path = workdir / DATA
    if resuming and path.exists():
        stored = gio.read_json_object(path, "it belongs to this run: restore it, or train "
                                      "in a new --workdir")
        for key, what, why in (
                ("files", "on other data files than those it reads now",
                 "resuming must read the files it started with (or its batches and "
                 "validation split change): restore them, or train on these"),
                ("agents", "against other exported agents' files than those it plays now",
                 "resuming must play the agents it started with (or its games and the "
                 "scores that pick best.gjx change): restore them, or train against these")):
            if key not in stored:  # kept by a run from before it was recorded
                continue
            changes = _data_changes(stored, current, key)
            if changes:
                shown = "; ".join(changes[:5]) + (f"; and {len(changes) - 5} more"
                                                   if len(changes) > 5 else "")
                raise ValueError(f"{workdir} was trained {what} ({shown}); {why} in a new "
                                 "--workdir")
    write(path, json.dumps(current, indent=2) + "\n")


def _summary(metrics: Mapping[str, float]) -> str:
    keys = ("loss", "policy_loss", "value_loss", "game_length")
    return " ".join(f"{k}={metrics[k]:.3f}" for k in keys if k in metrics)


def run(learner, workdir, *, iterations: int | None = None, progress: bool = True,
        tensorboard: bool = True, export_meta: Callable[[], dict] | None = None,
        on_iteration: Callable[[int, dict], None] | None = None) -> dict:
    """Train ``learner`` in ``workdir`` (resuming from its checkpoints) and evaluate.

    ``iterations`` stops early (for tests; the config's ``train.iterations`` is the
    plan the learning-rate schedule follows): an integer from 1 to ``train.iterations``
    or None, else a ValueError before anything is written. Returns the final report.
    A line (printed with or without ``progress``) says when the run resumes, from which
    iteration and to which, or has nothing left to train; another names the settings
    that changed since the run's last start, where only those of `RESUMABLE_SETTINGS`
    may.

    Several processes (``jax.distributed``, the learner's devices spanning them) all
    call it with the same arguments; they train and evaluate in step, and only the first
    writes the workdir's files (the checkpoints are written together, through orbax).
    """
    from tqdm.auto import tqdm

    config = learner.config
    total = config.train.iterations
    # as the command line's --iterations and sweep's iterations: a stop of 0 "finished" an
    # untrained run with no checkpoint to resume, one past the schedule trained all of it
    iterations = check_int("", "iterations", iterations, allow_none=True)
    check_iterations(config, iterations, "iterations", "in the learner's config")
    stop_at = total if iterations is None else iterations
    # made once the run is known to start: a setting refused below leaves no empty folder
    workdir = pathlib.Path(workdir)
    lead = jax.process_index() == 0  # the process that writes files

    def write(path, text):  # whole or not at all: other processes may read it
        if lead:
            gio.write_atomic(path, text)

    progress = progress and lead

    def notice(text):  # where the run stands: printed with or without a progress bar
        if lead:
            tqdm.write(text)

    compiled.release_if_crowded()  # a notebook's earlier runs may hold many programs
    # changed: the settings of RESUMABLE_SETTINGS that differ from the stored config
    restored, prog, changed = _restore(learner, workdir)
    checkpointed = prog  # its best_iteration names best.gjx, a best score forgotten or not
    # the checkpoint's run stopped early: by an evaluation (eval.stop_score,
    # eval.patience) or by its learner (`_learner_stop`)
    was_stopped = bool(prog["stopped"])
    config_dict = to_dict(config)
    algorithm = getattr(learner, "algorithm", "alphazero")
    changed_names = {path for path, _, _ in changed}
    defer = False  # a change stored only once the run trains on (set below)
    changes = None  # the line saying them, said once nothing refuses this start
    if restored is not None:
        trains_on = int(restored.iteration) < stop_at and not was_stopped
        read = changed_names - (set() if _evaluation_searches(config) else {"eval.simulations"})
        # a changed measure of the periodic scores: the best so far is not comparable
        rescored = bool(read & set(_SCORE_SETTINGS)) and float(
            prog["best_score"]) >= 0
        forget = trains_on and rescored
        # a start that trains nothing cannot forget (its checkpoint is not saved again):
        # the change is stored by the start that trains on, which forgets then
        defer = rescored and not trains_on and int(restored.iteration) < total
        if changed:
            changes = _changes_line(workdir, changed, forget, defer)
        if forget:
            prog = _forget_best(prog)
        # a finished run given another final evaluation is evaluated again (none asked
        # for, eval.final_games 0: the report it has is kept, not emptied), unless its
        # report was made with these settings (a change not stored yet, see `defer`)
        done = _finished_report(workdir, int(restored.iteration), stop_at, was_stopped)
        if done is not None and config.eval.final_games > 0 and (
                done.get(_FINAL_SETTINGS, {}) != _final_settings(config)
                if _FINAL_SETTINGS in done else bool(read & set(_FINAL_EVALUATION))):
            done = None
        if jax.process_count() > 1:  # every process takes process 0's path and report
            done = _from_first_process(done)
        if done is not None:  # nothing left to train: the run's own report, not a new one
            if not defer and _other_config(workdir / "config.json", config, algorithm):
                write(workdir / "config.json",  # (or one a start cut short wrote)
                      json.dumps({"algorithm": algorithm, **config_dict}, indent=2) + "\n")
            if changed and not defer:
                with _checkpointer(learner, workdir) as ckpt:
                    ckpt.store_config()
            if changes:
                notice(changes)
            where, more = _standing(int(restored.iteration), stop_at, total, was_stopped)
            kept = "its results are as they were" if changed else "its files are as they were"
            notice(f"{workdir} {where}: nothing to train ({kept}"
                   + (f"; {more})" if more else ")"))
            return done
    check_evaluation(learner.env, config.eval.opponents, config.eval.opening_stones,
                     load_files=True)
    if restored is None:
        _check_fresh_workdir(workdir, learner, algorithm)
        check_state_memory(learner)  # before anything is written
    elif bad := non_finite(restored.variables):  # saved before this check existed
        step = int(restored.iteration)
        raise TrainingDiverged(
            f"the checkpoint of iteration {step} in {workdir} holds a network that had "
            f"already diverged: {'; '.join(bad)}. Delete {workdir / 'checkpoints' / str(step)} "
            "to resume from the checkpoint before it, or train again in a new --workdir")
    fingerprint = getattr(learner, "data_fingerprint", None)
    to_train = restored is None or int(restored.iteration) < stop_at
    data = fingerprint() if callable(fingerprint) and to_train else None  # files it trains on
    # the exported agents it plays: self-play's, and the first opponent, which picks
    # best.gjx and stops a run (the others may change)
    played = [*getattr(learner, "opponent_names", list)(), config.eval.opponents[0]]
    if to_train and any(agents_lib.exported_path(name) for name in played):
        data = {**(data or {}), "agents": agent_files(played)}
    workdir.mkdir(parents=True, exist_ok=True)
    if data is not None:  # files it trains on or plays against
        _check_data(workdir, data, restored is not None, write)
    ckpt = _checkpointer(learner, workdir, cleanup=True)
    if not defer:  # a change not stored yet is not in config.json either
        write(workdir / "config.json",
              json.dumps({"algorithm": algorithm, **config_dict}, indent=2) + "\n")
    state = learner.init() if restored is None else restored
    start = int(state.iteration)
    if changes:
        notice(changes)
    if restored is not None and (start >= stop_at or was_stopped):
        where, more = _standing(start, stop_at, total, was_stopped)
        notice(f"{workdir} {where}: nothing to train; writing its final agent and report "
               "from that checkpoint" + (f" ({more})" if more else ""))
    elif restored is not None:
        notice(f"resuming {workdir} from its checkpoint of iteration {start}, training to "
               f"iteration {stop_at}" + ("" if stop_at == total else
                                         f" (of train.iterations={total})"))
    if start < stop_at and not was_stopped:  # this start trains: where is kept
        _record_start(workdir, start, _placement(learner), write, notice)
    log = RunLog(workdir, start, tensorboard=tensorboard, write=lead)
    ev = config.eval
    env = learner.env

    def export(path, variables, iteration):
        meta = dict(export_meta() if export_meta else {}, iteration=int(iteration))
        if lead:
            exported.export_agent(path, learner, variables, extra=meta)

    bar = tqdm(total=stop_at, initial=start, desc="train", disable=not progress,
               unit="it", dynamic_ncols=True)
    saved = start or None  # the last checkpointed iteration
    new_best = False  # this iteration's evaluation beat the best: export it once saved
    if restored is not None and lead:
        _resume_evaluations(workdir, start, checkpointed, state.variables, export)
    stepped = 0  # iterations of this start that took a training step
    try:
        it = start
        while it < stop_at and not bool(prog["stopped"]):
            t0 = time.perf_counter()
            try:
                state, metrics = learner.iteration(state)
                metrics = {k: _plain(v) for k, v in jax.device_get(metrics).items()}
            except Exception as err:  # noqa: BLE001 - only XLA's out-of-memory is said
                if (short := _out_of_memory(err, it + 1, saved, config)) is not None:
                    raise short from None
                raise
            seconds = time.perf_counter() - t0
            it = int(state.iteration)
            metrics.update(seconds=seconds, moves_per_second=metrics["moves"] / seconds)
            steps = metrics.get("trained", 1) != 0
            stepped += steps
            try:  # before the evaluation, which could export a broken network as best
                check_finite(state.variables, metrics, it, saved, workdir,
                             first_step=start == 0 and steps and stepped == 1)
            except TrainingDiverged as err:
                log.log(it, metrics)
                write(workdir / DIVERGED, json.dumps({"iteration": it, "reason": str(err)},
                                                     indent=2) + "\n")
                raise
            # (the schedule's last iteration has the final evaluation instead; a run
            # stopped earlier by ``iterations`` evaluates as an uninterrupted one would)
            if ev.every and it % ev.every == 0 and it < total:
                agent = learner.agent(state.variables, name="learner")
                result = evaluate(env, agent, ev.opponents, ev.games,
                                  seed=offset_seed(config.seed, it),
                                  opening_stones=ev.opening_stones)
                if lead:  # made with its first file: no empty folder without evaluations
                    (workdir / "eval").mkdir(exist_ok=True)
                write(workdir / "eval" / f"iter_{it:06d}.json",
                      json.dumps(result, indent=2) + "\n")
                score = result[ev.opponents[0]]["score"]
                for name, r in result.items():
                    metrics[f"eval_{name}"] = r["score"]
                best, bad, best_it = (float(prog["best_score"]), int(prog["bad_evals"]) + 1,
                                      int(prog["best_iteration"]))
                if _beats(score, prog["best_score"]):  # best.gjx once it is checkpointed
                    new_best = True
                    best, bad, best_it = score, 0, it
                stopped = ((ev.stop_score is not None and score >= ev.stop_score)
                           or (ev.patience is not None and bad >= ev.patience))
                prog = _progress_tree(best, bad, stopped, best_it)
            # (at the schedule's last iteration the run ends anyway: not "stopped early")
            if it < total and not bool(prog["stopped"]) and _learner_stop(learner, state):
                prog = _progress_tree(float(prog["best_score"]), int(prog["bad_evals"]), True,
                                      int(prog["best_iteration"]))
            log.log(it, metrics)
            if on_iteration is not None:
                on_iteration(it, metrics)
            if (it % config.checkpoint_every == 0 or it == stop_at or bool(prog["stopped"])
                    or new_best):
                ckpt.save(it, {"state": _host_copy(state), "progress": prog})
                saved = it
            if new_best:
                export(workdir / "best.gjx", state.variables, it)
                new_best = False
            bar.update(it - bar.n)
            bar.set_postfix_str(_summary(metrics))
    except BaseException:
        # the error that stopped the run is the one said: closing the log or the
        # checkpoints may fail too (a full disk fails every write), which must not hide it
        for close in (bar.close, log.close, ckpt.close):
            try:
                close()
            except Exception:  # noqa: BLE001, S110
                pass
        raise
    bar.close()
    log.close()
    ckpt.close()  # orbax's threads now, not at the interpreter's exit

    ran = int(state.iteration) - start
    if ran and not stepped and lead:
        reason = getattr(learner, "untrained_reason", None)
        kept = "as initialised" if start == 0 else f"as it was at iteration {start}"
        warnings.warn(
            f"{workdir}: no training step in the {ran} iteration(s) just run (metrics.csv: "
            f"trained is False), so the network is {kept}" + (f": {reason()}" if reason else ""),
            RunWarning, stacklevel=2)
    short_of = getattr(learner, "short_of", None)  # what ending at train.iterations left
    note = short_of(state) if short_of is not None and int(state.iteration) >= total else None
    if note and lead:
        warnings.warn(f"{workdir}: {note}", RunWarning, stacklevel=2)
    report = {"iterations": int(state.iteration), "stopped_early": bool(prog["stopped"]),
              "stopped_because": (bool(prog["stopped"]) and _learner_stop(learner, state)
                                  or _stop_reason(ev, prog)),
              "best_iteration": _best_iteration(prog),
              **_where_trained(workdir, learner, trained=int(state.iteration) > start,
                               iteration=int(state.iteration)),
              "evaluation": {}, _FINAL_SETTINGS: _final_settings(config)}
    if ev.final_games:
        agent = learner.agent(state.variables, name="learner")
        report["evaluation"] = evaluate(env, agent, ev.opponents, ev.final_games,
                                        seed=offset_seed(config.seed, 1_000_003),
                                        opening_stones=ev.opening_stones, progress=progress)
    # the agent after its evaluation: one cut short leaves final.gjx and the reports as
    # they were, both of the settings the checkpoints keep (the same command finds them so)
    export(workdir / "final.gjx", state.variables, state.iteration)
    write(workdir / "report.json", json.dumps(report, indent=2) + "\n")
    write(workdir / "report.md", _report_markdown(report, learner.describe_play(),
                                                  learner.env.words))
    if changed and not defer:  # (a run that saved a checkpoint stored it then)
        ckpt.store_config()
    # a resumed run that got past where it diverged (other code, a GPU's rounding); one
    # stopped before that iteration (a shorter --iterations) keeps the record
    at = (diverged_record(workdir) or {}).get("iteration")
    if lead and not (isinstance(at, int) and int(state.iteration) < at):
        (workdir / DIVERGED).unlink(missing_ok=True)
    return report


def diverged_record(workdir) -> dict | None:
    """``{"iteration", "reason"}`` from the `DIVERGED` file of a run that stopped because
    it diverged (`TrainingDiverged`); None without one (or when it cannot be read)."""
    try:
        info = json.loads((pathlib.Path(workdir) / DIVERGED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("reason"), str):
        return None
    return {"iteration": info.get("iteration"), "reason": info["reason"]}


def _resume_evaluations(workdir: pathlib.Path, start: int, prog, variables, export) -> None:
    """What a run resumed from its checkpoint of iteration ``start`` keeps of its periodic
    evaluations: the ``eval/iter_*.json`` of later iterations go (a lost stretch, played
    again or not as the cadence now says), and ``best.gjx`` is the checkpoint's best:
    written again from the restored ``variables`` when its best is this very iteration
    and the file is missing or of another iteration (an interruption between the save
    and the export)."""
    for path in sorted((workdir / "eval").glob("iter_*.json")):
        number = path.stem.removeprefix("iter_")
        if number.isdigit() and int(number) > start:
            path.unlink()
    if _best_iteration(prog) != start or float(prog["best_score"]) < 0:
        return
    try:
        held = gio.read_exported(workdir / "best.gjx")[0].get("iteration")
    except (OSError, gio.CheckpointError):
        held = None
    if held != start:
        export(workdir / "best.gjx", variables, start)


def _other_config(path: pathlib.Path, config, algorithm: str) -> bool:
    """Whether the ``config.json`` at ``path`` is not ``config`` of ``algorithm``: missing,
    unreadable, or other in a setting (settings added since it was written aside)."""
    try:
        stored = gio.read_json_object(path, "")
    except gio.CheckpointError:
        return True
    return bool(stored_config_differences(stored, config, algorithm, resumable=False))


def _placement(learner) -> dict:
    """Where this process trains ``learner``: ``device``, ``devices``, ``processes``."""
    return {"device": arena.device_description(), "devices": _learner_device_count(learner),
            "processes": jax.process_count()}


def _read_starts(workdir: pathlib.Path) -> list[dict]:
    """The starts kept in ``STARTS`` (none for a run begun before they were kept; a line
    that is not one, from a damaged file, is passed over)."""
    try:
        text = (workdir / STARTS).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    starts = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if (isinstance(entry, dict) and type(entry.get("from")) is int
                and isinstance(entry.get("device"), str)):
            starts.append({"from": entry["from"], **{k: entry.get(k) for k in _PLACEMENT}})
    return starts


def _record_start(workdir: pathlib.Path, start: int, here: dict, write, notice) -> None:
    """Keep that this start trains from iteration ``start`` on ``here``; say so when the
    start before it trained elsewhere (other devices round otherwise)."""
    kept = [entry for entry in _read_starts(workdir) if entry["from"] < start]
    if kept and {k: kept[-1][k] for k in _PLACEMENT} != here:
        notice(f"{workdir} trained on {_placement_words(kept[-1])} up to iteration {start} "
               f"and goes on on {_placement_words(here)}: from here it may differ from an "
               "uninterrupted run by the devices' rounding")
    write(workdir / STARTS, "".join(json.dumps(entry) + "\n"
                                    for entry in [*kept, {"from": start, **here}]))


def _count_words(entry: Mapping) -> str | None:
    """``entry``'s device and process counts in words ("2 devices in 1 process"), or
    None where it does not hold both (reports from before they were recorded)."""
    devices, processes = entry.get("devices"), entry.get("processes")
    if not (isinstance(devices, int) and isinstance(processes, int)):
        return None
    return (f"{devices} device{'' if devices == 1 else 's'} in {processes} "
            f"process{'' if processes == 1 else 'es'}")


def _placement_words(entry: Mapping) -> str:
    counts, device = _count_words(entry), entry.get("device")
    return f"{counts} ({device})" if counts and device else (counts or str(device))


def _where_trained(workdir: pathlib.Path, learner, trained: bool, iteration: int) -> dict:
    """The report's ``device``, ``devices`` and ``processes``: of this start when it
    ``trained``; else (a finished run evaluated again, perhaps on another machine) those
    of the report the run has, where it names them. With them ``trained_on`` when the
    run's starts (`STARTS`) trained on more than one placement up to ``iteration``: a
    list of ``{"iterations": [first, last], "device", "devices", "processes"}``."""
    here = _placement(learner)
    if not trained:
        try:
            before = gio.read_json_object(workdir / "report.json", "")
        except gio.CheckpointError:
            before = {}
        if isinstance(before.get("device"), str):
            kept = {key: before.get(key) for key in here}
            if isinstance(before.get("trained_on"), list):
                kept["trained_on"] = before["trained_on"]
            return kept
    starts = [e for e in _read_starts(workdir) if e["from"] < iteration]
    spans = []
    for k, entry in enumerate(starts):
        last = starts[k + 1]["from"] if k + 1 < len(starts) else iteration
        where = {key: entry[key] for key in _PLACEMENT}
        if spans and {key: spans[-1][key] for key in _PLACEMENT} == where:
            spans[-1]["iterations"][1] = last
        else:
            spans.append({"iterations": [entry["from"] + 1, last], **where})
    return {**here, "trained_on": spans} if len(spans) > 1 else here


def _learner_device_count(learner) -> int:
    """How many devices ``learner`` trains on: its mesh's (``learner.mesh``), else its
    ``devices`` (None: all of them, as a pipeline's stages take)."""
    mesh = getattr(learner, "mesh", None)
    if mesh is not None:
        return int(np.size(mesh.devices))
    devices = getattr(learner, "devices", None)
    return jax.device_count() if devices is None else len(list(devices))


def _trained_on(report: Mapping) -> str | None:
    """Where a run's report says it trained, in words: the device, with how many devices
    the learner trained on in how many processes (reports written before these were
    recorded name the device alone, or nothing: None)."""
    device, counts = report.get("device"), _count_words(report)
    if device and counts:
        return f"Trained on {counts}; device: {device}."
    if device:
        return f"Device: {device}."
    return f"Trained on {counts}." if counts else None


def _standing(iteration: int, stop_at: int, total: int, stopped: bool) -> tuple[str, str]:
    """Where a run whose checkpoint is at ``iteration``, with nothing left to train, stands
    (``stop_at`` the stop asked for, ``total`` its ``train.iterations``, ``stopped`` early
    by an evaluation or by its learner): ``(where, more)``, ``more`` saying how to train
    on when the run stopped where it was asked to, not at its end ("" when it is
    finished)."""
    if stopped or iteration >= total:
        return f"is finished at iteration {iteration}", ""
    where = (f"is already at iteration {iteration}, the stop asked for" if iteration == stop_at
             else f"is already at iteration {iteration}, past the stop asked for ({stop_at})")
    return where, (f"its schedule goes on to train.iterations={total}: ask for a later "
                   "stop, or none, to train on")


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within the block, SIGTERM (``kill``, ``timeout``, a batch system ending a job) raises
    KeyboardInterrupt in the main thread, as Ctrl-C does, so that a training command stops
    the same way: the driver's files closed, its message said, a non-zero exit status,
    instead of the process ending silently (status 143). The handler it replaces is put
    back afterwards. Outside the main thread (where Python runs no signal handlers, nor
    installs them) it changes nothing."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) == signal.SIG_IGN):  # ignored: it stays so
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"{signal.Signals(signum).name} received")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:  # None: a handler not set from Python, which cannot be put back as it was
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _host_copy(tree):
    """``tree`` as NumPy arrays, whole on every process: arrays split over devices that
    other processes hold (the games, with several processes) are gathered first."""
    from jax.experimental import multihost_utils

    def copy(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            return multihost_utils.process_allgather(x, tiled=True)
        return jax.device_get(x)

    return jax.tree.map(copy, tree)


def _best_iteration(prog) -> int | None:
    """The iteration of ``best.gjx`` (None: no periodic evaluation ran, so no best; a
    forgotten best score still names it)."""
    return int(prog["best_iteration"]) if float(prog["best_score"]) > -1 else None


def _learner_stop(learner, state) -> str | None:
    """Why the learner itself ends its run at ``state`` (its ``stop_reason(state)``, e.g.
    a DDQN curriculum played to its end), or None: it trains on. (Its ``short_of(state)``,
    if it has one, says what a run that reached ``train.iterations`` left undone: a
    warning.)"""
    reason = getattr(learner, "stop_reason", None)
    return reason(state) if reason is not None else None


def _stop_reason(ev, prog) -> str | None:
    """Why the run stopped before its last iteration (None: it did not)."""
    if not bool(prog["stopped"]):
        return None
    best, at = float(prog["best_score"]), int(prog["best_iteration"])
    if ev.stop_score is not None and not _beats(ev.stop_score, prog["best_score"]):
        return (f"eval.stop_score: the score against {ev.opponents[0]} reached {best:.3f} "
                f"(>= {ev.stop_score}) at iteration {at}")
    return (f"eval.patience: {ev.patience} evaluation(s) in a row without beating the best "
            f"score against {ev.opponents[0]} ({best:.3f}, iteration {at})")


def _report_markdown(report: dict, how: str, game: str | None = None) -> str:
    stopped = report.get("stopped_because")
    n = report["iterations"]
    lines = [f"# Final evaluation after {n} iteration{'' if n == 1 else 's'}", ""]
    if game:
        lines += [f"Game: {game}.", ""]
    if stopped:
        lines += [f"Stopped early, {stopped}.", ""]
    where = _trained_on(report)
    spans = report.get("trained_on")
    if isinstance(spans, list) and len(spans) > 1:  # (where the last part trained: in it)
        lines += ["Trained in parts: " + "; ".join(
            f"iterations {s['iterations'][0]} to {s['iterations'][1]} on "
            f"{_placement_words(s)}" for s in spans)
            + ". After a change of devices a run may differ from an uninterrupted one by "
            "their rounding.", ""]
    elif where:
        lines += [where, ""]
    if not report["evaluation"]:
        return "\n".join(lines + ["No final evaluation (`eval.final_games` is 0)."]) + "\n"
    lines += [how, "",
             "| opponent | games | wins | losses | draws | score | 95% interval | s/move |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in report["evaluation"].items():
        lo, hi = r["interval"]
        lines.append(f"| {name} | {r['games']} | {r['wins']} | {r['losses']} | {r['draws']} "
                     f"| {r['score']:.3f} | [{lo:.3f}, {hi:.3f}] | {r['seconds_per_move']:.4f} |")
    forfeits = [f for r in report["evaluation"].values() for f in r.get("forfeits", [])]
    if forfeits:
        lines += [""] + arena.forfeit_lines(forfeits)
    return "\n".join(lines) + "\n"
