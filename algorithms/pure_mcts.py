"""Pure Monte Carlo tree search with random rollouts (UCT), in JAX.

The baseline that seeds 002, 003 and 004 measure learned agents against: a fresh tree for
every move, ``simulations`` rounds of selection (UCT), expansion of one new child,
a random playout to the end of the game, and backpropagation of its result; the move is
the root's most visited child.

The search for one game is a pure function (`search`), so a batch of games searches in
lockstep under ``vmap`` and the whole thing compiles once per (game, settings, batch).
The tree lives in fixed-size arrays (one node per simulation plus the root).

Rollouts. A uniformly random playout from a position is a uniformly random order of its
empty cells, played alternately. `_rollout_winner` draws that order at once and finds
which player completes a winning line first by looking at every k-window of the board:
the window's completion time is the latest time among its cells. That is exactly the
outcome of the move-by-move playout, without a sequential loop. With
``heavy_playouts=True`` (seed 004) the playout instead goes move by move and each side
takes an immediate win, else blocks the opponent's immediate win, else plays at random.

Options from seed 004: ``draw_score`` (a draw counts half by default; 0 makes draws count
as losses), heavy playouts. Scores are in [0, 1] from the view of the player who made the
move into a node; UCT is ``w / n + c * sqrt(ln N / n)``.

Two exact enhancements, on by default so that the baseline never misses a win in one or
a forced block (``MCTSConfig(solver=False, decisive_expansion=False)`` is the plain UCT of
the reports' code):

* ``solver``: proven results are backed up (MCTS-Solver): a node whose player to move has
  a winning child is a proven loss for the player who moved into it, and a node all of
  whose moves are proven losses is a proven win. Selection takes proven wins and avoids
  proven losses; the final move is a proven win when there is one.
* ``decisive_expansion``: a node expands an immediate win first, else a move that blocks
  the opponent's immediate win, else a random untried move.

``transpositions=True`` (seed 004's deduplication) shares one node between positions that
are equal up to the board's 8 symmetries: an expansion that reaches a position already in
the tree (same canonical board, by a 64-bit Zobrist key) links to that node instead of
adding one, so the tree becomes a DAG. Each node keeps its own board and orientation, so
moves below a shared node are read in that node's orientation and nothing needs remapping;
results are backed up along the path actually taken.

Limits. ``simulations`` is at most `MAX_SIMULATIONS` (2**24: visit counts are float32,
exact up to 2**24, and every index stays far inside int32). Memory: a tree holds per
game and per simulation (one node each, plus the root) ``NODE_BYTES + CELL_BYTES * N*N``
bytes (`memory_bytes`); an agent checks, when it is built (one game) and when its batch
policy is traced (the batch), before anything is allocated, that two copies of the trees
fit the device (`check_memory`) and raises a ``ValueError`` with the figures otherwise.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import types

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from gomoku_jax import symmetry, tactics
from gomoku_jax.config import check_int, plain_fields
from gomoku_jax.agents import JaxAgent, static_partial
from gomoku_jax.game import DIRECTIONS, EMPTY, Gomoku, State, legal_action_of_rank

__all__ = ["CELL_BYTES", "MAX_SIMULATIONS", "MCTSConfig", "NODE_BYTES", "PLAIN_UCT",
           "PureMCTSAgent", "SearchOutput", "check_memory", "check_simulations", "memory_bytes",
           "pure_mcts_agent", "search"]

# The `MCTSConfig` options of plain UCT (the agents ``uct-N``): neither MCTS-Solver nor
# decisive expansion.
PLAIN_UCT = types.MappingProxyType({"solver": False, "decisive_expansion": False})

# The most simulations a search takes: visit counts are float32, exact up to 2**24 (and
# node indices, ``simulations + 1`` of them, stay far inside int32).
MAX_SIMULATIONS = 2**24
# Bytes of a `_Tree` per node: to_move, mover, winner, visits, score, solved (4 each),
# terminal (1), keys (8) ...
NODE_BYTES = 33
# ... and per node and board cell: boards (int8) and children (int32).
CELL_BYTES = 5


def check_simulations(simulations, what: str = "MCTSConfig.simulations") -> int:
    """``simulations`` if it is an integer from 1 to `MAX_SIMULATIONS`, else a
    ``ValueError`` naming ``what`` (e.g. ``"agent 'pure-mcts-0': its simulations"``) and
    the allowed range."""
    if isinstance(simulations, bool) or not isinstance(simulations, (int, np.integer)) or not (
        1 <= simulations <= MAX_SIMULATIONS
    ):
        raise ValueError(f"{what} must be a positive integer (1 to {MAX_SIMULATIONS}), "
                         f"got {simulations!r}")
    return int(simulations)


def memory_bytes(batch: int, simulations: int, num_actions: int) -> int:
    """Bytes of the trees of ``batch`` games searching ``simulations`` simulations on a
    board of ``num_actions`` cells: ``batch * (simulations + 1) * (NODE_BYTES + CELL_BYTES
    * num_actions)`` = ``batch * (simulations + 1) * (33 + 5 * num_actions)``. E.g. 15x15:
    1158 bytes per game per simulation, 1.1 GiB for one game of 1,000,000 simulations
    (XLA's own figure for the compiled search, CPU: ~1160 bytes per game per simulation
    for a batch of 8, ~1390 for one game)."""
    for name, value in (("batch", batch), ("simulations", simulations),
                        ("num_actions", num_actions)):
        check_int("", name, value)
    return int(batch) * (int(simulations) + 1) * (NODE_BYTES + CELL_BYTES * int(num_actions))


def check_memory(batch: int, simulations: int, num_actions: int,
                 limit_bytes: int | None = None, device=None, what: str = "pure MCTS",
                 limit_name: str = "limit_bytes") -> int:
    """Refuse a search whose trees (`memory_bytes`) would not fit; returns their bytes.
    The check and its message are the tree search's
    (`gomoku_jax.tree_search.check_tree_memory`): two copies must fit ``limit_bytes``
    (``limit_name`` in the messages), default the free memory of ``device`` or the
    host's available RAM."""
    from gomoku_jax.tree_search import check_tree_memory

    need = memory_bytes(batch, simulations, num_actions)
    return check_tree_memory(need, batch, simulations, limit_bytes, device,
                             what=f"{what}: a search", limit_name=limit_name)


@dataclasses.dataclass(frozen=True)
class MCTSConfig:
    """Settings of pure MCTS (static: they shape the compiled search)."""

    simulations: int = 1000
    exploration: float = math.sqrt(2.0)
    draw_score: float = 0.5
    heavy_playouts: bool = False
    solver: bool = True
    decisive_expansion: bool = True
    transpositions: bool = False

    def __post_init__(self):
        plain_fields(self)
        check_simulations(self.simulations)
        # (inf is refused too: times log(1) = 0 at a node's first selection it is NaN)
        if not (isinstance(self.exploration, (int, float)) and not isinstance(self.exploration, bool)
                and 0 <= self.exploration < math.inf):
            raise ValueError(f"MCTSConfig.exploration must be a finite number >= 0, "
                             f"got {self.exploration!r}")
        if not (isinstance(self.draw_score, (int, float)) and 0 <= self.draw_score <= 1):
            raise ValueError(f"MCTSConfig.draw_score must be from 0 to 1, got {self.draw_score!r}")


@struct.dataclass
class _Tree:
    boards: jax.Array  # [M, N*N] int8
    to_move: jax.Array  # [M] int32: player to move at the node
    mover: jax.Array  # [M] int32: player whose move led to the node
    terminal: jax.Array  # [M] bool
    winner: jax.Array  # [M] int32: -1 none / draw
    children: jax.Array  # [M, A] int32, -1 where not expanded
    visits: jax.Array  # [M] float32
    score: jax.Array  # [M] float32: summed results for ``mover``
    solved: jax.Array  # [M] int32: 1 proven win / -1 proven loss for ``mover``, 0 unknown
    keys: jax.Array  # [M, 2] uint32: Zobrist key of the canonical board (transpositions)
    size: jax.Array  # [] int32: nodes in use


@struct.dataclass
class SearchOutput:
    action: jax.Array  # [] int32: the most visited root child
    visits: jax.Array  # [A] float32: root children's visit counts (with transpositions,
    # moves leading to symmetric positions share one node and show the same counts)
    values: jax.Array  # [A] float32: their mean score for the player to move (nan if unvisited)


@functools.lru_cache(maxsize=None)
def _windows(size: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every k-window of the board, ``[W, k]`` cells, and its two flanking cells
    ``[W, 2]`` (-1 off the board)."""
    cells, flanks = [], []
    for dr, dc in DIRECTIONS:
        for r in range(size):
            for c in range(size):
                end_r, end_c = r + dr * (k - 1), c + dc * (k - 1)
                if not (0 <= end_r < size and 0 <= end_c < size):
                    continue
                cells.append([(r + dr * i) * size + c + dc * i for i in range(k)])
                flank = []
                for fr, fc in ((r - dr, c - dc), (end_r + dr, end_c + dc)):
                    flank.append(fr * size + fc if 0 <= fr < size and 0 <= fc < size else -1)
                flanks.append(flank)
    return np.asarray(cells, np.int32), np.asarray(flanks, np.int32)


@functools.lru_cache(maxsize=None)
def _zobrist(nn: int) -> np.ndarray:
    """``[2, N*N, 2]`` uint32: a 64-bit random code per (stone colour, cell)."""
    rng = np.random.default_rng(20261121)
    return rng.integers(0, 2**32, size=(2, nn, 2), dtype=np.uint64).astype(np.uint32)


def _canonical_key(env: Gomoku, board: jax.Array) -> jax.Array:
    """``[2]`` uint32 Zobrist key of the canonical form of a flat board."""
    canon, _ = symmetry.canonical_board(board.reshape(env.size, env.size))
    flat = canon.reshape(-1)
    table = jnp.asarray(_zobrist(env.num_actions))
    codes = jnp.where((flat == 1)[:, None], table[0], jnp.where((flat == 2)[:, None], table[1], 0))
    return jax.lax.reduce(codes.astype(jnp.uint32), np.uint32(0), jax.lax.bitwise_xor, (0,))


def _rollout_winner(env: Gomoku, key: jax.Array, board: jax.Array, to_move: jax.Array) -> jax.Array:
    """Winner (-1 draw) of a uniformly random playout from a non-terminal position."""
    nn = env.num_actions
    empty = board == EMPTY
    # A random order of the empty cells: rank of each cell's random key among them.
    noise = jax.random.uniform(key, (nn,))
    keyed = jnp.where(empty, noise, 2.0)
    order = jnp.argsort(keyed)
    time = jnp.zeros((nn,), jnp.int32).at[order].set(jnp.arange(nn, dtype=jnp.int32))
    time = jnp.where(empty, time, -1)  # stones already there came "before"
    colour = jnp.where(empty, (to_move + time) % 2 + 1, board.astype(jnp.int32))
    cells, flanks = _windows(env.size, env.k)
    wc = colour[cells]  # [W, k]
    same = jnp.all(wc == wc[:, :1], axis=1)
    done_at = jnp.max(time[cells], axis=1)  # the window completes with its last stone
    if env.rule == "standard":  # an own stone just beyond the window makes an overline
        f_colour = jnp.where(flanks >= 0, colour[jnp.maximum(flanks, 0)], 0)
        f_time = time[jnp.maximum(flanks, 0)]
        # (at or before: stones already there all have time -1, and a five inside an
        # overline of them is no win)
        overline = (f_colour == wc[:, :1]) & (flanks >= 0) & (f_time <= done_at[:, None])
        same = same & ~jnp.any(overline, axis=1)
    done_at = jnp.where(same, done_at, nn + 1)
    first = jnp.argmin(done_at)
    return jnp.where(done_at[first] <= nn, wc[first, 0] - 1, -1).astype(jnp.int32)


def _heavy_rollout_winner(env: Gomoku, key: jax.Array, board: jax.Array, to_move: jax.Array) -> jax.Array:
    """Move-by-move playout: take a win, else block the opponent's win, else random."""
    state = _state_of(env, board, to_move)

    def body(carry):
        t, s = carry
        b, me = s.board, s.current_player
        win = tactics.winning_moves(b, me, env.k, env.rule).reshape(-1)
        block = tactics.winning_moves(b, 1 - me, env.k, env.rule).reshape(-1)
        bits = jax.random.bits(jax.random.fold_in(key, t), (), jnp.uint32)
        mask = jnp.where(win.any(), win, jnp.where(block.any(), block, s.legal_action_mask))
        return t + 1, env.step(s, legal_action_of_rank(mask, bits))

    _, final = jax.lax.while_loop(lambda c: ~c[1].terminated, body, (jnp.int32(0), state))
    return final.winner


def _state_of(env: Gomoku, board: jax.Array, to_move: jax.Array) -> State:
    """The unfinished game with flat ``board`` and ``to_move`` to play (jittable)."""
    return env.init().replace(
        board=board.reshape(env.size, env.size),
        current_player=to_move,
        legal_action_mask=board == EMPTY,
        move_count=jnp.sum(board != EMPTY).astype(jnp.int32),
    )


def _node_state(env: Gomoku, tree: _Tree, node: jax.Array) -> State:
    return _state_of(env, tree.boards[node], tree.to_move[node])


def _simulate(env: Gomoku, config: MCTSConfig, tree: _Tree, key: jax.Array) -> _Tree:
    nn = env.num_actions
    max_depth = nn + 1
    k_expand, k_roll = jax.random.split(key)

    # 1. Selection: descend by UCT while every legal child exists.
    def select_cond(c):
        return ~c[2]

    def select_body(c):
        node, depth, _, path = c
        legal = tree.boards[node] == EMPTY
        children = tree.children[node]
        unexpanded = legal & (children < 0)
        stop = tree.terminal[node] | jnp.any(unexpanded)
        exists = children >= 0
        child_idx = jnp.maximum(children, 0)
        n = tree.visits[child_idx]
        mean = tree.score[child_idx] / jnp.maximum(n, 1.0)
        explore = config.exploration * jnp.sqrt(jnp.log(jnp.maximum(tree.visits[node], 1.0)) / jnp.maximum(n, 1.0))
        uct = jnp.where(exists & legal, mean + explore, -jnp.inf)
        if config.solver:  # take a proven win, avoid proven losses while anything else is left
            proven = tree.solved[child_idx]
            uct = jnp.where(exists & (proven == 1), jnp.inf, uct)
            uct = jnp.where(exists & (proven == -1), -1e9 + mean, uct)
        nxt = jnp.where(stop, node, children[jnp.argmax(uct)])
        depth = depth + (~stop).astype(jnp.int32)
        path = path.at[depth].set(nxt)
        return nxt, depth, stop, path

    path = jnp.full((max_depth + 1,), -1, jnp.int32).at[0].set(0)
    node, depth, _, path = jax.lax.while_loop(
        select_cond, select_body, (jnp.int32(0), jnp.int32(0), jnp.bool_(False), path))

    # 2. Expansion: one random untried move, unless the node ends the game.
    legal = tree.boards[node] == EMPTY
    unexpanded = legal & (tree.children[node] < 0)
    expand = ~tree.terminal[node] & jnp.any(unexpanded)
    choices = unexpanded
    if config.decisive_expansion:
        board2d = tree.boards[node].reshape(env.size, env.size)
        me = tree.to_move[node]
        wins = tactics.winning_moves(board2d, me, env.k, env.rule).reshape(-1) & unexpanded
        blocks = tactics.winning_moves(board2d, 1 - me, env.k, env.rule).reshape(-1) & unexpanded
        choices = jnp.where(wins.any(), wins, jnp.where(blocks.any(), blocks, unexpanded))
    action = legal_action_of_rank(choices, jax.random.bits(k_expand, (), jnp.uint32))
    child = env.step(_node_state(env, tree, node), action)
    new = tree.size
    create, target = expand, new
    key = jnp.zeros((2,), jnp.uint32)
    if config.transpositions:  # link to an existing node of the same canonical position
        key = _canonical_key(env, child.board.reshape(-1))
        same = jnp.all(tree.keys == key, axis=1) & (jnp.arange(tree.keys.shape[0]) < tree.size)
        found = jnp.any(same)
        create, target = expand & ~found, jnp.where(found, jnp.argmax(same), new)
    slot = jnp.where(create, new, tree.boards.shape[0])  # out of range: dropped
    tree = tree.replace(
        boards=tree.boards.at[slot].set(child.board.reshape(-1), mode="drop"),
        to_move=tree.to_move.at[slot].set(child.current_player, mode="drop"),
        mover=tree.mover.at[slot].set(tree.to_move[node], mode="drop"),
        terminal=tree.terminal.at[slot].set(child.terminated, mode="drop"),
        winner=tree.winner.at[slot].set(child.winner, mode="drop"),
        solved=tree.solved.at[slot].set(
            jnp.where(child.terminated & (child.winner >= 0),
                      jnp.where(child.winner == tree.to_move[node], 1, -1), 0), mode="drop"),
        keys=tree.keys.at[slot].set(key, mode="drop"),
        children=tree.children.at[node, action].set(jnp.where(expand, target, tree.children[node, action])),
        size=tree.size + create.astype(jnp.int32),
    )
    leaf = jnp.where(expand, target, node)
    path = path.at[depth + 1].set(jnp.where(expand, target, -1))

    # 3. Rollout from the leaf (its result if it ends the game).
    rollout = _heavy_rollout_winner if config.heavy_playouts else _rollout_winner
    played = rollout(env, k_roll, tree.boards[leaf], tree.to_move[leaf])
    result = jnp.where(tree.terminal[leaf], tree.winner[leaf], played)

    # 4. Backpropagation along the path, each node scored for the player who moved into it.
    valid = path >= 0
    nodes = jnp.where(valid, path, tree.boards.shape[0])
    movers = tree.mover[jnp.maximum(path, 0)]
    gain = jnp.where(result < 0, config.draw_score, (result == movers).astype(jnp.float32))
    tree = tree.replace(
        visits=tree.visits.at[nodes].add(valid.astype(jnp.float32), mode="drop"),
        score=tree.score.at[nodes].add(jnp.where(valid, gain, 0.0), mode="drop"),
    )
    if config.solver:
        tree = _back_up_proofs(tree, path, depth)
    return tree


def _back_up_proofs(tree: _Tree, path: jax.Array, depth: jax.Array) -> _Tree:
    """Re-derive the proven status of the path's nodes, deepest first (MCTS-Solver)."""

    def body(i, solved):
        node = path[depth - i]
        children = tree.children[node]
        exists = children >= 0
        legal = tree.boards[node] == EMPTY
        status = jnp.where(exists, solved[jnp.maximum(children, 0)], 0)
        win_below = jnp.any(exists & (status == 1))  # the player to move here wins
        all_lost = jnp.all(~legal | (exists & (status == -1))) & jnp.any(legal)
        new = jnp.where(win_below, -1, jnp.where(all_lost, 1, solved[node]))
        return solved.at[node].set(jnp.where(tree.terminal[node], solved[node], new))

    return tree.replace(solved=jax.lax.fori_loop(0, depth + 1, body, tree.solved))


def _new_tree(env: Gomoku, config: MCTSConfig, state: State) -> _Tree:
    nn = env.num_actions
    m = config.simulations + 1
    return _Tree(
        boards=jnp.zeros((m, nn), jnp.int8).at[0].set(state.board.reshape(-1)),
        to_move=jnp.zeros((m,), jnp.int32).at[0].set(state.current_player),
        mover=jnp.zeros((m,), jnp.int32).at[0].set(1 - state.current_player),
        terminal=jnp.zeros((m,), bool).at[0].set(state.terminated),
        winner=jnp.full((m,), -1, jnp.int32).at[0].set(state.winner),
        children=jnp.full((m, nn), -1, jnp.int32),
        visits=jnp.zeros((m,), jnp.float32),
        score=jnp.zeros((m,), jnp.float32),
        solved=jnp.zeros((m,), jnp.int32),
        keys=jnp.zeros((m, 2), jnp.uint32),
        size=jnp.int32(1),
    )


def _run(env: Gomoku, config: MCTSConfig, tree: _Tree, key: jax.Array, first, count) -> _Tree:
    """Simulations ``first .. first + count - 1``; simulation i uses ``fold_in(key, i)``,
    so running them in several chunks gives the same tree as one run."""
    return jax.lax.fori_loop(
        first, first + count,
        lambda i, t: _simulate(env, config, t, jax.random.fold_in(key, i)), tree)


def _result(config: MCTSConfig, tree: _Tree, state: State) -> SearchOutput:
    children = tree.children[0]
    exists = children >= 0
    visits = jnp.where(exists, tree.visits[jnp.maximum(children, 0)], 0.0)
    values = jnp.where(exists & (visits > 0),
                       tree.score[jnp.maximum(children, 0)] / jnp.maximum(visits, 1.0), jnp.nan)
    legal = state.legal_action_mask
    # Most visited child. Ties go to the child expanded first, as in the reports' code and
    # `reference.NumpyPureMCTS` (the first most visited of the children in the order they
    # were added): expansion takes untried moves in random order, so this is a random
    # tie-break, not one that favours the first cell (a corner). A search that expanded
    # nothing plays the first legal move.
    preference = visits + 0.5
    if config.solver:  # a proven win first; proven losses last
        proven = jnp.where(exists, tree.solved[jnp.maximum(children, 0)], 0)
        preference = jnp.where(proven == 1, 1e9, jnp.where(proven == -1, preference - 1e6, preference))
    # illegal moves below every legal one, a proven loss included (all lost: still legal)
    preference = jnp.where(legal, preference, -jnp.inf)
    best = preference == jnp.max(preference)
    first_added = jnp.argmin(jnp.where(best & exists, children, jnp.iinfo(jnp.int32).max))
    action = jnp.where(jnp.any(best & exists), first_added,
                       jnp.argmax(best)).astype(jnp.int32)
    return SearchOutput(action=action, visits=visits, values=values)


def search(env: Gomoku, config: MCTSConfig, key: jax.Array, state: State) -> SearchOutput:
    """Pure MCTS from ``state`` (one game, not finished). Pure and jittable; vmap it."""
    tree = _run(env, config, _new_tree(env, config, state), key, 0, config.simulations)
    return _result(config, tree, state)


def _policy(env: Gomoku, config: MCTSConfig, params, key, state: State) -> jax.Array:
    del params
    return search(env, config, key, state).action


def _batch_policy(env: Gomoku, config: MCTSConfig, params, keys: jax.Array,
                  states: State) -> jax.Array:
    """``vmap`` of `_policy` over ``keys [B]``, ``states [B]``, after `check_memory` for
    the batch (while tracing: before anything is allocated)."""
    check_memory(int(np.shape(keys)[0]), config.simulations, env.num_actions,
                 what=f"pure MCTS of {config.simulations} simulations")
    return jax.vmap(functools.partial(_policy, env, config), in_axes=(None, 0, 0))(
        params, keys, states)


@functools.lru_cache(maxsize=16)
def _chunked(env: Gomoku, config: MCTSConfig):
    """`PureMCTSAgent.act`'s compiled pieces, shared by the agents of one game and config:
    a new tree, ``count`` more simulations from simulation ``first`` (both traced: one
    program for every chunk, the last one's remainder included), the move."""
    new = jax.jit(lambda state: _new_tree(env, config, state))
    run = jax.jit(lambda tree, key, first, count: _run(env, config, tree, key, first, count))
    result = jax.jit(lambda tree, state: _result(config, tree, state).action)
    return new, run, result


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class PureMCTSAgent(JaxAgent):
    """Pure MCTS as an agent. In the arena's batched loop it runs its full simulation
    count; on its own (``act``) it also honours a deadline: it searches in chunks and
    answers with the simulations done when the next chunk would overrun. Without a
    deadline ``act`` runs every simulation in one call of the chunks' program (its count
    is traced): the same tree as one search, and the same programs as with a deadline, so
    a move with a deadline compiles all that any move needs (a Gomocup brain's warm-up)."""

    env: Gomoku | None = None
    config: MCTSConfig | None = None
    chunk: int = 50

    def act(self, state: State, key: jax.Array, deadline: float | None = None) -> int:
        new, run, result = _chunked(self.env, self.config)
        if deadline is None:  # every simulation in one call of the chunks' program
            tree = run(new(state), key, 0, self.config.simulations)
        else:
            tree, _ = self.search_by(state, key, deadline)
        return int(result(tree, state))

    def search_by(self, state: State, key: jax.Array, deadline: float):
        """The tree of the simulations done by ``deadline`` (a ``time.perf_counter()``
        time), and their number: chunks of ``chunk`` simulations (the last one the
        remainder) while the next is expected to end in time; the first always runs.
        With time for all, the tree of the search without a deadline."""
        sims = self.config.simulations
        new, run, _ = _chunked(self.env, self.config)
        tree, done, per_sim = new(state), 0, 0.0
        while done < sims:
            count = min(self.chunk, sims - done)
            if done and time.perf_counter() + per_sim * count > deadline:
                break
            start = time.perf_counter()
            tree = run(tree, key, done, count)
            jax.block_until_ready(tree.visits)
            per_sim = max(per_sim, (time.perf_counter() - start) / count)
            done += count
        return tree, done


def pure_mcts_agent(env: Gomoku, simulations: int = 1000, name: str | None = None,
                    memory_limit: int | None = None, **options) -> PureMCTSAgent:
    """Pure MCTS as an agent (``pure-mcts-<simulations>``); options as in `MCTSConfig`.

    Raises ``ValueError`` naming the agent for ``simulations`` outside 1 to
    `MAX_SIMULATIONS`, or when one game's tree would not fit ``memory_limit`` bytes
    (default: the device's free memory; `check_memory`). Its batch policy checks the
    whole batch against the device's free memory when it is traced."""
    name = name or f"pure-mcts-{simulations}"
    check_simulations(simulations, f"agent {name!r}: its simulations")
    check_memory(1, simulations, env.num_actions, memory_limit, what=f"agent {name!r}",
                 limit_name="memory_limit")
    config = MCTSConfig(simulations=simulations, **options)
    return PureMCTSAgent(name, static_partial(_policy, env, config), None, env, config,
                         batch=static_partial(_batch_policy, env, config))
