"""Imitation learning from game records (seed 001 section IV-A1 and IV-D): one
iteration is one compiled program.

``make_learner(config)`` returns a `Learner` that trains any policy-value network of
`gomoku_jax.networks` (``resnet``, ``cnn``, ``duelnet``, ...) on the positions of
records files (`gomoku_jax.records`): the policy by cross-entropy on the move played
(one-hot target, softmax over the legal moves), the value by squared error to the
final result from the view of the side to move (+1 won, -1 lost, 0 draw), plus
``l2 ||theta||^2`` as in the AlphaZero loss. Each sampled position is seen under one of
the 8 board symmetries drawn at random per sample, the move target and the previous
move mapped with the board.

**Data.** ``data.paths`` (files or glob patterns, sorted; each must match a file) are
read once, when the first iteration runs, with `gomoku_jax.records.read_records`: a
malformed game is left out
and reported with its file and line (a ``UserWarning``; all of them are kept in
``learner.data_errors``). Unfinished games (no result) are left out. The games are
split into training and validation sets by game (``data.validation_fraction``, drawn
with the config's seed; a share above 0 holds out one game at least, and one that leaves
no game to train on is refused). The positions live on the device; nothing goes back to the
host during an iteration.

**Balance** (seed 001 IV-D3: the games are split by winner, black wins / white wins /
draws, and an equal number is drawn from each split every time). With
``data.balance="splits"`` every training sample first draws one of the non-empty
splits uniformly, then a position of that split uniformly: each split gives the same
expected number of positions per batch, however many games it has. ``"games"`` (the
report's own reading: an equal number of *games* from each split, all their positions
trained on) draws a split with probability proportional to its mean positions per game,
so each split gives the positions of the same expected number of games: long drawn
games weigh more than short wins, as they would in a buffer of whole games. ``"none"``
samples positions uniformly (an epoch is a permutation of the training positions).

**Iteration** = ``train.steps`` SGD steps of ``train.batch_size`` positions (default:
one epoch, ``ceil(training positions / batch_size)`` steps), then the validation losses
(a ``lax.map`` over the validation set in chunks). With ``train.unroll = 0`` the whole
iteration is one program under one ``jit`` (a ``lax.scan`` over the steps). XLA's CPU
backend runs convolutions inside a loop body (``scan`` / ``while``) many times slower
than outside one (measured here: 40x for a DuelNet step; jax-ml/jax#12868), so the
default ``unroll = 8`` compiles 8 steps unrolled into one program and the iteration
calls it ``ceil(steps / 8)`` times (steps past ``steps`` in the last call are masked
out); each piece is traced once, the data stay on the device and the results are the
same as the scan's up to floating-point rounding.
Metrics: ``loss``, ``policy_loss``, ``value_loss``, ``accuracy`` (the top legal move
of the network is the move played), ``l2``, the same ``val_*`` on the validation set,
``learning_rate`` and ``moves`` (positions trained on).

``data.imitate`` (player names) restricts the policy target to the moves of those
players (e.g. the master in seed 001's third stage); the other positions train the
value only. ``data.generate`` plays games (`experiments.generate_records`) into the
first path when no file matches: how the smoke variants get their tiny dataset. A line
says so, naming the file (relative paths are from the current directory), and another
when a later start reuses it.

**Compiling once.** The learning rate, momentum, weight decay, ``l2``, value weight
and number of iterations (the schedules' length) are inputs of the compiled programs
(`algorithms.common.ShardedLearner`): learners whose configs differ only in those
values, the seed or the evaluation share one set of programs, so a sweep over them
compiles once.

The learner fits `gomoku_jax.training.run` (checkpoints, resume, evaluation, export);
the exported agent searches with the network (``search`` with ``eval.simulations``,
argmax, no noise) like AlphaZero's.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import glob
import math
import os
import warnings
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from algorithms.alphazero import EvalSettings, GameSettings, NetworkSettings, check_run
from algorithms.common import (SearchPlayer, ShardedLearner, make_optimizer, play_search,
                               sgd_step, unused_optimizer_settings)
from gomoku_jax import features, networks, ops, records, symmetry, training
from gomoku_jax import io as gio
from gomoku_jax import search as search_lib
from gomoku_jax.config import changed, check_int, check_number, check_seed, plain_fields
from gomoku_jax.game import Gomoku

__all__ = [
    "DataSettings",
    "Dataset",
    "GenerateSettings",
    "ImitationConfig",
    "ImitationTrainSettings",
    "Learner",
    "TrainState",
    "load_dataset",
    "make_learner",
    "resolve_paths",
]

_BALANCE = ("splits", "games", "none")
_SPLITS = ("black", "white", "draw")  # split ids 0, 1, 2 (a game's winner)


# ----------------------------------------------------------------------------- config
@dataclasses.dataclass(frozen=True)
class GenerateSettings:
    """Games to play into ``out`` (default: ``data.paths[0]``) when no file matches
    ``data.paths`` (`experiments.generate_records.generate`: ``black`` against
    ``white``, any `gomoku_jax.agents.make` names, checked when the config is built,
    from ``opening_stones`` random stones); ``out`` must be one of the files
    ``data.paths`` names."""

    games: int = 8
    black: str = "gomokubot-2"
    white: str = "gomokubot-2"
    opening_stones: int = 4
    workers: int = 1
    seed: int = 0
    out: str | None = None

    def __post_init__(self):
        plain_fields(self)
        check_int("data.generate", "games", self.games)
        check_int("data.generate", "opening_stones", self.opening_stones, 0)
        check_int("data.generate", "workers", self.workers)
        check_seed("data.generate", "seed", self.seed)
        for name in ("black", "white"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"data.generate.{name} must be an agent name, "
                                 f"got {getattr(self, name)!r}")


@dataclasses.dataclass(frozen=True)
class DataSettings:
    """Where the records are and how they are used (see the module docstring).

    ``paths``: records files or glob patterns (relative to the working directory);
    ``max_games``: keep only the first N finished games (files in sorted order);
    ``skip_opening``: leave out the positions of each game's random opening (not the
    players' choices); ``imitate``: player names whose moves are policy targets (empty:
    every move); ``validation_fraction``: share of the games held out (one at least when
    above 0)."""

    paths: tuple[str, ...] = ()
    balance: str = "splits"
    max_games: int | None = None
    skip_opening: bool = True
    imitate: tuple[str, ...] = ()
    validation_fraction: float = 0.05
    generate: GenerateSettings | None = None

    def __post_init__(self):
        plain_fields(self)
        if not self.paths or not all(isinstance(p, str) and p for p in self.paths):
            raise ValueError(f"data.paths must be a non-empty list of records files or glob "
                             f"patterns, got {self.paths!r}")
        if self.balance not in _BALANCE:
            raise ValueError(f"data.balance must be one of {', '.join(_BALANCE)}, "
                             f"got {self.balance!r}")
        if self.max_games is not None:
            check_int("data", "max_games", self.max_games)
        check_number("data", "validation_fraction", self.validation_fraction, 0.0, 0.5)
        if not all(isinstance(p, str) and p for p in self.imitate):
            raise ValueError(f"data.imitate must be a list of player names, got {self.imitate!r}")
        if self.generate is not None:
            out = self.generate.out or self.paths[0]
            if glob.has_magic(out):
                raise ValueError(f"data.generate writes to data.generate.out or else "
                                 f"data.paths[0], which must be a file name, not a pattern: "
                                 f"{out!r}")
            if not any(out == p or _globbed(out, p) for p in self.paths):
                raise ValueError(f"data.generate.out ({out!r}) is not among data.paths "
                                 f"{list(self.paths)}")


@dataclasses.dataclass(frozen=True)
class ImitationTrainSettings:
    """SGD: ``iterations`` iterations of ``steps`` steps (None: one epoch each) of
    ``batch_size`` positions. ``optimizer`` sgd (with ``momentum``), adam or adamw
    (with ``weight_decay``); ``lr_schedule`` constant, cosine (to 0 over all steps) or
    step (/10 at 50% and 75%); ``l2`` weights ``||theta||^2`` in the loss;
    ``validation_batch`` positions per chunk of the validation pass. ``unroll``: SGD
    steps per compiled call, unrolled (0: the whole iteration is one program, a
    ``lax.scan`` over the steps; see the module docstring)."""

    iterations: int = 20
    batch_size: int = 256
    steps: int | None = None
    optimizer: str = "adam"
    learning_rate: float = 0.002
    lr_schedule: str = "constant"
    momentum: float = 0.9
    weight_decay: float = 0.0
    l2: float = 1e-4
    value_weight: float = 1.0
    augment: bool = True
    validation_batch: int = 1024
    unroll: int = 8

    def __post_init__(self):
        plain_fields(self)
        for name in ("iterations", "batch_size", "validation_batch"):
            check_int("train", name, getattr(self, name))
        check_int("train", "unroll", self.unroll, 0)
        if self.steps is not None:
            check_int("train", "steps", self.steps)
        if self.optimizer not in ("sgd", "adam", "adamw"):
            raise ValueError(f"train.optimizer must be 'sgd', 'adam' or 'adamw', "
                             f"got {self.optimizer!r}")
        if self.lr_schedule not in ("constant", "cosine", "step"):
            raise ValueError(f"train.lr_schedule must be 'constant', 'cosine' or 'step', "
                             f"got {self.lr_schedule!r}")
        check_number("train", "learning_rate", self.learning_rate, 0.0, 10.0, low_open=True)
        check_number("train", "momentum", self.momentum, 0.0, 1.0)
        check_number("train", "weight_decay", self.weight_decay, 0.0, 1.0)
        check_number("train", "l2", self.l2, 0.0, 1.0)
        check_number("train", "value_weight", self.value_weight, 0.0, 1e3)


@dataclasses.dataclass(frozen=True)
class ImitationConfig:
    """One imitation experiment (see ``experiments/configs/imitation_*.json``).
    ``search`` is the play-time search of the evaluations and the exported agent
    (with ``eval.simulations``, no noise)."""

    game: GameSettings = GameSettings()
    network: NetworkSettings = NetworkSettings()
    search: search_lib.SearchConfig = search_lib.SearchConfig()
    data: DataSettings = DataSettings(paths=("records.jsonl.gz",))
    train: ImitationTrainSettings = ImitationTrainSettings()
    eval: EvalSettings = EvalSettings()
    seed: int = 0
    checkpoint_every: int = 1

    def __post_init__(self):
        plain_fields(self)
        check_run(self, "policy-value", "imitation")
        if self.data.generate is not None:  # refused now, not at the first iteration
            _check_players(self.data.generate, self.game.env())

    def inert_settings(self, prefix: str = "") -> list[str]:
        """The settings changed from their defaults that do nothing with the others as
        they are (`gomoku_jax.config.load_file` warns of them); the training keys named
        with ``prefix`` in front (a pipeline stage's)."""
        out = unused_optimizer_settings(self.train, prefix)
        if prefix:  # in a pipeline, whose network is named once by the pipeline and whose
            return out  # search is shared with the self-play stage, which trains with it
        out = self.network.inert_settings(self.game.size) + self.search.inert_settings() + out
        # Read only through `play_search`, which also sets the simulations to
        # eval.simulations (not listed: the configs keep search.num_simulations equal to
        # it, and a smoke variant changes only the latter).
        sc = self.search
        out += [f"search.{name} ({getattr(sc, name)}) does nothing for imitation: its agent "
                "searches without noise"
                for name in ("dirichlet_alpha", "dirichlet_fraction", "gumbel_scale")
                if changed(sc, name)]
        return out

    def play_search(self, simulations: int | None = None,
                    algorithm: str | None = None) -> search_lib.SearchConfig:
        """The play-time search (`algorithms.common.play_search`)."""
        return play_search(self.search, self.eval.simulations, simulations, algorithm)

    def batch_sizes(self) -> dict[str, int]:
        """The batches split over the devices, by key (`common.check_batches`)."""
        return {"train.batch_size": self.train.batch_size,
                "train.validation_batch": self.train.validation_batch}


# ------------------------------------------------------------------------- the data
@struct.dataclass
class Dataset:
    """Training positions on the device, sorted by split (black wins, white wins, draws)."""

    board: jax.Array  # [M, N, N] int8, before the move
    player: jax.Array  # [M] int32, the side to move
    last_action: jax.Array  # [M] int32, -1 before the first move
    action: jax.Array  # [M] int32, the move played (policy target)
    value: jax.Array  # [M] float32, the final result for `player`
    policy_weight: jax.Array  # [M] float32, 1 where the move is a policy target
    split_start: jax.Array  # [3] int32, first row of each split
    split_count: jax.Array  # [3] int32, rows of each split
    split_games: jax.Array  # [3] int32, games with rows in each split

    @property
    def size(self) -> int:
        return int(self.player.shape[0])


def _globbed(path: str, pattern: str) -> bool:
    """Whether ``glob.glob(pattern)`` names file ``path`` (were it there): as many path
    parts, each matched by its part of the pattern (a ``*`` never crosses a ``/``, as
    `fnmatch` alone lets it; a name starting with a dot only by a part that does too)."""
    names, parts = Path(path).parts, Path(pattern).parts
    return len(names) == len(parts) and all(
        fnmatch.fnmatchcase(name, part) and (part.startswith(".") or not name.startswith("."))
        for name, part in zip(names, parts))


def resolve_paths(patterns) -> list[str]:
    """The files ``patterns`` name: each a file or a glob pattern (sorted matches)."""
    found: list[str] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else (
            [pattern] if os.path.isfile(pattern) else [])
        seen = {os.path.realpath(f) for f in found}
        for match in matches:  # a file named two ways (relative and absolute) is read once
            if os.path.realpath(match) not in seen:
                seen.add(os.path.realpath(match))
                found.append(match)
    return found


def _count_repeats(games) -> int:
    """How many of ``games`` repeat an earlier one: the same opening and the same moves."""
    return len(games) - len({(g.opening, g.moves) for g in games})


def _say(text: str) -> None:
    """A line of the run's output (process 0's), above a progress bar if one is drawn,
    as `gomoku_jax.training.run` says where a run stands."""
    if jax.process_index() == 0:
        from tqdm.auto import tqdm

        tqdm.write(text)


def _check_players(settings: GenerateSettings, env: Gomoku, load_files: bool = False) -> None:
    """ValueError naming ``data.generate.black`` or ``.white`` unless it is an agent
    that can play ``env`` (an exported one's file is read only with ``load_files``)."""
    for side in ("black", "white"):
        training.check_agent_name(env, getattr(settings, side), f"data.generate.{side}",
                                  load_files)


def _generate(path: str, settings: GenerateSettings, env: Gomoku) -> None:
    """Play ``settings``'s games into ``path`` (a relative one is from the current
    directory) and print a line naming the file in full."""
    from experiments import generate_records

    _check_players(settings, env, load_files=True)
    played = generate_records.generate(
        env.size, env.k, env.rule, settings.games, settings.black, settings.white,
        settings.opening_stones, settings.workers, settings.seed, progress=False)
    games = [records.Game(env.size, env.k, env.rule, r.moves, r.winner, r.black, r.white,
                          r.opening, f"algorithms.imitation generate seed={settings.seed} "
                          f"game={g}") for g, r in enumerate(played) if not r.forfeit]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    records.write_records(path, games, env, metadata={
        "generator": "algorithms.imitation",
        **{k: v for k, v in dataclasses.asdict(settings).items() if k != "out"}})
    forfeits = len(played) - len(games)
    left_out = f"; {forfeits} lost by forfeit left out" if forfeits else ""
    _say(f"records: played {len(games)} games of {settings.black} against {settings.white} "
         f"(data.generate{left_out}) into {os.path.abspath(path)}")


def _to_dataset(games: list, env: Gomoku, data: DataSettings) -> tuple[Dataset, dict]:
    pos = records.positions(games, env, skip_opening=data.skip_opening)
    winners = np.asarray([g.winner for g in games], np.int64)
    game_split = np.where(winners < 0, 2, winners)  # each game's split id
    split = game_split[pos.game]
    if data.imitate:
        names = [(g.black, g.white) for g in games]
        weight = np.asarray([names[gi][p] in data.imitate for gi, p in zip(pos.game, pos.player)],
                            np.float32)
    else:
        weight = np.ones(pos.player.shape, np.float32)
    order = np.argsort(split, kind="stable")
    count = np.bincount(split, minlength=3).astype(np.int32)
    start = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int32)
    games_in = np.bincount(game_split[np.unique(pos.game)], minlength=3).astype(np.int32)
    dataset = Dataset(board=pos.boards[order], player=pos.player[order],
                      last_action=pos.last_action[order], action=pos.action[order],
                      value=pos.value[order], policy_weight=weight[order],
                      split_start=start, split_count=count, split_games=games_in)
    summary = {"games": len(games), "positions": int(pos.player.shape[0]),
               **{f"positions_{name}": int(c) for name, c in zip(_SPLITS, count)},
               "policy_targets": int(weight.sum())}
    return dataset, summary


def load_dataset(config: ImitationConfig, errors: list | None = None
                 ) -> tuple[Dataset, Dataset, dict]:
    """``(train, validation, summary)`` from ``config.data`` (NumPy arrays; see the
    module docstring). Malformed games are appended to ``errors`` (a list of
    `gomoku_jax.records.RecordError`) and warned about."""
    data = config.data
    env = Gomoku(config.game.size, config.game.k, config.game.rule)
    for pattern in data.paths:
        if os.path.isdir(pattern):  # else matched nothing, quietly
            shown = os.path.join(pattern, "*.jsonl.gz")
            raise ValueError(f"data.paths: {pattern} is a folder; name its records files with "
                             f"a pattern, e.g. {shown}")
    files = resolve_paths(data.paths)
    if not files and data.generate is not None:
        _generate(data.generate.out or data.paths[0], data.generate, env)
        files = resolve_paths(data.paths)
    elif files and data.generate is not None:  # played by an earlier start, or given
        named = (os.path.abspath(files[0]) if len(files) == 1 else
                 f"the {len(files)} files matching {list(data.paths)} in {os.getcwd()}")
        _say(f"records: reusing {named} (data.generate plays games only when no file "
             "matches data.paths)")
    if not files:
        raise ValueError(f"data.paths: no records file matches {list(data.paths)} (from "
                         f"{os.getcwd()}); generate some with `gomoku-jax records generate` "
                         "or set data.generate")
    unmatched = [p for p in data.paths if not resolve_paths([p])]
    if unmatched:
        raise ValueError(f"data.paths: {unmatched} match no records file (from "
                         f"{os.getcwd()}), while the others match {len(files)}; each file or "
                         "pattern named must match one at least (a typo, or a file gone, "
                         "would train on less than asked)")
    games, problems = [], []
    for path in files:
        found = []
        games += records.read_records(path, env, on_error="skip", errors=found)
        problems += found
    for problem in problems:
        warnings.warn(f"skipped a malformed game record: {problem}", records.RecordWarning,
                      stacklevel=2)
    if errors is not None:
        errors.extend(problems)
    unfinished = sum(g.winner is None for g in games)
    games = [g for g in games if g.winner is not None]
    if data.max_games is not None:
        games = games[: data.max_games]
    if not games:
        raise ValueError(f"data.paths: the records in {files} hold no finished game")
    duplicates = _count_repeats(games)
    if duplicates:
        _say(f"records: {duplicates} of the {len(games)} finished games repeat an earlier one "
             "move for move (deterministic players from the same opening, or the same records "
             "twice); they are kept, so they weigh more, and validation games may repeat "
             "training ones")
    rng = np.random.default_rng(config.seed)
    order = rng.permutation(len(games))
    n_val = int(round(data.validation_fraction * len(games)))
    if data.validation_fraction > 0:  # a share asked for holds out one game at least
        n_val = max(n_val, 1)
        if n_val >= len(games):
            raise ValueError(f"data.validation_fraction ({data.validation_fraction}) holds out "
                             f"{n_val} of the {len(games)} finished games, which leaves none "
                             "to train on; give more games or set it to 0")
    val_idx, train_idx = np.sort(order[:n_val]), np.sort(order[n_val:])
    train, train_summary = _to_dataset([games[i] for i in train_idx], env, data)
    if data.imitate and train_summary["policy_targets"] == 0:
        players = sorted({name for g in games for name in (g.black, g.white)})
        raise ValueError(f"data.imitate: {list(data.imitate)} played no move of the training "
                         f"games, so there is no policy target; their players are "
                         f"{players[:10]}{' ...' if len(players) > 10 else ''}")
    val, val_summary = _to_dataset([games[i] for i in val_idx], env, data)
    if data.imitate and val.size and val_summary["policy_targets"] == 0:
        _say(f"records: data.imitate's players {list(data.imitate)} played no move of the "
             f"{len(val_idx)} validation games, so val_policy_loss and val_accuracy have no "
             "target and read 0")
    if train.size == 0:
        raise ValueError("data: no training position is left (every position is in an opening?)")
    summary = {"files": files, "malformed": len(problems), "unfinished": unfinished,
               "duplicates": duplicates,
               "train": train_summary, "validation": val_summary}
    return train, val, summary


# ------------------------------------------------------------------------ the state
@struct.dataclass
class TrainState:
    variables: Any  # {'params': ...[, 'batch_stats': ...]}
    opt_state: Any
    key: jax.Array  # [2] uint32
    iteration: jax.Array  # [] int32, iterations done


def _masked_log_softmax(logits, legal):
    return jax.nn.log_softmax(jnp.where(legal, logits, -1e9), axis=-1)


# ---------------------------------------------------------------------- the learner
class Learner(SearchPlayer, ShardedLearner):
    """The compiled pieces of one imitation config. Build with `make_learner`.

    The records are read at the first ``iteration`` (or ``load_data()``), so building a
    learner to export or play a trained run needs no records."""

    algorithm = "imitation"
    play_name = "imitation"
    play_label = "Learner (imitation)"

    HYPERPARAMETERS = ("train.learning_rate", "train.momentum", "train.weight_decay",
                       "train.l2", "train.value_weight", "train.iterations")

    def __init__(self, config: ImitationConfig, devices=None):
        self._setup_player(config)
        self._setup_mesh(devices, config.batch_sizes())
        self._derive()
        self.data_errors: list = []
        self.data_summary: dict | None = None
        self._data = None
        # five programs shared by the learners whose configs differ only in traced
        # settings (`ShardedLearner`); they read the records only through their
        # arguments, never the learner's own loaded data
        self._setup_programs(replicated_inputs=2)  # init; the scanned iteration
        state_sh, rep, cls = self.state_sharding(), self._rep, type(self)
        self._plan = self._shared_program("plan", cls._plan_impl, in_shardings=(state_sh, rep),
                                          out_shardings=rep)
        self._chunk = self._shared_program("chunk", cls._chunk_impl, out_shardings=rep,
                                           donate_argnums=(0, 1))
        self._finish = self._shared_program("finish", cls._finish_impl,
                                            out_shardings=(state_sh, rep), donate_argnums=(0, 1))

    def _derive(self) -> None:
        self.tx = make_optimizer(self.config.train)

    @property
    def trace_count(self) -> int:
        """How many times the programs of an iteration were traced (the scanned one,
        or the chunk of steps and the finish), by any of the learners sharing them."""
        return sum(p.traces for p in (self._iteration, self._chunk, self._finish))

    # ------------------------------------------------------------------------ data
    def load_data(self) -> tuple[Dataset, Dataset]:
        """The training and validation sets on the devices (read once)."""
        if self._data is None:
            train, val, self.data_summary = load_dataset(self.config, self.data_errors)
            self._data = jax.device_put((train, val), self._rep)
        return self._data

    def data_fingerprint(self) -> dict:
        """The records files this run trains on (those ``data.paths`` names, read here if
        not yet), each with its size and SHA-256: `gomoku_jax.training.run` keeps them in
        the work directory and refuses to resume on other files."""
        self.load_data()
        return {"files": [{"path": path, "bytes": os.path.getsize(path),
                           "sha256": gio.file_sha256(path)} for path in self.data_summary["files"]]}

    @property
    def steps_per_iteration(self) -> int:
        """SGD steps per iteration (``train.steps``, or one epoch of the loaded data)."""
        return self._step_count(self.load_data()[0])

    def _step_count(self, train: Dataset) -> int:
        """SGD steps per iteration on ``train`` (the compiled programs read the data
        they are given, never the learner's own)."""
        cfg = self.config.train
        if cfg.steps is not None:
            return cfg.steps
        return max(1, math.ceil(train.size / cfg.batch_size))

    # --------------------------------------------------------------------- state
    def init_variables(self, key) -> Any:
        return networks.init_network(self.module, key, self.env.observation_shape,
                                     "policy-value")

    def state_sharding(self) -> TrainState:
        shape = jax.eval_shape(self._init_impl, jax.random.PRNGKey(0))
        return jax.tree.map(lambda _: self._rep, shape)

    def _init_impl(self, key) -> TrainState:
        key, net_key = jax.random.split(key)
        variables = self.init_variables(net_key)
        return TrainState(variables=variables, opt_state=self.tx.init(variables["params"]),
                          key=key, iteration=jnp.int32(0))

    # ------------------------------------------------------------------ batches
    def _sample(self, data: Dataset, key, count: int) -> jax.Array:
        """``[count]`` row indices of ``data`` for one iteration."""
        m = data.size
        balance = self.config.data.balance
        if balance in ("splits", "games"):
            k_split, k_row = jax.random.split(key)
            nonempty = data.split_count > 0
            weight = 0.0  # "splits": each non-empty split alike
            if balance == "games":  # each in proportion to its positions per game
                per_game = data.split_count / jnp.maximum(data.split_games, 1)
                weight = jnp.log(jnp.where(nonempty, per_game, 1.0))
            split = jax.random.categorical(
                k_split, jnp.where(nonempty, weight, -jnp.inf), shape=(count,))
            u = jax.random.uniform(k_row, (count,))
            offset = jnp.floor(u * data.split_count[split]).astype(jnp.int32)
            return data.split_start[split] + jnp.minimum(offset, data.split_count[split] - 1)
        repeats = -(-count // m)
        perms = [jax.random.permutation(k, m) for k in jax.random.split(key, repeats)]
        return jnp.concatenate(perms)[:count]

    def _batch(self, data: Dataset, rows: jax.Array) -> dict:
        return {name: getattr(data, name)[rows] for name in
                ("board", "player", "last_action", "action", "value", "policy_weight")}

    def _augment(self, batch: dict, key) -> dict:
        """Each position under its own random symmetry: board, move and last move."""
        n = self.env.size
        t = jax.random.randint(key, batch["player"].shape, 0, symmetry.NUM_TRANSFORMS)
        move = functools.partial(symmetry.transform_action, size=n)
        return dict(batch, board=jax.vmap(symmetry.transform_board)(batch["board"], t),
                    action=move(batch["action"], t), last_action=move(batch["last_action"], t))

    def _terms(self, logits, value, batch: dict) -> dict:
        """Per-batch loss terms (sums and means) from the network's outputs."""
        logits, value = logits.astype(jnp.float32), value.astype(jnp.float32)
        b = batch["player"].shape[0]
        legal = (batch["board"] == 0).reshape(b, -1)
        logp = _masked_log_softmax(logits, legal)
        chosen = jnp.take_along_axis(logp, batch["action"][:, None], axis=1)[:, 0]
        best = ops.argmax(jnp.where(legal, logits, -jnp.inf), axis=-1)
        w = batch["policy_weight"]
        return {"policy_sum": -jnp.sum(w * chosen),
                "correct_sum": jnp.sum(w * (best == batch["action"])),
                "weight_sum": jnp.sum(w),
                "value_sum": jnp.sum((value - batch["value"]) ** 2),
                "count": jnp.float32(b)}

    def _observe(self, batch: dict) -> jax.Array:
        return features.observe_position(batch["board"], batch["player"],
                                         batch["last_action"], self.env.observation_spec)

    def _loss(self, params, batch_stats, batch: dict):
        cfg = self.config.train
        (logits, value), new_stats = networks.apply_train(self.module, params, batch_stats,
                                                          self._observe(batch))
        t = self._terms(logits, value, batch)
        policy_loss = t["policy_sum"] / jnp.maximum(t["weight_sum"], 1.0)
        value_loss = t["value_sum"] / t["count"]
        l2 = sum(jnp.sum(jnp.square(p)) for p in jax.tree.leaves(params))
        total = policy_loss + cfg.value_weight * value_loss + cfg.l2 * l2
        accuracy = t["correct_sum"] / jnp.maximum(t["weight_sum"], 1.0)
        aux = dict(loss=total, policy_loss=policy_loss, value_loss=value_loss, l2=l2,
                   accuracy=accuracy)
        return total, (aux, new_stats)

    def learning_rate(self, step, total_steps: int):
        """The rate of global SGD step ``step`` (of ``total_steps`` planned)."""
        cfg = self.config.train
        frac = step / total_steps
        if cfg.lr_schedule == "cosine":
            return cfg.learning_rate * 0.5 * (1.0 + jnp.cos(jnp.pi * jnp.minimum(frac, 1.0)))
        if cfg.lr_schedule == "step":
            return cfg.learning_rate * jnp.where(frac >= 0.75, 0.01,
                                                 jnp.where(frac >= 0.5, 0.1, 1.0))
        return jnp.float32(cfg.learning_rate) + 0.0 * frac

    def _validate(self, variables, val: Dataset) -> dict:
        """Validation losses over every validation position (no augmentation)."""
        chunk = self.config.train.validation_batch
        m = val.size
        chunks = -(-m // chunk)
        rows = jnp.arange(chunks * chunk)
        inside = (rows < m).reshape(chunks, chunk)
        rows = jnp.minimum(rows, m - 1).reshape(chunks, chunk)

        def one(args):
            r, keep = args
            batch = self._constrain(self._batch(val, r))
            batch["policy_weight"] = batch["policy_weight"] * keep
            logits, value = self.module.apply(variables, self._observe(batch), train=False)
            t = self._terms(logits, value, batch)
            t["value_sum"] = jnp.sum(jnp.where(keep, (value.astype(jnp.float32)
                                                      - batch["value"]) ** 2, 0.0))
            t["count"] = jnp.sum(keep).astype(jnp.float32)
            return t

        if self.config.train.unroll and chunks <= 8:  # unrolled like the SGD steps
            t = jax.tree.map(lambda *x: sum(x), *[one((rows[c], inside[c]))
                                                   for c in range(chunks)])
        else:
            t = jax.tree.map(jnp.sum, jax.lax.map(one, (rows, inside)))
        return {"val_policy_loss": t["policy_sum"] / jnp.maximum(t["weight_sum"], 1.0),
                "val_value_loss": t["value_sum"] / jnp.maximum(t["count"], 1.0),
                "val_accuracy": t["correct_sum"] / jnp.maximum(t["weight_sum"], 1.0)}

    # ---------------------------------------------------------------- iteration
    def iteration(self, state: TrainState):
        """One iteration (see the module docstring): ``(state, metrics)``."""
        train, val = self.load_data()
        if self.config.train.unroll == 0:
            return self._iteration(state, train, val, self._hyper)
        k = self.config.train.unroll
        key, rows, keys, active = self._plan(state, train, self._hyper)
        variables, opt_state, parts = state.variables, state.opt_state, []
        first = state.iteration * self.steps_per_iteration
        for c in range(rows.shape[0]):
            variables, opt_state, aux = self._chunk(variables, opt_state, rows[c], keys[c],
                                                    active[c], first + c * k, train,
                                                    self._hyper)
            parts.append(aux)
        return self._finish(variables, opt_state, key, state.iteration, parts, active, val,
                            self._hyper)

    def _plan_impl(self, state: TrainState, train: Dataset):
        """The iteration's new key, rows ``[C, K, B]``, step keys ``[C, K]`` and which
        of the ``C * K`` steps are real ``[C, K]`` (``K = unroll``, or all steps in one
        chunk for ``unroll = 0``)."""
        cfg = self.config.train
        steps, b = self._step_count(train), cfg.batch_size
        k = cfg.unroll or steps
        chunks = -(-steps // k)
        key, k_rows, k_steps = jax.random.split(state.key, 3)
        rows = self._sample(train, k_rows, chunks * k * b).reshape(chunks, k, b)
        keys = jax.random.split(k_steps, chunks * k).reshape(chunks, k, -1)
        active = (jnp.arange(chunks * k) < steps).reshape(chunks, k)
        return key, rows, keys, active

    def _steps(self, variables, opt_state, rows, keys, active, first, train: Dataset,
               scan: bool):
        """SGD steps on ``rows [S, B]`` (inactive steps change nothing); per-step aux."""
        cfg = self.config.train
        total_steps = self._step_count(train) * cfg.iterations

        def step(carry, xs):
            variables, opt_state = carry
            r, k, on, i = xs
            batch = self._batch(train, r)
            if cfg.augment:
                batch = self._augment(batch, k)
            batch = self._constrain(batch)
            lr = jnp.asarray(self.learning_rate(first + i, total_steps), jnp.float32)
            opt_state = opt_state._replace(
                hyperparams={**opt_state.hyperparams, "learning_rate": lr})
            variables, opt_state, aux = sgd_step(self._loss, self.tx, variables, opt_state,
                                                 on, batch)
            return (variables, opt_state), dict(aux, learning_rate=lr)

        xs = (rows, keys, active, jnp.arange(rows.shape[0]))
        if scan:
            (variables, opt_state), aux = jax.lax.scan(step, (variables, opt_state), xs)
            return variables, opt_state, aux
        auxes = []
        for i in range(rows.shape[0]):  # unrolled: no loop in the compiled program
            (variables, opt_state), aux = step((variables, opt_state),
                                               jax.tree.map(lambda x: x[i], xs))
            auxes.append(aux)
        return variables, opt_state, jax.tree.map(lambda *x: jnp.stack(x), *auxes)

    def _chunk_impl(self, variables, opt_state, rows, keys, active, first, train: Dataset):
        return self._steps(variables, opt_state, rows, keys, active, first, train, scan=False)

    def _finish_impl(self, variables, opt_state, key, iteration, parts, active, val: Dataset):
        aux = jax.tree.map(lambda *x: jnp.concatenate(x), *parts)
        on = active.reshape(-1)
        # where, not a product: a padding step's aux is NaN (sgd_step), and NaN * 0 is NaN
        metrics = jax.tree.map(lambda x: jnp.sum(jnp.where(on, x, 0.0)) / jnp.sum(on), aux)
        if val.size:
            metrics.update(self._validate(variables, val))
        metrics["moves"] = jnp.sum(active, dtype=jnp.int32) * self.config.train.batch_size
        state = TrainState(variables=variables, opt_state=opt_state, key=key,
                           iteration=iteration + 1)
        return state, metrics

    def _iteration_impl(self, state: TrainState, train: Dataset, val: Dataset):
        """The whole iteration as one program (``unroll = 0``: a ``lax.scan``)."""
        key, rows, keys, active = self._plan_impl(state, train)
        first = state.iteration * self._step_count(train)
        variables, opt_state, aux = self._steps(state.variables, state.opt_state, rows[0],
                                                keys[0], active[0], first, train, scan=True)
        return self._finish_impl(variables, opt_state, key, state.iteration, [aux], active, val)


def make_learner(config: ImitationConfig, devices=None) -> Learner:
    """The learner for ``config``; batches sharded over ``devices`` (default: all)."""
    return Learner(config, devices)
