"""Sweeps: one tiny training run per value of a config key, and the tables and plot."""

import json
import pathlib
import re

import jax
import pytest

from algorithms import common
from gomoku_jax import config as cfglib
from gomoku_jax import networks, sweep

CONFIG = pathlib.Path(__file__).parents[1] / "experiments" / "configs" / "az_9x9_cpu.json"


def _params(agent):
    return networks.param_count(agent.params["params"])


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("sweep")
    seen = []

    def evaluate(agent, env):
        seen.append((agent, env))
        return {"parameters": _params(agent)}

    rows = sweep.sweep(CONFIG, "network.options.filters", [4, 8], iterations=1, workdir=workdir,
                       variant="smoke", overrides={"eval.final_games": 0},
                       evaluate=evaluate, devices=jax.devices()[:1])
    return workdir, rows, seen


def test_one_run_per_value_differing_only_in_the_swept_key(swept):
    workdir, rows, seen = swept
    assert [r["value"] for r in rows] == [4, 8] and len(seen) == 2
    configs = [json.loads((pathlib.Path(r["run"]) / "config.json").read_text()) for r in rows]
    assert [c["network"]["options"]["filters"] for c in configs] == [4, 8]
    for c in configs:  # the smoke variant and the overrides reached both runs
        c["network"]["options"].pop("filters")
        assert c["eval"]["final_games"] == 0 and c["selfplay"]["batch"] == 8
    assert configs[0] == configs[1]
    for row in rows:
        assert row["iterations"] == 1 and row["network.options.filters"] == row["value"]
        assert row["stopped_because"] is None  # stopped by ``iterations``, not early
        assert {"loss", "policy_loss", "value_loss"} <= set(row)
        assert (pathlib.Path(row["run"]) / "final.gjx").exists()
    # The evaluation saw each run's own exported agent: more filters, more parameters.
    assert rows[0]["parameters"] < rows[1]["parameters"]
    assert all(env.size == 9 and env.k == 5 for _, env in seen)
    assert json.loads((workdir / "sweep.json").read_text())[1]["value"] == 8


def test_a_sweep_over_a_traced_setting_compiles_once(tmp_path):
    common.clear_programs()
    rows = sweep.sweep(CONFIG, "train.learning_rate", [1e-3, 4e-3], iterations=1,
                       workdir=tmp_path, variant="smoke", overrides={"eval.final_games": 0},
                       devices=jax.devices()[:1])
    # one init and one iteration program served both runs (two each if compiled per run)
    assert sorted(key[1] for key in common._PROGRAMS) == ["init", "iteration"]
    assert rows[0]["loss"] != rows[1]["loss"]  # and each run trained at its own rate


def test_a_run_that_diverges_is_a_row_and_the_other_values_still_train(tmp_path,
                                                                       monkeypatch):
    from gomoku_jax import training

    check = training.check_finite

    def nan_at_the_low_rate(variables, metrics, iteration, saved, workdir, **kwargs):
        if "=0.001" in str(workdir):  # as if that run's loss had turned NaN
            metrics = dict(metrics, loss=float("nan"))
        return check(variables, metrics, iteration, saved, workdir, **kwargs)

    monkeypatch.setattr(training, "check_finite", nan_at_the_low_rate)
    settings = dict(iterations=1, workdir=tmp_path, variant="smoke",
                    overrides={"eval.final_games": 0}, devices=jax.devices()[:1])
    rows = sweep.sweep(CONFIG, "train.learning_rate", [1e-3, 4e-3], **settings)
    bad, good = (pathlib.Path(r["run"]) for r in rows)
    assert rows[0]["stopped_because"].startswith(
        f"diverged: training in {bad} diverged at iteration 1: loss is nan.")
    assert rows[0]["iterations"] == 1 and "loss" in rows[0]  # the logged row is read
    assert not (bad / "final.gjx").exists() and (bad / training.DIVERGED).exists()
    assert rows[1]["stopped_because"] is None and (good / "final.gjx").exists()
    assert not (good / training.DIVERGED).exists()
    # Again: the diverged run is read back, not trained again (it would diverge again).
    trained = []
    run = training.run
    monkeypatch.setattr(training, "run", lambda learner, workdir, **kw: (
        trained.append(pathlib.Path(workdir)), run(learner, workdir, **kw))[1])
    again = sweep.sweep(CONFIG, "train.learning_rate", [1e-3, 4e-3], **settings)
    assert trained == [good]  # the finished run says it is finished; the other is skipped
    # every column, train_seconds too: it is the runs' logged time, not this call's
    assert again == rows and rows[1]["train_seconds"] > 0


def test_the_table_has_one_row_per_run(swept):
    _, rows, _ = swept
    table = sweep.sweep_table_markdown(rows).splitlines()
    assert table[0].startswith("| network.options.filters | iterations |")
    assert [line.split("|")[1].strip() for line in table[2:]] == ["4", "8"]
    assert "parameters" not in table[0]
    assert sweep.sweep_table_markdown(rows, ["parameters"]).splitlines()[2] == (
        f"| 4 | {rows[0]['parameters']} |")
    # the swept key among the columns is not shown twice
    assert sweep.sweep_table_markdown(rows, ["network.options.filters", "parameters"]) == (
        sweep.sweep_table_markdown(rows, ["parameters"]))


def test_bad_sweeps_fail_before_training(tmp_path):
    for values in (0.01, "0.01", {"a": 1}, []):  # one value where a list of them is due
        with pytest.raises(ValueError, match="values must be a non-empty list of values for "
                                             "'train.learning_rate', got"):
            sweep.sweep(CONFIG, "train.learning_rate", values, workdir=tmp_path)
    for bad, why in ((dict(games=2), "pass_wins must be from 1 to games=2, got 8"),
                     (dict(step=0), "step must be a positive integer, got 0"),
                     (dict(opening_stones=-1), "opening_stones must be a non-negative")):
        with pytest.raises(ValueError, match=f"ladder: {why}"):  # when made, not after a run
            sweep.ladder_evaluator(**bad)
    assert not any(tmp_path.iterdir())
    with pytest.raises(cfglib.ConfigError, match="network.options.filterz|filterz"):
        sweep.sweep(CONFIG, "network.filterz", [1], workdir=tmp_path, variant="smoke")
    with pytest.raises(cfglib.ConfigError, match="train.learning_rate"):
        sweep.sweep(CONFIG, "train.learning_rate", [1e-3, "fast"], workdir=tmp_path,
                    variant="smoke")
    with pytest.raises(ValueError, match="values must be a non-empty"):
        sweep.sweep(CONFIG, "train.learning_rate", [], workdir=tmp_path)
    with pytest.raises(ValueError, match="overrides also set the swept key"):
        sweep.sweep(CONFIG, "seed", [1], workdir=tmp_path, overrides=["seed=2"])
    with pytest.raises(cfglib.ConfigError, match="override 'train.l2' is given twice"):
        sweep.sweep(CONFIG, "seed", [1], workdir=tmp_path,
                    overrides=["train.l2=0.1", "train.l2=0.2"])
    with pytest.raises(ValueError, match="iterations must be a positive integer"):
        sweep.sweep(CONFIG, "seed", [1], workdir=tmp_path, iterations=0)
    # more iterations than the config trains would silently stop at the config's count
    with pytest.raises(ValueError, match=r"sweep \(the run train.iterations=2\): iterations 3 "
                                         r"is more than train.iterations=2, where"):
        sweep.sweep(CONFIG, "train.iterations", [4, 2], workdir=tmp_path, iterations=3)
    with pytest.raises(TypeError, match="workdir must be the sweep's folder \\(a path\\), "
                                        "got None"):
        sweep.sweep(CONFIG, "seed", [1], workdir=None)
    (tmp_path / "a_file").write_text("")
    with pytest.raises(ValueError, match=r"workdir \S*a_file exists and is not a folder; give a "
                                         r"folder for the sweep's runs"):
        sweep.sweep(CONFIG, "seed", [1], workdir=tmp_path / "a_file")
    (tmp_path / "a_file").unlink()
    assert not list(tmp_path.iterdir())  # nothing was trained


def test_a_batch_that_does_not_divide_over_the_devices_fails_before_training(tmp_path,
                                                                          monkeypatch):
    from gomoku_jax import training

    assert len(jax.devices()) == 4
    trained = []  # it was refused only when its run came, after the runs before it
    monkeypatch.setattr(training, "run", lambda learner, workdir, **kw: trained.append(workdir))
    with pytest.raises(cfglib.ConfigError, match=r"sweep \(the run train.batch_size=6\): "
                                                 r"train.batch_size \(6\) must be a multiple "
                                                 r"of the number of devices \(4\)"):
        sweep.sweep(CONFIG, "train.batch_size", [32, 6], workdir=tmp_path, variant="smoke")
    assert trained == [] and not any(tmp_path.iterdir())


def test_ladder_table_and_plot_from_rows(tmp_path):
    def level(sims, wins):
        return {"simulations": sims, "wins": wins, "losses": 10 - wins, "draws": 0, "games": 10}

    rows = [
        {"key": "network.options.blocks", "value": 1, "ladder_cleared": 300,
         "ladder": [level(200, 10), level(300, 9), level(400, 6)]},
        {"key": "network.options.blocks", "value": 2, "ladder_cleared": 200,
         "ladder": [level(200, 8), level(300, 7)]},
    ]
    assert sweep.ladder_table_markdown(rows).splitlines() == [
        "| pure MCTS simulations | network.options.blocks=1 | network.options.blocks=2 |",
        "|---|---|---|",
        "| 200 | 10 | 8 |",
        "| 300 | 9 | 7 |",
        "| 400 | 6 |  |",
    ]
    assert "| 1 | 300 |" in sweep.sweep_table_markdown(rows)
    fig = sweep.plot_sweep(rows, path=tmp_path / "sweep.png")
    assert (tmp_path / "sweep.png").stat().st_size > 0
    assert [ax.get_ylabel() for ax in fig.axes] == ["ladder_cleared (simulations)",
                                                     "wins of 10"]
    assert fig.axes[1].get_title() == "ladder against pure MCTS"
    # ladders that name their opponent (arena.ladder's levels do): named in both
    for row in rows:
        row["ladder"] = [{**lvl, "opponent": f"uct-{lvl['simulations']}"} for lvl in row["ladder"]]
    assert sweep.ladder_table_markdown(rows).splitlines()[0].startswith("| uct simulations |")
    fig = sweep.plot_sweep(rows)
    assert fig.axes[1].get_title() == "ladder against uct"
    assert fig.axes[1].get_xlabel() == "uct simulations"
    with pytest.raises(ValueError, match="no row has a ladder"):
        sweep.ladder_table_markdown([{"key": "k", "value": 1}])


def test_run_folders_of_long_values_differ_and_short_ones_keep_their_names():
    short = {"blocks": 1}
    assert sweep._slug(short) == "blocks_1" and sweep._slug(0.01) == "0.01"
    long_a = {"name": "se-resnet", "options": {"blocks": 1, "filters": 4}}
    long_b = {"name": "se-resnet", "options": {"blocks": 1, "filters": 8}}
    a, b = sweep._slug(long_a), sweep._slug(long_b)
    assert a != b and len(a) <= 40 and len(b) <= 40
    assert a.startswith("name_se-resnet_options_blocks_1") and a == sweep._slug(dict(long_a))


def test_a_row_keeps_every_logged_metric_but_periodic_scores(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("iteration,loss,win_rate,q_mean,phase,eval_random,empty,seconds\n"
                    "1,0.5,0.25,0.1,0,0.5,,12.5\n2,0.4,0.75,0.2,1,1.0,,2.25\n")
    logged = sweep._metrics_rows(path)
    assert sweep._last_metrics(logged) == {"loss": 0.4, "win_rate": 0.75, "q_mean": 0.2,
                                           "phase": 1.0, "seconds": 2.25}
    assert sweep._train_seconds(logged) == 14.75  # every iteration's, not the last one's
    assert sweep._train_seconds(sweep._metrics_rows(tmp_path / "none.csv")) is None
    # the median iteration after the first, which compiled
    path.write_text("iteration,seconds\n1,30.0\n2,2.0\n3,3.0\n4,2.5\n")
    assert sweep._iteration_seconds(sweep._metrics_rows(path)) == 2.5
    path.write_text("iteration,seconds\n1,30.0\n2,2.0\n")
    assert sweep._iteration_seconds(sweep._metrics_rows(path)) == 2.0
    path.write_text("iteration,seconds\n1,30.0\n")
    assert sweep._iteration_seconds(sweep._metrics_rows(path)) == 30.0
    assert sweep._iteration_seconds(sweep._metrics_rows(tmp_path / "none.csv")) is None


def test_plot_default_is_the_first_opponents_score_and_leaves_pyplot_alone(tmp_path):
    import matplotlib

    backend = matplotlib.get_backend()
    rows = [{"key": "seed", "value": v, "eval_random": 0.5 + v / 10, "eval_heuristic": 0.0}
            for v in (1, 2)]
    matplotlib.use("svg")  # a notebook's backend, say: saving a figure must keep it
    try:
        fig = sweep.plot_sweep(rows, path=tmp_path / "sweep.png")
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(backend)
    assert (tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert fig.axes[0].get_ylabel() == "eval_random"  # not the alphabetical first
    assert [p.get_height() for p in fig.axes[0].patches] == pytest.approx([0.6, 0.7])
    assert sweep.sweep_table_markdown(rows).splitlines()[0] == (
        "| seed | eval_random | eval_heuristic |")


@pytest.fixture
def fake_training(monkeypatch):
    """Sweeps that build every config but train nothing: the run folders that
    `training.run` was asked to train, in order."""
    import types

    import algorithms
    from gomoku_jax import exported, training

    entry = algorithms.learner_entry
    monkeypatch.setattr(algorithms, "learner_entry",
                        lambda name: (entry(name)[0], lambda cfg, **kw: cfg))
    trained = []

    def run(cfg, workdir, **kw):  # the "learner" is its config; stored as training does
        trained.append(pathlib.Path(workdir).name)
        pathlib.Path(workdir).mkdir(parents=True, exist_ok=True)
        (pathlib.Path(workdir) / "config.json").write_text(json.dumps(
            {"algorithm": "alphazero", **cfglib.to_dict(cfg)}))
        return {"iterations": 1, "evaluation": {}}

    monkeypatch.setattr(training, "run", run)
    monkeypatch.setattr(exported, "load", lambda path, name=None: types.SimpleNamespace(
        agent=None, env=None))
    return trained


def test_numpy_values_are_taken_as_python_values(tmp_path, fake_training):
    import numpy as np

    rows = sweep.sweep(CONFIG, "network.options.blocks", np.arange(1, 3),
                       iterations=np.int64(1), workdir=tmp_path, variant="smoke",
                       overrides={"train.l2": np.float32(0.5)})
    assert fake_training == ["00_network.options.blocks=1", "01_network.options.blocks=2"]
    assert [r["value"] for r in rows] == [1, 2] and type(rows[0]["value"]) is int
    rows = sweep.sweep(CONFIG, "train.unroll", [np.bool_(False)], iterations=1,
                       workdir=tmp_path, variant="smoke")
    assert rows[0]["value"] is False


def test_float32_and_bfloat16_values_keep_their_shortest_decimal(tmp_path, fake_training):
    import jax.numpy as jnp
    import numpy as np

    for values in (np.logspace(-3, -2, 2, dtype=np.float32), jnp.array([0.001, 0.01]),
                   jnp.array([0.001, 0.01], dtype=jnp.bfloat16)):  # not 0.00099945068359375
        rows = sweep.sweep(CONFIG, "train.learning_rate", values, iterations=1,
                           workdir=tmp_path / f"{type(values).__name__}_{values.dtype}",
                           variant="smoke")
        assert [r["value"] for r in rows] == [0.001, 0.01]  # not 0.0010000000474974513
        assert fake_training[-2:] == ["00_train.learning_rate=0.001",
                                      "01_train.learning_rate=0.01"]


def test_repeated_values_and_a_single_override_string_are_refused(tmp_path, fake_training):
    with pytest.raises(ValueError, match="values must differ \\(each trains its own run\\), "
                                         "but 'train.learning_rate' gets 0.01 more than once"):
        sweep.sweep(CONFIG, "train.learning_rate", [0.01, 0.02, 0.01], workdir=tmp_path)
    with pytest.raises(TypeError, match="overrides must be a dict or a list of 'key=value' "
                                        "strings, got a single string 'eval.final_games=0'"):
        sweep.sweep(CONFIG, "seed", [1], workdir=tmp_path, overrides="eval.final_games=0")
    assert fake_training == []


def test_an_override_inside_the_swept_key_is_refused_not_dropped(tmp_path, fake_training):
    """Overrides apply before the swept value, and a value of ``network.options`` replaces
    the whole mapping: ``network.options.filters=8`` would reach no run."""
    for overrides in ({"network.options.filters": 8}, ["network.options.filters=8"]):
        with pytest.raises(ValueError, match=r"overrides set 'network.options.filters', "
                                             r"inside the swept key 'network.options'"):
            sweep.sweep(CONFIG, "network.options", [{"blocks": 1}, {"blocks": 2}],
                        iterations=1, workdir=tmp_path, variant="smoke", overrides=overrides)
    assert fake_training == [] and not any(tmp_path.iterdir())
    # beside the swept key, the same override reaches every run
    rows = sweep.sweep(CONFIG, "network.options.blocks", [1, 2], iterations=1,
                       workdir=tmp_path, variant="smoke",
                       overrides={"network.options.filters": 8})
    assert [json.loads((pathlib.Path(r["run"]) / "config.json").read_text())["network"][
        "options"]["filters"] for r in rows] == [8, 8]


def test_values_that_give_the_same_config_are_refused(tmp_path, fake_training):
    """A value that only restates what another leaves to the defaults trains the same
    run: refused before anything trains."""
    with pytest.raises(ValueError, match=r"gives the same config as "
                                         r"network.options=\{'blocks': 1, 'filters': 8\}"):
        sweep.sweep(CONFIG, "network.options",
                    [{"blocks": 1, "filters": 8}, {"blocks": 1, "filters": 8,
                                                   "policy_channels": 2}],
                    workdir=tmp_path, variant="smoke")
    assert fake_training == []
    rows = sweep.sweep(CONFIG, "network.options",
                       [{"blocks": 1, "filters": 8}, {"blocks": 1, "filters": 8,
                                                      "policy_channels": 3}],
                       iterations=1, workdir=tmp_path / "differ", variant="smoke")
    assert len(rows) == 2


def test_evaluate_and_ladder_settings_are_checked_before_training(tmp_path, fake_training):
    for evaluate, why in ((5, "evaluate must be a function evaluate\\(agent, env\\)"),
                          (sweep.ladder_evaluator, "evaluate is ladder_evaluator itself")):
        with pytest.raises(TypeError, match=why):
            sweep.sweep(CONFIG, "seed", [1, 2], workdir=tmp_path, evaluate=evaluate)
    for bad, why in ((dict(seed=None), "seed must be an integer from 0 to 4294967295, got None"),
                     (dict(seed=1.5), "seed must be an integer from 0 to 4294967295, got 1.5"),
                     (dict(seed=-1), "seed must be an integer from 0 to 4294967295, got -1"),
                     (dict(start=200, max_simulations=100),
                      "max_simulations must be at least start=200"),
                     (dict(opponent="pure_mcts"), "opponent must be one of pure-mcts, uct")):
        with pytest.raises(ValueError, match=f"ladder: {why}"):
            sweep.ladder_evaluator(**bad)
    evaluate = sweep.ladder_evaluator(opening_stones=8)  # at most 2(k-1): fine on k=5
    with pytest.raises(ValueError, match=r"sweep \(the run game.k=4\): ladder: opening_stones "
                                         r"must be at most 2\*\(k-1\) = 6"):
        sweep.sweep(CONFIG, "game.k", [5, 4], workdir=tmp_path, evaluate=evaluate)
    assert fake_training == []


def test_a_sweep_of_the_algorithm_is_refused_in_the_sweeps_words(tmp_path, fake_training):
    with pytest.raises(cfglib.ConfigError, match=r"an override algorithm=\"dqn\" \(from "
                                                 r"--set, a sweep or overrides=\)"):
        sweep.sweep(CONFIG, "algorithm", ["dqn"], iterations=1, workdir=tmp_path)
    # a value the config refuses names its run and that it came with the sweep
    with pytest.raises(cfglib.ConfigError) as err:
        sweep.sweep(CONFIG, "train.batch_size", [8, "eight"], iterations=1, workdir=tmp_path)
    assert str(err.value).startswith("sweep (the run train.batch_size='eight'): "
                                     "train.batch_size: "), err.value
    assert str(err.value).endswith(f"(from the overrides, not config file {str(CONFIG)!r})")
    assert fake_training == []


def test_a_run_folder_of_another_config_is_refused_before_training(tmp_path, fake_training):
    from gomoku_jax import training

    def run_folder(name, l2, *files):  # an earlier sweep's run, at train.l2=l2
        import algorithms

        config_class = algorithms.learner_entry("alphazero")[0]
        cfg, _ = cfglib.load_file(config_class, CONFIG, variants=["smoke"],
                                  overrides={"train.l2": l2, "train.learning_rate": 1.0})
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"algorithm": "alphazero",
                                                        **cfglib.to_dict(cfg)}))
        for file in files:
            (folder / file).write_text(json.dumps({"iteration": 1, "reason": "loss is nan"}))

    # A run that diverged at another train.l2: not read back as this config's run.
    run_folder("00_train.learning_rate=1.0", 1e-4, training.DIVERGED)
    settings = dict(workdir=tmp_path, variant="smoke", overrides={"train.l2": 0.01})
    with pytest.raises(ValueError, match=r"00_train.learning_rate=1.0 holds another experiment "
                                         r"\(its config.json differs:\n  train.l2: stored "
                                         r"0.0001, given 0.01\n\), not the run "
                                         r"train.learning_rate=1.0; choose another workdir"):
        sweep.sweep(CONFIG, "train.learning_rate", [1.0], **settings)
    # At its own config it is read back, not trained again.
    rows = sweep.sweep(CONFIG, "train.learning_rate", [1.0], workdir=tmp_path, variant="smoke",
                       overrides={"train.l2": 1e-4})
    assert rows[0]["stopped_because"] == "diverged: loss is nan" and fake_training == []
    # A finished run of another config is refused before the runs before it train.
    run_folder("01_train.learning_rate=2.0", 1e-4, "final.gjx")
    with pytest.raises(ValueError, match=r"01_train.learning_rate=2.0 holds another experiment"):
        sweep.sweep(CONFIG, "train.learning_rate", [0.5, 2.0], **settings)
    assert fake_training == []


def test_bad_rows_columns_metrics_and_paths_are_named(tmp_path):
    rows = [{"key": "seed", "value": v, "run": f"r{v}", "stopped_because": None, "loss": 0.5}
            for v in (1, 2)]
    for call in (sweep.sweep_table_markdown, sweep.ladder_table_markdown, sweep.plot_sweep):
        with pytest.raises(TypeError, match=f"{call.__name__}: rows must be a list of sweep's "
                                            "rows \\(dicts with 'key' and 'value'\\), got {"):
            call(rows[0])
    with pytest.raises(TypeError, match="columns must be a list of column names, got 'loss'"):
        sweep.sweep_table_markdown(rows, columns="loss")
    with pytest.raises(ValueError, match="sweep_table_markdown: no row has 'los' \\(the rows "
                                         "have: key, value, run, stopped_because, loss\\)"):
        sweep.sweep_table_markdown(rows, columns=["los"])
    for metric, cell in (("run", "'r1'"), ("stopped_because", "None")):
        with pytest.raises(ValueError, match=f"plot_sweep: metric '{metric}' is not numeric: "
                                             f"the run seed=1 has {cell}"):
            sweep.plot_sweep(rows, metric=metric)
    for name in ("plot", "plot.txt"):
        with pytest.raises(ValueError, match=r"plot_sweep: path must end in a picture "
                                             rf"format's suffix .*, got '.*{name}'"):
            sweep.plot_sweep(rows, path=tmp_path / name)
    assert not any(tmp_path.iterdir())


def test_a_value_inserted_later_leaves_the_runs_already_there_in_their_folders(
        tmp_path, fake_training):
    """Run folders are numbered by position; a value already trained at another position
    (a value was inserted before it) is resumed or read back from its folder."""
    sweep.sweep(CONFIG, "train.learning_rate", [0.001, 0.004], iterations=1,
                workdir=tmp_path, variant="smoke")
    rows = sweep.sweep(CONFIG, "train.learning_rate", [0.001, 0.002, 0.004], iterations=1,
                       workdir=tmp_path, variant="smoke")
    assert fake_training[2:] == ["00_train.learning_rate=0.001",
                                 "01_train.learning_rate=0.002",
                                 "01_train.learning_rate=0.004"]  # its own folder, again
    assert [pathlib.Path(r["run"]).name for r in rows] == fake_training[2:]
    assert not (tmp_path / "02_train.learning_rate=0.004").exists()
    # a same-value folder of another config is not taken over: the value trains in its own
    other = tmp_path / "other"
    sweep.sweep(CONFIG, "train.learning_rate", [0.004], iterations=1, workdir=other,
                variant="smoke", overrides={"train.l2": 0.5})
    sweep.sweep(CONFIG, "train.learning_rate", [0.001, 0.004], iterations=1, workdir=other,
                variant="smoke")
    assert fake_training[-2:] == ["00_train.learning_rate=0.001",
                                  "01_train.learning_rate=0.004"]


def test_a_run_already_past_the_sweeps_iterations_is_refused_before_training(
        tmp_path, fake_training):
    run = tmp_path / "01_train.learning_rate=0.004"
    (run / "checkpoints" / "2").mkdir(parents=True)  # its latest checkpoint, iteration 2
    (run / "checkpoints" / "3.orbax-checkpoint-tmp").mkdir()  # an unfinished one: not it
    (run / "metrics.csv").write_text("iteration,loss\n1,0.5\n2,0.4\n3,0.3\n")
    with pytest.raises(ValueError, match=r"01_train.learning_rate=0.004 \(the run "
                                         r"train.learning_rate=0.004\) is already at iteration "
                                         r"2, past the sweep's iterations=1: .*ask for "
                                         r"iterations=2 or more"):
        sweep.sweep(CONFIG, "train.learning_rate", [0.001, 0.004], iterations=1,
                    workdir=tmp_path, variant="smoke")
    assert fake_training == []
    assert len(sweep.sweep(CONFIG, "train.learning_rate", [0.001, 0.004], iterations=2,
                           workdir=tmp_path, variant="smoke")) == 2


def test_an_evaluation_with_a_fingerprint_is_kept_and_not_played_again(tmp_path,
                                                                      fake_training):
    calls = []

    def evaluate(agent, env):
        calls.append(agent)
        return {"level": len(calls)}

    evaluate.fingerprint = {"mine": 1}
    for i in range(2):  # the runs' exported agents
        run = tmp_path / f"0{i}_train.learning_rate=0.00{i + 1}"
        run.mkdir()
        (run / "final.gjx").write_bytes(b"agent %d" % i)

    def sweep_once():
        return sweep.sweep(CONFIG, "train.learning_rate", [0.001, 0.002], iterations=1,
                           workdir=tmp_path, variant="smoke", evaluate=evaluate)

    first = sweep_once()
    assert [row["level"] for row in first] == [1, 2] and len(calls) == 2
    assert [row["level"] for row in sweep_once()] == [1, 2] and len(calls) == 2  # kept
    (tmp_path / "00_train.learning_rate=0.001" / "final.gjx").write_bytes(b"retrained")
    assert [row["level"] for row in sweep_once()] == [3, 2]  # another agent: played again
    evaluate.fingerprint = {"mine": 2}  # other settings: both played again
    assert [row["level"] for row in sweep_once()] == [4, 5]
    (tmp_path / "01_train.learning_rate=0.002" / "sweep_evaluation.json").write_text("{oops")
    assert [row["level"] for row in sweep_once()] == [4, 6]  # unreadable: played again
    del evaluate.fingerprint  # without one: played on every call, nothing kept
    assert [row["level"] for row in sweep_once()] == [7, 8]
    # the ladder's settings are its fingerprint
    assert sweep.ladder_evaluator(start=200, opponent="uct").fingerprint["ladder"] == {
        "start": 200, "step": 100, "games": 10, "pass_wins": 8, "max_simulations": 5000,
        "seed": 42, "opening_stones": 0, "opponent": "uct"}


def test_an_evaluation_that_would_replace_a_rows_entry_is_refused(tmp_path, fake_training):
    """An entry of evaluate's named like one of the row's (here the swept value, which
    the tables show) would replace it silently."""
    (tmp_path / "00_seed=1").mkdir()
    (tmp_path / "00_seed=1" / "final.gjx").write_bytes(b"agent")

    def evaluate(agent, env):
        return {"value": 0.25, "value_mean": 0.25}

    evaluate.fingerprint = {"mine": 1}
    with pytest.raises(ValueError, match=r"evaluate returned 'value' for .*00_seed=1, a "
                                         r"name the sweep's row has already"):
        sweep.sweep(CONFIG, "seed", [1], iterations=1, workdir=tmp_path, variant="smoke",
                    evaluate=evaluate)
    # not kept either: evaluate renamed under the same fingerprint is played again
    assert not (tmp_path / "00_seed=1" / "sweep_evaluation.json").exists()

    def renamed(agent, env):
        return {"value_mean": 0.25}

    renamed.fingerprint = {"mine": 1}
    rows = sweep.sweep(CONFIG, "seed", [1], iterations=1, workdir=tmp_path, variant="smoke",
                       evaluate=renamed)
    assert rows[0]["value"] == 1 and rows[0]["value_mean"] == 0.25


def test_an_evaluation_that_returns_no_dict_is_named(tmp_path, fake_training):
    (tmp_path / "00_seed=1").mkdir()
    (tmp_path / "00_seed=1" / "final.gjx").write_bytes(b"agent")
    for result, shown in ((0.75, "0.75"), ({("a", 1): 0.5}, r"\{\('a', 1\): 0.5\}")):
        with pytest.raises(TypeError, match=r"evaluate must return a dict of named results "
                                            rf"\(str keys\), .*final.gjx it returned {shown}"):
            sweep.sweep(CONFIG, "seed", [1], iterations=1, workdir=tmp_path,
                        variant="smoke", evaluate=lambda agent, env, r=result: r)


def test_an_object_value_written_in_another_key_order_finds_its_run(tmp_path, fake_training):
    values = [{"blocks": 1, "filters": 8}, {"blocks": 2, "filters": 8}]
    sweep.sweep(CONFIG, "network.options", values, iterations=1, workdir=tmp_path,
                variant="smoke")
    folders = sorted(p.name for p in tmp_path.iterdir())
    # the same values, their keys in another order (and at other positions)
    rows = sweep.sweep(CONFIG, "network.options", [dict(reversed(v.items())) for v in
                                                   values[::-1]],
                       iterations=1, workdir=tmp_path, variant="smoke")
    assert sorted(p.name for p in tmp_path.iterdir()) == folders  # no new run folders
    assert [pathlib.Path(r["run"]).name for r in rows] == [
        "01_network.options=blocks_2_filters_8", "00_network.options=blocks_1_filters_8"]
    # a value that is not one of them trains in its own folder
    sweep.sweep(CONFIG, "network.options", [{"filters": 8, "blocks": 3}], iterations=1,
                workdir=tmp_path, variant="smoke")
    assert fake_training[-1] == "00_network.options=filters_8_blocks_3"


def test_what_a_run_checks_as_it_starts_is_checked_before_any_value_trains(tmp_path):
    """A missing exported opponent in the second value: refused before the first value
    trains."""
    missing = str(tmp_path / "gone.gjx")
    with pytest.raises(ValueError, match=re.escape(
            f"sweep (the run eval.opponents=['{missing}']): eval.opponents[0]: {missing}: no "
            "such params file")):
        sweep.sweep(CONFIG, "eval.opponents", [["random"], [missing]], iterations=1,
                    workdir=tmp_path / "a", variant="smoke", devices=jax.devices()[:1])
    assert not (tmp_path / "a").exists()


def test_a_state_too_big_for_the_memory_is_refused_before_any_value_trains(tmp_path):
    with pytest.raises(ValueError, match=r"^sweep \(the run train.buffer_capacity=2000000000\): "
                                         r"the learner's state .* needs [\d.]+ GiB, more than"):
        sweep.sweep(CONFIG, "train.buffer_capacity", [4096, 2 * 10**9], iterations=1,
                    workdir=tmp_path / "b", variant="smoke", devices=jax.devices()[:1])
    assert not (tmp_path / "b").exists()


def test_a_run_that_diverged_past_the_sweeps_iterations_trains_to_them(tmp_path,
                                                                       fake_training):
    from gomoku_jax import training

    folder = tmp_path / "00_seed=1"
    folder.mkdir()
    (folder / training.DIVERGED).write_text(json.dumps({"iteration": 3, "reason": "nan"}))
    rows = sweep.sweep(CONFIG, "seed", [1], iterations=3, workdir=tmp_path, variant="smoke")
    assert rows[0]["stopped_because"] == "diverged: nan" and fake_training == []
    # a budget of 2 iterations ends before the divergence: its run is trained to it
    rows = sweep.sweep(CONFIG, "seed", [1], iterations=2, workdir=tmp_path, variant="smoke")
    assert fake_training == ["00_seed=1"] and rows[0]["stopped_because"] is None
    assert rows[0]["iterations"] == 1  # the fake training's report
