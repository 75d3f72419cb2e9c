"""The 8 dihedral transforms: round trips, consistency, canonical forms, rule invariance."""

import itertools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gomoku_jax import symmetry as sym
from gomoku_jax.game import Gomoku, random_games

T = range(sym.NUM_TRANSFORMS)


def _rand(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 3, shape).astype(np.int8)


def test_eight_distinct_transforms_with_inverses():
    board = np.arange(25).reshape(5, 5)
    images = [np.asarray(sym.transform_board(board, t)) for t in T]
    assert len({im.tobytes() for im in images}) == 8  # all different on an asymmetric board
    np.testing.assert_array_equal(images[0], board)
    np.testing.assert_array_equal(images[1], np.rot90(board))
    np.testing.assert_array_equal(images[4], np.fliplr(board))
    for t in T:
        back = sym.transform_board(images[t], sym.inverse(t))
        np.testing.assert_array_equal(back, board)
        assert int(sym.inverse(jnp.int32(t))) == sym.inverse(t)


@pytest.mark.parametrize("t", T)
def test_round_trips_for_planes_and_policies(t):
    planes = np.random.default_rng(t).random((2, 7, 7, 3)).astype(np.float32)
    policy = np.random.default_rng(t).random((3, 49)).astype(np.float32)
    p2 = sym.transform_planes(sym.transform_planes(planes, t), sym.inverse(t))
    np.testing.assert_array_equal(p2, planes)
    q2 = sym.transform_policy(sym.transform_policy(policy, t), sym.inverse(t))
    np.testing.assert_array_equal(q2, policy)
    # Planes move with their board: plane c of the image is the image of plane c.
    img = np.asarray(sym.transform_planes(planes, t))
    for c in range(3):
        np.testing.assert_array_equal(img[..., c], sym.transform_board(planes[..., c], t))


@pytest.mark.parametrize("t", T)
def test_actions_move_with_the_board(t):
    n = 6
    for a in range(n * n):
        onehot = np.zeros(n * n, np.int8)
        onehot[a] = 1
        moved = np.asarray(sym.transform_policy(onehot, t))
        assert moved[sym.transform_action(a, t, n)] == 1
    assert sym.transform_action(-1, t, n) == -1
    traced = jax.jit(sym.transform_action, static_argnums=2)(jnp.arange(-1, 36), t, n)
    expected = [sym.transform_action(a, t, n) for a in range(-1, 36)]
    np.testing.assert_array_equal(traced, expected)


def test_traced_transform_equals_static_under_jit_and_vmap():
    boards = _rand((8, 5, 5), seed=3)
    ts = jnp.arange(8)
    traced = jax.jit(jax.vmap(sym.transform_board))(boards, ts)
    for t in T:
        np.testing.assert_array_equal(traced[t], sym.transform_board(boards[t], t))
    with pytest.raises(ValueError, match="from 0 to 7"):
        sym.transform_board(boards[0], 8)


def test_a_transform_per_example_is_one_gather_under_vmap():
    """Planes, boards and policies with a transform per example match the static
    transforms, and the vmapped program gathers once instead of running all 8."""
    rng = np.random.default_rng(4)
    planes = rng.random((16, 7, 7, 3)).astype(np.float32)
    ts = jnp.asarray(np.arange(16) % 8, jnp.int32)
    fns = (sym.transform_planes, sym.transform_board, sym.transform_policy)
    inputs = (planes, planes[..., 0], planes[..., 0].reshape(16, 49))
    for fn, x in zip(fns, inputs, strict=True):
        got = np.asarray(jax.jit(jax.vmap(fn))(x, ts))
        for i, t in enumerate(np.asarray(ts)):
            np.testing.assert_array_equal(got[i], fn(x[i], int(t)))
        jaxpr = str(jax.make_jaxpr(jax.vmap(fn))(x, ts))
        assert "rev[" not in jaxpr and "transpose[" not in jaxpr  # no branch runs
        assert jaxpr.count("gather[") == 2  # the table row per example, then the cells


def _lexmin_reference(board):
    images = [np.asarray(sym.transform_board(board, t)).reshape(-1).tolist() for t in T]
    best = min(images)
    return np.asarray(best).reshape(board.shape), images.index(best)


def test_canonical_form_is_lexicographic_minimum_and_shared_by_images():
    canon = jax.jit(sym.canonical_board)
    for seed in range(30):
        board = _rand((5, 5), seed)
        if seed % 3 == 0:  # symmetric boards exercise ties
            board = np.maximum(board, board.T)
        form, t = canon(board)
        ref_form, ref_t = _lexmin_reference(board)
        np.testing.assert_array_equal(form, ref_form)
        assert int(t) == ref_t
        np.testing.assert_array_equal(sym.transform_board(board, int(t)), form)
        for u in T:
            image = np.asarray(sym.transform_board(board, u))
            np.testing.assert_array_equal(canon(image)[0], form)
    batched, ts = jax.vmap(sym.canonical_board)(_rand((4, 3, 3), 9))
    assert batched.shape == (4, 3, 3) and ts.shape == (4,)
    with pytest.raises(ValueError, match="one \\[N, N\\] board"):
        sym.canonical_board(_rand((2, 3, 3)))


@pytest.mark.parametrize("size, k, rule", [(3, 3, "freestyle"), (7, 4, "standard"), (9, 5, "freestyle")])
def test_winner_is_invariant_under_symmetry(size, k, rule):
    env = Gomoku(size, k, rule)
    final, moves = random_games(env, jax.random.key(size), 64, record=True)
    moves = np.asarray(moves)
    step = jax.jit(jax.vmap(env.step))
    for t in T:
        s = jax.vmap(env.init)(jax.random.split(jax.random.key(0), 64))
        for ply in range(size * size):
            col = moves[:, ply]
            mapped = np.where(col >= 0, [sym.transform_action(int(a), t, size) for a in col], 0)
            live = jnp.asarray(col >= 0)
            nxt = step(s, jnp.asarray(mapped, jnp.int32))
            s = jax.tree.map(lambda new, old: jnp.where(
                live.reshape((-1,) + (1,) * (new.ndim - 1)), new, old), nxt, s)
        np.testing.assert_array_equal(s.winner, final.winner)
        np.testing.assert_array_equal(s.move_count, final.move_count)
        np.testing.assert_array_equal(s.board, sym.transform_board(final.board, t))


def test_all_boards_stacks_the_eight_images():
    board = _rand((4, 4), 5)
    stack = np.asarray(sym.all_boards(board))
    assert stack.shape == (8, 4, 4)
    for t, image in itertools.zip_longest(T, stack):
        np.testing.assert_array_equal(image, sym.transform_board(board, t))


@pytest.mark.parametrize("call, message", [
    (lambda: sym.transform_action((2, 3), 1, 9), r"action is an action index \(row \* 9 "
                                                      r"\+ col\) .*got \(2, 3\)"),
    (lambda: sym.transform_action(100, 1, 9), "action 100 is off the 9x9 board"),
    (lambda: sym.transform_action(jnp.float32(3), 1, 9), "action is an action index"),
    (lambda: sym.transform_action(3, 1, 0), "size must be a board size from 3 to 19"),
    (lambda: sym.transform_action(3, 1, 10**4), "size must be a board size"),  # no table
    (lambda: sym.transform_action(3, 1.5, 9), "transform must be an integer from 0 to 7"),
    (lambda: sym.transform_board(np.zeros((5, 5)), 1.7), "transform must be an integer"),
    (lambda: sym.transform_board(np.zeros((5, 5)), "1"), "transform must be an integer"),
    (lambda: sym.transform_board(np.zeros((5, 5)), True), "transform must be an integer"),
    (lambda: sym.inverse(9.0), "transform must be an integer"),
    (lambda: sym.transform_board(np.zeros((5, 5, 3)), 1),
     r"\[\.\.\., N, N\] arrays \(the square board last\), got shape \(5, 5, 3\)"),
    (lambda: sym.transform_board(np.zeros(5), 1), r"got shape \(5,\)"),
    (lambda: sym.transform_planes(np.zeros((5, 5)), 1), r"\[\.\.\., N, N, C\] planes"),
    (lambda: sym.transform_board(np.zeros((2, 5, 5)), jnp.array([1, 2])),
     r"one transform \(vmap for one per example\), got an array of shape \(2,\)"),
])
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_integer_arguments_of_every_kind_still_work():
    assert sym.transform_action(np.int64(3), np.int8(1), np.int32(9)) == \
        sym.transform_action(3, 1, 9)
    assert sym.transform_action(-1, 1, 9) == -1
    moved = sym.transform_action(jnp.array([3, -1]), jnp.int32(1), 9)
    assert moved.tolist() == [sym.transform_action(3, 1, 9), -1]
    board = np.arange(25).reshape(5, 5)
    assert np.array_equal(sym.transform_board(board, jnp.int32(5)),
                          sym.transform_board(board, 5))


@pytest.mark.parametrize("action", [True, False, np.True_, 3.0, 2.5, np.float64(3), "3",
                                    jnp.array(True), None])
def test_an_action_that_is_not_an_integer_is_refused(action):
    with pytest.raises(ValueError, match=re.escape(
            "transform_action: action is an action index (row * 9 + col) or an integer "
            f"array of them, got {action!r}")):
        sym.transform_action(action, 1, 9)


@pytest.mark.parametrize("action, off", [(jnp.array(81), 81), (np.array(200), 200),
                                         (jnp.array([3, -1, 90]), 90),
                                         (np.array([[0], [81]], np.int8), 81)])
def test_a_concrete_array_action_off_the_board_is_refused_like_an_int(action, off):
    with pytest.raises(ValueError, match=f"action {off} is off the 9x9 board"):
        sym.transform_action(action, 1, 9)
    with pytest.raises(ValueError, match=f"action {off} is off the 9x9 board"):
        sym.transform_action(action, jnp.int32(1), 9)  # a transform array too
    # Inside jit the action is traced and cannot be checked; it is still mapped.
    assert jax.jit(sym.transform_action, static_argnums=2)(action, 1, 9).shape == action.shape


def test_an_int_action_off_the_board_is_refused_with_a_transform_array():
    with pytest.raises(ValueError, match="action 81 is off the 9x9 board"):
        sym.transform_action(81, jnp.int32(1), 9)
    assert int(sym.transform_action(np.array(80), 0, 9)) == 80
