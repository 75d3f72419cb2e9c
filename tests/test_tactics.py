"""Tests of gomoku_jax.tactics: hand-made positions, a plain-Python reference on
random boards, jit / vmap / batching, and agreement with the game engine."""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gomoku_jax import tactics as T
from gomoku_jax.game import DIRECTIONS, Gomoku

RULES = ("freestyle", "standard")
SHAPE = {name: i for i, name in enumerate(T.SHAPES)}
CHAR = {".": 0, "X": 1, "O": 2}


# ------------------------------------------------------------------ board helpers
def board_of(n: int, *lines) -> np.ndarray:
    """An n x n board with patterns laid along directions.

    Each line is ``(row, col, direction, pattern)``: pattern characters ``.`` (empty),
    ``X`` (black), ``O`` (white) go to ``(row, col) + t * direction``.
    """
    b = np.zeros((n, n), np.int8)
    for r, c, (dr, dc), pattern in lines:
        for t, ch in enumerate(pattern):
            b[r + t * dr, c + t * dc] = CHAR[ch]
    return b


def grid(text: str) -> np.ndarray:
    """A board drawn as rows of space-separated ``.``, ``X``, ``O``."""
    rows = [line.split() for line in text.strip().splitlines()]
    return np.array([[CHAR[ch] for ch in row] for row in rows], np.int8)


def cells(mask) -> set[tuple[int, int]]:
    return {(int(r), int(c)) for r, c in zip(*np.nonzero(np.asarray(mask)))}


def along(r, c, d, offsets) -> set[tuple[int, int]]:
    return {(r + t * d[0], c + t * d[1]) for t in offsets}


# Start cells that keep a 9-cell line inside a 15x15 board in each direction.
STARTS = {(0, 1): (7, 3), (1, 0): (3, 7), (1, 1): (3, 3), (1, -1): (3, 11)}


def in_each_direction(n, pattern):
    """(direction, start cell, board) with ``pattern`` laid along each direction, away
    from the edges (the cells around the pattern are empty)."""
    for d in DIRECTIONS:
        r, c = STARTS[d]
        yield d, (r, c), board_of(n, (r, c, d, pattern))


# ---------------------------------------------------------- plain-Python reference
def _on(n, r, c):
    return 0 <= r < n and 0 <= c < n


def _side(board, r, c, d, sign, stone):
    """Stones equal to ``stone`` starting one step from (r, c) along sign * d."""
    n, count = len(board), 0
    r, c = r + sign * d[0], c + sign * d[1]
    while _on(n, r, c) and board[r][c] == stone:
        count += 1
        r, c = r + sign * d[0], c + sign * d[1]
    return count


def _wins(run, k, rule):
    return run >= k if rule == "freestyle" else run == k


def ref_winning_moves(board, player, k, rule):
    n, stone = len(board), player + 1
    out = np.zeros((n, n), bool)
    for r, c in itertools.product(range(n), repeat=2):
        if board[r][c] == 0:
            for d in DIRECTIONS:
                run = 1 + _side(board, r, c, d, 1, stone) + _side(board, r, c, d, -1, stone)
                out[r, c] |= _wins(run, k, rule)
    return out


# Seed 000, section 4.5, written out by hand; other k use the documented generalisation.
SEED_THREES = {".XXX.": (0, 4), ".X.XX.": (2,), ".XX.X.": (3,)}


def ref_three_patterns(k):
    if k == 5:
        return SEED_THREES
    m = k - 2
    pats = {"." + "X" * m + ".": (0, m + 1)}
    for a in range(1, m):
        pats["." + "X" * a + "." + "X" * (m - a) + "."] = (a + 1,)
    return pats


def _window(board, r, c, d, length):
    """Values of the ``length`` cells from (r, c) along d, or None if it leaves the board."""
    n = len(board)
    out = []
    for t in range(length):
        rr, cc = r + t * d[0], c + t * d[1]
        if not _on(n, rr, cc):
            return None
        out.append(board[rr][cc])
    return out


def _value(board, r, c):
    """Cell value, or None off the board."""
    return board[r][c] if _on(len(board), r, c) else None


def ref_open_threes(board, player, k):
    n, stone = len(board), player + 1
    consecutive = broken = 0
    blocks = np.zeros((n, n), bool)
    for (pattern, offsets), first in zip(ref_three_patterns(k).items(), itertools.count()):
        want = [stone if ch == "X" else 0 for ch in pattern]
        for d in DIRECTIONS:
            for r, c in itertools.product(range(n), repeat=2):
                if _window(board, r, c, d, len(pattern)) == want:
                    if first == 0:
                        consecutive += 1
                    else:
                        broken += 1
                    for t in offsets:
                        blocks[r + t * d[0], c + t * d[1]] = True
    return consecutive, broken, blocks


def ref_fours(board, player, k, rule):
    n, stone = len(board), player + 1
    count = open_count = 0
    moves = np.zeros((n, n), bool)
    for d in DIRECTIONS:
        for r, c in itertools.product(range(n), repeat=2):
            before = _value(board, r - d[0], c - d[1])
            win = _window(board, r, c, d, k)
            if win is not None and win.count(stone) == k - 1 and win.count(0) == 1:
                after = _value(board, r + k * d[0], c + k * d[1])
                if rule == "freestyle" or (before != stone and after != stone):
                    count += 1
                    t = win.index(0)
                    moves[r + t * d[0], c + t * d[1]] = True
            win = _window(board, r, c, d, k + 1)
            if win == [0] + [stone] * (k - 1) + [0]:
                after = _value(board, r + (k + 1) * d[0], c + (k + 1) * d[1])
                if rule == "freestyle" or (before != stone and after != stone):
                    open_count += 1
    return count, moves, open_count


def ref_threat_moves(board, player, k, rule):
    """[3, n, n]: win, four directions, three directions of a stone on each empty cell,
    found by placing it and reading every window of k cells through it."""
    n, stone = len(board), player + 1
    out = np.zeros((3, n, n), np.int64)
    out[0] = ref_winning_moves(board, player, k, rule)
    for r, c in itertools.product(range(n), repeat=2):
        if board[r][c] != 0:
            continue
        after = [row[:] for row in board]
        after[r][c] = stone
        for d in DIRECTIONS:
            best = 0  # 3: a five in this direction, 2: a four, 1: a three
            for t in range(k):  # the window starting t cells before (r, c)
                r0, c0 = r - t * d[0], c - t * d[1]
                win = _window(after, r0, c0, d, k)
                if win is None or win.count(stone) + win.count(0) != k:
                    continue
                if rule == "standard" and stone in (_value(after, r0 - d[0], c0 - d[1]),
                                                    _value(after, r0 + k * d[0], c0 + k * d[1])):
                    continue
                best = max(best, win.count(stone) - (k - 3))
            if best in (1, 2):  # a direction counts once, at its best shape
                out[3 - best, r, c] += 1
    return out


def ref_runs(board, k, rule):
    """Shape counts [2, 7] and five counts [2] from maximal runs, walked cell by cell."""
    n = len(board)
    shapes = np.zeros((2, len(T.SHAPES)), np.int64)
    fives = np.zeros(2, np.int64)
    names = {k - 3: "two", k - 2: "three", k - 1: "four"}
    for d in DIRECTIONS:
        for r, c in itertools.product(range(n), repeat=2):
            stone = board[r][c]
            if stone == 0 or _value(board, r - d[0], c - d[1]) == stone:
                continue  # not the first stone of a run
            length = 1 + _side(board, r, c, d, 1, stone)
            p = stone - 1
            ends = [
                _value(board, r - d[0], c - d[1]),
                _value(board, r + length * d[0], c + length * d[1]),
            ]
            n_empty = ends.count(0)
            if _wins(length, k, rule):
                fives[p] += 1
            name = names.get(length) if length >= 1 else None
            if name is None:
                continue
            if n_empty == 2:
                shapes[p, SHAPE[f"open_{name}"]] += 1
            elif n_empty == 1 and name != "two":
                shapes[p, SHAPE[f"half_{name}"]] += 1
            if name != "two" and (3 - stone) in ends:
                shapes[1 - p, SHAPE[f"blocked_{name}"]] += 1
    return shapes, fives


def ref_pattern_score(board, player, k, rule, weights=None):
    w = {**T.DEFAULT_PATTERN_WEIGHTS, **(weights or {})}
    shapes, fives = ref_runs(board, k, rule)
    f = [fives[p] * w["five"] + sum(shapes[p, i] * w[s] for i, s in enumerate(T.SHAPES))
         for p in range(2)]
    return f[player] - f[1 - player]


def ref_move_scores(board, player, k, rule):
    n, w = len(board), T.DEFAULT_PATTERN_WEIGHTS
    out = np.full((n, n), -np.inf)
    for r, c in itertools.product(range(n), repeat=2):
        if board[r][c] != 0:
            continue
        total = 0.0
        for stone in (player + 1, 2 - player):
            for d in DIRECTIONS:
                back = _side(board, r, c, d, -1, stone)
                fwd = _side(board, r, c, d, 1, stone)
                run = 1 + back + fwd
                ends = [
                    _value(board, r - (back + 1) * d[0], c - (back + 1) * d[1]),
                    _value(board, r + (fwd + 1) * d[0], c + (fwd + 1) * d[1]),
                ].count(0)
                if _wins(run, k, rule):
                    total += w["five"]
                elif run == k - 1 and ends:
                    total += w["open_four" if ends == 2 else "half_four"]
                elif run == k - 2 and ends:
                    total += w["open_three" if ends == 2 else "half_three"]
                elif run == k - 3 and ends == 2:
                    total += w["open_two"]
        out[r, c] = total
    return out


# --------------------------------------------------------------- random boards
# (size, k, rule): tic-tac-toe, k = 4, k = 5 on seed 000's 9x9 and on 15x15, k = 6.
# Every (function, size, k, rule) is one compilation, which is most of the cost (the
# reference is cheap), so the default run takes each size once, alternating the
# rules, and the rest of the matrix is marked slow (`pytest -m slow`).
FAST = [(3, 3, "standard"), (6, 4, "freestyle"), (9, 5, "standard"), (15, 5, "freestyle")]
SLOW = [(3, 3, "freestyle"), (6, 4, "standard"), (9, 5, "freestyle"), (15, 5, "standard"),
        (11, 6, "freestyle"), (11, 6, "standard")]


def cases(with_rule: bool = True):
    """pytest params over FAST and (marked slow) SLOW: (n, k, rule) or (n, k)."""
    params, seen = [], set()
    for group, marks in ((FAST, ()), (SLOW, (pytest.mark.slow,))):
        for n, k, rule in group:
            values = (n, k, rule) if with_rule else (n, k)
            if values in seen:
                continue
            seen.add(values)
            name = f"{n}x{n}-k{k}" + (f"-{rule}" if with_rule else "")
            params.append(pytest.param(*values, marks=marks, id=name))
    return params


@functools.lru_cache(maxsize=None)
def random_batch(n: int, k: int):
    """Boards [B, N, N] int8 with per-board random fill densities (many long runs and
    overlines where one colour dominates), and a random player per board [B]."""
    rng = np.random.default_rng(1000 * n + k)
    batch = 256 if n <= 9 else 96
    probs = rng.dirichlet([1.0, 1.0, 1.0], size=batch)  # empty, black, white
    u = rng.random((batch, n, n))
    boards = (u[..., None] >= np.cumsum(probs, -1)[:, None, None, :2]).sum(-1)
    players = rng.integers(0, 2, batch)
    return boards.astype(np.int8), players.astype(np.int32)


# =================================================================== winning_moves
@pytest.mark.parametrize("player,stone", [(0, "X"), (1, "O")])
def test_winning_moves_open_four_each_direction(player, stone):
    for d, (r, c), b in in_each_direction(15, stone * 4):
        for rule in RULES:
            assert cells(T.winning_moves(b, player, 5, rule)) == along(r, c, d, (-1, 4))
            assert not cells(T.winning_moves(b, 1 - player, 5, rule))


def test_winning_moves_edges_and_corners():
    b = board_of(15, (0, 0, (0, 1), "XXXX"))
    assert cells(T.winning_moves(b, 0, 5)) == {(0, 4)}
    b = board_of(15, (0, 0, (1, 1), "XXXX"))
    assert cells(T.winning_moves(b, 0, 5)) == {(4, 4)}
    b = board_of(15, (0, 14, (1, -1), "XXXX"))
    assert cells(T.winning_moves(b, 0, 5)) == {(4, 10)}
    b = board_of(15, (11, 14, (1, 0), "XXXX"))  # bottom edge, vertical
    assert cells(T.winning_moves(b, 0, 5)) == {(10, 14)}
    b = board_of(15, (14, 10, (-1, 1), "XXXX"))  # anti-diagonal off the bottom edge
    assert cells(T.winning_moves(b, 0, 5, "standard")) == {(10, 14)}


def test_winning_moves_broken_and_blocked():
    b = board_of(15, (7, 2, (0, 1), ".XX.XX."))
    assert cells(T.winning_moves(b, 0, 5)) == {(7, 5)}
    b = board_of(15, (7, 2, (1, 1), ".X.XXX."))
    assert cells(T.winning_moves(b, 0, 5)) == {(9, 4)}
    b = board_of(15, (7, 2, (0, 1), "OXXXX."))
    assert cells(T.winning_moves(b, 0, 5)) == {(7, 7)}
    b = board_of(15, (7, 2, (0, 1), "OXXXXO"))
    assert not cells(T.winning_moves(b, 0, 5))
    b = board_of(15, (7, 2, (0, 1), "XXX.O"))
    assert not cells(T.winning_moves(b, 0, 5))


def test_winning_moves_overlines_by_rule():
    b = board_of(15, (7, 2, (0, 1), "XXX.XX"))  # the gap makes six
    assert cells(T.winning_moves(b, 0, 5, "freestyle")) == {(7, 5)}
    assert not cells(T.winning_moves(b, 0, 5, "standard"))
    b = board_of(15, (3, 3, (1, 0), ".XXXX.X"))  # top end: five; bottom end: six
    assert cells(T.winning_moves(b, 0, 5, "freestyle")) == {(3, 3), (8, 3)}
    assert cells(T.winning_moves(b, 0, 5, "standard")) == {(3, 3)}
    b = board_of(15, (3, 3, (1, 0), "X.XXXX."))  # either end makes an overline
    assert cells(T.winning_moves(b, 0, 5, "freestyle")) == {(4, 3), (9, 3)}
    assert cells(T.winning_moves(b, 0, 5, "standard")) == {(9, 3)}


def test_winning_moves_small_k():
    b = grid("""
        X X .
        O O .
        . . .
    """)
    for rule in RULES:
        assert cells(T.winning_moves(b, 0, 3, rule)) == {(0, 2)}
        assert cells(T.winning_moves(b, 1, 3, rule)) == {(1, 2)}
    b = grid("""
        X . O
        . X .
        O . .
    """)
    assert cells(T.winning_moves(b, 0, 3)) == {(2, 2)}
    assert not cells(T.winning_moves(b, 1, 3))
    b = board_of(6, (2, 0, (0, 1), "XXX.X."))
    assert cells(T.winning_moves(b, 0, 4, "freestyle")) == {(2, 3)}  # makes five
    assert not cells(T.winning_moves(b, 0, 4, "standard"))
    b = board_of(6, (0, 5, (1, -1), ".OOO"))  # anti-diagonal from the top-right corner
    assert cells(T.winning_moves(b, 1, 4, "standard")) == {(0, 5), (4, 1)}


# ===================================================================== open threes
def test_seed_open_three_patterns():
    assert dict(T.open_three_patterns(5)) == SEED_THREES
    assert dict(T.open_three_patterns(4)) == {".XX.": (0, 3), ".X.X.": (2,)}
    assert dict(T.open_three_patterns(3)) == {".X.": (0, 2)}


@pytest.mark.parametrize(
    "pattern,consecutive,broken,block_offsets",
    [
        (".XXX.", 1, 0, (0, 4)),
        ("..XXX..", 1, 0, (1, 5)),  # one instance: the window only looks at 5 cells
        (".X.XX.", 0, 1, (2,)),
        (".XX.X.", 0, 1, (3,)),
        (".X.XX.X.", 0, 2, (2, 5)),  # .X.XX. and .XX.X. overlapping
        (".X.XX.XX.", 0, 1, (2,)),  # .XX.XX is no three
        ("X.XXX.", 1, 0, (1, 5)),  # context beyond the window is not looked at
        ("OXXX.", 0, 0, ()),
        (".XXX.O", 1, 0, (0, 4)),
        (".XXXX.", 0, 0, ()),
        (".X.X.X.", 0, 0, ()),
        (".XO.XX.", 0, 0, ()),
    ],
)
def test_open_threes_shapes_each_direction(pattern, consecutive, broken, block_offsets):
    for d, (r, c), b in in_each_direction(15, pattern):
        got = T.open_threes(b, 0)
        assert (int(got.consecutive), int(got.broken)) == (consecutive, broken), d
        assert int(got.count) == consecutive + broken
        assert cells(got.blocks) == along(r, c, d, block_offsets)
        assert cells(T.open_three_blocks(b, 0)) == cells(got.blocks)
        assert int(T.open_threes(b, 1).count) == 0  # white has none
        swapped = np.where(b == 0, 0, 3 - b).astype(np.int8)
        assert int(T.open_threes(swapped, 1).count) == consecutive + broken


def test_open_threes_need_empty_cells_on_the_board():
    b = board_of(15, (7, 0, (0, 1), "XXX.."))  # the left end is off the board
    assert int(T.open_threes(b, 0).count) == 0
    b = board_of(15, (7, 0, (0, 1), ".XXX."))  # fits exactly at the edge
    assert cells(T.open_threes(b, 0).blocks) == {(7, 0), (7, 4)}
    b = board_of(15, (0, 10, (1, 1), ".X.XX"))  # would need (5, 15)
    assert int(T.open_threes(b, 0).count) == 0


def test_open_threes_small_k():
    b = board_of(6, (1, 1, (1, 0), ".XX."))  # k = 4: the three is two stones
    got = T.open_threes(b, 0, k=4)
    assert (int(got.consecutive), int(got.broken)) == (1, 0)
    assert cells(got.blocks) == {(1, 1), (4, 1)}
    b = grid("""
        . . . . . .
        . . . . . .
        . X . X . .
        . . . . . .
        . . . . X .
        . . . . . .
    """)
    got = T.open_threes(b, 0, k=4)
    # Row 2 reads .X.X. from (2,0); (4,4) shares no line with another stone.
    assert (int(got.consecutive), int(got.broken)) == (0, 1)
    assert cells(got.blocks) == {(2, 2)}
    b = grid("""
        . . .
        . X .
        . . .
    """)
    got = T.open_threes(b, 0, k=3)  # .X. in all four directions
    assert (int(got.consecutive), int(got.broken)) == (4, 0)
    assert cells(got.blocks) == {(r, c) for r in range(3) for c in range(3)} - {(1, 1)}


def test_centrality_and_most_central():
    np.testing.assert_array_equal(T.centrality(3), [[2, 1, 2], [1, 0, 1], [2, 1, 2]])
    np.testing.assert_array_equal(T.centrality(4)[0], [3, 2, 2, 3])
    b = board_of(15, (7, 1, (0, 1), ".XXX."))  # ends (7,1) and (7,5): (7,5) is closer
    assert int(T.most_central(T.open_three_blocks(b, 0))) == 7 * 15 + 5
    b = board_of(15, (3, 7, (1, 0), ".XXX."))  # ends (3,7) and (7,7): the centre
    assert int(T.most_central(T.open_three_blocks(b, 0))) == 7 * 15 + 7
    masks = np.zeros((2, 5, 5), bool)
    masks[1, 0, 2] = masks[1, 2, 0] = True  # equally central: the lower action
    np.testing.assert_array_equal(T.most_central(masks), [-1, 2])


# ========================================================================== fours
@pytest.mark.parametrize(
    "pattern,count,open_count,move_offsets",
    [
        ("OXXX.X", 1, 0, (4,)),
        (".XXXX.", 2, 1, (0, 5)),
        ("XX.XX", 1, 0, (2,)),
        ("X.XXX.", 1, 0, (1,)),  # .XXX. is not a four; the end cell of X.XXX makes 4
        ("OXXXX.", 1, 0, (5,)),
        ("OXXXXO", 0, 0, ()),
        ("XX.XO", 0, 0, ()),
        ("XXX..", 0, 0, ()),
    ],
)
def test_fours_each_direction(pattern, count, open_count, move_offsets):
    for d, (r, c), b in in_each_direction(15, pattern):
        for rule in RULES:
            got = T.four_threats(b, 0, 5, rule)
            assert (int(got.count), int(got.open_count)) == (count, open_count), (d, rule)
            assert cells(got.moves) == along(r, c, d, move_offsets)


def test_fours_overlines_by_rule():
    b = board_of(15, (7, 2, (0, 1), "XXX.XX"))  # windows XXX.X and XX.XX; the gap makes six
    free, std = T.four_threats(b, 0, 5, "freestyle"), T.four_threats(b, 0, 5, "standard")
    assert int(free.count) == 2 and cells(free.moves) == {(7, 5)}
    assert int(std.count) == 0 and not cells(std.moves)
    b = board_of(15, (2, 2, (1, 1), ".XXXX.X"))
    free, std = T.four_threats(b, 0, 5, "freestyle"), T.four_threats(b, 0, 5, "standard")
    assert (int(free.count), int(free.open_count)) == (3, 1)
    assert (int(std.count), int(std.open_count)) == (1, 0)  # only the top-left end wins
    assert cells(std.moves) == {(2, 2)}
    b = board_of(6, (0, 0, (1, 0), ".XXX.."))  # k = 4 open four at the edge
    got = T.four_threats(b, 0, 4, "standard")
    assert (int(got.count), int(got.open_count)) == (2, 1)


# =================================================================== shape counts
def vector(**counts):
    v = np.zeros(len(T.SHAPES), np.int64)
    for name, n in counts.items():
        v[SHAPE[name]] = n
    return v


@pytest.mark.parametrize(
    "pattern,black,white",
    [
        (".XX.", vector(open_two=1), vector()),
        ("OXX.", vector(), vector()),  # a half two is not a shape
        (".XXX.", vector(open_three=1), vector()),
        ("OXXX.", vector(half_three=1), vector(blocked_three=1)),
        ("OXXXO", vector(), vector(blocked_three=1)),  # dead, blocked once
        (".XXXX.", vector(open_four=1), vector()),
        ("OXXXX.", vector(half_four=1), vector(blocked_four=1)),
        ("OXXXXO", vector(), vector(blocked_four=1)),
        (".XXXXX.", vector(), vector()),  # fives are not shapes
        (".XXXXXX.", vector(), vector()),
        (".XXX.XX.", vector(open_three=1, open_two=1), vector()),
        ("XOOOX", vector(blocked_three=1), vector()),
        (".XOOO.", vector(blocked_three=1), vector(half_three=1)),
    ],
)
def test_shape_counts_each_direction(pattern, black, white):
    for d, _, b in in_each_direction(15, pattern):
        got = np.asarray(T.shape_counts(b, 5))
        assert got.shape == (2, len(T.SHAPES))
        np.testing.assert_array_equal(got[0], black, err_msg=str(d))
        np.testing.assert_array_equal(got[1], white, err_msg=str(d))


def test_shape_counts_edges():
    b = board_of(15, (0, 0, (0, 1), "XXXX."))  # the left end is off the board
    np.testing.assert_array_equal(T.shape_counts(b, 5)[0], vector(half_four=1))
    b = board_of(15, (0, 0, (0, 1), "XXX.."))
    np.testing.assert_array_equal(T.shape_counts(b, 5)[0], vector(half_three=1))
    b = board_of(15, (14, 0, (-1, 1), "XX"))  # the corner: closed at the start
    np.testing.assert_array_equal(T.shape_counts(b, 5)[0], vector())
    b = board_of(15, (13, 1, (-1, 1), "XX"))
    np.testing.assert_array_equal(T.shape_counts(b, 5)[0], vector(open_two=1))


def test_shape_counts_small_k():
    # k = 3: three = one stone, four = two stones, no two.
    b = grid("""
        X . .
        . . .
        . . .
    """)
    np.testing.assert_array_equal(T.shape_counts(b, 3)[0], vector(half_three=3))
    b = grid("""
        . . .
        . X .
        . . .
    """)
    np.testing.assert_array_equal(T.shape_counts(b, 3)[0], vector(open_three=4))
    b = grid("""
        X X O
        . . .
        . . .
    """)
    got = np.asarray(T.shape_counts(b, 3))
    # Black: row XX is a four closed by the edge and O (dead; white blocked it).
    # Single stones: (0,0) half in column and diagonal, dead on the anti-diagonal
    # (both ends off the board); (0,1) half in column, diagonal and anti-diagonal.
    # The row O is a three closed by X and the edge: black blocked it.
    np.testing.assert_array_equal(got[0], vector(half_three=5, blocked_three=1))
    # White (0,2): half in column and anti-diagonal, dead on the diagonal.
    np.testing.assert_array_equal(got[1], vector(half_three=2, blocked_four=1))
    # k = 4 on 6x6: two = one stone.
    b = board_of(6, (2, 2, (0, 1), "X"))
    np.testing.assert_array_equal(T.shape_counts(b, 4)[0], vector(open_two=4))


# ================================================================== pattern score
def test_pattern_score_by_hand():
    b = board_of(15, (2, 2, (0, 1), ".XXX."), (10, 10, (1, 0), ".OO."))
    assert float(T.pattern_score(b, 0, 5)) == 1000 - 100
    assert float(T.pattern_score(b, 1, 5)) == 100 - 1000
    assert float(T.pattern_score(b, 0, 5, weights={"open_three": 5.0})) == 5 - 100
    b = board_of(15, (2, 2, (1, 1), ".XXXXX."), (10, 5, (0, 1), "OXXXX."))
    # Black: a five and a half four; white has blocked that four.
    assert float(T.pattern_score(b, 0, 5)) == 100_000 + 1_000
    weights = {"blocked_four": 7.0}
    assert float(T.pattern_score(b, 1, 5, weights=weights)) == 7 - 101_000
    b = board_of(15, (2, 2, (1, 1), ".XXXXXX."))  # an overline
    assert float(T.pattern_score(b, 0, 5, "freestyle")) == 100_000
    assert float(T.pattern_score(b, 0, 5, "standard")) == 0


def test_pattern_score_weights_are_traced():
    b = board_of(15, (2, 2, (0, 1), ".XXX."))
    f = jax.jit(lambda w: T.pattern_score(b, 0, 5, weights={"open_three": w}))
    assert float(f(2.0)) == 2.0 and float(f(3.0)) == 3.0
    with pytest.raises(ValueError, match="unknown pattern weights"):
        T.pattern_score(b, 0, 5, weights={"open_3": 1.0})


def test_move_scores_by_hand():
    b = board_of(9, (4, 2, (0, 1), ".XXXX."))
    s = np.asarray(T.move_scores(b, 0, 5))
    # The ends: black's five; a white stone there would make no run of 2 or more.
    assert s[4, 2] == s[4, 7] == 100_000
    assert np.isneginf(s[4, 3]) and s[0, 0] == 0
    # (3,3): open twos with (4,3) in the column and (4,4) on the diagonal.
    assert s[3, 3] == 200
    assert np.array_equal(s, np.asarray(T.move_scores(b, 1, 5)))  # attack + defence


def test_invalid_arguments():
    b = np.zeros((5, 5), np.int8)
    with pytest.raises(ValueError, match="rule must be one of freestyle, standard, got 'renju'"):
        T.winning_moves(b, 0, 5, "renju")
    with pytest.raises(ValueError, match="k must be an integer >= 3, got 2"):
        T.shape_counts(b, 2)


def test_k_larger_than_the_board_does_not_crash():
    b = np.ones((4, 4), np.int8)
    assert not np.any(T.winning_moves(b, 0, 6))
    assert int(T.open_threes(b, 0, 6).count) == 0
    assert int(T.four_threats(b, 0, 6).count) == 0
    assert not np.any(T.shape_counts(b, 6))


# ============================================================ brute force on random
@pytest.mark.parametrize("n,k,rule", cases())
def test_winning_moves_and_fours_match_reference(n, k, rule):
    boards, players = random_batch(n, k)
    wins = np.asarray(T.winning_moves(boards, players, k, rule))
    fours = T.four_threats(boards, players, k, rule)
    assert wins.any(), "the random boards should hold some winning moves"
    for i, (b, p) in enumerate(zip(boards.tolist(), players.tolist())):
        expected = ref_winning_moves(b, p, k, rule)
        np.testing.assert_array_equal(wins[i], expected, err_msg=f"board {i}")
        count, moves, open_count = ref_fours(b, p, k, rule)
        assert int(fours.count[i]) == count, i
        assert int(fours.open_count[i]) == open_count, i
        np.testing.assert_array_equal(fours.moves[i], moves, err_msg=f"board {i}")
        np.testing.assert_array_equal(moves, expected)  # four cells are the wins


@pytest.mark.parametrize("n,k,rule", cases())
def test_threat_moves_match_reference(n, k, rule):
    boards, players = random_batch(n, k)
    got = np.asarray(T.threat_moves(boards, players, k, rule))
    assert got.shape == (len(boards), 3, n, n)
    assert (got[:, 1] >= 2).any() and (got[:, 2] > 0).any(), "want double fours and threes"
    for i, (b, p) in enumerate(zip(boards.tolist(), players.tolist())):
        np.testing.assert_array_equal(got[i], ref_threat_moves(b, p, k, rule),
                                      err_msg=f"board {i}")


def test_threat_moves_by_hand():
    board = grid("""
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . X . .
        . . . . . . X . .
        . . X X X . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
    """)
    five, fours, threes = np.asarray(T.threat_moves(board, 0, 5))
    assert not five.any()
    # XXX. then the cell: a four along the row through (4, 5) and (4, 6) (and at the
    # far end, (4, 0) and (4, 1)); (4, 6) also makes a three down its column: a
    # four-three.
    assert cells(fours > 0) == {(4, 0), (4, 1), (4, 5), (4, 6)}
    assert fours[4, 6] == 1 and threes[4, 6] == 1
    assert threes[4, 5] == 0  # its row is a four, counted once, as the better shape
    assert threes[1, 6] == 1 and threes[5, 6] == 1  # X X above: a three down the column
    # White sees nothing of its own; the same cells block black.
    assert not np.asarray(T.threat_moves(board, 1, 5)).any()
    board[4, 5] = CHAR["O"]  # blocked on the right: (4, 6) keeps only its column three
    _, fours, threes = np.asarray(T.threat_moves(board, 0, 5))
    assert fours[4, 6] == 0 and threes[4, 6] == 1
    assert cells(fours > 0) == {(4, 0), (4, 1)}


@pytest.mark.parametrize("n,k", cases(with_rule=False))
def test_open_threes_match_reference(n, k):
    boards, players = random_batch(n, k)
    got = T.open_threes(boards, players, k)
    assert int(got.count.sum()) > 0
    for i, (b, p) in enumerate(zip(boards.tolist(), players.tolist())):
        consecutive, broken, blocks = ref_open_threes(b, p, k)
        assert (int(got.consecutive[i]), int(got.broken[i])) == (consecutive, broken), i
        assert int(got.count[i]) == consecutive + broken
        np.testing.assert_array_equal(got.blocks[i], blocks, err_msg=f"board {i}")


@pytest.mark.parametrize("n,k,rule", cases())
def test_shapes_and_scores_match_reference(n, k, rule):
    boards, players = random_batch(n, k)
    shapes = np.asarray(T.shape_counts(boards, k))
    scores = np.asarray(T.pattern_score(boards, players, k, rule))
    moves = np.asarray(T.move_scores(boards, players, k, rule))
    assert shapes.shape == (len(boards), 2, len(T.SHAPES))
    assert shapes.sum() > 0
    for i, (b, p) in enumerate(zip(boards.tolist(), players.tolist())):
        ref_shapes, _ = ref_runs(b, k, rule)
        np.testing.assert_array_equal(shapes[i], ref_shapes, err_msg=f"board {i}")
        assert scores[i] == ref_pattern_score(b, p, k, rule), i
        np.testing.assert_array_equal(moves[i], ref_move_scores(b, p, k, rule))


@pytest.mark.parametrize("n,k,rule", cases())
def test_winning_moves_agree_with_engine(n, k, rule):
    boards, players = random_batch(n, k)
    env = Gomoku(n, k, rule)
    wins = np.asarray(T.winning_moves(boards, players, k, rule))
    # Every (board, empty cell) pair: place the stone, ask the engine, in one call.
    g, r, c = np.nonzero(boards == 0)
    after = boards[g].copy()
    stones = (players[g] + 1).astype(np.int8)
    after[np.arange(len(g)), r, c] = stones
    engine = jax.jit(jax.vmap(env.wins_through))(after, r * n + c, stones)
    np.testing.assert_array_equal(np.asarray(engine), wins[g, r, c])
    assert wins.any() and not wins.all()


# =========================================================== jit / vmap / batching
def _all_outputs(boards, players, k, rule, names=None):
    """Every output of the module by name (only ``names`` if given)."""
    calls = {
        "wins": lambda: T.winning_moves(boards, players, k, rule),
        "threes": lambda: T.open_threes(boards, players, k),
        "fours": lambda: T.four_threats(boards, players, k, rule),
        "threats": lambda: T.threat_moves(boards, players, k, rule),
        "shapes": lambda: T.shape_counts(boards, k),
        "score": lambda: T.pattern_score(boards, players, k, rule),
        "moves": lambda: T.move_scores(boards, players, k, rule),
    }
    out = {}
    for name in names or calls:
        value = calls[name]()
        if isinstance(value, tuple):  # OpenThrees, Fours
            out.update({f"{name}.{field}": v for field, v in value._asdict().items()})
        else:
            out[name] = value
    return out


def test_batched_vmapped_and_single_calls_agree():
    # The batch of the reference tests (already compiled for) and one rule: batching
    # does not depend on it.
    n, k, rule = 9, 5, "standard"
    boards, players = random_batch(n, k)
    batched = _all_outputs(boards, players, k, rule)
    vmapped = jax.jit(jax.vmap(lambda b, p: _all_outputs(b, p, k, rule)))(boards, players)
    for name in batched:
        np.testing.assert_array_equal(vmapped[name], batched[name], err_msg=name)
    for i in range(8):
        single = _all_outputs(boards[i], int(players[i]), k, rule)
        for name, value in single.items():
            np.testing.assert_array_equal(batched[name][i], value, err_msg=name)


@pytest.mark.parametrize(
    "names",
    [
        pytest.param(("wins", "score"), id="some"),
        pytest.param(None, id="all", marks=pytest.mark.slow),
    ],
)
def test_several_batch_dims(names):
    n, k, rule = 9, 5, "standard"
    boards, players = random_batch(n, k)
    batched = _all_outputs(boards, players, k, rule, names)
    nested = _all_outputs(boards.reshape(-1, 4, n, n), players.reshape(-1, 4), k, rule, names)
    for name in batched:
        got = np.asarray(nested[name])
        assert got.shape[:2] == (len(boards) // 4, 4)
        np.testing.assert_array_equal(
            got.reshape(np.shape(batched[name])), batched[name], err_msg=name
        )


def test_scalar_player_broadcasts_over_batch():
    boards, _ = random_batch(9, 5)
    for player in (0, 1):
        per_board = jnp.full((len(boards),), player)
        np.testing.assert_array_equal(
            T.winning_moves(boards, player, 5), T.winning_moves(boards, per_board, 5)
        )
        np.testing.assert_array_equal(
            T.pattern_score(boards, player, 5), T.pattern_score(boards, per_board, 5)
        )
    # The score is antisymmetric in the player.
    np.testing.assert_array_equal(
        T.pattern_score(boards, 0, 5), -np.asarray(T.pattern_score(boards, 1, 5))
    )


@pytest.mark.parametrize("size, k, rule", [(9, 5, "freestyle"), (9, 5, "standard"),
                                           (7, 4, "freestyle")])
def test_threats_to_answer_is_whether_one_stone_answers_them_all(size, k, rule):
    # By definition, on random positions: 0 without a winning cell or open three; else 2
    # exactly when every defending stone leaves the player one of them.
    rng = np.random.default_rng(size + k)
    boards = []
    for _ in range(60):
        board = np.zeros(size * size, np.int8)
        black, white = rng.integers(2, 10), rng.integers(0, 4)  # often threats of black's
        near = [r * size + c for r in range(1, size - 1) for c in range(1, size - 1)
                if abs(r - size // 2) + abs(c - size // 2) <= 3]  # crowded near the centre
        cells = rng.choice(near, black + white, replace=False)
        board[cells[:black]] = 1
        board[cells[black:]] = 2
        boards.append(board.reshape(size, size))
    boards = jnp.asarray(np.stack(boards))
    got = np.asarray(T.threats_to_answer(boards, 0, k, rule))

    def threats(b):
        return (jnp.sum(T.winning_moves(b, 0, k, rule), axis=(-2, -1))
                + T.open_threes(b, 0, k).count)

    for board, count in zip(np.asarray(boards), got):
        empty = np.flatnonzero(board.reshape(-1) == 0)
        trials = np.repeat(board.reshape(1, -1), len(empty), axis=0)
        trials[np.arange(len(empty)), empty] = 2
        left = np.asarray(threats(jnp.asarray(trials.reshape(-1, size, size))))
        want = 0 if int(threats(jnp.asarray(board))) == 0 else 1 if (left == 0).any() else 2
        assert count == want
    assert set(got.tolist()) == {0, 1, 2}  # the positions try every case
