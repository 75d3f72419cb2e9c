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


class _Match:
    """A match's stand-in: every game won by the first agent."""

    def __init__(self, games):
        self.games, self.names = games, ("a", "b")

    def score(self, name):
        return {"wins": self.games, "losses": 0, "draws": 0, "wins_as_black": self.games,
                "wins_as_white": 0, "games": self.games}

    def seconds_per_move(self, name):
        return 0.1


class _Learner:
    def __init__(self, *args, **kwargs):
        pass

    def train(self, *args, **kwargs):
        pass

    def agent(self, name="td-linear"):
        return _Named(name)


class _Named:
    def __init__(self, name):
        self.name = name


def _fake_matches(monkeypatch, module):
    monkeypatch.setattr(module.arena, "play_match", lambda env, a, b, games, **kw: _Match(games))
    monkeypatch.setattr(module.agents, "make", lambda name, env: _Named(name))


def test_the_tables_report_names_its_seed(monkeypatch):
    # --seed sets the learners' training and the matches: a report without it could not
    # be told from one of seed 0
    for name in ("TabularValueLearner", "LinearTDLearner", "SharedMCTS"):
        monkeypatch.setattr(seed004_tables, name, _Learner)
    _fake_matches(monkeypatch, seed004_tables)
    report = seed004_tables.run(games_3x3=2, games_big=2, seed=5)
    assert report["seed"] == 5 and report["tables"]


def test_the_gomokubot_report_names_its_seed(monkeypatch):
    from experiments import gomokubot_strength

    _fake_matches(monkeypatch, gomokubot_strength)
    report = gomokubot_strength.run(games=2, timing_games=1, seed=5, opponents=("heuristic",))
    assert report["seed"] == 5 and report["matches"]
