"""AlphaZero with PUCT or Gumbel search: one iteration is one compiled program.

``make_learner(config)`` returns a `Learner` whose ``iteration(state)`` plays
``selfplay.steps`` moves of ``selfplay.batch`` games in lockstep with `mctx` search, puts
the positions whose outcome is known into a device-resident replay buffer, and runs the
SGD steps of the iteration, all under one ``jit`` with no host round trip; metrics leave
as returned arrays. Games, the pending trajectory and each training batch are sharded
over every local device along a ``data`` mesh axis; parameters, optimizer state and the
buffer are replicated (several hosts: call ``jax.distributed.initialize`` first, then the
mesh spans every process's devices).

The settings in ``Learner.HYPERPARAMETERS`` (rates, loss weights, temperatures, search
constants, tactical probabilities; see `algorithms.common.ShardedLearner`) are inputs of
the compiled programs, so learners whose configs differ only in them, or in ``seed``,
share one compile.

Self-play never stops: a finished game restarts in place, so the batch stays full.
Value targets ``z`` (the final result from the view of the player to move) are computed
by a backward pass over a window of moves: this iteration's and the pending ones before
them (`AlphaZeroConfig.pending_steps`: ``selfplay.steps``, or one fewer than the board's
cells when that is more, the most moves a game can still take after one of its
positions). A position goes into the buffer as soon as its game's end is in the window,
and it stays pending until then, so no position of a game is lost however long the game
and however few ``selfplay.steps`` (``metrics['dropped']``, the positions that left the
window without a result, stays 0). Before 2026-11-30 the window was two iterations long,
and with ``selfplay.steps`` below the board's cells a long game lost its earliest
positions (seed 000's configs, 52 and 55 steps on 81 cells: more of a long draw's
openings than of a short win's).

With ``search.reuse_tree`` (linear backend, PUCT) each game's search tree is carried
from move to move through the self-play scan: the played child's subtree seeds the next
search, an ended game's tree is emptied, and every iteration starts from empty trees (the
trees are not part of `TrainState`). Policy targets are then the root visit distribution
including the carried visits (as KataGo and Leela Zero train).

The loss is seed 000's eq. (5): ``(z - v)^2 - pi . log p + c ||theta||^2``, with the
policy restricted to legal moves; each sampled position is seen under one of the 8
board symmetries drawn at random (in expectation the same as storing the 8 copies).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import jax
import jax.numpy as jnp
from flax import struct
from jax.sharding import NamedSharding, PartitionSpec as P

from algorithms.common import (SearchPlayer, ShardedLearner, fingerprint, make_optimizer,
                               per_game, play_search, search_objects, select_games,
                               sgd_step, switched_on, unused_optimizer_settings)
from gomoku_jax import agents as agents_lib
from gomoku_jax import features, networks, ops, replay, symmetry, training
from gomoku_jax import search as search_lib
from gomoku_jax.config import changed, check_int, check_number, check_seed, plain_fields
from gomoku_jax.game import Gomoku, State

__all__ = [
    "AlphaZeroConfig",
    "EvalSettings",
    "GameSettings",
    "Learner",
    "NetworkSettings",
    "SelfPlaySettings",
    "TrainSettings",
    "TrainState",
    "check_run",
    "explained_variance",
    "make_learner",
]


# ----------------------------------------------------------------------------- config
@dataclasses.dataclass(frozen=True)
class GameSettings:
    """The game and the observation planes the network sees."""

    size: int = 9
    k: int = 5
    rule: str = "freestyle"
    observation: str = "stones-colour"
    positional_bias: float | None = None

    def __post_init__(self):
        plain_fields(self)
        self.env()  # validates

    def env(self) -> Gomoku:
        return Gomoku(self.size, self.k, self.rule, observation=self.observation,
                      positional_bias=self.positional_bias)


def _frozen(value):
    """``value`` hashable, equal values alike (``0 == 0.0``): lists as tuples, dicts as
    their sorted items."""
    if isinstance(value, Mapping):
        return tuple(sorted((key, _frozen(item)) for key, item in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(item) for item in value)
    return value


@dataclasses.dataclass(frozen=True)
class NetworkSettings:
    """A network from `gomoku_jax.networks` by registry name, with its options."""

    name: str = "resnet"
    options: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        plain_fields(self)

    def __hash__(self):  # the options may hold lists (a ConvNet's channels)
        return hash((self.name, _frozen(self.options)))

    def module(self, board_size: int):
        return networks.make_network(self.name, board_size=board_size, **self.options)

    def inert_settings(self, board_size: int) -> list[str]:
        """The options that do nothing with the others as they are
        (`gomoku_jax.networks.unused_options`), named by their keys."""
        return [f"network.options.{text}"
                for text in networks.unused_options(self.module(board_size))]

    def check(self, board_size: int, kind: str | None = None, learner: str = "") -> None:
        """Raise ``ValueError`` (prefixed ``network``) if the network cannot be built or,
        with ``kind``, is not of that kind (``policy-value`` or ``q``) for ``learner``."""
        if kind is not None and self.name in networks.NETWORKS:
            got = networks.NETWORKS[self.name][1]
            if got != kind:
                fits = [n for n, (_, k, _) in networks.NETWORKS.items() if k == kind]
                raise ValueError(f"network.name: {learner} trains a {kind} network "
                                 f"({', '.join(fits)}); {self.name!r} is a {got} network")
        try:
            self.module(board_size)
        except (TypeError, ValueError) as error:
            hint = ""
            if str(error).startswith("unknown option"):  # e.g. another network's, merged
                hint = ("; a dotted override (network.name=..., network.options.x=...) keeps "
                        "the config's other options, so give another network's options whole: "
                        "--set 'network.options={...}', which replaces them")
            raise ValueError(f"network: {error}{hint}") from None


def check_run(config, kind: str, learner: str) -> None:
    """The checks every learner config shares: ``seed``, ``checkpoint_every`` and a
    ``network`` of ``kind`` that builds for ``game.size`` (see `NetworkSettings.check`)."""
    check_seed("config", "seed", config.seed)
    check_int("config", "checkpoint_every", config.checkpoint_every)
    config.network.check(config.game.size, kind, learner)
    ev = config.eval
    ev.check_iterations(config.train.iterations)
    training.check_evaluation(config.game.env(), ev.opponents, ev.opening_stones)


@dataclasses.dataclass(frozen=True)
class SelfPlaySettings:
    """Self-play of ``batch`` games in lockstep, ``steps`` moves each per iteration.

    ``temperature`` applies to the first ``temperature_moves`` moves of a game (then
    the most visited move is played); Gumbel search samples through its own noise and
    ignores it, for the first ``gumbel_moves`` moves of a game when that is set (None:
    every move), after which it plays the argmax of its improved policy. ``playout_cap``
    (KataGo's playout cap randomization; seed 003's, whose simulations explore locally, is
    ``search.local_exploration``): the probability that a move gets the full search and
    becomes a training target; other moves use ``fast_simulations`` and are not trained
    on. The draw is per move for the
    whole batch (the number of simulations of a compiled search is fixed).

    ``opponent`` (the name of a compiled agent for `gomoku_jax.agents.make`: ``random``,
    ``heuristic``, ``heuristic-K``, ``pure-mcts-N``, an exported ``.gjx``, any of them
    ``+killer``) plays one side of the first ``opponent_fraction`` of the batch's games:
    black in the even game slots, white in the odd ones, every game of the slot; its
    move replaces the search's (which still runs for the whole batch). Its moves are not
    training targets; the learner's moves in those games are, with the result against
    it as their value target. The game metrics (wins by colour, draws, length) count
    those games too. None (default) is pure self-play. ``opponent_greedy``: in those
    games the learner plays its search's best move (the argmax of the policy target's
    weights, as at play time) instead of sampling; its own self-play games still sample.
    ``opponent_final`` (an agent name as for ``opponent``, which it needs) turns the
    sparring partner into another over the run: each of the partner's moves is
    ``opponent_final``'s with probability ``i / (n - 1)`` at iteration ``i`` of ``n``
    (``train.iterations``), else ``opponent``'s; both see the same keys. From
    ``heuristic@0.4`` to ``heuristic`` this is a heuristic whose chance of answering a
    threat rises linearly from 0.4 to 1.
    """

    batch: int = 64
    steps: int = 81
    temperature: float = 1.0
    temperature_moves: int = 8
    gumbel_moves: int | None = None
    playout_cap: float | None = None
    fast_simulations: int = 8
    opponent: str | None = None
    opponent_fraction: float = 0.25
    opponent_greedy: bool = False
    opponent_final: str | None = None

    def __post_init__(self):
        plain_fields(self)
        check_int("selfplay", "batch", self.batch)
        check_int("selfplay", "steps", self.steps)
        check_number("selfplay", "temperature", self.temperature, 0.0, 100.0)
        check_int("selfplay", "temperature_moves", self.temperature_moves, 0)
        if self.gumbel_moves is not None:
            check_int("selfplay", "gumbel_moves", self.gumbel_moves, 0)
        if self.playout_cap is not None:
            check_number("selfplay", "playout_cap", self.playout_cap, 0.0, 1.0, low_open=True)
        check_int("selfplay", "fast_simulations", self.fast_simulations)
        check_number("selfplay", "opponent_fraction", self.opponent_fraction, 0.0, 1.0,
                     low_open=True)
        if self.opponent is not None:
            if not isinstance(self.opponent, str) or not self.opponent:
                raise ValueError(f"selfplay.opponent must be an agent name or null, "
                                 f"got {self.opponent!r}")
            if round(self.opponent_fraction * self.batch) < 1:
                raise ValueError(
                    f"selfplay.opponent_fraction ({self.opponent_fraction}) of "
                    f"selfplay.batch ({self.batch}) games is no game; raise either")
        if self.opponent_greedy and self.opponent is None:
            raise ValueError("selfplay.opponent_greedy needs a selfplay.opponent")
        if self.opponent_final is not None:
            if not isinstance(self.opponent_final, str) or not self.opponent_final:
                raise ValueError(f"selfplay.opponent_final must be an agent name or null, "
                                 f"got {self.opponent_final!r}")
            if self.opponent is None:
                raise ValueError("selfplay.opponent_final needs a selfplay.opponent")

    def opponent_slots(self) -> int:
        """How many game slots (the first ones) the opponent plays in."""
        return 0 if self.opponent is None else round(self.opponent_fraction * self.batch)


@dataclasses.dataclass(frozen=True)
class TrainSettings:
    """SGD: ``epochs`` passes over each iteration's new positions (rounded to whole
    steps of ``batch_size``), from a buffer of ``buffer_capacity`` positions, once it
    holds ``min_buffer``. ``lr_schedule="step"`` divides the rate by 10 at 50% and 75%
    of ``iterations`` (seed 000, 4.6.1); ``kl_target`` turns on seed 002's adaptive rate
    (multiplier / 1.5 when the KL between successive policies exceeds twice the target,
    x 1.5 below half of it, kept in [0.1, 10]). ``unroll`` writes the SGD steps out one
    after another instead of as a loop: on CPU, XLA runs convolutions inside a loop
    body 10-20x slower (measured by ``gomoku-jax bench alphazero``), at the price of a
    compile time that grows with the steps; leave it off on accelerators.
    ``search_value_weight`` (0: seed 000's target) mixes the search's value into the
    value target: ``(1 - w) z + w q``, with ``q`` the value of the move's policy target
    for the player to move (`gomoku_jax.search.policy_value`: its expected root Q). The
    result ``z`` of a game is one noisy draw; ``q`` is an estimate the search improved,
    biased by the network: a mix trades some of the first for some of the second."""

    iterations: int = 100
    batch_size: int = 256
    epochs: float = 4.0
    buffer_capacity: int = 100_000
    min_buffer: int = 1024
    optimizer: str = "sgd"
    learning_rate: float = 0.05
    momentum: float = 0.9
    l2: float = 1e-4
    value_weight: float = 1.0
    search_value_weight: float = 0.0
    lr_schedule: str = "constant"
    kl_target: float | None = None
    augment: bool = True
    unroll: bool = False

    def __post_init__(self):
        plain_fields(self)
        for name in ("iterations", "batch_size", "min_buffer"):
            check_int("train", name, getattr(self, name))
        check_int("train", "buffer_capacity", self.buffer_capacity, 1, replay.MAX_CAPACITY)
        check_number("train", "epochs", self.epochs, 0.0, 1e4, low_open=True)
        if self.optimizer not in ("sgd", "adam"):
            raise ValueError(f"train.optimizer must be 'sgd' or 'adam', got {self.optimizer!r}")
        if self.lr_schedule not in ("constant", "step"):
            raise ValueError(
                f"train.lr_schedule must be 'constant' or 'step', got {self.lr_schedule!r}")
        check_number("train", "learning_rate", self.learning_rate, 0.0, 10.0, low_open=True)
        check_number("train", "momentum", self.momentum, 0.0, 1.0)
        check_number("train", "l2", self.l2, 0.0, 1.0)
        check_number("train", "value_weight", self.value_weight, 0.0, 1e3)
        check_number("train", "search_value_weight", self.search_value_weight, 0.0, 1.0)
        if self.kl_target is not None:
            check_number("train", "kl_target", self.kl_target, 0.0, 10.0, low_open=True)
        if self.min_buffer > self.buffer_capacity:
            raise ValueError(
                f"train.min_buffer ({self.min_buffer}) exceeds train.buffer_capacity "
                f"({self.buffer_capacity})")


@dataclasses.dataclass(frozen=True)
class EvalSettings:
    """Arena evaluation every ``every`` iterations (0: only at the end) of the agent
    searching with ``simulations`` (argmax, no noise, no tactical prior) against each
    of ``opponents`` (names for `gomoku_jax.agents.make`), ``games`` games each with
    colours alternating and ``opening_stones`` random opening stones. The first
    opponent's score picks the best model; ``patience`` evaluations without a better
    score stop training (seed 002), and so does a first-opponent score of at least
    ``stop_score`` (train until a strength is reached: the time it took is the sum of
    ``metrics.csv``'s ``seconds``); ``final_games`` per opponent at the end. Both counts
    are even: the agent plays each colour in half the games."""

    every: int = 0
    opponents: tuple[str, ...] = ("random",)
    games: int = 10
    final_games: int = 20
    simulations: int = 64
    opening_stones: int = 1
    patience: int | None = None
    stop_score: float | None = None

    def __post_init__(self):
        plain_fields(self)
        check_int("eval", "every", self.every, 0)
        check_int("eval", "games", self.games, 2)
        check_int("eval", "final_games", self.final_games, 0)
        for name in ("games", "final_games"):  # colours alternate: each side as often
            if getattr(self, name) % 2:
                raise ValueError(f"eval.{name} must be even, so that the agent plays black "
                                 f"and white as often (colours alternate), got "
                                 f"{getattr(self, name)}")
        check_int("eval", "simulations", self.simulations)
        check_int("eval", "opening_stones", self.opening_stones, 0)
        if self.patience is not None:
            check_int("eval", "patience", self.patience)
        if self.stop_score is not None:
            check_number("eval", "stop_score", self.stop_score, 0.0, 1.0)
        for name in ("patience", "stop_score"):
            if getattr(self, name) is not None and not self.every:
                raise ValueError(f"eval.{name} ({getattr(self, name)}) needs periodic "
                                 "evaluations: set eval.every above 0")
        if not self.opponents or not all(isinstance(o, str) and o for o in self.opponents):
            raise ValueError(f"eval.opponents must be a non-empty list of agent names, "
                             f"got {self.opponents!r}")

    def check_iterations(self, iterations: int) -> None:
        """ValueError when ``patience`` or ``stop_score`` is set but no periodic
        evaluation falls before the last of ``iterations`` (which has the final one)."""
        for name in ("patience", "stop_score"):
            if getattr(self, name) is not None and self.every >= iterations:
                raise ValueError(
                    f"eval.{name} ({getattr(self, name)}) needs periodic evaluations, but "
                    f"eval.every ({self.every}) leaves none before the last of "
                    f"train.iterations ({iterations}): set eval.every below {iterations}")


@dataclasses.dataclass(frozen=True)
class AlphaZeroConfig:
    """One AlphaZero experiment (see ``experiments/configs/az_*.json``)."""

    game: GameSettings = GameSettings()
    network: NetworkSettings = NetworkSettings()
    search: search_lib.SearchConfig = search_lib.SearchConfig()
    tactical: search_lib.TacticalPrior | None = None
    selfplay: SelfPlaySettings = SelfPlaySettings()
    train: TrainSettings = TrainSettings()
    eval: EvalSettings = EvalSettings()
    seed: int = 0
    checkpoint_every: int = 1

    def __post_init__(self):
        plain_fields(self)
        check_run(self, "policy-value", "AlphaZero")
        pc = self.selfplay.playout_cap
        if pc is not None and self.selfplay.fast_simulations >= self.search.num_simulations:
            raise ValueError(
                f"selfplay.fast_simulations ({self.selfplay.fast_simulations}) must be below "
                f"search.num_simulations ({self.search.num_simulations}) with a playout cap")
        if pc is not None and self.search.reuse_tree:
            raise ValueError(
                f"search.reuse_tree cannot be combined with selfplay.playout_cap ({pc}): a "
                "kept tree cannot serve two searches of different sizes; unset one of them")
        env = self.game.env()  # refuses what cannot play compiled
        _selfplay_agent(self.selfplay.opponent, "opponent", env)
        _selfplay_agent(self.selfplay.opponent_final, "opponent_final", env)

    def inert_settings(self, prefix: str = "") -> list[str]:
        """The settings changed from their defaults that do nothing with the others as
        they are, each in a sentence (`gomoku_jax.config.load_file` warns of them); the
        self-play and training keys named with ``prefix`` in front (a pipeline stage's,
        whose network is the pipeline's and not listed)."""
        sp, algorithm = self.selfplay, self.search.algorithm
        key = f"{prefix}selfplay."
        # Not listed, as what switches them off is a natural variant of its own:
        # selfplay.fast_simulations without a playout cap (a smoke variant sets it for the
        # playout-cap variant it may be combined with) and selfplay.opponent_fraction
        # without an opponent (a variant without the sparring partner keeps the fraction).
        out = unused_optimizer_settings(self.train, prefix)
        if not prefix:  # a pipeline's network and search are its own, named once
            out = (self.network.inert_settings(self.game.size) + self.search.inert_settings()
                   + out)
        if algorithm == "gumbel":
            out += [f"{key}{name} ({getattr(sp, name)}) does nothing with search.algorithm "
                    "'gumbel', which samples moves through its own Gumbel noise"
                    for name in ("temperature", "temperature_moves") if changed(sp, name)]
        else:
            if sp.gumbel_moves is not None:
                out.append(f"{key}gumbel_moves ({sp.gumbel_moves}) does nothing with "
                           f"search.algorithm {algorithm!r}: only gumbel uses it")
            if sp.temperature_moves == 0 and changed(sp, "temperature"):
                out.append(f"{key}temperature ({sp.temperature}) does nothing with "
                           f"{key}temperature_moves 0: every move is the most visited")
            if sp.temperature == 0 and changed(sp, "temperature_moves"):
                out.append(f"{key}temperature_moves ({sp.temperature_moves}) does nothing "
                           f"with {key}temperature 0: every move is the most visited")
        return out

    def play_search(self, simulations: int | None = None,
                    algorithm: str | None = None) -> search_lib.SearchConfig:
        """The play-time search (`algorithms.common.play_search`)."""
        return play_search(self.search, self.eval.simulations, simulations, algorithm)

    def batch_sizes(self) -> dict[str, int]:
        """The batches split over the devices, by key (`common.check_batches`)."""
        return {"selfplay.batch": self.selfplay.batch, "train.batch_size": self.train.batch_size}

    @property
    def sgd_steps(self) -> int:
        """SGD steps per iteration: ``epochs`` passes over the iteration's new positions."""
        fresh = self.selfplay.batch * self.selfplay.steps
        return max(1, round(self.train.epochs * fresh / self.train.batch_size))

    @property
    def pending_steps(self) -> int:
        """Moves per game kept from one iteration to the next while their games go on:
        ``selfplay.steps``, or one fewer than the board's cells when that is more (a game
        lasts at most the board's cells, so a position's game ends within that many more
        moves, and its positions reach the buffer whatever ``selfplay.steps``)."""
        return max(self.selfplay.steps, self.game.size ** 2 - 1)


# ------------------------------------------------------------------------ the state
@struct.dataclass
class Record:
    """One self-play move of one game (stacked ``[T, B]`` in a trajectory)."""

    board: jax.Array  # [N, N] int8, before the move
    player: jax.Array  # [] int32, to move
    last_action: jax.Array  # [] int32
    policy: jax.Array  # [A] float32, search policy target
    # [] float32, the search's value for the mover (`search.policy_value`); None unless
    # train.search_value_weight is set (so runs without it keep their checkpoint layout)
    search_value: jax.Array | None
    reward: jax.Array  # [] float32, the mover's reward from this move
    done: jax.Array  # [] bool, this move ended the game
    train: jax.Array  # [] bool, a training target (full search)
    inserted: jax.Array  # [] bool, already in the buffer (or never to be)


@struct.dataclass
class Sample:
    """One replay item."""

    board: jax.Array  # [N, N] int8
    player: jax.Array  # [] int32
    last_action: jax.Array  # [] int32
    policy: jax.Array  # [A] float32
    value: jax.Array  # [] float32, z from the view of `player`


@struct.dataclass
class TrainState:
    variables: Any  # {'params': ..., 'batch_stats': ...}
    opt_state: Any
    buffer: replay.ReplayBuffer
    games: State  # [B] the games in progress
    pending: Record  # [P, B] the last P moves (AlphaZeroConfig.pending_steps)
    key: jax.Array  # [2] uint32
    iteration: jax.Array  # [] int32, iterations done
    lr_multiplier: jax.Array  # [] float32 (KL-adaptive rate)


# ---------------------------------------------------------------------- the learner
def _masked_log_softmax(logits, legal):
    logits = jnp.where(legal, logits, -1e9)
    return jax.nn.log_softmax(logits, axis=-1)


_NO_VARIANCE = 1e-8  # a variance below this counts as none


def explained_variance(target: jax.Array, prediction: jax.Array) -> jax.Array:
    """``1 - var(target - prediction) / var(target)``; for targets without variance
    (a batch of one outcome), 1 when they are predicted exactly and else 0, as
    scikit-learn's ``explained_variance_score`` has it."""
    var_target = jnp.var(target)
    var_error = jnp.var(target - prediction)
    return jnp.where(var_target > _NO_VARIANCE,
                     1.0 - var_error / jnp.maximum(var_target, _NO_VARIANCE),
                     jnp.where(var_error > _NO_VARIANCE, 0.0, 1.0))


class Learner(SearchPlayer, ShardedLearner):
    """The compiled pieces of one AlphaZero config. Build with `make_learner`."""

    algorithm = "alphazero"
    play_name = "alphazero"
    HYPERPARAMETERS = (
        "train.learning_rate", "train.momentum", "train.l2", "train.value_weight",
        "train.search_value_weight", "train.kl_target", "train.iterations",
        "selfplay.temperature", "selfplay.temperature_moves", "selfplay.gumbel_moves",
        "selfplay.playout_cap", "search.c_puct", "search.pb_c_base",
        "search.dirichlet_alpha", "search.dirichlet_fraction", "search.gumbel_scale",
        "search.value_scale", "search.maxvisit_init", "tactical.open_three_probability",
        "tactical.forced_mass")

    def __init__(self, config: AlphaZeroConfig, devices=None):
        self._setup_player(config)
        self._setup_mesh(devices, config.batch_sizes())
        self._pending_sharding = NamedSharding(self.mesh, P(None, "data"))
        self._derive()
        self._opponent = _selfplay_agent(config.selfplay.opponent, "opponent", self.env)
        self._opponent_final = _selfplay_agent(config.selfplay.opponent_final,
                                               "opponent_final", self.env)
        self._setup_programs()

    def opponent_names(self) -> list[str]:
        """The agents self-play plays against (``selfplay.opponent``, ``opponent_final``):
        `gomoku_jax.training.run` keeps the files of the exported ones and refuses to
        resume against other weights."""
        sp = self.config.selfplay
        return [name for name in (sp.opponent, sp.opponent_final) if name is not None]

    def _derive(self) -> None:
        self.tx = make_optimizer(self.config.train)

    def _program_objects(self) -> tuple:
        agents = (self._opponent, self._opponent_final)
        return (self.module, *search_objects(self.config),
                *((a.batch_policy(), fingerprint(a.params)) for a in agents if a is not None))

    def _opponent_turn(self, games: State) -> jax.Array:
        """``[B]`` bool: the games where ``selfplay.opponent`` is to move."""
        slot = jnp.arange(games.current_player.shape[0])
        return ((slot < self.config.selfplay.opponent_slots())
                & (games.current_player == slot % 2))

    # ----------------------------------------------------------- evaluation function

    def init_variables(self, key) -> Any:
        return networks.init_network(self.module, key, self.env.observation_shape,
                                     "policy-value")

    # ------------------------------------------------------------------- shardings
    def older_states(self) -> list:
        """``[(shape, upgrade)]``: the shape of the training state as an earlier version
        of this learner saved it, and the function that turns such a state into today's
        (`gomoku_jax.training` tries them when a checkpoint does not fit today's shape).
        Until 2026-11-30 the pending trajectory held the last ``selfplay.steps`` moves;
        now `AlphaZeroConfig.pending_steps`. The older trajectory becomes the last rows
        of today's, the rows before it as ones with nothing left to store."""
        cfg = self.config
        old, extra = cfg.selfplay.steps, cfg.pending_steps - cfg.selfplay.steps
        if extra == 0:
            return []
        today = jax.eval_shape(self.init)
        shape = today.replace(pending=jax.tree.map(
            lambda x: jax.ShapeDtypeStruct((old,) + x.shape[1:], x.dtype), today.pending))

        def upgrade(state: TrainState) -> TrainState:
            def pad(x, fill):
                x = jnp.asarray(x)
                return jnp.concatenate([jnp.full((extra,) + x.shape[1:], fill, x.dtype), x])

            pending = jax.tree.map(lambda x: pad(x, 0), state.pending)
            return state.replace(pending=pending.replace(
                last_action=pad(state.pending.last_action, -1),
                inserted=pad(state.pending.inserted, True)))

        return [(shape, upgrade)]

    def untrained_reason(self) -> str:
        cfg = self.config
        cells = cfg.game.size ** 2
        return (f"the replay buffer never held train.min_buffer ({cfg.train.min_buffer}) "
                "positions. A position enters it when its game ends: a game may last the "
                f"board's {cells} moves, and an iteration plays selfplay.steps "
                f"({cfg.selfplay.steps}) moves of each of its selfplay.batch "
                f"({cfg.selfplay.batch}) games (metrics.csv: games_finished, "
                "positions_added)")

    def state_sharding(self) -> TrainState:
        shape = jax.eval_shape(self._init_impl, jax.random.PRNGKey(0))
        rep, games, pending = self._rep, self._games_sharding, self._pending_sharding
        return TrainState(
            variables=jax.tree.map(lambda _: rep, shape.variables),
            opt_state=jax.tree.map(lambda _: rep, shape.opt_state),
            buffer=jax.tree.map(lambda _: rep, shape.buffer),
            games=jax.tree.map(lambda _: games, shape.games),
            pending=jax.tree.map(lambda _: pending, shape.pending),
            key=rep, iteration=rep, lr_multiplier=rep)

    # -------------------------------------------------------------------------- init
    def _init_impl(self, key) -> TrainState:
        cfg = self.config
        b, t = cfg.selfplay.batch, cfg.pending_steps
        key, net_key = jax.random.split(key)
        variables = self.init_variables(net_key)
        env = self.env
        n, a = env.size, env.num_actions
        example = Sample(board=jnp.zeros((n, n), jnp.int8), player=jnp.int32(0),
                         last_action=jnp.int32(-1), policy=jnp.zeros((a,), jnp.float32),
                         value=jnp.float32(0))
        games = jax.vmap(lambda _: env.init())(jnp.arange(b))
        pending = Record(
            board=jnp.zeros((t, b, n, n), jnp.int8), player=jnp.zeros((t, b), jnp.int32),
            last_action=jnp.full((t, b), -1, jnp.int32),
            policy=jnp.zeros((t, b, a), jnp.float32),
            search_value=(jnp.zeros((t, b), jnp.float32)
                          if switched_on(cfg.train.search_value_weight) else None),
            reward=jnp.zeros((t, b), jnp.float32),
            done=jnp.zeros((t, b), jnp.bool_), train=jnp.zeros((t, b), jnp.bool_),
            inserted=jnp.ones((t, b), jnp.bool_))
        return TrainState(
            variables=variables, opt_state=self.tx.init(variables["params"]),
            buffer=replay.init(example, cfg.train.buffer_capacity), games=games,
            pending=pending, key=key, iteration=jnp.int32(0),
            lr_multiplier=jnp.float32(1.0))

    # --------------------------------------------------------------------- self-play
    def _search(self, variables, games, key, simulations: int):
        cfg = self.config
        search_cfg = dataclasses.replace(cfg.search, num_simulations=simulations)
        return search_lib.run_search(self.env, self.evaluate, variables, games, key,
                                     search_cfg, tactical=cfg.tactical,
                                     devices=self._mesh_devices())

    def _selfplay(self, variables, games: State, key, progress=0.0) -> tuple[State, Record]:
        """``selfplay.steps`` moves of every game (a ``lax.scan``). With
        ``search.reuse_tree`` the search trees ride along the scan (`_selfplay_move`);
        each iteration starts from empty trees, so the `TrainState` keeps no tree.
        ``progress`` (may be traced): the share of the sparring partner's moves that
        ``selfplay.opponent_final`` plays."""
        cfg = self.config
        tree = (search_lib.empty_tree(self.env, games, cfg.search,
                                      devices=self._mesh_devices())
                if cfg.search.reuse_tree else None)

        def move(carry, key):
            games, tree = carry
            games, tree, record, _ = self._selfplay_move(variables, games, tree, key,
                                                         progress)
            return (games, tree), record

        keys = jax.random.split(key, cfg.selfplay.steps)
        (games, _), records = jax.lax.scan(move, (games, tree), keys)
        return games, records

    def _selfplay_move(self, variables, games: State, tree, key, progress=0.0):
        """One move of every game: ``(games, tree, record, search output)``.

        ``tree`` (None without ``search.reuse_tree``) is the kept tree per game; the
        search starts from it (`search_lib.run_search_reusing`: only where its root is the
        game's position) and the returned tree is the played child's subtree, empty for a
        game that just ended (and restarted). The policy target is the root's visit
        distribution, carried visits included."""
        cfg, env = self.config, self.env
        sp = cfg.selfplay
        fresh = env.init()
        # (a fifth key: split(key, 5)[:4] == split(key, 4) with partitionable threefry)
        k_search, k_act, k_cap, k_opp, k_switch = jax.random.split(key, 5)
        out = None  # the search output, kept only with tree reuse

        def results(out):
            target = search_lib.policy_target(out, cfg.search)
            value = (search_lib.policy_value(out, target).astype(jnp.float32)
                     if switched_on(cfg.train.search_value_weight) else None)
            tree = out.search_tree  # the root's Q values break ties between best moves
            q = tree.qvalues(jnp.full(tree.node_visits.shape[:1], tree.ROOT_INDEX))
            return target, (out.action_weights, q), out.action, value

        def searched(simulations):
            return results(self._search(variables, games, k_search, simulations))

        if cfg.search.reuse_tree:  # validation refuses a playout cap with reuse
            out = search_lib.run_search_reusing(env, self.evaluate, variables, games,
                                                k_search, cfg.search, cfg.tactical, tree,
                                                devices=self._mesh_devices())
            target, weights, chosen, value = results(out)
            full = jnp.bool_(True)
        elif sp.playout_cap is None:
            target, weights, chosen, value = searched(cfg.search.num_simulations)
            full = jnp.bool_(True)
        else:  # fixed-shape results, so the two searches fit one `cond`
            full = jax.random.bernoulli(k_cap, sp.playout_cap)
            target, weights, chosen, value = jax.lax.cond(
                full, lambda: searched(cfg.search.num_simulations),
                lambda: searched(sp.fast_simulations))
        if cfg.search.algorithm == "gumbel":
            action = chosen
            if sp.gumbel_moves is not None:
                action = jnp.where(games.move_count < sp.gumbel_moves, chosen,
                                   _best_move(*weights, games.legal_action_mask))
        else:
            temp = jnp.where(games.move_count < sp.temperature_moves, sp.temperature, 0.0)
            action = _sample_by_temperature(k_act, *weights, games.legal_action_mask, temp)
        if self._opponent is not None:  # run only on the slots it plays in
            theirs = self._opponent_turn(games)
            n = sp.opponent_slots()
            if sp.opponent_greedy:  # the learner's best move against the opponent
                best = _best_move(*(w[:n] for w in weights), games.legal_action_mask[:n])
                action = action.at[:n].set(best)
            keys = jax.random.split(k_opp, theirs.shape[0])[:n]
            mine = jax.tree.map(lambda x: x[:n], games)
            replies = self._opponent.batch_policy()(self._opponent.params, keys, mine)
            if self._opponent_final is not None:
                final = self._opponent_final.batch_policy()(self._opponent_final.params,
                                                            keys, mine)
                later = jax.random.uniform(k_switch, (n,)) < progress
                replies = jnp.where(later, final, replies)
            action = action.at[:n].set(jnp.where(theirs[:n], replies, action[:n]))
            full = full & ~theirs
        stepped = jax.vmap(env.step)(games, action)
        mover = games.current_player
        reward = jnp.take_along_axis(stepped.rewards, mover[:, None], axis=1)[:, 0]
        record = Record(
            board=games.board, player=mover, last_action=games.last_action,
            policy=target, search_value=value, reward=reward, done=stepped.terminated,
            train=jnp.broadcast_to(full, mover.shape),
            inserted=jnp.zeros(mover.shape, jnp.bool_))
        if cfg.search.reuse_tree:
            tree = search_lib.advance_tree(out.search_tree, action, cfg.search,
                                           reset=stepped.terminated)
        return select_games(stepped.terminated, fresh, stepped), tree, record, out

    # ------------------------------------------------------------------- targets
    @staticmethod
    def _value_targets(window: Record, search_value_weight: float = 0.0
                       ) -> tuple[jax.Array, jax.Array]:
        """Backward pass over ``[W, B]`` moves: the value target for the player to move
        (``z``, or ``(1 - w) z + w q`` with the search value ``q`` and ``w`` the
        ``search_value_weight``) and whether the game's end lies inside the window."""

        def back(carry, rec):
            v_next, known_next = carry
            v = jnp.where(rec.done, rec.reward, -v_next)
            known = rec.done | known_next
            return (v, known), (v, known)

        b = window.done.shape[1]
        init = (jnp.zeros((b,), jnp.float32), jnp.zeros((b,), jnp.bool_))
        _, (z, known) = jax.lax.scan(back, init, window, reverse=True)
        if switched_on(search_value_weight):  # static: without it the targets are z
            z = (1.0 - search_value_weight) * z + search_value_weight * window.search_value
        return z, known

    def _opponent_metrics(self, done, black_won, white_won) -> dict:
        """The learner's games against ``selfplay.opponent`` that ended this iteration:
        ``opponent_games``, ``opponent_wins``, ``opponent_losses`` (none without one)."""
        if self._opponent is None:
            return {}
        slot = jnp.arange(done.shape[1])
        mine = (slot < self.config.selfplay.opponent_slots())[None, :]
        learner_black = (slot % 2 == 1)[None, :]
        won = jnp.where(learner_black, black_won, white_won)
        lost = jnp.where(learner_black, white_won, black_won)
        return dict(opponent_games=jnp.sum(done & mine), opponent_wins=jnp.sum(won & mine),
                    opponent_losses=jnp.sum(lost & mine))

    # ---------------------------------------------------------------------- SGD
    def _observe(self, board, player, last_action):
        return features.observe_position(board, player, last_action, self.env.observation_spec)

    def _augment(self, batch: Sample, key) -> Sample:
        n = self.env.size
        t = jax.random.randint(key, (batch.player.shape[0],), 0, symmetry.NUM_TRANSFORMS)
        board = jax.vmap(symmetry.transform_board)(batch.board, t)
        policy = jax.vmap(symmetry.transform_policy)(batch.policy, t)
        last = jax.vmap(lambda a, s: symmetry.transform_action(a, s, n))(batch.last_action, t)
        return batch.replace(board=board, policy=policy, last_action=last)

    def _loss(self, params, batch_stats, batch: Sample):
        cfg = self.config.train
        obs = self._observe(batch.board, batch.player, batch.last_action)
        (logits, value), new_stats = networks.apply_train(self.module, params, batch_stats, obs)
        logits, value = logits.astype(jnp.float32), value.astype(jnp.float32)
        legal = (batch.board == 0).reshape(batch.board.shape[0], -1)
        logp = _masked_log_softmax(logits, legal)
        policy_loss = -jnp.mean(jnp.sum(jnp.where(legal, batch.policy * logp, 0.0), -1))
        value_loss = jnp.mean((value - batch.value) ** 2)
        l2 = sum(jnp.sum(jnp.square(p)) for p in jax.tree.leaves(params))
        total = cfg.value_weight * value_loss + policy_loss + cfg.l2 * l2
        probs = jnp.exp(logp)
        entropy = -jnp.mean(jnp.sum(jnp.where(legal, probs * logp, 0.0), -1))
        aux = dict(loss=total, value_loss=value_loss, policy_loss=policy_loss, l2=l2,
                   entropy=entropy, explained_variance=explained_variance(batch.value, value))
        return total, (aux, new_stats)

    def _train(self, variables, opt_state, buffer, key, learning_rate):
        cfg = self.config.train
        ready = buffer.size >= cfg.min_buffer
        opt_state = opt_state._replace(
            hyperparams={**opt_state.hyperparams, "learning_rate": learning_rate})

        def step(carry, key):
            variables, opt_state = carry
            k_sample, k_aug = jax.random.split(key)
            batch = replay.sample(buffer, k_sample, cfg.batch_size)
            if cfg.augment:
                batch = self._augment(batch, k_aug)
            batch = self._constrain(batch)
            variables, opt_state, aux = sgd_step(self._loss, self.tx, variables, opt_state,
                                                 ready, batch)
            return (variables, opt_state), aux

        keys = jax.random.split(key, self.config.sgd_steps)
        (variables, opt_state), aux = jax.lax.scan(step, (variables, opt_state), keys,
                                                   unroll=bool(cfg.unroll))
        return variables, opt_state, jax.tree.map(jnp.mean, aux), ready

    def _policy_logp(self, variables, batch: Sample):
        obs = self._observe(batch.board, batch.player, batch.last_action)
        logits, _ = self.module.apply(variables, obs, train=False)
        legal = (batch.board == 0).reshape(batch.board.shape[0], -1)
        return _masked_log_softmax(logits.astype(jnp.float32), legal), legal

    def opponent_progress(self, iteration):
        """The share of the sparring partner's moves that ``selfplay.opponent_final``
        plays at ``iteration``: 0 at the first, 1 at the last of ``train.iterations``."""
        last = jnp.maximum(jnp.asarray(self.config.train.iterations, jnp.float32) - 1, 1)
        return jnp.clip(iteration / last, 0.0, 1.0).astype(jnp.float32)

    def learning_rate(self, iteration, multiplier):
        cfg = self.config.train
        lr = cfg.learning_rate * multiplier
        if cfg.lr_schedule == "step":
            frac = iteration / cfg.iterations
            lr = lr * jnp.where(frac >= 0.75, 0.01, jnp.where(frac >= 0.5, 0.1, 1.0))
        return lr

    # ------------------------------------------------------------------ iteration
    def _iteration_impl(self, state: TrainState):
        cfg = self.config
        key, k_play, k_train, k_probe = jax.random.split(state.key, 4)
        progress = self.opponent_progress(state.iteration)
        games, moves = self._selfplay(state.variables, state.games, k_play, progress)
        window = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), state.pending, moves)
        z, known = self._value_targets(window, cfg.train.search_value_weight)
        insert = known & ~window.inserted & window.train
        handled = window.inserted | known | ~window.train  # inserted, now or before, or never
        t, b = moves.done.shape
        flat = lambda x: x.reshape((-1,) + x.shape[2:])
        samples = Sample(board=flat(window.board), player=flat(window.player),
                         last_action=flat(window.last_action), policy=flat(window.policy),
                         value=flat(z))
        buffer = replay.add(state.buffer, samples, flat(insert))
        dropped = jnp.sum(~handled[:t])  # the oldest t moves leave the window
        pending = jax.tree.map(lambda x: x[t:], window).replace(inserted=handled[t:])

        lr = self.learning_rate(state.iteration, state.lr_multiplier)
        probe = replay.sample(buffer, k_probe, min(cfg.train.batch_size, 256))
        old_logp, legal = self._policy_logp(state.variables, probe)
        variables, opt_state, aux, trained = self._train(
            state.variables, state.opt_state, buffer, k_train, lr)
        new_logp, _ = self._policy_logp(variables, probe)
        kl = jnp.mean(jnp.sum(jnp.where(legal, jnp.exp(old_logp) * (old_logp - new_logp), 0.0),
                              -1))
        multiplier = state.lr_multiplier
        if cfg.train.kl_target is not None:
            target = cfg.train.kl_target
            multiplier = jnp.where(trained & (kl > 2 * target), multiplier / 1.5,
                                   jnp.where(trained & (kl < target / 2), multiplier * 1.5,
                                             multiplier))
            multiplier = jnp.clip(multiplier, 0.1, 10.0)

        done = moves.done
        finished = jnp.sum(done)
        length = per_game(jnp.sum((moves.board != 0).sum((-1, -2)) + 1, where=done), finished)
        mover_won = done & (moves.reward > 0)
        mover_lost = done & (moves.reward < 0)
        black_won = (mover_won & (moves.player == 0)) | (mover_lost & (moves.player == 1))
        white_won = (mover_won & (moves.player == 1)) | (mover_lost & (moves.player == 0))
        metrics = dict(
            aux, kl=kl, learning_rate=lr, trained=trained, games_finished=finished,
            game_length=length, black_wins=jnp.sum(black_won), white_wins=jnp.sum(white_won),
            draws=jnp.sum(done & (moves.reward == 0)), positions_added=jnp.sum(insert),
            **self._opponent_metrics(done, black_won, white_won),
            **({} if self._opponent_final is None else {"opponent_final_share": progress}),
            dropped=dropped, buffer_fill=buffer.size / buffer.capacity,
            moves=jnp.int32(t * b))
        new_state = TrainState(
            variables=variables, opt_state=opt_state, buffer=buffer, games=games,
            pending=pending, key=key, iteration=state.iteration + 1,
            lr_multiplier=multiplier.astype(jnp.float32))
        return new_state, metrics


def _selfplay_agent(spec: str | None, field: str, env: Gomoku):
    """The compiled agent of ``selfplay.<field>`` (None without one)."""
    if spec is None:
        return None
    try:
        agent = agents_lib.make(spec, env)
    except ValueError as error:
        hint = ""
        if spec.strip().lower() in ("none", "null", "off", "no", "false", ""):
            hint = (f"; to play without one, give null (--set selfplay.{field}=null, or "
                    f'"{field}": null in the file)')
        raise ValueError(f"selfplay.{field}: {error}{hint}") from None
    if not isinstance(agent, agents_lib.JaxAgent):
        raise ValueError(
            f"selfplay.{field} {spec!r} is not a compiled (JAX) agent and cannot play "
            "inside the compiled self-play; use one that is (random, heuristic, heuristic-K, "
            "heuristic@P, pure-mcts-N, an exported .gjx or .gjx@N, a registered JAX agent, "
            "any of them +killer)")
    return agent


def _best_move(weights, q, legal):
    """Per game: the legal move of highest weight, ``[B]`` int32; among equal weights the
    highest ``q`` (the root's Q values), then the lowest index, as `search.select_action`
    (a few-simulation search often ties, and the lowest index alone would lean to the
    board's top-left corner)."""
    weights = jnp.where(legal, weights, -1.0)
    best = weights == jnp.max(weights, axis=-1, keepdims=True)
    return ops.argmax(jnp.where(best, q, -jnp.inf), axis=-1)


def _sample_by_temperature(key, weights, q, legal, temperature):
    """Per game: sample from ``weights ** (1 / T)`` over legal moves; T = 0 is
    `_best_move`."""
    logw = jnp.where(legal & (weights > 0), jnp.log(jnp.maximum(weights, 1e-30)), -jnp.inf)
    greedy = _best_move(weights, q, legal)
    safe_t = jnp.maximum(temperature, 1e-6)[:, None]
    sampled = jax.random.categorical(key, logw / safe_t, axis=-1)
    ok = jnp.isfinite(jnp.max(logw, -1))
    return jnp.where((temperature > 0) & ok, sampled, greedy).astype(jnp.int32)


def make_learner(config: AlphaZeroConfig, devices=None) -> Learner:
    """The learner for ``config``; sharded over ``devices`` (default: all devices)."""
    return Learner(config, devices)
