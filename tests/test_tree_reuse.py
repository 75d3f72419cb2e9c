"""Tree reuse between moves: search glue, AlphaZero self-play, the play-time agent."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algorithms import alphazero as az
from algorithms import common
from gomoku_jax import search as search_lib
from gomoku_jax.game import Gomoku

SIMS = 6  # simulations per self-play search
KEEP = 4  # search.reuse_capacity of the self-play config: trees of SIMS + KEEP nodes
MOVES = 10  # self-play moves checked: every 3x3 game ends (and restarts) at least once


def _reuse_config(**changes) -> az.AlphaZeroConfig:
    base = az.AlphaZeroConfig(
        game=az.GameSettings(size=3, k=3),
        network=az.NetworkSettings("resnet", {"blocks": 1, "filters": 4}),
        search=search_lib.SearchConfig(num_simulations=SIMS, backend="linear",
                                       reuse_tree=True, reuse_capacity=KEEP),
        selfplay=az.SelfPlaySettings(batch=4, steps=4, temperature_moves=2),
        train=az.TrainSettings(iterations=2, batch_size=8, epochs=1.0, min_buffer=8,
                               buffer_capacity=64),
        eval=az.EvalSettings(games=2, final_games=2, simulations=4),
    )
    return dataclasses.replace(base, **changes)


# ------------------------------------------------------------------- validation
def test_reuse_config_validation():
    with pytest.raises(ValueError, match="reuse_tree=True needs backend='linear'.*'mctx'"):
        search_lib.SearchConfig(reuse_tree=True)
    with pytest.raises(ValueError, match="algorithm='gumbel'"):
        search_lib.SearchConfig(reuse_tree=True, backend="linear", algorithm="gumbel")
    with pytest.raises(ValueError, match="reuse_tree must be a bool"):
        search_lib.SearchConfig(reuse_tree="yes", backend="linear")
    with pytest.raises(ValueError, match="reuse_capacity must be an integer >= 1"):
        search_lib.SearchConfig(reuse_tree=True, backend="linear", reuse_capacity=0)
    config = search_lib.SearchConfig(num_simulations=8, backend="linear", reuse_tree=True)
    assert search_lib.tree_capacity(config) == 9
    assert search_lib.tree_capacity(config.replace(reuse_capacity=5)) == 13
    assert search_lib.SearchConfig.from_dict(config.to_dict()) == config
    # the two fields are static: they shape the compiled search
    assert jax.tree.leaves(config) == jax.tree.leaves(config.replace(reuse_capacity=3))
    assert jax.tree.structure(config) != jax.tree.structure(config.replace(reuse_capacity=3))
    env = Gomoku(3, 3)
    states = jax.vmap(lambda _: env.init())(jnp.arange(2))
    with pytest.raises(ValueError, match="reuse_tree=True"):
        search_lib.run_search_reusing(env, search_lib.uniform_evaluate(env), None, states,
                                      jax.random.key(0), config.replace(reuse_tree=False))
    with pytest.raises(ValueError, match="reuse_tree=True"):
        search_lib.ReusingSearchAgent("a", env, search_lib.uniform_evaluate(env), None,
                                      config.replace(reuse_tree=False))
    # AlphaZero: a playout cap runs searches of two sizes, one kept tree cannot serve both
    with pytest.raises(ValueError, match="reuse_tree cannot be combined with selfplay.playout"):
        _reuse_config(selfplay=az.SelfPlaySettings(playout_cap=0.5, fast_simulations=2))
    cfg = _reuse_config()
    assert cfg.play_search().reuse_tree  # the exported / eval agent reuses too ...
    assert not cfg.play_search(algorithm="gumbel").reuse_tree  # ... but never with Gumbel
    assert isinstance(az.make_learner(cfg, devices=jax.devices()[:1]).agent(None, 4),
                      search_lib.ReusingSearchAgent)


# -------------------------------------------------------------------- self-play
@pytest.fixture(scope="module")
def learner():
    common.clear_programs()  # so that it compiles (and traces) its own program
    return az.make_learner(_reuse_config(), devices=jax.devices()[:1])


@pytest.fixture(scope="module")
def selfplay_moves(learner):
    """MOVES self-play moves of 4 tic-tac-toe games, one `_selfplay_move` at a time:
    per move the tree it started from, its search output and the next games (and the
    jitted move)."""
    state = learner.init()
    move = jax.jit(learner._selfplay_move)
    games = state.games
    tree = search_lib.empty_tree(learner.env, games, learner.config.search)
    steps = []
    for t in range(MOVES):
        # host copies in, so every call has the same input shardings (one compile)
        games, tree = jax.device_get((games, tree))
        new_games, new_tree, record, out = move(state.variables, games, tree,
                                                jax.random.fold_in(jax.random.key(3), t))
        steps.append(jax.device_get(dict(games=games, tree=tree, out=out, record=record,
                                         next_tree=new_tree)))
        games, tree = new_games, new_tree
    return state, steps, move


def test_selfplay_carries_the_played_childs_statistics(selfplay_moves):
    _, steps, _ = selfplay_moves
    rows = np.arange(4)
    carried = 0
    for before, after in zip(steps, steps[1:]):
        old, kept, new = before["out"].search_tree, after["tree"], after["out"].search_tree
        action = np.asarray(after["games"].last_action)
        done = np.asarray(before["record"].done)
        child = old.children_index[rows, 0, action]
        alive = (child >= 0) & ~done & (old.children_discounts[rows, 0, action] != 0)
        for b in np.flatnonzero(alive):
            c = child[b]
            # the kept root is the played child, statistics and state as they were
            assert kept.node_visits[b, 0] == old.node_visits[b, c] > 0
            assert kept.node_values[b, 0] == old.node_values[b, c]
            # edges to kept children carry their statistics; edges to children cut by
            # reuse_capacity go back to unexpanded (the root's own visits keep them)
            edge = kept.children_index[b, 0] >= 0
            assert (edge <= (old.children_index[b, c] >= 0)).all()
            for name in ("children_visits", "children_values", "children_prior_logits"):
                np.testing.assert_array_equal(getattr(kept, name)[b, 0][edge],
                                              getattr(old, name)[b, c][edge])
            assert (kept.children_visits[b, 0][~edge] == 0).all()
            np.testing.assert_array_equal(kept.embeddings.board[b, 0], after["games"].board[b])
            # the next search adds SIMS simulations on top of the carried visits
            assert new.node_visits[b, 0] == old.node_visits[b, c] + SIMS
            assert (new.children_visits[b, 0] >= kept.children_visits[b, 0]).all()
            carried += int(kept.children_visits[b, 0].sum())
            # at most KEEP nodes are kept (reuse_capacity), so SIMS new ones always fit
            assert 1 <= int((kept.node_visits[b] > 0).sum()) <= KEEP
        # the policy target is the root's visit distribution, carried visits included
        visits = new.children_visits[:, 0].astype(np.float64)
        np.testing.assert_allclose(after["record"].policy, visits / visits.sum(-1, keepdims=True),
                                   atol=1e-6)
    assert carried > 0  # statistics did carry over somewhere


def test_a_finished_game_starts_from_an_empty_tree(selfplay_moves):
    _, steps, _ = selfplay_moves
    ended = 0
    for before, after in zip(steps, steps[1:]):
        done = np.asarray(before["record"].done)
        ended += int(done.sum())
        for b in np.flatnonzero(done):
            assert not after["tree"].node_visits[b].any()  # the restarted game: empty
            assert (after["tree"].children_index[b] == -1).all()
            assert after["games"].move_count[b] == 0
            assert after["out"].search_tree.node_visits[b, 0] == SIMS + 1  # a fresh search
    assert ended >= 4  # every game ended at least once


def test_a_stale_tree_is_replaced_by_a_fresh_root(learner, selfplay_moves):
    """Positions that are not the kept roots (here: new games) searched from a kept tree
    get exactly the search from empty trees (which the agent tests below tie to the
    stateless `run_search`)."""
    state, steps, move = selfplay_moves
    stale = steps[3]["tree"]
    assert (np.asarray(stale.node_visits[:, 0]) > 0).all()
    env, cfg = learner.env, learner.config.search
    games = jax.vmap(lambda _: env.init())(jnp.arange(4))
    games = jax.vmap(env.step)(games, jnp.array([0, 4, 8, 2]))
    assert not np.asarray(search_lib.tree_matches(stale, games)).any()
    key = jax.random.key(7)
    games, empty = jax.device_get((games, search_lib.empty_tree(env, games, cfg)))
    from_stale = jax.device_get(move(state.variables, games, stale, key))
    from_empty = jax.device_get(move(state.variables, games, empty, key))
    for x, y in zip(jax.tree.leaves(from_stale), jax.tree.leaves(from_empty)):
        np.testing.assert_array_equal(x, y)
    assert (from_stale[3].search_tree.node_visits[:, 0] == SIMS + 1).all()


@pytest.mark.parametrize("reuse", [True, False])
def test_learner_checks_search_memory_per_device_of_its_mesh(reuse, monkeypatch):
    """Self-play's searches check the trees' memory against the devices the games are
    split over (each holds its part), with and without tree reuse."""
    from gomoku_jax import tree_search

    seen = []
    check = tree_search.check_tree_memory

    def spy(*args, **kwargs):
        seen.append(kwargs.get("device", args[4] if len(args) > 4 else None))
        return check(*args, **kwargs)

    monkeypatch.setattr(tree_search, "check_tree_memory", spy)
    devices = jax.devices()[:2]
    config = _reuse_config() if reuse else _reuse_config(search=search_lib.SearchConfig(
        num_simulations=SIMS, backend="linear"))
    learner = az.make_learner(config, devices=devices)
    state = jax.eval_shape(learner.init)
    jax.eval_shape(lambda st: learner._selfplay(st.variables, st.games, st.key), state)
    assert seen and all(list(d) == devices for d in seen), seen


def test_smoke_iteration_with_reuse_is_traced_once(learner):
    state = learner.init()
    for _ in range(2):
        state, metrics = learner.iteration(state)
    metrics = jax.device_get(metrics)
    assert learner.trace_count == 1
    assert int(state.iteration) == 2 and int(state.buffer.size) > 0
    assert all(np.isfinite(v).all() for v in metrics.values())
    n = int(state.buffer.size)
    np.testing.assert_allclose(np.asarray(state.buffer.data.policy[:n]).sum(-1), 1.0, atol=1e-5)


# ------------------------------------------------------------------------- play
PLAY_SIMS = 12


@pytest.fixture(scope="module")
def play_env():
    return Gomoku(5, 4)


def _central(size: int, params, states):
    """A network stand-in that prefers central cells, so the search goes deep."""
    del params
    rows, cols = np.divmod(np.arange(size * size), size)
    distance = np.abs(rows - (size - 1) / 2) + np.abs(cols - (size - 1) / 2)
    batch = states.current_player.shape[0]
    logits = jnp.broadcast_to(jnp.asarray(-2.0 * distance, jnp.float32), (batch, size * size))
    return logits, jnp.zeros((batch,), jnp.float32)


@pytest.fixture(scope="module")
def agent(play_env):
    config = search_lib.SearchConfig(num_simulations=PLAY_SIMS, backend="linear",
                                     reuse_tree=True, dirichlet_fraction=0.0)
    evaluate = functools.partial(_central, play_env.size)
    agent = search_lib.search_agent("reuse", play_env, evaluate, None, config)
    assert isinstance(agent, search_lib.ReusingSearchAgent)
    return agent


def _node(tree, *actions) -> int:
    """The node reached from the root of game 0 by ``actions`` (-1: not in the tree)."""
    node = 0
    for a in actions:
        if node < 0 or tree.children_discounts[0, node, a] == 0:
            return -1  # not expanded, or a finished game (never kept)
        node = int(tree.children_index[0, node, a])
    return node


def _subtree_size(tree, node: int) -> int:
    """Nodes of game 0 at or under ``node`` (parents have smaller indices)."""
    inside = np.zeros(tree.node_visits.shape[1], bool)
    inside[node] = True
    for i in range(node + 1, inside.size):
        p = tree.parents[0, i]
        inside[i] = p >= 0 and inside[p] and tree.node_visits[0, i] > 0
    return int(inside.sum())


def test_agent_searches_from_the_subtree_after_the_reply(agent, play_env):
    env = play_env
    agent.reset()
    s0 = env.init()
    a1 = agent.act(s0, jax.random.key(0))
    first = jax.device_get(agent.last_tree)
    assert first.node_visits[0, 0] == PLAY_SIMS + 1  # an empty start
    c1 = first.children_index[0, 0, a1]
    assert c1 > 0
    visits = np.where(first.children_index[0, c1] >= 0, first.children_visits[0, c1], -1)
    a2 = int(np.argmax(visits))  # the opponent replies with an expanded move
    c2 = _node(first, a1, a2)
    assert c2 > 0 and first.node_visits[0, c2] >= 1
    n_kept = _subtree_size(first, c2)
    assert n_kept > 1
    s2 = env.step(env.step(s0, jnp.int32(a1)), jnp.int32(a2))
    agent.act(s2, jax.random.key(1))
    second = jax.device_get(agent.last_tree)
    # carried: the grandchild's visits, plus the capacity left (kept nodes count)
    assert second.node_visits[0, 0] == first.node_visits[0, c2] + PLAY_SIMS + 1 - n_kept
    assert (second.children_visits[0, 0] >= first.children_visits[0, c2]).all()
    np.testing.assert_array_equal(second.embeddings.board[0, 0], s2.board)


def test_the_killer_wrapper_leaves_unforced_moves_to_the_reusing_agent(agent, play_env):
    from gomoku_jax import agents

    killer = agents.with_killer(agent, play_env)
    agent.reset()
    move = killer.act(play_env.init(), jax.random.key(0))
    assert agent.tree is not None and agent.last_tree is not None  # its own act, reusing
    assert move == int(jnp.argmax(agent.last_tree.children_visits[0, 0]))
    # a win in one is the killer's: the agent is not asked
    agent.reset()
    win = play_env.play_moves([(0, 0), (4, 4), (0, 1), (4, 3), (0, 2), (3, 0)])
    assert killer.act(win, jax.random.key(0)) == 3 and agent.tree is None


def test_agent_starts_fresh_off_the_path(agent, play_env):
    env = play_env
    agent.reset()
    s0 = env.init()
    a1 = agent.act(s0, jax.random.key(0))
    other = (a1 + 1) % env.num_actions
    s = env.step(env.step(env.step(s0, jnp.int32(a1)), jnp.int32(other)),
                 jnp.int32((a1 + 7) % env.num_actions))  # two stones more: not a reply
    key = jax.random.key(5)
    action = agent.act(s, key)
    stale = jax.device_get(agent.last_tree)
    assert stale.node_visits[0, 0] == PLAY_SIMS + 1
    agent.reset()
    assert agent.act(s, key) == action
    fresh = jax.device_get(agent.last_tree)
    for x, y in zip(jax.tree.leaves(stale), jax.tree.leaves(fresh)):
        np.testing.assert_array_equal(x, y)
    # the same search as the stateless policy the arena vmaps
    assert int(agent._jit_policy(None, key, s)) == action


def _last_plane_value(size: int, params, states):
    """`_central`'s prior with a value read from the input's last plane (the side to
    move's colour in one encoding, the empty cells in another)."""
    logits, _ = _central(size, params, states)
    batch = states.current_player.shape[0]
    plane = states.observation[..., -1].reshape(batch, -1).astype(jnp.float32)
    return logits, jnp.mean(plane, axis=-1) - 0.5


def test_agent_reads_states_in_its_own_planes(play_env):
    """A state made by a game of other input planes is searched as the agent's own game
    encodes it: the same tree, move after move, as for its own game's state."""
    config = search_lib.SearchConfig(num_simulations=PLAY_SIMS, backend="linear",
                                     reuse_tree=True, dirichlet_fraction=0.0)
    evaluate = functools.partial(_last_plane_value, play_env.size)
    agent = search_lib.search_agent("reuse-planes", play_env, evaluate, None, config)
    other = Gomoku(play_env.size, play_env.k, observation="stones-empty")
    assert other.observation_spec != play_env.observation_spec
    trees, replies = [], []
    for env in (play_env, other):
        agent.reset()
        state, found = env.init(), []
        for ply in range(2):
            action = agent.act(state, jax.random.key(ply))
            tree = jax.device_get(agent.last_tree)
            found.append((action, tree))
            state = env.step(state, jnp.int32(action))
            if len(replies) < 2:  # the reply most searched under the move (then reused)
                child = tree.children_index[0, 0, action]
                visits = np.where(state.legal_action_mask, tree.children_visits[0, child], -1)
                replies.append(int(np.argmax(visits)))
                if ply == 0:  # what the second search should start from
                    kept = tree.children_visits[0, tree.children_index[0, child, replies[0]]]
            state = env.step(state, jnp.int32(replies[ply]))
        trees.append(found)
    for (a, tree), (b, tree_other) in zip(*trees):
        assert a == b
        for field in ("node_visits", "node_values", "children_visits"):
            np.testing.assert_array_equal(getattr(tree, field), getattr(tree_other, field))
    # the second search started from the subtree after the reply (its visits carried)
    assert kept.sum() > 0 and (trees[0][1][1].children_visits[0, 0] >= kept).all()


def test_agent_plays_a_whole_game_reusing(agent, play_env):
    env = play_env
    agent.reset()
    state = env.init()
    rng = np.random.default_rng(0)
    previous, carried, ply = None, 0, 0
    while not bool(state.terminated):
        if int(state.current_player) == 0:
            action = agent.act(state, jax.random.fold_in(jax.random.key(2), ply))
            tree = jax.device_get(agent.last_tree)
            if previous is not None:
                old = previous[0]
                node = _node(*previous)
                if node > 0:  # the position is in the old tree: its statistics carry over
                    assert tree.node_visits[0, 0] == (old.node_visits[0, node] + PLAY_SIMS + 1
                                                      - _subtree_size(old, node))
                    assert (tree.children_visits[0, 0] >= old.children_visits[0, node]).all()
                    carried += int(old.children_visits[0, node].sum())
                else:
                    assert tree.node_visits[0, 0] == PLAY_SIMS + 1
            previous = [tree, action]
        else:
            action = int(rng.choice(np.flatnonzero(np.asarray(state.legal_action_mask))))
            previous.append(action)
        assert bool(state.legal_action_mask[action])
        state = env.step(state, jnp.int32(action))
        ply += 1
    assert carried > 0


def test_the_browser_keeps_an_exported_agents_tree_between_its_replies(tmp_path):
    """`gomoku-jax play` with an exported PUCT agent whose search keeps its tree: each
    reply searches from the tree kept after the agent's last move (the overlay says how
    many root visits it carried), exactly as `exported.load_agent`'s agent plays; an
    analysis searches from the kept tree but keeps nothing; a takeback starts afresh."""
    from gomoku_jax import exported, networks
    from gomoku_jax import io as gio
    from gomoku_jax.play import PlayApp

    env = Gomoku(5, 4, observation="stones-colour")
    module = networks.make_network("simplenet", board_size=5, channels=(4, 4), value_hidden=8)
    variables = networks.init_network(module, jax.random.key(3), env.observation_shape)
    config = search_lib.SearchConfig(num_simulations=PLAY_SIMS, backend="linear",
                                     reuse_tree=True, dirichlet_fraction=0.0)
    path = str(tmp_path / "reuse.gjx")
    gio.write_exported(path, {
        "agent": "search", "search": config.to_dict(),
        "game": {"size": 5, "k": 4, "rule": "freestyle", "observation": "stones-colour"},
        "network": {"name": "simplenet", "options": {"channels": [4, 4], "value_hidden": 8}}},
        jax.device_get(variables))
    direct = exported.load_agent(path)  # never asked to analyse
    assert isinstance(direct, search_lib.ReusingSearchAgent)
    app = PlayApp(path, colour="white", seed=0)  # the agent opens
    keys = jax.random.fold_in(jax.random.key(0), 1)  # the app's: its seed, its first game

    def analysis(snapshot):
        found = snapshot["analysis"]
        return np.asarray(found["heat"]).ravel(), found["carried_visits"], found["heat_label"]

    s0 = env.init()
    snap = app.reply()
    a0 = direct.act(s0, jax.random.fold_in(keys, 0))
    first = jax.device_get(direct.last_tree)
    assert snap["moves"] == [list(divmod(a0, 5))]
    heat, carried, label = analysis(snap)
    assert carried == 0 and "0 carried over" in label  # a new game: an empty tree
    np.testing.assert_allclose(heat, first.children_visits[0, 0] / PLAY_SIMS, atol=1e-6)

    # the human answers with the agent's most searched reply, which is in the kept tree
    child = first.children_index[0, 0, a0]
    reply = int(np.argmax(np.where(first.children_index[0, child] >= 0,
                                   first.children_visits[0, child], -1)))
    s1 = env.step(s0, jnp.int32(a0))
    looked = app.analyse()["analysis"]  # the human's position, from the kept tree
    peek = direct.search(s1, jax.random.fold_in(keys, 1), keep=False)
    assert looked["carried_visits"] == peek.carried == first.node_visits[0, child] > 0
    assert looked["move"] == list(divmod(peek.action, 5))
    app.move({"row": reply // 5, "col": reply % 5})
    snap = app.reply()
    s2 = env.step(s1, jnp.int32(reply))
    found = direct.search(s2, jax.random.fold_in(keys, 2))
    second = jax.device_get(found.tree)
    grandchild = first.children_index[0, child, reply]
    # as the agent that never analysed: the analysis kept nothing
    assert snap["moves"][-1] == list(divmod(found.action, 5))
    heat, carried, label = analysis(snap)
    assert carried == found.carried == first.node_visits[0, grandchild] > 0
    total = second.node_visits[0, 0] - 1  # the root's first visit is its own evaluation
    assert f"{total} visits" in label and f"{carried} carried over" in label
    np.testing.assert_allclose(heat, second.children_visits[0, 0] / total, atol=1e-6)
    # a takeback: the kept tree's root is no longer on the board's path
    app.undo()
    assert app.analyse()["analysis"]["carried_visits"] == 0

    # A new game starts afresh, even at a position the kept tree holds: the agent's kept
    # root is the board after its move; the human plays that move in a new game.
    app.new_game({"colour": "white"})
    app.reply()
    (row, col), = app.snapshot()["moves"]
    app.new_game({"colour": "black"})
    app.move({"row": row, "col": col})
    assert app.reply()["analysis"]["carried_visits"] == 0
    # the same for the agent inside a +killer wrapper (no overlay: its kept tree is looked at)
    killer = path + "+killer"
    app.new_game({"agent": killer, "colour": "white"})
    app.reply()
    inner = app.player(killer, None, env).kept
    assert isinstance(inner, search_lib.ReusingSearchAgent) and inner.tree is not None
    app.new_game({})
    assert inner.tree is None
