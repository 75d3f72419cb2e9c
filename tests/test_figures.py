"""The README's training curves draw from a run's files, with and without sparring."""

import csv
import json
import re

import numpy as np
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


@pytest.mark.parametrize("game, words", [
    ({"size": 9, "k": 5, "rule": "freestyle"}, ", 9x9 five-in-a-row"),
    ({"size": 15, "k": 5, "rule": "standard"}, ", 15x15 five-in-a-row, standard rule"),
    ({"size": 7, "k": 4, "rule": "freestyle"}, ", 7x7 4-in-a-row"),
    ({"size": "9"}, ""),  # not a config train writes: no game named
])
def test_the_title_names_the_runs_game(tmp_path, game, words):
    run = _run(tmp_path, sparring=False)
    (run / "config.json").write_text(json.dumps({"algorithm": "alphazero", "game": game}))
    fig = figures.training_curves_figure(run, device="cpu")
    assert fig.get_suptitle() == f"AlphaZero{words}: the run in {run.name}/ (cpu)"


def _moving_mean(values, width=5):
    """Each value's mean with the ``width // 2`` values on each side of it, the first and
    last values standing in past the ends."""
    n, before = len(values), width // 2
    return [sum(values[min(max(j + d, 0), n - 1)] for d in range(-before, width - before))
            / width for j in range(n)]


def _columns(path):
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    return {name: [float(r[name]) if r[name] else None for r in rows] for name in rows[0]}


@pytest.mark.parametrize("sparring", [False, True])
def test_training_curves_plot_the_metrics_and_evaluations(tmp_path, sparring):
    run = _run(tmp_path, sparring)
    out = figures.training_curves(run, device="test device")
    assert out == run / "training_curves.png"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    fig = figures.training_curves_figure(run, device="test device")  # what it saved
    m = _columns(run / "metrics.csv")
    report = json.loads((run / "report.json").read_text())
    # four panels, the third with a second y axis for the game length
    assert len(fig.axes) == 5
    losses, value, entropy, scores, length = fig.axes
    assert length.bbox.bounds == entropy.bbox.bounds
    assert fig.get_suptitle() == f"AlphaZero: the run in {run.name}/ (test device)"

    def drawn(line, name, smoothed):  # the line plots metrics.csv's column over iterations
        np.testing.assert_array_equal(line.get_xdata(), m["iteration"])
        np.testing.assert_allclose(line.get_ydata(),
                                   _moving_mean(m[name]) if smoothed else m[name])

    assert losses.get_title().startswith("losses")
    assert len(losses.lines) == 6  # each loss per iteration, then its moving mean
    for i, name in enumerate(("loss", "policy_loss", "value_loss")):
        drawn(losses.lines[2 * i], name, smoothed=False)
        drawn(losses.lines[2 * i + 1], name, smoothed=True)
    assert [t.get_text() for t in losses.get_legend().get_texts()] == [
        "loss", "policy loss", "value loss"]

    drawn(value.lines[0], "explained_variance", smoothed=False)
    drawn(value.lines[1], "explained_variance", smoothed=True)
    share = [line for line in value.lines
             if line.get_label() == "sparring games won by the learner"]
    if sparring:
        assert value.get_title() == "value head and sparring games (5-iteration means)"
        (line,) = share  # the share of sparring games won over 5 iterations
        np.testing.assert_allclose(line.get_ydata(), np.divide(
            _moving_mean(m["opponent_wins"]), _moving_mean(m["opponent_games"])))
    else:
        assert value.get_title() == "explained variance of the value head"
        assert share == [] and value.get_legend() is None

    assert entropy.get_title() == "policy entropy and self-play game length"
    drawn(entropy.lines[0], "entropy", smoothed=False)
    drawn(entropy.lines[1], "entropy", smoothed=True)
    drawn(length.lines[0], "game_length", smoothed=False)
    drawn(length.lines[1], "game_length", smoothed=True)

    # the periodic evaluations of metrics.csv, then the final one of report.json
    assert scores.get_title().startswith("evaluation score")
    final = report["evaluation"]["heuristic"]
    periodic = [(i, s) for i, s in zip(m["iteration"], m["eval_heuristic"]) if s is not None]
    handles, labels = scores.get_legend_handles_labels()
    assert labels == ["vs heuristic"]
    xs, ys = zip(*periodic, (report["iterations"], final["score"]))
    np.testing.assert_array_equal(handles[0].get_xdata(), xs)
    np.testing.assert_array_equal(handles[0].get_ydata(), ys)
    (interval,) = scores.collections  # the final score's 95% interval
    np.testing.assert_allclose(interval.get_segments()[0],
                               [[report["iterations"], y] for y in final["interval"]])
    assert scores.get_title().endswith("the final: its games, 95% CI")
    # a run without a final evaluation (eval.final_games 0) says so, not "the final"
    (run / "report.json").write_text(json.dumps({"iterations": 12, "evaluation": {}}))
    scores = figures.training_curves_figure(run, device="cpu").axes[3]
    assert scores.get_title().endswith("no final evaluation") and not scores.collections


def test_metrics_without_rows_are_refused(tmp_path):
    (tmp_path / "metrics.csv").write_text(",".join(COLUMNS) + "\n")
    (tmp_path / "report.json").write_text("{}")
    with pytest.raises(ValueError, match="metrics.csv holds no rows"):
        figures.training_curves(tmp_path)


@pytest.mark.parametrize("text, why", [
    ("[]", "must hold a JSON object, found []"),
    ('{"evaluation": {}}', "has no iteration count ('iterations': None)"),
    ("{nope", "is unreadable"),
])
def test_a_damaged_report_is_refused_naming_it(tmp_path, text, why):
    run = _run(tmp_path, sparring=False)
    (run / "report.json").write_text(text)
    with pytest.raises(ValueError, match=re.escape(f"{run / 'report.json'}") + ".*"
                       + re.escape(why)):
        figures.training_curves(run)


def test_a_folder_that_is_not_a_run_is_refused_naming_it(tmp_path, monkeypatch, capsys):
    missing = tmp_path / "nonexist"
    with pytest.raises(ValueError, match=re.escape(
            f"{missing}: no such folder; give the folder of a training run (--run)")):
        figures.training_curves(missing)
    (tmp_path / "metrics.csv").write_text(",".join(COLUMNS) + "\n")
    with pytest.raises(ValueError, match=re.escape(
            f"{tmp_path} holds no report.json: not the folder of a finished training run")):
        figures.training_curves(tmp_path)
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="file: not a folder"):
        figures.training_curves(tmp_path / "file")
    # as a script: one line naming the folder, no errno
    monkeypatch.setattr("sys.argv", ["experiments/figures.py"])
    from experiments.common import run_script

    with pytest.raises(SystemExit) as exit_info:
        run_script(lambda: figures.main(["--run", str(missing), "--skip-tournament"]))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "no such folder" in err and "Errno" not in err, err


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


@pytest.mark.parametrize("seed", ["-1", str(2**63)])
def test_a_seed_out_of_range_is_refused_before_anything_is_drawn(seed, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:  # the run folder is empty: no curves to draw
        figures.main(["--run", str(tmp_path), "--seed", seed])
    assert exit_info.value.code == 2
    assert (f"argument --seed: must be an integer from 0 to 4294967295, got {seed!r}"
            in capsys.readouterr().err)


# metrics.csv's first columns of a DQN run and of an imitation run (`gomoku-jax train`)
DQN_COLUMNS = ["iteration", "buffer_fill", "epsilon", "game_length", "loss", "q_mean",
               "td_abs", "seconds"]
IMITATION_COLUMNS = ["iteration", "accuracy", "loss", "policy_loss", "val_accuracy",
                     "val_policy_loss", "value_loss", "seconds"]


@pytest.mark.parametrize("algorithm, columns, missing", [
    ("dqn", DQN_COLUMNS, "policy_loss, value_loss, explained_variance, entropy"),
    ("imitation", IMITATION_COLUMNS, "explained_variance, entropy, game_length"),
    (None, IMITATION_COLUMNS, "explained_variance, entropy, game_length"),
])
def test_a_run_of_another_algorithm_is_refused_before_anything_is_drawn(
        tmp_path, monkeypatch, capsys, algorithm, columns, missing):
    run = tmp_path / "other_run"
    run.mkdir()
    with (run / "metrics.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        writer.writerows([[i] + [0.5] * (len(columns) - 1) for i in (1, 2, 3)])
    (run / "report.json").write_text(json.dumps({"iterations": 3, "evaluation": {}}))
    if algorithm is not None:  # else a run without config.json: only its columns tell
        (run / "config.json").write_text(json.dumps({"algorithm": algorithm, "seed": 0}))
    holds = {"dqn": "a dqn run (its config.json says so)",
             "imitation": "an imitation run (its config.json says so)", None: "a run"}[algorithm]
    expected = (f"{run} holds {holds}, whose metrics.csv lacks {missing}: figures draws an "
                "AlphaZero run's training curves (a run of gomoku-jax train with an alphazero "
                "config, such as experiments/configs/az_9x9_cpu.json)")
    with pytest.raises(ValueError) as error:
        figures.training_curves(run)
    assert str(error.value) == expected
    # as a script: one error line, status 2, no picture and no round robin
    monkeypatch.setattr(figures, "tournament", lambda *a, **k: pytest.fail("games were played"))
    monkeypatch.setattr("sys.argv", ["experiments/figures.py"])
    from experiments.common import run_script

    for extra in ([], ["--skip-tournament"]):
        with pytest.raises(SystemExit) as exit_info:
            run_script(lambda: figures.main(["--run", str(run), *extra]))
        assert exit_info.value.code == 2
        out, err = capsys.readouterr()
        assert err == f"figures: error: {expected}\n" and out == ""
    assert not (run / "training_curves.png").exists()


def test_a_damaged_metrics_file_is_refused_naming_it(tmp_path):
    run = _run(tmp_path, sparring=False)
    (run / "metrics.csv").write_bytes(b"\x00\xff\xfe not text")
    with pytest.raises(ValueError, match=re.escape(f"{run / 'metrics.csv'} is unreadable")):
        figures.training_curves(run)


@pytest.mark.parametrize("argv, why", [
    ([], "final.gjx: no such params file"),
    (["--opening-stones", "9"], "--opening-stones must be at most 2"),
])
def test_a_round_robin_that_cannot_start_is_refused_before_the_curves_are_drawn(
        argv, why, tmp_path, monkeypatch):
    import shutil

    run = _run(tmp_path, sparring=False)
    if argv:  # the run's agent is there; the openings do not fit its game
        shutil.copy(figures.RUN / "final.gjx", run / "final.gjx")
    monkeypatch.setattr(figures, "tournament", lambda *a, **k: pytest.fail("games were played"))
    with pytest.raises(ValueError, match=why):
        figures.main(["--run", str(run), *argv])
    assert not (run / "training_curves.png").exists()
