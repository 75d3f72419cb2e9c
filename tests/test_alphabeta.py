"""Tests of algorithms.alphabeta: the exact solver against brute force and every line of
play on tic-tac-toe, tactical positions for the heuristic searches, agreement of the
Python pattern evaluation with gomoku_jax.tactics, determinism, time-limited iterative
deepening and by_name."""

from __future__ import annotations

import functools
import re
import time

import jax
import numpy as np
import pytest

from algorithms import alphabeta as AB
from algorithms.alphabeta import BIG, GomokuBotAgent, MinimaxAgent, NegamaxAgent, by_name
from gomoku_jax import tactics
from gomoku_jax.game import Gomoku
from gomoku_jax.reference import NumpyGomoku

CHAR = {".": 0, "X": 1, "O": 2}


def grid(text: str) -> np.ndarray:
    """A board drawn as rows of space-separated ``.``, ``X`` (black), ``O`` (white)."""
    rows = [line.split() for line in text.strip().splitlines()]
    return np.array([[CHAR[ch] for ch in row] for row in rows], np.int8)


def empty_with(n: int, black=(), white=()) -> np.ndarray:
    b = np.zeros((n, n), np.int8)
    for r, c in black:
        b[r, c] = 1
    for r, c in white:
        b[r, c] = 2
    return b


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def random_position(n: int, k: int, rule: str, seed: int, plies: int) -> tuple[np.ndarray, int]:
    """A position reached by random play, stopped before anyone wins."""
    g = NumpyGomoku(n, k, rule)
    r = np.random.default_rng(seed)
    while g.move_count < plies:
        board, player = g.board.copy(), g.current_player
        g.step(int(r.choice(g.legal_actions())))
        if g.terminated:
            return board, player
    return g.board.copy(), g.current_player


# ------------------------------------------------------- evaluation vs tactics
@pytest.mark.parametrize("n,k,rule", [(9, 5, "freestyle"), (9, 5, "standard"), (6, 3, "freestyle")])
def test_line_patterns_agree_with_tactics(n, k, rule):
    """The memoised line evaluation equals tactics.pattern_score / move_scores /
    winning_moves on random boards, also after make and unmake."""
    geom, pats = AB._Geometry(n, 2), AB._LinePatterns(k, rule)
    r = np.random.default_rng(1)
    for _ in range(8):
        board = r.choice(3, size=(n, n), p=[0.5, 0.25, 0.25]).astype(np.int8)
        sb = AB._SearchBoard(geom, pats, board)
        assert sb.value == pytest.approx(float(tactics.pattern_score(board, 0, k, rule)), rel=1e-6)
        flat = board.reshape(-1)
        ref = np.asarray(tactics.move_scores(board, 0, k, rule)).reshape(-1)
        mine = np.array([sb.move_info(c)[0] if flat[c] == 0 else -np.inf for c in range(n * n)])
        np.testing.assert_allclose(mine, ref, rtol=1e-6)
        for player in (0, 1):
            wins = np.flatnonzero(np.asarray(tactics.winning_moves(board, player, k, rule)))
            assert sb.winning_cells(player + 1) == [int(c) for c in wins]
        before = sb.value
        cells = [int(c) for c in np.flatnonzero(flat == 0)[:6]]
        for i, c in enumerate(cells):
            sb.play(c, 1 + i % 2)
        after = np.array(sb.cells, np.int8).reshape(n, n)
        assert sb.value == pytest.approx(float(tactics.pattern_score(after, 0, k, rule)), rel=1e-6)
        for c in reversed(cells):
            sb.undo(c)
        assert sb.cells == [int(x) for x in flat]
        assert sb.value == pytest.approx(before, rel=1e-6)


def test_evaluate_is_pattern_score_for_the_mover(env9):
    board, player = random_position(9, 5, "freestyle", 3, 20)
    agent = NegamaxAgent(env9, 1)
    state = env9.from_board(board, to_move=player)
    assert agent.evaluate(state) == pytest.approx(
        float(tactics.pattern_score(board, player, 5, "freestyle")), rel=1e-6
    )


# ----------------------------------------------------------------- exact solver
@pytest.fixture(scope="module")
def ttt():
    return Gomoku(3, 3)


@pytest.fixture(scope="module")
def perfect(ttt):
    return MinimaxAgent(ttt)


@functools.lru_cache(maxsize=None)
def _brute(cells: tuple, stone: int) -> int:
    g = NumpyGomoku(3, 3)
    stones = sum(1 for x in cells if x)
    best = None
    for c in range(9):
        if cells[c]:
            continue
        g.board = np.array(cells, np.int8).reshape(3, 3)
        g.board[divmod(c, 3)] = stone
        if g.wins_at(*divmod(c, 3)):
            v = BIG - (stones + 1)
        elif stones + 1 == 9:
            v = 0
        else:
            v = -_brute(tuple(int(x) for x in g.board.reshape(-1)), 3 - stone)
        best = v if best is None else max(best, v)
    return best


def _reachable(cells=(0,) * 9, stone=1, seen=None):
    """Every non-terminal position of tic-tac-toe reachable from the empty board."""
    seen = {} if seen is None else seen
    if cells in seen:
        return seen
    seen[cells] = stone
    g = NumpyGomoku(3, 3)
    for c in range(9):
        if cells[c]:
            continue
        board = np.array(cells, np.int8).reshape(3, 3)
        board[divmod(c, 3)] = stone
        g.board = board
        if g.wins_at(*divmod(c, 3)) or all(board.reshape(-1)):
            continue
        _reachable(tuple(int(x) for x in board.reshape(-1)), 3 - stone, seen)
    return seen


def test_tic_tac_toe_is_a_draw(ttt, perfect):
    assert perfect.value(ttt.init()) == 0
    assert set(perfect.move_values(ttt.init()).values()) == {0}


@pytest.mark.parametrize("canonical", [True, False])
def test_solver_values_equal_brute_force_minimax(ttt, canonical):
    """Every reachable position, both colours to move: exact values including the
    quicker-win / slower-loss magnitudes."""
    solver = MinimaxAgent(ttt, canonical=canonical)
    positions = _reachable()
    assert len(positions) == 4520  # non-terminal positions of tic-tac-toe
    for cells, stone in positions.items():
        state = ttt.from_board(np.array(cells).reshape(3, 3), to_move=stone - 1)
        assert solver.value(state) == _brute(cells, stone), cells


def _never_loses(env, agent, agent_player, seed):
    """Walk every line of opponent play against ``agent``; return the outcomes seen."""
    outcomes = set()

    def walk(g: NumpyGomoku):
        if g.terminated:
            outcomes.add(g.winner)
            return
        if g.current_player == agent_player:
            state = env.from_board(g.board, to_move=g.current_player)
            move = agent.select(state, np.random.default_rng(seed))
            assert g.board.reshape(-1)[move] == 0
            replies = [move]
        else:
            replies = [int(c) for c in g.legal_actions()]
        for move in replies:
            child = NumpyGomoku(env.size, env.k, env.rule)
            child.board, child.current_player = g.board.copy(), g.current_player
            child.move_count, child.terminated, child.winner = g.move_count, False, -1
            child.step(move)
            walk(child)

    walk(NumpyGomoku(env.size, env.k, env.rule))
    return outcomes


@pytest.mark.parametrize("agent_player", [0, 1])
@pytest.mark.parametrize("seed", [0, 1])
def test_perfect_player_never_loses_tic_tac_toe(ttt, perfect, agent_player, seed):
    outcomes = _never_loses(ttt, perfect, agent_player, seed)
    assert 1 - agent_player not in outcomes
    assert agent_player in outcomes  # it punishes the opponent's mistakes


def test_perfect_player_wins_4x4_k3_as_black_against_everything():
    env = Gomoku(4, 3)
    solver = MinimaxAgent(env)
    assert solver.value(env.init()) == BIG - 5  # black wins with its third stone
    outcomes = _never_loses(env, solver, 0, 0)
    assert outcomes == {0}


def test_4x4_k4_is_a_draw():
    env = Gomoku(4, 4)
    assert MinimaxAgent(env).value(env.init()) == 0


def test_solver_wins_in_one_and_blocks_in_one(ttt, perfect):
    # Black to move wins at (0, 2) (top row), though white also threatens (1, 2).
    board = grid("""
        X X .
        O O .
        X . O
    """)
    state = ttt.from_board(board, to_move=0)
    assert perfect.select(state, rng()) == 2
    assert perfect.move_values(state)[2] == BIG - 7  # the 7th stone wins
    # White to move must block the top row at (0, 2).
    board = grid("""
        X X .
        . O .
        . . .
    """)
    state = ttt.from_board(board, to_move=1)
    for seed in range(4):
        assert perfect.select(state, rng(seed)) == 2


def test_solver_prefers_the_quicker_win():
    env = Gomoku(4, 3)
    solver = MinimaxAgent(env)
    # Black wins at once at (0, 2); other moves also win, but later.
    board = empty_with(4, black=[(0, 0), (0, 1)], white=[(3, 3), (3, 2)])
    state = env.from_board(board, to_move=0)
    values = solver.move_values(state)
    assert max(values.values()) == BIG - 5
    assert solver.select(state, rng()) == 2


# ------------------------------------------------------------ heuristic agents
def heuristic_agents(env):
    return [NegamaxAgent(env, 2), NegamaxAgent(env, 3), GomokuBotAgent(env)]


@pytest.fixture(scope="module")
def env15():
    return Gomoku(15, 5)


@pytest.mark.parametrize("which", range(3))
def test_takes_the_win_in_one(env9, which):
    agent = heuristic_agents(env9)[which]
    # Black wins at (4, 5); white's four on column 7 would win at (4, 7).
    board = empty_with(9, black=[(4, 1), (4, 2), (4, 3), (4, 4), (6, 6)],
                       white=[(4, 0), (0, 7), (1, 7), (2, 7), (3, 7)])
    state = env9.from_board(board, to_move=0)
    for seed in range(3):
        assert agent.select(state, rng(seed)) == 4 * 9 + 5


@pytest.mark.parametrize("which", range(3))
def test_blocks_a_loss_in_one(env9, which):
    agent = heuristic_agents(env9)[which]
    # White's broken four O O . O O on row 2: black must fill the gap (2, 4).
    board = empty_with(9, black=[(4, 4), (5, 5), (6, 3), (4, 5)],
                       white=[(2, 2), (2, 3), (2, 5), (2, 6)])
    state = env9.from_board(board, to_move=0)
    assert agent.select(state, rng()) == 2 * 9 + 4


@pytest.mark.parametrize("which", range(3))
def test_blocks_an_open_three(env15, which):
    """White's open three on row 7 would become an open four: black blocks an end."""
    agent = heuristic_agents(env15)[which]
    board = empty_with(15, black=[(3, 3), (11, 12)], white=[(7, 6), (7, 7), (7, 8)])
    state = env15.from_board(board, to_move=0)
    assert agent.select(state, rng()) in (7 * 15 + 5, 7 * 15 + 9)


@pytest.mark.parametrize("which", range(3))
def test_makes_an_open_four_from_an_open_three(env15, which):
    agent = heuristic_agents(env15)[which]
    board = empty_with(15, black=[(7, 6), (7, 7), (7, 8)], white=[(3, 3), (11, 12)])
    state = env15.from_board(board, to_move=0)
    assert agent.select(state, rng()) in (7 * 15 + 5, 7 * 15 + 9)


@pytest.mark.parametrize("which", range(3))
def test_centre_on_an_empty_board(env9, env15, which):
    for env in (env9, env15):
        agent = heuristic_agents(env)[which]
        c = env.size // 2
        assert agent.select(env.init(), rng()) == c * env.size + c


@pytest.mark.parametrize("which", range(3))
def test_legal_and_deterministic_on_random_positions(env9, which):
    agent = heuristic_agents(env9)[which]
    for seed in range(6):
        board, player = random_position(9, 5, "freestyle", seed, plies=4 + 5 * seed)
        state = env9.from_board(board, to_move=player)
        move = agent.select(state, rng(seed))
        assert 0 <= move < 81 and board.reshape(-1)[move] == 0
        assert agent.select(state, rng(seed)) == move
        key = jax.random.key(seed)
        assert agent.act(state, key) == agent.act(state, key)


def test_standard_rule_overline_is_not_a_win():
    env = Gomoku(9, 5, "standard")
    agent = NegamaxAgent(env, 2)
    # X X X X . X: the gap makes six, no win under the standard rule.
    board = empty_with(9, black=[(4, 0), (4, 1), (4, 2), (4, 3), (4, 5)],
                       white=[(0, 0), (0, 8), (8, 0), (8, 8), (1, 4)])
    sb = AB._SearchBoard(AB._Geometry(9, 2), AB._LinePatterns(5, "standard"), board)
    assert sb.winning_cells(1) == []
    values = agent.root_values(env.from_board(board, to_move=0))
    assert values[4 * 9 + 4] < BIG / 2
    free = Gomoku(9, 5)
    assert NegamaxAgent(free, 2).select(free.from_board(board, to_move=0), rng()) == 4 * 9 + 4


def test_self_play_finishes_with_legal_moves(env9):
    def game():
        black, white = GomokuBotAgent(env9), NegamaxAgent(env9, 2)
        g = NumpyGomoku(9, 5)
        r, moves = rng(5), []
        while not g.terminated:
            agent = (black, white)[g.current_player]
            move = agent.select(env9.from_board(g.board, to_move=g.current_player), r)
            assert move in g.legal_actions(), (len(moves), move)
            g.step(int(move))
            moves.append(int(move))
        return g, moves

    g, moves = game()
    assert g.winner in (0, 1) or (g.winner == -1 and len(moves) == 81)
    if g.winner >= 0:  # the last move made five for its player
        assert len(moves) % 2 == (1 if g.winner == 0 else 0)
    assert game()[1] == moves  # the same rng plays the same game


def test_settings_are_checked(env9):
    with pytest.raises(ValueError, match="depth must be an integer >= 1, got 0"):
        NegamaxAgent(env9, 0)
    with pytest.raises(ValueError, match="top_n must be an integer >= 1 or None, got 0"):
        GomokuBotAgent(env9, top_n=0)
    with pytest.raises(ValueError, match=r"unknown pattern weights \['six'\]; known: five"):
        NegamaxAgent(env9, 2, weights={"six": 1.0})
    # a weight that is not a finite number would make sums NaN (every comparison false)
    for bad in (float("nan"), float("inf"), "100", None, True):
        for make in (lambda w: NegamaxAgent(env9, 2, weights=w),
                     lambda w: AB.Seed004AlphaBetaAgent(env9, 2, weights=w),
                     lambda w: GomokuBotAgent(env9, 2, weights=w)):
            with pytest.raises(ValueError, match=re.escape(
                    f"pattern weight 'open_three' must be a finite number, got {bad!r}")):
                make({"open_three": bad})
    assert NegamaxAgent(env9, 2, weights={"open_three": np.float32(5)})._patterns.w[
        "open_three"] == 5.0


# ------------------------------------------------- deadlines (iterative deepening)
# Quiet 15x15 middle-game positions (from GomokuBot self-play), black to move: no
# immediate win or block, so the agents have to search.
MIDGAMES = [
    grid("""
        . . . . . . . . . . . . . . .
        . . . . . . . . . . . . . . .
        . . . . X . O . . . . . . . .
        . . . . . O . X . . . . . . .
        . . . . . . O O X . . . . . .
        . . . . . O X O . . . . . . .
        . . . . X . X O . . . . . . .
        . . . . . . X X O . . . . . .
        . . . . . . O . X . . . . . .
        . . . . . . . . . X . . . . .
        . . . . . . . . . . O . . . .
        . . . . . . . . . . . . . . .
        . . . . . . . . . . . . . . .
        . . . . . . . . . . . . . . .
        . . . . . . . . . . . . . . .
    """),
    grid("""
        . . . . . . . . . . . . . . .
        . . . . . . . . . . . . . . .
        . . . . . . . . . . . . . . .
        . . . . O . . . . . . . . . .
        . . . . . X . . . . . . . . .
        . . . . . X X O . . O . . . .
        . . . . . . O X O X . . . . .
        . . . . . . . O X . . . . . .
        . . . . . . X X O O . . . . .
        . . . . . . X . . O . . . . .
        . . . . . O . . . . X . . . .
        . . . . . . . . . . . . . . .
        . . . . . . . . . . . . . . .
        . . . . . . . . . . . . . . .
        . . . . . . . . . . . . . . .
    """),
]


def deadline_agents(env, clock=None):
    return {
        "negamax": NegamaxAgent(env, 2, clock=clock),
        "negamax-3": NegamaxAgent(env, 3, clock=clock),
        "negamax-3-table": NegamaxAgent(env, 3, use_table=True, clock=clock),
        # The threat-space step answers some of these positions before any alpha-beta
        # (completed_depth 0); these tests are about the iterative deepening.
        "gomokubot": GomokuBotAgent(env, clock=clock, threats=None),
    }


class NodeClock:
    """A fake clock that reads the agent's node count: "time" is search work, so where
    the search stops is deterministic."""

    agent = None

    def __call__(self) -> float:
        return float(self.agent.nodes)


@pytest.mark.parametrize("which", ["negamax", "negamax-3", "negamax-3-table", "gomokubot"])
def test_far_deadline_plays_the_no_deadline_move(env15, which):
    """Iterative deepening that completes every depth answers exactly like the plain
    fixed-depth search (same move for the same key, ties included)."""
    agent = deadline_agents(env15)[which]
    for board in MIDGAMES:
        state = env15.from_board(board, to_move=0)
        for seed in range(2):
            key = jax.random.key(seed)
            plain = agent.act(state, key)
            assert agent.completed_depth == agent.depth
            timed = agent.act(state, key, deadline=time.perf_counter() + 1000.0)
            assert agent.completed_depth == agent.depth
            assert timed == plain


@pytest.mark.parametrize("kind", ["negamax", "gomokubot"])
@pytest.mark.parametrize("budget", [0, 100, 1000, 3000])
def test_search_stops_at_the_deadline_with_the_last_completed_depth(env15, kind, budget):
    """With a clock counting nodes, the search stops within one clock-check interval of
    the deadline and answers with the move of the last completed iteration, which is the
    fixed-depth search's move at that depth (or, when not even depth 1 finished, the
    best-ordered candidate)."""
    clock = NodeClock()
    make = {"negamax": lambda d, **kw: NegamaxAgent(env15, d, **kw),
            "gomokubot": lambda d, **kw: GomokuBotAgent(env15, d, threats=None, **kw)}[kind]
    agent = clock.agent = make(8, clock=clock)
    state = env15.from_board(MIDGAMES[0], to_move=0)
    key = jax.random.key(3)
    move = agent.act(state, key, deadline=float(budget))
    assert agent.nodes <= budget + AB._CHECK_EVERY
    assert MIDGAMES[0].reshape(-1)[move] == 0
    depth = agent.completed_depth
    assert depth < agent.depth
    if depth == 0:
        sb = AB._SearchBoard(agent._geom, agent._patterns, MIDGAMES[0])
        assert move == agent._ordered(sb, 1, -1)[0]
    else:
        assert move == make(depth).act(state, key)
    if budget >= 100:
        assert depth >= 1


class RecordingClock:
    """The real clock (``time.perf_counter``), keeping every reading the agent takes
    and the agent's node count at that reading."""

    agent = None

    def __init__(self):
        self.readings: list[float] = []
        self.nodes: list[int] = []

    def __call__(self) -> float:
        self.readings.append(time.perf_counter())
        self.nodes.append(self.agent.nodes)
        return self.readings[-1]


@pytest.mark.parametrize("kind", ["negamax", "gomokubot"])
def test_close_deadline_stops_soon_after_the_clock_passes_it(env15, kind):
    """A deep search on the real clock with 50 ms left answers a legal move short of its
    depth, and once it has read the clock past its cut-off searches at most the nodes
    between two readings; or it stopped before the cut-off because its next iteration
    would not have finished in time (which of the two is the machine's business; the
    node-clock test pins where the search stops)."""
    clock = RecordingClock()
    make = NegamaxAgent if kind == "negamax" else GomokuBotAgent
    agent = clock.agent = make(env15, 6 if kind == "negamax" else 14, clock=clock)
    for board in MIDGAMES:
        state = env15.from_board(board, to_move=0)
        key = jax.random.key(0)
        agent.act(state, key, deadline=time.perf_counter() + 0.05)  # warm up (compiles)
        clock.readings.clear()
        clock.nodes.clear()
        deadline = time.perf_counter() + 0.05
        move = agent.act(state, key, deadline=deadline)
        # the search's cut-off: the deadline less a margin of the time left at the start
        now = clock.readings[0]
        stop_at = deadline - min(AB._MARGIN_MAX, max(AB._MARGIN_MIN,
                                                     AB._MARGIN_FRACTION * (deadline - now)))
        past = [i for i, t in enumerate(clock.readings) if t >= stop_at]
        if past:  # stopped by the clock: within one check's nodes of passing the cut-off
            assert agent.nodes - clock.nodes[past[0]] <= AB._CHECK_EVERY, (
                kind, clock.nodes[past[0]], agent.nodes)
        else:  # stopped before it: an iteration after the first would not have finished
            assert agent.completed_depth >= 1, kind
        assert board.reshape(-1)[move] == 0
        assert agent.completed_depth < agent.depth  # the deadline cut the search short


@pytest.mark.parametrize("which", range(3))
def test_forced_moves_under_an_expired_deadline(env9, which):
    """A deadline already past still takes the win in one and blocks the loss in one."""
    agent = heuristic_agents(env9)[which]
    past = time.perf_counter() - 1.0
    board = empty_with(9, black=[(4, 1), (4, 2), (4, 3), (4, 4), (6, 6)],
                       white=[(4, 0), (0, 7), (1, 7), (2, 7), (3, 7)])
    assert agent.act(env9.from_board(board, to_move=0), jax.random.key(0), past) == 4 * 9 + 5
    board = empty_with(9, black=[(4, 4), (5, 5), (6, 3), (4, 5)],
                       white=[(2, 2), (2, 3), (2, 5), (2, 6)])
    assert agent.act(env9.from_board(board, to_move=0), jax.random.key(0), past) == 2 * 9 + 4
    # White (to move) faces black's four on row 4 and has none of its own: it blocks at
    # (4, 5) even with no time at all, also on the node clock.
    clock = NodeClock()
    timed = clock.agent = type(agent)(env9, agent.depth, clock=clock)
    board = empty_with(9, black=[(4, 1), (4, 2), (4, 3), (4, 4), (6, 6)],
                       white=[(4, 0), (0, 7), (1, 7), (3, 7), (7, 7)])
    assert timed.act(env9.from_board(board, to_move=1), jax.random.key(0), -1.0) == 4 * 9 + 5


# -------------------------------------------------------------------- by_name
def test_by_name(env9, ttt):
    assert isinstance(by_name("minimax", ttt), MinimaxAgent)
    a = by_name("alphabeta-3", env9)
    assert isinstance(a, NegamaxAgent) and a.depth == 3 and a.name == "alphabeta-3"
    assert by_name("alphabeta", env9).depth == 2
    assert by_name("negamax-1", env9).depth == 1
    s4 = by_name("alphabeta004", env9)
    assert isinstance(s4, AB.Seed004AlphaBetaAgent) and s4.depth == 6
    assert s4.name == "alphabeta004-6" and by_name("alphabeta004-3", env9).depth == 3
    b = by_name("gomokubot", env9)
    assert isinstance(b, GomokuBotAgent) and b.depth == 6 and b.top_n == 10
    assert by_name("GomokuBot-4", env9).depth == 4
    for bad, why in (("minimax-3", "minimax searches to the end and takes no depth"),
                     ("minimax", "'minimax' solves boards up to 4x4: it searches every game "
                                 "to its end, which on 9x9 would not finish"),
                     ("alphabeta-0", "the depth must be at least 1"),
                     ("mcts", "unknown search agent 'mcts'"),
                     ("gomokubot-x", "unknown search agent 'gomokubot-x'"),
                     ("", "unknown search agent ''")):
        with pytest.raises(ValueError, match=re.escape(why)):
            by_name(bad, env9)


# ------------------------------------------------- seed 004's heuristic alpha-beta
def _seed004_value(board: np.ndarray, stone: int, k: int, rule: str) -> float:
    """Seed 004's evaluation written out: over every line, each maximal run of one
    colour scored by its length and open ends (SEED004_PATTERN_WEIGHTS), the mover's
    sum minus the opponent's."""
    w = AB.SEED004_PATTERN_WEIGHTS
    n = board.shape[0]
    lines = [board[r] for r in range(n)] + [board[:, c] for c in range(n)]
    for a in (board, board[:, ::-1]):
        lines += [np.diagonal(a, d) for d in range(-n + 1, n)]
    lines = [[int(x) for x in line] for line in lines]
    total = {1: 0.0, 2: 0.0}
    for line in lines:
        i = 0
        while i < len(line):
            s, j = line[i], i
            while j < len(line) and line[j] == line[i]:
                j += 1
            run = j - i
            if s:
                ends = (i > 0 and line[i - 1] == 0) + (j < len(line) and line[j] == 0)
                if run == k or (run > k and rule == "freestyle"):
                    total[s] += w["five"]
                elif run < k:
                    name = {k - 1: "four", k - 2: "three", k - 3: "two", k - 4: "one"}.get(run)
                    if name and ends == 2:
                        total[s] += w[f"open_{name}"]
                    elif name in ("four", "three") and ends == 1:
                        total[s] += w[f"half_{name}"]
            i = j
    return total[stone] - total[3 - stone]


def _seed004_moves(board: np.ndarray) -> list[int]:
    """Algorithm 14 written out: the empty cells of the stones' bounding box + 2, most
    neighbours first, then in board order."""
    n = board.shape[0]
    rows, cols = np.nonzero(board)
    box = board[max(0, rows.min() - 2):rows.max() + 3, max(0, cols.min() - 2):cols.max() + 3]
    r0, c0 = max(0, rows.min() - 2), max(0, cols.min() - 2)
    cells = [(r0 + r) * n + c0 + c for r, c in zip(*np.nonzero(box == 0))]

    def neighbours(cell):
        r, c = divmod(cell, n)
        return int((board[max(0, r - 1):r + 2, max(0, c - 1):c + 2] != 0).sum())

    return sorted(cells, key=lambda cell: -neighbours(cell))


def _seed004_negamax(g: NumpyGomoku, depth: int) -> float:
    """Algorithm 15 without pruning (the same values, alpha-beta only saves work)."""
    if g.terminated:
        return 0.0 if g.winner < 0 else -(BIG + depth)
    if depth == 0:
        return _seed004_value(g.board, g.current_player + 1, g.config.k, g.config.rule)
    best = -np.inf
    for cell in _seed004_moves(g.board):
        child = g.copy()
        child.step(cell)
        best = max(best, -_seed004_negamax(child, depth - 1))
    return best


@pytest.mark.parametrize("seed", range(4))
def test_seed004_alphabeta_is_the_reports_search_on_random_positions(seed):
    """The evaluation, the candidates, every root value and the chosen move equal a
    plain (unpruned) negamax written from the report's Algorithms 13 to 15, on random
    7x7 five-in-a-row positions."""
    env = Gomoku(7, 5)
    board, player = random_position(7, 5, "freestyle", seed, plies=6 + seed)
    state = env.from_board(board, to_move=player)
    agent = AB.Seed004AlphaBetaAgent(env, depth=2)
    assert agent.evaluate(state) == _seed004_value(board, player + 1, 5, "freestyle")
    assert agent._ordered(AB._SearchBoard(agent._geom, agent._patterns, board)) == (
        _seed004_moves(board))
    g = NumpyGomoku(7, 5, "freestyle")
    g.board[:], g.current_player, g.move_count = board, player, int((board != 0).sum())
    values = agent.root_values(state)
    assert sorted(values) == sorted(_seed004_moves(board))
    for cell, v in values.items():
        child = g.copy()
        child.step(cell)
        assert v == -_seed004_negamax(child, 1), cell
    best = max(values.values())
    assert agent.act(state, jax.random.key(0)) == next(c for c, v in values.items() if v == best)


def test_seed004_alphabeta_wins_quickest_and_blocks_by_search(env9):
    """No forced-move rules: the search itself takes a win in one (scored above any
    evaluation) and, at depth 2, blocks the opponent's four."""
    # black's four on row 4, closed on the left by white: (4, 6) wins, and only it
    four = empty_with(9, black=[(4, 2), (4, 3), (4, 4), (4, 5), (8, 8)],
                      white=[(4, 1), (0, 0), (0, 8), (8, 0)])
    state = env9.from_board(four, to_move=0)
    for depth in (1, 2, 3):
        agent = AB.Seed004AlphaBetaAgent(env9, depth=depth)
        assert agent.act(state, jax.random.key(0)) == 4 * 9 + 6
        assert max(agent.root_values(state).values()) == BIG + depth - 1
    white = env9.from_board(four, to_move=1)
    blocker = AB.Seed004AlphaBetaAgent(env9, depth=2)
    assert blocker.act(white, jax.random.key(0)) == 4 * 9 + 6
    values = blocker.root_values(white)  # every other move loses at once
    assert all(v == -BIG for c, v in values.items() if c != 4 * 9 + 6)
    # the centre on an empty board, and settings checked
    assert AB.Seed004AlphaBetaAgent(env9, 2).act(env9.init(), jax.random.key(0)) == 40
    with pytest.raises(ValueError, match="Seed004AlphaBetaAgent.depth"):
        AB.Seed004AlphaBetaAgent(env9, depth=0)


# ------------------------------------------------- threat-space search (VCF / VCT)
def _five_cells(board: np.ndarray, stone: int, k: int = 5) -> list[tuple[int, int]]:
    """Empty cells where ``stone`` makes k in a row (freestyle), by brute force."""
    n = board.shape[0]
    out = []
    for r in range(n):
        for c in range(n):
            if board[r, c]:
                continue
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                run = 1
                for sgn in (1, -1):
                    rr, cc = r + sgn * dr, c + sgn * dc
                    while 0 <= rr < n and 0 <= cc < n and board[rr, cc] == stone:
                        run, rr, cc = run + 1, rr + sgn * dr, cc + sgn * dc
                if run >= k:
                    out.append((r, c))
                    break
    return out


def _open_four_move(board: np.ndarray, stone: int) -> bool:
    """Whether ``stone`` has a move after which one line through it holds two cells
    that make five in that line (an open four: the defender cannot block both)."""
    n = board.shape[0]
    for r, c in zip(*np.nonzero(board == 0)):
        board[r, c] = stone
        try:
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                wins = 0
                for step in range(-4, 5):
                    rr, cc = r + step * dr, c + step * dc
                    if not (0 <= rr < n and 0 <= cc < n) or board[rr, cc]:
                        continue
                    run = 1
                    for sgn in (1, -1):
                        ar, ac = rr + sgn * dr, cc + sgn * dc
                        while 0 <= ar < n and 0 <= ac < n and board[ar, ac] == stone:
                            run, ar, ac = run + 1, ar + sgn * dr, ac + sgn * dc
                    wins += run >= 5
                if wins >= 2:
                    return True
        finally:
            board[r, c] = 0
    return False


def _brute_vcf(board: np.ndarray, stone: int, fours: int) -> bool:
    """Whether ``stone`` (to move) wins by at most ``fours`` continuous fours, every
    empty cell tried and the defender blocking the single winning cell, and then, as
    the threat-space search counts it, by an open four once the fours are spent."""
    if _five_cells(board, stone):
        return True
    if _five_cells(board, 3 - stone):
        return False
    if fours == 0:
        return _open_four_move(board, stone)
    for r, c in zip(*np.nonzero(board == 0)):
        board[r, c] = stone
        wins = _five_cells(board, stone)
        ok = False
        if len(wins) >= 2:
            ok = True
        elif len(wins) == 1:
            board[wins[0]] = 3 - stone
            ok = _brute_vcf(board, stone, fours - 1)
            board[wins[0]] = 0
        board[r, c] = 0
        if ok:
            return True
    return False


# Black to move on 15x15 wins by continuous fours only: (6, 7) makes a four on column
# 7 (white must take (7, 7)), then (6, 4) makes two fours at once (column 4 and row 6).
VCF_BLACK = [(3, 4), (4, 4), (5, 4), (6, 5), (6, 6), (3, 7), (4, 7), (5, 7)]
VCF_WHITE = [(2, 4), (2, 7), (6, 3), (6, 9), (10, 10), (11, 2), (12, 12), (0, 14)]


def test_vcf_finds_a_forced_win_through_fours(env15):
    board = empty_with(15, black=VCF_BLACK, white=VCF_WHITE)
    assert not _five_cells(board, 1) and not _five_cells(board, 2)
    agent = GomokuBotAgent(env15, depth=2)
    g = NumpyGomoku(15, 5)
    g.board[:] = board
    g.move_count = int((board != 0).sum())
    moves = 0
    while not g.terminated:
        state = env15.from_board(g.board, to_move=g.current_player)
        if g.current_player == 0:
            move = agent.select(state, rng())
            moves += 1
            if moves == 1:
                assert agent.threat_result == "vcf" and agent.threat_nodes < 200
                b = g.board.copy()
                b.reshape(-1)[move] = 1
                assert len(_five_cells(b, 1)) >= 1  # the first move is a four
        else:
            blocks = _five_cells(g.board, 1)
            move = blocks[0][0] * 15 + blocks[0][1]  # white's forced block
        g.step(int(move))
    assert g.winner == 0 and moves <= 4


def test_vcf_search_agrees_with_brute_force_on_random_9x9_positions(env9):
    agent = GomokuBotAgent(env9)
    found = checked = 0
    for plies, seed in [(p, s) for p in (24, 32) for s in range(20)]:
        board, player = random_position(9, 5, "freestyle", seed, plies=plies)
        stone = player + 1
        if _five_cells(board, stone) or _five_cells(board, 3 - stone):
            continue  # a win in one, or a five to block: no search needed
        sb = AB._SearchBoard(agent._geom, agent._patterns, board)
        got = agent._forced_win(sb, stone, False, 2, 100_000) >= 0
        assert got == _brute_vcf(board.copy(), stone, 2), (plies, seed)
        found += got
        checked += 1
    # both answers are exercised: positions with a win by fours and positions without
    assert 5 <= found <= checked - 5, (found, checked)
    assert agent.threat_nodes > 0


def test_defends_against_the_opponents_vcf(env9):
    """White threatens (4, 5): a four on column 5 and one on row 4 at once. Black to move
    has no threat of its own and must take one of the three cells that break it; the
    threat-space search restricts the root to those, whatever the alpha-beta depth."""
    white = [(1, 5), (2, 5), (3, 5), (4, 2), (4, 3), (4, 4), (7, 2)]
    black = [(0, 5), (4, 1), (8, 0), (7, 7), (6, 0), (0, 8), (1, 0)]
    board = empty_with(9, black=black, white=white)
    assert _brute_vcf(board.copy(), 2, 3)
    state = env9.from_board(board, to_move=0)
    for depth in (1, 6):
        agent = GomokuBotAgent(env9, depth=depth)
        move = agent.select(state, rng())
        assert agent.threat_result in ("defend", "defend+probe")
        assert divmod(move, 9) in [(4, 5), (4, 6), (5, 5)]
        after = board.copy()
        after.reshape(-1)[move] = 1
        assert not _brute_vcf(after, 2, 3)


def test_threat_settings_are_checked(env9):
    with pytest.raises(ValueError, match="vcf_depth must be an integer >= 0, got -1"):
        AB.ThreatSettings(vcf_depth=-1)
    with pytest.raises(ValueError, match="defend must be a bool, got 1"):
        AB.ThreatSettings(defend=1)
    with pytest.raises(ValueError, match="defend_vct_depth"):
        AB.ThreatSettings(defend_vct_depth=-2)
    with pytest.raises(ValueError, match="max_nodes"):
        AB.ThreatSettings(max_nodes=1.5)
    with pytest.raises(ValueError, match="threats must be ThreatSettings or None"):
        GomokuBotAgent(env9, threats={"vcf_depth": 3})
    with pytest.raises(ValueError, match=re.escape("shape_bonus takes 4 numbers, got (1.0, 2.0)")):
        GomokuBotAgent(env9, shape_bonus=(1.0, 2.0))
    assert GomokuBotAgent(env9, threats=None).threats is None


# ------------------------------------------------- threats: VCT, defence, latent
def _defence_replies(sb: AB._SearchBoard, stone: int) -> list[int]:
    """The defender's answers to ``stone``'s threats: the block of its winning cell, or
    any cell that stops at least one of its open-four-making lines (one three only)."""
    wins = sb.winning_cells(stone)
    if wins:
        return wins
    out: set[int] = set()
    geom, pats = sb.g, sb.p
    for lid in range(len(geom.lines)):  # every line (short ones have no threats)
        got = pats.threats(geom.line_len[lid], sb.codes[lid])
        if got[6 + stone - 1]:
            out.update(geom.lines[lid][pos] for pos in got[4 + stone - 1])
    return sorted(out)


def _wins_against_every_defence(agent, env, board: np.ndarray, stone: int, moves: int) -> bool:
    """Whether ``agent`` (``stone`` to move) makes five within ``moves`` own moves when
    the defender answers every threat with any one of its defence squares (a quiet
    move of the agent, leaving nothing to answer, counts as a failure)."""
    move = agent.select(env.from_board(board, to_move=stone - 1), rng())
    if divmod(move, env.size) in _five_cells(board, stone):
        return True
    board = board.copy()
    board.reshape(-1)[move] = stone
    if moves <= 1 or _five_cells(board, 3 - stone):
        return False
    replies = _defence_replies(AB._SearchBoard(agent._geom, agent._patterns, board), stone)
    for reply in replies:
        after = board.copy()
        after.reshape(-1)[reply] = 3 - stone
        if not _wins_against_every_defence(agent, env, after, stone, moves - 1):
            return False
    return bool(replies)


def test_vct_finds_a_double_three_and_wins_against_every_defence(env9):
    """Black's (4, 4) makes two open threes (row 4 and column 4); no four is possible,
    so only a VCT (threats of threes) sees it. Played out against every choice of
    defence square, black wins within 3 moves."""
    board = empty_with(9, black=[(4, 2), (4, 3), (2, 4), (3, 4)],
                       white=[(0, 0), (8, 8), (0, 8), (8, 0)])
    assert not _brute_vcf(board.copy(), 1, 3)
    agent = GomokuBotAgent(env9, depth=2)
    state = env9.from_board(board, to_move=0)
    assert agent.select(state, rng()) == 4 * 9 + 4
    assert agent.threat_result == "vct"
    assert _wins_against_every_defence(agent, env9, board, 1, 3)


def test_blocks_a_four_three(env9):
    """White's (2, 5) would make a four on row 2 (black must answer at (2, 6)) and an
    open three on column 5 that then becomes an open four: black must take (2, 5), the
    one cell after which white has no win by fours (checked by brute force)."""
    board = empty_with(9, black=[(2, 1), (3, 4), (7, 1), (8, 6), (6, 8)],
                       white=[(2, 2), (2, 3), (2, 4), (3, 5), (4, 5)])
    assert _brute_vcf(board.copy(), 2, 3)
    for depth in (1, 6):
        agent = GomokuBotAgent(env9, depth=depth)
        move = agent.select(env9.from_board(board, to_move=0), rng())
        assert agent.threat_result in ("defend", "defend+probe")
        assert move == 2 * 9 + 5
        after = board.copy()
        after.reshape(-1)[move] = 1
        assert not _brute_vcf(after, 2, 3)


def test_an_own_four_that_only_delays_is_not_a_defence(env9):
    """White to move; black wins by fours. White's four at (1, 2) forces black to (0, 2)
    but black still wins by fours afterwards, so the bot defends with a quiet move
    after which black has no win by three fours (brute force)."""
    black = [(3, 3), (5, 4), (4, 4), (4, 5), (5, 2), (3, 4)]
    white = [(3, 2), (2, 2), (2, 3), (4, 2), (3, 6)]
    board = empty_with(9, black=black, white=white)
    assert _brute_vcf(board.copy(), 1, 3)
    delayed = board.copy()
    delayed[1, 2], delayed[0, 2] = 2, 1
    assert _brute_vcf(delayed, 1, 3)
    agent = GomokuBotAgent(env9)
    move = agent.select(env9.from_board(board, to_move=1), rng())
    assert move != 1 * 9 + 2 and agent.threat_result in ("defend", "defend+probe")
    after = board.copy()
    after.reshape(-1)[move] = 2
    assert not _five_cells(after, 2) and not _brute_vcf(after, 1, 3)


def test_prepares_a_double_threat_with_a_quiet_move(env9):
    """Black has no forced win yet; the bot keeps its threes and fours (here (5, 3)
    would make a broken three on the anti-diagonal that white just blocks) and plays a
    quiet move (no four, no open three, by `tactics`) after which it would have a VCT
    if white passed."""
    board = empty_with(9, black=[(4, 3), (4, 4), (2, 6)], white=[(4, 2), (8, 8), (0, 8)])
    agent = GomokuBotAgent(env9)
    sb = AB._SearchBoard(agent._geom, agent._patterns, board)
    assert agent._forced_win(sb, 1, True, 5, 100_000) < 0
    move = agent.select(env9.from_board(board, to_move=0), rng())
    assert agent.threat_result == "probe"
    after = board.copy()
    after.reshape(-1)[move] = 1
    assert int(tactics.open_threes(after, 0, 5).count) == 0
    assert not bool(np.asarray(tactics.winning_moves(after, 0, 5)).any())
    sb.play(move, 1)
    assert agent._forced_win(sb, 1, True, 4, 100_000) >= 0


def test_threat_search_keeps_to_max_nodes(env15):
    """All threat-space searches of one move together stop near ``max_nodes`` (one
    node over per search at most); the same position uses far more without the cap."""
    board, player = random_position(15, 5, "freestyle", 2, plies=30)
    state = env15.from_board(board, to_move=player)
    small = GomokuBotAgent(env15, depth=2, threats=AB.ThreatSettings(max_nodes=400))
    small.select(state, rng())
    assert small.threat_nodes <= 400 + 20
    full = GomokuBotAgent(env15, depth=2)
    full.select(state, rng())
    assert full.threat_nodes > 2_000


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_threat_moves_update_the_lines_and_leave_the_rest(seed):
    """The threat-space search's make / unmake: after `threat_play` the line facts,
    winning cells and hash are those of a board built with the stone on it; `value`,
    `stones` and the neighbourhood counts stay as they were; `threat_undo` restores
    everything exactly."""
    geom, pats = AB._Geometry(9, 2), AB._LinePatterns(5, "freestyle")
    board, player = random_position(9, 5, "freestyle", seed, plies=12 + 4 * seed)
    sb = AB._SearchBoard(geom, pats, board)
    snapshot = lambda b: (list(b.cells), list(b.codes), list(b.infos), list(b.wins), b.hash,
                          b.value, b.stones, list(b.adj), list(b.near))
    before = snapshot(sb)
    empties = sb.empties()
    moves = [empties[i] for i in np.random.default_rng(seed).choice(len(empties), 3, False)]
    stones = [player + 1, 2 - player, player + 1]
    for cell, stone in zip(moves, stones):
        sb.threat_play(cell, stone)
    placed = board.reshape(-1).copy()
    placed[moves] = stones
    fresh = AB._SearchBoard(geom, pats, placed.reshape(9, 9))
    assert (sb.codes, sb.infos, sb.wins, sb.hash) == (fresh.codes, fresh.infos, fresh.wins,
                                                      fresh.hash)
    for what in (0, 1, 3):
        for s in (1, 2):
            assert sb.threat_cells(what, s) == fresh.threat_cells(what, s)
    assert (sb.value, sb.stones, sb.adj, sb.near) == before[5:9]
    assert fresh.stones == before[6] + 3
    for cell in reversed(moves):
        sb.threat_undo(cell)
    assert snapshot(sb) == before


def test_analysis_refuses_a_state_of_another_game(env9, ttt):
    """The analysis methods check the state as `act` does: a board of another size, or
    another k, is refused naming the agent (not an IndexError, nor values computed
    with the wrong k)."""
    other_size = Gomoku(15, 5).play_moves([(7, 7), (7, 8)])
    other_k = Gomoku(9, 4).play_moves([(4, 4), (4, 5)])
    cases = [(NegamaxAgent(env9), ("root_values", "evaluate")),
             (AB.Seed004AlphaBetaAgent(env9, 2), ("root_values", "evaluate")),
             (GomokuBotAgent(env9, 2), ("root_values", "evaluate")),
             (MinimaxAgent(ttt), ("move_values", "value"))]
    for agent, methods in cases:
        others = [(other_size, "a 15x15 board")]
        if agent.env.size == 9:
            others.append((other_k, "9x9 4 in a row (freestyle)"))
        for method in methods:
            for state, words in others:
                with pytest.raises(ValueError, match=re.escape(
                        f"agent {agent.name!r} was built for {agent.env.words}, not {words}")):
                    getattr(agent, method)(state)
    # the agent's own game is analysed as before
    state = env9.play_moves([(4, 4), (4, 5)])
    assert NegamaxAgent(env9).root_values(state)
    assert MinimaxAgent(ttt).move_values(ttt.play_moves([(1, 1)]))
