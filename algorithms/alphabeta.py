"""Alpha-beta searches in plain Python: an exact solver, heuristic negamax, GomokuBot.

Four `PythonAgent` players, all built on one make / unmake search board
(`_SearchBoard`) that never calls JAX inside the search:

* `MinimaxAgent` (seed 004 section 3.1): the perfect player for small games
  (tic-tac-toe 3x3 k=3; 4x4 k=3 solves in seconds). Full negamax with alpha-beta and
  a transposition table keyed by the board bytes (canonical under the 8 symmetries of
  the square by default). Scores are ``+-(BIG - stones on the board when the game
  ends)`` from the mover's view, 0 for a draw, so the agent prefers quicker wins and
  slower losses, and one table entry is valid whatever ply the position is met at.
* `NegamaxAgent` (after seed 004 section 4.3): depth-limited negamax with alpha-beta and
  the pattern evaluation of `gomoku_jax.tactics.pattern_score` (seed 001's weights).
  Candidate moves are the empty cells within ``window`` cells (Chebyshev distance) of
  any stone (the "search window"; the centre on an empty board), ordered by
  `gomoku_jax.tactics.move_scores`' attack-plus-defence value and then by the number of
  adjacent stones (seed 004's neighbour ordering).
* `Seed004AlphaBetaAgent` (seed 004 section 4.3 as its pseudo code writes it): its
  weights, its bounding-box "PlayRange", its neighbour ordering alone and no forced-move
  rules; the opponent of `experiments.seed004_tables`.
* `GomokuBotAgent` (seed 001 section IV-E): `NegamaxAgent`'s evaluation (``f(own) - f(opp)``),
  only the ``top_n`` candidate moves by per-cell pattern value searched at each node,
  a Zobrist-hash transposition table, and the "killer" module (take an immediate win;
  else block the opponent's immediate win); by default also a threat-space search at
  the root (`ThreatSettings`: own VCF / VCT, defence against the opponent's, quiet
  moves that prepare a double threat) and a bonus for broken shapes.

Every node of `NegamaxAgent`'s and `GomokuBotAgent`'s searches applies the two
forced-move rules: a player who can win at once does (the node is scored as that win
without searching), and a player facing an immediate win of the opponent only considers
the blocking cells.

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

import dataclasses
import math
import re
import time
from typing import Callable, Mapping

import numpy as np

from gomoku_jax import tactics
from gomoku_jax.config import check_int, plain_fields
from gomoku_jax.agents import PythonAgent, check_state, whole_number
from gomoku_jax.game import DIRECTIONS, Gomoku, State

__all__ = [
    "BIG",
    "GomokuBotAgent",
    "MinimaxAgent",
    "NegamaxAgent",
    "ThreatSettings",
    "UnknownSearchName",
    "by_name",
]

# A won game scores BIG - (stones on the board at its end): above any pattern sum.
BIG = 1_000_000_000
_INF = float("inf")
_BOT_DEPTH = 6  # GomokuBotAgent's default search depth
# GomokuBotAgent's extra evaluation from the gap-aware threat facts (per winning cell,
# open-four cell present, per four-making cell, per three-making cell).
_BOT_SHAPE_BONUS = (500.0, 1500.0, 150.0, 40.0)
# "open_one" (a lone stone with both ends open along a line, for k >= 5) is a weight of
# the searches here alone, 0 by default (`tactics.pattern_score` does not count it).
_WEIGHT_KEYS = ("five",) + tactics.SHAPES + ("open_one",)
_EXACT, _LOWER, _UPPER = 0, 1, 2
# Time-limited search: read the clock every _CHECK_EVERY nodes; stop this much before
# the deadline: _MARGIN_FRACTION of the time left, clipped to [_MARGIN_MIN, _MARGIN_MAX].
_CHECK_EVERY = 64
_MARGIN_FRACTION, _MARGIN_MIN, _MARGIN_MAX = 0.05, 0.003, 0.2


@dataclasses.dataclass(frozen=True)
class ThreatSettings:
    """Settings of the threat-space search run before the alpha-beta at the root.

    Depths count the attacker's moves. ``vcf_depth`` / ``vcf_nodes``: the search for a
    victory by continuous fours (0 turns it off); ``vct_depth`` / ``vct_nodes``: by
    continuous threats, fours and open threes (0 off). The defender answers a four at
    its winning cell and a three at any cell that stops it (or with a four of its own).

    ``defend``: when the opponent has a VCF, or a VCT of ``defend_vct_depth`` moves (0:
    VCFs only), only the root candidates after which it has none are searched (each
    checked with ``defend_nodes`` nodes per search; the candidates are the cells of
    the opponent's proof, the own fours and threes and the ``top_n`` best). An own four
    or three only delays: it counts when the threat is gone after each of its answers.

    ``probe_moves`` / ``probe_depth`` / ``probe_nodes``: else the first ``probe_moves``
    quiet candidates (making no four or three) are tried for a VCT of ``probe_depth``
    moves if the opponent passed; those that have one (double threats in the making)
    are the only root moves searched. Threats themselves are kept for the attack.

    ``max_nodes``: all threat-space searches of one move together visit at most about
    this many nodes (what is left is skipped), which bounds the time a move takes.
    """

    vcf_depth: int = 12
    vcf_nodes: int = 20_000
    vct_depth: int = 5
    vct_nodes: int = 6_000
    defend: bool = True
    defend_nodes: int = 3_000
    defend_vct_depth: int = 4
    max_nodes: int = 12_000
    probe_moves: int = 10
    probe_depth: int = 4
    probe_nodes: int = 1_500

    def __post_init__(self):
        plain_fields(self)
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "defend":
                if not isinstance(v, bool):
                    raise ValueError(f"ThreatSettings.defend must be a bool, got {v!r}")
            else:
                check_int("ThreatSettings", f.name, v, 0)


class _Timeout(Exception):
    """Raised inside the search when the time for this move is up."""


class _OutOfNodes(Exception):
    """Raised inside a threat-space search when its node budget is spent."""


# ------------------------------------------------------------------- line patterns
def _merge_weights(weights: Mapping[str, float] | None) -> dict[str, float]:
    weights = {} if weights is None else dict(weights)
    unknown = set(weights) - set(_WEIGHT_KEYS)
    if unknown:
        raise ValueError(
            f"unknown pattern weights {sorted(unknown)}; known: {', '.join(_WEIGHT_KEYS)}"
        )
    for key, v in weights.items():  # a NaN or infinite weight would make every sum one
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or (
                not math.isfinite(v)):
            raise ValueError(f"pattern weight {key!r} must be a finite number, got {v!r}")
    return {key: float(v) for key, v in {**tactics.DEFAULT_PATTERN_WEIGHTS, "open_one": 0.0,
                                            **weights}.items()}


class _LinePatterns:
    """Memoised facts about one board line, by its content.

    ``info(length, code)`` (``code`` = sum of ``stone * 3**pos``) returns a tuple
    ``(value, score, win_black, win_white, n_win_black, n_win_white, threats, active)``:

    * ``value``: ``f(black) - f(white)`` of the runs in this line (seed 001's pattern
      evaluation, exactly `tactics.pattern_score`'s per-direction terms);
    * ``score[pos]``: on an empty cell, the value of the run a black stone there makes
      plus that of a white stone (`tactics.move_scores`' attack + defence for this
      direction, which does not depend on who moves); 0 on stones;
    * ``win_black[pos]`` / ``win_white[pos]``: whether that stone there wins;
    * their counts;
    * with ``threat_facts`` (for the threat-space search), the line's `threats`, kept
      with the rest so that a board tracking each line's ``info`` has them without
      another lookup; None without;
    * ``active``: whether the line has a winning cell or (with ``threat_facts``) any
      threat cell.
    """

    def __init__(
        self, k: int, rule: str, weights: Mapping[str, float] | None = None,
        bonus: tuple[float, float, float, float] | None = None, threat_facts: bool = True,
    ):
        self.k, self.standard = k, rule == "standard"
        self.threat_facts = bool(threat_facts)
        self.w = _merge_weights(weights)
        # Optional extra value from the threat facts (gaps included), per colour: per
        # winning cell, for an open-four cell, per four-making cell, per three-making
        # cell (see `threats`). None: the plain pattern value of `tactics`.
        self.bonus = bonus
        self.memo: dict[int, tuple] = {}
        self.threat_memo: dict[int, tuple] = {}

    def _wins(self, run: int) -> bool:
        return run == self.k if self.standard else run >= self.k

    def info(self, length: int, code: int) -> tuple:
        key = code * 32 + length
        got = self.memo.get(key)
        if got is None:
            got = self.memo[key] = self._compute(length, code)
        return got

    # -- threat facts (for the threat-space search and the shape bonus), memoised apart
    def threats(self, length: int, code: int) -> tuple:
        """Per-colour threat cells of one line, by content, as positions on the line:
        ``(four_b, four_w, three_b, three_w, defend_b, defend_w, open4_b, open4_w)``.

        * ``four_s``: empty cells where a stone of ``s`` makes a new winning cell on
          this line (a "four");
        * ``open4_s``: empty cells where it makes two new winning cells (an open four,
          or a four-four on this line): unstoppable;
        * ``three_s`` (only on lines with no ``open4_s`` cell yet): empty cells where a
          stone of ``s`` makes an ``open4_s`` cell appear (an open or broken three);
        * ``defend_s`` (only on lines with an ``open4_s`` cell): the empty cells where
          an opponent's stone leaves no ``open4_s`` cell on the line.
        """
        key = code * 32 + length
        got = self.threat_memo.get(key)
        if got is None:
            got = self.threat_memo[key] = self._compute_threats(length, code)
        return got

    def _wins_at(self, cells: list, r: int, s: int) -> bool:
        """Whether a stone of ``s`` on the empty cell ``r`` makes a winning run."""
        n, k = len(cells), self.k
        run, t = 1, r + 1
        while t < n and cells[t] == s:
            run, t = run + 1, t + 1
        t = r - 1
        while t >= 0 and cells[t] == s:
            run, t = run + 1, t - 1
        return run == k if self.standard else run >= k

    def _new_wins(self, cells: list, p: int, s: int, limit: int = 2) -> int:
        """Winning cells of ``s`` within ``k - 1`` of ``p`` (``s`` stands on ``p``),
        counted up to ``limit``."""
        n, k, found = len(cells), self.k, 0
        for r in range(max(0, p - k + 1), min(n, p + k)):
            if cells[r] == 0 and self._wins_at(cells, r, s):
                found += 1
                if found >= limit:
                    break
        return found

    def _open4(self, cells: list, s: int, where) -> list[int]:
        out = []
        for q in where:
            if cells[q] == 0:
                cells[q] = s
                if self._new_wins(cells, q, s) >= 2:
                    out.append(q)
                cells[q] = 0
        return out

    def _compute_threats(self, length: int, code: int) -> tuple:
        cells = []
        for _ in range(length):
            code, digit = divmod(code, 3)
            cells.append(digit)
        k = self.k
        out = [(), (), (), (), (), (), (), ()]
        if length < k:
            return tuple(out)
        for s in (1, 2):
            if cells.count(s) < k - 3 or k < 4:
                continue
            empty = [i for i in range(length) if cells[i] == 0]
            near = [
                i for i in empty
                if sum(1 for t in range(max(0, i - k + 1), min(length, i + k)) if cells[t] == s) >= k - 3
            ]
            fours = []
            for p in near:
                cells[p] = s
                if self._new_wins(cells, p, s, 1):
                    fours.append(p)
                cells[p] = 0
            open4 = self._open4(cells, s, fours)
            threes: list[int] = []
            defend: list[int] = []
            if open4:
                lo, hi = min(open4) - k, max(open4) + k
                for d in empty:
                    if lo <= d <= hi:
                        cells[d] = 3 - s
                        if not self._open4(cells, s, open4):
                            defend.append(d)
                        cells[d] = 0
            else:
                for p in near:
                    cells[p] = s
                    if self._open4(cells, s, range(max(0, p - k + 1), min(length, p + k))):
                        threes.append(p)
                    cells[p] = 0
            i = s - 1
            out[i], out[2 + i], out[4 + i], out[6 + i] = (
                tuple(fours), tuple(threes), tuple(defend), tuple(open4))
        return tuple(out)

    def _compute(self, length: int, code: int) -> tuple:
        line_code = code
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
                elif n == k - 4:
                    if open_before and open_after:
                        f[s] += w["open_one"]
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
                elif run == k - 4:
                    v = w["open_one"] if ends == 2 else 0.0
                elif run in (k - 2, k - 1):
                    name = "three" if run == k - 2 else "four"
                    v = w[f"open_{name}"] if ends == 2 else w[f"half_{name}"] if ends == 1 else 0.0
                score[pos] += v
        value = f[1] - f[2]
        t = (self.threats(length, line_code) if self.threat_facts or self.bonus is not None
             else None)
        if self.bonus is not None:
            bw, b4, b3, b2 = self.bonus
            for s, sign in ((1, 1.0), (2, -1.0)):
                i = s - 1
                value += sign * (bw * sum(wins[i]) + (b4 if t[6 + i] else 0.0)
                                 + b3 * len(t[i]) + b2 * len(t[2 + i]))
        n_black, n_white = sum(wins[0]), sum(wins[1])
        # Whether the line has a winning cell or a threat fact: the board keeps the set
        # of such lines, so that the threat queries skip the quiet ones.
        active = bool(n_black or n_white or (self.threat_facts and any(t)))
        return (value, score, wins[0], wins[1], n_black, n_white,
                t if self.threat_facts else None, active)


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
        # cell -> ((line id, step of the line's memo key per unit of stone code), ...):
        # a board keeps each line's key ``code * 32 + length`` (`_LinePatterns.info`).
        self.cell_keys = [tuple((lid, 32 * p3) for lid, _, p3 in x) for x in cell_lines]

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
        # Each line's memo key, ``code * 32 + length`` (code: sum of stone * 3**pos).
        self.keys = [0] * len(geom.lines)
        for lid, line in enumerate(geom.lines):
            code = 0
            for pos, cell in enumerate(line):
                code += self.cells[cell] * 3**pos
            self.keys[lid] = code * 32 + geom.line_len[lid]
        self.infos = [patterns.info(geom.line_len[lid], key >> 5)
                      for lid, key in enumerate(self.keys)]
        self.active = {lid for lid, info in enumerate(self.infos) if info[7]}
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

    @property
    def codes(self) -> list[int]:
        """Each line's content code (sum of ``stone * 3**pos``)."""
        return [key >> 5 for key in self.keys]

    def _touch(self, cell: int, delta: int) -> None:
        adj = self.adj
        for nb in self.g.adjacent[cell]:
            adj[nb] += delta
        if self.near is not None:
            near = self.near
            for nb in self.g.nearby[cell]:
                near[nb] += delta

    def _update(self, cell: int, delta_code: int) -> float:
        """The lines through ``cell`` after adding ``delta_code`` there (a stone played
        or, negative, taken back): their keys, infos, the active set and the
        winning-cell counts; returns the change of the pattern value."""
        keys, infos, active = self.keys, self.infos, self.active
        memo = self.p.memo
        dv = 0.0
        wins = self.wins
        for lid, step in self.g.cell_keys[cell]:
            key = keys[lid] + delta_code * step
            keys[lid] = key
            new = memo.get(key)
            if new is None:
                new = self.p.info(key & 31, key >> 5)
            old = infos[lid]
            infos[lid] = new
            dv += new[0] - old[0]
            wins[1] += new[4] - old[4]
            wins[2] += new[5] - old[5]
            if new[7] is not old[7]:
                if new[7]:
                    active.add(lid)
                else:
                    active.discard(lid)
        return dv

    def play(self, cell: int, stone: int) -> None:
        self.cells[cell] = stone
        self.value += self._update(cell, stone)
        self.hash ^= self.g.zobrist[stone][cell]
        self.stones += 1
        self._touch(cell, 1)

    def undo(self, cell: int) -> None:
        stone = self.cells[cell]
        self.cells[cell] = 0
        self.value += self._update(cell, -stone)
        self.hash ^= self.g.zobrist[stone][cell]
        self.stones -= 1
        self._touch(cell, -1)

    # The threat-space search makes and unmakes many moves and reads only the lines,
    # the winning cells and the hash: these two leave ``value``, ``stones`` and the
    # neighbourhood counts as they were, which is right once every `threat_play` is
    # undone by `threat_undo`.
    def threat_play(self, cell: int, stone: int) -> None:
        self.cells[cell] = stone
        self._update(cell, stone)
        self.hash ^= self.g.zobrist[stone][cell]

    def threat_undo(self, cell: int) -> None:
        stone = self.cells[cell]
        self.cells[cell] = 0
        self._update(cell, -stone)
        self.hash ^= self.g.zobrist[stone][cell]

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
        col, infos, lines = 1 + stone, self.infos, self.g.lines
        for lid in self.active:
            info = infos[lid]
            if info[3 + stone]:
                line = lines[lid]
                out.update(line[pos] for pos, w in enumerate(info[col]) if w)
        return sorted(out)

    def threat_cells(self, what: int, stone: int) -> list[int]:
        """Cells of ``stone`` from `_LinePatterns.threats`: ``what`` 0 fours, 1 threes,
        3 open fours (ascending, no repeats)."""
        idx = 2 * what + stone - 1
        infos, lines = self.infos, self.g.lines
        out: set[int] = set()
        for lid in self.active:
            got = infos[lid][6][idx]
            if got:
                line = lines[lid]
                out.update(line[pos] for pos in got)
        return sorted(out)

    def three_defences(self, stone: int) -> list[int] | None:
        """The empty cells where the opponent of ``stone`` stops every open four
        ``stone`` could make next (the intersection over its threes' lines); None when
        ``stone`` has no open four to make."""
        idx = 4 + stone - 1
        infos, lines = self.infos, self.g.lines
        out: set[int] | None = None
        for lid in self.active:
            got = infos[lid][6]
            if got[idx + 2]:
                line = lines[lid]
                cells = {line[pos] for pos in got[idx]}
                out = cells if out is None else out & cells
        return None if out is None else sorted(out)

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
        self._patterns = _LinePatterns(env.k, env.rule, threat_facts=False)
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
        check_state(self, state)
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
        check_state(self, state)
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
class _PatternAgent(PythonAgent):
    """A search over a `_SearchBoard` of its ``_geom`` and ``_patterns``."""

    def _position(self, state: State) -> tuple[_SearchBoard, int, bool, np.ndarray]:
        """``(search board, stone to move (1 / 2), whether the game is over, board)``;
        a ValueError naming the agent for a state of another game (`check_state`)."""
        check_state(self, state)
        board, me, over = _state_board(state)
        return _SearchBoard(self._geom, self._patterns, board), me + 1, over, board

    def evaluate(self, state: State) -> float:
        """``f(player to move) - f(opponent)`` of the agent's pattern weights
        (`tactics.pattern_score` with its default weights)."""
        b, stone, _, _ = self._position(state)
        return b.value if stone == 1 else -b.value


class _HeuristicSearch(_PatternAgent):
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
        threats: ThreatSettings | None = None,
        shape_bonus: tuple[float, float, float, float] | None = None,
    ):
        depth = check_int(type(self).__name__, "depth", depth)
        window = check_int(type(self).__name__, "window", window)
        top_n = check_int(type(self).__name__, "top_n", top_n, allow_none=True)
        self.env = env
        self.depth, self.window = int(depth), int(window)
        self.top_n = None if top_n is None else int(top_n)
        self.use_table = bool(use_table)
        self.name = name
        self._geom = _Geometry(env.size, self.window)
        if shape_bonus is not None:
            shape_bonus = tuple(float(x) for x in shape_bonus)
            if len(shape_bonus) != 4:
                raise ValueError(f"{type(self).__name__}: shape_bonus takes 4 numbers, got {shape_bonus!r}")
        self.shape_bonus = shape_bonus
        self._patterns = _LinePatterns(env.k, env.rule, weights, shape_bonus,
                                       threat_facts=threats is not None)
        self.nodes = 0
        self._table: dict[int, tuple[int, float, int, int]] = {}
        # The time source the deadline refers to (tests inject a fake one).
        self.clock = time.perf_counter if clock is None else clock
        self._stop_at: float | None = None  # abandon the search at this clock time
        self._countdown = _CHECK_EVERY  # nodes until the next clock reading
        self.completed_depth = 0  # depth of the last completed iteration of `select`
        if threats is not None and not isinstance(threats, ThreatSettings):
            raise ValueError(f"{type(self).__name__}: threats must be ThreatSettings or None, got {threats!r}")
        self.threats = threats
        self.threat_nodes = 0  # nodes of the threat-space searches (not in `nodes`)
        # What decided the last `select`: "vcf" / "vct" (own forced win found),
        # "defend" (root moves cut to those that break the opponent's VCF / VCT),
        # "probe" (cut to quiet moves preparing an own VCT), "defend+probe", or None.
        self.threat_result: str | None = None
        self._budget = 0
        self._phase_left: float = _INF  # threat nodes left to this move (max_nodes)
        self._exhausted = False  # whether this move's max_nodes ran out
        self._tss_table: dict[int, int] = {}

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
        self._check_clock()
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
        b, stone, over, _ = self._position(state)
        if over:
            return {}
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
        b, stone, over, board = self._position(state)
        if over:
            return _first_empty(board)
        self.threat_result = None
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
        stop_at = None
        if self.deadline is not None:
            deadline = float(self.deadline)
            now = self.clock()
            stop_at = deadline - min(_MARGIN_MAX, max(_MARGIN_MIN, _MARGIN_FRACTION * (deadline - now)))
        if self.threats is not None:
            found = self._threat_space(b, stone, moves, stop_at)
            if isinstance(found, int):
                self.completed_depth = 0
                return found
            moves = found
            if len(moves) == 1:
                self.completed_depth = 0
                return moves[0]
        if stop_at is None:
            self._stop_at = None
            _, ties = self._search_root(b, stone, moves, self.depth)
            self.completed_depth = self.depth
            return _pick(ties, rng)
        return self._select_by_deadline(b, stone, moves, rng, stop_at)

    # -- threat-space search (VCF / VCT)
    def _check_clock(self) -> None:
        """Raise `_Timeout` once past the cut-off; the clock is read every
        ``_CHECK_EVERY`` calls."""
        if self._stop_at is not None:
            self._countdown -= 1
            if self._countdown <= 0:
                self._countdown = _CHECK_EVERY
                if self.clock() >= self._stop_at:
                    raise _Timeout

    def _tick(self) -> None:
        self.threat_nodes += 1
        self._budget -= 1
        if self._budget < 0:
            raise _OutOfNodes
        self._check_clock()

    def _tss_key(self, b: _SearchBoard, a: int, vct: bool) -> int:
        """The threat table's key: the position, the attacker ``a`` to move, VCF / VCT."""
        return b.hash ^ (self._geom.zobrist_white_to_move if a == 2 else 0) ^ (vct * 0x5bd1e995)

    def _attack(self, b: _SearchBoard, a: int, depth: int, vct: bool) -> int:
        """A move of the attacker ``a`` (to move) that starts a forced win by fours
        (and, with ``vct``, open threes) within ``depth`` attacker moves, or -1.

        The defender answers a four at its winning cell (or has lost when there are
        two), and a three at any cell that stops every open four the attacker could
        make next or with any four of its own (which the attacker must block, with a
        move that keeps a threat on the board). A found win is a proof; -1 may also
        mean the depth or node budget was too small."""
        self._tick()
        if b.wins[a]:
            return b.winning_cells(a)[0]
        d = 3 - a
        if not b.wins[d]:
            open4 = b.threat_cells(3, a)
            if open4:
                return open4[0]
        if depth <= 0:
            return -1
        key = self._tss_key(b, a, vct)
        seen = self._tss_table.get(key)
        if seen is not None and (seen >= 1000 or seen >= depth):
            return seen - 1000 if seen >= 1000 else -1  # proven move, or failed as deep
        if b.wins[d]:
            moves = b.winning_cells(d)
            if len(moves) > 1:
                return -1
        else:
            moves = b.threat_cells(0, a)
            if vct and depth >= 2:
                fours = set(moves)
                moves = moves + [c for c in b.threat_cells(1, a) if c not in fours]
            if len(moves) > 1:
                score = {c: b.move_info(c)[0] for c in moves}
                moves.sort(key=score.__getitem__, reverse=True)
        for cell in moves:
            b.threat_play(cell, a)
            try:
                ok = self._defend(b, a, depth - 1, vct)
            finally:
                b.threat_undo(cell)
            if ok:
                self._tss_table[key] = 1000 + cell
                return cell
        self._tss_table[key] = max(depth, seen if seen is not None else 0)
        return -1

    def _defend(self, b: _SearchBoard, a: int, depth: int, vct: bool) -> bool:
        """Whether the attacker ``a`` (who just moved) wins against every answer."""
        self._tick()
        d = 3 - a
        if b.wins[d]:
            return False
        if b.wins[a]:
            replies = b.winning_cells(a)
            if len(replies) > 1:
                return True
        else:
            if not vct:
                return False
            stops = b.three_defences(a)
            if stops is None:
                return False  # no threat: the defender moves freely
            replies = sorted(set(stops).union(b.threat_cells(0, d)))
            if not replies:
                return True
        for cell in replies:
            b.threat_play(cell, d)
            try:
                ok = self._attack(b, a, depth, vct) >= 0
            finally:
                b.threat_undo(cell)
            if not ok:
                return False
        return True

    def _forced_win(self, b: _SearchBoard, a: int, vct: bool, depth: int, budget: int) -> int:
        """`_attack` from the root with a fresh table and ``budget`` nodes (at most what
        is left of the move's ``max_nodes``); -1 if none found in budget. Spending the
        last of ``max_nodes`` sets ``_exhausted``."""
        budget = min(budget, self._phase_left)
        if budget <= 0:
            self._exhausted = True
            return -1
        self._budget = budget
        self._tss_table = {}
        try:
            return self._attack(b, a, depth, vct)
        except _OutOfNodes:
            if budget >= self._phase_left:
                self._exhausted = True
            return -1
        finally:
            self._phase_left -= budget - max(self._budget, 0)

    def _threat_space(
        self, b: _SearchBoard, stone: int, moves: list[int], stop_at: float | None
    ) -> int | list[int]:
        """The threat-space step of `select`: a move starting the own VCF (else VCT);
        else the root moves: ``moves``, cut to the moves that stop the opponent's VCF /
        VCT when it has one (`_defences`), then to the quiet moves that would leave an
        own VCT if the opponent passed, when there are some. At most
        ``threats.max_nodes`` nodes; an expired deadline skips what is left."""
        t = self.threats
        self._stop_at = stop_at
        self._countdown = _CHECK_EVERY
        self._phase_left, self._exhausted = t.max_nodes, False
        other = 3 - stone
        try:
            if stop_at is not None and self.clock() >= stop_at:
                return moves
            if t.vcf_depth:
                m = self._forced_win(b, stone, False, t.vcf_depth, t.vcf_nodes)
                if m >= 0:
                    self.threat_result = "vcf"
                    return m
            if t.vct_depth:
                m = self._forced_win(b, stone, True, t.vct_depth, t.vct_nodes)
                if m >= 0:
                    self.threat_result = "vct"
                    return m
            if t.defend and not b.wins[other]:
                moves = self._defences(b, stone, moves)
            if t.probe_moves and t.probe_depth and not b.threat_cells(3, other):
                found = self._latent_threats(b, stone, moves)
                if found:
                    self.threat_result = "probe" if self.threat_result is None else "defend+probe"
                    return found
        except _Timeout:
            pass
        finally:
            self._stop_at = None
            self._phase_left = _INF
        return moves

    def _latent_threats(self, b: _SearchBoard, stone: int, moves: list[int]) -> list[int]:
        """Quiet moves (making no four or three) after which ``stone`` would have a
        VCT if the opponent passed: a double threat in the making that the opponent
        must find the answer to. Looks at the first ``probe_moves`` quiet moves of the
        window (of ``moves`` after `_defences` cut them), best-ordered first."""
        t = self.threats
        forcing = set(b.threat_cells(0, stone)) | set(b.threat_cells(1, stone))
        pool = moves if self.threat_result == "defend" else self._ordered_all(b, stone)
        quiet = [c for c in pool if c not in forcing][: t.probe_moves]
        found = []
        for cell in quiet:
            b.threat_play(cell, stone)
            try:
                win = self._forced_win(b, stone, True, t.probe_depth, t.probe_nodes) >= 0
            finally:
                b.threat_undo(cell)
            if self._exhausted:
                break
            if win:
                found.append(cell)
        return found

    def _defences(self, b: _SearchBoard, stone: int, moves: list[int]) -> list[int]:
        """The root moves after which the opponent has no forced win: when it has a
        VCF or VCT now (if it moved), the candidates (all in the window, best first)
        after which it has neither, else those after which it has no VCF, else
        ``moves`` unchanged (nothing found that helps: the search decides).

        A move that makes a four or a three only delays: it counts as a defence when
        the opponent has no forced win after each of its answers to that threat with
        ``stone`` to move again (as if ``stone`` passed)."""
        t, other = self.threats, 3 - stone
        zone: set[int] = set()
        vcf = bool(t.vcf_depth) and self._forced_win(b, other, False, t.vcf_depth, t.vcf_nodes) >= 0
        if vcf:
            self._proof_cells(b, other, False, zone)
        vct = (not vcf and bool(t.defend_vct_depth)
               and self._forced_win(b, other, True, t.defend_vct_depth, t.vct_nodes) >= 0)
        if vct:
            self._proof_cells(b, other, True, zone)
        if not (vcf or vct):
            return moves
        fours, threes = set(b.threat_cells(0, stone)), set(b.threat_cells(1, stone))
        # Candidates: the cells of the opponent's proof (its moves and the answers it
        # meets), the own fours and threes, and the best-ordered moves.
        zone |= fours | threes | set(moves)
        safe, vcf_safe = [], []
        for cell in self._ordered_all(b, stone):
            if cell not in zone:
                continue
            b.threat_play(cell, stone)
            try:
                if cell in fours:
                    answers = b.winning_cells(stone)
                elif cell in threes:
                    answers = b.three_defences(stone) or []
                else:
                    answers = [-1]
                level = 2  # 2: no forced win of the opponent found, 1: no VCF, 0: lost
                for reply in answers:
                    if reply >= 0:
                        b.threat_play(reply, other)
                    try:
                        level = min(level, self._safety(b, other))
                    finally:
                        if reply >= 0:
                            b.threat_undo(reply)
                    if level == 0:
                        break
            finally:
                b.threat_undo(cell)
            if self._exhausted:
                break
            if level >= 1:
                vcf_safe.append(cell)
            if level == 2:
                safe.append(cell)
                if len(safe) >= len(moves):
                    break
        found = safe or vcf_safe
        if found:
            self.threat_result = "defend"
            return found
        return moves

    def _proof_cells(
        self, b: _SearchBoard, a: int, vct: bool, out: set[int], limit: int = 4000
    ) -> None:
        """Add to ``out`` the cells of the forced win of ``a`` (to move) that the last
        `_forced_win` proved: the attacker's moves and every answer it met, read back
        from the threat table (at most ``limit`` positions visited)."""
        budget = [limit]

        def attack() -> None:
            budget[0] -= 1
            if budget[0] < 0:
                return
            if b.wins[a]:
                out.update(b.winning_cells(a))
                return
            d = 3 - a
            if not b.wins[d]:
                open4 = b.threat_cells(3, a)
                if open4:
                    out.add(open4[0])
                    b.threat_play(open4[0], a)
                    out.update(b.winning_cells(a))
                    b.threat_undo(open4[0])
                    return
            seen = self._tss_table.get(self._tss_key(b, a, vct))
            if seen is None or seen < 1000:
                return
            cell = seen - 1000
            out.add(cell)
            b.threat_play(cell, a)
            try:
                if b.wins[a]:
                    replies = b.winning_cells(a)
                else:
                    stops = b.three_defences(a) or []
                    replies = sorted(set(stops).union(b.threat_cells(0, d)))
                out.update(replies)
                if len(replies) > 1 and b.wins[a]:
                    return
                for reply in replies:
                    b.threat_play(reply, d)
                    try:
                        attack()
                    finally:
                        b.threat_undo(reply)
            finally:
                b.threat_undo(cell)

        attack()

    def _safety(self, b: _SearchBoard, other: int) -> int:
        """2 when ``other`` (to move) has no VCF or VCT within the defence budgets, 1
        when it has a VCT only, 0 when it has a VCF (or an immediate win)."""
        t = self.threats
        if b.wins[other]:
            return 0
        if t.vcf_depth and self._forced_win(b, other, False, t.vcf_depth, t.defend_nodes) >= 0:
            return 0
        if t.defend_vct_depth and self._forced_win(
                b, other, True, t.defend_vct_depth, t.defend_nodes) >= 0:
            return 1
        return 2

    def _ordered_all(self, b: _SearchBoard, stone: int) -> list[int]:
        """All candidates in the window, in `_ordered`'s order (no ``top_n`` cut)."""
        top, self.top_n = self.top_n, None
        try:
            return self._ordered(b, stone, -1)
        finally:
            self.top_n = top

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
        self, b: _SearchBoard, stone: int, moves: list[int], rng: np.random.Generator, stop_at: float
    ) -> int:
        """Iterative deepening to ``self.depth`` plies, stopped at ``stop_at`` (the
        deadline less the margin).

        Each iteration searches the previous best move first; the transposition table
        is kept between iterations (a position is always met at the same ply, so an
        older entry is shallower and only orders moves). Ties of the last completed
        iteration are put back in ``moves``' order before ``rng`` picks one, so a
        completed full-depth iteration answers exactly as the search without deadline.
        """
        clock = self.clock
        now = clock()
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
    """Heuristic alpha-beta after seed 004 section 4.3 (`Seed004AlphaBetaAgent` is the
    report's as written): negamax to ``depth`` plies with the pattern evaluation
    ``f(mover) - f(opponent)`` (seed 001's weights) at the leaves.

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


# Seed 004's pattern weights (section 4.3.1, Algorithm 13): a win 10^9, an open four
# 10^8, a closed four 5 x 10^6, an open three 10^6; "open 2s and isolated stones ...
# 10 to 5,000": an open two 5,000 and a lone stone open on both sides of a line 10
# (per line). Patterns it does not name (closed threes, blocks) weigh nothing.
SEED004_PATTERN_WEIGHTS: dict[str, float] = {
    "five": 1e9, "open_four": 1e8, "half_four": 5e6, "open_three": 1e6, "half_three": 0.0,
    "open_two": 5e3, "open_one": 10.0, "blocked_three": 0.0, "blocked_four": 0.0,
}
_SEED004_MARGIN = 2  # the play range: the stones' bounding box and 2 cells around it
_SEED004_DEPTH = 6  # "a fixed depth (default 6)"


class Seed004AlphaBetaAgent(_PatternAgent):
    """Seed 004's heuristic alpha-beta (section 4.3) as its pseudo code writes it.

    * Negamax with alpha-beta to ``depth`` plies (Algorithm 15): a finished game scores
      ``-(10^9 + depth left)`` for the player to move when the other has won (so a
      quicker win scores higher), 0 for a draw; at depth 0, the pattern evaluation
      ``f(mover) - f(opponent)`` (Algorithm 13) with `SEED004_PATTERN_WEIGHTS` over the
      maximal runs of each line (`tactics`' run shapes, plus the lone stone).
    * Candidates (Algorithm 14): the empty cells inside the stones' bounding box
      widened by 2 cells (the "PlayRange"; the centre on an empty board), ordered by
      their number of neighbouring stones, most first (ties in board order).
    * At the root, the first move of the highest value in that order.

    Unlike `NegamaxAgent` it has no forced-move rules (a win at once, a block) beyond
    what the search finds, no move ordering by pattern value, and reads no deadline: it
    searches its ``depth`` whatever the time. Deterministic: ``rng`` is not used.
    """

    def __init__(self, env: Gomoku, depth: int = _SEED004_DEPTH,
                 weights: Mapping[str, float] | None = None, name: str | None = None):
        depth = check_int(type(self).__name__, "depth", depth)
        self.env, self.depth = env, int(depth)
        self.name = name or f"alphabeta004-{self.depth}"
        self._geom = _Geometry(env.size, None)
        self._patterns = _LinePatterns(env.k, env.rule,
                                       {**SEED004_PATTERN_WEIGHTS, **dict(weights or {})},
                                       threat_facts=False)
        self.nodes = 0

    def _ordered(self, b: _SearchBoard) -> list[int]:
        """The empty cells of the play range, most neighbouring stones first."""
        n, cells = self._geom.size, b.cells
        if b.stones == 0:
            return list(self._geom.central[:1])
        stones = [c for c in range(self._geom.nn) if cells[c]]
        rows = [c // n for c in stones]
        cols = [c % n for c in stones]
        r0, r1 = max(0, min(rows) - _SEED004_MARGIN), min(n - 1, max(rows) + _SEED004_MARGIN)
        c0, c1 = max(0, min(cols) - _SEED004_MARGIN), min(n - 1, max(cols) + _SEED004_MARGIN)
        moves = [r * n + c for r in range(r0, r1 + 1) for c in range(c0, c1 + 1)
                 if not cells[r * n + c]]
        adj = b.adj
        moves.sort(key=lambda c: -adj[c])  # stable: board order among ties
        return moves

    def _move_value(self, b: _SearchBoard, stone: int, cell: int, depth: int,
                    alpha: float, beta: float) -> float:
        """The value for ``stone`` of playing ``cell``, searched ``depth`` plies further
        within the window (``alpha``, ``beta``)."""
        wins = b.move_info(cell)[stone]
        b.play(cell, stone)
        v = -self._negamax(b, 3 - stone, depth, -beta, -alpha, wins)
        b.undo(cell)
        return v

    def _negamax(self, b: _SearchBoard, stone: int, depth: int, alpha: float,
                 beta: float, lost: bool) -> float:
        """The value for ``stone``, to move; ``lost``: the other player's last move won."""
        self.nodes += 1
        if lost:
            return -(BIG + depth)
        if b.stones == self._geom.nn:
            return 0.0
        if depth == 0:
            return b.value if stone == 1 else -b.value
        best = -_INF
        for cell in self._ordered(b):
            v = self._move_value(b, stone, cell, depth - 1, alpha, beta)
            best = max(best, v)
            alpha = max(alpha, v)
            if alpha >= beta:
                break
        return best

    def root_values(self, state: State) -> dict[int, float]:
        """Negamax value of each root candidate (full window): for analysis."""
        b, stone, over, _ = self._position(state)
        if over:
            return {}
        return {cell: self._move_value(b, stone, cell, self.depth - 1, -_INF, _INF)
                for cell in self._ordered(b)}

    def select(self, state: State, rng: np.random.Generator) -> int:
        b, stone, over, board = self._position(state)
        if over:
            return _first_empty(board)
        alpha, best = -_INF, -1
        for cell in self._ordered(b):
            v = self._move_value(b, stone, cell, self.depth - 1, alpha, _INF)
            if v > alpha or best < 0:
                alpha, best = max(alpha, v), cell
        return best


class GomokuBotAgent(_HeuristicSearch):
    """Seed 001's Rule-Based GomokuBot: alpha-beta to ``depth`` plies over the pattern
    evaluation ``f(own) - f(opp)`` (`tactics.DEFAULT_PATTERN_WEIGHTS`), searching only
    the ``top_n`` candidate cells by attack + defence pattern value at each node, with
    a Zobrist transposition table ("Z-cache") and the killer module (take an immediate
    win; else block the opponent's immediate win).

    Added to the seed: ``threats`` (`ThreatSettings`, on by default; None turns it off)
    runs a threat-space search at the root first: the own VCF, else VCT, is played at
    once; if the opponent has a VCF or VCT, only moves that break it are searched; else
    quiet moves that would leave an own VCT if the opponent passed (a double threat it
    must see coming) are preferred, so threes and fours are not spent early on blocks.
    ``shape_bonus`` (None: seed evaluation) adds gap-aware threat shapes to the
    evaluation (`_LinePatterns.threats`). See `experiments.gomokubot_strength` and the
    README for its record against the heuristic and pure MCTS.
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
        threats: ThreatSettings | None = ThreatSettings(),
        shape_bonus: tuple[float, float, float, float] | None = _BOT_SHAPE_BONUS,
    ):
        super().__init__(
            env, depth, window, top_n, True, weights, name or f"gomokubot-{depth}", clock,
            threats, shape_bonus,
        )


# ----------------------------------------------------------------------- names
_NAME = re.compile(r"^(minimax|alphabeta004|alphabeta|negamax|gomokubot)(?:-(\d+))?$",
                   re.ASCII)


class UnknownSearchName(ValueError):
    """`by_name` got a name that is none of its own (other ValueErrors refuse one of
    its names: a depth of 0, minimax on a board it cannot solve)."""


# The largest board `by_name` builds "minimax" for (`MinimaxAgent` itself takes any).
MINIMAX_MAX_SIZE = 4


def by_name(name: str, env: Gomoku) -> PythonAgent:
    """An agent from a short name: ``"minimax"`` (exact solver), ``"alphabeta"`` /
    ``"alphabeta-D"`` / ``"negamax-D"`` (`NegamaxAgent` of depth D, default 2),
    ``"alphabeta004"`` / ``"alphabeta004-D"`` (`Seed004AlphaBetaAgent`, default 6),
    ``"gomokubot"`` / ``"gomokubot-D"`` (`GomokuBotAgent` of depth D, default 6)."""
    m = _NAME.match(name.strip().lower()) if isinstance(name, str) else None
    if m is None:
        raise UnknownSearchName(
            f"unknown search agent {name!r}: expected minimax, alphabeta[-D], "
            "alphabeta004[-D], negamax[-D] or gomokubot[-D]"
        )
    kind, depth = m.group(1), m.group(2)
    if kind == "minimax":
        if depth is not None:
            raise ValueError(f"{name!r}: minimax searches to the end and takes no depth")
        if env.size > MINIMAX_MAX_SIZE:
            raise ValueError(
                f"{name!r} solves boards up to {MINIMAX_MAX_SIZE}x{MINIMAX_MAX_SIZE}: it "
                f"searches every game to its end, which on {env.size}x{env.size} would not "
                "finish; use alphabeta-D or gomokubot-D there")
        return MinimaxAgent(env)
    if depth is not None:
        depth = whole_number(depth, name)
        if depth < 1:
            raise ValueError(f"{name!r}: the depth must be at least 1")
    if kind in ("alphabeta", "negamax"):
        d = 2 if depth is None else depth
        return NegamaxAgent(env, d, name=f"{kind}-{d}")
    if kind == "alphabeta004":
        d = _SEED004_DEPTH if depth is None else depth
        return Seed004AlphaBetaAgent(env, d, name=f"alphabeta004-{d}")
    d = _BOT_DEPTH if depth is None else depth
    return GomokuBotAgent(env, d, name=f"gomokubot-{d}")
