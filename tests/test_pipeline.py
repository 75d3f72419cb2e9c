"""Seed 001's three-stage pipeline: configs, hand-over of params between stages, resume."""

import csv
import json
import pathlib

import jax
import numpy as np
import pytest

from algorithms import alphazero as az
from algorithms import imitation as im
from algorithms import pipeline as pl
from gomoku_jax import cli, exported
from gomoku_jax import config as cfglib
from gomoku_jax import io as gio

CONFIGS = sorted((pathlib.Path(__file__).parents[1] / "experiments" / "configs")
                 .glob("pipeline_*.json"))
CPU = [p for p in CONFIGS if p.stem == "pipeline_9x9_cpu"][0]


def _leaves(path):
    return jax.tree.leaves(gio.read_exported(path)[1])


def _same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(_leaves(a), _leaves(b)))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_configs_and_variants_load(path):
    data = json.loads(path.read_text())
    assert data["algorithm"] == "pipeline" and "smoke" in data["variants"]
    assert "gomoku-jax train --config" in data["description"]
    for variant in [None, *data["variants"]]:
        cfg, _ = cfglib.load_file(pl.PipelineConfig, path,
                                  variants=[] if variant is None else [variant])
        assert cfglib.from_dict(pl.PipelineConfig, cfglib.to_dict(cfg)) == cfg
        assert cfg.train.iterations == 3


def test_iterations_past_a_pipelines_stages_are_refused_without_a_setting_to_raise():
    """A pipeline's three iterations are its stages, not a setting: asking for more names
    no ``train.iterations`` to raise (that key is not one of its config's)."""
    from gomoku_jax import training

    cfg, _ = cfglib.load_file(pl.PipelineConfig, CPU, variants=["smoke"])
    with pytest.raises(ValueError, match=r"^--iterations 4 is more than the 3 iterations of "
                       r"this run, which its config fixes \(train.iterations=3 is no setting"):
        training.check_iterations(cfg, 4, "--iterations", "--set train.iterations=N")
    training.check_iterations(cfg, 3, "--iterations", "--set train.iterations=N")


@pytest.mark.parametrize("overrides, message", [
    ({"eval.opponents": ["nosuch"]}, "PipelineConfig: eval.opponents[0]: unknown agent"),
    ({"selfplay.eval.opponents": ["nosuch"]},
     "the selfplay stage's settings: eval.opponents[0]: unknown agent"),
    ({"master.agent": "nosuch"}, "master.agent: unknown agent 'nosuch'"),
    ({"master.opening_stones": 50}, "master.opening_stones must be at most 2*(k-1) = 8"),
    # a validation share holds out one game at least: one game a round leaves none
    ({"master.validation_fraction": 0.1, "master.games": 1},
     "master.validation_fraction (0.1) holds out one game at least, so the first round's "
     "master.games (1) would leave none to train on"),
])
def test_a_pipelines_evaluations_and_master_are_checked_when_it_loads(overrides, message):
    import re

    with pytest.raises(ValueError, match=re.escape(message)):
        cfglib.load_file(pl.PipelineConfig, CONFIGS[0], overrides=overrides)


def test_seed001_config_is_the_reports_duelnet():
    cfg, _ = cfglib.load_file(pl.PipelineConfig, [p for p in CONFIGS if "seed001" in p.stem][0])
    assert (cfg.game.size, cfg.network.name, cfg.search.num_simulations) == (15, "duelnet", 200)
    assert cfg.handover == "best"  # V-C: self-play from "the best model" of imitation
    stage1 = cfg.stage_config(0)
    assert stage1.train.batch_size == 512 and stage1.train.iterations == 1000
    assert stage1.data.balance == "games" and cfg.eval.opponents == ("uct-2000",)


def test_the_smoke_variant_says_where_it_writes_its_records(tmp_path, monkeypatch, capsys):
    """Stage 1 of ``--smoke`` plays its records into the current directory, and says so."""
    monkeypatch.chdir(tmp_path)
    cfg, _ = cfglib.load_file(pl.PipelineConfig, CPU, variants=["smoke"],
                              overrides=["imitation.data.generate.games=2"])
    stage1 = cfg.stage_config(0)
    im.load_dataset(stage1)
    path = tmp_path / "runs" / "smoke_records" / "pipeline_9x9_records.jsonl.gz"
    assert stage1.data.paths == ("runs/smoke_records/pipeline_9x9_records.jsonl.gz",)
    assert path.is_file() and capsys.readouterr().out == (
        "records: played 2 games of heuristic against heuristic (data.generate) into "
        f"{path}\n")


def test_start_from_refuses_params_of_another_network():
    cfg, _ = cfglib.load_file(pl.PipelineConfig, CPU, variants=["smoke"])
    learner = im.make_learner(cfg.stage_config(0), devices=jax.devices()[:1])
    other = cfglib.from_dict(im.ImitationConfig, cfglib.apply_overrides(
        cfglib.to_dict(cfg.stage_config(0)), {"network.options": {"channels": [8, 8, 16]}}))
    wrong = im.make_learner(other, devices=jax.devices()[:1]).init().variables
    with pytest.raises(ValueError, match="do not fit this stage's network"):
        pl.start_from(learner, wrong)
    given = jax.tree.map(lambda x: np.asarray(x) + 1.0, learner.init().variables)
    started = pl.start_from(learner, given).init()
    for x, y in zip(jax.tree.leaves(started.variables), jax.tree.leaves(given)):
        np.testing.assert_array_equal(x, y)
    assert started.iteration == 0 and pl.start_from(learner, given).algorithm == "imitation"
    with pytest.raises(RuntimeError, match="Pipeline.run"):
        pl.make_learner(cfg).iteration(pl.make_learner(cfg).init())


class Killed(Exception):
    pass


def test_stages_hand_over_their_final_params_and_a_killed_run_resumes(tmp_path, monkeypatch):
    """Each stage starts from the previous stage's final params; stage 2's self-play
    finishes games (81 moves fill a 9x9 board), so it trains: its SGD runs on params
    and BatchNorm statistics loaded from stage 1, and its final network differs."""
    monkeypatch.chdir(tmp_path)
    overrides = ["imitation.data.generate.games=2", "master.rounds=1", "eval.every=0",
                 "eval.final_games=2"]
    cfg, _ = cfglib.load_file(pl.PipelineConfig, CPU, variants=["smoke"], overrides=overrides)
    work = tmp_path / "run"

    def kill_after_stage_one(iteration, metrics):
        if iteration == 1:
            raise Killed

    with pytest.raises(Killed):
        pl.make_learner(cfg).run(work, progress=False, tensorboard=False,
                                 on_iteration=kill_after_stage_one)
    stage1_done = (work / "stage1_imitation" / "done.json").read_text()
    assert not (work / "stage2_selfplay").exists()
    args = ["train", "--config", str(CPU), "--smoke", "--workdir", str(work), "--no-progress"]
    for o in overrides:
        args += ["--set", o]
    assert cli.main(args) == 0
    s1, s2, s3 = (work / name for name in pl.STAGES)
    assert (s1 / "done.json").read_text() == stage1_done  # not run again
    assert _same(s2 / "start.gjx", s1 / "final.gjx")
    with (s2 / "metrics.csv").open() as f:
        stage2 = list(csv.DictReader(f))
    assert [r["trained"] for r in stage2] == ["True", "True"]
    assert all(np.isfinite(float(r["loss"])) for r in stage2)
    trained = _leaves(s2 / "final.gjx")
    assert all(np.isfinite(x).all() for x in trained)
    assert not _same(s2 / "final.gjx", s1 / "final.gjx")  # SGD moved stage 1's network
    fresh = jax.tree.leaves(pl.make_learner(cfg).init().variables)
    assert not all(np.array_equal(x, y) for x, y in zip(fresh, _leaves(s1 / "final.gjx")))
    assert _same(s3 / "round_000" / "train" / "start.gjx", s2 / "final.gjx")
    assert _same(work / "final.gjx", s3 / "final.gjx")
    with (work / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["stage"]) for r in rows] == [1, 2, 3]
    assert int(rows[2]["master_games"]) == 2  # the round's games against the master
    played = (s3 / "round_000" / "games.jsonl.gz")
    from gomoku_jax import records

    names = {(g.black, g.white) for g in records.read_records(played)}
    assert names == {("learner", "gomokubot-1"), ("gomokubot-1", "learner")}
    loaded = exported.load(work / "final.gjx")
    assert loaded.metadata["network"]["name"] == "duelnet"


@pytest.mark.parametrize("handover", ["final", "best"])
def test_a_stage_hands_over_its_best_params_with_handover_best(tmp_path, handover):
    """With handover "best" the next stage starts from the stage's best.gjx (seed 001
    V-C's "best model derived from imitation learning") where it wrote one, else from its
    final.gjx; with "final", always from final.gjx."""
    cfg, _ = cfglib.load_file(pl.PipelineConfig, CPU, variants=["smoke"],
                              overrides={"handover": handover})
    learner = pl.make_learner(cfg)
    learner.workdir = tmp_path
    stage1 = tmp_path / pl.STAGES[0]
    stage1.mkdir()
    (stage1 / "done.json").write_text(json.dumps({"stage": 1}))  # a finished stage
    state = learner.init()
    final = jax.tree.map(lambda x: np.asarray(x) + 1.0, jax.device_get(state.variables))
    best = jax.tree.map(lambda x: np.asarray(x) - 1.0, jax.device_get(state.variables))
    exported.export_agent(stage1 / "final.gjx", learner, final)
    exported.export_agent(stage1 / "best.gjx", learner, best)
    want = best if handover == "best" else final
    handed, _ = learner.iteration(state)
    assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(handed.variables),
                                                     jax.tree.leaves(want)))
    (stage1 / "best.gjx").unlink()  # a stage that never evaluated: its final params
    handed, _ = learner.iteration(state)
    assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(handed.variables),
                                                     jax.tree.leaves(final)))
    with pytest.raises(ValueError, match="config.handover must be one of final, best"):
        cfglib.load_file(pl.PipelineConfig, CPU, overrides={"handover": "last"})


def test_a_seed_is_refused_when_a_stage_would_pass_the_largest_seed():
    from gomoku_jax.config import SEED_MAX

    path = "experiments/configs/pipeline_9x9_cpu.json"
    cfg, _ = cfglib.load_file(pl.PipelineConfig, path, overrides={"seed": 0})
    top = SEED_MAX - 2 - (cfg.master.rounds - 1)  # the last master round trains with SEED_MAX
    assert cfglib.load_file(pl.PipelineConfig, path, overrides={"seed": top})[0].seed == top
    with pytest.raises(cfglib.ConfigError, match=rf"config.seed must be at most {top} here: the "
                                                 r"stages train with seeds up to seed \+ "):
        cfglib.load_file(pl.PipelineConfig, path, overrides={"seed": top + 1})


@pytest.mark.parametrize("key", ["selfplay.selfplay.batch", "master.train.batch_size"])
def test_every_stages_batch_must_divide_over_the_devices_before_any_stage_trains(key):
    # 4 devices: the imitation stage's batches divide, a later stage's (6) does not; it used
    # to be refused only once the stages before it had trained, under the stage's own key
    assert len(jax.devices()) == 4
    cfg, _ = cfglib.load_file(pl.PipelineConfig, CPU, variants=["smoke"],
                              overrides={key: 6})
    with pytest.raises(cfglib.ConfigError, match=rf"^{key} \(6\) must be a multiple of the "
                                                 r"number of devices \(4\)"):
        pl.make_learner(cfg)
    assert pl.make_learner(cfg, devices=jax.devices()[:2]).devices == jax.devices()[:2]


def test_the_master_stage_adds_up_its_rounds(tmp_path, monkeypatch):
    # Three rounds of 5 iterations and 1,000 moves each are 15 and 3,000 (the stage's row
    # used to carry the last round's alone, beside the seconds of all three).
    cfg = pl.PipelineConfig(game=az.GameSettings(size=5, k=3),
                            network=az.NetworkSettings("duelnet", {"channels": [4, 4, 4]}),
                            master=pl.MasterStage(agent="random", rounds=3))
    pipeline = pl.Pipeline(cfg)

    def train(self, learner, directory, start):
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "final.gjx").write_text("params")
        return {"stage_iterations": 5, "moves": 1000, "policy_loss": 1.0}

    monkeypatch.setattr(pl.Pipeline, "_play_master_games",
                        lambda self, path, variables, master, r: path.write_text("games"))
    monkeypatch.setattr(pl.Pipeline, "_train", train)
    monkeypatch.setattr(pl, "_read_variables", lambda path: None)
    monkeypatch.setattr(pl, "_learner_score",
                        lambda path: {"games": 2, "wins": 1, "losses": 1, "draws": 0})
    monkeypatch.setattr(pl.im, "make_learner", lambda *args, **kwargs: None)
    metrics = pipeline._master(tmp_path, None)
    assert (metrics["stage_iterations"], metrics["moves"], metrics["master_games"]) == (
        15, 3000, 6)
    assert metrics["policy_loss"] == 1.0  # the last round's losses
