"""Observation planes: each encoding by hand, the viewer's side, batches and the bias."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gomoku_jax import features, tactics
from gomoku_jax.game import Gomoku

MOVES = [(1, 1), (0, 2), (2, 3)]  # black, white, black: white to move, last move (2, 3)


def _position(encoding, bias=None):
    env = Gomoku(4, 3, observation=encoding, positional_bias=bias)
    return env, env.play_moves(MOVES)


def test_stones_colour_is_seed_000_layout():
    env, s = _position("stones-colour")
    obs = np.asarray(s.observation)
    assert obs.shape == env.observation_shape == (4, 4, 3) and obs.dtype == np.float32
    own, opp, colour = obs[..., 0], obs[..., 1], obs[..., 2]
    assert own.sum() == 1 and own[0, 2] == 1  # white to move: its stone is "own"
    assert opp.sum() == 2 and opp[1, 1] == 1 and opp[2, 3] == 1
    assert (colour == 0).all()  # white to move: colour plane all zeros
    black_view = np.asarray(env.observe(s, 0))
    assert black_view[1, 1, 0] == 1 and black_view[0, 2, 1] == 1 and (black_view[..., 2] == 1).all()


def test_stones_last_colour_marks_the_last_move():
    env, s = _position("stones-last-colour")
    obs = np.asarray(s.observation)
    assert obs.shape == (4, 4, 4)
    last = obs[..., 2]
    assert last.sum() == 1 and last[2, 3] == 1
    assert (obs[..., 3] == 0).all()
    assert not np.asarray(env.init().observation)[..., 2].any()  # no move yet


def test_stones_empty_is_seed_004_layout():
    _, s = _position("stones-empty")
    obs = np.asarray(s.observation)
    board = np.asarray(s.board)
    np.testing.assert_array_equal(obs[..., 0], board == 2)
    np.testing.assert_array_equal(obs[..., 1], board == 1)
    np.testing.assert_array_equal(obs[..., 2], board == 0)
    assert (obs.sum(-1) == 1).all()  # the three planes partition the board


@pytest.mark.parametrize("rule", ["freestyle", "standard"])
def test_stones_threats_reads_the_tactics_of_both_sides(rule):
    # 7x7, k = 4: black has an open two and a diagonal pair, white a broken two.
    env = Gomoku(7, 4, rule, observation="stones-threats")
    s = env.play_moves([(3, 2), (0, 0), (3, 3), (0, 2), (4, 4), (6, 6)])  # black to move
    obs = np.asarray(s.observation)
    assert obs.shape == env.observation_shape == (7, 7, 9)
    assert features.ENCODINGS["stones-threats"][3:] == (
        "own-five", "own-fours", "own-threes", "opponent-five", "opponent-fours",
        "opponent-threes")
    np.testing.assert_array_equal(obs[..., :3], np.asarray(
        Gomoku(7, 4, rule, observation="stones-colour").play_moves(
            [(3, 2), (0, 0), (3, 3), (0, 2), (4, 4), (6, 6)]).observation))
    board = np.asarray(s.board)
    for side, player in ((0, 0), (1, 1)):  # black is the viewer
        want = np.asarray(tactics.threat_moves(board, player, 4, rule))
        np.testing.assert_array_equal(np.moveaxis(obs[..., 3 + 3 * side:6 + 3 * side], -1, 0),
                                      want)
    assert obs[..., 4].max() >= 1 and obs[..., 7].max() >= 1  # both sides can make fours
    # White's view swaps the two triples.
    white = np.asarray(env.observe(s, 1))
    np.testing.assert_array_equal(white[..., 3:6], obs[..., 6:9])
    np.testing.assert_array_equal(white[..., 6:9], obs[..., 3:6])
    # The spec carries the game's k and rule, which the threat planes need.
    assert env.observation_spec.k == 4 and env.observation_spec.rule == rule


def test_positional_bias_subtracts_the_gaussian_from_every_plane():
    env, s = _position("stones-colour", bias=1.0)
    plain = np.asarray(_position("stones-colour")[1].observation)
    obs = np.asarray(s.observation)
    bias = plain - obs  # [4, 4, 3], the same on every plane
    for c in range(3):
        np.testing.assert_allclose(bias[..., c], bias[..., 0], atol=1e-7)
    centre = 1.5  # 4x4: the centre lies between cells
    r, c = 0, 3
    expected = np.exp(-((r - centre) ** 2 + (c - centre) ** 2) / 2) / (2 * np.pi)
    np.testing.assert_allclose(bias[r, c, 0], expected, rtol=1e-5)
    assert bias[1, 1, 0] == pytest.approx(bias.max(), rel=1e-6)  # largest next to the centre


def test_batched_observation_equals_stacked_single_observations():
    env = Gomoku(6, 4, observation="stones-last-colour")
    keys = jax.random.split(jax.random.key(1), 5)
    states = jax.vmap(env.init)(keys)
    for t in range(7):
        actions = jnp.asarray([(t * 7 + i * 3) % 36 for i in range(5)], jnp.int32)
        states = jax.vmap(env.step)(states, actions)
    batched = np.asarray(states.observation)
    assert batched.shape == (5, 6, 6, 4)
    for i in range(5):
        single = jax.tree.map(lambda x: x[i], states)
        np.testing.assert_array_equal(batched[i], np.asarray(single.observation))
    # Viewers per game broadcast too.
    viewers = jnp.asarray([0, 1, 0, 1, 0])
    per = np.asarray(env.observe(states, viewers))
    for i in range(5):
        single = jax.tree.map(lambda x: x[i], states)
        np.testing.assert_array_equal(per[i], np.asarray(env.observe(single, int(viewers[i]))))


@pytest.mark.parametrize("kwargs, text", [
    (dict(observation="rgb"), "observation encoding must be one of stones-colour"),
    (dict(positional_bias=0.0), "positive number"),
    (dict(positional_bias=-1), "positive number"),
    (dict(positional_bias="wide"), "positive number"),
])
def test_bad_observation_settings_are_refused(kwargs, text):
    with pytest.raises(ValueError, match=text):
        Gomoku(9, 5, **kwargs)


def test_every_encoding_is_listed_with_its_plane_count():
    for name, planes in features.ENCODINGS.items():
        env = Gomoku(5, 4, observation=name)
        assert env.observation_shape == (5, 5, len(planes))
        assert env.init().observation.shape == (5, 5, len(planes))


def test_a_viewer_that_is_not_a_player_is_refused():
    env = Gomoku(5, 4)
    state = env.step(env.init(jax.random.key(0)), 12)
    for bad in (2, -1, 1.5, "white", True, np.array([0, 2]), jnp.int32(2), jnp.int32(-1),
                jnp.array([0, 2])):  # concrete JAX arrays are inspected too
        with pytest.raises(ValueError, match=r"observe: player is 0 \(black\) or 1 \(white\)"):
            env.observe(state, bad)
    black, white = env.observe(state, 0), env.observe(state, np.int64(1))
    assert float(black[2, 2, 0]) == 1 and float(white[2, 2, 1]) == 1  # own, opponent planes
    traced = jax.jit(env.observe)(state, jnp.int32(1))  # traced viewers are not inspected
    assert np.array_equal(traced, white)


@pytest.mark.parametrize("size, sigma, what", [
    (7, 0, "sigma"), (7, -1.0, "sigma"), (7, float("nan"), "sigma"), (7, "2", "sigma"),
    (0, 1.0, "size"), (7.5, 1.0, "size"), (True, 1.0, "size"),
])
def test_gaussian_bias_refuses_what_is_not_a_board_or_a_width(size, sigma, what):
    with pytest.raises(ValueError, match=f"gaussian_bias: {what} must be a positive"):
        features.gaussian_bias(size, sigma)
    assert features.gaussian_bias(7, 1.5).shape == (7, 7)


def test_with_planes_reads_a_state_in_another_games_encoding():
    empty_env, state = _position("stones-empty")
    colour_env = Gomoku(4, 3, observation="stones-colour")
    read = colour_env.with_planes(state)
    np.testing.assert_array_equal(read.observation, colour_env.play_moves(MOVES).observation)
    np.testing.assert_array_equal(read.board, state.board)  # the position is the same
    assert np.asarray(state.observation).shape == empty_env.observation_shape
    batch = jax.vmap(lambda _: state)(jnp.arange(3))  # a batch too
    assert colour_env.with_planes(batch).observation.shape == (3, 4, 4, 3)
    assert not np.array_equal(colour_env.with_planes(state).observation, state.observation)
