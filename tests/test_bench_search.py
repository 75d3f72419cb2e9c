"""The search benchmark: its timing helper, tree depths, summary and one tiny run."""

import json

import numpy as np
import pytest

from experiments import bench_search as bench
from experiments.common import time_calls
from gomoku_jax import cli


def test_time_calls_compiles_warms_up_then_times_until_enough():
    calls = []

    def fn(i):
        calls.append(i)
        return np.zeros(())

    out = time_calls(fn, lambda i: (i,), repeats=4, warmup=2)
    # call 0 compiles, calls 1-2 warm up, four timed calls follow, each with its own args
    assert calls == list(range(7))
    assert len(out["seconds_all"]) == 4
    assert out["seconds"] == pytest.approx(float(np.median(out["seconds_all"])))
    assert out["compile_and_first_call_s"] >= 0

    calls.clear()
    out = time_calls(fn, lambda i: (i,), repeats=1, min_seconds=0.02)
    assert sum(out["seconds_all"]) >= 0.02 and len(calls) == 1 + len(out["seconds_all"])

    calls.clear()
    ticks = []
    time_calls(fn, lambda i: (i,), repeats=3, warmup=1, on_call=lambda: ticks.append(len(calls)))
    assert ticks == [1, 2, 3, 4, 5]  # after every call: compiling, warm-up and timed ones


def test_mean_depth_counts_the_paths_of_created_nodes():
    # game 0: root -> 1 -> 2, root -> 3; game 1: root -> 1, two nodes unused
    parents = np.array([[-1, 0, 1, 0], [-1, 0, -1, -1]])
    assert bench._depths(parents).tolist() == [[0, 1, 2, 1], [0, 1, -1, -1]]
    assert bench.mean_depth(parents) == pytest.approx((1 + 2 + 1 + 1) / 4)


def test_summary_divides_the_right_rows():
    def row(algo, backend, sims, s_per_sim):
        return {"algorithm": algo, "batch": 8, "backend": backend, "simulations": sims,
                "s_per_sim": s_per_sim, "mean_depth": 1.0}

    rows = [row("puct", "linear", 16, 1.0), row("puct", "linear", 400, 1.5),
            row("puct", "mctx", 16, 2.0), row("puct", "mctx", 400, 30.0)]
    [(name, entry)] = bench.summarize(rows).items()
    assert name == "puct batch 8"
    assert entry["linear_growth"]["ratio"] == pytest.approx(1.5)
    assert entry["mctx_growth"]["ratio"] == pytest.approx(15.0)
    assert entry["speedup_vs_mctx"] == {"16": pytest.approx(2.0), "400": pytest.approx(20.0)}
    assert "selection_growth" not in entry  # no selection timed

    # 400 simulations go 1.5 levels deeper than 16; an interior step costs 0.4 of a whole
    # 16-simulation step, so the extra levels alone make 1 + 1.5 * 0.4 = 1.6x
    rows[1]["mean_depth"] = 2.5
    selection = [{"algorithm": "puct", "batch": 8, "interior_s": 0.4, "interior_us": 4e5,
                  "root_s": 0.3, "root_us": 3e5},
                 {"algorithm": "gumbel", "batch": 8, "interior_s": 9.0, "interior_us": 9e6,
                  "root_s": 9.0, "root_us": 9e6}]
    growth = bench.summarize(rows, selection)["puct batch 8"]["selection_growth"]
    assert growth["ratio"] == pytest.approx(1.6)
    assert growth["extra_levels"] == pytest.approx(1.5)
    assert (growth["from"], growth["to"], growth["interior_us"]) == (16, 400, 4e5)


def test_argmax_line_says_a_cost_within_the_loops_noise_is_not_measurable():
    # a GPU run measured jnp.argmax's loop below its baseline; that is noise, not a cost
    result = {"batch": 1024, "num_actions": 81, "baseline_us": 15.2, "jnp_us": 14.9,
              "ops_us": 16.6, "jnp_argmax_us": 14.9 - 15.2, "ops_argmax_us": 16.6 - 15.2}
    assert bench.argmax_line(result) == (
        "argmax over [1024, 81]: jnp.argmax not measurable (a step 14.9 us, the baseline's "
        "15.2 us), ops.argmax 1.4 us")
    result.update(jnp_us=26.0, jnp_argmax_us=26.0 - 15.2)
    assert "jnp.argmax 10.8 us," in bench.argmax_line(result)


@pytest.mark.parametrize("argv", [["--repeats", "0"], ["--warmup", "-1"],
                                  ["--min-seconds", "-1"], ["--size", "3"],
                                  ["--simulations", "0"], ["--mctx-simulations", "8", "0"],
                                  ["--opening-stones", "9"], ["--searches-per-call", "0"]])
def test_bad_options_stop_before_any_timing(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(argv)
    assert exit_info.value.code == 2
    message = capsys.readouterr().err.split("error:", 1)[1]  # after the usage lines
    assert argv[0] in message  # the option is named


def test_searches_per_call_run_in_one_program_and_count_per_search():
    """With ``searches=3`` every timed call runs three whole searches (each evaluates its
    root once and each of its 4 simulations once), and the figures are per search."""
    import jax

    from gomoku_jax import search as search_lib

    env = bench.game_env(7)
    states = bench.openings(env, jax.random.key(0), 2, 2)
    evaluations = []
    uniform = search_lib.uniform_evaluate(env)

    def counted(params, states):
        jax.debug.callback(lambda: evaluations.append(1))
        return uniform(params, states)

    out = bench.time_search(env, counted, None, states, "gumbel", 4, "linear", repeats=2,
                            seed=0, searches=3)
    jax.effects_barrier()
    calls = 1 + len(out["seconds_all"])  # the compiling call and the timed ones
    assert len(evaluations) == calls * 3 * (1 + 4)
    assert out["searches_per_call"] == 3
    assert out["s_per_sim"] == pytest.approx(out["seconds"] / 3 / 4)
    assert out["faults_per_call"] is None or out["faults_per_call"] >= 0
    assert out["mean_depth"] == pytest.approx(1.0)  # 4 Gumbel simulations: the root's children


def test_tiny_run_times_ours_and_mctx_in_the_same_report(tmp_path):
    out = tmp_path / "bench.json"
    assert cli.main(["bench", "search", "--quick", "--algorithms", "puct",
                     "--simulations", "4", "40", "--mctx-simulations", "40", "--repeats", "2",
                     "--warmup", "1", "--min-seconds", "0", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["device"] and (report["repeats"], report["warmup"]) == (2, 1)
    rows = {(r["backend"], r["simulations"]): r for r in report["rows"]}
    assert set(rows) == {("linear", 4), ("linear", 40), ("mctx", 40), ("linear-depth1", 4),
                         ("linear-depth1", 40)}
    for (backend, sims), r in rows.items():
        assert (r["algorithm"], r["batch"]) == ("puct", 8)
        assert len(r["seconds_all"]) == 2
        assert r["ms_per_sim"] == pytest.approx(1000 * r["seconds"] / sims)
    # 40 PUCT simulations over 8 games go deeper than one level; the control does not
    assert rows["linear", 40]["mean_depth"] > 1.0
    assert rows["linear-depth1", 40]["mean_depth"] == pytest.approx(1.0)
    assert rows["linear", 40]["mean_depth"] == pytest.approx(rows["mctx", 40]["mean_depth"])
    summary = report["summary"]["puct batch 8"]
    assert summary["speedup_vs_mctx"]["40"] == pytest.approx(
        rows["mctx", 40]["s_per_sim"] / rows["linear", 40]["s_per_sim"])
    assert summary["depth1_growth"]["ratio"] == pytest.approx(
        rows["linear-depth1", 40]["s_per_sim"] / rows["linear-depth1", 4]["s_per_sim"])
    # an argmax over the batch's actions both ways, timed in the same run
    [argmax] = report["argmax"]
    assert (argmax["batch"], argmax["num_actions"]) == (8, 81)
    assert argmax["jnp_argmax_us"] == pytest.approx(argmax["jnp_us"] - argmax["baseline_us"])
    assert argmax["ops_argmax_us"] == pytest.approx(argmax["ops_us"] - argmax["baseline_us"])
    # one selection step alone, timed on the tree of the 40-simulation search
    [sel] = report["selection"]
    assert (sel["algorithm"], sel["batch"], sel["simulations"]) == ("puct", 8, 40)
    assert sel["root_s"] > 0 and sel["interior_s"] > 0
    assert sel["interior_us"] == pytest.approx(1e6 * sel["interior_s"])
    assert summary["selection_growth"]["ratio"] == pytest.approx(
        1 + (rows["linear", 40]["mean_depth"] - rows["linear", 4]["mean_depth"])
        * sel["interior_s"] / rows["linear", 4]["s_per_sim"])


@pytest.mark.parametrize("module", ["bench_alphazero", "bench_game", "bench_mcts",
                                    "bench_search", "bench_sweep", "generate_records"])
def test_an_output_file_that_is_a_directory_is_refused_before_any_work(module, tmp_path,
                                                                       capsys):
    import importlib

    main = importlib.import_module(f"experiments.{module}").main
    with pytest.raises(SystemExit) as exit_info:
        main(["--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert f"{tmp_path} is a directory; give the file to write" in capsys.readouterr().err


@pytest.mark.parametrize("module", ["bench_game", "bench_mcts", "gomokubot_strength"])
@pytest.mark.parametrize("seed", ["-1", str(2**32), str(2**63), "seven"])
def test_a_seed_out_of_range_is_refused_before_any_work(module, seed, monkeypatch, capsys):
    import importlib

    script = importlib.import_module(f"experiments.{module}")
    monkeypatch.setattr(script, "run", lambda *a, **kw: pytest.fail("the work was started"))
    with pytest.raises(SystemExit) as exit_info:
        script.main(["--seed", seed])
    assert exit_info.value.code == 2
    assert (f"argument --seed: must be an integer from 0 to 4294967295, got {seed!r}"
            in capsys.readouterr().err)


@pytest.mark.parametrize("games", ["0", "-2"])
def test_gomokubot_strength_refuses_no_timing_games_before_the_matches(games, monkeypatch,
                                                                       capsys):
    from experiments import gomokubot_strength

    monkeypatch.setattr(gomokubot_strength, "run",
                        lambda *a, **kw: pytest.fail("the matches were started"))
    with pytest.raises(SystemExit) as exit_info:
        gomokubot_strength.main(["--timing-games", games])
    assert exit_info.value.code == 2
    assert (f"argument --timing-games: must be an integer >= 1, got {games!r}"
            in capsys.readouterr().err)


@pytest.mark.parametrize("module,required", [
    ("seed004_tables", []), ("gomokubot_strength", []),
    ("missed_wins", ["--agent", "heuristic"]), ("imitation_strength", [])])
@pytest.mark.parametrize("where", ["directory", "under a file"])
def test_a_json_report_that_cannot_be_written_is_refused_before_the_experiment(
        module, required, where, tmp_path, monkeypatch, capsys):
    import importlib

    script = importlib.import_module(f"experiments.{module}")
    monkeypatch.setattr(script, "run", lambda *a, **kw: pytest.fail("the work was started"))
    (tmp_path / "afile").write_text("")
    out = tmp_path if where == "directory" else tmp_path / "afile" / "report.json"
    with pytest.raises(SystemExit) as exit_info:
        script.main([*required, "--json", str(out)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --json:" in err
    assert ("is a directory" if where == "directory" else "exists and is not a folder") in err


@pytest.mark.parametrize("module,argv", [
    ("bench_search", ["--min-seconds", "inf"]), ("bench_search", ["--min-seconds", "nan"]),
    ("bench_search", ["--mctx-budget-s", "nan"]), ("bench_search", ["--mctx-budget-s", "-1"]),
    ("bench_alphazero", ["--max-tree-gb", "nan"]), ("bench_alphazero", ["--max-tree-gb", "0"])])
def test_a_number_that_cannot_bound_the_run_is_refused_before_any_timing(module, argv,
                                                                        monkeypatch, capsys):
    import importlib

    script = importlib.import_module(f"experiments.{module}")
    for name in ("run", "run_bench"):
        if hasattr(script, name):
            monkeypatch.setattr(script, name, lambda *a, **kw: pytest.fail("timing started"))
    with pytest.raises(SystemExit) as exit_info:
        script.main(argv)
    assert exit_info.value.code == 2
    assert f"{argv[0]} must be" in capsys.readouterr().err.split("error:", 1)[1]


@pytest.mark.parametrize("size, k", [(3, 3), (4, 3), (5, 3), (5, 4), (9, 5)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bench_mcts_openings_stay_on_small_boards(size, k, seed):
    from experiments import bench_mcts
    from gomoku_jax.game import Gomoku

    env = Gomoku(size, k)
    openings = bench_mcts._positions(env, 4, seed)
    assert openings[0] == [] and len(openings) == 4
    for moves in openings[1:]:
        assert len(set(moves)) == len(moves) and all(0 <= a < size * size for a in moves)
        state = bench_mcts._state(env, moves)  # legal: no stone off the board or on another
        assert not bool(state.terminated)  # something to search
