"""The AlphaZero learner: value targets, augmentation, loss, sharding, tracing."""

import dataclasses
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algorithms import alphazero as az
from algorithms import common
from gomoku_jax import config as cfglib
from gomoku_jax import networks
from gomoku_jax import search as search_lib
from gomoku_jax import symmetry, training

CONFIG = pathlib.Path(__file__).parents[1] / "experiments" / "configs" / "az_9x9_cpu.json"


@pytest.fixture(scope="module")
def smoke_config():
    cfg, _ = cfglib.load_file(az.AlphaZeroConfig, CONFIG, variants=["smoke"])
    return cfg


@pytest.fixture(scope="module")
def learner(smoke_config):
    common.clear_programs()  # so that this learner compiles (and traces) its own
    return az.make_learner(smoke_config, devices=jax.devices()[:1])


@pytest.fixture(scope="module")
def two_iterations(learner):
    state = learner.init()
    out = []
    for _ in range(2):
        state, metrics = learner.iteration(state)
        out.append(jax.device_get(metrics))
    return state, out


def _record(done, reward, train=None, inserted=None, search_value=None):
    done = jnp.asarray(done, jnp.bool_)[:, None]
    t = done.shape[0]
    return az.Record(
        board=jnp.zeros((t, 1, 3, 3), jnp.int8), player=jnp.zeros((t, 1), jnp.int32),
        last_action=jnp.zeros((t, 1), jnp.int32), policy=jnp.zeros((t, 1, 9)),
        search_value=(jnp.zeros((t, 1), jnp.float32) if search_value is None
                      else jnp.asarray(search_value, jnp.float32)[:, None]),
        reward=jnp.asarray(reward, jnp.float32)[:, None], done=done,
        train=jnp.ones_like(done) if train is None else train,
        inserted=jnp.zeros_like(done) if inserted is None else inserted)


def test_value_targets_alternate_sign_back_from_each_game_end():
    # game 1: moves 0-2, the mover of move 2 wins; game 2: moves 3-4, drawn; game 3: open
    window = _record(done=[0, 0, 1, 0, 1, 0, 0], reward=[0, 0, 1, 0, 0, 0, 0])
    z, known = az.Learner._value_targets(window)
    np.testing.assert_array_equal(z[:, 0], [1, -1, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(known[:, 0], [1, 1, 1, 1, 1, 0, 0])
    # a forfeit (-1 for the mover) gives the opponent's positions +1
    z, _ = az.Learner._value_targets(_record(done=[0, 1], reward=[0, -1]))
    np.testing.assert_array_equal(z[:, 0], [1, -1])


def test_search_value_weight_mixes_the_search_value_into_the_target():
    q = [0.5, -0.2, 0.8, 0.1, -0.4]
    window = _record(done=[0, 0, 1, 0, 0], reward=[0, 0, 1, 0, 0], search_value=q)
    z, known = az.Learner._value_targets(window, 0.25)
    np.testing.assert_allclose(z[:, 0], 0.75 * np.array([1, -1, 1, 0, 0]) + 0.25 * np.array(q),
                               rtol=1e-6)
    np.testing.assert_array_equal(known[:, 0], [1, 1, 1, 0, 0])
    with pytest.raises(ValueError, match="train.search_value_weight"):
        dataclasses.replace(az.TrainSettings(), search_value_weight=1.5)


@pytest.fixture(scope="module")
def mixing_learner(smoke_config):
    cfg = cfglib.from_dict(az.AlphaZeroConfig, cfglib.apply_overrides(
        cfglib.to_dict(smoke_config), {"train.search_value_weight": 0.5}))
    return az.make_learner(cfg, devices=jax.devices()[:1])


def test_policy_value_is_the_movers_and_sees_a_win_in_one(mixing_learner):
    """`search.policy_value`: about +1 for a mover who wins at once (even at the smoke
    config's 4 simulations, where the root's mean value is not), clearly negative for
    a mover facing two winning cells once the search reaches the loss."""
    learner = mixing_learner
    env, variables = learner.env, learner.init().variables
    four = [(4, 1), (0, 0), (4, 2), (0, 2), (4, 3), (0, 4), (4, 4)]
    wins, loses = env.play_moves(four + [(0, 6)]), env.play_moves(four)
    games = jax.tree.map(lambda x, y: jnp.stack([x, y]), wins, loses)
    search = jax.jit(learner._search, static_argnums=3)
    for simulations in (4, 64):
        out = search(variables, games, jax.random.key(0), simulations)
        q = np.asarray(search_lib.policy_value(out, search_lib.policy_target(
            out, learner.config.search)))
        assert q[0] > 0.9, (simulations, q)
        if simulations == 64:
            assert q[1] < -0.5, q


def test_self_play_records_the_search_value_of_each_move(mixing_learner, learner):
    """The value a self-play move records is `search.policy_value` of its search (and
    nothing is recorded without ``train.search_value_weight``)."""
    state = mixing_learner.init()
    key = jax.random.key(4)
    _, rec = jax.jit(mixing_learner._selfplay)(state.variables, state.games, key)
    # the first move's search, run again with the key `_selfplay` gives it
    steps = mixing_learner.config.selfplay.steps
    k_search = jax.random.split(jax.random.split(key, steps)[0], 4)[0]
    out = jax.jit(mixing_learner._search, static_argnums=3)(
        state.variables, state.games, k_search, mixing_learner.config.search.num_simulations)
    want = search_lib.policy_value(out, search_lib.policy_target(
        out, mixing_learner.config.search))
    np.testing.assert_allclose(rec.search_value[0], want, rtol=1e-5, atol=1e-6)
    assert rec.search_value.shape == rec.reward.shape
    assert float(jnp.max(jnp.abs(want))) > 0  # a real value, not the zeros of a blank
    assert learner.init().pending.search_value is None


def test_an_iteration_stores_mixed_value_targets(mixing_learner):
    state, added = mixing_learner.init(), 0
    for _ in range(2):  # (the smoke games need two iterations to finish)
        state, metrics = mixing_learner.iteration(state)
        added += int(metrics["positions_added"])
    n = int(state.buffer.size)
    assert n == added > 0
    values = np.asarray(state.buffer.data.value[:n])
    assert np.all(np.abs(values) <= 1.0)
    # half a result (-1, 0, 1) plus half a search value: not only the results' values
    assert not set(np.unique(values)) <= {-1.0, -0.5, 0.0, 0.5, 1.0}


def test_one_iteration_on_the_smoke_config_fills_the_buffer(learner, two_iterations):
    state, metrics = two_iterations
    cfg = learner.config
    assert int(state.iteration) == 2
    assert metrics[0]["moves"] == cfg.selfplay.batch * cfg.selfplay.steps
    added = sum(m["positions_added"] for m in metrics)
    assert int(state.buffer.size) == added > 0
    for m in metrics:  # all finite, but the game length where no game ended
        assert all(np.isfinite(v).all() for k, v in m.items() if k != "game_length")
        assert np.isnan(m["game_length"]) == (int(m["games_finished"]) == 0)
    # every stored policy target is a distribution over the empty cells of its board
    n = int(state.buffer.size)
    policy = np.asarray(state.buffer.data.policy[:n])
    empty = np.asarray(state.buffer.data.board[:n]).reshape(n, -1) == 0
    np.testing.assert_allclose(policy.sum(-1), 1.0, atol=1e-5)
    assert (policy[~empty] == 0).all()
    values = np.asarray(state.buffer.data.value[:n])
    assert set(np.unique(values)) <= {-1.0, 0.0, 1.0}


def test_no_position_is_lost_however_few_moves_an_iteration_plays(tmp_path):
    """With 3 moves an iteration on 5x5 (games of up to 25 moves), every position played
    either reached the buffer (its game ended) or is still pending (its game goes on):
    none left the window without its result. A window of two iterations lost a game's
    positions older than its last 6 moves."""
    cfg = cfglib.from_dict(az.AlphaZeroConfig, {
        "algorithm": "alphazero", "game": {"size": 5, "k": 4},
        "network": {"name": "resnet", "options": {"blocks": 1, "filters": 4}},
        "search": {"algorithm": "gumbel", "num_simulations": 2,
                   "max_num_considered_actions": 2},
        "tactical": None, "selfplay": {"batch": 4, "steps": 3},
        "train": {"iterations": 12, "batch_size": 8, "min_buffer": 8, "augment": False,
                  "buffer_capacity": 1024}})
    assert cfg.pending_steps == 24  # the most moves a game can still take
    learner = az.make_learner(cfg, devices=jax.devices()[:1])
    state, added, dropped, finished = learner.init(), 0, 0, 0
    for _ in range(12):
        state, metrics = learner.iteration(state)
        added += int(metrics["positions_added"])
        dropped += int(metrics["dropped"])
        finished += int(metrics["games_finished"])
    pending = jax.device_get(state.pending)
    waiting = int((~pending.inserted).sum())  # the moves of the games still going on
    assert dropped == 0 and finished > 4  # some slot played two games or more
    assert added + waiting == 12 * 4 * 3 == int(state.buffer.size) + waiting
    for slot in range(4):  # what waits is the slot's game in progress: its last moves
        going = ~pending.inserted[:, slot]
        first = len(going) - int(going.sum())
        assert going[first:].all() and not pending.done[first:, slot].any()

    # a checkpoint of an earlier version, whose pending trajectory held the last
    # selfplay.steps moves, resumes: that trajectory becomes the last rows of today's
    old = state.replace(pending=jax.tree.map(lambda x: x[-3:], state.pending))
    with training._checkpointer(learner, tmp_path) as ckpt:
        ckpt.save(12, {"state": jax.device_get(old), "progress": training._progress_tree()})
    restored, _, changed = training._restore(learner, tmp_path)
    assert changed == [] and int(restored.iteration) == 12
    got = jax.device_get(restored.pending)
    for name in ("board", "player", "last_action", "policy", "reward", "done", "train",
                 "inserted"):
        np.testing.assert_array_equal(getattr(got, name)[-3:],
                                      getattr(jax.device_get(old.pending), name)[-3:])
    assert got.inserted[:-3].all() and not got.done[:-3].any()  # nothing left to store
    state, metrics = learner.iteration(restored)
    assert int(metrics["dropped"]) == 0


def test_the_iteration_is_traced_once(learner, two_iterations):
    assert learner.trace_count == 1


def _differing(cfg, **sections):
    return dataclasses.replace(cfg, **{name: dataclasses.replace(getattr(cfg, name), **v)
                                       for name, v in sections.items()})


# (first config's changes to the smoke config, second config's changes to the first):
# together they reach every traced setting, each case one the other's search ignores.
SHARED_CASES = {
    "gumbel-adam": (
        dict(train=dict(search_value_weight=0.2, kl_target=0.01, min_buffer=8),
             selfplay=dict(gumbel_moves=4, playout_cap=0.5, fast_simulations=2)),
        dict(train=dict(learning_rate=0.01, l2=3e-4, value_weight=0.5,
                        search_value_weight=0.7, kl_target=0.5, iterations=5),
             selfplay=dict(gumbel_moves=12, playout_cap=0.9),
             search=dict(gumbel_scale=0.3, value_scale=0.2, maxvisit_init=10.0),
             tactical=dict(open_three_probability=0.25, forced_mass=0.6))),
    "puct-sgd": (
        dict(search=dict(algorithm="puct"), selfplay=dict(opponent_final="heuristic"),
             train=dict(optimizer="sgd", learning_rate=0.02, lr_schedule="step",
                        min_buffer=8)),
        dict(train=dict(learning_rate=0.05, momentum=0.5, iterations=4),
             selfplay=dict(temperature=0.5, temperature_moves=10),
             search=dict(c_puct=2.0, pb_c_base=500.0, dirichlet_alpha=0.1,
                         dirichlet_fraction=0.5))),
}


def _two_iterations(learner):
    state, out = learner.init(), []
    for _ in range(2):
        state, metrics = learner.iteration(state)
        out.append(jax.device_get(metrics))
    return jax.device_get(state), out


@pytest.mark.parametrize("case", sorted(SHARED_CASES))
def test_configs_that_differ_in_traced_settings_share_one_program(smoke_config, case):
    first_changes, second_changes = SHARED_CASES[case]
    a = _differing(smoke_config, **first_changes)
    b = dataclasses.replace(_differing(a, eval=dict(games=4), **second_changes), seed=7)
    one = jax.devices()[:1]
    common.clear_programs()
    first = az.make_learner(a, devices=one)
    _, metrics_a = _two_iterations(first)
    second = az.make_learner(b, devices=one)
    shared_state, shared = _two_iterations(second)
    assert second._iteration is first._iteration and second._init is first._init
    assert first.trace_count == 1  # one program for both, traced once
    common.clear_programs()
    alone = az.make_learner(b, devices=one)
    own_state, own = _two_iterations(alone)
    assert alone._iteration is not first._iteration and alone.trace_count == 1
    # b's run on a's program is b's run: nothing of a's settings was compiled in
    assert bool(own[1]["trained"])  # the optimizer and the loss took part
    for got, want in zip(shared, own):
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], name)
    for x, y in zip(jax.tree.leaves(shared_state), jax.tree.leaves(own_state)):
        np.testing.assert_array_equal(x, y)
    # and the settings mattered
    assert float(shared[1]["learning_rate"]) != float(metrics_a[1]["learning_rate"])
    assert float(shared[1]["loss"]) != float(metrics_a[1]["loss"])


def test_a_program_is_not_shared_across_what_its_names_resolved_to(smoke_config, registries):
    class Replacement(networks.ResNet):
        pass

    first = az.make_learner(smoke_config, devices=jax.devices()[:1])
    assert az.make_learner(smoke_config, devices=jax.devices()[:1])._init is first._init
    networks.register_network("resnet", Replacement, "policy-value", "a replaced entry",
                              replace=True)
    second = az.make_learner(smoke_config, devices=jax.devices()[:1])
    assert type(second.module) is Replacement
    assert second._init is not first._init and second._iteration is not first._iteration
    # the search's Q term, resolved when its config was made, likewise
    completed = search_lib.QTRANSFORMS["completed"][0]
    search_lib.register_qtransform("completed", lambda config: completed(config),
                                   "the same, another definition", replace=True)
    config = dataclasses.replace(smoke_config, search=smoke_config.search.replace())
    assert config.search.gumbel_q == "completed" and config != smoke_config
    third = az.make_learner(config, devices=jax.devices()[:1])
    assert third._init is not second._init and third._iteration is not second._iteration
    assert az.make_learner(smoke_config, devices=jax.devices()[:1])._init is second._init


def test_parameters_baked_into_a_program_key_it_by_their_values():
    params = {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}
    assert common.fingerprint(params) == common.fingerprint(
        {"w": jnp.arange(6, dtype=jnp.float32).reshape(2, 3)})  # equal values, new arrays
    assert common.fingerprint(params) != common.fingerprint({"w": params["w"] + 1})
    assert common.fingerprint(params) != common.fingerprint({"w": params["w"].reshape(3, 2)})
    assert common.fingerprint(None) is None


def test_a_traced_view_holds_every_traced_setting_and_hides_the_rest(learner):
    hyper = {path: object() for path in learner.hyperparameters()}
    assert "train.learning_rate" in hyper and "search.gumbel_scale" in hyper
    view = learner._traced_view(hyper)
    for path, value in hyper.items():
        assert common._get(view.config, path) is value, path
    assert view.config.game == learner.config.game  # the rest is the learner's
    with pytest.raises(AttributeError, match="config.eval is not an input"):
        view.config.eval.games
    with pytest.raises(TypeError, match="config.seed is not an input"):
        bool(view.config.seed)
    # a float setting is float32 whatever its value's Python type: 1 and 0.5 share
    ints = _differing(learner.config, train=dict(value_weight=1))
    hyper = az.make_learner(ints, devices=jax.devices()[:1]).hyperparameters()
    assert hyper["train.value_weight"].dtype == np.float32
    assert hyper["train.iterations"].dtype == np.int32
    # only the settings whose values are numbers other than 0 are traced
    off = _differing(learner.config, train=dict(search_value_weight=0.0, kl_target=None))
    assert "train.search_value_weight" not in az.make_learner(
        off, devices=jax.devices()[:1]).hyperparameters()


def test_augmentation_maps_policies_with_their_boards(learner):
    n = learner.env.size
    board = np.zeros((16, n, n), np.int8)
    board[:, 1, 2] = 1  # a stone, and the target one cell to its right
    policy = np.zeros((16, n * n), np.float32)
    policy[:, 1 * n + 3] = 1.0
    batch = az.Sample(board=jnp.asarray(board), player=jnp.zeros(16, jnp.int32),
                      last_action=jnp.full(16, 1 * n + 2, jnp.int32),
                      policy=jnp.asarray(policy), value=jnp.zeros(16))
    out = jax.jit(learner._augment)(batch, jax.random.PRNGKey(3))
    seen = set()
    for i in range(16):
        matches = [t for t in range(8)
                   if np.array_equal(symmetry.transform_board(board[i], t), out.board[i])]
        assert matches, "the augmented board is not a symmetry of the original"
        t = matches[0]
        seen.add(t)
        assert int(np.argmax(out.policy[i])) == symmetry.transform_action(1 * n + 3, t, n)
        assert int(out.last_action[i]) == symmetry.transform_action(1 * n + 2, t, n)
    assert len(seen) > 2  # transforms are drawn at random


def test_loss_falls_on_a_fixed_buffer(learner, two_iterations):
    state, _ = two_iterations
    train = jax.jit(learner._train)
    variables, opt_state = state.variables, state.opt_state
    losses = []
    for i in range(6):
        variables, opt_state, aux, ready = train(variables, opt_state, state.buffer,
                                                 jax.random.PRNGKey(0), jnp.float32(0.01))
        assert bool(ready)
        losses.append(float(aux["loss"]))
    assert losses[-1] < losses[0] - 0.05, losses


def test_training_waits_for_min_buffer(smoke_config):
    cfg = dataclasses.replace(smoke_config, train=dataclasses.replace(
        smoke_config.train, min_buffer=4000))
    learner = az.make_learner(cfg, devices=jax.devices()[:1])
    state = learner.init()
    new, metrics = learner.iteration(state)
    assert not bool(metrics["trained"])
    # no step, so no point of the learning curve (it used to log the losses of a batch
    # drawn from empty slots: policy loss 0, explained variance 1)
    for name in ("loss", "policy_loss", "value_loss", "entropy", "explained_variance"):
        assert np.isnan(float(metrics[name])), name
    assert not training.non_finite(new.variables, {k: float(v) for k, v in metrics.items()})
    fresh = learner.init()
    for a, b in zip(jax.tree.leaves(fresh.variables), jax.tree.leaves(new.variables)):
        np.testing.assert_array_equal(a, b)


def test_sharded_and_single_device_iterations_agree(smoke_config, learner):
    assert len(jax.devices()) == 4
    sharded = az.make_learner(smoke_config)
    assert sharded.mesh.size == 4
    s1, m1 = learner.iteration(learner.init())
    s4, m4 = sharded.iteration(sharded.init())
    assert s4.games.board.sharding.spec[0] == "data"
    # the first iteration trains (its games fill train.min_buffer), so the variables
    # compared below are not the initial ones on both sides
    assert bool(m1["trained"]) and bool(m4["trained"])
    for key in ("moves", "positions_added", "games_finished", "black_wins"):
        assert float(m1[key]) == float(m4[key]), key
    for a, b in zip(jax.tree.leaves(s1.variables), jax.tree.leaves(s4.variables)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=2e-5)


def test_batch_must_divide_over_devices(smoke_config):
    cfg = dataclasses.replace(smoke_config, selfplay=dataclasses.replace(
        smoke_config.selfplay, batch=6))
    with pytest.raises(cfglib.ConfigError, match=r"selfplay.batch \(6\).*devices \(4\)"):
        az.make_learner(cfg)


def test_an_empty_list_of_devices_is_refused(smoke_config):
    from algorithms import pipeline as pl

    # it used to fail as a ZeroDivisionError (integer modulo by zero)
    with pytest.raises(ValueError, match=r"devices is empty: give at least one device"):
        az.make_learner(smoke_config, devices=[])
    cfg, _ = cfglib.load_file(pl.PipelineConfig, CONFIG.parent / "pipeline_9x9_cpu.json",
                              variants=["smoke"])
    with pytest.raises(ValueError, match=r"devices is empty: give at least one device"):
        pl.make_learner(cfg, devices=[])


@pytest.mark.parametrize("override, message", [
    ("network.options.blokcs=3", "blokcs"),
    ("train.optimizer=rmsprop", "train.optimizer must be 'sgd' or 'adam'"),
    ("search.num_simulations=0", "num_simulations"),
    ("selfplay.batch=-1", "selfplay.batch"),
    ("selfplay.gumbel_moves=-1", "selfplay.gumbel_moves"),
    ("train.buffer_capacity=2147483648",  # refused before a buffer is sized
     r"train.buffer_capacity must be an integer from 1 to 2147483647, got 2147483648"),
    ("game.size=2", "size"),
    ("network.name=resnet-q", "AlphaZero trains a policy-value network .*'resnet-q' is a q"),
])
def test_bad_config_values_are_named(override, message):
    with pytest.raises(cfglib.ConfigError, match=message):
        cfglib.load_file(az.AlphaZeroConfig, CONFIG, [override], variants=["smoke"])


def test_sample_by_temperature():
    weights = jnp.array([[0.1, 0.6, 0.3, 0.0]] * 2000)
    q = jnp.zeros_like(weights)
    legal = jnp.array([[True, True, True, False]] * 2000)
    greedy = az._sample_by_temperature(jax.random.PRNGKey(0), weights, q, legal,
                                       jnp.zeros(2000))
    assert (np.asarray(greedy) == 1).all()
    sampled = np.asarray(az._sample_by_temperature(jax.random.PRNGKey(0), weights, q, legal,
                                                   jnp.ones(2000)))
    freq = np.bincount(sampled, minlength=4) / 2000
    np.testing.assert_allclose(freq, [0.1, 0.6, 0.3, 0.0], atol=0.04)


def test_per_game_means_are_nan_when_no_game_finished():
    """An iteration in which no game ended has no game length or win rate: NaN, which a
    plot leaves out, not 0, which it draws as a real value."""
    from algorithms import common

    assert np.isnan(common.per_game(jnp.float32(0.0), jnp.int32(0)))
    assert float(common.per_game(jnp.float32(30.0), jnp.int32(4))) == 7.5
    assert float(jax.jit(common.per_game)(jnp.int32(3), jnp.int32(2))) == 1.5


def test_greedy_self_play_moves_break_ties_by_q_not_by_the_top_left_cell():
    """Equal weights (a few-simulation search's one visit each) go to the highest root Q,
    then the lowest index; an illegal move never, however high its Q."""
    weights = jnp.array([[0.25, 0.25, 0.25, 0.25, 0.0],
                         [0.25, 0.25, 0.25, 0.25, 0.0],
                         [0.0, 0.5, 0.0, 0.5, 0.0]])
    q = jnp.array([[0.1, -0.2, 0.7, 0.3, 0.9],
                   [0.0, 0.0, 0.0, 0.0, 0.0],
                   [0.9, 0.2, 0.9, 0.1, 0.9]])
    legal = jnp.array([[True, True, True, True, True],
                       [True, True, True, True, True],
                       [True, True, True, True, False]])
    assert az._best_move(weights, q, legal).tolist() == [2, 0, 1]
    greedy = az._sample_by_temperature(jax.random.key(0), weights, q, legal, jnp.zeros(3))
    assert greedy.tolist() == [2, 0, 1]
    legal = legal.at[0, 2].set(False)  # the best Q among the ties is illegal
    assert az._best_move(weights, q, legal)[0] == 3


def test_puct_with_playout_cap_and_adaptive_rate(smoke_config):
    """The other branch of every option: PUCT with Dirichlet noise and temperature,
    the playout cap (only full searches become targets), KL-adaptive and step rates."""
    cfg = cfglib.from_dict(az.AlphaZeroConfig, cfglib.apply_overrides(
        cfglib.to_dict(smoke_config),
        {"search.algorithm": "puct", "search.num_simulations": 6,
         "selfplay.playout_cap": 0.5, "selfplay.fast_simulations": 2,
         "train.kl_target": 1e-9, "train.lr_schedule": "step", "train.optimizer": "sgd",
         "train.min_buffer": 8}))
    learner = az.make_learner(cfg, devices=jax.devices()[:1])
    state = learner.init()
    multipliers = []
    for _ in range(3):
        state, metrics = learner.iteration(state)
        multipliers.append(float(state.lr_multiplier))
    pending = state.pending
    assert 0 < float(pending.train.mean()) < 1  # both searches were drawn
    assert not bool((pending.inserted == 0)[~pending.train].any())  # fast moves never stored
    # any change of policy exceeds the tiny target: the rate multiplier only falls
    assert multipliers[-1] < 1.0 and multipliers == sorted(multipliers, reverse=True)
    # step schedule over 3 iterations: 1x before 50%, 0.1x from 50%, 0.01x from 75%
    lr = [float(learner.learning_rate(jnp.int32(i), 1.0)) for i in (0, 1, 2, 3)]
    base = cfg.train.learning_rate
    np.testing.assert_allclose(lr, [base, base, base * 0.1, base * 0.01], rtol=1e-6)


def _moves_played_as_the_targets_argmax(rec):
    """``(follows, agree)`` over steps ``[T - 1, B]`` of a self-play record: whether step
    t's game goes on into step t + 1 (a finished game restarts there), and whether the
    move played at step t (the next record's last action) is the argmax of step t's
    policy target over the empty cells."""
    rec = jax.device_get(rec)
    played = rec.last_action[1:]
    greedy = np.argmax(np.where(rec.board[:-1].reshape(*played.shape, -1) == 0,
                                rec.policy[:-1], -1.0), -1)
    return ~rec.done[:-1], played == greedy


@pytest.mark.parametrize("gumbel_moves", [None, 0])
def test_gumbel_self_play_turns_greedy_after_gumbel_moves(smoke_config, gumbel_moves):
    """After ``gumbel_moves`` moves a game plays the argmax of the improved policy it
    trains on; without the setting Gumbel's own noisy choice is played every move."""
    cfg = cfglib.from_dict(az.AlphaZeroConfig, cfglib.apply_overrides(
        cfglib.to_dict(smoke_config), {"selfplay.gumbel_moves": gumbel_moves,
                                       "selfplay.opponent": None,  # every move the learner's
                                       "search.gumbel_scale": 3.0}))
    learner = az.make_learner(cfg, devices=jax.devices()[:1])
    state = learner.init()
    _, rec = jax.jit(learner._selfplay)(state.variables, state.games, jax.random.key(1))
    follows, agree = _moves_played_as_the_targets_argmax(rec)
    agree = agree[follows]
    assert follows.sum() > 50
    if gumbel_moves == 0:
        assert agree.all()
    else:
        assert not agree.all()


def test_opponent_greedy_plays_the_best_move_against_the_opponent_only(smoke_config):
    """With ``selfplay.opponent_greedy`` the learner's moves in the sparring slots are
    the argmax of the improved policy it trains on; in its own self-play games it
    still plays Gumbel's noisy choice."""
    cfg = cfglib.from_dict(az.AlphaZeroConfig, cfglib.apply_overrides(
        cfglib.to_dict(smoke_config), {"selfplay.opponent": "heuristic",
                                       "selfplay.opponent_fraction": 0.5,
                                       "selfplay.opponent_greedy": True,
                                       "search.gumbel_scale": 3.0}))
    learner = az.make_learner(cfg, devices=jax.devices()[:1])
    state = learner.init()
    _, rec = jax.jit(learner._selfplay)(state.variables, state.games, jax.random.key(1))
    follows, agree = _moves_played_as_the_targets_argmax(rec)
    rec = jax.device_get(rec)
    b = cfg.selfplay.batch
    slot = np.arange(b)[None, :]
    sparring = slot < b // 2
    learners = (follows & sparring & rec.train[:-1])  # the learner's moves there
    assert learners.sum() > 20
    assert agree[learners].all()
    own = follows & ~sparring
    assert own.sum() > 20 and not agree[own].all()


def test_sgd_steps_written_out_equal_the_loop(smoke_config, learner, two_iterations):
    """``train.unroll`` only changes how the SGD steps are compiled, not what they do."""
    state, _ = two_iterations
    assert smoke_config.train.unroll  # the CPU default writes them out
    looped = az.make_learner(dataclasses.replace(
        smoke_config, train=dataclasses.replace(smoke_config.train, unroll=False)),
        devices=jax.devices()[:1])
    args = (state.variables, state.opt_state, state.buffer, jax.random.key(5),
            jnp.float32(1e-3))
    unrolled_out = jax.jit(learner._train)(*args)
    looped_out = jax.jit(looped._train)(*args)
    assert bool(unrolled_out[3])  # the buffer was ready: the steps did train
    for a, b in zip(jax.tree.leaves(unrolled_out[0]), jax.tree.leaves(looped_out[0])):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    moved = [float(jnp.max(jnp.abs(a - b))) for a, b in
             zip(jax.tree.leaves(unrolled_out[0]), jax.tree.leaves(state.variables))]
    assert max(moved) > 1e-4


@pytest.fixture(scope="module")
def opponent_learner(smoke_config):
    cfg = cfglib.from_dict(az.AlphaZeroConfig, cfglib.apply_overrides(
        cfglib.to_dict(smoke_config), {"selfplay.opponent": "heuristic",
                                       "selfplay.opponent_fraction": 0.5}))
    return az.make_learner(cfg, devices=jax.devices()[:1])


def test_a_selfplay_opponent_plays_its_side_of_the_first_slots(opponent_learner):
    """With ``selfplay.opponent`` the heuristic moves for black in even and white in odd
    slots of the first half of the batch; those moves are not targets, every other is,
    and the learner's own moves there are its search's, not the heuristic's."""
    learner = opponent_learner
    state = learner.init()
    _, rec = jax.jit(learner._selfplay)(state.variables, state.games, jax.random.key(3))
    b = learner.config.selfplay.batch
    slot = np.arange(b)[None, :]
    rec_np = jax.device_get(rec)
    theirs = (slot < b // 2) & (rec_np.player == slot % 2)
    np.testing.assert_array_equal(rec_np.train, ~theirs)
    # Every move the heuristic could have played, under 64 keys (it picks among the 3
    # most central cells at random), for every recorded position.
    flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), rec)
    positions = jax.vmap(lambda board, player, last: learner.env.init().replace(
        board=board, current_player=player, last_action=last,
        legal_action_mask=(board == 0).reshape(-1)))(flat.board, flat.player, flat.last_action)
    policy = learner._opponent.batch_policy()
    keys = jax.random.split(jax.random.key(0), 64)
    options = jax.vmap(lambda k: policy(None, jax.random.split(k, flat.player.shape[0]),
                                        positions))(keys)  # [64, T * B]
    played = np.asarray(rec_np.last_action[1:]).reshape(-1)  # step t's move
    follows = ~rec_np.done[:-1].reshape(-1)
    heuristic_could = (np.asarray(options)[:, :-b] == played[None, :]).any(0)
    mask = theirs[:-1].reshape(-1) & follows
    assert mask.sum() > 10 and heuristic_could[mask].all()
    learner_moves = ~theirs[:-1].reshape(-1) & follows
    # the learner's (a random network's search) mostly land elsewhere
    assert learner_moves.sum() > 50 and heuristic_could[learner_moves].mean() < 0.5


def test_the_final_opponent_takes_over_the_partners_moves_with_progress(smoke_config):
    """With ``selfplay.opponent_final`` the partner's moves are the first opponent's at
    progress 0 and the final one's at progress 1, move for move (both see the same
    keys); in between they are a mixture of the two. Progress runs from 0 at the first
    iteration to 1 at the last."""
    def learner_for(overrides):
        cfg = cfglib.from_dict(az.AlphaZeroConfig, cfglib.apply_overrides(
            cfglib.to_dict(smoke_config), {"selfplay.opponent_fraction": 0.5, **overrides}))
        return az.make_learner(cfg, devices=jax.devices()[:1])

    ramp = learner_for({"selfplay.opponent": "random", "selfplay.opponent_final": "heuristic"})
    alone = {name: learner_for({"selfplay.opponent": name}) for name in ("random", "heuristic")}
    state = ramp.init()
    key = jax.random.key(7)
    played = lambda learner, progress: np.asarray(jax.jit(learner._selfplay)(
        state.variables, state.games, key, progress)[1].last_action)
    np.testing.assert_array_equal(played(ramp, 0.0), played(alone["random"], 0.0))
    np.testing.assert_array_equal(played(ramp, 1.0), played(alone["heuristic"], 0.0))
    halfway = played(ramp, 0.5)
    assert (halfway != played(alone["random"], 0.0)).any()
    assert (halfway != played(alone["heuristic"], 0.0)).any()
    last = ramp.config.train.iterations - 1
    assert [float(ramp.opponent_progress(jnp.int32(i))) for i in (0, last, last + 3)] == [
        0.0, 1.0, 1.0]
    assert float(ramp.opponent_progress(jnp.int32(last // 2))) == pytest.approx(
        (last // 2) / last)


def test_opponent_metrics_count_the_learners_results(opponent_learner):
    # slots 0 (heuristic black, learner white), 1 (learner black), 4 (pure self-play)
    done = np.zeros((2, 8), bool)
    black_won = np.zeros((2, 8), bool)
    white_won = np.zeros((2, 8), bool)
    done[0, [0, 1, 4]] = True
    black_won[0, [0, 1, 4]] = True  # the heuristic wins slot 0, the learner slot 1
    done[1, 1] = True  # a draw in slot 1
    out = opponent_learner._opponent_metrics(jnp.asarray(done), jnp.asarray(black_won),
                                             jnp.asarray(white_won))
    assert {k: int(v) for k, v in out.items()} == {
        "opponent_games": 3, "opponent_wins": 1, "opponent_losses": 1}


@pytest.mark.parametrize("override, message", [
    ({"selfplay.opponent": "gomokubot"}, "selfplay.opponent 'gomokubot' is not a compiled"),
    ({"selfplay.opponent": "nobody"}, "selfplay.opponent: unknown agent 'nobody'"),
    ({"selfplay.opponent": "None"},  # the way to turn it off is said
     r"unknown agent 'None'.*; to play without one, give null \(--set "
     r"selfplay.opponent=null, or \"opponent\": null in the file\)"),
    ({"selfplay.opponent": "heuristic", "selfplay.opponent_final": "off"},
     r"selfplay.opponent_final: unknown agent 'off'.*--set selfplay.opponent_final=null"),
    ({"selfplay.opponent": "heuristic", "selfplay.opponent_fraction": 0.01},
     r"selfplay.opponent_fraction \(0.01\) of selfplay.batch \(8\) games is no game"),
    ({"selfplay.opponent_fraction": 0.0}, r"selfplay.opponent_fraction must be in \(0.0"),
    ({"selfplay.opponent": None, "selfplay.opponent_greedy": True},
     "selfplay.opponent_greedy needs a selfplay.opponent"),
    ({"selfplay.opponent": "heuristic", "selfplay.opponent_greedy": 1},
     "selfplay.opponent_greedy: expected true or false, got 1"),
    ({"selfplay.opponent": None, "selfplay.opponent_final": "heuristic"},
     "selfplay.opponent_final needs a selfplay.opponent"),
    ({"selfplay.opponent": "heuristic", "selfplay.opponent_final": "gomokubot"},
     "selfplay.opponent_final 'gomokubot' is not a compiled"),
    ({"selfplay.opponent": "heuristic", "selfplay.opponent_final": "heuristic@2"},
     "selfplay.opponent_final: "),
    # a dotted override keeps the old network's options: say how to replace them all
    ({"network.name": "cnn"}, r"network: unknown option '\w+' for network 'cnn'.*give another "
                              r"network's options whole: --set 'network.options=\{...\}', "
                              r"which replaces them"),
])
def test_bad_opponents_and_networks_are_named(smoke_config, override, message):
    with pytest.raises(cfglib.ConfigError, match=message):
        cfglib.from_dict(az.AlphaZeroConfig, cfglib.apply_overrides(
            cfglib.to_dict(smoke_config), override))


def test_an_iteration_with_an_opponent_reports_the_learners_results(opponent_learner):
    """The compiled iteration's opponent metrics agree with its own moves (each
    iteration's trajectory comes back as the last ``selfplay.steps`` rows of the next
    state's ``pending``)."""
    state = opponent_learner.init()
    games, steps = 0, opponent_learner.config.selfplay.steps
    for _ in range(8):
        state, metrics = opponent_learner.iteration(state)
        rec = jax.device_get(jax.tree.map(lambda x: x[-steps:], state.pending))
        b = rec.done.shape[1]
        slot = np.arange(b)[None, :]
        ended = rec.done & (slot < b // 2)
        learner_moved = rec.player == 1 - slot % 2  # the learner is white in even slots
        won = ended & (((rec.reward > 0) & learner_moved) | ((rec.reward < 0) & ~learner_moved))
        lost = ended & (((rec.reward < 0) & learner_moved) | ((rec.reward > 0) & ~learner_moved))
        assert int(metrics["opponent_games"]) == ended.sum()
        assert (int(metrics["opponent_wins"]), int(metrics["opponent_losses"])) == (
            won.sum(), lost.sum())
        games += ended.sum()
    assert games > 0


def test_explained_variance_and_targets_without_variance():
    rng = np.random.default_rng(0)
    target, prediction = rng.normal(size=64), rng.normal(size=64)
    want = 1 - np.var(target - prediction) / np.var(target)
    assert float(az.explained_variance(target, prediction)) == pytest.approx(want, rel=1e-5)
    same = np.full(64, -1.0, np.float32)  # a batch of one outcome
    assert float(az.explained_variance(same, same)) == 1.0
    assert float(az.explained_variance(same, same + prediction)) == 0.0
