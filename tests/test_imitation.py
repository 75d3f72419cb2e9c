"""Imitation learning from game records: targets, data checks, learning, compilation,
devices, resume and export."""

import csv
import json
import os
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algorithms import common
from algorithms import imitation as im
from gomoku_jax import agents, arena, exported, features, records, symmetry, training
from gomoku_jax import config as cfglib
from gomoku_jax.game import Gomoku

ENV = Gomoku(7, 4)
A, B = 1 * 7 + 2, 2 * 7 + 5  # black's first move (1, 2) and white's answer (2, 5)
# black wins along row 5; white's stones never make four
BLACK_WINS = (A, B, 35, 6, 36, 48, 37, 27, 38)
# white wins along row 6; black's stones never make four
WHITE_WINS = (0, 42, 2, 43, 4, 44, 20, 45)
CONFIG = pathlib.Path(__file__).parents[1] / "experiments" / "configs" / "imitation_9x9_cpu.json"


def _game(moves, winner, black="bot-a", white="bot-b", opening=0):
    return records.Game(7, 4, "freestyle", tuple(moves), winner, black, white, opening)


def _config(paths, **train):
    return cfglib.from_dict(im.ImitationConfig, {
        "game": {"size": 7, "k": 4},
        "network": {"name": "simplenet", "options": {"channels": [8, 16]}},
        "search": {"num_simulations": 4},
        "data": {"paths": [str(p) for p in paths], "balance": "none",
                 "validation_fraction": 0.0},
        "train": {"iterations": 4, "batch_size": 32, "steps": 20, "unroll": 5,
                  "learning_rate": 0.01, "l2": 0.0, "validation_batch": 32, **train},
        "eval": {"every": 0, "final_games": 0, "simulations": 4, "opponents": ["random"]},
    })


@pytest.fixture(scope="module")
def one_move_file(tmp_path_factory):
    """16 copies of one game: white always answers black's (1, 2) with (2, 5)."""
    path = tmp_path_factory.mktemp("records") / "one_move.jsonl.gz"
    records.write_records(path, [_game(BLACK_WINS, 0)] * 16, ENV)
    return path


@pytest.fixture(scope="module")
def trained(one_move_file):
    learner = im.make_learner(_config([one_move_file]), devices=jax.devices()[:1])
    state = learner.init()
    history = []
    for _ in range(4):
        state, metrics = learner.iteration(state)
        history.append(jax.device_get(metrics))
        if len(history) == 1:
            traces_after_one = learner.trace_count
    return learner, state, history, traces_after_one


def test_targets_values_from_the_side_to_move_splits_and_imitated_players(tmp_path):
    path = tmp_path / "two.jsonl"
    records.write_records(path, [_game(BLACK_WINS, 0), _game(WHITE_WINS, 1, opening=2)], ENV)
    cfg = cfglib.from_dict(im.ImitationConfig, cfglib.apply_overrides(
        cfglib.to_dict(_config([path])), {"data.imitate": ["bot-a"]}))
    train, val, summary = im.load_dataset(cfg)
    assert val.size == 0 and summary["train"]["games"] == 2
    # black-win game first (split 0): 9 positions; white-win game: 8 - 2 opening moves
    assert list(np.asarray(train.split_count)) == [9, 6, 0]
    assert list(np.asarray(train.split_start)) == [0, 9, 15]
    player = np.asarray(train.player)
    np.testing.assert_array_equal(player, [0, 1] * 4 + [0] + [0, 1] * 3)
    value = np.asarray(train.value)
    np.testing.assert_array_equal(value[:9], np.where(player[:9] == 0, 1.0, -1.0))
    np.testing.assert_array_equal(value[9:], np.where(player[9:] == 1, 1.0, -1.0))
    np.testing.assert_array_equal(np.asarray(train.action), BLACK_WINS + WHITE_WINS[2:])
    # the board before white's answer holds black's stone at A only, last move A
    assert np.asarray(train.board)[1].reshape(-1).nonzero()[0].tolist() == [A]
    assert int(train.last_action[1]) == A and int(train.last_action[0]) == -1
    # only bot-a (black in both games) is imitated; the other positions train the value
    np.testing.assert_array_equal(np.asarray(train.policy_weight), player == 0)
    # a name that played no move would train the value alone, with policy losses of 0
    nobody = cfglib.from_dict(im.ImitationConfig, cfglib.apply_overrides(
        cfglib.to_dict(_config([path])), {"data.imitate": ["Alice"]}))
    with pytest.raises(ValueError, match=r"data.imitate: \['Alice'\] played no move of the "
                                         r"training games.*their players are \['bot-a', "):
        im.load_dataset(nobody)
    # one file named two ways is read once
    twice = cfglib.from_dict(im.ImitationConfig, cfglib.apply_overrides(
        cfglib.to_dict(_config([path])), {"data.paths": [str(path), os.path.relpath(path)]}))
    assert im.load_dataset(twice)[2]["train"]["games"] == 2


def test_games_that_repeat_an_earlier_one_are_counted_and_said(tmp_path, capsys):
    """The same game twice (one file read twice, or deterministic players) weighs double
    and may sit on both sides of the validation split: the count is said, not hidden."""
    path = tmp_path / "repeats.jsonl"
    records.write_records(path, [_game(BLACK_WINS, 0), _game(WHITE_WINS, 1),
                                 _game(BLACK_WINS, 0, black="other"),  # same moves
                                 _game(BLACK_WINS, 0, opening=2),  # other opening: new
                                 _game(WHITE_WINS, 1)], ENV)
    summary = im.load_dataset(_config([path]))[2]
    assert summary["duplicates"] == 2 and summary["train"]["games"] == 5
    assert capsys.readouterr().out == (
        "records: 2 of the 5 finished games repeat an earlier one move for move "
        "(deterministic players from the same opening, or the same records twice); they "
        "are kept, so they weigh more, and validation games may repeat training ones\n")
    records.write_records(path, [_game(BLACK_WINS, 0), _game(WHITE_WINS, 1)], ENV)
    assert im.load_dataset(_config([path]))[2]["duplicates"] == 0
    assert capsys.readouterr().out == ""


def test_validation_games_without_an_imitated_move_are_said(tmp_path, capsys):
    """With ``data.imitate``, held-out games where those players never moved leave the
    validation policy loss and accuracy without a target: their 0 is said to mean that."""
    path = tmp_path / "three.jsonl"
    records.write_records(path, [_game(BLACK_WINS, 0), _game(WHITE_WINS, 1),
                                 _game(BLACK_WINS, 0, black="bot-c", white="bot-d",
                                       opening=1)], ENV)
    said = {}
    for seed in range(12):  # the held-out game is drawn by the seed
        cfg = cfglib.from_dict(im.ImitationConfig, cfglib.apply_overrides(
            cfglib.to_dict(_config([path])), {"data.imitate": ["bot-a"], "seed": seed,
                                              "data.validation_fraction": 0.34}))
        summary = im.load_dataset(cfg)[2]
        assert summary["validation"]["games"] == 1
        out = capsys.readouterr().out
        said[summary["validation"]["policy_targets"] == 0] = out
    assert said[True] == ("records: data.imitate's players ['bot-a'] played no move of the 1 "
                          "validation games, so val_policy_loss and val_accuracy have no "
                          "target and read 0\n")
    assert said[False] == ""


def test_a_validation_share_holds_out_one_game_at_least(tmp_path):
    """A share of a few games that rounds down to none still holds out one game (else the
    val_* metrics would have nothing behind them); one game alone is refused, as nothing
    would be left to train on."""
    path = tmp_path / "few.jsonl"
    records.write_records(path, [_game(BLACK_WINS, 0), _game(WHITE_WINS, 1),
                                 _game(BLACK_WINS, 0, opening=2)], ENV)

    def load(fraction, file=path):
        return im.load_dataset(cfglib.from_dict(im.ImitationConfig, cfglib.apply_overrides(
            cfglib.to_dict(_config([file])), {"data.validation_fraction": fraction})))

    train, val, summary = load(0.05)  # 0.15 of a game
    assert summary["validation"]["games"] == 1 and summary["train"]["games"] == 2
    assert val.size > 0
    assert load(0.0)[2]["validation"]["games"] == 0  # none asked for, none held out
    records.write_records(path, [_game(BLACK_WINS, 0)], ENV)
    with pytest.raises(ValueError, match=r"data.validation_fraction \(0.05\) holds out 1 of "
                                         r"the 1 finished games, which leaves none to train "
                                         r"on"):
        load(0.05)
    assert load(0.0)[2]["train"]["games"] == 1


def test_malformed_records_are_reported_with_file_and_line_and_skipped(tmp_path, one_move_file):
    path = tmp_path / "bad.jsonl"
    records.write_records(path, [_game(BLACK_WINS, 0)] * 2, ENV)
    lines = path.read_text().splitlines()
    broken = json.loads(lines[2])
    broken["moves"][3] = broken["moves"][1]  # a move on an occupied cell
    path.write_text("\n".join(lines[:2] + [json.dumps(broken), "{not json"]) + "\n")
    learner = im.make_learner(_config([path]), devices=jax.devices()[:1])
    with pytest.warns(UserWarning, match=r"skipped a malformed game record: .*bad.jsonl:") as caught:
        train, _ = learner.load_data()
    assert [str(w.message).split("bad.jsonl:")[1].split(":")[0] for w in caught] == ["3", "4"]
    assert train.size == len(BLACK_WINS)  # the one good game
    assert [(e.path, e.line) for e in learner.data_errors] == [(str(path), 3), (str(path), 4)]
    assert learner.data_summary["malformed"] == 2


def test_config_errors_name_the_setting(tmp_path):
    with pytest.raises(ValueError, match=r"data.paths: no records file matches"):
        im.make_learner(_config([tmp_path / "none*.jsonl"]), devices=jax.devices()[:1]
                        ).load_data()
    # a folder of records matched nothing, and said only that
    with pytest.raises(ValueError, match=rf"data.paths: {tmp_path} is a folder; name its "
                                         rf"records files with a pattern, e.g. "
                                         rf"{tmp_path}/\*.jsonl.gz"):
        im.make_learner(_config([tmp_path]), devices=jax.devices()[:1]).load_data()
    bad = cfglib.apply_overrides(cfglib.to_dict(_config([tmp_path / "x.jsonl"])),
                                 {"network.name": "dueling"})
    with pytest.raises(cfglib.ConfigError,
                       match="imitation trains a policy-value network .*'dueling' is a q"):
        cfglib.from_dict(im.ImitationConfig, bad)
    bad = cfglib.apply_overrides(cfglib.to_dict(_config([tmp_path / "x.jsonl"])),
                                 {"data.balance": "winners"})
    with pytest.raises(cfglib.ConfigError, match="data.balance must be one of"):
        cfglib.from_dict(im.ImitationConfig, bad)


def test_a_path_or_pattern_that_matches_nothing_beside_others_is_refused(tmp_path,
                                                                         one_move_file):
    # a file gone, or a typo in one pattern, would train on less than asked, quietly
    for extra in (tmp_path / "missing.jsonl.gz", tmp_path / "typo*.jsonl.gz"):
        learner = im.make_learner(_config([one_move_file, extra]), devices=jax.devices()[:1])
        with pytest.raises(ValueError, match=r"data.paths: " + re.escape(f"['{extra}']")
                           + r" match no records file .*while the others match 1"):
            learner.load_data()


def test_augmentation_maps_the_target_with_the_board(one_move_file):
    learner = im.make_learner(_config([one_move_file]), devices=jax.devices()[:1])
    train, _ = learner.load_data()
    batch = learner._batch(train, jnp.full((64,), 1))  # [A] on the board, B played
    out = learner._augment(batch, jax.random.PRNGKey(3))
    seen = set()
    for board, action, last in zip(*(np.asarray(out[k]) for k in ("board", "action",
                                                                    "last_action"))):
        (stone,) = board.reshape(-1).nonzero()[0]
        t = [t for t in range(8) if symmetry.transform_action(A, t, 7) == stone]
        assert action in {symmetry.transform_action(B, s, 7) for s in t}
        assert last == stone
        seen.add(int(action))
    assert len(seen) == 8  # B lies on no symmetry axis: 8 distinct images


def test_the_loss_falls_and_the_played_move_is_learned_under_every_symmetry(trained):
    learner, state, history, _ = trained
    assert history[-1]["loss"] < 0.5 * history[0]["loss"]
    assert history[-1]["accuracy"] > history[0]["accuracy"]
    boards, lasts, wanted = [], [], []
    for t in range(8):  # the position before white's answer, seen 8 ways
        board = np.zeros(49, np.int8)
        board[symmetry.transform_action(A, t, 7)] = 1
        boards.append(board.reshape(7, 7))
        lasts.append(symmetry.transform_action(A, t, 7))
        wanted.append(symmetry.transform_action(B, t, 7))
    obs = features.observe_position(jnp.asarray(np.stack(boards)), jnp.ones(8, jnp.int32),
                                    jnp.asarray(lasts), learner.env.observation_spec)
    logits, value = learner.module.apply(state.variables, obs, train=False)
    logits = np.where(np.stack(boards).reshape(8, -1) == 0, np.asarray(logits), -np.inf)
    assert logits.argmax(-1).tolist() == wanted
    assert np.all(np.asarray(value) < 0)  # white to move always lost these games


def test_the_iteration_is_traced_once(trained):
    learner, _, history, traces_after_one = trained
    assert len(history) == 4 and learner.trace_count == traces_after_one


def test_unrolled_chunks_equal_one_scanned_program(one_move_file):
    """Steps not a multiple of ``unroll`` (7 = 2 + 2 + 2 + 1 masked out)."""
    results = []
    for unroll in (0, 2):
        learner = im.make_learner(_config([one_move_file], steps=7, unroll=unroll),
                                  devices=jax.devices()[:1])
        state, metrics = learner.iteration(learner.init())
        results.append((jax.device_get(state.variables), jax.device_get(metrics)))
    (v0, m0), (v1, m1) = results
    for a, b in zip(jax.tree.leaves(v0), jax.tree.leaves(v1)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(m0["loss"], m1["loss"], rtol=1e-5)
    assert m0["moves"] == m1["moves"] == 7 * 32


def test_four_devices_give_the_result_of_one(one_move_file):
    assert len(jax.devices()) == 4
    out = []
    for devices in (jax.devices()[:1], jax.devices()):
        learner = im.make_learner(_config([one_move_file], steps=4, unroll=2), devices=devices)
        state, metrics = learner.iteration(learner.init())
        out.append((jax.device_get(state.variables), float(metrics["loss"])))
    for a, b in zip(jax.tree.leaves(out[0][0]), jax.tree.leaves(out[1][0])):
        # Adam divides by sqrt(v): a rounding difference in a tiny gradient moves a
        # weight by up to lr * (a few 1e-3); a sharding bug moves it by lr
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
    assert out[0][1] == pytest.approx(out[1][1], rel=1e-5)


# (first config's train settings, second config's changes to them): together they reach
# every traced setting, one case on the unrolled chunks, the other on the scanned program
SHARED_CASES = {
    "sgd-unrolled": (dict(optimizer="sgd", momentum=0.9, l2=1e-4, lr_schedule="cosine"),
                     dict(learning_rate=0.05, momentum=0.5, l2=1e-3, value_weight=0.5,
                          iterations=6)),
    "adamw-scanned": (dict(optimizer="adamw", weight_decay=0.01, unroll=0,
                           lr_schedule="step"),
                      dict(weight_decay=0.2, learning_rate=0.003, iterations=3)),
}
PROGRAMS = ("_init", "_iteration", "_plan", "_chunk", "_finish")


def _run(learner, iterations):
    state, out = learner.init(), []
    for _ in range(iterations):
        state, metrics = learner.iteration(state)
        out.append(jax.device_get(metrics))
    return jax.device_get(state), out


def _assert_same_run(got, want):
    (got_state, got_metrics), (want_state, want_metrics) = got, want
    for g, w in zip(got_metrics, want_metrics):
        for name in w:
            np.testing.assert_array_equal(g[name], w[name], name)
    for x, y in zip(jax.tree.leaves(got_state), jax.tree.leaves(want_state)):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("case", sorted(SHARED_CASES))
def test_configs_that_differ_in_traced_settings_share_one_set_of_programs(one_move_file,
                                                                           case):
    first, second = SHARED_CASES[case]
    small = dict(steps=4, unroll=2)
    a = _config([one_move_file], **{**small, **first})
    b = cfglib.from_dict(im.ImitationConfig, cfglib.apply_overrides(
        cfglib.to_dict(_config([one_move_file], **{**small, **first, **second})),
        {"seed": 3, "eval.games": 6}))
    one = jax.devices()[:1]
    common.clear_programs()
    learner_a = im.make_learner(a, devices=one)
    _, metrics_a = _run(learner_a, 2)
    traces = learner_a.trace_count
    learner_b = im.make_learner(b, devices=one)
    shared = _run(learner_b, 2)
    assert all(getattr(learner_b, p) is getattr(learner_a, p) for p in PROGRAMS)
    assert learner_a.trace_count == traces  # b ran on a's programs without tracing
    common.clear_programs()
    alone = im.make_learner(b, devices=one)
    own = _run(alone, 2)
    assert all(getattr(alone, p) is not getattr(learner_a, p) for p in PROGRAMS)
    # b's run on a's programs is b's run: nothing of a's settings was compiled in
    _assert_same_run(shared, own)
    # and the settings mattered
    assert float(shared[1][1]["learning_rate"]) != float(metrics_a[1]["learning_rate"])
    assert float(shared[1][1]["loss"]) != float(metrics_a[1]["loss"])


def test_shared_programs_keep_neither_a_learner_nor_its_records(one_move_file):
    import gc
    import weakref

    learner = im.make_learner(_config([one_move_file], steps=4, unroll=2),
                              devices=jax.devices()[:1])
    learner.iteration(learner.init())
    chunk, records = learner._chunk, weakref.ref(learner.load_data()[0].board)
    learner = weakref.ref(learner)
    gc.collect()
    assert learner() is None and records() is None  # while the programs stay cached
    assert chunk in [p for p in common._PROGRAMS.values()]


def test_shared_programs_take_each_learners_own_records(tmp_path):
    """Learners of one config but for the seed split the games differently: one epoch
    is another number of steps, and a program shared with the first learner runs the
    second's."""
    path = tmp_path / "lengths.jsonl"
    records.write_records(path, [_game(BLACK_WINS, 0)] * 2
                          + [_game(WHITE_WINS, 1, opening=2)] * 2, ENV)

    def config(seed):
        return cfglib.from_dict(im.ImitationConfig, cfglib.apply_overrides(
            cfglib.to_dict(_config([path])),
            {"seed": seed, "data.validation_fraction": 0.5, "train.steps": None,
             "train.batch_size": 2, "train.unroll": 1, "train.validation_batch": 2}))

    sizes = {im.load_dataset(config(seed))[0].size: seed for seed in range(20)}
    assert len(sizes) > 1  # the games are 9 and 6 positions long
    (size_a, seed_a), (size_b, seed_b) = sorted(sizes.items())[:2]
    one = jax.devices()[:1]
    common.clear_programs()
    learner_a = im.make_learner(config(seed_a), devices=one)
    _run(learner_a, 1)
    learner_b = im.make_learner(config(seed_b), devices=one)
    shared = _run(learner_b, 1)
    assert learner_b._chunk is learner_a._chunk
    steps = -(-size_b // 2)  # one epoch of batches of 2
    assert learner_b.steps_per_iteration == steps != learner_a.steps_per_iteration
    assert shared[1][0]["moves"] == 2 * steps
    common.clear_programs()
    _assert_same_run(shared, _run(im.make_learner(config(seed_b), devices=one), 1))


class Killed(Exception):
    pass


def _rows(workdir):
    with (pathlib.Path(workdir) / "metrics.csv").open() as f:
        return [{k: v for k, v in r.items() if k not in ("seconds", "moves_per_second")}
                for r in csv.DictReader(f)]


def test_resume_after_a_kill_equals_an_uninterrupted_run_and_exports_a_search_agent(
        trained, tmp_path):
    learner = trained[0]
    straight = tmp_path / "straight"
    report = training.run(learner, straight, iterations=3, progress=False, tensorboard=False)
    # no periodic evaluation (eval.every = 0): no best agent and no eval folder
    assert report["best_iteration"] is None
    assert not (straight / "eval").exists() and not (straight / "best.gjx").exists()
    assert "No final evaluation (`eval.final_games` is 0)." in (straight / "report.md").read_text()

    def kill_at_two(iteration, metrics):
        if iteration == 2:
            raise Killed

    with pytest.raises(Killed):
        training.run(learner, tmp_path / "resumed", iterations=3, progress=False,
                     tensorboard=False, on_iteration=kill_at_two)
    training.run(learner, tmp_path / "resumed", iterations=3, progress=False,
                 tensorboard=False)
    assert _rows(tmp_path / "resumed") == _rows(straight)
    assert {"loss", "policy_loss", "value_loss", "accuracy"} <= set(_rows(straight)[0])
    a = exported.load_network(straight / "final.gjx")[3]
    b = exported.load_network(tmp_path / "resumed" / "final.gjx")[3]
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(x, y)
    loaded = exported.load(straight / "final.gjx", name="imitated")
    assert loaded.metadata["agent"] == "search" and loaded.metadata["search"][
        "num_simulations"] == 4 and loaded.metadata["network"]["name"] == "simplenet"
    result = arena.play_match(loaded.env, loaded.agent, agents.random_agent(), 2)
    assert all(r.forfeit is None for r in result.records)


def test_resuming_on_other_records_than_the_run_started_with_is_refused(tmp_path):
    folder = tmp_path / "recs"
    folder.mkdir()
    records.write_records(folder / "a.jsonl", [_game(BLACK_WINS, 0)] * 4, ENV)
    config = _config([folder / "*.jsonl"])

    def run(iterations):
        learner = im.make_learner(config, devices=jax.devices()[:1])
        return training.run(learner, tmp_path / "run", iterations=iterations, progress=False,
                            tensorboard=False)

    run(1)
    stored = json.loads((tmp_path / "run" / training.DATA).read_text())
    assert [f["path"] for f in stored["files"]] == [str(folder / "a.jsonl")]
    # Another file under the pattern, and one changed: the resume would have trained on
    # them without a word (and drawn another validation split).
    records.write_records(folder / "b.jsonl", [_game(WHITE_WINS, 1)] * 4, ENV)
    with pytest.raises(ValueError, match=rf"{tmp_path / 'run'} was trained on other data files "
                                         rf"than those it reads now \({folder / 'b.jsonl'} is "
                                         r"new\); resuming must read the files it started with"):
        run(2)
    (folder / "b.jsonl").unlink()
    records.write_records(folder / "a.jsonl", [_game(WHITE_WINS, 1)] * 4, ENV)
    with pytest.raises(ValueError, match=r"a.jsonl changed \(\d+ bytes then, \d+ now\)"):
        run(2)
    assert len(_rows(tmp_path / "run")) == 1  # nothing was trained or logged on them
    records.write_records(folder / "a.jsonl", [_game(BLACK_WINS, 0)] * 4, ENV)
    assert run(2)["iterations"] == 2  # the files it started with: it resumes
    # Finished, its records moved away: writing a damaged final.gjx again trains nothing,
    # so it reads no data
    (folder / "a.jsonl").rename(tmp_path / "elsewhere.jsonl")
    final = tmp_path / "run" / "final.gjx"
    whole = final.read_bytes()
    final.write_bytes(whole[:100])
    with pytest.warns(training.RunWarning, match="writing it again"):
        assert run(2)["iterations"] == 2
    assert final.read_bytes() == whole


def test_balanced_sampling_draws_every_split_equally(tmp_path):
    path = tmp_path / "mixed.jsonl"
    games = [_game(BLACK_WINS, 0)] * 9 + [_game(WHITE_WINS, 1)]
    records.write_records(path, games, ENV)
    cfg = cfglib.from_dict(im.ImitationConfig, cfglib.apply_overrides(
        cfglib.to_dict(_config([path])), {"data.balance": "splits"}))
    learner = im.make_learner(cfg, devices=jax.devices()[:1])
    train, _ = learner.load_data()
    rows = np.asarray(learner._sample(train, jax.random.PRNGKey(0), 20_000))
    white = rows >= int(train.split_start[1])
    assert abs(white.mean() - 0.5) < 0.02  # 1 game in 10, half of the samples
    assert rows.max() < train.size


def test_games_balance_weighs_each_split_by_its_positions_per_game(tmp_path):
    """balance "games" (seed 001: an equal number of games from each split, all their
    positions) gives each split its mean positions per game as weight: 9 black wins of
    9 positions and 1 white win of 6 give white 6 / (9 + 6) of the samples, not half."""
    path = tmp_path / "mixed.jsonl"
    games = [_game(BLACK_WINS, 0)] * 9 + [_game(WHITE_WINS, 1, opening=2)]
    records.write_records(path, games, ENV)
    cfg = cfglib.from_dict(im.ImitationConfig, cfglib.apply_overrides(
        cfglib.to_dict(_config([path])), {"data.balance": "games"}))
    learner = im.make_learner(cfg, devices=jax.devices()[:1])
    train, _ = learner.load_data()
    assert list(np.asarray(train.split_count)) == [81, 6, 0]
    assert list(np.asarray(train.split_games)) == [9, 1, 0]
    rows = np.asarray(learner._sample(train, jax.random.PRNGKey(0), 20_000))
    white = rows >= int(train.split_start[1])
    assert abs(white.mean() - 6 / 15) < 0.02 and rows.max() < train.size


def test_the_cpu_config_and_its_variants_load():
    data = json.loads(CONFIG.read_text())
    assert "gomoku-jax train --config" in data["description"] and "smoke" in data["variants"]
    for variant in [None, *data["variants"]]:
        cfg, _ = cfglib.load_file(im.ImitationConfig, CONFIG,
                                  variants=[] if variant is None else [variant])
        assert cfglib.from_dict(im.ImitationConfig, cfglib.to_dict(cfg)) == cfg


def test_generated_records_are_named_when_written_and_when_reused(tmp_path, monkeypatch,
                                                                   capsys):
    monkeypatch.chdir(tmp_path)  # data.paths is relative, as the smoke variants' are
    cfg = cfglib.from_dict(im.ImitationConfig, cfglib.apply_overrides(
        cfglib.to_dict(_config(["made/records.jsonl.gz"])),
        {"data.generate": {"games": 2, "black": "random", "white": "heuristic",
                           "opening_stones": 0}}))
    path = tmp_path / "made" / "records.jsonl.gz"
    _, _, summary = im.load_dataset(cfg)
    assert summary["files"] == ["made/records.jsonl.gz"] and path.is_file()
    assert capsys.readouterr().out == (
        "records: played 2 games of random against heuristic (data.generate) into "
        f"{path}\n")
    before = path.read_bytes()
    im.load_dataset(cfg)  # a later start: the file is kept
    assert capsys.readouterr().out == (
        f"records: reusing {path} (data.generate plays games only when no file matches "
        "data.paths)\n")
    assert path.read_bytes() == before
    # without data.generate nothing is said
    im.load_dataset(_config(["made/records.jsonl.gz"]))
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("paths, out, taken", [
    (["h/*.jsonl"], "h/x.jsonl", True),
    (["h/*.jsonl"], "h/sub/x.jsonl", False),  # glob's * stops at a /, fnmatch's does not
    (["h/*.jsonl"], "h/.x.jsonl", False),  # glob's * skips hidden names
    (["h/.*.jsonl"], "h/.x.jsonl", True),
    (["./h/*.jsonl", "other.jsonl"], "h/y.jsonl", True),
])
def test_generated_records_must_land_where_data_paths_read(paths, out, taken):
    """data.generate.out is taken only where data.paths' globs would read the file
    back: games written elsewhere would be played at every start and never read."""
    data = cfglib.apply_overrides(cfglib.to_dict(_config(paths)), {"data.generate": {
        "games": 2, "black": "random", "white": "random", "out": out}})
    if taken:
        assert cfglib.from_dict(im.ImitationConfig, data).data.generate.out == out
    else:
        with pytest.raises(cfglib.ConfigError, match=re.escape(
                f"data.generate.out ({out!r}) is not among data.paths {paths}")):
            cfglib.from_dict(im.ImitationConfig, data)


def test_an_unknown_agent_to_generate_with_is_refused_naming_its_setting(tmp_path,
                                                                         monkeypatch):
    """Refused when the config is built, not when the first iteration would play the
    games; an exported agent's file is read only then, and named then too."""
    monkeypatch.chdir(tmp_path)

    def generating(black, white):
        return cfglib.apply_overrides(cfglib.to_dict(_config(["made/records.jsonl.gz"])),
                                      {"data.generate": {"games": 2, "black": black,
                                                         "white": white}})

    with pytest.raises(cfglib.ConfigError, match=r"data.generate.white: unknown agent "
                                                 r"'gomokubt-2' \(did you mean 'gomokubot-2'"):
        cfglib.from_dict(im.ImitationConfig, generating("random", "gomokubt-2"))
    with pytest.raises(cfglib.ConfigError, match=r"data.generate.black: unknown agent 'nobody'"):
        cfglib.from_dict(im.ImitationConfig, generating("nobody", "random"))
    cfg = cfglib.from_dict(im.ImitationConfig, generating("gone.gjx", "random"))
    with pytest.raises(ValueError, match=r"data.generate.black: .*gone.gjx"):
        im.load_dataset(cfg)
    assert not (tmp_path / "made").exists()  # nothing was played


@pytest.mark.slow
def test_the_smoke_variant_generates_its_records_and_trains(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the smoke variant generates its records under runs/
    cfg, _ = cfglib.load_file(im.ImitationConfig, CONFIG, variants=["smoke"],
                              overrides=["data.generate.games=2"])
    learner = im.make_learner(cfg, devices=jax.devices()[:1])
    state, metrics = learner.iteration(learner.init())
    assert (tmp_path / cfg.data.paths[0]).exists() and learner.data_summary["train"]["games"]
    assert (f"records: played 2 games of heuristic against heuristic (data.generate) into "
            f"{tmp_path / cfg.data.paths[0]}\n") in capsys.readouterr().out
    assert int(state.iteration) == 1
    assert all(np.isfinite(np.asarray(v)).all() for v in jax.device_get(metrics).values())
