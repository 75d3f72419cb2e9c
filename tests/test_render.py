"""Text and SVG boards: parse what is drawn back and compare it with the game.

Most positions come from the plain NumPy reference engine (random games stopped at a
random ply or played to the end), so the expected boards, last moves and results do
not come from the code under test, and no JAX program has to be compiled for them.
A few named positions are played with the JAX engine's checked `Gomoku.play_moves`.
"""

import math
import re
import xml.etree.ElementTree as ET

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gomoku_jax import render
from gomoku_jax.game import Gomoku
from gomoku_jax.reference import NumpyGomoku

SYMBOL = {".": 0, "X": 1, "O": 2}
SIZES = [(3, 3), (9, 5), (15, 5), (19, 5)]


# ------------------------------------------------------------------------ positions
def _positions(size, k, count, seed):
    """``count`` random positions as ``(State, expected)`` from the reference engine;
    about half are finished games, the rest stop at a random ply."""
    env, ref = Gomoku(size, k), NumpyGomoku(size, k)
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        ref.reset()
        stop = size * size if i % 2 else int(rng.integers(0, size * size))
        while not ref.terminated and ref.move_count < stop:
            ref.step(int(rng.choice(ref.legal_actions())))
        state = env.from_board(
            ref.board, to_move=ref.current_player, last_action=ref.last_action
        ).replace(terminated=jnp.bool_(ref.terminated), winner=jnp.int32(ref.winner))
        if not ref.terminated:
            result = ("black", "white")[ref.current_player] + " to move"
        elif ref.winner < 0:
            result = "draw"
        else:
            result = ("black", "white")[ref.winner] + " wins"
        last = None if ref.last_action < 0 else divmod(ref.last_action, size)
        out.append((state, dict(board=ref.board.copy(), last=last, result=result,
                                moves=ref.move_count)))
    return out


# ----------------------------------------------------------------------------- text
def _parse_text(drawn, n, coordinates=True, status=True):
    """Board, last-move cell and status line back from `render.text`."""
    lines = drawn.splitlines()
    assert len(lines) == n + int(coordinates) + int(status)
    if coordinates:
        assert lines[0].split() == [str(c) for c in range(n)]
    rows = lines[int(coordinates) : int(coordinates) + n]
    board = np.zeros((n, n), np.int8)
    last = None
    for r, line in enumerate(rows):
        body = line
        if coordinates:
            label, body = line.split(maxsplit=1)
            assert int(label) == r
        assert not re.sub(r"[\sXO.\[\]]", "", body), f"stray characters in {line!r}"
        cells = re.findall(r"\[([XO.])\]|([XO.])", body)
        assert len(cells) == n, line
        for c, (marked, plain) in enumerate(cells):
            board[r, c] = SYMBOL[marked or plain]
            if marked:
                assert last is None, "two last-move markers"
                last = (r, c)
    return board, last, (lines[-1] if status else None)


@pytest.mark.parametrize("size, k", SIZES)
def test_text_board_round_trips(size, k):
    for state, want in _positions(size, k, 8, seed=size):
        drawn = render.text(state)
        board, last, status = _parse_text(drawn, size)
        np.testing.assert_array_equal(board, want["board"])
        assert last == want["last"]
        assert status.startswith(want["result"]) and "illegal" not in status
        assert f"moves: {want['moves']}" in status
        # Columns line up: each cell sits under the last digit of its column index,
        # in every row, marked or not.
        lines = drawn.splitlines()
        under = [m.end() - 1 for m in re.finditer(r"\d+", lines[0])]
        for r, line in enumerate(lines[1 : size + 1]):
            assert [line[p] for p in under] == [".XO"[v] for v in want["board"][r]]


def test_text_states_played_with_the_engine():
    env = Gomoku(9, 5)
    black = env.play_moves([(4, 0), (0, 0), (4, 1), (0, 1), (4, 2), (0, 2), (4, 3), (0, 3),
                            (4, 4)])
    board, last, status = _parse_text(render.text(black), 9)
    assert last == (4, 4) and board[4, 4] == 1
    assert status.startswith("black wins") and "moves: 9" in status and "X (4, 4)" in status
    white = env.play_moves([(8, 8), (2, 1), (8, 6), (3, 2), (7, 0), (4, 3), (6, 4), (5, 4),
                            (0, 8), (1, 0)])
    board, last, status = _parse_text(render.text(white), 9)
    assert last == (1, 0) and board[1, 0] == 2
    assert status.startswith("white wins") and "moves: 10" in status and "O (1, 0)" in status
    draw = Gomoku(3, 3).play_moves([(0, 0), (1, 1), (0, 2), (0, 1), (2, 1), (1, 2), (1, 0),
                                    (2, 0), (2, 2)])
    board, last, status = _parse_text(render.text(draw), 3)
    np.testing.assert_array_equal(board, [[1, 2, 1], [1, 2, 2], [2, 1, 1]])
    assert status.startswith("draw") and last == (2, 2)
    _, last, status = _parse_text(render.text(env.init()), 9)
    assert last is None and status.startswith("black to move") and "moves: 0" in status


def test_text_options_and_explicit_last_move():
    board = np.zeros((9, 9), np.int8)
    board[2, 3], board[6, 1], board[0, 8] = 1, 2, 1
    _, last, _ = _parse_text(render.text(board, last_action=6 * 9 + 1), 9)
    assert last == (6, 1)
    _, last, _ = _parse_text(render.text(board, last_action=(0, 8)), 9)
    assert last == (0, 8)
    _, last, _ = _parse_text(render.text(board, last_action=np.int32(2 * 9 + 3)), 9)
    assert last == (2, 3)
    got, last, status = _parse_text(render.text(board, show_coordinates=False), 9,
                                    coordinates=False)
    np.testing.assert_array_equal(got, board)
    assert last is None
    bare = render.text(board, show_coordinates=False).splitlines()[:9]
    assert not re.search(r"\d", "".join(bare))
    assert status.startswith("board only") and "stones: 3 (2 X, 1 O)" in status
    got, _, _ = _parse_text(render.text(board, show_status=False), 9, status=False)
    np.testing.assert_array_equal(got, board)
    # A state's own last move can be hidden (-1) or overridden.
    played = Gomoku(9, 5).play_moves([(4, 4), (3, 3)])
    assert _parse_text(render.text(played), 9)[1] == (3, 3)
    assert _parse_text(render.text(played, last_action=-1), 9)[1] is None
    assert _parse_text(render.text(played, last_action=(4, 4)), 9)[1] == (4, 4)


def test_text_takes_numpy_jax_and_list_boards():
    board = np.array([[1, 0, 2], [0, 1, 0], [2, 0, 0]], np.int8)
    for given in (board, jnp.asarray(board), board.tolist(), board.astype(np.float32)):
        got, last, status = _parse_text(render.text(given), 3)
        np.testing.assert_array_equal(got, board)
        assert last is None and "stones: 4 (2 X, 2 O)" in status


# -------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("bad, message", [
    (np.zeros((3, 4)), "square"),
    (np.zeros((9,)), "square"),
    (np.zeros((0, 0)), "square"),
    (np.full((3, 3), 5), r"found 5 at \(0, 0\)"),
    (np.array([[0, 0], [0, -1]]), r"found -1 at \(1, 1\)"),
    (np.array([[0.0, 1.5], [0.0, 0.0]]), r"0 \(empty\), 1 \(black\) or 2 \(white\)"),
    (np.array([[0.0, np.nan], [0.0, 0.0]]), "found nan"),
    (np.array([["X", "."], [".", "."]]), "numbers"),
    (np.zeros((2, 3, 3)), "batch"),
])
def test_bad_boards_are_refused(bad, message):
    for draw in (render.text, render.svg):
        with pytest.raises(ValueError, match=message):
            draw(bad)


def test_batched_state_and_bad_last_moves_are_refused():
    env = Gomoku(5, 4)
    batch = jax.vmap(env.init)(jax.random.split(jax.random.key(0), 3))
    for draw in (render.text, render.svg):
        with pytest.raises(ValueError, match="batched State"):
            draw(batch)
    state = env.from_board(np.pad([[1]], ((0, 4), (0, 4))), last_action=0)
    for draw in (render.text, render.svg):
        with pytest.raises(ValueError, match=r"\(1, 1\) points at an empty cell"):
            draw(state, last_action=(1, 1))
        with pytest.raises(ValueError, match="off the 5x5 board"):
            draw(state, last_action=(5, 0))
        with pytest.raises(ValueError, match="from 0 to 24"):
            draw(state, last_action=25)
        for odd in (True, 1.0, "a1", (0,), (0, 0.5)):
            with pytest.raises(ValueError, match="action index or a \\(row, col\\) pair"):
                draw(state, last_action=odd)


# ------------------------------------------------------------------------------- svg
def _floats(el, *names):
    return [float(el.get(name)) for name in names]


def _parse_svg(drawn):
    """Root, grid positions and the elements by class, from the SVG text."""
    root = ET.fromstring(drawn)  # well-formed XML or this raises
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    by_class = {}
    for el in root.iter():
        for name in el.get("class", "").split():
            by_class.setdefault(name, []).append(el)
    rows = [_floats(el, "y1")[0] for el in by_class.get("grid-row", [])]
    cols = [_floats(el, "x1")[0] for el in by_class.get("grid-col", [])]
    return root, by_class, np.array(rows), np.array(cols)


def _cell(el, rows, cols, x="cx", y="cy", dx=0.0, dy=0.0):
    """The (row, col) whose intersection is at the element's centre."""
    px, py = float(el.get(x)) + dx, float(el.get(y)) + dy
    r, c = int(np.argmin(abs(rows - py))), int(np.argmin(abs(cols - px)))
    step = cols[1] - cols[0] if len(cols) > 1 else 1.0
    assert abs(rows[r] - py) < 0.05 * step and abs(cols[c] - px) < 0.05 * step
    return r, c


@pytest.mark.parametrize("size, k", SIZES)
def test_svg_draws_each_stone_on_its_cell_and_marks_the_last_move(size, k):
    for state, want in _positions(size, k, 6, seed=size + 1):
        drawn = render.svg(state, size_px=400)
        root, by_class, rows, cols = _parse_svg(drawn)
        assert root.get("viewBox").split()[2:] == ["400", "400"]
        assert root.get("width") == "400" and root.get("height") == "400"
        # Evenly spaced square grid inside the picture.
        assert len(rows) == len(cols) == size
        np.testing.assert_allclose(rows, cols)
        np.testing.assert_allclose(np.diff(cols), np.diff(cols)[0])
        assert 0 < cols[0] and cols[-1] < 400
        for colour, value in (("black", 1), ("white", 2)):
            stones = [el for el in by_class.get("stone", []) if colour in el.get("class").split()]
            cells = sorted(_cell(el, rows, cols) for el in stones)
            assert cells == sorted(map(tuple, np.argwhere(want["board"] == value).tolist()))
        markers = by_class.get("last-move", [])
        if want["last"] is None:
            assert markers == []
        else:
            assert len(markers) == 1 and _cell(markers[0], rows, cols) == want["last"]
        title = root.find("{http://www.w3.org/2000/svg}title").text
        assert want["result"] in title


def test_svg_coordinates_and_star_points():
    _, by_class, rows, cols = _parse_svg(render.svg(np.zeros((19, 19), np.int8)))
    labels = sorted(int(el.text) for el in by_class["coord"])
    assert labels == sorted(list(range(19)) * 2)
    stars = sorted(_cell(el, rows, cols) for el in by_class["star"])
    assert stars == [(r, c) for r in (3, 9, 15) for c in (3, 9, 15)]  # the 19x19 hoshi
    _, by_class, rows, cols = _parse_svg(render.svg(np.zeros((9, 9)), show_coordinates=False,
                                                    star_points=False))
    assert "coord" not in by_class and "star" not in by_class
    _, by_class, _, _ = _parse_svg(render.svg(np.zeros((3, 3))))
    assert "star" not in by_class  # too small for star points


def test_svg_policy_overlay_covers_empty_cells_with_mass():
    env = Gomoku(9, 5)
    state = env.play_moves([(4, 4), (4, 5), (3, 3)])
    board = np.asarray(state.board)
    policy = np.random.default_rng(0).random(81)
    policy[:10] = 0.0  # no mass: no square
    policy[40] = 0.9  # (4, 4) is occupied: no square either
    _, by_class, rows, cols = _parse_svg(render.svg(state, policy=policy))
    squares = by_class["policy"]
    want = {(r, c) for r, c in np.argwhere((board == 0) & (policy.reshape(9, 9) > 0))}
    side = float(squares[0].get("width"))
    got = [_cell(el, rows, cols, x="x", y="y", dx=side / 2, dy=side / 2) for el in squares]
    assert len(got) == len(want) and set(got) == want
    # More probability, more opaque; the tooltip gives the value.
    shown = [(policy[r * 9 + c], float(el.get("fill-opacity")))
             for (r, c), el in zip(got, squares)]
    shown.sort()
    opacity = [o for _, o in shown]
    assert opacity == sorted(opacity) and opacity[0] < opacity[-1]
    for (r, c), el in zip(got, squares):
        tip = el.find("{http://www.w3.org/2000/svg}title").text
        assert f"({r}, {c})" in tip and math.isclose(float(tip.split("p=")[1]), policy[r * 9 + c],
                                                     rel_tol=1e-3)
    # The same overlay from an [N, N] policy or a jax array.
    for same in (policy.reshape(9, 9), jnp.asarray(policy)):
        assert len(_parse_svg(render.svg(state, policy=same))[1]["policy"]) == len(want)
    # No mass on empty cells: nothing to draw, and no division by zero.
    only_occupied = np.zeros(81)
    only_occupied[40] = 1.0
    assert "policy" not in _parse_svg(render.svg(state, policy=only_occupied))[1]


@pytest.mark.parametrize("policy, message", [
    (np.ones(80), r"shape \[81\] or \[9, 9\].*got \[80\]"),
    (np.ones((3, 27)), r"got \[3, 27\]"),
    (np.full(81, -0.5), ">= 0"),
    (np.full(81, np.nan), "NaN"),
    (["a"] * 81, "numbers"),
])
def test_svg_bad_policies_are_refused(policy, message):
    with pytest.raises(ValueError, match=message):
        render.svg(np.zeros((9, 9), np.int8), policy=policy)


def test_svg_board_shows_itself_in_notebooks_and_saves(tmp_path):
    drawn = render.svg(np.eye(5, dtype=np.int8), last_action=(2, 2), size_px=120)
    assert isinstance(drawn, render.SvgBoard) and isinstance(drawn, str)
    assert drawn._repr_svg_() == str(drawn) and "<svg" in drawn._repr_html_()
    path = drawn.save(tmp_path / "board.svg")
    root, by_class, rows, cols = _parse_svg(path.read_text(encoding="utf-8"))
    assert len(by_class["stone"]) == 5 and _cell(by_class["last-move"][0], rows, cols) == (2, 2)
    for bad in (0, -10, float("nan"), True, "480"):
        with pytest.raises(ValueError, match="size_px"):
            render.svg(np.zeros((5, 5)), size_px=bad)


# ----------------------------------------------------------------------- game record
def test_game_record_lists_moves_in_order():
    ref, rng = NumpyGomoku(7, 4), np.random.default_rng(3)
    board, played = np.zeros((7, 7), np.int8), []
    while not ref.terminated:
        action = int(rng.choice(ref.legal_actions()))
        ref.step(action)
        played.append(action)
    padded = np.array(played + [-1] * (49 - len(played)))
    record = render.game_record_text(padded, 7, per_line=4)
    assert len(record.splitlines()) == math.ceil(len(played) / 4)
    entries = re.findall(r"(\d+)\. ([BW]) \((\d+), (\d+)\)", record)
    assert len(entries) == len(played)
    for i, (num, colour, r, c) in enumerate(entries):
        assert int(num) == i + 1 and colour == "BW"[i % 2]
        board[int(r), int(c)] = 1 if colour == "B" else 2
        assert int(r) * 7 + int(c) == played[i]
    np.testing.assert_array_equal(board, ref.board)
    pairs = [divmod(a, 7) for a in played]
    assert render.game_record_text(pairs, 7, per_line=4) == record
    assert "\n" not in render.game_record_text(pairs, 7, per_line=None)
    assert render.game_record_text([], 7) == ""
    with pytest.raises(ValueError, match="off the 7x7 board"):
        render.game_record_text([(7, 0)], 7)
    with pytest.raises(ValueError, match="after -1 padding"):
        render.game_record_text([3, -1, 4], 7)
    with pytest.raises(ValueError, match="from 0 to 48"):
        render.game_record_text([49], 7)
