"""Forcing moves against the heuristic (`experiments.missed_wins`)."""

import json
from pathlib import Path

import numpy as np
import pytest

from experiments.missed_wins import analyse, forcing_moves
from gomoku_jax import arena
from gomoku_jax.game import Gomoku
from gomoku_jax.io import CheckpointError

ENV = Gomoku(9, 5)


def _cell(r, c):
    return r * 9 + c


BLACK = [(4, 2), (4, 3), (4, 4), (2, 5), (3, 5)]
WHITE = [(4, 1), (0, 0), (0, 8), (8, 0), (8, 8)]


def _four_three_position():
    """Black to move. A closed three on row 4 (white at its left end) and a vertical two
    over (4, 5): black (4, 5) makes a four and an open three at once, the heuristic must
    block the four at (4, 6), and black makes an open four on column 5."""
    board = np.zeros((9, 9), np.int8)
    for colour, stones in ((1, BLACK), (2, WHITE)):
        for r, c in stones:
            board[r, c] = colour
    return board


def test_a_four_three_is_forcing_and_single_threats_are_not():
    forcing = np.asarray(forcing_moves(ENV, ENV.from_board(_four_three_position())))
    assert forcing[_cell(4, 5)]
    # (4, 6) makes a four whose block at (4, 5) also cuts the column; (1, 5) makes an
    # open three the heuristic blocks at (4, 5); (6, 6) threatens nothing.
    for r, c in [(4, 6), (1, 5), (6, 6)]:
        assert not forcing[_cell(r, c)], (r, c)
    # Occupied cells are never forcing.
    assert not forcing[_cell(4, 2)] and not forcing[_cell(4, 1)]


def test_a_quiet_board_has_no_forcing_move():
    board = np.zeros((9, 9), np.int8)
    board[4, 4], board[4, 5] = 1, 2
    assert not np.asarray(forcing_moves(ENV, ENV.from_board(board))).any()


def _record(prefix_black, prefix_white, last_black, winner):
    """Black and white alternate through ``prefix_black`` and ``prefix_white``, then black
    plays ``last_black``."""
    moves = []
    for b, w in zip(prefix_black, prefix_white):
        moves += [_cell(*b), _cell(*w)]
    moves.append(_cell(*last_black))
    return arena.GameRecord("agent", "heuristic", tuple(moves), 0, winner)


def test_analyse_counts_the_forcing_move_played_or_missed():
    # Black is to move six times (before moves 1, 3, 5, 7, 9 and 11), never with a five to
    # make or to stop. Only the last of those positions, the four-three position, has a
    # forcing move: before it black's stones are at most a row-4 three closed by white
    # (4, 1), plus the lone (2, 5) before move 9. Its fours are blocked at once and leave
    # black nothing, and it has no other three to open: no forcing move.
    played = analyse(ENV, [_record(BLACK, WHITE, (4, 5), 0)], "agent")
    assert played["positions"] == 6
    assert played["with_forcing_move"] == 1
    assert played["forcing_move_played"] == 1
    assert played["by_result"]["won"] == {"games": 1, "offered": 1}
    missed = analyse(ENV, [_record(BLACK, WHITE, (6, 6), -1)], "agent")
    assert missed["positions"] == 6 and missed["with_forcing_move"] == 1
    assert missed["forcing_move_played"] == 0
    assert missed["by_result"]["drawn"] == {"games": 1, "offered": 1}
    # From white's side of the same game (five positions, with stones on row 4 and in
    # the corners, never a four or an open three to make): never offered one.
    white = analyse(ENV, [_record(BLACK, WHITE, (6, 6), -1)], "heuristic")
    assert white["positions"] == 5 and white["with_forcing_move"] == 0
    assert white["forcing_move_played"] == 0
    assert white["by_result"]["drawn"] == {"games": 1, "offered": 0}


def test_analyse_refuses_a_name_that_did_not_play():
    with pytest.raises(ValueError, match="'nobody' played neither side"):
        analyse(ENV, [_record(BLACK, WHITE, (6, 6), -1)], "nobody")


RECORDED = Path(__file__).parents[1] / "experiments" / "results" / "az_9x9_cpu" / "final.gjx"


def test_main_writes_a_report_of_every_game(tmp_path, monkeypatch):
    from experiments.missed_wins import main

    matches = []  # the matches the experiment plays, as played
    play_match = arena.play_match

    def recorded(*args, **kwargs):
        matches.append(play_match(*args, **kwargs))
        return matches[-1]

    monkeypatch.setattr(arena, "play_match", recorded)
    out = tmp_path / "report.json"
    report = main(["--agent", str(RECORDED), "--games", "2", "--simulations", "4",
                   "--json", str(out)])
    saved = json.loads(out.read_text())
    assert saved == json.loads(json.dumps(report))
    assert saved["games"] == 2 and saved["board"] == "gomoku-9x9-k5-freestyle"
    assert saved["simulations"] == 4  # the agent's search as played, not the file's
    assert len(matches) == 1
    records = matches[0].records
    assert len(records) == 2 and all({r.black, r.white} == {"agent", "heuristic"}
                                     for r in records)
    # the score, counted from the games
    results = [r.result_for("agent") for r in records]
    assert saved["score"]["games"] == 2
    assert [saved["score"][k] for k in ("wins", "draws", "losses")] == [
        results.count(1.0), results.count(0.5), results.count(0.0)]
    # the counts are those of the games played, analysed anew
    assert {k: saved[k] for k in ("positions", "with_forcing_move", "forcing_move_played",
                                  "by_result")} == analyse(ENV, records, "agent")
    assert [saved["by_result"][r]["games"] for r in ("won", "drawn", "lost")] == [
        results.count(1.0), results.count(0.5), results.count(0.0)]
    # at most one position per move of the agent's after the opening; its first move
    # in each game comes with at most two stones down, where nobody can win at once
    own = sum(1 for r in records for i in range(r.opening, len(r.moves))
              if (r.black, r.white)[i % 2] == "agent")
    assert 2 <= saved["positions"] <= own


def test_main_names_a_missing_agent_file(tmp_path):
    from experiments.missed_wins import main

    missing = tmp_path / "nothing.gjx"
    with pytest.raises(CheckpointError, match="nothing.gjx: no such params file"):
        main(["--agent", str(missing), "--games", "2"])


def test_an_exported_file_given_as_a_folder_is_named_so(tmp_path):
    from gomoku_jax import exported

    with pytest.raises(CheckpointError, match=rf"^{tmp_path} is a folder, not an exported "
                                              "params file$"):
        exported.load(tmp_path)
    (tmp_path / "final.gjx").write_bytes(b"")  # a training run's folder
    with pytest.raises(CheckpointError, match=r"is a folder, not an exported params file "
                                              rf"\(did you mean {tmp_path}/final.gjx\?\)"):
        exported.load(tmp_path)


def test_the_help_names_the_command_and_every_option_says_its_default(capsys):
    from experiments.missed_wins import build_parser, main

    for action in build_parser()._actions:
        if action.dest != "help":
            assert action.help and ("default" in action.help or action.required), (
                action.option_strings)
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m experiments.missed_wins [-h] --agent AGENT")
    assert "(default 11)" in out and "(default 40)" in out
    with pytest.raises(SystemExit) as exit_info:  # refused before the agent is loaded
        main(["--agent", "nothing.gjx", "--opening-stones", "-1"])
    assert exit_info.value.code == 2
    assert ("python -m experiments.missed_wins: error: argument --opening-stones"
            in capsys.readouterr().err)
