"""Seed 004's classical learners: canonical table keys, the tabular value learner on
tic-tac-toe, line features and TD(0) on 5x5 k=4, weights files."""

import itertools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algorithms import classical as cl
from gomoku_jax import agents, arena, symmetry
from gomoku_jax.game import Gomoku

TTT = Gomoku(3, 3)
FIVE = Gomoku(5, 4)
LINES3 = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def _board(rows: str, size: int | None = None) -> np.ndarray:
    """A board from text rows: X black, O white, . empty."""
    rows = rows.split()
    board = np.array([[".XO".index(c) for c in row] for row in rows], np.int8)
    assert size is None or board.shape == (size, size)
    return board


def _won3(b) -> bool:
    return any(b[l[0]] and b[l[0]] == b[l[1]] == b[l[2]] for l in LINES3)


def _threats3(b, stone) -> set:
    return {l[i] for l in LINES3 for i in range(3)
            if b[l[i]] == 0 and sum(b[j] == stone for j in l) == 2}


@pytest.fixture(scope="module")
def tabular():
    learner = cl.TabularValueLearner(TTT, alpha=0.5, epsilon=0.3)
    stats = learner.train(3000, seed=0)
    return learner, stats


@pytest.fixture(scope="module")
def td():
    learner = cl.LinearTDLearner(FIVE)
    stats = learner.train(300, seed=0)
    return learner, stats


# ---------------------------------------------------------------- canonical keys


def _base3(board) -> int:
    return int(sum(int(v) * 3 ** i for i, v in enumerate(np.asarray(board).reshape(-1)[::-1])))


@pytest.mark.parametrize("size", [3, 4, 5])
def test_canonical_key_is_the_symmetry_modules_canonical_board(size):
    rng = np.random.default_rng(size)
    boards = rng.integers(0, 3, (20, size, size)).astype(np.int8)
    boards[0] = 0
    keys = cl.canonical_key(boards)
    for board, key in zip(boards, keys):
        canonical, _ = symmetry.canonical_board(jnp.asarray(board))
        assert int(key) == cl.canonical_key(board) == _base3(canonical)
        # Symmetric images share the key; a different board does not (unless symmetric).
        for t in range(8):
            image = np.asarray(symmetry.transform_board(jnp.asarray(board), t))
            assert cl.canonical_key(image) == key
    assert len(set(keys.tolist())) == len({_base3(symmetry.canonical_board(jnp.asarray(b))[0])
                                           for b in boards})


def test_symmetric_boards_share_one_table_entry():
    learner = cl.TabularValueLearner(TTT)
    board = _board("X.. .O. ...")
    learner.values[cl.canonical_key(board)] = 0.25
    images = {np.asarray(symmetry.transform_board(jnp.asarray(board), t)).tobytes()
              for t in range(8)}
    assert len(images) == 4  # a board with a diagonal symmetry: 4 distinct images
    for t in range(8):
        image = np.asarray(symmetry.transform_board(jnp.asarray(board), t))
        assert learner.value(image) == 0.25
    assert learner.value(_board("X.. ..O ...")) == 0.0  # not a symmetric image: unseen
    # Moves to symmetric cells are valued alike: X in a corner, O to move.
    values = learner.action_values(_board("X.. ... ..."))
    assert values[1] == values[3] and values[2] == values[6] and values[5] == values[7]
    assert values[0] == -np.inf


def test_canonical_key_refuses_other_shapes():
    with pytest.raises(ValueError, match="square boards"):
        cl.canonical_key(np.zeros((3, 4), np.int8))
    with pytest.raises(ValueError, match="square boards"):
        cl.canonical_key(np.zeros((7, 7), np.int8))
    with pytest.raises(ValueError, match="up to 6x6"):
        cl.TabularValueLearner(Gomoku(7, 4))


# ---------------------------------------------------------------- tabular learner


def test_enumeration_finds_the_765_tic_tac_toe_positions():
    learner = cl.TabularValueLearner(TTT)
    counts = learner.enumerate_states()
    # The known counts up to symmetry: 765 positions, 138 finished (91 + 44 wins, 3 draws).
    assert counts == dict(states=765, terminal=138, wins=135, draws=3)
    assert len(learner.values) == 765
    assert sorted(set(learner.values.values())) == [0.0, 1.0]
    assert learner.value(_board("XXX OO. ...")) == 1.0
    assert learner.value(_board("XOX XOO OXX")) == 0.0  # a draw
    # Enumeration keeps learned values.
    key = cl.canonical_key(_board("X.. ... ..."))
    learner.values[key] = 0.3
    learner.enumerate_states()
    assert learner.values[key] == 0.3


def test_tabular_training_stats_and_reproducibility(tabular):
    learner, stats = tabular
    assert stats["episodes"] == 3000
    assert stats["black_wins"] + stats["white_wins"] + stats["draws"] == 3000
    assert 5 <= stats["mean_length"] <= 9
    assert 0 < stats["table_size"] <= 765 and stats["updates"] > 0
    again = cl.TabularValueLearner(TTT, alpha=0.5, epsilon=0.3)
    again.train(3000, seed=0)
    assert again.values == learner.values
    other = cl.TabularValueLearner(TTT, alpha=0.5, epsilon=0.3)
    other.train(3000, seed=1)
    assert other.values != learner.values
    assert all(-1.0 <= v <= 1.0 for v in learner.values.values())


def test_tabular_values_have_the_right_sign(tabular):
    learner, _ = tabular
    # White just moved and left black a win in one: lost for white.
    assert learner.value(_board("XX. .O. ..O")) < -0.9
    # White just moved and must block at 6, which gives black a fork: lost for white too.
    assert learner.value(_board("X.O .O. ..X")) < -0.9
    # Every opening of tic-tac-toe is a draw with best play.
    for rows in ("X.. ... ...", ".X. ... ...", "... .X. ...", "X.. .O. ..."):
        assert abs(learner.value(_board(rows))) < 0.5, rows


def test_tabular_agent_never_loses_to_random(tabular):
    learner, _ = tabular
    match = arena.play_match(TTT, learner.agent("table"), agents.random_agent(), 200, seed=1)
    score = match.score("table")
    assert score["games"] == 200 and score["losses"] == 0, score
    assert score["wins"] >= 150, score  # and it converts most games
    assert not any(r.forfeit for r in match.records)


def test_untrained_table_does_lose_to_random():
    # The same agent without training (it only sees wins in one) is beaten regularly:
    # the test above measures learning, not the rules.
    learner = cl.TabularValueLearner(TTT)
    score = arena.play_match(TTT, learner.agent("table"), agents.random_agent(), 200,
                             seed=1).score("table")
    assert score["losses"] >= 20, score


@pytest.mark.parametrize("rows,expected", [
    ("XX. OO. ...", 2),  # black takes the win rather than blocking
    ("O.. XX. O..", 5),
    ("XO. XO. ...", 6),
])
def test_tabular_agent_takes_a_win_in_one(tabular, rows, expected):
    learner, _ = tabular
    agent = learner.agent("table")
    state = TTT.from_board(_board(rows))
    for seed in range(5):
        assert agent.act(state, jax.random.key(seed)) == expected


@pytest.mark.parametrize("rows,expected", [
    ("XX. .O. ...", 2),  # white must block the top row
    ("X.. XO. ...", 6),
    ("O.. XX. ...", 5),  # white must block the middle row
    ("X.O .O. ..X", 6),  # black must block the anti-diagonal
])
def test_tabular_agent_blocks_a_loss_in_one(tabular, rows, expected):
    learner, _ = tabular
    agent = learner.agent("table")
    board = _board(rows)
    opponent = 2 if (board == 1).sum() == (board == 2).sum() else 1
    assert _threats3(board.reshape(-1), opponent) == {expected}
    assert not _threats3(board.reshape(-1), 3 - opponent)
    state = TTT.from_board(board)
    for seed in range(5):
        assert agent.act(state, jax.random.key(seed)) == expected


def test_tabular_blocks_in_nearly_every_single_threat_position(tabular):
    learner, _ = tabular
    checked = blocked = 0
    for cells in itertools.product(range(3), repeat=9):
        b = np.array(cells, np.int8)
        nb, nw = int((b == 1).sum()), int((b == 2).sum())
        if nb - nw not in (0, 1) or _won3(b) or 0 not in b:
            continue
        me = 0 if nb == nw else 1
        if _threats3(b, me + 1):
            continue  # it would rather win
        threat = _threats3(b, 2 - me)
        if len(threat) != 1:
            continue
        values = learner.action_values(b.reshape(3, 3), me)
        best = set(np.flatnonzero(values >= values.max() - 1e-6).tolist())
        checked += 1
        blocked += best == threat
    # Every legal position, reachable in self-play or not.
    assert checked > 900
    assert blocked >= 0.9 * checked, (blocked, checked)


def test_tabular_rejects_bad_settings():
    with pytest.raises(ValueError, match="alpha"):
        cl.TabularValueLearner(TTT, alpha=0.0)
    with pytest.raises(ValueError, match="epsilon"):
        cl.TabularValueLearner(TTT, epsilon=1.5)
    with pytest.raises(ValueError, match="episodes"):
        cl.TabularValueLearner(TTT).train(0)


# ---------------------------------------------------------------- line features


def test_windows_are_every_winning_line():
    assert cl.line_windows(3, 3).tolist() == [
        [0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]]
    for size, k, count in [(5, 4, 28), (9, 5, 140), (15, 5, 572)]:
        windows = cl.line_windows(size, k)
        assert windows.shape == (count, k)
        assert len({tuple(w) for w in windows.tolist()}) == count
        rows, cols = np.divmod(windows, size)
        steps = {(int(dr), int(dc)) for dr, dc in zip(np.diff(rows).ravel(), np.diff(cols).ravel())}
        assert steps <= {(0, 1), (1, 0), (1, 1), (1, -1)}


def test_features_on_hand_made_boards():
    learner = cl.LinearTDLearner(TTT)
    board = _board("X.. .XO ...")
    # rows, columns, diagonal, anti-diagonal (the order of line_windows)
    black = np.array([1, 0, 0, 1, 1, -1, 2, 1]) / 3
    np.testing.assert_allclose(learner.features(board, 0), black)
    np.testing.assert_allclose(learner.features(board, 1), -black)
    np.testing.assert_allclose(learner.features(board), black)  # black just moved

    five = cl.LinearTDLearner(FIVE)
    centre = np.zeros((5, 5), np.int8)
    centre[2, 2] = 1
    x = five.features(centre, 0)
    assert np.count_nonzero(x) == 8 and np.allclose(x[x != 0], 0.25)  # 2 windows per direction

    board = _board("""
        XXX.O
        .....
        ..O..
        .....
        O...X""", 5)
    x = five.features(board, 0)
    windows = cl.line_windows(5, 4).tolist()
    assert x[windows.index([0, 1, 2, 3])] == pytest.approx(3 / 4)  # only black
    assert x[windows.index([1, 2, 3, 4])] == 0.0  # blocked by O at (0, 4)
    assert x[windows.index([0, 6, 12, 18])] == pytest.approx(0.0)  # X at 0, O at 12
    assert x[windows.index([6, 12, 18, 24])] == 0.0  # O at 12, X at 24
    assert x[windows.index([4, 8, 12, 16])] == pytest.approx(-2 / 4)  # anti-diagonal: O, O
    assert x[windows.index([8, 12, 16, 20])] == pytest.approx(-2 / 4)
    assert x[windows.index([5, 6, 7, 8])] == 0.0  # empty


@pytest.mark.parametrize("size,k", [(5, 4), (9, 5)])
def test_features_match_a_plain_count_over_lines(size, k):
    env = Gomoku(size, k)
    learner = cl.LinearTDLearner(env)
    rng = np.random.default_rng(size)
    boards = rng.choice(3, size=(6, size, size), p=[0.6, 0.2, 0.2]).astype(np.int8)
    batch = learner.features(boards, 1)
    for board, got in zip(boards, batch):
        expected = []
        for dr, dc in [(0, 1), (1, 0), (1, 1), (1, -1)]:
            for r in range(size):
                for c in range(size):
                    cells = [(r + i * dr, c + i * dc) for i in range(k)]
                    if not all(0 <= rr < size and 0 <= cc < size for rr, cc in cells):
                        continue
                    mine = sum(board[p] == 2 for p in cells)
                    theirs = sum(board[p] == 1 for p in cells)
                    expected.append(mine / k if theirs == 0 else -theirs / k if mine == 0 else 0.0)
        np.testing.assert_allclose(got, expected, atol=1e-7)
        np.testing.assert_allclose(learner.features(board, 1), got)


@pytest.mark.parametrize("rule", ["freestyle", "standard"])
def test_move_values_agree_with_the_engine_and_the_features(rule):
    env = Gomoku(6, 4, rule)
    rng = np.random.default_rng(3)
    learner = cl.LinearTDLearner(env, weights=rng.normal(size=cl.line_windows(6, 4).shape[0]))
    step = jax.jit(env.step)
    checked_wins = 0
    for g in range(12):
        board = rng.choice(3, size=(6, 6), p=[0.5, 0.25, 0.25]).astype(np.int8)
        for player in (0, 1):
            state = env.from_board(board, to_move=player)
            values = learner.action_values(board, player)
            for a in range(36):
                if board.reshape(-1)[a]:
                    assert values[a] == -np.inf
                    continue
                after = step(state, a)
                nxt = board.copy().reshape(-1)
                nxt[a] = player + 1
                if bool(after.terminated) and int(after.winner) == player:
                    assert values[a] == 1.0
                    checked_wins += 1
                else:
                    expected = learner.value(nxt.reshape(6, 6), player)
                    assert values[a] == pytest.approx(expected, abs=1e-5)
    assert checked_wins > 5


@pytest.mark.parametrize("env", [FIVE, Gomoku(6, 4, "standard")], ids=lambda e: e.id)
def test_jax_agent_plays_a_best_numpy_move(env):
    rng = np.random.default_rng(0)
    n = env.size
    learner = cl.LinearTDLearner(env, weights=rng.normal(size=len(cl.line_windows(n, env.k))))
    agent = learner.agent("td")
    for g in range(15):
        board = rng.choice(3, size=(n, n), p=[0.5, 0.25, 0.25]).astype(np.int8)
        player = g % 2
        state = env.from_board(board, to_move=player)
        values = learner.action_values(board, player)
        action = agent.act(state, jax.random.key(g))
        assert values[action] >= values.max() - 1e-5


def test_td_agents_take_a_win_in_one():
    # Even untrained, with zero weights, the next-state value of a win is exact.
    agent = cl.LinearTDLearner(FIVE).agent("td")
    board = _board("""
        .....
        .XXX.
        .OO..
        ..O..
        .....""", 5)
    state = FIVE.from_board(board)
    for seed in range(5):
        assert agent.act(state, jax.random.key(seed)) in (5, 9)


# ---------------------------------------------------------------- TD training


def test_td_training_stats_and_reproducibility(td):
    learner, stats = td
    assert stats["black_wins"] + stats["white_wins"] + stats["draws"] == 300
    assert stats["epsilon"] == pytest.approx(0.5 * 0.995 ** 300)
    assert np.isfinite(learner.weights).all() and np.abs(learner.weights).max() > 0.01
    again = cl.LinearTDLearner(FIVE)
    again.train(300, seed=0)
    np.testing.assert_array_equal(again.weights, learner.weights)


def test_td_update_is_the_lms_rule():
    learner = cl.LinearTDLearner(TTT, alpha=0.1, gamma=0.9, weights=np.arange(8) / 10)
    xs = [np.eye(8, dtype=np.float32)[i] for i in (0, 3, 6)]
    w = learner.weights.astype(np.float64).copy()
    w[0] += 0.1 * (-0.9 * (w @ xs[1]) - w[0])  # target: the opponent's next state, negated
    w[3] += 0.1 * (-0.9 * 1.0 - w[3])  # the next state is final: won by the opponent
    w[6] += 0.1 * (1.0 - w[6])  # the final state: the reward
    learner._update(xs, 1.0)
    np.testing.assert_allclose(learner.weights, w, rtol=1e-6)


def test_trained_td_agent_beats_random_and_the_untrained_agent(td):
    learner, _ = td
    trained = learner.agent("td")
    score = arena.play_match(FIVE, trained, agents.random_agent(), 100, seed=1).score("td")
    assert score["wins"] >= 90, score
    assert min(score["wins_as_black"], score["wins_as_white"]) >= 40, score
    # Untrained weights only take wins in one; training must add more than that.
    untrained = cl.LinearTDLearner(FIVE).agent("untrained")
    base = arena.play_match(FIVE, untrained, agents.random_agent(), 100, seed=1).score("untrained")
    assert base["wins"] < score["wins"], (base, score)
    head = arena.play_match(FIVE, trained, untrained, 100, seed=2).score("td")
    assert head["wins"] >= 70, head


# ---------------------------------------------------------------- weights files


def test_weights_round_trip(td, tmp_path):
    learner, _ = td
    path = tmp_path / "td.npz"
    learner.save(path)
    loaded = cl.LinearTDLearner(FIVE).load(path)
    np.testing.assert_array_equal(loaded.weights, learner.weights)
    rebuilt = cl.LinearTDLearner.from_file(path)
    assert rebuilt.env.config == FIVE.config
    np.testing.assert_array_equal(rebuilt.weights, learner.weights)
    state = FIVE.from_board(_board("..... .X... ..O.. ..... .....", 5))
    assert rebuilt.agent("a").act(state, jax.random.key(0)) == learner.agent("b").act(
        state, jax.random.key(0))


def test_weights_are_written_at_the_path_given_and_a_save_replaces_them_whole(td, tmp_path):
    """NumPy's ``savez`` adds ``.npz`` to a name without it; the learner writes the
    path it is given, through a temporary file (none is left behind)."""
    learner, _ = td
    path = tmp_path / "weights"
    learner.save(path)
    learner.save(path)  # replaced, not appended to
    assert sorted(p.name for p in tmp_path.iterdir()) == ["weights"]
    np.testing.assert_array_equal(cl.LinearTDLearner(FIVE).load(path).weights,
                                  learner.weights)


def test_weights_for_another_game_are_refused(td, tmp_path):
    learner, _ = td
    path = tmp_path / "td.npz"
    learner.save(path)
    with pytest.raises(ValueError, match=r"5x5 board, k=4.*this learner plays 9x9, k=5"):
        cl.LinearTDLearner(Gomoku(9, 5)).load(path)
    with pytest.raises(ValueError, match="standard"):
        cl.LinearTDLearner(Gomoku(5, 4, "standard")).load(path)
    bad = tmp_path / "bad.npz"
    np.savez(bad, weights=np.zeros(27, np.float32), size=np.int32(5), k=np.int32(4),
             rule=np.str_("freestyle"), features=np.str_("seed004-line-windows-v1"))
    with pytest.raises(ValueError, match=r"28 line features, got weights of shape \(27,\)"):
        cl.LinearTDLearner(FIVE).load(bad)
    other = tmp_path / "other.npz"
    np.savez(other, w=np.zeros(28))
    with pytest.raises(ValueError, match="not a LinearTDLearner file"):
        cl.LinearTDLearner(FIVE).load(other)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, weights=np.array([object()] * 28), size=np.int32(5), k=np.int32(4),
             rule=np.str_("freestyle"), features=np.str_("seed004-line-windows-v1"))
    with pytest.raises(ValueError, match="allow_pickle"):
        cl.LinearTDLearner(FIVE).load(pickled)
    with pytest.raises(ValueError, match="line features"):
        cl.LinearTDLearner(FIVE, weights=np.zeros(140))


def test_td_rejects_bad_settings():
    with pytest.raises(ValueError, match="gamma"):
        cl.LinearTDLearner(FIVE, gamma=1.5)
    with pytest.raises(ValueError, match="epsilon_decay"):
        cl.LinearTDLearner(FIVE, epsilon_decay=0.0)
    with pytest.raises(ValueError, match="episodes"):
        cl.LinearTDLearner(FIVE).train(-1)


def test_boards_of_another_game_are_refused_by_name():
    """The tabular player knows its game, as every agent does: another board size is
    refused before a move (and a match in another game before its first move); the
    learners' lookups name the board they take."""
    tab, td = cl.TabularValueLearner(TTT), cl.LinearTDLearner(TTT)
    nine = Gomoku(9, 5)
    state = nine.play_moves([(4, 4)])
    agent = tab.agent()
    assert agent.env is TTT
    with pytest.raises(ValueError, match=re.escape(
            "agent 'tabular-value' was built for 3x3 3 in a row (freestyle), not a 9x9 board")):
        agent.act(state, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="agent 'tabular-value' was built for 3x3"):
        arena.play_match(nine, agent, agents.random_agent(), games=2, seed=0)
    for learner in (tab, td):
        name = type(learner).__name__
        with pytest.raises(ValueError, match=re.escape(
                f"{name} plays 3x3 3 in a row (freestyle): it takes one board [3, 3], "
                "got shape (9, 9)")):
            learner.action_values(state)
    with pytest.raises(ValueError, match=re.escape("got shape (9, 9)")):
        tab.value(np.zeros((9, 9), np.int8))
    # the board of its own game, square or flat, is read as before
    assert tab.value(np.zeros(9, np.int8)) == tab.value(np.zeros((3, 3), np.int8)) == 0.0
