"""The Gomocup protocol: the engine side in process and over real pipes, and external
engines as arena agents."""

import collections
import functools
import io
import json
import math
import queue
import random
import re
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from gomoku_jax import agents, arena, cli, gomocup
from gomoku_jax.agents import Agent, PythonAgent
from gomoku_jax.game import Gomoku
from helpers import line_of

MOVE = re.compile(r"(\d+),(\d+)")
PBRAIN = [sys.executable, "-m", "gomoku_jax.cli", "pbrain", "--agent"]


@functools.lru_cache(maxsize=None)
def _cached_agent(name: str, env: Gomoku) -> Agent:
    return agents.make(name, env)  # one agent (one compilation) per game for the session


def make_engine(name: str = "random", **kwargs) -> gomocup.Engine:
    return gomocup.Engine(functools.partial(_cached_agent, name), agent_name=name, **kwargs)


def say(engine: gomocup.Engine, *lines: str) -> list[str]:
    """All replies to ``lines``."""
    return [reply for line in lines for reply in engine.handle(line)]


def one(engine: gomocup.Engine, line: str) -> str:
    replies = engine.handle(line)
    assert len(replies) == 1, (line, replies)
    return replies[0]


def xy(reply: str) -> tuple[int, int]:
    m = MOVE.fullmatch(reply)
    assert m, reply
    return int(m.group(1)), int(m.group(2))


class Recorder(Agent):
    """Plays the first empty cell (or a scripted action) and keeps the states it saw."""

    def __init__(self, env, action=None):
        self.name, self.env, self.action, self.states = "recorder", env, action, []

    def act(self, state, key, deadline=None):
        self.states.append((state, deadline))
        if self.action is not None:
            return self.action
        return int(np.flatnonzero(np.asarray(state.board).reshape(-1) == 0)[0])


# ------------------------------------------------------------------ engine, in process


def test_scripted_session_replies():
    engine = make_engine()
    assert say(engine, "INFO timeout_turn 1000", "INFO max_memory 83886080",
               "INFO folder C:\\tmp", "INFO whatever 1") == []
    about = one(engine, "ABOUT")
    assert re.fullmatch(r'name="gomoku-jax", version="[^"]+", author="[^"]+", country="[^"]+"'
                        r', agent="random"', about)
    # a byte-order mark (some managers' first bytes) is not part of the command
    assert one(engine, "\ufeffABOUT\r\n") == about
    # an agent's name (a file's path) cannot end its field early
    quoted = gomocup.Engine(functools.partial(_cached_agent, "random"),
                            agent_name='runs/my "best".gjx')
    assert one(quoted, "ABOUT").endswith(', agent="runs/my \'best\'.gjx"')
    assert one(engine, "START 15") == "OK"
    x, y = xy(one(engine, "BEGIN"))
    board = engine.board
    assert board[y, x] == 1 and (board != 0).sum() == 1
    ox, oy = (x + 1) % 15, y
    x2, y2 = xy(one(engine, f"TURN {ox},{oy}"))
    board = engine.board
    assert board[oy, ox] == 2 and board[y2, x2] == 1 and (board != 0).sum() == 3
    assert one(engine, f"TAKEBACK {x2},{y2}") == "OK"
    assert one(engine, f"TAKEBACK {ox},{oy}") == "OK"
    assert (engine.board != 0).sum() == 1
    assert one(engine, "RESTART") == "OK"
    assert (engine.board == 0).all() and engine.size == 15
    assert say(engine, "BOARD", "7,7,1", "8,8,2", "7,8,2") == []
    assert engine.reading_board
    bx, by = xy(one(engine, "DONE"))
    assert not engine.reading_board
    assert (bx, by) not in {(7, 7), (8, 8), (7, 8)}
    assert (engine.board != 0).sum() == 4
    assert one(engine, "PLAY 0,0") == "0,0"
    assert engine.board[0, 0] == 1
    assert one(engine, "start 9") == "OK"  # commands are case-insensitive
    assert engine.size == 9 and (engine.board == 0).all()
    assert one(engine, "RECTSTART 10,10") == "OK" and engine.size == 10
    assert say(engine, "END") == [] and engine.finished


def test_coordinates_are_column_then_row():
    env = Gomoku(9, 5)
    recorder = Recorder(env, action=2 * 9 + 7)  # row 2, col 7
    engine = gomocup.Engine(lambda e: recorder, warmup=False)
    assert one(engine, "START 9") == "OK"
    assert one(engine, "TURN 1,4") == "7,2"  # x = col 1, y = row 4
    state, _ = recorder.states[-1]
    board = np.asarray(state.board)
    assert board[4, 1] == 1 and int(state.current_player) == 1  # the opponent was black
    assert engine.board[4, 1] == 2 and engine.board[2, 7] == 1


def test_board_colours_inferred_from_stone_counts():
    env = Gomoku(9, 5)
    recorder = Recorder(env)
    engine = gomocup.Engine(lambda e: recorder, warmup=False)
    one(engine, "START 9")
    say(engine, "BOARD", "4,4,2", "3,3,1", "5,5,2")
    xy(one(engine, "DONE"))  # the opponent has one more stone: the engine is white
    state, _ = recorder.states[-1]
    board = np.asarray(state.board)
    assert int(state.current_player) == 1 and board[4, 4] == 1 and board[3, 3] == 2
    assert int(state.last_action) == 5 * 9 + 5  # the last BOARD line
    say(engine, "BOARD", "4,4,2", "3,3,1")
    xy(one(engine, "DONE"))  # as many stones: the engine is black
    state, _ = recorder.states[-1]
    assert int(state.current_player) == 0 and np.asarray(state.board)[3, 3] == 1
    # the brain is to move: the last move is the opponent's last stone listed, never one
    # of its own (under gomoku rules a manager may list the stones in any order)
    assert int(state.last_action) == 4 * 9 + 4
    say(engine, "BOARD", "0,8,2", "4,4,2", "3,3,1", "5,5,2", "6,6,1")
    xy(one(engine, "DONE"))
    assert int(recorder.states[-1][0].last_action) == 5 * 9 + 5
    say(engine, "BOARD")
    assert one(engine, "DONE") == "0,0"  # an empty BOARD: the engine opens


def test_dead_stones_of_continuous_games():
    env = Gomoku(5, 5)
    recorder = Recorder(env)
    engine = gomocup.Engine(lambda e: recorder, warmup=False)
    assert say(engine, "INFO rule 2") == []  # continuous game: accepted
    one(engine, "START 5")
    say(engine, "BOARD", "0,0,3", "1,0,3", "2,0,1")
    assert one(engine, "DONE") == "3,0"  # dead stones are occupied
    state, _ = recorder.states[-1]
    board = np.asarray(state.board)
    # shown to the agent in a fixed pattern: the brain's own (black here) at (row, col)
    # when (row + 2 * col) % 4 < 2, else the opponent's
    assert (board[0, 0], board[0, 1]) == (1, 2)
    assert one(engine, "TURN 0,0").startswith("ERROR TURN 0,0 is occupied by a dead stone")


def _runs(line) -> int:
    """The longest run of one side's stones (1 or 2) in ``line``."""
    best = run = 0
    for previous, cell in zip([0, *line], line):
        run = run + 1 if cell and cell == previous else (1 if cell else 0)
        best = max(best, run)
    return best


@pytest.mark.parametrize("own, opp, brain", [([], [], 1), ([(8, 8)], [(7, 7), (8, 7)], 2)])
def test_dead_lines_are_shown_as_a_mix_of_both_sides(own, opp, brain):
    n = 9
    recorder = Recorder(Gomoku(n, 5))
    engine = gomocup.Engine(lambda e: recorder, warmup=False)
    say(engine, "INFO rule 2", "START 9")
    # dead fives in each direction, as (row, col)
    dead = ([(0, c) for c in range(5)] + [(r, 7) for r in range(1, 6)]
            + [(2 + d, d) for d in range(5)] + [(2 + d, 6 - d) for d in range(5)])
    dead = list(dict.fromkeys(dead))
    lines = ([f"{c},{r},3" for r, c in dead] + [f"{c},{r},1" for r, c in own]
             + [f"{c},{r},2" for r, c in opp])
    replies = say(engine, "BOARD", *lines, "DONE")
    assert len(replies) == 1 and xy(replies[0])
    board = np.asarray(recorder.states[-1][0].board)
    other = 3 - brain  # the brain is white when the opponent has a stone more
    assert int(recorder.states[-1][0].current_player) == brain - 1
    for r, c in dead:
        assert board[r, c] == (brain if (r + 2 * c) % 4 < 2 else other), (r, c)
    for r, c in own:
        assert board[r, c] == brain
    for r, c in opp:
        assert board[r, c] == other
    # no dead line reads as a run of more than two stones of one side
    shown = np.where(np.isin(np.arange(n * n), [r * n + c for r, c in dead]).reshape(n, n),
                     board, 0)
    assert [_runs(shown[0, :5]), _runs(shown[1:6, 7]), _runs([shown[2 + d, d] for d in range(5)]),
            _runs([shown[2 + d, 6 - d] for d in range(5)])] == [1, 2, 2, 2]


def test_a_brain_does_not_block_the_end_of_a_dead_line():
    # shown all as the opponent's, the dead five was one stone short of a six (a win under
    # freestyle): the heuristic brain answered 5,0, the end of the line, not a real move
    engine = gomocup.Engine(lambda e: agents.make("heuristic", e), warmup=False)
    say(engine, "INFO rule 2", "START 9")
    reply = say(engine, "BOARD", "0,0,3", "1,0,3", "2,0,3", "3,0,3", "4,0,3", "4,4,1", "4,5,2",
                "DONE")
    assert len(reply) == 1 and xy(reply[0]) != (5, 0)


def test_engine_never_plays_occupied_or_illegal_cells():
    env = Gomoku(5, 5)
    bad = Recorder(env, action=0)  # always the corner, occupied after the first move
    engine = gomocup.Engine(lambda e: bad, warmup=False, log=open("/dev/null", "w"))
    one(engine, "START 5")
    seen = set()
    assert one(engine, "BEGIN") == "0,0"
    seen.add((0, 0))
    for cell in [(1, 0), (2, 0), (3, 0), (0, 1), (1, 1)]:
        reply = one(engine, f"TURN {cell[0]},{cell[1]}")
        seen.add(cell)
        move = xy(reply)
        assert move not in seen
        seen.add(move)
    bad.action = 10**6  # off the board
    move = xy(one(engine, "TURN 4,4"))
    assert move not in seen and move != (4, 4)


def test_an_agent_that_raises_is_noted_with_its_own_line_and_a_fallback_plays():
    class Raising(Recorder):
        def act(self, state, key, deadline=None):
            return [][0]  # _RAISES_HERE

    log = io.StringIO()
    engine = gomocup.Engine(lambda e: Raising(e), warmup=False, log=log)
    one(engine, "START 5")
    assert xy(one(engine, "BEGIN")) in {(x, y) for x in range(5) for y in range(5)}
    assert (f"gomoku-jax pbrain: recorder raised IndexError (at "
            f"{line_of(__file__, '# _RAISES_HERE')}): list index out of range; playing a "
            "fallback move") in log.getvalue()


def test_an_agent_that_cannot_move_at_all_is_refused_at_start():
    """An agent that raises in its warm-up (a search too large for the memory, its own
    bug) cannot play the game: START answers ERROR with the reason, not OK and then a
    fallback move at every turn."""
    class Raising(Recorder):
        def act(self, state, key, deadline=None):
            raise MemoryError("a tree of 190 GB does not fit")  # _WARM_UP_RAISES

    log = io.StringIO()
    engine = gomocup.Engine(lambda e: Raising(e), warmup=True, log=log)
    reply = one(engine, "START 9")
    assert reply.startswith("ERROR cannot play 9x9 five in a row: recorder raised "
                            "MemoryError (at "
                            f"{line_of(__file__, '# _WARM_UP_RAISES')}): a tree of 190 GB "
                            "does not fit"), reply
    assert one(engine, "BEGIN").startswith("ERROR")  # no game was set up
    assert one(engine, "START 9").startswith("ERROR cannot play 9x9")  # remembered


def test_errors_leave_the_state_unchanged():
    engine = make_engine()
    for line in ["TURN 1,1", "BEGIN", "RESTART", "TAKEBACK 1,1", "PLAY 1,1"]:
        reply = one(engine, line)
        assert reply.startswith("ERROR ") and "before START" in reply, reply
    say(engine, "BOARD", "1,1,1")
    assert "before START" in one(engine, "DONE")
    for size in ("4", "20", "abc", "", "\uff19", "\u00b2"):  # full-width 9, superscript 2
        assert one(engine, f"START {size}").startswith("ERROR ")
    assert one(engine, "START 20") == "ERROR unsupported size 20: board sizes 5 to 19"
    assert one(engine, "RECTSTART 10,12").startswith("ERROR unsupported rectangular board")
    assert one(engine, "START 9") == "OK"
    x, y = xy(one(engine, "BEGIN"))
    before = engine.board
    bad = ["TURN", "TURN 1", "TURN a,b", "TURN 1,2,3", "TURN -1,0", "TURN 9,0",
           f"TURN {x},{y}", "BEGIN", "BEGIN now", "TAKEBACK 8,8", "TAKEBACK 1",
           "INFO timeout_turn soon", "INFO rule 4", "INFO rule 8", "INFO rule 64",
           "DONE", "FOO", "hello world", "\x00\xff", "1,2", "RESTART please", "ABOUTT",
           "TURN \uff11,\uff12", "INFO timeout_turn \u0665000"]  # other scripts' digits
    unknown = {"FOO", "hello world", "\x00\xff", "1,2", "ABOUTT"}  # the protocol: UNKNOWN
    for line in bad:
        reply = one(engine, line)
        assert reply.startswith("UNKNOWN " if line in unknown else "ERROR "), (line, reply)
        assert "\n" not in reply, (line, reply)
        assert (engine.board == before).all(), line
    assert "renju" in one(engine, "INFO rule 4") and "caro" in one(engine, "INFO rule 8")
    assert engine.rule == "freestyle"
    for key in ("timeout_turn", "timeout_match", "time_left"):  # milliseconds
        # managers write "no limit" as INT_MAX or more: taken silently, as the protocol has
        # no reply to INFO
        # any number of digits: leading zeros, and more digits than any clock holds
        assert say(engine, f"INFO {key} {'0' * 200}5000") == []
        assert getattr(engine, f"_{key}") == 5000
        assert say(engine, f"INFO {key} {'9' * 5000}.{'9' * 5000}") == []
        assert getattr(engine, f"_{key}") == 10**100
        assert say(engine, f"INFO {key} 2147483647") == [] == say(engine, f"INFO {key} {10**30}")
        assert getattr(engine, f"_{key}") == 10**30
        assert one(engine, f"INFO {key} 1.5e3").startswith(f"ERROR INFO {key}: expected "
                                                           "milliseconds, got '1.5e3'")
        if key != "time_left":  # a limit is never < 0 (a negative time_left: next test)
            assert one(engine, f"INFO {key} -5") == (f"ERROR INFO {key}: expected milliseconds "
                                                     ">= 0, got -5; the previous value stands")
            assert getattr(engine, f"_{key}") == 10**30
    # a huge argument is not echoed back whole
    for line in ("TURN " + "9" * 5_000_000 + ",x", "BOARD"):
        reply = one(engine, line) if line != "BOARD" else (
            say(engine, "BOARD", "1,1," + "7" * 1000), one(engine, "DONE"))[1]
        assert reply.startswith("ERROR ") and len(reply) < 200, reply[:300]
    # A bad BOARD changes nothing, whatever line is wrong.
    for lines in (["1,1,1", "1,1,2"], ["1,1,4"], ["1,1"], ["x,1,1"], ["9,9,1"]):
        assert say(engine, "BOARD", *lines) == []
        reply = one(engine, "DONE")
        assert reply.startswith("ERROR BOARD line"), lines
        assert reply.endswith(f"(line {len(lines)} of {len(lines)}); the whole BOARD block is "
                              "refused and the position is unchanged"), reply
        assert (engine.board == before).all()
    # The line is quoted as given, and its cell named.
    say(engine, "BOARD", "1,1,1", "1,1,2")
    assert one(engine, "DONE").startswith("ERROR BOARD line '1,1,2': cell 1,1 is occupied by the "
                                          "engine's stone (line 2 of 2)")
    say(engine, "BOARD", "9,9,1")
    assert one(engine, "DONE").startswith("ERROR BOARD line '9,9,1': cell 9,9 is off the")
    # A command inside a BOARD block ends it: the block's ERROR, then the command's reply.
    assert say(engine, "BOARD", "1,1,2", "ABOUT")[0].startswith("ERROR BOARD not ended by DONE")
    assert not engine.reading_board and (engine.board == before).all()
    assert say(engine, "") == []  # blank lines are ignored
    # A block of more stones than cells is refused, without keeping what follows.
    say(engine, "BOARD", *(["", "1,1,1"] * 10_000))
    assert len(engine._block) == engine.size ** 2 + 1
    assert one(engine, "DONE") == (f"ERROR BOARD block of more stones than the {engine.size}x"
                                   f"{engine.size} board has cells ({engine.size ** 2}); the "
                                   "position is unchanged")
    assert (engine.board == before).all()
    xy(one(engine, "TURN 0,0"))  # still playing


def test_game_over_after_the_opponents_move():
    engine = gomocup.Engine(Recorder, warmup=False)  # first empty cell, on any board
    one(engine, "START 9")
    say(engine, "BOARD", "0,8,2", "1,8,2", "2,8,2", "5,5,1", "6,5,1")
    assert one(engine, "DONE") == "0,0"
    assert one(engine, "TURN 3,8") == "1,0"
    assert one(engine, "TURN 4,8") == "ERROR game over: the opponent won with 4,8"
    assert engine.board[8, 4] == 2 and engine.game_over  # the winning move stays
    assert "the game is over" in one(engine, "TURN 5,5")
    assert "the game is over" in one(engine, "BEGIN")
    assert one(engine, "TAKEBACK 4,8") == "OK" and engine.game_over is None
    assert one(engine, "TURN 7,7") == "2,0"
    # The opponent fills the board without five: a draw, reported.
    one(engine, "START 5")
    lines = [f"{c},{r},{2 if (c + 2 * r) % 4 < 2 else 1}"
             for r in range(5) for c in range(5) if r < 4 or c < 3]
    say(engine, "BOARD", *lines)
    assert one(engine, "DONE") == "3,4"
    assert one(engine, "TURN 4,4") == "ERROR game over: the board is full (draw)"
    assert one(engine, "TAKEBACK 4,4") == "OK"
    # The engine's own winning move is played, then the game is over.
    one(engine, "START 9")
    say(engine, "BOARD", "1,0,1", "2,0,1", "3,0,1", "4,0,1", "0,8,2", "2,8,2", "4,8,2",
        "6,8,2")
    assert one(engine, "DONE") == "0,0"
    assert engine.game_over == "the engine won with 0,0"
    assert one(engine, "TURN 8,8").startswith("ERROR TURN: the game is over")
    assert one(engine, "RESTART") == "OK" and engine.game_over is None


def test_standard_rule_ignores_overlines():
    engine = gomocup.Engine(Recorder, warmup=False)  # first empty cell, for either rule
    one(engine, "START 9")
    assert say(engine, "INFO rule 1") == [] and engine.rule == "standard"
    say(engine, "BOARD", "0,8,2", "1,8,2", "2,8,2", "4,8,2", "5,8,2",
        "0,6,1", "2,6,1", "4,6,1", "6,6,1")
    assert one(engine, "DONE") == "0,0"
    assert one(engine, "TURN 3,8") == "1,0"  # six in a row does not win
    assert engine.game_over is None
    assert say(engine, "INFO rule 0") == [] and engine.rule == "freestyle"
    assert "the opponent has five in a row" in engine.game_over  # but it does here
    assert one(engine, "TAKEBACK 3,8") == "OK" and engine.game_over is None
    assert one(engine, "TURN 3,8") == "ERROR game over: the opponent won with 3,8"


def test_an_agent_built_for_another_game_than_the_factorys_is_refused_as_a_rule():
    """A factory that ignores the game it is given (its agent built for freestyle) does
    not get asked for standard-rule moves it would refuse on every move (each then a
    fallback): its agent is checked against the game when it is built, so the rule is
    refused with ERROR and play goes on under freestyle."""
    freestyle = Gomoku(9, 5)
    engine = gomocup.Engine(lambda env: Recorder(freestyle), warmup=False)
    one(engine, "START 9")
    reply = one(engine, "INFO rule 1")
    assert reply.startswith("ERROR unsupported rule 1 (standard): agent 'recorder' was built "
                            "for 9x9 5 in a row (freestyle), not 9x9 5 in a row (standard)"), reply
    assert reply.endswith("still playing freestyle") and engine.rule == "freestyle"
    assert one(engine, "BEGIN") == "0,0"  # the first empty cell: its own move, no fallback


def test_deadline_from_info():
    engine = make_engine()
    one(engine, "START 15")
    assert engine.deadline(100.0) is None  # no limits given
    say(engine, "INFO timeout_turn 1000")
    assert engine.deadline(100.0) == pytest.approx(100.0 + 0.9 - 0.05)
    say(engine, "INFO timeout_match 100000", "INFO time_left 10000")
    # 10 s left, an estimated 25 moves to go: 0.4 s, less the reserve
    assert engine.deadline(100.0) == pytest.approx(100.0 + 0.4 * 0.9 - 0.05)
    say(engine, "INFO time_left 10")
    assert engine.deadline(100.0) == 100.0  # nothing left: answer at once
    say(engine, "INFO timeout_turn 0", "INFO timeout_match 0")
    assert engine.deadline(100.0) == 100.0
    # a manager that sends time_left alone: the match clock is that
    alone = make_engine()
    say(alone, "START 15", "INFO time_left 10000")
    assert alone.deadline(100.0) == pytest.approx(100.0 + 0.4 * 0.9 - 0.05)
    say(alone, "INFO timeout_match 0")  # no match limit, whatever is left
    assert alone.deadline(100.0) is None


def test_info_times_as_a_judge_writes_them():
    # A manager that counts the time used in fractions of a millisecond sends the match
    # clock as a float, and as a negative number once the brain has run into the
    # tolerance it allows past the limit.
    engine = make_engine()
    say(engine, "START 15", "INFO timeout_turn 5000", "INFO timeout_match 180000")
    assert say(engine, "INFO time_left 10000.75") == []
    assert engine._time_left == 10000
    assert engine.deadline(100.0) == pytest.approx(100.0 + 0.4 * 0.9 - 0.05)
    assert say(engine, "INFO time_left -312.5") == []  # overdrawn: answer at once
    assert engine._time_left == 0 and engine.deadline(100.0) == 100.0
    # a limit's fraction rounds up: half a millisecond is a limit, where 0 means none
    assert say(engine, "INFO timeout_turn 999.9") == [] and engine._timeout_turn == 1000
    assert say(engine, "INFO timeout_match 0.5") == [] and engine._timeout_match == 1
    # a negative limit is refused, however small, and the previous one stands
    reply = say(engine, "INFO timeout_turn -0.5")
    assert len(reply) == 1 and reply[0].startswith("ERROR INFO timeout_turn: expected "
                                                   "milliseconds >= 0, got -0.5")
    assert engine._timeout_turn == 1000


def test_deadline_reaches_the_agent():
    env = Gomoku(9, 5)
    recorder = Recorder(env)
    engine = gomocup.Engine(lambda e: recorder, warmup=False)
    say(engine, "START 9", "INFO timeout_turn 2000")
    tic = time.perf_counter()
    one(engine, "BEGIN")
    _, deadline = recorder.states[-1]
    assert tic + 1.7 < deadline < time.perf_counter() + 1.9


class FakeTime:
    """The engine's ``time`` module with a clock that moves only when told to."""

    def __init__(self, now: float = 100.0):
        self.now = now

    def perf_counter(self) -> float:
        return self.now

    def __getattr__(self, name):
        return getattr(time, name)


class Slow(Recorder):
    """Answers ``late`` seconds past the deadline it is given, on ``clock``."""

    def __init__(self, env, late, clock):
        super().__init__(env)
        self.name, self.late, self.clock = "slow", late, clock

    def act(self, state, key, deadline=None):
        if deadline is not None:
            self.clock.now = max(self.clock.now, deadline) + self.late
        return super().act(state, key, deadline)


class Thinker(Recorder):
    """Thinks one second of ``clock`` per move."""

    def __init__(self, env, clock):
        super().__init__(env)
        self.clock = clock

    def act(self, state, key, deadline=None):
        self.clock.now += 1.0
        return super().act(state, key, deadline)


def test_the_match_clock_runs_down_by_the_brains_own_thinking(monkeypatch):
    clock = FakeTime()
    monkeypatch.setattr(gomocup, "time", clock)
    thinker = Thinker(Gomoku(15, 5), clock)
    engine = gomocup.Engine(lambda e: thinker, warmup=False)
    say(engine, "START 15", "INFO timeout_match 100000")  # no time_left: 100 s to start

    def budget() -> float:  # of the last move, before the reserve
        state, deadline = thinker.states[-1]
        return (deadline - (clock.now - 1.0) + 0.05) / 0.9 * 25  # 25 moves to go

    xy(one(engine, "BEGIN"))
    assert budget() == pytest.approx(100.0)
    xy(one(engine, "TURN 14,14"))
    assert budget() == pytest.approx(99.0)  # a second thought
    say(engine, "INFO time_left 50000")  # the manager's clock, all thinking included
    xy(one(engine, "TURN 14,13"))
    assert budget() == pytest.approx(50.0)
    xy(one(engine, "TURN 14,12"))
    assert budget() == pytest.approx(49.0)
    # a new game has the whole match time again, not what the last one left
    say(engine, "RESTART")
    xy(one(engine, "BEGIN"))
    assert budget() == pytest.approx(100.0)


@pytest.mark.parametrize("late", [0.0, gomocup._LATE_S / 2, 0.2])
def test_an_answer_past_the_deadline_is_reported_once(late, monkeypatch):
    clock = FakeTime()
    monkeypatch.setattr(gomocup, "time", clock)
    log, built = io.StringIO(), []

    def factory(env):
        built.append(Slow(env, late, clock))
        return built[-1]

    engine = gomocup.Engine(factory, warmup=True, log=log)
    say(engine, "START 9", "INFO timeout_turn 100")
    # one agent for each rule, each warmed up by two moves, as late
    assert [(b.env.rule, len(b.states)) for b in built] == [("freestyle", 2), ("standard", 2)]
    assert "past its deadline" not in log.getvalue()  # the warm-up's moves are not timed
    one(engine, "BEGIN")
    one(engine, "TURN 0,8")
    deadlines = [deadline for _, deadline in built[0].states]
    assert len(deadlines) == 4 and None not in deadlines
    notes = [line for line in log.getvalue().splitlines() if "past its deadline" in line]
    if late > gomocup._LATE_S:  # of the two late moves, one report
        assert len(notes) == 1 and "slow answered 0.20 s past" in notes[0], notes
        assert "lower N" in notes[0]
    else:  # on time, or late by less than the tolerance
        assert notes == []


def test_heuristic_engine_blocks_fours():
    engine = make_engine("heuristic")
    one(engine, "START 15")
    # The opponent's open four on row 7 (x 4..7) and a scattered own position.
    say(engine, "BOARD", "4,7,2", "5,7,2", "6,7,2", "7,7,2", "0,0,1", "14,0,1", "0,14,1")
    assert xy(one(engine, "DONE")) in {(3, 7), (8, 7)}
    # A four closed on one side: exactly one block.
    say(engine, "BOARD", "4,3,2", "4,4,2", "4,5,2", "4,6,2", "4,2,1", "14,0,1", "0,14,1")
    assert one(engine, "DONE") == "4,7"
    # And its own win first.
    say(engine, "BOARD", "4,3,2", "4,4,2", "4,5,2", "4,6,2",
        "10,10,1", "11,11,1", "12,12,1", "13,13,1")
    assert xy(one(engine, "DONE")) in {(9, 9), (14, 14)}
    assert engine.game_over.startswith("the engine won")


def test_fuzz_one_reply_per_command_and_consistent_state():
    engine = make_engine()
    rng = random.Random(1234)
    words = ["START", "RESTART", "BEGIN", "TURN", "TAKEBACK", "PLAY", "INFO", "ABOUT",
             "DONE", "RECTSTART", "FOO", "turn", "Turn", "MESSAGE", "board"]

    def junk() -> str:
        kind = rng.randrange(6)
        if kind == 0:
            return "".join(chr(rng.randrange(1, 0x250)) for _ in range(rng.randrange(12)))
        if kind == 1:
            return f"{rng.choice(words)} {rng.randrange(-3, 25)},{rng.randrange(-3, 25)}"
        if kind == 2:
            return f"{rng.choice(words)} {rng.choice(['', 'x', '1', '1,', ',', '7,7,7', '99'])}"
        if kind == 3:
            return f"INFO {rng.choice(['rule', 'timeout_turn', 'time_left', 'x'])} " \
                   f"{rng.choice(['0', '1', '3', '4', 'abc', '', '-5', '500'])}"
        if kind == 4:
            return f"START {rng.choice(['9', '15', '4', '30', 'x', '7'])}"
        return f"{rng.randrange(15)},{rng.randrange(15)}"

    def board_block() -> list[str]:
        cells = rng.sample(range(81), rng.randrange(0, 8))
        lines = [f"{c % 9},{c // 9},{rng.choice([1, 2, 1, 2, 3])}" for c in cells]
        if rng.random() < 0.3:
            lines.insert(rng.randrange(len(lines) + 1), junk().replace("DONE", "D"))
        return ["BOARD", *[line for line in lines if line.partition(" ")[0].upper()
                           not in gomocup._COMMANDS], "DONE"]

    good_reply = re.compile(r"OK|\d+,\d+|ERROR [^\n]+|UNKNOWN [^\n]+|name=\"gomoku-jax\".*")
    lines = []
    for _ in range(400):
        r = rng.random()
        if r < 0.15:
            lines += board_block()
        elif r < 0.40:  # on the board whether the fuzz has started 9x9 or 15x15
            lines.append(f"TURN {rng.randrange(9)},{rng.randrange(9)}")
        elif r < 0.45:
            lines.append(rng.choice(["START 9", "RESTART", "BEGIN"]))
        else:
            lines.append(junk())
    sent, block, counts = 0, [], collections.Counter()
    for line in lines:
        if "\n" in line or "\r" in line:
            continue
        word = line.strip().partition(" ")[0].upper()
        in_block = engine.reading_board
        before = None if engine.board is None else engine.board.copy()
        replies = [r for r in engine.handle(line) if not r.startswith("MESSAGE")]
        sent += 1
        if in_block and word != "DONE":
            assert replies == [], (line, replies)
            block.append(line)
            continue
        if word == "DONE" and in_block:  # the engine's move is on the new position
            before = np.zeros_like(engine.board)
            if MOVE.fullmatch(replies[0]):  # then every entry was valid
                for entry in filter(str.strip, block):
                    x, y, _ = map(int, entry.split(","))
                    before[y, x] = 1
            block = []
        if not line.strip() or line.strip().upper() == "BOARD":
            assert replies == [], (line, replies)
            continue
        if word == "INFO":
            assert replies == [] or (len(replies) == 1 and replies[0].startswith("ERROR ")), replies
            continue
        assert len(replies) == 1 and good_reply.fullmatch(replies[0]), (line, replies)
        counts[replies[0].partition(" ")[0] if replies[0].startswith("ERROR") else
               "move" if MOVE.fullmatch(replies[0]) else "other"] += 1
        if MOVE.fullmatch(replies[0]) and before is not None and engine.size == before.shape[0]:
            x, y = xy(replies[0])
            assert before[y, x] == 0 and engine.board[y, x] == 1, (line, replies)
        if engine.board is not None:
            board = engine.board
            assert np.isin(board, (0, 1, 2, 3)).all()
    assert sent > 300 and counts["move"] > 50 and counts["ERROR"] > 100, counts
    assert not engine.finished
    # After the fuzz, a fresh valid exchange still works.
    assert one(engine, "START 9") == "OK"
    x, y = xy(one(engine, "TURN 4,4"))
    assert (x, y) != (4, 4) and 0 <= x < 9 and 0 <= y < 9


def test_cli_rejects_unknown_agents(capsys):
    assert cli.main(["pbrain", "--agent", "no-such-agent"]) == 2
    assert "unknown agent" in capsys.readouterr().err


@pytest.mark.parametrize("name, why", [
    ("pure-mcts-0", "simulations must be a positive integer"),
    ("heuristic@2", "'heuristic@2': the block probability after '@' must be a number in [0, 1]"),
    ("minimax", "plays no Gomocup board (sizes 5 to 19, five in a row): on 15x15 'minimax' "
                "solves boards up to 4x4"),
    ("{folder}", "is a folder, not an exported agent"),
    ("{file}", "exists but is not an exported agent"),
])
def test_cli_rejects_at_launch_a_name_that_plays_no_board(tmp_path, capsys, name, why):
    # Before, only "unknown agent" was refused at launch: these started a brain that
    # answered every START with ERROR.
    (tmp_path / "notes.txt").write_text("not an agent")
    name = name.format(folder=tmp_path, file=tmp_path / "notes.txt")
    assert cli.main(["pbrain", "--agent", name]) == 2
    err = capsys.readouterr().err
    assert why in err and err.count("\n") == 1, err


def test_cli_rejects_a_budget_a_q_network_cannot_take_at_launch(tmp_path, capsys):
    import jax

    from gomoku_jax import io as gio
    from gomoku_jax import networks

    module = networks.make_network("resnet-q", board_size=5, blocks=1, filters=4, hidden=8)
    variables = networks.init_network(module, jax.random.key(0), (5, 5, 3))
    path = tmp_path / "q.gjx"
    gio.write_exported(path, {"agent": "q-greedy", "network": {
        "name": "resnet-q", "options": {"blocks": 1, "filters": 4, "hidden": 8}},
        "game": {"size": 5, "k": 5, "rule": "freestyle", "observation": "stones-colour"}},
        jax.device_get(variables))
    assert cli.main(["pbrain", "--agent", f"{path}@5+killer"]) == 2  # before any START
    assert "holds a Q network, which plays without search: simulations do not apply" in (
        capsys.readouterr().err)


def test_cli_rejects_at_launch_simulations_a_search_cannot_number(exported_files, capsys):
    # Before, the brain started, said it was ready and played a fallback move at every
    # move (the search raised OverflowError: its tree's nodes are numbered with int32).
    assert cli.main(["pbrain", "--agent", f"{exported_files['free7']}@3000000000"]) == 2
    err = capsys.readouterr().err
    assert "num_simulations must be an integer from 1 to 2147483646, got 3000000000" in err


# ---------------------------------------------------------------- over real pipes


PIPE_WAIT_S = 120  # a reply that takes longer: the engine hangs, the test fails


def test_subprocess_session_over_pipes(tmp_path):
    err_path = tmp_path / "stderr.txt"
    with open(err_path, "w") as err:
        proc = subprocess.Popen(PBRAIN + ["heuristic"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)
    out = queue.Queue()  # stdout's lines, read by a thread; None at the end
    reader = threading.Thread(target=gomocup._pump, args=(proc.stdout, out), daemon=True)
    reader.start()
    ready = re.compile(r"gomoku-jax pbrain: heuristic on gomoku-15x15-k5-freestyle "
                       r"ready in \d+\.\d\d s")
    try:
        def reply(after: str) -> str:
            try:
                line = out.get(timeout=PIPE_WAIT_S)
            except queue.Empty:
                pytest.fail(f"no reply to {after!r} in {PIPE_WAIT_S} s: the engine hangs")
            assert line is not None, f"the engine closed stdout after {after!r}"
            return line.rstrip("\n")

        def ask(line: str) -> str:
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            return reply(line)

        assert ask("START 15") == "OK"
        # The warm-up's note is written (and flushed) before OK: the agent was built
        # and compiled during START, before any move was asked for.
        assert len(ready.findall(err_path.read_text())) == 1, err_path.read_text()
        proc.stdin.write("INFO timeout_turn 500\nINFO timeout_match 100000\nINFO time_left 90000\n")
        x, y = xy(ask("BEGIN"))
        taken = {(x, y)}
        for cell in [(0, 0), (14, 14), (3, 9)]:
            if cell in taken:
                continue
            taken.add(cell)
            move = xy(ask(f"TURN {cell[0]},{cell[1]}"))
            assert move not in taken
            taken.add(move)
        assert ask("TURN 0,0").startswith("ERROR TURN 0,0 is occupied")
        assert ask("bogus") == "UNKNOWN command 'bogus'"
        proc.stdin.write("BOARD\n7,7,1\n7,8,2\n8,8,2\nDONE\n")
        proc.stdin.flush()
        assert xy(reply("BOARD ... DONE")) not in {(7, 7), (7, 8), (8, 8)}
        assert ask("TAKEBACK 7,7") == "OK"
        assert ask("RESTART") == "OK"
        assert ask("ABOUT").startswith('name="gomoku-jax"')
        proc.stdin.write("END\n")
        proc.stdin.flush()
        assert proc.wait(timeout=PIPE_WAIT_S) == 0
        assert out.get(timeout=PIPE_WAIT_S) is None  # nothing else on stdout
        # Nor was the agent built or compiled again for the moves.
        assert len(ready.findall(err_path.read_text())) == 1, err_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(timeout=PIPE_WAIT_S)
        proc.stdin.close()
        proc.stdout.close()


def test_match_between_two_engines_in_the_arena():
    env = Gomoku(9, 5)
    a = gomocup.EngineAgent(PBRAIN + ["random"], env, name="pbrain-random",
                            stderr=subprocess.DEVNULL)
    b = gomocup.EngineAgent(PBRAIN + ["heuristic"], env, name="pbrain-heuristic",
                            stderr=subprocess.DEVNULL)
    procs = [a._proc, b._proc]
    with a, b:
        result = arena.play_match(env, a, b, games=2, seed=3, opening_stones=2)
    assert [r.forfeit for r in result.records] == [None, None]
    for r in result.records:
        assert r.winner in (-1, 0, 1) and len(set(r.moves)) == len(r.moves)
        final = env.play_moves([divmod(m, 9) for m in r.moves])
        assert bool(final.terminated) and int(final.winner) == r.winner
    assert result.score("pbrain-heuristic")["wins"] >= 1
    for proc in procs:  # both ended by END and reaped: no zombies
        assert proc.returncode == 0
    assert a.returncode == 0 and b.returncode == 0


def test_an_engine_opens_every_game_it_plays_black_from_an_empty_board():
    # BEGIN is for an empty board: before each new game the engine is sent RESTART, or
    # pbrain (holding the last game) refuses BEGIN and every later game is a forfeit
    env = Gomoku(9, 5)
    with gomocup.EngineAgent(PBRAIN + ["heuristic"], env, name="pbrain-heuristic",
                             stderr=subprocess.DEVNULL) as brain:
        result = arena.play_match(env, brain, agents.random_agent(), games=3, seed=0)
    assert [r.forfeit for r in result.records] == [None, None, None]
    assert [r.black for r in result.records].count("pbrain-heuristic") == 2
    assert all(len(r.moves) >= 9 for r in result.records)  # games played out, not forfeited


def test_engine_agent_restarts_the_engine_before_a_new_game():
    env = Gomoku(7, 5)
    cmd = fake_engine("""
        if w == 'START': out('OK'); held = False
        elif w == 'RESTART': out('OK' if held else 'ERROR nothing to restart'); held = False
        elif w == 'BEGIN': out('ERROR BEGIN on a non-empty board' if held else '3,3'); held = True
        elif w in ('TURN', 'DONE'): out('1,1'); held = True
        elif w == 'END': sys.exit(0)
    """)
    with gomocup.EngineAgent(cmd, env, name="fake") as agent:
        with pytest.raises(ValueError, match=r"^agent 'fake' was built for 7x7 5 in a row "
                                             r"\(freestyle\), not a 9x9 board"):
            agent.act(Gomoku(9, 5).init(), None)  # refused before the engine hears of it
        assert agent.act(env.init(), None) == 3 * 7 + 3  # fresh from START: no RESTART
        # its stone as the opponent's: a new game (RESTART), then TURN 3,3
        assert agent.act(env.play(env.init(), 3, 3), None) == 1 * 7 + 1
        assert agent.act(env.init(), None) == 3 * 7 + 3  # RESTART, then BEGIN
        assert agent.act(env.init(), None) == 3 * 7 + 3  # and again
    assert agent.returncode == 0
    # an engine that refuses RESTART (ERROR), does not know it (UNKNOWN: it is optional
    # for older brains) or exits on it is replaced by a fresh process (START) and plays on
    for answer in ("out('ERROR no')", "out('UNKNOWN RESTART')", "sys.exit(3)"):
        refusing = fake_engine(f"""
            if w == 'START': out('OK')
            elif w == 'RESTART': {answer}
            elif w in ('BEGIN', 'TURN', 'DONE'): out('3,3')
            elif w == 'END': sys.exit(0)
        """)
        with gomocup.EngineAgent(refusing, env, name="fake") as agent:
            assert agent.act(env.init(), None) == 3 * 7 + 3
            first = agent._proc
            assert agent.act(env.init(), None) == 3 * 7 + 3  # not a forfeit
            assert agent._proc is not first  # another process, started afresh
            assert agent.act(env.play(env.init(), 0, 0), None) == 3 * 7 + 3  # and again


# ------------------------------------------------------ external engines that misbehave


def fake_engine(body: str) -> list[str]:
    """A tiny engine in plain Python (no JAX: starts in milliseconds)."""
    prelude = textwrap.dedent("""
        import sys
        def out(s):
            print(s, flush=True)
        for line in sys.stdin:
            w = line.split()[0] if line.split() else ''
    """)
    return [sys.executable, "-c", prelude + textwrap.indent(textwrap.dedent(body), "    ")]


def test_engine_agent_reads_moves_and_skips_messages():
    env = Gomoku(7, 5)
    cmd = fake_engine("""
        if w in ('START', 'RESTART'): out('OK')
        elif w in ('BEGIN', 'TURN', 'DONE'):
            out('MESSAGE thinking'); out('DEBUG x'); out('2,5')
        elif w == 'END': sys.exit(0)
    """)
    with gomocup.EngineAgent(cmd, env, name="fake") as agent:
        assert agent.act(env.init(), None) == 5 * 7 + 2
        state = env.play(env.init(), 0, 0)
        assert agent.act(state, None, deadline=time.perf_counter() + 60) == 37
    assert agent.returncode == 0


@pytest.mark.parametrize("what, value, phrase", [
    ("turn_ms", 0, "positive whole number of milliseconds"),
    ("turn_ms", -5, "positive whole number of milliseconds"),
    ("turn_ms", 1.5, "positive whole number of milliseconds"),
    ("turn_ms", "5000", "positive whole number of milliseconds"),
    ("turn_ms", True, "positive whole number of milliseconds"),
    ("grace_s", 0, "positive, finite number of seconds"),
    ("grace_s", -1.0, "positive, finite number of seconds"),
    ("grace_s", math.inf, "positive, finite number of seconds"),
    ("grace_s", math.nan, "positive, finite number of seconds"),
    ("grace_s", "2", "positive, finite number of seconds"),
    ("grace_s", True, "positive, finite number of seconds"),
    ("start_timeout_s", 0.0, "positive, finite number of seconds"),
    ("start_timeout_s", math.inf, "positive, finite number of seconds"),
    ("start_timeout_s", None, "positive, finite number of seconds"),
    ("start_timeout_s", False, "positive, finite number of seconds"),
])
def test_engine_agent_refuses_bad_times_before_starting_the_engine(what, value, phrase,
                                                                   monkeypatch):
    def no_spawn(self):
        raise AssertionError("the engine was started")

    monkeypatch.setattr(gomocup.EngineAgent, "_spawn", no_spawn)
    with pytest.raises(ValueError, match=rf"^{what} must be a {phrase}, got "
                                         rf"{re.escape(repr(value))}$"):
        gomocup.EngineAgent(fake_engine("pass"), Gomoku(7, 5), name="fake", **{what: value})


def test_engine_agent_takes_times_of_numpy_and_python_number_types():
    with gomocup.EngineAgent(fake_engine("if w == 'END': sys.exit(0)"), Gomoku(7, 5),
                             name="fake", turn_ms=np.int64(200), grace_s=1,
                             start_timeout_s=np.float32(30.0)) as agent:
        assert (agent.turn_ms, agent.grace_s, agent.start_timeout_s) == (200, 1.0, 30.0)
        assert [type(t) for t in (agent.turn_ms, agent.grace_s, agent.start_timeout_s)] == [
            int, float, float]


def test_engine_agent_reads_a_message_that_is_not_utf8():
    """Old Windows engines write their messages in a code page (here cp1250): the bytes
    that are not UTF-8 are replaced, and the move after them is read."""
    env = Gomoku(7, 5)
    cmd = fake_engine("""
        if w in ('START', 'RESTART'): out('OK')
        elif w in ('BEGIN', 'TURN', 'DONE'):
            sys.stdout.buffer.write(b'MESSAGE P\\xf8em\\xfd\\xb9l\\xedm\\r\\n')
            sys.stdout.flush(); out('2,5')
        elif w == 'END': sys.exit(0)
    """)
    with gomocup.EngineAgent(cmd, env, name="fake", **SLOW) as agent:
        assert agent.act(env.init(), None) == 5 * 7 + 2
    assert agent.returncode == 0


SLOW = {"turn_ms": 5000, "grace_s": 60.0}  # whatever the load, no case of these times out
QUICK = {"turn_ms": 100, "grace_s": 0.3}  # the case that never answers: 0.4 s


@pytest.mark.parametrize("body, timing, match", [
    ("""
        if w == 'START': out('OK')
        elif w == 'BEGIN': out('ERROR out of ideas')
     """, SLOW, "fake: answered 'ERROR out of ideas' to BEGIN$"),
    ("""
        if w == 'START': out('OK')
        elif w == 'BEGIN': sys.exit(3)
     """, SLOW, "exited \\(code 3\\)"),
    ("""
        if w == 'START': out('OK')
     """, QUICK, "no answer to BEGIN in time"),
    ("""
        if w == 'START': out('OK')
        elif w == 'BEGIN': out('99,0')
     """, SLOW, "off the 7x7 board"),
    ("""
        if w == 'START': out('ERROR no thanks')
     """, SLOW, "ERROR no thanks"),
    ("""
        if w == 'START': out('OK')
        elif w == 'BEGIN':
            import os, time; os.close(1); time.sleep(600)
     """, QUICK, "closed its output but did not exit while we waited for BEGIN; engine stopped"),
    ("""
        if w == 'START': out('OK')
        elif w == 'BEGIN': out('hello')
     """, SLOW, "not a move"),
])
def test_engine_agent_failures_raise_clearly(body, timing, match):
    env = Gomoku(7, 5)
    agent = gomocup.EngineAgent(fake_engine(body), env, name="fake", **timing)
    with agent:
        with pytest.raises(gomocup.EngineError, match=match):
            agent.act(env.init(), None)


def test_engine_agent_restarts_a_dead_engine_and_arena_counts_forfeits():
    env = Gomoku(7, 5)
    cmd = fake_engine("""
        if w in ('START', 'RESTART'): out('OK')
        elif w == 'BEGIN': sys.exit(1)
        elif w in ('TURN', 'DONE'): out('3,3')
    """)
    with gomocup.EngineAgent(cmd, env, name="flaky") as agent:
        with pytest.raises(gomocup.EngineError,
                           match="flaky: the engine exited \\(code 1\\) while we waited for BEGIN"):
            agent.act(env.init(), None)
        state = env.play(env.init(), 0, 0)
        assert agent.act(state, None) == 3 * 7 + 3  # a fresh process
        result = arena.play_match(env, agent, agents.make("random", env), games=1)
    record = result.records[0]
    assert record.winner == 1 and record.forfeit.startswith(
        "flaky raised EngineError: flaky: the engine exited (code 1) while we waited for BEGIN")


# ---------------------------------------------- what an external engine is told, and when


RECORDING_ENGINE = textwrap.dedent("""
    import json, sys
    log, script = open(sys.argv[1], 'a'), json.loads(sys.argv[2])
    size, taken, block, asked = 0, set(), None, 0

    def out(text):
        print(text, flush=True)

    def move():
        global asked
        asked += 1
        if str(asked) in script:
            out(script[str(asked)])
            return
        x, y = next((x, y) for y in range(size) for x in range(size) if (x, y) not in taken)
        taken.add((x, y))
        out(f'{x},{y}')

    for line in sys.stdin:
        log.write(line)
        log.flush()
        words = line.split()
        w = words[0] if words else ''
        if block is not None and w != 'DONE':
            x, y, _ = w.split(',')
            block.add((int(x), int(y)))
        elif w == 'START':
            size, taken = int(words[1]), set()
            out('OK')
        elif w == 'RESTART':
            taken = set()
            out('OK')
        elif w == 'BEGIN':
            move()
        elif w == 'TURN':
            x, y = words[1].split(',')
            taken.add((int(x), int(y)))
            move()
        elif w == 'BOARD':
            block = set()
        elif w == 'DONE':
            taken, block = block, None
            move()
        elif w == 'END':
            break
""")


def recording_engine(tmp_path, script: dict | None = None):
    """A fake engine (plain Python) that logs every line it is sent and plays the first
    empty cell, row by row, of the position it holds; ``script`` maps the number of a
    move asked for (1: the first BEGIN, TURN or BOARD) to the line answered instead.
    Returns its command line and a function giving the lines it was sent so far."""
    log = tmp_path / "sent.txt"
    cmd = [sys.executable, "-c", RECORDING_ENGINE, str(log), json.dumps(script or {})]
    return cmd, lambda: log.read_text().splitlines() if log.exists() else []


class RandomLegal(PythonAgent):
    """A uniformly random legal move, in Python (nothing to compile)."""

    def __init__(self, env):
        self.name, self.env = "random-legal", env

    def select(self, state, rng):
        return int(rng.choice(np.flatnonzero(np.asarray(state.legal_action_mask))))


ENGINE_SETUP = ["INFO rule 0", "START 7", "INFO timeout_match 0", "INFO timeout_turn 5000"]


def _xy(action: int, n: int = 7) -> str:
    return f"{action % n},{action // n}"


def test_engine_agent_sends_begin_then_turns_from_an_empty_board(tmp_path):
    env = Gomoku(7, 5)
    cmd, sent = recording_engine(tmp_path)
    with gomocup.EngineAgent(cmd, env, name="fake") as agent:
        result = arena.play_match(env, agent, RandomLegal(env), games=2, seed=0)
    assert [r.forfeit for r in result.records] == [None, None]
    # As a manager does: BEGIN (black) or the first TURN (white) on an empty board, then
    # only the opponent's moves; the second game after RESTART. No BOARD at all.
    expected = list(ENGINE_SETUP)
    for g, record in enumerate(result.records):
        mine = 0 if record.black == "fake" else 1
        expected += ["RESTART"] if g else []
        for ply in range(mine, len(record.moves), 2):
            expected.append(f"TURN {_xy(record.moves[ply - 1])}" if ply else "BEGIN")
    assert sent() == expected + ["END"]
    assert [r.black for r in result.records] == ["fake", "random-legal"]


def test_engine_agent_sends_openings_as_one_board_in_order_of_play_then_turns(tmp_path):
    env = Gomoku(7, 5)
    cmd, sent = recording_engine(tmp_path)
    with gomocup.EngineAgent(cmd, env, name="fake") as agent:
        result = arena.play_match(env, agent, RandomLegal(env), games=2, seed=0,
                                  opening_stones=2)
    assert [r.forfeit for r in result.records] == [None, None]
    expected = list(ENGINE_SETUP)
    for g, record in enumerate(result.records):
        mine = 0 if record.black == "fake" else 1
        plies = [p for p in range(record.opening, len(record.moves)) if p % 2 == mine]
        expected += ["RESTART"] if g else []  # the engine holds the last game
        # One opening stone each (black's first): the order of play is known, and the
        # opponent's first move, when it moved first, comes last
        expected += ["BOARD", *(f"{_xy(a)},{1 if i % 2 == mine else 2}"
                                for i, a in enumerate(record.moves[:plies[0]])), "DONE"]
        expected += [f"TURN {_xy(record.moves[p - 1])}" for p in plies[1:]]
    assert sent() == expected + ["END"]


def test_engine_agent_sends_the_whole_game_again_after_an_error_or_another_position(tmp_path):
    env = Gomoku(7, 5)
    cmd, sent = recording_engine(tmp_path, {"3": "ERROR busy"})  # its third move

    def play(state, action):
        return env.play(state, *divmod(action, 7))

    with gomocup.EngineAgent(cmd, env, name="fake") as agent:
        state = env.init()
        assert agent.act(state, None) == 0  # BEGIN: 0,0
        state = play(play(state, 0), 48)  # the opponent: 6,6
        assert agent.act(state, None) == 1  # TURN 6,6: 1,0
        state = play(play(state, 1), 40)  # the opponent: 5,5
        with pytest.raises(gomocup.EngineError, match="fake: answered 'ERROR busy' to TURN 5,5$"):
            agent.act(state, None)
        # The engine's position is unknown now: RESTART, and the game so far with BOARD,
        # in the order it was played (not in cell order: 0,0 1,0 6,6 5,5)
        assert agent.act(state, None) == 2
        state = play(play(state, 2), 41)
        assert agent.act(state, None) == 3  # and TURN again
        # A position that does not follow from the engine's: sent whole, stones of
        # unknown order alternating colours back from the last move (black 0,6)
        board = np.zeros((7, 7), np.int8)
        board[3, 3] = board[6, 0] = 1
        board[0, 6] = 2
        other = env.from_board(board, last_action=6 * 7 + 0)
        assert agent.act(other, None) == 0
        assert agent.act(other, None) == 0  # asked again: it lacks the engine's reply
        assert agent.act(play(play(other, 0), 45), None) == 1  # this one follows
    assert sent() == ENGINE_SETUP + [
        "BEGIN", "TURN 6,6", "TURN 5,5",
        "RESTART", "BOARD", "0,0,1", "6,6,2", "1,0,1", "5,5,2", "DONE",
        "TURN 6,5",
        "RESTART", "BOARD", "3,3,2", "6,0,1", "0,6,2", "DONE",
        "RESTART", "BOARD", "3,3,2", "6,0,1", "0,6,2", "DONE",
        "TURN 3,6",
        "END",
    ]


def test_an_occupied_cell_answered_to_turn_is_caught_and_the_position_sent_again(tmp_path):
    env = Gomoku(7, 5)
    cmd, sent = recording_engine(tmp_path, {"2": "0,0"})  # its second move: its first's cell
    with gomocup.EngineAgent(cmd, env, name="fake") as agent:
        result = arena.play_match(env, agent, RandomLegal(env), games=1, seed=0)
        record = result.records[0]
        assert record.forfeit == "fake played (0, 0), an occupied cell", record
        assert record.winner == 1 and record.moves[0] == 0 and len(record.moves) == 2
        opponent = record.moves[1]
        state = env.play_moves([divmod(a, 7) for a in record.moves])
        action = agent.act(state, None)  # the engine may not hold this position
        assert arena.illegal_reason(env, state, action) is None
    assert sent() == ENGINE_SETUP + [
        "BEGIN", f"TURN {_xy(opponent)}",
        "RESTART", "BOARD", "0,0,1", f"{_xy(opponent)},2", "DONE", "END"]


@pytest.mark.parametrize("answer, timing, match", [
    ("out('ERROR out of ideas')", SLOW, "fake: answered 'ERROR out of ideas' to TURN 3,3$"),
    ("sys.exit(3)", SLOW, "exited \\(code 3\\) while we waited for TURN 3,3$"),
    ("pass", QUICK, "no answer to TURN 3,3 in time"),
    ("out('99,0')", SLOW, "played 99,0, off the 7x7 board"),
    ("out('hello')", SLOW, "answered 'hello' to TURN 3,3, not a move"),
])
def test_engine_agent_failures_answering_turn_raise_clearly(answer, timing, match):
    env = Gomoku(7, 5)
    cmd = fake_engine(f"""
        if w == 'START': out('OK')
        elif w == 'TURN': {answer}
    """)
    with gomocup.EngineAgent(cmd, env, name="fake", **timing) as agent:
        with pytest.raises(gomocup.EngineError, match=match):
            agent.act(env.play(env.init(), 3, 3), None)  # a lone stone: TURN


# ------------------------------------------------------- the rule arrives after START


class OneRule:
    """A factory for an agent that plays only ``rule`` (like an exported agent): any
    other game is a ``ValueError`` naming the rule."""

    def __init__(self, rule: str, size: int = 7):
        self.rule, self.size, self.built = rule, size, []

    def __call__(self, env):
        if env.size != self.size:
            raise ValueError(f"plays {self.size}x{self.size} only")
        if env.rule != self.rule:
            raise ValueError(f"plays the {self.rule} rule only, not {env.rule}")
        self.built.append(env.rule)
        return Recorder(env)


def test_start_builds_the_agent_of_every_rule_so_info_rule_after_it_builds_nothing():
    """Managers send INFO rule after START: an agent built (compiled) then would be built
    in the time of the first move, which would answer late. START builds one for each
    rule the agent plays."""
    built = []

    def factory(env):
        built.append(env.rule)
        return Recorder(env)

    engine = gomocup.Engine(factory, warmup=False)
    assert one(engine, "START 7") == "OK"
    assert built == ["freestyle", "standard"]  # the rule in force first
    assert say(engine, "INFO rule 1") == [] and engine.rule == "standard"
    assert one(engine, "BEGIN") == "0,0"
    assert say(engine, "INFO rule 0", "RESTART") == ["OK"] and one(engine, "BEGIN") == "0,0"
    assert built == ["freestyle", "standard"]  # nothing built after START


def test_start_accepts_a_standard_rule_agent_before_info_rule():
    factory = OneRule("standard")
    engine = gomocup.Engine(factory, warmup=False)
    assert one(engine, "START 7") == "OK"  # INFO rule comes after START (Piskvork's order)
    assert say(engine, "INFO rule 1") == [] and engine.rule == "standard"
    assert one(engine, "BEGIN") == "0,0"
    assert one(engine, "TURN 6,6") == "1,0"
    assert factory.built == ["standard"]  # built once, at START
    # No INFO rule: the game is freestyle, which the agent does not play. Each move that
    # would start the game is refused, naming the rule, and changes nothing.
    engine = gomocup.Engine(OneRule("standard"), warmup=False)
    assert one(engine, "START 7") == "OK"
    for line in ["BEGIN", "TURN 3,3"]:
        reply = one(engine, line)
        assert reply.startswith(f"ERROR {line.split()[0]}: unsupported rule 0 (freestyle"), reply
        assert "plays the standard rule only" in reply and "plays rule 1" in reply, reply
        assert (engine.board == 0).all()
    say(engine, "BOARD", "3,3,2")
    assert one(engine, "DONE").startswith("ERROR BOARD: unsupported rule 0")
    assert (engine.board == 0).all()
    assert say(engine, "INFO rule 1") == []  # no reply to INFO, whatever the agent plays
    assert one(engine, "TURN 3,3") == "0,0"
    assert engine.board[3, 3] == 2 and engine.board[0, 0] == 1
    # Freestyle agents are unchanged, and say so if a standard game is asked for.
    engine = gomocup.Engine(OneRule("freestyle"), warmup=False)
    assert say(engine, "INFO rule 1", "START 7") == ["OK"]
    assert "unsupported rule 1 (standard" in one(engine, "BEGIN")
    assert say(engine, "INFO rule 0", "BEGIN") == ["0,0"]
    # A size the agent plays under no rule is still refused at START, by its reason.
    assert one(engine, "START 9") == "ERROR cannot play 9x9 five in a row: plays 7x7 only"


@pytest.fixture(scope="module")
def exported_files(tmp_path_factory):
    """Tiny exported search agents (untrained, one network): 7x7 five in a row under
    the standard rule, 7x7 four in a row, and 7x7 five in a row freestyle."""
    import jax

    from gomoku_jax import io as gio
    from gomoku_jax import networks
    from gomoku_jax import search as search_lib

    folder = tmp_path_factory.mktemp("gomocup_gjx")
    options = {"channels": [4, 4], "value_hidden": 8}
    module = networks.make_network("simplenet", board_size=7, **options)
    shape = Gomoku(7, 5, observation="stones-colour").observation_shape
    variables = networks.init_network(module, jax.random.key(0), shape)
    paths = {}
    for name, k, rule in (("std7", 5, "standard"), ("k4", 4, "freestyle"),
                          ("free7", 5, "freestyle")):
        meta = {"agent": "search",
                "game": {"size": 7, "k": k, "rule": rule, "observation": "stones-colour"},
                "network": {"name": "simplenet", "options": options},
                "search": search_lib.SearchConfig(
                    "gumbel", 4, max_num_considered_actions=4).to_dict()}
        paths[name] = str(folder / f"{name}.gjx")
        gio.write_exported(paths[name], meta, jax.device_get(variables))
    return paths


def _brain(agent_name: str, *lines: str) -> list[str]:
    out = io.StringIO()
    gomocup.run_engine(agent_name, io.StringIO("".join(line + "\n" for line in lines)), out)
    return out.getvalue().splitlines()


def test_exported_standard_rule_agent_as_a_brain(exported_files):
    std7 = exported_files["std7"]
    replies = _brain(std7, "START 7", "INFO rule 1", "BEGIN", "END")
    assert replies[0] == "OK" and MOVE.fullmatch(replies[1]) and len(replies) == 2, replies
    replies = _brain(std7, "START 7", "BEGIN", "START 9", "END")
    assert replies[0] == "OK"
    assert replies[1] == ("ERROR BEGIN: unsupported rule 0 (freestyle: five or more in a row "
                          f"wins) on 7x7: {std7} plays the standard rule (exactly five wins), "
                          "not freestyle; the agent plays rule 1 (standard)")
    assert replies[2] == (f"ERROR cannot play 9x9 five in a row: {std7} plays 7x7 boards "
                          "only, not 9x9")


def test_exported_agent_of_another_k_is_refused_naming_k(exported_files, capsys):
    k4 = exported_files["k4"]
    replies = _brain(k4, "START 7", "END")  # the size fits, k does not
    assert replies == [f"ERROR cannot play 7x7 five in a row: {k4} plays 4 in a row "
                       "(trained for 7x7 k=4 freestyle); Gomocup games are 5 in a row"]
    assert "unsupported size" not in replies[0]
    assert "every START will be answered ERROR" in capsys.readouterr().err


def spy_on_engine_agents(monkeypatch) -> list[tuple[str, str]]:
    """What EngineAgents do, in order: ``("spawn", "")`` for each process started (and
    sent START), ``(waiting_for, answer)`` for each answer read, ``(waiting_for,
    "EngineError: ...")`` for each read that failed."""
    events = []
    spawn, reply = gomocup.EngineAgent._spawn, gomocup.EngineAgent._reply

    def spy_spawn(self):
        events.append(("spawn", ""))
        spawn(self)

    def spy_reply(self, until, waiting_for, **kwargs):
        try:
            answer = reply(self, until, waiting_for, **kwargs)
        except gomocup.EngineError as err:
            events.append((waiting_for, f"EngineError: {err}"))
            raise
        events.append((waiting_for, answer))
        return answer

    monkeypatch.setattr(gomocup.EngineAgent, "_spawn", spy_spawn)
    monkeypatch.setattr(gomocup.EngineAgent, "_reply", spy_reply)
    return events


def test_engine_agent_plays_a_standard_rule_exported_brain(exported_files, monkeypatch):
    events = spy_on_engine_agents(monkeypatch)
    env = Gomoku(7, 5, "standard")
    brain = gomocup.EngineAgent(PBRAIN + [exported_files["std7"]], env, name="std7",
                                stderr=subprocess.DEVNULL)
    with brain:
        result = arena.play_match(env, brain, agents.make("random", env), games=2, seed=1)
    assert [r.forfeit for r in result.records] == [None, None]
    # One process, whose START was answered OK, and every move asked for was answered:
    # no read ended in an error or a timeout.
    assert events[:2] == [("spawn", ""), ("START 7", "OK")], events
    # Black in the first game, from the empty board: BEGIN, then the opponent's moves as
    # TURNs; white in the second: RESTART, then TURNs from the first move on.
    moves = events[2:]
    assert all(MOVE.fullmatch(answer) if asked != "RESTART" else answer == "OK"
               for asked, answer in moves), events
    commands = " ".join(asked.split()[0] for asked, _ in moves)
    assert re.fullmatch(r"BEGIN( TURN)+ RESTART( TURN)+", commands), events
    assert brain.returncode == 0


def test_engine_agent_sends_the_rule_before_start():
    env = Gomoku(7, 5, "standard")
    cmd = fake_engine("""
        if w == 'INFO' and line.split()[1:] == ['rule', '1']: rule = 1
        elif w == 'START': out('OK' if globals().get('rule') == 1 else 'ERROR rule first')
        elif w == 'BEGIN': out('3,3')
        elif w == 'END': sys.exit(0)
    """)
    with gomocup.EngineAgent(cmd, env, name="fake") as agent:
        assert agent.act(env.init(), None) == 3 * 7 + 3


def test_engine_agent_does_not_wait_after_an_error_to_start(monkeypatch):
    events = spy_on_engine_agents(monkeypatch)
    reply = gomocup.EngineAgent._reply  # the spy

    def from_a_fresh_process(self, until, waiting_for):
        if waiting_for.startswith("START") and events[-1][0] != "spawn":
            pytest.fail("waits (up to the start timeout) for a second answer to START from "
                        "the engine that answered ERROR, instead of starting a fresh one")
        return reply(self, until, waiting_for)

    monkeypatch.setattr(gomocup.EngineAgent, "_reply", from_a_fresh_process)
    env = Gomoku(7, 5)
    cmd = fake_engine("""
        if w == 'START': out('ERROR no thanks')
    """)
    error = "fake: answered 'ERROR no thanks' to START 7"
    with gomocup.EngineAgent(cmd, env, name="fake") as agent:
        for _ in range(2):  # the second move restarts the engine, START again
            with pytest.raises(gomocup.EngineError, match=error):
                agent.act(env.init(), None)
    assert events == [("spawn", ""), ("START 7", f"EngineError: {error}")] * 2, events


def test_engine_agent_left_open_at_interpreter_exit():
    """An EngineAgent that nobody closed: its __del__ runs at shutdown, when the
    module's globals may be gone, and must not raise."""
    script = textwrap.dedent(f"""
        import sys
        from gomoku_jax import gomocup
        from gomoku_jax.game import Gomoku
        agent = gomocup.EngineAgent({fake_engine("if w == 'START': out('OK')")!r},
                                    Gomoku(7, 5), name="fake")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_registered_agent_of_one_board_and_rule_can_be_a_brain(registries):
    # The name is checked at start-up; which board and rule it plays is START's and the
    # first move's to settle (not a 15x15 freestyle game's).
    from gomoku_jax import agents

    def nine_by_nine_standard(spec, env):
        if (env.size, env.rule) != (9, "standard"):
            raise ValueError(f"{spec} plays 9x9 under the standard rule only")
        return agents.heuristic_agent(env, name=spec)

    agents.register_agent("nine-standard", nine_by_nine_standard)
    replies = _brain("nine-standard", "START 9", "INFO rule 1", "BEGIN", "START 15", "END")
    assert replies[0] == "OK" and MOVE.fullmatch(replies[1]), replies
    assert replies[2] == ("ERROR cannot play 15x15 five in a row: nine-standard plays "
                          "9x9 under the standard rule only")


def test_a_rule_the_agent_does_not_play_is_refused_at_info_and_play_goes_on(exported_files):
    free7 = exported_files["free7"]
    replies = _brain(free7, "START 7", "INFO rule 1", "BEGIN", "END")
    assert replies[0] == "OK"
    assert replies[1].startswith("ERROR unsupported rule 1 (standard): ")
    assert replies[1].endswith("; still playing freestyle")
    assert MOVE.fullmatch(replies[2]) and len(replies) == 3, replies


def test_stone_counts_that_could_not_have_been_played_in_turn_are_refused():
    engine = make_engine()
    assert one(engine, "START 9") == "OK"
    # the brain is to move after a BOARD: the opponent has as many stones or one more
    say(engine, "BOARD", "1,1,1", "2,2,1", "3,3,1")
    reply = one(engine, "DONE")
    assert reply.startswith("ERROR BOARD: 3 own and 0 opponent stones cannot have been "
                            "played in turn"), reply
    assert not engine.board.any()  # unchanged
    say(engine, "BOARD", "1,1,2", "2,2,2")
    assert one(engine, "DONE").startswith("ERROR BOARD: 0 own and 2 opponent stones")
    say(engine, "BOARD", "1,1,1", "2,2,2", "3,3,2")
    assert xy(one(engine, "DONE"))  # 1 own, 2 opponent: the brain (white) moves
    say(engine, "BOARD", "1,1,1", "2,2,2", "3,3,1", "4,4,3")
    assert xy(one(engine, "DONE"))  # a dead stone: a continued game, not counted
    # PLAY is the brain's own move: twice in a row is not a game
    assert one(engine, "RESTART") == "OK"
    assert one(engine, "PLAY 4,4") == "4,4"
    reply = one(engine, "PLAY 5,5")
    assert reply.startswith("ERROR PLAY 5,5: 2 own and 0 opponent stones cannot"), reply
    assert int(engine.board.sum()) == 1  # the stone is not placed
    x, y = xy(one(engine, "TURN 0,0"))  # the opponent's answer, then the brain's move
    reply = one(engine, "TURN 8,8")  # fine: 2 own, 2 opponent, the brain moves
    assert xy(reply)


def test_bytes_that_are_not_utf8_do_not_stop_the_brain():
    """A manager on another code page (a cp1250 folder name in INFO) sends bytes that are
    not UTF-8; with strict decoding (PYTHONIOENCODING=utf-8) the brain still plays."""
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    session = b"START 9\nINFO folder C:\\Users\\Ji\xf8\xed\nBEGIN\nEND\n"
    done = subprocess.run(PBRAIN + ["random"], input=session, capture_output=True, env=env,
                          timeout=PIPE_WAIT_S * 4)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    lines = done.stdout.decode().splitlines()
    assert lines[0] == "OK" and MOVE.fullmatch(lines[1]), lines
    assert b"Traceback" not in done.stderr


def test_a_reply_its_output_encoding_cannot_write_does_not_stop_the_brain():
    """A brain whose stdout is in a legacy code page (a Windows pipe: cp1252) echoes a
    byte it could not read (U+FFFD, which cp1252 has no code for) in its ERROR or UNKNOWN
    reply: the character is replaced there too, and the brain plays on."""
    env = dict(os.environ, PYTHONIOENCODING="cp1252")
    session = b"START 9\nFOO \x81\nSTART \x9d\nBEGIN\nEND\n"
    done = subprocess.run(PBRAIN + ["random"], input=session, capture_output=True, env=env,
                          timeout=PIPE_WAIT_S * 4)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    lines = done.stdout.decode("cp1252").splitlines()
    assert lines[0] == "OK" and lines[1].startswith("UNKNOWN command 'FOO ?'"), lines
    assert lines[2].startswith("ERROR START: expected a board size"), lines
    assert MOVE.fullmatch(lines[3]), lines


def test_the_warm_up_compiles_all_that_a_pure_mcts_brain_plays_with(monkeypatch):
    """``START`` compiles every program of pure MCTS's moves: the first moves after it,
    with a time limit or without one, trace nothing new. 70 simulations are a chunk of
    50 and a remainder of 20, which a warm-up whose deadline has passed never reaches (a
    large N in the warm-up's half second)."""
    import jax
    from jax._src import dispatch

    monkeypatch.setattr(gomocup, "_WARM_UP_S", -1.0)
    engine = gomocup.Engine(lambda env: agents.make("pure-mcts-70", env), warmup=True,
                            log=io.StringIO())
    one(engine, "START 7")
    new = []

    def listener(event, duration, **kwargs):
        if event in (dispatch.JAXPR_TRACE_EVENT, dispatch.BACKEND_COMPILE_EVENT):
            new.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        xy(one(engine, "BEGIN"))  # no limit: all 70 simulations
        xy(one(engine, "TURN 0,0"))
        say(engine, "INFO timeout_turn 60000")
        xy(one(engine, "TURN 0,1"))  # a limit with time for every chunk
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert new == []
