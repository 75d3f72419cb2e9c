"""The DDQN learner: double-Q targets with masking, symmetric transitions, shaped
rewards, a scripted env step, the curriculum, tracing, sharding, the driver, configs."""

import csv
import dataclasses
import functools
import json
import pathlib
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algorithms import dqn
from algorithms import common
from gomoku_jax import agents, arena, exported, networks, symmetry, training
from gomoku_jax import config as cfglib
from gomoku_jax.game import Gomoku

CONFIGS = sorted((pathlib.Path(__file__).parents[1] / "experiments" / "configs")
                 .glob("dqn_*.json"))
CPU_CONFIG = [p for p in CONFIGS if p.stem == "dqn_9x9_cpu"][0]

TINY = {
    "game": {"size": 7, "k": 5},
    "network": {"name": "resnet-q", "options": {"blocks": 1, "filters": 4, "hidden": 8}},
    "acting": {"batch": 8, "steps": 6},
    "curriculum": {"phases": [{"opponent": "random", "episodes": 2},
                              {"opponent": "heuristic", "episodes": 2},
                              {"opponent": "self", "episodes": 1000}],
                   "snapshot_every": 2, "pool_size": 2, "old_opponent_probability": 0.5},
    "train": {"iterations": 6, "updates": 2, "batch_size": 16, "min_buffer": 16,
              "buffer_capacity": 1024, "target_period": 2},
    "eval": {"opponents": ["random"], "games": 2, "final_games": 2},
}
# A greedy learner and greedy self-play opponent, for scripted steps.
SCRIPTED = {**TINY, "acting": {"batch": 1, "steps": 1, "epsilon_start": 0.0,
                               "epsilon_end": 0.0},
            "curriculum": {"phases": [{"opponent": "self", "episodes": 1000}],
                           "opponent_epsilon": 0.0, "old_opponent_probability": 0.0},
            "train": {**TINY["train"], "gamma": 0.9}}


def _config(data, **overrides):
    return cfglib.from_dict(dqn.DQNConfig, cfglib.apply_overrides(data, overrides))


_LEARNERS = {}


def _smoke_learner(path):
    """One compiled learner per distinct smoke config (seed 000 A and B share theirs)."""
    cfg, _ = cfglib.load_file(dqn.DQNConfig, path, variants=["smoke"])
    if cfg not in _LEARNERS:
        _LEARNERS[cfg] = dqn.make_learner(cfg, devices=jax.devices()[:1])
    return _LEARNERS[cfg]


@pytest.fixture(scope="module")
def learner():
    """The CPU config's smoke learner, shared by the tests that compile an iteration."""
    common.clear_programs()  # so that it compiles (and traces) its own program
    _LEARNERS.clear()
    return _smoke_learner(CPU_CONFIG)


@pytest.fixture(scope="module")
def run(learner):
    state, metrics = learner.init(), []
    for _ in range(6):
        state, m = learner.iteration(state)
        metrics.append({k: np.asarray(v) for k, v in jax.device_get(m).items()})
    return state, metrics


@pytest.fixture(scope="module")
def dense_learner():
    """A learner with seed 000's dense Q head, whose Q can be set per cell by a bias."""
    return dqn.make_learner(_config(TINY), devices=jax.devices()[:1])


def _constant_q(learner, prefs):
    """Variables under which Q(s) = ``prefs`` for every s: all weights zero but the
    last bias (BatchNorm of zeros with zero scale and bias gives zeros)."""
    variables = jax.tree.map(jnp.zeros_like, networks.init_network(
        learner.module, jax.random.PRNGKey(0), learner.env.observation_shape))
    params = dict(variables["params"])
    params["fc2"] = {**params["fc2"], "bias": jnp.asarray(prefs, jnp.float32)}
    return {**variables, "params": params}


# ------------------------------------------------------------- per-transition math
def test_double_q_target_is_online_choice_among_legal_valued_by_target():
    q_online = jnp.array([5.0, 1.0, 3.0, 0.0])
    q_target = jnp.array([10.0, 2.0, 7.0, -1.0])
    legal = jnp.array([False, True, True, True])  # the online favourite is occupied
    # online picks action 2 among the legal ones; the target values it at 7
    assert float(dqn.double_q_target(0.5, 0.9, q_target, q_online, legal)) == pytest.approx(
        0.5 + 0.9 * 7.0)
    # plain (non-double) max over the legal target values would give 7 too; make them differ
    q_target2 = jnp.array([10.0, 8.0, 7.0, -1.0])
    assert float(dqn.double_q_target(0.0, 1.0, q_target2, q_online, legal)) == 7.0
    assert float(dqn.double_q_target(0.0, 1.0, q_target2, q_target2, legal)) == 8.0
    # a terminal (discount 0) and a position without legal moves give the reward alone
    assert float(dqn.double_q_target(-1.0, 0.0, q_target, q_online, legal)) == -1.0
    assert float(dqn.double_q_target(0.2, 0.9, q_target, q_online,
                                     jnp.zeros(4, bool))) == pytest.approx(0.2)
    # the TD error takes Q(s, a) of the action played, and vmaps / jits alike
    q = jnp.array([[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]])
    args = (q, jnp.array([3, 0]), jnp.array([0.5, 1.0]), jnp.array([0.9, 0.0]),
            jnp.stack([q_target] * 2), jnp.stack([q_online] * 2), jnp.stack([legal] * 2))
    td = jax.jit(jax.vmap(dqn.double_q_error))(*args)
    np.testing.assert_allclose(td, [0.5 + 0.9 * 7.0 - 3.0, 1.0 - 4.0], rtol=1e-6)


def test_learner_loss_masks_occupied_cells_inside_the_target(dense_learner):
    learner = dense_learner
    n = learner.env.size
    prefs = np.zeros(n * n, np.float32)
    prefs[[0, 1, 2]] = [9.0, 4.0, 1.0]  # online: cell 0 best, then 1
    target_prefs = np.zeros(n * n, np.float32)
    target_prefs[[0, 1, 2]] = [100.0, -3.0, 50.0]
    online = _constant_q(learner, prefs)
    target = _constant_q(learner, target_prefs)
    next_board = np.zeros((2, n, n), np.int8)
    next_board[:, 0, 0] = 2  # cell 0 occupied in the next position
    batch = dqn.Transition(
        board=jnp.zeros((2, n, n), jnp.int8), player=jnp.zeros(2, jnp.int32),
        last_action=jnp.full(2, -1, jnp.int32), action=jnp.array([2, 1], jnp.int32),
        reward=jnp.array([0.5, -1.0]), discount=jnp.array([0.9, 0.0]),
        next_board=jnp.asarray(next_board), next_last_action=jnp.zeros(2, jnp.int32))
    stats = {k: v for k, v in online.items() if k != "params"}
    loss, (aux, _) = learner._loss(online["params"], stats, target, batch)
    # online picks cell 1 (cell 0 is occupied); the target values it at -3
    td = np.array([0.5 + 0.9 * -3.0 - 1.0, -1.0 - 4.0])
    huber = np.where(np.abs(td) <= 1, 0.5 * td**2, np.abs(td) - 0.5)
    assert float(loss) == pytest.approx(huber.mean(), rel=1e-6)
    assert float(aux["q_mean"]) == pytest.approx((1.0 + 4.0) / 2)
    # plain DQN: max over the legal target values (cell 2: 50)
    plain = dqn.make_learner(dataclasses.replace(learner.config, train=dataclasses.replace(
        learner.config.train, double=False)), devices=jax.devices()[:1])
    loss, _ = plain._loss(online["params"], stats, target, batch)
    td = np.array([0.5 + 0.9 * 50.0 - 1.0, -1.0 - 4.0])
    assert float(loss) == pytest.approx((np.abs(td) - 0.5).mean(), rel=1e-6)


# ------------------------------------------------------------------- symmetries
def test_the_8_symmetric_transitions_map_actions_with_boards():
    n = 7
    board = np.zeros((n, n), np.int8)
    board[1, 2], board[5, 3] = 1, 2  # the learner (black) and the opponent's last move
    action, reply = 1 * n + 3, 2 * n + 2
    after = board.copy()
    after.flat[action], after.flat[reply] = 1, 2
    tr = dqn.Transition(
        board=jnp.asarray(board)[None], player=jnp.zeros(1, jnp.int32),
        last_action=jnp.array([5 * n + 3]), action=jnp.array([action]),
        reward=jnp.array([0.25]), discount=jnp.array([0.9]),
        next_board=jnp.asarray(after)[None], next_last_action=jnp.array([reply]))
    out = jax.device_get(jax.jit(dqn.symmetric_transitions, static_argnums=1)(tr, n))
    assert out.board.shape == (8, n, n)
    seen = set()
    for t in range(8):
        b, nb = out.board[t], out.next_board[t]
        np.testing.assert_array_equal(b, symmetry.transform_board(board, t))
        np.testing.assert_array_equal(nb, symmetry.transform_board(after, t))
        a = int(out.action[t])
        assert a == symmetry.transform_action(action, t, n)
        assert b.flat[a] == 0 and nb.flat[a] == 1  # the move lands on the mapped cell
        assert nb.flat[int(out.next_last_action[t])] == 2
        assert b.flat[int(out.last_action[t])] == 2
        assert float(out.reward[t]) == 0.25 and float(out.discount[t]) == pytest.approx(0.9)
        seen.add(b.tobytes())
    assert len(seen) == 8  # an asymmetric board has 8 distinct images


# ---------------------------------------------------------------------- rewards
def _board(black=(), white=(), n=9):
    b = np.zeros((n, n), np.int8)
    for r, c in black:
        b[r, c] = 1
    for r, c in white:
        b[r, c] = 2
    return b


def _pattern(before, move, player, table):
    after = before.copy()
    after[move] = player + 1
    return float(dqn.pattern_reward(jnp.asarray(before), jnp.asarray(after), player, 5,
                                    dqn.REWARD_TABLES[table]))


@pytest.mark.parametrize("table, three, four, block3, block4", [
    ("table1", 0.08 - 0.01, 0.6 - 0.08, 0.2, 0.8),
    ("table2", 0.2 - 0.01, 0.3 - 0.2, 0.2, 0.9),
    ("table3", 0.4 - 0.01, 0.7 - 0.4, 0.62, 0.9),
])
def test_shaped_rewards_on_hand_made_positions(table, three, four, block3, block4):
    far = [(8, 0), (8, 8), (0, 8)]
    # an open two becomes an open three: -OPEN_TWO + OPEN_THREE
    assert _pattern(_board([(4, 3), (4, 4)], far[:2]), (4, 5), 0, table) == pytest.approx(three)
    # an open three becomes an open four: -OPEN_THREE + OPEN_FOUR
    assert _pattern(_board([(4, 2), (4, 3), (4, 4)], far), (4, 5), 0,
                    table) == pytest.approx(four)
    # white blocks one end of black's open three: BLOCK_THREE, once
    assert _pattern(_board([(2, 3), (2, 4), (2, 5)], far[:2]), (2, 6), 1,
                    table) == pytest.approx(block3)
    # black closes the second end of white's four (the first end is black's already)
    before = _board([(4, 1), (8, 8), (0, 8), (8, 0)], [(4, 2), (4, 3), (4, 4), (4, 5)])
    assert _pattern(before, (4, 6), 0, table) == pytest.approx(block4)
    # the same for both players at once, batched
    boards = np.stack([_board([(4, 3), (4, 4)], far[:2]), before])
    after = boards.copy()
    after[0, 4, 5], after[1, 4, 6] = 1, 1
    both = dqn.pattern_reward(jnp.asarray(boards), jnp.asarray(after), jnp.array([0, 0]), 5,
                              dqn.REWARD_TABLES[table])
    np.testing.assert_allclose(both, [three, block4], rtol=1e-6)


def test_the_double_threat_reward_pays_for_two_threats_made_at_once():
    table = dqn.RewardSettings("none", {"double_threat": 0.5}).table()
    far = [(8, 0), (8, 8), (0, 8)]

    def reward(black, move, white=far):
        before = _board(black, white)
        after = before.copy()
        after[move] = 1
        return float(dqn.pattern_reward(jnp.asarray(before), jnp.asarray(after), 0, 5, table))

    # Open twos on row 4 and column 4 (black (4, 2), (4, 3) and (2, 4), (3, 4)): (4, 4)
    # makes two open threes, a three-three.
    assert reward([(4, 2), (4, 3), (2, 4), (3, 4)], (4, 4)) == 0.5
    # A four (OXXX. becomes OXXXX.) alone is one threat; with an open three down the
    # column through the same stone it is a four-three.
    assert reward([(4, 1), (4, 2), (4, 3)], (4, 4), far + [(4, 0)]) == 0.0
    assert reward([(4, 1), (4, 2), (4, 3), (3, 4), (2, 4)], (4, 4), far + [(4, 0)]) == 0.5
    # One open three alone, or a second threat when two were there already: nothing.
    assert reward([(4, 2), (4, 3)], (4, 4)) == 0.0
    assert reward([(4, 2), (4, 3), (4, 4), (1, 1), (1, 2), (1, 3)], (6, 6)) == 0.0
    # The seed tables give it no weight; threat_count is its T.
    assert all(t["double_threat"] == 0.0 for t in dqn.REWARD_TABLES.values())
    board = _board([(4, 1), (4, 2), (4, 3), (4, 4), (2, 2), (2, 3), (2, 4)], far)
    assert int(dqn.threat_count(jnp.asarray(board), 0, 5)) == 2  # open four + open three
    # A broken four whose gap is also an end of an open three (.X.XX. becomes .X.XXX) is
    # one threat: the stone in the gap answers both. It used to count as two.
    assert reward([(4, 1), (4, 3), (4, 4)], (4, 5)) == 0.0
    board = _board([(4, 1), (4, 3), (4, 4), (4, 5)], far)
    assert int(dqn.threat_count(jnp.asarray(board), 0, 5)) == 1
    blocked = board.copy()
    blocked[4, 2] = 2
    assert int(dqn.threat_count(jnp.asarray(blocked), 0, 5)) == 0
    # Under the standard rule an overline is no win: XXXX.X has no winning cell.
    board = _board([(4, 0), (4, 1), (4, 2), (4, 3), (4, 5)], far)
    assert [int(dqn.threat_count(jnp.asarray(board), 0, 5, rule))
            for rule in ("freestyle", "standard")] == [1, 0]


def test_reward_tables_are_seed_000s_and_overridable():
    t3 = dqn.REWARD_TABLES["table3"]
    assert (t3["win"], t3["loss"], t3["draw"], t3["step"]) == (1.0, -1.0, 0.2, 0.0)
    assert dqn.REWARD_TABLES["table2"]["win"] == 10.0
    assert dqn.REWARD_TABLES["table1"]["loss"] == -2.0
    none = dqn.REWARD_TABLES["none"]
    assert all(none[s] == 0 for s in dqn.tactics.SHAPES) and none["win"] == 1.0
    table = dqn.RewardSettings("table1", {"win": 5.0, "step": -0.01}).table()
    assert table["win"] == 5.0 and table["step"] == -0.01 and table["open_four"] == 0.6


# ---------------------------------------------------------------- scripted steps
def _scripted(n_step, **overrides):
    learner = dqn.make_learner(_config(SCRIPTED, **{"train.n_step": n_step, **overrides}),
                               devices=jax.devices()[:1])
    n = 7
    prefs = np.zeros(n * n, np.float32)
    # the learner's open four, the opponent's block of one end, then the winning end
    prefs[[3 * n + 4, 3 * n + 0, 3 * n + 5]] = [3.0, 2.0, 1.0]
    variables = _constant_q(learner, prefs)
    env = learner.env
    board = _board([(3, 1), (3, 2), (3, 3)], [(0, 0), (0, 6), (6, 6)], n=n)
    games = jax.tree.map(lambda x: x[:1], learner._fresh_games(jax.random.PRNGKey(0)))
    games = games.replace(state=jax.tree.map(lambda x: x[None], env.from_board(board)),
                          colour=jnp.zeros(1, jnp.int32), old=jnp.zeros(1, bool))
    # the learner's network, the self-play opponent's and the pool member's: all one here
    step = jax.jit(functools.partial(learner._env_step, variables, variables, variables,
                                     jnp.bool_(False)))
    carry, outs = (games, jnp.int32(0), jnp.int32(0)), []
    for i in range(3):
        carry, out = step(carry, jax.random.PRNGKey(i))
        outs.append(jax.device_get(out))
    return learner, board, carry, outs


def test_a_scripted_game_gives_the_transitions_and_rewards_by_hand():
    learner, board, (games, episodes, env_steps), outs = _scripted(n_step=1)
    n = 7
    # step 1: black makes an open four (0.7 - 0.4), white blocks at (3, 0)
    tr, emit, stats = outs[0]
    assert bool(emit[0, 0]) and not bool(stats["done"][0])
    assert int(tr.action[0, 0]) == 3 * n + 4
    assert float(tr.reward[0, 0]) == pytest.approx(0.3)
    assert float(tr.discount[0, 0]) == pytest.approx(0.9)
    np.testing.assert_array_equal(tr.board[0, 0], board)
    expected = board.copy()
    expected[3, 4], expected[3, 0] = 1, 2
    np.testing.assert_array_equal(tr.next_board[0, 0], expected)
    assert int(tr.next_last_action[0, 0]) == 3 * n + 0
    # step 2: black wins at (3, 5): the win reward alone, a terminal transition
    tr, emit, stats = outs[1]
    assert bool(emit[0, 0]) and bool(stats["done"][0]) and bool(stats["won"][0])
    assert int(tr.action[0, 0]) == 3 * n + 5
    assert float(tr.reward[0, 0]) == pytest.approx(1.0)
    assert float(tr.discount[0, 0]) == 0.0
    assert float(stats["shaped_return"][0]) == pytest.approx(1.3)
    assert float(stats["pattern_return"][0]) == pytest.approx(0.3)
    assert int(stats["length"][0]) == 9
    # step 3: a new game, the learner is now white: the opponent opens, no transition
    tr, emit, stats = outs[2]
    assert not bool(emit.any()) and not bool(stats["acting"][0])
    assert int(games.colour[0]) == 1 and int(games.state.current_player[0]) == 1
    assert int(games.state.move_count[0]) == 1 and int(games.state.board[0, 3, 4]) == 1
    assert int(episodes) == 1 and int(env_steps) == 2


def test_potential_shaping_pays_gamma_phi_next_minus_phi_and_telescopes():
    learner, board, _, outs = _scripted(n_step=1, **{"rewards.form": "potential"})
    table, gamma = learner.rewards, 0.9
    phi = lambda b: float(dqn.pattern_potential(jnp.asarray(b), 0, 5, table))  # noqa: E731
    # step 1: black's open four, white's block; the reward is gamma Phi(s1) - Phi(s0),
    # s1 the position after the block, not the difference made by black's move alone.
    tr, _, _ = outs[0]
    s1 = np.asarray(tr.next_board[0, 0])
    assert float(tr.reward[0, 0]) == pytest.approx(gamma * phi(s1) - phi(board), abs=1e-6)
    assert float(tr.reward[0, 0]) != pytest.approx(0.3)  # the difference form's figure
    # step 2: the win ends the game, Phi = 0 there: 1 - Phi(s1).
    first = float(outs[0][0].reward[0, 0])
    tr, _, stats = outs[1]
    assert float(tr.reward[0, 0]) == pytest.approx(1.0 - phi(s1), abs=1e-6)
    assert float(stats["pattern_return"][0]) == pytest.approx(
        first - phi(s1), abs=1e-6)  # the metric: the plain sum of the shaping
    # Discounted over the game the shaping telescopes to -Phi(s0): it cannot be farmed.
    assert first + gamma * (float(tr.reward[0, 0]) - 1.0) == pytest.approx(-phi(board),
                                                                           abs=1e-6)
    with pytest.raises(cfglib.ConfigError, match="rewards.form must be 'difference' or "
                                                 "'potential', got 'sum'"):
        _config(TINY, **{"rewards.form": "sum"})


def test_n_step_returns_are_emitted_at_the_end_of_the_game():
    _, board, _, outs = _scripted(n_step=2)
    n = 7
    assert not bool(outs[0][1].any())  # one step in: the 2-step history is not full
    tr, emit, _ = outs[1]
    assert bool(emit[0].all())
    np.testing.assert_array_equal(tr.action[0], [3 * n + 4, 3 * n + 5])
    np.testing.assert_allclose(tr.reward[0], [0.3 + 0.9 * 1.0, 1.0], rtol=1e-6)
    np.testing.assert_array_equal(tr.discount[0], [0.0, 0.0])
    np.testing.assert_array_equal(tr.board[0, 0], board)


# ------------------------------------------------------- curriculum and iteration
def test_phase_and_epsilon_schedules(learner):
    assert [(p.opponent, p.episodes) for p in learner.config.curriculum.phases] == [
        ("random", 2), ("heuristic", 2), ("self", 100)]
    assert [int(learner.phase_of(e)) for e in (0, 1, 2, 3, 4, 5000)] == [0, 0, 1, 1, 2, 2]
    a = learner.config.acting
    np.testing.assert_allclose(
        [float(learner.epsilon(e, 0)) for e in (0, 100, 10_000)],
        [a.epsilon_start, a.epsilon_start * a.epsilon_decay**100, a.epsilon_end], rtol=1e-5)
    step_unit = dqn.make_learner(dataclasses.replace(learner.config, acting=dataclasses.replace(
        a, decay_unit="step")), devices=jax.devices()[:1])
    assert float(step_unit.epsilon(0, 100)) == pytest.approx(a.epsilon_decay**100, rel=1e-5)


def _check_finite(metrics):
    """Every metric of an iteration is finite, but the per-game means, which are NaN
    exactly when no game ended."""
    per_game = {"win_rate", "outcome", "shaped_return", "pattern_return", "game_length"}
    assert all(np.isfinite(np.asarray(v)).all() for k, v in metrics.items()
               if k not in per_game)
    assert all(np.isnan(metrics[k]) == (int(metrics["episodes"]) == 0) for k in per_game)


def test_the_curriculum_switches_phase_and_fills_the_pool(learner, run):
    state, metrics = run
    phases = [int(m["phase"]) for m in metrics]
    totals = [int(m["episodes_total"]) for m in metrics]
    assert phases == [int(learner.phase_of(e)) for e in totals]
    assert phases == sorted(phases) and phases[-1] == 2 and len(set(phases)) >= 2
    assert int(state.episodes) == totals[-1] == sum(int(m["episodes"]) for m in metrics)
    # snapshots only in the self phase, one per crossing of a multiple of 2 episodes
    assert int(state.snapshots) >= 1
    assert int(metrics[-1]["pool_filled"]) == min(int(state.snapshots), 2)
    # outcomes add up and every metric is finite
    for m in metrics:
        assert int(m["wins"]) + int(m["losses"]) + int(m["draws"]) == int(m["episodes"])
        _check_finite(m)
        # every finished game is counted against exactly one opponent
        assert sum(int(m[f"games_vs_{o}"]) for o in dqn.OPPONENTS) == int(m["episodes"])
        assert sum(int(m[f"wins_vs_{o}"]) for o in dqn.OPPONENTS) == int(m["wins"])
    # a single-opponent phase's games are all against it
    first = metrics[0]
    if int(first["phase"]) == 0 and int(first["episodes_total"]) <= 2:
        assert int(first["games_vs_random"]) == int(first["episodes"])
    acting = learner.config.acting
    assert int(metrics[0]["moves"]) == acting.batch * acting.steps


def test_the_iteration_fills_the_buffer_and_trains(learner, run):
    state, metrics = run
    train = learner.config.train
    added = sum(int(m["transitions_added"]) for m in metrics)
    assert added % 8 == 0 and int(state.buffer.size) == min(added, train.buffer_capacity)
    assert int(state.updates) == sum(train.updates for m in metrics if bool(m["trained"]))
    init = learner.init()
    moved = any(not np.array_equal(a, b) for a, b in zip(
        jax.tree.leaves(init.variables["params"]), jax.tree.leaves(state.variables["params"])))
    assert moved
    n = int(state.buffer.size)
    data = jax.device_get(state.buffer.data)
    boards = data.board[:n].reshape(n, -1)
    assert (boards[np.arange(n), data.action[:n]] == 0).all()  # actions on empty cells
    # 0 at a game's end, else gamma ** n_step (gamma is traced: float32 arithmetic)
    discounts = np.unique(data.discount[:n])
    np.testing.assert_allclose(discounts[discounts != 0], train.gamma ** train.n_step,
                               rtol=1e-6)


def test_the_iteration_is_traced_once(learner, run):
    assert learner.trace_count == 1


def test_sharded_and_single_device_iterations_agree(learner):
    assert len(jax.devices()) == 4
    common.clear_programs()  # the sharded learner compiles its own program
    sharded = dqn.make_learner(learner.config)
    assert sharded.mesh.size == 4
    s1, m1 = learner.iteration(learner.init())
    s4, m4 = sharded.iteration(sharded.init())
    assert s4.games.state.board.sharding.spec[0] == "data"
    for key in ("moves", "episodes", "wins", "transitions_added", "buffer_size",
                "learner_moves"):
        assert float(m1[key]) == float(m4[key]), key
    for a, b in zip(jax.tree.leaves(s1.variables), jax.tree.leaves(s4.variables)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=2e-5)
    assert learner.trace_count == 1
    sharded.iteration(s4)  # a second sharded call reuses the program
    assert sharded.trace_count == 1


def test_configs_that_differ_in_traced_settings_share_one_program():
    a = _config(TINY, **{"rewards.shaping": "table1", "train.target_tau": 0.1})
    b = _config(TINY, **{
        "rewards.shaping": "table3",
        "rewards.weights": {"open_two": 0.05, "half_three": 0.03, "win": 2.0},
        "acting.epsilon_start": 0.6, "acting.epsilon_end": 0.2, "acting.epsilon_decay": 0.9,
        "curriculum.opponent_epsilon": 0.3, "curriculum.old_opponent_probability": 0.8,
        "train.learning_rate": 3e-3, "train.gamma": 0.9, "train.huber_delta": 0.5,
        "train.max_grad_norm": 0.5, "train.target_tau": 0.4, "seed": 3,
        "curriculum.phases": [
            {"opponent": {"heuristic": 1, "random": 1}, "episodes": 3,
             "heuristic_blocks": 0.5},
            {"opponent": "self", "episodes": 1}, {"opponent": "random", "episodes": 500}]})
    one = jax.devices()[:1]
    common.clear_programs()
    first = dqn.make_learner(a, devices=one)
    _, metrics_a = first.iteration(first.init())
    second = dqn.make_learner(b, devices=one)
    shared_state, shared = second.iteration(second.init())
    assert second._iteration is first._iteration and second._init is first._init
    assert first.trace_count == 1  # one program for both, traced once
    assert "rewards.table.open_three" in second.hyperparameters()
    common.clear_programs()
    alone = dqn.make_learner(b, devices=one)
    own_state, own = alone.iteration(alone.init())
    # b's run on a's program is b's run: nothing of a's settings was compiled in
    assert bool(own["trained"])  # the optimizer and the loss took part
    for name in own:
        np.testing.assert_array_equal(np.asarray(shared[name]), np.asarray(own[name]), name)
    for x, y in zip(jax.tree.leaves(shared_state), jax.tree.leaves(own_state)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert float(shared["epsilon"]) != float(metrics_a["epsilon"])  # the settings mattered
    # the reward table entered the result: shaped rewards are in the buffer
    n = int(own_state.buffer.size)
    assert n and np.any(np.asarray(own_state.buffer.data.reward[:n]) != 0)
    # a table that switches a term on or off is another program
    off = dqn.make_learner(_config(TINY, **{"rewards.shaping": "none"}), devices=one)
    assert off._program_data() != first._program_data()
    # and so is a curriculum of another number of phases
    two = dqn.make_learner(_config(TINY, **{"curriculum.phases": [
        {"opponent": "random", "episodes": 2}, {"opponent": "self", "episodes": 9}]}),
        devices=one)
    assert two._program_data() != first._program_data()


def _trained_iterations(config, count):
    """(updates, online, target) after each of ``count`` iterations, as host arrays."""
    learner = dqn.make_learner(config, devices=jax.devices()[:1])
    state, out = learner.init(), []
    for _ in range(count):
        state, _ = learner.iteration(state)
        online, target = jax.device_get((state.variables, state.target_variables))
        out.append((int(state.updates), online, target))
    return out


def _same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def test_the_target_network_is_copied_every_target_period_steps():
    # 2 gradient steps an iteration, a copy every 4: after 4, 8, ... the target is the
    # online network; after 6 it is still the copy made at 4.
    out = _trained_iterations(_config(TINY, **{"train.target_period": 4}), 6)
    trained = [(u, o, t) for u, o, t in out if u > 0]
    assert len(trained) >= 3 and {u % 4 for u, _, _ in trained} == {0, 2}
    for (u, online, target), (_, before, _) in zip(trained[1:], trained):
        if u % 4 == 0:
            assert _same(target, online)
        else:
            assert _same(target, before) and not _same(target, online)


def test_polyak_target_tracks_the_online_network():
    tau = 0.25
    out = _trained_iterations(_config(TINY, **{"train.target_tau": tau, "train.updates": 1}),
                              5)
    trained = [(u, o, t) for u, o, t in out if u > 0]
    assert len(trained) >= 2
    for (_, online, target), (_, _, before) in zip(trained[1:], trained):
        for t, o, b in zip(jax.tree.leaves(target["params"]), jax.tree.leaves(online["params"]),
                           jax.tree.leaves(before["params"])):
            np.testing.assert_allclose(t, (1 - tau) * b + tau * o, rtol=1e-5, atol=1e-6)


def test_the_greedy_agent_plays_the_best_legal_move(dense_learner):
    learner = dense_learner
    n = learner.env.size
    prefs = np.arange(n * n, dtype=np.float32)  # the last cell is the favourite
    agent = learner.agent(_constant_q(learner, prefs), name="q")
    env = learner.env
    assert isinstance(agent, agents.JaxAgent) and agent.name == "q"
    assert agent.act(env.init(), jax.random.PRNGKey(0)) == n * n - 1
    board = np.zeros((n, n), np.int8)
    board.flat[n * n - 1] = 2
    board.flat[0] = 1
    assert agent.act(env.from_board(board), jax.random.PRNGKey(0)) == n * n - 2
    meta = learner.export_metadata()
    assert meta["agent"] == "q-greedy" and meta["network"]["name"] == "resnet-q"


MIXED = {**TINY, "curriculum": {**TINY["curriculum"], "phases": [
    {"opponent": {"random": 1, "heuristic": 3}, "episodes": 1000}]}}


def test_a_mixture_phase_draws_each_games_opponent_at_its_start():
    learner = dqn.make_learner(_config(MIXED), devices=jax.devices()[:1])
    [phase] = learner.config.curriculum.phases
    assert phase.weights() == (0.25, 0.75, 0.0)
    draws = jnp.asarray([0.0, 0.2499, 0.25, 0.9999])
    assert learner.opponent_kinds(0, draws).tolist() == [0, 0, 1, 1]
    # a single opponent takes every game whatever its draw
    pure = dqn.make_learner(_config(TINY), devices=jax.devices()[:1])
    assert [pure.opponent_kinds(p, draws).tolist() for p in range(3)] == [
        [0] * 4, [1] * 4, [2] * 4]

    state, games = learner.init(), {"random": 0, "heuristic": 0, "self": 0}
    first_draws = np.asarray(state.games.draw)
    for _ in range(4):
        before = jax.device_get(state.games)  # the iteration donates its state
        state, m = learner.iteration(state)
        for name in games:
            games[name] += int(m[f"games_vs_{name}"])
        assert int(m["wins"]) == int(m["wins_vs_random"]) + int(m["wins_vs_heuristic"])
        # A restarted game swaps the learner's colour and draws again; one still going keeps
        # its draw (a game lasts at least 9 moves, an iteration makes at most 12: at most
        # one restart per game per iteration).
        restarted = np.asarray(state.games.colour) != before.colour
        draw = np.asarray(state.games.draw)
        np.testing.assert_array_equal(draw[~restarted], before.draw[~restarted])
        assert (draw[restarted] != before.draw[restarted]).all()
    assert games["self"] == 0 and games["random"] > 0 and games["heuristic"] > 0
    assert not np.array_equal(np.asarray(state.games.draw), first_draws)
    assert int(state.snapshots) == 0  # no self-play in the phase: no pool snapshots


def test_an_old_opponent_plays_the_frozen_pool_member(dense_learner):
    # Self-play opponents play greedily here; the online network prefers one cell, the
    # frozen pool member another: a game marked "old" gets the member's move once the
    # pool holds one (has_old), the current network's otherwise.
    learner = dqn.make_learner(dataclasses.replace(
        dense_learner.config, curriculum=dataclasses.replace(
            dense_learner.config.curriculum, opponent_epsilon=0.0)), devices=jax.devices()[:1])
    n, b = learner.env.size, 4
    online_prefs, member_prefs = np.zeros(n * n, np.float32), np.zeros(n * n, np.float32)
    online_prefs[10], member_prefs[30] = 1.0, 1.0
    online, member = _constant_q(learner, online_prefs), _constant_q(learner, member_prefs)
    s1 = jax.tree.map(lambda x: jnp.broadcast_to(x, (b,) + x.shape), learner.env.init())
    kinds = jnp.full((b,), dqn.OPPONENTS.index("self"))
    old = jnp.asarray([True, False, True, False])
    self_phase = len(learner.config.curriculum.phases) - 1
    moves = learner._opponent(self_phase, kinds, s1, old, jax.random.key(0), online, member,
                              jnp.bool_(True))
    assert np.asarray(moves).tolist() == [30, 10, 30, 10]
    moves = learner._opponent(self_phase, kinds, s1, old, jax.random.key(0), online, member,
                              jnp.bool_(False))  # an empty pool: the current network
    assert np.asarray(moves).tolist() == [10] * 4


def test_the_heuristics_blocking_follows_the_phase():
    phases = [{"opponent": "heuristic", "episodes": 10, "heuristic_blocks": 0.0},
              {"opponent": "heuristic", "episodes": 10}]
    learner = dqn.make_learner(_config(TINY, **{"curriculum.phases": phases}),
                               devices=jax.devices()[:1])
    # White (the heuristic, to move) faces black's four on row 2 in every game.
    n = learner.env.size
    board = np.zeros((n, n), np.int8)
    board[2, 1:5] = 1
    board[n - 1, 0:3] = 2
    one = learner.env.from_board(board, to_move=1)
    b = 16
    s1 = jax.tree.map(lambda x: jnp.broadcast_to(x, (b,) + x.shape), one)
    kinds = jnp.full((b,), dqn.OPPONENTS.index("heuristic"))

    def replies(phase, seed):
        state = learner.init()
        moves = learner._opponent(phase, kinds, s1, jnp.zeros((b,), bool), jax.random.key(seed),
                                  state.variables, state.variables, jnp.bool_(False))
        return {divmod(int(a), n) for a in np.asarray(moves)}

    blocks = {(2, 0), (2, 5)}
    assert replies(1, 0) <= blocks  # seed 000's heuristic always blocks the four
    assert not replies(0, 0) & blocks and not replies(0, 1) & blocks
    with pytest.raises(cfglib.ConfigError, match="heuristic_blocks"):
        _config(TINY, **{"curriculum.phases": [{"opponent": "heuristic", "episodes": 5,
                                                 "heuristic_blocks": 2}]})


def test_the_heuristics_free_moves_follow_the_phase():
    # top_k 1: always the most central empty cell; the whole board: anywhere.
    phases = [{"opponent": "heuristic", "episodes": 10, "heuristic_top_k": 1},
              {"opponent": "heuristic", "episodes": 10, "heuristic_top_k": 81},
              {"opponent": "heuristic", "episodes": 10}]
    learner = dqn.make_learner(_config(TINY, **{"curriculum.phases": phases}),
                               devices=jax.devices()[:1])
    assert learner.config.curriculum.heuristic_top_k == 3
    n, b = learner.env.size, 64
    s1 = jax.tree.map(lambda x: jnp.broadcast_to(x, (b,) + x.shape), learner.env.init())
    kinds = jnp.full((b,), dqn.OPPONENTS.index("heuristic"))
    state = learner.init()

    def replies(phase):
        moves = learner._opponent(phase, kinds, s1, jnp.zeros((b,), bool), jax.random.key(3),
                                  state.variables, state.variables, jnp.bool_(False))
        return {divmod(int(a), n) for a in np.asarray(moves)}

    centre = n // 2
    assert replies(0) == {(centre, centre)}
    assert len(replies(1)) > 20  # 64 free moves spread over the board
    near = replies(2)  # the curriculum's top_k 3: the centre and its four neighbours
    assert len(near) > 1 and all(abs(r - centre) + abs(c - centre) <= 1 for r, c in near)
    with pytest.raises(cfglib.ConfigError, match="heuristic_top_k"):
        _config(TINY, **{"curriculum.phases": [{"opponent": "heuristic", "episodes": 5,
                                                 "heuristic_top_k": 0}]})


@pytest.mark.parametrize("opponent, message", [
    ({}, "mixture is empty"),
    ({"random": 1, "bogus": 1}, "unknown opponent 'bogus'"),
    ({"random": 0, "heuristic": 0}, "sum to 0"),
    ({"random": -1, "heuristic": 2}, "random"),
])
def test_bad_opponent_mixtures_are_refused(opponent, message):
    with pytest.raises(cfglib.ConfigError, match=message):
        _config(MIXED, **{"curriculum.phases": [{"opponent": opponent, "episodes": 5}]})


@pytest.mark.parametrize("override, message", [
    ({"curriculum.phases": [{"opponent": "bogus", "episodes": 3}]}, "opponent"),
    ({"curriculum.phases": []}, "curriculum.phases"),
    ({"network": {"name": "resnet", "options": {}}},
     r"DQN trains a q network \(resnet-q, dueling\); 'resnet' is a policy-value"),
    ({"rewards.shaping": "table9"}, "rewards.shaping"),
    ({"rewards.weights": {"open_five": 1.0}}, "open_five"),
    ({"acting.epsilon_end": 1.5}, "acting.epsilon_end"),
    ({"train.n_step": 0}, "train.n_step"),
    ({"train.min_buffer": 5000}, "train.min_buffer"),
    ({"train.buffer_capacity": 2**31},
     r"train.buffer_capacity must be an integer from 1 to 2147483647, got 2147483648"),
    # the phases' ends are int32 on the device: a sum past 2**31 - 1 would wrap round
    ({"curriculum.phases": [{"opponent": "random", "episodes": 2**31 - 10},
                            {"opponent": "self", "episodes": 10}]},
     r"curriculum.phases: the phases' episodes sum to 2147483648, more than 2147483647 "
     r"\(2\*\*31 - 1\)"),
    ({"curriculum.phases": [{"opponent": "random", "episodes": 3 * 10**9}]},
     r"curriculum.phases: the phases' episodes sum to 3000000000, more than 2147483647"),
])
def test_bad_config_values_are_named(override, message):
    with pytest.raises(cfglib.ConfigError, match=message):
        _config(TINY, **override)


def test_a_curriculum_of_2_to_the_31_minus_1_episodes_fits_the_device_counts():
    cfg = _config(TINY, **{"curriculum.phases": [{"opponent": "random", "episodes": 2**31 - 10},
                                                  {"opponent": "self", "episodes": 9}]})
    assert cfg.curriculum.total_episodes == 2**31 - 1
    ends = dqn._curriculum_tables(cfg.curriculum.phases)["ends"]
    assert ends.dtype == np.int32 and ends.tolist() == [2**31 - 10, 2**31 - 1]


def test_batch_must_divide_over_devices():
    with pytest.raises(cfglib.ConfigError, match=r"acting.batch \(6\).*devices \(4\)"):
        dqn.make_learner(_config(TINY, **{"acting.batch": 6}))


# ------------------------------------------------------------- driver and configs
def test_training_run_on_the_smoke_config_end_to_end(learner, tmp_path):
    cfg = learner.config
    report = training.run(learner, tmp_path, progress=False, tensorboard=False)
    assert report["iterations"] == cfg.train.iterations
    assert json.loads((tmp_path / "config.json").read_text())["algorithm"] == "dqn"
    header = (tmp_path / "metrics.csv").read_text().splitlines()[0].split(",")
    assert {"loss", "epsilon", "buffer_fill", "game_length", "win_rate", "shaped_return",
            "outcome", "phase", "moves_per_second", "eval_random"} <= set(header)
    assert report["evaluation"]["random"]["games"] == cfg.eval.final_games
    agent = exported.load_agent(tmp_path / "final.gjx", name="exported")
    result = arena.play_match(Gomoku(9, 5), agent, agents.random_agent(), 2)
    assert all(r.forfeit is None for r in result.records)
    # the exported params are the final online variables
    state, _ = training.restore(learner, tmp_path)
    for a, b in zip(jax.tree.leaves(exported.load_network(tmp_path / "final.gjx")[3]),
                    jax.tree.leaves(state.variables)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # eval.simulations, which a DQN agent does not read, changed on the finished run:
    # stored, but nothing is evaluated again
    import copy
    import dataclasses

    other = copy.copy(learner)
    other.config = dataclasses.replace(cfg, eval=dataclasses.replace(
        cfg.eval, simulations=cfg.eval.simulations + 1))
    before = (tmp_path / "report.json").read_bytes()
    assert training.run(other, tmp_path, progress=False, tensorboard=False) == report
    assert (tmp_path / "report.json").read_bytes() == before
    stored = json.loads((tmp_path / "config.json").read_text())
    assert stored["eval"]["simulations"] == cfg.eval.simulations + 1


def test_the_reports_configs_are_here():
    assert {p.stem for p in CONFIGS} >= {"dqn_seed000_a", "dqn_seed000_b", "dqn_9x9_cpu"}
    a, _ = cfglib.load_file(dqn.DQNConfig, [p for p in CONFIGS if "000_a" in p.stem][0])
    b, _ = cfglib.load_file(dqn.DQNConfig, [p for p in CONFIGS if "000_b" in p.stem][0])
    assert [(p.opponent, p.episodes) for p in a.curriculum.phases] == [
        ("random", 1000), ("heuristic", 1000), ("self", 4000)]
    assert b.curriculum.phases[-1].episodes == 8000
    assert (a.curriculum.snapshot_every, b.curriculum.snapshot_every) == (500, 1000)
    for cfg in (a, b):
        assert cfg.rewards.shaping == "table3" and cfg.network.name == "resnet-q"
        assert (cfg.train.learning_rate, cfg.train.target_period, cfg.train.buffer_capacity,
                cfg.acting.epsilon_decay) == (1e-4, 2000, 50_000, 0.995)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_config_variants_load_and_the_smoke_variant_trains(path):
    data = json.loads(path.read_text())
    assert data["algorithm"] == "dqn" and "gomoku-jax train --config" in data["description"]
    for variant in [None, *data["variants"]]:
        cfg, _ = cfglib.load_file(dqn.DQNConfig, path, variants=[] if variant is None
                                  else [variant])
        assert cfglib.from_dict(dqn.DQNConfig, cfglib.to_dict(cfg)) == cfg
    learner = _smoke_learner(path)
    state, metrics = learner.iteration(learner.init())
    assert int(state.iteration) == 1
    _check_finite(jax.device_get(metrics))


def test_acting_and_updates_written_out_equal_the_loops(learner, run):
    """``train.unroll`` only changes how the update steps compile."""
    state, _ = run
    cfg = learner.config
    unrolled = dqn.make_learner(dataclasses.replace(
        cfg, train=dataclasses.replace(cfg.train, unroll=not cfg.train.unroll)),
        devices=jax.devices()[:1])
    fresh = lambda: jax.tree.map(jnp.copy, state)  # the iteration donates its input
    a_state, a_metrics = learner.iteration(fresh())
    b_state, b_metrics = unrolled.iteration(fresh())
    assert bool(a_metrics["trained"])
    for a, b in zip(jax.tree.leaves(a_state.variables), jax.tree.leaves(b_state.variables)):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    np.testing.assert_array_equal(jax.device_get(a_state.buffer.data.board),
                                  jax.device_get(b_state.buffer.data.board))


def test_self_opponent_slots_online_and_latest():
    """Whom a self phase plays: the current network or the newest snapshot, and for an
    old game a filled slot (under "latest" another than the newest while there is one)."""
    pool = 4
    for snapshots in range(0, 11):
        filled = min(snapshots, pool)
        written = {(snapshots - 1 - j) % pool for j in range(filled)}  # the filled slots
        draws = [dqn.self_opponent_slots(jnp.int32(snapshots), pool, jax.random.key(i), mode)
                 for mode in ("online", "latest") for i in range(40)]
        online, latest = draws[:40], draws[40:]
        assert {int(r) for r, _ in online} == {-1}
        assert {int(o) for _, o in online} == (written or {0})
        newest = (snapshots - 1) % pool
        assert {int(r) for r, _ in latest} == ({newest} if filled else {-1})
        olds = {int(o) for _, o in latest}
        assert olds == (written - {newest} if filled > 1 else {newest})
    with pytest.raises(ValueError, match="curriculum.self_opponent must be 'online' or "
                                         "'latest', got 'newest'"):
        dqn.CurriculumSettings(self_opponent="newest")


def test_self_games_play_the_newest_snapshot_under_latest_and_the_learner_under_online(
        dense_learner):
    """In a self phase with one snapshot, a greedy opponent (opponent_epsilon 0, no old
    games) plays the newest frozen version under "latest" and the current network under
    "online": the snapshot prefers low cells, the current network high ones, so under
    "latest" every cell below the opponent's highest stone is taken, and under "online"
    not."""
    learner = dense_learner
    cfg = learner.config
    n = learner.env.num_actions
    low, high = _constant_q(learner, -np.arange(n)), _constant_q(learner, np.arange(n))
    first_self = sum(p.episodes for p in cfg.curriculum.phases[:-1])
    packed = {}
    for mode in ("latest", "online"):
        one = dqn.make_learner(dataclasses.replace(cfg, curriculum=dataclasses.replace(
            cfg.curriculum, self_opponent=mode, opponent_epsilon=0.0,
            old_opponent_probability=0.0)),
            devices=jax.devices()[:1])
        state = one.init()
        pool = jax.tree.map(lambda p, v: p.at[0].set(v), state.pool, low)
        state = state.replace(variables=jax.tree.map(jnp.copy, high),  # (the iteration
                              pool=pool, snapshots=jnp.int32(1),  # donates its input)
                              episodes=jnp.int32(first_self))
        state, metrics = one.iteration(state)
        assert int(metrics["phase"]) == len(cfg.curriculum.phases) - 1  # self-play
        boards = np.asarray(state.games.state.board).reshape(len(state.games.colour), -1)
        opponent = 2 - np.asarray(state.games.colour)  # stone of the other colour
        packed[mode] = [bool((board[:np.flatnonzero(board == stone).max()] != 0).all())
                        for board, stone in zip(boards, opponent) if (board == stone).any()]
    assert packed["latest"] and all(packed["latest"])
    assert packed["online"] and not any(packed["online"])


@pytest.mark.parametrize("opponent, hint", [
    ("heuristic@0.5", '"opponent": "heuristic" and "heuristic_blocks": p'),
    ("alphabeta-2", "can be evaluation opponents (eval.opponents), not curriculum ones")])
def test_a_curriculum_opponent_of_another_kind_is_refused_with_the_way_to_it(opponent, hint):
    with pytest.raises(ValueError, match=re.escape(
            f"curriculum phase opponent must be one of random, heuristic, self or a mixture "
            f"{{name: weight}}, got {opponent!r}; ") + ".*" + re.escape(hint)):
        dqn.Phase(opponent, 10)


def test_a_curriculum_played_to_its_end_stops_the_run(learner, tmp_path):
    """With curriculum.stop_at_end the run ends with the iteration by which the phases'
    episodes are played, says so, and a run started again finds it finished."""
    import copy

    cfg = learner.config
    assert learner.stop_reason(learner.init()) is None  # stop_at_end is off
    short = copy.copy(learner)  # the same compiled programs; the stop reads the config
    short.config = dataclasses.replace(cfg, curriculum=dataclasses.replace(
        cfg.curriculum, stop_at_end=True,
        phases=(dqn.Phase("random", 1), dqn.Phase("heuristic", 1), dqn.Phase("self", 1))),
        train=dataclasses.replace(cfg.train, iterations=cfg.train.iterations + 3))
    report = training.run(short, tmp_path, progress=False, tensorboard=False)
    logged = list(csv.DictReader((tmp_path / "metrics.csv").open()))
    played = [int(float(row["episodes_total"])) for row in logged]
    assert report["iterations"] == len(logged) < short.config.train.iterations
    assert played[-1] >= 3 > max(played[:-1], default=0)  # the first iteration reaching 3
    assert report["stopped_early"] and report["stopped_because"] == (
        f"curriculum.stop_at_end: the curriculum's 3 episodes are played ({played[-1]} by "
        f"iteration {len(logged)})")
    assert training.run(short, tmp_path, progress=False, tensorboard=False) == report


def test_a_curriculum_at_the_last_iteration_or_past_it_is_no_early_stop(learner, tmp_path):
    """Played to its end at train.iterations: the run is not "stopped early"; not played
    to its end by then: a warning says how much is left."""
    import copy

    cfg = learner.config
    # 4: the smoke run has finished 2 episodes by its 3rd iteration, 8 by its 4th
    iterations = cfg.train.iterations + 1
    rows = []
    for total in (3, 1000):
        short = copy.copy(learner)
        short.config = dataclasses.replace(
            cfg, train=dataclasses.replace(cfg.train, iterations=iterations),
            curriculum=dataclasses.replace(cfg.curriculum, stop_at_end=True, phases=(
                dqn.Phase("random", 1), dqn.Phase("heuristic", 1), dqn.Phase("self", total - 2))))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            report = training.run(short, tmp_path / str(total), progress=False,
                                  tensorboard=False)
        rows.append((report, [str(w.message) for w in caught
                              if issubclass(w.category, training.RunWarning)]))
    (ended, quiet), (capped, said) = rows
    played = int(float(list(csv.DictReader(
        (tmp_path / "1000" / "metrics.csv").open()))[-1]["episodes_total"]))
    assert ended["iterations"] == capped["iterations"] == iterations
    assert not ended["stopped_early"] and ended["stopped_because"] is None and not quiet
    assert not capped["stopped_early"] and said == [
        f"{tmp_path / '1000'}: train.iterations ({iterations}) ended the run with "
        f"{played} of the curriculum's 1000 episodes played (curriculum.stop_at_end): raise "
        "train.iterations to play them all"]
