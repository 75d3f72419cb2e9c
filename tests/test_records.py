"""Game records: the JSON Lines format, its validation by replay, .psq files, training
positions and the records generator."""

import dataclasses
import gzip
import json
import re

import numpy as np
import pytest

from experiments import generate_records
from gomoku_jax import cli, records
from gomoku_jax.agents import Agent, PythonAgent
from gomoku_jax.arena import GameRecord
from gomoku_jax.game import Gomoku
from gomoku_jax.records import Game, RecordError

N = 5
ENV = Gomoku(N, 3)


def a(row, col, n=N):
    return row * n + col


# Hand-made games on 5x5, 3 in a row.
BLACK_WIN = (a(0, 0), a(1, 0), a(0, 1), a(1, 1), a(0, 2))  # black's top row, move 5
WHITE_WIN = (a(4, 4), a(0, 0), a(4, 0), a(0, 1), a(2, 2), a(0, 2))  # white's top row, move 6
UNFINISHED = (a(2, 2), a(0, 0))
# A drawn tic-tac-toe game (3x3, k=3): nobody has three when the board fills.
DRAW_3X3 = tuple(a(r, c, 3) for r, c in
                 [(1, 1), (0, 0), (0, 1), (2, 1), (1, 0), (1, 2), (0, 2), (2, 0), (2, 2)])


def game(moves, winner, opening=0, black="b", white="w", env=ENV):
    return Game(env.size, env.k, env.rule, tuple(moves), winner, black, white, opening)


def rc(moves, n=N):
    return [list(divmod(m, n)) for m in moves]


def line(moves, winner, **extra):
    obj = {"size": N, "k": 3, "rule": "freestyle", "moves": moves, "winner": winner,
           "black": "b", "white": "w", "opening": 0}
    obj.update(extra)
    return json.dumps(obj)


HEADER = json.dumps({"format": "gomoku-jax-records", "version": 1, "size": N, "k": 3,
                     "rule": "freestyle"})


# ------------------------------------------------------------------ JSON Lines files


def test_files_joined_together_read_every_game_and_name_the_second_header(tmp_path):
    """``cat a.jsonl.gz b.jsonl.gz > both.jsonl.gz`` is one gzip stream of two files."""
    first, second = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    records.write_records(first, [game(BLACK_WIN, 0)], ENV)
    records.write_records(second, [game(WHITE_WIN, 1), game(UNFINISHED, None)], ENV)
    both = tmp_path / "both.jsonl.gz"
    both.write_bytes(first.read_bytes() + second.read_bytes())
    back = records.read_records(both, ENV, errors=(errors := []))
    assert [g.moves for g in back] == [BLACK_WIN, WHITE_WIN, UNFINISHED]
    assert [(e.line, e.reason) for e in errors] == [
        (3, "a second header line, not a game (records files joined together? the games "
            "after it are read, checked against the first header)")]


@pytest.mark.parametrize("name", ["games.jsonl", "games.jsonl.gz",
                                  "GAMES.JSONL.GZ"])  # compressed whatever the case
def test_write_read_round_trip(tmp_path, name):
    games = [game(BLACK_WIN, 0, opening=1, black="alpha"), game(WHITE_WIN, 1, white="beta"),
             game(UNFINISHED, None)]
    path = tmp_path / name
    assert records.write_records(path, games, ENV, metadata={"seed": 3}, source="hand") == 3
    back = records.read_records(path, ENV, errors=(errors := []))
    assert errors == []
    assert back == [dataclasses.replace(g, source="hand") for g in games]
    assert records.read_header(path)["metadata"] == {"seed": 3}
    raw = path.read_bytes()
    if name.lower().endswith(".gz"):
        assert raw[:2] == b"\x1f\x8b"
        raw = gzip.decompress(raw)
    lines = raw.decode().splitlines()
    assert json.loads(lines[1])["moves"] == [[0, 0], [1, 0], [0, 1], [1, 1], [0, 2]]
    assert [json.loads(x)["winner"] for x in lines[1:]] == ["black", "white", None]
    # The same games give the same bytes (gzip without a time stamp).
    again = tmp_path / ("again-" + name)
    records.write_records(again, games, ENV, metadata={"seed": 3}, source="hand")
    assert again.read_bytes() == path.read_bytes()


@pytest.mark.parametrize("name", ["games.jsonl", "games.jsonl.gz"])
def test_a_records_file_with_a_byte_order_mark_reads_as_one_without(tmp_path, name):
    # as Windows tools save UTF-8 text: the bytes EF BB BF first
    games = [game(BLACK_WIN, 0), game(WHITE_WIN, 1)]
    plain, marked = tmp_path / name, tmp_path / ("bom-" + name)
    records.write_records(plain, games, ENV)
    text = plain.read_bytes()
    if name.endswith(".gz"):
        marked.write_bytes(gzip.compress(b"\xef\xbb\xbf" + gzip.decompress(text)))
    else:
        marked.write_bytes(b"\xef\xbb\xbf" + text)
    assert records.read_header(marked) == records.read_header(plain)
    back = records.read_records(marked, ENV, on_error="raise")
    assert [(g.moves, g.winner) for g in back] == [(g.moves, g.winner) for g in games]
    # two such files joined together: the second's mark starts a line, its header's
    joined = tmp_path / ("joined-" + name)
    joined.write_bytes(marked.read_bytes() * 2)
    back = records.read_records(joined, ENV, errors=(errors := []))
    assert [g.moves for g in back] == [g.moves for g in games] * 2
    assert [e.line for e in errors] == [4] and "a second header line" in errors[0].reason


def test_two_writers_of_one_file_at_once_both_finish_and_leave_it_whole(tmp_path,
                                                                       monkeypatch):
    # as the processes of a multi-process run that generate the same records file: each
    # writes a temporary file of its own (they shared one: the second to finish found it
    # renamed away, or the first renamed a file the other had just cut short)
    path = tmp_path / "games.jsonl.gz"
    games = [game(BLACK_WIN, 0), game(WHITE_WIN, 1)]
    game_json, inside = records._game_json, []

    def other_writer_meanwhile(g):
        if not inside:  # the other writer starts and finishes while this one writes
            inside.append(True)
            records.write_records(path, games, ENV)
        return game_json(g)

    monkeypatch.setattr(records, "_game_json", other_writer_meanwhile)
    assert records.write_records(path, games, ENV) == 2
    assert records.read_records(path, ENV) == games
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left


def test_arena_game_records_are_written_and_draws_kept(tmp_path):
    env3 = Gomoku(3, 3)
    played = [GameRecord("x", "o", DRAW_3X3, 2, -1), GameRecord("o", "x", (0, 3, 1, 4, 2), 0, 0)]
    path = tmp_path / "arena.jsonl"
    records.write_records(path, played, env3)
    back = records.read_records(path)
    assert [(g.black, g.white, g.moves, g.opening, g.winner) for g in back] == [
        (r.black, r.white, r.moves, r.opening, r.winner) for r in played]


def test_writer_refuses_forfeits_and_contradictions(tmp_path):
    path = tmp_path / "out.jsonl"
    with pytest.raises(RecordError, match="game 0 was lost by an illegal move"):
        records.write_records(path, [GameRecord("x", "o", UNFINISHED, 0, 1, "x played (0, 0)")], ENV)
    with pytest.raises(RecordError, match=r'game 1: winner is "white" but on the board black wins '
                                          r"with move 5 \(0, 2\)"):
        records.write_records(path, [game(WHITE_WIN, 1), game(BLACK_WIN, 1)], ENV)
    with pytest.raises(RecordError, match="game 0 is 3x3 k=3 freestyle, env is gomoku-5x5"):
        records.write_records(path, [game(DRAW_3X3, -1, env=Gomoku(3, 3))], ENV)
    assert not path.exists() and not list(tmp_path.iterdir())


def test_write_and_read_arguments_are_checked(tmp_path):
    g, path = game(BLACK_WIN, 0), tmp_path / "out.jsonl"
    with pytest.raises(ValueError, match="games must be a list of Game records, got one Game"):
        records.write_records(path, g, ENV)
    with pytest.raises(ValueError, match="path must be a file path .*, got list"):
        records.write_records([g], path, ENV)
    with pytest.raises(ValueError, match="path must be a file path .*, got Game"):
        records.write_psq(g, tmp_path / "g.psq")
    with pytest.raises(ValueError, match="game must be a Game, got list"):
        records.write_psq(tmp_path / "g.psq", [g])
    assert not list(tmp_path.iterdir())
    records.write_records(path, [g], ENV)
    with pytest.raises(ValueError, match="errors must be a list .* or None, got True"):
        records.read_records(path, errors=True)
    assert records.read_records(path, errors=(found := [])) == [g] and found == []


def test_a_game_that_would_not_read_back_is_not_written(tmp_path):
    path = tmp_path / "out.jsonl"
    with pytest.raises(RecordError, match="game 0: source must be a string, got 5"):
        records.write_records(path, [dataclasses.replace(game(BLACK_WIN, 0), source=5)], ENV)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_metadata_that_is_not_strict_json_is_refused(tmp_path, bad):
    with pytest.raises(ValueError, match="metadata must hold JSON data only: Out of range "
                                         "float.*NaN and infinity are not JSON"):
        records.write_records(tmp_path / "out.jsonl", [game(BLACK_WIN, 0)], ENV,
                              metadata={"lr": bad})
    assert not list(tmp_path.iterdir())


def test_writing_into_a_missing_folder_names_the_folder(tmp_path):
    missing = tmp_path / "no" / "games.jsonl.gz"
    with pytest.raises(FileNotFoundError, match=f"cannot write {re.escape(str(missing))}: there "
                                                f"is no folder {re.escape(str(missing.parent))}$"):
        records.write_records(missing, [game(BLACK_WIN, 0)], ENV)


# (line in the file, the record's text, a phrase of the reason)
BAD_LINES = [
    (3, '{"size": 5,', "bad JSON"),
    (4, "[1, 2]", "must be a JSON object, got list"),
    (5, json.dumps({"size": 5, "k": 3, "rule": "freestyle", "moves": [], "black": "b",
                    "white": "w", "opening": 0}), "missing key(s) winner"),
    (6, line([[0, 0], [5, 0]], None), "move 2 [5, 0] is off the 5x5 board"),
    (7, line([[0, 0], [1, 1], [0, 0]], None), "move 3 (0, 0) is on an occupied cell"),
    (8, line(rc(BLACK_WIN) + [[4, 4]], "black"),
     "move 6 (4, 4) comes after the end of the game (black won at move 5 (0, 2))"),
    (9, line(rc(BLACK_WIN), "white"), 'winner is "white" but on the board black wins with move 5'),
    (10, line([[2, 2]], "draw"), '"draw" but the board is not full (1 of 25 cells)'),
    (11, line(rc(UNFINISHED), "black"), '"black" but nobody has 3 in a row'),
    (12, line([], None, size=6), "the header says size=5"),
    (13, line([[0, 0], [1, 1]], None, opening=3), "opening must be from 0 to 2"),
    (14, line([[1]], None), "move 1 is [1], not a [row, col] pair"),
    (15, line([[True, 0]], None), "move 1 is [true, 0], not a [row, col] pair"),
    (16, line([], "nobody"), 'winner must be "black", "white", "draw" or null'),
]


def _bad_file(tmp_path):
    text = [HEADER, line(rc(BLACK_WIN), "black")] + [t for _, t, _ in BAD_LINES]
    text += [line(rc(WHITE_WIN), "white"), "", line(rc(UNFINISHED), None)]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(text) + "\n")
    return path


def test_each_malformed_record_is_reported_with_file_and_line_and_skipped(tmp_path):
    path = _bad_file(tmp_path)
    errors = []
    games = records.read_records(path, errors=errors)
    # Lines 2, 17 and 19 are good (18 is blank).
    assert [(g.moves, g.winner) for g in games] == [(BLACK_WIN, 0), (WHITE_WIN, 1), (UNFINISHED, None)]
    assert [e.line for e in errors] == [n for n, _, _ in BAD_LINES]
    for err, (number, _, phrase) in zip(errors, BAD_LINES):
        assert isinstance(err, RecordError) and isinstance(err, ValueError)
        assert err.path == str(path) and phrase in err.reason, (number, err.reason)
        assert str(err).startswith(f"{path}:{number}: ")


def test_malformed_records_warn_without_an_errors_list_and_raise_on_request(tmp_path):
    path = _bad_file(tmp_path)
    with pytest.warns(UserWarning) as caught:
        games = records.read_records(path)
    assert len(games) == 3 and len(caught) == len(BAD_LINES)
    assert f"{path}:3: bad JSON" in str(caught[0].message)
    with pytest.raises(RecordError, match=f"{path}:3: bad JSON") as info:
        records.read_records(path, on_error="raise")
    assert info.value.line == 3
    # Only the replay finds this one: still raised with its line.
    path.write_text("\n".join([HEADER, line(rc(BLACK_WIN), "black"), line(rc(BLACK_WIN), "draw")]))
    with pytest.raises(RecordError, match=f"{path}:3: winner is \"draw\" but on the board black"):
        records.read_records(path, on_error="raise")
    with pytest.raises(ValueError, match="on_error must be"):
        records.read_records(path, on_error="ignore")


def test_the_readme_describes_the_game_lines_the_writer_writes(tmp_path):
    # The README once listed only moves, winner, black, white and opening for a game
    # line, so a line written from it was skipped: "missing key(s) size, k, rule".
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    section = readme.split("## Game records", 1)[1].split("\n## ", 1)[0]
    template = re.search(r"one game per line, `(\{.*?\})`", section, re.S).group(1)
    described = re.findall(r'"(\w+)":', template)
    path = tmp_path / "games.jsonl"
    records.write_records(path, [game(BLACK_WIN, 0)], ENV, source="hand")
    written = json.loads(path.read_text().splitlines()[1])
    assert described == [key for key in written if key != "source"]
    assert set(described) == set(records._GAME_KEYS)
    assert '"source"' in section

    # A line without them is still refused, saying where they come from.
    short = {key: value for key, value in written.items() if key not in ("size", "k", "rule")}
    path.write_text(HEADER + "\n" + json.dumps(short) + "\n")
    with pytest.raises(RecordError, match=r"games.jsonl:2: missing key\(s\) size, k, rule "
                       r"\(a game line repeats the header's size, k and rule\)"):
        records.read_records(path, on_error="raise")


def test_a_file_without_a_proper_header_raises(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text(line(rc(BLACK_WIN), "black") + "\n")
    with pytest.raises(RecordError, match=r"x.jsonl:1: not a gomoku-jax-records file"):
        records.read_records(path)
    path.write_text(HEADER.replace('"version": 1', '"version": 2') + "\n")
    with pytest.raises(RecordError, match="version 2"):
        records.read_records(path)
    path.write_text(HEADER.replace('"version": 1', '"version": true') + "\n")
    with pytest.raises(RecordError, match="version true"):  # true == 1 in Python
        records.read_records(path)
    path.write_text("")
    with pytest.raises(RecordError, match="it is empty"):
        records.read_records(path)
    path.write_text(HEADER + "\n")
    assert records.read_records(path) == []
    with pytest.raises(RecordError, match="records are 5x5 k=3 freestyle, but the game asked for is gomoku-9x9"):
        records.read_records(path, Gomoku(9, 5))


def test_a_file_that_is_not_records_text_is_named(tmp_path):
    binary = tmp_path / "x.jsonl"
    good = line(rc(BLACK_WIN), "black").encode()
    binary.write_bytes(HEADER.encode() + b"\n\xff\xfe\x00junk\n" + good)
    with pytest.raises(RecordError, match=r"x.jsonl:2: not UTF-8 text"):
        records.read_records(binary, on_error="raise")
    errors = []
    assert len(records.read_records(binary, errors=errors)) == 1  # the good game is kept
    assert [(e.line, e.reason[:14]) for e in errors] == [(2, "not UTF-8 text")]
    binary.write_bytes(b"\xff\xfe\n" + HEADER.encode())
    with pytest.raises(RecordError, match=r"x.jsonl:1: not UTF-8 text"):
        records.read_header(binary)
    old_mac = tmp_path / "cr.jsonl"  # lines that end in a lone \r are lines too
    old_mac.write_bytes(HEADER.encode() + b"\r" + good + b"\r")
    assert len(records.read_records(old_mac, on_error="raise")) == 1
    not_gzip = tmp_path / "y.jsonl.gz"
    not_gzip.write_text(HEADER + "\n")
    for read in (records.read_records, records.read_header):
        with pytest.raises(RecordError, match=r"y.jsonl.gz:1: not a complete gzip file"):
            read(not_gzip)
    cut = tmp_path / "z.jsonl.gz"  # a download that stopped: the games before are kept
    games = [line(rc(BLACK_WIN), "black", black=f"b{i}") for i in range(6)]
    text = HEADER + "\n" + "\n".join(games) + "\n"
    cut.write_bytes(gzip.compress(text.encode())[:-12])  # the 8-byte trailer and data
    with pytest.raises(RecordError, match=r"z.jsonl.gz:\d+: not a complete gzip file"):
        records.read_records(cut, on_error="raise")
    errors = []
    kept = records.read_records(cut, errors=errors)
    assert [g.black for g in kept] == [f"b{i}" for i in range(5)]  # the last line was cut
    assert [e.line for e in errors] == [len(kept) + 2], errors  # after the header and games
    assert "nothing from here on can be read" in errors[0].reason
    psq = tmp_path / "game.psq"
    psq.write_text("Piskvorky 5x5, 11:11, 0\n3,3,0\n")
    with pytest.raises(RecordError, match=r"bad JSON in the header .* JSON Lines"):
        records.read_header(psq)


# ------------------------------------------------------------------ .psq


PSQ = """Piskvorky 15x15, 11:11, 0
8,8,0
9,8,120
8,9,0
9,9,15
8,10,0
9,10
8,11,3
9,11,0
8,12,1
RAPFI25.zip
JAX25.zip
-1
0,Freestyle15_1
"""


def test_hand_written_psq_is_one_based_column_then_row():
    g = records.parse_psq(PSQ, source="t.psq")
    assert (g.size, g.k, g.rule) == (15, 5, "freestyle")
    assert g.moves[:3] == (7 * 15 + 7, 7 * 15 + 8, 8 * 15 + 7)  # (y-1)*15 + (x-1)
    assert g.length == 9 and g.winner == 0  # black's five down column x=8
    assert (g.black, g.white, g.opening, g.source) == ("RAPFI25.zip", "JAX25.zip", 0, "t.psq")


@pytest.mark.parametrize("text, number, phrase", [
    (PSQ.replace("9,9,15", "16,9,15"), 5, "move 4 x=16, y=9 is off the 15x15 board"),
    (PSQ.replace("9,9,15", "8,8,15"), 5, "move 4 (7, 7) is on an occupied cell"),
    (PSQ.replace("8,12,1\n", "8,12,1\n1,1,0\n"), 11, "move 10 (0, 0) comes after the end"),
    (PSQ.replace("Piskvorky 15x15", "Gomoku 15x15"), 1, "first line must start with 'Piskvorky"),
    (PSQ.replace("15x15", "15x20"), 1, "not square"),
    (PSQ.replace("15x15", "20x20"), 1, "boards from 3x3 to 19x19 are played here"),
    ("", 0, "empty .psq file"),
])
def test_bad_psq_names_the_line(text, number, phrase):
    with pytest.raises(RecordError) as info:
        records.parse_psq(text, source="bad.psq")
    assert (info.value.path, info.value.line) == ("bad.psq", number)
    assert phrase in info.value.reason
    with pytest.raises(RecordError, match="board 15x15, but the game asked for is gomoku-9x9"):
        records.parse_psq(PSQ, Gomoku(9, 5))


@pytest.mark.parametrize("moves, winner", [(BLACK_WIN, 0), (WHITE_WIN, 1), (UNFINISHED, None)])
def test_psq_round_trip(tmp_path, moves, winner):
    g = game(moves, winner, black="Embryo 21", white="pbrain-x")
    path = tmp_path / "g.psq"
    records.write_psq(path, g)
    text = path.read_text()
    assert text.startswith("Piskvorky 5x5, 0:0, 0\n") and f"{moves[0] % N + 1},{moves[0] // N + 1},0" in text
    back = records.read_psq(path, ENV)
    assert back == Game(N, 3, "freestyle", moves, winner, "Embryo 21", "pbrain-x", 0, str(path))


def test_a_psq_file_with_a_byte_order_mark_reads_as_one_without(tmp_path):
    plain, marked = tmp_path / "g.psq", tmp_path / "bom.psq"
    plain.write_text(PSQ, encoding="utf-8")
    marked.write_text(PSQ, encoding="utf-8-sig")  # as Windows tools save it
    assert marked.read_bytes()[:3] == b"\xef\xbb\xbf"
    back = records.read_psq(marked)
    assert back == dataclasses.replace(records.read_psq(plain), source=str(marked))
    # the text of such a file read some other way (e.g. as bytes decoded as UTF-8)
    assert records.parse_psq("\ufeff" + PSQ) == records.parse_psq(PSQ)


# ------------------------------------------------------------------ training data


def test_positions_by_hand_for_both_winners_and_the_opening():
    p = records.positions([game(BLACK_WIN, 0, opening=1), game(WHITE_WIN, 1)], ENV)
    assert p.boards.shape == (11, N, N) and p.boards.dtype == np.int8
    assert p.value.dtype == np.float32 and p.action.dtype == np.int32
    np.testing.assert_array_equal(p.game, [0] * 5 + [1] * 6)
    np.testing.assert_array_equal(p.player, [0, 1, 0, 1, 0] + [0, 1, 0, 1, 0, 1])
    np.testing.assert_array_equal(p.value, [1, -1, 1, -1, 1] + [-1, 1, -1, 1, -1, 1])
    np.testing.assert_array_equal(p.action, BLACK_WIN + WHITE_WIN)
    np.testing.assert_array_equal(p.last_action, [-1, 0, 5, 1, 6, -1, 24, 0, 20, 1, 12])
    assert not p.boards[0].any() and not p.boards[5].any()
    expected = np.zeros((N, N), np.int8)
    expected[0, 0], expected[1, 0], expected[0, 1] = 1, 2, 1  # before black's 2nd... 4th move
    np.testing.assert_array_equal(p.boards[3], expected)
    skipped = records.positions([game(BLACK_WIN, 0, opening=1)], ENV, skip_opening=True)
    np.testing.assert_array_equal(skipped.action, BLACK_WIN[1:])
    np.testing.assert_array_equal(skipped.value, [-1, 1, -1, 1])
    np.testing.assert_array_equal(skipped.player, [1, 0, 1, 0])
    np.testing.assert_array_equal(skipped.boards, p.boards[1:5])


def test_positions_boards_match_the_engine_and_a_draw_is_worth_zero():
    env3 = Gomoku(3, 3)
    p = records.positions([game(DRAW_3X3, -1, env=env3)], env3)
    np.testing.assert_array_equal(p.value, np.zeros(9))
    state = env3.init()
    for t, action in enumerate(DRAW_3X3):
        np.testing.assert_array_equal(p.boards[t], np.asarray(state.board))
        assert p.player[t] == int(state.current_player) and p.last_action[t] == int(state.last_action)
        state = env3.play(state, *divmod(action, 3))
    assert bool(state.terminated) and int(state.winner) == -1


def test_positions_refuse_unfinished_and_broken_games():
    with pytest.raises(ValueError, match="game 1: winner must be 0, 1 or -1"):
        records.positions([game(BLACK_WIN, 0), game(UNFINISHED, None)], ENV)
    with pytest.raises(RecordError, match="game 0: move 2 \\(0, 0\\) is on an occupied cell"):
        records.positions([game((0, 0), 1)], ENV)
    empty = records.positions([], ENV)
    assert empty.boards.shape == (0, N, N) and empty.value.shape == (0,)


SEVEN = Gomoku(7, 4)
# Black's four on the top row of 7x7 (k=4), white below; as (row, col) pairs by mistake.
PAIRS = ((0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (0, 3))


@pytest.mark.parametrize("bad, phrase", [
    (Game(7, 4, "freestyle", ((0, 5), (1, 6)), 1), r"game 0: move 1 is \(0, 5\), not an action"),
    (Game(7, 4, "freestyle", PAIRS, 0), r"game 0: move 1 is \(0, 0\), not an action"),
    (Game(7, 4, "freestyle", (0.0, 7.0, 1.0, 8.0, 2.0, 9.0, 3.0), 0),
     "move 1 is 0.0, not an action"),
    (GameRecord("a", "b", (0, 7, 1), 0, 1, forfeit="a played an illegal action"),
     "game 0 was lost by an illegal move"),
    (GameRecord("a", "b", (0, 7, 1, 8, 2, 9, 3), 0, 1),  # black won on the board
     r'game 0: winner is "white" but on the board black wins with move 7 \(0, 3\)'),
    (GameRecord("a", "b", (0, 7, 1, 8), 0, -1), 'winner is "draw" but the board is not full'),
    (GameRecord("a", "b", (40, 41, 30, 31, 20, 21, 10), 0, 0),  # 9x9 actions, on 7x7
     r'winner is "black" but nobody has 4 in a row \(freestyle\) after the 7 moves'),
    (GameRecord("a", "b", (0, 7, 1, 8, 2, 9, 3), -3, 0), "opening must be an integer from 0 to 7"),
    (GameRecord("a", "b", (0, 7, 1, 8, 2, 9, 3), 10, 0), "opening must be an integer from 0 to 7"),
    ({"moves": (0, 7)}, "game 0 is not a game record"),
])
def test_positions_refuse_what_validate_games_refuses(bad, phrase):
    good = GameRecord("a", "b", (0, 7, 1, 8, 2, 9, 3), 0, 0)
    assert records.positions([good], SEVEN).value.tolist() == [1, -1, 1, -1, 1, -1, 1]
    for skip in (False, True):
        with pytest.raises(RecordError, match=phrase.replace("game 0", "game 1")):
            records.positions([good, bad], SEVEN, skip_opening=skip)
    with pytest.raises(RecordError, match=phrase):
        records.validate_games([bad], SEVEN)


def test_positions_check_the_result_of_a_full_board():
    env3 = Gomoku(3, 3)
    with pytest.raises(RecordError, match='winner is "black" but on the board it fills up with no'):
        records.positions([game(DRAW_3X3, 0, env=env3)], env3)
    # black's last stone fills the board and makes three: a win, not a draw
    won_last = tuple(a(r, c, 3) for r, c in
                     [(0, 0), (0, 1), (1, 1), (1, 0), (0, 2), (1, 2), (2, 1), (2, 0), (2, 2)])
    assert records.positions([game(won_last, 0, env=env3)], env3).value[-1] == 1
    with pytest.raises(RecordError, match='"draw" but on the board black wins with move 9'):
        records.positions([game(won_last, -1, env=env3)], env3)


def test_one_game_where_a_list_is_expected_is_named():
    g = game(BLACK_WIN, 0)
    for call in (lambda: records.positions(g, ENV), lambda: records.validate_games(g, ENV),
                 lambda: records.split_by_winner(g),
                 lambda: records.balanced_sample(g, 1, np.random.default_rng(0))):
        with pytest.raises(ValueError, match="games must be a list of Game records, got one Game"):
            call()
    with pytest.raises(ValueError, match="skip_opening must be True or False, got 'no'"):
        records.positions([g], ENV, skip_opening="no")


def test_split_by_winner_and_balanced_sample():
    games = [game(BLACK_WIN, 0), game(WHITE_WIN, 1), game(BLACK_WIN, 0, black="c"),
             game(UNFINISHED, None)]
    splits = records.split_by_winner(games)
    assert {k: len(v) for k, v in splits.items()} == {"black": 2, "white": 1, "draw": 0, "unfinished": 1}
    picked = records.balanced_sample(games, 1, np.random.default_rng(0))
    assert sorted(g.winner for g in picked) == [0, 1]
    assert records.balanced_sample(games, 1, np.random.default_rng(0)) == picked
    assert len(records.balanced_sample(games, 5, np.random.default_rng(1))) == 3
    with pytest.raises(ValueError, match="per_split must be a positive integer"):
        records.balanced_sample(games, 0, np.random.default_rng(0))


# ------------------------------------------------------------------ the generator

ARGS = ["--size", "5", "--k", "4", "--games", "4", "--black", "random", "--white", "heuristic",
        "--opening-stones", "2", "--no-progress"]


def test_generator_is_deterministic_and_the_worker_count_does_not_matter(tmp_path, capsys):
    one, same, other, two = (tmp_path / f"{n}.jsonl" for n in ("one", "same", "other", "two"))
    assert generate_records.main(ARGS + ["--workers", "1", "--seed", "3", "--out", str(one)]) == 0
    assert generate_records.main(ARGS + ["--workers", "1", "--seed", "3", "--out", str(same)]) == 0
    assert generate_records.main(ARGS + ["--workers", "1", "--seed", "4", "--out", str(other)]) == 0
    assert one.read_bytes() == same.read_bytes() != other.read_bytes()
    # Two spawned worker processes, through the command line: the same file.
    assert cli.main(["records", "generate"] + ARGS + ["--workers", "2", "--seed", "3",
                                                      "--out", str(two)]) == 0
    assert two.read_bytes() == one.read_bytes()
    assert "wrote 4 games" in capsys.readouterr().out
    games = records.read_records(one, Gomoku(5, 4), on_error="raise")
    assert len(games) == 4
    assert all((g.black, g.white, g.opening) == ("random", "heuristic", 2) for g in games)
    assert [g.source for g in games] == [f"experiments.generate_records seed=3 game={i}"
                                         for i in range(4)]
    meta = records.read_header(one)["metadata"]
    assert (meta["seed"], meta["opening_stones"], meta["forfeits_left_out"]) == (3, 2, 0)
    assert (meta["black"], meta["white"]) == ("random", "heuristic")
    # One pool of workers kept over several runs (other seeds first): the same files.
    again, other_again = tmp_path / "again.jsonl", tmp_path / "other_again.jsonl"
    with generate_records.WorkerPool(5, 4, "freestyle", "random", "heuristic", 2) as pool:
        for seed, out in ((4, other_again), (3, again)):
            assert generate_records.main(ARGS + ["--seed", str(seed), "--out", str(out)],
                                         pool=pool) == 0
        with pytest.raises(ValueError, match="the worker pool plays"):
            generate_records.generate(5, 4, "freestyle", 2, "random", "random", pool=pool)
    assert again.read_bytes() == one.read_bytes()
    assert other_again.read_bytes() == other.read_bytes()
    with pytest.raises(ValueError, match="at least 2 workers"):
        generate_records.WorkerPool(5, 4, "freestyle", "random", "heuristic", 1)


def test_generated_files_name_the_players_in_the_header_as_in_the_games(tmp_path):
    out = tmp_path / "named.jsonl"
    argv = ["--size", "5", "--k", "4", "--games", "1", "--black", "alphabeta", "--white",
            "random", "--no-progress", "--out", str(out)]
    assert generate_records.main(argv) == 0
    (game,) = records.read_records(out, on_error="raise")
    meta = records.read_header(out)["metadata"]
    assert (meta["black"], meta["white"]) == (game.black, game.white) == ("alphabeta-2", "random")


def test_generator_settings_are_checked(tmp_path, capsys):
    out = tmp_path / "x.jsonl"
    assert cli.main(["records", "generate"] + ARGS + ["--opening-stones", "7", "--out", str(out)]) == 2
    assert "--opening-stones: opening_stones must be at most 2*(k-1) = 6" in (
        capsys.readouterr().err)
    assert cli.main(["records", "generate"] + ARGS + ["--size", "3", "--out", str(out)]) == 2
    assert "error: GameConfig.k must be an integer from 3 to 3 (no more than the board's size" in (
        capsys.readouterr().err)  # (not blamed on --opening-stones)
    assert cli.main(["records", "generate"] + ARGS + ["--black", "nobody", "--out", str(out)]) == 2
    assert "unknown agent 'nobody'" in capsys.readouterr().err
    assert not out.exists()
    # an existing file is kept unless --force; refused before any game (an unknown agent
    # would otherwise be the error)
    out.write_text("a dataset\n")
    assert cli.main(["records", "generate"] + ARGS + ["--black", "nobody", "--out", str(out)]) == 2
    assert f"--out: {out} already exists; pass --force" in capsys.readouterr().err
    assert out.read_text() == "a dataset\n"
    assert cli.main(["records", "generate"] + ARGS + ["--workers", "1", "--out", str(out),
                                                      "--force"]) == 0
    assert out.read_text() != "a dataset\n"
    text = tmp_path / "x.txt"
    assert cli.main(["records", "generate"] + ARGS + ["--out", str(text)]) == 2
    assert "a records file is .jsonl, or .jsonl.gz compressed" in capsys.readouterr().err
    assert not text.exists()
    capitals = tmp_path / "X.JSONL.GZ"  # the name read in any case, and written compressed
    assert cli.main(["records", "generate"] + ARGS + ["--workers", "1", "--out",
                                                      str(capitals)]) == 0
    assert capitals.read_bytes()[:2] == b"\x1f\x8b" and records.read_records(capitals)
    inside = out / "games.jsonl"  # `out` is a file: no folder can be made there
    with pytest.raises(SystemExit) as exit_:  # refused as the option is read
        cli.main(["records", "generate"] + ARGS + ["--out", str(inside)])
    assert exit_.value.code == 2
    assert f"{out} exists and is not a folder, so no folder can be made" in (
        capsys.readouterr().err)


class _Stubborn(PythonAgent):
    name = "stubborn"

    def select(self, state, rng):
        return 0  # legal once, then on an occupied cell


def test_a_forfeited_game_is_marked_and_cannot_be_written():
    env = Gomoku(5, 4)
    record = generate_records.play_game(env, _Stubborn(), _Stubborn(), 0, 0, 0)
    assert record.moves == (0,) and record.winner == 0
    assert record.forfeit == "stubborn played (0, 0), an occupied cell"
    with pytest.raises(RecordError, match="lost by an illegal move"):
        records.validate_games([record], env)


class _FirstEmpty(Agent):
    """Subclasses `Agent` itself (no `PythonAgent` to turn its answer into an int):
    the first empty cell, as ``kind`` makes it (a NumPy integer, a bool, a float)."""

    def __init__(self, kind):
        self.name, self.kind = f"first-{kind.__name__}", kind

    def act(self, state, key, deadline=None):
        return self.kind(int(np.flatnonzero(np.asarray(state.board).reshape(-1) == 0)[0]))


def test_an_action_given_as_a_numpy_integer_is_played():
    env = Gomoku(5, 4)
    for kind in (np.int64, np.int32, np.uint8):
        record = generate_records.play_game(env, _FirstEmpty(kind), _FirstEmpty(kind), 0, 0, 0)
        assert record.forfeit is None and record.winner in (0, 1, -1)
        assert record.moves[:3] == (0, 1, 2) and all(type(m) is int for m in record.moves)
        records.validate_games([record], env)  # a game that can be written


@pytest.mark.parametrize("kind, answer", [(bool, "False"), (float, "0.0")])
def test_a_bool_or_a_float_action_forfeits_the_game(kind, answer):
    record = generate_records.play_game(Gomoku(5, 4), _FirstEmpty(kind), _FirstEmpty(int),
                                        0, 0, 0)
    assert (record.moves, record.winner) == ((), 1)
    assert record.forfeit == f"first-{kind.__name__} returned {answer}, not an action index"


@pytest.mark.parametrize("seed", [-1, 2**32, 2**64, 1.5, True])
def test_generate_refuses_a_seed_out_of_range_before_any_game(seed, monkeypatch):
    monkeypatch.setattr(generate_records, "_make",
                        lambda *a: pytest.fail("the agents were built"))
    with pytest.raises(ValueError, match=re.escape(
            f"seed must be an integer from 0 to 4294967295, got {seed!r}")):
        generate_records.generate(5, 4, "freestyle", 1, "random", "random", seed=seed,
                                  progress=False)


def test_the_generator_plays_on_the_exported_agents_board_unless_told(tmp_path, monkeypatch):
    from gomoku_jax import io as gio

    agent = tmp_path / "agent7.gjx"  # only its header is read to pick the board
    gio.write_exported(agent, {"agent": "search", "game": {"size": 7, "k": 4,
                                                           "rule": "standard"}},
                       {"params": {"w": np.zeros(2, np.float32)}})
    boards = []

    def generate(size, k, rule, *rest, **kw):
        boards.append((size, k, rule))
        raise KeyboardInterrupt  # enough: the board is what is checked

    monkeypatch.setattr(generate_records, "generate", generate)
    for argv, board in (
            (["--black", "random", "--white", str(agent)], (7, 4, "standard")),
            (["--black", str(agent), "--size", "9"], (9, 4, "standard")),
            (["--black", "random", "--white", "heuristic"], (15, 5, "freestyle"))):
        with pytest.raises(KeyboardInterrupt):
            generate_records.main(argv + ["--out", str(tmp_path / "games.jsonl")])
        assert boards.pop() == board


# ------------------------------------------------------------------ bad input (appended)


@pytest.mark.parametrize("bad, phrase", [
    ("foo,bar,baz", "'foo,bar,baz' is not a move line (x,y,time), but moves follow"),
    ("RAPFI25.zip", "'RAPFI25.zip' is not a move line (x,y,time), but moves follow"),
    ("5,5,abc", "'5,5,abc' is a garbled move line"),
    ("1.5,5,0", "'1.5,5,0' is a garbled move line"),
    ("5,5,0,0", "'5,5,0,0' is a garbled move line"),
    ("\uff15,5,0", "'\uff15,5,0' is a garbled move line"),  # a full-width 5
])
def test_a_psq_line_that_cuts_the_moves_short_is_an_error(bad, phrase):
    # It used to end the moves quietly: 9,8 and the rest were lost, or taken as names.
    text = PSQ.replace("9,8,120\n", f"{bad}\n9,8,120\n")
    with pytest.raises(RecordError) as info:
        records.parse_psq(text, source="cut.psq")
    assert (info.value.path, info.value.line) == ("cut.psq", 3)
    assert phrase in info.value.reason and str(info.value).startswith("cut.psq:3: ")
    short = "Piskvorky 9x9, 11:11, 0\n5,5,0\nfoo,bar,baz\n6,6,0\n"
    with pytest.raises(RecordError, match=r"^<psq>:3: 'foo,bar,baz' is not a move line "
                       r"\(x,y,time\), but moves follow$"):
        records.parse_psq(short)


@pytest.mark.parametrize("garbled", ["5,5,abc", "1.5,5,0", "5,5,", "7,", " 7 , ", "5,5 0",
                                     "5,5\t0", "5,5;0", "5,5 x"])
def test_a_garbled_psq_move_is_an_error_even_as_the_last_line(garbled):
    text = PSQ.replace("8,12,1\n", f"8,12,1\n{garbled}\n")  # no move line after it
    with pytest.raises(RecordError, match=r"bad.psq:11: .* is a garbled move line"):
        records.parse_psq(text, source="bad.psq")
    after_names = PSQ.replace("JAX25.zip\n", f"JAX25.zip\n{garbled}\n")
    with pytest.raises(RecordError, match=r"bad.psq:13: .* is a garbled move line"):
        records.parse_psq(after_names, source="bad.psq")


def test_psq_trailer_lines_still_read_leniently():
    g = records.parse_psq(PSQ + "\nsome tournament, round 3\n1:05\n")
    assert g.length == 9 and (g.black, g.white) == ("RAPFI25.zip", "JAX25.zip")
    nameless = records.parse_psq("Piskvorky 5x5, 0:0, 0\n3,3,0\n2,2\n-1\n0,Freestyle5_1\n")
    assert nameless.moves == (a(2, 2), a(1, 1))
    assert (nameless.black, nameless.white) == ("0,Freestyle5_1", "white")


@pytest.mark.parametrize("name,line", [
    ("1.5,2,0", "[1.5,2,0]"), ("5,5,abc", "[5,5,abc]"), ("3,4", "[3,4]"), ("7", "[7]"),
    ("7,", "[7,]"), ("", "[]"), ("[7]", "[[7]]"), ("[[3,4]]", "[[[3,4]]]"),
    ("[bot]", "[bot]"), ("[]x", "[]x"), ("a  b", "a b"), ("7,7 bot", "[7,7 bot]"),
    ("6,6;0", "[6,6;0]")])
def test_psq_names_that_look_like_moves_are_written_so_they_read_back(tmp_path, name, line):
    """A name a reader would take for a number or a move is written in brackets and
    read back without them; a name already in brackets is bracketed again only when
    reading would unwrap it. Whitespace runs become one space."""
    g = game(BLACK_WIN, 0, black=name, white="w")
    path = tmp_path / "g.psq"
    records.write_psq(path, g)
    assert path.read_text().splitlines()[-3] == line
    back = records.read_psq(path, ENV)
    assert back.moves == BLACK_WIN and (back.black, back.white) == (" ".join(name.split()), "w")


def test_psq_bracketed_names_from_elsewhere_read_as_written():
    """Brackets a writer put around a name that needs none stay part of the name."""
    text = "Piskvorky 5x5, 0:0, 0\n3,3,0\n[RAPFI]\n[2]\n-1\n"
    g = records.parse_psq(text, ENV)
    assert (g.black, g.white) == ("[RAPFI]", "2")


DEEP = "[" * 5000 + "]" * 5000  # json.loads raises RecursionError, not JSONDecodeError


def test_json_nested_too_deeply_is_bad_json_skipped_with_its_line(tmp_path):
    path = tmp_path / "deep.jsonl"
    deep_game = json.dumps(json.loads(line(rc(WHITE_WIN), "white"))).replace(
        '"moves": [', '"moves": [' + DEEP + ", ", 1)
    path.write_text("\n".join([HEADER, line(rc(BLACK_WIN), "black"), DEEP, deep_game,
                               line(rc(UNFINISHED), None)]) + "\n")
    errors = []
    games = records.read_records(path, errors=errors)
    assert [(g.moves, g.winner) for g in games] == [(BLACK_WIN, 0), (UNFINISHED, None)]
    assert [e.line for e in errors] == [3, 4]
    assert all(e.reason.startswith("bad JSON: nested too deeply") for e in errors)
    with pytest.warns(records.RecordWarning) as caught:
        assert len(records.read_records(path)) == 2
    assert [str(w.message).split(": bad JSON")[0] for w in caught] == [
        f"skipped a malformed game record: {path}:{n}" for n in (3, 4)]
    with pytest.raises(RecordError, match=f"{re.escape(str(path))}:3: bad JSON: nested too "
                       "deeply"):
        records.read_records(path, on_error="raise")


def test_a_key_given_twice_is_bad_json(tmp_path):
    path = tmp_path / "twice.jsonl"
    twice = line(rc(WHITE_WIN), "white")[:-1] + ', "winner": "black"}'
    path.write_text("\n".join([HEADER, twice, line(rc(BLACK_WIN), "black")]) + "\n")
    errors = []
    assert [g.moves for g in records.read_records(path, errors=errors)] == [BLACK_WIN]
    assert [e.line for e in errors] == [2]
    column = twice.rindex('"winner"') + 1  # the second "winner" of the record's line
    assert errors[0].reason == ("bad JSON: the key 'winner' appears twice in one object "
                                "(beside 'size', 'k', 'rule', 'moves', 'black', 'white', "
                                "'opening'), the second time at line 1 column "
                                f"{column}; give it once")
    path.write_text(HEADER[:-1] + ', "size": 9}\n' + line(rc(BLACK_WIN), "black") + "\n")
    with pytest.raises(RecordError, match=r"twice.jsonl:1: bad JSON in the header \(the key "
                                          r"'size' appears twice"):
        records.read_header(path)


def test_a_header_nested_too_deeply_is_bad_json_in_the_header(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text("\n" + DEEP + "\n" + line(rc(BLACK_WIN), "black") + "\n")
    for read in (records.read_records, records.read_header):
        with pytest.raises(RecordError, match=r"deep.jsonl:2: bad JSON in the header \(nested "
                           r"too deeply .*JSON Lines"):
            read(path)
    deep = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(ValueError, match="metadata must hold JSON data only: nested too deeply"):
        records.write_records(tmp_path / "out.jsonl", [game(BLACK_WIN, 0)], ENV,
                              metadata={"deep": deep})
    assert not (tmp_path / "out.jsonl").exists()


def test_ctrl_c_keeps_the_finished_games_as_a_shorter_run_writes_them(tmp_path, monkeypatch,
                                                                       capsys):
    short = tmp_path / "short.jsonl"
    assert generate_records.main(ARGS[:5] + ["3"] + ARGS[6:] + ["--workers", "1", "--out",
                                                                 str(short)]) == 0
    play = generate_records.play_game

    def stopped_at_game_3(env, black, white, seed, index, opening_stones):
        if index == 3:
            raise KeyboardInterrupt  # Ctrl-C while game 3 is played
        return play(env, black, white, seed, index, opening_stones)

    monkeypatch.setattr(generate_records, "play_game", stopped_at_game_3)
    cut = tmp_path / "cut.jsonl"
    capsys.readouterr()
    with pytest.raises(KeyboardInterrupt):
        generate_records.main(ARGS + ["--workers", "1", "--out", str(cut)])
    assert "interrupted: wrote the first 3 games of the 4 asked" in capsys.readouterr().err
    assert cut.read_bytes() == short.read_bytes()


def test_ctrl_c_on_the_command_with_worker_processes_leaves_nothing_behind(tmp_path, console):
    """The command itself (`cli.console`, which ends with ``os._exit``) interrupted while
    two worker processes play: exit status 130, the finished games written, and no
    "leaked semaphore" warning from multiprocessing's resource tracker."""
    import os
    import signal
    import subprocess
    import time

    out = tmp_path / "cut.jsonl"
    proc = subprocess.Popen(
        [*console, "records",
         "generate", "--size", "7", "--k", "4", "--games", "100000", "--black", "random",
         "--white", "random", "--workers", "2", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        seen, deadline = b"", time.monotonic() + 300
        while not re.search(rb"\b[1-9]\d+/100000\b", seen):  # 10 games finished on workers
            assert proc.poll() is None and time.monotonic() < deadline, seen[-2000:]
            seen += os.read(proc.stderr.fileno(), 4096)
        proc.send_signal(signal.SIGINT)
        try:
            stdout, stderr = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("still running 120 s after Ctrl-C; its output ends: "
                        + proc.communicate()[1][-1500:].decode(errors="replace"))
    finally:
        if proc.poll() is None:
            proc.kill()
    err = (seen + stderr).decode(errors="replace")
    assert proc.returncode == 130, err[-2000:]
    assert "leaked semaphore" not in err, err[-2000:]
    written = re.search(r"interrupted: wrote the first (\d+) games of the 100000 asked", err)
    if written:  # the games from the first on that finished (game 0 is almost always one)
        assert len(records.read_records(out, on_error="raise")) == int(written.group(1))
    else:
        assert "interrupted: no file: the first 0 games" in err and not out.exists(), err


def test_a_line_longer_than_any_game_is_skipped_unread(tmp_path, monkeypatch):
    """A compressed file of one endless line (a few KiB expanding to GiB) must not be read
    into memory: such a line is reported and skipped in pieces, the next game kept."""
    monkeypatch.setattr(records, "_MAX_LINE", 1000)  # the real bound is 1 MiB
    games = [game(BLACK_WIN, 0), game(WHITE_WIN, 1)]
    plain = tmp_path / "g.jsonl"
    records.write_records(plain, games, ENV)
    header, first, second = plain.read_text().splitlines()
    path = tmp_path / "long.jsonl.gz"
    path.write_bytes(gzip.compress(
        f"{header}\n{first}\n{' ' * 5000}{{}}\n{second}\n".encode()))
    back = records.read_records(path, ENV, errors=(errors := []))
    assert [g.moves for g in back] == [g.moves for g in games]
    assert [(e.line, e.reason) for e in errors] == [(3, "longer than 1,000 characters; a "
                                                     "records line holds one game (the rest "
                                                     "of the line is skipped unread)")]
    with pytest.raises(RecordError, match="long.jsonl.gz:3: longer than 1,000 characters"):
        records.read_records(path, ENV, on_error="raise")


def test_a_name_that_utf8_cannot_write_is_refused_when_read(tmp_path):
    plain = tmp_path / "g.jsonl"
    records.write_records(plain, [game(BLACK_WIN, 0)], ENV)
    header, line = plain.read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(header + "\n" + line.replace('"black":"', '"black":"\\ud800x') + "\n")
    with pytest.raises(RecordError, match=r"bad.jsonl:2: black '\\ud800x.*' is not text UTF-8 "
                                          r"can write \(a lone surrogate escape\)"):
        records.read_records(bad, ENV, on_error="raise")


def test_write_psq_leaves_the_old_file_when_it_cannot_write(tmp_path):
    path = tmp_path / "g.psq"
    records.write_psq(path, game(BLACK_WIN, 0))
    before = path.read_bytes()
    with pytest.raises(RecordError, match=r"game 0: black '\\ud800' is not text UTF-8 can "
                                          r"write \(a lone surrogate escape\)"):
        records.write_psq(path, game(WHITE_WIN, 1, black="\ud800"))
    assert path.read_bytes() == before and sorted(tmp_path.iterdir()) == [path]


def test_text_utf8_cannot_write_is_refused_before_writing(tmp_path):
    """A lone surrogate in a name, the source or the metadata: a named error, no file."""
    path = tmp_path / "g.jsonl"
    for games, kwargs, error, text in (
            ([game(BLACK_WIN, 0, white="w\udc80")], {}, RecordError, r"game 0: white "),
            ([dataclasses.replace(game(BLACK_WIN, 0), source="\udc80")], {}, RecordError,
             r"game 0: source "),
            ([game(BLACK_WIN, 0)], {"source": "\ud800"}, ValueError, r"^source "),
            ([game(BLACK_WIN, 0)], {"metadata": {"run": ["\ud800"]}}, ValueError,
             r"^metadata must hold text UTF-8 can write")):
        with pytest.raises(error, match=text + r".*not text UTF-8 can write"):
            records.write_records(path, games, ENV, **kwargs)
        assert not list(tmp_path.iterdir())
    with pytest.raises(RecordError, match=r"game 0: white 'w\\udc80' is not text"):
        records.validate_games([game(BLACK_WIN, 0, white="w\udc80")], ENV)


@pytest.mark.parametrize("moves", [None, 5])
def test_moves_that_are_no_sequence_are_a_record_error(moves):
    bad = dataclasses.replace(game(BLACK_WIN, 0), moves=moves)
    for check in (records.validate_games, records.positions):
        with pytest.raises(RecordError, match=r"game 0: "):
            check([bad], ENV)


def test_psq_lines_end_only_at_line_breaks_a_text_file_has():
    """\\f, \\x85 or \\u2028 in a line do not end it: error lines count as an editor does,
    and two moves on one line are one garbled line."""
    text = "Piskvorky 5x5, 0:0, 0\n1,1,0\x0c\n2,2,0\n2,2,0\n"
    with pytest.raises(RecordError, match=r"^f.psq:4: move 3 .* occupied"):
        records.parse_psq(text, ENV, "f.psq")
    for sep in ("\u2028", "\x85", "\x1c"):
        with pytest.raises(RecordError, match=r"^f.psq:2: .* is a garbled move line"):
            records.parse_psq(f"Piskvorky 5x5, 0:0, 0\n1,1,0{sep}2,2,0\n", ENV, "f.psq")
    crlf = records.parse_psq("Piskvorky 5x5, 0:0, 0\r\n1,1,0\r2,2,0\r\nb\rw\n", ENV)
    assert crlf.moves == (a(0, 0), a(1, 1)) and (crlf.black, crlf.white) == ("b", "w")


def test_psq_numbers_too_long_for_a_board_are_a_garbled_line():
    with pytest.raises(RecordError, match="garbled move line"):
        records.parse_psq("Piskvorky 15x15\n" + "9" * 5000 + ",5,0\n")
    with pytest.raises(RecordError, match="must start with 'Piskvorky WxH'"):
        records.parse_psq("Piskvorky " + "1" * 5000 + "x15\n8,8,0\n")


def test_a_missing_file_or_metadata_that_is_no_object_is_a_record_error(tmp_path):
    for path, why in ((tmp_path / "none.jsonl", "No such file or directory"),
                      (tmp_path, "Is a directory")):
        with pytest.raises(RecordError, match=re.escape(f"{path}:0: cannot read: {why}")):
            records.read_records(path)
    plain = tmp_path / "g.jsonl"
    records.write_records(plain, [game(BLACK_WIN, 0)], ENV, metadata={"seed": 1})
    header, line = plain.read_text().splitlines()
    plain.write_text(header.replace('"metadata":{"seed":1}', '"metadata":[1]') + "\n"
                     + line + "\n")
    with pytest.raises(RecordError, match=r"g.jsonl:1: .*its metadata must be a JSON object, "
                                          r"got \[1\]"):
        records.read_header(plain)


def test_a_worker_killed_while_it_plays_stops_the_run_instead_of_hanging(tmp_path,
                                                                        monkeypatch):
    """A pool whose worker is killed (the out-of-memory killer, kill -9) starts another
    but never plays the lost game again: the run stops at once with an error naming the
    worker, while the other workers' games still come in, and keeps the games finished
    in order, rather than playing on and then waiting for ever."""
    import os
    import signal

    with generate_records.WorkerPool(5, 4, "freestyle", "random", "heuristic", 2) as pool:
        victim, seen = pool._pool._pool[0], 0
        with pytest.raises(generate_records.WorkerDied) as died:
            for _ in pool.play(0, 100_000, 0):  # hours of games: the run must stop early
                seen += 1
                if seen == 20:
                    os.kill(victim.pid, signal.SIGKILL)
        assert seen < 10_000  # it stopped with the kill, not after the other games
        assert str(died.value) == (
            f"worker process {victim.pid} ended while the games were played (killed by "
            "signal 9 (SIGKILL: the out-of-memory killer, or kill -9)); its game would never "
            "come back")
        with pytest.raises(generate_records.WorkerDied, match="ended before; make another"):
            next(pool.play(0, 4, 0))  # a pool that lost a worker plays no more
    # through the command line: the games finished in order are written, and the error
    # says so
    with generate_records.WorkerPool(5, 4, "freestyle", "random", "heuristic", 2) as pool:
        play = pool.play

        def killing(*args):
            for n, item in enumerate(play(*args)):
                if n == 10:
                    os.kill(pool._pool._pool[0].pid, signal.SIGKILL)
                yield item

        monkeypatch.setattr(pool, "play", killing)
        out = tmp_path / "killed.jsonl"
        with pytest.raises(generate_records.WorkerDied, match=r"its game would never come "
                                                              r"back: (wrote|no file:) the "
                                                              r"first \d+ games of the 100000 "
                                                              r"asked") as died:
            generate_records.main(ARGS[:4] + ["--games", "100000", "--black", "random",
                                              "--white", "heuristic", "--opening-stones",
                                              "0", "--no-progress", "--out", str(out)],
                                  pool=pool)
    # the games finished in order before the lost one (which game the killed worker held
    # decides how many: none when it held game 0)
    written = int(re.search(r"the first (\d+) games", str(died.value)).group(1))
    assert written < 10_000
    if written == 0:
        assert not out.exists()
        return
    kept = records.read_records(out, Gomoku(5, 4), on_error="raise")
    assert len(kept) == written
    assert [g.source for g in kept] == [f"experiments.generate_records seed=0 game={i}"
                                        for i in range(len(kept))]
