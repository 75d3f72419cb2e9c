"""The Gomocup (Piskvork) text protocol, both ways.

* `Engine` / `run_engine`: any `Agent` as a Gomocup brain on stdin / stdout
  (``gomoku-jax pbrain --agent NAME``), so Piskvork, other managers and other
  brains can play it.
* `EngineAgent`: any Gomocup brain (a command line) as an `Agent`, so the arena's
  `play_match` and round robins can include external engines.

Coordinates. The protocol writes a cell as ``x,y`` with ``x`` the column and ``y`` the
row, both from 0, row 0 on top; here an action is ``row * size + col``, so ``x,y`` is
action ``y * size + x``. In ``BOARD`` lines the field is 1 for the brain's own stone,
2 for the opponent's and 3 for a dead stone of a continuous game (part of an earlier
winning line): occupied, owned by nobody (an agent is shown it as a stone of one side
or the other, in a fixed pattern: see `_Game.state`). Internally the board has colours (1 black,
the first mover; 2 white): when the brain is to move with as many stones as the
opponent it is black, with one stone fewer it is white.

Engine side, the supported subset (one reply line where one is due; ``MESSAGE`` lines
may come at any time and are not replies):

===========================  ===========================================================
``START n``                  new game on an n x n board, n from 5 to 19: ``OK`` (the
                             agent is built and compiled here, so moves are not slowed
                             by JAX compilation), else ``ERROR`` naming what does not
                             fit (the size, or the agent's k). The rule is not checked
                             here: managers send ``INFO rule`` after ``START``; an agent
                             that plays only the other rule is built for that one
``RECTSTART w,h``            as ``START w`` when w == h, else ``ERROR``
``RESTART``                  new game, same size: ``OK``
``BEGIN``                    the brain opens on the empty board: ``x,y``. ``BEGIN``,
                             ``TURN`` and ``BOARD`` first settle the rule in force:
                             ``ERROR`` (nothing changed) if the agent does not play it
``TURN x,y``                 the opponent played x,y: the brain's reply ``x,y``
``BOARD`` ... ``DONE``       a whole position, lines ``x,y,field``; the brain is to
                             move: ``x,y``. Applied only if every line is valid.
``PLAY x,y``                 the brain must play x,y: ``x,y``
``TAKEBACK x,y``             remove the stone at x,y: ``OK``
``INFO key value``           no reply. Used: ``timeout_turn``, ``timeout_match``,
                             ``time_left`` (milliseconds; "178532.71" is read, a
                             ``time_left`` rounded down and a limit up, so 0.5 is
                             not 0, "no limit"; a negative ``time_left`` is an
                             overdrawn clock, read as 0; a negative limit is answered
                             ``ERROR`` and the previous one stays) and ``rule`` (bit 1: exactly
                             five, bit 2: continuous game; renju (4) and caro (8) are
                             answered ``ERROR``, and so is a rule the agent does not play
                             while it plays the one in force, which stays; with neither,
                             the next move says so). Others (``max_memory``,
                             ``game_type``, ``folder`` ...) are ignored.
``ABOUT``                    ``name="gomoku-jax", version=..., author=..., country=...``
``END``                      exit
===========================  ===========================================================

Games are five in a row (``Gomoku(n, 5, rule)``): ``rule`` 0 is freestyle (five or
more wins), 1 is standard (exactly five). Anything wrong (a malformed or unknown line,
a cell off the board or occupied, a move before ``START``, a move after the game has
ended) is answered with one ``ERROR <what was wrong>`` line and changes nothing: the
engine keeps running. An opponent's move that ends the game (a win, or the last free
cell) is kept on the board and answered ``ERROR game over: ...``; ``TAKEBACK``,
``BOARD``, ``RESTART`` or ``START`` go on from there.

Time: before each move the engine sets the agent's deadline from ``timeout_turn`` and
from the match clock (the last ``time_left`` of this game, else ``timeout_match``, less
the time the brain has thought since; divided by an estimate of the moves still to
play), keeping 10% and 50 ms in reserve; without limits the agent
gets no deadline. Agents that budget their search (pure MCTS, alpha-beta) answer by
it; a network's search plays its fixed number of simulations (``@N``) whatever the
time, and the first move of an agent answered past its deadline is reported on the
log.
"""

from __future__ import annotations

import contextlib
import fractions
import functools
import math
import os
import queue
import re
import subprocess
import sys
import threading
import time
from typing import Callable, Sequence, TextIO

import jax
import numpy as np

from gomoku_jax import __version__, arena
from gomoku_jax import io as gio
from gomoku_jax.agents import Agent, PythonAgent, check_env, plain_action
from gomoku_jax.config import clip
from gomoku_jax.game import DIRECTIONS, RULES, Gomoku, State

__all__ = [
    "MAX_SIZE",
    "MIN_SIZE",
    "Engine",
    "EngineAgent",
    "EngineError",
    "run_engine",
]

MIN_SIZE, MAX_SIZE = 5, 19
K = 5  # Gomocup is five in a row

_OWN, _OPP, _DEAD = 1, 2, 3  # BOARD fields
_RULE_EXACT, _RULE_CONTINUOUS = 1, 2
_SUPPORTED_RULE_BITS = _RULE_EXACT | _RULE_CONTINUOUS
_RESERVE_FRACTION, _RESERVE_S = 0.10, 0.050
_LATE_S = 0.05  # an answer later than the deadline by more than this is reported
_WARM_UP_S = 0.5  # the deadline of each of the warm-up's moves
_MIN_MOVES_LEFT, _MAX_MOVES_LEFT = 5, 25

_RULE_WORDS = {"freestyle": "five or more in a row wins", "standard": "exactly five wins"}
_COMMANDS = ("START", "RECTSTART", "RESTART", "BEGIN", "TURN", "BOARD", "DONE", "PLAY",
             "TAKEBACK", "INFO", "ABOUT", "END")
# Integers as managers write them: 2147483647 (INT_MAX, "no limit") and longer are common in
# INFO; the bound only keeps int() away from its digit limit.
_INT = re.compile(r"[+-]?\d{1,100}", re.ASCII)
# INFO times: some managers write the milliseconds left as a float ("178532.71"); any
# number of digits (`_milliseconds` reads them)
_MS = re.compile(r"([+-]?)(\d+)(?:\.(\d*))?", re.ASCII)
_MS_DIGITS = 100  # a time of more digits (after leading zeros) is read as 10 ** 100 ms


def _milliseconds(match: re.Match) -> fractions.Fraction:
    """The time `_MS` matched, exactly; leading zeros and fraction digits past the
    100th dropped, and a whole part of more than 100 digits read as ``10 ** 100`` (far
    beyond any clock, and within the digits ``int()`` reads)."""
    sign, whole, part = match.group(1), match.group(2).lstrip("0") or "0", match.group(3)
    if len(whole) > _MS_DIGITS:
        whole, part = "1" + "0" * _MS_DIGITS, ""
    return fractions.Fraction(f"{sign}{whole}.{(part or '')[:_MS_DIGITS] or '0'}")


class EngineError(RuntimeError):
    """An external engine answered ``ERROR``, an unexpected line, too late, or died."""


class _ProtocolError(ValueError):
    """A bad command line; the message becomes the ``ERROR`` reply."""


def _parse_ints(text: str, count: int, what: str) -> list[int]:
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != count or not all(_INT.fullmatch(p) for p in parts):
        shape = "x,y,field" if count == 3 else "x,y"
        raise _ProtocolError(f"{what}: expected {shape} (integers), got "
                             f"{clip(text.strip())!r}")
    return [int(p) for p in parts]


def _wins_at(cells: np.ndarray, row: int, col: int, exact: bool) -> bool:
    """Whether the stone at (row, col) is part of a winning run of ``K`` (exactly ``K``
    when ``exact``). Stones compare by field value; dead stones (3) break runs."""
    n = cells.shape[0]
    stone = cells[row, col]
    if stone not in (_OWN, _OPP):
        return False
    for dr, dc in DIRECTIONS:
        run = 1
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < n and 0 <= c < n and cells[r, c] == stone:
                run += 1
                r, c = r + sign * dr, c + sign * dc
        if run == K or (run > K and not exact):
            return True
    return False


def _any_winner(cells: np.ndarray, exact: bool) -> int:
    """The field (1 or 2) of a side with a winning run anywhere, 0 if none."""
    for row, col in zip(*np.nonzero((cells == _OWN) | (cells == _OPP))):
        if _wins_at(cells, int(row), int(col), exact):
            return int(cells[row, col])
    return 0


class _Game:
    """One game from the brain's view: an ``[N, N]`` grid of BOARD fields."""

    def __init__(self, size: int):
        self.size = size
        self.cells = np.zeros((size, size), np.int8)
        self.last = -1  # the last action played, for agents that read it
        self.colour_hint = 0  # the brain's colour when the stone counts cannot tell
        self.over: str | None = None  # why the game is over, None while it goes on

    def cell(self, x: int, y: int, what: str) -> int:
        n = self.size
        if not (0 <= x < n and 0 <= y < n):
            raise _ProtocolError(f"{what} {x},{y} is off the {n}x{n} board "
                                 f"(x and y from 0 to {n - 1})")
        return y * n + x

    def empty_cell(self, x: int, y: int, what: str) -> int:
        action = self.cell(x, y, what)
        field = int(self.cells.reshape(-1)[action])
        if field:
            owner = {_OWN: "the engine's stone", _OPP: "the opponent's stone",
                     _DEAD: "a dead stone"}[field]
            raise _ProtocolError(f"{what} {x},{y} is occupied by {owner}")
        return action

    def place(self, action: int, field: int, exact: bool) -> None:
        row, col = divmod(action, self.size)
        self.cells[row, col] = field
        self.last = action
        if _wins_at(self.cells, row, col, exact):
            who = "the engine" if field == _OWN else "the opponent"
            self.over = f"{who} won with {col},{row}"
        elif not (self.cells == 0).any():
            self.over = "the board is full (draw)"

    def recompute_over(self, exact: bool) -> None:
        winner = _any_winner(self.cells, exact)
        if winner:
            self.over = ("the engine" if winner == _OWN else "the opponent") + " has five in a row"
        elif not (self.cells == 0).any():
            self.over = "the board is full (draw)"
        else:
            self.over = None

    def colour(self) -> int:
        """The brain's colour (0 black, 1 white) with the brain to move."""
        own, opp = int((self.cells == _OWN).sum()), int((self.cells == _OPP).sum())
        if own == opp:
            return 0
        if opp == own + 1:
            return 1
        return self.colour_hint

    def state(self, env: Gomoku) -> State:
        """The position as a `State` with the brain to move. A `State` has no stone owned
        by nobody, so each dead stone is shown as a stone of one side, in a fixed pattern
        that mixes the two: the one at (row, col) is the brain's own when
        ``(row + 2 * col) % 4 < 2``, else the opponent's. A dead line (five or more in a
        row, the win of an earlier game) so never shows as a run of more than two stones
        of one side: shown all as the opponent's, it was a five that one more stone at
        either end extends to a win, which the agent would spend its moves blocking."""
        me = self.colour()
        own, other = me + 1, 2 - me
        rows, cols = np.indices(self.cells.shape)
        dead_own = (rows + 2 * cols) % 4 < 2
        board = np.where(self.cells == _OWN, own, np.where(self.cells == _OPP, other, 0))
        board = np.where(self.cells == _DEAD, np.where(dead_own, own, other), board)
        return env.from_board(board.astype(np.int8), to_move=me, last_action=self.last)


def _fallback_move(cells: np.ndarray) -> int:
    """The empty cell nearest the centre (the move of last resort)."""
    n = cells.shape[0]
    rows, cols = np.divmod(np.arange(n * n), n)
    distance = np.abs(rows - (n - 1) / 2) + np.abs(cols - (n - 1) / 2)
    distance = np.where(cells.reshape(-1) == 0, distance, np.inf)
    return int(np.argmin(distance))


class Engine:
    """A Gomocup brain around an agent: feed it lines with `handle`, or `run` it.

    Args:
      agent_factory: ``env -> Agent``, called for each board size and rule in use (a
        ``ValueError`` from it means "unsupported": the command is answered ``ERROR``
        with its message, which should say what does not fit). ``START`` accepts a size
        that the factory serves under either rule; the rule is settled at the first
        move (``BEGIN``, ``TURN``, ``BOARD``), after any ``INFO rule``.
      agent_name: the agent named in the ``ABOUT`` reply.
      seed: seeds the agents' random keys.
      warmup: play two throw-away moves when a game is set up (``START``, or a rule
        change), so that JAX compiles then and not during the first timed move; an agent
        that raises then cannot play that game (``START`` answers ``ERROR`` with its
        reason, e.g. a search too large for the memory).
      log: where diagnostics go (stderr by default); never the protocol channel.
    """

    def __init__(self, agent_factory: Callable[[Gomoku], Agent], agent_name: str = "",
                 seed: int = 0, warmup: bool = True, log: TextIO | None = None):
        self._factory = agent_factory
        self._agent_name = agent_name
        self._key = jax.random.key(seed)
        self._warmup = warmup
        self._log = log
        self._agents: dict[tuple[int, str], tuple[Gomoku, Agent]] = {}
        self._unfit: dict[tuple[int, str], str] = {}  # the factory's refusals, by (size, rule)
        self._late: set[str] = set()  # agents already reported answering past a deadline
        self._game: _Game | None = None
        self._rule_bits = 0
        self._timeout_turn: int | None = None  # ms; 0 = as fast as possible
        self._timeout_match: int | None = None  # ms; 0 = no limit
        self._time_left: int | None = None  # ms, this game's (None: not given since it began)
        self._thought = 0.0  # s the brain has thought since the match clock was last read
        self._block: list[str] | None = None  # BOARD lines while reading a BOARD block
        self._decisions = 0
        self.finished = False  # set by END

    # --------------------------------------------------------------- properties
    @property
    def rule(self) -> str:
        return "standard" if self._rule_bits & _RULE_EXACT else "freestyle"

    @property
    def size(self) -> int | None:
        return None if self._game is None else self._game.size

    @property
    def board(self) -> np.ndarray | None:
        """A copy of the position as BOARD fields ``[y, x]`` (None before START)."""
        return None if self._game is None else self._game.cells.copy()

    @property
    def game_over(self) -> str | None:
        return None if self._game is None else self._game.over

    @property
    def reading_board(self) -> bool:
        """Whether a ``BOARD`` block is being read (lines up to ``DONE`` get no reply)."""
        return self._block is not None

    # ------------------------------------------------------------------ running
    def run(self, stdin: TextIO, stdout: TextIO) -> None:
        """Answer commands from ``stdin`` on ``stdout`` until ``END`` or end of input."""
        while not self.finished:
            line = stdin.readline()
            if not line:
                break
            for reply in self.handle(line):
                stdout.write(reply + "\n")
                stdout.flush()

    def handle(self, line: str) -> list[str]:
        """The reply lines to one input line (an empty list where none is due)."""
        start = time.perf_counter()
        text = line.strip().lstrip("\ufeff").strip()  # a byte-order mark: not the command's
        try:
            if self._block is not None:
                return self._board_line(text, start)
            if not text:
                return []
            word, _, rest = text.partition(" ")
            word = word.upper()
            handler = getattr(self, f"_cmd_{word.lower()}", None)
            if word not in _COMMANDS or handler is None:  # the protocol's answer to it
                return [f"UNKNOWN command {_one_line(clip(text))!r}"]
            return handler(rest.strip(), start)
        except _ProtocolError as err:
            return [f"ERROR {_one_line(str(err))}"]
        except Exception as err:  # a bug must not kill the brain mid-match
            self._note(f"internal error on {text!r}: {type(err).__name__}: {err}")
            return [f"ERROR internal error: {type(err).__name__}: {_one_line(str(err))}"]

    def _note(self, text: str) -> None:
        print(f"gomoku-jax pbrain: {text}", file=self._log or sys.stderr, flush=True)

    # ------------------------------------------------------------------ helpers
    def _need_game(self, command: str) -> _Game:
        if self._game is None:
            raise _ProtocolError(f"{command} before START: no game (send START n first)")
        return self._game

    def _need_live_game(self, command: str) -> _Game:
        game = self._need_game(command)
        if game.over is not None:
            raise _ProtocolError(f"{command}: the game is over ({game.over}); "
                                 "send RESTART, START, BOARD or TAKEBACK")
        return game

    def _no_args(self, command: str, rest: str) -> None:
        if rest:
            raise _ProtocolError(f"{command} takes no arguments, got {clip(rest)!r}")

    def _prepare(self, size: int, rule: str) -> tuple[Gomoku, Agent]:
        """The env and (warmed-up) agent for a size and rule, built once; ``ValueError``
        (the factory's, remembered) where the agent does not play that game."""
        if (size, rule) in self._agents:
            return self._agents[(size, rule)]
        if (size, rule) in self._unfit:
            raise ValueError(self._unfit[(size, rule)])
        env = Gomoku(size, K, rule)
        try:
            agent = self._factory(env)
            check_env(agent, env)  # a factory that built it for another game: refused here
        except ValueError as err:
            self._unfit[(size, rule)] = str(err)
            raise
        if self._warmup:
            tic = time.perf_counter()
            try:
                self._warm_up(env, agent)
            except Exception as err:  # noqa: BLE001 - it cannot play: START says so
                # (a search that does not fit the memory, an agent's own bug): refused
                # here rather than answered with a fallback move at every turn
                self._unfit[(size, rule)] = (f"{agent.name} "
                                             f"{gio.brief(arena.raised_reason(err))}")
                raise ValueError(self._unfit[(size, rule)]) from None
            self._note(f"{agent.name} on {env.id} ready in {time.perf_counter() - tic:.2f} s")
        self._agents[(size, rule)] = (env, agent)
        return env, agent

    def _next_key(self) -> jax.Array:
        """The key of the agent's next decision (one per move asked for, warm-ups too)."""
        key = jax.random.fold_in(self._key, self._decisions)
        self._decisions += 1
        return key

    def _warm_up(self, env: Gomoku, agent: Agent) -> None:
        """Two throw-away moves (compiling what the agent compiles): on the empty board
        and after a centre stone. What the agent raises is raised."""
        game = _Game(env.size)
        for move in range(2):
            agent.act(game.state(env), self._next_key(), time.perf_counter() + _WARM_UP_S)
            if move == 0:
                centre = (env.size // 2) * env.size + env.size // 2
                game.cells.reshape(-1)[centre] = _OPP
                game.last = centre

    def deadline(self, start: float) -> float | None:
        """The agent's deadline for a move asked for at ``start`` (perf_counter time)."""
        budgets = []
        if self._timeout_turn is not None:
            budgets.append(max(self._timeout_turn, 0) / 1000)
        # a match limit: timeout_match above 0, or a time_left from a manager that sends
        # no timeout_match (timeout_match 0 says there is none, whatever is left). The
        # clock is the last time_left of this game, else timeout_match, less what the
        # brain has thought since (a manager need not send time_left before every move)
        if self._timeout_match or (self._timeout_match is None
                                   and self._time_left is not None):
            left = self._time_left if self._time_left is not None else self._timeout_match
            left -= self._thought * 1000
            empty = int((self._game.cells == 0).sum()) if self._game is not None else 0
            moves_left = min(max(empty // 2, _MIN_MOVES_LEFT), _MAX_MOVES_LEFT)
            budgets.append(max(left, 0) / 1000 / moves_left)
        if not budgets:
            return None
        budget = min(budgets) * (1 - _RESERVE_FRACTION) - _RESERVE_S
        return start + max(budget, 0.0)

    def _decide(self, env: Gomoku, agent: Agent, game: _Game, deadline: float | None,
                timed: bool = True) -> int:
        """The agent's move; a legal cell whatever the agent does. A ``timed`` move
        answered past its deadline is reported once per agent (agents of a fixed
        budget, such as a network's search of ``@N`` simulations, do not read it)."""
        key = self._next_key()
        try:
            action = agent.act(game.state(env), key, deadline)
        except Exception as err:
            self._note(f"{agent.name} {arena.raised_reason(err)}; playing a fallback move")
            return _fallback_move(game.cells)
        late = None if deadline is None else time.perf_counter() - deadline
        if timed and late is not None and late > _LATE_S and agent.name not in self._late:
            self._late.add(agent.name)
            self._note(f"{agent.name} answered {late:.2f} s past its deadline (from the "
                       "time limits; reported once). A network's search (FILE.gjx@N) "
                       "plays its N simulations whatever the time: if this is one, lower "
                       "N to fit")
        n = game.size
        action = plain_action(action)  # (done by every agent's act; here for any other)
        if (isinstance(action, (int, np.integer)) and not isinstance(action, bool)
                and 0 <= action < n * n and game.cells.reshape(-1)[action] == 0):
            return int(action)
        self._note(f"{agent.name} chose {action!r}, not an empty cell; playing a fallback move")
        return _fallback_move(game.cells)

    def _settle(self, size: int, command: str) -> tuple[Gomoku, Agent]:
        """The agent for the rule in force, before ``command`` changes anything: the
        rule is settled when the game is played, not at ``START`` (managers send
        ``INFO rule`` after ``START``)."""
        try:
            return self._prepare(size, self.rule)
        except ValueError as err:
            played = [r for r in RULES if (size, r) in self._agents]
            hint = (f"; the agent plays rule {_RULE_EXACT if played[0] == 'standard' else 0} "
                    f"({played[0]})" if played else "")
            raise _ProtocolError(
                f"{command}: unsupported rule {self._rule_bits} "
                f"({self.rule}: {_RULE_WORDS[self.rule]}) on {size}x{size}: {err}{hint}"
            ) from None

    def _move(self, game: _Game, start: float) -> list[str]:
        """The engine plays its move in ``game`` and names it."""
        if game.over is not None:
            raise _ProtocolError(f"game over: {game.over}")
        env, agent = self._settle(game.size, "move")
        action = self._decide(env, agent, game, self.deadline(start))
        self._thought += time.perf_counter() - start
        game.place(action, _OWN, self.rule == "standard")
        row, col = divmod(action, game.size)
        return [f"{col},{row}"]

    # ----------------------------------------------------------------- commands
    def _cmd_start(self, rest: str, start: float) -> list[str]:
        if not _INT.fullmatch(rest):
            raise _ProtocolError(f"START: expected a board size, got {clip(rest)!r}")
        return self._start(int(rest))

    def _cmd_rectstart(self, rest: str, start: float) -> list[str]:
        width, height = _parse_ints(rest, 2, "RECTSTART")
        if width != height:
            raise _ProtocolError(f"unsupported rectangular board {width}x{height}: "
                                 "only square boards")
        return self._start(width)

    def _start(self, size: int) -> list[str]:
        if not MIN_SIZE <= size <= MAX_SIZE:
            raise _ProtocolError(f"unsupported size {size}: board sizes {MIN_SIZE} to {MAX_SIZE}")
        # Every rule the agent plays, the rule in force first: INFO rule may still come
        # (managers send it after START), and a rule built then would be built in the
        # time of the first move. A size the agent plays under either rule is accepted.
        refusal, ready = None, False
        for rule in sorted(RULES, key=lambda r: r != self.rule):
            try:
                self._prepare(size, rule)
                ready = True
            except ValueError as err:
                refusal = refusal or str(err)
        if not ready:
            raise _ProtocolError(f"cannot play {size}x{size} five in a row: {refusal}")
        self._new_game(size)
        return ["OK"]

    def _new_game(self, size: int) -> None:
        """An empty board, and the match clock of a new game: ``timeout_match`` whole
        (the last game's ``time_left`` is spent)."""
        self._game = _Game(size)
        self._time_left, self._thought = None, 0.0

    def _cmd_restart(self, rest: str, start: float) -> list[str]:
        self._no_args("RESTART", rest)
        game = self._need_game("RESTART")
        self._new_game(game.size)
        return ["OK"]

    def _cmd_begin(self, rest: str, start: float) -> list[str]:
        self._no_args("BEGIN", rest)
        game = self._need_live_game("BEGIN")
        if (game.cells != 0).any():
            raise _ProtocolError("BEGIN on a non-empty board (use BOARD for a position)")
        self._settle(game.size, "BEGIN")
        game.colour_hint = 0
        return self._move(game, start)

    def _cmd_turn(self, rest: str, start: float) -> list[str]:
        x, y = _parse_ints(rest, 2, "TURN")
        game = self._need_live_game("TURN")
        action = game.empty_cell(x, y, "TURN")
        self._settle(game.size, "TURN")  # before the stone is placed: an ERROR changes nothing
        _check_counts(game, f"TURN {x},{y}", "the stone is not placed", add=_OPP)
        if not (game.cells != 0).any():
            game.colour_hint = 1
        game.place(action, _OPP, self.rule == "standard")
        if game.over is not None:
            return [f"ERROR game over: {game.over}"]
        return self._move(game, start)

    def _cmd_play(self, rest: str, start: float) -> list[str]:
        x, y = _parse_ints(rest, 2, "PLAY")
        game = self._need_live_game("PLAY")
        action = game.empty_cell(x, y, "PLAY")
        _check_counts(game, f"PLAY {x},{y}", "the stone is not placed", add=_OWN)
        game.place(action, _OWN, self.rule == "standard")
        return [f"{x},{y}"]

    def _cmd_takeback(self, rest: str, start: float) -> list[str]:
        x, y = _parse_ints(rest, 2, "TAKEBACK")
        game = self._need_game("TAKEBACK")
        action = game.cell(x, y, "TAKEBACK")
        if game.cells.reshape(-1)[action] == 0:
            raise _ProtocolError(f"TAKEBACK {x},{y}: no stone there")
        game.cells.reshape(-1)[action] = 0
        if game.last == action:
            game.last = -1
        game.recompute_over(self.rule == "standard")
        return ["OK"]

    def _cmd_board(self, rest: str, start: float) -> list[str]:
        self._no_args("BOARD", rest)
        self._block = []
        return []

    def _cmd_done(self, rest: str, start: float) -> list[str]:
        raise _ProtocolError("DONE without BOARD")

    def _board_line(self, text: str, start: float) -> list[str]:
        word = text.partition(" ")[0].upper()
        if word == "DONE":
            lines, self._block = self._block, None
            return self._apply_board(lines, start)
        if word in _COMMANDS:  # the manager gave up on the block: so do we
            self._block = None
            replies = ["ERROR BOARD not ended by DONE; the position is unchanged"]
            return replies + self.handle(text)
        cells = (MAX_SIZE if self._game is None else self._game.size) ** 2
        if text and len(self._block) <= cells:  # one line past the cells is kept, to refuse
            self._block.append(text)  # the block at DONE; none after it, nor blank ones
        return []

    def _apply_board(self, lines: list[str], start: float) -> list[str]:
        game = self._need_game("BOARD")
        if len(lines) > game.size ** 2:
            raise _ProtocolError(f"BOARD block of more stones than the {game.size}x"
                                 f"{game.size} board has cells ({game.size ** 2}); the "
                                 "position is unchanged")
        self._settle(game.size, "BOARD")
        new = _Game(game.size)
        order = []  # the opponent's stones, as listed
        for number, line in enumerate(lines, 1):
            if not line:
                continue
            try:
                x, y, field = _parse_ints(line, 3, "BOARD line")
                action = new.empty_cell(x, y, f"BOARD line {clip(line)!r}: cell")
                if field not in (_OWN, _OPP, _DEAD):
                    raise _ProtocolError(f"BOARD line {clip(line)!r}: field must be 1 (own), "
                                         f"2 (opponent) or 3 (dead stone), got {field}")
            except _ProtocolError as error:  # one answer for the block: say what became of it
                raise _ProtocolError(f"{error} (line {number} of {len(lines)}); the whole "
                                     "BOARD block is refused and the position is unchanged"
                                     ) from None
            new.cells.reshape(-1)[action] = field
            if field == _OPP:
                order.append(action)
        _check_counts(new, "BOARD", "the whole BOARD block is refused and the position is "
                      "unchanged")
        own, opp = int((new.cells == _OWN).sum()), int((new.cells == _OPP).sum())
        new.colour_hint = 1 if opp > own else 0
        # The brain is to move: the last move was the opponent's, the last one listed
        # (managers list the stones in order of play, or in any order under gomoku rules,
        # where a last line of the brain's own stone cannot be the last move)
        new.last = order[-1] if order else -1
        new.recompute_over(self.rule == "standard")
        self._game = new  # a valid position replaces the old one whole
        if new.over is not None:
            return [f"ERROR game over: {new.over}"]
        return self._move(new, start)

    def _cmd_info(self, rest: str, start: float) -> list[str]:
        key, _, value = rest.partition(" ")
        key, value = key.lower(), value.strip()
        if key not in ("timeout_turn", "timeout_match", "time_left", "rule"):
            return []  # max_memory, game_type, folder, evaluate ... and unknown keys
        if key == "rule":
            if not _INT.fullmatch(value):
                raise _ProtocolError(f"INFO {key}: expected an integer, got {clip(value)!r}")
            return self._set_rule(int(value))
        match = _MS.fullmatch(value)
        if not match:
            raise _ProtocolError(f"INFO {key}: expected milliseconds, got {clip(value)!r}")
        exact = _milliseconds(match)
        if key == "time_left":  # a manager that allows some tolerance writes an overdrawn
            number = max(math.floor(exact), 0)  # clock as negative: no time left
        elif exact < 0:  # milliseconds; 0 has a meaning (as fast as possible / no limit)
            raise _ProtocolError(f"INFO {key}: expected milliseconds >= 0, got {value}; "
                                 "the previous value stands")
        else:  # a limit's fraction rounds up: 0.5 ms is a limit, where 0 would mean none
            number = math.ceil(exact)
        setattr(self, f"_{key}", number)
        if key == "time_left":
            self._thought = 0.0  # the manager's clock includes all the brain has thought
        return []

    def _set_rule(self, bits: int) -> list[str]:
        if bits < 0 or bits & ~_SUPPORTED_RULE_BITS:
            names = [n for b, n in ((4, "renju"), (8, "caro")) if bits >= 0 and bits & b]
            what = " and ".join(names) if names else "unknown rule bits"
            raise _ProtocolError(f"unsupported rule {bits} ({what}); still playing "
                                 f"{self.rule} (rule 0 freestyle, 1 exactly five, +2 continuous)")
        rule = "standard" if bits & _RULE_EXACT else "freestyle"
        if self._game is not None:  # build (compile) the agent now, not at the first move
            try:
                self._prepare(self._game.size, rule)
            except ValueError as err:
                try:  # the rule in force fits: ERROR, and play on under it (as for renju)
                    self._prepare(self._game.size, self.rule)
                except ValueError:
                    pass  # neither fits (a rule not settled yet): the first move says so
                else:
                    raise _ProtocolError(f"unsupported rule {bits} ({rule}): {err}; still "
                                         f"playing {self.rule}") from None
        self._rule_bits = bits
        if self._game is not None:
            self._game.recompute_over(rule == "standard")
        return []

    def _cmd_about(self, rest: str, start: float) -> list[str]:
        # a field's value may not hold its quotes (a path such as my "best".gjx would end
        # the field early)
        name = _one_line(self._agent_name or "").replace('"', "'")
        agent = f', agent="{name}"' if name else ""
        return [f'name="gomoku-jax", version="{__version__}", '
                f'author="gomoku-jax developers", country="Unknown"{agent}']

    def _cmd_end(self, rest: str, start: float) -> list[str]:
        self.finished = True
        return []


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _check_counts(game: "_Game", what: str, outcome: str, add: int | None = None) -> None:
    """A `_ProtocolError` when the stones of ``game`` (with one more of field ``add``)
    could not have been played in turn: after the opponent's move (a BOARD, a TURN) the
    brain is to move, so the opponent has as many stones as the brain or one more;
    after the brain's own (PLAY) it has as many as the opponent or one more. A board
    with dead stones (field 3, a continued game) is not counted."""
    if (game.cells == _DEAD).any():
        return
    own = int((game.cells == _OWN).sum()) + (add == _OWN)
    opp = int((game.cells == _OPP).sum()) + (add == _OPP)
    lead = own - opp if add == _OWN else opp - own
    if lead not in (0, 1):
        side = "the brain" if add == _OWN else "the opponent"
        raise _ProtocolError(
            f"{what}: {own} own and {opp} opponent stones cannot have been played in turn "
            f"({side} must have as many stones as the other or one more); {outcome}")


def run_engine(agent_name: str, stdin: TextIO | None = None, stdout: TextIO | None = None,
               seed: int = 0) -> int:
    """Run ``agents.make(agent_name, env)`` as a Gomocup brain until ``END``.

    Anything the code prints while the brain runs goes to stderr, so that only protocol
    lines reach ``stdout``. Raises ``ValueError`` for a name that can play no Gomocup
    board (an unknown one, a malformed one, a file that is not an exported agent).
    """
    from gomoku_jax import agents

    spec = agents.exported_spec(agent_name)  # FILE.gjx[@N][+killer]
    if spec is not None:
        from gomoku_jax import exported

        path, simulations = spec
        # a bad file, or a budget it cannot take (a Q network's), fails now, not at START
        trained = exported.load(path, simulations=simulations).env
        factory = functools.partial(_exported_agent, agent_name, path, trained)
        if trained.k != K:
            print(f"gomoku-jax pbrain: {_unfit_k(path, trained)}: every START will be "
                  "answered ERROR", file=sys.stderr, flush=True)
    else:
        _check_name(agent_name)
        factory = functools.partial(agents.make, agent_name)
    stdin = sys.stdin if stdin is None else stdin
    if stdin is sys.stdin and hasattr(stdin, "reconfigure"):  # a manager's bytes in
        stdin.reconfigure(errors="replace")  # another code page must not kill the brain
    stdout = sys.stdout if stdout is None else stdout
    if stdout is sys.stdout and hasattr(stdout, "reconfigure"):  # nor a reply quoting them
        stdout.reconfigure(errors="replace")  # (U+FFFD) on a stdout in a legacy code page
    engine = Engine(factory, agent_name=agent_name, seed=seed)
    with contextlib.redirect_stdout(sys.stderr):
        engine.run(stdin, stdout)
    return 0


def _check_name(agent_name: str) -> None:
    """A name that builds no agent for any board a brain can be asked to play (sizes
    `MIN_SIZE` to `MAX_SIZE`, either rule) fails now with its reason, not at every START:
    an unknown name, a malformed one (``pure-mcts-0``, ``heuristic@2``), a file that is
    not an exported agent. An agent that plays only some boards or one rule starts, and
    START and the first move refuse the others."""
    from gomoku_jax import agents

    errors = []
    for size in dict.fromkeys((15, *range(MIN_SIZE, MAX_SIZE + 1))):
        for rule in RULES:
            try:
                agents.make(agent_name, Gomoku(size, K, rule))
                return
            except ValueError as error:
                if str(error).startswith("unknown agent"):
                    raise
                errors.append(error)
    if len({str(error) for error in errors}) == 1:  # the same whatever the board
        raise errors[0]
    raise ValueError(f"{agent_name!r} plays no Gomocup board (sizes {MIN_SIZE} to "
                     f"{MAX_SIZE}, five in a row): on 15x15 {errors[0]}") from errors[0]


def _unfit_k(path: str, trained: Gomoku) -> str:
    return (f"{path} plays {trained.k} in a row (trained for {trained.size}x{trained.size} "
            f"k={trained.k} {trained.rule}); Gomocup games are {K} in a row")


def _fits(path: str, trained: Gomoku, env: Gomoku) -> None:
    """``ValueError`` naming what does not fit (k, size, rule) when an agent trained
    for ``trained`` cannot play ``env``."""
    if trained.k != env.k:
        raise ValueError(_unfit_k(path, trained))
    if trained.size != env.size:
        raise ValueError(f"{path} plays {trained.size}x{trained.size} boards only, "
                         f"not {env.size}x{env.size}")
    if trained.rule != env.rule:
        raise ValueError(f"{path} plays the {trained.rule} rule "
                         f"({_RULE_WORDS[trained.rule]}), not {env.rule}")


def _exported_agent(agent_name: str, path: str, trained: Gomoku, env: Gomoku) -> Agent:
    from gomoku_jax import agents

    _fits(path, trained, env)
    return agents.make(agent_name, env)


# ------------------------------------------------------------- the other way round


class EngineAgent(PythonAgent):
    """An external Gomocup brain, run as a subprocess, as an `Agent`.

    The process starts at once and is sent ``INFO rule`` (0, or 1 for the standard
    rule), ``START n`` and ``INFO timeout_match 0`` (no match clock: moves are timed, not
    matches); the ``OK`` to ``START`` is awaited at the first move. ``INFO
    timeout_turn``, from the deadline (else ``turn_ms``), goes before a move whenever it
    differs from the value the process was last sent.

    Like a tournament manager, the agent remembers the position the engine holds: the
    last position it was sent plus its own reply (an empty board after ``START`` or
    ``RESTART``; unknown after anything went wrong). Each move sends

    * ``TURN x,y`` when the position is that one plus one opponent's stone at ``x,y``
      (the state's last move, where it names one): the engine plays on in its own game
      and may keep its search between moves;
    * ``BEGIN`` on the empty board;
    * else the whole position with ``BOARD`` ... ``DONE`` (a new game with opening
      stones, a position that does not follow, the first move after an error).

    Before ``BEGIN`` or ``BOARD``, an engine that holds a game (or may: after an error)
    is sent ``RESTART``, its ``OK`` awaited, so that each new position starts from an
    empty board (then a single opponent stone is a ``TURN`` again). ``BOARD`` lists the
    stones in the order they were played, as far as the agent can know it (a `State`
    has no move history): the moves of the game it has followed (since the first
    position of that game it was shown, the engine's replies included) come first, in
    order, when the position goes on from that game; the stones it did not see played
    (opening stones, an unrelated position) follow, alternating colours, each colour's in
    cell order, ending with the state's last move (else with a stone of the side that
    is not to move).

    The ``x,y`` answer is read; ``MESSAGE``, ``DEBUG``, ``SUGGEST`` and ``UNKNOWN``
    lines are skipped. An ``ERROR`` answer, an unexpected line, no answer in time or a
    dead process raises `EngineError` (the arena counts it as a forfeit with that
    reason); the process is started again at the next move if it has gone, or if it did
    not answer ``START`` with ``OK`` (it is stopped then). An answer on an occupied cell
    is returned as it is, for the caller (the arena) to count as an illegal move. After
    any of these the next move sends the whole position. Use `close` (or ``with``) to
    end the process.

    Args:
      command: the brain's command line, e.g. ``["pbrain-foo.exe"]``.
      env: the game; five in a row on a 5x5 to 19x19 board.
      name: the agent's name (default: from the command line).
      turn_ms: ``timeout_turn`` sent when `act` gets no deadline (a positive whole
        number of milliseconds).
      grace_s: how long past the deadline (or ``turn_ms``) to wait for an answer (seconds,
        positive and finite).
      start_timeout_s: how long ``START`` (and ``RESTART``) may take (engines may load
        or compile; seconds, positive and finite).
      stderr: where the engine's stderr goes (``subprocess`` convention; default: ours).
    """

    def __init__(self, command: Sequence[str], env: Gomoku, name: str | None = None,
                 turn_ms: int = 5000, grace_s: float = 2.0, start_timeout_s: float = 120.0,
                 stderr=None):
        if isinstance(command, str) or not command:
            raise ValueError(f"command must be a non-empty list of strings, got {command!r}")
        if env.k != K or not MIN_SIZE <= env.size <= MAX_SIZE:
            raise ValueError(f"Gomocup engines play five in a row on {MIN_SIZE}x{MIN_SIZE} "
                             f"to {MAX_SIZE}x{MAX_SIZE} boards, not {env.id}")
        # checked before the process starts: a bad time would only show at the first move
        # (a wait that ends at once, or never)
        if (isinstance(turn_ms, bool) or not isinstance(turn_ms, (int, np.integer))
                or turn_ms < 1):
            raise ValueError(f"turn_ms must be a positive whole number of milliseconds, "
                             f"got {turn_ms!r}")
        for what, seconds in (("grace_s", grace_s), ("start_timeout_s", start_timeout_s)):
            if (isinstance(seconds, bool) or not isinstance(seconds, (int, float, np.integer,
                                                                      np.floating))
                    or not 0 < seconds < math.inf):
                raise ValueError(f"{what} must be a positive, finite number of seconds, "
                                 f"got {seconds!r}")
        self.command = [str(c) for c in command]
        self.env = env
        self.name = name or "engine:" + os.path.basename(self.command[-1])
        self.turn_ms = int(turn_ms)
        self.grace_s = float(grace_s)
        self.start_timeout_s = float(start_timeout_s)
        self._stderr = stderr
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue | None = None
        self._reader: threading.Thread | None = None
        self._started = False  # START answered OK by the current process
        # The position the engine holds, as BOARD fields [N*N] (0 empty, 1 its own
        # stones, 2 the opponent's); None when unknown (before START's OK, after an error).
        self._held: np.ndarray | None = None
        self._timeout_turn: int | None = None  # the timeout_turn the process was last sent
        # The game followed so far: (action, colour 1 black / 2 white), in order of play.
        self._game: list[tuple[int, int]] = []
        self._last_returncode: int | None = None
        self._spawn()  # start now: engines load while other things happen

    # ------------------------------------------------------------- process
    def _spawn(self) -> None:
        self._proc = subprocess.Popen(
            self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            # a byte that is not UTF-8 (a message in an old Windows code page) is replaced,
            # not an error that would end the reading of the engine's output
            encoding="utf-8", errors="replace", bufsize=1,
        )
        self._lines = queue.Queue()
        self._reader = threading.Thread(target=_pump, args=(self._proc.stdout, self._lines),
                                        daemon=True, name=f"{self.name} reader")
        self._reader.start()
        self._started = False
        self._held = None
        self._timeout_turn = None
        rule = _RULE_EXACT if self.env.rule == "standard" else 0
        try:  # the rule first (INFO may come at any time): a brain checks it at START
            self._send(f"INFO rule {rule}", f"START {self.env.size}", "INFO timeout_match 0")
        except EngineError:
            pass  # reported by the first move

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _send(self, *lines: str) -> None:
        try:
            self._proc.stdin.write("".join(line + "\n" for line in lines))
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as err:
            raise EngineError(f"{self.name}: cannot write to the engine ({err}); "
                              f"exit code {self._proc.poll()}") from None

    def _reply(self, until: float, waiting_for: str, unknown: bool = False) -> str:
        """The next line that is not a message, before ``until`` (perf_counter);
        ``unknown``: an ``UNKNOWN`` line (a command the engine does not know) is the
        answer, not skipped."""
        while True:
            left = until - time.perf_counter()
            try:
                line = self._lines.get(timeout=max(left, 0.0))
            except queue.Empty:
                self._kill()
                raise EngineError(f"{self.name}: no answer to {waiting_for} in time; "
                                  "engine stopped") from None
            if line is None:  # its output is closed: it exits, or should
                try:
                    # (at least a second: one that exits as it closes is not cut short)
                    code = self._proc.wait(timeout=max(until - time.perf_counter(), 1.0))
                except subprocess.TimeoutExpired:
                    self._kill()
                    raise EngineError(f"{self.name}: the engine closed its output but did "
                                      f"not exit while we waited for {waiting_for}; engine "
                                      "stopped") from None
                raise EngineError(f"{self.name}: the engine exited (code {code}) "
                                  f"while we waited for {waiting_for}")
            text = line.strip()
            word = text.partition(" ")[0].upper()
            if word == "UNKNOWN" and unknown:
                return text
            if not text or word in ("MESSAGE", "DEBUG", "SUGGEST", "UNKNOWN"):
                continue
            if word == "ERROR":
                raise EngineError(f"{self.name}: answered {text!r} to {waiting_for}")
            return text

    def _ensure_started(self) -> None:
        if not self._alive():
            self._close_process()
            self._spawn()
        if not self._started:
            try:
                answer = self._reply(time.perf_counter() + self.start_timeout_s,
                                     f"START {self.env.size}")
            except EngineError:  # e.g. ERROR: the next move starts a fresh process (and
                self._kill()     # sends START again), never waits for an answer to this one
                raise
            if answer.upper() != "OK":
                self._kill()
                raise EngineError(f"{self.name}: answered {answer!r} to START {self.env.size}")
            self._started = True
            self._held = np.zeros(self.env.num_actions, np.int8)  # an empty board

    def _restart(self) -> None:
        """``RESTART`` (a new game on the same board), its ``OK`` awaited: ``BEGIN`` is
        only for an empty board, and ``BOARD`` is sent to an engine with no game open. An
        engine that answers anything else (``ERROR``, ``UNKNOWN``: the command is optional
        for older brains) or exits is replaced by a fresh process, started with ``START``
        (`EngineError` only when that fails too, or no answer comes in time)."""
        self._held = None
        self._send("RESTART")
        try:
            answer = self._reply(time.perf_counter() + self.start_timeout_s, "RESTART",
                                 unknown=True)
        except EngineError:
            if self._proc is None:  # no answer in time: the engine was stopped
                raise
            answer = None  # ERROR, or the engine exited
        if answer is None or answer.upper() != "OK":
            self._kill()
            self._ensure_started()  # a new process, START answered: an empty board
            return
        self._held = np.zeros(self.env.num_actions, np.int8)

    # ------------------------------------------------------------------- play
    def _follow_up(self, fields: np.ndarray, last: int) -> int | None:
        """The opponent's stone that makes ``fields`` (BOARD fields ``[N*N]``) out of the
        position the engine holds, if exactly one does (and it is the ``last`` move,
        unless that is -1); else None."""
        if self._held is None:
            return None
        changed = np.flatnonzero(fields != self._held)
        if len(changed) != 1:
            return None
        cell = int(changed[0])
        if self._held[cell] != 0 or fields[cell] != _OPP or last not in (cell, -1):
            return None
        return cell

    def _play_order(self, cells: np.ndarray, me: int, last: int) -> list[int]:
        """The stones of ``cells`` (colours ``[N*N]``, ``me`` to move) in order of play:
        the game followed so far first, if every one of its stones is still there in its
        colour; then the others, alternating colours back from ``last`` (else from a
        stone of the side not to move), each colour's in cell order."""
        known = [a for a, colour in self._game if cells[a] == colour]
        if len(known) < len(self._game):
            known = []  # another game
        seen = set(known)
        rest = [int(a) for a in np.flatnonzero(cells) if int(a) not in seen]
        final = int(cells[last]) if last in rest else 3 - me
        by_colour = {c: [a for a in rest if cells[a] == c and a != last] for c in (1, 2)}
        if last in rest:
            by_colour[final].append(last)
        backwards, colour = [], final
        while by_colour[1] or by_colour[2]:
            if not by_colour[colour]:
                colour = 3 - colour
            backwards.append(by_colour[colour].pop())
            colour = 3 - colour
        return known + backwards[::-1]

    def act(self, state: State, key: jax.Array, deadline: float | None = None) -> int:
        del key  # the engine has its own randomness (the board's size: `Agent` checks it)
        n = self.env.size
        board = np.asarray(state.board)
        self._ensure_started()
        cells = board.reshape(-1).astype(np.int8)
        me = int(state.current_player) + 1
        last = int(state.last_action)
        fields = np.where(cells == 0, 0, np.where(cells == me, _OWN, _OPP)).astype(np.int8)
        order = self._play_order(cells, me, last)
        opponent = self._follow_up(fields, last)
        if opponent is None and (self._held is None or self._held.any()):
            self._restart()  # a new position starts from an empty board
            opponent = self._follow_up(fields, last)  # a lone opponent stone: TURN
        now = time.perf_counter()
        turn_ms = self.turn_ms if deadline is None else max(int((deadline - now) * 1000), 1)
        lines = [] if turn_ms == self._timeout_turn else [f"INFO timeout_turn {turn_ms}"]
        if opponent is not None:
            asked = f"TURN {opponent % n},{opponent // n}"
            lines.append(asked)
        elif order:
            asked = "BOARD"
            lines += ["BOARD", *(f"{a % n},{a // n},{fields[a]}" for a in order), "DONE"]
        else:
            asked = "BEGIN"
            lines.append(asked)
        self._held = None  # the engine's position is known again once it answers a move
        self._send(*lines)
        self._timeout_turn = turn_ms
        answer = self._reply(now + turn_ms / 1000 + self.grace_s, asked)
        try:
            x, y = _parse_ints(answer, 2, "move")
        except _ProtocolError:
            raise EngineError(
                f"{self.name}: answered {answer!r} to {asked}, not a move x,y") from None
        if not (0 <= x < n and 0 <= y < n):
            raise EngineError(f"{self.name}: played {x},{y}, off the {n}x{n} board")
        action = y * n + x
        if cells[action] == 0:  # a legal move: the engine holds this position now
            fields[action] = _OWN
            self._held = fields
            self._game = [(a, int(cells[a])) for a in order] + [(action, me)]
        return action

    def select(self, state: State, rng) -> int:  # pragma: no cover - act is overridden
        raise NotImplementedError

    # ---------------------------------------------------------------- closing
    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
        self._close_process()

    def _close_process(self) -> None:
        if self._proc is None:
            return
        proc, self._proc = self._proc, None
        with contextlib.suppress(Exception):
            proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=5)
        with contextlib.suppress(Exception):
            proc.stdout.close()
        self._started = False
        self._held = None
        self._last_returncode = proc.returncode

    @property
    def returncode(self) -> int | None:
        """The exit code of the last process once closed (None while it runs)."""
        return self._last_returncode if self._proc is None else self._proc.poll()

    def close(self, timeout: float = 5.0) -> None:
        """Send ``END``, wait up to ``timeout`` seconds for the engine to exit, else kill it."""
        if self._proc is None:
            return
        proc = self._proc
        if proc.poll() is None:
            with contextlib.suppress(EngineError):
                self._send("END")
            with contextlib.suppress(Exception):
                proc.stdin.close()  # end of input too, for engines that ignore END
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=timeout)
        self._close_process()

    def __enter__(self) -> "EngineAgent":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        # Nothing here may raise: at interpreter exit the module's globals (contextlib,
        # subprocess ...) may be gone already, and __init__ may have failed early.
        try:
            self._kill()
        except Exception:
            try:
                proc = self.__dict__.get("_proc")
                if proc is not None and proc.returncode is None:
                    proc.kill()
            except Exception:
                pass


def _pump(stream: TextIO, lines: queue.Queue) -> None:
    """Copy a process's output lines into a queue; None marks the end."""
    try:
        for line in iter(stream.readline, ""):
            lines.put(line)
    except (OSError, ValueError):
        pass
    finally:
        lines.put(None)
