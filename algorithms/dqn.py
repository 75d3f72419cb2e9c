"""Double DQN against a curriculum of opponents: one iteration is one compiled program.

``make_learner(config)`` returns a `Learner` whose ``iteration(state)`` plays
``acting.steps`` env steps of ``acting.batch`` games in lockstep, puts the finished
n-step transitions (8 symmetric copies each) into a device-resident uniform replay
buffer, and runs ``train.updates`` gradient steps, all under one ``jit`` with no host
round trip. Games are sharded over every local device along a ``data`` mesh axis; the
online, target and pool parameters, the optimizer state and the buffer are replicated.
The settings in ``Learner.HYPERPARAMETERS``, the reward table's entries and the
curriculum's phases (their lengths, opponents and heuristic strength; not their number or
top-k) are inputs of the compiled programs (`algorithms.common.ShardedLearner`), so
learners whose configs differ only in them, or in ``seed``, share one compile.

**Env step.** Every game has the learner's colour (alternating from game to game) and,
at each step, either the learner to move or, in a fresh game where the learner is
white, the opponent. One env step is: the learner's epsilon-greedy move (over legal
moves) where it is to move, then, where the game goes on and the opponent is to move,
the opponent's move. The learner's transition runs from its position to its next
position (after the reply) or to the end of the game. A finished game restarts in
place with the learner's colour swapped.

**Opponents** come from the curriculum phase of the step, chosen from the number of
learner episodes finished so far (``curriculum.phases``; traced, so a change of phase
does not recompile; games in progress finish against the new phase's opponent), or, in a
phase with a mixture of opponents, from each game's own draw at its start:
``random`` (uniform legal moves), ``heuristic`` (seed 000's rule-based player) or
``self``: the current online network (``curriculum.self_opponent = "online"``, the
default) or the newest frozen version (``"latest"``: seed 000's "games against each
frozen opponent"), or, in a game drawn as such at its start with probability
``old_opponent_probability``, a frozen earlier version from the pool (one pool member
per iteration, drawn uniformly among the filled slots, the newest left out under
``"latest"`` while there are others; the current network while the pool is empty).
Network opponents play epsilon-greedy with ``opponent_epsilon``. During ``self`` phases
the online variables are copied into a ring of ``pool_size`` slots each time the episode
count crosses a multiple of ``snapshot_every`` (checked once per iteration).

**Reward** of a learner step (seed 000 section 3.3, tables 1-3 as `REWARD_TABLES`):
``step + pattern + outcome``. ``outcome`` is ``win`` / ``loss`` / ``draw`` when the game
ends in this env step (the learner's move or the opponent's reply), else 0. ``pattern``
is the change caused by the learner's move alone (the opponent's reply is not counted),
from `gomoku_jax.tactics.shape_counts` before and after it:

    pattern = sum_s w_s * (c_s(learner, after) - c_s(learner, before))
              for s in open_two, half_three, open_three, half_four, open_four
            + w_blocked_three * (E3(opponent, before) - E3(opponent, after))
            + w_blocked_four  * (E4(opponent, before) - E4(opponent, after))

            + w_double_threat * [T(learner, after) >= 2 > T(learner, before)]

where ``E3 = 2 * open_three + half_three`` and ``E4 = 2 * open_four + half_four`` count
the empty end cells of the opponent's threes and fours, so a block earns its weight once
per end cell the move fills (also the second end of a half-blocked four, which the
tactics ``blocked_four`` count, a run with at least one blocked end, would miss), and
``T`` (`tactics.threats_to_answer`: 0, 1 or 2) tells whether one defending stone
answers all the winning cells and open threes: ``T = 2`` for a move that makes two
threats at once (four-four, four-three, three-three, an open four) that no one block
answers, while a broken four beside an open three that shares its gap (``X.XXX.``) is
one threat. Seed 000's tables
give it no weight. A move that wins gets no pattern term (the win reward replaces it).
All of it is the change ``Phi(after) - Phi(before)`` of one pattern value
(`pattern_potential`: the weighted own shapes, minus the weighted end cells of the
opponent's threes and fours, plus the double-threat weight where T >= 2).

This seed-000 form (``rewards.form="difference"``) pays for the learner's move and
ignores the reply, so a learner can collect it again and again: make a three, see it
blocked (no charge), make another. ``rewards.form="potential"`` pays ``gamma * Phi(s') -
Phi(s)`` instead, from the learner's position to its next one (after the reply; ``Phi =
0`` at the end of the game): shaping of the kind that provably leaves the best policy of
the plain game unchanged (Ng, Harada and Russell, 1999), since it telescopes over a
game. Shaping ``"none"`` is the
plain game reward: +1 win, -1 loss, 0 draw.

**Learning.** Double Q-learning (seed 000 eq. 2): the online network picks the next
action among the legal moves of the next position (occupied cells masked to -1e9), the
target network values it; n-step returns ``sum_i gamma^i r_i + gamma^n Q`` (0 at a
terminal); Huber loss; Adam; the target network is copied every ``target_period``
gradient steps (or tracks the online one with Polyak ``target_tau``). The per-transition
TD error `double_q_error` is written for one transition and ``vmap``ped. Exploration
epsilon decays exponentially per finished episode (seed 000) or per learner step.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from algorithms.alphazero import EvalSettings, GameSettings, NetworkSettings, check_run
from algorithms.common import (ShardedLearner, keep_if, per_game, select_games, sgd_step,
                               switched_on)
from gomoku_jax import agents as agents_lib
from gomoku_jax import features, networks, ops, replay, symmetry, tactics
from gomoku_jax.agents import JaxAgent
from gomoku_jax.config import changed, check_int, check_number, plain_fields
from gomoku_jax.game import Gomoku, State, sample_legal_action

__all__ = [
    "ActingSettings",
    "CurriculumSettings",
    "DQNConfig",
    "DQNTrainSettings",
    "Games",
    "Learner",
    "OPPONENTS",
    "Phase",
    "REWARD_KEYS",
    "REWARD_TABLES",
    "RewardSettings",
    "TrainState",
    "Transition",
    "double_q_error",
    "double_q_target",
    "make_learner",
    "pattern_potential",
    "pattern_reward",
    "self_opponent_slots",
    "symmetric_transitions",
    "threat_count",
]

OPPONENTS = ("random", "heuristic", "self")
_OWN_SHAPES = ("open_two", "half_three", "open_three", "half_four", "open_four")
REWARD_KEYS = tactics.SHAPES + ("win", "loss", "draw", "step", "double_threat")


def _pays_patterns(table) -> bool:
    """Whether the reward ``table`` (its values may be traced) pays for any pattern: else
    the reward is the game's outcome and the step penalty, whatever ``rewards.form``."""
    return any(switched_on(table[name]) for name
               in ("blocked_three", "blocked_four", "double_threat") + _OWN_SHAPES)


def _table(values) -> dict[str, float]:
    """A table from its values in `REWARD_KEYS` order; keys past the values weigh 0."""
    return {key: 0.0 for key in REWARD_KEYS} | dict(zip(REWARD_KEYS, map(float, values)))


# Seed 000 section 3.3. Columns: OPEN_TWO, HALF_THREE, OPEN_THREE, HALF_FOUR, OPEN_FOUR,
# BLOCK_THREE, BLOCK_FOUR, WIN_REWARD, LOSS_REWARD, DRAW_REWARD, STEP_PENALTY (added at
# every learner step; 0 in all three tables). DOUBLE_THREAT is this project's addition (0
# in seed 000's tables; see `pattern_reward`).
REWARD_TABLES: dict[str, dict[str, float]] = {
    "none": _table([0, 0, 0, 0, 0, 0, 0, 1.0, -1.0, 0.0, 0.0]),
    "table1": _table([0.01, 0.02, 0.08, 0.15, 0.6, 0.2, 0.8, 1.0, -2.0, 0.1, 0.0]),
    "table2": _table([0.01, 0.02, 0.2, 0.3, 0.3, 0.2, 0.9, 10.0, -2.0, 0.1, 0.0]),
    "table3": _table([0.01, 0.02, 0.4, 0.7, 0.7, 0.62, 0.9, 1.0, -1.0, 0.2, 0.0]),
}


# ----------------------------------------------------------------------------- config
def _check_named_numbers(mapping: dict, known, unknown: str, section: str, low: float,
                         high: float) -> None:
    """Every key of ``mapping`` is one of ``known`` (else ``unknown`` names it) and every
    value a number in [low, high] (`check_number` under ``section``)."""
    for key, value in mapping.items():
        if key not in known:
            raise ValueError(f"{unknown} {key!r}; known: {', '.join(known)}")
        check_number(section, key, value, low, high)


@dataclasses.dataclass(frozen=True)
class Phase:
    """One curriculum phase: ``episodes`` learner games against ``opponent``.

    ``opponent`` is one of `OPPONENTS`, or a mixture ``{name: weight, ...}``: each game
    of the phase draws its opponent at its start with probability weight / sum of the
    weights (e.g. ``{"heuristic": 3, "random": 1}``: a quarter of the games against
    random, so the learner keeps winning games while the heuristic teaches defence).
    ``heuristic_blocks``: the chance that the heuristic answers a threat in this phase
    (one coin per move; `agents.heuristic_agent`'s ``block_probability``). Below 1 some
    of the learner's fours and open threes go unanswered and win, so a curriculum can
    raise it phase by phase towards seed 000's heuristic (1). ``heuristic_top_k``: the
    number of most central empty cells the heuristic picks its free moves from in this
    phase (default: the curriculum's ``heuristic_top_k``). A large value (the whole
    board) makes its free moves random: it still answers every threat, but it no longer
    crowds the centre, so the learner's preparations for a double threat survive and a
    curriculum can narrow the choice phase by phase.
    """

    opponent: str | dict = "self"
    episodes: int = 1000
    heuristic_blocks: float = 1.0
    heuristic_top_k: int | None = None

    def __hash__(self):
        return hash((self.weights(), self.episodes, self.heuristic_blocks,
                     self.heuristic_top_k))

    def __post_init__(self):
        plain_fields(self)
        known = ", ".join(OPPONENTS)
        if isinstance(self.opponent, dict):
            if not self.opponent:
                raise ValueError(f"curriculum phase opponent mixture is empty; give "
                                 f"weights for some of {known}")
            _check_named_numbers(self.opponent, OPPONENTS,
                                 "curriculum phase opponent mixture: unknown opponent",
                                 "curriculum phase opponent", 0.0, 1e9)
            if not sum(self.opponent.values()) > 0:
                raise ValueError(f"curriculum phase opponent mixture: the weights "
                                 f"{self.opponent!r} sum to 0")
        elif self.opponent not in OPPONENTS:
            hint = ""
            if isinstance(self.opponent, str) and self.opponent.startswith("heuristic@"):
                hint = ("; for a heuristic that answers threats with probability p, give "
                        "\"opponent\": \"heuristic\" and \"heuristic_blocks\": p")
            elif isinstance(self.opponent, str):
                hint = ("; other agents (registered ones, .gjx files) can be evaluation "
                        "opponents (eval.opponents), not curriculum ones")
            raise ValueError(f"curriculum phase opponent must be one of {known} or a "
                             f"mixture {{name: weight}}, got {self.opponent!r}{hint}")
        check_int("curriculum phase", "episodes", self.episodes)
        check_number("curriculum phase", "heuristic_blocks", self.heuristic_blocks, 0.0, 1.0)
        if self.heuristic_top_k is not None:
            check_int("curriculum phase", "heuristic_top_k", self.heuristic_top_k)

    def weights(self) -> tuple[float, ...]:
        """Probability of each of `OPPONENTS` for a game of this phase."""
        if not isinstance(self.opponent, dict):
            return tuple(float(name == self.opponent) for name in OPPONENTS)
        total = float(sum(self.opponent.values()))
        return tuple(float(self.opponent.get(name, 0.0)) / total for name in OPPONENTS)


@dataclasses.dataclass(frozen=True)
class ActingSettings:
    """``batch`` games stepped in lockstep, ``steps`` env steps each per iteration;
    epsilon = max(``epsilon_end``, ``epsilon_start * epsilon_decay ** n``) with n the
    finished episodes (``decay_unit="episode"``, seed 000) or the learner's moves so
    far, summed over the batch (``"step"``)."""

    batch: int = 32
    steps: int = 16
    epsilon_start: float = 1.0
    epsilon_end: float = 0.05
    epsilon_decay: float = 0.995
    decay_unit: str = "episode"

    def __post_init__(self):
        plain_fields(self)
        check_int("acting", "batch", self.batch)
        check_int("acting", "steps", self.steps)
        check_number("acting", "epsilon_start", self.epsilon_start, 0.0, 1.0)
        check_number("acting", "epsilon_end", self.epsilon_end, 0.0, 1.0)
        check_number("acting", "epsilon_decay", self.epsilon_decay, 0.0, 1.0, low_open=True)
        if self.epsilon_end > self.epsilon_start:
            raise ValueError(f"acting.epsilon_end ({self.epsilon_end}) exceeds "
                             f"acting.epsilon_start ({self.epsilon_start})")
        if self.decay_unit not in ("episode", "step"):
            raise ValueError(f"acting.decay_unit must be 'episode' or 'step', "
                             f"got {self.decay_unit!r}")


_INT32_MAX = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class CurriculumSettings:
    """The opponents: ``phases`` in order (the last one lasts for ever; their episodes
    sum to 2**31 - 1 at most, as the device counts them in int32), seed 000's
    OPPONENT_EPSILON, OLD_OPPONENT_CHANCE and CHECKPOINT_INTERVAL (``snapshot_every``
    episodes) for the pool of ``pool_size`` frozen versions; the heuristic picks among
    its ``heuristic_top_k`` most central cells. ``self_opponent``: whom a ``self`` game
    that is not an old one plays: ``"online"`` (the learner's current network) or
    ``"latest"`` (the newest frozen version, the current network until the first
    snapshot; an old game then draws among the other filled slots). ``stop_at_end``: the
    run stops at the end of the first iteration by which the phases' episodes are all
    played (the last phase does not go on; ``train.iterations`` is then a cap)."""

    phases: tuple[Phase, ...] = (Phase("random", 1000), Phase("heuristic", 1000),
                                 Phase("self", 4000))
    opponent_epsilon: float = 0.1
    old_opponent_probability: float = 0.2
    snapshot_every: int = 500
    pool_size: int = 8
    heuristic_top_k: int = 3
    self_opponent: str = "online"
    stop_at_end: bool = False

    def __post_init__(self):
        plain_fields(self)
        if not self.phases or not all(isinstance(p, Phase) for p in self.phases):
            raise ValueError(f"curriculum.phases must be a non-empty list of phases, "
                             f"got {self.phases!r}")
        if self.total_episodes > _INT32_MAX:  # the phases' ends are int32 on the device
            raise ValueError(f"curriculum.phases: the phases' episodes sum to "
                             f"{self.total_episodes}, more than {_INT32_MAX} (2**31 - 1), "
                             "the most the device's int32 episode counts hold")
        check_number("curriculum", "opponent_epsilon", self.opponent_epsilon, 0.0, 1.0)
        check_number("curriculum", "old_opponent_probability", self.old_opponent_probability,
                   0.0, 1.0)
        check_int("curriculum", "snapshot_every", self.snapshot_every)
        check_int("curriculum", "pool_size", self.pool_size)
        check_int("curriculum", "heuristic_top_k", self.heuristic_top_k)
        if not isinstance(self.stop_at_end, bool):
            raise ValueError(f"curriculum.stop_at_end must be true or false, got "
                             f"{self.stop_at_end!r}")
        if self.self_opponent not in ("online", "latest"):
            raise ValueError(f"curriculum.self_opponent must be 'online' or 'latest', got "
                             f"{self.self_opponent!r}")

    @property
    def total_episodes(self) -> int:
        return sum(p.episodes for p in self.phases)


@dataclasses.dataclass(frozen=True)
class RewardSettings:
    """A preset of `REWARD_TABLES` (``shaping``) with ``weights`` overriding entries
    (keys: `REWARD_KEYS`). ``form``: how the pattern weights become a reward (see the
    module docstring): ``"difference"`` (seed 000: the change made by the learner's own
    move) or ``"potential"`` (``gamma * Phi(s') - Phi(s)`` between the learner's
    successive positions, which leaves the best policy of the plain game unchanged)."""

    shaping: str = "table3"
    weights: dict = dataclasses.field(default_factory=dict)
    form: str = "difference"

    def __hash__(self):
        return hash((self.shaping, tuple(sorted(self.weights.items())), self.form))

    def __post_init__(self):
        plain_fields(self)
        if self.shaping not in REWARD_TABLES:
            raise ValueError(f"rewards.shaping must be one of {', '.join(REWARD_TABLES)}, "
                             f"got {self.shaping!r}")
        if self.form not in ("difference", "potential"):
            raise ValueError(f"rewards.form must be 'difference' or 'potential', "
                             f"got {self.form!r}")
        _check_named_numbers(self.weights, REWARD_KEYS, "unknown rewards.weights key",
                             "rewards.weights", -1e6, 1e6)

    def table(self) -> dict[str, float]:
        """The full reward table: the preset with the overrides."""
        return {**REWARD_TABLES[self.shaping],
                **{k: float(v) for k, v in self.weights.items()}}


@dataclasses.dataclass(frozen=True)
class DQNTrainSettings:
    """``updates`` gradient steps of ``batch_size`` transitions per iteration, once
    the buffer of ``buffer_capacity`` transitions (8 symmetric copies of each) holds
    ``min_buffer``. ``unroll`` writes the gradient steps out one after another instead
    of as a loop (on CPU, XLA runs convolutions in a loop body 10-20x slower; compile
    time grows with ``updates``; leave it off on accelerators). The acting steps stay a
    loop: written out they compile for minutes (every opponent, the tactics and the
    shaping per step) and run no faster."""

    iterations: int = 500
    updates: int = 16
    batch_size: int = 64
    buffer_capacity: int = 50_000
    min_buffer: int = 1000
    learning_rate: float = 1e-4
    gamma: float = 0.99
    n_step: int = 1
    double: bool = True
    target_period: int = 2000
    target_tau: float | None = None
    huber_delta: float = 1.0
    max_grad_norm: float | None = 10.0
    symmetries: bool = True
    unroll: bool = False

    def __post_init__(self):
        plain_fields(self)
        for name in ("iterations", "updates", "batch_size", "min_buffer", "n_step",
                     "target_period"):
            check_int("train", name, getattr(self, name))
        check_int("train", "buffer_capacity", self.buffer_capacity, 1, replay.MAX_CAPACITY)
        check_number("train", "learning_rate", self.learning_rate, 0.0, 10.0, low_open=True)
        check_number("train", "gamma", self.gamma, 0.0, 1.0)
        check_number("train", "huber_delta", self.huber_delta, 0.0, 1e6, low_open=True)
        if self.target_tau is not None:
            check_number("train", "target_tau", self.target_tau, 0.0, 1.0, low_open=True)
        if self.max_grad_norm is not None:
            check_number("train", "max_grad_norm", self.max_grad_norm, 0.0, 1e9, low_open=True)
        if self.min_buffer > self.buffer_capacity:
            raise ValueError(f"train.min_buffer ({self.min_buffer}) exceeds "
                             f"train.buffer_capacity ({self.buffer_capacity})")


@dataclasses.dataclass(frozen=True)
class DQNConfig:
    """One DQN experiment (see ``experiments/configs/dqn_*.json``); ``eval.simulations``
    is not used (the agent plays the legal move of highest Q)."""

    game: GameSettings = GameSettings()
    network: NetworkSettings = NetworkSettings("resnet-q")
    acting: ActingSettings = ActingSettings()
    curriculum: CurriculumSettings = CurriculumSettings()
    rewards: RewardSettings = RewardSettings()
    train: DQNTrainSettings = DQNTrainSettings()
    eval: EvalSettings = EvalSettings()
    seed: int = 0
    checkpoint_every: int = 1

    def __post_init__(self):
        plain_fields(self)
        check_run(self, "q", "DQN")

    def batch_sizes(self) -> dict[str, int]:
        """The batches split over the devices, by key (`common.check_batches`)."""
        return {"acting.batch": self.acting.batch, "train.batch_size": self.train.batch_size}

    def inert_settings(self) -> list[str]:
        """The settings changed from their defaults that do nothing with the others as
        they are (`gomoku_jax.config.load_file` warns of them)."""
        tr, out = self.train, self.network.inert_settings(self.game.size)
        if tr.target_tau is not None and changed(tr, "target_period"):
            out.append(f"train.target_period ({tr.target_period}) does nothing with "
                       f"train.target_tau ({tr.target_tau}): the target network tracks the "
                       "online one at every step")
        if changed(self.eval, "simulations"):
            out.append(f"eval.simulations ({self.eval.simulations}) does nothing for DDQN: "
                       "its agent plays the legal move of highest Q, without a search")
        if changed(self.rewards, "form") and not _pays_patterns(self.rewards.table()):
            out.append(f"rewards.form ({self.rewards.form!r}) does nothing with "
                       f"rewards.shaping {self.rewards.shaping!r}: no pattern is paid for")
        heuristic = OPPONENTS.index("heuristic")
        for i, phase in enumerate(self.curriculum.phases):
            if phase.weights()[heuristic] == 0:
                for name in ("heuristic_blocks", "heuristic_top_k"):
                    if changed(phase, name):
                        out.append(f"curriculum.phases[{i}].{name} ({getattr(phase, name)}) "
                                   "does nothing: the phase has no heuristic games")
        if self.curriculum.self_opponent != "online" and not any(
                phase.weights()[OPPONENTS.index("self")] for phase in self.curriculum.phases):
            out.append(f"curriculum.self_opponent ({self.curriculum.self_opponent!r}) does "
                       "nothing: no phase has self-play games")
        return out


# ------------------------------------------------------------------------ the state
@struct.dataclass
class Transition:
    """One (n-step) learner transition; the learner is to move at both ends."""

    board: jax.Array  # [N, N] int8, s_t
    player: jax.Array  # [] int32, the learner's colour
    last_action: jax.Array  # [] int32, the move before s_t (the opponent's), -1 if none
    action: jax.Array  # [] int32, a_t
    reward: jax.Array  # [] float32, sum_{i<n} gamma^i r_{t+i}
    discount: jax.Array  # [] float32, gamma^n, 0 when the game ended
    next_board: jax.Array  # [N, N] int8, s_{t+n}
    next_last_action: jax.Array  # [] int32


@struct.dataclass
class Games:
    """The games in progress and each one's pending n-step history (oldest first)."""

    state: State  # [B]
    colour: jax.Array  # [B] int32, the learner's colour
    old: jax.Array  # [B] bool, the opponent is a pool version (self phases)
    draw: jax.Array  # [B] float32 in [0, 1), picks the opponent of a mixture phase
    hist_board: jax.Array  # [B, n, N, N] int8
    hist_last: jax.Array  # [B, n] int32
    hist_action: jax.Array  # [B, n] int32
    hist_reward: jax.Array  # [B, n] float32
    hist_valid: jax.Array  # [B, n] bool
    episode_return: jax.Array  # [B] float32, reward so far in this game
    pattern_return: jax.Array  # [B] float32, its pattern part


@struct.dataclass
class TrainState:
    variables: Any  # online {'params': ..., 'batch_stats': ...}
    target_variables: Any
    opt_state: Any
    buffer: replay.ReplayBuffer  # of Transition
    pool: Any  # variables stacked [pool_size, ...]
    snapshots: jax.Array  # [] int32, snapshots taken (slot = snapshots % pool_size)
    games: Games
    key: jax.Array  # [2] uint32
    iteration: jax.Array  # [] int32
    episodes: jax.Array  # [] int32, learner games finished
    env_steps: jax.Array  # [] int32, learner moves made (summed over games)
    updates: jax.Array  # [] int32, gradient steps made


# -------------------------------------------------------------- per-transition math
def double_q_target(reward, discount, q_next_target, q_next_online, legal_next):
    """``r + discount * Q_target(s', argmax_{legal a'} Q_online(s', a'))`` for ONE
    transition (``q_*: [A]``, ``legal_next: [A]`` bool); no legal move: ``r``."""
    choice = ops.argmax(jnp.where(legal_next, q_next_online, -1e9))
    value = jnp.where(jnp.any(legal_next), q_next_target[choice], 0.0)
    return reward + discount * value


def double_q_error(q, action, reward, discount, q_next_target, q_next_online, legal_next):
    """TD error ``target - Q(s, a)`` of ONE transition (``q: [A]``); the target is held
    fixed (no gradient), as in ``rlax.double_q_learning``."""
    target = double_q_target(reward, discount, q_next_target, q_next_online, legal_next)
    return jax.lax.stop_gradient(target) - q[action]


def pattern_potential(board, player, k: int, table, rule: str = "freestyle") -> jax.Array:
    """Phi, the pattern value of ``board [..., N, N]`` for ``player [...]`` under a
    reward table (see the module docstring): the weighted counts of the player's own
    shapes, minus the weighted end cells of the opponent's threes and fours, plus the
    double-threat weight where the player has two threats or more."""
    black = (jnp.asarray(player, jnp.int32) == 0)[..., None]  # [..., 1]
    c = tactics.shape_counts(jnp.asarray(board), k).astype(jnp.float32)  # [..., 2, S]
    own = jnp.where(black, c[..., 0, :], c[..., 1, :])
    opp = jnp.where(black, c[..., 1, :], c[..., 0, :])
    idx = {s: i for i, s in enumerate(tactics.SHAPES)}
    w_own = jnp.asarray([table[s] for s in _OWN_SHAPES], jnp.float32)
    sel = np.asarray([idx[s] for s in _OWN_SHAPES])
    ends = lambda n: 2 * opp[..., idx[f"open_{n}"]] + opp[..., idx[f"half_{n}"]]  # noqa: E731
    value = (jnp.sum(own[..., sel] * w_own, axis=-1) - table["blocked_three"] * ends("three")
             - table["blocked_four"] * ends("four"))
    if switched_on(table.get("double_threat")):
        many = threat_count(board, player, k, rule) >= 2
        value = value + table["double_threat"] * many.astype(jnp.float32)
    return value


def pattern_reward(board_before, board_after, player, k: int, table,
                   rule: str = "freestyle") -> jax.Array:
    """The pattern part of the reward of ``player``'s move ``board_before ->
    board_after`` (``[N, N]`` each, or batches ``[..., N, N]`` with ``player: [...]``),
    with ``table`` a reward table (`REWARD_TABLES` entry): the change of
    `pattern_potential`; see the module docstring."""
    return (pattern_potential(board_after, player, k, table, rule)
            - pattern_potential(board_before, player, k, table, rule))


def threat_count(board, player, k: int, rule: str = "freestyle") -> jax.Array:
    """The double-threat shaping's T, ``[...]`` int32: 0 when ``player`` has no winning
    cell or open three, 1 when one defending stone answers them all, 2 when none does
    (`tactics.threats_to_answer`)."""
    return tactics.threats_to_answer(jnp.asarray(board), player, k, rule)


def self_opponent_slots(snapshots, pool_size: int, key, mode: str
                        ) -> tuple[jax.Array, jax.Array]:
    """The pool slots a self phase's iteration plays, after ``snapshots`` snapshots into a
    ring of ``pool_size`` slots: ``(rival, old)``. ``rival``: the slot of the opponent of a
    game that is not an old one, -1 for the learner's current network (``mode``
    ``"online"``, or ``"latest"`` before the first snapshot; under ``"latest"`` the newest
    slot). ``old``: the slot an old game's opponent comes from, drawn with ``key``
    uniformly among the filled slots (under ``"latest"`` among those but the newest, the
    newest while it is alone); meaningless while no slot is filled."""
    filled = jnp.minimum(snapshots, pool_size)
    if mode == "online":
        return (jnp.int32(-1), jax.random.randint(key, (), 0, jnp.maximum(filled, 1)))
    latest = (snapshots - 1) % pool_size
    back = jax.random.randint(key, (), 1, jnp.maximum(filled, 2))
    old = jnp.where(filled > 1, (latest - back) % pool_size, latest)
    return jnp.where(filled > 0, latest, -1).astype(jnp.int32), old.astype(jnp.int32)


def symmetric_transitions(tr: Transition, size: int) -> Transition:
    """The 8 symmetric copies of transitions ``[M, ...]``: ``[8 * M, ...]`` (copy ``t``
    at rows ``t * M .. t * M + M - 1``), boards, actions and last moves mapped alike."""
    def one(t):
        act = lambda a: symmetry.transform_action(a, t, size)
        return tr.replace(board=symmetry.transform_board(tr.board, t),
                          next_board=symmetry.transform_board(tr.next_board, t),
                          action=act(tr.action), last_action=act(tr.last_action),
                          next_last_action=act(tr.next_last_action))

    copies = [one(t) for t in range(symmetry.NUM_TRANSFORMS)]
    return jax.tree.map(lambda *xs: jnp.concatenate(xs), *copies)


def _epsilon_greedy(key, q, legal, epsilon):
    """Per game: a uniform legal move with probability ``epsilon``, else the legal
    move of highest Q (``q, legal: [B, A]``)."""
    k_coin, k_move = jax.random.split(key)
    b = q.shape[0]
    greedy = ops.argmax(jnp.where(legal, q, -1e9), axis=-1)
    random = jax.vmap(sample_legal_action)(jax.random.split(k_move, b), legal)
    explore = jax.random.uniform(k_coin, (b,)) < epsilon
    return jnp.where(explore, random, greedy).astype(jnp.int32)


# ---------------------------------------------------------------------- the learner
_CURRICULUM_TABLES = ("ends", "cum", "has_self", "blocks")


def _curriculum_tables(phases) -> dict[str, np.ndarray]:
    """The curriculum as arrays: each phase's end (cumulative episodes, ``[P]`` int32),
    its opponents' cumulative probabilities (``[P, len(OPPONENTS)]``; exactly 1 from the
    last opponent with a weight on, so rounding never picks a weightless one), whether
    it plays ``self`` (``[P]`` bool) and its heuristic's block probability (``[P]``)."""
    weights = np.asarray([p.weights() for p in phases], np.float64)
    cum = np.cumsum(weights, axis=1)
    for row, w in zip(cum, weights):
        row[np.flatnonzero(w).max():] = 1.0
    return {"ends": np.cumsum([p.episodes for p in phases]).astype(np.int32),
            "cum": cum.astype(np.float32),
            "has_self": weights[:, OPPONENTS.index("self")] > 0,
            "blocks": np.asarray([p.heuristic_blocks for p in phases], np.float32)}


class Learner(ShardedLearner):
    """The compiled pieces of one DQN config. Build with `make_learner`."""

    algorithm = "dqn"
    # and the reward table's entries and the curriculum's tables (see `hyperparameters`)
    HYPERPARAMETERS = (
        "acting.epsilon_start", "acting.epsilon_end", "acting.epsilon_decay",
        "curriculum.opponent_epsilon", "curriculum.old_opponent_probability",
        "train.learning_rate", "train.gamma", "train.huber_delta", "train.max_grad_norm",
        "train.target_tau")

    def __init__(self, config: DQNConfig, devices=None):
        self.config = config
        self.env: Gomoku = config.game.env()
        self.module = config.network.module(config.game.size)
        self._setup_mesh(devices, config.batch_sizes())
        self._derive()
        phases = config.curriculum.phases
        top_k = config.curriculum.heuristic_top_k
        phase_top_k = [top_k if p.heuristic_top_k is None else p.heuristic_top_k
                       for p in phases]
        # Phases that choose their own top_k pick among that many of the heuristic's
        # max(top_k) candidates; with none, the heuristic is the curriculum's, unchanged.
        self._phase_top_k = (np.asarray(phase_top_k, np.int32)
                             if any(k != top_k for k in phase_top_k) else None)
        self._heuristic = agents_lib.heuristic_agent(self.env, top_k=max(phase_top_k)).policy
        self._setup_programs()

    def _derive(self) -> None:
        tc = self.config.train
        self.rewards = self.config.rewards.table()
        parts = ([optax.clip_by_global_norm(tc.max_grad_norm)]
                 if switched_on(tc.max_grad_norm) else [])
        self.tx = optax.chain(*parts, optax.adam(tc.learning_rate))
        for name, table in _curriculum_tables(self.config.curriculum.phases).items():
            setattr(self, f"_phase_{name}", table)

    # ------------------------------------------- traced reward table and curriculum
    def hyperparameters(self) -> dict[str, np.ndarray]:
        """`ShardedLearner.hyperparameters` plus the reward table's entries other than 0
        (``rewards.table.win``...) and the curriculum's tables (``curriculum.ends``:
        where each phase ends, ``.cum``: its opponents' cumulative probabilities,
        ``.has_self``, ``.blocks``: its heuristic's block probability), so that a sweep
        over reward weights, tables that switch the same terms on, or curricula of as
        many phases compiles once."""
        out = super().hyperparameters()
        for name, value in self.rewards.items():  # `_derive` made them from the config
            if switched_on(value):
                out[f"rewards.table.{name}"] = np.asarray(value, np.float32)
        for name in _CURRICULUM_TABLES:
            out[f"curriculum.{name}"] = getattr(self, f"_phase_{name}")
        return out

    def _program_data(self) -> dict:
        data = super()._program_data()
        data["rewards"] = {"form": self.config.rewards.form,
                           "table": {k: "<traced>" if switched_on(v) else v
                                     for k, v in sorted(self.rewards.items())}}
        # the phases' number and top-k shape the program; the rest is in the tables
        data["curriculum"]["phases"] = [{"heuristic_top_k": p.heuristic_top_k}
                                        for p in self.config.curriculum.phases]
        return data

    def _traced_view(self, hyper):
        view = super()._traced_view(hyper)
        prefix = "rewards.table."
        view.rewards = {**view.rewards, **{path[len(prefix):]: value
                                           for path, value in hyper.items()
                                           if path.startswith(prefix)}}
        for name in _CURRICULUM_TABLES:
            setattr(view, f"_phase_{name}", hyper[f"curriculum.{name}"])
        return view


    # ------------------------------------------------------------------- helpers
    def q_values(self, variables, observation):
        """``Q [B, A]`` float32 of observations ``[B, N, N, C]``, inference mode."""
        return self.module.apply(variables, observation, train=False).astype(jnp.float32)

    def _observe(self, board, player, last_action):
        return features.observe_position(board, player, last_action, self.env.observation_spec)

    def phase_of(self, episodes) -> jax.Array:
        """Index of the curriculum phase after ``episodes`` finished games (traced)."""
        ends = jnp.asarray(self._phase_ends[:-1])
        return jnp.sum(jnp.asarray(episodes) >= ends).astype(jnp.int32)

    def opponent_kinds(self, phase, draw) -> jax.Array:
        """Index into `OPPONENTS` of each game's opponent ``[B]`` in ``phase``, from the
        games' ``draw`` (uniform in [0, 1), drawn at each game's start)."""
        cum = jnp.asarray(self._phase_cum)[phase]  # [K]
        return jnp.sum(draw[:, None] >= cum[None, :-1], axis=1).astype(jnp.int32)

    def epsilon(self, episodes, env_steps) -> jax.Array:
        """The learner's exploration rate after ``episodes`` games / ``env_steps`` moves."""
        a = self.config.acting
        count = episodes if a.decay_unit == "episode" else env_steps
        decayed = a.epsilon_start * jnp.power(jnp.float32(a.epsilon_decay),
                                              jnp.asarray(count, jnp.float32))
        return jnp.maximum(jnp.float32(a.epsilon_end), decayed)

    def stop_reason(self, state: TrainState) -> str | None:
        """Why the run ends at ``state`` before ``train.iterations`` (`training.run` asks
        after each iteration): with ``curriculum.stop_at_end``, its phases' episodes are
        all played; None otherwise."""
        total = self.config.curriculum.total_episodes
        played = int(state.episodes)
        if self.config.curriculum.stop_at_end and played >= total:
            return (f"curriculum.stop_at_end: the curriculum's {total} episodes are played "
                    f"({played} by iteration {int(state.iteration)})")
        return None

    def short_of(self, state: TrainState) -> str | None:
        """What a run that ended at ``train.iterations`` (``state``) left unplayed of its
        curriculum under ``curriculum.stop_at_end`` (`training.run` warns of it); None
        when nothing."""
        total, played = self.config.curriculum.total_episodes, int(state.episodes)
        if not self.config.curriculum.stop_at_end or played >= total:
            return None
        return (f"train.iterations ({self.config.train.iterations}) ended the run with "
                f"{played} of the curriculum's {total} episodes played "
                "(curriculum.stop_at_end): raise train.iterations to play them all")

    # ------------------------------------------------------------------- shardings
    def untrained_reason(self) -> str:
        return (f"the replay buffer never held train.min_buffer "
                f"({self.config.train.min_buffer}) transitions")

    def state_sharding(self) -> TrainState:
        shape = jax.eval_shape(self._init_impl, jax.random.PRNGKey(0))
        rep, games = self._rep, self._games_sharding
        replicated = lambda tree: jax.tree.map(lambda _: rep, tree)
        return TrainState(
            variables=replicated(shape.variables),
            target_variables=replicated(shape.target_variables),
            opt_state=replicated(shape.opt_state), buffer=replicated(shape.buffer),
            pool=replicated(shape.pool), snapshots=rep,
            games=jax.tree.map(lambda _: games, shape.games), key=rep, iteration=rep,
            episodes=rep, env_steps=rep, updates=rep)

    # -------------------------------------------------------------------------- init
    def _fresh_games(self, key) -> Games:
        cfg, env = self.config, self.env
        b, n, size = cfg.acting.batch, cfg.train.n_step, env.size
        states = jax.vmap(lambda _: env.init())(jnp.arange(b))
        return Games(
            state=states, colour=(jnp.arange(b) % 2).astype(jnp.int32),
            old=jax.random.bernoulli(key, cfg.curriculum.old_opponent_probability, (b,)),
            draw=jax.random.uniform(jax.random.fold_in(key, 1), (b,)),
            hist_board=jnp.zeros((b, n, size, size), jnp.int8),
            hist_last=jnp.full((b, n), -1, jnp.int32), hist_action=jnp.zeros((b, n), jnp.int32),
            hist_reward=jnp.zeros((b, n), jnp.float32), hist_valid=jnp.zeros((b, n), jnp.bool_),
            episode_return=jnp.zeros((b,), jnp.float32),
            pattern_return=jnp.zeros((b,), jnp.float32))

    def _init_impl(self, key) -> TrainState:
        cfg, env = self.config, self.env
        key, net_key, games_key = jax.random.split(key, 3)
        variables = networks.init_network(self.module, net_key, env.observation_shape, "q")
        size = env.size
        example = Transition(
            board=jnp.zeros((size, size), jnp.int8), player=jnp.int32(0),
            last_action=jnp.int32(-1), action=jnp.int32(0), reward=jnp.float32(0),
            discount=jnp.float32(0), next_board=jnp.zeros((size, size), jnp.int8),
            next_last_action=jnp.int32(-1))
        pool = jax.tree.map(
            lambda v: jnp.broadcast_to(v, (cfg.curriculum.pool_size,) + v.shape), variables)
        zero = jnp.int32(0)
        return TrainState(
            variables=variables, target_variables=variables,
            opt_state=self.tx.init(variables["params"]),
            buffer=replay.init(example, cfg.train.buffer_capacity), pool=pool, snapshots=zero,
            games=self._fresh_games(games_key), key=key, iteration=zero, episodes=zero,
            env_steps=zero, updates=zero)

    # ------------------------------------------------------------------- acting
    def _opponent(self, phase, kinds, s1: State, old, key, variables, member, has_old):
        """Opponent moves ``[B]`` for the games ``s1`` (only used where it is to move),
        each game's from its opponent ``kinds [B]`` in curriculum ``phase``; an opponent
        no game has is not run."""
        eps = self.config.curriculum.opponent_epsilon
        legal = s1.legal_action_mask
        b = legal.shape[0]

        def random(key):
            return jax.vmap(sample_legal_action)(jax.random.split(key, b), legal)

        def heuristic(key):
            keys = jax.random.split(key, b)
            blocks = jnp.asarray(self._phase_blocks)[phase]
            choices = (None if self._phase_top_k is None
                       else jnp.asarray(self._phase_top_k)[phase])
            return jax.vmap(lambda k, s: self._heuristic(None, k, s, block_probability=blocks,
                                                         choices=choices))(keys, s1)

        def selfplay(key):
            obs = s1.observation
            q = self.q_values(variables, obs)
            q_old = self.q_values(member, obs)
            q = jnp.where((old & has_old)[:, None], q_old, q)
            return _epsilon_greedy(key, q, legal, eps)

        moves = jnp.zeros((b,), jnp.int32)
        for index, policy in enumerate((random, heuristic, selfplay)):
            mine = kinds == index
            chosen = jax.lax.cond(jnp.any(mine), lambda k, f=policy: f(k).astype(jnp.int32),
                                  lambda k: jnp.zeros((b,), jnp.int32), key)
            moves = jnp.where(mine, chosen, moves)
        return moves

    def _env_step(self, variables, rival, member, has_old, carry, key):
        cfg, env = self.config, self.env
        w, gamma, n = self.rewards, cfg.train.gamma, cfg.train.n_step
        games, episodes, env_steps = carry
        k_act, k_opp, k_old = jax.random.split(key, 3)
        s, colour, old_before = games.state, games.colour, games.old
        b = colour.shape[0]
        phase = self.phase_of(episodes)
        kinds = self.opponent_kinds(phase, games.draw)
        eps = self.epsilon(episodes, env_steps)

        acting = (s.current_player == colour) & ~s.terminated  # [B]
        q = self.q_values(variables, s.observation)
        action = _epsilon_greedy(k_act, q, s.legal_action_mask, eps)
        s1 = select_games(acting, jax.vmap(env.step)(s, action), s)
        wins_now = acting & s1.terminated & (s1.winner == colour)
        shaped = _pays_patterns(w)
        potential = cfg.rewards.form == "potential"
        if shaped and not potential:
            pattern = pattern_reward(s.board, s1.board, colour, env.k, w, env.rule)
            pattern = jnp.where(acting & ~wins_now, pattern, 0.0)
        else:  # the potential form needs the reply: below
            pattern = jnp.zeros(colour.shape, jnp.float32)

        opp_turn = ~s1.terminated & (s1.current_player != colour)
        opp_action = self._opponent(phase, kinds, s1, games.old, k_opp, rival, member,
                                    has_old)
        s2 = select_games(opp_turn, jax.vmap(env.step)(s1, opp_action), s1)

        done = s2.terminated
        won = done & (s2.winner == colour)
        lost = done & (s2.winner == 1 - colour)
        drawn = done & (s2.winner < 0)
        outcome = jnp.where(won, w["win"], jnp.where(lost, w["loss"],
                                                     jnp.where(drawn, w["draw"], 0.0)))
        if shaped and potential:  # gamma Phi(s') - Phi(s), Phi = 0 once the game is over
            after = jnp.where(done, 0.0, pattern_potential(s2.board, colour, env.k, w,
                                                           env.rule))
            pattern = jnp.where(acting, gamma * after - pattern_potential(
                s.board, colour, env.k, w, env.rule), 0.0)
        reward = jnp.where(acting, w["step"] + pattern + outcome, 0.0)

        # n-step history: push this step's (s, a, r) where the learner moved.
        def push(h, new):
            pushed = jnp.concatenate([h[:, 1:], new[:, None].astype(h.dtype)], axis=1)
            return select_games(acting, pushed, h)

        hb = push(games.hist_board, s.board)
        hl = push(games.hist_last, s.last_action)
        ha = push(games.hist_action, action)
        hr = push(games.hist_reward, reward)
        hv = push(games.hist_valid, jnp.ones_like(acting))
        returns, acc = [], jnp.zeros_like(reward)
        for j in reversed(range(n)):  # R_j = r_j + gamma R_{j+1}
            acc = hr[:, j] + gamma * acc
            returns.append(acc)
        returns = jnp.stack(returns[::-1], axis=1)  # [B, n]
        first = jnp.arange(n) == 0
        emit = acting[:, None] & hv & (done[:, None] | first[None])  # [B, n]
        powers = jnp.asarray([gamma ** (n - j) for j in range(n)], jnp.float32)
        discount = jnp.where(done[:, None], 0.0, powers[None])
        out = Transition(
            board=hb, player=jnp.broadcast_to(colour[:, None], (b, n)),
            last_action=hl, action=ha, reward=returns, discount=discount,
            next_board=jnp.broadcast_to(s2.board[:, None], hb.shape),
            next_last_action=jnp.broadcast_to(s2.last_action[:, None], hl.shape))

        ep_return = games.episode_return + reward
        pat_return = games.pattern_return + pattern
        fresh = jax.tree.map(lambda x: jnp.broadcast_to(x, (b,) + x.shape), env.init())
        new_old = jax.random.bernoulli(k_old, cfg.curriculum.old_opponent_probability,
                                       colour.shape)
        new_draw = jax.random.uniform(jax.random.fold_in(k_old, 1), colour.shape)
        games = Games(
            state=select_games(done, fresh, s2),
            colour=jnp.where(done, 1 - colour, colour),
            old=jnp.where(done, new_old, games.old),
            draw=jnp.where(done, new_draw, games.draw),
            hist_board=hb, hist_last=hl, hist_action=ha, hist_reward=hr,
            hist_valid=hv & ~done[:, None],
            episode_return=jnp.where(done, 0.0, ep_return),
            pattern_return=jnp.where(done, 0.0, pat_return))
        vs_old = done & old_before & has_old & (kinds == OPPONENTS.index("self"))
        per_opponent = {}
        for index, name in enumerate(OPPONENTS):
            per_opponent[f"games_vs_{name}"] = done & (kinds == index)
            per_opponent[f"wins_vs_{name}"] = won & (kinds == index)
        stats = dict(
            per_opponent, done=done, won=won, lost=lost, drawn=drawn, old=vs_old,
            shaped_return=jnp.where(done, ep_return, 0.0),
            pattern_return=jnp.where(done, pat_return, 0.0),
            length=jnp.where(done, s2.move_count, 0), acting=acting)
        episodes = episodes + jnp.sum(done).astype(jnp.int32)
        env_steps = env_steps + jnp.sum(acting).astype(jnp.int32)
        return (games, episodes, env_steps), (out, emit, stats)

    # ---------------------------------------------------------------------- SGD
    def _loss(self, params, batch_stats, target_variables, batch: Transition):
        cfg = self.config.train
        obs = self._observe(batch.board, batch.player, batch.last_action)
        next_obs = self._observe(batch.next_board, batch.player, batch.next_last_action)
        q, new_stats = networks.apply_train(self.module, params, batch_stats, obs)
        q = q.astype(jnp.float32)
        variables = {"params": params, **batch_stats}
        q_next_target = self.q_values(target_variables, next_obs)
        q_next_online = (jax.lax.stop_gradient(self.q_values(variables, next_obs))
                         if cfg.double else q_next_target)
        legal_next = (batch.next_board == 0).reshape(batch.next_board.shape[0], -1)
        td = jax.vmap(double_q_error)(q, batch.action, batch.reward, batch.discount,
                                      q_next_target, q_next_online, legal_next)
        loss = jnp.mean(optax.huber_loss(td, delta=cfg.huber_delta))
        q_taken = jnp.take_along_axis(q, batch.action[:, None], axis=1)[:, 0]
        aux = dict(loss=loss, q_mean=jnp.mean(q_taken), td_abs=jnp.mean(jnp.abs(td)))
        return loss, (aux, new_stats)

    def _train(self, variables, target_variables, opt_state, buffer, updates, key):
        cfg = self.config.train
        ready = buffer.size >= cfg.min_buffer

        def step(carry, key):
            variables, target, opt_state, updates = carry
            batch = self._constrain(replay.sample(buffer, key, cfg.batch_size))
            variables, opt_state, aux = sgd_step(self._loss, self.tx, variables, opt_state,
                                                 ready, target, batch)
            updates = updates + ready.astype(jnp.int32)
            if cfg.target_tau is not None:
                tau = cfg.target_tau
                target = keep_if(ready, jax.tree.map(lambda t, o: (1 - tau) * t + tau * o,
                                                     target, variables), target)
            else:
                sync = ready & (updates % cfg.target_period == 0)
                target = jax.tree.map(lambda o, t: jnp.where(sync, o, t), variables, target)
            return (variables, target, opt_state, updates), aux

        keys = jax.random.split(key, cfg.updates)
        (variables, target, opt_state, updates), aux = jax.lax.scan(
            step, (variables, target_variables, opt_state, updates), keys,
            unroll=bool(cfg.unroll))
        return variables, target, opt_state, updates, jax.tree.map(jnp.mean, aux), ready

    # ------------------------------------------------------------------ iteration
    def _iteration_impl(self, state: TrainState):
        cfg = self.config
        cur = cfg.curriculum
        key, k_member, k_play, k_train = jax.random.split(state.key, 4)
        filled = jnp.minimum(state.snapshots, cur.pool_size)
        take = lambda i: jax.tree.map(lambda p: p[i], state.pool)  # noqa: E731
        slot, index = self_opponent_slots(state.snapshots, cur.pool_size, k_member,
                                          cur.self_opponent)
        rival = state.variables if cur.self_opponent == "online" else jax.tree.map(
            lambda p, v: jnp.where(slot >= 0, p, v), take(jnp.maximum(slot, 0)),
            state.variables)
        member = take(index)
        step = functools.partial(self._env_step, state.variables, rival, member, filled > 0)
        (games, episodes, env_steps), (moves, emit, stats) = jax.lax.scan(
            step, (state.games, state.episodes, state.env_steps),
            jax.random.split(k_play, cfg.acting.steps))

        flat = lambda x: x.reshape((-1,) + x.shape[3:])  # [T, B, n, ...] -> [T*B*n, ...]
        items, mask = jax.tree.map(flat, moves), flat(emit)
        if cfg.train.symmetries:
            items = symmetric_transitions(items, self.env.size)
            mask = jnp.tile(mask, symmetry.NUM_TRANSFORMS)
        buffer = replay.add(state.buffer, items, mask)

        variables, target, opt_state, updates, aux, trained = self._train(
            state.variables, state.target_variables, state.opt_state, buffer,
            state.updates, k_train)

        # Pool snapshots: in a self phase, when the episode count crosses a multiple.
        every = cur.snapshot_every
        take = (episodes // every > state.episodes // every) & jnp.asarray(
            self._phase_has_self)[self.phase_of(episodes)]
        slot = state.snapshots % cur.pool_size
        pool = jax.tree.map(
            lambda p, v: jnp.where(take, jax.lax.dynamic_update_index_in_dim(p, v, slot, 0), p),
            state.pool, variables)

        finished = jnp.sum(stats["done"])
        total = lambda name: jnp.sum(stats[name])
        mean = lambda x: per_game(x, finished)
        wins, losses, draws = total("won"), total("lost"), total("drawn")
        metrics = dict(
            aux, trained=trained, episodes=finished, wins=wins, losses=losses, draws=draws,
            win_rate=mean(wins), outcome=mean(wins - losses),
            shaped_return=mean(total("shaped_return")),
            pattern_return=mean(total("pattern_return")),
            game_length=mean(total("length")), old_opponent_games=total("old"),
            **{name: total(name) for name in stats if name.startswith(("games_vs_", "wins_vs_"))},
            epsilon=self.epsilon(episodes, env_steps), phase=self.phase_of(episodes),
            episodes_total=episodes, updates_total=updates, pool_filled=jnp.minimum(
                state.snapshots + take, cur.pool_size),
            transitions_added=jnp.sum(mask), buffer_size=buffer.size,
            buffer_fill=buffer.size / buffer.capacity, learner_moves=total("acting"),
            moves=jnp.int32(cfg.acting.steps * cfg.acting.batch))
        new_state = TrainState(
            variables=variables, target_variables=target, opt_state=opt_state, buffer=buffer,
            pool=pool, snapshots=state.snapshots + take.astype(jnp.int32), games=games,
            key=key, iteration=state.iteration + 1, episodes=episodes, env_steps=env_steps,
            updates=updates)
        return new_state, metrics

    # ---------------------------------------------------------------- play agent
    def export_metadata(self) -> dict:
        """What `gomoku_jax.exported` stores to rebuild the play-time agent."""
        cfg = self.config
        return {"agent": "q-greedy", "game": dataclasses.asdict(cfg.game),
                "network": {"name": cfg.network.name, "options": dict(cfg.network.options)}}

    def agent(self, variables, name: str = "dqn") -> JaxAgent:
        """The play-time agent: the legal move of highest Q (no exploration)."""
        return agents_lib.greedy_q_agent(name, self.module, variables, self.env)

    def describe_play(self) -> str:
        return "Learner playing the legal move of highest Q (no search)."


def make_learner(config: DQNConfig, devices=None) -> Learner:
    """The learner for ``config``; sharded over ``devices`` (default: all devices)."""
    return Learner(config, devices)
