"""One interface for every player, learned or not.

An `Agent` answers ``act(state, key, deadline=None) -> action`` for one game on the host;
``deadline`` is an absolute ``time.perf_counter()`` time by which an agent that can budget
its search (pure MCTS, iterative-deepening alpha-beta) must answer; others ignore it. Two
kinds:

* `JaxAgent`: a pure, jittable ``policy(params, key, state) -> int32`` for ONE game
  (``params`` is any pytree, None for rule-based agents). The arena ``vmap``s it over
  a batch of games and runs whole matches between two JAX agents in one compiled loop.
* `PythonAgent`: recursive searches written in Python (alpha-beta, engines over a pipe)
  implement ``select(state, rng) -> int``; the arena calls them one move at a time.

Agents never mutate the state they are given. An agent that returns an illegal action
loses that game (the engine's forfeit), and the arena reports the reason.

Baselines here: `random_agent`, `heuristic_agent` (seed 000 section 5) and the
`with_killer` wrapper (a "killer" module: take an immediate win, else block the
opponent's immediate win, else defer to the wrapped agent; with ``blocks=False`` seed
001's, which takes the win only).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import types
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from gomoku_jax import ops, tactics
from gomoku_jax.config import check_int, check_number, clip, closest, same_definition
from gomoku_jax.game import Gomoku, State, describe_result, game_words, sample_legal_action

__all__ = [
    "AGENTS",
    "Agent",
    "check_env",
    "check_state",
    "plain_action",
    "digits",
    "JaxAgent",
    "PythonAgent",
    "exported_path",
    "exported_spec",
    "parse_exported",
    "pure_mcts_name",
    "heuristic_agent",
    "greedy_q_agent",
    "make",
    "numpy_rng",
    "random_agent",
    "register_agent",
    "static_partial",
    "with_killer",
]

Policy = Callable[[Any, jax.Array, State], jax.Array]


class _StaticPartial(functools.partial):
    """A `functools.partial` equal to, and hashing as, any other with an equal function
    and equal arguments (when those are hashable; otherwise only to itself)."""

    def _key(self):
        # each argument with its type: 1, 1.0 and True are equal and hash alike, but a
        # program traced for one does not return what the other would
        key = (self.func, tuple((type(a), a) for a in self.args),
               tuple(sorted((k, type(v), v) for k, v in self.keywords.items())))
        try:
            hash(key)
        except TypeError:  # e.g. an array argument: compared by identity
            return None
        return key

    def __hash__(self):
        key = self._key()
        return id(self) if key is None else hash(key)

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, _StaticPartial):
            return NotImplemented
        key = self._key()
        return key is not None and key == other._key()

    __ne__ = object.__ne__


def static_partial(func: Callable, *args, **keywords) -> Callable:
    """``functools.partial(func, *args, **keywords)`` compared by value: two built from
    an equal function and equal, hashable arguments (a `Gomoku`, a frozen config, a Flax
    module) are equal and hash alike. So a policy or an ``evaluate`` rebuilt for each
    evaluation, match or tournament pairing finds the program compiled for the previous
    one, where `jax.jit` takes it as a static argument or `JaxAgent` jits it."""
    return _StaticPartial(func, *args, **keywords)


@functools.lru_cache(maxsize=64)
def _jitted(policy: Policy):
    return jax.jit(policy)


class Agent:
    """A player. Subclasses give it a ``name`` and implement `act`; ``env`` is the game
    it was built for (None: it plays any), which the arena checks against the match's.
    Every subclass's `act` first checks that the state is one unfinished game of the
    game it was built for (`check_state` and the game-over check: a ValueError naming
    the agent, not an error deep in its code or a move in a finished game)."""

    name: str
    env: Gomoku | None = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        act = cls.__dict__.get("act")
        if isinstance(act, types.FunctionType) and not hasattr(act, "_checks_state"):
            cls.act = _checking_state(act)

    def act(self, state: State, key: jax.Array, deadline: float | None = None) -> int:
        """The action (``row * size + col``) to play in one unbatched game, chosen before
        ``deadline`` (a ``time.perf_counter()`` time) when the agent can budget its time."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def _check_not_over(agent: Agent, state: State) -> None:
    """ValueError naming ``agent`` when the one concrete game ``state`` is over (there
    every cell counts as legal, so a policy would answer with some move)."""
    flags = [getattr(state, name, None) for name in ("terminated", "truncated")]
    if any(flag is None or isinstance(flag, jax.core.Tracer) or np.shape(flag) != ()
           for flag in flags):
        return
    if any(bool(flag) for flag in flags):
        raise ValueError(f"agent {agent.name!r} was asked for a move in a game that is over "
                         f"({describe_result(state)})")


def _checking_state(act: Callable) -> Callable:
    """``act`` after `check_state` of its state (static comparisons) and a check that the
    game is not over (two flags read from the device: no cost to speak of next to a
    move, whose answer is read back as well), its answer through `plain_action`."""

    @functools.wraps(act)
    def checked(self, state, *args, **kwargs):
        check_state(self, state)
        _check_not_over(self, state)
        return plain_action(act(self, state, *args, **kwargs))

    checked._checks_state = True
    return checked


def plain_action(action):
    """An agent's answer as the action it means: a concrete 0-d integer array, NumPy's or
    JAX's (``jnp.argmax(...)``), as the Python int it holds; anything else as it is (a
    traced value inside a compiled program, or a wrong answer for the arena to refuse)."""
    if (isinstance(action, (np.ndarray, jax.Array)) and not isinstance(action, jax.core.Tracer)
            and action.shape == () and jnp.issubdtype(action.dtype, jnp.integer)):
        return int(action)
    return action


def _board_shape(state) -> tuple[int, ...] | None:
    """The static shape of ``state``'s board (also while traced), None without one."""
    board = getattr(state, "board", None)
    return None if board is None else tuple(np.shape(board))


def _advice(agent: Agent) -> str:
    if getattr(agent, "params", None) is not None:
        return ("its network was trained for that game alone: play it there, or train one "
                "for this game")
    return "build it for this game (e.g. agents.make(name, env))"


def _k_and_rule(state, built: Gomoku) -> tuple[int, str]:
    """The k and rule of ``state``'s game (its static ``observation_spec``; ``built``'s
    where a state has none)."""
    spec = getattr(state, "observation_spec", None)
    return getattr(spec, "k", built.k), getattr(spec, "rule", built.rule)


def _not_built_for(agent: Agent, built: Gomoku, other: str) -> ValueError:
    """The error of ``agent``, built for ``built``, handed the game ``other`` (words)."""
    return ValueError(f"agent {agent.name!r} was built for {built.words}, not {other}: "
                      f"{_advice(agent)}")


def check_state(agent: Agent, state: State) -> None:
    """ValueError naming ``agent`` when ``state`` is not one game of the game it was
    built for (its ``env``: board size, k and rule; an agent with none plays any). Only
    static data is read (the board's shape, the state's ``observation_spec``), so it
    costs nothing and works on traced states too."""
    built = getattr(agent, "env", None)
    shape = _board_shape(state)
    if not isinstance(built, Gomoku) or shape is None:
        return
    if shape == (built.size, built.size):
        k, rule = _k_and_rule(state, built)
        if (k, rule) != (built.k, built.rule):
            raise _not_built_for(agent, built, game_words(built.size, k, rule))
        return
    if len(shape) == 2:
        raise _not_built_for(agent, built, f"a {shape[0]}x{shape[1]} board")
    raise ValueError(f"agent {agent.name!r} plays one game of {built.words} at a time "
                     f"(board [{built.size}, {built.size}]), got a board of shape {shape}")


@dataclasses.dataclass(frozen=True, repr=False)
class _CheckedBatch:
    """A batch policy that first checks its states are a batch of ``env``'s games (at
    trace time: static shapes only). Equal for equal policies and games whatever the
    agent's ``name`` (for messages only), so a compiled match loop is still reused."""

    inner: Callable[[Any, jax.Array, State], jax.Array]
    env: Gomoku
    name: str = dataclasses.field(compare=False)

    def __call__(self, params, keys: jax.Array, states: State) -> jax.Array:
        n = self.env.size
        shape = _board_shape(states)
        k, rule = _k_and_rule(states, self.env)
        if shape is not None and (len(shape) != 3 or shape[1:] != (n, n)):
            got = f" (board [B, {n}, {n}]), got a board of shape {shape}"
        elif (k, rule) != (self.env.k, self.env.rule):
            got = f", got games of {game_words(n, k, rule)}"
        else:
            return self.inner(params, keys, states)
        raise ValueError(f"agent {self.name!r} was built for {self.env.words}: its batch "
                         f"policy takes a batch of those games{got}")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class JaxAgent(Agent):
    """An agent given by a pure policy for one game: ``policy(params, key, state)``.
    ``batched``: whether the arena may play all games of a match against another
    `JaxAgent` as one compiled loop (see `gomoku_jax.arena`). ``batch``: the same policy
    written for a batch, ``batch(params, keys [B], states [B]) -> actions [B]``, where
    that is better than ``vmap`` of ``policy`` (a search: under ``vmap`` every step of
    its loops would touch the whole tree); None: ``vmap``. ``env``: the game the policy
    was built for (None: any)."""

    name: str
    policy: Policy
    params: Any = None
    batched: bool = dataclasses.field(default=True, kw_only=True)
    batch: Callable[[Any, jax.Array, State], jax.Array] | None = dataclasses.field(
        default=None, kw_only=True)
    env: Gomoku | None = dataclasses.field(default=None, kw_only=True)

    @functools.cached_property
    def _jit_policy(self):
        return _jitted(self.policy)  # shared by agents whose policies are equal

    def act(self, state: State, key: jax.Array, deadline: float | None = None) -> int:
        del deadline  # a fixed computation: its cost does not depend on a budget
        # as it is: an integer becomes an int (`plain_action`), anything else (a float, an
        # array of actions) is the caller's to refuse, as any agent's wrong answer is
        return self._jit_policy(self.params, key, state)

    def batch_policy(self) -> Callable[[Any, jax.Array, State], jax.Array]:
        """``(params, keys [B], states [B]) -> actions [B]``: the policy over a batch
        (``batch``, else ``vmap`` of ``policy``); equal for equal policies, so a compiled
        loop that takes it as a static argument is reused. With an ``env`` it refuses
        states of another board size, naming the agent (when traced)."""
        batch = self.batch if self.batch is not None else static_partial(_vmapped, self.policy)
        return batch if self.env is None else _CheckedBatch(batch, self.env, self.name)


def _vmapped(policy: Policy, params, keys: jax.Array, states: State) -> jax.Array:
    return jax.vmap(policy, in_axes=(None, 0, 0))(params, keys, states)


def _greedy_q_policy(module, spec, params, key, state: State) -> jax.Array:
    del key
    if spec is not None:  # the network's own input planes, whoever made the state
        state = state.replace(observation_spec=spec)
    q = module.apply(params, state.observation[None], train=False)[0]
    return ops.argmax(jnp.where(state.legal_action_mask, q, -jnp.inf))


def greedy_q_agent(name: str, module, variables, env: Gomoku | None = None) -> JaxAgent:
    """The legal move of highest Q under a Q network (``module.apply(variables, planes)
    -> q [B, N*N]``): how value-based learners play, without exploration. With ``env``
    the network sees every position in that game's input planes (those it was trained
    on), whatever observation settings the state came with, and the arena refuses a
    match in another game."""
    spec = None if env is None else env.observation_spec
    return JaxAgent(name, static_partial(_greedy_q_policy, module, spec), variables, env=env)


def numpy_rng(key: jax.Array) -> np.random.Generator:
    """A NumPy generator seeded from a JAX key, so Python agents are reproducible too."""
    return np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())


class PythonAgent(Agent):
    """An agent whose search runs in Python: implement ``select(state, rng)``; agents
    that budget their time read ``self.deadline`` (None: no limit) during `select`."""

    deadline: float | None = None

    def select(self, state: State, rng: np.random.Generator) -> int:
        raise NotImplementedError

    def act(self, state: State, key: jax.Array, deadline: float | None = None) -> int:
        self.deadline = deadline
        try:
            action = self.select(state, numpy_rng(key))
        finally:
            self.deadline = None
        # Integers of any kind become int; anything else is passed on for the caller
        # (the arena) to report as an illegal answer.
        return int(action) if isinstance(action, (int, np.integer)) else action


# ----------------------------------------------------------------- baselines


def _random_policy(params, key, state: State) -> jax.Array:
    del params
    return sample_legal_action(key, state.legal_action_mask)


def random_agent(name: str = "random") -> JaxAgent:
    """Uniformly random legal moves."""
    return JaxAgent(name, _random_policy)


def _heuristic_policy(env: Gomoku, top_k: int, params, key, state: State,
                      block_probability=1.0, choices=None) -> jax.Array:
    """Seed 000's heuristic for one game: win, block a four (the killer module's forced
    move), block an open three (the block nearest the centre), else one of the ``top_k``
    empty cells nearest the centre. ``block_probability`` (a float, may be traced): the
    chance that it answers a threat at all (one coin per move, for the four and the open
    three alike); 1 is seed 000's player. ``choices`` (an int, may be traced, at most
    ``top_k``): pick among only that many of the most central cells instead."""
    del params
    board, me = state.board, state.current_player
    n = env.size
    empty = board == 0
    # Near the centre with light randomisation: a uniform pick among the top_k empty
    # cells by Manhattan distance to the centre (ties by a random jitter).
    distance = jnp.asarray(tactics.centrality(n)).reshape(-1)
    jitter = jax.random.uniform(key, (n * n,), maxval=0.5)
    score = jnp.where(empty.reshape(-1), -(distance + jitter), -jnp.inf)
    _, best = jax.lax.top_k(score, min(top_k, n * n))
    pick = jax.random.randint(jax.random.fold_in(key, 1), (), 0, jnp.maximum(
        jnp.minimum(top_k if choices is None else choices, empty.sum()), 1))
    answers = jax.random.uniform(jax.random.fold_in(key, 2)) < block_probability
    three = tactics.open_three_blocks(board, 1 - me, env.k) & answers
    action = jnp.where(three.any(), tactics.most_central(three), best[pick])
    forced = _forced_move(env, state, blocks=answers)
    return jnp.where(forced >= 0, forced, action).astype(jnp.int32)


def heuristic_agent(env: Gomoku, top_k: int = 3, name: str | None = None,
                    block_probability: float = 1.0) -> JaxAgent:
    """Seed 000's rule-based baseline (section 5), jittable: take a win, block a four
    (the opponent's immediate win), block an open three, else play near the centre with
    light randomisation among the ``top_k`` most central empty cells. With
    ``block_probability`` p < 1 it answers a threat only with probability p (a weaker
    sparring partner: the opponent's threats sometimes win)."""
    top_k = check_int("heuristic_agent", "top_k", top_k)
    block_probability = check_number("heuristic_agent", "block_probability", block_probability,
                                      0.0, 1.0)
    if name is None:  # the name `make` reads back: heuristic, heuristic-5, heuristic@0.5
        name = ("heuristic" + ("" if top_k == 3 else f"-{top_k}")
                + ("" if block_probability == 1.0 else f"@{block_probability!r}"))
    return JaxAgent(name, static_partial(_heuristic_policy, env, top_k,
                                            block_probability=float(block_probability)),
                    env=env)


def _killer_policy(env: Gomoku, blocks: bool, inner: Policy, params, key,
                   state: State) -> jax.Array:
    forced = _forced_move(env, state, blocks)
    return jnp.where(forced >= 0, forced, inner(params, key, state)).astype(jnp.int32)


def _killer_batch(env: Gomoku, blocks: bool, inner_batch, params, keys,
                  states: State) -> jax.Array:
    forced = jax.vmap(functools.partial(_forced_move, env, blocks=blocks))(states)
    return jnp.where(forced >= 0, forced, inner_batch(params, keys, states)).astype(jnp.int32)


def _forced_check(env: Gomoku, blocks: bool = True):
    """`_forced_move` for ``env`` compiled, shared by every killer of that game that
    does (or does not) block."""
    return _jitted(static_partial(_forced_move, env, blocks=blocks))


def _killer_act(agent, state: State, key: jax.Array, deadline: float | None = None) -> int:
    """The killer's move when one is forced, else ``agent.inner``'s own ``act``."""
    forced = int(_forced_check(agent.env, agent.blocks)(state))
    return forced if forced >= 0 else agent.inner.act(state, key, deadline)


class _KillerPython(PythonAgent):
    def __init__(self, env: Gomoku, inner: Agent, name: str, blocks: bool = True):
        self.env, self.inner, self.name, self.blocks = env, inner, name, blocks

    act = _killer_act


def _forced_move(env: Gomoku, state: State, blocks=True) -> jax.Array:
    """The killer module's move for one game, or -1 when nothing is forced; with
    ``blocks`` False (may be traced) only a win is forced."""
    board, me = state.board, state.current_player
    win = tactics.winning_moves(board, me, env.k, env.rule)
    block = tactics.winning_moves(board, 1 - me, env.k, env.rule) & blocks
    return jnp.where(win.any(), tactics.most_central(win),
                     jnp.where(block.any(), tactics.most_central(block), -1))


def with_killer(agent: Agent, env: Gomoku, name: str | None = None, *,
                blocks: bool = True) -> Agent:
    """A "killer" module around any agent: take an immediate win; else block the
    opponent's immediate win; else play what ``agent`` plays. ``blocks=False`` is seed
    001's module as its IV-E4 writes it, which takes the win only (default name
    ``NAME+killer(win only)``, a label that `make` does not read). A JAX agent stays a
    JAX agent (and stays batched in the arena)."""
    if not isinstance(blocks, bool):
        raise TypeError(f"with_killer: blocks must be True or False, got {blocks!r}")
    name = name or f"{agent.name}+killer" + ("" if blocks else "(win only)")
    check_env(agent, env)
    if isinstance(agent, JaxAgent):
        own_act = type(agent).act is not JaxAgent.act  # e.g. a deadline, a kept tree
        return (_KillerJax if own_act else JaxAgent)(
            name, static_partial(_killer_policy, env, blocks, agent.policy), agent.params,
            batched=agent.batched,
            batch=static_partial(_killer_batch, env, blocks, agent.batch_policy()), env=env,
            **({"inner": agent, "blocks": blocks} if own_act else {}))
    return _KillerPython(env, agent, name, blocks)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class _KillerJax(JaxAgent):
    """`with_killer` of a JAX agent with its own ``act`` (pure MCTS answers by a
    deadline, a reusing search keeps its tree): batched as any JAX agent, and ``act``
    leaves every move the killer does not force to the agent's own ``act``."""

    inner: Agent | None = dataclasses.field(default=None, kw_only=True)
    blocks: bool = dataclasses.field(default=True, kw_only=True)

    act = _killer_act


def check_env(agent: Agent, env: Gomoku) -> None:
    """ValueError when ``agent`` was built for another game than ``env`` (board size,
    k or rule; its ``env``, None for an agent that plays any)."""
    built = getattr(agent, "env", None)
    if isinstance(built, Gomoku) and (built.size, built.k, built.rule) != (
            env.size, env.k, env.rule):
        raise _not_built_for(agent, built, env.words)


AgentFactory = Callable[[str, Gomoku], Agent]

AGENTS: dict[str, AgentFactory] = {}
"""Agents registered by name (or by prefix, a name ending in ``-``) -> factory; read it
freely, add to it with `register_agent`."""

# Names and name prefixes `make` builds itself (``alphabeta.by_name`` reads any case).
_BUILTIN_NAMES = ("random", "heuristic", "minimax", "alphabeta", "alphabeta004", "negamax",
                  "gomokubot")
_BUILTIN_PREFIXES = ("heuristic-", "pure-mcts-", "uct-", "minimax-", "alphabeta-",
                     "alphabeta004-", "negamax-", "gomokubot-")
_LOOKALIKE_DIGITS = str.maketrans("OoIl", "0011")  # what a number's typo may hold
_AGENT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def pure_mcts_name(spec: str) -> tuple[str, str, dict] | None:
    """``(prefix, N as written, MCTSConfig options)`` for ``pure-mcts-N`` (with
    MCTS-Solver and decisive expansion) or ``uct-N`` (plain UCT, `pure_mcts.PLAIN_UCT`),
    N in digits; else None."""
    prefix = next((p for p in ("pure-mcts-", "uct-") if spec.startswith(p)), None)
    if prefix is None or not digits(spec[len(prefix):]):
        return None
    from algorithms import pure_mcts

    return prefix, spec[len(prefix):], dict(pure_mcts.PLAIN_UCT) if prefix == "uct-" else {}


def digits(text: str) -> bool:
    """Whether ``text`` is a whole number written in ASCII digits (``str.isdigit`` also
    takes other scripts' digits and superscripts, which ``int`` reads or refuses)."""
    return text.isascii() and text.isdigit()


def whole_number(text: str, spec: str) -> int:
    """The number written in ``text`` (ASCII digits, see `digits`) within agent name
    ``spec``; a ``ValueError`` naming the agent for one too long for ``int`` to read
    (Python reads at most 4,300 digits)."""
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"agent {clip(repr(spec), 60)}: its number of {len(text)} digits "
                         "is far too large") from None


def register_agent(name_or_prefix: str, factory: AgentFactory, *,
                   replace: bool = False) -> None:
    """Make `make` (and so configs' ``eval.opponents``, tournaments, ``pbrain``, the play
    page) build agents named ``name_or_prefix`` with ``factory(spec, env) -> Agent``.

    A name ending in ``-`` is a prefix: ``register_agent("my-mcts-", f)`` serves
    ``my-mcts-400``, ``my-mcts-fast``... (anything after it; an exact registration wins
    over a prefix, a longer prefix over a shorter). ``factory`` gets the whole name,
    ``+killer`` apart (`make` wraps the agent with `with_killer` itself), including an
    ``@...`` parameter (``my-agent@0.5``: what follows ``@`` is the factory's to read),
    and raises ValueError for a name it does not accept. Names are letters, digits,
    ``_``, ``.`` and ``-`` (no ``@``, ``+`` or ``/``), and not ``.gjx`` files. A name
    taken (by a built-in agent, or registered before) is refused unless ``replace=True``;
    a registered agent then comes first. A name registered before by the same definition
    (`config.same_definition`: a notebook cell or a reloaded plugin run again) is
    replaced without it. Every refusal is a ``ValueError``.
    """
    key = name_or_prefix
    if not isinstance(key, str) or not _AGENT_NAME.match(key) or key.endswith(".gjx"):
        raise ValueError(
            f"register_agent: a name must be letters, digits, '_', '.' and '-' (ending in "
            f"'-' for a prefix; no '@', '+' or '/'; not a .gjx file), got {key!r}")
    if not callable(factory):
        raise ValueError(f"register_agent: the factory of {key!r} must be callable as "
                         f"factory(spec, env) -> Agent, got {factory!r}")
    try:
        inspect.signature(factory).bind("name", None)  # two positional arguments
    except TypeError as err:
        raise ValueError(f"register_agent: the factory of {key!r} must take two arguments, "
                         f"factory(spec, env) -> Agent ({err})") from None
    except ValueError:  # no signature to read (some built-ins): it is called as it is
        pass
    if not isinstance(replace, bool):
        raise ValueError(f"register_agent: replace must be a bool, got {replace!r}")
    if not replace and not (key in AGENTS and same_definition(AGENTS[key], factory)):
        if key in AGENTS:
            raise ValueError(f"register_agent: {key!r} is already registered; pass "
                             "replace=True to replace it")
        lower = key.lower()
        taken = lower in _BUILTIN_NAMES or any(lower.startswith(p) for p in _BUILTIN_PREFIXES)
        if key.endswith("-"):  # a prefix must not cover a built-in name either
            taken = taken or any(n.startswith(lower) for n in _BUILTIN_NAMES
                                 + _BUILTIN_PREFIXES)
        if taken:
            raise ValueError(f"register_agent: {key!r} clashes with the built-in agents "
                             f"({_known_names()}); pass replace=True to shadow them")
    AGENTS[key] = factory


def _registered(base: str) -> tuple[str, AgentFactory] | None:
    """The registration serving agent name ``base`` (``@`` and ``+killer`` apart)."""
    if base in AGENTS and not base.endswith("-"):
        return base, AGENTS[base]
    prefixes = [p for p in AGENTS if p.endswith("-") and base.startswith(p) and base != p]
    if not prefixes:
        return None
    key = max(prefixes, key=len)
    return key, AGENTS[key]


def _known_names() -> str:
    return ("random, heuristic, heuristic-K, heuristic[-K]@P, pure-mcts-N, uct-N, minimax, "
            "alphabeta[-D], alphabeta004[-D], negamax[-D], gomokubot, gomokubot-D, an "
            "exported FILE.gjx[@N]")


def make(spec: str, env: Gomoku) -> Agent:
    """An agent from its name, for configs and the command line.

    ``random``, ``heuristic`` (or ``heuristic-K`` for the top-K randomisation; either
    with ``@P`` for a heuristic that answers threats only with probability P, e.g.
    ``heuristic@0.5``), ``pure-mcts-N`` (N simulations, with MCTS-Solver and decisive
    expansion), ``uct-N`` (the reports' pure MCTS: plain UCT, neither of those), any
    name from `algorithms.alphabeta.by_name` (``minimax``, ``alphabeta-3``,
    ``gomokubot``...), the path of an exported params file (``.gjx``; its search as
    stored, or ``path@N`` for N simulations), any name registered with
    `register_agent`, and any of them with ``+killer`` appended.
    """
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"an agent name must be a non-empty string, got {spec!r}")
    if spec.endswith("+killer"):
        if spec[: -len("+killer")].endswith("+killer"):  # the same wrapper twice does nothing
            raise ValueError(f"{spec!r}: +killer is given more than once; once is enough")
        return with_killer(make(spec[: -len("+killer")], env), env, name=spec)
    exported = parse_exported(spec)
    if exported is not None:
        return _exported(spec, *exported, env)
    base, at, blocks = spec.partition("@")
    registered = _registered(base)
    if registered is not None:
        agent = registered[1](spec, env)
        if not isinstance(agent, Agent):  # a ValueError: the command line's one-line error
            raise ValueError(f"the factory registered as {registered[0]!r} returned "
                            f"{agent!r} for {spec!r}, not an Agent")
        if getattr(agent, "name", None) != spec:  # results are kept by the agent's name
            raise ValueError(f"the factory registered as {registered[0]!r} returned an agent "
                             f"named {getattr(agent, 'name', None)!r} for {spec!r}; name it "
                             f"{spec!r} (the name it is asked for: matches, evaluations and "
                             "tournaments keep their results by it)")
        return agent
    if spec == "random":
        return random_agent()
    if _is_heuristic_name(base):
        top_k = base.removeprefix("heuristic").removeprefix("-")
        top_k = whole_number(top_k, spec) if top_k else 3
        if top_k < 1:  # refused here under the agent's name, not heuristic_agent's argument
            raise ValueError(f"agent {spec!r}: its K (how many of the best moves it picks "
                             f"among) must be a positive integer, got {top_k}")
        probability = 1.0
        if at:
            try:
                if not blocks.isascii():  # float() also reads other scripts' digits
                    raise ValueError(blocks)
                probability = float(blocks)
                if not 0.0 <= probability <= 1.0:  # NaN too
                    raise ValueError(blocks)
            except ValueError:
                raise ValueError(f"{spec!r}: the block probability after '@' must be a number "
                                 f"in [0, 1], got {blocks!r}") from None
        return heuristic_agent(env, top_k=top_k, name=spec, block_probability=probability)
    mcts = pure_mcts_name(spec)
    if mcts is not None:
        from algorithms import pure_mcts

        _, count, options = mcts
        return pure_mcts.pure_mcts_agent(env, whole_number(count, spec), name=spec, **options)
    from algorithms import alphabeta

    try:
        return alphabeta.by_name(spec, env)
    except alphabeta.UnknownSearchName:  # its other errors refuse one of its names: raised
        pass
    _refuse_other_file(spec)
    registered = ", ".join(f"{name}*" if name.endswith("-") else name for name in AGENTS)
    raise ValueError(
        f"unknown agent {spec!r}{_did_you_mean(spec)}: known are {_known_names()}"
        + (f", the registered {registered}" if AGENTS else "")
        + ", each optionally with +killer (an agent of your own must be registered "
        "first: agents.register_agent, or gomoku-jax --plugin MODULE)"
    )


def _is_heuristic_name(base: str) -> bool:
    """Whether ``base`` (a name without its ``@P``) is ``heuristic`` or ``heuristic-K``."""
    return base == "heuristic" or (base.startswith("heuristic-")
                                   and digits(base[len("heuristic-"):]))


def _did_you_mean(spec: str) -> str:
    """`` (did you mean 'NAME'?)`` for a mistyped agent name: the closest built-in or
    registered name (a built-in prefix keeps the number typed after it: ``pure-mcst-100``
    -> ``pure-mcts-100``, letters typed for its digits mended: ``pure-mcts-1OO``;
    ``+killer`` kept or mended, or moved last when typed before an ``@``; an ``@`` after
    a name that takes none said so); for a path,
    the closest exported
    file in its folder (`gomoku_jax.exported.closest_file`, the ``@N`` kept); else
    ``""``."""
    import os

    from gomoku_jax.exported import closest_file

    head, killer, after = spec.rpartition("+killer@")  # "+killer" typed before its "@"
    if killer and after and ((head.endswith(".gjx") and digits(after))
                             or _is_heuristic_name(head)):
        return f" (did you mean {head + '@' + after + '+killer'!r}? +killer comes last)"
    path, at, sims = spec.rpartition("@")
    if not (at and digits(sims)):
        path, at, sims = spec, "", ""
    if os.path.dirname(path) or path.endswith((".gj", ".gx", ".jx")):
        close = closest_file(path)
        return f" (did you mean {close + at + sims!r}?)" if close else ""
    base, plus, suffix = spec.partition("+")
    names = [*_BUILTIN_NAMES, *(name for name in AGENTS if not name.endswith("-"))]
    prefixes = [*(p for p in _BUILTIN_PREFIXES if p != "minimax-"),  # takes no depth
                *(name for name in AGENTS if name.endswith("-"))]
    before, at_sign, _ = base.partition("@")  # "pure-mcts-10@3": a name that takes no "@"
    if at_sign and (before in names or any(before.startswith(p) and digits(before[len(p):])
                                           for p in prefixes)):
        return (f" (did you mean {before + plus + suffix!r}? '@' follows only an exported "
                "FILE.gjx, for its simulations, or a heuristic, for its block probability)")
    if base not in names and f"{base.rstrip('-')}-" in prefixes:  # "pure-mcts": no number
        return f" (did you mean '{base.rstrip('-')}-N' with a whole number N?)"
    typed = next((p for p in prefixes if base.startswith(p)), None)
    mended = base[len(typed):].translate(_LOOKALIKE_DIGITS) if typed else ""
    if digits(mended):  # "pure-mcts-1OO": letters typed for digits
        base = typed + mended
    number = re.match(r"^(.*?-)(\d+)$", base)  # "pure-mcst-100": a prefix and its number
    close = None
    if number:
        prefix = closest(number.group(1), prefixes)
        close = prefix + number.group(2) if prefix else None
    close = close or closest(base, names)
    if plus and suffix != "killer" and closest(suffix, ["killer"], cutoff=0.6):
        suffix = "killer"
    if not close or close + plus + suffix == spec:
        return ""
    return f" (did you mean {close + plus + suffix!r}?)"


def _refuse_other_file(spec: str) -> None:
    """ValueError for a name that is an existing file or folder other than an exported
    agent (such a file is never read: only ``.gjx`` files are, as data)."""
    import os

    for path in dict.fromkeys((spec, spec.rpartition("@")[0] or spec)):
        if not os.path.lexists(path):
            continue
        if os.path.isdir(path):
            from gomoku_jax.exported import folder_hint

            hint = folder_hint(path)
            raise ValueError(f"agent {spec!r}: {path} is a folder, not an exported agent "
                             f"(a FILE.gjx written by training or `gomoku-jax export`){hint}")
        raise ValueError(f"agent {spec!r}: the file {path} exists but is not an exported "
                         "agent (a FILE.gjx written by training or `gomoku-jax export`); "
                         "only .gjx files are played")


def parse_exported(spec: str) -> tuple[str, int | None] | None:
    """``(path, simulations or None)`` of an exported agent's name, ``FILE.gjx`` or
    ``FILE.gjx@N`` (a path may itself hold ``@``), or None for other names. A ``+killer``
    suffix is not part of it (see `exported_path`). ValueError when N is not a number."""
    if spec.endswith(".gjx"):
        return spec, None
    path, at, sims = spec.rpartition("@")
    if not (at and path.endswith(".gjx")):
        return None
    if not digits(sims) or whole_number(sims, spec) < 1:
        raise ValueError(f"{spec!r}: the simulations after '@' must be a whole number >= 1")
    return path, whole_number(sims, spec)


def exported_spec(spec: str) -> tuple[str, int | None] | None:
    """`parse_exported` of an agent name that may end in ``+killer``: ``(path,
    simulations or None)`` for ``FILE.gjx`` or ``FILE.gjx@N``, None for the other agents."""
    while spec.endswith("+killer"):
        spec = spec[: -len("+killer")]
    return parse_exported(spec)


def exported_path(spec: str) -> str | None:
    """The params file an agent name plays from (``FILE.gjx`` or ``FILE.gjx@N``, either
    with ``+killer``), or None for the other agents; ValueError as `parse_exported`."""
    exported = exported_spec(spec)
    return None if exported is None else exported[0]


def _exported(spec: str, path: str, sims: int | None, env: Gomoku) -> Agent:
    from gomoku_jax import exported

    loaded = exported.load(path, simulations=sims, name=spec)
    if loaded.env.config != env.config:
        trained = loaded.env.config
        raise ValueError(
            f"{path} was trained for {trained.size}x{trained.size} k={trained.k} {trained.rule}; "
            f"this game is {env.size}x{env.size} k={env.k} {env.rule}")
    return loaded.agent
