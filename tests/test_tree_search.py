"""Tests for gomoku_jax.tree_search: equality with mctx, flat per-simulation cost, tree
reuse, the memory check and the ``backend`` switch of `search.run_search`."""

import functools
import re

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

from experiments import bench_search
from gomoku_jax import search as search_lib
from gomoku_jax import tree_search as ts
from gomoku_jax.game import Gomoku, sample_legal_action

TREE_FIELDS = ("node_visits", "raw_values", "node_values", "parents", "action_from_parent",
               "children_index", "children_prior_logits", "children_visits",
               "children_rewards", "children_discounts", "children_values")


# ------------------------------------------------------------------ toy problems
def toy_problem(seed: int, batch: int, num_actions: int, width: int = 4):
    """A random deterministic environment: ``(params, root, recurrent_fn, invalid)``.

    Embeddings are [B, width]; ``params`` holds one random linear map per action;
    states whose first feature is large are terminal (discount 0, value 0); some root
    actions are invalid (action 0 never)."""
    k_map, k_emb, k_logits, k_value, k_mask = jax.random.split(jax.random.PRNGKey(seed), 5)
    maps = jax.random.normal(k_map, (num_actions, width, width))

    def recurrent_fn(params, key, action, embedding):
        del key
        nxt = jnp.tanh(jnp.einsum("be,bef->bf", embedding, params[action]))  # [B, width]
        logits = jnp.sin(nxt.sum(-1, keepdims=True) * jnp.arange(num_actions))
        terminal = nxt[:, 0] > 0.5
        out = mctx.RecurrentFnOutput(
            reward=jnp.where(terminal, 1.0, 0.1 * nxt[:, 1]),
            discount=jnp.where(terminal, 0.0, -1.0),
            prior_logits=logits,
            value=jnp.where(terminal, 0.0, jnp.tanh(nxt.sum(-1))))
        return out, nxt

    root = mctx.RootFnOutput(
        prior_logits=jax.random.normal(k_logits, (batch, num_actions)),
        value=jax.random.normal(k_value, (batch,)),
        embedding=jax.random.normal(k_emb, (batch, width)))
    invalid = (jax.random.uniform(k_mask, (batch, num_actions)) < 0.3).at[:, 0].set(False)
    return maps, root, recurrent_fn, invalid


def assert_same_output(ours, theirs, atol=1e-6, rtol=1e-7):
    for name in TREE_FIELDS:
        np.testing.assert_allclose(getattr(ours.search_tree, name),
                                   getattr(theirs.search_tree, name), atol=atol, rtol=rtol,
                                   err_msg=name)
    for name in ("embeddings", "root_invalid_actions"):
        for x, y in zip(jax.tree.leaves(getattr(ours.search_tree, name)),
                        jax.tree.leaves(getattr(theirs.search_tree, name)), strict=True):
            np.testing.assert_allclose(x, y, atol=atol, rtol=rtol, err_msg=name)
    np.testing.assert_array_equal(ours.action, theirs.action)
    np.testing.assert_allclose(ours.action_weights, theirs.action_weights, atol=atol,
                               rtol=rtol)
    ours_sum, theirs_sum = ours.search_tree.summary(), theirs.search_tree.summary()
    np.testing.assert_allclose(ours_sum.value, theirs_sum.value, atol=atol, rtol=rtol)
    np.testing.assert_allclose(ours_sum.qvalues, theirs_sum.qvalues, atol=atol, rtol=rtol)


# ------------------------------------------------------------- golden equality
# One compiled program per case runs mctx's policy and ours; several random problems
# of the case's shape (and both noise settings) go through it.
# Each case compiles both searches (slow on a shared 2-core CPU): the first of each
# list runs by default, the others with the slow tests.
PUCT_CASES = [  # (batch, num_actions, num_simulations, max_depth)
    (3, 7, 30, 3),  # 3: two interior levels at most, and re-expansions at the limit
    pytest.param(4, 9, 40, None, marks=pytest.mark.slow),
    pytest.param(1, 5, 12, None, marks=pytest.mark.slow),
]
GUMBEL_CASES = [  # (batch, num_actions, num_simulations, max_depth, considered)
    (4, 9, 40, None, 4),
    pytest.param(3, 7, 30, 2, 16, marks=pytest.mark.slow),
    pytest.param(1, 5, 12, None, 1, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("batch,num_actions,sims,max_depth", PUCT_CASES)
def test_muzero_policy_equals_mctx(batch, num_actions, sims, max_depth):
    _, _, recurrent_fn, _ = toy_problem(0, batch, num_actions)

    @jax.jit
    def both(params, key, root, invalid, fraction):
        kwargs = dict(num_simulations=sims, invalid_actions=invalid, max_depth=max_depth,
                      dirichlet_fraction=fraction, pb_c_init=1.5)
        return (mctx.muzero_policy(params, key, root, recurrent_fn, **kwargs),
                ts.muzero_policy(params, key, root, recurrent_fn, **kwargs))

    terminals, deepest = 0, 0
    for seed, fraction in ((0, 0.25), (1, 0.0), (2, 0.25)):
        params, root, _, invalid = toy_problem(seed, batch, num_actions)
        theirs, ours = both(params, jax.random.PRNGKey(seed + 10), root, invalid, fraction)
        assert_same_output(ours, theirs)
        tree = ours.search_tree
        expanded = np.asarray(tree.children_index) >= 0
        terminals += int((np.asarray(tree.children_discounts)[expanded] == 0).sum())
        assert not np.asarray(tree.children_visits[:, 0])[np.asarray(invalid)].any()
        deepest = max(deepest, int(bench_search._depths(np.asarray(tree.parents)).max()))
    assert terminals > 0  # the problems are not degenerate
    assert deepest == (max_depth or deepest)  # paths as deep as allowed


@pytest.mark.parametrize("batch,num_actions,sims,max_depth,considered", GUMBEL_CASES)
def test_gumbel_muzero_policy_equals_mctx(batch, num_actions, sims, max_depth, considered):
    _, _, recurrent_fn, _ = toy_problem(0, batch, num_actions)

    @jax.jit
    def both(params, key, root, invalid, scale):
        kwargs = dict(num_simulations=sims, invalid_actions=invalid, max_depth=max_depth,
                      max_num_considered_actions=considered, gumbel_scale=scale)
        return (mctx.gumbel_muzero_policy(params, key, root, recurrent_fn, **kwargs),
                ts.gumbel_muzero_policy(params, key, root, recurrent_fn, **kwargs))

    for seed, scale in ((0, 1.0), (1, 0.0), (2, 1.0)):
        params, root, _, invalid = toy_problem(seed, batch, num_actions)
        theirs, ours = both(params, jax.random.PRNGKey(seed + 20), root, invalid, scale)
        assert_same_output(ours, theirs)
        np.testing.assert_array_equal(ours.search_tree.extra_data.root_gumbel,
                                      theirs.search_tree.extra_data.root_gumbel)


def random_trees(seed: int, batch: int = 256, num_actions: int = 9, nodes: int = 5):
    """``batch`` random unbatched trees stacked (``mctx.Tree`` of [batch, nodes, ...]) whose
    rows are full of exact ties (logits, values and visits from a few small values),
    zeros, masked root actions, terminal edges (discount 0) and some NaN values; and a
    node index and depth per tree."""
    rng = np.random.default_rng(seed)
    bn, bna = (batch, nodes), (batch, nodes, num_actions)
    visits = rng.choice([0, 0, 1, 2, 5], size=bna).astype(np.int32)
    values = rng.choice([-1.0, -0.5, 0.0, 0.25, 1.0], size=bna).astype(np.float32)
    values[rng.random(bna) < 0.01] = np.nan
    invalid = rng.random((batch, num_actions)) < 0.3
    invalid[np.arange(batch), rng.integers(0, num_actions, batch)] = False  # one valid
    tree = mctx.Tree(
        node_visits=(1 + visits.sum(-1)).astype(np.int32),
        raw_values=rng.choice([-0.5, 0.0, 0.5], size=bn).astype(np.float32),
        node_values=rng.choice([-0.5, 0.0, 0.5], size=bn).astype(np.float32),
        parents=np.full(bn, -1, np.int32), action_from_parent=np.full(bn, -1, np.int32),
        children_index=np.where(visits > 0, 1, -1).astype(np.int32),
        children_prior_logits=rng.choice([-1.0, 0.0, 0.0, 2.0], size=bna).astype(np.float32),
        children_values=np.where(visits > 0, values, 0).astype(np.float32),
        children_visits=visits,
        children_rewards=rng.choice([0.0, 0.0, 1.0], size=bna).astype(np.float32),
        children_discounts=rng.choice([-1.0, -1.0, 0.0], size=bna).astype(np.float32),
        embeddings=np.zeros(bn, np.float32),
        root_invalid_actions=invalid,
        extra_data=mctx.GumbelMuZeroExtraData(
            root_gumbel=rng.gumbel(size=(batch, num_actions)).astype(np.float32)))
    tree = jax.tree.map(jnp.asarray, tree)
    node = jnp.asarray(rng.integers(0, nodes, batch), jnp.int32)
    depth = jnp.asarray(rng.integers(0, 3, batch), jnp.int32)
    return tree, node, depth


def test_selection_functions_equal_mctx_node_by_node():
    """Ours (`ops.argmax` for ``jnp.argmax``) pick mctx's action on every one of 832
    random nodes full of exact ties, masked actions and NaNs, 64 of them of 81 actions
    (where XLA's CPU maximum skips NaNs); the root selections at any visit count the
    tables allow."""
    qt = functools.partial(mctx.qtransform_completed_by_mix_value, value_scale=0.2)
    pairs = [
        (functools.partial(ts.muzero_action_selection, pb_c_init=1.5),
         functools.partial(mctx.muzero_action_selection, pb_c_init=1.5), True),
        (functools.partial(ts.gumbel_muzero_interior_action_selection, qtransform=qt),
         functools.partial(mctx.gumbel_muzero_interior_action_selection, qtransform=qt), True),
        (functools.partial(ts.gumbel_muzero_root_action_selection, num_simulations=40,
                           max_num_considered_actions=4, qtransform=qt),
         functools.partial(mctx.gumbel_muzero_root_action_selection, num_simulations=40,
                           max_num_considered_actions=4, qtransform=qt), False),
    ]
    ties = 0
    for seed, shape in enumerate([(256, 9)] * 3 + [(64, 81)]):  # the last: a 9x9 batch
        tree, node, depth = random_trees(seed, *shape)
        keys = jax.random.split(jax.random.PRNGKey(seed), shape[0])
        scores = jax.vmap(qt)(tree, node)
        ties += int(np.sum(np.asarray(scores) == np.max(np.asarray(scores), -1, keepdims=True))
                    - len(node))
        for ours, theirs, with_depth in pairs:
            args = (keys, tree, node) + ((depth,) if with_depth else ())
            got, want = (np.asarray(jax.jit(jax.vmap(fn))(*args)) for fn in (ours, theirs))
            np.testing.assert_array_equal(got, want)
    assert ties > 100  # exact ties among the best scores are common: the first must win


def test_considered_visits_table_equals_mctx():
    """Our Sequential Halving schedule is mctx's (its private ``seq_halving``, read here
    only) for every count of considered actions up to 20 and budgets from 1 to 900,
    including budgets smaller than the actions considered and not powers of two."""
    seq_halving = pytest.importorskip("mctx._src.seq_halving")  # mctx's, private

    for sims in (1, 2, 3, 5, 16, 17, 50, 64, 100, 333, 800, 900):
        for considered in (0, 1, 2, 3, 4, 7, 16, 20):
            want = np.asarray(seq_halving.get_table_of_considered_visits(considered, sims))
            got = ts.considered_visits_table(considered, sims)
            assert got.dtype == np.int32 and got.shape == (considered + 1, sims)
            np.testing.assert_array_equal(got, want, err_msg=f"{considered=} {sims=}")
    assert not ts.considered_visits_table(4, 10).flags.writeable


def test_halving_score_equals_mctx():
    """The root score, on rows with -inf and huge negative logits, the only considered
    child, and children of another visit count (-inf)."""
    seq_halving = pytest.importorskip("mctx._src.seq_halving")  # mctx's, private

    rng = np.random.default_rng(0)
    visits = rng.integers(0, 3, (64, 9)).astype(np.int32)
    considered = rng.integers(0, 3, (64, 1)).astype(np.int32)
    gumbel = rng.gumbel(size=(64, 9)).astype(np.float32)
    logits = rng.normal(size=(64, 9)).astype(np.float32) * 3
    logits[rng.random((64, 9)) < 0.2] = -1e30
    q = rng.uniform(-1, 1, (64, 9)).astype(np.float32)
    got = ts._halving_score(considered, gumbel, logits, q, visits)
    want = seq_halving.score_considered(considered, gumbel, logits, q, visits)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert np.isneginf(np.asarray(got)).any() and np.isfinite(np.asarray(got)).any()


@pytest.fixture(scope="module")
def env7():
    return Gomoku(7, 4)


def _openings(env, batch, moves, seed=0):
    keys = jax.random.split(jax.random.PRNGKey(seed), batch)
    states = jax.vmap(env.init)(keys)
    for i in range(moves):
        keys = jax.random.split(jax.random.PRNGKey(seed + 100 + i), batch)
        actions = jax.vmap(sample_legal_action)(keys, states.legal_action_mask)
        states = jax.vmap(env.step)(states, actions)
    return states


@pytest.mark.parametrize("algorithm", [pytest.param("puct", marks=pytest.mark.slow), "gumbel"])
def test_run_search_linear_backend_equals_mctx(env7, algorithm):
    """The real game (`search.make_recurrent_fn`, `uniform_evaluate`; PUCT with a
    tactical prior): backend "linear" gives mctx's output."""
    states = _openings(env7, 3, 5)
    evaluate = search_lib.uniform_evaluate(env7)
    tactical = search_lib.TacticalPrior(enabled=algorithm == "puct")  # compiles slowly
    configs = [search_lib.SearchConfig(algorithm=algorithm, num_simulations=24,
                                       max_num_considered_actions=8, backend=backend)
               for backend in ("linear", "mctx")]
    run = jax.jit(lambda s, k: [search_lib.run_search(env7, evaluate, None, s, k, c, tactical)
                                for c in configs])
    ours, theirs = run(states, jax.random.PRNGKey(3))
    assert_same_output(ours, theirs)


def _varied(params, states):
    """An ``evaluate`` whose values differ from position to position (a uniform one's
    zero values make every Q transform alike)."""
    del params
    board = states.board.reshape(states.board.shape[0], -1).astype(jnp.float32)
    value = jnp.sin(board @ jnp.arange(1.0, board.shape[1] + 1.0))
    return jnp.zeros(board.shape, jnp.float32), value


def test_raw_puct_q_is_the_mean_value_and_both_backends_play_it(env7):
    """``puct_q="raw"``: Q as it is (reward plus discounted value), 0 unvisited, on
    random nodes with ties, terminal edges and NaNs; the config's search runs it in both
    backends alike, and it searches otherwise than mctx's default ``"minmax"``."""
    tree, node, _ = random_trees(0, 64, 9)
    rows = [np.asarray(getattr(tree, f))[np.arange(64), np.asarray(node)] for f in (
        "children_visits", "children_rewards", "children_discounts", "children_values")]
    visits, rewards, discounts, values = rows
    np.testing.assert_array_equal(jax.vmap(search_lib.qtransform_raw)(tree, node),
                                  np.where(visits > 0, rewards + discounts * values, 0.0))
    # the config's selection takes it (and picks otherwise than "minmax" on some nodes)
    keys = jax.random.split(jax.random.PRNGKey(0), 64)
    depth = jnp.ones((64,), jnp.int32)
    picks = {q: np.asarray(jax.vmap(search_lib.selection_functions(
        search_lib.SearchConfig(puct_q=q))[1])(keys, tree, node, depth))
             for q in search_lib.PUCT_Q}
    want = jax.vmap(functools.partial(mctx.muzero_action_selection, pb_c_init=1.25,
                                      qtransform=search_lib.qtransform_raw))(
        keys, tree, node, depth)
    np.testing.assert_array_equal(picks["raw"], want)
    assert (picks["raw"] != picks["minmax"]).any()
    # and both backends run it alike on the real game
    states = _openings(env7, 3, 5)
    configs = [search_lib.SearchConfig(num_simulations=24, backend=backend, puct_q="raw",
                                       dirichlet_fraction=0.0)
               for backend in ("linear", "mctx")]
    run = jax.jit(lambda s, k: [search_lib.run_search(env7, _varied, None, s, k, c)
                                for c in configs])
    assert_same_output(*run(states, jax.random.PRNGKey(3)))
    with pytest.raises(ValueError, match=r"puct_q must name a registered qtransform "
                                         r"\(minmax, raw, completed;.*got 'mean'"):
        search_lib.SearchConfig(puct_q="mean")


def _forfeits(tree) -> int:
    """Visits below the root to children that are illegal moves: the occupied cells of a
    node's position (a finished position's children are not counted)."""
    boards = np.asarray(tree.embeddings.board)  # [B, nodes, N, N]
    occupied = boards.reshape(boards.shape[:2] + (-1,)) != 0
    live = (np.asarray(tree.node_visits) > 0) & ~np.asarray(tree.embeddings.terminated)
    visits = np.asarray(tree.children_visits)
    return int((visits * occupied)[:, 1:][live[:, 1:]].sum())


def test_raw_puct_q_never_searches_an_illegal_move():
    """With ``puct_q="raw"`` an unvisited child's Q is 0, so below the root, where mctx
    masks nothing, an illegal child (its prior masked) would outscore legal children whose
    Q + U is below 0: with a network that calls every position won for the player to move,
    every node's visited children look lost, and the search spent 47 of 200 simulations
    on forfeits (both backends) until the masked prior kept them out, as it does now with
    either Q and either backend."""
    env = Gomoku(5, 4)
    state = env.play_moves([(0, 0), (4, 4), (0, 4), (4, 0), (1, 2), (3, 2), (2, 0), (2, 4)])
    states = jax.tree.map(lambda x: x[None], state)

    def confident(params, states):
        del params
        batch = states.current_player.shape
        return jnp.zeros(batch + (env.num_actions,)), jnp.full(batch, 0.3)

    configs = [search_lib.SearchConfig(num_simulations=200, c_puct=1.5, puct_q=q,
                                       dirichlet_fraction=0.0, backend=backend)
               for q in search_lib.PUCT_Q for backend in ("linear", "mctx")]
    run = jax.jit(lambda k: [search_lib.run_search(env, confident, None, states, k, c)
                             for c in configs])
    outputs = run(jax.random.PRNGKey(0))
    assert [_forfeits(out.search_tree) for out in outputs] == [0] * len(configs)
    assert (np.asarray(outputs[0].search_tree.node_visits) > 0).sum() > 100  # a deep tree
    # the masked children's Q, and only theirs
    tree, node, _ = random_trees(1, 64, 9)
    masked = np.asarray(tree.children_prior_logits).copy()
    masked[:, :, :3] = search_lib._MIN_LOGIT
    q = jax.vmap(search_lib.qtransform_raw)(tree.replace(
        children_prior_logits=jnp.asarray(masked)), node)
    np.testing.assert_array_equal(q[:, :3], -np.inf)
    np.testing.assert_array_equal(q[:, 3:], jax.vmap(search_lib.qtransform_raw)(tree, node)[:, 3:])


def _backed_up_means(tree):
    """For each used node: its value times its visits, and what its visits brought: its
    own evaluations (raw value, each visit that went to no child) and each child's mean
    over the visits through it (reward + discount * value)."""
    visits = np.asarray(tree.node_visits, np.float64)
    through = np.asarray(tree.children_visits, np.float64).sum(-1)
    q = np.asarray(tree.children_rewards, np.float64) + np.asarray(
        tree.children_discounts, np.float64) * np.asarray(tree.children_values, np.float64)
    got = np.asarray(tree.node_values, np.float64) * visits
    want = (np.asarray(tree.raw_values, np.float64) * (visits - through)
            + (np.asarray(tree.children_visits) * q).sum(-1))
    used = visits > 0
    return got[used], want[used], (visits - through)[used], through[used]


def test_local_exploration_stops_halfway_and_keeps_each_nodes_mean(env7):
    """Seed 003's local exploration: a local simulation stops at half the mean depth of the
    nodes so far (rounded up) and evaluates the node there, expanded or not, as one more
    visit of it. With every simulation local the tree stays one level deep; with half of
    them it is shallower than without, nodes with children were also evaluated on their
    own, at depths up to half the deepest node's, and each node's value stays the mean of
    all its visits (mctx's re-expansion at max_depth would reset it)."""
    states = _openings(env7, 4, 4)
    trees = {}
    for p in (0.0, 0.5, 1.0):
        config = search_lib.SearchConfig(num_simulations=96, backend="linear",
                                         local_exploration=p, dirichlet_fraction=0.0)
        trees[p] = jax.jit(lambda s, k, c=config: search_lib.run_search(
            env7, _varied, None, s, k, c).search_tree)(states, jax.random.PRNGKey(1))
    depth = {p: bench_search._depths(np.asarray(tree.parents)) for p, tree in trees.items()}
    assert depth[1.0].max() == 1 and depth[0.0].max() > 2
    mean = {p: d[d > 0].mean() for p, d in depth.items()}
    assert mean[1.0] < mean[0.5] < mean[0.0]
    for p, tree in trees.items():
        got, want, own, through = _backed_up_means(tree)
        np.testing.assert_allclose(got, want, atol=1e-4, err_msg=f"local_exploration={p}")
        assert np.asarray(tree.node_visits)[:, 0].min() == 97  # every simulation counted
        if p == 0.5:  # some nodes with children were also evaluated on their own
            assert ((own > 1) & (through > 0)).sum() > 5
            used = depth[p][np.asarray(tree.node_visits) > 0]
            again = used[own > 1]  # the depths of the nodes evaluated again
            assert 2 <= again.max() <= np.ceil(used.max() / 2)
        if p == 0.0:  # without it a node is evaluated once (no max_depth to re-expand)
            assert (own[through > 0] == 1).all()
    # off by default, refused where mctx's search or Gumbel's would run
    assert search_lib.SearchConfig().local_exploration == 0.0
    for bad, message in (
            (dict(local_exploration=0.5), "needs backend='linear' and algorithm='puct'"),
            (dict(local_exploration=0.5, backend="linear", algorithm="gumbel"), "needs "),
            (dict(local_exploration=1.5, backend="linear"), r"must be in \[0.0, 1.0\]"),
            (dict(local_exploration="half", backend="linear"), "must be a number")):
        with pytest.raises(ValueError, match=message):
            search_lib.SearchConfig(**bad)


def test_a_local_evaluation_keeps_the_nodes_prior_and_takes_no_slot():
    """A local re-evaluation of an expanded node keeps its prior and raw value (a tactical
    prior's coins, drawn again, would change the prior mid-search), its value becoming
    the mean with the new one; other games take mctx's rule. And with tree reuse, where a
    slot wasted on a re-evaluation would cost a later new node, every simulation of the
    next search counts unless the tree's slots are all used."""
    tree, _, _ = random_trees(2, 8, 9)
    tree = tree.replace(embeddings=jnp.zeros((8, 5, 2)))

    def recurrent_fn(params, key, action, embedding):  # another prior every call
        logits = jax.random.normal(key, (8, 9))
        return mctx.RecurrentFnOutput(reward=jnp.zeros(8), discount=-jnp.ones(8),
                                      prior_logits=logits, value=jnp.full(8, 0.5)), embedding

    node = jnp.full((8,), 1, jnp.int32)
    local = jnp.arange(8) < 4
    new, value = ts._expand(None, jax.random.PRNGKey(0), tree, recurrent_fn,
                            jnp.zeros((8,), jnp.int32), jnp.zeros((8,), jnp.int32), node,
                            jnp.ones((8,), bool), local)
    old_prior, new_prior = (np.asarray(t.children_prior_logits[:, 1]) for t in (tree, new))
    np.testing.assert_array_equal(new_prior[:4], old_prior[:4])
    assert (new_prior[4:] != old_prior[4:]).any()
    np.testing.assert_array_equal(new.raw_values[:4, 1], tree.raw_values[:4, 1])
    count = np.asarray(tree.node_visits[:, 1], np.float32)
    np.testing.assert_allclose(new.node_values[:4, 1],
                               (np.asarray(tree.node_values[:4, 1]) * count[:4] + 0.5)
                               / (count[:4] + 1), rtol=1e-6)
    np.testing.assert_array_equal(new.node_values[4:, 1], 0.5)
    np.testing.assert_array_equal(value, 0.5)

    env = Gomoku(7, 4)
    states = _openings(env, 4, 4)
    config = search_lib.SearchConfig(num_simulations=64, backend="linear", reuse_tree=True,
                                     local_exploration=0.5, dirichlet_fraction=0.0)
    first = jax.jit(lambda s, k: search_lib.run_search_reusing(
        env, _varied, None, s, k, config))(states, jax.random.PRNGKey(0))
    played = first.action
    kept = search_lib.advance_tree(first.search_tree, played, config)
    after = jax.vmap(env.step)(states, played)
    second = jax.jit(lambda s, k, t: search_lib.run_search_reusing(
        env, _varied, None, s, k, config, tree=t))(after, jax.random.PRNGKey(1), kept)
    counted = np.asarray(second.search_tree.node_visits[:, 0] - kept.node_visits[:, 0])
    free = 65 - np.asarray(ts.num_nodes(second.search_tree))
    assert ((counted == 64) | (free == 0)).all(), (counted, free)
    assert (counted < 64).any()  # the kept nodes took slots: some simulations did not count


def test_search_config_backend():
    config = search_lib.SearchConfig(backend="linear")
    assert search_lib.SearchConfig.from_dict(config.to_dict()) == config
    assert search_lib.SearchConfig().backend == "mctx"
    leaves, treedef = jax.tree_util.tree_flatten(config)
    assert "linear" not in leaves  # static, like `algorithm`
    assert jax.tree_util.tree_unflatten(treedef, leaves).backend == "linear"
    with pytest.raises(ValueError, match="backend.*'jax'"):
        search_lib.SearchConfig(backend="jax")


# --------------------------------------------------------- per-simulation cost
_LOOP_PRIMS = ("while",)
_WRITE_PRIMS = {"scatter": 2, "scatter-add": 2, "dynamic_update_slice": 1}


def _nbytes(aval) -> int:
    if jax.dtypes.issubdtype(aval.dtype, jax.dtypes.prng_key):
        itemsize = 8  # a threefry key: two uint32
    else:
        itemsize = np.dtype(aval.dtype).itemsize
    return int(np.prod(aval.shape, dtype=np.int64)) * itemsize


def _sub_jaxprs(eqn):
    for value in eqn.params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, jax.extend.core.ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, jax.extend.core.Jaxpr):
                yield item


def _touched_bytes(jaxpr) -> int:
    """Bytes written by the equations of ``jaxpr`` (nested jaxprs included, each once):
    a scatter or dynamic update counts its update, any other equation its outputs."""
    total = 0
    for eqn in jaxpr.eqns:
        subs = list(_sub_jaxprs(eqn))
        if subs:
            total += sum(_touched_bytes(sub) for sub in subs)
        elif eqn.primitive.name in _WRITE_PRIMS:
            total += _nbytes(eqn.invars[_WRITE_PRIMS[eqn.primitive.name]].aval)
        else:
            total += sum(_nbytes(v.aval) for v in eqn.outvars)
    return total


def _simulation_loop(jaxpr, capacity):
    """The outermost loop carrying a tree-sized array: the loop over simulations (a
    ``scan``: ``fori_loop`` with static bounds; the node axis follows the batch axis, or
    two batch axes under ``vmap``)."""
    bodies = {"while": "body_jaxpr", "scan": "jaxpr"}
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in bodies and any(
                capacity in getattr(v.aval, "shape", ())[1:3] for v in eqn.invars):
            return eqn.params[bodies[eqn.primitive.name]].jaxpr
        for sub in _sub_jaxprs(eqn):
            found = _simulation_loop(sub, capacity)
            if found is not None:
                return found
    return None


def _bytes_per_simulation(policy, sims):
    params, root, recurrent_fn, invalid = toy_problem(0, 4, 9)
    jaxpr = jax.make_jaxpr(functools.partial(
        policy, recurrent_fn=recurrent_fn, num_simulations=sims, invalid_actions=invalid))(
            params, jax.random.PRNGKey(0), root).jaxpr
    body = _simulation_loop(jaxpr, sims + 1)
    assert body is not None
    return _touched_bytes(body)


@pytest.mark.parametrize("name", ["muzero_policy", "gumbel_muzero_policy"])
def test_simulation_cost_does_not_grow_with_tree(name):
    """The bytes one simulation writes (its loop body, the backward and selection loops
    inside counted once) are the same at 16 and 800 simulations for ours; mctx's grow
    with the tree (its vmapped backward selects over every node)."""
    ours = [_bytes_per_simulation(getattr(ts, name), s) for s in (16, 800)]
    theirs = [_bytes_per_simulation(getattr(mctx, name), s) for s in (16, 800)]
    assert ours[0] == ours[1]
    assert theirs[1] > 10 * theirs[0]
    assert theirs[1] > 10 * ours[1]


def _count_in_loops(jaxpr, matches, loops=("while",), inside=False) -> int:
    """Equations whose primitive's name ``matches`` inside the ``loops`` of ``jaxpr``
    (nested jaxprs followed; an equation counts once it is under one of them)."""
    count = 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if inside and matches(name):
            count += 1
        for sub in _sub_jaxprs(eqn):
            count += _count_in_loops(sub, matches, loops, inside or name in loops)
    return count


def _random_ops_in_loops(jaxpr) -> int:
    """Random-number equations (key splits, bits) inside ``while`` loops of ``jaxpr``."""
    return _count_in_loops(jaxpr, lambda n: "threefry" in n or n.startswith("random_"))


def test_gumbel_descends_without_splitting_keys():
    """Gumbel's selection functions ignore their key (mctx's ``del rng_key``), so its
    descent splits none per level, where PUCT's, which draws tie-breaking noise, must;
    `test_gumbel_muzero_policy_equals_mctx` checks that the results are mctx's."""
    params, root, recurrent_fn, invalid = toy_problem(0, 4, 9)
    loops = {}
    for name in ("muzero_policy", "gumbel_muzero_policy"):
        jaxpr = jax.make_jaxpr(functools.partial(
            getattr(ts, name), recurrent_fn=recurrent_fn, num_simulations=8,
            invalid_actions=invalid))(params, jax.random.PRNGKey(0), root).jaxpr
        loops[name] = _random_ops_in_loops(_simulation_loop(jaxpr, 9))
    assert loops["gumbel_muzero_policy"] == 0 and loops["muzero_policy"] > 0
    assert all(getattr(fn, ts.IGNORES_KEY) for fn in ts.gumbel_selection(8))
    assert not any(getattr(fn, ts.IGNORES_KEY, False) for fn in ts.puct_selection())


def _argmax_in_loops(jaxpr) -> int:
    """``argmax`` equations inside loops (``while``, ``scan``) of ``jaxpr``."""
    return _count_in_loops(jaxpr, lambda n: n == "argmax", loops=("while", "scan"))


@pytest.mark.parametrize("name", ["muzero_policy", "gumbel_muzero_policy"])
def test_search_loops_take_no_variadic_argmax(name):
    """The selections take their argmax as a maximum and a smallest index (`ops.argmax`):
    ``jnp.argmax``'s (value, index) reduction runs element by element on a CPU, several
    times slower. mctx's own search has one per selection step."""
    params, root, recurrent_fn, invalid = toy_problem(0, 4, 9)
    counts = {}
    for module in (ts, mctx):
        jaxpr = jax.make_jaxpr(functools.partial(
            getattr(module, name), recurrent_fn=recurrent_fn, num_simulations=8,
            invalid_actions=invalid))(params, jax.random.PRNGKey(0), root).jaxpr
        counts[module.__name__] = _argmax_in_loops(jaxpr)
    # mctx: one in the root selection (the simulation loop), one per interior level
    assert counts["gomoku_jax.tree_search"] == 0 and counts["mctx"] >= 2


def test_compiled_loops_copy_no_tree(reuse):
    """XLA updates the tree in place: no instruction inside a compiled while body copies
    an array with the tree's node dimension (2 * SIMS + 1 = 61, a size nothing else has;
    the program is the one the `reuse` fixture compiled)."""
    capacity = 2 * SIMS + 1
    text = reuse["run"].lower(jax.random.PRNGKey(0), reuse["root"], reuse["invalid"],
                              capacity=capacity).compile().as_text()
    bodies = set(re.findall(r"body=%?([\w.\-]+)", text))
    assert len(bodies) >= 3  # simulations, selection, backward
    computation, copies, tree_sized = None, [], 0
    for line in text.splitlines():
        header = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
        if header:
            computation = header.group(1)
        elif computation in bodies and re.search(rf"\[[\d,]*\b{capacity}\b", line):
            tree_sized += 1
            if re.search(rf"\[[\d,]*\b{capacity}\b[\d,]*\]\S* copy\(", line):
                copies.append(line.strip())
    assert tree_sized > 0  # the loops do carry the tree
    assert not copies, copies



def test_a_search_agent_searches_a_batch_at_once():
    """A search agent's policy over a batch (what the arena's batched matches and the
    self-play sparring partner run) is one search of the whole batch, with its flat
    cost per simulation, not ``vmap`` of a one-game search (trees of one game under a
    batch axis, whose loops step in lockstep over the vmapped games)."""
    env = Gomoku(7, 4)
    states = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), 4))
    keys = jax.random.split(jax.random.PRNGKey(1), 4)

    def per_simulation(sims):
        config = search_lib.SearchConfig(algorithm="gumbel", num_simulations=sims,
                                         backend="linear")
        evaluate = search_lib.uniform_evaluate(env)
        policy = search_lib.search_agent("s", env, evaluate, None, config).batch_policy()
        jaxpr = jax.make_jaxpr(policy)(None, keys, states).jaxpr
        body = _simulation_loop(jaxpr, sims + 1)
        trees = {v.aval.shape[:2] for v in body.invars if v.aval.ndim >= 2}
        assert (4, sims + 1) in trees and (4, 1) not in trees  # [B, nodes], not [B, 1, ...]
        # the batch's search, its key the first game's
        search_key, action_key = jax.random.split(keys[0])
        output = search_lib.run_search(env, evaluate, None, states, search_key, config)
        np.testing.assert_array_equal(policy(None, keys, states),
                                      search_lib.select_action(output, action_key, 0.0))
        return _touched_bytes(body)

    assert per_simulation(16) == per_simulation(64)


# ------------------------------------------------------------------- sharding
@pytest.mark.parametrize("name", ["muzero_policy", "gumbel_muzero_policy"])
def test_games_split_over_devices_search_without_moving_trees(name):
    """With the games split over the (fake) devices, the compiled search's only
    collectives are its loops' conditions (one bool: is any game still descending /
    climbing?); no tree array is gathered across devices. Indexing the tree with
    ``jnp.arange(B)`` instead of per-game vmapped reads and writes cost some forty
    all-gathers and all-reduces per simulation here."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    assert len(jax.devices()) == 4
    mesh = Mesh(np.asarray(jax.devices()), ("data",))
    games, replicated = (NamedSharding(mesh, PartitionSpec(axis))
                         for axis in ("data", None))
    params, root, recurrent_fn, invalid = toy_problem(0, 8, 9)
    policy = jax.jit(lambda p, k, r, inv: getattr(ts, name)(
        p, k, r, recurrent_fn, num_simulations=16, invalid_actions=inv),
        in_shardings=(replicated, replicated, games, games))
    text = policy.lower(params, jax.random.PRNGKey(0), root, invalid).compile().as_text()
    collectives = [line.strip() for line in text.splitlines() if re.search(
        r"\b(all-gather|all-reduce|all-to-all|collective-permute|reduce-scatter)"
        r"(-start)?\(", line)]
    assert collectives  # the games really are split: the loop conditions agree
    for line in collectives:
        assert re.search(r"= pred\[\] all-reduce\(", line) and "while" in line, line


# ------------------------------------------------------------------- tree reuse
def _reference_subtree(tree, game, child):
    """Old node indices of the subtree under ``child`` in creation order (plain Python)."""
    children = np.asarray(tree.children_index[game])
    stack, found = [child], []
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(int(c) for c in children[node] if c >= 0)
    return sorted(found)


SIMS = 30


@pytest.fixture(scope="module")
def reuse():
    """A toy problem of 4 games, its first search (capacity SIMS + 1 and 2 SIMS + 1) and a
    jitted search from a root and an optional tree."""
    params, root, recurrent_fn, invalid = toy_problem(4, 4, 6)

    @functools.partial(jax.jit, static_argnames="capacity")
    def run(key, root, invalid, tree=None, capacity=None):
        return ts.muzero_policy(params, key, root, recurrent_fn, SIMS, invalid_actions=invalid,
                                tree=tree, capacity=capacity).search_tree

    first = run(jax.random.PRNGKey(0), root, invalid)
    big = run(jax.random.PRNGKey(0), root, invalid, capacity=2 * SIMS + 1)
    return dict(root=root, invalid=invalid, run=run, first=first, big=big)


def _most_visited_open_child(tree):
    """Per game the most visited root action whose child is not terminal."""
    visits = np.asarray(tree.children_visits[:, 0])
    open_ = np.asarray(tree.children_discounts[:, 0]) != 0
    return np.where(open_, visits, -1).argmax(axis=1).astype(np.int32)


def _child_root(tree):
    """The search root of node 0 of ``tree`` (its prior, raw value and embedding)."""
    return mctx.RootFnOutput(prior_logits=tree.children_prior_logits[:, 0],
                             value=tree.raw_values[:, 0], embedding=tree.embeddings[:, 0])


def test_reuse_subtree_keeps_statistics(reuse):
    tree = reuse["first"]
    children = np.asarray(tree.children_index[:, 0])
    action = _most_visited_open_child(tree)
    unexpanded = np.argmax((children < 0) & ~np.asarray(reuse["invalid"]), axis=1)
    assert children[2, unexpanded[2]] < 0
    action[2] = unexpanded[2]
    reset = np.array([False, True, False, False])
    new = ts.reuse_subtree(tree, jnp.asarray(action), jnp.asarray(reset))
    for game in (1, 2):  # restarted, unexpanded: empty
        assert not np.asarray(new.node_visits[game]).any()
        assert (np.asarray(new.children_index[game]) == -1).all()
        assert (np.asarray(new.parents[game]) == -1).all()
    for game in (0, 3):
        old = _reference_subtree(tree, game, int(children[game, action[game]]))
        n = len(old)
        assert n > 2 and int(ts.num_nodes(new)[game]) == n
        for name in ("node_visits", "raw_values", "node_values", "children_prior_logits",
                     "children_visits", "children_rewards", "children_discounts",
                     "children_values"):
            np.testing.assert_array_equal(np.asarray(getattr(new, name)[game])[:n],
                                          np.asarray(getattr(tree, name)[game])[old], name)
        np.testing.assert_array_equal(np.asarray(new.embeddings[game])[:n],
                                      np.asarray(tree.embeddings[game])[old])
        assert not np.asarray(new.node_visits[game])[n:].any()
        # Topology renumbered: children and parents map through old -> new.
        renumber = {o: i for i, o in enumerate(old)}
        old_children = np.asarray(tree.children_index[game])[old]
        expected = np.vectorize(lambda c: renumber.get(int(c), -1))(old_children)
        np.testing.assert_array_equal(np.asarray(new.children_index[game])[:n], expected)
        parents = np.asarray(new.parents[game])[:n]
        assert parents[0] == -1 and (parents[1:] < np.arange(1, n)).all()
        np.testing.assert_array_equal(
            parents[1:], [renumber[int(p)] for p in np.asarray(tree.parents[game])[old[1:]]])


def test_search_after_reuse_counts_carried_visits(reuse):
    first, run = reuse["first"], reuse["run"]
    action = jnp.asarray(_most_visited_open_child(first))
    kept = ts.reuse_subtree(first, action)
    carried = np.asarray(kept.node_visits[:, 0])
    used = np.asarray(ts.num_nodes(kept))
    assert (carried > 1).all() and (used == carried).all()  # no max_depth: a node per visit
    # Same capacity: the kept nodes use part of the budget of SIMS + 1 nodes.
    no_mask = jnp.zeros_like(reuse["invalid"])
    second = run(jax.random.PRNGKey(1), _child_root(kept), no_mask, tree=kept)
    np.testing.assert_array_equal(second.node_visits[:, 0], carried + (SIMS + 1 - used))
    assert (np.asarray(second.node_visits[:, 0]) == SIMS + 1).all()
    # The children's statistics grew from the carried ones.
    grown = np.asarray(second.children_visits[:, 0]) - np.asarray(kept.children_visits[:, 0])
    assert (grown >= 0).all()
    # A larger capacity is the same search with more room; with max_nodes all SIMS new
    # simulations run after reuse.
    big = reuse["big"]
    np.testing.assert_array_equal(
        big.node_visits, np.pad(np.asarray(first.node_visits), ((0, 0), (0, SIMS))))
    kept = ts.reuse_subtree(big, action, max_nodes=SIMS + 1)
    third = run(jax.random.PRNGKey(1), _child_root(kept), no_mask, tree=kept)
    np.testing.assert_array_equal(third.node_visits[:, 0], carried + SIMS)
    # Truncation in creation order keeps a valid tree: each kept child points back.
    small = ts.reuse_subtree(first, action, max_nodes=3)
    np.testing.assert_array_equal(ts.num_nodes(small), np.minimum(used, 3))
    index = np.asarray(small.children_index)
    for game, node, act in zip(*np.nonzero(index >= 0)):
        child = index[game, node, act]
        assert child < 3 and small.parents[game, child] == node
        assert small.action_from_parent[game, child] == act
    assert int(np.asarray(small.children_visits[:, 0]).sum(axis=1).max()) < int(
        np.asarray(kept.children_visits[:, 0]).sum(axis=1).max())  # dropped edges reset


@pytest.mark.parametrize("bad, message", [
    ("value", r"recurrent_fn returned value of shape \(4, 1\), want \(4,\)"),
    ("embedding", r"recurrent_fn returned an embedding of shapes \(4, 3\), want the "
                  r"root's, \(4, 4\)"),
    ("structure", r"recurrent_fn returned an embedding of shapes \{'e': \(4, 4\)\}")])
def test_a_recurrent_fn_of_the_wrong_shapes_is_named(bad, message):
    params, root, recurrent_fn, invalid = toy_problem(0, 4, 6)

    def broken(params, key, action, embedding):
        out, nxt = recurrent_fn(params, key, action, embedding)
        if bad == "value":
            return out.replace(value=out.value[:, None]), nxt
        return out, (nxt[:, :3] if bad == "embedding" else {"e": nxt})

    for policy in (ts.muzero_policy, ts.gumbel_muzero_policy):
        with pytest.raises(ValueError, match=message):
            policy(params, jax.random.PRNGKey(0), root, broken, 4, invalid_actions=invalid)


def test_re_expansions_from_a_kept_tree_take_no_slot():
    """From a kept tree, with max_depth, a simulation that re-expands a node at max_depth
    writes no new node, so it leaves no slot unused for the later ones: all simulations
    count while the tree has room (they used to be dropped from a free slot on)."""
    prior = jnp.array([[2.0, 0.0, 0.0]])
    root = mctx.RootFnOutput(prior_logits=prior, value=jnp.zeros(1),
                             embedding=jnp.zeros((1, 1)))

    def recurrent_fn(params, key, action, embedding):  # action 0 preferred everywhere
        n = embedding.shape[0]
        return mctx.RecurrentFnOutput(reward=jnp.zeros(n), discount=-jnp.ones(n),
                                      prior_logits=jnp.tile(prior, (n, 1)),
                                      value=jnp.zeros(n)), embedding

    first = ts.muzero_policy(None, jax.random.key(0), root, recurrent_fn, 8,
                             dirichlet_fraction=0.0).search_tree
    kept = ts.reuse_subtree(first, jnp.array([0]))
    used, capacity = int(ts.num_nodes(kept)[0]), kept.node_visits.shape[1]
    assert used < capacity - 1  # room for the two children the root lacks
    tree = ts.muzero_policy(None, jax.random.key(1), root, recurrent_fn, 8,
                            dirichlet_fraction=0.0, tree=kept, max_depth=1).search_tree
    assert int(tree.node_visits[0, 0]) == int(kept.node_visits[0, 0]) + 8  # all counted
    assert (np.asarray(tree.children_index[0, 0]) >= 0).all()  # every root action tried
    visited = np.flatnonzero(np.asarray(tree.node_visits[0]) > 0)
    np.testing.assert_array_equal(visited, np.arange(used + 2))  # in creation order


def test_carried_visits_to_actions_now_invalid_get_no_weight(reuse):
    """A kept root's children were chosen below the previous root, where nothing is
    masked: visits carried to an action that the next search's ``invalid_actions``
    masks stay in the tree, but as with mctx's policy they get no weight and are never
    played (they had most of the weight and were played before)."""
    first = reuse["first"]
    kept = ts.reuse_subtree(first, jnp.asarray(_most_visited_open_child(first)))
    carried = np.asarray(kept.children_visits[:, 0])
    assert (carried.sum(axis=1) > 0).all()
    invalid = np.zeros_like(carried, bool)
    invalid[np.arange(len(carried)), carried.argmax(axis=1)] = True  # the most visited
    params, _, recurrent_fn, _ = toy_problem(4, 4, 6)
    out = ts.muzero_policy(params, jax.random.PRNGKey(1), _child_root(kept), recurrent_fn,
                           SIMS, invalid_actions=jnp.asarray(invalid), tree=kept,
                           temperature=0.0)
    assert (np.asarray(out.search_tree.children_visits[:, 0])[invalid] > 0).all()  # kept
    weights = np.asarray(out.action_weights)
    assert not weights[invalid].any()
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-6)
    assert not invalid[np.arange(len(invalid)), np.asarray(out.action)].any()
    # A root whose visits all went to actions now invalid: uniform over the valid ones.
    visits = np.zeros((1, 6), np.int32)
    visits[0, 2] = 5
    tree = jax.tree.map(lambda x: x[:1], first)
    tree = tree.replace(children_visits=jnp.asarray(np.broadcast_to(
        visits[:, None], tree.children_visits.shape)))
    only = np.array([[False, True, True, False, True, True]])
    np.testing.assert_allclose(ts._valid_visit_probs(tree, jnp.asarray(only))[0],
                               [0.5, 0, 0, 0.5, 0, 0])
    # No valid action (a finished game): mctx's weights, the visits as they are.
    np.testing.assert_allclose(ts._valid_visit_probs(tree, jnp.ones_like(only))[0],
                               [0, 0, 1, 0, 0, 0])


def test_reuse_of_terminal_child_is_empty(reuse):
    tree = reuse["first"]
    children = np.asarray(tree.children_index[:, 0])
    terminal = (children >= 0) & (np.asarray(tree.children_discounts[:, 0]) == 0)
    assert terminal.any()
    action = np.where(terminal.any(axis=1), terminal.argmax(axis=1),
                      _most_visited_open_child(tree)).astype(np.int32)
    new = ts.reuse_subtree(tree, jnp.asarray(action))
    visits = np.asarray(new.node_visits)
    assert not visits[terminal.any(axis=1)].any()
    assert visits[~terminal.any(axis=1)].any(axis=1).all()
    with pytest.raises(ValueError, match="action must have shape"):
        ts.reuse_subtree(tree, jnp.zeros(2, jnp.int32))
    with pytest.raises(ValueError, match=r"action must be integers \(the moves played\), "
                                         r"got dtype float32"):
        ts.reuse_subtree(tree, jnp.asarray(action, jnp.float32) + 0.5)
    with pytest.raises(ValueError, match="max_nodes"):
        ts.reuse_subtree(tree, jnp.asarray(action), max_nodes=0)
    params, root, recurrent_fn, _ = toy_problem(4, 4, 6)
    with pytest.raises(ValueError, match="tree must be None"):
        ts.gumbel_muzero_policy(params, jax.random.PRNGKey(0), root, recurrent_fn, 4,
                                tree=tree)


def test_reuse_of_something_not_a_batch_of_trees_is_refused_naming_it():
    tree, _, _ = random_trees(0, 2, 5)
    ts.reuse_subtree(tree, jnp.zeros(2, jnp.int32))  # a batch of trees
    with pytest.raises(ValueError, match=r"tree must be a batch of trees \(node_visits "
                                         r"\[B, capacity\]\), got node_visits of shape \(5,\)"):
        ts.reuse_subtree(jax.tree.map(lambda x: x[0], tree), jnp.zeros(1, jnp.int32))
    with pytest.raises(ValueError, match="tree must be an mctx.Tree .*, got dict"):
        ts.reuse_subtree({"node_visits": tree.node_visits}, jnp.zeros(2, jnp.int32))


# ---------------------------------------------------------------------- memory
def test_search_memory_bytes_by_hand():
    # 2 games x (3 + 1) nodes x (20 + 24 * 5 + 10) + 2 games x 8 x 5
    assert ts.search_memory_bytes(2, 3, 5, 10) == 2 * 4 * 150 + 80
    # The formula matches the arrays of a real tree (float32 / int32 fields).
    params, root, recurrent_fn, invalid = toy_problem(0, 2, 5)
    tree = jax.eval_shape(lambda r: ts.gumbel_muzero_policy(
        params, jax.random.PRNGKey(0), r, recurrent_fn, 3, invalid_actions=invalid), root
    ).search_tree
    nbytes = lambda x: x.size * x.dtype.itemsize  # noqa: E731
    actual = sum(nbytes(x) for x in jax.tree.leaves(tree))
    mask_bytes = nbytes(tree.root_invalid_actions)  # bool here, counted as 4 bytes
    assert ts.search_memory_bytes(2, 3, 5, 16) == actual - mask_bytes + 2 * 5 * 4
    with pytest.raises(ValueError, match="num_actions"):
        ts.search_memory_bytes(2, 3, 0, 10)
    # Other dtypes by their size: bfloat16 values and logits (the recurrent function's
    # outputs cast to them, so the tree holds them).
    def half(params, key, action, embedding):
        out, nxt = recurrent_fn(params, key, action, embedding)
        return jax.tree.map(lambda x: x.astype(jnp.bfloat16), out), nxt

    half_root = root.replace(prior_logits=root.prior_logits.astype(jnp.bfloat16),
                             value=root.value.astype(jnp.bfloat16))
    tree = jax.eval_shape(lambda r: ts.muzero_policy(
        params, jax.random.PRNGKey(0), r, half, 3, invalid_actions=invalid), half_root
    ).search_tree
    assert tree.node_values.dtype == jnp.bfloat16  # the logits: float32 after the noise
    actual = sum(nbytes(x) for x in jax.tree.leaves(tree))
    assert ts.search_memory_bytes(2, 3, 5, 16, value_bytes=2, logit_bytes=4) == (
        actual - nbytes(tree.root_invalid_actions) + 2 * 5 * 4  # the mask as 4 bytes
        + 2 * 5 * 4)  # and the Gumbel noise, counted though PUCT has none
    assert ts.search_memory_bytes(2, 3, 5, 16, value_bytes=8, logit_bytes=2) == (
        ts.search_memory_bytes(2, 3, 5, 16) + 2 * 4 * (2 * 4 + 5 * (3 * 4 - 2)))


def test_memory_check_refuses_before_allocating():
    need = ts.search_memory_bytes(64, 800, 81, 300)
    assert ts.check_search_memory(64, 800, 81, 300, limit_bytes=2 * need) == need
    with pytest.raises(ValueError, match=r"MiB.*over the limit_bytes of 1\.0 MiB"):
        ts.check_search_memory(64, 800, 81, 300, limit_bytes=2**20)
    params, root, recurrent_fn, _ = toy_problem(0, 2, 5)
    with pytest.raises(ValueError, match="batch 2 x 50 simulations"):
        jax.eval_shape(lambda r: ts.muzero_policy(params, jax.random.PRNGKey(0), r,
                                                  recurrent_fn, 50, memory_limit=10_000), root)
    # The messages name the caller's argument, the capacity when it sets the tree's size,
    # and small sizes in KiB or bytes.
    with pytest.raises(ValueError, match=r"^memory_limit must be a positive integer \(bytes\), "
                                         r"got 1000000000\.0$"):
        ts.muzero_policy(params, jax.random.PRNGKey(0), root, recurrent_fn, 10,
                         memory_limit=1e9)
    with pytest.raises(ValueError, match=(
            r"^search of batch 2 x 10 simulations in trees of 400 nodes \(capacity\) needs a "
            r"tree of [\d.]+ KiB \(\d+ bytes per game per node, 2 copies = [\d.]+ KiB\), "
            r"over the memory_limit of 9\.8 KiB; use a smaller batch or a smaller capacity$")):
        ts.muzero_policy(params, jax.random.PRNGKey(0), root, recurrent_fn, 10,
                         memory_limit=10_000, capacity=400)
    with pytest.raises(ValueError, match=r"over the memory_limit of 1000 bytes; use a smaller "
                                         r"batch or fewer simulations$"):
        ts.muzero_policy(params, jax.random.PRNGKey(0), root, recurrent_fn, 10,
                         memory_limit=1000)
    assert ts.muzero_policy(params, jax.random.PRNGKey(0), root, recurrent_fn, 10,
                            memory_limit=10_000).action.shape == (2,)  # 2 x 11 nodes fit
    # A huge search is refused while tracing (eval_shape allocates nothing).
    huge = jax.ShapeDtypeStruct((1_000_000, 361), jnp.float32)
    big_root = mctx.RootFnOutput(prior_logits=huge,
                                 value=jax.ShapeDtypeStruct((1_000_000,), jnp.float32),
                                 embedding=jax.ShapeDtypeStruct((1_000_000, 4), jnp.float32))
    with pytest.raises(ValueError, match="batch 1000000 x 100000 simulations"):
        jax.eval_shape(lambda r: ts.gumbel_muzero_policy(
            params, jax.random.PRNGKey(0), r, recurrent_fn, 100_000), big_root)


class _FakeGPU:
    """A device as the memory check reads one: its platform, process and free memory."""

    platform, device_kind = "gpu", "Fake GPU"

    def __init__(self, free: int, process_index: int = 0):
        self.free, self.process_index = free, process_index

    def memory_stats(self):
        return {"bytes_limit": self.free + 100, "bytes_in_use": 100}


class _FakeCPU:
    """A CPU device of process ``process_index``, as the memory check reads one."""

    platform, device_kind = "cpu", "Fake CPU"

    def __init__(self, process_index: int = 0):
        self.process_index = process_index

    def memory_stats(self):
        return None


def test_memory_check_of_a_batch_split_over_devices():
    need = ts.search_memory_bytes(64, 800, 81, 300)
    share = -(-need // 4)
    gpus = [_FakeGPU(2 * share + 1000), _FakeGPU(2 * share), _FakeGPU(10 * need),
            _FakeGPU(0, process_index=1)]  # another process's device: a part, not read
    # one device of them holds the whole batch; four hold a part each
    with pytest.raises(ValueError, match="over the free memory of Fake GPU"):
        ts.check_search_memory(64, 800, 81, 300, device=gpus[1])
    assert ts.check_search_memory(64, 800, 81, 300, device=gpus) == need
    tight = [_FakeGPU(2 * share - 1)] + gpus[1:]
    with pytest.raises(ValueError, match=re.escape(
            f"search of batch 64 x 800 simulations split over 4 devices needs a tree of "
            f"{ts._size(need)}, {ts._size(share)} a device (")
            + r".*" + re.escape(f"over the free memory of Fake GPU (the device with the "
                                f"least) of {ts._size(2 * share - 1)}; use a smaller batch")):
        ts.check_search_memory(64, 800, 81, 300, device=tight)
    # a limit given is per device
    assert ts.check_search_memory(64, 800, 81, 300, limit_bytes=2 * share, device=gpus) == need
    with pytest.raises(ValueError, match="over the limit_bytes of"):
        ts.check_search_memory(64, 800, 81, 300, limit_bytes=2 * share - 1, device=gpus)
    # CPU devices share the host's RAM: the whole tree counts with one process, ...
    cpus = jax.devices()
    assert cpus[0].platform == "cpu" and len(cpus) > 1
    with pytest.raises(ValueError, match=r"^search of batch 64 x 800 simulations needs"):
        ts.check_search_memory(64, 800, 81, 300, limit_bytes=2 * need - 1, device=cpus)
    # ... and with several processes (hosts), what one process's devices hold
    hosts = [_FakeCPU(process_index=i // 2) for i in range(4)]
    half = -(-need // 2)
    assert ts.check_search_memory(64, 800, 81, 300, limit_bytes=2 * half, device=hosts) == need
    with pytest.raises(ValueError, match=re.escape(
            f"split over 2 processes needs a tree of {ts._size(need)}, {ts._size(half)} "
            "a process (")):
        ts.check_search_memory(64, 800, 81, 300, limit_bytes=2 * half - 1, device=hosts)
    with pytest.raises(ValueError, match="an empty list of devices"):
        ts.check_search_memory(64, 800, 81, 300, device=[])
    # a mesh's devices array is a sequence of devices, not one device
    with pytest.raises(ValueError, match=re.escape(f"{ts._size(share)} a device (")):
        ts.check_search_memory(64, 800, 81, 300, device=np.array(tight).reshape(2, 2))
    for bad in ("gpu", 3, 2.5, True):  # no device at all
        with pytest.raises(ValueError, match=r"^devices must be a device or a sequence of "
                                             r"devices .*, got "):
            ts.check_search_memory(64, 800, 81, 300, device=bad)


def test_reuse_subtree_keeps_each_game_on_its_device(reuse):
    """With the games split over the (fake) devices, keeping the played subtrees moves
    no tree array between devices: the compiled renumbering has no collective at all
    (indexing the trees with ``jnp.arange(B)`` gathered them across devices)."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.asarray(jax.devices()), ("data",))
    games = NamedSharding(mesh, PartitionSpec("data"))
    tree = reuse["first"]
    actions = jnp.asarray(_most_visited_open_child(tree))
    keep = jax.jit(ts.reuse_subtree, in_shardings=(games, games))
    text = keep.lower(tree, actions).compile().as_text()
    assert re.search(r"sharding=\{devices=\[4", text)  # the games really are split
    collectives = re.findall(
        r"\b(all-gather|all-reduce|all-to-all|collective-permute|reduce-scatter)(-start)?\(",
        text)
    assert not collectives, collectives
    # and the result is the one of the unsplit renumbering
    for a, b in zip(jax.tree.leaves(keep(tree, actions)),
                    jax.tree.leaves(ts.reuse_subtree(tree, actions))):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------ argument checks
@pytest.mark.parametrize("bad", [0, -1, True, 2.5, 2.0, np.float32(3)])
def test_a_max_depth_that_is_not_a_positive_integer_is_refused(bad):
    params, root, recurrent_fn, invalid = toy_problem(0, 2, 5)
    root_fn, interior_fn = ts.puct_selection()
    message = re.escape(f"max_depth must be an integer >= 1 or None, got {bad!r}")
    for policy in (
        lambda r: ts.search(params, jax.random.PRNGKey(0), root=r, recurrent_fn=recurrent_fn,
                            root_action_selection_fn=root_fn,
                            interior_action_selection_fn=interior_fn, num_simulations=4,
                            max_depth=bad),
        lambda r: ts.muzero_policy(params, jax.random.PRNGKey(0), r, recurrent_fn, 4,
                                   invalid_actions=invalid, max_depth=bad),
        lambda r: ts.gumbel_muzero_policy(params, jax.random.PRNGKey(0), r, recurrent_fn, 4,
                                          invalid_actions=invalid, max_depth=bad),
    ):
        with pytest.raises(ValueError, match=message):
            jax.eval_shape(policy, root)  # refused while tracing


@pytest.mark.parametrize("bad", [0, -2, True, 3.0, None])
def test_a_max_num_considered_actions_that_is_not_a_positive_integer_is_refused(bad):
    params, root, recurrent_fn, invalid = toy_problem(0, 2, 5)
    message = re.escape(f"max_num_considered_actions must be an integer >= 1, got {bad!r}")
    with pytest.raises(ValueError, match=message):
        ts.gumbel_selection(4, max_num_considered_actions=bad)
    with pytest.raises(ValueError, match=message):
        jax.eval_shape(lambda r: ts.gumbel_muzero_policy(
            params, jax.random.PRNGKey(0), r, recurrent_fn, 4, invalid_actions=invalid,
            max_num_considered_actions=bad), root)


def test_numpy_integer_depth_and_considered_actions_are_taken_as_ints():
    params, root, recurrent_fn, invalid = toy_problem(0, 2, 5)
    shapes = [jax.eval_shape(lambda r: ts.gumbel_muzero_policy(
        params, jax.random.PRNGKey(0), r, recurrent_fn, 4, invalid_actions=invalid,
        max_depth=depth, max_num_considered_actions=considered), root).action.shape
        for depth, considered in ((None, 4), (np.int64(2), np.int32(4)))]
    assert shapes == [(2,), (2,)]


def test_a_root_of_the_wrong_shape_is_refused_naming_it():
    params, root, recurrent_fn, _ = toy_problem(0, 2, 5)
    one_game = root.replace(prior_logits=root.prior_logits[0])  # [A], not [B, A]
    for policy in (ts.muzero_policy, ts.gumbel_muzero_policy):
        with pytest.raises(ValueError, match=re.escape(
                "root.prior_logits must be [B, num_actions], got shape (5,)")):
            policy(params, jax.random.PRNGKey(0), one_game, recurrent_fn, 4)
        with pytest.raises(ValueError, match=re.escape("root.value must be [2], got shape (3,)")):
            policy(params, jax.random.PRNGKey(0), root.replace(value=jnp.zeros(3)),
                   recurrent_fn, 4)


def test_arguments_of_the_wrong_shape_are_refused_naming_them():
    params, root, recurrent_fn, invalid = toy_problem(0, 2, 5)
    for policy in (ts.muzero_policy, ts.gumbel_muzero_policy):
        with pytest.raises(ValueError, match=re.escape(
                "invalid_actions must be [2, 5] (as root.prior_logits), got shape (2, 3)")):
            policy(params, jax.random.PRNGKey(0), root, recurrent_fn, 4,
                   invalid_actions=invalid[:, :3])
        with pytest.raises(ValueError, match=re.escape(
                "root.embedding['x'] must have the batch 2 as its first axis, got shape (3, 4)")):
            policy(params, jax.random.PRNGKey(0),
                   root.replace(embedding={"x": jnp.zeros((3, 4))}), recurrent_fn, 4)
    # a new tree smaller than the simulations would drop some: refused
    with pytest.raises(ValueError, match=re.escape(
            "capacity 3 is below num_simulations + 1 = 9: each simulation adds a node")):
        ts.muzero_policy(params, jax.random.PRNGKey(0), root, recurrent_fn, 8,
                         invalid_actions=invalid, capacity=3)


# mctx's own search warns when it scatters float32 values into a bfloat16 tree
@pytest.mark.filterwarnings("ignore:scatter inputs have incompatible types:FutureWarning")
@pytest.mark.parametrize("root_dtype, step_dtype", [(jnp.float32, jnp.bfloat16),
                                                    (jnp.bfloat16, jnp.float32)])
def test_a_recurrent_fn_of_another_dtype_than_the_root_gives_mctx_tree(root_dtype, step_dtype):
    """The tree takes the root value's dtype; the value backed up is the leaf's as the
    tree stores it (mctx), whatever dtype the recurrent function returns."""
    params, root, recurrent_fn, invalid = toy_problem(3, 3, 6)

    def cast(params, key, action, embedding):
        out, nxt = recurrent_fn(params, key, action, embedding)
        return jax.tree.map(lambda x: x.astype(step_dtype), out), nxt

    root = root.replace(value=root.value.astype(root_dtype))
    for ours, theirs in ((ts.muzero_policy, mctx.muzero_policy),
                         (ts.gumbel_muzero_policy, mctx.gumbel_muzero_policy)):
        run = jax.jit(lambda policy: policy(params, jax.random.PRNGKey(1), root, cast, 12,
                                            invalid_actions=invalid), static_argnums=0)
        got, want = run(ours), run(theirs)
        assert got.search_tree.node_values.dtype == root_dtype
        # Not bit for bit: the two are different programs, and XLA's code generation may
        # round the same formula differently in each (compiled unoptimised with its older
        # emitters, one backed-up value differed by 4e-7 of itself). A relative 1e-6 is
        # still 4,000 times finer than bfloat16's resolution (2 ** -8), so a value rounded
        # to the wrong dtype on its way up shows.
        assert_same_output(got, want, atol=0, rtol=1e-6)
