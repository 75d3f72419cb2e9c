"""The sweep benchmark: runs sharing programs against runs compiling their own."""

import json
import pathlib

import pytest

from experiments import bench_sweep as bench
from gomoku_jax import cli

DQN = pathlib.Path(__file__).parents[1] / "experiments" / "configs" / "dqn_9x9_cpu.json"


def test_shared_runs_trace_once_and_separate_runs_each(tmp_path, capsys):
    out = tmp_path / "sweep.json"
    report = bench.main(["--config", str(DQN), "--key", "train.gamma", "--values", "0.9",
                         "0.95", "--out", str(out)])
    assert [r["traces"] for r in report["compiled_per_run"]] == [1, 1]
    assert [r["traces"] for r in report["shared"]] == [1, 0]
    assert [r["value"] for r in report["shared"]] == [0.9, 0.95]  # JSON values, parsed
    assert report["ratio"] == pytest.approx(report["compiled_per_run_s"] / report["shared_s"])
    assert json.loads(out.read_text())["device"] == report["device"]
    text = capsys.readouterr().out
    assert "Sweep of train.gamma over [0.9, 0.95] (dqn_9x9_cpu.json, variant smoke)" in text
    assert report["device"] in text


@pytest.mark.parametrize("argv, message", [
    (["--key", "train.learning_rat"], "learning_rat"),
    (["--set", "noequals"], "key=value"),
    (["--values", "-1"], "learning_rate"),
])
def test_bad_input_fails_before_compiling(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["bench", "sweep", *argv])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err
