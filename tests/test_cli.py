"""The command line: random game, benchmark plumbing and clear errors."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gomoku_jax import cli
from gomoku_jax import io as io_lib

ROOT = Path(__file__).resolve().parents[1]


def test_random_game_prints_a_finished_board_and_writes_svg(tmp_path, capsys):
    svg = tmp_path / "game.svg"
    assert cli.main(["random-game", "--size", "7", "--k", "4", "--seed", "1", "--svg", str(svg),
                     "--moves"]) == 0
    out = capsys.readouterr().out
    assert "gomoku-7x7-k4-freestyle" in out
    assert any(word in out for word in ("black wins", "white wins", "draw"))
    root = ET.fromstring(svg.read_text())
    assert root.tag.endswith("svg")
    afile = tmp_path / "afile"
    afile.write_text("mine")
    for path, text in ((tmp_path, f"argument --svg: {tmp_path} is a directory; give the file "
                                  "to write"),
                       (afile / "game.svg", f"argument --svg: {afile / 'game.svg'}: {afile} "
                                            "exists and is not a folder")):
        with pytest.raises(SystemExit) as exit_:  # refused as the option is read
            cli.main(["random-game", "--size", "7", "--k", "4", "--svg", str(path)])
        assert exit_.value.code == 2
        out, err = capsys.readouterr()
        assert text in err and "Errno" not in err and "One random game" not in out, err
    assert afile.read_text() == "mine"


@pytest.mark.parametrize("argv, text", [
    (["random-game", "--size", "25"], "GameConfig.size must be an integer from 3 to 19, got 25"),
    (["random-game", "--size", "9", "--k", "12"],
     "GameConfig.k must be an integer from 3 to 9 (no more than the board's size 9), got 12"),
])
def test_bad_settings_give_one_clear_line(argv, text, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert text in err and "Traceback" not in err


def test_a_tournament_refuses_bad_settings_before_any_game(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    base = ["tournament", "--agents", "random", "heuristic", "--size", "5", "--k", "4",
            "--games-per-pair", "2"]
    for extra, text in (
            (["--out", str(afile)], f"--out {afile} exists and is not a folder; give a folder"),
            (["--out", str(afile / "reports")],
             f"--out {afile / 'reports'}: {afile} exists and is not a folder, so no folder"),
            (["--opening-stones", "7"],
             "error: --opening-stones: opening_stones must be at most 2*(k-1) = 6"),
            (["--agents", "random"], "--agents: a round robin needs at least two agents, got "
                                     "['random']"),
            (["--agents", "random", "heuristic", "random"],
             "--agents: each agent plays once; repeated: random"),
            (["--agents", "alphabeta", "heuristic", "alphabeta-2"],
             "--agents: 'alphabeta' and 'alphabeta-2' are the same agent, alphabeta-2; each "
             "agent plays once")):
        assert cli.main(base + extra) == 2
        out, err = capsys.readouterr()
        assert text in err and "Win rate" not in out and "games" not in err
    assert afile.read_text() == "mine"


def test_export_writes_only_gjx_files_and_never_the_runs_own(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "final.gjx").write_bytes(b"the run's agent")
    afile = tmp_path / "afile"
    afile.write_text("mine")
    for out, text in ((tmp_path / "agent.txt", "an exported agent's file name ends in .gjx"),
                      (run / "final.gjx", f"is {run / 'final.gjx'} itself, the run's own"),
                      # not there yet (no evaluation so far), written by the run later
                      (run / "best.gjx", f"is {run / 'best.gjx'} itself, the run's own"),
                      (afile / "agent.gjx", f"{afile} exists and is not a folder")):
        assert cli.main(["export", "--workdir", str(run), "--out", str(out), "--force"]) == 2
        assert text in capsys.readouterr().err
    assert not (tmp_path / "agent.txt").exists() and not (run / "best.gjx").exists()
    assert (run / "final.gjx").read_bytes() == b"the run's agent"


def test_export_names_the_runs_config_file_when_a_value_there_is_wrong(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text('{"algorithm": "alphazero", "train": {"learning_rate": -1}}')
    assert cli.main(["export", "--workdir", str(run), "--out", str(tmp_path / "a.gjx")]) == 2
    err = capsys.readouterr().err
    assert f"config file '{run / 'config.json'}': train: train.learning_rate must be" in err
    assert not (tmp_path / "a.gjx").exists()


def test_unknown_options_and_commands_are_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["random-game", "--colour", "red"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --colour red" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench", "chess"])
    assert exit_.value.code == 2
    assert "invalid choice: 'chess'" in capsys.readouterr().err



@pytest.mark.parametrize("argv, text", [
    # argparse checks required options first: the mistyped one must still be named
    (["train", "--confg", "x.json", "--workdir", "w"], "unrecognized arguments: --confg"),
    (["export", "--bogus"], "unrecognized arguments: --bogus"),
    (["records", "generate", "--bogus", "--games", "1"], "unrecognized arguments: --bogus"),
    # a script's options before the script's name
    (["records", "--games", "3"], "records: give the action before its options "
                                  "(gomoku-jax records generate --games 3); got --games"),
    (["bench", "--quick"], "bench: give a benchmark before its options"),
    # options are taken only as spelled: an abbreviation is an unknown option
    (["export", "--whi", "best"], "unrecognized arguments: --whi"),
    (["tournament", "--agents", "random", "heuristic", "--games", "3"],
     "gomoku-jax tournament: error: unrecognized arguments: --games"),
    # arguments left over are refused by their command, whose usage is printed
    (["train", "--config", "x.json", "--workdir", "w", "--iter", "3"],
     "usage: gomoku-jax train [-h] --config CONFIG"),
    (["train", "--config", "x.json", "--workdir", "w", "--iter", "3"],
     "gomoku-jax train: error: unrecognized arguments: --iter 3"),
    # before the command only --plugin goes, whatever the command (bench and records
    # pass the options after them on to their script)
    (["--bogus", "random-game"], "gomoku-jax: error: unrecognized arguments: --bogus (only "
                                 "--plugin MODULE goes before the command)"),
    (["--plugin", "train", "--bogus", "train", "--config", "x", "--workdir", "w"],
     "gomoku-jax: error: unrecognized arguments: --bogus (only --plugin MODULE goes"),
    (["--no-progress", "records", "generate", "--size", "5"],
     "gomoku-jax: error: unrecognized arguments: --no-progress (only --plugin MODULE goes"),
    (["--plugin", "m", "bench", "--quick"], "bench: give a benchmark before its options"),
    (["--plugin=m", "records", "--games", "3"], "records: give the action before its options"),
    (["random-game", "--plugin=m"], "random-game: error: unrecognized arguments: --plugin=m; "
                                    "--plugin goes before the command"),
    # refused before anything starts (here: before joining a run of several processes)
    (["train", "--distributed", "--config", "x", "--workdir", "w", "--iter", "3"],
     "gomoku-jax train: error: unrecognized arguments: --iter 3"),
])
def test_a_mistyped_option_is_named_before_missing_ones(argv, text, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert text in err and "are required" not in err


EXPERIMENT_SCRIPTS = sorted(path.stem for path in (ROOT / "experiments").glob("*.py")
                            if "ArgumentParser(" in path.read_text(encoding="utf-8"))


class _Parsed(Exception):
    """Raised in place of parsing, to see a script's parser."""


def test_every_experiment_script_is_found_and_parses_with_the_projects_parser():
    assert len(EXPERIMENT_SCRIPTS) >= 11 and "generate_records" in EXPERIMENT_SCRIPTS
    for script in EXPERIMENT_SCRIPTS:
        text = (ROOT / "experiments" / f"{script}.py").read_text(encoding="utf-8")
        assert "argparse.ArgumentParser(" not in text, script


@pytest.mark.parametrize("script", EXPERIMENT_SCRIPTS)
def test_experiment_scripts_take_options_only_as_spelled(script, monkeypatch, capsys):
    """A prefix of one of a script's options is refused, not read as that option."""
    import importlib

    module = importlib.import_module(f"experiments.{script}")
    parsers = []

    def look(self, args=None, namespace=None):
        parsers.append(self)
        raise _Parsed

    with monkeypatch.context() as patch:
        patch.setattr(cli.ArgumentParser, "parse_args", look)
        with pytest.raises(_Parsed):
            module.main([])
    options = [o for action in parsers[0]._actions for o in action.option_strings
               if o.startswith("--") and o != "--help"]
    abbreviation = max(options, key=len)[:-1]
    assert abbreviation not in options
    with pytest.raises(SystemExit) as exit_:
        module.main([abbreviation, "1"])
    assert exit_.value.code == 2
    assert f"unrecognized arguments: {abbreviation}" in capsys.readouterr().err


def test_missing_options_are_named_when_every_option_given_is_known(capsys):
    with pytest.raises(SystemExit):
        cli.main(["export", "--which", "best"])
    assert "the following arguments are required: --workdir, --out" in capsys.readouterr().err
    # A parser that takes abbreviations counts one as known.
    parser = cli.ArgumentParser(prog="p", allow_abbrev=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--which")
    with pytest.raises(SystemExit):
        parser.parse_args(["--whi", "best"])
    assert "the following arguments are required: --out" in capsys.readouterr().err
    parser = cli.ArgumentParser(prog="p")
    parser.add_argument("--out", required=True)
    parser.add_argument("--shift", type=float)
    for argv in (["--shift", "-1.5"], ["--shift=-2", "--", "--x"]):  # values, not options
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
        assert "the following arguments are required: --out" in capsys.readouterr().err


def test_a_benchmark_refuses_an_out_it_could_not_write_before_running(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench", "game", "--quick", "--out", str(afile / "bench.json")])
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    assert f"{afile} exists and is not a folder, so no folder can be made inside it" in err
    assert "plies/s" not in out  # refused before the benchmark ran


@pytest.mark.parametrize("seconds", ["inf", "nan", "0"])
def test_bench_game_wants_a_finite_time_for_the_reference(seconds, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench", "game", "--quick", "--numpy-seconds", seconds])
    assert exit_.value.code == 2
    assert f"--numpy-seconds must be a finite number above 0, got {float(seconds)}" in (
        capsys.readouterr().err)


def test_bench_game_reports_ratio_against_numpy(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert cli.main(["bench", "game", "--sizes", "5", "--batches", "4", "8", "--k", "4",
                     "--repeats", "1", "--numpy-seconds", "0.05", "--no-progress",
                     "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["device"].startswith("cpu")
    ref = report["numpy_reference"]["5"]["plies_per_s"]
    assert [row["batch"] for row in report["jax"]] == [4, 8]
    for row in report["jax"]:
        assert row["plies_per_s"] > 0 and 7 <= row["mean_game_length"] <= 25
        assert row["ratio"] == pytest.approx(row["plies_per_s"] / ref)
    printed = capsys.readouterr().out
    assert "NumPy plies/s" in printed and "device: cpu" in printed


def test_bench_game_prints_small_ratios_readably():
    from experiments import bench_game

    ratios = (0.0432, 0.5, 1.56, 9.94, 9.96, 54.4, 1234.5)
    assert [bench_game.format_ratio(r) for r in ratios] == [
        "0.043x", "0.5x", "1.6x", "9.9x", "10x", "54x", "1234x"]
    row = {"size": 9, "batch": 256, "plies_per_s": 1.56e6, "games_per_s": 3e4,
           "mean_game_length": 52.0, "ratio": 1.56, "compile_and_first_call_s": 0.5}
    text = bench_game.format_report({"k": 5, "rule": "freestyle", "device": "cpu",
                                     "numpy_reference": {"9": {"plies_per_s": 1e6}},
                                     "jax": [row]})
    assert text.splitlines()[-1].split()[-2:] == ["1.6x", "0.50"]  # (JSON: 1.56)


def test_bench_mcts_prints_small_ratios_readably():
    # a search slower than the NumPy one (one game of very few simulations) read "1x"
    from experiments import bench_mcts

    text = bench_mcts.format_report({
        "board": "9x9, k=5", "simulations": 1, "device": "cpu",
        "single_game": {"seconds_per_move": 0.003, "max_seconds_per_move": 0.005,
                        "simulations_per_s": 358.0},
        "batch": {"games": 1, "simulations_per_s": 2360.0},
        "numpy_reference": {"simulations_per_s": 658.0},
        "ratio_single": 358 / 658, "ratio_batch": 2360 / 658})
    assert "= 0.54x NumPy" in text and "= 3.6x NumPy" in text


def test_bench_refuses_bad_options(capsys):
    assert cli.main(["bench", "game", "--sizes", "2"]) == 2
    assert "GameConfig.size must be an integer from 3 to 19, got 2" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench", "game", "--repeats", "0"])
    assert exit_.value.code == 2
    assert "argument --repeats: must be an integer >= 1, got '0'" in capsys.readouterr().err


def test_tournament_from_config_writes_reports(tmp_path, capsys):
    import jax

    from gomoku_jax.game import Gomoku

    config = tmp_path / "t.json"
    config.write_text(json.dumps({"description": "two baselines on 6x6",
                                  "game": {"size": 6, "k": 4},
                                  "agents": ["random", "heuristic"], "games_per_pair": 4,
                                  "seed": 1}))
    out = tmp_path / "out"
    assert cli.main(["tournament", "--config", str(config), "--out", str(out),
                     "--opening-stones", "2"]) == 0
    report = json.loads((out / "tournament.json").read_text())
    assert report["agents"] == ["random", "heuristic"]
    assert report["config"]["opening_stones"] == 2 and report["config"]["game"]["size"] == 6
    assert report["config"]["description"] == "two baselines on 6x6"
    assert report["colours"]["games"] == 4
    assert report["device"].startswith(jax.devices()[0].platform) and report["date"]
    # every game, replayable: the moves reach the recorded winner
    assert len(report["games"]) == 4 and {g["black"] for g in report["games"]} == {
        "random", "heuristic"}
    for game in report["games"]:
        env = Gomoku(6, 4)
        state = env.init()
        for action in game["moves"]:
            state = env.step(state, action)
        assert bool(state.terminated) and int(state.winner) == game["winner"]
    assert "### Elo" in (out / "tournament.md").read_text()
    assert "Win rate" in capsys.readouterr().out
    # reports already in --out are kept unless --force; refused before any game
    before = (out / "tournament.json").read_bytes()
    again = ["tournament", "--agents", "random", "heuristic", "--size", "5", "--k", "4",
             "--games-per-pair", "2", "--out", str(out)]
    assert cli.main(again) == 2
    out_text, err = capsys.readouterr()
    assert f"--out {out}: {out / 'tournament.json'}, {out / 'tournament.md'}, " in err
    assert "pass --force to replace" in err and "Win rate" not in out_text
    assert (out / "tournament.json").read_bytes() == before
    # settings left at their defaults are in the report too
    assert cli.main(again + ["--force"]) == 0
    assert (out / "tournament.md").read_text().startswith(
        "5x5, 4 in a row (freestyle); 2 games per pairing, 0 random opening stone(s), seed 0.")
    config = json.loads((out / "tournament.json").read_text())["config"]
    assert config == {"agents": ["random", "heuristic"], "games_per_pair": 2, "seed": 0,
                      "opening_stones": 0, "game": {"size": 5, "k": 4, "rule": "freestyle",
                                                    "observation": "stones-colour",
                                                    "positional_bias": None}}
    # an option given after the command, where it is not one: a hint
    with pytest.raises(SystemExit) as exit_:
        cli.main(["random-game", "--size", "5", "--plugin", "x"])
    assert exit_.value.code == 2
    assert "--plugin goes before the command" in capsys.readouterr().err


@pytest.mark.parametrize("content, text", [
    ('{"agents": ["random", "heuristic"], "rounds": 3}', "unknown key 'rounds'; allowed: "),
    ('{"agents": ["random", "heuristic"], "games_per_par": 3, "x": 1}',
     "unknown keys 'games_per_par' (did you mean 'games_per_pair'?), 'x'; allowed"),
    ('{"algorithm": "dqn", "game": {"size": 9}, "train": {}}',
     "bad.json is a training config, not a tournament one: train it with gomoku-jax train "
     "--config "),
    ('{"agents": ["random", "chess"]}', "unknown agent 'chess'"),
    ('{"agents": []}', "a tournament needs agents"),
    ("[1, 2", "is not valid JSON"),
    (b"\xff\xfe{}", "is not UTF-8 text"),
    ('{"game": {"size": 9, "kk": 3}, "agents": ["random", "heuristic"]}',
     "bad.json: game.kk: unknown setting; known: size, k, rule"),
    ('{"game": [9], "agents": ["random", "heuristic"]}', "bad.json: game must be an object"),
    ('{"game": {"rule": 3}, "agents": ["random", "heuristic"]}',
     "game.rule: expected a string, got 3 (from tournament config "),
    ('{"game": {"positional_bias": NaN}, "agents": ["random", "heuristic"]}',
     "game: positional_bias must be a positive number (sigma in cells) or None, got nan "
     "(from tournament config "),
    ('{"agents": "random"}', "agents must be a list of agent names, got 'random'"),
    ('{"agents": ["random", "heuristic"], "description": ["x"]}',
     "bad.json: description must be a string, got ['x']"),
    ('{"agents": ["random", 3]}', "agents[1] must be an agent name (a non-empty string), got 3"),
    ('{"agents": ["random", "heuristic"], "seed": "abc"}',
     "seed must be an integer from 0 to 4294967295, got 'abc'"),
    ('{"agents": ["random", "heuristic"], "seed": 99999999999999999999}',
     "seed must be an integer from 0 to 4294967295, got 99999999999999999999"),
    ('{"agents": ["random", "heuristic"], "games_per_pair": 0}',
     "games_per_pair must be an integer >= 1, got 0"),
    ('{"agents": ["random", "heuristic"], "opening_stones": 1.5}',
     "opening_stones must be an integer >= 0, got 1.5"),
    ('{"agents": ["random"]}', "bad.json: a round robin needs at least two agents"),
    ('{"agents": ["random", "random"]}', "bad.json: each agent plays once; repeated: random"),
    ('{"game": {"size": 9, "k": 4}, "agents": ["random", "heuristic"], "opening_stones": 7}',
     "bad.json: opening_stones must be at most 2*(k-1) = 6"),
])
def test_tournament_config_errors_are_clear(tmp_path, content, text, capsys):
    config = tmp_path / "bad.json"
    if isinstance(content, bytes):
        config.write_bytes(content)
    else:
        config.write_text(content)
    assert cli.main(["tournament", "--config", str(config), "--size", "5", "--k", "4"]) == 2
    err = capsys.readouterr().err
    assert text in err and "Traceback" not in err and err.count("\n") == 1, err


def test_a_bad_board_setting_names_where_it_came_from(tmp_path, capsys):
    config = tmp_path / "t.json"
    config.write_text('{"agents": ["random", "heuristic"], "game": {"size": 9, "k": 12}}')
    for argv, text in ((["--agents", "random", "heuristic", "--size", "25"],
                        "GameConfig.size must be an integer from 3 to 19, got 25 (from --size)"),
                       (["--config", str(config)],
                        "GameConfig.k must be an integer from 3 to 9 (no more than the board's "
                        f"size 9), got 12 (from tournament config {config})"),
                       (["--agents", "random", "heuristic", "--size", "3"],  # k: the default 5
                        "got 5 (from the default k; give --k)"),
                       (["--config", str(config), "--k", "4", "--size", "2"],
                        "got 2 (from --size)")):
        assert cli.main(["tournament", *argv]) == 2
        assert text in capsys.readouterr().err
    config.write_text('{"agents": ["random", "heuristic"], "game": {"size": 4}}')  # no k
    assert cli.main(["tournament", "--config", str(config)]) == 2
    assert "got 5 (from the default k; give --k or the config's game.k)" in (
        capsys.readouterr().err)


def test_tournament_no_progress_leaves_out_the_progress_bar(capsys):
    argv = ["tournament", "--agents", "random", "heuristic", "--size", "5", "--k", "4",
            "--games-per-pair", "2"]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert "round robin: 100%" in err and "Win rate" in out  # the bar, on stderr
    assert cli.main(argv + ["--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "Win rate" in out  # the report, without the bar


def test_tournament_refuses_a_games_per_pair_below_one(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["tournament", "--agents", "random", "heuristic", "--games-per-pair", "0"])
    assert exit_.value.code == 2
    assert "--games-per-pair: must be an integer >= 1, got '0'" in capsys.readouterr().err


def test_tournament_warns_that_an_odd_number_of_games_leaves_colours_unbalanced(capsys):
    import warnings

    from gomoku_jax.arena import ArenaWarning

    argv = ["tournament", "--agents", "random", "heuristic", "--size", "5", "--k", "4"]
    with pytest.warns(ArenaWarning, match=r"^3 games per pair is odd, so in each pair the "
                                          r"first agent plays black 2 times and the other 1; "
                                          r"an even number balances the colours$"):
        assert cli.main(argv + ["--games-per-pair", "3"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", ArenaWarning)
        assert cli.main(argv + ["--games-per-pair", "2"]) == 0


def test_an_interrupted_tournament_plays_only_its_unfinished_matches(tmp_path, capsys,
                                                                    monkeypatch):
    from gomoku_jax import arena

    argv = ["tournament", "--agents", "random", "heuristic", "heuristic-2", "--size", "5",
            "--k", "4", "--games-per-pair", "2", "--no-progress", "--out", str(tmp_path)]
    real, played = arena._play_match, []

    def play(env, a, b, *args, **kwargs):
        if len(played) == 1:  # Ctrl-C during the second match
            raise KeyboardInterrupt
        played.append((a.name, b.name))
        return real(env, a, b, *args, **kwargs)

    monkeypatch.setattr(arena, "_play_match", play)
    kept = tmp_path / cli.TOURNAMENT_CHECKPOINT
    assert cli.main(argv) == 130
    assert (f"gomoku-jax: interrupted; 1 finished match kept in {kept}: the same command "
            "plays the others") in capsys.readouterr().err
    assert not (tmp_path / "tournament.json").exists()
    monkeypatch.setattr(arena, "_play_match", real)
    # other settings are refused, naming them, and the kept match stays; --force starts over
    assert cli.main(argv + ["--seed", "3"]) == 2
    err = capsys.readouterr().err
    assert f"--out {tmp_path}: checkpoint {kept} holds matches of another round robin" in err
    assert "seed: kept 0, now 3" in err and "--force plays this one from the start" in err
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert (f"1 of 3 matches were kept from an interrupted run of this round robin ({kept}), "
            "not played again") in err
    report = json.loads((tmp_path / "tournament.json").read_text())
    assert report["colours"]["games"] == 6 and not kept.exists()
    assert (tmp_path / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(cli.TOURNAMENT_REPORTS)
    assert [k["agents"] for k in report["kept_matches"]] == [["random", "heuristic"]]
    assert "1 of 3 matches were played by an earlier run" in (
        tmp_path / "tournament.md").read_text()
    # cut short while writing its reports: refused, saying --force keeps the matches
    kept.write_text("")
    assert cli.main(argv) == 2
    assert (f"pass --force to replace, or choose another path (with --force, the finished "
            f"matches kept in {kept} are not played again)") in capsys.readouterr().err
    kept.unlink()
    assert cli.main(argv) == 2
    assert "not played again" not in capsys.readouterr().err  # none kept: nothing said
    # a damaged checkpoint is refused; --force plays from the start
    for name in cli.TOURNAMENT_REPORTS:
        (tmp_path / name).unlink()
    kept.write_text("not a checkpoint\n")
    assert cli.main(argv) == 2
    assert "not a round robin checkpoint" in capsys.readouterr().err
    assert cli.main(argv + ["--force"]) == 0
    assert f"--force: {kept} could not be resumed" in capsys.readouterr().err
    assert json.loads((tmp_path / "tournament.json").read_text())["kept_matches"] == []
    assert [(g["black"], g["white"]) for g in report["games"]][:2] == [
        ("random", "heuristic"), ("heuristic", "random")]


COUNT_OPTIONS = [  # (command line, the error after "error: ")
    (["records", "generate", "--games", "0"], "argument --games: must be an integer >= 1, got '0'"),
    (["records", "generate", "--workers", "x"], "argument --workers: must be an integer >= 1, "
                                                 "got 'x'"),
    (["records", "generate", "--opening-stones", "-1"], "argument --opening-stones: must be an "
                                                        "integer >= 0, got '-1'"),
    (["tournament", "--opening-stones", "-2"], "argument --opening-stones: must be an integer "
                                               ">= 0, got '-2'"),
    (["play", "--port", "65536"], "argument --port: must be an integer from 0 to 65535, "
                                  "got '65536'"),
    (["train", "--config", "c.json", "--workdir", "w", "--iterations", "1.5"],
     "argument --iterations: must be an integer >= 1, got '1.5'"),
    (["train", "--config", "c.json", "--workdir", "w", "--process-id", "-1"],
     "argument --process-id: must be an integer >= 0, got '-1'"),
    (["bench", "game", "--batches", "8", "0"], "argument --batches: must be an integer >= 1, "
                                               "got '0'"),
    (["bench", "mcts", "--batch", "0"], "argument --batch: must be an integer >= 1, got '0'"),
    (["bench", "search", "--size", "20"], "argument --size: must be an integer from 5 to 19, "
                                          "got '20'"),
    (["bench", "alphazero", "--sizes", "4"], "argument --sizes: must be an integer from 5 to "
                                             "19, got '4'"),
    (["bench", "search", "--opening-stones", "9"], "argument --opening-stones: must be an "
                                                   "integer from 0 to 8, got '9'"),
    (["bench", "alphazero", "--repeats", "0"], "argument --repeats: must be an integer >= 1, "
                                               "got '0'"),
    (["records", "generate", "--games", "9" * 5000],  # more digits than int reads; cut short
     "argument --games: must be an integer >= 1, got '" + "9" * 36 + "..."),
]


@pytest.mark.parametrize("argv, message", COUNT_OPTIONS)
def test_a_count_option_out_of_range_is_named_by_its_flag(argv, message, capsys):
    """argparse names the option (not the Python parameter behind it) and quotes what
    was given, cut short when long."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].endswith(f"error: {message}"), err
    assert "Traceback" not in err


@pytest.mark.parametrize("script, argv, message", [
    ("gomokubot_strength", ["--games", "0"], "argument --games: must be an integer >= 1"),
    ("gomokubot_strength", ["--timing-games", "0"], "argument --timing-games: must be"),
    ("missed_wins", ["--agent", "a.gjx", "--opening-stones", "-1"],
     "argument --opening-stones: must be an integer >= 0"),
    ("missed_wins", ["--agent", "a.gjx", "--seed", "-1"],
     "argument --seed: must be an integer from 0 to 4294967295"),
    ("seed004_tables", ["--games-big", "0"], "argument --games-big: must be an integer >= 1"),
    ("figures", ["--games", "0"], "argument --games: must be an integer >= 1"),
    ("imitation_strength", ["--chunk", "0"], "argument --chunk: must be an integer >= 1"),
    ("imitation_strength", ["--games", "-1"], "argument --games: must be an integer >= 0"),
    ("bench_search", ["--warmup", "-1"], "argument --warmup: must be an integer >= 0"),
])
def test_the_experiment_scripts_name_a_bad_count_option(script, argv, message, capsys):
    import importlib

    main = importlib.import_module(f"experiments.{script}").main
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("opponents", [",", " , ", ""])
def test_gomokubot_strength_refuses_an_empty_opponent_list(opponents, monkeypatch):
    """``--opponents ,`` names no opponent: refused before any game, not a report of
    the 15x15 timing alone."""
    from experiments import gomokubot_strength

    monkeypatch.setattr(gomokubot_strength.arena, "play_match",
                        lambda *a, **k: pytest.fail("a match was played"))
    with pytest.raises(ValueError, match="opponents names no opponent"):
        gomokubot_strength.main(["--opponents", opponents])


def test_a_script_run_directly_ends_a_bad_setting_with_one_line(capsys, monkeypatch):
    """`run_script`, every experiment script's ``__main__``: a ValueError or OSError is
    one line and status 2 (as `gomoku-jax` itself), Ctrl-C status 130; a script's
    report (not a status) exits 0."""
    from experiments.common import run_script

    monkeypatch.setattr("sys.argv", ["/x/experiments/gomokubot_strength.py"])

    def raising(error):
        def main():
            raise error
        return main

    for error, code, text in (
            (ValueError("opponents must be among heuristic, pure-mcts; got ['x']"), 2,
             "gomokubot_strength: error: opponents must be among heuristic, pure-mcts; "
             "got ['x']\n"),
            (FileNotFoundError(2, "No such file or directory", "a.gjx"), 2,
             "gomokubot_strength: error: [Errno 2] No such file or directory: 'a.gjx'\n"),
            (KeyboardInterrupt(), 130, "\ngomokubot_strength: interrupted\n")):
        with pytest.raises(SystemExit) as exit_:
            run_script(raising(error))
        assert exit_.value.code == code
        assert capsys.readouterr().err == text
    for returned, code in (({"report": 1}, 0), (0, 0), (1, 1)):
        with pytest.raises(SystemExit) as exit_:
            run_script(lambda: returned)
        assert exit_.value.code == code


def test_the_scripts_main_blocks_end_errors_with_one_line():
    """Run directly, a script's ``__main__`` ends a ValueError raised past its parser
    with one line and status 2, not a traceback (run_script in each)."""
    import ast
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    for path in sorted((root / "experiments").glob("*.py")):
        tree = ast.parse(path.read_text())
        blocks = [node for node in tree.body if isinstance(node, ast.If)
                  and "__main__" in ast.unparse(node.test)]
        if path.name in ("__init__.py", "common.py"):
            assert not blocks, path.name
            continue
        assert len(blocks) == 1 and "run_script(main)" in ast.unparse(blocks[0]), path.name
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.gomokubot_strength", "--opponents", "nobody",
         "--games", "1"], cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "gomokubot_strength: error: opponents must be among heuristic, pure-mcts; "
        "got ['nobody']"), proc.stderr[-2000:]


def test_a_file_that_is_not_an_exported_agent_is_named_as_such(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("# notes\n")
    assert cli.main(["tournament", "--agents", "README.md", "random"]) == 2
    err = capsys.readouterr().err
    assert ("the file README.md exists but is not an exported agent" in err
            and "unknown agent" not in err and err.count("\n") == 1), err
    assert (tmp_path / "README.md").read_text() == "# notes\n"


def test_train_refuses_an_algorithm_override(tmp_path, capsys):
    config = "experiments/configs/az_9x9_cpu.json"
    for value in ("dqn", "banana"):
        argv = ["train", "--config", config, "--smoke", "--set", f"algorithm={value}",
                "--workdir", str(tmp_path / "x")]
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert (f"algorithm is chosen by the config file ('{config}': 'alphazero'); an "
                f"override algorithm=\"{value}\" (from --set, a sweep or overrides=) "
                "cannot change it" in err), err
    assert not (tmp_path / "x").exists()


def test_train_keeps_compiled_programs_in_the_user_cache(tmp_path, monkeypatch, capsys):
    import argparse

    import jax

    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cli.compile_cache_dir() == tmp_path / "home" / ".cache" / "gomoku-jax" / "xla"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cli.compile_cache_dir() == tmp_path / "xdg" / "gomoku-jax" / "xla"
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "mine"))
    assert cli.compile_cache_dir() == tmp_path / "mine"
    before = jax.config.jax_compilation_cache_dir
    enabled = jax.config.jax_enable_compilation_cache
    try:
        args = argparse.Namespace(no_compile_cache=True)
        assert cli._use_compile_cache(args) is None and not (tmp_path / "mine").exists()
        # off even where JAX reads a cache folder from JAX_COMPILATION_CACHE_DIR itself
        assert jax.config.jax_enable_compilation_cache is False
        jax.config.update("jax_enable_compilation_cache", enabled)
        args.no_compile_cache = False
        (tmp_path / "file").write_text("keep me")
        monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "file" / "xla"))
        assert cli._use_compile_cache(args) is None  # cannot be made: said, skipped
        assert "compiled programs are not kept on disk" in capsys.readouterr().err
        assert jax.config.jax_compilation_cache_dir == before
        monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "mine"))
        assert cli._use_compile_cache(args) == tmp_path / "mine"
        assert (tmp_path / "mine").is_dir()
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "mine")
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
        jax.config.update("jax_enable_compilation_cache", enabled)
    assert cli.build_parser().parse_args(
        ["train", "--config", "c.json", "--workdir", "w", "--no-compile-cache"]).no_compile_cache


def test_train_refuses_a_workdir_that_is_a_file(tmp_path, capsys):
    config = "experiments/configs/az_9x9_cpu.json"
    path = tmp_path / "file"
    path.write_text("keep me")
    for workdir, text in ((path, f"--workdir {path} exists and is not a folder"),
                          (path / "sub", f"--workdir {path / 'sub'}: {path} exists and is "
                                         "not a folder")):
        argv = ["train", "--config", config, "--smoke", "--workdir", str(workdir)]
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert text in err and "Errno" not in err and err.count("\n") == 1, err
    assert path.read_text() == "keep me"


def test_an_empty_path_is_refused_not_taken_for_the_current_folder(tmp_path, capsys,
                                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)  # where an empty path would have written
    config = str(Path(__file__).parents[1] / "experiments/configs/az_9x9_cpu.json")
    for argv, option in ((["train", "--config", config, "--smoke", "--workdir", ""],
                          "--workdir"),
                         (["tournament", "--agents", "random", "heuristic", "--size", "5",
                           "--k", "4", "--games-per-pair", "2", "--out", ""], "--out"),
                         (["bench", "game", "--quick", "--out", ""], "--out")):
        with pytest.raises(SystemExit) as exit_:
            cli.main(argv)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and f"argument {option}" in err and (
            "the path is empty" in err) and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="--workdir is empty; give a run's folder"):
        io_lib.check_folder("", "--workdir", "give a run's folder")  # for callers in Python


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_folder_that_refuses_files_is_found_before_any_work(tmp_path, capsys):
    # /proc refuses new files whatever its permissions say (root passes os.access there)
    assert cli.main(["tournament", "--agents", "random", "heuristic", "--size", "5", "--k",
                     "4", "--games-per-pair", "2", "--out", "/proc/gomoku-reports"]) == 2
    out, err = capsys.readouterr()
    assert "--out /proc/gomoku-reports: /proc is not writable (" in err and "games" not in err
    io_lib.check_folder(tmp_path / "new" / "run", "--workdir")  # a writable place passes
    assert list(tmp_path.iterdir()) == []  # and keeps nothing of the check


def test_bench_mcts_reports_ratio_against_numpy(tmp_path):
    out = tmp_path / "mcts.json"
    # --quick fills what is not given (positions 2); explicit options win over it
    assert cli.main(["bench", "mcts", "--quick", "--size", "5", "--k", "4", "--simulations", "20",
                     "--batch", "2", "--numpy-simulations", "10", "--no-progress",
                     "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["simulations"] == 20 and r["batch"]["games"] == 2 and r["device"].startswith("cpu")
    assert r["positions"] == 2
    numpy_rate = r["numpy_reference"]["simulations_per_s"]
    assert r["ratio_batch"] == pytest.approx(r["batch"]["simulations_per_s"] / numpy_rate)
    assert r["ratio_single"] == pytest.approx(r["single_game"]["simulations_per_s"] / numpy_rate)


def test_bench_mcts_seed_reaches_the_searches(monkeypatch):
    import types

    import jax
    import jax.numpy as jnp
    import numpy as np

    from experiments import bench_mcts

    keys = []

    def search(env, config, key, state):  # records the key each search is given
        jax.debug.callback(lambda k: keys.append(np.asarray(k).tobytes()),
                           jax.random.key_data(key))
        return types.SimpleNamespace(action=jnp.int32(0))

    monkeypatch.setattr(bench_mcts.pure_mcts, "search", search)
    seen = {}
    for seed in (0, 1, 0):
        keys.clear()
        report = bench_mcts.run(5, 4, simulations=1, batch=2, positions=2, numpy_simulations=1,
                                seed=seed, progress=False)
        assert report["seed"] == seed
        seen.setdefault(seed, []).append(set(keys))
    assert len(seen[0][0]) == 3 + 3 * 2  # compile and 2 openings, one game then a batch of 2
    assert seen[0][0] == seen[0][1] and not seen[0][0] & seen[1][0]  # the seed decides them


def test_bench_game_quick_is_one_small_batch(tmp_path):
    out = tmp_path / "game.json"
    assert cli.main(["bench", "game", "--quick", "--sizes", "5", "--k", "4", "--numpy-seconds",
                     "0.05", "--no-progress", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [(row["size"], row["batch"]) for row in report["jax"]] == [(5, 256)]


def test_records_help_is_help(capsys):
    assert cli.main(["records", "--help"]) == 0
    assert "gomoku-jax records generate --help" in capsys.readouterr().out
    assert cli.main(["--plugin", "m", "records", "--help"]) == 0  # (no plugin imported)
    assert "gomoku-jax records generate --help" in capsys.readouterr().out
    # without a choice: the overview and an error, on stderr
    for command, error in (("records", "give an action"), ("bench", "give a benchmark")):
        assert cli.main(["--plugin=m", command]) == 2
        assert f"gomoku-jax {command}: error: {error}" in capsys.readouterr().err
        assert cli.main([command]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert f"usage: gomoku-jax {command}" in err
        assert err.rstrip().endswith(f"gomoku-jax {command}: error: {error}"), err


@pytest.mark.parametrize("make, text", [
    (lambda tmp: ["--config", str(tmp)], "is a directory, not a JSON file"),
    (lambda tmp: ["--config", str(_binary(tmp))], "is not UTF-8 text"),
    (lambda tmp: ["--config", "experiments/configs/tournament_baselines_9x9.json"],
     "is a tournament config (it lists agents), not a training one: run it with "
     "gomoku-jax tournament --config"),
])
def test_train_names_an_unreadable_config(tmp_path, make, text, capsys):
    argv = ["train", *make(tmp_path), "--workdir", str(tmp_path / "run")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert text in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def _binary(tmp):
    path = tmp / "config.json"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    return path


def test_train_refuses_a_workdir_that_is_a_file_and_bad_iterations(tmp_path, capsys):
    config = "experiments/configs/az_9x9_cpu.json"
    afile = tmp_path / "taken"
    afile.write_text("mine")
    assert cli.main(["train", "--config", config, "--smoke", "--workdir", str(afile)]) == 2
    assert str(afile) in capsys.readouterr().err and afile.read_text() == "mine"
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "--config", config, "--workdir", str(tmp_path), "--iterations", "0"])
    assert exit_.value.code == 2
    assert "argument --iterations: must be an integer >= 1, got '0'" in capsys.readouterr().err
    # past the schedule (the smoke variant's 3 iterations): it trained 3 and said nothing
    run = tmp_path / "run"
    assert cli.main(["train", "--config", config, "--smoke", "--workdir", str(run),
                     "--iterations", "10"]) == 2
    assert ("error: --iterations 10 is more than train.iterations=3, where the run's schedule "
            "ends and training stops: raise train.iterations instead (--set "
            "train.iterations=N;") in capsys.readouterr().err
    assert not run.exists()


def test_ctrl_c_during_training_says_what_is_kept(tmp_path, monkeypatch, capsys):
    from gomoku_jax import training

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(training, "run", interrupted)
    argv = ["train", "--config", "experiments/configs/az_9x9_cpu.json", "--smoke",
            "--workdir", str(tmp_path)]
    assert cli.main(argv) == 130
    assert "no checkpoint was written yet" in capsys.readouterr().err
    (tmp_path / "checkpoints" / "3").mkdir(parents=True)
    assert cli.main(argv) == 130
    assert "are kept: run the same command to resume" in capsys.readouterr().err


def test_a_config_file_without_an_algorithm_says_it_trains_the_default(tmp_path, monkeypatch,
                                                                         capsys):
    """A partial file (here only search settings) starts a whole default AlphaZero run:
    the command says so before it starts; a file that names its algorithm is not told.
    Either way it names the game it trains."""
    from gomoku_jax import training

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(training, "run", interrupted)
    notice = 'names no "algorithm": it trains alphazero, the default, with the defaults'
    for data, told in (({"search": {"num_simulations": 8}}, True),
                       ({"algorithm": "alphazero", "search": {"num_simulations": 8}}, False)):
        config = tmp_path / "partial.json"
        config.write_text(json.dumps(data))
        argv = ["train", "--config", str(config), "--workdir", str(tmp_path / "run")]
        assert cli.main(argv) == 130
        out = capsys.readouterr().out
        assert (notice in out) is told
        assert "\ngame: 9x9 5 in a row (freestyle)\n" in out  # the defaults' game
    # the game as trained, overrides included, whatever the config's description says
    argv = ["train", "--config", "experiments/configs/az_9x9_cpu.json", "--smoke", "--workdir",
            str(tmp_path / "run7"), "--set", "game.size=7", "--set", "game.k=4"]
    assert cli.main(argv) == 130
    out = capsys.readouterr().out
    assert "9x9 freestyle five-in-a-row" in out and "\ngame: 7x7 4 in a row (freestyle)\n" in out


def test_ctrl_c_while_compiling_exits_with_130(tmp_path, console):
    """The command itself (`cli.console`), interrupted about when XLA compiles its first
    programs on its own threads, exits with 130 and its message. (Tearing the interpreter
    down under those threads ended some runs with a crash, 139 or 134 from LLVM; that was
    intermittent, so this test shows the exit status, not the crash's absence.)"""
    import signal
    import subprocess
    import time

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(
        [*console, "train",
         "--config", str(root / "experiments/configs/az_9x9_cpu.json"), "--smoke",
         "--workdir", str(tmp_path / "run"), "--no-progress"],
        cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("training ")  # the learner is built
        time.sleep(3)  # into the first compile (it takes longer than this)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert "gomoku-jax: interrupted; no checkpoint was written yet" in err


_PLUGIN = '''"""A plugin: a network, an agent and a Q term of its own, registered when it is
imported."""
import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from gomoku_jax import agents, networks, search


class OneLayerQ(nn.Module):
    board_size: int

    @nn.compact
    def __call__(self, x, train=False):
        return nn.Dense(self.board_size ** 2)(x.reshape(x.shape[0], -1))


class FirstEmpty(agents.PythonAgent):
    def __init__(self, name):
        self.name = name

    def select(self, state, rng):
        return int(np.flatnonzero(np.asarray(state.legal_action_mask))[0])


def q_at_7(tree, node_index):
    return jnp.where(jnp.arange(tree.num_actions) == 7, 1.0, 0.0)


def prefer_7(config):
    return q_at_7


networks.register_network("plugin-q", OneLayerQ, "q", "a plugin's one-layer Q network")
agents.register_agent("plugin-first", lambda spec, env: FirstEmpty(spec))
search.register_qtransform("plugin-prefer-7", prefer_7, "Q 1 at action 7")
'''


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch, registries):
    """A folder with plugin modules as the current directory, which is not on the path
    (as for the installed ``gomoku-jax`` script); registrations are undone after."""
    import sys

    (tmp_path / "gjx_test_plugin.py").write_text(_PLUGIN)
    (tmp_path / "gjx_broken_plugin.py").write_text("raise RuntimeError('no GPU here')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    monkeypatch.setattr(cli, "PLUGINS", [])
    yield tmp_path
    for module in ("gjx_test_plugin", "gjx_broken_plugin"):
        sys.modules.pop(module, None)


def test_a_plugin_makes_its_network_and_agent_known_to_the_command_line(plugin_dir, capsys):
    import numpy as np

    from gomoku_jax import io as gio

    # an exported file of the plugin's Q network (5x5, 3 input planes): data, not code
    rng = np.random.default_rng(0)
    variables = {"params": {"Dense_0": {"kernel": rng.normal(size=(75, 25)).astype(np.float32),
                                        "bias": np.zeros(25, np.float32)}}}
    meta = {"agent": "q-greedy",
            "game": {"size": 5, "k": 4, "rule": "freestyle", "observation": "stones-colour"},
            "network": {"name": "plugin-q", "options": {}}}
    gio.write_exported(plugin_dir / "q.gjx", meta, variables)
    # without the plugin, neither is known
    assert cli.main(["tournament", "--agents", "plugin-first+killer", "random"]) == 2
    assert "unknown agent 'plugin-first'" in capsys.readouterr().err
    assert cli.main(["tournament", "--agents", "q.gjx", "random"]) == 2
    err = capsys.readouterr().err
    assert "unknown network 'plugin-q'" in err and "gomoku-jax --plugin MODULE" in err
    argv = ["--plugin", "gjx_test_plugin", "tournament", "--agents", "q.gjx", "plugin-first+killer",
            "random", "--games-per-pair", "2", "--out", "out"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    report = json.loads((plugin_dir / "out" / "tournament.json").read_text())
    assert report["agents"] == ["q.gjx", "plugin-first+killer", "random"]
    assert report["colours"]["games"] == 6 and report["config"]["game"]["size"] == 5


def test_a_plugin_makes_its_q_term_known_to_an_exported_agent(plugin_dir, capsys):
    """An exported search agent names its qtransform (data, not code): refused, naming
    the setting, without the plugin that registers it; played with it."""
    import jax

    from gomoku_jax import exported, networks, search

    module = networks.make_network("cnn", board_size=5)
    variables = networks.init_network(module, jax.random.key(0), (5, 5, 3))
    play = search.SearchConfig("gumbel", 4, max_num_considered_actions=4).to_dict()

    class Learner:  # what export_agent asks of a learner
        def export_metadata(self):
            return {"agent": "search", "network": {"name": "cnn", "options": {}},
                    "game": {"size": 5, "k": 4, "rule": "freestyle",
                             "observation": "stones-colour"},
                    "search": {**play, "gumbel_q": "plugin-prefer-7"}}

    exported.export_agent(plugin_dir / "q7.gjx", Learner(), variables)
    assert cli.main(["tournament", "--agents", "q7.gjx", "random"]) == 2
    err = capsys.readouterr().err
    assert "gumbel_q must name a registered qtransform" in err and "'plugin-prefer-7'" in err
    argv = ["--plugin", "gjx_test_plugin", "tournament", "--agents", "q7.gjx", "random",
            "--games-per-pair", "2", "--out", "out"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    report = json.loads((plugin_dir / "out" / "tournament.json").read_text())
    assert report["colours"]["games"] == 2


def test_a_plugin_that_cannot_be_imported_is_named_in_one_line(plugin_dir, capsys):
    # refused inside the framework (a name taken): the plugin's own line is named
    (plugin_dir / "gjx_taken_plugin.py").write_text(
        "from gomoku_jax import networks\n"
        "networks.register_network('resnet', networks.NETWORKS['resnet-q'][0], 'q', 'taken')\n")
    taken = plugin_dir / "gjx_taken_plugin.py"
    # a module the plugin imports is missing, not the plugin: no hint about where plugins are
    needs_dep = plugin_dir / "gjx_needs_dep.py"
    needs_dep.write_text("import gjx_missing_dependency\n")
    for module, text in (
            ("gjx_needs_dep", "cannot import it (ModuleNotFoundError: No module named "
                              f"'gjx_missing_dependency' at {needs_dep}:1)\n"),
            ("gjx_no_such_plugin", "cannot import it (ModuleNotFoundError: No module named "
                                   "'gjx_no_such_plugin'); a plugin is found by its module "
                                   "name in the current folder or a folder of PYTHONPATH"),
            ("json.gjx_no_such", "cannot import it (ModuleNotFoundError: No module named "
                                 "'json.gjx_no_such'); a plugin is found by its module name"),
            ("gjx_broken_plugin", "cannot import it (RuntimeError: no GPU here at "
                                  f"{plugin_dir / 'gjx_broken_plugin.py'}:1)"),
            ("gjx_taken_plugin", "cannot import it (ValueError: register_network: network "
                                 "'resnet' is already registered"),
            ("gjx_test_plugin.py", "give a module name (e.g. gjx_test_plugin")):
        assert cli.main(["--plugin", module, "random-game", "--size", "5"]) == 2
        out, err = capsys.readouterr()
        assert err.startswith(f"gomoku-jax: error: --plugin {module}: {text}")
        assert err.count("\n") == 1 and "Traceback" not in err
        assert out == ""  # the command did not run
        if module == "gjx_taken_plugin":
            assert err.endswith(f" at {taken}:2)\n"), err
    import sys

    sys.modules.pop("gjx_taken_plugin", None)


def test_a_plugin_shadowed_by_an_installed_module_is_warned_about(plugin_dir, capsys):
    import sys

    (plugin_dir / "json.py").write_text("raise RuntimeError('never imported')\n")
    assert cli.main(["--plugin", "json", "random-game", "--size", "5"]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"gomoku-jax: warning: --plugin json imported {json.__file__}, not "
                          "json.py in this folder"), err
    assert cli.main(["--plugin", "gjx_test_plugin", "random-game", "--size", "5"]) == 0
    assert "warning" not in capsys.readouterr().err  # the plugin of this folder: no warning
    # an installed copy that lives under this folder (a .venv here) shadows it all the same
    site = plugin_dir / ".venv" / "site-packages"
    site.mkdir(parents=True)
    (site / "gjx_twin.py").write_text("")
    (plugin_dir / "gjx_twin.py").write_text("raise RuntimeError('never imported')\n")
    (plugin_dir / "gjx_space").mkdir()  # a namespace package of this folder: no warning
    (plugin_dir / "gjx_space" / "mine.py").write_text("")
    sys.path.insert(0, str(site))
    try:
        assert cli.main(["--plugin", "gjx_twin", "random-game", "--size", "5"]) == 0
        assert f"imported {site / 'gjx_twin.py'}, not gjx_twin.py" in capsys.readouterr().err
        for module in ("gjx_space", "gjx_space.mine"):
            assert cli.main(["--plugin", module, "random-game", "--size", "5"]) == 0
            assert "warning" not in capsys.readouterr().err, module
    finally:
        sys.path.remove(str(site))
        for module in ("gjx_twin", "gjx_space", "gjx_space.mine"):
            sys.modules.pop(module, None)


def test_record_generating_workers_import_the_plugins_too(plugin_dir, capsys):
    from gomoku_jax import records
    from gomoku_jax.game import Gomoku

    argv = ["records", "generate", "--size", "5", "--k", "4", "--games", "2", "--black",
            "plugin-first", "--white", "random", "--workers", "2", "--no-progress"]
    assert cli.main(["--plugin", "gjx_test_plugin", *argv, "--out", "g.jsonl"]) == 0, (
        capsys.readouterr().err)
    games = records.read_records(plugin_dir / "g.jsonl", Gomoku(5, 4), on_error="raise")
    assert [g.black for g in games] == ["plugin-first"] * 2


def test_a_record_worker_that_cannot_build_its_agents_says_so(tmp_path, monkeypatch, capsys):
    # (a Pool whose initializer raises would start new workers for ever)
    from experiments import generate_records as gen

    try:
        gen._init_worker(dict(size=5, k=4, rule="freestyle", black="nobody", white="random"))
        with pytest.raises(gen.WorkerError, match="a worker process could not build its game "
                                                  "and agents: ValueError: unknown agent "
                                                  "'nobody'") as error:
            gen._work((0, 0, 0))
    finally:
        gen._WORKER.clear()
    assert isinstance(error.value, ValueError)  # a bad setting, said in one line:

    def generate(*args, **kwargs):  # as the pool raises it again in the parent
        raise error.value

    monkeypatch.setattr(gen, "generate", generate)
    assert cli.main(["records", "generate", "--games", "2", "--out",
                     str(tmp_path / "g.jsonl")]) == 2
    assert capsys.readouterr().err == f"gomoku-jax: error: {error.value}\n"


def test_record_workers_import_the_modules_of_registered_agents(plugin_dir):
    # registered by importing the module (a library caller), not through --plugin
    import importlib
    import sys

    from experiments import generate_records as gen

    sys.path.append(str(plugin_dir))
    try:
        importlib.import_module("gjx_test_plugin")
        assert "gjx_test_plugin" in gen._plugin_modules()
    finally:
        sys.path.remove(str(plugin_dir))


def test_distributed_training_initialises_before_plugins_are_imported(plugin_dir, monkeypatch):
    # A plugin may touch a device when imported; jax.distributed.initialize must come first.
    import jax

    def initialize(*args, **kwargs):
        raise RuntimeError("initialize was called")

    monkeypatch.setattr(jax.distributed, "initialize", initialize)
    with pytest.raises(RuntimeError, match="initialize was called"):
        cli.main(["--plugin", "gjx_broken_plugin", "train", "--distributed", "--config",
                  "x.json", "--workdir", "w"])


def test_the_command_prints_its_warnings_as_one_line(monkeypatch, capsys):
    import warnings

    from gomoku_jax.arena import ArenaWarning
    from gomoku_jax.config import ConfigWarning
    from gomoku_jax.records import RecordWarning
    from gomoku_jax.training import RunWarning

    def main():  # what a run that skips a record and meets a library's warning says
        warnings.warn("skipped a malformed game record:\n line 3", RecordWarning)
        warnings.warn("a library's own", DeprecationWarning)
        warnings.warn("runs/x/report.json cannot be read back", RunWarning)
        warnings.warn("c.json: train.momentum (0.5) does nothing", ConfigWarning)
        warnings.warn("3 games per pair is odd", ArenaWarning)
        return 0

    monkeypatch.setattr(cli, "main", main)
    passed_on = []
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, category, *rest: passed_on.append(
            (str(message), category))  # the handler the command finds
        with pytest.raises(SystemExit) as exit_:
            cli.console()
    assert exit_.value.code == 0
    assert capsys.readouterr().err == (
        "gomoku-jax: warning: skipped a malformed game record: line 3\n"
        "gomoku-jax: warning: runs/x/report.json cannot be read back\n"
        "gomoku-jax: warning: c.json: train.momentum (0.5) does nothing\n"
        "gomoku-jax: warning: 3 games per pair is odd\n")
    assert passed_on == [("a library's own", DeprecationWarning)]  # left as it was


def test_distributed_options_reach_jax_and_bad_ones_are_named(monkeypatch, capsys):
    import jax

    argv = ["train", "--config", "experiments/configs/az_9x9_cpu.json", "--smoke",
            "--workdir", "unused", "--distributed"]
    seen = []

    def initialize(**kwargs):  # records what the command asks for, then stops it
        seen.append(kwargs)
        raise ValueError("stopped here.")

    monkeypatch.setattr(jax.distributed, "initialize", initialize)
    assert cli.main(argv + ["--coordinator", "10.0.0.1:1234", "--num-processes", "2",
                            "--process-id", "1"]) == 2
    assert seen == [{"coordinator_address": "10.0.0.1:1234", "num_processes": 2,
                     "process_id": 1}]
    err = capsys.readouterr().err
    assert "give every process --coordinator HOST:PORT" in err
    assert "process 1 of 2 waiting for the others at 10.0.0.1:1234" in err
    # every process on this machine: the coordinator listens on loopback, not everywhere
    assert cli.main(argv + ["--coordinator", "localhost:1234", "--num-processes", "2",
                            "--process-id", "0"]) == 2
    assert seen.pop() == {"coordinator_address": "localhost:1234", "num_processes": 2,
                          "process_id": 0, "coordinator_bind_address": "localhost:1234"}
    assert cli.main(argv) == 2 and seen[-1] == {}  # left to JAX's own detection
    capsys.readouterr()
    assert cli.main(argv + ["--num-processes", "2", "--process-id", "2"]) == 2
    assert "--process-id must be from 0 to --num-processes - 1 = 1, got 2" in (
        capsys.readouterr().err)
    assert len(seen) == 2  # refused before JAX was asked
    assert cli.main(argv[:-1] + ["--num-processes", "2", "--process-id", "0"]) == 2
    assert ("--num-processes, --process-id set up a run of several processes: add "
            "--distributed") in capsys.readouterr().err
    assert len(seen) == 2
    for address in ("localhost", "localhost:", ":1234", "localhost:99999", "host:0",
                    "host:12a"):  # no port, no host, a port out of range, not a number
        assert cli.main(argv + ["--coordinator", address, "--num-processes", "2",
                                "--process-id", "0"]) == 2
        err = capsys.readouterr().err
        assert (f"--coordinator must be HOST:PORT (process 0's address and a free port from "
                f"1 to 65535), got {address!r}") in err and "Traceback" not in err, err
    assert len(seen) == 2  # all refused before JAX was asked (or waited 300 s)
