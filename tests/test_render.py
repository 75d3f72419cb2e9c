"""Text and SVG boards: parse what is drawn back and compare it with the game."""

import re
import xml.etree.ElementTree as ET

import jax
import numpy as np
import pytest

from gomoku_jax import render
from gomoku_jax.game import Gomoku, random_games

SYMBOL = {"X": 1, "O": 2, ".": 0}


def _games(size, k, count, seed=0):
    final, moves = random_games(Gomoku(size, k), jax.random.key(seed), count, record=True)
    return [jax.tree.map(lambda x: x[i], final) for i in range(count)], np.asarray(moves)


def _parse_text(drawn, n):
    """Board, last-move cell and status back from `render.text`."""
    lines = drawn.splitlines()
    header, rows, status = lines[0], lines[1 : n + 1], lines[n + 1]
    assert header.split() == [str(c) for c in range(n)]
    board = np.zeros((n, n), np.int8)
    last = None
    for r, line in enumerate(rows):
        label, body = line.split(maxsplit=1) if line.strip() else ("", "")
        assert int(label) == r
        cells = re.findall(r"\[([XO.])\]|([XO.])", body)
        assert len(cells) == n, line
        for c, (marked, plain) in enumerate(cells):
            board[r, c] = SYMBOL[marked or plain]
            if marked:
                assert last is None, "two last-move markers"
                last = (r, c)
    return board, last, status


@pytest.mark.parametrize("size, k", [(3, 3), (9, 5), (15, 5), (19, 5)])
def test_text_board_round_trips(size, k):
    states, _ = _games(size, k, 6, seed=size)
    for s in states:
        drawn = render.text(s)
        board, last, status = _parse_text(drawn, size)
        np.testing.assert_array_equal(board, np.asarray(s.board))
        assert last == divmod(int(s.last_action), size)
        assert f"moves: {int(s.move_count)}" in status
        result = {-1: "draw", 0: "black wins", 1: "white wins"}[int(s.winner)]
        assert status.startswith(result)
        # Columns line up: each stone sits under the last digit of its column index.
        header, rows = drawn.splitlines()[0], drawn.splitlines()[1 : size + 1]
        under = [m.end() - 1 for m in re.finditer(r"\d+", header)]
        for r, line in enumerate(rows):
            assert [line[p] for p in under] == [".XO"[v] for v in np.asarray(s.board[r])]


def test_text_marks_the_given_move_and_takes_bare_boards():
    env = Gomoku(9, 5)
    s = env.play_moves([(4, 4), (2, 7)])
    assert "[O]" in render.text(s) and "last: O (2, 7)" in render.text(s)
    board, last, status = _parse_text(render.text(np.asarray(s.board), last_action=(4, 4)), 9)
    assert last == (4, 4) and status.startswith("board only")
    _, last, _ = _parse_text(render.text(s.board), 9)
    assert last is None  # a bare board has no last move unless told
    assert "to move" in render.text(env.init())


@pytest.mark.parametrize("bad, text", [
    (np.zeros((3, 4)), "square"),
    (np.full((3, 3), 5), "found 5 at \\(0, 0\\)"),
    (np.zeros((2, 3, 3)), "batch"),
])
def test_bad_boards_are_refused(bad, text):
    for draw in (render.text, render.svg):
        with pytest.raises(ValueError, match=text):
            draw(bad)


def test_batched_state_and_bad_last_move_are_refused():
    env = Gomoku(5, 4)
    batch = jax.vmap(env.init)(jax.random.split(jax.random.key(0), 3))
    with pytest.raises(ValueError, match="batched State"):
        render.text(batch)
    s = env.play_moves([(0, 0)])
    with pytest.raises(ValueError, match="empty cell"):
        render.text(s, last_action=(1, 1))
    with pytest.raises(ValueError, match="off the 5x5 board"):
        render.svg(s, last_action=(5, 0))


def _svg_counts(drawn):
    root = ET.fromstring(drawn)
    classes = [el.get("class", "") for el in root.iter()]
    return root, {
        "black": sum("stone" in c.split() and "black" in c.split() for c in classes),
        "white": sum("stone" in c.split() and "white" in c.split() for c in classes),
        "marker": sum("last-move" in c.split() for c in classes),
        "policy": sum("policy" in c.split() for c in classes),
    }


@pytest.mark.parametrize("size, k", [(3, 3), (9, 5), (19, 5)])
def test_svg_has_one_circle_per_stone_and_a_marker(size, k):
    states, _ = _games(size, k, 4, seed=size + 1)
    for s in states:
        drawn = render.svg(s)
        assert isinstance(drawn, str) and drawn._repr_svg_() == str(drawn)
        root, counts = _svg_counts(drawn)
        assert root.get("viewBox")
        board = np.asarray(s.board)
        assert counts["black"] == (board == 1).sum() and counts["white"] == (board == 2).sum()
        assert counts["marker"] == 1
    _, counts = _svg_counts(render.svg(Gomoku(size, k).init()))
    assert counts == {"black": 0, "white": 0, "marker": 0, "policy": 0}


def test_svg_policy_overlay_covers_empty_cells_with_mass():
    env = Gomoku(9, 5)
    s = env.play_moves([(4, 4), (4, 5), (3, 3)])
    policy = np.random.default_rng(0).random(81)
    policy[:10] = 0.0  # no mass: no square
    policy[40] = 0.9  # an occupied cell: no square either
    _, counts = _svg_counts(render.svg(s, policy=policy))
    empty = np.asarray(s.board).reshape(-1) == 0
    assert counts["policy"] == int((empty & (policy > 0)).sum())
    _, counts2 = _svg_counts(render.svg(s, policy=policy.reshape(9, 9)))
    assert counts2["policy"] == counts["policy"]
    with pytest.raises(ValueError, match="policy"):
        render.svg(s, policy=np.ones(80))


def test_game_record_lists_moves_in_order():
    _, moves = _games(7, 4, 1, seed=3)
    played = [int(a) for a in moves[0] if a >= 0]
    record = render.game_record_text(moves[0], 7)
    entries = re.findall(r"(\d+)\. ([BW]) \((\d+), (\d+)\)", record)
    assert len(entries) == len(played)
    for i, (num, colour, r, c) in enumerate(entries):
        assert int(num) == i + 1 and colour == "BW"[i % 2]
        assert int(r) * 7 + int(c) == played[i]
    with pytest.raises(ValueError, match="off the 7x7 board"):
        render.game_record_text([(7, 0)], 7)
