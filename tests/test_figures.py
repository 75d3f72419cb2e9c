"""The README's training curves draw from a run's files, with and without sparring."""

import csv
import json

import pytest

from experiments import figures

COLUMNS = ["iteration", "loss", "policy_loss", "value_loss", "explained_variance", "entropy",
           "game_length"]


def _run(tmp_path, sparring: bool, rows: int = 12):
    names = COLUMNS + (["opponent_games", "opponent_wins"] if sparring else [])
    with (tmp_path / "metrics.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(names + ["eval_heuristic"])
        for i in range(1, rows + 1):
            values = [i, 3.0 - 0.1 * i, 2.0, 0.5, 0.02 * i, 3.5, 30.0]
            values += [4, i % 5] if sparring else []
            writer.writerow(values + [0.5 if i == 6 else ""])
    (tmp_path / "report.json").write_text(json.dumps({
        "iterations": rows, "evaluation": {"heuristic": {"score": 0.75,
                                                         "interval": [0.6, 0.85]}}}))
    return tmp_path


@pytest.mark.parametrize("sparring", [False, True])
def test_training_curves_are_a_png(tmp_path, sparring):
    out = figures.training_curves(_run(tmp_path, sparring), device="test device")
    assert out == tmp_path / "training_curves.png"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_metrics_without_rows_are_refused(tmp_path):
    (tmp_path / "metrics.csv").write_text(",".join(COLUMNS) + "\n")
    (tmp_path / "report.json").write_text("{}")
    with pytest.raises(ValueError, match="metrics.csv holds no rows"):
        figures.training_curves(tmp_path)


def test_evaluation_points_join_periodic_and_final_scores(tmp_path):
    metrics = figures._read_metrics(_run(tmp_path, sparring=False) / "metrics.csv")
    report = json.loads((tmp_path / "report.json").read_text())
    assert figures.evaluation_points(metrics, report) == {"heuristic": [(6, 0.5), (12, 0.75)]}


def test_a_run_without_periodic_evaluations_still_shows_its_final_one():
    metrics = {"iteration": [1.0, 2.0, 3.0]}
    report = {"iterations": 3, "evaluation": {
        "heuristic": {"score": 0.975, "interval": [0.92, 0.99], "games": 100},
        "pure-mcts-1000": {"score": 1.0, "interval": [0.96, 1.0], "games": 100}}}
    assert figures.evaluation_points(metrics, report) == {
        "heuristic": [(3, 0.975)], "pure-mcts-1000": [(3, 1.0)]}
    assert figures.evaluation_points(metrics, {"iterations": 3}) == {}
