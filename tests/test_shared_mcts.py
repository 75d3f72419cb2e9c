"""Seed 004's Shared MCTS: move priorities, expansion, playouts, UCB1 selection, the shared
transposition table, the final move, tree files and a short training run on 3x3."""

import itertools

import jax
import numpy as np
import pytest

from algorithms import shared_mcts as sm
from algorithms.classical import LinearTDLearner, canonical_key
from gomoku_jax import agents, arena
from gomoku_jax.game import Gomoku

TTT = Gomoku(3, 3)
FIVE = Gomoku(5, 4)
INF = -np.inf


def _board(rows: str) -> np.ndarray:
    """A board from text rows: X black, O white, . empty."""
    return np.array([[".XO".index(c) for c in row] for row in rows.split()], np.int8)


def _with(board: np.ndarray, cell: int, stone: int) -> np.ndarray:
    out = board.copy()
    out.reshape(-1)[cell] = stone
    return out


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---------------------------------------------------------------- priorities


def test_priorities_on_hand_made_tic_tac_toe_positions():
    empty = sm.move_priorities(TTT, np.zeros((3, 3), np.int8))
    np.testing.assert_array_equal(empty, [4, 0, 4, 0, 6, 0, 4, 0, 4])  # corners, centre
    # X to move; two X in row 0 or column 0 would threaten; O's centre spoils the diagonal.
    threats = sm.move_priorities(TTT, _board("X.. .O. ..."))
    np.testing.assert_array_equal(threats, [INF, 8, 8, 8, INF, 0, 8, 0, 4])
    # X wins at 2 (20), blocks O at 5 (18); the other corners keep 4.
    tactics = sm.move_priorities(TTT, _board("XX. OO. ..."))
    np.testing.assert_array_equal(tactics, [INF, INF, 20, INF, INF, 18, 4, 0, 4])
    # Cell 8 completes X's diagonal and O's column 2: a win (20) beats a block (18).
    both = sm.move_priorities(TTT, _board("X.O .XO ..."))
    assert both[8] == 20 and both[1] == 8  # 1: column 1 with X's centre
    # White's view of the same board.
    white = sm.move_priorities(TTT, _board("XX. OO. ..."), player=1)
    assert white[5] == 20 and white[2] == 18


def _won(b: np.ndarray, stone: int, k: int) -> bool:
    """Whether ``stone`` has k in a row somewhere (brute force)."""
    n = b.shape[0]
    for r, c in itertools.product(range(n), repeat=2):
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            cells = [(r + i * dr, c + i * dc) for i in range(k)]
            if all(0 <= y < n and 0 <= x < n and b[y, x] == stone for y, x in cells):
                return True
    return False


def _reference_priorities(board: np.ndarray, player: int, k: int) -> np.ndarray:
    """Algorithm 9 with a brute-force win check (freestyle), cell by cell."""
    n = board.shape[0]
    me, opp = player + 1, 2 - player

    def won(b, stone):
        return _won(b, stone, k)

    def wins_at(b, stone):
        return {i for i in range(n * n) if b.reshape(-1)[i] == 0 and won(_with(b, i, stone), stone)}

    mid = [n // 2] if n % 2 else [n // 2 - 1, n // 2]
    centre = {r * n + c for r in mid for c in mid}
    corners = {0, n - 1, n * (n - 1), n * n - 1}
    before = wins_at(board, me)
    out = np.full(n * n, INF)
    for i in np.flatnonzero(board.reshape(-1) == 0):
        after = _with(board, i, me)
        if won(after, me):
            p = 20
        elif i in wins_at(board, opp):
            p = 18
        elif wins_at(after, me) - before:
            p = 8
        else:
            p = 0
        p = max(p, 6) if i in centre else max(p, 4) if i in corners else p
        out[i] = p
    return out


def test_priorities_on_a_hand_made_5x5_k4_position():
    board = _board("..... .XX.. ..O.. ..O.. .....")  # black to move, O's column is capped
    got = sm.move_priorities(FIVE, board).reshape(5, 5)
    assert got[1, 0] == got[1, 3] == got[1, 4] == 8  # three in row 1, the fourth cell open
    assert got[0, 0] == got[4, 4] == got[0, 4] == 4  # corners, no line
    assert got[0, 1] == got[4, 2] == 0
    assert (got == 18).sum() == 0  # O has no win in one
    blocked = _board("..... .XX.. ..O.. ..O.. ..O..")
    assert sm.move_priorities(FIVE, blocked, player=0).reshape(5, 5)[1, 2] == INF
    assert sm.move_priorities(FIVE, _board("..... ..... .XO.. .XO.. .XO.."), player=0)[
        5 + 1] == 20  # column 1 completed upwards


@pytest.mark.parametrize("env", [TTT, FIVE], ids=["3x3", "5x5k4"])
def test_priorities_match_a_cell_by_cell_reference(env):
    """On random unfinished positions (several with wins, blocks and threats)."""
    rng = _rng(1)
    n = env.size
    checked = set()
    while len(checked) < 12:
        board = np.zeros(n * n, np.int8)
        stones = rng.integers(1, n * n - 3)
        for t, cell in enumerate(rng.permutation(n * n)[:stones]):
            board[cell] = 1 + t % 2
        board = board.reshape(n, n)
        if _won(board, 1, env.k) or _won(board, 2, env.k):
            continue
        checked.add(board.tobytes())
        player = int(stones % 2)
        np.testing.assert_array_equal(sm.move_priorities(env, board, player),
                                      _reference_priorities(board, player, env.k))


# ---------------------------------------------------------------- one iteration


def _learner(**kwargs) -> sm.SharedMCTS:
    return sm.SharedMCTS(TTT, **kwargs)


def _key_after(board, cell, stone) -> int:
    return canonical_key(_with(board, cell, stone))


@pytest.mark.parametrize("seed", range(4))
def test_expansion_adds_only_the_unexplored_move_of_highest_priority(seed):
    learner = _learner()
    root = _board("X.. .O. ...")  # X to move; 1~3, 2~6, 5~7 by the diagonal mirror
    learner.tree.add(canonical_key(root), 0.5)
    learner.tree.add(_key_after(root, 1, 1), 0.5)  # move 1 (and 3) explored
    before = len(learner.tree)
    rng = _rng(seed)
    learner.search(root, 1, rng=rng)
    assert len(learner.tree) == before + 1  # exactly one new node
    assert _key_after(root, 2, 1) in learner.tree  # the other threat (priority 8)
    assert _key_after(root, 8, 1) not in learner.tree  # the corner (4) waits
    learner.search(root, 1, rng=rng)
    assert _key_after(root, 8, 1) in learner.tree and _key_after(root, 5, 1) not in learner.tree
    learner.search(root, 1, rng=rng)
    assert _key_after(root, 5, 1) in learner.tree


def test_the_heavy_playout_takes_a_win_and_blocks_one():
    learner = _learner(max_playout=1)
    win = np.append(_board("XX. OO. ...").reshape(-1), 0)  # X (black) wins at 2
    assert all(learner._playout(win, 0, _rng(s)) == 0 for s in range(20))
    # X must block O at 2; then O cannot win at once, so two moves end unfinished: a draw.
    # A playout that skipped the block would let O win on the second move.
    learner = _learner(max_playout=2)
    block = np.append(_board("OO. X.. X..").reshape(-1), 0)
    assert all(learner._playout(block, 0, _rng(s)) is None for s in range(20))
    assert _learner(max_playout=20)._playout(np.append(_board("OO. X.. X..").reshape(-1), 0), 1,
                                             _rng()) == 1  # O to move wins


def test_ucb1_score_is_the_reports_formula():
    assert sm.ucb_score(10, 5, 0.8, 1.4) == pytest.approx(0.2 + 1.4 * np.sqrt(np.log(10) / 5))
    assert sm.ucb_score(1, 3, 0.25, 1.4) == pytest.approx(0.75)  # ln 1 = 0


def test_selection_takes_the_child_best_for_the_parents_player():
    """Root: the empty board; its children (a corner, an edge, the centre) hand-set. The
    child means are results for the player to move there (white), so black scores
    1 - mu: the centre (mu 0.1) wins the UCB1 comparison; read from the wrong side
    (mu itself) the edge would."""
    learner = _learner()
    empty = np.zeros((3, 3), np.int8)
    tree = learner.tree
    tree.visits[canonical_key(empty)], tree.value_sums[canonical_key(empty)] = 10, 5.0
    children = {0: (5, 4.0), 1: (2, 1.0), 4: (3, 0.3)}  # corner, edge, centre
    for cell, (n, w) in children.items():
        key = _key_after(empty, cell, 1)
        tree.visits[key], tree.value_sums[key] = n, w
    scores = {cell: sm.ucb_score(10, n, w / n, 1.4) for cell, (n, w) in children.items()}
    wrong = {cell: (w / n) + 1.4 * np.sqrt(np.log(10) / n) for cell, (n, w) in children.items()}
    assert max(scores, key=scores.get) == 4 and max(wrong, key=wrong.get) == 1
    learner.search(empty, 1, rng=_rng())
    assert tree.visits[_key_after(empty, 4, 1)] == 4
    assert tree.visits[_key_after(empty, 0, 1)] == 5 and tree.visits[_key_after(empty, 1, 1)] == 2
    assert tree.visits[canonical_key(empty)] == 11


def test_backup_scores_results_for_the_player_to_move_at_each_node():
    learner = _learner()
    root = _board("XX. OO. ...")  # X wins at 2
    learner.search(root, 50, rng=_rng())
    won = _with(root, 2, 1)
    visits, value = learner.tree.node(won)
    assert visits > 0 and value == 0.0  # O is to move there and has lost
    root_visits, root_value = learner.tree.node(root)
    assert root_visits == 50 and 0 < root_value <= 50


# ---------------------------------------------------------------- the shared tree


def test_a_search_from_one_side_updates_the_nodes_the_other_side_reads():
    learner = _learner()
    empty = np.zeros((3, 3), np.int8)
    learner.search(empty, 60, rng=_rng())  # black's search
    centre = _with(empty, 4, 1)  # white to move here
    visits, _ = learner.tree.node(centre)
    assert visits > 0
    learner.search(centre, 30, rng=_rng())  # white's search starts at black's child
    assert learner.tree.node(centre)[0] == visits + 30


def test_symmetric_boards_share_one_node():
    learner = _learner()
    a, b = _board("X.. ... ..."), _board("... ... ..X")  # white to move on both
    learner.search(a, 20, rng=_rng())
    assert learner.tree.node(b) == learner.tree.node(a) == (20, pytest.approx(
        learner.tree.node(a)[1]))
    learner.search(b, 5, rng=_rng())
    assert learner.tree.node(a)[0] == 25
    # The 9 first moves are 3 nodes (a corner, an edge, the centre): a fresh search of
    # the empty board expands those 3, and every iteration passes through one of them.
    fresh, empty = _learner(), np.zeros((3, 3), np.int8)
    fresh.search(empty, 10, rng=_rng())
    children = {_key_after(empty, cell, 1) for cell in range(9)}
    assert len(children) == 3 and all(k in fresh.tree for k in children)
    assert fresh.tree.node(empty)[0] == 10 == sum(fresh.tree.visits[k] for k in children)
    assert len(fresh.tree) > 4  # and the iterations went on below them


# ---------------------------------------------------------------- the final move


def test_the_final_move_takes_a_win_then_blocks_a_loss_whatever_the_tree():
    learner = _learner()
    for s in range(10):
        assert learner.best_move(_board("XX. OO. ..."), 1.0, rng=_rng(s)) == 2  # win
        assert learner.best_move(_board("OO. X.. X.."), 1.0, rng=_rng(s)) == 2  # block
    # The block wins over a tree that prefers another move.
    root = _board("OO. X.. X..")
    learner.tree.add(_key_after(root, 5, 1), 0.0)  # move 5: a loss for O, so good for X
    assert learner.best_move(root, rng=_rng()) == 2


def test_the_final_move_maximises_one_minus_the_childs_mean():
    learner = _learner()
    empty = np.zeros((3, 3), np.int8)
    for cell, mean in ((0, 0.2), (1, 0.6), (4, 0.9)):  # white's means after each move
        key = _key_after(empty, cell, 1)
        learner.tree.visits[key], learner.tree.value_sums[key] = 10, 10 * mean
    moves = {learner.best_move(empty, rng=_rng(s)) for s in range(30)}
    assert moves == {0, 2, 6, 8}  # the four symmetric corners, ties at random
    noisy = [learner.best_move(empty, 1.0, rng=_rng(s)) for s in range(60)]
    assert {1, 4} & set(noisy)  # noise of std 1 sometimes picks another child


# ---------------------------------------------------------------- files


def test_tree_round_trip(tmp_path):
    learner = _learner()
    learner.search(np.zeros((3, 3), np.int8), 100, rng=_rng())
    path = tmp_path / "tree.npz"
    learner.save(path)
    loaded = _learner().load(path)
    assert loaded.tree == learner.tree and len(loaded.tree) > 10
    again = sm.SharedMCTS.from_file(path, iterations=7)
    assert again.tree == learner.tree and again.env == TTT and again.iterations == 7


def test_a_tree_for_another_game_or_a_damaged_file_is_refused(tmp_path):
    learner = _learner()
    learner.search(np.zeros((3, 3), np.int8), 20, rng=_rng())
    path = tmp_path / "tree.npz"
    learner.save(path)
    with pytest.raises(ValueError, match=r"3x3 board, k=3.*this learner plays 5x5, k=4"):
        sm.SharedMCTS(FIVE).load(path)
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="cannot read a SharedMCTS tree"):
        _learner().load(garbage)
    weights = tmp_path / "weights.npz"
    LinearTDLearner(TTT).save(weights)
    with pytest.raises(ValueError, match="not a SharedMCTS file"):
        _learner().load(weights)
    keys, visits, sums = learner.tree.arrays()
    bad = tmp_path / "bad.npz"
    np.savez(bad, keys=keys, visits=visits, value_sums=sums + visits,  # sums above visits
             size=np.int32(3), k=np.int32(3), rule=np.str_("freestyle"),
             format=np.str_(sm._FORMAT))
    with pytest.raises(ValueError, match="damaged tree"):
        _learner().load(bad)


# ---------------------------------------------------------------- training and play


@pytest.fixture(scope="module")
def trained():
    learner = sm.SharedMCTS(TTT, iterations=100)
    stats = learner.train(20, seed=0)
    return learner, stats


def test_training_stats_and_reproducibility(trained):
    learner, stats = trained
    assert stats["black_wins"] + stats["white_wins"] + stats["draws"] == 20
    assert stats["first_seat_wins"] + stats["second_seat_wins"] == 20 - stats["draws"]
    assert 5 <= stats["mean_length"] <= 9 and stats["tree_size"] == len(learner.tree)
    assert stats["tree_size"] > 500  # most of the 765 positions up to symmetry
    again = sm.SharedMCTS(TTT, iterations=100)
    again.train(20, seed=0)
    assert again.tree == learner.tree


def test_trained_agent_never_loses_to_the_perfect_player_but_an_untrained_one_does(trained):
    """20 self-play games of 100 iterations a move, then 100 a move at play: 10 games
    against exact minimax, colours alternating, all drawn. The same search without
    training at 10 iterations a move loses some."""
    learner, _ = trained
    perfect = agents.make("minimax", TTT)
    agent = learner.agent()
    score = arena.play_match(TTT, agent, perfect, 10, seed=0).score(agent.name)
    assert score["losses"] == 0 and score["draws"] == 10
    weak = sm.SharedMCTS(TTT, iterations=10).agent("weak")
    assert arena.play_match(TTT, weak, perfect, 10, seed=0).score("weak")["losses"] > 0


def test_the_agent_writes_to_the_shared_tree_and_is_reproducible():
    learner = _learner(iterations=20)
    agent = learner.agent()
    state = TTT.init()
    key = jax.random.key(3)
    move = agent.act(state, key)
    assert learner.tree.node(np.zeros((3, 3), np.int8))[0] == 20
    snapshot = sm.SharedMCTS(TTT, iterations=20)
    assert snapshot.agent().act(state, key) == move


# ---------------------------------------------------------------- bad input


def test_bad_settings_and_inputs_are_refused_by_name():
    for kwargs, word in [(dict(iterations=0), "iterations"), (dict(iterations=1.5), "iterations"),
                         (dict(iterations=True), "iterations"), (dict(c=-1.0), "c must"),
                         (dict(temperature=-0.1), "temperature"),
                         (dict(temperature=float("nan")), "temperature"),
                         (dict(max_playout=0), "max_playout")]:
        with pytest.raises(ValueError, match=word):
            _learner(**kwargs)
    with pytest.raises(ValueError, match="boards from 3x3 to 6x6"):
        sm.SharedMCTS(Gomoku(7, 5))
    learner = _learner()
    with pytest.raises(ValueError, match="iterations must be a positive integer"):
        learner.search(np.zeros((3, 3), np.int8), -1, rng=_rng())
    with pytest.raises(ValueError, match="games must be a positive integer"):
        learner.train(0)
    with pytest.raises(ValueError, match="temperature"):
        learner.best_move(np.zeros((3, 3), np.int8), -1.0, rng=_rng())
    with pytest.raises(ValueError, match=r"board \[3, 3\], got shape \(5, 5\)"):
        learner.search(np.zeros((5, 5), np.int8), 1, rng=_rng())
    with pytest.raises(ValueError, match="over"):
        learner.best_move(_board("XXX OO. ..."), rng=_rng())
    with pytest.raises(ValueError, match="player must be 0"):
        learner.search(np.zeros((3, 3), np.int8), 1, rng=_rng(), player=2)
    # the tree is keyed by boards: a player other than the one to move would back up
    # results for the wrong side
    with pytest.raises(ValueError, match=r"player 1 is not the one to move on this board "
                                         r"\(black, from its stones\)"):
        learner.search(np.zeros((3, 3), np.int8), 1, rng=_rng(), player=1)
    with pytest.raises(ValueError, match="0 black and 1 white stones: no game reaches"):
        learner.best_move(_board("O.. ... ..."), rng=_rng())
    assert len(learner.tree) == 0  # nothing was searched
    with pytest.raises(ValueError, match="shared-mcts"):
        learner.agent().act(FIVE.init(), jax.random.key(0))
