"""Every experiment config loads with each of its variants, and each smoke variant
takes training steps within its iterations (this is how CI runs the experiments)."""

import json
import pathlib

import jax
import numpy as np
import pytest

from algorithms import alphazero as az
from gomoku_jax import config as cfglib
from gomoku_jax import networks

CONFIGS = sorted((pathlib.Path(__file__).parents[1] / "experiments" / "configs").glob("az_*.json"))


def _variants(path):
    return list(json.loads(path.read_text()).get("variants", {}))


def test_the_reports_configs_are_all_here():
    names = {p.stem for p in CONFIGS}
    assert {"az_9x9_cpu", "az_seed000_model_a", "az_seed000_model_b", "az_seed001_15x15",
            "az_seed002_7x7", "az_seed003_9x9"} <= names
    seed003 = set(_variants(CONFIGS[[p.stem for p in CONFIGS].index("az_seed003_9x9")]))
    assert {"1rb", "2rb", "3rb", "4rb", "pcr", "gp", "garb", "garb5", "padding3",
            "smoke"} <= seed003


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_config_and_every_variant_load(path):
    data = json.loads(path.read_text())
    assert "gomoku-jax train --config" in data["description"]
    assert "smoke" in data["variants"]
    for variant in [None, *_variants(path)]:
        chosen = [] if variant is None else [variant]
        cfg, _ = cfglib.load_file(az.AlphaZeroConfig, path, variants=chosen)
        # the config round-trips through JSON, as checkpoints store it
        assert cfglib.from_dict(az.AlphaZeroConfig, cfglib.to_dict(cfg)) == cfg


def test_seed000_network_is_the_reports():
    path = [p for p in CONFIGS if p.stem == "az_seed000_model_a"][0]
    cfg, _ = cfglib.load_file(az.AlphaZeroConfig, path)
    module = cfg.network.module(cfg.game.size)
    shapes = jax.eval_shape(lambda k: networks.init_network(
        module, k, cfg.game.env().observation_shape), jax.random.PRNGKey(0))
    assert networks.param_count(shapes["params"]) == 2_992_794


def _config(stem, variants=()):
    path = [p for p in CONFIGS if p.stem == stem][0]
    cfg, _ = cfglib.load_file(az.AlphaZeroConfig, path, variants=list(variants))
    return cfg


@pytest.mark.parametrize("variant, kinds", [
    # seed 003 Table IV: 2RBs+1GARB and 3RBs+2GARB, a GARB between consecutive plain
    # blocks (III-C, Fig. 5)
    ("garb", ("plain", "garb", "plain")),
    ("garb5", ("plain", "garb", "plain", "garb", "plain")),
])
def test_seed003_garb_variants_are_table_ivs(variant, kinds):
    cfg = _config("az_seed003_9x9", [variant])
    assert cfg.network.module(cfg.game.size).block_kinds == kinds


def test_seed002_cpu_variant_searches_200_simulations_in_training_and_evaluation():
    # seed 002 section 3.3: the CPU configuration sets its one n_playout to 200 (the GPU
    # one to 400), the number of simulations of every search its agent makes
    cfg = _config("az_seed002_7x7", ["simplenet"])
    assert (cfg.network.name, cfg.train.batch_size) == ("simplenet", 256)
    assert cfg.search.num_simulations == cfg.eval.simulations == 200
    cfg = _config("az_seed002_7x7")
    assert cfg.search.num_simulations == cfg.eval.simulations == 400


# The 15x15 smoke run keeps seed 001's whole CNN: minutes of playing under the suite's
# unoptimised code (tests/conftest.py), so it runs with the long tests.
@pytest.mark.parametrize("path", [
    pytest.param(p, marks=pytest.mark.slow) if p.stem == "az_seed001_15x15" else p
    for p in CONFIGS if p.stem != "az_9x9_cpu"], ids=lambda p: p.stem)
def test_smoke_variant_takes_training_steps(path):
    """A smoke run trains its network, not only plays: within its iterations some game
    ends and fills the buffer to train.min_buffer (its selfplay.steps cover half the board,
    so a game begun in the first iteration ends by the second)."""
    cfg, _ = cfglib.load_file(az.AlphaZeroConfig, path, variants=["smoke"])
    assert 2 * cfg.selfplay.steps >= cfg.game.size ** 2
    learner = az.make_learner(cfg, devices=jax.devices()[:1])
    state, trained = learner.init(), []
    for _ in range(cfg.train.iterations):
        state, metrics = learner.iteration(state)
        metrics = jax.device_get(metrics)
        trained.append(bool(metrics["trained"]))
        # the SGD's metrics are NaN in an iteration whose buffer is still below min_buffer
        sgd = {"loss", "policy_loss", "value_loss", "l2", "entropy", "explained_variance"}
        unset = set() if trained[-1] else sgd
        if int(metrics["games_finished"]) == 0:  # no game ended: no game length either
            unset = unset | {"game_length"}
        assert {k for k, v in metrics.items() if not np.isfinite(np.asarray(v)).all()} == unset
    assert int(state.iteration) == cfg.train.iterations
    assert any(trained), trained


TRAINING_CONFIGS = sorted(p for p in CONFIGS[0].parent.glob("*.json")
                          if "algorithm" in json.loads(p.read_text())
                          or p.stem.startswith("az_"))


@pytest.mark.parametrize("path", TRAINING_CONFIGS, ids=lambda p: p.stem)
def test_every_variant_loads_with_the_smoke_variant_after_it(path):
    """``--variant V --smoke`` (smoke applied last) builds a valid config for every V."""
    import algorithms

    data = json.loads(path.read_text())
    config_class, _ = algorithms.learner_entry(data.get("algorithm", "alphazero"))
    for variant in data.get("variants", {}):
        if variant != "smoke":
            cfg, _ = cfglib.load_file(config_class, path, variants=[variant, "smoke"])
            assert cfg.train.iterations <= 3  # the smoke variant's, whatever came before
