"""Vectorised tactical patterns: winning moves, fours, open threes, run shapes, scores.

Every function is pure ``jax.numpy``, runs jitted with ``k`` and ``rule`` static
(and works inside ``jit`` and ``vmap``). It takes one board ``[N, N]`` or a batch
``[..., N, N]`` (int8: 0 empty, 1 black, 2 white) and, where it asks for one,
``player`` (0 black, 1 white): a Python int or an int array broadcastable to the batch
dims ``[...]``. Patterns are found with static shifts of whole boolean planes (slices
of one padded copy of each plane) and small static loops over the four `DIRECTIONS`
and over offsets up to about ``k``; there is no loop over cells or games and no
gather. Counts are tallied per cell and reduced once, which keeps XLA's compile time
low. Off the board is never "empty": a pattern that needs an empty cell there does
not match, and a run ending at the edge is closed at that end.

Definitions ("X" the player's stones, "O" the opponent's, "." an empty cell on the
board; shapes are read along one of the four directions; for k = 5 the names are the
usual ones, for other k the lengths scale with k):

* **Winning move** (`winning_moves`): an empty cell where the player's stone makes a
  run through it of ``>= k`` (freestyle) or exactly ``k`` (standard) in some
  direction. This is exactly the engine's ``Gomoku.wins_through`` after that move.
* **Open three** (`open_threes`, seed 000 section 4.5): a window matching
  ``.XXX.`` (consecutive, 5 cells) or ``.X.XX.`` / ``.XX.X.`` (broken, 6 cells).
  Only the window's cells are looked at, so every placement of a window that matches
  is one instance: ``..XXX..`` holds exactly one ``.XXX.``; ``O.XXX..`` and
  ``X.XXX.`` hold one too; ``.XXXX.`` holds none; ``.X.XX.X.`` holds two. The
  opponent blocks a consecutive three at either end cell and a broken three at its gap
  (`open_three_blocks`). For general k the three has ``m = k - 2`` stones:
  ``.X^m.`` and, for every split ``a + b = m`` with ``a, b >= 1``, ``.X^a.X^b.``
  (filling the gap makes ``.X^(k-1).``, an open four). For k = 3 there is no broken
  shape and the "three" is ``.X.``.
* **Four** (`four_threats`): a window of k cells holding k - 1 of the player's
  stones, one empty cell and no opponent stone, so that filling the empty cell makes
  k in a row. Under standard rules the window also needs no player stone just beyond
  either end (else filling it makes an overline, which does not win). Every such
  (direction, window) is one four: ``XX.XX`` is one four, ``.XXXX.`` two, and the
  empty cells of all fours are exactly the `winning_moves` under either rule.
  An **open four** is a window ``.X^(k-1).`` (``.XXXX.``) whose two end cells both
  win (under standard: no player stone just beyond either end cell).
* **Threat moves** (`threat_moves`): per empty cell, what the player's stone there
  would make in each direction, counted at the direction's best shape: a five, a four
  (a window of k with k - 1 stones and one empty cell, no opponent stone) or a three
  (k - 2 stones and two empty cells). The input of the ``stones-threats``
  observation planes.
* **Run shapes** (`shape_counts`, `SHAPES`, seed 000 section 3.3): maximal
  consecutive runs of one player's stones along each direction (a stone belongs to
  one run per direction). A run of length ``k-3 / k-2 / k-1`` (2 / 3 / 4 for k = 5)
  is a two / three / four. A run's two end cells are the cells just beyond its ends;
  it is **open** when both are empty (and on the board) and **half** when exactly one
  is. ``blocked_three[p]`` / ``blocked_four[p]`` count the *opponent's* runs of
  length ``k-2`` / ``k-1`` with at least one end cell holding a stone of player
  ``p``: the shaped reward for blocking is the rise of that count after p's move.
  There is no "half two". Runs of length ``>= k`` and shapes of length ``< 1`` (the
  "two" when k = 3) are not counted; gapped shapes are not runs and are not counted
  either. For k = 4 a lone stone is a "two", so it counts once per open direction.
* **Pattern score** (`pattern_score`, seed 001 section IV-E): ``f(p) = sum over
  patterns count * weight`` with the counts above plus "five" (a winning run:
  ``>= k`` freestyle, exactly ``k`` standard), and ``score = f(player) -
  f(opponent)``. Weights are `DEFAULT_PATTERN_WEIGHTS` unless given.
* **Move scores** (`move_scores`): for each empty cell, the value (same weights) of
  the run that a stone there would make in each direction for the player (attack) plus
  the same for the opponent (defence: what playing there denies). A heuristic for
  move ordering; gaps are ignored.
"""

from __future__ import annotations

import functools
from typing import Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from gomoku_jax.config import check_int
from gomoku_jax.game import DIRECTIONS, EMPTY, RULES, is_winning_run

__all__ = [
    "DEFAULT_PATTERN_WEIGHTS",
    "Fours",
    "NUM_SHAPES",
    "OpenThrees",
    "SHAPES",
    "centrality",
    "four_threats",
    "most_central",
    "move_scores",
    "open_three_blocks",
    "open_three_patterns",
    "open_threes",
    "pattern_score",
    "shape_counts",
    "threat_moves",
    "threats_to_answer",
    "winning_moves",
]

SHAPES = (
    "open_two",
    "half_three",
    "open_three",
    "half_four",
    "open_four",
    "blocked_three",
    "blocked_four",
)
NUM_SHAPES = len(SHAPES)

# Seed 001 (IV-E) gives five 100,000, open four 10,000 and open three 1,000. Those are
# the top of the classic Gomoku evaluation table, whose other entries are used for the
# rest: half (blocked-on-one-side) four 1,000, half three 100, open two 100. Blocking
# is already rewarded through the opponent's lost open / half shapes, so the blocked
# counts weigh nothing by default.
DEFAULT_PATTERN_WEIGHTS: dict[str, float] = {
    "five": 100_000.0,
    "open_four": 10_000.0,
    "half_four": 1_000.0,
    "open_three": 1_000.0,
    "half_three": 100.0,
    "open_two": 100.0,
    "blocked_three": 0.0,
    "blocked_four": 0.0,
}
_WEIGHT_KEYS = ("five",) + SHAPES  # order of the feature axis in pattern_score


class OpenThrees(NamedTuple):
    """Open threes of one player (see the module docstring)."""

    count: jax.Array  # [...] int32: all open-three instances, all directions
    consecutive: jax.Array  # [...] int32: instances of .XXX.
    broken: jax.Array  # [...] int32: instances of .X.XX. and .XX.X.
    blocks: jax.Array  # [..., N, N] bool: cells where the opponent blocks one


class Fours(NamedTuple):
    """Fours of one player (see the module docstring)."""

    count: jax.Array  # [...] int32: (direction, k-window) fours
    moves: jax.Array  # [..., N, N] bool: their empty cells (= winning_moves)
    open_count: jax.Array  # [...] int32: open fours .X^(k-1).


# ----------------------------------------------------------------------- helpers
def _check(k: int, rule: str = "freestyle") -> None:
    check_int("", "k", k, 3)
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")


def _shift(x: jax.Array, dr: int, dc: int, fill) -> jax.Array:
    """``out[..., r, c] = x[..., r + dr, c + dc]``, or ``fill`` off the board.

    ``[..., N, N] -> [..., N, N]``. Every shift slices the same copy of ``x`` padded
    by ``N - 1`` on each side, so XLA pads each plane once however often it is shifted
    (much cheaper to compile than one pad per shift).
    """
    n_r, n_c = x.shape[-2:]
    if abs(dr) >= n_r or abs(dc) >= n_c:
        return jnp.full_like(x, fill)
    if dr == 0 and dc == 0:
        return x
    m = max(n_r, n_c) - 1
    config = [(0, 0, 0)] * (x.ndim - 2) + [(m, m, 0), (m, m, 0)]
    padded = lax.pad(x, jnp.asarray(fill, x.dtype), config)
    return padded[..., m + dr : m + dr + n_r, m + dc : m + dc + n_c]


def _at(x: jax.Array, d: tuple[int, int], t: int, fill=False) -> jax.Array:
    """The plane seen ``t`` steps along direction ``d``: ``out[c] = x[c + t*d]``."""
    return _shift(x, t * d[0], t * d[1], fill)


def _planes(board, player) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Own, opponent and empty planes ``[..., N, N]`` bool for ``player``."""
    board = jnp.asarray(board)
    p = jnp.asarray(player, jnp.int32)
    stone = p + 1 if p.ndim == 0 else (p + 1)[..., None, None]
    own = board == stone.astype(board.dtype)
    empty = board == EMPTY
    opp = ~own & ~empty
    return own, opp, jnp.broadcast_to(empty, own.shape)


def _count(x: jax.Array) -> jax.Array:
    """Number of True cells per board: ``[..., N, N] -> [...]`` int32."""
    return jnp.sum(x, axis=(-2, -1), dtype=jnp.int32)


def _run_beside(own: jax.Array, d, sign: int, reach: int) -> jax.Array:
    """Consecutive own stones starting one step from each cell in direction
    ``sign * d``, capped at ``reach``: ``[..., N, N]`` int32."""
    run = jnp.ones(own.shape, jnp.bool_)
    total = jnp.zeros(own.shape, jnp.int32)
    for t in range(1, reach + 1):
        run = run & _at(own, d, sign * t)
        total = total + run
    return total


def _match(planes: dict[str, jax.Array], d, pattern: str) -> jax.Array:
    """Cells where ``pattern`` (a string over ``planes``' keys) starts along ``d``."""
    out = None
    for t, ch in enumerate(pattern):
        cell = _at(planes[ch], d, t)
        out = cell if out is None else out & cell
    return out


# --------------------------------------------------------------- winning moves
@functools.partial(jax.jit, static_argnames=("k", "rule"))
def winning_moves(board, player, k: int, rule: str = "freestyle") -> jax.Array:
    """Empty cells where ``player``'s stone wins at once: ``[..., N, N]`` bool.

    The run through the cell (the cell plus the player's stones on each side) is
    ``>= k`` under freestyle, exactly ``k`` under standard.
    """
    _check(k, rule)
    own, _, empty = _planes(board, player)
    # Standard rules must see k stones on a side to tell an overline from a five.
    reach = k if rule == "standard" else k - 1
    wins = jnp.zeros(own.shape, jnp.bool_)
    for d in DIRECTIONS:
        run = 1 + _run_beside(own, d, 1, reach) + _run_beside(own, d, -1, reach)
        wins = wins | is_winning_run(run, k, rule)
    return wins & empty


# ----------------------------------------------------------------- open threes
def open_three_patterns(k: int = 5) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The open-three windows for ``k`` as ``(pattern, block offsets)`` pairs.

    ``pattern`` uses ``X`` for the player's stone and ``.`` for an empty cell; the
    offsets are the window positions where the opponent blocks. For k = 5:
    ``(".XXX.", (0, 4)), (".X.XX.", (2,)), (".XX.X.", (3,))``.
    """
    _check(k)
    m = k - 2
    patterns = [("." + "X" * m + ".", (0, m + 1))]
    for a in range(1, m):
        patterns.append(("." + "X" * a + "." + "X" * (m - a) + ".", (a + 1,)))
    return tuple(patterns)


@functools.partial(jax.jit, static_argnames=("k",))
def open_threes(board, player, k: int = 5) -> OpenThrees:
    """Open threes of ``player`` (seed 000 section 4.5): counts and block cells.

    Each window placement that matches one of `open_three_patterns` is one instance
    (so ``..XXX..`` is one open three, ``.X.XX.X.`` two). ``blocks`` marks the end
    cells of consecutive threes and the gap cells of broken ones.
    """
    _check(k)
    own, _, empty = _planes(board, player)
    planes = {"X": own, ".": empty}
    # Per-cell tallies of window starts over directions, reduced once at the end.
    consecutive = jnp.zeros(own.shape, jnp.int32)
    broken = jnp.zeros(own.shape, jnp.int32)
    blocks = jnp.zeros(own.shape, jnp.bool_)
    for d in DIRECTIONS:
        for i, (pattern, offsets) in enumerate(open_three_patterns(k)):
            starts = _match(planes, d, pattern)  # [..., N, N]: window starts
            if i == 0:
                consecutive = consecutive + starts
            else:
                broken = broken + starts
            for off in offsets:
                blocks = blocks | _at(starts, d, -off)
    counts = _count(jnp.stack([consecutive, broken], axis=-3))  # [..., 2]
    consecutive, broken = counts[..., 0], counts[..., 1]
    return OpenThrees(consecutive + broken, consecutive, broken, blocks)


@functools.partial(jax.jit, static_argnames=("k", "rule"))
def threats_to_answer(board, player, k: int = 5, rule: str = "freestyle") -> jax.Array:
    """How ``player``'s threats (winning cells and open threes) stand against one
    defending stone: ``[...]`` int32, 0 no threat, 1 one stone answers them all, 2 none
    does (a double threat: four-four, four-three, three-three, an open four).

    A stone answers a winning cell by taking it and an open three by taking one of the
    empty cells of its window (any of them breaks the match), and it adds no stone of
    the player's, so it makes no new threat. The threats have one answer in common when
    there is at most one winning cell and some cell (that one, if there is one) is an
    empty cell of every open three's window: the broken four ``X.XXX`` beside an open
    ``.XXX.`` that shares its gap is one threat, not two.
    """
    _check(k)
    own, _, empty = _planes(board, player)
    planes = {"X": own, ".": empty}
    threes = jnp.zeros(own.shape[:-2], jnp.int32)
    cover = jnp.zeros(own.shape, jnp.int32)  # per cell: open threes it answers
    for d in DIRECTIONS:
        for pattern, _ in open_three_patterns(k):
            starts = _match(planes, d, pattern)
            threes = threes + _count(starts)
            for t, ch in enumerate(pattern):
                if ch == ".":
                    cover = cover + _at(starts, d, -t).astype(jnp.int32)
    wins = winning_moves(board, player, k, rule)
    n_wins = _count(wins)
    answers_all = cover == threes[..., None, None]
    one_answer = jnp.where(n_wins == 0, _count(answers_all) > 0,
                           (n_wins == 1) & (_count(wins & answers_all) == 1))
    return jnp.where((n_wins == 0) & (threes == 0), 0, jnp.where(one_answer, 1, 2))


def open_three_blocks(board, player, k: int = 5) -> jax.Array:
    """Cells where the opponent of ``player`` blocks one of its open threes:
    ``[..., N, N]`` bool (ends of ``.XXX.``, gaps of ``.X.XX.`` / ``.XX.X.``)."""
    return open_threes(board, player, k).blocks


def centrality(size: int) -> np.ndarray:
    """Manhattan distance of each cell to the board centre ``((N-1)/2, (N-1)/2)``:
    ``[N, N]`` float32 (half-integers on even boards). Smaller is more central."""
    c = (size - 1) / 2
    r = np.abs(np.arange(size) - c)
    return (r[:, None] + r[None, :]).astype(np.float32)


@jax.jit
def most_central(mask) -> jax.Array:
    """The action (``row * N + col``) of the True cell of ``mask`` ``[..., N, N]``
    nearest the centre by Manhattan distance, ties to the lowest action; -1 where
    ``mask`` is all False. Returns ``[...]`` int32. Seed 000's tie-break between the
    two ends of an open three."""
    mask = jnp.asarray(mask, jnp.bool_)
    n = mask.shape[-1]
    dist = jnp.where(mask, centrality(n), jnp.inf).reshape(mask.shape[:-2] + (n * n,))
    best = jnp.argmin(dist, axis=-1).astype(jnp.int32)
    return jnp.where(jnp.any(mask, axis=(-2, -1)), best, -1)


# ----------------------------------------------------------------------- fours
@functools.partial(jax.jit, static_argnames=("k", "rule"))
def four_threats(board, player, k: int, rule: str = "freestyle") -> Fours:
    """Fours and open fours of ``player`` (see the module docstring).

    ``moves`` (the empty cells of the fours) equals `winning_moves` under both rules.
    """
    _check(k, rule)
    own, _, empty = _planes(board, player)
    standard = rule == "standard"
    # Per-cell tallies of window starts over directions, reduced once at the end.
    count = jnp.zeros(own.shape, jnp.int32)
    open_count = jnp.zeros(own.shape, jnp.int32)
    moves = jnp.zeros(own.shape, jnp.bool_)
    for d in DIRECTIONS:
        # Windows of k cells starting at each cell (off-board cells count as neither).
        n_own = sum(_at(own, d, t).astype(jnp.int32) for t in range(k))
        n_empty = sum(_at(empty, d, t).astype(jnp.int32) for t in range(k))
        four = (n_own == k - 1) & (n_empty == 1)  # [..., N, N]: window starts
        if standard:
            four = four & ~_at(own, d, -1) & ~_at(own, d, k)
        count = count + four
        for t in range(k):
            moves = moves | _at(four & _at(empty, d, t), d, -t)
        # Open fours: .X^(k-1). in k + 1 cells.
        open_four = _match({"X": own, ".": empty}, d, "." + "X" * (k - 1) + ".")
        if standard:
            open_four = open_four & ~_at(own, d, -1) & ~_at(own, d, k + 1)
        open_count = open_count + open_four
    counts = _count(jnp.stack([count, open_count], axis=-3))  # [..., 2]
    return Fours(counts[..., 0], moves, counts[..., 1])


# --------------------------------------------------------------- threat moves
@functools.partial(jax.jit, static_argnames=("k", "rule"))
def threat_moves(board, player, k: int, rule: str = "freestyle") -> jax.Array:
    """What a stone of ``player`` on each empty cell would make: ``[..., 3, N, N]`` int32.

    Read along each of the four directions, the windows of k cells through the cell
    that hold no opponent stone and lie on the board give the direction's best shape
    after the move: a five (k of the player's stones), a four (k - 1 and one empty
    cell, so one more move wins) or a three (k - 2 and two empty cells, one move from a
    four). Under standard rules a window also needs no player stone just beyond either
    end. Channel 0 is 1 where the stone wins at once (`winning_moves`); channel 1 counts
    the directions (0 to 4) whose best shape is a four, channel 2 those whose best is a
    three. Occupied cells are 0 in every channel. A cell with two or more in channels 1
    and 2 together is a candidate double threat (four-four, four-three, three-three),
    the shape a defender that blocks one threat at a time cannot answer; a candidate,
    because a "three" here is any window of k cells with k - 2 stones and no opponent
    stone, also one that can only become a closed four (against the edge or a stone),
    not only an open three: the planes point at where to look rather than prove a win.

    The shapes scale with ``k``: for ``k = 3`` (tic-tac-toe) a "three" is k - 2 = 1
    stone, the move itself, so channel 2 counts the directions whose best window holds
    none of the player's stones besides the move, only empty cells (nothing a Gomoku
    player would call a three); for ``k = 4`` it is two stones in a window of four.
    """
    _check(k, rule)
    own, _, empty = _planes(board, player)
    n_r, n_c = own.shape[-2:]
    # One code per cell so that one sum over a window counts the player's stones and
    # rules out the opponent's and the edge: own 1, empty 0, opponent / off board k + 1.
    code = jnp.where(own, 1, jnp.where(empty, 0, k + 1)).astype(jnp.int32)
    # Window sums are taken for window starts up to k - 1 cells off the board (windows
    # through board cells can start there), so the code is padded by 2 (k - 1) + 1.
    e, pad = k - 1, 2 * k - 1
    lead = [(0, 0, 0)] * (code.ndim - 2)
    code = lax.pad(code, jnp.int32(k + 1), lead + [(pad, pad, 0)] * 2)
    own_p = lax.pad(own, False, lead + [(pad, pad, 0)] * 2)

    def view(x, offset, margin, dr, dc):  # x[r + dr, c + dc] on a grid `margin` off the board
        r0, c0 = offset - margin + dr, offset - margin + dc
        return x[..., r0 : r0 + n_r + 2 * margin, c0 : c0 + n_c + 2 * margin]

    totals = []
    for dr, dc in DIRECTIONS:
        total = sum(view(code, pad, e, t * dr, t * dc) for t in range(k))
        if rule == "standard":  # a stone just beyond either end would make an overline
            beyond = view(own_p, pad, e, -dr, -dc) | view(own_p, pad, e, k * dr, k * dc)
            total = jnp.where(beyond, k + 1, total)
        # The player's stones in each usable window (-1 for the others).
        totals.append(jnp.where(total < k, total, -1))
    # The sums are computed once, on the board and e cells around it, and each board
    # cell then reads the k windows through it as slices: without the barrier XLA
    # fuses the k-term sums into every slice and redoes them there.
    totals = lax.optimization_barrier(jnp.stack(totals))
    best = []  # per direction, the most stones in a usable window through the cell
    for i, (dr, dc) in enumerate(DIRECTIONS):
        best.append(functools.reduce(jnp.maximum, [view(totals[i], e, 0, -t * dr, -t * dc)
                                                   for t in range(k)]))
    best = jnp.stack(best, axis=-3)  # [..., 4, N, N]; stones before the move
    five = jnp.any(best == k - 1, axis=-3)
    fours = jnp.sum(best == k - 2, axis=-3, dtype=jnp.int32)
    threes = jnp.sum(best == k - 3, axis=-3, dtype=jnp.int32)
    return jnp.stack([five.astype(jnp.int32), fours, threes], axis=-3) * empty[
        ..., None, :, :].astype(jnp.int32)


# ------------------------------------------------------------------ run shapes
def _run_stats(board, k: int, rule: str) -> tuple[jax.Array, jax.Array]:
    """Shape counts ``[..., 2, NUM_SHAPES]`` and winning-run counts ``[..., 2]``."""
    board = jnp.asarray(board)
    # Both players at once on a player axis: [..., 2, N, N].
    own = jnp.stack([board == 1, board == 2], axis=-3)
    opp = own[..., ::-1, :, :]
    empty = (board == EMPTY)[..., None, :, :]  # [..., 1, N, N]
    # Per-cell tallies over directions (a run is tallied at its first stone), reduced
    # once at the end: one reduction for all counts keeps the compiled program small.
    # "blocked_*" is tallied on the run's owner here and handed to the blocker below.
    names = SHAPES + ("five",)
    tally = {name: jnp.zeros(own.shape, jnp.int32) for name in names}
    lengths = {"two": k - 3, "three": k - 2, "four": k - 1}
    for d in DIRECTIONS:
        before_empty = _at(empty, d, -1)
        before_opp = _at(opp, d, -1)
        start = own & ~_at(own, d, -1)  # first stone of a maximal run
        # prefix[t]: own stones on the t cells from each cell on (t = 1 .. k).
        prefix = [None, own]
        for t in range(1, k):
            prefix.append(prefix[-1] & _at(own, d, t))
        # A run of exactly n from its first stone: n own stones, then none.
        exact = {n: start & prefix[n] & ~_at(own, d, n) for n in range(1, k + 1)}
        five = exact[k] if rule == "standard" else start & prefix[k]
        tally["five"] = tally["five"] + five
        for name, n in lengths.items():
            if n < 1:
                continue
            runs = exact[n]  # runs of length n, at their first stone
            after_empty = _at(empty, d, n)
            tally[f"open_{name}"] = tally[f"open_{name}"] + (runs & before_empty & after_empty)
            if name != "two":
                half = runs & (before_empty ^ after_empty)
                blocked = runs & (before_opp | _at(opp, d, n))
                tally[f"half_{name}"] = tally[f"half_{name}"] + half
                tally[f"blocked_{name}"] = tally[f"blocked_{name}"] + blocked
    planes = jnp.stack([tally[name] for name in names], axis=-3)  # [..., 2, S + 1, N, N]
    totals = jnp.sum(planes, axis=(-2, -1))  # [..., 2, NUM_SHAPES + 1]
    # A run blocked by the opponent counts for the opponent: swap the player axis.
    shapes = jnp.stack(
        [
            totals[..., ::-1, i] if name.startswith("blocked_") else totals[..., i]
            for i, name in enumerate(SHAPES)
        ],
        axis=-1,
    )
    return shapes, totals[..., NUM_SHAPES]


@functools.partial(jax.jit, static_argnames=("k",))
def shape_counts(board, k: int) -> jax.Array:
    """Run-shape counts for both players: ``[..., 2, NUM_SHAPES]`` int32.

    ``[..., p, s]`` counts shape ``SHAPES[s]`` for player ``p`` (0 black, 1 white);
    definitions in the module docstring (maximal runs; two / three / four = length
    k-3 / k-2 / k-1; open = both end cells empty, half = one; blocked_* = opponent
    runs with an end cell holding p's stone). The shapes take no rule: under
    ``standard`` a run counts as open even where extending it at one end would make an
    overline (``X.XXXX.`` for k=5 holds an open four; `four_threats` with the rule finds
    the one real four there).
    """
    _check(k)
    return _run_stats(board, k, "freestyle")[0]


def _weight_vector(weights: Mapping[str, float] | None) -> jax.Array:
    """``[1 + NUM_SHAPES]`` float32 in `_WEIGHT_KEYS` order; missing keys default."""
    weights = {} if weights is None else dict(weights)
    unknown = set(weights) - set(_WEIGHT_KEYS)
    if unknown:
        raise ValueError(
            f"unknown pattern weights {sorted(unknown)}; known: {', '.join(_WEIGHT_KEYS)}"
        )
    merged = {**DEFAULT_PATTERN_WEIGHTS, **weights}
    return jnp.stack([jnp.asarray(merged[key], jnp.float32) for key in _WEIGHT_KEYS])


def pattern_score(
    board, player, k: int, rule: str = "freestyle", weights: Mapping[str, float] | None = None
) -> jax.Array:
    """Seed 001's rule-based evaluation ``f(player) - f(opponent)``: ``[...]`` float32.

    ``f(p) = sum_s count_s(p) * weight_s`` over "five" (winning runs under ``rule``)
    and `SHAPES` (counted without the rule, see `shape_counts`). ``weights`` overrides
    entries of `DEFAULT_PATTERN_WEIGHTS` (keys
    "five" and the shape names); its values may be traced, so sweeping them does not
    recompile.
    """
    _check(k, rule)
    return _pattern_score(board, player, _weight_vector(weights), k, rule)


@functools.partial(jax.jit, static_argnames=("k", "rule"))
def _pattern_score(board, player, w, k: int, rule: str) -> jax.Array:
    shapes, fives = _run_stats(board, k, rule)
    features = jnp.concatenate([fives[..., None], shapes], axis=-1).astype(jnp.float32)
    f = jnp.sum(features * w, axis=-1)  # [..., 2]
    diff = f[..., 0] - f[..., 1]
    return jnp.where(jnp.asarray(player) == 0, diff, -diff)


# ------------------------------------------------------------------ move scores
def _placement_value(own, empty, k: int, rule: str, w: jax.Array) -> jax.Array:
    """Value of the runs a stone on each cell would make, summed over directions.

    ``own`` ``[..., P, N, N]`` bool, ``empty`` broadcastable to it; returns float32 of
    ``own``'s shape."""
    value = jnp.zeros(own.shape, jnp.float32)
    wt = dict(zip(_WEIGHT_KEYS, w))
    for d in DIRECTIONS:
        ends = jnp.zeros(own.shape, jnp.int32)  # empty end cells of the new run
        sides = []
        for sign in (1, -1):
            side = _run_beside(own, d, sign, k)
            # The end cell is 1 + side steps away; only needed while the run < k.
            open_end = jnp.zeros(own.shape, jnp.bool_)
            for n in range(k - 1):
                open_end = open_end | ((side == n) & _at(empty, d, sign * (n + 1)))
            ends = ends + open_end
            sides.append(side)
        run = 1 + sides[0] + sides[1]
        zero = jnp.float32(0)
        v = jnp.where(ends == 2, jnp.where(run == k - 3, wt["open_two"], zero), zero)
        for name, n in (("three", k - 2), ("four", k - 1)):
            shaped = jnp.where(
                ends == 2, wt[f"open_{name}"], jnp.where(ends == 1, wt[f"half_{name}"], zero)
            )
            v = jnp.where(run == n, shaped, v)
        v = jnp.where(is_winning_run(run, k, rule), wt["five"], v)
        value = value + v
    return value


def move_scores(
    board, player, k: int, rule: str = "freestyle", weights: Mapping[str, float] | None = None
) -> jax.Array:
    """Attack plus defence value of each empty cell for ``player``: ``[..., N, N]``
    float32, ``-inf`` on occupied cells.

    For each direction, the consecutive run a stone on the cell would make (the cell
    plus the adjacent stones on both sides) is valued with the pattern weights: "five"
    if it wins under ``rule``, else open / half four or three or open two by its
    length and its empty end cells, else 0. Attack sums this over directions for
    ``player``'s stone; defence is the same sum for the opponent's stone on that cell.
    """
    _check(k, rule)
    return _move_scores(board, player, _weight_vector(weights), k, rule)


@functools.partial(jax.jit, static_argnames=("k", "rule"))
def _move_scores(board, player, w, k: int, rule: str) -> jax.Array:
    own, opp, empty = _planes(board, player)
    both = jnp.stack([own, opp], axis=-3)  # [..., 2, N, N]: attack, defence
    value = _placement_value(both, empty[..., None, :, :], k, rule, w)
    return jnp.where(empty, jnp.sum(value, axis=-3), -jnp.inf)
