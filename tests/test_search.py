"""mctx glue: tree semantics on the real game, PUCT and Gumbel search, the tactical prior."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

from algorithms import alphazero
from gomoku_jax import agents, arena, exported, networks, search, tactics
from gomoku_jax import config as config_lib
from gomoku_jax import io as gio
from gomoku_jax.agents import random_agent
from gomoku_jax.game import Gomoku

SMALL = Gomoku(5, 4)  # searched positions
BIG = Gomoku(9, 5)  # tactical positions (seed 000's open threes need k = 5)
MIN = float(jnp.finfo(jnp.float32).min)
UNIFORM = search.uniform_evaluate(SMALL)

# 128: the root's Dirichlet noise (a quarter of the prior, over the legal moves) can
# outweigh 64 simulations' evidence for a win in one game in a hundred.
PUCT = search.SearchConfig("puct", num_simulations=128)
GUMBEL = search.SearchConfig("gumbel", num_simulations=128)

_TRACES = []


def _traced_run(*args):
    _TRACES.append(args[-1].algorithm)
    return search.run_search(*args)


_run = jax.jit(_traced_run, static_argnums=(0, 1))  # config traced: see the trace test


def _parse(rows):
    cell = {".": 0, "X": 1, "O": 2}
    return np.array([[cell[c] for c in row.split()] for row in rows], np.int8)


def _stack(*states):
    return jax.tree.map(lambda *x: jnp.stack(x), *states)


def _pos(stones, to_move=0, env=BIG):
    board = np.zeros((env.size, env.size), np.int8)
    for (r, c), v in stones.items():
        board[r, c] = v
    return env.from_board(board, to_move=to_move)


# Black (X) to move. WIN: black wins at (0, 3) = action 3 and nowhere else; white
# threatens (1, 1), so every other move but the block loses. BLOCK: black has no win;
# white wins at (0, 1) = action 1 unless black blocks there, after which white has none.
WIN = _parse([
    "X X X . O",
    "O . O O X",
    "X O . X .",
    ". X O . O",
    "O . X X O",
])
BLOCK = _parse([
    "X . O O O",
    "X O . X X",
    "O X X O .",
    "X O O . X",
    ". . . X O",
])
WIN_ACTION, BLOCK_ACTION = 3, 1


def test_the_puzzles_are_what_they_claim():
    for board, player, cells in [(WIN, 0, [3]), (WIN, 1, [6]), (BLOCK, 0, []), (BLOCK, 1, [1])]:
        assert np.flatnonzero(tactics.winning_moves(board, player, 4)).tolist() == cells
    blocked = BLOCK.copy()
    blocked[0, 1] = 1
    assert not tactics.winning_moves(blocked, 1, 4).any()


@pytest.fixture(scope="module")
def puzzles():
    """Four copies of (WIN, BLOCK): eight games, each with its own noise."""
    return _stack(*[SMALL.from_board(b) for _ in range(4) for b in (WIN, BLOCK)])


@pytest.fixture(scope="module", params=["puct", "gumbel"])
def searched(request, puzzles):
    config = PUCT if request.param == "puct" else GUMBEL
    return config, _run(SMALL, UNIFORM, None, puzzles, jax.random.key(0), config)


# ------------------------------------------------------------------ configs
@pytest.mark.parametrize("field, value", [
    ("algorithm", "alphazero"),
    ("num_simulations", 0),
    ("num_simulations", 2.0),
    ("num_simulations", 2**31),  # a tree's nodes are numbered with int32
    ("c_puct", 0.0),
    ("c_puct", "1"),
    ("pb_c_base", -1.0),
    ("dirichlet_alpha", 0.0),
    ("dirichlet_fraction", 1.5),
    ("dirichlet_fraction", None),
    ("max_num_considered_actions", 0),
    ("gumbel_scale", -0.1),
    ("value_scale", float("nan")),
    ("maxvisit_init", True),
    ("max_depth", 0),
    # infinite: mctx's PUCT scores turn NaN (every move ties at the first cell) and
    # Gumbel's completed Q NaN weights
    ("c_puct", float("inf")),
    ("pb_c_base", float("inf")),
    ("dirichlet_alpha", float("inf")),
    ("value_scale", float("inf")),
    ("maxvisit_init", float("inf")),
    ("gumbel_scale", float("inf")),
])
def test_search_config_rejects_bad_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=f"SearchConfig.{field}"):
        search.SearchConfig(**{field: value})


def test_configs_round_trip_through_dicts():
    config = search.SearchConfig("gumbel", 8, c_puct=2, max_depth=3)
    assert isinstance(config.c_puct, float)  # ints normalised, so equal configs hash equally
    assert search.SearchConfig.from_dict(config.to_dict()) == config
    assert hash(config) == hash(search.SearchConfig.from_dict(config.to_dict()))
    with pytest.raises(ValueError, match="unknown fields.*simulations"):
        search.SearchConfig.from_dict({"simulations": 3})
    prior = search.TacticalPrior(0.25, 0.8)
    assert search.TacticalPrior.from_dict(prior.to_dict()) == prior
    uniform = search.TacticalPrior(rest="uniform")
    assert search.TacticalPrior.from_dict(uniform.to_dict()) == uniform != search.TacticalPrior()
    for field, value in [("open_three_probability", 1.1), ("forced_mass", 0.0),
                         ("enabled", 1), ("rest", "even")]:
        with pytest.raises(ValueError, match=f"TacticalPrior.{field}"):
            search.TacticalPrior(**{field: value})


def test_selection_functions_are_the_configs_selections():
    import mctx

    from gomoku_jax import tree_search

    root, interior = search.selection_functions(
        search.SearchConfig(algorithm="puct", c_puct=2.0, pb_c_base=100.0))
    assert interior.func is tree_search.muzero_action_selection
    assert (interior.keywords["pb_c_init"], interior.keywords["pb_c_base"]) == (2.0, 100.0)
    # the root: the same selection at depth 0 (where the root's invalid actions are masked)
    assert root.func is tree_search.muzero_action_selection
    assert root.keywords == {**interior.keywords, "depth": 0}

    root, interior = search.selection_functions(search.SearchConfig(
        algorithm="gumbel", num_simulations=32, max_num_considered_actions=8,
        value_scale=0.2, maxvisit_init=10.0))
    assert root.func is tree_search.gumbel_muzero_root_action_selection
    assert interior.func is tree_search.gumbel_muzero_interior_action_selection
    assert (root.keywords["num_simulations"], root.keywords["max_num_considered_actions"]) == (
        32, 8)
    for fn in (root, interior):
        q = fn.keywords["qtransform"]
        assert q.func is mctx.qtransform_completed_by_mix_value
        assert (q.keywords["value_scale"], q.keywords["maxvisit_init"]) == (0.2, 10.0)

    with pytest.raises(ValueError, match="SearchConfig"):
        search.selection_functions({"algorithm": "puct"})


def _same_partial(a, b) -> bool:
    """Two (nested) functools.partial objects of the same function and arguments."""
    if isinstance(a, functools.partial) and isinstance(b, functools.partial):
        return (a.func is b.func and a.args == b.args and a.keywords.keys() == b.keywords.keys()
                and all(_same_partial(a.keywords[k], b.keywords[k]) for k in a.keywords))
    return a is b or a == b


def test_run_search_selects_with_the_configs_selection_functions(monkeypatch, puzzles):
    from gomoku_jax import tree_search

    seen, original = [], tree_search.search

    def spy(*args, **kwargs):
        seen.append((kwargs["root_action_selection_fn"], kwargs["interior_action_selection_fn"]))
        return original(*args, **kwargs)

    monkeypatch.setattr(tree_search, "search", spy)
    for config in (
            search.SearchConfig("puct", 4, c_puct=2.0, pb_c_base=100.0, backend="linear"),
            search.SearchConfig("gumbel", 4, max_num_considered_actions=4, value_scale=0.2,
                                maxvisit_init=10.0, backend="linear")):
        seen.clear()
        search.run_search(SMALL, UNIFORM, None, puzzles, jax.random.key(0), config)
        [(root, interior)] = seen
        want_root, want_interior = search.selection_functions(config)
        assert _same_partial(root, want_root) and _same_partial(interior, want_interior)
        # and a different config's would not pass for them
        other = search.selection_functions(dataclasses.replace(config, value_scale=0.3,
                                                               c_puct=3.0))
        assert not _same_partial(interior, other[1])


def test_hyperparameters_are_traced_and_shapes_static(searched, puzzles):
    # Seven float leaves; algorithm, simulations, considered actions, depth are static.
    assert len(jax.tree.leaves(PUCT)) == 7
    assert len(jax.tree.leaves(search.TacticalPrior())) == 2
    config, out = searched
    traces = len(_TRACES)
    other = dataclasses.replace(config, c_puct=3.0, dirichlet_fraction=0.0, gumbel_scale=0.5,
                                value_scale=0.2)
    again = _run(SMALL, UNIFORM, None, puzzles, jax.random.key(0), other)
    assert len(_TRACES) == traces  # new hyperparameters reuse the compiled search
    assert not np.allclose(again.action_weights, out.action_weights)
    # The number of simulations is part of the tree structure: a new one recompiles.
    assert jax.tree.structure(PUCT) != jax.tree.structure(
        dataclasses.replace(PUCT, num_simulations=9))
    assert jax.tree.structure(PUCT) == jax.tree.structure(dataclasses.replace(PUCT, c_puct=9.0))


# ------------------------------------------------------- recurrent_fn semantics
def _half_value(params, states):
    """Distinct logits per action and value 0.5 everywhere (to see what gets zeroed)."""
    del params
    batch = states.current_player.shape
    logits = jnp.broadcast_to(jnp.arange(SMALL.num_actions, dtype=jnp.float32),
                              batch + (SMALL.num_actions,))
    return logits, jnp.full(batch, 0.5)


def test_recurrent_fn_rewards_discounts_and_values_for_both_players():
    recurrent = jax.jit(search.make_recurrent_fn(SMALL, _half_value))
    white_wins = np.where(WIN == 1, 2, np.where(WIN == 2, 1, 0)).astype(np.int8)
    black = SMALL.from_board(WIN)  # black to move
    white = SMALL.from_board(white_wins, to_move=1)  # colours swapped, white to move
    finished = SMALL.step(black, WIN_ACTION)
    assert bool(finished.terminated)
    states = _stack(black, white, black, white, black, finished)
    # win, win, quiet move, quiet move, occupied cell (forfeit), move after the end
    actions = jnp.array([3, 3, 12, 14, 0, 12])
    out, nxt = recurrent(None, jax.random.key(0), actions, states)
    np.testing.assert_array_equal(out.reward, [1, 1, 0, 0, -1, 0])
    np.testing.assert_array_equal(out.discount, [0, 0, -1, -1, 0, 0])
    np.testing.assert_array_equal(out.value, [0, 0, 0.5, 0.5, 0, 0])
    np.testing.assert_array_equal(nxt.winner, [0, 1, -1, -1, 1, 0])
    np.testing.assert_array_equal(nxt.board[5], finished.board)  # a terminal stays put
    # Inside the tree illegal children get the smallest logit, legal ones keep theirs.
    legal = np.asarray(nxt.legal_action_mask[2])
    assert not legal[12] and not legal[0]
    logits = np.asarray(out.prior_logits[2])
    np.testing.assert_array_equal(logits[~legal], MIN)
    np.testing.assert_allclose(logits[legal], np.arange(25.0)[legal] - np.arange(25)[legal].max())
    assert jax.nn.softmax(out.prior_logits[2])[~legal].sum() == 0


def test_root_output_masks_and_zeroes_finished_games():
    black = SMALL.from_board(WIN)
    states = _stack(black, SMALL.step(black, WIN_ACTION))
    root = search.root_output(SMALL, _half_value, None, states)
    np.testing.assert_array_equal(root.value, [0.5, 0.0])
    legal = np.asarray(black.legal_action_mask)
    np.testing.assert_array_equal(np.asarray(root.prior_logits[0])[~legal], MIN)
    with pytest.raises(ValueError, match="key"):
        search.root_output(SMALL, _half_value, None, states, tactical=search.TacticalPrior())
    with pytest.raises(ValueError, match="states must be a batch"):
        search.root_output(SMALL, _half_value, None, black)


# ------------------------------------------------------------------- search
def test_search_finds_the_win_and_the_block(searched):
    config, out = searched
    expected = np.array([WIN_ACTION, BLOCK_ACTION] * 4)
    np.testing.assert_array_equal(search.select_action(out, jax.random.key(1), 0.0), expected)
    target = search.policy_target(out, config)
    np.testing.assert_array_equal(np.argmax(target, axis=-1), expected)
    # most visits go to the win, over the four copies each with its own root noise (the
    # noise of one copy can draw a third of them to another move)
    assert float(np.mean(target[::2, WIN_ACTION])) > 0.5


def test_illegal_moves_get_no_visits_and_no_weight(searched, puzzles):
    config, out = searched
    legal = np.asarray(puzzles.legal_action_mask)
    tree = out.search_tree
    root_visits = np.asarray(tree.children_visits[:, 0])
    assert (root_visits[~legal] == 0).all() and root_visits.sum(-1).tolist() == [
        config.num_simulations] * 8
    weights = np.asarray(search.policy_target(out, config))
    assert (weights[~legal] == 0).all()
    np.testing.assert_allclose((weights * legal).sum(-1), 1.0, atol=1e-5)
    # Every expanded, unfinished node in the tree masks the cells occupied in it.
    nodes = tree.embeddings
    live = (np.asarray(tree.node_visits) > 0) & ~np.asarray(nodes.terminated)
    illegal = ~np.asarray(nodes.legal_action_mask) & live[..., None]
    assert live[:, 1:].any()  # the check reaches below the root
    assert (np.asarray(tree.children_prior_logits)[illegal] == MIN).all()
    assert (np.asarray(tree.children_visits)[illegal] == 0).all()


def test_policy_target_checks_the_algorithm(searched):
    config, out = searched
    other = dataclasses.replace(
        config, algorithm="gumbel" if config.algorithm == "puct" else "puct")
    with pytest.raises(ValueError, match="algorithm"):
        search.policy_target(out, other)


def test_select_action_greedy_and_sampled(searched, puzzles):
    config, out = searched
    visits = np.asarray(out.search_tree.children_visits[:, 0])
    greedy = np.asarray(search.select_action(out, jax.random.key(0), 0))
    if config.algorithm == "puct":
        np.testing.assert_array_equal(greedy, visits.argmax(-1))
    else:
        np.testing.assert_array_equal(greedy, out.action)
    keys = jax.random.split(jax.random.key(5), 64)
    sample = jax.jit(jax.vmap(search.select_action, in_axes=(None, 0, None)))
    for t in (1.0, 0.3):
        acts = np.asarray(sample(out, keys, t))  # [64, 8]
        picked = np.take_along_axis(visits[None], acts[..., None], axis=-1)[..., 0]
        assert (picked > 0).all()  # only visited (hence legal) moves
        assert np.asarray(puzzles.legal_action_mask)[np.arange(8), acts].all()
    spread = np.asarray(sample(out, keys, 1.0))
    assert any(len(set(spread[:, g])) > 1 for g in range(8))  # T = 1 really samples
    # A tiny temperature neither overflows nor NaNs: it is the unique most visited move.
    unique = (visits == visits.max(-1, keepdims=True)).sum(-1) == 1
    tiny = np.asarray(sample(out, keys, 1e-6))
    assert (tiny[:, unique] == visits.argmax(-1)[unique]).all()
    # A traced temperature gives what the Python number gives.
    traced = jax.jit(search.select_action)
    key = jax.random.key(9)
    for t in (0.0, 0.5):
        np.testing.assert_array_equal(traced(out, key, jnp.float32(t)),
                                      search.select_action(out, key, t))
    with pytest.raises(ValueError, match="temperature"):
        search.select_action(out, key, -1.0)


def test_greedy_breaks_a_visit_tie_by_q_value(searched):
    config, out = searched
    if config.algorithm != "puct":
        pytest.skip("a Gumbel search chooses its own action")
    tree = out.search_tree
    # two equally visited root moves, the later one (in index order) of higher value
    visits = tree.children_visits.at[:, 0, 2].set(500).at[:, 0, 7].set(500)
    rewards = tree.children_rewards.at[:, 0, 2].set(-0.5).at[:, 0, 7].set(0.5)
    discounts = tree.children_discounts.at[:, 0, jnp.array([2, 7])].set(0.0)
    legal = tree.root_invalid_actions.at[:, jnp.array([2, 7])].set(False)
    tied = out.replace(search_tree=tree.replace(
        children_visits=visits, children_rewards=rewards, children_discounts=discounts,
        root_invalid_actions=legal))
    q = np.asarray(tied.search_tree.qvalues(jnp.zeros(8, jnp.int32)))
    assert (q[:, 7] > q[:, 2]).all()  # the move's value to the player at the root
    np.testing.assert_array_equal(search.select_action(tied, jax.random.key(0), 0), [7] * 8)


def test_one_game_policy_under_vmap_keeps_games_apart(puzzles):
    # Each game's move depends on its own key and state only: permuting the batch
    # permutes the answers (one compiled function, so this costs no second compile).
    config = dataclasses.replace(PUCT, num_simulations=16)
    policy = jax.jit(jax.vmap(search.search_policy(SMALL, UNIFORM, config), in_axes=(None, 0, 0)))
    keys = jax.random.split(jax.random.key(2), 8)
    perm = np.array([3, 0, 6, 1, 7, 2, 5, 4])
    moves = np.asarray(policy(None, keys, puzzles))
    permuted = np.asarray(policy(None, keys[perm], jax.tree.map(lambda x: x[perm], puzzles)))
    np.testing.assert_array_equal(permuted, moves[perm])


def test_search_agent_plays_a_match_against_random():
    config = dataclasses.replace(PUCT, num_simulations=32, dirichlet_fraction=0.0)
    agent = search.search_agent("search", SMALL, UNIFORM, None, config)
    result = arena.play_match(SMALL, agent, random_agent(), games=2, seed=1)
    assert len(result.records) == 2
    for record in result.records:
        assert record.forfeit is None
        assert len(set(record.moves)) == record.length > 0
    with pytest.raises(ValueError, match="temperature"):
        search.search_policy(SMALL, UNIFORM, PUCT, temperature=-1)


def test_search_agents_built_alike_share_their_compiled_search():
    # what a training run's evaluations and a tournament's pairings rebuild each time
    from gomoku_jax import networks

    def agent(simulations=8):
        module = networks.make_network("cnn", board_size=SMALL.size)  # a new, equal module
        config = dataclasses.replace(PUCT, num_simulations=simulations)
        return search.search_agent("a", SMALL, search.network_evaluate(module), None, config)

    a, b = agent(), agent()
    assert a.policy == b.policy and a._jit_policy is b._jit_policy
    assert a.batch_policy() == b.batch_policy()  # the arena's match loop: one compile
    killers = [agents.with_killer(x, SMALL) for x in (a, b)]
    assert killers[0].batch_policy() == killers[1].batch_policy()
    assert agent(simulations=9).policy != a.policy
    assert agent(simulations=9).batch_policy() != a.batch_policy()
    # an agent that keeps its tree between moves shares its compiled move too
    reuse = dataclasses.replace(PUCT, num_simulations=8, reuse_tree=True, backend="linear")
    r1, r2 = (search.search_agent("r", SMALL, UNIFORM, None, reuse) for _ in range(2))
    assert r1._move is r2._move and r1._empty is r2._empty


# ------------------------------------------------------------ tactical prior
_prior = jax.jit(search.apply_tactical_prior, static_argnums=0)

BLACK_FOUR = {(4, c): 1 for c in range(2, 6)}  # black wins at (4, 1) or (4, 6)
WHITE_FOUR = {(7, c): 2 for c in range(1, 5)}  # white wins at (7, 0) or (7, 5)
WHITE_THREE = {(1, 4): 2, (2, 4): 2, (3, 4): 2}  # .XXX. down column 4: blocks (0, 4), (4, 4)
QUIET_BLACK = [(8, 0), (8, 3), (8, 6), (0, 8), (2, 0), (0, 6), (6, 8)]


def _quiet(n):
    return {rc: 1 for rc in QUIET_BLACK[:n]}


def _probs(states, logits=None, key=0, **kwargs):
    tactical = search.TacticalPrior(**kwargs)
    if logits is None:
        logits = jnp.zeros(states.legal_action_mask.shape)
    out = _prior(BIG, states, logits, jax.random.key(key), tactical)
    return np.asarray(jax.nn.softmax(out)), np.asarray(out)


def test_a_win_gets_forced_mass_and_the_rest_keeps_the_network_prior():
    white = {(0, 0): 2, (0, 2): 2, (8, 8): 2, (8, 6): 2}
    state = _pos(BLACK_FOUR | white)
    states = _stack(state)
    legal = np.asarray(state.legal_action_mask)
    probs, logits = _probs(states)
    win = 4 * 9 + 6  # the winning cell nearer the centre
    np.testing.assert_allclose(probs[0, win], 0.9, rtol=1e-6)
    others = legal.copy()
    others[win] = False
    np.testing.assert_allclose(probs[0, others], 0.1 / others.sum(), rtol=1e-5)
    assert (logits[0, ~legal] == MIN).all()
    # A non-uniform network prior keeps its ratios over the other legal moves.
    net = jax.random.normal(jax.random.key(1), (1, 81))
    probs, _ = _probs(states, net)
    p = np.asarray(jax.nn.softmax(jnp.where(legal, net[0], -jnp.inf)))
    np.testing.assert_allclose(probs[0, others], 0.1 * p[others] / p[others].sum(), rtol=1e-4)
    # forced_mass = 1: everything on the win, no NaN.
    probs, _ = _probs(states, net, forced_mass=1.0)
    assert probs[0, win] == 1.0 and np.isfinite(probs).all()
    # rest="uniform": the other 10% evenly, whatever the network's prior.
    probs, logits = _probs(states, net, rest="uniform")
    np.testing.assert_allclose(probs[0, win], 0.9, rtol=1e-6)
    np.testing.assert_allclose(probs[0, others], 0.1 / others.sum(), rtol=1e-5)
    assert (logits[0, ~legal] == MIN).all()
    probs, _ = _probs(states, net, rest="uniform", forced_mass=1.0)
    assert probs[0, win] == 1.0 and np.isfinite(probs).all()


def test_priority_win_then_block_then_open_three():
    win_and_block = _pos(BLACK_FOUR | WHITE_FOUR)
    block_and_three = _pos(WHITE_FOUR | WHITE_THREE | _quiet(7))
    states = _stack(win_and_block, block_and_three)
    probs, _ = _probs(states, open_three_probability=1.0)
    assert probs[0].argmax() == 4 * 9 + 6  # own win before the block
    assert probs[1].argmax() == 7 * 9 + 5  # the block (nearer the centre) before the three
    np.testing.assert_allclose(probs[:, probs.argmax(-1)].diagonal(), 0.9, rtol=1e-6)


def test_open_three_block_fires_with_p_one_never_with_p_zero():
    consecutive = _pos(WHITE_THREE | _quiet(3))
    broken = _pos({(4, 1): 2, (4, 3): 2, (4, 4): 2} | _quiet(3))  # .X.XX.: the gap (4, 2)
    states = _stack(consecutive, broken)
    net = jax.random.normal(jax.random.key(4), (2, 81))
    masked = jnp.where(states.legal_action_mask, net, -jnp.inf)
    probs, _ = _probs(states, net, open_three_probability=1.0)
    np.testing.assert_array_equal(probs.argmax(-1), [4 * 9 + 4, 4 * 9 + 2])
    np.testing.assert_allclose(probs.max(-1), 0.9, rtol=1e-6)
    for kwargs in ({"open_three_probability": 0.0}, {"enabled": False}):
        probs, _ = _probs(states, net, **kwargs)
        np.testing.assert_allclose(probs, jax.nn.softmax(masked), rtol=1e-5, atol=1e-7)
    # p = 0.5: a fresh coin per game (512 copies, one key).
    many = jax.tree.map(lambda x: jnp.repeat(x[:1], 512, axis=0), states)
    probs, _ = _probs(many, key=7, open_three_probability=0.5)
    fired = (probs[:, 40] > 0.5).mean()
    assert 0.4 < fired < 0.6


def test_finished_games_and_search_without_prior_are_untouched():
    state = _pos(BLACK_FOUR | WHITE_FOUR)
    done = BIG.step(state, 4 * 9 + 6)
    assert bool(done.terminated)
    probs, _ = _probs(_stack(done))
    np.testing.assert_allclose(probs, 1 / 81, rtol=1e-5)


def test_recurrent_fn_applies_the_prior_at_expanded_nodes():
    # Black ignores white's four: in the child, white to move has the forced win.
    state = _stack(_pos(WHITE_FOUR | _quiet(4)))
    evaluate = search.uniform_evaluate(BIG)
    action = jnp.array([0 * 9 + 4])
    with_prior = search.make_recurrent_fn(BIG, evaluate, search.TacticalPrior(0.0, 0.75))
    out, nxt = jax.jit(with_prior)(None, jax.random.key(0), action, state)
    assert int(nxt.current_player[0]) == 1
    probs = np.asarray(jax.nn.softmax(out.prior_logits[0]))
    assert probs.argmax() == 7 * 9 + 5 and np.isclose(probs.max(), 0.75, rtol=1e-6)
    plain_fn = jax.jit(search.make_recurrent_fn(BIG, evaluate))
    plain, _ = plain_fn(None, jax.random.key(0), action, state)
    legal = np.asarray(nxt.legal_action_mask[0])
    np.testing.assert_allclose(np.asarray(jax.nn.softmax(plain.prior_logits[0]))[legal],
                               1 / legal.sum(), rtol=1e-5)


def test_training_search_with_the_prior_favours_the_forced_move():
    # BLOCK under a network that all but insists on action 24 (prior ~0.87 there): the
    # tactical prior still steers the search to the block.
    def biased(params, states):
        logits, value = UNIFORM(params, states)
        return logits.at[:, 24].set(5.0), value

    states = _stack(SMALL.from_board(BLOCK))
    config = search.SearchConfig("puct", num_simulations=8, dirichlet_fraction=0.0)
    out = jax.jit(search.run_search, static_argnums=(0, 1))(
        SMALL, biased, None, states, jax.random.key(0), config, search.TacticalPrior())
    np.testing.assert_allclose(jax.nn.softmax(out.search_tree.children_prior_logits[0, 0])[
        BLOCK_ACTION], 0.9, rtol=1e-6)
    visits = np.asarray(out.search_tree.children_visits[0, 0])
    assert visits.argmax() == BLOCK_ACTION and visits[BLOCK_ACTION] >= 6


def test_root_noise_has_its_weight_whatever_the_number_of_legal_moves():
    # AlphaZero's noise is drawn over the legal moves: a quarter of the prior whether 81
    # cells are empty or 5 (mctx draws it over all cells, then masks the occupied ones).
    config = search.SearchConfig("puct", dirichlet_fraction=0.25, dirichlet_alpha=0.3)
    batch, cells = 256, 81
    root = mctx.RootFnOutput(prior_logits=jnp.zeros((batch, cells)),
                             value=jnp.zeros(batch), embedding=jnp.zeros(batch))
    moved = []
    for empty in (81, 5):
        legal = jnp.arange(cells)[None, :] < empty
        legal = jnp.broadcast_to(legal, (batch, cells))
        noisy = search.root_noise(root, legal, jax.random.key(0), config)
        probs = jax.nn.softmax(jnp.where(legal, noisy.prior_logits, -jnp.inf))
        assert float(jnp.max(jnp.sum(jnp.where(legal, 0.0, probs), -1))) == 0.0
        np.testing.assert_allclose(jnp.sum(probs, -1), 1.0, rtol=1e-5)
        moved.append(float(jnp.mean(jnp.sum(jnp.abs(probs - 1.0 / empty) * legal, -1))) / 2)
    # the mean distance of (3/4 uniform + 1/4 Dirichlet) from uniform: about 0.14 for
    # either board (mctx's way: 0.13 with 81 empty cells, 0.01 with 5)
    assert 0.1 < moved[0] < 0.2 and 0.1 < moved[1] < 0.2, moved
    assert search.root_noise(root, legal, jax.random.key(0),
                             search.SearchConfig("puct", dirichlet_fraction=0.0)) is root


@pytest.mark.parametrize("backend", ["mctx", "linear"])
def test_a_search_mixes_its_root_noise_over_the_legal_moves(puzzles, backend):
    # 17 of the puzzles' 25 cells are empty: mctx's own noise would move the prior about
    # 17/25 as far as the legal-only noise does.
    states = jax.tree.map(lambda x: jnp.repeat(x[:1], 128, axis=0), puzzles)
    legal = states.legal_action_mask
    config = search.SearchConfig("puct", num_simulations=2, backend=backend)
    out = _run(SMALL, UNIFORM, None, states, jax.random.key(3), config)
    prior = jax.nn.softmax(jnp.where(legal, out.search_tree.children_prior_logits[:, 0],
                                     -jnp.inf))
    clean = legal / jnp.sum(legal, -1, keepdims=True)
    moved = float(jnp.mean(jnp.sum(jnp.abs(prior - clean), -1))) / 2
    reference = search.root_noise(  # the same draw on a uniform prior
        mctx.RootFnOutput(prior_logits=jnp.zeros(legal.shape), value=jnp.zeros(128),
                          embedding=jnp.zeros(128)), legal, jax.random.key(7), config)
    expected = float(jnp.mean(jnp.sum(jnp.abs(jax.nn.softmax(jnp.where(
        legal, reference.prior_logits, -jnp.inf)) - clean), -1))) / 2
    assert abs(moved - expected) < 0.2 * expected, (moved, expected)


def test_the_search_reads_states_in_its_games_planes_whichever_game_made_them():
    """A network built for a game with threat planes searches states made by a plain
    game: the root and every recurrent step see that game's planes."""
    threats = Gomoku(7, 4, observation="stones-threats")
    plain = Gomoku(7, 4)
    states = jax.vmap(lambda _: plain.init())(jnp.arange(2))
    seen = []

    def evaluate(params, states):
        seen.append(states.observation.shape[-1])
        return jnp.zeros(states.board.shape[:1] + (49,)), jnp.zeros(states.board.shape[:1])

    assert plain.observation_shape[-1] != threats.observation_shape[-1]
    config = search.SearchConfig(num_simulations=4, backend="linear")
    out = search.run_search(threats, evaluate, None, states, jax.random.key(0), config)
    assert out.action.shape == (2,)
    assert seen and set(seen) == {threats.observation_shape[-1]}
    # and a search reusing its tree, from an empty tree and from the kept one
    reuse = dataclasses.replace(config, algorithm="puct", reuse_tree=True)
    out = search.run_search_reusing(threats, evaluate, None, states, jax.random.key(1), reuse)
    kept = search.advance_tree(out.search_tree, out.action, reuse)
    moved = jax.vmap(plain.step)(states, out.action)
    out = search.run_search_reusing(threats, evaluate, None, moved, jax.random.key(2), reuse,
                                    tree=kept)
    assert out.action.shape == (2,) and set(seen) == {threats.observation_shape[-1]}



@pytest.mark.parametrize("batch", [1, 2, 3])
def test_a_q_network_is_refused_as_the_searchs_network(batch):
    """A Q network returns one array: searched with, it is named whatever the batch (an
    unpacking error, or a pair of rows taken for logits and value, before)."""
    module = networks.make_network("resnet-q", board_size=5, blocks=1, filters=4, hidden=8)
    variables = jax.eval_shape(lambda k: networks.init_network(
        module, k, SMALL.observation_shape), jax.random.key(0))
    states = jax.vmap(lambda _: SMALL.init())(jnp.arange(batch))
    with pytest.raises(ValueError, match=r"network_evaluate: ResNetQ returned \(%d, 25\), "
                       r"not \(policy_logits \[B, A\], value \[B\]\)" % batch):
        jax.eval_shape(lambda v: search.run_search(
            SMALL, search.network_evaluate(module), v, states, jax.random.key(0),
            search.SearchConfig(num_simulations=2)), variables)

def test_a_kept_tree_of_another_shape_is_refused_naming_it():
    """A tree kept for other games (batch, board) or another config's capacity is named,
    not met with a broadcasting error or searched with fewer simulations than asked."""
    reuse = search.SearchConfig(num_simulations=4, backend="linear", reuse_tree=True)
    games = lambda env, n: jax.vmap(lambda _: env.init())(jnp.arange(n))  # noqa: E731

    def run(env, states, config, tree):
        return jax.eval_shape(lambda tree: search.run_search_reusing(
            env, search.uniform_evaluate(env), None, states, jax.random.key(0), config,
            tree=tree), tree)

    tree = jax.eval_shape(lambda: search.empty_tree(SMALL, games(SMALL, 2), reuse))
    run(SMALL, games(SMALL, 2), reuse, tree)  # the tree it was made for
    big = Gomoku(7, 4)
    for env, n, config, want in (
            (SMALL, 3, reuse, r"\(3, 5, 25\): 3 games"),
            (big, 2, reuse, r"\(2, 5, 49\).*49 actions \(7x7 board\)"),
            (SMALL, 2, reuse.replace(reuse_capacity=4), r"8 nodes \(tree_capacity")):
        with pytest.raises(ValueError, match=r"tree has children_index of shape \(2, 5, 25\)"
                           r".*" + want):
            run(env, games(env, n), config, tree)
    with pytest.raises(ValueError, match="tree must be an mctx.Tree"):
        run(SMALL, games(SMALL, 2), reuse, {"node_visits": jnp.zeros((2, 5))})


# ---------------------------------------------------------------- qtransforms
def _q_at_7(tree, node_index):
    """A qtransform: Q 1 for the child of action 7, 0 for the others."""
    del node_index
    return jnp.where(jnp.arange(tree.num_actions) == 7, 1.0, 0.0)


def _prefer_7(config):
    del config
    return _q_at_7


def _first_three(config):
    """A broken qtransform: three Q-values, not one per action."""
    return lambda tree, node_index: tree.children_values[node_index][:3]


@pytest.fixture
def prefer_7(registries):
    search.register_qtransform("prefer-7", _prefer_7, "Q 1 at action 7, 0 elsewhere")
    return "prefer-7"


@pytest.mark.parametrize("algorithm", ["puct", "gumbel"])
def test_a_registered_qtransform_steers_the_search_in_both_backends(prefer_7, algorithm):
    """A qtransform of one's own, named in the config, is what both backends select with:
    with Q 1 at action 7 (and a flat prior, no noise) the search plays 7 and gives it the
    most weight, in every game, and the backends agree; the built-in Q term does not."""
    states = _stack(*[SMALL.init()] * 4)
    name = "puct_q" if algorithm == "puct" else "gumbel_q"
    base = search.SearchConfig(algorithm, num_simulations=32, c_puct=0.1,
                               dirichlet_fraction=0.0, gumbel_scale=0.0,
                               max_num_considered_actions=25)
    outputs = {}
    for backend in ("linear", "mctx"):
        config = base.replace(backend=backend, **{name: prefer_7})
        assert search.qtransform_of(config).func.__name__ == "_checked_qtransform"
        outputs[backend] = jax.jit(lambda s, k, c=config: search.run_search(
            SMALL, UNIFORM, None, s, k, c))(states, jax.random.key(0))
        np.testing.assert_array_equal(outputs[backend].action, 7)
        np.testing.assert_array_equal(np.argmax(outputs[backend].action_weights, -1), 7)
    np.testing.assert_allclose(outputs["linear"].action_weights,
                               outputs["mctx"].action_weights, atol=1e-6)
    plain = search.run_search(SMALL, UNIFORM, None, states, jax.random.key(0),
                              base.replace(backend="linear"))
    assert (np.asarray(plain.action) != 7).all()


def test_qtransform_names_are_checked_in_configs_and_when_traced(registries):
    for name in ("puct_q", "gumbel_q"):
        with pytest.raises(ValueError, match=rf"SearchConfig.{name} must name a registered "
                                             r"qtransform \(minmax, raw, completed; "
                                             r"search.register_qtransform.*--plugin.*'mean'"):
            search.SearchConfig(**{name: "mean"})
    with pytest.raises(ValueError, match=r"search: SearchConfig.gumbel_q must name a registered"):
        config_lib.load_file(alphazero.AlphaZeroConfig,
                             "experiments/configs/az_9x9_cpu.json", ["search.gumbel_q=mean"])
    search.register_qtransform("first-three", _first_three, "three values")
    config = search.SearchConfig("gumbel", 8, gumbel_q="first-three", backend="linear")
    with pytest.raises(ValueError, match=r"qtransform 'first-three' returned .* of shape "
                                         r"\(3,\), want \(25,\)"):
        search.run_search(SMALL, UNIFORM, None, _stack(SMALL.init()), jax.random.key(0),
                          config)


def test_register_qtransform_refuses_what_does_not_fit(prefer_7):
    for bad, match in [(("", _prefer_7, "d"), "non-empty string without spaces"),
                       (("a b", _prefer_7, "d"), "without spaces"),
                       (("x", 3, "d"), "must be callable"),
                       (("x", _prefer_7, " "), "description of 'x'"),
                       (("minmax", _prefer_7, "d"), "'minmax' is already registered"),
                       (("prefer-7", _first_three, "d"), "'prefer-7' is already registered")]:
        with pytest.raises(ValueError, match=match):
            search.register_qtransform(*bad)
        assert "x" not in search.QTRANSFORMS
    with pytest.raises(ValueError, match="replace must be a bool"):
        search.register_qtransform("x", _prefer_7, "d", replace=1)
    # the same definition again (a notebook cell run twice) replaces it quietly
    search.register_qtransform("prefer-7", _prefer_7, "again")
    assert search.QTRANSFORMS["prefer-7"] == (_prefer_7, "again")
    search.register_qtransform("prefer-7", _first_three, "replaced", replace=True)
    assert search.QTRANSFORMS["prefer-7"][0] is _first_three
    # the built-ins are the config's defaults, as they were
    assert search.qtransform_of(search.SearchConfig("puct")) is (
        mctx.qtransform_by_parent_and_siblings)
    completed = search.qtransform_of(search.SearchConfig("gumbel", value_scale=0.2))
    assert completed.func is mctx.qtransform_completed_by_mix_value
    assert completed.keywords == {"value_scale": 0.2, "maxvisit_init": 50.0}


def test_an_exported_agent_keeps_its_qtransform_by_name(prefer_7, tmp_path):
    """An exported agent stores its qtransform's name, not its code: it plays it where
    the name is registered and is refused, naming it, where it is not."""
    env = Gomoku(5, 4)
    module = networks.make_network("cnn", board_size=5)
    variables = networks.init_network(module, jax.random.key(0), env.observation_shape)
    play = search.SearchConfig("gumbel", 8, max_num_considered_actions=25, gumbel_scale=0.0,
                               gumbel_q=prefer_7)

    class Learner:  # what export_agent asks of a learner
        def export_metadata(self):
            return {"agent": "search", "game": {"size": 5, "k": 4, "rule": "freestyle",
                                                "observation": "stones-colour"},
                    "network": {"name": "cnn", "options": {}}, "search": play.to_dict()}

    path = tmp_path / "prefer.gjx"
    exported.export_agent(path, Learner(), variables)
    loaded = exported.load(path)
    assert loaded.metadata["search"]["gumbel_q"] == prefer_7
    assert loaded.agent.act(env.init(), jax.random.key(1)) == 7
    search.QTRANSFORMS.pop(prefer_7)  # another process, where nothing registered it
    with pytest.raises(gio.CheckpointError, match=r"play-time search .*gumbel_q must name a "
                                                  r"registered qtransform.*'prefer-7'"):
        exported.load_agent(path)


def _q_at_3(config):
    del config
    return lambda tree, node_index: jnp.where(jnp.arange(tree.num_actions) == 3, 1.0, 0.0)


def test_a_config_keeps_the_q_term_registered_when_it_was_made(prefer_7):
    """A name registered again with another definition reaches the configs made after;
    a config made before keeps its own, and a jitted search (config static or traced)
    compiles once for each, never serving one with the other's program."""
    states = _stack(*[SMALL.init()] * 2)
    before = search.SearchConfig("gumbel", 16, gumbel_scale=0.0, max_num_considered_actions=25,
                                 gumbel_q=prefer_7, backend="linear")
    traced = jax.jit(lambda s, k, c: search.run_search(SMALL, UNIFORM, None, s, k, c))
    static = jax.jit(lambda s, k, c: search.run_search(SMALL, UNIFORM, None, s, k, c),
                     static_argnums=2)
    for run in (traced, static):
        np.testing.assert_array_equal(run(states, jax.random.key(0), before).action, 7)
    search.register_qtransform(prefer_7, _q_at_3, "Q 1 at action 3", replace=True)
    after = before.replace()
    assert after != before and after.to_dict() == before.to_dict()
    for run in (traced, static):
        np.testing.assert_array_equal(run(states, jax.random.key(0), after).action, 3)
        np.testing.assert_array_equal(run(states, jax.random.key(0), before).action, 7)
    leaves, treedef = jax.tree.flatten(after)
    assert jax.tree.unflatten(treedef, leaves) == after


def test_a_built_in_name_given_another_definition_is_checked_as_ones_own(registries):
    search.register_qtransform("completed", _first_three, "three values", replace=True)
    with pytest.raises(ValueError, match=r"qtransform 'completed' returned .* of shape \(3,\)"):
        search.run_search(SMALL, UNIFORM, None, _stack(SMALL.init()), jax.random.key(0),
                          search.SearchConfig("gumbel", 8, backend="linear"))


@pytest.mark.parametrize("backend", ["linear", "mctx"])
def test_either_backend_refuses_a_tree_that_would_not_fit_before_allocating(backend,
                                                                            monkeypatch):
    """mctx's search checks no memory; `run_search` checks its tree (the same layout as
    the linear backend's) while tracing, so a search too large is refused with the
    figures rather than failing, or swapping, when XLA allocates it."""
    from gomoku_jax import tree_search

    states = _stack(*[SMALL.init()] * 2)
    config = search.SearchConfig("gumbel", 64, backend=backend)
    need = tree_search.search_memory_bytes(2, 64, 25, tree_search._embedding_bytes(
        search.root_output(SMALL, UNIFORM, None, states).embedding))
    monkeypatch.setattr(tree_search, "least_available_bytes",
                        lambda devices: (2 * need - 1, "free memory of the test"))
    with pytest.raises(ValueError, match=r"^search of batch 2 x 64 simulations needs a tree "
                                         r"of .*over the free memory of the test"):
        jax.eval_shape(lambda s: search.run_search(SMALL, UNIFORM, None, s,
                                                   jax.random.key(0), config), states)
    monkeypatch.setattr(tree_search, "least_available_bytes",
                        lambda devices: (2 * need, "free memory of the test"))
    assert jax.eval_shape(lambda s: search.run_search(
        SMALL, UNIFORM, None, s, jax.random.key(0), config), states).action.shape == (2,)
