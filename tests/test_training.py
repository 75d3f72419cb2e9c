"""The training driver: logs, checkpoints, resume after a kill, export, the CLI."""

import csv
import dataclasses
import json
import os
import pathlib
import re
import shutil
import warnings

import jax
import numpy as np
import pytest

from algorithms import alphazero as az
from gomoku_jax import arena, cli, exported, training
from gomoku_jax import config as cfglib
from gomoku_jax import io as gio
from helpers import line_of

CONFIG = pathlib.Path(__file__).parents[1] / "experiments" / "configs" / "az_9x9_cpu.json"
TIMING = {"seconds", "moves_per_second"}


@pytest.fixture(scope="module")
def learner():
    cfg, _ = cfglib.load_file(az.AlphaZeroConfig, CONFIG, variants=["smoke"])
    return az.make_learner(cfg, devices=jax.devices()[:1])


class Killed(Exception):
    pass


def _rows(workdir):
    with (pathlib.Path(workdir) / "metrics.csv").open() as f:
        return [{k: v for k, v in r.items() if k not in TIMING} for r in csv.DictReader(f)]


def _variables(path):
    return jax.tree.leaves(exported.load_network(path)[3])


@pytest.fixture(scope="module")
def uninterrupted(learner, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("straight")
    report = training.run(learner, workdir, progress=False)
    return workdir, report


def test_a_run_writes_logs_checkpoints_reports_and_exports(learner, uninterrupted):
    workdir, report = uninterrupted
    iterations = learner.config.train.iterations
    rows = _rows(workdir)
    assert [int(r["iteration"]) for r in rows] == list(range(1, iterations + 1))
    assert {"loss", "policy_loss", "value_loss", "entropy", "kl", "explained_variance",
            "game_length", "buffer_fill", "eval_random"} <= set(rows[0]) | set(rows[1])
    assert list((workdir / "tensorboard").iterdir())
    assert gio.Checkpointer(workdir / "checkpoints", config=cfglib.to_dict(
        learner.config)).latest_step() == iterations
    assert json.loads((workdir / "config.json").read_text()) == {
        "algorithm": "alphazero", **cfglib.to_dict(learner.config)}
    assert (workdir / "eval" / "iter_000002.json").exists() and (workdir / "best.gjx").exists()
    # float32 metrics are written as their shortest decimals (0.002, not 0.00200000009...)
    shortest = lambda v: float(np.format_float_positional(np.float32(v), unique=True))
    floats = [v for row in rows for v in row.values()
              if re.fullmatch(r"-?[\d.]+(e-?\d+)?", v) and not v.isdigit()]
    assert floats and all(float(v) == shortest(v) for v in floats), floats
    games = learner.config.eval.final_games
    assert report["evaluation"]["random"]["games"] == games
    assert json.loads((workdir / "report.json").read_text()) == report
    assert report["device"] == arena.device_description()  # where the run trained
    assert f"(jax {jax.__version__})" in report["device"]
    # how many devices the learner trained on (its mesh, one of the process's four fake
    # CPU devices here) and how many processes ran it
    assert (report["devices"], report["processes"]) == (1, 1) and jax.device_count() == 4
    markdown = (workdir / "report.md").read_text()
    assert "| random |" in markdown
    assert f"\nTrained on 1 device in 1 process; device: {report['device']}.\n" in markdown
    env = learner.env  # the game, which the config's description need not name
    assert f"\nGame: {env.size}x{env.size} {env.k} in a row ({env.rule}).\n" in markdown


def test_resume_after_a_kill_equals_an_uninterrupted_run(learner, uninterrupted, tmp_path,
                                                         capsys):
    straight, report = uninterrupted

    def kill_at_two(iteration, metrics):
        if iteration == 2:  # logged, evaluated, best model written, not yet checkpointed
            raise Killed

    with pytest.raises(Killed):
        training.run(learner, tmp_path, progress=False, on_iteration=kill_at_two)
    assert len(_rows(tmp_path)) == 2
    capsys.readouterr()
    resumed = training.run(learner, tmp_path, progress=True)
    assert f"resuming {tmp_path} from its checkpoint of iteration 1" in capsys.readouterr().out
    assert _rows(tmp_path) == _rows(straight)
    for a, b in zip(_variables(tmp_path / "final.gjx"), _variables(straight / "final.gjx")):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(_variables(tmp_path / "best.gjx"), _variables(straight / "best.gjx")):
        np.testing.assert_array_equal(a, b)
    strip = lambda r: {k: {kk: vv for kk, vv in v.items() if kk != "seconds_per_move"}
                       for k, v in r["evaluation"].items()}
    assert strip(resumed) == strip(report)


def test_a_run_trained_in_parts_equals_an_uninterrupted_run(learner, uninterrupted, tmp_path):
    # ``iterations`` stops after the evaluation an uninterrupted run makes there
    straight, report = uninterrupted
    every = learner.config.eval.every
    assert 0 < every < learner.config.train.iterations
    first = training.run(learner, tmp_path, iterations=every, progress=False)
    assert first["iterations"] == every
    assert (tmp_path / "eval" / f"iter_{every:06d}.json").exists()
    second = training.run(learner, tmp_path, progress=False)
    assert "trained_on" not in second  # both parts on the same device: one placement
    assert [json.loads(line)["from"] for line in
            (tmp_path / training.STARTS).read_text().splitlines()] == [0, every]
    assert _rows(tmp_path) == _rows(straight)
    assert sorted(p.name for p in (tmp_path / "eval").iterdir()) == sorted(
        p.name for p in (straight / "eval").iterdir())
    for a, b in zip(_variables(tmp_path / "best.gjx"), _variables(straight / "best.gjx")):
        np.testing.assert_array_equal(a, b)


def test_a_run_resumed_elsewhere_says_so_and_reports_each_part(learner, tmp_path,
                                                               monkeypatch, capsys):
    n = learner.config.train.iterations
    assert n >= 3
    here = arena.device_description()
    training.run(learner, tmp_path, iterations=1, progress=False)
    monkeypatch.setattr(training.arena, "device_description", lambda: "machine B")
    training.run(learner, tmp_path, iterations=2, progress=False)
    one = "1 device in 1 process"
    assert (f"{tmp_path} trained on {one} ({here}) up to iteration 1 and goes on on "
            f"{one} (machine B): from here it may differ from an uninterrupted run by the "
            "devices' rounding") in capsys.readouterr().out
    monkeypatch.setattr(training.arena, "device_description", lambda: "machine C")
    report = training.run(learner, tmp_path, progress=False)
    assert "goes on on 1 device in 1 process (machine C)" in capsys.readouterr().out
    assert report["device"] == "machine C"  # where the last part trained, as before
    assert report["trained_on"] == [
        {"iterations": [1, 1], "device": here, "devices": 1, "processes": 1},
        {"iterations": [2, 2], "device": "machine B", "devices": 1, "processes": 1},
        {"iterations": [3, n], "device": "machine C", "devices": 1, "processes": 1}]
    assert json.loads((tmp_path / "report.json").read_text()) == report
    markdown = (tmp_path / "report.md").read_text()
    assert (f"\nTrained in parts: iterations 1 to 1 on {one} ({here}); iterations 2 to 2 on "
            f"{one} (machine B); iterations 3 to {n} on {one} (machine C). After a change of "
            "devices a run may differ from an uninterrupted one by their rounding.\n"
            ) in markdown
    assert "Trained on 1 device" not in markdown


def test_a_checkpoint_of_another_config_is_refused(learner, uninterrupted, tmp_path):
    straight, _ = uninterrupted
    other = cfglib.from_dict(az.AlphaZeroConfig, cfglib.apply_overrides(
        cfglib.to_dict(learner.config), {"train.learning_rate": 0.5}))
    with pytest.raises(gio.CheckpointError, match=r"train.learning_rate.*0.002.*0.5"):
        training.restore(az.make_learner(other, devices=jax.devices()[:1]), straight)
    # another algorithm's config: said first (it was a list of some 35 differing keys)
    from algorithms import dqn

    dqn_cfg, _ = cfglib.load_file(dqn.DQNConfig, CONFIG.parent / "dqn_9x9_cpu.json",
                                  variants=["smoke"])
    with pytest.raises(gio.CheckpointError, match=rf"^{straight} holds a run of alphazero, and "
                                                  "this config trains dqn: choose another "
                                                  "--workdir$"):
        training.restore(dqn.make_learner(dqn_cfg, devices=jax.devices()[:1]), straight)


def test_a_run_from_before_a_setting_existed_resumes_with_its_default(learner, uninterrupted,
                                                                       tmp_path):
    straight, _ = uninterrupted
    shutil.copytree(straight / "checkpoints", tmp_path / "checkpoints")
    stored_path = tmp_path / "checkpoints" / "config.json"
    stored = json.loads(stored_path.read_text())
    assert stored["selfplay"]["gumbel_moves"] is None  # the default
    del stored["selfplay"]["gumbel_moves"]  # as written before the setting was added
    stored_path.write_text(json.dumps(stored))
    state, _ = training.restore(learner, tmp_path)
    assert int(state.iteration) == learner.config.train.iterations
    # a stored value other than today's default still differs
    stored["train"]["learning_rate"] = 0.5
    stored_path.write_text(json.dumps(stored))
    with pytest.raises(gio.CheckpointError, match=r"train.learning_rate.*0.5.*0.002"):
        training.restore(learner, tmp_path)


def test_exported_agent_loads_without_training_code_and_plays(uninterrupted):
    straight, _ = uninterrupted
    loaded = exported.load(straight / "final.gjx", simulations=4, name="exported")
    assert loaded.env.size == 9 and loaded.metadata["game"]["k"] == 5
    assert loaded.metadata["network"]["name"] == "resnet"
    result = arena.play_match(loaded.env, loaded.agent,
                              __import__("gomoku_jax").agents.random_agent(), 2)
    assert all(r.forfeit is None for r in result.records)
    bad = straight / "not_params.gjx"
    bad.write_bytes(b"hello")
    with pytest.raises(gio.CheckpointError, match="not a gomoku-jax params file"):
        exported.load_agent(bad)


def test_cli_export_and_bad_overrides(uninterrupted, tmp_path, capsys):
    straight, _ = uninterrupted
    out = tmp_path / "agent.gjx"
    assert cli.main(["export", "--workdir", str(straight), "--out", str(out)]) == 0
    for a, b in zip(_variables(out), _variables(straight / "final.gjx")):
        np.testing.assert_array_equal(a, b)
    # an existing file is kept unless --force, and the refusal comes before any work
    before = out.read_bytes()
    assert cli.main(["export", "--workdir", str(straight), "--out", str(out),
                     "--which", "best"]) == 2
    assert f"--out: {out} already exists; pass --force" in capsys.readouterr().err
    assert out.read_bytes() == before
    kept = tmp_path / "kept.gjx"  # a second name of the file --force replaces
    os.link(out, kept)
    assert cli.main(["export", "--workdir", str(straight), "--out", str(out),
                     "--which", "best", "--force"]) == 0
    assert out.read_bytes() == (straight / "best.gjx").read_bytes() != before
    # replaced in one step (renamed over it), never written in place: a copy cut short
    # would have left neither file whole
    assert kept.read_bytes() == before
    code = cli.main(["train", "--config", str(CONFIG), "--smoke", "--workdir", str(tmp_path),
                     "--set", "search.num_simulatons=8"])
    assert code == 2
    assert "unknown config key 'search.num_simulatons'" in capsys.readouterr().err
    assert cli.main(["export", "--workdir", str(tmp_path / "nothing"), "--out", str(out)]) == 2


def test_export_gives_the_runs_final_agent_whose_settings_config_json_may_not_hold_yet(
        uninterrupted, tmp_path, capsys):
    """A change stored only once the run trains on (eval.simulations of a finished run)
    is in final.gjx but not in config.json: export copies final.gjx when it is of the
    latest checkpoint, and exports that checkpoint afresh when it is not."""
    straight, report = uninterrupted
    work = tmp_path / "run"
    shutil.copytree(straight, work)
    sims = gio.read_exported(work / "final.gjx")[0]["search"]["num_simulations"]
    _rewrite_header(work / "final.gjx", work / "final.gjx", search__num_simulations=sims + 4)
    out = tmp_path / "agent.gjx"
    assert cli.main(["export", "--workdir", str(work), "--out", str(out)]) == 0
    assert out.read_bytes() == (work / "final.gjx").read_bytes()
    assert "copied from" in capsys.readouterr().out
    # final.gjx of an earlier iteration (a run resumed past it, then stopped): afresh
    _rewrite_header(work / "final.gjx", work / "final.gjx", iteration=1)
    assert cli.main(["export", "--workdir", str(work), "--out", str(out), "--force"]) == 0
    meta = gio.read_exported(out)[0]
    assert meta["iteration"] == report["iterations"] and meta["search"]["num_simulations"] == sims


def test_exported_file_as_an_agent_name_and_a_gomocup_brain(uninterrupted):
    import io as stdio

    from gomoku_jax import Gomoku, agents, gomocup

    straight, _ = uninterrupted
    path = str(straight / "final.gjx")
    agent = agents.make(path + "@4", Gomoku(9, 5))
    assert agent.name == path + "@4"
    with pytest.raises(ValueError, match=r"trained for 9x9 k=5 freestyle; this game is 15x15"):
        agents.make(path, Gomoku(15, 5))
    with pytest.raises(ValueError, match="missing.gjx: no such params file$"):
        agents.make(str(straight / "missing.gjx"), Gomoku(9, 5))
    # a relative path is looked for in the current folder, which the error names
    with pytest.raises(ValueError, match=re.escape(
            f"runs/missing.gjx: no such params file (in the current folder, {os.getcwd()})")):
        agents.make("runs/missing.gjx", Gomoku(9, 5))
    killer = agents.make(path + "@4+killer", Gomoku(9, 5))  # the +killer of an N-sims agent
    assert killer.name == path + "@4+killer"
    out = stdio.StringIO()
    gomocup.run_engine(path + "@4", stdio.StringIO("START 9\nBEGIN\nEND\n"), out)
    lines = out.getvalue().split()
    assert lines[0] == "OK"
    x, y = map(int, lines[1].split(","))
    assert 0 <= x < 9 and 0 <= y < 9


# The periodic evaluations' game count in `_run_with_scripted_scores`: it tells them apart
# from the final evaluation (``final_games``), which is played.
SCRIPTED_GAMES = 4


def _run_with_scripted_scores(learner, workdir, monkeypatch, scores, iterations=None,
                              **settings):
    """``(report, evaluated)``: a run of ``learner`` (to ``iterations``, None: all) whose
    config evaluates against random after every iteration but the last (which has the
    final evaluation), with ``settings`` (eval keys) on top. Its periodic evaluations are
    not played: they score ``scores`` in turn; the final one (``final_games`` games) is
    played. ``evaluated``: the ``(iteration, score)`` of each periodic evaluation as the
    run logged it. The evaluation settings do not enter the compiled iteration, so the
    same compiled learner serves."""
    import copy
    import dataclasses

    changed = copy.copy(learner)
    changed.config = dataclasses.replace(learner.config, eval=dataclasses.replace(
        learner.config.eval, every=1, opponents=("random",), games=SCRIPTED_GAMES,
        **settings))
    assert changed.config.eval.final_games != SCRIPTED_GAMES
    script = list(scores)
    play = training.evaluate

    def scripted(env, agent, opponents, games, seed, opening_stones, progress=False):
        if games != SCRIPTED_GAMES:  # the final evaluation
            return play(env, agent, opponents, games, seed, opening_stones, progress)
        if not script:
            pytest.fail(f"more periodic evaluations than the {len(scores)} scripted")
        score = script.pop(0)
        return {name: {"score": score, "games": games} for name in opponents}

    monkeypatch.setattr(training, "evaluate", scripted)
    evaluated = []
    report = training.run(changed, workdir, progress=False, iterations=iterations,
                          on_iteration=lambda it, m: evaluated.append((it, m["eval_random"]))
                          if "eval_random" in m else None)
    return report, evaluated


def _check_stopping(learner, workdir, report, evaluated, scores, stop, best, because):
    """A run of `_run_with_scripted_scores` stopped after iteration ``stop`` (None: it
    ran all its iterations, the last without a periodic evaluation), its best model from
    iteration ``best``, and said ``because`` (None: not stopped) in its reports."""
    total = learner.config.train.iterations
    done = total if stop is None else stop
    assert report["iterations"] == done
    assert [int(r["iteration"]) for r in _rows(workdir)] == list(range(1, done + 1))
    # an evaluation after every iteration up to the stop, each scoring what was scripted
    assert evaluated == list(zip(range(1, min(done, total - 1) + 1), scores))
    assert len(evaluated) == len(scores)
    assert report["stopped_early"] is (stop is not None)
    assert report["stopped_because"] == because
    markdown = (workdir / "report.md").read_text()
    if because is None:
        assert "Stopped early" not in markdown
    else:  # said in the report (which the CLI prints)
        assert f"Stopped early, {because}." in markdown
    assert report["best_iteration"] == best
    assert gio.read_exported(workdir / "best.gjx")[0]["iteration"] == best
    assert gio.read_exported(workdir / "final.gjx")[0]["iteration"] == done
    assert gio.Checkpointer(workdir / "checkpoints", config=cfglib.to_dict(
        learner.config)).latest_step() == done


@pytest.mark.parametrize("stop_score, scores, stop, best", [
    (0.0, [0.0], 1, 1),  # 0.0: the first evaluation always reaches it
    (0.5, [0.75], 1, 1),
    (0.5, [0.25, 0.5], 2, 2),  # reaching the score is enough
    (0.9, [0.25, 0.9], 2, 2),  # also where float32 (which keeps the best) rounds it down
    (0.5, [0.25, 0.375], None, 2),  # never reached: all iterations
    (0.5, [0.375, 0.25], None, 1),
])
def test_training_stops_once_an_evaluation_reaches_the_stop_score(
        learner, tmp_path, monkeypatch, stop_score, scores, stop, best):
    """`eval.stop_score`: the first evaluation whose first-opponent score reaches it ends
    training there, with the final evaluation and exports as usual."""
    assert learner.config.train.iterations == 3  # room for two periodic evaluations
    report, evaluated = _run_with_scripted_scores(
        learner, tmp_path, monkeypatch, scores, stop_score=stop_score, final_games=2)
    because = None if stop is None else (
        f"eval.stop_score: the score against random reached {scores[stop - 1]:.3f} "
        f"(>= {stop_score}) at iteration {stop}")
    _check_stopping(learner, tmp_path, report, evaluated, scores, stop, best, because)
    assert report["evaluation"]["random"]["games"] == 2  # the final evaluation was played


@pytest.mark.parametrize("settings, message", [
    ({"every": 0, "stop_score": 0.9}, "eval.stop_score (0.9) needs periodic evaluations"),
    ({"every": 0, "patience": 3}, "eval.patience (3) needs periodic evaluations: set "
                                  "eval.every above 0"),
    ({"every": 5, "stop_score": 1.5}, "eval.stop_score must be in [0.0, 1.0], got 1.5"),
    ({"games": 5}, "eval.games must be even, so that the agent plays black and white as "
                   "often (colours alternate), got 5"),
    ({"final_games": 25}, "eval.final_games must be even"),
    ({"opponents": ()}, "eval.opponents must be a non-empty list of agent names, got ()"),
])
def test_a_stop_score_without_evaluations_or_out_of_range_is_refused(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        az.EvalSettings(**settings)


@pytest.mark.parametrize("name, value", [("patience", 1), ("stop_score", 0.9)])
def test_early_stopping_with_no_periodic_evaluation_before_the_last_iteration_is_refused(
        name, value):
    """The last iteration has the final evaluation, not a periodic one: an ``every`` of
    the run's length (or more) leaves early stopping nothing to look at."""
    from algorithms import dqn

    for make in (az.AlphaZeroConfig, dqn.DQNConfig):
        train = dataclasses.replace(make().train, iterations=4)
        with pytest.raises(ValueError, match=re.escape(
                f"eval.{name} ({value}) needs periodic evaluations, but eval.every (4) "
                "leaves none before the last of train.iterations (4): set eval.every "
                "below 4")):
            make(train=train, eval=az.EvalSettings(every=4, **{name: value}))
        config = make(train=train, eval=az.EvalSettings(every=3, **{name: value}))
        assert getattr(config.eval, name) == value  # one at iteration 3: accepted


@pytest.mark.parametrize("config, overrides, message", [
    (CONFIG, {"eval.opponents": ["heuristic", "nosuch"]},
     "eval.opponents[1]: unknown agent 'nosuch'"),
    (CONFIG, {"eval.opponents": ["pure-mcts-abc"]}, "eval.opponents[0]: unknown agent"),
    (CONFIG, {"eval.opening_stones": 100}, "eval.opening_stones must be at most 2*(k-1) = 8"),
    (CONFIG, {"eval.opponents": ["heuristic", "random", "heuristic"]},
     "eval.opponents[2]: 'heuristic' is listed twice (eval.opponents[0] too)"),
    (CONFIG.with_name("dqn_9x9_cpu.json"), {"eval.opponents": ["nosuch"]},
     "eval.opponents[0]: unknown agent 'nosuch'"),
])
def test_evaluation_settings_are_checked_when_the_config_loads(config, overrides, message):
    import algorithms

    cls, _ = algorithms.learner_entry(cfglib.algorithm_of(config))
    with pytest.raises(ValueError, match=re.escape(message)):
        cfglib.load_file(cls, config, overrides=overrides)


def test_an_exported_opponent_is_read_when_training_starts_not_when_a_config_builds(
        learner, tmp_path):
    missing = str(tmp_path / "elsewhere" / "final.gjx")
    cfg, _ = cfglib.load_file(az.AlphaZeroConfig, CONFIG, variants=["smoke"],
                              overrides={"eval.opponents": ["random", missing + "@8"]})
    with pytest.raises(ValueError, match=r"eval.opponents\[1\]: .*no such params file"):
        training.check_evaluation(learner.env, cfg.eval.opponents, 1, load_files=True)
    with pytest.raises(ValueError, match=r"eval.opponents\[1\]: .*no such params file"):
        training.run(az.make_learner(cfg, devices=jax.devices()[:1]), tmp_path / "run",
                     progress=False)
    assert not (tmp_path / "run").exists()  # refused before anything, the folder too
    with pytest.raises(ValueError,
                       match=r"eval.opponents\[0\]: .*after '@' must be a whole number"):
        cfglib.load_file(az.AlphaZeroConfig, CONFIG, overrides={"eval.opponents": ["a.gjx@x"]})


@pytest.mark.parametrize("settings, scores, stop, best", [
    ({"patience": 1}, [0.5, 0.25], 2, 1),
    ({"patience": 1}, [0.5, 0.5], 2, 1),  # an equal score is no progress
    ({"patience": 1}, [0.9, 0.9], 2, 1),  # also one float32 rounds down (0.89999998)
    ({"patience": 1}, [0.8, 0.8], 2, 1),  # and one it rounds up (0.80000001)
    ({"patience": 1}, [0.0, 0.0], 2, 1),  # a first score of 0 is still the best so far
    ({"patience": 1}, [0.25, 0.5], None, 2),  # progress at every evaluation
    ({"patience": 2}, [0.5, 0.25], None, 1),  # one evaluation without progress of two
    ({"patience": 1, "stop_score": 0.9}, [0.5, 0.25], 2, 1),  # the score is never reached
])
def test_early_stopping_after_patience_evaluations_without_progress(
        learner, tmp_path, monkeypatch, settings, scores, stop, best):
    """The driver stops once `patience` evaluations in a row fail to beat the best score
    (seed 002); the best model stays the one of the best score."""
    assert learner.config.train.iterations == 3  # room for two periodic evaluations
    report, evaluated = _run_with_scripted_scores(
        learner, tmp_path, monkeypatch, scores, final_games=0, **settings)
    because = None if stop is None else (
        f"eval.patience: {settings['patience']} evaluation(s) in a row without beating "
        f"the best score against random ({scores[best - 1]:.3f}, iteration {best})")
    _check_stopping(learner, tmp_path, report, evaluated, scores, stop, best, because)
    assert report["evaluation"] == {}


def _digests(workdir):
    import hashlib

    return {p.relative_to(workdir): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(pathlib.Path(workdir).rglob("*")) if p.is_file()}


def test_a_finished_run_whose_checkpoints_are_gone_is_not_overwritten(learner, uninterrupted,
                                                                       tmp_path):
    straight, _ = uninterrupted
    results = tmp_path / "results"
    shutil.copytree(straight, results, ignore=shutil.ignore_patterns("checkpoints"))
    before = _digests(results)
    with pytest.raises(ValueError, match=r"holds a run's results \(final.gjx, report.json"):
        training.run(learner, results, progress=False)
    # its only checkpoint corrupt: the advice to start afresh names the results too
    damaged = tmp_path / "damaged"
    shutil.copytree(straight, damaged)
    steps = sorted(int(p.name) for p in (damaged / "checkpoints").iterdir() if p.name.isdigit())
    for step in steps[:-1]:
        shutil.rmtree(damaged / "checkpoints" / str(step))
    shutil.rmtree(damaged / "checkpoints" / str(steps[-1]) / gio._ITEM)
    with pytest.raises(gio.CheckpointError, match=r"(?s)Delete that directory to start afresh"
                       r".*; to start afresh, move the run's results \(final.gjx, report.json, "
                       r"report.md\) away too"):
        training.run(learner, damaged, progress=False)
    # another experiment's config in a workdir without checkpoints: named, not overwritten
    other = cfglib.from_dict(az.AlphaZeroConfig, cfglib.apply_overrides(
        cfglib.to_dict(learner.config), {"train.learning_rate": 0.5}))
    with pytest.raises(ValueError, match=r"(?s)another experiment.*train.learning_rate: stored "
                                         r"0.002, given 0.5"):
        training.run(az.make_learner(other, devices=jax.devices()[:1]), results, progress=False)
    assert _digests(results) == before
    # a finished run keeping one checkpoint, given another config: refused as that, without
    # advice to move the results away (the checkpoints would still refuse it)
    single = tmp_path / "single"
    shutil.copytree(straight, single)
    for step in steps[:-1]:
        shutil.rmtree(single / "checkpoints" / str(step))
    kept = _digests(single)
    with pytest.raises(gio.CheckpointError) as refused:
        training.run(az.make_learner(other, devices=jax.devices()[:1]), single, progress=False)
    assert "train.learning_rate: stored 0.002, given 0.5" in str(refused.value)
    assert "start afresh" not in str(refused.value)
    assert _digests(single) == kept
    # the same experiment interrupted before its first checkpoint starts again
    started = tmp_path / "started"
    started.mkdir()
    shutil.copy(straight / "config.json", started / "config.json")
    shutil.copy(straight / "metrics.csv", started / "metrics.csv")
    training._check_fresh_workdir(started, learner, "alphazero")


def test_a_start_that_got_nowhere_is_taken_over_by_another_config(learner, uninterrupted,
                                                                   tmp_path):
    straight, _ = uninterrupted
    other = az.make_learner(cfglib.from_dict(az.AlphaZeroConfig, cfglib.apply_overrides(
        cfglib.to_dict(learner.config), {"train.learning_rate": 0.5})), devices=jax.devices()[:1])
    # what a start that failed on bad data (or was stopped) before its first iteration left
    failed = tmp_path / "failed"
    (failed / "eval").mkdir(parents=True)
    (failed / "checkpoints").mkdir()
    shutil.copy(straight / "config.json", failed / "config.json")
    (failed / "metrics.csv").write_text("iteration\n")
    training._check_fresh_workdir(failed, other, "alphazero")  # nothing to lose: taken over
    # a logged iteration, or an evaluation, is that experiment's: refused
    (failed / "checkpoints" / "1.orbax-checkpoint-tmp-1700000000").mkdir()  # a cut-short save
    training._check_fresh_workdir(failed, other, "alphazero")
    # a logged iteration, an evaluation, a checkpoint or anything else (a pipeline's stage
    # folder, a file of the user's) is that experiment's: refused
    header, first = (straight / "metrics.csv").read_text().splitlines(True)[:2]
    for make, undo in (
            (lambda: (failed / "metrics.csv").write_text(header + first),
             lambda: (failed / "metrics.csv").write_text("iteration\n")),
            (lambda: (failed / "eval" / "iter_000001.json").write_text("{}"),
             lambda: (failed / "eval" / "iter_000001.json").unlink()),
            (lambda: (failed / "checkpoints" / "1").mkdir(),
             lambda: (failed / "checkpoints" / "1").rmdir()),
            (lambda: (failed / "stage0_imitation").mkdir(),
             lambda: (failed / "stage0_imitation").rmdir())):
        make()
        with pytest.raises(ValueError, match=r"(?s)another experiment.*train.learning_rate"):
            training._check_fresh_workdir(failed, other, "alphazero")
        undo()
    training._check_fresh_workdir(failed, other, "alphazero")  # as it was: taken over


def test_a_start_stopped_before_its_first_iteration_is_taken_over_by_another_config(
        learner, tmp_path):
    """Ctrl-C while the first iteration compiles leaves what the start wrote before it
    (config.json, starts.jsonl, a header-only metrics.csv, tensorboard/): nothing of an
    experiment, so a corrected config may start there."""
    import copy

    stopped = copy.copy(learner)

    def iteration(state):
        raise KeyboardInterrupt

    stopped.iteration = iteration
    with pytest.raises(KeyboardInterrupt):
        training.run(stopped, tmp_path, progress=False)
    assert (tmp_path / training.STARTS).exists() and not _rows(tmp_path)
    other = az.make_learner(cfglib.from_dict(az.AlphaZeroConfig, cfglib.apply_overrides(
        cfglib.to_dict(learner.config), {"train.learning_rate": 0.5})), devices=jax.devices()[:1])
    training._check_fresh_workdir(tmp_path, other, "alphazero")  # nothing to lose: taken over
    # killed (not stopped) while replacing a file: the part it left is no result either
    for leftover in ("config.json.tmp-4242", "metrics.csv.tmp-4242", "starts.jsonl.tmp-7"):
        (tmp_path / leftover).write_text("iteration\n")
    training._check_fresh_workdir(tmp_path, other, "alphazero")
    (tmp_path / "notes.txt.tmp-4242").write_text("a file of the user's, kept")
    with pytest.raises(ValueError, match="another experiment"):
        training._check_fresh_workdir(tmp_path, other, "alphazero")


def test_files_a_run_writes_without_a_config_of_one_are_not_overwritten(learner, tmp_path):
    work = tmp_path / "mine"
    work.mkdir()
    (work / "notes.txt").write_text("a file of the user's: no reason to refuse")
    training._check_fresh_workdir(work, learner, "alphazero")
    for name, make in (("metrics.csv with logged rows",
                        lambda: (work / "metrics.csv").write_text("iteration,loss\n1,0.5\n")),
                       ("eval/", lambda: (work / "eval").mkdir() or (
                           work / "eval" / "iter_000001.json").write_text("{}")),
                       ("best.gjx", lambda: (work / "best.gjx").write_bytes(b"agent"))):
        make()
        before = _digests(work)
        with pytest.raises(ValueError, match=rf"{work} holds .*{re.escape(name)} but no "
                                             "config.json or checkpoint"):
            training.run(learner, work, progress=False)
        assert _digests(work) == before
        shutil.rmtree(work)
        work.mkdir()
    (work / "metrics.csv").write_text("iteration,loss\n")  # a header only: nothing to lose
    training._check_fresh_workdir(work, learner, "alphazero")


def test_an_iteration_out_of_device_memory_is_said_in_a_line_naming_the_batches(
        learner, tmp_path, monkeypatch, capsys):
    """XLA's RESOURCE_EXHAUSTED in an iteration: `OutOfDeviceMemory` naming the iteration,
    XLA's first line and the batch settings, the last checkpoint kept; the command line
    says it in one line (exit 1), without a traceback. Other runtime errors pass as
    they are."""
    import copy

    def failing(error, after=0):
        changed = copy.copy(learner)

        def iteration(state):
            if int(state.iteration) >= after:
                raise error
            return learner.iteration(state)

        changed.iteration = iteration
        return changed

    xla = jax.errors.JaxRuntimeError(
        "RESOURCE_EXHAUSTED: Out of memory allocating 842983552528 bytes.\nmore lines")
    cfg = learner.config
    with pytest.raises(training.OutOfDeviceMemory) as caught:
        training.run(failing(xla, after=1), tmp_path, progress=False)
    batches = f"selfplay.batch={cfg.selfplay.batch}, train.batch_size={cfg.train.batch_size}"
    assert str(caught.value) == (
        "iteration 2 ran out of memory (RESOURCE_EXHAUSTED: Out of memory allocating "
        "842983552528 bytes.); the run keeps its checkpoint of iteration 1. Smaller settings "
        f"for an iteration's work ({batches} now) make another experiment: train it in "
        "another --workdir")
    assert training.restore(learner, tmp_path)[0].iteration == 1
    with pytest.raises(training.OutOfDeviceMemory, match=re.escape(
            "the run keeps no checkpoint yet. Make the settings that size an iteration's "
            f"work smaller ({batches} now) and start it again (this --workdir may be used)")):
        training.run(failing(xla), tmp_path / "first", progress=False)
    smaller = az.make_learner(cfglib.from_dict(az.AlphaZeroConfig, cfglib.apply_overrides(
        cfglib.to_dict(cfg), {"train.batch_size": 8})), devices=jax.devices()[:1])
    training._check_fresh_workdir(tmp_path / "first", smaller, "alphazero")  # not refused
    other = jax.errors.JaxRuntimeError("INTERNAL: something else")
    with pytest.raises(jax.errors.JaxRuntimeError, match="INTERNAL: something else"):
        training.run(failing(other), tmp_path / "other", progress=False)
    from gomoku_jax import cli

    def train(args):
        raise caught.value

    monkeypatch.setattr(cli, "_train", train)
    assert cli.main(["train", "--config", str(CONFIG), "--workdir", str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"gomoku-jax: error: {caught.value}\n"


def _diverging(learner, at, poison):
    """A copy of ``learner`` whose iteration ``at`` returns ``poison(state, metrics)``."""
    import copy

    changed = copy.copy(learner)

    def iteration(state):
        state, metrics = learner.iteration(state)
        return poison(state, metrics) if int(state.iteration) == at else (state, metrics)

    changed.iteration = iteration
    return changed


def test_a_run_that_never_trains_says_so(learner, tmp_path):
    """Iterations whose buffer never reached min_buffer took no step: the run warns, with
    what the buffer waits for, instead of ending like one that trained."""
    import copy

    untrained = copy.copy(learner)

    def iteration(state):
        state, metrics = learner.iteration(state)
        return state, dict(metrics, trained=np.bool_(False))

    untrained.iteration = iteration
    cfg = learner.config
    with pytest.warns(training.RunWarning) as caught:
        training.run(untrained, tmp_path, iterations=2, progress=False)
    [warning] = [w for w in caught if issubclass(w.category, training.RunWarning)]
    assert str(warning.message) == (
        f"{tmp_path}: no training step in the 2 iteration(s) just run (metrics.csv: trained "
        f"is False), so the network is as initialised: the replay buffer never held "
        f"train.min_buffer ({cfg.train.min_buffer}) positions. A position enters it when its "
        f"game ends: a game may last the board's 81 moves, and an iteration plays "
        f"selfplay.steps ({cfg.selfplay.steps}) moves of each of its selfplay.batch "
        f"({cfg.selfplay.batch}) games (metrics.csv: games_finished, positions_added)")
    # resumed, the iterations that trained before are not its network's start
    with pytest.warns(training.RunWarning, match=r"so the network is as it was at iteration 2:"):
        training.run(untrained, tmp_path, progress=False)
    # a run whose iterations train does not warn
    with warnings.catch_warnings():
        warnings.simplefilter("error", training.RunWarning)
        training.run(learner, tmp_path / "trains", iterations=1, progress=False)
    assert _rows(tmp_path / "trains")[0]["trained"] == "True"


@pytest.mark.parametrize("broken, named", [
    ("loss", r"loss is nan"),
    ("params", r"the network's variables hold NaN or inf \(params\.[\w.]+(, params\.[\w.]+)*"
               r"( and \d+ more)?\)"),
])
def test_a_run_whose_loss_or_network_turns_nan_stops_before_saving_it(
        learner, uninterrupted, tmp_path, broken, named):
    straight, _ = uninterrupted

    def poison(state, metrics):
        if broken == "loss":
            return state, dict(metrics, loss=np.float32("nan"))
        params = dict(state.variables["params"])
        first = sorted(params)[0]  # one leaf of one layer: the check finds any
        params[first] = jax.tree.map(lambda x: x.at[(0,) * x.ndim].set(np.inf),
                                     params[first])
        return state.replace(variables={**state.variables, "params": params}), metrics

    with pytest.raises(training.TrainingDiverged,
                       match=rf"training in {tmp_path} diverged at iteration 2: {named}\. "
                             r".*its last checkpoint, iteration 1, is sound.*in a new "
                             r"--workdir"):
        training.run(_diverging(learner, 2, poison), tmp_path, progress=False)
    marker = json.loads((tmp_path / training.DIVERGED).read_text())
    assert marker["iteration"] == 2 and "diverged at iteration 2" in marker["reason"]
    assert "first training steps" not in marker["reason"]  # iteration 1 trained already
    assert gio.Checkpointer(tmp_path / "checkpoints", config=cfglib.to_dict(
        learner.config)).latest_step() == 1
    rows = _rows(tmp_path)
    assert [r["iteration"] for r in rows] == ["1", "2"]  # the iteration is logged
    assert rows[0] == {k: v for k, v in _rows(straight)[0].items() if k in rows[0]}
    assert (rows[1]["loss"] == "nan") == (broken == "loss")
    # the broken network was neither evaluated (eval.every is 2) nor exported
    assert not (tmp_path / "best.gjx").exists() and not (tmp_path / "final.gjx").exists()
    assert not (tmp_path / "eval" / "iter_000002.json").exists()
    if broken == "loss":
        # stopped before the divergence (a shorter --iterations): the marker stays
        training.run(learner, tmp_path, iterations=1, progress=False)
        assert (tmp_path / "final.gjx").exists()
        assert training.diverged_record(tmp_path) == {"iteration": 2,
                                                      "reason": marker["reason"]}
        # resumed where it does not diverge (other code): the marker goes
        training.run(learner, tmp_path, progress=False)
        assert not (tmp_path / training.DIVERGED).exists()


def test_a_loss_nan_at_the_first_training_steps_points_at_the_network(learner, tmp_path):
    # iteration 1 of the smoke run is its first with training steps
    nan_loss = lambda state, metrics: (state, dict(metrics, loss=np.float32("nan")))
    with pytest.raises(training.TrainingDiverged) as err:
        training.run(_diverging(learner, 1, nan_loss), tmp_path, progress=False)
    assert str(err.value).startswith(
        f"training in {tmp_path} diverged at iteration 1: loss is nan. The run stopped without "
        "saving this iteration (it has no checkpoint yet; metrics.csv shows the iteration). "
        "These were the run's first training steps, from the network as initialised: if its "
        "outputs are NaN or inf from the start (a log or a division in its forward pass), "
        "check the network first, as a lower learning rate will not help. Resuming")
    assert _rows(tmp_path)[0]["trained"] == "True"


def test_a_checkpoint_of_a_diverged_network_is_not_resumed(learner, tmp_path, monkeypatch):
    def poison(state, metrics):
        variables = jax.tree.map(lambda x: x * np.float32("nan"), state.variables)
        return state.replace(variables=variables), metrics

    with monkeypatch.context() as unchecked:  # as a run saved before the check existed
        unchecked.setattr(training, "check_finite", lambda *args, **kw: None)
        unchecked.setattr(training.exported, "export_agent", lambda *args, **kw: None)
        training.run(_diverging(learner, 1, poison), tmp_path, iterations=1, progress=False)
    with pytest.raises(training.TrainingDiverged,
                       match=rf"the checkpoint of iteration 1 in {tmp_path} holds a network "
                             r"that had already diverged: the network's variables hold NaN.*"
                             rf"Delete {tmp_path / 'checkpoints' / '1'} to resume"):
        training.run(learner, tmp_path, progress=False)


def test_the_command_line_names_a_diverged_run(learner, tmp_path, monkeypatch, capsys):
    def run(*args, **kwargs):
        raise training.TrainingDiverged("training diverged at iteration 7: loss is inf")

    monkeypatch.setattr(training, "run", run)
    code = cli.main(["train", "--config", str(CONFIG), "--smoke", "--workdir",
                     str(tmp_path), "--no-progress"])
    assert code == 1
    assert capsys.readouterr().err.strip() == (
        "gomoku-jax: error: training diverged at iteration 7: loss is inf")

    def nans(*args, **kwargs):  # e.g. JAX_DEBUG_NANS: its traceback is the point
        raise FloatingPointError("invalid value (nan) encountered in log")

    monkeypatch.setattr(training, "run", nans)
    with pytest.raises(FloatingPointError, match="encountered in log"):
        cli.main(["train", "--config", str(CONFIG), "--smoke", "--workdir",
                  str(tmp_path / "other"), "--no-progress"])


def test_a_state_that_would_not_fit_is_refused_before_it_is_allocated(learner, tmp_path):
    need = training.check_state_memory(learner, limit_bytes=2**50)
    params = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(learner.init().variables))
    assert need > params  # the buffer and the games count too
    from algorithms import pipeline  # a learner started from given params: the same size

    started = pipeline.start_from(learner, learner.init().variables)
    assert training.check_state_memory(started, limit_bytes=2**50) == need
    with pytest.raises(ValueError, match=rf"needs {need / 2**30:.2f} GiB, more than the "
                                         r"limit_bytes of .*; the largest parts: "):
        training.check_state_memory(learner, limit_bytes=need - 1)

    def changed(setting, value):
        return az.make_learner(cfglib.from_dict(az.AlphaZeroConfig, cfglib.apply_overrides(
            cfglib.to_dict(learner.config), {setting: value})), devices=jax.devices()[:1])

    # the message names the part that grew, not settings that were left alone
    with pytest.raises(ValueError, match=r"GiB, more than the .*; the largest parts: "
                                         r"buffer \d+\.\d\d GiB\. Make") as caught:
        training.run(changed("train.buffer_capacity", 2 * 10**9), tmp_path / "huge",
                     progress=False)  # at once, not after a wait
    parts = str(caught.value).split("the largest parts: ")[1].split(". Make")[0]
    assert parts.startswith("buffer ") and "games" not in parts and "pending" not in parts
    assert not (tmp_path / "huge").exists()  # refused before anything was written
    with pytest.raises(ValueError, match=r"the largest parts: pending \d+\.\d\d GiB[,.]"):
        training.check_state_memory(changed("selfplay.batch", 10**8), limit_bytes=need)


def test_a_resume_whose_state_would_not_fit_is_refused_before_it_is_read(
        learner, uninterrupted, tmp_path, monkeypatch):
    # as on a machine, or a count of CPU devices (each its copy of the buffer), where the
    # run's state does not fit: it used to be read in regardless
    from gomoku_jax import tree_search

    straight, _ = uninterrupted
    workdir = tmp_path / "copy"
    shutil.copytree(straight, workdir)
    before = sorted((p, p.stat().st_mtime_ns) for p in workdir.rglob("*"))
    monkeypatch.setattr(tree_search, "available_bytes", lambda device=None: (1000, "fake RAM"))
    with pytest.raises(ValueError, match=r"the learner's state .* needs \d+\.\d\d GiB, more "
                                         r"than the fake RAM of 0\.00 GiB; the largest parts: "):
        training.run(learner, workdir, progress=False)
    assert sorted((p, p.stat().st_mtime_ns) for p in workdir.rglob("*")) == before


def test_a_replicated_state_must_fit_every_accelerator_not_their_sum():
    import jax.numpy as jnp

    class Device:  # an accelerator with 10 GiB free
        platform, process_index, device_kind = "gpu", 0, "fake GPU"

        def memory_stats(self):
            return {"bytes_limit": 10 * 2**30, "bytes_in_use": 0}

    class Learner:  # a state replicated on 4 of them (no sharding: whole on each)
        mesh = type("Mesh", (), {"devices": np.array([Device() for _ in range(4)])})()

        def __init__(self, gib):
            self.gib = gib

        def init(self):
            return {"buffer": jnp.zeros((self.gib * 2**28,), jnp.float32)}

    assert training.check_state_memory(Learner(8)) == 8 * 2**30
    with pytest.raises(ValueError, match=r"needs 12.00 GiB, more than the free memory of "
                                         r"fake GPU \(the device with the least\) of 10.00"):
        training.check_state_memory(Learner(12))  # 40 GiB in all, but 10 on each


def test_a_damaged_metrics_file_is_named_before_anything_is_rewritten(tmp_path):
    path = tmp_path / "metrics.csv"
    for text, message in (
            ("iteration,loss\n1,0.5\n2.0,0.4\n", r"line 3: iteration '2.0' is not a whole"),
            ("iter,loss\n1,0.5\n", r"line 1: the header has no 'iteration' column"),
            # a row cut short, a header cut short (every row then too long)
            ("iteration,loss,moves\n1,0.5\n2,0.4,8\n", r"line 2: 2 values for the "
                                                       r"header's 3 columns"),
            ("iteration,lo\n1,0.5,8\n", r"line 2: 3 values for the header's 2 columns"),
            ("iteration,loss\n1,0.5\n2\n3,0.3\n", r"line 3: 1 value for the header's 2"),
            # not UTF-8: named by its line too, not by a byte position in the file
            (b"\xff\xfe\x00garbage", r"line 1: byte 0xff is not UTF-8 text \(invalid start "),
            (b"iteration,loss\n1,0.5\n2,0.4\n\xff\xfe garbage\n", r"line 4: byte 0xff is not "
                                                                r"UTF-8 text"),
            (b"\xef\xbb\xbfiteration,loss\r\n1,0.5\r\n2,\xe9\r\n", r"line 3: byte 0xe9 is "),
            (b"iteration,loss\r1,0.5\r2,0.4\r3,\xe2\x82", r"line 4: bytes 0xe2 0x82 are not "
                                                        r"UTF-8 text \(unexpected end")):
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        before = path.read_bytes()
        with pytest.raises(ValueError, match=rf"{re.escape(str(path))} {message}.*repair "):
            training.RunLog(tmp_path, start=1, tensorboard=False)
        assert path.read_bytes() == before
    path.write_bytes("\ufeffiteration,loss\n1,0.5\n2,0.4\n".encode())  # as Excel saves it
    log = training.RunLog(tmp_path, start=1, tensorboard=False)
    assert log.rows == [{"iteration": "1", "loss": "0.5"}]
    assert path.read_text() == "iteration,loss\n1,0.5\n"
    # the last append cut off by the run's end (no line end): dropped, whatever its
    # iteration reads as (here "1" of "12"); empty values of a later column are no damage
    path.write_text("iteration,loss,eval\n1,0.5,\n2,0.4,0.7\n1")
    log = training.RunLog(tmp_path, start=2, tensorboard=False)
    assert [row["iteration"] for row in log.rows] == ["1", "2"]
    assert path.read_text() == "iteration,loss,eval\n1,0.5,\n2,0.4,0.7\n"


def test_the_same_command_on_a_finished_run_changes_nothing(learner, uninterrupted, tmp_path,
                                                            capsys):
    straight, report = uninterrupted
    again = tmp_path / "again"
    shutil.copytree(straight, again)
    before = _digests(again)
    assert training.run(learner, again, progress=True) == json.loads(
        (straight / "report.json").read_text())
    assert f"{again} is finished at iteration {report['iterations']}: nothing to train" in (
        capsys.readouterr().out)
    assert _digests(again) == before  # no new evaluation, export or log row
    # a run killed during its final evaluation (no report yet) does it then
    (again / "report.json").unlink()
    assert training.run(learner, again, progress=False)["iterations"] == report["iterations"]
    assert (again / "report.json").exists()
    # a damaged final.gjx (a copy cut short) is written again from the last checkpoint;
    # it was reported fine, and `export` refuses to overwrite the run's own file
    final = (again / "final.gjx").read_bytes()
    (again / "final.gjx").write_bytes(final[: len(final) // 2])
    with pytest.warns(training.RunWarning, match=r"final.gjx.*; writing it again from the "
                                                 "checkpoint of iteration"):
        training.run(learner, again, progress=False)
    assert (again / "final.gjx").read_bytes() == final
    # a damaged report is said to be damaged, then evaluated and written again
    (again / "report.json").write_text('{"iterations": ')
    with pytest.warns(training.RunWarning, match=r"report.json cannot be read back \(.*\); "
                                                 "evaluating the agent of iteration"):
        training.run(learner, again, progress=False)
    assert json.loads((again / "report.json").read_text())["iterations"] == report["iterations"]


def test_a_run_in_a_crowded_process_releases_its_compiled_programs(learner, uninterrupted,
                                                                  tmp_path, monkeypatch):
    # each run of a notebook's sweep compiles programs of its own; a process near Linux's
    # limit on memory mappings drops JAX's caches before the next run (gomoku_jax.compiled)
    from gomoku_jax import compiled

    straight, report = uninterrupted
    shutil.copytree(straight, tmp_path / "again")
    probe = jax.jit(lambda x: x * 3 + 1)
    probe(1.0)
    monkeypatch.setattr(compiled, "map_limit", lambda: 2)  # every process is crowded now
    if compiled.memory_maps() is None:  # not Linux: nothing to count, nothing released
        assert training.run(learner, tmp_path / "again", progress=False) == report
        assert probe._cache_size() == 1
        return
    with pytest.warns(compiled.ReleaseWarning, match="dropped JAX's in-memory caches"):
        assert training.run(learner, tmp_path / "again", progress=False) == report
    assert probe._cache_size() == 0


def test_a_run_stopped_by_iterations_or_by_an_evaluation_is_finished_as_asked(
        learner, tmp_path, monkeypatch, capsys):
    def no_games(*args, **kwargs):
        pytest.fail("a finished run played an evaluation again")

    # --iterations 1: the same command again changes nothing, without it the run trains on;
    # each start says where the run stands, with or without a progress bar
    part = tmp_path / "part"
    total = learner.config.train.iterations
    assert learner.config.eval.every == 2 < total == 3
    first = training.run(learner, part, iterations=np.int64(1), progress=False)  # NumPy's too
    assert first["iterations"] == 1
    assert not (part / "eval").exists()  # no evaluation yet: no folder (not an empty one)
    capsys.readouterr()
    before = _digests(part)
    with monkeypatch.context() as patch:
        patch.setattr(training, "evaluate", no_games)
        assert training.run(learner, part, iterations=1, progress=False) == first
        assert capsys.readouterr().out == (
            f"{part} is already at iteration 1, the stop asked for: nothing to train (its "
            "files are as they were; its schedule goes on to train.iterations=3: ask for a "
            "later stop, or none, to train on)\n")
    assert _digests(part) == before
    second = training.run(learner, part, iterations=2, progress=False)
    assert second["iterations"] == 2
    assert capsys.readouterr().out.startswith(
        f"resuming {part} from its checkpoint of iteration 1, training to iteration 2 (of "
        "train.iterations=3)\n")
    assert sorted(p.name for p in (part / "eval").iterdir()) == ["iter_000002.json"]
    before = _digests(part)
    with monkeypatch.context() as patch:  # a stop before the checkpoint: said, not silent
        patch.setattr(training, "evaluate", no_games)
        assert training.run(learner, part, iterations=1, progress=False) == second
        assert capsys.readouterr().out.startswith(
            f"{part} is already at iteration 2, past the stop asked for (1): nothing to train "
            "(its files are as they were; its schedule goes on to train.iterations=3")
    assert _digests(part) == before
    assert training.run(learner, part, progress=False)["iterations"] == total
    assert capsys.readouterr().out.startswith(
        f"resuming {part} from its checkpoint of iteration 2, training to iteration 3\n")
    assert [int(r["iteration"]) for r in _rows(part)] == list(range(1, total + 1))
    # stopped by its first evaluation: the same command again evaluates nothing
    stopped = tmp_path / "stopped"
    report, _ = _run_with_scripted_scores(learner, stopped, monkeypatch, [1.0], stop_score=0.5)
    assert report["stopped_early"] and report["iterations"] == 1 < total
    before = _digests(stopped)
    monkeypatch.setattr(training, "evaluate", no_games)
    again, evaluated = _run_with_scripted_scores(learner, stopped, monkeypatch, [],
                                                 stop_score=0.5)
    assert again == report and evaluated == [] and _digests(stopped) == before


@pytest.mark.parametrize("iterations, message", [
    (0, "iterations must be an integer >= 1 or None, got 0"),
    (-1, "iterations must be an integer >= 1 or None, got -1"),
    (np.int64(0), f"iterations must be an integer >= 1 or None, got {np.int64(0)!r}"),
    (2.5, "iterations must be an integer >= 1 or None, got 2.5"),
    (True, "iterations must be an integer >= 1 or None, got True"),
    ("2", "iterations must be an integer >= 1 or None, got '2'"),
    (4, "iterations 4 is more than train.iterations=3, where the run's schedule ends"),
])
def test_a_stop_the_run_cannot_make_is_refused_before_anything_is_written(
        learner, uninterrupted, tmp_path, iterations, message):
    # as --iterations and sweep's iterations are: 0 "finished" an untrained run without a
    # checkpoint (a folder train then refused for good), 2.5 or 4 trained all 3 iterations
    assert learner.config.train.iterations == 3
    fresh = tmp_path / "fresh"
    with pytest.raises(ValueError, match=re.escape(message)):
        training.run(learner, fresh, iterations=iterations, progress=False)
    assert not fresh.exists()
    # a run with checkpoints: refused too (0 read as already finished, and said nothing)
    straight, _ = uninterrupted
    shutil.copytree(straight, tmp_path / "again")
    before = _digests(tmp_path / "again")
    with pytest.raises(ValueError, match=re.escape(message)):
        training.run(learner, tmp_path / "again", iterations=iterations, progress=False)
    assert _digests(tmp_path / "again") == before


def test_a_full_disk_while_logging_is_said_naming_the_file(learner, tmp_path, monkeypatch):
    # Once the disk is full, closing the TensorBoard writer fails too; that error, which
    # names no file, used to replace the one that stopped the run, so the command line
    # said only "[Errno 28] No space left on device".
    import builtins
    import errno

    import tensorboardX

    def disk_fills(iteration, metrics):
        if iteration == 1:
            def full(path, mode="r", *args, **kwargs):  # (iteration 1's checkpoint is
                # saved after this hook; its config.json is written through here too)
                writes = ("w" in mode or "a" in mode) and "checkpoints" not in str(path)
                return builtins.open("/dev/full" if writes else path, mode, *args, **kwargs)

            def close(self):
                raise OSError(errno.ENOSPC, "No space left on device")

            monkeypatch.setattr(gio, "open", full, raising=False)
            monkeypatch.setattr(tensorboardX.SummaryWriter, "close", close)

    with pytest.raises(OSError) as err:
        training.run(learner, tmp_path, progress=False, on_iteration=disk_fills)
    assert err.value.errno == errno.ENOSPC
    # the first write that failed: iteration 2's evaluation, logged before its row
    assert err.value.filename == str(tmp_path / "eval" / "iter_000002.json"), err.value
    monkeypatch.undo()
    assert gio.Checkpointer(tmp_path / "checkpoints", config=cfglib.to_dict(
        learner.config)).latest_step() == 1  # kept: the run resumes from it


def test_sigterm_stops_a_training_command_as_ctrl_c_does(tmp_path, monkeypatch, capsys):
    # kill or timeout ended it with status 143 and no word; Ctrl-C says what was kept
    import signal

    class Unhandled(Exception):
        pass

    def unhandled(signum, frame):  # in place of the default, which would end pytest
        raise Unhandled("SIGTERM reached the handler the command started with")

    def terminated(*args, **kwargs):
        signal.raise_signal(signal.SIGTERM)  # its handler runs before this returns
        pytest.fail("SIGTERM did not stop the run")

    monkeypatch.setattr(training, "run", terminated)
    previous = signal.signal(signal.SIGTERM, unhandled)
    try:
        code = cli.main(["train", "--config", str(CONFIG), "--smoke", "--workdir",
                         str(tmp_path / "run"), "--no-progress"])
        assert signal.getsignal(signal.SIGTERM) is unhandled  # put back after the run
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert code == 130
    assert capsys.readouterr().err == ("\ngomoku-jax: interrupted; no checkpoint was written "
                                       "yet: the same command starts the run afresh\n")
    with training.sigterm_as_interrupt():  # the handler alone: SIGTERM as Ctrl-C, then not
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            signal.raise_signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is previous
    ignored = signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as a launcher may leave it
    try:
        with training.sigterm_as_interrupt():
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN  # still ignored
            signal.raise_signal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, ignored)


def test_tournament_takes_the_board_of_an_exported_agent(uninterrupted, tmp_path, capsys):
    straight, _ = uninterrupted
    out = tmp_path / "t"
    assert cli.main(["tournament", "--agents", f"{straight / 'final.gjx'}@2", "random",
                     "--games-per-pair", "2", "--out", str(out)]) == 0
    report = json.loads((out / "tournament.json").read_text())
    game = report["config"]["game"]
    assert {key: game[key] for key in ("size", "k", "rule")} == {
        "size": 9, "k": 5, "rule": "freestyle"}
    assert "forfeited" not in capsys.readouterr().out
    # what is given wins, the rest comes from the file: 7x7 is not the agent's game
    assert cli.main(["tournament", "--agents", "random", f"{straight / 'final.gjx'}",
                     "--size", "7", "--games-per-pair", "2"]) == 2
    assert "trained for 9x9 k=5 freestyle; this game is 7x7 k=5" in capsys.readouterr().err


def test_resuming_against_other_weights_of_an_exported_opponent_is_refused(
        learner, uninterrupted, tmp_path):
    """An exported first evaluation opponent (it picks best.gjx and stops a run) or
    sparring partner: the run keeps its file's SHA-256, and a resume that finds other
    weights there is refused (it used to go on against them without a word); the file it
    started with resumes."""
    straight, _ = uninterrupted
    opponent = tmp_path / "opponent.gjx"
    shutil.copy(straight / "final.gjx", opponent)
    config = learner.config  # the compiled iteration is the fixture's: evaluations aside
    config = dataclasses.replace(config, eval=dataclasses.replace(
        config.eval, opponents=(str(opponent), "random"), final_games=0))
    workdir = tmp_path / "run"

    def run(iterations):
        return training.run(az.make_learner(config, devices=jax.devices()[:1]), workdir,
                            iterations=iterations, progress=False, tensorboard=False)

    run(1)
    stored = json.loads((workdir / training.DATA).read_text())
    assert [a["path"] for a in stored["agents"]] == [str(opponent)]
    meta, variables = gio.read_exported(opponent)
    gio.write_exported(opponent, meta, jax.tree.map(lambda x: x * 0.5, variables))
    with pytest.raises(ValueError, match=re.escape(
            f"{workdir} was trained against other exported agents' files than those it "
            f"plays now ({opponent} changed (") + r".*\); resuming must play the agents it "
            r"started with"):
        run(2)
    assert len(_rows(workdir)) == 1  # nothing trained against them
    shutil.copy(straight / "final.gjx", opponent)
    assert run(2)["iterations"] == 2
    # a sparring partner's file is kept the same way
    partnered = dataclasses.replace(learner.config, selfplay=dataclasses.replace(
        learner.config.selfplay, opponent=f"{opponent}@2+killer", opponent_fraction=0.5))
    assert az.make_learner(partnered, devices=jax.devices()[:1]).opponent_names() == [
        f"{opponent}@2+killer"]
    assert training.agent_files([f"{opponent}@2+killer", "random", str(opponent)]) == [
        {"path": str(opponent), "bytes": opponent.stat().st_size,
         "sha256": gio.file_sha256(opponent)}]


def _rewrite_header(src, dst, **changes):
    meta, variables = gio.read_exported(src)
    for dotted, value in changes.items():
        *path, last = dotted.split("__")
        node = meta
        for key in path:
            node = node[key]
        if value is None:
            del node[last]
        else:
            node[last] = value
    gio.write_exported(dst, meta, variables)
    return dst


@pytest.mark.parametrize("changes, text", [
    ({"game__size": 15}, r"do not fit the network its header describes \(resnet .* on 15x15"),
    ({"network__options__filters": 16},
     r"do not fit .*'filters': 16.*: float32 \(8,\), expected float32 \(16,\)"),
    # a header asking for far more layers than the file holds is refused without being
    # built whole (100,000 blocks used to take minutes to trace)
    ({"network__options__blocks": 100_000},
     r"do not fit .*'blocks': 100000.*: the network makes more than the \d+ arrays given"),
    ({"search": None}, r"play-time search is missing or invalid \(KeyError"),
    # an agent kind that cannot play the network (it used to fail at every move)
    ({"agent": "q-greedy"}, r"its header says a q-greedy agent, which plays a q network, but "
                            r"its network 'resnet' is a policy-value network"),
    ({"search__num_simulations": -5}, r"play-time search is missing or invalid"),
])
def test_an_exported_file_whose_header_does_not_fit_its_params_is_refused(
        uninterrupted, tmp_path, changes, text):
    straight, _ = uninterrupted
    path = _rewrite_header(straight / "final.gjx", tmp_path / "edited.gjx", **changes)
    with pytest.raises(gio.CheckpointError, match=text) as err:
        exported.load(path)
    assert str(path) in str(err.value)
    from gomoku_jax import play  # the play page's loader refuses it alike, naming the file

    with pytest.raises(play.PlayError, match=text) as err:
        play._exported_player(str(path), None, None, exported.load_network(
            straight / "final.gjx")[1])
    assert str(path) in str(err.value)


def test_forfeits_are_named_in_reports(monkeypatch):
    from gomoku_jax import Gomoku, agents

    class Crashing(agents.Agent):
        name = "crashing"

        def act(self, state, key, deadline=None):
            raise RuntimeError("out of ideas\nand a second line")  # _CRASHES

    env = Gomoku(9, 5)
    result = arena.round_robin(env, [agents.random_agent(), Crashing()], 2)
    markdown = result.to_markdown()
    assert "**2 games forfeited**" in markdown
    at = line_of(__file__, "# _CRASHES")
    # first line only; the agent's own line that raised comes first
    assert f"- 2 x crashing raised RuntimeError (at {at}): out of ideas\n" in markdown
    make = agents.make
    monkeypatch.setattr(training.agents_lib, "make",
                        lambda name, env: Crashing() if name == "crashing" else make(name, env))
    evaluation = training.evaluate(env, agents.random_agent(), ["heuristic", "crashing"], 2, 0, 0)
    assert evaluation["heuristic"]["forfeits"] == []
    assert evaluation["crashing"]["forfeits"] == [f"crashing raised RuntimeError (at {at}): "
                                                  "out of ideas\nand a second line"] * 2
    text = training._report_markdown({"iterations": 1, "evaluation": evaluation}, "how")
    assert "**2 games forfeited**" in text and "2 x crashing raised RuntimeError" in text
    del evaluation["crashing"]
    assert "forfeited" not in training._report_markdown(
        {"iterations": 1, "evaluation": evaluation}, "how")


def test_export_of_a_run_that_lost_its_config_uses_the_checkpoints_copy(uninterrupted,
                                                                        tmp_path, capsys):
    straight, _ = uninterrupted
    run = tmp_path / "run"
    shutil.copytree(straight, run)
    assert cli.main(["export", "--workdir", str(run), "--out", str(tmp_path / "a.gjx")]) == 0
    (run / "config.json").unlink()  # the copy in checkpoints/ names no algorithm
    assert cli.main(["export", "--workdir", str(run), "--out", str(tmp_path / "b.gjx")]) == 0
    assert "no config.json: the alphazero config its checkpoints keep is used" in \
        capsys.readouterr().out
    (meta_a, params_a), (meta_b, params_b) = (gio.read_exported(tmp_path / name)
                                              for name in ("a.gjx", "b.gjx"))
    assert meta_a == meta_b
    assert jax.tree.all(jax.tree.map(np.array_equal, params_a, params_b))
    (run / "checkpoints" / "config.json").unlink()
    assert cli.main(["export", "--workdir", str(run), "--out", str(tmp_path / "c.gjx")]) == 2
    assert "is not a training work directory (no config.json, and no checkpoints/config" \
        in capsys.readouterr().err and not (tmp_path / "c.gjx").exists()


def test_export_refuses_a_damaged_best_and_its_own_file(uninterrupted, tmp_path, capsys):
    straight, _ = uninterrupted
    run = tmp_path / "run"
    shutil.copytree(straight, run)
    assert cli.main(["export", "--workdir", str(run), "--which", "best",
                     "--out", str(run / "best.gjx"), "--force"]) == 2
    assert f"is {run / 'best.gjx'} itself" in capsys.readouterr().err
    (run / "best.gjx").write_bytes(b"\x00" * 100)
    out = tmp_path / "deep" / "dir" / "copy.gjx"
    assert cli.main(["export", "--workdir", str(run), "--which", "best", "--out", str(out)]) == 2
    assert "not a gomoku-jax params file" in capsys.readouterr().err and not out.exists()
    assert cli.main(["export", "--workdir", str(run), "--out", str(out)]) == 0  # dirs made
    assert cli.main(["export", "--workdir", str(run), "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def _changed(learner, overrides):
    """A copy of ``learner`` whose config has the dotted ``overrides``; settings the
    compiled iteration does not read (``eval``, ``checkpoint_every``) keep its programs."""
    import copy

    changed = copy.copy(learner)
    changed.config = cfglib.from_dict(az.AlphaZeroConfig, cfglib.apply_overrides(
        cfglib.to_dict(learner.config), overrides))
    return changed


def _stored_configs(workdir):
    return [json.loads((workdir / name).read_text())
            for name in ("config.json", "checkpoints/config.json")]


def test_a_resume_may_change_how_the_run_is_evaluated_and_checkpointed(
        learner, uninterrupted, tmp_path, capsys, monkeypatch):
    straight, _ = uninterrupted
    training.run(learner, tmp_path, iterations=1, progress=False)
    capsys.readouterr()
    changed = _changed(learner, {"eval.final_games": 0, "checkpoint_every": 2})
    report = training.run(changed, tmp_path, progress=False)
    out = capsys.readouterr().out
    assert f"{tmp_path} resumes with changed settings (kept from now on): checkpoint_every " \
           "1 -> 2, eval.final_games 2 -> 0\n" in out
    assert f"resuming {tmp_path} from its checkpoint of iteration 1" in out
    assert report["iterations"] == 3 and report["evaluation"] == {}  # no final games
    assert _rows(tmp_path) == _rows(straight)  # trained as it would have been
    for a, b in zip(_variables(tmp_path / "final.gjx"), _variables(straight / "final.gjx")):
        np.testing.assert_array_equal(a, b)
    for stored in _stored_configs(tmp_path):  # what the next start compares with
        assert (stored["eval"]["final_games"], stored["checkpoint_every"]) == (0, 2)
    # the original settings are now the change; a finished run given another final
    # evaluation plays it and writes its reports again (on another machine here: the
    # report still names where the run trained)
    trained_on = {k: report[k] for k in ("device", "devices", "processes")}
    monkeypatch.setattr(training.arena, "device_description", lambda: "another machine")
    again = training.run(learner, tmp_path, progress=False)
    assert {k: again[k] for k in trained_on} == trained_on
    assert "changed settings (kept from now on): checkpoint_every 2 -> 1, eval.final_games " \
           "0 -> 2\n" in capsys.readouterr().out
    assert again["iterations"] == 3 and again["evaluation"]["random"]["games"] == 2
    assert json.loads((tmp_path / "report.json").read_text()) == again
    for stored in _stored_configs(tmp_path):
        assert (stored["eval"]["final_games"], stored["checkpoint_every"]) == (2, 1)
    before = _digests(tmp_path)  # stored: the same command again changes nothing
    assert training.run(learner, tmp_path, progress=False) == again
    assert "changed settings" not in capsys.readouterr().out
    assert _digests(tmp_path) == before
    # no final games asked of a finished run: its report is kept, not emptied
    kept = training.run(changed, tmp_path, progress=False)
    out = capsys.readouterr().out
    assert "eval.final_games 2 -> 0" in out and "nothing to train (its results are as they " \
           "were" in out
    assert kept == again and json.loads((tmp_path / "report.json").read_text()) == again
    for stored in _stored_configs(tmp_path):
        assert stored["eval"]["final_games"] == 0


def test_a_final_evaluation_cut_short_leaves_the_final_agent_of_the_report_kept(
        learner, uninterrupted, tmp_path, monkeypatch):
    """A finished run asked for another final evaluation and interrupted during it keeps
    the final.gjx of the report it has: the same command as before then finds the two as
    they were, not an agent of the abandoned settings beside the old report."""
    straight, _ = uninterrupted
    run = tmp_path / "run"
    shutil.copytree(straight, run)
    before = _digests(run)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(training, "evaluate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        training.run(_changed(learner, {"eval.simulations": 8}), run, progress=False)
    monkeypatch.undo()
    report = training.run(learner, run, progress=False)  # as before: nothing to do
    assert report == json.loads((straight / "report.json").read_text())
    assert gio.read_exported(run / "final.gjx")[0] == gio.read_exported(
        straight / "final.gjx")[0]
    assert {k: v for k, v in _digests(run).items() if "final" in str(k)} == {
        k: v for k, v in before.items() if "final" in str(k)}
    # config.json, which the cut-short start wrote, is the run's again (export reads it)
    assert (run / "config.json").read_text() == (straight / "config.json").read_text()


@pytest.mark.parametrize("overrides, refused", [
    # a training setting beside one that may change: only it is named
    ({"train.learning_rate": 0.5, "eval.final_games": 0},
     "train.learning_rate: stored 0.002, given 0.5"),
    ({"seed": 1}, "seed: stored 0, given 1"),
    ({"eval.patience": 2}, "eval.patience: stored null, given 2 (it decides when the run "
                           "stops training)"),
    ({"eval.opponents": ["heuristic"]},
     'eval.opponents: stored ["random"], given ["heuristic"] (the first opponent picks '
     "best.gjx and stops the run: only the others may change)"),
    ({"eval.opponents": ["random", "heuristic"], "eval.every": 1, "eval.games": 4,
      "eval.simulations": 8, "eval.opening_stones": 2, "checkpoint_every": 3}, None),
])
def test_a_resume_refuses_settings_that_change_what_is_trained(learner, uninterrupted,
                                                               overrides, refused):
    straight, _ = uninterrupted
    other = _changed(learner, overrides)
    if refused is None:  # only settings that may change: restored
        state, _ = training.restore(other, straight)
        assert int(state.iteration) == learner.config.train.iterations
        assert training.stored_config_differences(
            json.loads((straight / "config.json").read_text()), other.config,
            "alphazero") == []
        return
    with pytest.raises(gio.CheckpointError) as err:
        training.restore(other, straight)
    lines = str(err.value).splitlines()
    assert lines[1:] == [f"  {refused}", "use the run's original config or another directory"]


def test_a_checkpoint_folder_copied_or_renamed_by_hand_is_refused(learner, uninterrupted,
                                                                   tmp_path):
    """A step folder whose state is of another iteration (``checkpoints/1`` copied to
    ``checkpoints/7``) is refused naming it, not resumed from the wrong iteration."""
    straight, _ = uninterrupted
    work = tmp_path / "run"
    shutil.copytree(straight, work)
    shutil.copytree(work / "checkpoints" / "1", work / "checkpoints" / "7")
    before = _digests(work)
    with pytest.raises(gio.CheckpointError, match=re.escape(
            f"{work / 'checkpoints' / '7'} holds the state of iteration 1, not 7: a "
            "checkpoint folder copied or renamed by hand?")):
        training.restore(learner, work)
    with pytest.raises(gio.CheckpointError, match="copied or renamed by hand"):
        training.run(learner, work, progress=False)
    assert _digests(work) == before


def test_a_change_the_run_then_refuses_is_not_said_to_be_kept(learner, uninterrupted,
                                                              tmp_path, capsys):
    """A resumable change (another evaluation opponent) whose exported file is missing:
    the start is refused, and says nothing of keeping the change; the files are as
    they were."""
    straight, _ = uninterrupted
    work = tmp_path / "run"
    shutil.copytree(straight, work)
    before = _digests(work)
    missing = str(tmp_path / "gone.gjx")
    other = az.make_learner(cfglib.from_dict(az.AlphaZeroConfig, cfglib.apply_overrides(
        cfglib.to_dict(learner.config), {"eval.opponents": [
            *learner.config.eval.opponents, missing]})), devices=jax.devices()[:1])
    capsys.readouterr()
    with pytest.raises(ValueError, match=re.escape(f"{missing}: no such params file")):
        training.run(other, work, progress=False)
    assert "resumes with changed settings" not in capsys.readouterr().out
    assert _digests(work) == before


def test_a_changed_evaluation_search_forgets_the_best_score(learner, tmp_path, monkeypatch,
                                                            capsys):
    # the best score (0.75) was measured with 4 simulations; one with 8 (0.5) is not worse
    # by that: the next evaluation makes the new best
    report, _ = _run_with_scripted_scores(learner, tmp_path, monkeypatch, [0.75],
                                          iterations=1, final_games=0)
    assert report["best_iteration"] == 1
    capsys.readouterr()
    # a start that trains nothing cannot forget: it does not store the change either
    _run_with_scripted_scores(learner, tmp_path, monkeypatch, [], iterations=1,
                              final_games=0, simulations=8)
    assert capsys.readouterr().out.startswith(
        f"{tmp_path} resumes with changed settings (stored once the run trains on, as its "
        "best score was measured otherwise): eval.simulations 4 -> 8\n")
    assert all(stored["eval"]["simulations"] == 4 for stored in _stored_configs(tmp_path))
    report, evaluated = _run_with_scripted_scores(learner, tmp_path, monkeypatch, [0.5],
                                                  final_games=0, simulations=8)
    assert capsys.readouterr().out.startswith(
        f"{tmp_path} resumes with changed settings (kept from now on): eval.simulations 4 "
        "-> 8; the best score so far was measured otherwise, so the next periodic "
        "evaluation makes a new best.gjx\n")
    assert evaluated == [(2, 0.5)]
    assert (report["iterations"], report["stopped_early"], report["best_iteration"]) == (
        3, False, 2)
    assert gio.read_exported(tmp_path / "best.gjx")[0]["iteration"] == 2
    assert all(stored["eval"]["simulations"] == 8 for stored in _stored_configs(tmp_path))


def test_a_final_evaluation_made_with_a_change_not_stored_yet_is_not_played_again(
        learner, tmp_path, monkeypatch, capsys):
    """A run stopped by ``iterations`` and given another eval.simulations evaluates its
    agent again but stores the change only once it trains on (its best score was measured
    otherwise): the same command again keeps that report, as its report records the
    settings it was made with; the stored settings again evaluate again."""
    finals = []

    def counted(env, agent, opponents, games, seed, opening_stones, progress=False):
        finals.append(games)  # the final evaluations (the periodic ones are scripted)
        return {name: {"games": games, "wins": 1, "losses": 1, "draws": 0, "score": 0.5,
                       "interval": [0.1, 0.9], "seconds_per_move": 0.01}
                for name in opponents}

    monkeypatch.setattr(training, "evaluate", counted)
    report, _ = _run_with_scripted_scores(learner, tmp_path, monkeypatch, [0.75],
                                          iterations=1, final_games=2)
    assert finals == [2] and report[training._FINAL_SETTINGS]["simulations"] == 4
    again, _ = _run_with_scripted_scores(learner, tmp_path, monkeypatch, [], iterations=1,
                                         final_games=2, simulations=8)
    assert finals == [2, 2] and again[training._FINAL_SETTINGS]["simulations"] == 8
    assert all(stored["eval"]["simulations"] == 4 for stored in _stored_configs(tmp_path))
    before = _digests(tmp_path)
    kept, _ = _run_with_scripted_scores(learner, tmp_path, monkeypatch, [], iterations=1,
                                        final_games=2, simulations=8)
    assert finals == [2, 2] and kept == again and _digests(tmp_path) == before
    back, _ = _run_with_scripted_scores(learner, tmp_path, monkeypatch, [], iterations=1,
                                        final_games=2)  # the stored settings: evaluated so
    assert finals == [2, 2, 2] and back[training._FINAL_SETTINGS]["simulations"] == 4


def test_a_resume_that_forgets_the_best_score_still_writes_the_best_its_export_lost(
        learner, tmp_path, monkeypatch):
    """best.gjx is the best_iteration's until a new best: a resume that forgets the best
    score (another eval.simulations) writes it again when its export was cut short."""
    import copy
    import dataclasses

    report, _ = _run_with_scripted_scores(learner, tmp_path, monkeypatch, [0.75],
                                          iterations=1, final_games=0)
    assert report["best_iteration"] == 1
    (tmp_path / "best.gjx").unlink()  # cut short between the checkpoint and the export
    resumed = copy.copy(learner)
    resumed.config = dataclasses.replace(learner.config, eval=dataclasses.replace(
        learner.config.eval, every=1, opponents=("random",), games=SCRIPTED_GAMES,
        final_games=0, simulations=8))

    def evaluate(*args, **kwargs):  # the next evaluation, which would make a new best
        raise Killed

    monkeypatch.setattr(training, "evaluate", evaluate)
    with pytest.raises(Killed):
        training.run(resumed, tmp_path, progress=False)
    assert gio.read_exported(tmp_path / "best.gjx")[0]["iteration"] == 1


def test_an_iteration_with_a_new_best_is_checkpointed(learner, tmp_path, monkeypatch):
    import copy
    import dataclasses

    sparse = copy.copy(learner)
    sparse.config = dataclasses.replace(learner.config, checkpoint_every=3)
    report, evaluated = _run_with_scripted_scores(sparse, tmp_path, monkeypatch, [0.5, 0.25],
                                                  final_games=0)
    assert evaluated == [(1, 0.5), (2, 0.25)] and report["best_iteration"] == 1
    steps = sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir()
                   if p.name.isdigit())
    assert steps == [1, 3]  # 1: best.gjx's iteration, 3: the end; not 2
    assert gio.read_exported(tmp_path / "best.gjx")[0]["iteration"] == 1


def test_settings_that_decide_a_stop_may_not_change_while_evaluations_can_stop_the_run():
    note = "with eval.patience or eval.stop_score set, it decides when the run stops training"
    for path in ("eval.every", "eval.games", "eval.simulations", "eval.opening_stones"):
        assert training._resumable(path, 1, 2, {"eval": {"patience": None},
                                                "search": {}}) is True
        assert training._resumable(path, 1, 2, {"eval": {"patience": 3}, "search": {}}) == note
        assert training._resumable("imitation." + path, 1, 2, {  # the pipeline's search
            "imitation": {"eval": {"stop_score": 0.9}}, "eval": {}, "search": {}}) == note
    # a learner without a search (DQN) evaluates without one: eval.simulations decides nothing
    assert training._resumable("eval.simulations", 1, 2, {"eval": {"patience": 3}}) is True
    assert training._resumable("eval.games", 1, 2, {"eval": {"patience": 3}}) == note
    # the final evaluation and checkpoints do not decide a stop
    for path in ("eval.final_games", "checkpoint_every"):
        assert training._resumable(path, 1, 2, {"eval": {"patience": 3}}) is True


def test_a_resumed_run_keeps_the_evaluations_and_best_of_its_checkpoint(tmp_path):
    """Evaluations after the checkpoint are dropped; best.gjx is written again from the
    checkpoint when its best is that iteration and the file lags (an interruption
    between the checkpoint and the export)."""
    (tmp_path / "eval").mkdir()
    for it in (1, 2, 5):
        (tmp_path / "eval" / f"iter_{it:06d}.json").write_text("{}")
    exported = []

    def export(path, variables, iteration):
        exported.append((path.name, variables, iteration))

    prog = training._progress_tree(0.5, 0, False, 2)
    training._resume_evaluations(tmp_path, 2, prog, "vars", export)
    assert sorted(p.name for p in (tmp_path / "eval").iterdir()) == [
        "iter_000001.json", "iter_000002.json"]
    assert exported == [("best.gjx", "vars", 2)]  # no best.gjx: written from the checkpoint
    training._resume_evaluations(tmp_path, 3, prog, "vars", export)  # its best is older
    assert len(exported) == 1


def test_the_settings_that_may_change_on_resume_are_settings_of_every_learner():
    import algorithms

    for algorithm in algorithms.LEARNERS:
        cls, _ = algorithms.learner_entry(algorithm)
        defaults = cfglib.to_dict(cls())
        for name in training.RESUMABLE_SETTINGS:
            node = defaults
            for part in name.split("."):
                node = node[part]  # a KeyError names a setting the learner lacks
    # a pipeline's stages have evaluation settings of their own
    assert training._resumable("imitation.eval.final_games", 2, 0) is True
    assert training._resumable("master.games", 20, 10) is False  # its training games
    assert "stops training" in training._resumable("selfplay.eval.patience", None, 2)


def test_a_run_of_the_largest_seed_evaluates_on_seeds_kept_in_range(monkeypatch):
    """The evaluations' seeds are offsets of the run's seed, wrapped round at
    `config.SEED_MAX`: a run of any accepted seed reaches its evaluations (the arena
    refuses a seed out of range)."""
    from gomoku_jax import agents
    from gomoku_jax.game import Gomoku

    assert cfglib.offset_seed(cfglib.SEED_MAX, 1) == 0
    assert cfglib.offset_seed(cfglib.SEED_MAX, 7919) == 7918
    assert cfglib.offset_seed(5, 1_000_003) == 1_000_008  # in range: the plain sum
    seeds = []
    play = arena.play_match
    monkeypatch.setattr(training.arena, "play_match", lambda *a, seed, **k: (
        seeds.append(seed), play(*a, seed=seed, **k))[1])
    env = Gomoku(9, 5)
    learner = agents.random_agent("learner")
    evaluation = training.evaluate(env, learner, ["random", "heuristic"], 2,
                                   seed=cfglib.SEED_MAX, opening_stones=0)
    assert sorted(evaluation) == ["heuristic", "random"]
    assert seeds == [cfglib.SEED_MAX, 7918]
    with pytest.raises(ValueError, match=re.escape("opponents[1]: 'random' is listed twice")):
        training.evaluate(env, learner, ["random", "random"], 2, seed=0, opening_stones=0)
    assert len(seeds) == 2  # refused before any game
