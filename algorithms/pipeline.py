"""Seed 001's three-stage training (section IV-A) as one experiment.

1. **Imitation** (``stage1_imitation/``): `algorithms.imitation` on game records
   (seed 001 IV-D: games between strong bots, split by winner and drawn equally).
2. **Self-play** (``stage2_selfplay/``): `algorithms.alphazero` starting from stage 1's
   params (seed 001 V-C: "we use the best model derived from imitation learning and let
   it practice by playing games against itself": ``handover = "best"``).
3. **Competing with the master** (``stage3_master/``): seed 001 V-D says only that the
   third-stage model "is trained by the data collected from playing against GomokuBot".
   Our reading: ``master.rounds`` rounds; in each, the current network (searching
   ``master.simulations`` simulations per move, argmax) plays ``master.games`` games
   against the master agent (``master.agent``, a `gomoku_jax.agents.make` name such as
   ``gomokubot-4``; colours alternate, ``master.opening_stones`` random opening stones)
   through `gomoku_jax.arena.play_match`; the games are stored as records
   (``round_RRR/games.jsonl.gz``) and the network is trained on every round's games so
   far with the imitation loss (``round_RRR/train/``): with ``master.imitate =
   "master"`` the policy imitates the master's moves only and the value learns from
   every position (the final result from the side to move); ``"all"`` imitates both
   sides. Each round starts from the previous round's final params.

Every stage is an ordinary training run (`gomoku_jax.training.run`: checkpoints,
metrics, TensorBoard, evaluation, ``final.gjx``) in its own subdirectory, and starts
from the previous stage's final params, or with ``handover = "best"`` from the best of
its periodic evaluations (``best.gjx``, seed 001 V-C's "best model"; the final params
when the stage wrote none): the hand-over writes them to the new stage's
``start.gjx`` and checks that the trees match (same network). The pipeline itself is
a learner of three iterations, one per stage, driven by `training.run` in the workdir:
its ``metrics.csv`` has one row per stage, its checkpoints say which stages are done,
``eval.every = 1`` evaluates after each stage, and its ``final.gjx`` / ``report.md`` are
the final network's. Resume: run the same command again; a finished stage (its
``done.json``) is not run again and the stage in progress resumes from its own
checkpoints. `Pipeline.run` (what ``gomoku-jax train`` calls) binds the workdir.
"""

from __future__ import annotations

import dataclasses
import json
import time
import types
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from algorithms import alphazero as az
from algorithms import imitation as im
from algorithms.common import SearchPlayer, check_batches, play_search
from gomoku_jax import agents as agents_lib
from gomoku_jax import arena, exported, networks, records, training
from gomoku_jax import io as gio
from gomoku_jax import search as search_lib
from gomoku_jax.config import SEED_MAX, check_int, check_seed, offset_seed, plain_fields

__all__ = [
    "ImitationStage",
    "MasterStage",
    "Pipeline",
    "PipelineConfig",
    "PipelineState",
    "STAGES",
    "SelfPlayStage",
    "make_learner",
    "start_from",
]

STAGES = ("stage1_imitation", "stage2_selfplay", "stage3_master")
# The config key of each stage's own settings, in the order of STAGES
_STAGE_KEYS = ("imitation", "selfplay", "master")
HANDOVERS = ("final", "best")  # what a stage hands to the next (`Pipeline.handed_over`)


# ----------------------------------------------------------------------------- config
@dataclasses.dataclass(frozen=True)
class ImitationStage:
    """Stage 1: `algorithms.imitation` settings (game, network, search and seed are the
    pipeline's)."""

    data: im.DataSettings = im.DataSettings(paths=("records.jsonl.gz",))
    train: im.ImitationTrainSettings = im.ImitationTrainSettings()
    eval: az.EvalSettings = az.EvalSettings()


@dataclasses.dataclass(frozen=True)
class SelfPlayStage:
    """Stage 2: `algorithms.alphazero` settings (the search is the pipeline's)."""

    tactical: search_lib.TacticalPrior | None = None
    selfplay: az.SelfPlaySettings = az.SelfPlaySettings()
    train: az.TrainSettings = az.TrainSettings()
    eval: az.EvalSettings = az.EvalSettings()


@dataclasses.dataclass(frozen=True)
class MasterStage:
    """Stage 3 (see the module docstring): ``rounds`` x (``games`` against ``agent``,
    then imitation training on all the games so far with ``train``).
    ``validation_fraction``: share of those games held out (one at least when above 0),
    drawn afresh each round (with the round's seed), so a round can validate on games an
    earlier round trained on."""

    agent: str = "gomokubot-4"
    rounds: int = 4
    games: int = 20
    opening_stones: int = 2
    simulations: int = 64
    imitate: str = "master"
    balance: str = "none"
    validation_fraction: float = 0.0
    train: im.ImitationTrainSettings = im.ImitationTrainSettings(iterations=4)
    eval: az.EvalSettings = az.EvalSettings()

    def __post_init__(self):
        plain_fields(self)
        check_int("master", "rounds", self.rounds)
        check_int("master", "games", self.games)
        check_int("master", "opening_stones", self.opening_stones, 0)
        check_int("master", "simulations", self.simulations)
        if self.imitate not in ("master", "all"):
            raise ValueError(f"master.imitate must be 'master' or 'all', got {self.imitate!r}")
        if not isinstance(self.agent, str) or not self.agent:
            raise ValueError(f"master.agent must be an agent name, got {self.agent!r}")
        # the data settings of a round are checked when the pipeline builds them
        im.DataSettings(paths=("x",), balance=self.balance,
                        validation_fraction=self.validation_fraction)
        if self.validation_fraction > 0 and self.games < 2:
            raise ValueError(f"master.validation_fraction ({self.validation_fraction}) holds "
                             f"out one game at least, so the first round's master.games "
                             f"({self.games}) would leave none to train on; play 2 games a "
                             "round at least or set it to 0")


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Seed 001's three stages (see ``experiments/configs/pipeline_*.json``). ``game``,
    ``network``, ``search`` (self-play search of stage 2; every agent plays it with its
    stage's ``eval.simulations``, no noise) and ``seed`` are shared by the stages;
    ``eval`` is the pipeline's own evaluation (after each stage with ``every = 1``, and
    the final one)."""

    game: az.GameSettings = az.GameSettings()
    network: az.NetworkSettings = az.NetworkSettings(name="duelnet")
    search: search_lib.SearchConfig = search_lib.SearchConfig()
    imitation: ImitationStage = ImitationStage()
    selfplay: SelfPlayStage = SelfPlayStage()
    master: MasterStage = MasterStage()
    eval: az.EvalSettings = az.EvalSettings()
    seed: int = 0
    checkpoint_every: int = 1
    handover: str = "final"

    def __post_init__(self):
        plain_fields(self)
        check_seed("config", "seed", self.seed)
        if self.handover not in HANDOVERS:
            raise ValueError(f"config.handover must be one of {', '.join(HANDOVERS)} (the "
                             f"params a stage hands to the next), got {self.handover!r}")
        # the stages train with seed + 1 (self-play) and seed + 2 + r (master round r)
        top = SEED_MAX - 2 - (self.master.rounds - 1)
        if self.seed > top:
            raise ValueError(f"config.seed must be at most {top} here: the stages train with "
                             f"seeds up to seed + {2 + self.master.rounds - 1} (self-play "
                             f"seed + 1, master round r seed + 2 + r), got {self.seed}")
        check_int("config", "checkpoint_every", self.checkpoint_every)
        if self.checkpoint_every != 1:
            raise ValueError("checkpoint_every must be 1 for a pipeline (one checkpoint per "
                             f"stage), got {self.checkpoint_every}")
        for stage, key in enumerate(_STAGE_KEYS):
            try:  # every stage's config builds; an error says whose settings it is about
                self.stage_config(stage)
            except ValueError as error:
                raise ValueError(f"the {key} stage's settings: {error}") from None
        env = self.game.env()
        training.check_evaluation(env, self.eval.opponents, self.eval.opening_stones)
        arena.check_opening_stones(env, self.master.opening_stones, "master.opening_stones")
        training.check_agent_name(env, self.master.agent, "master.agent")

    @property
    def train(self):
        """What the training driver reads: one iteration per stage."""
        return types.SimpleNamespace(iterations=len(STAGES))

    def stage_config(self, stage: int, round_files: tuple[str, ...] = ("round.jsonl.gz",),
                     round_index: int = 0, master_name: str | None = None):
        """The config of ``stage`` (0, 1, 2); stage 2's round ``round_index`` trains on
        ``round_files``, imitating ``master_name``'s moves."""
        shared = dict(game=self.game, network=self.network, search=self.search,
                      checkpoint_every=1)
        if stage == 0:
            s = self.imitation
            return im.ImitationConfig(data=s.data, train=s.train, eval=s.eval, seed=self.seed,
                                      **shared)
        if stage == 1:
            s = self.selfplay
            return az.AlphaZeroConfig(tactical=s.tactical, selfplay=s.selfplay, train=s.train,
                                      eval=s.eval, seed=self.seed + 1, **shared)
        m = self.master
        imitate = (master_name or m.agent,) if m.imitate == "master" else ()
        data = im.DataSettings(paths=tuple(round_files), balance=m.balance,
                               skip_opening=True, imitate=imitate,
                               validation_fraction=m.validation_fraction)
        return im.ImitationConfig(data=data, train=m.train, eval=m.eval,
                                  seed=self.seed + 2 + round_index, **shared)

    def play_search(self, simulations: int | None = None,
                    algorithm: str | None = None) -> search_lib.SearchConfig:
        """The play-time search (`algorithms.common.play_search`)."""
        return play_search(self.search, self.eval.simulations, simulations, algorithm)

    def inert_settings(self) -> list[str]:
        """Each stage's settings that do nothing with the others as they are
        (`gomoku_jax.config.load_file` warns of them), named by the stage's keys, and the
        network's options and search settings that do nothing."""
        return self.network.inert_settings(self.game.size) + self.search.inert_settings() + [
            text for stage, key in enumerate(_STAGE_KEYS)
            for text in self.stage_config(stage).inert_settings(prefix=f"{key}.")]


# ------------------------------------------------------------------- hand-over
class _StartFrom:
    """``learner`` whose fresh state holds ``variables`` instead of a new network."""

    def __init__(self, learner, variables):
        self._learner = learner
        mismatch = networks.variables_mismatch(learner.module, variables,
                                               learner.env.observation_shape)
        if mismatch:
            raise ValueError("the starting params do not fit this stage's network: "
                             + "; ".join(mismatch))
        self._variables = jax.tree.map(np.asarray, jax.device_get(variables))  # own copy

    def __getattr__(self, name):
        return getattr(self._learner, name)

    def init(self, key=None):
        state = self._learner.init(key)
        leaves = jax.tree.leaves(state.variables)
        if not all(hasattr(x, "sharding") for x in leaves):  # traced (jax.eval_shape)
            return state.replace(variables=jax.tree.map(jnp.asarray, self._variables))
        sharding = jax.tree.map(lambda x: x.sharding, state.variables)
        return state.replace(variables=jax.device_put(self._variables, sharding))


def start_from(learner, variables):
    """``learner`` (a training-driver learner) starting from ``variables`` (a network's
    variables: ``params`` and any ``batch_stats``) instead of a fresh network; their
    shapes must be the ones its network has (else ``ValueError``). The optimizer
    state starts fresh."""
    return _StartFrom(learner, variables)


def _read_variables(path: Path):
    return gio.read_exported(path)[1]


# ------------------------------------------------------------------------ state
@struct.dataclass
class PipelineState:
    variables: Any  # the network after the last finished stage
    iteration: jax.Array  # [] int32, stages done


class Pipeline(SearchPlayer):
    """The three stages as one learner of three iterations (see the module docstring).
    Run it with `Pipeline.run` (``gomoku-jax train`` does)."""

    algorithm = "pipeline"
    play_name = "pipeline"
    play_label = "Pipeline's final network"

    def __init__(self, config: PipelineConfig, devices=None):
        self._setup_player(config)
        self.devices = devices
        devs = list(jax.devices() if devices is None else devices)
        # every stage's batches, now: not once the stages before one have trained
        check_batches(len(devs), {
            f"{key}.{name}": size for stage, key in enumerate(_STAGE_KEYS)
            for name, size in config.stage_config(stage).batch_sizes().items()})
        self._rep = NamedSharding(Mesh(np.asarray(devs), ("data",)), P())
        self.workdir: Path | None = None
        self.progress = True
        self.tensorboard = True

    # ----------------------------------------------------------------- driver
    def run(self, workdir, **kwargs) -> dict:
        """`gomoku_jax.training.run` of the pipeline in ``workdir`` (same keywords). One
        process only: its stages hand files (games, params) to each other."""
        if jax.process_count() > 1:
            raise ValueError(
                f"a pipeline runs in one process ({jax.process_count()} here, with "
                "jax.distributed): its stages pass games and params on through files; train "
                "its stages' configs one by one to spread them over processes")
        self.workdir = Path(workdir).resolve()  # orbax wants absolute checkpoint paths
        self.progress = kwargs.get("progress", True)
        self.tensorboard = kwargs.get("tensorboard", True)
        return training.run(self, self.workdir, **kwargs)

    def init(self, key=None) -> PipelineState:
        key = jax.random.PRNGKey(self.config.seed) if key is None else key
        variables = networks.init_network(self.module, key, self.env.observation_shape,
                                          "policy-value")
        return PipelineState(variables=jax.device_put(variables, self._rep),
                             iteration=jax.device_put(jnp.int32(0), self._rep))

    def state_sharding(self) -> PipelineState:
        return jax.tree.map(lambda _: self._rep, jax.eval_shape(self.init))

    def iteration(self, state: PipelineState):
        """Run the next stage (resuming it if it was interrupted): ``(state, metrics)``."""
        if self.workdir is None:
            raise RuntimeError("a pipeline runs through Pipeline.run(workdir), which binds "
                               "the directory its stages write into")
        stage = int(state.iteration)
        start = None if stage == 0 else state.variables
        t0 = time.perf_counter()
        directory = self.workdir / STAGES[stage]
        done = directory / "done.json"
        if done.exists():
            metrics = json.loads(done.read_text())
        else:
            runner = (self._imitation, self._selfplay, self._master)[stage]
            metrics = runner(directory, start)
            metrics = dict(metrics, stage=stage + 1,
                           stage_seconds=time.perf_counter() - t0)
            gio.write_atomic(done, json.dumps(metrics, indent=2) + "\n")  # whole or absent
        variables = _read_variables(self.handed_over(directory))
        new = PipelineState(variables=jax.device_put(variables, self._rep),
                            iteration=jax.device_put(jnp.int32(stage + 1), self._rep))
        return new, metrics

    def handed_over(self, directory: Path) -> Path:
        """The exported params a finished stage in ``directory`` hands to the next (and,
        after the last, to the pipeline's end): its ``final.gjx``, or with ``handover =
        "best"`` its ``best.gjx`` where its evaluations wrote one."""
        best = directory / "best.gjx"
        return best if self.config.handover == "best" and best.exists() else (
            directory / "final.gjx")

    # ----------------------------------------------------------------- stages
    def _train(self, learner, directory: Path, start) -> dict:
        """One training run of ``learner`` in ``directory`` from ``start`` (or fresh)."""
        directory.mkdir(parents=True, exist_ok=True)
        if start is not None:
            learner = start_from(learner, start)
            exported.export_agent(directory / "start.gjx", learner, start,
                                  extra={"iteration": 0})
        report = training.run(learner, directory, progress=self.progress,
                              tensorboard=self.tensorboard)
        metrics = {"stage_iterations": report["iterations"]}
        for name, r in report["evaluation"].items():
            metrics[f"stage_eval_{name}"] = r["score"]
        rows = _rows(directory / "metrics.csv")
        # the losses of the last iteration that took an SGD step (a stage whose buffer never
        # filled has none: its rows log NaN losses)
        stepped = [r for r in rows if r.get("trained") not in ("False", "0", "0.0")]
        last = stepped[-1] if stepped else {}
        for key in ("policy_loss", "value_loss", "accuracy", "val_policy_loss",
                    "val_accuracy"):
            if last.get(key) not in ("", None):
                metrics[key] = float(last[key])
        metrics["moves"] = sum(int(float(r["moves"])) for r in rows)
        return metrics

    def _imitation(self, directory: Path, start) -> dict:
        learner = im.make_learner(self.config.stage_config(0), self.devices)
        return self._train(learner, directory, start)

    def _selfplay(self, directory: Path, start) -> dict:
        learner = az.make_learner(self.config.stage_config(1), self.devices)
        return self._train(learner, directory, start)

    def _master(self, directory: Path, start) -> dict:
        cfg, m = self.config, self.config.master
        master = agents_lib.make(m.agent, self.env)
        files: list[str] = []
        variables = start
        totals = {"master_games": 0, "master_wins": 0, "master_losses": 0, "master_draws": 0}
        metrics: dict = {}
        summed = {"stage_iterations": 0, "moves": 0}  # over the rounds, as the seconds are
        for r in range(m.rounds):
            rdir = directory / f"round_{r:03d}"
            rdir.mkdir(parents=True, exist_ok=True)
            games_file = rdir / "games.jsonl.gz"
            if not games_file.exists():
                self._play_master_games(games_file, variables, master, r)
            files.append(str(games_file))
            score = _learner_score(games_file)
            for k in ("games", "wins", "losses", "draws"):
                totals[f"master_{k}"] += score[k]
            round_cfg = cfg.stage_config(2, tuple(files), r, master.name)
            learner = im.make_learner(round_cfg, self.devices)
            if (rdir / "train" / "final.gjx").exists() and (rdir / "done.json").exists():
                metrics = json.loads((rdir / "done.json").read_text())
            else:
                metrics = self._train(learner, rdir / "train", variables)
                gio.write_atomic(rdir / "done.json", json.dumps(metrics, indent=2) + "\n")
            for key in summed:
                summed[key] += int(metrics.get(key, 0))
            variables = _read_variables(rdir / "train" / "final.gjx")
        gio.write_atomic(directory / "final.gjx", (rdir / "train" / "final.gjx").read_bytes())
        return dict(metrics, **summed, **totals, master_score=(totals["master_wins"] + 0.5 * totals[
            "master_draws"]) / max(totals["master_games"], 1))

    def _play_master_games(self, path: Path, variables, master, round_index: int) -> None:
        m = self.config.master
        agent = search_lib.search_agent("learner", self.env, self.evaluate,
                                        jax.tree.map(jnp.asarray, variables),
                                        self.config.play_search(m.simulations))
        seed = offset_seed(self.config.seed, 7919 * (round_index + 1))
        result = arena.play_match(self.env, agent, master, m.games, seed=seed,
                                  opening_stones=m.opening_stones, progress=self.progress)
        games = [records.Game(self.env.size, self.env.k, self.env.rule, g.moves, g.winner,
                              g.black, g.white, g.opening,
                              f"algorithms.pipeline stage 3 round={round_index} game={i}")
                 for i, g in enumerate(result.records) if not g.forfeit]
        records.write_records(path, games, self.env, metadata={
            "generator": "algorithms.pipeline", "round": round_index, "master": master.name,
            "simulations": m.simulations, "forfeits_left_out": len(result.records) - len(games)})


def _rows(path: Path) -> list[dict]:
    import csv

    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _learner_score(path: Path) -> dict:
    """The learner's wins / losses / draws in a round's games."""
    out = {"games": 0, "wins": 0, "losses": 0, "draws": 0}
    for g in records.read_records(path):
        out["games"] += 1
        if g.winner == -1:
            out["draws"] += 1
        elif (g.black, g.white)[g.winner] == "learner":
            out["wins"] += 1
        else:
            out["losses"] += 1
    return out


def make_learner(config: PipelineConfig, devices=None) -> Pipeline:
    """The pipeline for ``config`` (stages sharded over ``devices``, default: all)."""
    return Pipeline(config, devices)
