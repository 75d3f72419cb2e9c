"""The AlphaZero benchmark: tree sizes, openings, option checks and one tiny run."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algorithms import alphazero
from experiments import bench_alphazero as bench
from gomoku_jax import cli, networks, replay
from gomoku_jax import config as config_lib
from gomoku_jax import search as search_lib


def _tree_nbytes(tree) -> int:
    return sum(np.asarray(x).nbytes for x in jax.tree.leaves(tree))


@pytest.mark.parametrize("algorithm", ["puct", "gumbel"])
def test_tree_bytes_matches_a_real_search(algorithm):
    env = bench.game_env(5)
    evaluate = search_lib.uniform_evaluate(env)
    config = search_lib.SearchConfig(algorithm=algorithm, num_simulations=3)
    states = bench.openings(env, jax.random.key(0), 2, 2)
    out = jax.jit(bench.search_fn(env, evaluate, config))(None, states, jax.random.key(1))
    assert bench.tree_bytes(env, evaluate, None, 2, config) == _tree_nbytes(out.search_tree)
    # every leaf of the tree has the batch axis first
    assert bench.tree_bytes(env, evaluate, None, 4, config) == 2 * _tree_nbytes(out.search_tree)


def test_openings_have_the_stones_near_the_centre():
    env = bench.game_env(9)
    states = bench.openings(env, jax.random.key(3), 6, 4)
    board = np.asarray(states.board)  # [B, N, N]
    assert (np.count_nonzero(board, axis=(1, 2)) == 4).all()
    assert (np.count_nonzero(board == 1, axis=(1, 2)) == 2).all()
    outside = board.copy()
    outside[:, 2:7, 2:7] = 0
    assert not outside.any()
    assert not np.asarray(states.terminated).any()
    assert (np.asarray(states.current_player) == 0).all()


def test_the_search_game_keeps_the_stone_planes_whatever_the_default_has():
    default = json.loads(bench.CPU_CONFIG.read_text())["game"]
    env = bench.game_env(9)
    assert env.rule == default["rule"] and env.observation == "stones-colour"
    assert env.observation_shape == (9, 9, 3)
    threats = bench.game_env(9, "stones-threats")
    assert threats.observation == "stones-threats" and threats.observation_shape[-1] > 3


def test_choose_network_presets_and_overrides():
    cpu = json.loads(bench.CPU_CONFIG.read_text())["network"]
    assert bench.choose_network() == (cpu["name"], cpu["options"])
    assert bench.choose_network("gpu") == (
        "resnet", {"blocks": 10, "filters": 128, "dtype": "bfloat16"})
    assert bench.choose_network("gpu", options={"blocks": 4}, dtype="float32") == (
        "resnet", {"blocks": 4, "filters": 128, "dtype": "float32"})
    assert bench.choose_network("gpu", name="simplenet") == ("simplenet", {})
    with pytest.raises(ValueError, match="preset"):
        bench.choose_network("tpu")


@pytest.mark.parametrize("argv, named", [
    (["--sizes", "4"], "--sizes"),
    (["--batches", "0"], "--batches"),
    (["--opening-stones", "-1"], "--opening-stones"),
    (["--max-tree-gb", "0"], "--max-tree-gb"),
    (["--options", "[1, 2]"], "--options"),
    (["--options", "{blocks"], "--options"),
    (["--network", "no-such-net"], "no-such-net"),
    (["--options", '{"no_such_option": 1}'], "no_such_option"),
    (["--set", "train.batch_size=0"], "train.batch_size"),
    (["--set", "train.no_such_key=1"], "no_such_key"),
])
def test_bad_options_stop_before_any_timing(argv, named, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(argv + ["--no-progress"])
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err.split("error:", 1)[1]  # after the usage lines


@pytest.mark.parametrize("argv, option", [
    (["--parts", "search", "--set", "selfplay.batch=128"], "--set"),
    (["--parts", "learner", "--backend", "linear"], "--backend"),
])
def test_options_of_a_part_not_measured_are_refused(argv, option, monkeypatch, capsys):
    # --parts search with --set: the overrides went unread (a bad one unchecked) and the
    # search ran as if they were not given; --parts learner with --backend: no search timed
    monkeypatch.setattr(bench, "run", lambda *a, **kw: pytest.fail("timing started"))
    with pytest.raises(SystemExit) as exit_info:
        bench.main(argv + ["--no-progress"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.split("error:", 1)[1]
    assert option in err and "--parts" in err and "does not measure" in err


def test_quick_run_reports_search_learner_and_skipped(tmp_path, capsys):
    # A threshold between the trees of 4 and 8 simulations: 8 is skipped, 4 is timed.
    env = bench.game_env(9)
    name, options = bench.choose_network()
    module = networks.make_network(name, board_size=9, **options)
    variables = jax.eval_shape(
        lambda k: networks.init_network(module, k, env.observation_shape), jax.random.key(0))
    evaluate = search_lib.network_evaluate(module)
    sizes = [bench.tree_bytes(env, evaluate, variables, 8,
                              search_lib.SearchConfig(algorithm="puct", num_simulations=s))
             for s in (4, 8)]
    limit = (sizes[0] + sizes[1]) / 2 / bench.GIB
    out = tmp_path / "bench.json"
    assert cli.main(["bench", "alphazero", "--quick", "--simulations", "4", "8",
                     "--algorithms", "puct", "--repeats", "1", "--max-tree-gb", repr(limit),
                     "--set", "tactical=null", "--set", "train.augment=false",  # compile faster:
                     "--set", "train.epochs=0.25",  # 2 SGD steps, not 12
                     "--no-progress", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())

    assert report["device"] and report["network"] == {
        "name": name, "options": options, "params": {"9": networks.param_count(variables)}}
    assert report["settings"]["sizes"] == [9] and report["settings"]["batches"] == [8]
    assert report["settings"]["observation"] == "stones-colour"
    [row] = report["search"]
    assert (row["size"], row["batch"], row["simulations"], row["algorithm"]) == (9, 8, 4, "puct")
    assert row["tree_gb"] * bench.GIB == pytest.approx(sizes[0])
    for part in ("network", "uniform"):
        fig = row[part]
        assert fig["seconds"] > 0 and fig["compile_and_first_call_s"] > 0
        assert fig["sims_per_s"] == pytest.approx(8 * 4 / fig["seconds"])
        assert fig["ms_per_step"] == pytest.approx(1000 * fig["seconds"] / 4)
    net, ref = row["network"], row["uniform"]
    assert row["ratio"] == pytest.approx(net["sims_per_s"] / ref["sims_per_s"])
    assert row["network_share"] == pytest.approx(1 - ref["seconds"] / net["seconds"])

    [skipped] = report["skipped"]
    assert (skipped["simulations"], skipped["batch"], skipped["algorithm"]) == (8, 8, "puct")
    assert skipped["tree_gb"] * bench.GIB == pytest.approx(sizes[1])
    assert "--max-tree-gb" in skipped["reason"]
    assert "skipped" in printed and "uniform sims/s" in printed

    learner = report["learner"]
    cfg = learner["config"]
    assert cfg["network"] == {"name": name, "options": options}
    assert cfg["tactical"] is None and cfg["train"]["augment"] is False  # --set applied
    assert learner["overrides"] == ["tactical=null", "train.augment=false", "train.epochs=0.25"]
    assert learner["sgd_steps"] == 2
    assert learner["selfplay_batch"] == cfg["selfplay"]["batch"] == 8  # the smoke variant
    assert learner["moves_per_iteration"] == cfg["selfplay"]["batch"] * cfg["selfplay"]["steps"]
    assert learner["batch_size"] == cfg["train"]["batch_size"]
    for key in ("iteration_s", "moves_per_s", "sgd_s", "samples_per_s",
                "compile_and_first_iteration_s"):
        assert learner[key] > 0, key
    assert learner["moves_per_s"] == pytest.approx(
        learner["moves_per_iteration"] / learner["iteration_s"])
    assert learner["samples_per_s"] == pytest.approx(
        learner["sgd_steps"] * learner["batch_size"] / learner["sgd_s"])
    assert "moves/s" in printed and "samples/s" in printed


def test_fill_buffer_makes_legal_uniform_targets():
    example = alphazero.Sample(board=jnp.zeros((9, 9), jnp.int8), player=jnp.int32(0),
                               last_action=jnp.int32(-1), policy=jnp.zeros((81,), jnp.float32),
                               value=jnp.float32(0))
    buffer = replay.init(example, 64)
    filled = bench._fill_buffer(buffer, jax.random.key(0), 40, 9)
    assert int(filled.size) == 40
    data = jax.tree.map(lambda x: np.asarray(x)[:40], filled.data)
    empty = (data.board == 0).reshape(40, -1)
    np.testing.assert_allclose(data.policy.sum(-1), 1.0, rtol=1e-6)
    assert (data.policy[~empty] == 0).all()
    assert set(np.unique(data.value)) <= {-1.0, 1.0}
    assert replay.sample(filled, jax.random.key(1), 4).board.shape == (4, 9, 9)


@pytest.mark.parametrize("backend", ["mctx", "linear"])
def test_the_backend_option_chooses_the_search_it_times(backend, monkeypatch, capsys,
                                                        tmp_path):
    """``--backend linear`` times `gomoku_jax.tree_search`'s policy, the default mctx's;
    the report and its table say which."""
    from gomoku_jax import tree_search

    calls = []
    real = tree_search.gumbel_muzero_policy

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(tree_search, "gumbel_muzero_policy", counted)
    assert cli.main(["bench", "alphazero", "--parts", "search", "--sizes", "5",
                     "--batches", "2", "--simulations", "2", "--algorithms", "gumbel",
                     "--repeats", "1", "--opening-stones", "1", "--no-progress",
                     "--backend", backend, "--out", str(tmp_path / "bench.json")]) == 0
    assert bool(calls) == (backend == "linear")
    assert json.loads((tmp_path / "bench.json").read_text())["settings"]["backend"] == backend
    assert f"Search ({backend} backend)" in capsys.readouterr().out


def test_a_run_writes_its_search_rows_as_they_come(tmp_path):
    """With ``partial_path`` the report so far is on disk after every combination, so a
    run stopped at a time limit keeps what it measured."""
    path = tmp_path / "partial.json"
    name, options = bench.choose_network()
    report = bench.run(name, options, sizes=(5,), batches=(2,), simulations=(2, 3),
                       algorithms=("gumbel",), repeats=1, opening_stones=1,
                       parts=("search",), progress=False, partial_path=path)
    partial = json.loads(path.read_text())
    assert partial["partial"] is True and "partial" not in report
    assert partial["search"] == json.loads(json.dumps(report["search"]))
    assert [r["simulations"] for r in partial["search"]] == [2, 3]


def test_an_interrupted_run_keeps_its_rows_beside_an_earlier_report(tmp_path, monkeypatch):
    """The rows so far go to NAME.partial.json, not to --out: a run stopped before its
    end leaves an earlier complete report in --out as it was; a run that ends writes
    --out and removes the partial file."""
    out = tmp_path / "bench.json"
    out.write_text('{"complete": 1}')
    argv = ["--parts", "search", "--sizes", "5", "--batches", "2", "--simulations", "2", "3",
            "--algorithms", "gumbel", "--repeats", "1", "--opening-stones", "1",
            "--no-progress", "--out", str(out)]

    def interrupted(report):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(bench, "format_report", interrupted)  # stopped after the last row
        with pytest.raises(KeyboardInterrupt):
            bench.main(argv)
    assert json.loads(out.read_text()) == {"complete": 1}
    partial = json.loads((tmp_path / "bench.partial.json").read_text())
    assert partial["partial"] is True
    assert [r["simulations"] for r in partial["search"]] == [2, 3]
    bench.main(argv)
    assert "partial" not in json.loads(out.read_text())
    assert not (tmp_path / "bench.partial.json").exists()
    assert bench.partial_report(tmp_path / "x") == tmp_path / "x.partial.json"


def test_the_learner_config_takes_the_overrides_after_the_network_in_their_order():
    net = ("resnet", {"blocks": 1, "filters": 8})
    cfg = bench.learner_config(*net, ["network.options.filters=4"])
    assert cfg.network.options["filters"] == 4 and cfg.network.options["blocks"] == 1
    with pytest.raises(config_lib.ConfigError, match="'network.options.filters' would be "
                                                     "lost: the later override"):
        bench.learner_config(*net, ["network.options.filters=4",  # the object drops it
                                    'network.options={"blocks": 2, "filters": 16}'])
    cfg = bench.learner_config(*net, ['network.options={"blocks": 2, "filters": 16}'])
    assert cfg.network.options == {"blocks": 2, "filters": 16}  # replaces the benchmark's
    cfg = bench.learner_config(*net, ['network.options={"blocks": 2, "filters": 16}',
                                      "network.options.filters=4"])
    assert cfg.network.options == {"blocks": 2, "filters": 4}


def test_the_learner_bench_without_the_sgd_reference(tmp_path):
    cfg = bench.learner_config(*bench.choose_network(), ["tactical=null", "train.augment=false",
                                                         "train.epochs=0.25"], quick=True)
    result = bench.run_learner_bench(cfg, repeats=1, progress=False, sgd_reference=False)
    assert result["sgd_s"] > 0 and result["sgd_unrolled_speedup"] is None
    measured, missing = (("sgd_unrolled_s", "sgd_loop_s") if cfg.train.unroll
                         else ("sgd_loop_s", "sgd_unrolled_s"))
    assert result[measured] == result["sgd_s"] and result[missing] is None
    assert "--no-sgd-reference" in bench.format_report(
        {"network": {"name": "x", "options": {}}, "device": "cpu", "learner": result})
