"""The seed 004 tables' rows: rates, the score and its interval, and the printed table."""

import json
import pathlib

import pytest

from experiments import seed004_tables
from gomoku_jax.ratings import score_interval

RESULTS = pathlib.Path(__file__).resolve().parents[1] / "experiments" / "results"


def test_a_row_gives_its_score_with_a_draw_as_half_and_its_interval():
    row = seed004_tables._rates(wins=1, losses=6, draws=3)
    assert (row["games"], row["win"], row["loss"], row["draw"]) == (10, 0.1, 0.6, 0.3)
    assert row["score"] == pytest.approx(0.25)
    low, high = row["score_interval"]
    assert (low, high) == score_interval(2.5, 10) and low < 0.25 < high
    low, high = seed004_tables._rates(0, 10, 0)["score_interval"]
    assert low == pytest.approx(0.0, abs=1e-12) and high == pytest.approx(0.28, abs=0.01)


def test_the_recorded_tables_carry_intervals_that_fit_their_counts():
    report = json.loads((RESULTS / "seed004_tables.json").read_text())
    rows = [row for table in report["tables"].values() for row in table]
    assert rows
    for row in rows:
        n = row["games"]
        counts = [round(row[key] * n) for key in ("win", "loss", "draw")]
        expected = seed004_tables._rates(*counts)
        assert {key: row[key] for key in expected} == expected
    text = seed004_tables.format_report(report)
    assert "0.15 (0.04-0.46)" in text  # pure MCTS on 5x5: 1 won, 1 drawn of 10


def test_the_recorded_3x3_table_has_every_learner_with_its_training_time():
    report = json.loads((RESULTS / "seed004_tables.json").read_text())
    rows = {row["agent"]: row for row in report["tables"]["3x3 vs perfect alpha-beta"]}
    for learner in ("tabular-value", "td-linear", "shared-mcts-200"):
        assert rows[learner]["training_seconds"] > 0, learner
    assert rows["shared-mcts-200"]["games"] == 100


@pytest.mark.parametrize("name", ["seed004_tables", "gomokubot_strength"])
def test_the_help_names_the_command_and_every_option_says_its_default(name, capsys):
    """(gomokubot_strength's other tests are in test_bench_search.py.)"""
    import importlib

    script = importlib.import_module(f"experiments.{name}")
    parser = script.build_parser()
    for action in parser._actions:
        if action.dest != "help":
            assert action.help and "default" in action.help, action.option_strings
    with pytest.raises(SystemExit) as exit_info:
        script.main(["--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: python -m experiments.{name} [-h]")
    with pytest.raises(SystemExit) as exit_info:  # refused before any game
        script.main(["--games-3x3" if name == "seed004_tables" else "--games", "0"])
    assert exit_info.value.code == 2
    assert f"python -m experiments.{name}: error: argument --games" in capsys.readouterr().err
