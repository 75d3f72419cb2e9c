"""Alpha-beta searches in plain Python: an exact solver, heuristic negamax, GomokuBot.

Three `PythonAgent` players, all built on one make / unmake search board
(`_SearchBoard`) that never calls JAX inside the search:

* `MinimaxAgent` (seed 004 section 3.1): the perfect player for small games
  (tic-tac-toe 3x3 k=3; 4x4 k=3 solves in seconds). Full negamax with alpha-beta and
  a transposition table keyed by the board bytes (canonical under the 8 symmetries of
  the square by default). Scores are ``+-(BIG - stones on the board when the game
  ends)`` from the mover's view, 0 for a draw, so the agent prefers quicker wins and
  slower losses, and one table entry is valid whatever ply the position is met at.
* `NegamaxAgent` (seed 004 section 4.3): depth-limited negamax with alpha-beta and the
  pattern evaluation of `gomoku_jax.tactics.pattern_score`. Candidate moves are the
  empty cells within ``window`` cells (Chebyshev distance) of any stone (the "search
  window"; the centre on an empty board), ordered by `gomoku_jax.tactics.move_scores`'
  attack-plus-defence value and then by the number of adjacent stones (seed 004's
  neighbour ordering).
* `GomokuBotAgent` (seed 001 section IV-E): the same evaluation (``f(own) - f(opp)``),
  only the ``top_n`` candidate moves by per-cell pattern value searched at each node,
  a Zobrist-hash transposition table, and the "killer" module (take an immediate win;
  else block the opponent's immediate win).

Every search node also applies the two forced-move rules: a player who can win at
once does (the node is scored as that win without searching), and a player facing an
immediate win of the opponent only considers the blocking cells.

Speed: the board is a flat Python list; each of the ``2N + 2(2N-1)`` board lines
carries a base-3 code updated on make / unmake, and everything the search needs about
a line (its pattern value ``f(black) - f(white)``, each empty cell's placement value,
which cells win for whom) is computed once per distinct line content and memoised. So
a move costs four dictionary look-ups, the evaluation is kept incrementally, and a
node's move ordering costs four look-ups per candidate. The values agree exactly with
`tactics.pattern_score` and `tactics.move_scores` (same definitions, same
`tactics.DEFAULT_PATTERN_WEIGHTS`); the tests check this on random boards.

Time limits: `NegamaxAgent` and `GomokuBotAgent` honour the ``deadline`` of
``act(state, key, deadline)`` (a ``time.perf_counter()`` time, or the agent's ``clock``)
by iterative deepening: depths 1, 2, ... up to ``depth``, each iteration searching the
previous one's best move first; the clock is read every `_CHECK_EVERY` nodes and an
iteration still running near the deadline (a margin of 5% of the time left, 3 ms to
0.2 s) is abandoned, its results discarded. The answer is the best move of the last
completed iteration (the best-ordered candidate if none completed); a forced win or
block needs no search. Without a deadline the agents search straight to ``depth``, as
they always did; with one far enough away they return the same move.

Agents are deterministic given the ``rng`` passed to ``select``: it only breaks ties
between equally scored root moves. `by_name` builds an agent from a short name
(``"minimax"``, ``"alphabeta-3"``, ``"gomokubot-4"``).
"""

from __future__ import annotations

import re
import time
from typing import Callable, Mapping

import numpy as np

from gomoku_jax import tactics
from gomoku_jax.agents import PythonAgent
from gomoku_jax.game import DIRECTIONS, Gomoku, State

__all__ = [
    "BIG",
    "GomokuBotAgent",
    "MinimaxAgent",
    "NegamaxAgent",
    "by_name",
]

# A won game scores BIG - (stones on the board at its end): above any pattern sum.
BIG = 1_000_000_000
_INF = float("inf")
_BOT_DEPTH = 6  # GomokuBotAgent's default search depth
_WEIGHT_KEYS = ("five",) + tactics.SHAPES
_EXACT, _LOWER, _UPPER = 0, 1, 2
# Time-limited search: read the clock every _CHECK_EVERY nodes; stop this much before
# the deadline: _MARGIN_FRACTION of the time left, clipped to [_MARGIN_MIN, _MARGIN_MAX].
_CHECK_EVERY = 64
_MARGIN_FRACTION, _MARGIN_MIN, _MARGIN_MAX = 0.05, 0.003, 0.2


class _Timeout(Exception):
    """Raised inside the search when the time for this move is up."""


# ------------------------------------------------------------------- line patterns
def _merge_weights(weights: Mapping[str, float] | None) -> dict[str, float]:
    weights = {} if weights is None else dict(weights)
    unknown = set(weights) - set(_WEIGHT_KEYS)
    if unknown:
        raise ValueError(
            f"unknown pattern weights {sorted(unknown)}; known: {', '.join(_WEIGHT_KEYS)}"
        )
    return {key: float(v) for key, v in {**tactics.DEFAULT_PATTERN_WEIGHTS, **weights}.items()}


class _LinePatterns:
    """Memoised facts about one board line, by its content.

    ``info(length, code)`` (``code`` = sum of ``stone * 3**pos``) returns a tuple
    ``(value, score, win_black, win_white, n_win_black, n_win_white)``:

    * ``value``: ``f(black) - f(white)`` of the runs in this line (seed 001's pattern
      evaluation, exactly `tactics.pattern_score`'s per-direction terms);
    * ``score[pos]``: on an empty cell, the value of the run a black stone there makes
      plus that of a white stone (`tactics.move_scores`' attack + defence for this
      direction, which does not depend on who moves); 0 on stones;
    * ``win_black[pos]`` / ``win_white[pos]``: whether that stone there wins;
    * their counts.
    """

    def __init__(self, k: int, rule: str, weights: Mapping[str, float] | None = None):
        self.k, self.standard = k, rule == "standard"
        self.w = _merge_weights(weights)
        self.memo: dict[int, tuple] = {}

    def _wins(self, run: int) -> bool:
        return run == self.k if self.standard else run >= self.k

    def info(self, length: int, code: int) -> tuple:
        key = code * 32 + length
        got = self.memo.get(key)
        if got is None:
            got = self.memo[key] = self._compute(length, code)
        return got

    def _compute(self, length: int, code: int) -> tuple:
        cells = []
        for _ in range(length):
            code, digit = divmod(code, 3)
            cells.append(digit)
        k, w = self.k, self.w
        f = [0.0, 0.0, 0.0]  # by stone: 1 black, 2 white
        i = 0
        while i < length:
            s = cells[i]
            if s == 0:
                i += 1
                continue
            j = i
            while j < length and cells[j] == s:
                j += 1
            n = j - i
            if self._wins(n):
                f[s] += w["five"]
            else:
                before = cells[i - 1] if i > 0 else -1  # -1: off the board
                after = cells[j] if j < length else -1
                open_before, open_after = before == 0, after == 0
                if n == k - 3:
                    if open_before and open_after:
                        f[s] += w["open_two"]
                elif n in (k - 2, k - 1):
                    name = "three" if n == k - 2 else "four"
                    if open_before and open_after:
                        f[s] += w[f"open_{name}"]
                    elif open_before != open_after:
                        f[s] += w[f"half_{name}"]
                    if before == 3 - s or after == 3 - s:
                        f[3 - s] += w[f"blocked_{name}"]
            i = j
        score = [0.0] * length
        wins = ([False] * length, [False] * length)
        for pos in range(length):
            if cells[pos]:
                continue
            for s in (1, 2):
                run, ends = 1, 0
                for step in (1, -1):
                    side, t = 0, pos + step
                    while 0 <= t < length and cells[t] == s and side < k:
                        side, t = side + 1, t + step
                    if side < k - 1 and 0 <= t < length and cells[t] == 0:
                        ends += 1
                    run += side
                v = 0.0
                if self._wins(run):
                    v = w["five"]
                    wins[s - 1][pos] = True
                elif run == k - 3:
                    v = w["open_two"] if ends == 2 else 0.0
                elif run in (k - 2, k - 1):
                    name = "three" if run == k - 2 else "four"
                    v = w[f"open_{name}"] if ends == 2 else w[f"half_{name}"] if ends == 1 else 0.0
                score[pos] += v
        return (f[1] - f[2], score, wins[0], wins[1], sum(wins[0]), sum(wins[1]))


# -------------------------------------------------------------------- geometry
class _Geometry:
    """Static tables of an N x N board: its lines and each cell's place on them."""

    def __init__(self, size: int, window: int | None):
        n = self.size = size
        self.nn = n * n
        lines: list[list[int]] = []
        for dr, dc in DIRECTIONS:
            for r in range(n):
                for c in range(n):
                    pr, pc = r - dr, c - dc
                    if 0 <= pr < n and 0 <= pc < n:
                        continue  # not the first cell of its line
                    line, rr, cc = [], r, c
                    while 0 <= rr < n and 0 <= cc < n:
                        line.append(rr * n + cc)
                        rr, cc = rr + dr, cc + dc
                    lines.append(line)
        self.lines = lines
        self.line_len = [len(line) for line in lines]
        # cell -> ((line id, 3**pos), ...) over the four directions.
        cell_lines: list[list[tuple[int, int, int]]] = [[] for _ in range(self.nn)]
        for lid, line in enumerate(lines):
            for pos, cell in enumerate(line):
                cell_lines[cell].append((lid, pos, 3**pos))
        self.cell_lines = [tuple(x) for x in cell_lines]

        def ring(reach: int) -> list[tuple[int, ...]]:
            out = []
            for cell in range(self.nn):
                r, c = divmod(cell, n)
                out.append(tuple(
                    rr * n + cc
                    for rr in range(max(0, r - reach), min(n, r + reach + 1))
                    for cc in range(max(0, c - reach), min(n, c + reach + 1))
                    if (rr, cc) != (r, c)
                ))
            return out

        self.adjacent = ring(1)
        self.window = window
        self.nearby = ring(window) if window is not None else None
        dist = tactics.centrality(n).reshape(-1)
        self.central = [int(c) for c in np.flatnonzero(dist == dist.min())]
        # Zobrist keys: fixed seed, so hashes (and hence searches) are reproducible.
        zr = np.random.default_rng(20240105)
        self.zobrist = [
            [0] * self.nn,
            [int(x) for x in zr.integers(1, 2**63, self.nn, dtype=np.int64)],
            [int(x) for x in zr.integers(1, 2**63, self.nn, dtype=np.int64)],
        ]
        self.zobrist_white_to_move = int(zr.integers(1, 2**63, dtype=np.int64))
        # The 8 symmetries of the square as cell permutations (canonical keys).
        idx = np.arange(self.nn).reshape(n, n)
        perms = []
        for t in range(8):
            a = np.rot90(idx, t % 4)
            perms.append(tuple(int(x) for x in (a.T if t >= 4 else a).reshape(-1)))
        self.symmetries = perms


# ---------------------------------------------------------------- search board
class _SearchBoard:
    """A mutable board with make / unmake, the incremental pattern value, the count
    of winning cells of each player, a Zobrist hash and the search window."""

    def __init__(self, geom: _Geometry, patterns: _LinePatterns, board: np.ndarray):
        self.g, self.p = geom, patterns
        flat = np.asarray(board).reshape(-1)
        self.cells = [int(x) for x in flat]
        self.codes = [0] * len(geom.lines)
        for lid, line in enumerate(geom.lines):
            code = 0
            for pos, cell in enumerate(line):
                code += self.cells[cell] * 3**pos
            self.codes[lid] = code
        self.infos = [patterns.info(geom.line_len[lid], code) for lid, code in enumerate(self.codes)]
        self.value = sum(info[0] for info in self.infos)
        self.wins = [0, sum(i[4] for i in self.infos), sum(i[5] for i in self.infos)]
        self.stones = sum(1 for x in self.cells if x)
        self.hash = 0
        for cell, s in enumerate(self.cells):
            self.hash ^= geom.zobrist[s][cell]
        self.near = [0] * geom.nn if geom.nearby is not None else None
        self.adj = [0] * geom.nn
        for cell, s in enumerate(self.cells):
            if s:
                self._touch(cell, 1)

    def _touch(self, cell: int, delta: int) -> None:
        adj = self.adj
        for nb in self.g.adjacent[cell]:
            adj[nb] += delta
        if self.near is not None:
            near = self.near
            for nb in self.g.nearby[cell]:
                near[nb] += delta

    def _update(self, cell: int, delta_code: int) -> None:
        codes, infos, info_of, lens = self.codes, self.infos, self.p.info, self.g.line_len
        dv = 0.0
        wins = self.wins
        for lid, _, p3 in self.g.cell_lines[cell]:
            code = codes[lid] + delta_code * p3
            codes[lid] = code
            new = info_of(lens[lid], code)
            old = infos[lid]
            infos[lid] = new
            dv += new[0] - old[0]
            wins[1] += new[4] - old[4]
            wins[2] += new[5] - old[5]
        self.value += dv

    def play(self, cell: int, stone: int) -> None:
        self.cells[cell] = stone
        self._update(cell, stone)
        self.hash ^= self.g.zobrist[stone][cell]
        self.stones += 1
        self._touch(cell, 1)

    def undo(self, cell: int) -> None:
        stone = self.cells[cell]
        self.cells[cell] = 0
        self._update(cell, -stone)
        self.hash ^= self.g.zobrist[stone][cell]
        self.stones -= 1
        self._touch(cell, -1)

    def move_info(self, cell: int) -> tuple[float, bool, bool]:
        """(attack + defence score, black wins here, white wins here) of an empty cell."""
        infos = self.infos
        score, wb, ww = 0.0, False, False
        for lid, pos, _ in self.g.cell_lines[cell]:
            info = infos[lid]
            score += info[1][pos]
            wb = wb or info[2][pos]
            ww = ww or info[3][pos]
        return score, wb, ww

    def winning_cells(self, stone: int) -> list[int]:
        """Empty cells where ``stone`` wins at once (ascending)."""
        if not self.wins[stone]:
            return []
        out = set()
        col = 1 + stone
        for lid, info in enumerate(self.infos):
            if info[3 + stone]:
                line = self.g.lines[lid]
                out.update(line[pos] for pos, w in enumerate(info[col]) if w)
        return sorted(out)

    def empties(self) -> list[int]:
        cells = self.cells
        return [c for c in range(self.g.nn) if not cells[c]]

    def candidates(self) -> list[int]:
        """Empty cells in the search window (all empty cells without a window); the
        most central cells on an empty board."""
        cells, near = self.cells, self.near
        if near is None:
            return self.empties()
        if self.stones == 0:
            return list(self.g.central)
        return [c for c in range(self.g.nn) if near[c] and not cells[c]]

    def canonical_key(self) -> bytes:
        cells = self.cells
        return min(bytes([cells[i] for i in perm]) for perm in self.g.symmetries)


def _state_board(state: State) -> tuple[np.ndarray, int, bool]:
    board = np.asarray(state.board)
    if board.ndim != 2:
        raise ValueError(f"agents take one game, got a board of shape {board.shape}")
    over = bool(state.terminated) or bool(state.truncated)
    return board, int(state.current_player), over


def _first_empty(board: np.ndarray) -> int:
    empty = np.flatnonzero(np.asarray(board).reshape(-1) == 0)
    return int(empty[0]) if len(empty) else 0


def _pick(ties: list[int], rng: np.random.Generator) -> int:
    return ties[0] if len(ties) == 1 else ties[int(rng.integers(len(ties)))]


# ---------------------------------------------------------------- exact solver
class MinimaxAgent(PythonAgent):
    """The perfect player for small boards (seed 004 section 3.1).

    Full-depth negamax with alpha-beta and a transposition table keyed by the board
    bytes (the canonical form under the square's 8 symmetries when ``canonical``).
    Scores, from the view of the player to move: ``BIG - m`` for a forced win whose
    final position has ``m`` stones, ``-(BIG - m)`` for a forced loss, 0 for a draw;
    so among winning moves the quickest win is chosen, among losing moves the slowest
    loss. Ties between equally scored moves are broken with ``rng``. The table holds
    true bounds of game values only, so it is kept across moves (and games).

    Practical for 3x3 (k=3) and 4x4 (k=3 or 4); larger boards take too long.
    """

    def __init__(self, env: Gomoku, canonical: bool = True, name: str | None = None):
        self.env = env
        self.canonical = bool(canonical)
        self.name = name or "minimax"
        self._geom = _Geometry(env.size, None)
        self._patterns = _LinePatterns(env.k, env.rule)
        self.table: dict[bytes, tuple[int, int]] = {}
        self.nodes = 0

    # -- search
    def _key(self, b: _SearchBoard, stone: int) -> bytes:
        base = b.canonical_key() if self.canonical else bytes(b.cells)
        return base + bytes([stone])

    def _solve(self, b: _SearchBoard, stone: int, alpha: float, beta: float) -> int:
        """Value of the position for ``stone`` (1 / 2) to move."""
        self.nodes += 1
        if b.wins[stone]:
            return BIG - (b.stones + 1)
        if b.stones == self._geom.nn:
            return 0
        # No result can beat a win on the next move of this player.
        beta = min(beta, BIG - (b.stones + 1))
        if alpha >= beta:
            return beta
        key = self._key(b, stone)
        entry = self.table.get(key)
        if entry is not None:
            v, flag = entry
            if flag == _EXACT or (flag == _LOWER and v >= beta) or (flag == _UPPER and v <= alpha):
                return v
        other = 3 - stone
        moves = b.winning_cells(other) if b.wins[other] else self._ordered(b)
        alpha0, best = alpha, -_INF
        for cell in moves:
            b.play(cell, stone)
            v = -self._solve(b, other, -beta, -alpha)
            b.undo(cell)
            if v > best:
                best = v
                if v > alpha:
                    alpha = v
                    if alpha >= beta:
                        break
        best = int(best)
        flag = _UPPER if best <= alpha0 else _LOWER if best >= beta else _EXACT
        self.table[key] = (best, flag)
        return best

    @staticmethod
    def _ordered(b: _SearchBoard) -> list[int]:
        moves = b.empties()
        score = {c: b.move_info(c)[0] * 16 + b.adj[c] for c in moves}
        return sorted(moves, key=score.__getitem__, reverse=True)

    def _board(self, board: np.ndarray) -> _SearchBoard:
        return _SearchBoard(self._geom, self._patterns, board)

    def move_values(self, state: State) -> dict[int, int]:
        """Exact value of every legal move for the player to move, from its view."""
        board, me, over = _state_board(state)
        if over:
            return {}
        b, stone = self._board(board), me + 1
        out = {}
        for cell in b.empties():
            if b.move_info(cell)[stone]:
                out[cell] = BIG - (b.stones + 1)
                continue
            b.play(cell, stone)
            out[cell] = -self._solve(b, 3 - stone, -_INF, _INF)
            b.undo(cell)
        return out

    def value(self, state: State) -> int:
        """Exact game value for the player to move (0: draw)."""
        board, me, over = _state_board(state)
        if over:
            raise ValueError("the game is over")
        return self._solve(self._board(board), me + 1, -_INF, _INF)

    def select(self, state: State, rng: np.random.Generator) -> int:
        board, me, over = _state_board(state)
        if over:
            return _first_empty(board)
        b, stone = self._board(board), me + 1
        wins = b.winning_cells(stone)
        if wins:
            return _pick(wins, rng)
        other = 3 - stone
        moves = b.winning_cells(other) if b.wins[other] else self._ordered(b)
        best, ties = -_INF, []
        for cell in moves:
            b.play(cell, stone)
            # Window just below the best so far: equal moves come back exact, worse
            # ones fail low (values are integers).
            v = -self._solve(b, other, -_INF, -(best - 1))
            b.undo(cell)
            if v > best:
                best, ties = v, [cell]
            elif v == best:
                ties.append(cell)
        return _pick(sorted(ties), rng)


# ------------------------------------------------------------ heuristic search
class _HeuristicSearch(PythonAgent):
    """Depth-limited negamax with alpha-beta over the pattern evaluation.

    Under a deadline (``act(..., deadline)``) the search deepens iteratively and stops
    in time (see the module docstring); ``clock`` is the time source the deadline is
    read against (``time.perf_counter`` by default; tests inject a fake one), and
    ``completed_depth`` tells how deep the last `select` got.
    """

    def __init__(
        self,
        env: Gomoku,
        depth: int,
        window: int = 2,
        top_n: int | None = None,
        use_table: bool = False,
        weights: Mapping[str, float] | None = None,
        name: str = "",
        clock: Callable[[], float] | None = None,
    ):
        for label, value, low in (("depth", depth, 1), ("window", window, 1)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"{type(self).__name__}: {label} must be an integer >= {low}, got {value!r}")
        if top_n is not None and (
            isinstance(top_n, bool) or not isinstance(top_n, (int, np.integer)) or top_n < 1
        ):
            raise ValueError(f"{type(self).__name__}: top_n must be a positive integer or None, got {top_n!r}")
        self.env = env
        self.depth, self.window = int(depth), int(window)
        self.top_n = None if top_n is None else int(top_n)
        self.use_table = bool(use_table)
        self.name = name
        self._geom = _Geometry(env.size, self.window)
        self._patterns = _LinePatterns(env.k, env.rule, weights)
        self.nodes = 0
        self._table: dict[int, tuple[int, float, int, int]] = {}
        # The time source the deadline refers to (tests inject a fake one).
        self.clock = time.perf_counter if clock is None else clock
        self._stop_at: float | None = None  # abandon the search at this clock time
        self._countdown = _CHECK_EVERY  # nodes until the next clock reading
        self.completed_depth = 0  # depth of the last completed iteration of `select`

    # -- static evaluation
    def evaluate(self, state: State) -> float:
        """``f(player to move) - f(opponent)``: `tactics.pattern_score` in Python."""
        board, me, _ = _state_board(state)
        v = _SearchBoard(self._geom, self._patterns, board).value
        return v if me == 0 else -v

    # -- search
    def _ordered(self, b: _SearchBoard, stone: int, tt_move: int) -> list[int]:
        """Candidates for ``stone`` to move, best first, cut to ``top_n``; only the
        blocking cells when the opponent threatens to win at once."""
        other = 3 - stone
        if b.wins[other]:
            moves = b.winning_cells(other)
        else:
            moves = b.candidates()
        if len(moves) > 1:
            adj = b.adj
            score = {c: b.move_info(c)[0] * 16 + adj[c] for c in moves}
            moves.sort(key=score.__getitem__, reverse=True)
        if self.top_n is not None:
            moves = moves[: self.top_n]
        if tt_move >= 0 and tt_move in moves:
            moves.remove(tt_move)
            moves.insert(0, tt_move)
        return moves

    def _negamax(self, b: _SearchBoard, stone: int, depth: int, alpha: float, beta: float) -> float:
        self.nodes += 1
        if self._stop_at is not None:
            self._countdown -= 1
            if self._countdown <= 0:
                self._countdown = _CHECK_EVERY
                if self.clock() >= self._stop_at:
                    raise _Timeout
        if b.wins[stone]:
            return BIG - (b.stones + 1)
        if b.stones == self._geom.nn:
            return 0.0
        if depth == 0:
            return b.value if stone == 1 else -b.value
        key, tt_move = 0, -1
        if self.use_table:
            key = b.hash ^ (self._geom.zobrist_white_to_move if stone == 2 else 0)
            entry = self._table.get(key)
            if entry is not None:
                e_depth, v, flag, tt_move = entry
                if e_depth >= depth and (
                    flag == _EXACT or (flag == _LOWER and v >= beta) or (flag == _UPPER and v <= alpha)
                ):
                    return v
        other = 3 - stone
        alpha0, best, best_move = alpha, -_INF, -1
        for cell in self._ordered(b, stone, tt_move):
            b.play(cell, stone)
            v = -self._negamax(b, other, depth - 1, -beta, -alpha)
            b.undo(cell)
            if v > best:
                best, best_move = v, cell
                if v > alpha:
                    alpha = v
                    if alpha >= beta:
                        break
        if self.use_table:
            flag = _UPPER if best <= alpha0 else _LOWER if best >= beta else _EXACT
            self._table[key] = (depth, best, flag, best_move)
        return best

    def root_values(self, state: State) -> dict[int, float]:
        """Negamax value of each root candidate (exact, full window): for analysis."""
        board, me, over = _state_board(state)
        if over:
            return {}
        b, stone = _SearchBoard(self._geom, self._patterns, board), me + 1
        self._table = {}
        out = {}
        for cell in self._ordered(b, stone, -1):
            if b.move_info(cell)[stone]:
                out[cell] = float(BIG - (b.stones + 1))
                continue
            b.play(cell, stone)
            out[cell] = -self._negamax(b, 3 - stone, self.depth - 1, -_INF, _INF)
            b.undo(cell)
        return out

    def select(self, state: State, rng: np.random.Generator) -> int:
        board, me, over = _state_board(state)
        if over:
            return _first_empty(board)
        b, stone = _SearchBoard(self._geom, self._patterns, board), me + 1
        if not b.empties():
            return 0
        # Killer module: an immediate win is always taken.
        wins = b.winning_cells(stone)
        if wins:
            return _pick(wins, rng)
        self._table = {}  # fresh per move: the answer depends on the state and rng only
        moves = self._ordered(b, stone, -1)  # blocks only, if the opponent threatens
        if len(moves) == 1:
            self.completed_depth = 0
            return moves[0]
        if self.deadline is None:
            self._stop_at = None
            _, ties = self._search_root(b, stone, moves, self.depth)
            self.completed_depth = self.depth
            return _pick(ties, rng)
        return self._select_by_deadline(b, stone, moves, rng, float(self.deadline))

    def _search_root(
        self, b: _SearchBoard, stone: int, moves: list[int], depth: int
    ) -> tuple[float, list[int]]:
        """(best value, the moves scoring it in search order) of a ``depth``-ply search."""
        other = 3 - stone
        best, ties = -_INF, []
        for cell in moves:
            # Window just below the best so far: equal moves come back exact, worse
            # ones fail low. Values within a relative 1e-9 count as equal.
            tol = 1e-9 * max(1.0, abs(best)) if ties else 0.0
            b.play(cell, stone)
            try:
                v = -self._negamax(b, other, depth - 1, -_INF, -(best - tol))
            finally:
                b.undo(cell)
            if not ties or v > best + tol:
                best, ties = v, [cell]
            elif v >= best - tol:
                ties.append(cell)
        return best, ties

    def _select_by_deadline(
        self, b: _SearchBoard, stone: int, moves: list[int], rng: np.random.Generator, deadline: float
    ) -> int:
        """Iterative deepening to ``self.depth`` plies, stopped near ``deadline``.

        Each iteration searches the previous best move first; the transposition table
        is kept between iterations (a position is always met at the same ply, so an
        older entry is shallower and only orders moves). Ties of the last completed
        iteration are put back in ``moves``' order before ``rng`` picks one, so a
        completed full-depth iteration answers exactly as the search without deadline.
        """
        clock = self.clock
        now = clock()
        margin = min(_MARGIN_MAX, max(_MARGIN_MIN, _MARGIN_FRACTION * (deadline - now)))
        stop_at = deadline - margin
        rank = {c: i for i, c in enumerate(moves)}
        order, ties = moves, None
        self.completed_depth = 0
        self._countdown = _CHECK_EVERY
        self._stop_at = stop_at
        try:
            last_took = 0.0
            for depth in range(1, self.depth + 1):
                start = clock() if depth > 1 else now
                # The next iteration takes at least as long as the last one did: do not
                # start one that cannot finish. Depth 1 is always tried.
                if depth > 1 and start + last_took >= stop_at:
                    break
                try:
                    _, found = self._search_root(b, stone, order, depth)
                except _Timeout:
                    break
                ties = sorted(found, key=rank.__getitem__)
                self.completed_depth = depth
                order = [ties[0]] + [c for c in moves if c != ties[0]]
                if depth < self.depth:
                    last_took = clock() - start
        finally:
            self._stop_at = None
        if ties is None:
            return moves[0]  # not even depth 1 finished: the best-ordered candidate
        return _pick(ties, rng)


class NegamaxAgent(_HeuristicSearch):
    """Heuristic alpha-beta (seed 004 section 4.3): negamax to ``depth`` plies with
    the pattern evaluation ``f(mover) - f(opponent)`` at the leaves.

    Candidates are the empty cells within ``window`` cells (Chebyshev) of a stone,
    searched all, ordered by attack + defence pattern value then adjacent stones.
    Immediate wins are always taken and an opponent's immediate win is blocked.
    ``use_table`` adds a Zobrist transposition table (off by default, as in the seed).
    """

    def __init__(
        self,
        env: Gomoku,
        depth: int = 2,
        window: int = 2,
        weights: Mapping[str, float] | None = None,
        use_table: bool = False,
        name: str | None = None,
        clock: Callable[[], float] | None = None,
    ):
        super().__init__(
            env, depth, window, None, use_table, weights, name or f"alphabeta-{depth}", clock
        )


class GomokuBotAgent(_HeuristicSearch):
    """Seed 001's Rule-Based GomokuBot: alpha-beta to ``depth`` plies over the pattern
    evaluation ``f(own) - f(opp)`` (`tactics.DEFAULT_PATTERN_WEIGHTS`), searching only
    the ``top_n`` candidate cells by attack + defence pattern value at each node, with
    a Zobrist transposition table ("Z-cache") and the killer module (take an immediate
    win; else block the opponent's immediate win).

    Defaults (depth 6, top 10): on 15x15 about 0.06 s a move on average and under
    0.35 s at worst in the games we timed (one CPU core, plain Python).
    """

    def __init__(
        self,
        env: Gomoku,
        depth: int = _BOT_DEPTH,
        top_n: int = 10,
        window: int = 2,
        weights: Mapping[str, float] | None = None,
        name: str | None = None,
        clock: Callable[[], float] | None = None,
    ):
        super().__init__(
            env, depth, window, top_n, True, weights, name or f"gomokubot-{depth}", clock
        )


# ----------------------------------------------------------------------- names
_NAME = re.compile(r"^(minimax|alphabeta|negamax|gomokubot)(?:-(\d+))?$")


def by_name(name: str, env: Gomoku) -> PythonAgent:
    """An agent from a short name: ``"minimax"`` (exact solver), ``"alphabeta"`` /
    ``"alphabeta-D"`` / ``"negamax-D"`` (`NegamaxAgent` of depth D, default 2),
    ``"gomokubot"`` / ``"gomokubot-D"`` (`GomokuBotAgent` of depth D, default 6)."""
    m = _NAME.match(name.strip().lower()) if isinstance(name, str) else None
    if m is None:
        raise ValueError(
            f"unknown search agent {name!r}: expected minimax, alphabeta[-D], "
            "negamax[-D] or gomokubot[-D]"
        )
    kind, depth = m.group(1), m.group(2)
    if kind == "minimax":
        if depth is not None:
            raise ValueError(f"{name!r}: minimax searches to the end and takes no depth")
        return MinimaxAgent(env)
    if depth is not None and int(depth) < 1:
        raise ValueError(f"{name!r}: the depth must be at least 1")
    if kind in ("alphabeta", "negamax"):
        d = 2 if depth is None else int(depth)
        return NegamaxAgent(env, d, name=f"{kind}-{d}")
    d = _BOT_DEPTH if depth is None else int(depth)
    return GomokuBotAgent(env, d, name=f"gomokubot-{d}")
