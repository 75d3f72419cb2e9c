"""Every notebook runs end to end: its code cells are executed in order in one namespace,
and what it shows is then checked against the files it read or wrote and facts worked
out by hand."""

import csv
import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no notebook"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, capsys, tmp_path, monkeypatch):
    # a notebook's "fresh temporary folder" lands in this test's folder, cleaned by pytest
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    nb = json.loads(path.read_text())
    assert nb["nbformat"] == 4
    namespace = {"__name__": "__notebook__"}
    code_cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code_cells
    for i, cell in enumerate(code_cells):
        source = "".join(cell["source"])
        assert not any(line.lstrip().startswith(("%", "!")) for line in source.splitlines()), (
            f"{path.name} cell {i}: shell or magic lines cannot run outside Jupyter"
        )
        exec(compile(source, f"{path.name}[cell {i}]", "exec"), namespace)
    assert capsys.readouterr().out  # the tour prints what it shows
    CHECKS[path.name](namespace)
    if path.name == "ablation_sweep.ipynb":  # its sweep's cell run again: resumed, not redone
        workdir, rows = namespace["workdir"], namespace["rows"]
        logged = {row["run"]: Path(row["run"], "metrics.csv").read_bytes() for row in rows}
        again = next(c for c in code_cells if "sweep.sweep(" in "".join(c["source"]))
        exec(compile("".join(again["source"]), f"{path.name}[again]", "exec"), namespace)
        assert namespace["workdir"] == workdir
        assert {row["run"]: Path(row["run"], "metrics.csv").read_bytes()
                for row in namespace["rows"]} == logged
        # other knobs: another folder, not the first sweep's (which would refuse them)
        namespace["VALUES"] = [*namespace["VALUES"], 3]
        namespace["ITERATIONS"] = 0  # refused by the sweep before anything runs
        with pytest.raises(ValueError, match="iterations must be a positive integer"):
            exec(compile("".join(again["source"]), f"{path.name}[again]", "exec"), namespace)
        assert namespace["workdir"] != workdir


def _check_ablation_sweep(ns):
    rows, values = ns["rows"], ns["VALUES"]
    assert [(row["key"], row["value"]) for row in rows] == [(ns["KEY"], v) for v in values]
    ladder = ns["LADDER"]
    for row, value in zip(rows, values):
        assert row["iterations"] == ns["ITERATIONS"]
        run = Path(row["run"])
        assert (run / "final.gjx").is_file()
        stored = json.loads((run / "config.json").read_text())
        for part in ns["KEY"].split("."):
            stored = stored[part]
        assert stored == value  # each run trained with its own value
        assert math.isfinite(row["loss"])  # and took training steps (not a row of NaN)
        levels = row["ladder"]
        assert levels[0]["simulations"] == ladder["start"]
        passed = [lv["simulations"] for lv in levels if lv["wins"] >= ladder["pass_wins"]]
        assert row["ladder_cleared"] == (passed[-1] if passed else 0)
        assert all(lv["games"] == ladder["games"] for lv in levels)


def _check_analysis(ns):
    with (ns["run"] / "metrics.csv").open() as f:
        lines = list(csv.reader(f))
    assert len(ns["rows"]) == len(lines) - 1 and list(ns["rows"][0]) == lines[0]
    final = json.loads((ns["run"] / "report.json").read_text())
    assert max(ns["evals"]) == final["iterations"]
    for result in ns["evals"].values():
        for r in result.values():
            assert r["wins"] + r["losses"] + r["draws"] == r["games"]
            assert r["score"] == pytest.approx((r["wins"] + 0.5 * r["draws"]) / r["games"])


def _check_game_tour(ns):
    final, moves = ns["final"], np.asarray(ns["moves"])
    assert np.asarray(final.terminated).all()
    # each game's recorded moves (padded with -1) are as many as its stones
    np.testing.assert_array_equal((moves >= 0).sum(1), np.asarray(final.move_count))
    # the puzzle: black's open three on row 4, columns 2-4: no win at once, one open three,
    # stopped at either end (4, 1) or (4, 5)
    board = ns["puzzle"].board
    tactics = ns["tactics"]
    assert not np.asarray(tactics.winning_moves(board, 0, 5)).any()
    threes = tactics.open_threes(board, 0)
    assert int(threes.count) == 1
    blocks = {tuple(c) for c in np.argwhere(np.asarray(threes.blocks)).tolist()}
    assert {(4, 1), (4, 5)} <= blocks <= {(4, 0), (4, 1), (4, 5), (4, 6)}


def _check_quickstart(ns):
    assert ns["report"]["iterations"] == ns["ITERATIONS"]
    assert (ns["workdir"] / "final.gjx").is_file()
    for name, match in ns["results"].items():
        score = match.score(ns["agent"].name)
        assert score["games"] == ns["EVAL_GAMES"]
        assert score["wins"] + score["losses"] + score["draws"] == score["games"]
    record, state = ns["record"], ns["state"]
    # the game replayed from its record ends as the record says
    assert int(state.move_count) == len(record.moves) and bool(state.terminated)
    assert int(state.winner) == record.winner


CHECKS = {"ablation_sweep.ipynb": _check_ablation_sweep, "analysis.ipynb": _check_analysis,
          "game_tour.ipynb": _check_game_tour, "quickstart.ipynb": _check_quickstart}


def test_every_notebook_has_its_checks():
    assert sorted(CHECKS) == [p.name for p in NOTEBOOKS]


def _analysis_of(run: Path, iterations: int, evaluations: dict) -> dict:
    """Run the analysis notebook's cells on a stand-in run of ``iterations`` logged rows,
    a final report of no games and ``evaluations`` ({iteration: result}) in its ``eval/``;
    returns the notebook's namespace."""
    (run / "eval").mkdir(parents=True)
    columns = ["iteration", "seconds", "moves_per_second", "loss", "policy_loss", "value_loss",
               "explained_variance", "entropy", "kl"]
    (run / "metrics.csv").write_text(",".join(columns) + "\n" + "\n".join(
        ",".join(str(i + 1 if c == "iteration" else 0.5) for c in columns)
        for i in range(iterations)))
    for it, result in evaluations.items():
        (run / "eval" / f"iter_{it:06d}.json").write_text(json.dumps(result))
    (run / "report.json").write_text(json.dumps({"iterations": iterations, "evaluation": {}}))
    nb = json.loads((Path(__file__).parent.parent / "notebooks" / "analysis.ipynb").read_text())
    namespace = {"__name__": "__notebook__"}
    for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        exec(compile("".join(cell["source"]), f"analysis.ipynb[cell {i}]", "exec"), namespace)
        if i == 0:  # the knobs
            namespace.update(RUN=str(run), TOURNAMENT=None)
    return namespace


def test_the_analysis_notebook_reads_a_run_without_evaluations(tmp_path, capsys):
    # eval.every = eval.final_games = 0: it printed a table without columns and an empty plot
    namespace = _analysis_of(tmp_path / "run", 3, {})
    out = capsys.readouterr().out
    assert "3 iterations" in out and "this run played no evaluation games" in out
    assert "| iteration |" not in out and namespace["opponents"] == []


def test_the_analysis_notebook_keeps_a_periodic_evaluation_when_the_final_played_none(
        tmp_path, capsys):
    # a run stopped by --iterations at an evaluation, with eval.final_games 0: the report's
    # empty final evaluation hid the periodic one of the same iteration (an empty row)
    periodic = {"heuristic": {"wins": 1, "losses": 1, "draws": 0, "games": 2, "score": 0.5,
                              "interval": [0.1, 0.9]}}
    namespace = _analysis_of(tmp_path / "run", 4, {2: periodic, 4: periodic})
    out = capsys.readouterr().out
    assert namespace["evals"] == {2: periodic, 4: periodic}
    assert "| 4 | 0.50 (1-1-0 of 2) |" in out
