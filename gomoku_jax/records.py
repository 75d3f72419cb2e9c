"""Game records on disk, validated on the engine, and training positions from them.

Seed 001 (section IV-D) learns by imitation from games between bots played from random
openings: the games are split by winner, each position's policy target is the move
played (one-hot) and its value target the final result from the side to move (+1 won,
-1 lost, 0 draw). This module stores such games, reads them back checking every one,
and turns them into arrays.

The records format (``.jsonl``, or ``.jsonl.gz`` gzip-compressed)
-----------------------------------------------------------------
JSON Lines, UTF-8 (a byte-order mark, as Windows tools write first, is allowed, also at
the start of a later line, as files joined together have it): one
JSON object per line; blank lines are ignored. Everything is
data (nothing is pickled or evaluated). The first line is a header::

    {"format": "gomoku-jax-records", "version": 1, "size": 9, "k": 5,
     "rule": "freestyle", "metadata": {...}}

``metadata`` (optional) is any JSON object the writer chose (generator settings,
agents, seed), in strict JSON: `write_records` refuses NaN and infinities. Every other
line is one game::

    {"size": 9, "k": 5, "rule": "freestyle", "moves": [[4, 4], [3, 5], ...],
     "winner": "black", "black": "gomokubot-6", "white": "gomokubot-6",
     "opening": 4, "source": "experiments.generate_records seed=0 game=17"}

* ``size``, ``k``, ``rule``: the game (see `gomoku_jax.game.GameConfig`); they must be
  the header's (one game per file; a line is self-contained all the same).
* ``moves``: every move in order, black first, as ``[row, col]`` pairs (0-based, row
  0 the top row, so action = ``row * size + col``); the opening included.
* ``winner``: ``"black"``, ``"white"``, ``"draw"`` or ``null``. It must be what
  replaying ``moves`` gives: a win is a k-in-a-row (``rule``) made by the last move; a
  draw is a full board without one; ``null`` marks an unfinished game (no winner yet
  and the board not full: a resignation, a time loss or a cut-off game). Games lost by
  an illegal move are not stored (their result is not on the board).
* ``black``, ``white``: names of the players (strings).
* ``opening``: how many of the first ``moves`` were a given opening rather than the
  players' choices (0 to ``len(moves)``).
* ``source`` (optional string): where the game came from. Other keys are ignored.

`read_records` replays every game on the engine (all games of a file at once, one
compiled ``vmap`` of a ``lax.scan`` over `Gomoku.step`). A record that is not valid
JSON, lacks a key, has a value of the wrong type, a move off the board, a move on an
occupied cell, a move after the game was won, or a ``winner`` the replay contradicts is
reported with its file and line and left out (``on_error="skip"``: a warning, or an
entry in the caller's ``errors`` list), or raised (``on_error="raise"``) as a
`RecordError`. A file whose header is missing or wrong raises at once. Files joined
together (``cat a.jsonl.gz b.jsonl.gz``) read as one: the second header is reported
as such, and the games after it are checked against the first.

Gomocup / Piskvork ``.psq`` files
---------------------------------
One game per file: a header line ``Piskvorky 15x15, 11:11, 0`` (only the board size
``WxH`` is read; boards must be square, 3x3 to 19x19: a
20x20 one, Gomocup's freestyle board, is refused), then one line per move ``x,y,time_ms`` with
1-based ``x`` (column) and ``y`` (row) and an optional time field, so action =
``(y - 1) * size + (x - 1)``; the first line that is not a move ends the moves, and
what follows (engine names, a result code, the tournament) is read leniently: the
first two lines that are not numbers are taken as the black and white players (a name
in brackets that would otherwise read as a number or a move, ``[2]``, is read as ``2``:
`format_psq` writes such names so). The
moves are strict: a coordinate off the board or a repeated cell is an error naming the
line, and so is a line that ends the moves while move lines follow it, or a garbled
move line anywhere (it starts ``number,number`` but is not ``x,y`` or ``x,y,time_ms``
in whole numbers: ``1.5,5,0``, ``5,5,abc``, ``5,5 0``): no move is dropped unsaid. The winner
comes from the replay (``None`` when the moves end without a result, e.g. a time
loss). A ``.psq`` does not say k or the rule: they come from ``env``
(default 5 in a row, freestyle, Gomocup's freestyle rule). A file that begins with a
UTF-8 byte-order mark (as Windows tools save it) reads as one without.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import io
import json
import os
import re
import uuid
import warnings
import zlib
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gomoku_jax import io as gio
from gomoku_jax.config import DuplicateKeyError, clip, loads
from gomoku_jax.game import MAX_SIZE, MIN_SIZE, GameConfig, Gomoku

__all__ = [
    "FORMAT",
    "VERSION",
    "WINNER_NAMES",
    "Game",
    "Positions",
    "RecordError",
    "balanced_sample",
    "format_psq",
    "parse_psq",
    "positions",
    "read_header",
    "read_psq",
    "read_records",
    "split_by_winner",
    "validate_games",
    "write_psq",
    "write_records",
]

FORMAT = "gomoku-jax-records"
VERSION = 1
# Winner codes (as in `State.winner`; None: unfinished) and their names in the files.
WINNER_NAMES = {0: "black", 1: "white", -1: "draw", None: None}
_WINNER_CODES = {name: code for code, name in WINNER_NAMES.items()}
_GAME_KEYS = ("size", "k", "rule", "moves", "winner", "black", "white", "opening")
_BATCH = 1024  # games replayed per compiled call


class RecordWarning(UserWarning):
    """A malformed game record was left out (``on_error="skip"``)."""


class RecordError(ValueError):
    """A malformed record: ``path``, ``line`` (1-based; 0 when not from a file) and
    ``reason``; ``str()`` is ``"path:line: reason"``."""

    def __init__(self, path: str, line: int, reason: str):
        self.path, self.line, self.reason = str(path), int(line), reason
        super().__init__(f"{self.path}:{self.line}: {reason}")

    def __reduce__(self):
        return type(self), (self.path, self.line, self.reason)


@dataclasses.dataclass(frozen=True)
class Game:
    """One recorded game.

    ``moves`` are flat actions (``row * size + col``), black first, opening included;
    ``winner`` is 0 black, 1 white, -1 draw, or None for an unfinished game;
    ``opening`` counts the leading moves that were a given opening."""

    size: int
    k: int
    rule: str
    moves: tuple[int, ...]
    winner: int | None
    black: str = "black"
    white: str = "white"
    opening: int = 0
    source: str = ""

    @property
    def length(self) -> int:
        return len(self.moves)

    @property
    def config(self) -> GameConfig:
        return GameConfig(self.size, self.k, self.rule)


class Positions(NamedTuple):
    """Training positions: one row per move played, the board before it.

    ``value`` is the game's final result from the view of ``player`` (the side to
    move): +1 it went on to win, -1 it lost, 0 a draw."""

    boards: np.ndarray  # [M, N, N] int8: 0 empty, 1 black, 2 white (before the move)
    player: np.ndarray  # [M] int32: the side to move, 0 black / 1 white
    last_action: np.ndarray  # [M] int32: the previous move, -1 before the first
    action: np.ndarray  # [M] int32: the move played (the one-hot policy target)
    value: np.ndarray  # [M] float32: the final result for ``player``
    game: np.ndarray  # [M] int32: index of the position's game in the input


# ------------------------------------------------------------------ replay on the engine


@functools.partial(jax.jit, static_argnames=("env",))
def _replay(env: Gomoku, moves: jax.Array):
    """Replay games ``moves`` [B, N*N] (-1 padded, all in range) on the engine.

    Returns per game: the index of the first bad move (-1 none) and its kind (1 an
    occupied cell, 2 a move after the end), the index of the move that ended the game
    (-1 none), the winner and whether the game is over after the good moves."""

    def one(seq):  # [N*N]
        def body(carry, a):
            state, bad_at, bad_kind, end_at, t = carry
            present = (a >= 0) & (bad_at < 0)
            occupied = state.board.reshape(-1)[jnp.maximum(a, 0)] != 0
            after_end = present & state.terminated
            duplicate = present & ~state.terminated & occupied
            bad = after_end | duplicate
            bad_kind = jnp.where(bad, jnp.where(after_end, 2, 1), bad_kind)
            bad_at = jnp.where(bad, t, bad_at)
            advance = present & ~bad
            stepped = env.step(state, jnp.maximum(a, 0))
            state = jax.tree.map(lambda new, old: jnp.where(advance, new, old), stepped, state)
            end_at = jnp.where(advance & stepped.terminated, t, end_at)
            return (state, bad_at, bad_kind, end_at, t + 1), None

        minus = jnp.int32(-1)
        init = (env.init(), minus, jnp.int32(0), minus, jnp.int32(0))
        (state, bad_at, bad_kind, end_at, _), _ = jax.lax.scan(body, init, seq)
        return bad_at, bad_kind, end_at, state.winner, state.terminated

    return jax.vmap(one)(moves)


def _describe(action: int, size: int) -> str:
    return str(divmod(int(action), size))


def _replay_problems(env: Gomoku, games: Sequence[Game]) -> list[str | None]:
    """For each game (at most N*N moves, all on the board), why its replay does not
    match the record, or None. All games replayed together, ``_BATCH`` at a time."""
    nn = env.num_actions
    out: list[str | None] = []
    for start in range(0, len(games), _BATCH):
        chunk = games[start:start + _BATCH]
        rows = 1 << max(len(chunk) - 1, 0).bit_length()  # few distinct shapes to compile
        padded = np.full((rows, nn), -1, np.int32)
        for i, g in enumerate(chunk):
            padded[i, :len(g.moves)] = g.moves
        bad_at, bad_kind, end_at, winner, over = map(np.asarray, _replay(env, jnp.asarray(padded)))
        for i, g in enumerate(chunk):
            out.append(_judge(env, g, int(bad_at[i]), int(bad_kind[i]), int(end_at[i]),
                              int(winner[i]), bool(over[i])))
    return out


def _judge(env: Gomoku, g: Game, bad_at: int, bad_kind: int, end_at: int, winner: int,
           over: bool) -> str | None:
    n = env.size
    if bad_at >= 0:
        move = f"move {bad_at + 1} {_describe(g.moves[bad_at], n)}"
        if bad_kind == 1:
            return f"{move} is on an occupied cell"
        result = "a draw" if winner < 0 else f"{WINNER_NAMES[winner]} won"
        return (f"{move} comes after the end of the game ({result} at move {end_at + 1} "
                f"{_describe(g.moves[end_at], n)})")
    said = WINNER_NAMES[g.winner]
    if over:
        actual = WINNER_NAMES[winner]
        if g.winner != winner:
            how = ("it fills up with no winner (a draw)" if winner < 0 else
                   f"{actual} wins with move {end_at + 1} {_describe(g.moves[end_at], n)}")
            return f"winner is {json.dumps(said)} but on the board {how}"
        return None
    if g.winner is None:
        return None
    if g.winner < 0:
        return (f"winner is \"draw\" but the board is not full ({len(g.moves)} of "
                f"{env.num_actions} cells) and nobody has won: use null for an unfinished game")
    return (f"winner is {json.dumps(said)} but nobody has {env.k} in a row ({env.rule}) "
            f"after the {len(g.moves)} moves: use null for an unfinished game")


def _is_winner(x) -> bool:
    """None, or an integer (not a bool) -1, 0 or 1."""
    return x is None or (isinstance(x, (int, np.integer)) and not isinstance(x, bool)
                         and int(x) in (-1, 0, 1))


@functools.lru_cache(maxsize=None)
def _engine(size: int, k: int, rule: str) -> Gomoku:
    return Gomoku(size, k, rule)


def _unwritable(text: str) -> str | None:
    """Why UTF-8 cannot write ``text`` (a lone surrogate: a JSON escape of half a
    character, ``"\\ud800"``, or a byte that was not UTF-8), else None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return f"{text!r} is not text UTF-8 can write (a lone surrogate escape)"
    return None


def _check_shape(g: Game) -> str | None:
    """Checks of a game that need no replay: moves in range, opening, winner code,
    names and source that a file can hold."""
    nn = g.size * g.size
    if len(g.moves) > nn:
        return f"{len(g.moves)} moves do not fit on a {g.size}x{g.size} board"
    for i, a in enumerate(g.moves):
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or not 0 <= a < nn:
            return f"move {i + 1} is {a!r}, not an action from 0 to {nn - 1}"
    if (isinstance(g.opening, bool) or not isinstance(g.opening, (int, np.integer))
            or not 0 <= g.opening <= len(g.moves)):
        return f"opening must be an integer from 0 to {len(g.moves)} (the moves), got {g.opening!r}"
    if not _is_winner(g.winner):
        return f"winner must be 0 (black), 1 (white), -1 (draw) or None, got {g.winner!r}"
    for side in ("black", "white"):
        if not isinstance(getattr(g, side), str):
            return f"{side} must be a name (a string), got {getattr(g, side)!r}"
    if not isinstance(g.source, str):
        return f"source must be a string, got {g.source!r}"
    for field in ("black", "white", "source"):
        if why := _unwritable(getattr(g, field)):
            return f"{field} {why}"
    return None


def _check_games(games: Any) -> None:
    """ValueError unless ``games`` is a collection of games (not one game)."""
    if hasattr(games, "moves"):
        raise ValueError(f"games must be a list of Game records, got one "
                         f"{type(games).__name__} (pass [game])")
    if not isinstance(games, Iterable) or isinstance(games, (str, bytes, Mapping)):
        raise ValueError(f"games must be a list of Game records, got {games!r}")


def _check_path(path: Any, name: str = "path") -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"{name} must be a file path (a string or os.PathLike), got "
                         f"{type(path).__name__}")
    return Path(path)


def _validate(games: Sequence[Game]) -> list[str | None]:
    """Why each game is malformed, or None; every game replayed on its engine."""
    problems: list[str | None] = [_check_shape(g) for g in games]
    groups: dict[tuple, list[int]] = {}
    for i, g in enumerate(games):
        if problems[i] is None:
            groups.setdefault((g.size, g.k, g.rule), []).append(i)
    for config, index in groups.items():
        for i, why in zip(index, _replay_problems(_engine(*config), [games[i] for i in index])):
            problems[i] = why
    return problems


def validate_games(games: Iterable[Any], env: Gomoku) -> list[Game]:
    """``games`` (`Game`s, or arena `GameRecord`-like objects with ``black``, ``white``,
    ``moves``, ``opening``, ``winner`` and maybe ``forfeit``) as `Game`s of ``env``'s
    rules, each replayed on the engine. Raises `RecordError` (line = the game's index)
    for the first malformed one."""
    _check_games(games)
    converted = [_as_game(g, env, i) for i, g in enumerate(games)]
    for i, why in enumerate(_validate(converted)):
        if why is not None:
            raise RecordError("<games>", i, f"game {i}: {why}")
    return converted


def _as_game(game: Any, env: Gomoku, index: int) -> Game:
    if not isinstance(env, Gomoku):
        raise ValueError(f"env must be a Gomoku, got {env!r}")
    forfeit = getattr(game, "forfeit", None)
    if forfeit:
        raise RecordError("<games>", index, f"game {index} was lost by an illegal move "
                          f"({forfeit}): its result is not on the board; leave it out")
    try:
        moves = tuple(game.moves)
        fields = dict(black=game.black, white=game.white, opening=game.opening, winner=game.winner)
    except AttributeError as err:
        raise RecordError("<games>", index, f"game {index} is not a game record: {err}") from None
    except TypeError:  # tuple() of a number, of None
        raise RecordError("<games>", index, f"game {index}: moves must be a sequence of "
                          f"actions, got {clip(repr(game.moves))}") from None
    if isinstance(game, Game):
        if (game.size, game.k, game.rule) != (env.size, env.k, env.rule):
            raise RecordError("<games>", index, f"game {index} is {game.size}x{game.size} "
                              f"k={game.k} {game.rule}, env is {env.id}")
    def plain(x):  # NumPy integers as Python ones (for JSON); anything else as it is
        return int(x) if isinstance(x, np.integer) else x

    moves = tuple(plain(a) for a in moves)
    fields = {key: plain(value) for key, value in fields.items()}
    return Game(env.size, env.k, env.rule, moves, fields["winner"], fields["black"],
                fields["white"], fields["opening"], getattr(game, "source", "") or "")


# ------------------------------------------------------------------ JSON Lines files


def _open_for_writing(path: Path, gz: bool):
    """A UTF-8 text file to write, gzip-compressed when ``gz``."""
    if gz:
        raw = open(path, "wb")
        # mtime=0 and no file name: the same games give the same bytes.
        zipped = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0)
        return _ClosingText(zipped, raw)
    return open(path, "w", encoding="utf-8", newline="\n")


def _gz(path: Path) -> bool:
    """Whether ``path`` names a gzip file: ``.gz``, in any case (``GAMES.JSONL.GZ``)."""
    return path.suffix.lower() == ".gz"


class _ClosingText(io.TextIOWrapper):
    """A text writer over a gzip stream that also closes the underlying file."""

    def __init__(self, zipped, raw):
        super().__init__(zipped, encoding="utf-8", newline="\n")
        self._raw = raw

    def close(self):
        try:
            super().close()
        finally:
            self._raw.close()


def _header(env: Gomoku, metadata: Mapping | None) -> dict:
    head = {"format": FORMAT, "version": VERSION, "size": env.size, "k": env.k, "rule": env.rule}
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise ValueError(f"metadata must be a mapping (a JSON object), got {metadata!r}")
        try:
            # JSON data only; NaN and infinities are not JSON (strict readers refuse them)
            head["metadata"] = json.loads(json.dumps(dict(metadata), allow_nan=False))
        except (TypeError, ValueError, RecursionError) as err:
            why = _json_error(err)
            if "Out of range float" in why:
                why += " (NaN and infinity are not JSON: use null or a string)"
            raise ValueError(f"metadata must hold JSON data only: {why}") from None
        if why := _unwritable(json.dumps(head["metadata"], ensure_ascii=False)):
            raise ValueError(f"metadata must hold text UTF-8 can write: {why[:120]}")
    return head


def _game_json(g: Game) -> dict:
    out = {"size": g.size, "k": g.k, "rule": g.rule,
           "moves": [list(divmod(a, g.size)) for a in g.moves],
           "winner": WINNER_NAMES[g.winner], "black": g.black, "white": g.white,
           "opening": g.opening}
    if g.source:
        out["source"] = g.source
    return out


def write_records(path, games: Iterable[Any], env: Gomoku, *, metadata: Mapping | None = None,
                  source: str | None = None) -> int:
    """Write ``games`` to ``path`` (``.jsonl``; ``.jsonl.gz`` compressed) in the records
    format; returns how many. Every game is first checked by `validate_games` (a
    `RecordError` names the first bad one and nothing is written). ``source`` fills
    the ``source`` of games that have none; ``metadata`` goes into the header. The file
    is written under a temporary name and renamed when complete (an existing file at
    ``path`` is replaced). Metadata that is not strict JSON (NaN, infinity) is refused."""
    path = _check_path(path)
    checked = validate_games(games, env)
    if source is not None:
        if not isinstance(source, str):
            raise ValueError(f"source must be a string, got {source!r}")
        if why := _unwritable(source):
            raise ValueError(f"source {why}")
        checked = [g if g.source else dataclasses.replace(g, source=source) for g in checked]
    head = _header(env, metadata)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot write {path}: there is no folder {path.parent}")
    # a name of its own: the processes of a multi-process run may write one file at once
    tmp = path.with_name(f"{path.name}.tmp-{uuid.uuid4().hex}")
    dumps = functools.partial(json.dumps, ensure_ascii=False, separators=(",", ":"))
    try:
        with _open_for_writing(tmp, _gz(path)) as f:
            f.write(dumps(head) + "\n")
            for g in checked:
                f.write(dumps(_game_json(g)) + "\n")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return len(checked)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_header(path: Path, line: int, head: Any, env: Gomoku | None) -> GameConfig:
    def fail(why: str) -> RecordError:
        return RecordError(str(path), line, f"not a {FORMAT} file: {why}")

    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise fail(f'the first line must be a header {{"format": "{FORMAT}", ...}}')
    if type(head.get("version")) is not int or head["version"] != VERSION:  # true == 1
        raise fail(f"version {json.dumps(head.get('version'))} (this reader reads version "
                   f"{VERSION})")
    if not isinstance(head.get("metadata", {}), dict):
        raise fail(f"its metadata must be a JSON object, got "
                   f"{json.dumps(head['metadata'])[:80]}")
    try:
        if not all(_is_int(head.get(key)) for key in ("size", "k")):
            raise ValueError(f"size and k must be integers, got {head.get('size')!r}, "
                             f"{head.get('k')!r}")
        config = GameConfig(head["size"], head["k"], head.get("rule"))
    except ValueError as err:
        raise fail(f"bad game settings in the header: {err}") from None
    if env is not None and env.config != config:
        raise RecordError(str(path), line, f"the records are {config.size}x{config.size} "
                          f"k={config.k} {config.rule}, but the game asked for is {env.id}")
    return config


def _parse_game(obj: Any, config: GameConfig) -> Game:
    """A `Game` from one parsed line; ValueError says what is wrong (replay not done)."""
    if not isinstance(obj, dict):
        raise ValueError(f"a game must be a JSON object, got {type(obj).__name__}")
    if obj.get("format") == FORMAT:  # e.g. `cat a.jsonl.gz b.jsonl.gz`: both files' games read
        raise ValueError("a second header line, not a game (records files joined together? "
                         "the games after it are read, checked against the first header)")
    missing = [key for key in _GAME_KEYS if key not in obj]
    if missing:
        repeat = (" (a game line repeats the header's size, k and rule)"
                  if {"size", "k", "rule"} & set(missing) else "")
        raise ValueError(f"missing key(s) {', '.join(missing)}{repeat}")
    for key in ("size", "k", "opening"):
        if not _is_int(obj[key]):
            raise ValueError(f"{key} must be an integer, got {obj[key]!r}")
    if (obj["size"], obj["k"], obj["rule"]) != (config.size, config.k, config.rule):
        raise ValueError(f"game is size={obj['size']!r} k={obj['k']!r} rule={obj['rule']!r}, "
                         f"the header says size={config.size} k={config.k} rule={config.rule!r}")
    for key in ("black", "white", "source"):
        if key in obj and not isinstance(obj[key], str):
            raise ValueError(f"{key} must be a string, got {obj[key]!r}")
        if why := _unwritable(obj.get(key, "")):  # a JSON escape of half a character
            raise ValueError(f"{key} {why}")  # ("\ud800") reads, but cannot be written
    winner = obj["winner"]
    if not (winner is None or (isinstance(winner, str) and winner in _WINNER_CODES)):
        raise ValueError(f'winner must be "black", "white", "draw" or null, got {winner!r}')
    moves = obj["moves"]
    if not isinstance(moves, list):
        raise ValueError(f"moves must be a list of [row, col] pairs, got {moves!r}")
    n = config.size
    actions = []
    for i, move in enumerate(moves):
        if not (isinstance(move, list) and len(move) == 2 and all(map(_is_int, move))):
            raise ValueError(f"move {i + 1} is {json.dumps(move)}, "
                             "not a [row, col] pair of integers")
        row, col = move
        if not (0 <= row < n and 0 <= col < n):
            raise ValueError(f"move {i + 1} {json.dumps(move)} is off the {n}x{n} board "
                             f"(row and col run from 0 to {n - 1})")
        actions.append(row * n + col)
    if not 0 <= obj["opening"] <= len(actions):
        raise ValueError(f"opening must be from 0 to {len(actions)} (the number of moves), "
                         f"got {obj['opening']}")
    return Game(n, config.k, config.rule, tuple(actions), _WINNER_CODES[winner], obj["black"],
                obj["white"], obj["opening"], obj.get("source", ""))


def _check_on_error(on_error: str) -> None:
    if on_error not in ("skip", "raise"):
        raise ValueError(f'on_error must be "skip" or "raise", got {on_error!r}')


# The longest line a records file may hold: a game of 361 moves is a few KiB; a line
# without end (a compressed file of one huge line) is skipped, not read into memory.
_MAX_LINE = 1 << 20


def _bounded_lines(f):
    """The lines of text file ``f``, or None for one longer than `_MAX_LINE`, whose rest
    is read and dropped in pieces."""
    while True:
        text = f.readline(_MAX_LINE + 1)
        if not text:
            return
        if len(text) <= _MAX_LINE or text.endswith(("\n", "\r")):
            yield text
            continue
        while text and not text.endswith(("\n", "\r")):  # skip to the line's end
            text = f.readline(_MAX_LINE)
        yield None


def _numbered_lines(path: Path):
    """``(line number, text)`` of a records file; a line that is not UTF-8 text comes as
    a `RecordError` in place of its text. A file that is not gzip-compressed where its
    name ends in ``.gz`` raises a `RecordError` naming it; a gzip stream cut or damaged
    after some lines ends with a `RecordError` in place of the first line lost."""
    number = 0
    try:
        raw = gzip.open(path, "rb") if _gz(path) else open(path, "rb")
    except OSError as err:  # missing, a folder, unreadable: named as read_psq names it
        raise RecordError(str(path), 0, f"cannot read: {err.strerror or err}") from None
    try:
        # undecodable bytes become lone surrogates, found line by line below; lines end at
        # \n, \r\n or \r as in any text file; a leading UTF-8 byte-order mark (as Windows
        # tools write) is dropped
        with io.TextIOWrapper(raw, encoding="utf-8-sig", errors="surrogateescape") as f:
            for number, text in enumerate(_bounded_lines(f), start=1):
                if text is None:
                    yield number, RecordError(
                        str(path), number, f"longer than {_MAX_LINE:,} characters; a records "
                        "line holds one game (the rest of the line is skipped unread)")
                    continue
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    yield number, RecordError(
                        str(path), number, "not UTF-8 text; records files are JSON Lines "
                        "(.jsonl, or .jsonl.gz compressed)")
                else:  # a mark that starts a later line: files with one joined together
                    yield number, text.removeprefix("\ufeff")
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        why = (f"not a complete gzip file, as its .gz name says ({type(err).__name__}: "
               f"{err})")
        if number == 0:  # nothing read: not a gzip file, or cut before its first line
            raise RecordError(str(path), 1, why) from None
        # cut or damaged further on (a copy or download that stopped): the lines before
        # are kept, this one stands for the rest
        yield number + 1, RecordError(str(path), number + 1,
                                      f"{why}; nothing from here on can be read")


def _json_error(err: Exception) -> str:
    """Why ``json.loads`` failed: its message, or (a `RecursionError`) that the JSON is
    nested too deeply for it."""
    if isinstance(err, RecursionError):
        return f"nested too deeply to read ({err})"
    return str(err)


def _header_json(path: Path, number: int, text):
    if isinstance(text, RecordError):
        raise text
    try:
        return loads(text)
    except (json.JSONDecodeError, RecursionError) as err:
        why = f"bad JSON in the header ({_json_error(err)})"
        if not isinstance(err, DuplicateKeyError):  # not JSON at all: say what is expected
            why += "; records files are JSON Lines (.jsonl, or .jsonl.gz compressed)"
        raise RecordError(str(path), number, why) from None


def read_header(path) -> dict:
    """The header object of a records file (raises `RecordError` if it has none)."""
    path = _check_path(path)
    for number, text in _numbered_lines(path):
        if isinstance(text, str) and not text.strip():
            continue
        head = _header_json(path, number, text)
        _check_header(path, number, head, None)
        return head
    raise RecordError(str(path), 0, f"not a {FORMAT} file: it is empty")


def read_records(path, env: Gomoku | None = None, on_error: str = "skip",
                 errors: list | None = None) -> list[Game]:
    """The games of a records file, each replayed on the engine.

    A malformed game is left out and reported as a `RecordError` naming the file, the
    line and the reason: appended to ``errors`` when a list is given, else given to
    `warnings.warn`. With ``on_error="raise"`` the first (by line) is raised instead.
    A missing or wrong header (or game settings other than ``env``'s, when ``env`` is
    given) always raises."""
    _check_on_error(on_error)
    if env is not None and not isinstance(env, Gomoku):
        raise ValueError(f"env must be a Gomoku or None, got {env!r}")
    if errors is not None and not isinstance(errors, list):
        raise ValueError(f"errors must be a list (the malformed records are appended to it) "
                         f"or None, got {errors!r}")
    path = _check_path(path)
    config, found, problems = None, [], []  # found: (line, Game)
    for number, text in _numbered_lines(path):
        if isinstance(text, str) and not text.strip():
            continue
        if config is None:
            config = _check_header(path, number, _header_json(path, number, text), env)
            continue
        if isinstance(text, RecordError):  # a line that is not text: skipped like bad JSON
            problems.append(text)
            continue
        try:
            obj = loads(text)
        except (json.JSONDecodeError, RecursionError) as err:
            problems.append(RecordError(str(path), number, f"bad JSON: {_json_error(err)}"))
            continue
        try:
            found.append((number, _parse_game(obj, config)))
        except ValueError as err:
            problems.append(RecordError(str(path), number, str(err)))
    if config is None:
        raise RecordError(str(path), 0, f"not a {FORMAT} file: it is empty")
    games = []
    for (number, game), why in zip(found, _validate([g for _, g in found])):
        if why is None:
            games.append(game)
        else:
            problems.append(RecordError(str(path), number, why))
    problems.sort(key=lambda e: e.line)
    if problems and on_error == "raise":
        raise problems[0]
    for problem in problems:
        if errors is not None:
            errors.append(problem)
        else:
            warnings.warn(f"skipped a malformed game record: {problem}", RecordWarning,
                          stacklevel=2)
    return games


# ------------------------------------------------------------------ Gomocup .psq


# (numbers of up to 9 digits: a longer one is no board size or cell, and int() of thousands
# of digits raises)
_PSQ_HEADER = re.compile(r"^\s*piskvorky\s+(\d{1,9})\s*x\s*(\d{1,9})\b",
                         re.IGNORECASE | re.ASCII)  # ASCII: digits of other scripts are not moves
_PSQ_MOVE = re.compile(r"^\s*([+-]?\d{1,9})\s*,\s*([+-]?\d{1,9})\s*(?:,\s*[+-]?\d+\s*)?$",
                       re.ASCII)
_INTEGER = re.compile(r"^\s*[+-]?\d+\s*$", re.ASCII)
# A line that starts like a move (two numbers and a comma) but is not `_PSQ_MOVE`, digits
# of other scripts included, whatever follows the second number (``5,5 0``, ``5,5;0``); or
# a move cut after its first number and comma (``7,``).
_PSQ_GARBLED = re.compile(r"^\s*[+-]?[\d.]+\s*,\s*(?:[+-]?[\d.]+|$)")


def _check_psq_trailer_line(source: str, number: int, line: str) -> None:
    """Raise a `RecordError` if ``line``, not a move line, looks like a garbled one."""
    if _PSQ_GARBLED.match(line):
        raise RecordError(source, number, f"{line.strip()[:40]!r} is a garbled move line "
                          "(x,y or x,y,time in whole numbers)")


def parse_psq(text: str, env: Gomoku | None = None, source: str = "<psq>") -> Game:
    """One game from the text of a Gomocup / Piskvork ``.psq`` file (format in the
    module docstring). ``env`` gives k and the rule (default 5, freestyle) and, when
    given, the board size the file must have. Raises `RecordError` naming ``source``
    and the line."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    if env is not None and not isinstance(env, Gomoku):
        raise ValueError(f"env must be a Gomoku or None, got {env!r}")
    # a byte-order mark, decoded; lines end at \n, \r\n or \r only, as a text file's (and
    # the line numbers of the errors): str.splitlines also breaks at \f, \x85, \u2028 ...
    lines = re.split(r"\r\n|\r|\n", text.removeprefix("\ufeff"))
    numbered = [(i + 1, line) for i, line in enumerate(lines) if line.strip()]
    if not numbered:
        raise RecordError(source, 0, "empty .psq file")
    first, head = numbered[0]
    m = _PSQ_HEADER.match(head)
    if m is None:
        raise RecordError(source, first, f"not a .psq file: the first line must start with "
                          f"'Piskvorky WxH', got {head.strip()[:40]!r}")
    width, height = int(m.group(1)), int(m.group(2))
    if width != height:
        raise RecordError(source, first, f"board {width}x{height} is not square")
    if not MIN_SIZE <= width <= MAX_SIZE:  # no env plays it (Gomocup's 20x20 among them)
        raise RecordError(source, first, f"board {width}x{height}: boards from {MIN_SIZE}x"
                          f"{MIN_SIZE} to {MAX_SIZE}x{MAX_SIZE} are played here")
    try:
        if env is None:
            env = _engine(width, 5, "freestyle")
    except ValueError as err:
        raise RecordError(source, first,
                          f"board {width}x{height}: {err} (pass env for k)") from None
    if env.size != width:
        raise RecordError(source, first, f"board {width}x{width}, but the game asked for is {env.id}")
    moves, lines_of = [], []
    trailer_from = len(numbered)
    for j, (number, line) in enumerate(numbered[1:], start=1):
        mv = _PSQ_MOVE.match(line)
        if mv is None:
            if any(_PSQ_MOVE.match(later) for _, later in numbered[j + 1:]):
                _check_psq_trailer_line(source, number, line)
                raise RecordError(source, number, f"{line.strip()[:40]!r} is not a move line "
                                  "(x,y,time), but moves follow")
            trailer_from = j
            break
        x, y = int(mv.group(1)), int(mv.group(2))
        if len(moves) == env.num_actions:
            raise RecordError(source, number, f"move {len(moves) + 1} comes after the "
                              f"{width}x{width} board is full")
        if not (1 <= x <= width and 1 <= y <= width):
            raise RecordError(source, number, f"move {len(moves) + 1} x={x}, y={y} is off the "
                              f"{width}x{width} board (x and y run from 1 to {width})")
        moves.append((y - 1) * width + (x - 1))
        lines_of.append(number)
    for number, line in numbered[trailer_from:]:
        _check_psq_trailer_line(source, number, line)
    names = [_psq_unname(line) for _, line in numbered[trailer_from:]
             if not _INTEGER.match(line)][:2]
    names += ["black", "white"][len(names):]
    game = Game(env.size, env.k, env.rule, tuple(moves), None, names[0], names[1], 0, source)
    padded = np.full((1, env.num_actions), -1, np.int32)
    padded[0, :len(moves)] = moves
    bad_at, bad_kind, end_at, winner, over = (np.asarray(x)[0].item()
                                              for x in _replay(env, jnp.asarray(padded)))
    if bad_at >= 0:
        raise RecordError(source, lines_of[bad_at],
                          _judge(env, game, bad_at, bad_kind, end_at, winner, over))
    return dataclasses.replace(game, winner=winner if over else None)


def read_psq(path, env: Gomoku | None = None) -> Game:
    """One game from a ``.psq`` file (see `parse_psq`); ``source`` is the path."""
    path = _check_path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")  # (parse_psq drops a BOM)
    except OSError as err:
        raise RecordError(str(path), 0, f"cannot read: {err}") from None
    return parse_psq(text, env, source=str(path))


def _psq_needs_brackets(name: str) -> bool:
    """Whether a reader would not take ``name`` for a name as it stands: it is empty, or
    reads as a number or a move (``2``, ``7,7``), or is such a name in brackets
    (``[2]``, ``[[2]]``), which reading would unwrap."""
    while len(name) >= 2 and name[0] == "[" and name[-1] == "]":
        name = name[1:-1]
    return not name or bool(_INTEGER.match(name) or _PSQ_MOVE.match(name)
                            or _PSQ_GARBLED.match(name))


def _psq_name(name: str) -> str:
    """A player's name as a ``.psq`` line: whitespace runs become one space, and a name
    that `_psq_needs_brackets` is written in brackets (``[2]``), which `_psq_unname`
    takes off again, so every name reads back as it was written."""
    name = " ".join(str(name).split())
    return f"[{name}]" if _psq_needs_brackets(name) else name


def _psq_unname(line: str) -> str:
    """A player's name from its ``.psq`` line: brackets around a name that needs them
    are taken off (``[2]`` is ``2``, ``[[2]]`` is ``[2]``); any other line, brackets and
    all, is the name (``[bot]``)."""
    line = line.strip()
    if line[:1] == "[" and line[-1:] == "]" and _psq_needs_brackets(line[1:-1]):
        return line[1:-1]
    return line


def format_psq(game: Game) -> str:
    """A `Game` as the text of a ``.psq`` file: the header, ``x,y,0`` per move
    (1-based, time 0), the black and white names, and ``-1``."""
    if not isinstance(game, Game):
        raise ValueError(f"game must be a Game, got {type(game).__name__}")
    n = game.size
    lines = [f"Piskvorky {n}x{n}, 0:0, 0"]
    for a in game.moves:
        row, col = divmod(int(a), n)
        lines.append(f"{col + 1},{row + 1},0")
    lines += [_psq_name(game.black), _psq_name(game.white), "-1"]
    return "\n".join(lines) + "\n"


def write_psq(path, game: Game) -> None:
    """Write one `Game` as a ``.psq`` file (after checking it on the engine)."""
    path = _check_path(path)
    if not isinstance(game, Game):
        raise ValueError(f"game must be a Game, got {type(game).__name__}")
    validate_games([game], _engine(game.size, game.k, game.rule))
    gio.write_atomic(path, format_psq(game))  # all of it, or the old file kept


# ------------------------------------------------------------------ training data


def split_by_winner(games: Iterable[Game]) -> dict[str, list[Game]]:
    """Seed 001's three splits: ``"black"`` wins, ``"white"`` wins and ``"draw"``; plus
    ``"unfinished"`` (winner None), which has no value target."""
    _check_games(games)
    splits: dict[str, list[Game]] = {"black": [], "white": [], "draw": [], "unfinished": []}
    for g in games:
        if not _is_winner(g.winner):
            raise ValueError(f"winner must be 0, 1, -1 or None, got {g.winner!r}")
        splits[WINNER_NAMES[g.winner] or "unfinished"].append(g)
    return splits


def balanced_sample(games: Iterable[Game], per_split: int, rng: np.random.Generator) -> list[Game]:
    """Seed 001's sampling: ``per_split`` games drawn without replacement from each of
    the black-win, white-win and draw splits (all of a split that has fewer), in a
    random order. Unfinished games are never drawn."""
    if isinstance(per_split, bool) or not isinstance(per_split, (int, np.integer)) or per_split < 1:
        raise ValueError(f"per_split must be a positive integer, got {per_split!r}")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {rng!r}")
    chosen: list[Game] = []
    splits = split_by_winner(games)
    for name in ("black", "white", "draw"):
        split = splits[name]
        picks = rng.choice(len(split), size=min(per_split, len(split)), replace=False)
        chosen += [split[i] for i in picks]
    return [chosen[i] for i in rng.permutation(len(chosen))]


def positions(games: Sequence[Any], env: Gomoku, skip_opening: bool = False) -> Positions:
    """Every position of ``games`` with its targets (see `Positions`): one row per
    move, the board before it; ``skip_opening`` leaves out the moves of each game's
    opening (they were not the players' choices). Games must be finished (winner 0, 1
    or -1; an unfinished game has no value target: drop it first, e.g. with
    `split_by_winner`). Each game is checked as it is laid out (flat actions, distinct
    and on ``env``'s board, an opening from 0 to the moves, no forfeit, and the winner's
    the last move: the engine's win test on the final board, or a full board for a
    draw); a game that fails raises `validate_games`' `RecordError` for it. Moves after
    a win are found only by the full replay of `validate_games` or `read_records`."""
    if not isinstance(env, Gomoku):
        raise ValueError(f"env must be a Gomoku, got {env!r}")
    _check_games(games)
    games = list(games)
    if not isinstance(skip_opening, (bool, np.bool_)):
        raise ValueError(f"skip_opening must be True or False, got {skip_opening!r}")
    n, nn = env.size, env.num_actions
    boards, player, last, action, value, index = [], [], [], [], [], []
    finals, ends = [], []  # per game: the board before its last move, and that move
    for gi, g in enumerate(games):
        try:
            winner, opening = g.winner, g.opening
            if winner is None or not _is_winner(winner):
                raise RecordError("<games>", gi, f"game {gi}: winner must be 0, 1 or -1 "
                                  f"(finished), got {winner!r}")
            moves = np.asarray(g.moves)
            length = len(moves) if moves.ndim == 1 else 0  # not a sequence: refused below
            good = (moves.ndim == 1 and (moves.dtype.kind in "iu" or not length)
                    and not getattr(g, "forfeit", None)
                    and not isinstance(opening, bool) and isinstance(opening, (int, np.integer))
                    and 0 <= opening <= length
                    and (not isinstance(g, Game) or (g.size, g.k, g.rule) == (env.size, env.k,
                                                                              env.rule)))
            if good and length:  # distinct: checked on the final boards below
                good = moves.min() >= 0 and moves.max() < nn
        except AttributeError:
            good = False
        if not good:
            _refuse(g, env, gi)
        moves = moves.astype(np.int64)
        t = np.arange(length)
        stone = (t % 2 + 1).astype(np.int8)  # [L]: 1 black, 2 white
        before = t[None, :] < t[:, None]  # [L, L]: move i is on the board before move t
        flat = np.zeros((length, nn), np.int8)
        flat[:, moves] = np.where(before, stone[None, :], 0)  # right if moves are distinct
        finals.append(flat[-1].copy() if length else np.zeros(nn, np.int8))
        ends.append(moves[-1] if length else -1)
        mover = (t % 2).astype(np.int32)
        z = np.where(winner < 0, 0.0, np.where(mover == winner, 1.0, -1.0))
        keep = t >= (int(opening) if skip_opening else 0)
        boards.append(flat.reshape(length, n, n)[keep])
        player.append(mover[keep])
        last.append(np.concatenate([[-1], moves[:-1]])[:length][keep])
        action.append(moves[keep])
        value.append(z[keep])
        index.append(np.full(int(keep.sum()), gi))
    for gi in np.flatnonzero(~_results_hold(env, games, finals, ends)):
        _refuse(games[gi], env, gi)
    if not boards:
        return Positions(np.zeros((0, n, n), np.int8), *(np.zeros((0,), np.int32),) * 3,
                         np.zeros((0,), np.float32), np.zeros((0,), np.int32))
    return Positions(
        np.concatenate(boards).astype(np.int8),
        np.concatenate(player).astype(np.int32),
        np.concatenate(last).astype(np.int32),
        np.concatenate(action).astype(np.int32),
        np.concatenate(value).astype(np.float32),
        np.concatenate(index).astype(np.int32),
    )


def _refuse(game: Any, env: Gomoku, index: int) -> None:
    """Raise `validate_games`' `RecordError` for ``game`` (the ``index``-th), which failed
    a check of `positions`."""
    why = _validate([_as_game(game, env, index)])[0]
    why = why or "its moves or its result do not check out"
    raise RecordError("<games>", index, f"game {index}: {why}")


@functools.partial(jax.jit, static_argnames=("env",))
def _wins_through(env: Gomoku, boards: jax.Array, actions: jax.Array) -> jax.Array:
    """[B]: whether the move ``actions`` [B] (-1: none), played on ``boards`` [B, N*N] by
    the side whose turn it is, wins."""
    stones = 1 + (jnp.sum(boards != 0, axis=1) % 2).astype(jnp.int8)
    after = jnp.where(jnp.arange(boards.shape[1]) == actions[:, None], stones[:, None], boards)
    won = jax.vmap(env.wins_through)(after, jnp.maximum(actions, 0), stones)
    return won & (actions >= 0)


def _results_hold(env: Gomoku, games: Sequence[Any], finals: list, ends: list) -> np.ndarray:
    """[G] bool: each game's moves are distinct (the board before the last move has a
    stone per earlier move, and not on the last move's cell) and its winner is the one
    its last move gives (the last mover when that move wins, a draw when it fills the
    board without winning)."""
    if not games:
        return np.zeros((0,), bool)
    boards, actions = np.stack(finals), np.asarray(ends, np.int32)  # [G, N*N], [G]
    length = np.asarray([len(g.moves) for g in games], np.int64)
    winner = np.asarray([g.winner for g in games], np.int64)
    distinct = ((np.count_nonzero(boards, axis=1) == np.maximum(length - 1, 0))
                & (boards[np.arange(len(games)), np.maximum(actions, 0)] == 0))
    won = np.zeros(len(games), bool)
    for start in range(0, len(games), _BATCH):  # one compiled shape
        chunk = slice(start, start + _BATCH)
        count = len(actions[chunk])
        padded = np.zeros((_BATCH, env.num_actions), np.int8)
        padded[:count] = boards[chunk]
        moves = np.full(_BATCH, -1, np.int32)
        moves[:count] = actions[chunk]
        won[chunk] = np.asarray(_wins_through(env, jnp.asarray(padded), jnp.asarray(moves)))[:count]
    draw = (length == env.num_actions) & ~won
    return distinct & np.where(winner < 0, draw, won & ((length - 1) % 2 == winner))
