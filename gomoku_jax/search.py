"""mctx glue: AlphaZero-style search (PUCT or Gumbel) on the real game.

The search is independent of any particular network. A network is an ``evaluate``
function::

    evaluate(params, states: State [B]) -> (logits [B, A] float32, value [B] float32)

with ``value`` from the view of the player to move in each state (a learner builds it
from a Flax module: ``lambda p, s: model.apply(p, s.observation)``). `uniform_evaluate`
is the network-free baseline (zero logits, zero value).

Tree semantics. The mctx embedding is the batched game `State`:

* `make_recurrent_fn` plays the action with the real ``env.step``; the reward is the
  step's reward for the player who moved (+1 for a winning move, -1 for an illegal one,
  0 otherwise); the discount is -1 (the next value is the opponent's) or 0 once the game
  is over; the value is ``evaluate``'s, or 0 at a terminal. Children of a terminal state
  stay terminal with reward 0 (``env.step`` leaves a finished game unchanged).
* Illegal moves get the logit ``jnp.finfo(jnp.float32).min`` (as mctx masks them) in
  every node's prior, so their prior probability is exactly 0; at the root they are
  also passed to mctx as ``invalid_actions = ~legal_action_mask`` and never visited.

`run_search` runs ``mctx.muzero_policy`` (PUCT with Dirichlet noise at the root) or
``mctx.gumbel_muzero_policy`` (Gumbel top-k with sequential halving at the root,
``qtransform_completed_by_mix_value``). `policy_target` is what a learner trains on,
`select_action` picks the move to play.

Q terms. The Q-values a selection reads are a named qtransform (mctx's argument of that
name): ``SearchConfig.puct_q`` for PUCT (``"minmax"``, mctx's default, or ``"raw"``),
``SearchConfig.gumbel_q`` for Gumbel (``"completed"``). `register_qtransform` adds one of
your own under a name, which configs, sweeps and exported agents can then give.

Tree reuse (``SearchConfig.reuse_tree``, linear backend, PUCT only). `run_search_reusing`
searches from a kept tree and `advance_tree` keeps the played child's subtree for the next
move (`gomoku_jax.tree_search.reuse_subtree`); a game whose kept root is not its current
position starts from an empty tree (`tree_matches`). The root visit distribution, and so
the policy target, then includes the visits carried over (as in KataGo and Leela Zero).
AlphaZero self-play carries the trees through its moves; `ReusingSearchAgent` keeps one
between the moves of a game it plays.

`TacticalPrior` (seed 000 section 4.5; training search only, never at play time)
rewrites the prior of the root and of every node the search expands; see
`apply_tactical_prior` for the exact rule.

Static versus traced. `SearchConfig` and `TacticalPrior` are pytrees: ``algorithm``,
``num_simulations``, ``max_num_considered_actions``, ``max_depth``, ``backend``,
``reuse_tree``, ``reuse_capacity``, the qtransforms' names (``puct_q``, ``gumbel_q``),
``local_exploration`` and ``enabled`` are static (they shape the compiled
search); every float is a leaf, so passing a config as an argument of a jitted function
traces ``c_puct``, the noise, the Gumbel scales and the tactical probabilities, and a
sweep over them does not recompile. Closing over a config (or passing it as a static
argument: it is hashable) bakes them in instead.
A float field may also hold an array, e.g. ``c_puct=jnp.array([0.5, 1.0, 4.0])`` searched
under ``jax.vmap(f, in_axes=(jax.tree.map(lambda x: 0 if jnp.ndim(x) else None,
config),))``. Array values are not range-checked.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import mctx
import numpy as np

from gomoku_jax import ops, tactics, tree_search
from gomoku_jax.config import check_int, plain_fields, same_definition
from gomoku_jax.agents import JaxAgent, static_partial
from gomoku_jax.game import Gomoku, State

__all__ = [
    "ALGORITHMS",
    "BACKENDS",
    "PUCT_Q",
    "QTRANSFORMS",
    "Evaluate",
    "network_evaluate",
    "KeptSearch",
    "ReusingSearchAgent",
    "SearchConfig",
    "TacticalPrior",
    "advance_tree",
    "apply_tactical_prior",
    "empty_tree",
    "make_recurrent_fn",
    "policy_target",
    "policy_value",
    "qtransform_of",
    "qtransform_raw",
    "register_qtransform",
    "root_output",
    "run_search",
    "run_search_reusing",
    "search_agent",
    "search_policy",
    "select_action",
    "selection_functions",
    "tree_capacity",
    "tree_matches",
    "uniform_evaluate",
]

ALGORITHMS = ("puct", "gumbel")
BACKENDS = ("mctx", "linear")
PUCT_Q = ("minmax", "raw")  # the built-in Q terms of PUCT (SearchConfig.puct_q)

# (params, states [B]) -> (logits [B, A] float32, value [B] float32)
Evaluate = Callable[[Any, State], "tuple[jax.Array, jax.Array]"]

_MIN_LOGIT = float(jnp.finfo(jnp.float32).min)


# --------------------------------------------------------------------- configs
def _is_concrete_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def _check_float(owner, name: str, low: float, high: float = float("inf"),
                 low_open: bool = False) -> None:
    """Validate a float field: a finite Python number in range (normalised to ``float``),
    or an array (e.g. one value per sweep point under ``vmap``), left unchecked."""
    value = getattr(owner, name)
    cls = type(owner).__name__
    if isinstance(value, (jax.Array, np.ndarray)):
        return
    if not _is_concrete_number(value):
        raise ValueError(f"{cls}.{name} must be a number, got {value!r}")
    value = float(value)
    below = value <= low if low_open else value < low
    if below or value > high or not np.isfinite(value):  # inf too: NaN in the search
        lo = f"({low}" if low_open else f"[{low}"
        hi = "inf)" if high == float("inf") else f"{high}]"
        raise ValueError(f"{cls}.{name} must be in {lo}, {hi}, got {value!r}")
    object.__setattr__(owner, name, value)


def _check_int(owner, name: str, low: int, allow_none: bool = False,
               high: int | None = None) -> None:
    object.__setattr__(owner, name, check_int(type(owner).__name__, name, getattr(owner, name),
                                              low, high, allow_none=allow_none))


# A search tree's nodes are numbered with int32: num_simulations + 1 (or + reuse_capacity)
# nodes at most this many.
_MAX_NODES = int(np.iinfo(np.int32).max)


def _from_dict(cls, data: dict):
    if not isinstance(data, dict):
        raise ValueError(f"{cls.__name__}.from_dict needs a dict, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(
            f"{cls.__name__}.from_dict: unknown fields {unknown}; known: {', '.join(sorted(known))}"
        )
    return cls(**data)


def _register(cls, meta: tuple[str, ...], hidden: tuple[str, ...] = ()):
    """Register a frozen config dataclass as a pytree: ``meta`` fields static, the
    others leaves; ``hidden``: attributes besides the fields, static too. Unflattening
    bypasses ``__init__`` (as ``flax.struct`` does), so validation runs only when a user
    builds a config, never on JAX's tracers."""
    names = tuple(f.name for f in dataclasses.fields(cls))
    data = tuple(n for n in names if n not in meta)
    meta = tuple(meta) + tuple(hidden)

    def flatten(x):
        children = tuple((jax.tree_util.GetAttrKey(n), getattr(x, n)) for n in data)
        return children, tuple(getattr(x, n) for n in meta)

    def unflatten(aux, children):
        obj = object.__new__(cls)
        for n, v in zip(meta, aux):
            object.__setattr__(obj, n, v)
        for n, v in zip(data, children):
            object.__setattr__(obj, n, v)
        return obj

    jax.tree_util.register_pytree_with_keys(cls, flatten, unflatten)
    return cls


@functools.partial(
    _register,
    meta=("algorithm", "num_simulations", "max_num_considered_actions", "max_depth",
          "backend", "reuse_tree", "reuse_capacity", "puct_q", "gumbel_q",
          "local_exploration"),
    hidden=("_qtransforms",),
)
@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """Settings of one AlphaZero-style search (see the module docstring).

    Attributes:
      algorithm: ``"puct"`` (``mctx.muzero_policy``) or ``"gumbel"``
        (``mctx.gumbel_muzero_policy``). Static.
      num_simulations: simulations per search. Static.
      c_puct: PUCT exploration constant (mctx ``pb_c_init``), > 0.
      puct_q: the Q term of PUCT's score. ``"minmax"`` (mctx's
        ``qtransform_by_parent_and_siblings``): each node's Q values rescaled to [0, 1]
        by the least and greatest of the node's value and its visited children's Q, an
        unvisited child at 0 (the least). ``"raw"`` (the reports' AlphaZero, seed 000's
        eq. 4 and the PUCT of seeds 001 to 003): the mean value in [-1, 1], an unvisited
        child at 0, so ``c_puct`` weighs exploration against values of that range. Static.
      pb_c_base: mctx ``pb_c_base``, > 0 (the exploration grows as
        ``c_puct + log((N + pb_c_base + 1) / pb_c_base)``).
      dirichlet_alpha: concentration of the root Dirichlet noise (PUCT), > 0.
      dirichlet_fraction: weight of that noise, in [0, 1]; 0 = no noise.
      max_num_considered_actions: root actions sampled by Gumbel top-k. Static.
      gumbel_scale: scale of the root Gumbel noise, >= 0 (0: deterministic).
      gumbel_q: the Q-values of Gumbel's selections (root and interior).
        ``"completed"`` (mctx's ``qtransform_completed_by_mix_value`` with
        ``value_scale`` and ``maxvisit_init``); any name in `QTRANSFORMS`. Static.
      value_scale, maxvisit_init: the ``sigma(q) = (maxvisit_init + max N) *
        value_scale * q`` transform of completed Q-values (Gumbel), >= 0.
      max_depth: deepest simulation (edges from the root), None = unlimited. Static.
      backend: ``"mctx"`` (mctx's policies) or ``"linear"`` (`gomoku_jax.tree_search`:
        the same policies and results, with a cost per simulation that does not grow
        with the number of simulations). Static.
      reuse_tree: keep the searched tree between moves (`run_search_reusing`,
        `advance_tree`; self-play and `ReusingSearchAgent`): the played child's subtree
        becomes the next search's tree, its statistics carried over. Needs
        ``backend="linear"`` and ``algorithm="puct"``. Static.
      reuse_capacity: with ``reuse_tree``, None keeps the whole subtree in trees of
        ``num_simulations + 1`` nodes, so kept nodes count towards the budget (a search
        that starts with ``n`` nodes runs ``num_simulations + 1 - n`` new simulations);
        an integer ``M >= 1`` gives trees of ``num_simulations + M`` nodes that keep at
        most ``M`` nodes (the first in creation order), so every search runs the full
        ``num_simulations`` new simulations on top of what it kept. Static.
      local_exploration: seed 003's "playout cap randomization" (its III-B-1): the
        probability, in [0, 1], that a simulation explores locally, descending only half
        the mean depth of the search's nodes (rounded up) and evaluating the node it
        stops at, expanded or not (see `tree_search.search`). 0: off. Needs
        ``backend="linear"`` and ``algorithm="puct"``. Static.
    """

    algorithm: str = "puct"
    num_simulations: int = 64
    c_puct: float = 1.25
    pb_c_base: float = 19652.0
    dirichlet_alpha: float = 0.3
    dirichlet_fraction: float = 0.25
    max_num_considered_actions: int = 16
    gumbel_scale: float = 1.0
    value_scale: float = 0.1
    maxvisit_init: float = 50.0
    max_depth: int | None = None
    backend: str = "mctx"
    reuse_tree: bool = False
    reuse_capacity: int | None = None
    puct_q: str = "minmax"
    local_exploration: float = 0.0
    gumbel_q: str = "completed"

    def __post_init__(self):
        plain_fields(self)
        for name in ("puct_q", "gumbel_q"):
            value = getattr(self, name)
            if not isinstance(value, str) or value not in QTRANSFORMS:
                raise ValueError(
                    f"SearchConfig.{name} must name a registered qtransform "
                    f"({', '.join(QTRANSFORMS)}; search.register_qtransform adds one, and "
                    f"gomoku-jax --plugin MODULE imports the module that does), got "
                    f"{value!r}")
        if self.algorithm not in ALGORITHMS:
            raise ValueError(
                f"SearchConfig.algorithm must be one of {', '.join(ALGORITHMS)}, "
                f"got {self.algorithm!r}"
            )
        if self.backend not in BACKENDS:
            raise ValueError(
                f"SearchConfig.backend must be one of {', '.join(BACKENDS)}, "
                f"got {self.backend!r}"
            )
        if not isinstance(self.reuse_tree, (bool, np.bool_)):
            raise ValueError(f"SearchConfig.reuse_tree must be a bool, got {self.reuse_tree!r}")
        object.__setattr__(self, "reuse_tree", bool(self.reuse_tree))
        if self.reuse_tree and (self.backend != "linear" or self.algorithm != "puct"):
            raise ValueError(
                "SearchConfig.reuse_tree=True needs backend='linear' and algorithm='puct' "
                f"(a Gumbel root must start without visits), got backend={self.backend!r}, "
                f"algorithm={self.algorithm!r}"
            )
        _check_int(self, "reuse_capacity", 1, allow_none=True)
        _check_int(self, "num_simulations", 1, high=_MAX_NODES - 1)
        if self.reuse_capacity is not None and (
                self.num_simulations + self.reuse_capacity > _MAX_NODES):
            raise ValueError(f"SearchConfig.num_simulations + reuse_capacity (the tree's "
                             f"nodes) must be at most {_MAX_NODES}, got "
                             f"{self.num_simulations} + {self.reuse_capacity}")
        _check_int(self, "max_num_considered_actions", 1)
        _check_int(self, "max_depth", 1, allow_none=True)
        _check_float(self, "c_puct", 0.0, low_open=True)
        _check_float(self, "pb_c_base", 0.0, low_open=True)
        _check_float(self, "dirichlet_alpha", 0.0, low_open=True)
        _check_float(self, "dirichlet_fraction", 0.0, 1.0)
        _check_float(self, "gumbel_scale", 0.0)
        _check_float(self, "value_scale", 0.0)
        _check_float(self, "maxvisit_init", 0.0)
        _check_float(self, "local_exploration", 0.0, 1.0)
        if isinstance(self.local_exploration, (jax.Array, np.ndarray)):  # static
            raise ValueError("SearchConfig.local_exploration must be a number (it shapes "
                             f"the compiled search), got {self.local_exploration!r}")
        if self.local_exploration and (self.backend != "linear" or self.algorithm != "puct"):
            raise ValueError(
                "SearchConfig.local_exploration needs backend='linear' and algorithm='puct' "
                f"(mctx's search has no local simulations), got backend={self.backend!r}, "
                f"algorithm={self.algorithm!r}")

        # The Q terms' factories, resolved from their names now: part of the config's
        # identity (equality, hash, a jitted function's static key), so a name registered
        # again with another definition reaches the configs made after, and a program
        # compiled for one never serves the other.
        object.__setattr__(self, "_qtransforms", (QTRANSFORMS[self.puct_q][0],
                                                  QTRANSFORMS[self.gumbel_q][0]))

    def _identity(self) -> tuple:
        return (tuple(getattr(self, f.name) for f in dataclasses.fields(self)),
                getattr(self, "_qtransforms", None))

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self):
        return hash(self._identity())

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "SearchConfig":
        return _from_dict(cls, data)

    def replace(self, **changes) -> "SearchConfig":
        return dataclasses.replace(self, **changes)

    def inert_settings(self, prefix: str = "search.") -> list[str]:
        """The settings that do nothing with the others as they are, each in a sentence
        naming its key with ``prefix`` (a learner config's warnings, `config.warn_inert`):
        ``reuse_capacity`` without ``reuse_tree``."""
        if self.reuse_capacity is None or self.reuse_tree:
            return []
        return [f"{prefix}reuse_capacity ({self.reuse_capacity}) does nothing without "
                f"{prefix}reuse_tree: no tree is kept between moves"]


# How TacticalPrior spreads what the forced move leaves (TacticalPrior.rest)
_TACTICAL_REST = ("prior", "uniform")


@functools.partial(_register, meta=("enabled", "rest"))
@dataclasses.dataclass(frozen=True)
class TacticalPrior:
    """Seed 000's tactical threat prior for training search (section 4.5).

    At the root and at every node the search expands, the first tier that applies
    gives the forced move: (1) an immediate win of the player to move; (2) a block of
    the opponent's immediate win; (3) with probability ``open_three_probability``
    (a fresh coin per node) a block of an opponent open three. Ties in each tier go to
    the cell nearest the centre (`tactics.most_central`). The forced move then gets
    ``forced_mass`` of the prior; see `apply_tactical_prior`.

    Attributes:
      open_three_probability: chance that tier 3 is checked at a node, in [0, 1].
      forced_mass: prior probability put on the forced move, in (0, 1].
      enabled: False leaves every prior untouched. Static.
      rest: how the other ``1 - forced_mass`` is spread over the other legal moves (the
        report's "spread across remaining legal moves"): ``"prior"`` in proportion to
        the network's prior, ``"uniform"`` evenly. Static.
    """

    open_three_probability: float = 0.5
    forced_mass: float = 0.9
    enabled: bool = True
    rest: str = "prior"

    def __post_init__(self):
        plain_fields(self)
        _check_float(self, "open_three_probability", 0.0, 1.0)
        _check_float(self, "forced_mass", 0.0, 1.0, low_open=True)
        if not isinstance(self.enabled, (bool, np.bool_)):
            raise ValueError(f"TacticalPrior.enabled must be a bool, got {self.enabled!r}")
        object.__setattr__(self, "enabled", bool(self.enabled))
        if self.rest not in _TACTICAL_REST:
            raise ValueError(f"TacticalPrior.rest must be one of {list(_TACTICAL_REST)}, "
                             f"got {self.rest!r}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "TacticalPrior":
        return _from_dict(cls, data)


def _active(tactical: TacticalPrior | None) -> bool:
    if tactical is not None and not isinstance(tactical, TacticalPrior):
        raise ValueError(f"tactical must be a TacticalPrior or None, got {tactical!r}")
    return tactical is not None and tactical.enabled


# ------------------------------------------------------------------ the prior
def _over(states: State) -> jax.Array:
    return states.terminated | states.truncated  # [B]


def _mask_logits(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """Shift the legal logits to a max of 0; illegal ones get the smallest float32.

    ``[B, A]`` float32, ``[B, A]`` bool -> ``[B, A]`` float32."""
    logits = jnp.asarray(logits, jnp.float32)
    top = jnp.max(jnp.where(legal, logits, -jnp.inf), axis=-1, keepdims=True)
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    return jnp.where(legal, logits - top, _MIN_LOGIT)


def _forced_moves(env: Gomoku, states: State, key: jax.Array, p_three) -> jax.Array:
    """Seed 000's forced move per game, -1 where none: ``[B]`` int32 (see TacticalPrior)."""
    board, me = states.board, states.current_player  # [B, N, N], [B]
    win = tactics.winning_moves(board, me, env.k, env.rule)
    block = tactics.winning_moves(board, 1 - me, env.k, env.rule)
    three = tactics.open_three_blocks(board, 1 - me, env.k)
    coin = jax.random.uniform(key, me.shape) < p_three  # [B]
    three = three & coin[:, None, None]
    forced = jnp.where(
        win.any(axis=(-2, -1)),
        tactics.most_central(win),
        jnp.where(block.any(axis=(-2, -1)), tactics.most_central(block),
                  tactics.most_central(three)),  # -1 where no (fired) open three
    )
    return jnp.where(_over(states), -1, forced).astype(jnp.int32)


def apply_tactical_prior(env: Gomoku, states: State, logits: jax.Array, key: jax.Array,
                         tactical: TacticalPrior) -> jax.Array:
    """Rewrite prior logits ``[B, A]`` with seed 000's tactical threat prior.

    Where a game (not over) has a forced move ``f`` (see `TacticalPrior`), the new
    prior is, with ``m = forced_mass`` and ``p`` the softmax of ``logits`` over the
    legal moves::

        p'(f) = m
        p'(a) = (1 - m) * p(a) / sum_{b legal, b != f} p(b)   for legal a != f
        p'(a) = 0                                            for illegal a

    (with ``tactical.rest = "uniform"``: ``p'(a) = (1 - m) / n`` for the ``n`` legal
    ``a != f``)
    (``p'(f) = 1`` when ``f`` is the only legal move.) The result is returned as
    log-probabilities, illegal moves at ``jnp.finfo(jnp.float32).min``; games without
    a forced move keep ``logits`` with illegal moves masked the same way. ``key``
    draws the tier-3 coin of each game. A disabled prior returns the masked logits.
    """
    legal = states.legal_action_mask  # [B, A]
    masked = _mask_logits(logits, legal)
    if not _active(tactical):
        return masked
    num_actions = legal.shape[-1]
    forced = _forced_moves(env, states, key, tactical.open_three_probability)  # [B]
    is_forced = jnp.arange(num_actions) == forced[:, None]  # [B, A]; none where -1
    others = legal & ~is_forced
    has_other = others.any(axis=-1, keepdims=True)
    lse = jax.nn.logsumexp(jnp.where(others, masked, -jnp.inf), axis=-1, keepdims=True)
    lse = jnp.where(has_other, lse, 0.0)
    mass = jnp.asarray(tactical.forced_mass, jnp.float32)
    if tactical.rest == "uniform":
        count = jnp.sum(others, axis=-1, keepdims=True)
        rest = jnp.log1p(-mass) - jnp.log(jnp.maximum(count, 1)).astype(jnp.float32)
    else:  # in proportion to the network's prior
        rest = jnp.log1p(-mass) + masked - lse  # -inf when forced_mass == 1
    rewritten = jnp.where(
        is_forced,
        jnp.where(has_other, jnp.log(mass), 0.0),
        jnp.where(others, jnp.maximum(rest, _MIN_LOGIT), _MIN_LOGIT),
    )
    return jnp.where((forced >= 0)[:, None], rewritten, masked)


def _evaluate(evaluate: Evaluate, params, states: State, num_actions: int):
    logits, value = evaluate(params, states)
    batch = states.current_player.shape
    if logits.shape != batch + (num_actions,) or value.shape != batch:
        raise ValueError(
            f"evaluate must return logits {batch + (num_actions,)} and value {batch}, "
            f"got {logits.shape} and {value.shape}"
        )
    return jnp.asarray(logits, jnp.float32), jnp.asarray(value, jnp.float32)


def _check_batched(env: Gomoku, states: State) -> None:
    if np.ndim(states.board) != 3 or states.board.shape[1:] != (env.size, env.size):
        raise ValueError(
            f"states must be a batch of {env.size}x{env.size} games (board [B, {env.size}, "
            f"{env.size}]), got a board of shape {np.shape(states.board)}"
        )


# --------------------------------------------------------------- mctx functions
def root_output(env: Gomoku, evaluate: Evaluate, params, states: State,
                key: jax.Array | None = None,
                tactical: TacticalPrior | None = None) -> mctx.RootFnOutput:
    """The search root for a batch of games: masked (and optionally tactical) prior
    logits ``[B, A]``, the value ``[B]`` (0 for a finished game) and the states as the
    embedding, read in ``env``'s observation planes (`Gomoku.with_planes`: what a
    network built for ``env`` takes, whichever game made the states). ``key`` is needed
    only with an enabled ``tactical`` prior."""
    _check_batched(env, states)
    states = env.with_planes(states)
    logits, value = _evaluate(evaluate, params, states, env.num_actions)
    if _active(tactical):
        if key is None:
            raise ValueError("root_output: key is None, but an enabled tactical prior needs one")
        logits = apply_tactical_prior(env, states, logits, key, tactical)
    else:
        logits = _mask_logits(logits, states.legal_action_mask)
    value = jnp.where(_over(states), 0.0, value)
    return mctx.RootFnOutput(prior_logits=logits, value=value, embedding=states)


def make_recurrent_fn(env: Gomoku, evaluate: Evaluate,
                      tactical: TacticalPrior | None = None) -> Callable:
    """An mctx ``recurrent_fn(params, key, action [B], states [B])`` on the real game.

    Returns ``(RecurrentFnOutput, next_states)`` with reward = the step's reward for the
    mover, discount = -1 (0 once the game is over), value = ``evaluate``'s (0 at a
    terminal), prior logits masked to the legal moves and, with an enabled
    ``tactical`` prior, rewritten by `apply_tactical_prior` (``key`` draws its coins).
    """
    active = _active(tactical)
    step = jax.vmap(env.step)

    def recurrent_fn(params, key, action, states: State):
        states = env.with_planes(states)  # as `root_output`'s embedding (static: free)
        mover = states.current_player  # [B]
        nxt = step(states, action)
        reward = jnp.take_along_axis(nxt.rewards, mover[:, None], axis=1)[:, 0]  # [B]
        over = _over(nxt)
        logits, value = _evaluate(evaluate, params, nxt, env.num_actions)
        if active:
            logits = apply_tactical_prior(env, nxt, logits, key, tactical)
        else:
            logits = _mask_logits(logits, nxt.legal_action_mask)
        out = mctx.RecurrentFnOutput(
            reward=reward.astype(jnp.float32),
            discount=jnp.where(over, 0.0, -1.0).astype(jnp.float32),
            prior_logits=logits,
            value=jnp.where(over, 0.0, value),
        )
        return out, nxt

    return recurrent_fn


# ------------------------------------------------------------------ qtransforms
# (config) -> qtransform(tree, node_index) -> [A]: mctx's ``qtransform`` for the config.
QTransformFactory = Callable[["SearchConfig"], Callable[[mctx.Tree, Any], jax.Array]]

QTRANSFORMS: dict[str, tuple[QTransformFactory, str]] = {}
"""The Q terms a search can select with, name -> (factory, description): the names
``SearchConfig.puct_q`` and ``SearchConfig.gumbel_q`` take. Read it freely; add to it
with `register_qtransform`."""


def register_qtransform(name: str, factory: QTransformFactory, description: str, *,
                        replace: bool = False) -> None:
    """Make ``factory(config) -> qtransform`` selectable by ``name`` as
    ``SearchConfig.puct_q`` (PUCT's Q term) or ``SearchConfig.gumbel_q`` (the Q-values of
    Gumbel's root and interior selections), so in a config's ``search`` settings, a
    sweep over them and an exported agent (which stores the name, never code: it loads
    where the name is registered, e.g. by ``gomoku-jax --plugin MODULE``).

    ``factory`` gets the `SearchConfig` (whose floats may be traced: a sweep over
    ``value_scale`` reaches the factory as an array) and returns mctx's
    ``qtransform(tree, node_index) -> [num_actions]`` for one unbatched ``mctx.Tree``
    and one node, as mctx's ``qtransform_by_parent_and_siblings``; both backends take
    it. A name taken (built-in or registered) is refused unless ``replace=True``, or
    unless it is taken by the same definition (`config.same_definition`: a notebook cell
    or a reloaded plugin run again), which is replaced. Every refusal is a
    ``ValueError``."""
    if not isinstance(name, str) or not name or any(ch.isspace() for ch in name):
        raise ValueError(f"register_qtransform: name must be a non-empty string without "
                         f"spaces, got {name!r}")
    if not callable(factory):
        raise ValueError(f"register_qtransform: the factory of {name!r} must be callable "
                         f"as factory(config) -> qtransform, got {factory!r}")
    if not isinstance(description, str) or not description.strip():
        raise ValueError(f"register_qtransform: description of {name!r} must be a "
                         f"non-empty string, got {description!r}")
    if not isinstance(replace, bool):
        raise ValueError(f"register_qtransform: replace must be a bool, got {replace!r}")
    if name in QTRANSFORMS and not replace and not same_definition(QTRANSFORMS[name][0],
                                                                   factory):
        raise ValueError(f"register_qtransform: {name!r} is already registered; pass "
                         "replace=True to replace it")
    QTRANSFORMS[name] = (factory, description)


def qtransform_of(config: SearchConfig, name: str | None = None):
    """The ``qtransform`` the search of ``config`` selects with: ``name``'s (default: the
    config's algorithm's, ``puct_q`` or ``gumbel_q``) factory applied to ``config``. A
    registered one is checked when the search is traced: what it returns must be the
    Q-values of the node's children, ``[num_actions]``, else a ``ValueError`` names it.
    The config's own names take the factories registered when the config was made."""
    if name is None:
        name = config.puct_q if config.algorithm == "puct" else config.gumbel_q
    # the config's own (resolved when it was made), else the registry's
    factory = dict(zip((config.puct_q, config.gumbel_q),
                       getattr(config, "_qtransforms", ()))).get(name)
    if factory is None:
        if name not in QTRANSFORMS:
            raise ValueError(f"qtransform {name!r} is not registered "
                             f"({', '.join(QTRANSFORMS)})")
        factory = QTRANSFORMS[name][0]
    qtransform = factory(config)
    if not callable(qtransform):
        raise ValueError(f"qtransform {name!r}: its factory returned {qtransform!r}, not a "
                         "function qtransform(tree, node_index)")
    if factory in _BUILTIN_FACTORIES:
        return qtransform
    return functools.partial(_checked_qtransform, qtransform, name)


def _checked_qtransform(qtransform, name: str, tree: mctx.Tree, node_index) -> jax.Array:
    q = qtransform(tree, node_index)
    shape = getattr(q, "shape", None)
    if shape != (tree.num_actions,):
        raise ValueError(f"qtransform {name!r} returned {type(q).__name__} of shape {shape}, "
                         f"want ({tree.num_actions},): the Q-values of one node's children "
                         "(it is called on one unbatched tree and one node)")
    return q


def qtransform_raw(tree: mctx.Tree, node_index) -> jax.Array:
    """The Q values of ``node_index``'s children as they are (reward plus discounted
    value: the mean value from the node's player's view), 0 for an unvisited child: the
    Q of AlphaZero's PUCT score, for mctx's ``qtransform`` argument (one unbatched
    tree). A child whose prior logit is the masked one (`_MIN_LOGIT`: an illegal move,
    or a move the tactical prior leaves no mass) gets -inf, so that PUCT chooses among
    the others, as AlphaZero among the legal moves: with 0 it would outscore every legal
    child whose Q + U is below 0 (a node where the player to move is behind), and the
    search would spend simulations on forfeits (the root alone is masked by mctx's
    ``invalid_actions``)."""
    q = jnp.where(tree.children_visits[node_index] > 0, tree.qvalues(node_index), 0.0)
    return jnp.where(tree.children_prior_logits[node_index] <= _MIN_LOGIT, -jnp.inf, q)


def _minmax_q(config: SearchConfig):
    return mctx.qtransform_by_parent_and_siblings


def _raw_q(config: SearchConfig):
    return qtransform_raw


def _completed_q(config: SearchConfig):
    return functools.partial(mctx.qtransform_completed_by_mix_value,
                             value_scale=config.value_scale,
                             maxvisit_init=config.maxvisit_init)


_BUILTIN_FACTORIES = (_minmax_q, _raw_q, _completed_q)  # checked once, by their tests

register_qtransform("minmax", _minmax_q,
                    "mctx's qtransform_by_parent_and_siblings: Q rescaled to [0, 1] by the "
                    "node's value and its visited children's, unvisited at the least")
register_qtransform("raw", _raw_q,
                    "Q as it is (the mean value in [-1, 1]), unvisited 0, masked moves -inf: "
                    "AlphaZero's PUCT as the reports run it")
register_qtransform("completed", _completed_q,
                    "mctx's qtransform_completed_by_mix_value with search.value_scale and "
                    "search.maxvisit_init: Gumbel MuZero's completed Q-values")


def selection_functions(config: SearchConfig):
    """``(root_fn, interior_fn)``: the action selections `run_search` uses with ``config``
    (mctx's signatures: ``root_fn(key, tree, node)``, ``interior_fn(key, tree, node,
    depth)`` on one unbatched tree), e.g. to time one step of a search alone."""
    if not isinstance(config, SearchConfig):
        raise ValueError(f"config must be a SearchConfig, got {config!r}")
    if config.algorithm == "puct":
        return tree_search.puct_selection(pb_c_init=config.c_puct, pb_c_base=config.pb_c_base,
                                          qtransform=qtransform_of(config, config.puct_q))
    return tree_search.gumbel_selection(
        config.num_simulations, max_num_considered_actions=config.max_num_considered_actions,
        qtransform=qtransform_of(config, config.gumbel_q))


_NOISE = 0x6E6F  # folded into the search key for the root noise ("no")


def root_noise(root: mctx.RootFnOutput, legal: jax.Array, key: jax.Array,
               config: SearchConfig) -> mctx.RootFnOutput:
    """``root`` with PUCT's Dirichlet noise mixed into its prior over the legal moves
    only: ``(1 - fraction) * prior + fraction * noise``, the noise
    ``Dirichlet(alpha)`` drawn over each game's legal moves (AlphaZero's). mctx's
    ``muzero_policy`` spreads it over every action and then masks the illegal ones, so
    its weight would shrink with the empty share of the board (a quarter of it with 20
    of 81 cells empty); the policies are therefore called with no noise of their own."""
    fraction = config.dirichlet_fraction
    if isinstance(fraction, (int, float)) and fraction == 0:  # static: no noise to mix
        return root
    probs = jax.nn.softmax(jnp.where(legal, root.prior_logits, -jnp.inf), axis=-1)
    gamma = jnp.where(legal, jax.random.gamma(key, config.dirichlet_alpha, legal.shape), 0.0)
    noise = gamma / jnp.maximum(jnp.sum(gamma, axis=-1, keepdims=True),
                                jnp.finfo(gamma.dtype).tiny)
    mixed = (1.0 - fraction) * probs + fraction * noise
    logits = jnp.log(jnp.maximum(mixed, jnp.finfo(mixed.dtype).tiny))
    return root.replace(prior_logits=jnp.where(legal, logits, root.prior_logits))


def run_search(env: Gomoku, evaluate: Evaluate, params, states: State, key: jax.Array,
               config: SearchConfig, tactical: TacticalPrior | None = None, *,
               devices=None) -> mctx.PolicyOutput:
    """Search a batch of games ``states [B]``; returns mctx's ``PolicyOutput``.

    PUCT: ``mctx.muzero_policy`` with Dirichlet noise on the root prior and the Q term
    ``config.puct_q``. Gumbel: ``mctx.gumbel_muzero_policy`` with ``config.gumbel_q``
    (default mctx's ``qtransform_completed_by_mix_value``). The root
    masks ``invalid_actions = ~legal_action_mask``. Jit it with ``env`` and ``evaluate``
    static; ``config`` may be static or an argument (see the module docstring).
    ``config.backend == "linear"`` runs the same policies from `gomoku_jax.tree_search`.
    Either backend refuses a tree that would not fit the device, before it is allocated
    (`tree_search.check_root_memory`); ``devices``: the devices the
    batch is split over when the program runs sharded (each then holds its part; see
    `tree_search.check_tree_memory`). Always a fresh tree (``config.reuse_tree`` is for
    `run_search_reusing`).
    """
    if not isinstance(config, SearchConfig):
        raise ValueError(f"config must be a SearchConfig, got {config!r}")
    _check_batched(env, states)
    root_key, search_key = jax.random.split(key)
    root = root_output(env, evaluate, params, states, root_key, tactical)
    recurrent_fn = make_recurrent_fn(env, evaluate, tactical)
    invalid = ~states.legal_action_mask
    linear = config.backend == "linear"
    policies = tree_search if linear else mctx
    checked = {"devices": devices} if linear else {}
    if not linear:  # mctx checks no memory: its tree, of the same layout, is checked here
        tree_search.check_root_memory(root, config.num_simulations, devices=devices)
    if config.algorithm == "puct":
        root = root_noise(root, states.legal_action_mask,
                          jax.random.fold_in(search_key, _NOISE), config)
        return policies.muzero_policy(
            params, search_key, root, recurrent_fn,
            num_simulations=config.num_simulations,
            invalid_actions=invalid,
            max_depth=config.max_depth,
            dirichlet_fraction=0.0,
            pb_c_init=config.c_puct,
            pb_c_base=config.pb_c_base,
            qtransform=qtransform_of(config, config.puct_q),
            **checked,
            **({"local_exploration": config.local_exploration} if linear else {}),
        )
    return policies.gumbel_muzero_policy(
        params, search_key, root, recurrent_fn,
        num_simulations=config.num_simulations,
        invalid_actions=invalid,
        max_depth=config.max_depth,
        qtransform=qtransform_of(config, config.gumbel_q),
        max_num_considered_actions=config.max_num_considered_actions,
        gumbel_scale=config.gumbel_scale,
        **checked,
    )


# ---------------------------------------------------------------- tree reuse
def _check_reuse(config: SearchConfig) -> None:
    if not isinstance(config, SearchConfig):
        raise ValueError(f"config must be a SearchConfig, got {config!r}")
    if not config.reuse_tree:
        raise ValueError("tree reuse needs a SearchConfig with reuse_tree=True (and "
                         "backend='linear', algorithm='puct'), got reuse_tree=False")


def tree_capacity(config: SearchConfig) -> int:
    """Nodes per game of a reused tree: ``num_simulations + 1``, or ``num_simulations +
    reuse_capacity`` when that is set (see `SearchConfig`)."""
    extra = 1 if config.reuse_capacity is None else config.reuse_capacity
    return config.num_simulations + extra


def empty_tree(env: Gomoku, states: State, config: SearchConfig, *,
               devices=None) -> mctx.Tree:
    """A tree with no node used for each game of ``states [B]`` (their structure and
    dtypes only), of `tree_capacity` nodes: what a game's first search starts from.

    Raises ``ValueError`` (while tracing, before anything is allocated) when two copies
    of the tree would not fit the device, or each of ``devices`` its part of the batch
    (`tree_search.check_search_memory`)."""
    _check_reuse(config)
    _check_batched(env, states)
    states = env.with_planes(states)  # as `root_output`'s embedding
    batch, capacity, actions = states.board.shape[0], tree_capacity(config), env.num_actions
    state_bytes = sum(int(np.prod(np.shape(x)[1:], dtype=np.int64)) * jnp.dtype(x.dtype).itemsize
                      for x in jax.tree.leaves(states))
    tree_search.check_search_memory(
        batch, config.num_simulations, actions, state_bytes, device=devices,
        capacity=None if config.reuse_capacity is None else capacity,
        capacity_name="search.reuse_capacity")
    bn, bna = (batch, capacity), (batch, capacity, actions)
    none = mctx.Tree.NO_PARENT
    return mctx.Tree(
        node_visits=jnp.zeros(bn, jnp.int32),
        raw_values=jnp.zeros(bn, jnp.float32),
        node_values=jnp.zeros(bn, jnp.float32),
        parents=jnp.full(bn, none, jnp.int32),
        action_from_parent=jnp.full(bn, none, jnp.int32),
        children_index=jnp.full(bna, mctx.Tree.UNVISITED, jnp.int32),
        children_prior_logits=jnp.zeros(bna, jnp.float32),
        children_values=jnp.zeros(bna, jnp.float32),
        children_visits=jnp.zeros(bna, jnp.int32),
        children_rewards=jnp.zeros(bna, jnp.float32),
        children_discounts=jnp.zeros(bna, jnp.float32),
        embeddings=jax.tree.map(lambda x: jnp.zeros(bn + x.shape[1:], x.dtype), states),
        root_invalid_actions=jnp.zeros((batch, actions), jnp.bool_),
        extra_data=None,
    )


def _where_games(mask: jax.Array, new, old):
    """Per game: ``new`` where ``mask [B]``, else ``old`` (pytrees, leading ``B``)."""
    return jax.tree.map(
        lambda a, b: jnp.where(mask.reshape(mask.shape + (1,) * (b.ndim - 1)), a, b), new, old)


def _clear_games(tree: mctx.Tree, mask: jax.Array) -> mctx.Tree:
    """``tree`` with the games of ``mask [B]`` emptied (as `empty_tree` makes them)."""
    none = jnp.int32(mctx.Tree.NO_PARENT)

    def clear(x, fill):
        return jnp.where(mask.reshape(mask.shape + (1,) * (x.ndim - 1)),
                         jnp.asarray(fill, x.dtype), x)

    return tree.replace(
        node_visits=clear(tree.node_visits, 0),
        raw_values=clear(tree.raw_values, 0),
        node_values=clear(tree.node_values, 0),
        parents=clear(tree.parents, none),
        action_from_parent=clear(tree.action_from_parent, none),
        children_index=clear(tree.children_index, mctx.Tree.UNVISITED),
        children_prior_logits=clear(tree.children_prior_logits, 0),
        children_values=clear(tree.children_values, 0),
        children_visits=clear(tree.children_visits, 0),
        children_rewards=clear(tree.children_rewards, 0),
        children_discounts=clear(tree.children_discounts, 0),
        embeddings=jax.tree.map(lambda x: clear(x, 0), tree.embeddings),
    )


def tree_matches(tree: mctx.Tree, states: State) -> jax.Array:
    """``[B]`` bool: the game's tree has a root and its stored state (the embedding at
    node 0) is ``states``' position: same board, player to move, last move (the
    observation planes read it), terminated and truncated flags."""
    root = jax.tree.map(lambda x: x[:, mctx.Tree.ROOT_INDEX], tree.embeddings)
    return ((tree.node_visits[:, mctx.Tree.ROOT_INDEX] > 0)
            & jnp.all(root.board == states.board, axis=(-2, -1))
            & (root.current_player == states.current_player)
            & (root.last_action == states.last_action)
            & (root.terminated == states.terminated)
            & (root.truncated == states.truncated))


def run_search_reusing(env: Gomoku, evaluate: Evaluate, params, states: State,
                       key: jax.Array, config: SearchConfig,
                       tactical: TacticalPrior | None = None,
                       tree: mctx.Tree | None = None, *, devices=None) -> mctx.PolicyOutput:
    """`run_search` (PUCT, linear backend) from a kept ``tree`` (from `advance_tree`).

    Per game the kept tree is used only when `tree_matches` the game's state; otherwise
    (a restarted game, a child never expanded, any other position) the game starts from
    an empty tree, so a search from ``tree=None`` (`empty_tree`) or from a stale tree is
    exactly `run_search`'s with ``backend="linear"`` and the same key. The root gets the
    network's prior (with ``tactical`` and Dirichlet noise, as `run_search`), which
    replaces the kept root's stored prior; its visits, values and subtree are kept, so
    the root visit distribution (the policy target) includes the carried visits.
    ``config.reuse_tree`` must be set; ``devices``: as in `run_search`, for the empty tree
    made when ``tree`` is None (a kept tree was checked when it was made; one of another
    batch, board or `tree_capacity` than ``states`` and ``config`` is a ``ValueError``).
    Returns the output; its ``search_tree`` is the whole tree (`advance_tree` it with the
    move played).
    """
    _check_reuse(config)
    _check_batched(env, states)
    states = env.with_planes(states)  # as `root_output`: the game's own planes
    if tree is None:
        tree = empty_tree(env, states, config, devices=devices)
    else:
        _check_kept_tree(env, states, config, tree)
    tree = _clear_games(tree, ~tree_matches(tree, states))
    root_key, search_key = jax.random.split(key)
    root = root_output(env, evaluate, params, states, root_key, tactical)
    recurrent_fn = make_recurrent_fn(env, evaluate, tactical)
    root = root_noise(root, states.legal_action_mask, jax.random.fold_in(search_key, _NOISE),
                      config)
    return tree_search.muzero_policy(
        params, search_key, root, recurrent_fn,
        num_simulations=config.num_simulations,
        invalid_actions=~states.legal_action_mask,
        max_depth=config.max_depth,
        dirichlet_fraction=0.0,
        pb_c_init=config.c_puct,
        pb_c_base=config.pb_c_base,
        qtransform=qtransform_of(config, config.puct_q),
        tree=tree,
        local_exploration=config.local_exploration,
    )


def _check_kept_tree(env: Gomoku, states: State, config: SearchConfig,
                     tree: mctx.Tree) -> None:
    """Refuse a kept ``tree`` that is not one `empty_tree` and `advance_tree` make for
    ``states`` and ``config``: ``[batch, tree_capacity(config), num_actions]``."""
    if not isinstance(tree, mctx.Tree):
        raise ValueError(f"tree must be an mctx.Tree (from empty_tree or advance_tree), "
                         f"got {type(tree).__name__}")
    want = (states.board.shape[0], tree_capacity(config), env.num_actions)
    have = tuple(np.shape(tree.children_index))
    if have != want:
        raise ValueError(
            f"tree has children_index of shape {have} ([games, nodes, actions]); this "
            f"search needs {want}: {want[0]} games (the states' batch), {want[1]} nodes "
            f"(tree_capacity(config)) and {want[2]} actions ({env.size}x{env.size} board); "
            f"make it with empty_tree(env, states, config) and keep it with advance_tree")


def advance_tree(tree: mctx.Tree, action: jax.Array, config: SearchConfig,
                 reset: jax.Array | None = None) -> mctx.Tree:
    """The tree of the next search after ``action [B]`` is played at each root: the
    child's subtree (`tree_search.reuse_subtree`, at most ``config.reuse_capacity``
    nodes); empty for a child never expanded or terminal, or where ``reset [B]`` (the
    game restarted)."""
    _check_reuse(config)
    return tree_search.reuse_subtree(tree, action, reset, max_nodes=config.reuse_capacity)


def _descend(tree: mctx.Tree, states: State) -> mctx.Tree:
    """Follow one move from each kept root towards ``states [B]``: a game whose state
    has exactly one more stone on a cell empty at the root gets that child's subtree;
    a game whose state has the root's stones is left as it is; any other gets an empty
    tree. (`run_search_reusing` then checks the whole position.)"""
    batch = states.board.shape[0]
    board = jax.tree.map(lambda x: x[:, mctx.Tree.ROOT_INDEX], tree.embeddings).board
    old, new = board.reshape(batch, -1), states.board.reshape(batch, -1)  # [B, A]
    diff = old != new
    count = jnp.sum(diff, axis=-1)
    reply = ops.argmax(diff, axis=-1)
    placed = (count == 1) & (jnp.take_along_axis(old, reply[:, None], axis=1)[:, 0] == 0)
    descended = tree_search.reuse_subtree(tree, jnp.where(placed, reply, -1))
    return _where_games(count == 0, tree, descended)


def _reusing_move(env, evaluate, config, temperature, params, key, state: State, tree):
    states = jax.tree.map(lambda x: x[None], state)  # a batch of one game
    tree = _descend(tree, states)
    # the root's visits the search starts from (0 where `run_search_reusing` clears it)
    carried = jnp.where(tree_matches(tree, states), tree.node_visits[:, mctx.Tree.ROOT_INDEX],
                        0)[0]
    search_key, action_key = jax.random.split(key)
    output = run_search_reusing(env, evaluate, params, states, search_key, config, None, tree)
    action = select_action(output, action_key, temperature)
    return (action[0], output.search_tree, advance_tree(output.search_tree, action, config),
            carried)


def _empty_for_one(env, config, state: State) -> mctx.Tree:
    return empty_tree(env, jax.tree.map(lambda x: x[None], state), config)


def _is_gumbel(output: mctx.PolicyOutput) -> bool:
    return isinstance(output.search_tree.extra_data, mctx.GumbelMuZeroExtraData)


def policy_target(output: mctx.PolicyOutput, config: SearchConfig) -> jax.Array:
    """The training target ``[B, A]`` of a search: the root visit distribution (PUCT)
    or the completed-Q improved policy ``softmax(logits + sigma(completedQ))``
    (Gumbel). Both are mctx's ``action_weights``: zero on illegal moves, sum 1.
    (Meaningless for games already over at the root; a learner masks those.)"""
    expected = "gumbel" if _is_gumbel(output) else "puct"
    if config.algorithm != expected:
        raise ValueError(
            f"config.algorithm is {config.algorithm!r} but the output comes from a "
            f"{expected!r} search"
        )
    return output.action_weights


def policy_value(output: mctx.PolicyOutput, target: jax.Array) -> jax.Array:
    """The search's value ``[B]`` of its root position for the player to move: the
    expected root Q-value under ``target`` (a policy over the root's actions, e.g.
    `policy_target`), each unvisited action's Q completed by the root value.

    With PUCT's visit distribution this is the visit-weighted mean of the children's
    values (the root value less the network's own first estimate). With Gumbel's improved
    policy it is that policy's value, not the root's mean: a few-simulation Gumbel search
    gives every considered action about one visit, so its root mean is close to the
    average of those moves, good and bad alike."""
    tree = output.search_tree
    root = tree.ROOT_INDEX
    visits = tree.children_visits[:, root]
    q = tree.qvalues(jnp.full(visits.shape[:1], root))
    q = jnp.where(visits > 0, q, tree.node_values[:, root][:, None])
    return jnp.sum(target * q, axis=-1)


def select_action(output: mctx.PolicyOutput, key: jax.Array, temperature) -> jax.Array:
    """The move to play per game: ``[B]`` int32.

    ``temperature == 0``: the most visited root action (among equally visited ones the
    highest Q-value, then the lowest index: a few-simulation search often ties, and the
    lowest index alone would lean to the board's top-left corner), or
    for a Gumbel search its chosen action (``output.action``: the best of the last
    sequential-halving round). ``temperature > 0``: a sample from ``visits ** (1/T)``,
    computed as ``exp((log N - log max N) / T)`` so small ``T`` neither overflows nor
    divides by zero; unvisited and illegal root actions are never sampled.
    ``temperature`` may be traced.
    """
    if _is_concrete_number(temperature) and temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature!r}")
    tree = output.search_tree
    visits = tree.children_visits[:, tree.ROOT_INDEX]  # [B, A]
    visits = jnp.where(tree.root_invalid_actions > 0, 0, visits).astype(jnp.float32)
    if _is_gumbel(output):
        greedy = output.action.astype(jnp.int32)
    else:
        top = jnp.max(visits, axis=-1, keepdims=True)
        q = tree.qvalues(jnp.full(visits.shape[:1], tree.ROOT_INDEX))
        greedy = ops.argmax(jnp.where((visits == top) & (visits > 0), q, -jnp.inf), axis=-1)
    if _is_concrete_number(temperature) and temperature == 0:
        return greedy
    t = jnp.asarray(temperature, jnp.float32)
    safe_t = jnp.where(t > 0, t, 1.0)
    top = jnp.max(visits, axis=-1, keepdims=True)
    log_ratio = jnp.log(jnp.maximum(visits, 1.0)) - jnp.log(jnp.maximum(top, 1.0))
    logits = jnp.where(visits > 0, log_ratio / safe_t, -jnp.inf)
    sampled = jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)
    return jnp.where(t > 0, sampled, greedy)


# ------------------------------------------------------------------- agents
def _uniform(num_actions: int, params, states: State):
    del params
    batch = states.current_player.shape
    return jnp.zeros(batch + (num_actions,), jnp.float32), jnp.zeros(batch, jnp.float32)


def _network(module, params, states: State):
    out = module.apply(params, states.observation, train=False)
    if not (isinstance(out, tuple) and len(out) == 2):
        got = jax.tree.map(lambda x: tuple(np.shape(x)), out)
        raise ValueError(f"network_evaluate: {type(module).__name__} returned {got}, not "
                         "(policy_logits [B, A], value [B]): the search needs a policy-value "
                         "network (a Q network plays without search)")
    logits, value = out
    return logits.astype(jnp.float32), value.astype(jnp.float32)


def network_evaluate(module) -> Evaluate:
    """The ``evaluate`` of a Flax policy-value module from `gomoku_jax.networks`
    (inference mode; ``params`` are its variables), outputs in float32. A module that
    returns anything but a pair (a Q network's ``q [B, A]``) is a ``ValueError`` when the
    search is traced."""
    return static_partial(_network, module)


def uniform_evaluate(env: Gomoku) -> Evaluate:
    """An ``evaluate`` that ignores ``params``: zero logits (a uniform prior over the
    legal moves) and zero value. For tests and as a network-free search baseline."""
    return static_partial(_uniform, env.num_actions)


def _search_policy(env, evaluate, config, temperature, params, key, state: State):
    one = jax.tree.map(lambda x: x[None], (key, state))  # a batch of one game
    return _search_batch(env, evaluate, config, temperature, params, *one)[0]


def _search_batch(env, evaluate, config, temperature, params, keys, states: State):
    # The batch searched at once (run_search draws its noise from one key: the first);
    # `root_output` reads the states in the agent's own game's planes, whoever made them
    search_key, action_key = jax.random.split(keys[0])
    output = run_search(env, evaluate, params, states, search_key, config)
    return select_action(output, action_key, temperature)


def search_policy(env: Gomoku, evaluate: Evaluate, config: SearchConfig,
                  temperature: float = 0.0) -> Callable[[Any, jax.Array, State], jax.Array]:
    """A one-game policy ``policy(params, key, state) -> action`` that searches (no
    tactical prior: play-time search never uses it) and plays by `select_action`."""
    if not isinstance(config, SearchConfig):
        raise ValueError(f"config must be a SearchConfig, got {config!r}")
    if not _is_concrete_number(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a number >= 0, got {temperature!r}")
    return static_partial(_search_policy, env, evaluate, config, float(temperature))


def search_agent(name: str, env: Gomoku, evaluate: Evaluate, params, config: SearchConfig,
                 temperature: float = 0.0) -> JaxAgent:
    """A `JaxAgent` playing `search_policy` with ``params``; a `ReusingSearchAgent`
    when ``config.reuse_tree`` is set. Not ``batched`` on a CPU backend (see
    `gomoku_jax.arena`)."""
    if isinstance(config, SearchConfig) and config.reuse_tree:
        return ReusingSearchAgent(name, env, evaluate, params, config, temperature)
    return JaxAgent(name, search_policy(env, evaluate, config, temperature), params, env=env,
                    batched=_batch_searches(),
                    batch=_search_batch_policy(env, evaluate, config, temperature))


def _search_batch_policy(env, evaluate, config, temperature):
    """`search_policy` over a batch, searched as one batch: under ``vmap`` the one-game
    search's loops would step over the whole tree of every game."""
    return static_partial(_search_batch, env, evaluate, config, float(temperature))


def _batch_searches() -> bool:
    return jax.default_backend() != "cpu"


@functools.lru_cache(maxsize=16)
def _reusing_programs(env, evaluate, config, temperature):
    """`ReusingSearchAgent`'s compiled move and empty tree, shared by equal agents."""
    return (jax.jit(functools.partial(_reusing_move, env, evaluate, config, temperature)),
            jax.jit(functools.partial(_empty_for_one, env, config)))


class ReusingSearchAgent(JaxAgent):
    """A search agent that keeps its tree between the moves it is asked for.

    `act` (the sequential paths: the Gomocup brain, matches against Python agents, the
    play server's agents) searches from the tree it kept: after its move it keeps
    the played child's subtree (`advance_tree`); at the next call it follows the one
    stone the opponent added (or none, when asked about that very position again) and
    searches from that node's subtree when the node's stored state is the position
    asked about (`tree_matches`); any other position (a new game, a takeback, a board
    set by hand) starts from an empty tree. ``last_tree`` is the tree of the latest
    search, ``tree`` the one kept for the next; `reset` drops it. `search` is `act` that
    also returns the tree it searched, and can leave the kept tree as it was (the play
    server's analysis of a position).

    As a `JaxAgent` its ``policy`` is `search_policy` with a fresh tree per move: the
    arena's batched JAX-vs-JAX matches search all their games with it at once (no
    reuse there). ``config.reuse_tree`` must be set (``backend="linear"``,
    ``algorithm="puct"``). Thread-safe.
    """

    def __init__(self, name: str, env: Gomoku, evaluate: Evaluate, params,
                 config: SearchConfig, temperature: float = 0.0):
        _check_reuse(config)
        super().__init__(name, search_policy(env, evaluate, config, temperature), params,
                         batched=_batch_searches(), env=env,
                         batch=_search_batch_policy(env, evaluate, config, temperature))
        move, empty = _reusing_programs(env, evaluate, config, float(temperature))
        for attr, value in (("config", config), ("_move", move), ("_empty", empty),
                            ("_lock", threading.Lock()), ("tree", None), ("last_tree", None)):
            object.__setattr__(self, attr, value)

    def reset(self) -> None:
        """Forget the kept tree: the next move searches from an empty one."""
        with self._lock:
            object.__setattr__(self, "tree", None)

    def act(self, state: State, key: jax.Array, deadline: float | None = None) -> int:
        del deadline  # a fixed number of simulations
        return self.search(state, key).action

    def search(self, state: State, key: jax.Array, keep: bool = True) -> "KeptSearch":
        """The search `act` makes from the kept tree, with the tree it searched and the
        visits its root carried over. ``keep`` False leaves ``tree`` and ``last_tree``
        as they were, so the next move searches as if this search had not been made."""
        # in the game's own planes, as `run_search_reusing` reads it: so that a kept
        # tree's embeddings compare with it
        state = self.env.with_planes(state)
        with self._lock:
            tree = self.tree
            if tree is not None and jax.tree.structure(tree.embeddings) != jax.tree.structure(
                    state):
                tree = None  # a state of another kind
            if tree is None:
                tree = self._empty(state)
            action, searched, kept, carried = self._move(self.params, key, state, tree)
            if keep:
                object.__setattr__(self, "last_tree", searched)
                object.__setattr__(self, "tree", kept)
            return KeptSearch(int(action), searched, int(carried))


class KeptSearch(NamedTuple):
    """`ReusingSearchAgent.search`'s answer: the move, the tree searched (a batch of one
    game) and the visits its root had before the search (0 from an empty tree)."""

    action: int
    tree: mctx.Tree
    carried: int
