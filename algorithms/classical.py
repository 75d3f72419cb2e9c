"""Seed 004's classical learners: a tabular value table (4.1) and linear TD(0) (4.4).

Both learn a value of *afterstates*: the board just after a move, valued from the view
of the player who made that move (the "mover"), on the scale of the results: +1 a won
game, 0 a draw (and an unknown state), -1 a lost one (the table stays within ``[-1, 1]``;
the linear value is unbounded but trained towards targets in that range). A greedy
player therefore picks the legal move whose afterstate has the highest value (a 1-ply
lookahead), ties broken uniformly at random.
Finished games are never estimated: a move that wins is worth exactly +1 and a move
that fills the board without a win exactly 0 (the report's ``InitValue``), so both
learners always take a win in one. Because the game is zero-sum, the value of an
afterstate from the mover's view is minus its value from the opponent's view, so one
table / one weight vector serves both colours (self-play "negamax" form).

`TabularValueLearner` (seed 004, section 4.1) - small boards (3x3 tic-tac-toe):

* States are keyed by their canonical form under the 8 symmetries of the square (the
  lexicographically smallest transform read row by row, exactly as
  `gomoku_jax.symmetry.canonical_board` chooses it), stored as a base-3 integer with the
  top-left cell as the most significant digit. Symmetric boards share one entry.
* `TabularValueLearner.enumerate_states` is the report's phase 1: a depth-first walk
  over every reachable position, one representative per symmetry class (765 classes for
  tic-tac-toe, 138 of them finished), each entered with its initial value.
* Training is self-play with epsilon-greedy moves (a seeded NumPy generator). When a game
  ends its path is backed up from the end (the report's Algorithm 8): the final
  afterstate gets its exact result, then for ``t = T-1 .. 1``
  ``V(a_t) <- V(a_t) + alpha * (-V(a_{t+1}) - V(a_t))``, where ``a_{t+1}`` is the
  opponent's reply (hence the minus sign) and the update is applied only when that reply
  was greedy ("only learn from rational moves"; an exploratory move that happens to be
  as good as the greedy one counts as greedy). This is TD(0) swept backwards, so a
  single game carries its result all the way to the first move.

`LinearTDLearner` (seed 004, section 4.4) - any board (5x5 k=4, 9x9 k=5, 15x15):

* Features: one per possible winning line, i.e. every k-cell window along a row, a
  column, a diagonal or an anti-diagonal (for 3x3 k=3 exactly the 8 rows, columns and
  diagonals of the report). From player p's view, a window holding only p's stones is
  ``+count/k``, only the opponent's ``-count/k``, empty or blocked (both colours) 0.
  The window index table is built once; the features of every candidate next state
  come at once from the change in the windows through the candidate cell.
* ``V(s) = w . x(s)`` from the mover's view. TD(0) with the LMS rule over each
  self-play game, applied forwards after the game (the report's Algorithm 18):
  ``w <- w + alpha * (target - w . x(a_t)) * x(a_t)`` with ``target = reward`` (+1 win,
  0 draw) for the final afterstate and ``target = gamma * (-V(a_{t+1}))`` otherwise
  (the opponent's next afterstate, negated; exact when it is final).
* Self-play is epsilon-greedy with exponential decay after every game:
  ``epsilon <- max(epsilon_min, epsilon * epsilon_decay)``.
* `LinearTDLearner.agent` is a `JaxAgent` (pure, jittable, batched in the arena) that
  plays the greedy 1-ply lookahead on the current weights; `action_values` is the same
  computation in NumPy. Weights are saved as ``.npz`` with the game settings and loaded
  without pickle; a file for another game or feature layout is refused with a clear error.

Conventions are those of `gomoku_jax.game`: boards ``[N, N]`` int8 (0 empty, 1 black,
2 white), players 0 black / 1 white, action = ``row * N + col``.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from gomoku_jax import io as gio
from gomoku_jax.agents import JaxAgent, PythonAgent
from gomoku_jax.game import DIRECTIONS, Gomoku, State, legal_action_of_rank

__all__ = ["LinearTDLearner", "TabularValueLearner", "canonical_key", "line_windows",
           "check_stored_game", "load_npz", "save_npz"]

_FEATURES_VERSION = "seed004-line-windows-v1"
_TIE_TOLERANCE = 1e-6


# ---------------------------------------------------------------- shared tables


def check_stored_game(path, stored: dict, env: Gomoku, what: str) -> None:
    """ValueError when a file's ``stored`` ``size``, ``k`` and ``rule`` are not ``env``'s,
    naming both games (``what``: "weights are", "the tree is")."""
    mine = (env.size, env.k, env.rule)
    theirs = (stored["size"], stored["k"], stored["rule"])
    if theirs != mine:
        raise ValueError(
            f"{path}: {what} for a {theirs[0]}x{theirs[0]} board, k={theirs[1]}, "
            f"{theirs[2]} rule; this learner plays {mine[0]}x{mine[0]}, k={mine[1]}, {mine[2]}")


def load_npz(path: str | os.PathLike, fields, kind: str, reading: str) -> dict:
    """The arrays ``fields`` of the ``.npz`` file at ``path``, read without pickle; a
    ValueError naming ``path`` when it cannot be read (``cannot read {reading}``) or lacks
    one of them (``not a {kind} file``)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            stored = {name: data[name] for name in fields if name in data.files}
    except (OSError, EOFError, ValueError) as err:
        raise ValueError(f"{path}: cannot read {reading} ({err})") from err
    missing = set(fields) - set(stored)
    if missing:
        raise ValueError(f"{path}: not a {kind} file (missing {sorted(missing)})")
    return stored


def save_npz(path: str | os.PathLike, **arrays) -> None:
    """``arrays`` as an ``.npz`` written at ``path`` exactly (NumPy's ``savez`` would add
    ``.npz`` to a name without it), through a temporary file renamed over it, so an
    interrupted save leaves the old file or the new one."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    gio.write_atomic(path, buffer.getvalue())


@dataclasses.dataclass(frozen=True, eq=False)
class _Lines:
    """Index tables of every k-window of one game (built once per learner).

    Cells are flat indices; index ``nn`` is a padding cell that is always empty (boards
    are stored with one extra trailing 0), and window index ``F`` a padding window.
    """

    size: int
    k: int
    rule: str
    windows: np.ndarray  # [F, k] int32: the cells of each window
    before: np.ndarray  # [F] int32: the cell just before the window (nn when off board)
    after: np.ndarray  # [F] int32: the cell just after it (nn when off board)
    cell_windows: np.ndarray  # [nn, m] int32: windows through each cell, F-padded

    @property
    def num_features(self) -> int:
        return len(self.windows)


@functools.lru_cache(maxsize=None)
def _lines(size: int, k: int, rule: str) -> _Lines:
    n, nn = size, size * size
    windows, before, after = [], [], []
    for dr, dc in DIRECTIONS:
        for r in range(n):
            for c in range(n):
                r_end, c_end = r + (k - 1) * dr, c + (k - 1) * dc
                if not (0 <= r_end < n and 0 <= c_end < n):
                    continue
                windows.append([(r + i * dr) * n + (c + i * dc) for i in range(k)])
                rb, cb, ra, ca = r - dr, c - dc, r_end + dr, c_end + dc
                before.append(rb * n + cb if 0 <= rb < n and 0 <= cb < n else nn)
                after.append(ra * n + ca if 0 <= ra < n and 0 <= ca < n else nn)
    windows = np.asarray(windows, np.int32)
    through = [np.flatnonzero((windows == cell).any(axis=1)) for cell in range(nn)]
    m = max(len(t) for t in through)
    cell_windows = np.full((nn, m), len(windows), np.int32)
    for cell, t in enumerate(through):
        cell_windows[cell, : len(t)] = t
    return _Lines(size, k, rule, windows, np.asarray(before, np.int32),
                  np.asarray(after, np.int32), cell_windows)


def line_windows(size: int, k: int) -> np.ndarray:
    """``[F, k]`` int32: the cells of every possible winning line (k-window) of a ``size``
    board, horizontal first, then vertical, diagonal and anti-diagonal (the order of
    `gomoku_jax.game.DIRECTIONS`), each direction by its first cell in row-major order.
    Feature ``i`` of `LinearTDLearner` belongs to window ``i``."""
    return _lines(int(size), int(k), "freestyle").windows.copy()


def _padded(board) -> np.ndarray:
    """A flat int8 copy of ``board`` with the always-empty padding cell appended."""
    flat = np.asarray(board, np.int8).reshape(-1)
    return np.concatenate([flat, np.zeros(1, np.int8)])


def _window_counts(lines: _Lines, padded: np.ndarray, player: int):
    """Stones of ``player`` and of the opponent in each window: two ``[..., F]`` int32."""
    cells = padded[..., lines.windows]  # [..., F, k]
    own = (cells == player + 1).sum(-1, dtype=np.int32)
    opp = (cells == 2 - player).sum(-1, dtype=np.int32)
    return own, opp


def _features_from_counts(own, opp, k: int):
    return np.where(opp == 0, own, np.where(own == 0, -opp, 0)).astype(np.float32) / k


def _winning_cells(lines: _Lines, padded: np.ndarray, player: int, own: np.ndarray) -> np.ndarray:
    """``[..., nn]`` bool: the empty cells where ``player``'s stone completes a win, given
    the player's window counts ``own`` ``[..., F]`` on ``padded`` ``[..., nn + 1]`` (any
    leading batch axes)."""
    stone = player + 1
    pad = np.zeros(own.shape[:-1] + (1,), own.dtype)  # the padding window
    completes = np.concatenate([own, pad], -1)[..., lines.cell_windows] == lines.k - 1
    if lines.rule == "standard":  # exactly k: the cells just outside must not be ours
        exact = (padded[..., lines.before] != stone) & (padded[..., lines.after] != stone)
        exact = np.concatenate([exact, np.zeros_like(pad, bool)], -1)
        completes &= exact[..., lines.cell_windows]
    return completes.any(-1) & (padded[..., :-1] == 0)


def _pick(values: np.ndarray, rng: np.random.Generator) -> int:
    """A uniformly random index among the maxima of ``values`` (-inf: not allowed); values
    within a relative 1e-6 of the best count as ties (float noise, and table values that
    differ only by vanishing amounts, e.g. 1e-70 and 0, would otherwise make self-play
    needlessly deterministic)."""
    best = values.max()
    ties = np.flatnonzero(values >= best - _TIE_TOLERANCE * (1.0 + abs(best)))
    return int(ties[rng.integers(len(ties))]) if len(ties) > 1 else int(ties[0])


def _epsilon_greedy(values: np.ndarray, padded: np.ndarray, epsilon: float,
                    rng: np.random.Generator) -> int:
    """A random empty cell with probability ``epsilon``, else a best-valued one."""
    if rng.random() < epsilon:
        return int(rng.choice(np.flatnonzero(padded[:-1] == 0)))
    return _pick(values, rng)


def _tally(stats: dict, won: bool, player: int) -> None:
    """Count a finished self-play game: ``player`` made the last move."""
    if won:
        stats["black_wins" if player == 0 else "white_wins"] += 1
    else:
        stats["draws"] += 1


def _check_positive_int(owner: str, name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{owner}: {name} must be a positive integer, got {value!r}")


def _check_unit(owner: str, name: str, value, low_open: bool = False) -> None:
    ok = isinstance(value, (int, float, np.floating)) and not isinstance(value, bool)
    ok = ok and (0 < value <= 1 if low_open else 0 <= value <= 1)
    if not ok:
        interval = "(0, 1]" if low_open else "[0, 1]"
        raise ValueError(f"{owner}: {name} must be a number in {interval}, got {value!r}")


def _board_and_player(state_or_board, player: int | None, env: Gomoku, owner: str):
    if isinstance(state_or_board, State):
        board = np.asarray(state_or_board.board)
        player = int(state_or_board.current_player) if player is None else player
    else:
        board = np.asarray(state_or_board)
    _check_board(board, env, owner)
    if not isinstance(state_or_board, State):
        if player is None:
            blacks, whites = int((board == 1).sum()), int((board == 2).sum())
            player = 0 if blacks == whites else 1
    if player not in (0, 1):
        raise ValueError(f"player must be 0 (black) or 1 (white), got {player!r}")
    return board, player


def _check_board(board: np.ndarray, env: Gomoku, owner: str) -> None:
    """ValueError naming ``owner`` when ``board`` is not one board of ``env``'s size."""
    n = env.size
    if board.shape != (n, n):
        raise ValueError(f"{owner} plays {env.words}: it takes one board [{n}, {n}], "
                         f"got shape {board.shape}")


# ---------------------------------------------------------------- canonical keys


@functools.lru_cache(maxsize=None)
def _symmetry_tables(size: int) -> tuple[np.ndarray, np.ndarray]:
    """``[8, nn]`` gathers (``flat[perm[t]]`` is transform ``t`` of the board, as in
    `gomoku_jax.symmetry.transform_board`) and the base-3 place values ``[nn]`` int64."""
    src = np.arange(size * size).reshape(size, size)
    perms = np.stack([np.rot90(src[:, ::-1] if t >= 4 else src, t % 4).reshape(-1)
                      for t in range(8)])
    powers = 3 ** np.arange(size * size - 1, -1, -1, dtype=np.int64)
    return perms.astype(np.int32), powers


def canonical_key(board) -> int | np.ndarray:
    """The table key of ``board`` ``[N, N]`` (an int), or of each board of ``[..., N, N]``
    (an int64 array): the base-3 number of its canonical form (the smallest of its 8
    symmetric images read row by row, top-left cell most significant). Equals the base-3
    number of ``gomoku_jax.symmetry.canonical_board(board)[0]``. Boards up to 6x6."""
    board = np.asarray(board)
    if board.ndim < 2 or board.shape[-1] != board.shape[-2] or not 3 <= board.shape[-1] <= 6:
        raise ValueError(f"canonical_key takes square boards [..., N, N] with N from 3 to 6, "
                         f"got shape {board.shape}")
    size = board.shape[-1]
    keys = _keys(board.reshape(-1, size * size), size)
    return int(keys[0]) if board.ndim == 2 else keys.reshape(board.shape[:-2])


def _keys(flat: np.ndarray, size: int) -> np.ndarray:
    """Canonical keys ``[B]`` int64 of flat boards ``[B, N*N]``."""
    perms, powers = _symmetry_tables(size)
    return (flat.astype(np.int64)[:, perms] @ powers).min(-1)


# ---------------------------------------------------------------- 4.1: tabular values


class _GreedyTableAgent(PythonAgent):
    def __init__(self, learner: "TabularValueLearner", name: str):
        self.learner, self.name, self.env = learner, name, learner.env

    def select(self, state: State, rng: np.random.Generator) -> int:
        return _pick(self.learner.action_values(state), rng)


class TabularValueLearner:
    """Seed 004 section 4.1: a table of afterstate values keyed by canonical board,
    learned by epsilon-greedy self-play with a backward TD(0) sweep along each game.

    Args:
      env: the game (default 3x3 tic-tac-toe, k=3); boards up to 6x6, though only tiny
        games can be covered by a table.
      alpha: learning rate of the backup.
      epsilon: probability of an exploratory (uniformly random) move in self-play.
    """

    def __init__(self, env: Gomoku | None = None, alpha: float = 0.5, epsilon: float = 0.2):
        env = Gomoku(3, 3) if env is None else env
        if env.size > 6:
            raise ValueError(f"TabularValueLearner: boards up to 6x6, got {env.size}x{env.size}")
        _check_unit("TabularValueLearner", "alpha", alpha, low_open=True)
        _check_unit("TabularValueLearner", "epsilon", epsilon)
        self.env, self.alpha, self.epsilon = env, float(alpha), float(epsilon)
        self.lines = _lines(env.size, env.k, env.rule)
        self.values: dict[int, float] = {}  # canonical key -> value for the mover

    # ------------------------------------------------------------------ lookups
    def value(self, board) -> float:
        """The table's value of ``board`` for the player who just moved (0 if unseen)."""
        board = np.asarray(board)
        if board.shape == (self.env.num_actions,):  # a flat board
            board = board.reshape(self.env.size, self.env.size)
        _check_board(board, self.env, "TabularValueLearner")
        return self.values.get(canonical_key(board), 0.0)

    def action_values(self, state_or_board, player: int | None = None) -> np.ndarray:
        """``[N*N]`` float64: the value, for ``player`` (default: the player to move), of
        playing each cell: +1 a winning move, 0 a move that draws by filling the board,
        else the table's value of the afterstate (0 if unseen); -inf on occupied cells."""
        board, player = _board_and_player(state_or_board, player, self.env,
                                          type(self).__name__)
        return self._action_values(_padded(board), player)

    def _action_values(self, padded: np.ndarray, player: int) -> np.ndarray:
        nn = len(padded) - 1
        empty = np.flatnonzero(padded[:-1] == 0)
        out = np.full(nn, -np.inf)
        own, _ = _window_counts(self.lines, padded, player)
        wins = _winning_cells(self.lines, padded, player, own)
        nexts = np.repeat(padded[None, :-1], len(empty), axis=0)
        nexts[np.arange(len(empty)), empty] = player + 1
        keys = _keys(nexts, self.env.size)
        values = self.values
        out[empty] = [values.get(int(key), 0.0) for key in keys]
        if len(empty) == 1:  # the last cell: filling the board without a win draws
            out[empty] = 0.0
        out[wins] = 1.0
        return out

    # ------------------------------------------------------------------ phase 1
    def enumerate_states(self, max_states: int = 1_000_000) -> dict:
        """Enter every reachable position (one per symmetry class) into the table with
        its initial value (+1 a position just won by the mover, 0 otherwise), keeping the
        values already learned. Returns ``{"states", "terminal", "wins", "draws"}``."""
        _check_positive_int("TabularValueLearner.enumerate_states", "max_states", max_states)
        nn = self.env.num_actions
        seen: set[int] = set()
        counts = dict(states=0, terminal=0, wins=0, draws=0)
        stack = [(_padded(np.zeros(nn, np.int8)), 0, False, False)]
        while stack:
            padded, player, won, full = stack.pop()  # player: to move in this position
            key = int(_keys(padded[None, :-1], self.env.size)[0])
            if key in seen:
                continue
            seen.add(key)
            counts["states"] += 1
            if counts["states"] > max_states:
                raise ValueError(
                    f"more than {max_states} positions up to symmetry: too big to enumerate")
            self.values.setdefault(key, 1.0 if won else 0.0)
            if won or full:
                counts["terminal"] += 1
                counts["wins" if won else "draws"] += 1
                continue
            own, _ = _window_counts(self.lines, padded, player)
            wins = _winning_cells(self.lines, padded, player, own)
            empty = np.flatnonzero(padded[:-1] == 0)
            for a in empty:
                child = padded.copy()
                child[a] = player + 1
                stack.append((child, 1 - player, bool(wins[a]), len(empty) == 1))
        return counts

    # ------------------------------------------------------------------ phase 2
    def train(self, episodes: int, seed: int = 0) -> dict:
        """Self-play ``episodes`` games and back each one up; returns statistics:
        ``episodes``, ``black_wins``, ``white_wins``, ``draws``, ``updates``,
        ``table_size``, ``mean_length``, ``seconds``."""
        _check_positive_int("TabularValueLearner.train", "episodes", episodes)
        rng = np.random.default_rng(seed)
        nn = self.env.num_actions
        stats = dict(episodes=int(episodes), black_wins=0, white_wins=0, draws=0, updates=0)
        plies = 0
        start = time.perf_counter()
        for _ in range(episodes):
            padded = _padded(np.zeros(nn, np.int8))
            player, keys, greedy = 0, [], []
            while True:
                values = self._action_values(padded, player)
                a = _epsilon_greedy(values, padded, self.epsilon, rng)
                best = values.max()
                greedy.append(values[a] >= best - _TIE_TOLERANCE * (1.0 + abs(best)))
                won = values[a] == 1.0 and self._wins(padded, a, player)
                padded[a] = player + 1
                keys.append(int(_keys(padded[None, :-1], self.env.size)[0]))
                if won or len(keys) == nn:
                    break
                player = 1 - player
            plies += len(keys)
            _tally(stats, won, player)
            stats["updates"] += self._backup(keys, greedy, 1.0 if won else 0.0)
        stats["table_size"] = len(self.values)
        stats["mean_length"] = plies / episodes
        stats["seconds"] = time.perf_counter() - start
        return stats

    def _wins(self, padded: np.ndarray, action: int, player: int) -> bool:
        own, _ = _window_counts(self.lines, padded, player)
        return bool(_winning_cells(self.lines, padded, player, own)[action])

    def _backup(self, keys: list[int], greedy: list[bool], result: float) -> int:
        """The backward sweep over one game's afterstates; returns the number of updates."""
        values, alpha = self.values, self.alpha
        values[keys[-1]] = result  # a finished game's value is exact
        updates = 0
        for t in range(len(keys) - 2, -1, -1):
            if not greedy[t + 1]:  # only learn from rational replies
                continue
            v = values.get(keys[t], 0.0)
            values[keys[t]] = v + alpha * (-values.get(keys[t + 1], 0.0) - v)
            updates += 1
        return updates

    def agent(self, name: str = "tabular-value") -> PythonAgent:
        """A greedy player on the current table (ties broken by the game's generator).
        It reads the live table: further training changes how it plays."""
        return _GreedyTableAgent(self, name)


# ---------------------------------------------------------------- 4.4: linear TD(0)


def _td_policy(lines: _Lines, params, key, state: State) -> jax.Array:
    """The greedy 1-ply lookahead of `LinearTDLearner` for one game, in JAX."""
    w = jnp.asarray(params, jnp.float32)
    nn, k = lines.size * lines.size, lines.k
    me = state.current_player
    stone, other = (me + 1).astype(jnp.int8), (2 - me).astype(jnp.int8)
    padded = jnp.concatenate([state.board.reshape(-1), jnp.zeros((1,), jnp.int8)])
    cells = padded[jnp.asarray(lines.windows)]  # [F, k]
    own = jnp.sum(cells == stone, axis=-1)
    opp = jnp.sum(cells == other, axis=-1)
    # Change of each window's feature when one of our stones is added to it.
    delta = jnp.where(opp == 0, 1.0, jnp.where(own == 0, opp.astype(jnp.float32), 0.0)) / k
    through = jnp.asarray(lines.cell_windows)  # [nn, m], F-padded
    w_pad = jnp.concatenate([w, jnp.zeros((1,), jnp.float32)])
    delta_pad = jnp.concatenate([delta, jnp.zeros((1,), jnp.float32)])
    x = jnp.where(opp == 0, own, jnp.where(own == 0, -opp, 0)).astype(jnp.float32) / k
    values = jnp.dot(w, x) + jnp.sum(w_pad[through] * delta_pad[through], axis=-1)  # [nn]
    completes = jnp.concatenate([own == k - 1, jnp.zeros((1,), bool)])
    if lines.rule == "standard":
        outside = padded[jnp.asarray(np.stack([lines.before, lines.after]))]  # [2, F]
        exact = jnp.all(outside != stone, axis=0)
        completes &= jnp.concatenate([exact, jnp.zeros((1,), bool)])
    wins = jnp.any(completes[through], axis=-1)
    values = jnp.where(state.move_count == nn - 1, 0.0, values)
    values = jnp.where(wins, 1.0, values)
    legal = padded[:-1] == 0
    values = jnp.where(legal, values, -jnp.inf)
    best = jnp.max(values)
    ties = legal & (values >= best - _TIE_TOLERANCE * (1.0 + jnp.abs(best)))
    return legal_action_of_rank(ties, jax.random.bits(key, (), jnp.uint32))


@functools.lru_cache(maxsize=None)
def _policy_for(lines: _Lines):
    """One policy object per game, so that every agent of that game shares the arena's
    compiled loop (the weights are a traced argument)."""
    return functools.partial(_td_policy, lines)


class LinearTDLearner:
    """Seed 004 section 4.4: TD(0) with a linear value over line-window features.

    Args:
      env: the game.
      alpha: LMS step size.
      gamma: discount of the bootstrapped target.
      epsilon, epsilon_decay, epsilon_min: the exploration schedule of self-play
        (``epsilon`` decays after every game and is carried over between `train` calls).
      weights: initial weights ``[F]`` (default zeros: an untrained player is random
        apart from taking wins in one).
    """

    def __init__(self, env: Gomoku, alpha: float = 0.01, gamma: float = 0.9,
                 epsilon: float = 0.5, epsilon_decay: float = 0.995, epsilon_min: float = 0.05,
                 weights=None):
        owner = "LinearTDLearner"
        _check_unit(owner, "alpha", alpha, low_open=True)
        _check_unit(owner, "gamma", gamma)
        _check_unit(owner, "epsilon", epsilon)
        _check_unit(owner, "epsilon_decay", epsilon_decay, low_open=True)
        _check_unit(owner, "epsilon_min", epsilon_min)
        self.env = env
        self.lines = _lines(env.size, env.k, env.rule)
        self.alpha, self.gamma = float(alpha), float(gamma)
        self.epsilon, self.epsilon_decay, self.epsilon_min = (
            float(epsilon), float(epsilon_decay), float(epsilon_min))
        f = self.num_features
        self.weights = np.zeros(f, np.float32) if weights is None else self._checked(weights)

    @property
    def num_features(self) -> int:
        return self.lines.num_features

    def _checked(self, weights) -> np.ndarray:
        weights = np.asarray(weights, np.float32)
        if weights.shape != (self.num_features,):
            raise ValueError(
                f"LinearTDLearner: {self.env.id} has {self.num_features} line features, "
                f"got weights of shape {weights.shape}")
        if not np.isfinite(weights).all():
            raise ValueError("LinearTDLearner: weights must be finite")
        return weights.copy()

    # ------------------------------------------------------------------ values
    def features(self, board, player: int | None = None) -> np.ndarray:
        """``[F]`` float32 (or ``[B, F]`` for boards ``[B, N, N]``): the line features of
        ``board`` from ``player``'s view (default: the player who just moved, inferred
        from the stone counts for a single board)."""
        board = np.asarray(board)
        n = self.env.size
        if board.shape[-2:] != (n, n):
            raise ValueError(f"boards must be [..., {n}, {n}], got shape {board.shape}")
        if player is None:
            if board.ndim != 2:
                raise ValueError("pass player for a batch of boards")
            blacks, whites = int((board == 1).sum()), int((board == 2).sum())
            player = 0 if blacks > whites else 1  # the player who just moved
        flat = board.reshape(*board.shape[:-2], n * n).astype(np.int8)
        padded = np.concatenate([flat, np.zeros(flat.shape[:-1] + (1,), np.int8)], axis=-1)
        own, opp = _window_counts(self.lines, padded, int(player))
        return _features_from_counts(own, opp, self.env.k)

    def value(self, board, player: int | None = None) -> float:
        """``w . x(board)`` from ``player``'s view (default: the player who just moved)."""
        return float(self.weights @ self.features(board, player))

    def action_values(self, state_or_board, player: int | None = None) -> np.ndarray:
        """``[N*N]`` float64: the value, for ``player`` (default: the player to move), of
        each move: +1 a winning move, 0 a move that fills the board without a win, else
        ``w . x`` of the next state from the mover's view; -inf on occupied cells."""
        board, player = _board_and_player(state_or_board, player, self.env,
                                          type(self).__name__)
        return self._action_values(_padded(board), player)

    def _action_values(self, padded: np.ndarray, player: int) -> np.ndarray:
        lines, k, w = self.lines, self.env.k, self.weights
        own, opp = _window_counts(lines, padded, player)
        x = _features_from_counts(own, opp, k)
        delta = np.where(opp == 0, 1.0, np.where(own == 0, opp, 0.0)) / k
        gain = np.append(w * delta, 0.0)[lines.cell_windows].sum(-1)  # [nn]
        values = float(w @ x) + gain
        empty = padded[:-1] == 0
        if empty.sum() == 1:
            values[empty] = 0.0
        values[_winning_cells(lines, padded, player, own)] = 1.0
        return np.where(empty, values, -np.inf)

    # ------------------------------------------------------------------ training
    def train(self, episodes: int, seed: int = 0) -> dict:
        """Self-play ``episodes`` games, updating after each; returns statistics:
        ``episodes``, ``black_wins``, ``white_wins``, ``draws``, ``mean_length``,
        ``mean_abs_error`` (of the last game's TD errors, averaged over games),
        ``epsilon`` (after the last game), ``seconds``."""
        _check_positive_int("LinearTDLearner.train", "episodes", episodes)
        rng = np.random.default_rng(seed)
        nn, k, lines = self.env.num_actions, self.env.k, self.lines
        stats = dict(episodes=int(episodes), black_wins=0, white_wins=0, draws=0)
        plies, abs_error = 0, 0.0
        start = time.perf_counter()
        for _ in range(episodes):
            padded = _padded(np.zeros(nn, np.int8))
            player, xs = 0, []
            while True:
                values = self._action_values(padded, player)
                a = _epsilon_greedy(values, padded, self.epsilon, rng)
                own, _ = _window_counts(lines, padded, player)
                won = bool(_winning_cells(lines, padded, player, own)[a])
                padded[a] = player + 1
                own, opp = _window_counts(lines, padded, player)
                xs.append(_features_from_counts(own, opp, k))
                if won or len(xs) == nn:
                    break
                player = 1 - player
            plies += len(xs)
            _tally(stats, won, player)
            abs_error += self._update(xs, 1.0 if won else 0.0)
            self.epsilon = max(self.epsilon_min, self.epsilon * self.epsilon_decay)
        stats["mean_length"] = plies / episodes
        stats["mean_abs_error"] = abs_error / episodes
        stats["epsilon"] = self.epsilon
        stats["seconds"] = time.perf_counter() - start
        return stats

    def _update(self, xs: list[np.ndarray], reward: float) -> float:
        """LMS updates over one game's afterstates (forwards); returns the mean |error|."""
        w = self.weights.astype(np.float64)
        last = len(xs) - 1
        total = 0.0
        for t, x in enumerate(xs):
            if t == last:
                target = reward
            elif t + 1 == last:  # the opponent's next afterstate is final: exact value
                target = -self.gamma * reward
            else:
                target = -self.gamma * float(w @ xs[t + 1])
            error = target - float(w @ x)
            w += self.alpha * error * x
            total += abs(error)
        self.weights = w.astype(np.float32)
        return total / len(xs)

    # ------------------------------------------------------------------ playing
    def agent(self, name: str = "td-linear") -> JaxAgent:
        """A greedy player on a copy of the current weights: a jittable `JaxAgent` (the
        arena batches it), equal to picking a maximum of `action_values` at random."""
        return JaxAgent(name, _policy_for(self.lines), jnp.asarray(self.weights), env=self.env)

    # ------------------------------------------------------------------ files
    def save(self, path: str | os.PathLike) -> None:
        """Write the weights and the game settings to ``path`` (``.npz``, no pickle)."""
        save_npz(path, weights=self.weights, size=np.int32(self.env.size),
                 k=np.int32(self.env.k), rule=np.str_(self.env.rule),
                 features=np.str_(_FEATURES_VERSION))

    def load(self, path: str | os.PathLike) -> "LinearTDLearner":
        """Read weights saved by `save`; refuses a file for another game or layout."""
        stored = _read(path)
        check_stored_game(path, stored, self.env, "weights are")
        self.weights = self._checked(stored["weights"])
        return self

    @classmethod
    def from_file(cls, path: str | os.PathLike, **kwargs) -> "LinearTDLearner":
        """A learner for the game stored in ``path``, with its weights."""
        stored = _read(path)
        env = Gomoku(stored["size"], stored["k"], stored["rule"])
        return cls(env, **kwargs).load(path)


def _read(path) -> dict:
    data = load_npz(path, ("weights", "size", "k", "rule", "features"), "LinearTDLearner",
                    "LinearTDLearner weights")
    stored = dict(weights=data["weights"], size=int(data["size"]), k=int(data["k"]),
                  rule=str(data["rule"]), features=str(data["features"]))
    if stored["features"] != _FEATURES_VERSION:
        raise ValueError(
            f"{path}: features {stored['features']!r}, this code computes {_FEATURES_VERSION!r}")
    return stored
