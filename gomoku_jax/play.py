"""Play against any agent in the browser: ``gomoku-jax play``.

A small local web server (the standard library's `http.server`, no web framework) that
serves one static page (``gomoku_jax/web/``: plain HTML, CSS and JavaScript) and a JSON API.
The game lives on the server in the `gomoku_jax.game` engine; the page only draws what the
server sends and posts what the player clicks. Every request is checked there: a malformed
or illegal one gets HTTP 400 with ``{"error": "..."}`` naming the problem, and the game is
left as it was.

Only the page itself may drive the server, not another web page the user happens to visit
(which could otherwise start games, load local files by path or start long searches). Refused
before anything is done, with ``{"error": "..."}`` saying why:

* 403, any request whose ``Host`` header does not name the server (``127.0.0.1``,
  ``localhost``, ``[::1]``, or the host it was told to bind; bound to every interface, also
  this machine's names or any IP address; at any port, as a tunnel or a container may
  forward another one to it): a defence against DNS rebinding, where another site's name is
  made to point at this machine;
* 403, any request with an ``Origin`` header other than the server's own origin
  (``http://`` and one of those addresses), and any ``/api/`` request whose
  ``Sec-Fetch-Site`` says it comes from another site;
* 415, a POST whose ``Content-Type`` is not ``application/json`` (so a browser must ask first,
  with a CORS preflight, which the server does not answer, before another site can post).

JSON API (all answers are JSON; ``STATE`` is `PlayApp.snapshot`):

================================  =====================================================
``GET  /api/state``               ``STATE``
``GET  /api/agents``              the baseline names the page lists, the largest
                                  budget, the colours, the rules and the smallest and
                                  largest board sizes
``GET  /api/agent-info?name=A``   ``{"name", "budget": {"kind", "default"} | null,
                                  "overlay": bool, "game", "own_game": bool}``
                                  (``&budget=N`` checks N; ``own_game``: an exported
                                  file, which plays its own game)
``POST /api/new``                 ``{"colour": "black"|"white", "agent": A,
                                  "budget": N|null, "game": {"size","k","rule"}?}``
                                  -> ``STATE``; a new game (the agent does not move yet);
                                  a field left out keeps the current game's (the
                                  budget too when the agent is left out)
``POST /api/move``                ``{"row": r, "col": c}`` -> ``STATE``: the human's move
``POST /api/reply``               ``{}`` -> ``STATE``: the agent's move, with its
                                  ``analysis`` when the agent has one
``POST /api/undo``                ``{}`` -> ``STATE``: takes back the human's last move
                                  and the agent's replies after it
``POST /api/analyse``             ``{}`` -> ``{"analysis": ...}``: what the agent thinks
                                  of the current position (the game is unchanged)
================================  =====================================================

Coordinates are the engine's 0-based ``(row, col)`` (row 0 at the top), as in
`gomoku_jax.render`. Agents are any name `gomoku_jax.agents.make` accepts; an exported
file (``FILE.gjx[@N]``) brings its own game (board size, rule, observation planes) when
the request names no other. The budget is the number of simulations of a search agent
(``pure-mcts-N``, ``uct-N``, an exported search agent); other agents take none.

The overlay (``analysis``): for an exported search agent the search's root visit shares
and the network's prior and value (one whose search keeps its tree, as
`gomoku_jax.search.ReusingSearchAgent`, searches from the tree kept after its last reply:
the shares include the visits carried over, ``carried_visits``; an analysis asked with
``/api/analyse`` searches from that tree and keeps nothing); for pure MCTS its root visit
shares and the mean result of its simulations; for an exported Q network its Q-values.
An agent's move is computed by the same function as its analysis, so the overlay shows
exactly why it moved. Rule-based agents, alpha-beta searches and ``+killer`` wrappers
have no overlay.

Each (game, agent, budget) is built and compiled once and cached (an exported file again
once it is written again); the cache keeps the `MAX_PLAYERS` most recently used (a page
that tries many budgets would otherwise keep every compiled search and its params for the
server's life).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import errno
import functools
import http.server
import importlib.resources
import ipaddress
import json
import os
import socket
import sys
import threading
import urllib.parse
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from gomoku_jax import agents as agents_lib
from gomoku_jax import arena
from gomoku_jax.config import PLAY_MAX_BUDGET, check_int, check_seed, clip, loads
from gomoku_jax.game import (BLACK, DIRECTIONS, EMPTY, MAX_SIZE, MIN_SIZE, RULES, WHITE,
                             Gomoku, IllegalMoveError, State, describe_result)

__all__ = [
    "BASELINES",
    "MAX_BUDGET",
    "PlayApp",
    "PlayError",
    "make_server",
    "serve",
]

BASELINES = ("heuristic", "random", "pure-mcts-1000", "pure-mcts-200", "gomokubot",
             "alphabeta-2", "heuristic+killer", "random+killer")
"""Agent names the page offers in its list, followed by the names registered with
`gomoku_jax.agents.register_agent` (any other name can be typed)."""

MAX_BUDGET = PLAY_MAX_BUDGET
"""The largest search budget (simulations) the server accepts."""

_COLOURS = {"black": BLACK, "white": WHITE}
_COLOUR_NAMES = {BLACK: "black", WHITE: "white"}
_MAX_BODY = 64 * 1024
_MAX_DEPTH = 16  # arrays and objects in a request body (the API needs 2)
MAX_PLAYERS = 16  # (game, agent, budget) players kept built and compiled
_LOOPBACK = ("127.0.0.1", "localhost", "::1")  # names of this machine, always accepted
_EVERY_INTERFACE = ("", "0.0.0.0", "::")
_SAME_SITE = ("same-origin", "none")  # Sec-Fetch-Site of the page's own requests, typed URLs
_WEB_FILES = {  # URL path -> (file under gomoku_jax/web/, content type)
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/style.css": ("style.css", "text/css; charset=utf-8"),
}
_GET_PATHS = {  # the API's reads: URL path -> handler method, given the query
    "/api/state": "_get_state", "/api/agents": "_get_agents",
    "/api/agent-info": "_get_agent_info"}
_POST_PATHS = {  # the API's actions: URL path -> PlayApp method, given the JSON body
    "/api/new": "new_game", "/api/move": "move", "/api/reply": "reply", "/api/undo": "undo",
    "/api/analyse": "analyse"}


def _json(value: Any) -> str:
    """A value of a request as JSON spells it (``true``, ``null``, ``"red"``), clipped:
    what the client sent, in the error that names it."""
    try:
        return clip(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):  # not from JSON after all
        return clip(repr(value))


class PlayError(ValueError):
    """A request the server refuses (HTTP ``status``, 400 by default); says why."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


# --------------------------------------------------------------------- players
@dataclasses.dataclass(frozen=True)
class _Player:
    """An agent built for one game: ``move(key, state) -> (action, analysis | None)``."""

    name: str  # the agent name with its budget, e.g. "pure-mcts-400" or "a.gjx@64"
    base: str  # the name as asked for (the budget may have replaced its number)
    budget_kind: str | None  # "simulations" or None (no budget)
    budget: int | None
    env: Gomoku  # the game it plays (for an exported file: the file's game)
    act: Callable[[jax.Array, State], int]
    analyse: Callable[[jax.Array, State], tuple[int, dict]] | None
    # the `gomoku_jax.search.ReusingSearchAgent` that keeps a search tree between this
    # player's moves (an exported file's search with ``reuse_tree``, alone or +killer),
    # else None; with it, ``analyse(key, state, keep=False)`` leaves the tree as it was
    kept: Any = None

    def move(self, key: jax.Array, state: State) -> tuple[int, dict | None]:
        if self.analyse is not None:
            return self.analyse(key, state)
        return self.act(key, state), None

    def look(self, key: jax.Array, state: State) -> tuple[int, dict]:
        """The analysis of ``state``, leaving the agent as it was (``analyse`` must be
        set): a search that keeps its tree searches from it but does not keep the result."""
        if self.kept is not None:
            return self.analyse(key, state, keep=False)
        return self.analyse(key, state)

    def forget(self) -> None:
        """Drop the search tree kept between moves, if any: the next move searches
        afresh (a new game, a takeback)."""
        if self.kept is not None:
            self.kept.reset()

    def info(self, default_budget: int | None) -> dict:
        return {
            "name": self.name,
            "base": self.base,
            "budget": None if self.budget_kind is None else {
                "kind": self.budget_kind, "default": default_budget, "value": self.budget},
            "overlay": self.analyse is not None,
            "game": _game_json(self.env),
            "own_game": _exported_base(self.base) is not None,  # a file's game, not chosen
        }


@functools.lru_cache(maxsize=None)
def _step(env: Gomoku):
    return jax.jit(env.step)


def _game_json(env: Gomoku) -> dict:
    return {"size": env.size, "k": env.k, "rule": env.rule, "id": env.id}


def _grid(values: np.ndarray, n: int) -> list[list[float]]:
    """``[N*N]`` floats as ``[N][N]`` rounded lists (JSON), non-finite as 0."""
    values = np.nan_to_num(np.asarray(values, np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    return np.round(values.reshape(n, n), 4).tolist()


def _number(value) -> float | None:
    """A value of the analysis as JSON can hold it: a float, or None when it is not finite
    (a network whose values overflow; JSON has no NaN, and a browser refuses the answer)."""
    value = float(value)
    return value if np.isfinite(value) else None


def _root_summary(evaluate, params, tree, state: State):
    """``(visits [A], prior [A], value, search value)`` of a searched ``tree`` (a batch
    of one game) at ``state``, its root: the root's visits on legal moves, the network's
    prior over them and its value, and the root's value."""
    states = jax.tree.map(lambda x: x[None], state)
    visits = tree.children_visits[0, tree.ROOT_INDEX].astype(jnp.float32)  # [A]
    visits = jnp.where(state.legal_action_mask, visits, 0.0)
    logits, value = evaluate(params, states)
    prior = jax.nn.softmax(jnp.where(state.legal_action_mask, logits[0], -jnp.inf))
    return visits, prior, value[0], tree.node_values[0, tree.ROOT_INDEX]


def _search_analysis_fn(env: Gomoku, module, config):
    """``(params, key, state) -> (action, visits [A], prior [A], value, search value)``,
    the same computation as `gomoku_jax.search.search_policy` at temperature 0."""
    from gomoku_jax import search as search_lib

    evaluate = search_lib.network_evaluate(module)

    def analyse(params, key, state):
        states = jax.tree.map(lambda x: x[None], state)
        search_key, action_key = jax.random.split(key)
        output = search_lib.run_search(env, evaluate, params, states, search_key, config)
        action = search_lib.select_action(output, action_key, 0.0)[0]
        return (action, *_root_summary(evaluate, params, output.search_tree, state))

    return jax.jit(analyse)


def _reusing_analysis_fn(env: Gomoku, module, config, params, name: str):
    """``(analyse, agent)``: ``analyse(key, state, keep) -> (action, visits [A], prior [A],
    value, search value, visits carried)`` of ``agent``, a
    `gomoku_jax.search.ReusingSearchAgent` (the agent `exported.load_agent` makes of a file
    whose search keeps its tree, at temperature 0): it searches from the tree it kept
    after its last move (``keep`` False: and keeps that tree as it was)."""
    from gomoku_jax import search as search_lib

    evaluate = search_lib.network_evaluate(module)
    agent = search_lib.ReusingSearchAgent(name, env, evaluate, params, config)
    summary = jax.jit(functools.partial(_root_summary, evaluate))

    def analyse(key, state, keep):
        found = agent.search(state, key, keep)
        return (found.action, *summary(params, found.tree, state), found.carried)

    return analyse, agent


def _q_analysis_fn(module):
    """``(params, state) -> (action, q [A])``: as `gomoku_jax.agents.greedy_q_agent`."""

    def analyse(params, state):
        q = module.apply(params, state.observation[None], train=False)[0]
        masked = jnp.where(state.legal_action_mask, q, -jnp.inf)
        return jnp.argmax(masked).astype(jnp.int32), q

    return jax.jit(analyse)


def _refuse_q_budget(path: str, budget_name: str | None = None) -> None:
    """PlayError: the exported file ``path`` holds a Q network, which takes no budget
    (``budget_name``: what the caller calls the budget it was given, named in a hint)."""
    hint = f"; leave out {budget_name}" if budget_name else ""
    raise PlayError(f"{path} holds a Q network, which plays without search: it takes "
                    f"no budget{hint}")


def _q_takes_no_budget(path: str) -> bool:
    """Whether the exported file ``path`` holds a Q network (False when it cannot be
    read: the agent built from it says why)."""
    from gomoku_jax import exported

    try:
        return exported.load_network(path)[0].get("agent", "search") == "q-greedy"
    except ValueError:
        return False


def _exported_player(path: str, budget: int | None, stored: int | None, env: Gomoku,
                     budget_name: str | None = None) -> tuple[_Player, int | None]:
    """The player of exported file ``path`` (``stored``: the N of ``FILE.gjx@N``) with
    ``budget`` simulations (None: its own), and its own budget: ``stored``, else the
    simulations of the file's search (None for a Q network)."""
    from gomoku_jax import exported

    try:
        meta, file_env, module, variables = exported.load_network(path)
    except ValueError as err:
        raise PlayError(str(err)) from None
    if file_env.config != env.config:
        t = file_env.config
        raise PlayError(f"{path} was trained for {t.size}x{t.size} k={t.k} {t.rule}; this game "
                        f"is {env.size}x{env.size} k={env.k} {env.rule}")
    n = file_env.size
    kind = meta.get("agent", "search")
    if kind == "q-greedy":
        if budget is not None or stored is not None:
            _refuse_q_budget(path, budget_name if budget is not None else None)
        fn = _q_analysis_fn(module)

        def analyse_q(key, state):
            del key
            action, q = fn(variables, file_env.with_planes(state))
            q, legal = np.asarray(q, np.float64), np.asarray(state.legal_action_mask)
            lo, hi = q[legal].min(), q[legal].max()
            heat = np.where(legal, (q - lo) / (hi - lo) if hi > lo else 1.0, 0.0)
            return int(action), {
                "kind": "q", "heat": _grid(heat, n),
                "heat_label": "Q-value of each move, rescaled (0 = worst legal, 1 = best)",
                "value": _number(hi), "value_label": "best Q-value",
                "cells": _grid(np.where(legal, q, np.nan), n), "cells_label": "Q"}

        return _Player(path, path, None, None, file_env, None, analyse_q), None
    try:  # a "search" agent (load_network refuses any other kind)
        config = exported.stored_search(path, meta)
    except ValueError as err:
        raise PlayError(str(err)) from None
    own = stored if stored is not None else config.num_simulations
    if budget is not None or stored is not None:
        config = dataclasses.replace(
            config, num_simulations=budget if budget is not None else stored)
    name = f"{path}@{config.num_simulations}"
    kept = None
    if config.reuse_tree:
        reusing, kept = _reusing_analysis_fn(file_env, module, config, variables, name)
    else:
        fn = _search_analysis_fn(file_env, module, config)

    def analyse_search(key, state, keep=True):
        state = file_env.with_planes(state)
        carried = None
        if config.reuse_tree:
            action, visits, prior, value, root, carried = reusing(key, state, keep)
        else:
            action, visits, prior, value, root = fn(variables, key, state)
        visits = np.asarray(visits, np.float64)
        total = visits.sum()
        label = (f"share of the search's {config.num_simulations} simulations "
                 f"({config.algorithm}) at the root")
        if carried is not None:
            label = (f"share of the root's {total:.0f} visits ({config.algorithm}, tree kept "
                     f"between moves: {carried} carried over from the last search, the rest "
                     f"this search's, of {config.num_simulations} simulations a move)")
        return int(action), {
            "kind": "search", "heat": _grid(visits / total if total > 0 else visits, n),
            "heat_label": label,
            "value": _number(root),
            "value_label": "search value for the player to move (-1 lost, +1 won)",
            "network_value": _number(value),
            "prior": _grid(prior, n), "cells": _grid(prior, n),
            "cells_label": "network prior",
            **({} if carried is None else {"carried_visits": carried})}

    return _Player(name, path, "simulations", config.num_simulations, file_env, None,
                   analyse_search, kept=kept), own


def _mcts_player(base: str, prefix: str, options: dict, simulations: int,
                 env: Gomoku) -> _Player:
    """Pure MCTS of ``simulations`` simulations, named ``prefix`` + N, its ``options`` as
    `agents.pure_mcts_name` gives them."""
    from algorithms import pure_mcts

    config = pure_mcts.MCTSConfig(simulations=simulations, **options)
    fn = jax.jit(functools.partial(pure_mcts.search, env, config))
    n = env.size

    def analyse(key, state):
        out = fn(key, state)
        visits = np.asarray(out.visits, np.float64)
        values = np.asarray(out.values, np.float64)  # mean score in [0, 1], nan unvisited
        total = visits.sum()
        seen = visits > 0
        mean = float((visits[seen] * values[seen]).sum() / total) if total > 0 else 0.5
        return int(out.action), {
            "kind": "mcts", "heat": _grid(visits / total if total > 0 else visits, n),
            "heat_label": f"share of pure MCTS's {simulations} simulations at the root",
            "value": _number(2.0 * mean - 1.0),
            "value_label": "mean playout result for the player to move (-1 lost, +1 won)",
            "cells": _grid(np.where(seen, values, np.nan), n),
            "cells_label": "mean score of the move (0 to 1)"}

    return _Player(f"{prefix}{simulations}", base, "simulations", simulations, env, None,
                   analyse)


def _plain_player(spec: str, env: Gomoku) -> _Player:
    from gomoku_jax import search as search_lib

    try:
        agent = agents_lib.make(spec, env)
    except ValueError as err:
        raise PlayError(str(err)) from None

    def act(key, state):
        return agent.act(state, key)

    inner = getattr(agent, "inner", agent)  # a +killer wrapper's agent
    kept = inner if isinstance(inner, search_lib.ReusingSearchAgent) else None
    return _Player(spec, spec, None, None, env, act, None, kept=kept)


def _check_budget(budget, budget_name: str | None = None) -> int | None:
    """``budget`` checked; the error names ``budget_name`` (None: the API's budget field)."""
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= MAX_BUDGET:
        if budget_name:
            raise PlayError(f"{budget_name} must be an integer from 1 to {MAX_BUDGET}, "
                            f"got {clip(repr(budget))}")
        raise PlayError(f"budget must be an integer from 1 to {MAX_BUDGET} or null, "
                        f"got {_json(budget)}")  # as the request spelt it
    return budget


def _exported_base(spec: str) -> tuple[str, int | None] | None:
    """`_split_exported` of ``spec`` less a ``+killer`` suffix: an agent that brings
    its file's game."""
    return _split_exported(spec[: -len("+killer")] if spec.endswith("+killer") else spec)


def _split_exported(spec: str) -> tuple[str, int | None] | None:
    """``(path, simulations or None)`` for ``FILE.gjx[@N]``, else None."""
    try:
        exported = agents_lib.parse_exported(spec)
    except ValueError as error:
        raise PlayError(f"agent {error}") from None
    if exported is None:
        return None
    path, sims = exported
    return path, (None if sims is None else _check_budget(
        sims, f"agent {spec!r}: the simulations after '@'"))


def _file_stamp(spec: str) -> tuple[int, int, int] | None:
    """An exported agent's file as it is now (its inode, size and time written), so that a
    file written again is built again, not played from the cache; None for other agents
    and for a file that is not there (building it says so)."""
    exported = _exported_base(spec)
    if exported is None:
        return None
    try:
        stat = os.stat(exported[0])
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


# ------------------------------------------------------------------------- the app
class PlayApp:
    """One game between a human and an agent, driven by the JSON API (thread-safe).

    Args:
      agent: the agent's name (any `gomoku_jax.agents.make` name; ``FILE.gjx[@N]``).
      budget: simulations for a search agent (None: the agent's own).
      colour: the human's colour, ``"black"`` or ``"white"`` (white: the agent opens).
      size, k, rule: the game; None takes an exported agent's game, else 15, 5, freestyle.
      seed: seeds the agents' randomness, from 0 to `config.SEED_MAX` (each move folds
        in the game and move number).
      budget_name: what the caller calls ``budget`` in the errors about it (e.g.
        ``"--simulations"``; None: the API's budget field).
    """

    def __init__(self, agent: str = "heuristic", budget: int | None = None,
                 colour: str = "black", size: int | None = None, k: int | None = None,
                 rule: str | None = None, seed: int = 0, budget_name: str | None = None):
        check_seed("", "seed", seed)
        self._lock = threading.Lock()
        # (game, agent, budget) -> (player, the agent's own budget), least recently used first
        self._players: collections.OrderedDict[tuple, tuple[_Player, int | None]] = (
            collections.OrderedDict())
        self._key = jax.random.key(seed)
        self._games = 0
        self._version = 0
        game = {name: value for name, value in (("size", size), ("k", k), ("rule", rule))
                if value is not None}
        try:
            self._start(self._request({"colour": colour, "agent": agent, "budget": budget,
                                       **({"game": game} if game else {})}, "new"),
                        budget_name)
        except PlayError as err:
            raise ValueError(str(err)) from None

    # ------------------------------------------------------------------ requests
    @staticmethod
    def _request(body: Any, what: str, allowed: tuple[str, ...] | None = None) -> dict:
        if not isinstance(body, dict):
            raise PlayError(f"the {what} request must be a JSON object, got "
                            f"{type(body).__name__}")
        known = {"new": ("colour", "agent", "budget", "game"), "move": ("row", "col")}.get(
            what, ()) if allowed is None else allowed
        unknown = sorted(set(body) - set(known))
        if unknown:
            raise PlayError(f"unknown field(s) {unknown} in the {what} request; known: "
                            f"{list(known) or 'none'}")
        return body

    def _env(self, game: Any, base: Gomoku | None) -> Gomoku:
        if not isinstance(game, dict):
            raise PlayError(f"game must be an object with size, k and rule, got {_json(game)}")
        unknown = sorted(set(game) - {"size", "k", "rule"})
        if unknown:
            raise PlayError(f"unknown field(s) {unknown} in game; known: size, k, rule")
        size = game.get("size", base.size if base else 15)
        k = game.get("k", base.k if base else 5)
        rule = game.get("rule", base.rule if base else "freestyle")
        for name, value in (("size", size), ("k", k)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise PlayError(f"game.{name} must be an integer, got {_json(value)}")
        if rule not in RULES:
            raise PlayError(f"game.rule must be one of {', '.join(RULES)}, got {_json(rule)}")
        try:
            return Gomoku(size, k, rule)
        except ValueError as err:
            raise PlayError(f"game: {err}") from None

    def player(self, agent: Any, budget: Any, env: Gomoku,
               budget_name: str | None = None) -> _Player:
        """The cached player for (game, agent, budget); built (and later compiled) once.
        Errors about the budget call it ``budget_name`` (None: the API's budget field)."""
        return self._player_and_default(agent, budget, env, budget_name)[0]

    def _player_and_default(self, agent: Any, budget: Any, env: Gomoku,
                            budget_name: str | None = None) -> tuple[_Player, int | None]:
        """`player` and the agent's own budget (None: none), read together under the
        lock (another request could evict the entry between two reads)."""
        if not isinstance(agent, str) or not agent.strip():
            raise PlayError(f"agent must be a non-empty string, got {_json(agent)}")
        spec = agent.strip()
        budget = _check_budget(budget, budget_name)
        key = (env, spec, budget, _file_stamp(spec))
        with self._lock:
            if key in self._players:
                self._players.move_to_end(key)
                return self._players[key]
        built = self._build(spec, budget, env, budget_name)
        with self._lock:
            built = self._players.setdefault(key, built)  # another request's, if first
            while len(self._players) > MAX_PLAYERS:  # the least recently used goes
                self._players.popitem(last=False)
        return built

    def _build(self, spec: str, budget: int | None, env: Gomoku,
               budget_name: str | None = None) -> tuple[_Player, int | None]:
        field = budget_name or "the budget field"
        killer = spec.endswith("+killer")
        base = spec[: -len("+killer")] if killer else spec
        exported = _split_exported(base)
        if exported is not None:
            path, stored = exported
            if killer:  # the wrapped agent plays; its budget is in the name
                if budget is not None:
                    if _q_takes_no_budget(path):  # not in its name either
                        _refuse_q_budget(path, budget_name)
                    raise PlayError(f"agent {spec!r} with +killer takes its budget in its "
                                    f"name (FILE.gjx@N+killer), not in {field}")
                return _plain_player(spec, env), None
            return _exported_player(path, budget, stored, env, budget_name)
        mcts = agents_lib.pure_mcts_name(base)
        if mcts is not None:
            prefix, count, options = mcts
            try:
                stored = agents_lib.whole_number(count, spec)
            except ValueError as err:
                raise PlayError(str(err)) from None
            stored = _check_budget(stored, f"agent {clip(repr(spec))}: its N")
            if not killer:
                return _mcts_player(base, prefix, options,
                                    budget if budget is not None else stored, env), stored
            if budget is not None:
                raise PlayError(f"agent {spec!r} with +killer takes its budget in its name "
                                f"({prefix}N+killer), not in {field}")
        elif budget is not None:
            _plain_player(spec, env)  # an unknown name is reported first
            unset = f"leave out {budget_name}" if budget_name else "send budget null"
            raise PlayError(f"agent {spec!r} has no search budget; {unset}")
        return _plain_player(spec, env), None

    def _game_of(self, body: dict) -> Gomoku:
        """The game a new-game request asks for: its ``game`` (the fields it leaves out
        as below), else an exported agent's game, else the current one."""
        current = getattr(self, "_env_now", None)
        agent = body.get("agent")
        exported = _exported_base(agent.strip()) if isinstance(agent, str) else None
        if exported is not None:
            from gomoku_jax import exported as exported_lib

            try:
                _, file_env, _, _ = exported_lib.load_network(exported[0])
            except ValueError as err:
                raise PlayError(str(err)) from None
            current = Gomoku(file_env.size, file_env.k, file_env.rule)
        if "game" in body:
            return self._env(body["game"], current)
        return current if current is not None else Gomoku()

    def _start(self, body: dict, budget_name: str | None = None) -> None:
        kept = getattr(self, "_asked", None)
        if kept is not None:  # fields left out keep the current game's
            body = {"colour": kept["colour"], **({} if "agent" in body else {
                "agent": kept["agent"], "budget": kept["budget"]}), **body}
        colour = body.get("colour", "black")
        if not isinstance(colour, str) or colour not in _COLOURS:
            raise PlayError(f"colour must be \"black\" or \"white\", got {_json(colour)}")
        env = self._game_of(body)
        player, default = self._player_and_default(body.get("agent", "heuristic"),
                                                   body.get("budget"), env, budget_name)
        with self._lock:
            self._asked = {"colour": colour, "agent": body.get("agent", "heuristic"),
                           "budget": body.get("budget")}
            self._env_now = env
            self._player = player
            self._default_budget = default
            self._human = _COLOURS[colour]
            self._states = [player.env.init()]
            self._movers: list[str] = []  # who made each move: "human" / "agent"
            self._moves: list[int] = []  # the actions (-1: an agent's illegal answer)
            self._analysis = None
            self._games += 1
            self._version += 1
        player.forget()  # a kept tree is another game's

    # -------------------------------------------------------------------- state
    def _turn(self, state: State) -> str | None:
        if bool(state.terminated) or bool(state.truncated):
            return None
        return "human" if int(state.current_player) == self._human else "agent"

    def snapshot(self) -> dict:
        """The game as JSON: board ``[N][N]`` (0 empty, 1 black, 2 white), whose turn, the
        last move, the result and winning line, the agent, and its last analysis."""
        with self._lock:
            return self._snapshot()

    def _snapshot(self) -> dict:
        state = self._states[-1]
        env = self._player.env
        board = np.asarray(state.board)
        over = bool(state.terminated) or bool(state.truncated)
        last = int(state.last_action)
        winner = int(state.winner)
        return {
            "game": _game_json(env),
            "board": board.astype(int).tolist(),
            "human": _COLOUR_NAMES[self._human],
            "agent": self._player.info(self._default_budget),
            "to_move": None if over else _COLOUR_NAMES[int(state.current_player)],
            "turn": self._turn(state),
            "move_count": int(state.move_count),
            "moves": [list(divmod(a, env.size)) if a >= 0 else None for a in self._moves],
            "movers": list(self._movers),
            "last_move": list(divmod(last, env.size)) if last >= 0 else None,
            "over": over,
            "result": describe_result(state) if over else None,
            "winner": _COLOUR_NAMES.get(winner) if over else None,
            "win_line": _win_line(board, last, env.k, env.rule) if over and winner >= 0 else [],
            "can_undo": "human" in self._movers,
            "analysis": self._analysis,
            "version": self._version,
        }

    # ------------------------------------------------------------------ actions
    def new_game(self, body: Any) -> dict:
        """Start a new game (see the module docstring for the fields)."""
        self._start(self._request(body, "new"))
        return self.snapshot()

    def move(self, body: Any) -> dict:
        """Play the human's ``{"row", "col"}``; 400 if it is not their turn or illegal."""
        body = self._request(body, "move")
        for name in ("row", "col"):
            if name not in body:
                raise PlayError(f"the move request has no {name}: send {{\"row\": R, "
                                "\"col\": C}")
            value = body[name]
            if isinstance(value, bool) or not isinstance(value, int):
                raise PlayError(f"{name} must be an integer, got {_json(value)}")
        with self._lock:
            state = self._states[-1]
            turn = self._turn(state)
            if turn is None:
                raise PlayError(f"the game is over ({describe_result(state)})")
            if turn != "human":
                raise PlayError("it is the agent's turn: ask for its reply (POST /api/reply)")
            try:
                new = self._player.env.play(state, body["row"], body["col"])
            except IllegalMoveError as err:
                raise PlayError(f"illegal move: {err}") from None
            self._states.append(new)
            self._movers.append("human")
            self._moves.append(body["row"] * self._player.env.size + body["col"])
            self._analysis = None
            self._version += 1
            return self._snapshot()

    def reply(self, body: Any = None) -> dict:
        """The agent's move (it must be the agent's turn); its analysis comes with it."""
        self._request({} if body is None else body, "reply", ())
        with self._lock:
            state, version, player = self._states[-1], self._version, self._player
            turn = self._turn(state)
            if turn is None:
                raise PlayError(f"the game is over ({describe_result(state)})")
            if turn != "agent":
                raise PlayError("it is your turn, not the agent's")
            key = jax.random.fold_in(jax.random.fold_in(self._key, self._games),
                                     int(state.move_count))
        action, analysis = player.move(key, state)  # outside the lock: it may take a while
        with self._lock:
            if self._version == version:
                n = player.env.size
                # Judged as the arena judges a move: any integer (a NumPy one too) on an
                # empty cell.
                legal = arena.illegal_reason(player.env, state, action) is None
                action = int(action) if legal else action
                # The engine's rule: an illegal answer (-1 here) loses the game at once.
                new = _step(player.env)(state, jnp.int32(action if legal else -1))
                self._states.append(new)
                self._movers.append("agent")
                self._moves.append(action if legal else -1)
                if analysis is not None:
                    analysis = {**analysis, "move": list(divmod(action, n)),
                                "position": int(state.move_count), "to_move": "agent"}
                self._analysis = analysis
                self._version += 1
                return self._snapshot()
        player.forget()  # the tree it kept is of a position the game has left
        raise PlayError("the game changed while the agent was thinking", status=409)

    def undo(self, body: Any = None) -> dict:
        """Take back the human's last move and the agent's replies after it."""
        self._request({} if body is None else body, "undo", ())
        with self._lock:
            if "human" not in self._movers:
                raise PlayError("nothing to undo: you have not moved yet in this game")
            i = len(self._movers) - 1 - self._movers[::-1].index("human")
            del self._states[i + 1:]
            del self._movers[i:]
            del self._moves[i:]
            self._analysis = None
            self._version += 1
            snapshot, player = self._snapshot(), self._player
        player.forget()  # a takeback starts the agent's search afresh
        return snapshot

    def analyse(self, body: Any = None) -> dict:
        """What the agent thinks of the current position (None when it cannot say)."""
        self._request({} if body is None else body, "analyse", ())
        with self._lock:
            state, player = self._states[-1], self._player
        if bool(state.terminated) or bool(state.truncated):
            raise PlayError(f"the game is over ({describe_result(state)})")
        if player.analyse is None:
            return {"analysis": None,
                    "note": f"{player.name} has no policy or value to show"}
        key = jax.random.fold_in(jax.random.fold_in(self._key, self._games),
                                 int(state.move_count))
        action, analysis = player.look(key, state)
        # whoever is to move: on the page, usually the human (the agent replies at once)
        return {"analysis": {**analysis, "move": list(divmod(action, player.env.size)),
                             "position": int(state.move_count),
                             "to_move": self._turn(state)}}

    def agent_info(self, name: Any, budget: Any = None) -> dict:
        """``{"name", "base", "budget", "overlay", "game", "own_game"}`` of an agent in
        the current game (or its own game for an exported file, ``own_game`` True)."""
        env = self._game_of({"agent": name}) if isinstance(name, str) else self._env_now
        player, default = self._player_and_default(name, budget, env)
        return player.info(default)


def _win_line(board: np.ndarray, last: int, k: int, rule: str) -> list[list[int]]:
    """The cells of the winning run through the last move (empty if none)."""
    if last < 0:
        return []
    n = board.shape[0]
    r0, c0 = divmod(last, n)
    stone = board[r0, c0]
    if stone == EMPTY:
        return []
    for dr, dc in DIRECTIONS:
        run = [(r0, c0)]
        for sign in (1, -1):
            r, c = r0 + sign * dr, c0 + sign * dc
            while 0 <= r < n and 0 <= c < n and board[r, c] == stone:
                run.append((r, c))
                r, c = r + sign * dr, c + sign * dc
        if len(run) == k or (rule == "freestyle" and len(run) > k):
            return [list(p) for p in sorted(run)]
    return []


# ------------------------------------------------------------------------ HTTP
def _web_file(name: str) -> bytes:
    return importlib.resources.files("gomoku_jax").joinpath("web", name).read_bytes()


def _host_name(value: str) -> str | None:
    """The host of a ``Host`` header's ``HOST[:PORT]`` (lower case, an IPv6 host without
    its brackets), or None if it is not one (a bad port included)."""
    value = value.strip()
    try:
        url = urllib.parse.urlsplit(f"http://{value}")
        url.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError:
        return None
    if (not url.hostname or url.netloc != value or "@" in value or url.path or url.query
            or url.fragment):
        return None
    return url.hostname


def _shown(value: str, limit: int = 80) -> str:
    """A header's value for an error message, cut to ``limit`` characters."""
    return repr(value if len(value) <= limit else value[:limit] + "...")


def _depth(value: Any) -> int:
    """How deeply parsed JSON nests arrays and objects (a scalar: 0), counted without
    recursion and only up to ``_MAX_DEPTH + 1``."""
    depth, level = 0, [value]
    while depth <= _MAX_DEPTH:
        containers = [v for v in level if isinstance(v, (list, dict))]
        if not containers:
            break
        depth += 1
        level = [item for v in containers for item in (v.values() if isinstance(v, dict) else v)]
    return depth


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "gomoku-jax-play"
    app: PlayApp  # set on the subclass made by make_server, with the three below
    quiet = True
    port = 0  # the port the server listens on (for the addresses its errors show)
    hosts: frozenset[str] = frozenset(_LOOPBACK)  # the names it answers to (as `_host_name`)
    any_ip = False  # bound to every interface: any IP address of this machine is its own
    timeout = 30  # seconds a client may leave a request unsent before its socket closes

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        if not self.quiet:
            super().log_message(format, *args)

    def _send(self, status: int, payload: bytes, content_type: str,
              extra: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(payload)

    def _json(self, status: int, obj) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json")

    def send_error(self, code, message=None, explain=None):
        """The standard library's own refusals as JSON too, as every other answer: a
        method the server has no handler for (501: PUT, DELETE, HEAD...) and a request
        line or header it cannot read (400, 414, 431). Its HTML page otherwise."""
        if code == 501 and self.command:
            message = (f"this server takes GET and POST, not {clip(repr(self.command))}; "
                       "nothing was changed")
        elif not message:
            message = self.responses.get(code, ("error",))[0]
        body = json.dumps({"error": message}).encode()
        self.send_response(code)
        self.send_header("Connection", "close")  # what the request left unread is not read
        self.close_connection = True
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and code >= 200 and code not in (204, 205, 304):
            self.wfile.write(body)

    def _ours(self, value: str) -> bool:
        """Whether ``HOST[:PORT]`` (a ``Host`` header, an origin without ``http://``)
        names this server: one of its names, at any port (a tunnel or a container may
        forward another port to it; DNS rebinding changes what a name points at, not the
        port)."""
        host = _host_name(value)
        if host is None:
            return False
        if host in self.hosts:
            return True
        if self.any_ip:
            try:
                ipaddress.ip_address(host)
            except ValueError:
                return False
            return True
        return False

    def _where(self) -> str:
        """The addresses `_ours` accepts, for the error messages."""
        names = [h for h in _LOOPBACK if h in self.hosts] + sorted(self.hosts - {*_LOOPBACK})
        shown = [f"http://{f'[{h}]' if ':' in h else h}:{self.port}" for h in names]
        if self.any_ip:
            shown.append(f"http://IP-ADDRESS:{self.port} (any address of this machine)")
        return ", ".join(shown)

    def _check_sender(self, post: bool, api: bool) -> None:
        """Refuse (`PlayError`) a request that is not addressed to this server (403: the
        ``Host`` header, against DNS rebinding), that another web page sent (403: its
        ``Origin``, or the ``Sec-Fetch-Site`` of an ``api`` request), or a POST whose body is
        not declared JSON (415: another site cannot send that without a CORS preflight)."""
        hosts = self.headers.get_all("Host") or []
        if len(hosts) != 1 or not self._ours(hosts[0]):
            got = (f"{len(hosts)} Host headers" if len(hosts) > 1 else
                   f"Host {_shown(hosts[0])}" if hosts else "no Host header")
            raise PlayError(f"this server answers only requests addressed to it "
                            f"({self._where()}), got {got}: open the page at one of those "
                            "addresses (another name pointing here is refused, against DNS "
                            "rebinding)", status=403)
        origins = self.headers.get_all("Origin") or []
        if origins:
            origin = origins[0].strip()
            if (len(origins) > 1 or origin[:7].lower() != "http://"
                    or not self._ours(origin[7:])):
                raise PlayError(f"requests from other web pages are refused: Origin "
                                f"{_shown(origins[0])} is not this server's "
                                f"({self._where()})", status=403)
        site = self.headers.get("Sec-Fetch-Site")
        if api and site is not None and site.strip().lower() not in _SAME_SITE:
            raise PlayError(f"requests from other web pages are refused: Sec-Fetch-Site "
                            f"{_shown(site)} (the page's own requests are same-origin)",
                            status=403)
        if post:
            kind = self.headers.get("Content-Type")
            if (kind or "").partition(";")[0].strip().lower() != "application/json":
                raise PlayError("a POST request must send JSON with the header Content-Type: "
                                "application/json, got " + (
                                    "none" if kind is None else f"Content-Type {_shown(kind)}"),
                                status=415)

    def _wrong_method(self, path: str, method: str) -> None:
        """405 for a known path asked with the other method, saying which it takes."""
        body = " with a JSON body" if method == "POST" else ""
        self._send(405, json.dumps({"error": f"{path} takes {method}{body}"}).encode(),
                   "application/json", extra={"Allow": method})

    def _body(self) -> Any:
        length = self.headers.get("Content-Length")
        if length is None and self.headers.get("Transfer-Encoding"):  # chunked: not read
            raise PlayError("the request body must come with a Content-Length (a body sent "
                            f"with Transfer-Encoding {self.headers['Transfer-Encoding']!r} "
                            "is not read); nothing was changed")
        try:
            size = int(length) if length is not None else 0
        except ValueError:
            raise PlayError(f"bad Content-Length {length!r}") from None
        if size < 0 or size > _MAX_BODY:
            raise PlayError(f"the request body must be at most {_MAX_BODY} bytes, got {size}")
        raw = self.rfile.read(size) if size else b""
        if not raw.strip():
            return {}
        too_deep = (f"the request body is not valid JSON: it nests arrays or objects too "
                    f"deeply (at most {_MAX_DEPTH} levels)")
        try:
            body = loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise PlayError(f"the request body is not valid JSON ({err})") from None
        except RecursionError:  # deeper than the interpreter's recursion limit
            raise PlayError(too_deep) from None
        if _depth(body) > _MAX_DEPTH:  # later code (an error's repr) may recurse on it
            raise PlayError(too_deep)
        return body

    def do_GET(self):  # noqa: N802 (the base class's name)
        url = urllib.parse.urlsplit(self.path)
        try:
            # Another site may link to the page, never read or drive the API.
            self._check_sender(post=False, api=url.path not in _WEB_FILES)
            if url.path in _WEB_FILES:
                name, kind = _WEB_FILES[url.path]
                return self._send(200, _web_file(name), kind)
            if url.path in _GET_PATHS:
                return self._json(200, getattr(self, _GET_PATHS[url.path])(url.query))
            if url.path in _POST_PATHS:
                return self._wrong_method(url.path, "POST")
            return self._json(404, {"error": f"no such page {url.path!r}"})
        except PlayError as err:
            return self._json(err.status, {"error": str(err)})
        except Exception as err:  # a bug or an agent file that failed: say so, keep serving
            return self._json(500, {"error": f"{type(err).__name__}: {err}"})

    def _get_state(self, query: str) -> dict:
        return self.app.snapshot()

    def _get_agents(self, query: str) -> dict:
        registered = [n for n in agents_lib.AGENTS  # prefixes need their suffix
                      if not n.endswith("-") and n not in BASELINES]
        return {"baselines": [*BASELINES, *registered], "max_budget": MAX_BUDGET,
                "colours": list(_COLOURS), "rules": list(RULES),
                "sizes": [MIN_SIZE, MAX_SIZE]}

    def _get_agent_info(self, query: str) -> dict:
        fields = urllib.parse.parse_qs(query)
        name = fields.get("name", [None])[0]
        if not name:
            raise PlayError("agent-info needs the agent's name: /api/agent-info?name=AGENT")
        budget = fields.get("budget", [None])[0]
        if budget is not None:
            shown = clip(repr(budget))
            if not agents_lib.digits(budget):
                raise PlayError(f"budget must be an integer, got {shown}")
            if len(budget.lstrip("0")) > 100:
                raise PlayError(f"budget {shown} of {len(budget)} digits is far too large")
            budget = int(budget)
        return self.app.agent_info(name, budget)

    def do_POST(self):  # noqa: N802
        url = urllib.parse.urlsplit(self.path)
        try:
            self._check_sender(post=True, api=True)
            if url.path in _GET_PATHS or url.path in _WEB_FILES:
                return self._wrong_method(url.path, "GET")
            if url.path not in _POST_PATHS:
                return self._json(404, {"error": f"no such action {url.path!r}"})
            action = getattr(self.app, _POST_PATHS[url.path])
            return self._json(200, action(self._body()))
        except PlayError as err:
            return self._json(err.status, {"error": str(err)})
        except Exception as err:  # a bug or an agent that failed: say so, keep serving
            return self._json(500, {"error": f"{type(err).__name__}: {err}"})


def _family(host: str, port: int) -> int:
    """The address family to listen on ``host`` (without brackets) with: IPv4 where the
    host has an IPv4 address, else IPv6 (a literal such as ``::1``, or a name that resolves
    to IPv6 only)."""
    try:
        found = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError):
        return socket.AF_INET  # binding says what is wrong with the name
    families = [info[0] for info in found]
    return socket.AF_INET if socket.AF_INET in families or not families else families[0]


def url_of(server: http.server.HTTPServer) -> str:
    """The page's address: ``http://HOST:PORT/`` (an IPv6 host in brackets, the ``%``
    of a zone as ``%25``, as RFC 6874 writes it; a server bound to every interface shows
    the loopback address)."""
    host, port = server.server_address[:2]
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    if ":" in host:
        host = "[" + host.replace("%", "%25") + "]"
    return f"http://{host}:{port}/"


class _Server(http.server.ThreadingHTTPServer):
    """The standard library's threading server, quiet when a client goes away before its
    answer is written (a browser that navigates away, a script that reads the status
    only): that is the client's choice, not an error of the server, so no traceback;
    every other error is printed as before."""

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], ConnectionError):  # broken pipe, reset, aborted
            return
        super().handle_error(request, client_address)


class _IPv6Server(_Server):
    """The server on an IPv6 address; on ``::`` (every interface) it takes IPv4 clients
    too, as the standard library's ``DualStackServer`` does, whatever the system's
    default."""

    address_family = socket.AF_INET6

    def server_bind(self):
        if self.server_address[0] == "::":
            with contextlib.suppress(AttributeError, OSError):
                self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def make_server(app: PlayApp, host: str = "127.0.0.1", port: int = 0,
                verbose: bool = False) -> http.server.ThreadingHTTPServer:
    """A threading HTTP server for ``app`` bound to ``host:port`` (port 0: a free port,
    read it from ``server.server_address[1]``); call ``serve_forever()`` to run it. It
    answers only requests addressed to ``host`` or a loopback name (at any port: a tunnel
    may forward another) that no other web page sent (see the module docstring)."""
    port = check_int("", "port", port, 0, 65535)
    handler = type("PlayHandler", (_Handler,), {"app": app, "quiet": not verbose})
    server_class = _Server
    bare = host.strip().strip("[]")
    if _family(bare, port) == socket.AF_INET6:  # e.g. ::1, or a name with IPv6 only
        server_class = _IPv6Server
    try:
        server = server_class((bare, port), handler)
    except OSError as err:
        shown = f"[{bare}]" if ":" in bare else bare
        if isinstance(err, socket.gaierror) or err.errno == errno.EADDRNOTAVAIL:
            advice = ("--host must be an address or a name of this machine (the default "
                      "127.0.0.1 serves this machine only)")  # an unknown or foreign host
        else:
            advice = "try another --port, or --port 0 for a free one"
        raise ValueError(f"cannot listen on {shown}:{port} ({err.strerror or err}); "
                         f"{advice}") from None
    server.daemon_threads = True
    # The names it answers to (`_Handler._check_sender`): this machine's loopback names, the
    # host it was told and the address that became; bound to every interface, also this
    # machine's name and any IP address (a browser that reached it by IP is not rebound).
    told = host.strip().lower().strip("[]")
    hosts = {*_LOOPBACK, told, str(server.server_address[0]).lower()} - {""}
    handler.any_ip = told in _EVERY_INTERFACE
    if handler.any_ip:
        hosts |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    handler.hosts = frozenset(hosts)
    handler.port = server.server_address[1]
    return server


def serve(app: PlayApp, host: str = "127.0.0.1", port: int = 8000, open_browser: bool = False,
          verbose: bool = False) -> None:
    """Serve ``app`` until Ctrl-C or SIGTERM (``kill``, ``timeout``), printing the address
    first; either closes the server and returns."""
    from gomoku_jax.training import sigterm_as_interrupt

    try:  # from the first line printed on, SIGTERM stops it as Ctrl-C does
        with sigterm_as_interrupt():
            _serve(app, host, port, open_browser, verbose)
    except KeyboardInterrupt:
        pass


def _serve(app: PlayApp, host: str, port: int, open_browser: bool, verbose: bool) -> None:
    server = make_server(app, host, port, verbose)
    address = url_of(server)
    elsewhere = (f", or this machine's name or address at port {server.server_address[1]} "
                 "from another machine" if server.RequestHandlerClass.any_ip else "")
    print(f"gomoku-jax play: {app.snapshot()['game']['id']} against {app._player.name}; "
          f"open {address}{elsewhere} (Ctrl-C to stop)", flush=True)
    if open_browser:
        import webbrowser

        webbrowser.open(address)
    try:
        server.serve_forever()
    finally:
        server.server_close()
