"""The game engine: settings, rules by hand, illegal moves, jit/vmap, and the NumPy reference."""

import itertools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gomoku_jax import game
from gomoku_jax.game import GameConfig, Gomoku, IllegalMoveError, describe_result, random_games
from gomoku_jax.reference import NumpyGomoku

# ------------------------------------------------------------------ settings


@pytest.mark.parametrize(
    "kwargs, field, text",
    [
        (dict(size=2), "size", "from 3 to 19, got 2"),
        (dict(size=20), "size", "from 3 to 19, got 20"),
        (dict(size=9.0), "size", "integer from 3 to 19, got 9.0"),
        (dict(size=True), "size", "got True"),
        (dict(size=9, k=2), "k", "from 3 to 9, got 2"),
        (dict(size=9, k=10), "k", "from 3 to 9 (no more than the board's size 9), got 10"),
        (dict(size=9, k=2.0), "k", "must be an integer, got 2.0"),
        (dict(size=9, k=5, rule="renju"), "rule", "freestyle, standard, got 'renju'"),
    ],
)
def test_invalid_settings_name_field_value_and_range(kwargs, field, text):
    for make in (GameConfig, Gomoku):
        with pytest.raises(ValueError) as err:
            make(**kwargs)
        assert f"GameConfig.{field}" in str(err.value)
        assert text in str(err.value)


def test_valid_extremes_and_static_facts():
    for size, k in [(3, 3), (19, 19), (19, 3), (15, 5)]:
        env = Gomoku(size, k, "standard")
        assert env.num_actions == size * size
        assert env.init().board.shape == (size, size)
    assert Gomoku(9, 5) == Gomoku(9, 5) and hash(Gomoku(9, 5)) == hash(Gomoku(9, 5))
    assert Gomoku(9, 5) != Gomoku(9, 5, "standard")


def test_init_state():
    env = Gomoku(7, 4)
    s = env.init(jax.random.key(0))
    assert s.board.dtype == jnp.int8 and not s.board.any()
    assert int(s.current_player) == game.BLACK
    assert s.legal_action_mask.shape == (49,) and bool(s.legal_action_mask.all())
    assert int(s.last_action) == -1 and int(s.move_count) == 0 and int(s.winner) == -1
    assert not bool(s.terminated) and not bool(s.truncated)
    assert s.rewards.tolist() == [0.0, 0.0]


# ------------------------------------------------------------ rules by hand


def _board(size, stones):
    """A board from {(row, col): 1 or 2}."""
    b = np.zeros((size, size), np.int8)
    for (r, c), v in stones.items():
        b[r, c] = v
    return b


def _line(start, step, length):
    return [(start[0] + i * step[0], start[1] + i * step[1]) for i in range(length)]


def _after(env, stones, move, to_move=0):
    state = env.from_board(_board(env.size, stones), to_move=to_move)
    return env.step(state, move[0] * env.size + move[1])


# Four black stones and the fifth cell, in every direction, in the middle, at edges and corners.
LINES_9 = [
    ((4, 2), (0, 1)),  # horizontal, middle
    ((0, 0), (0, 1)),  # horizontal, top-left corner
    ((8, 4), (0, 1)),  # horizontal, bottom-right edge
    ((2, 4), (1, 0)),  # vertical, middle
    ((4, 8), (1, 0)),  # vertical, right edge to the bottom corner
    ((0, 0), (1, 1)),  # diagonal from the top-left corner
    ((4, 4), (1, 1)),  # diagonal to the bottom-right corner
    ((0, 8), (1, -1)),  # anti-diagonal from the top-right corner
    ((2, 6), (1, -1)),  # anti-diagonal, middle
]


@pytest.mark.parametrize("start, step", LINES_9)
@pytest.mark.parametrize("gap", range(5))
def test_five_wins_in_every_direction_whichever_stone_comes_last(start, step, gap):
    env = Gomoku(9, 5)
    cells = _line(start, step, 5)
    stones = {cell: 1 for i, cell in enumerate(cells) if i != gap}
    # White's stones far from the line keep the counts legal.
    for j, cell in enumerate(itertools.product(range(9), range(9))):
        if len([v for v in stones.values() if v == 2]) == 4:
            break
        if cell not in cells and all(abs(cell[0] - r) + abs(cell[1] - c) > 2 for r, c in cells):
            stones[cell] = 2
    s = _after(env, stones, cells[gap])
    assert bool(s.terminated) and int(s.winner) == 0
    assert s.rewards.tolist() == [1.0, -1.0]
    assert int(s.current_player) == 0  # the mover, once over
    assert bool(s.legal_action_mask.all())


@pytest.mark.parametrize("start, step", LINES_9)
def test_four_does_not_win_and_broken_line_does_not_win(start, step):
    env = Gomoku(9, 5)
    cells = _line(start, step, 5)
    s = _after(env, {c: 1 for c in cells[:3]}, cells[3])
    assert not bool(s.terminated) and int(s.winner) == -1
    assert int(s.current_player) == 1
    # X X X X _ with the fifth cell taken by white: 4 + a gap is not five.
    stones = {c: 1 for c in cells[:3]}
    stones[cells[4]] = 2
    s = _after(env, stones, cells[3])
    assert not bool(s.terminated)


@pytest.mark.parametrize("rule, wins", [("freestyle", True), ("standard", False)])
@pytest.mark.parametrize("gap", [0, 2, 5])
def test_overline_wins_only_under_freestyle(rule, wins, gap):
    env = Gomoku(9, 5, rule)
    cells = _line((3, 1), (0, 1), 6)  # six in a row, (3, 1)..(3, 6)
    stones = {c: 1 for i, c in enumerate(cells) if i != gap}
    stones.update({(8, j): 2 for j in range(0, 9, 2)})
    s = _after(env, stones, cells[gap])
    assert bool(s.terminated) == wins
    assert int(s.winner) == (0 if wins else -1)


def test_standard_exact_five_wins_next_to_opponent_and_edge():
    env = Gomoku(9, 5, "standard")
    stones = {(0, j): 1 for j in range(4)}  # edge on the left
    stones[(0, 5)] = 2  # opponent right after the fifth cell
    stones.update({(8, 0): 2, (8, 2): 2, (8, 4): 2})
    s = _after(env, stones, (0, 4))
    assert bool(s.terminated) and int(s.winner) == 0


def test_standard_five_in_one_direction_wins_despite_overline_in_another():
    env = Gomoku(11, 5, "standard")
    stones = {(5, j): 1 for j in (0, 1, 2, 3, 5, 6, 7)}  # row 5: (5, 4) joins eight
    stones.update({(r, 4): 1 for r in (1, 2, 3, 4)})  # column 4: four above (5, 4)
    s = env.step(env.from_board(_board(11, stones), to_move=0), 5 * 11 + 4)
    # The horizontal run becomes 8 (an overline: no win) but the vertical run is exactly 5.
    assert bool(s.terminated) and int(s.winner) == 0
    # Without the vertical four, the overline alone does not win.
    stones = {cell: v for cell, v in stones.items() if cell[1] != 4}
    s = env.step(env.from_board(_board(11, stones), to_move=0), 5 * 11 + 4)
    assert not bool(s.terminated)


def test_tic_tac_toe_win_and_draw():
    env = Gomoku(3, 3)
    s = env.play_moves([(0, 0), (1, 0), (1, 1), (2, 0), (2, 2)])  # black diagonal
    assert bool(s.terminated) and int(s.winner) == 0 and int(s.move_count) == 5
    s = env.play_moves([(1, 1), (0, 0), (0, 2), (2, 0), (1, 0), (1, 2), (0, 1), (2, 1), (2, 2)])
    assert bool(s.terminated) and int(s.winner) == -1 and int(s.move_count) == 9
    assert s.rewards.tolist() == [0.0, 0.0]
    s = env.play_moves([(0, 2), (0, 0), (1, 1), (1, 0), (2, 2), (2, 0)])  # white column
    assert bool(s.terminated) and int(s.winner) == 1 and s.rewards.tolist() == [-1.0, 1.0]


def test_k4_on_6x6():
    env = Gomoku(6, 4)
    s = env.play_moves([(0, 5), (0, 0), (1, 4), (1, 0), (2, 3), (2, 0)])
    assert not bool(s.terminated)
    s = env.play(s, 3, 2)  # black anti-diagonal (0,5)..(3,2)
    assert bool(s.terminated) and int(s.winner) == 0


# ------------------------------------------------------- illegal and finished


@pytest.mark.parametrize("action", [-1, 81, 1000, 40])
def test_illegal_action_under_jit_loses_for_the_mover(action):
    env = Gomoku(9, 5)
    s = env.play_moves([(4, 4), (0, 0)])  # black to move; (4, 4) = 40 is occupied
    after = jax.jit(env.step)(s, action)
    assert bool(after.terminated) and int(after.winner) == 1
    assert after.rewards.tolist() == [-1.0, 1.0]
    np.testing.assert_array_equal(after.board, s.board)
    assert int(after.move_count) == 2 and int(after.last_action) == int(s.last_action)
    assert bool(after.legal_action_mask.all())
    assert "illegal" in game.describe_result(after)


@pytest.mark.parametrize("action", [np.int64(2**32 + 40), np.uint32(2**32 - 40), 2**40 + 40,
                                    np.array(2**33, np.int64), np.int64(-(2**32) + 40)])
def test_an_action_beyond_int32_is_off_the_board_not_wrapped_onto_it(action):
    """int32 keeps the low 32 bits: 2**32 + 40 would become 40, the centre, a legal
    move. Any integer off the board forfeits, however large."""
    env = Gomoku(9, 5)
    after = env.step(env.init(), action)
    assert bool(after.terminated) and int(after.winner) == 1
    assert int(after.move_count) == 0 and "illegal" in game.describe_result(after)


@pytest.mark.parametrize("dtype", [jnp.int64, jnp.uint64])
@pytest.mark.parametrize("jitted", [False, True])
def test_a_64_bit_action_under_x64_is_off_the_board_not_wrapped_onto_it(dtype, jitted):
    """Under x64 a JAX (or traced) 64-bit action reaches the trace as it is; its range is
    checked before it becomes int32, which would keep the low 32 bits: 2**32 + 40 would
    be 40, the centre, a legal move."""
    env = Gomoku(9, 5)
    with jax.enable_x64(True):
        step = jax.jit(env.step) if jitted else env.step
        after = step(env.init(), jnp.asarray(2**32 + 40, dtype))
        assert bool(after.terminated) and int(after.winner) == 1
        assert int(after.move_count) == 0 and int(after.board.sum()) == 0
        fine = step(env.init(), jnp.asarray(40, dtype))
        assert not bool(fine.terminated) and int(fine.last_action) == 40


@pytest.mark.parametrize("size, action, legal", [(3, 200, False), (3, 8, True),
                                                 (19, 255, True), (19, 127, True)])
def test_a_narrow_unsigned_or_signed_action_is_read_in_range(size, action, legal):
    """uint8 / int8 actions whose dtype cannot hold the board's cell count are compared
    without overflowing (361 does not fit an int8)."""
    env = Gomoku(size, 3)
    for dtype in (jnp.uint8, jnp.int8):
        if action > jnp.iinfo(dtype).max:
            continue
        after = jax.jit(env.step)(env.init(), jnp.asarray(action, dtype))
        assert bool(after.terminated) != legal
        assert int(after.last_action) == (action if legal else -1)


def test_stepping_a_finished_game_changes_nothing_and_rewards_zero():
    env = Gomoku(3, 3)
    s = env.play_moves([(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)])
    assert bool(s.terminated) and s.rewards.tolist() == [1.0, -1.0]
    for action in [3, 5, 0, -7]:  # empty, empty, occupied, off the board
        again = env.step(s, action)
        assert again.rewards.tolist() == [0.0, 0.0]
        for field in ("board", "current_player", "legal_action_mask", "terminated",
                      "last_action", "move_count", "winner"):
            np.testing.assert_array_equal(getattr(again, field), getattr(s, field))


def test_play_raises_clear_errors_and_loses_nothing():
    env = Gomoku(9, 5)
    s = env.play_moves([(4, 4)])
    with pytest.raises(IllegalMoveError, match=r"\(4, 4\) is occupied by black"):
        env.play(s, 4, 4)
    with pytest.raises(IllegalMoveError, match=r"\(9, 0\) is off the 9x9 board"):
        env.play(s, 9, 0)
    with pytest.raises(IllegalMoveError, match=r"off the 9x9 board"):
        env.play(s, 0, -1)
    with pytest.raises(IllegalMoveError, match="row must be an integer"):
        env.play(s, "a", 0)
    assert int(s.move_count) == 1  # the failed attempts changed nothing
    done = env.play_moves([(0, j) if i % 2 == 0 else (8, j) for j in range(5) for i in range(2)][:9])
    assert bool(done.terminated)
    with pytest.raises(IllegalMoveError, match="the game is over \\(black wins\\)"):
        env.play(done, 4, 4)
    with pytest.raises(IllegalMoveError, match=r"move 2 \(4, 4\)"):
        env.play_moves([(4, 4), (4, 4)])
    batched = jax.vmap(env.init)(jax.random.split(jax.random.key(0), 2))
    with pytest.raises(ValueError, match=r"Gomoku.play: this is a 9x9 game; the state's board "
                                         r"has shape \(2, 9, 9\), a batch of games"):
        env.play(batched, 0, 0)
    # JAX and NumPy integer scalars are integers (an argmax's result, for one)
    assert int(env.play(s, jnp.int32(3), np.int64(2)).last_action) == 3 * 9 + 2
    with pytest.raises(IllegalMoveError, match=r"move 2 is 41, not a \(row, col\) pair \(an "
                                               r"action index row \* size \+ col goes to step"):
        env.play_moves([(4, 4), 41])


def test_a_state_of_another_board_size_is_named_so():
    # It was a reshape error or a broadcasting error deep inside, or no error at all.
    small, big = Gomoku(9, 5), Gomoku(15, 5)
    s = small.play_moves([(4, 4)])
    for call in (lambda: big.play(s, 4, 5), lambda: big.step(s, 40),
                 lambda: jax.jit(big.step)(s, 40), lambda: big.observe(s)):
        with pytest.raises(ValueError, match=r"this is a 15x15 game; the state's board has "
                                             r"shape \(9, 9\), a state of another game"):
            call()


def test_a_full_board_from_board_is_a_finished_draw():
    """A full board with no winner is a draw: no live game without a legal move, where
    any move would forfeit a drawn game."""
    env = Gomoku(3, 3)
    board = np.array([[1, 2, 1], [1, 2, 2], [2, 1, 1]])  # no three in a row
    s = env.from_board(board)
    assert bool(s.terminated) and int(s.winner) == -1
    assert bool(s.legal_action_mask.all()) and int(s.current_player) == 0  # black moved last
    assert int(env.from_board(board, to_move=1).current_player) == 0  # whatever to_move says
    assert "draw" in game.describe_result(s)
    after = env.step(s, 0)
    assert int(after.winner) == -1 and after.rewards.tolist() == [0.0, 0.0]
    np.testing.assert_array_equal(after.board, s.board)
    board[2, 2] = 0  # one cell left: a live game
    assert not bool(env.from_board(board).terminated)


def test_from_board_validates():
    env = Gomoku(5, 4)
    with pytest.raises(ValueError, match="shape"):
        env.from_board(np.zeros((4, 4)))
    with pytest.raises(ValueError, match="0 \\(empty\\), 1 \\(black\\) or 2"):
        env.from_board(np.full((5, 5), 3))
    with pytest.raises(ValueError, match="pass to_move"):
        env.from_board(_board(5, {(0, 0): 1, (0, 1): 1}))
    s = env.from_board(_board(5, {(0, 0): 1, (0, 1): 2, (3, 3): 1}))
    assert int(s.current_player) == 1 and int(s.move_count) == 3
    assert int(s.legal_action_mask.sum()) == 22
    board = _board(5, {(0, 0): 1, (0, 1): 2, (3, 3): 1})
    assert int(env.from_board(board, last_action=18).last_action) == 18  # (3, 3)
    for bad, message in ((2, r"last_action 2 is the cell \(0, 2\), which is empty"),
                         ((3, 3), r"an integer from -1 \(none\) to 24 \(row \* 5 \+ col\), "
                                  r"got \(3, 3\)"),
                         (3.5, "got 3.5"), (25, "got 25")):
        with pytest.raises(ValueError, match=message):
            env.from_board(board, last_action=bad)
    with pytest.raises(ValueError, match="to_move must be 0 .* got True"):
        env.from_board(board, to_move=True)


@pytest.mark.parametrize("action, shown", [
    ((3, 3), r"tuple \(3, 3\) \(use Gomoku.play\(state, row, col\) for coordinates\)"),
    (np.array([3]), r"an array of shape \(1,\) and dtype int64"),  # used to give shape (1,) fields
    (3.7, "float 3.7"),  # used to play 3
    (True, "bool True"),
])
def test_step_takes_one_integer_action(action, shown):
    env = Gomoku(5, 4)
    state = env.init(jax.random.key(0))
    with pytest.raises(ValueError, match=r"Gomoku.step: the action is one integer, the cell "
                                         r"row \* 5 \+ col, for one game \(vmap over a batch\); "
                                         rf"got {shown}"):
        env.step(state, action)
    for fine in (7, np.int64(7), jnp.int32(7), np.uint8(7)):
        assert int(env.step(state, fine).board[1, 2]) == 1


def test_describe_result_names_a_batch():
    env = Gomoku(5, 4)
    batch = jax.vmap(env.init)(jax.random.split(jax.random.key(0), 3))
    with pytest.raises(ValueError, match=r"takes one game; got a batch of shape \(3,\)"):
        describe_result(batch)
    assert describe_result(jax.tree.map(lambda x: x[0], batch)) == "black to move"


# ------------------------------------------------------------- jit and vmap


def test_jit_vmap_and_eager_agree_and_step_traces_once():
    env = Gomoku(7, 4, "standard")
    traces = []

    def counted(state, action):
        traces.append(1)
        return env.step(state, action)

    jstep = jax.jit(counted)
    vstep = jax.jit(jax.vmap(env.step))
    rng = np.random.default_rng(0)
    batch = 16
    states = jax.vmap(env.init)(jax.random.split(jax.random.key(0), batch))
    singles = [env.init() for _ in range(batch)]
    for _ in range(30):
        actions = rng.integers(-2, 50, size=batch)  # includes illegal ones
        states = vstep(states, jnp.asarray(actions, jnp.int32))
        for i in range(batch):
            eager = env.step(singles[i], int(actions[i]))
            singles[i] = jstep(singles[i], jnp.int32(actions[i]))
            for leaf_e, leaf_j, leaf_v in zip(
                jax.tree.leaves(eager), jax.tree.leaves(singles[i]), jax.tree.leaves(states)
            ):
                np.testing.assert_array_equal(leaf_e, leaf_j)
                np.testing.assert_array_equal(leaf_j, leaf_v[i])
    assert len(traces) == 1  # same shapes: no re-tracing across 480 calls


def test_random_games_compiles_once_per_shape():
    env = Gomoku(5, 4)
    random_games(env, jax.random.key(0), 8)
    compiled = random_games._cache_size()
    for seed in range(1, 4):  # new keys, same shapes: served from the cache
        random_games(env, jax.random.key(seed), 8)
    assert random_games._cache_size() == compiled
    random_games(env, jax.random.key(0), 16)  # a new batch size is a new shape
    assert random_games._cache_size() == compiled + 1


# ---------------------------------------------- property tests vs the reference


def _oracle_winners(board, k, rule):
    """Players with a winning run anywhere on the board (independent full scan)."""
    n = board.shape[0]
    found = set()
    for r, c in itertools.product(range(n), range(n)):
        stone = board[r, c]
        if stone == 0:
            continue
        for dr, dc in game.DIRECTIONS:
            pr, pc = r - dr, c - dc
            if 0 <= pr < n and 0 <= pc < n and board[pr, pc] == stone:
                continue  # not the start of a maximal run
            length, rr, cc = 0, r, c
            while 0 <= rr < n and 0 <= cc < n and board[rr, cc] == stone:
                length, rr, cc = length + 1, rr + dr, cc + dc
            if length == k or (length > k and rule == "freestyle"):
                found.add(int(stone) - 1)
    return found


CONFIGS = [(3, 3, "freestyle"), (4, 3, "standard"), (6, 4, "standard"), (7, 3, "freestyle"),
           (9, 5, "freestyle"), (9, 5, "standard"), (15, 5, "freestyle"), (11, 6, "standard")]


@pytest.mark.parametrize("size, k, rule", CONFIGS)
def test_random_games_match_reference_engine(size, k, rule):
    env = Gomoku(size, k, rule)
    batch = 300 if size <= 9 else 100
    final, moves = random_games(env, jax.random.key(size * 100 + k), batch, record=True)
    moves = np.asarray(moves)
    ref = NumpyGomoku(size, k, rule)
    for i in range(batch):
        ref.reset()
        played = moves[i][moves[i] >= 0]
        assert (moves[i][len(played):] == -1).all()
        for j, a in enumerate(played):
            assert not ref.terminated, f"game {i} went on after the reference ended it"
            ref.step(int(a))
        assert ref.terminated, f"game {i} stopped before the reference ended it"
        np.testing.assert_array_equal(np.asarray(final.board[i]), ref.board)
        assert int(final.winner[i]) == ref.winner
        assert int(final.move_count[i]) == ref.move_count == len(played)
        assert int(final.last_action[i]) == ref.last_action
        oracle = _oracle_winners(ref.board, k, rule)
        assert oracle == ({ref.winner} if ref.winner >= 0 else set())


def _reference_step(ref, action) -> bool:
    """Step the NumPy engine with the JAX engine's forfeit rule; True on a forfeit."""
    if ref.terminated:
        return False
    try:
        ref.step(action)
    except IllegalMoveError:
        ref.terminated, ref.winner = True, 1 - ref.current_player
        return True
    return False


@pytest.mark.parametrize("size, k, rule", [(5, 4, "freestyle"), (9, 5, "standard")])
def test_every_ply_matches_reference_including_forfeits(size, k, rule):
    env = Gomoku(size, k, rule)
    nn = size * size
    batch = 64
    rng = np.random.default_rng(size)
    step = jax.jit(jax.vmap(env.step))
    states = jax.vmap(env.init)(jax.random.split(jax.random.key(0), batch))
    refs = [NumpyGomoku(size, k, rule) for _ in range(batch)]
    forfeited = [False] * batch
    for _ in range(nn + 1):
        actions = []
        for ref in refs:
            legal = ref.legal_actions()
            if ref.terminated or len(legal) == 0 or rng.random() < 0.02:
                actions.append(int(rng.integers(-1, nn + 1)))  # anything, maybe illegal
            else:
                actions.append(int(rng.choice(legal)))
        states = step(states, jnp.asarray(actions, jnp.int32))
        for i, (ref, a) in enumerate(zip(refs, actions)):
            was_over = ref.terminated
            forfeited[i] |= _reference_step(ref, a)
            assert bool(states.terminated[i]) == ref.terminated
            assert int(states.winner[i]) == ref.winner
            assert int(states.current_player[i]) == ref.current_player
            assert int(states.move_count[i]) == ref.move_count
            np.testing.assert_array_equal(np.asarray(states.board[i]), ref.board)
            mask = np.ones(nn, bool) if ref.terminated else ref.board.reshape(-1) == 0
            np.testing.assert_array_equal(np.asarray(states.legal_action_mask[i]), mask)
            if was_over or not ref.terminated or ref.winner < 0:
                assert states.rewards[i].tolist() == [0.0, 0.0]
            else:
                assert float(states.rewards[i][ref.winner]) == 1.0
                assert float(states.rewards[i][1 - ref.winner]) == -1.0
    assert all(ref.terminated for ref in refs)
    assert any(forfeited)  # the illegal-move path was exercised


# ------------------------------------------------------------ random play


def test_random_games_are_full_legal_games():
    env = Gomoku(9, 5)
    final, moves = random_games(env, jax.random.key(3), 200, record=True)
    assert bool(final.terminated.all())
    counts = np.asarray(final.move_count)
    assert counts.min() >= 9 and counts.max() <= 81  # a win needs 5 black stones
    moves = np.asarray(moves)
    for i in range(200):
        played = moves[i][moves[i] >= 0]
        assert len(set(played.tolist())) == len(played)  # never an occupied cell
    # Different keys give different games; the same key gives the same games.
    again, moves2 = random_games(env, jax.random.key(3), 200, record=True)
    np.testing.assert_array_equal(moves, moves2)
    other, moves3 = random_games(env, jax.random.key(4), 200, record=True)
    assert (moves != np.asarray(moves3)).any()
    assert random_games(env, jax.random.key(3), 200)[1] is None


def test_sample_legal_action_is_uniform_over_legal_cells():
    rng = np.random.default_rng(0)
    mask = rng.random(81) < 0.3
    mask[80] = True
    keys = jax.random.split(jax.random.key(0), 40_000)
    draws = np.asarray(jax.vmap(game.sample_legal_action, in_axes=(0, None))(keys, jnp.asarray(mask)))
    assert mask[draws].all()
    counts = np.bincount(draws, minlength=81)[mask]
    expected = len(draws) / mask.sum()
    # Chi-square with (L - 1) degrees of freedom; 3 sigma above its mean.
    chi2 = ((counts - expected) ** 2 / expected).sum()
    dof = mask.sum() - 1
    assert chi2 < dof + 3 * np.sqrt(2 * dof), chi2
    # Every rank maps to its legal cell: the extreme bit patterns hit the first and last.
    first = int(game.legal_action_of_rank(jnp.asarray(mask), jnp.uint32(0)))
    last = int(game.legal_action_of_rank(jnp.asarray(mask), jnp.uint32(2**32 - 1)))
    assert first == int(np.flatnonzero(mask)[0]) and last == 80


def test_auto_reset_restarts_in_place_and_keeps_the_outcome():
    env = Gomoku(3, 3)
    step = jax.jit(game.auto_reset(env.step, env.init))
    key = jax.random.key(0)
    s = env.init()
    for a in [0, 3, 1, 4]:
        s = step(s, a, key)
    s = step(s, 2, key)  # black completes the top row
    assert bool(s.terminated) and s.rewards.tolist() == [1.0, -1.0]
    assert not s.board.any() and int(s.move_count) == 0  # already a fresh board
    s = step(s, 4, key)  # the new game goes on from the fresh board
    assert not bool(s.terminated) and s.rewards.tolist() == [0.0, 0.0]
    assert int(s.move_count) == 1 and int(s.board[1, 1]) == 1 and int(s.current_player) == 1


def test_auto_reset_keeps_a_batch_full():
    env = Gomoku(3, 3)
    step = jax.jit(jax.vmap(game.auto_reset(env.step, env.init)))
    batch = 32
    s = jax.vmap(env.init)(jax.random.split(jax.random.key(0), batch))
    finished = 0
    for t in range(40):
        keys = jax.random.split(jax.random.key(t), batch)
        actions = jax.vmap(game.sample_legal_action)(keys, s.legal_action_mask)
        s = step(s, actions, keys)
        finished += int(s.terminated.sum())
        # Games never sit finished: a terminated flag only ever sits on a fresh board.
        assert not np.asarray(s.board)[np.asarray(s.terminated)].any()
    assert finished >= batch  # 40 plies of 3x3 finish every game at least once


# ------------------------------------------- any action sequence (hypothesis)

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_SMALL = [(3, 3, "freestyle"), (4, 3, "standard"), (5, 4, "standard"), (6, 3, "freestyle")]
_JIT_STEPS = {cfg: jax.jit(Gomoku(*cfg).step) for cfg in _SMALL}


@settings(max_examples=80, deadline=None)
@given(cfg=st.sampled_from(_SMALL), data=st.data())
def test_any_action_sequence_matches_the_reference(cfg, data):
    size, k, rule = cfg
    nn = size * size
    actions = data.draw(st.lists(st.integers(-2, nn + 1), max_size=nn + 4))
    env, step = Gomoku(*cfg), _JIT_STEPS[cfg]
    ref = NumpyGomoku(*cfg)
    s = env.init()
    for a in actions:
        was_over = ref.terminated
        _reference_step(ref, a)
        s = step(s, jnp.int32(a))
        np.testing.assert_array_equal(np.asarray(s.board), ref.board)
        assert bool(s.terminated) == ref.terminated and int(s.winner) == ref.winner
        assert int(s.current_player) == ref.current_player
        decided_now = ref.terminated and not was_over and ref.winner >= 0
        assert float(np.abs(np.asarray(s.rewards)).sum()) == (2.0 if decided_now else 0.0)


@pytest.mark.parametrize("call, message", [
    (lambda env: random_games(env, 0, 2), r"random_games: key must be a JAX random key "
                                          r"\(jax.random.key\(seed\)\), got an array of shape \(\)"),
    (lambda env: random_games(env, jax.random.key(0), 0), "batch_size must be a positive"),
    (lambda env: random_games(env, jax.random.key(0), 2.0), "batch_size must be a positive"),
    (lambda env: random_games(env, jax.random.key(0), 2, record="yes"),
     "record must be True or False"),
    (lambda env: game.sample_legal_action(0, env.init(jax.random.key(0)).legal_action_mask),
     "sample_legal_action: key must be a JAX random key .*got int 0"),
])
def test_a_seed_where_a_key_is_wanted_and_bad_counts_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call(Gomoku(5, 4))


def test_typed_and_raw_keys_are_both_keys():
    env = Gomoku(5, 4)
    for key in (jax.random.key(3), jax.random.PRNGKey(3)):
        final, moves = random_games(env, key, 2, record=True)
        assert final.board.shape == (2, 5, 5) and moves.shape == (2, 25)
    game.check_key(jax.random.split(jax.random.key(0), 4), "keys")  # a batch of keys


@pytest.mark.parametrize("bad", [1.0, 0.0, np.float32(1), np.True_, np.array(1.0), np.array(1),
                                 jnp.int32(1), "1", True, 2, -1])
def test_from_board_to_move_is_exactly_the_integer_0_or_1(bad):
    env = Gomoku(5, 4)
    board = _board(5, {(0, 0): 1, (0, 1): 2})
    with pytest.raises(ValueError, match=re.escape(
            f"to_move must be 0 (black) or 1 (white), got {bad!r}")):
        env.from_board(board, to_move=bad)
    for good in (0, 1, np.int64(1), np.int8(0)):
        state = env.from_board(board, to_move=good)
        assert int(state.current_player) == good
