"""Pure MCTS: exact rollouts, wins and blocks in one, legal and reproducible search."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algorithms import pure_mcts as pm
from gomoku_jax.game import EMPTY, Gomoku, random_games
from gomoku_jax.reference import NumpyGomoku, NumpyPureMCTS

ENV = Gomoku(9, 5)
CFG = pm.MCTSConfig(simulations=300)
SEARCH = jax.jit(lambda key, state: pm.search(ENV, CFG, key, state))


def _replayed(moves, env=ENV):
    ref = NumpyGomoku(env.size, env.k, env.rule)
    for a in moves:
        ref.step(int(a))
    return ref


@pytest.mark.parametrize("rule", ["freestyle", "standard"])
def test_vectorised_rollout_equals_playing_the_same_order(rule):
    env = Gomoku(7, 4, rule)
    _, moves = random_games(env, jax.random.key(5), 40, record=True)
    rollout = jax.jit(lambda key, board, to_move: pm._rollout_winner(env, key, board, to_move))
    checked = 0
    for g in range(40):
        played = [int(a) for a in np.asarray(moves[g]) if a >= 0]
        ref = _replayed(played[: len(played) // 3], env)  # a position a third of the way in
        board = jnp.asarray(ref.board.reshape(-1))
        for seed in range(5):
            key = jax.random.key(100 * g + seed)
            got = int(rollout(key, board, jnp.int32(ref.current_player)))
            # The same random order, played move by move in the NumPy engine.
            noise = np.asarray(jax.random.uniform(key, (49,)))
            order = np.argsort(np.where(ref.board.reshape(-1) == EMPTY, noise, 2.0), kind="stable")
            sim = _replayed(played[: len(played) // 3], env)
            for a in order:
                if sim.terminated:
                    break
                sim.step(int(a))
            assert got == sim.winner
            checked += 1
    assert checked == 200


def test_a_five_inside_an_overline_already_on_the_board_wins_no_playout():
    """Standard rule: six black stones in a row (the five inside them no win) are on the
    board; a playout is decided by what it plays, as move by move."""
    env = Gomoku(9, 5, "standard")
    moves = [0, 80, 1, 78, 2, 76, 4, 74, 5, 72, 3]  # black's sixth stone joins them last
    ref = _replayed(moves, env)
    assert not ref.terminated and ref.current_player == 1
    board = jnp.asarray(ref.board.reshape(-1))
    rollout = jax.jit(lambda key: pm._rollout_winner(env, key, board, jnp.int32(1)))
    winners = []
    for seed in range(40):
        key = jax.random.key(seed)
        noise = np.asarray(jax.random.uniform(key, (81,)))
        order = np.argsort(np.where(ref.board.reshape(-1) == EMPTY, noise, 2.0), kind="stable")
        sim = _replayed(moves, env)
        for a in order:
            if sim.terminated:
                break
            sim.step(int(a))
        winners.append(sim.winner)
        assert int(rollout(key)) == sim.winner
    assert len(set(winners)) > 1  # not every playout the overline's owner's


def _position(stones_black, stones_white, env=ENV):
    board = np.zeros((env.size, env.size), np.int8)
    for r, c in stones_black:
        board[r, c] = 1
    for r, c in stones_white:
        board[r, c] = 2
    return env.from_board(board)


@pytest.mark.parametrize("seed", range(3))
def test_takes_a_win_in_one_and_blocks_a_loss_in_one(seed):
    key = jax.random.key(seed)
    # Black to move with four in a column: (0..3, 6) -> wins only at (4, 6).
    win = _position([(0, 6), (1, 6), (2, 6), (3, 6)], [(8, 0), (8, 1), (7, 3), (5, 5)])
    assert int(SEARCH(key, win).action) == 4 * 9 + 6
    # White to move; black threatens a diagonal five at (4, 4) only.
    block = _position([(0, 0), (1, 1), (2, 2), (3, 3)], [(0, 8), (8, 8), (8, 0)])
    assert int(SEARCH(key, block).action) == 4 * 9 + 4


def test_a_lost_position_still_gets_a_legal_move():
    # Black to move; white has a four (wins at (8, 4)) and an open four (at (2, 8) or
    # (7, 8)): the solver proves every black move a loss, and the move must still be legal.
    lost = _position([(0, 1), (0, 3), (1, 5), (2, 0), (3, 3), (4, 6), (1, 1), (2, 5)],
                     [(8, 0), (8, 1), (8, 2), (8, 3), (3, 8), (4, 8), (5, 8), (6, 8)])
    action = int(SEARCH(jax.random.key(0), lost).action)
    assert bool(lost.legal_action_mask[action]), divmod(action, 9)


def test_plain_uct_still_plays_legal_moves_and_counts_every_simulation():
    plain = pm.MCTSConfig(simulations=200, solver=False, decisive_expansion=False)
    _, moves = random_games(ENV, jax.random.key(2), 6, record=True)
    search = jax.jit(lambda key, state: pm.search(ENV, plain, key, state))
    for g in range(6):
        played = [int(a) for a in np.asarray(moves[g]) if a >= 0][:20]
        state = ENV.play_moves([divmod(a, 9) for a in played])
        if bool(state.terminated):
            continue
        out = search(jax.random.key(g), state)
        assert bool(state.legal_action_mask[int(out.action)])
        visits = np.asarray(out.visits)
        assert visits.sum() == 200  # every simulation passes through one root child
        assert (visits[~np.asarray(state.legal_action_mask)] == 0).all()
        assert visits[int(out.action)] == visits.max()  # a most visited child


def test_ties_go_to_the_child_expanded_first_not_to_the_first_cell():
    # One simulation per legal move: every root child is expanded once, in random order,
    # and all tie at one visit. The reports' code (and the NumPy reference) keep the first
    # most visited in the order the children were added; the first cell would be a corner.
    plain = pm.MCTSConfig(simulations=79, solver=False, decisive_expansion=False)
    state = ENV.play_moves([(4, 4), (4, 5)])
    search = jax.jit(lambda key: pm.search(ENV, plain, key, state))
    actions = []
    for seed in range(6):
        out = search(jax.random.key(seed))
        visits = np.asarray(out.visits)
        assert (visits[np.asarray(state.legal_action_mask)] == 1).all()
        actions.append(int(out.action))
    assert len(set(actions)) >= 4, actions  # the cell order would give 0 every time


def test_same_key_same_move_and_batch_equals_single():
    states = jax.tree.map(lambda x: jnp.stack([x] * 4), ENV.play_moves([(4, 4), (3, 3)]))
    keys = jax.random.split(jax.random.key(7), 4)
    batch = jax.jit(jax.vmap(lambda k, s: pm.search(ENV, CFG, k, s).action))(keys, states)
    single = [int(SEARCH(keys[i], jax.tree.map(lambda x: x[i], states)).action) for i in range(4)]
    assert np.asarray(batch).tolist() == single
    assert int(SEARCH(keys[0], ENV.init()).action) == int(SEARCH(keys[0], ENV.init()).action)


def test_heavy_playouts_find_the_win_too():
    heavy = pm.MCTSConfig(simulations=100, heavy_playouts=True)
    win = _position([(0, 6), (1, 6), (2, 6), (3, 6)], [(8, 0), (8, 1), (7, 3), (5, 5)])
    out = jax.jit(lambda key, s: pm.search(ENV, heavy, key, s))(jax.random.key(0), win)
    assert int(out.action) == 4 * 9 + 6


def test_pure_mcts_beats_random():
    from gomoku_jax import agents, arena

    m = arena.play_match(Gomoku(7, 4), pm.pure_mcts_agent(Gomoku(7, 4), 100), agents.random_agent(), 8)
    assert m.score("pure-mcts-100")["wins"] >= 7


def test_numpy_reference_mcts_returns_legal_moves():
    game = NumpyGomoku(5, 4)
    for a in (12, 0, 13):
        game.step(a)
    move = NumpyPureMCTS(5, 4, simulations=50, seed=1).search(game)
    assert isinstance(move, int) and game.board.reshape(-1)[move] == 0


@pytest.mark.parametrize("kwargs, text", [
    (dict(simulations=0), "simulations must be a positive integer"),
    (dict(exploration=-1.0), "exploration must be a finite number >= 0"),
    (dict(exploration=float("inf")), "exploration must be a finite number >= 0, got inf"),
    (dict(exploration=float("nan")), "exploration must be a finite number >= 0, got nan"),
    (dict(draw_score=2.0), "draw_score must be from 0 to 1"),
])
def test_bad_settings(kwargs, text):
    with pytest.raises(ValueError, match=text):
        pm.MCTSConfig(**kwargs)


def test_deadline_search_matches_the_full_search_and_stops_early():
    import time

    agent = pm.pure_mcts_agent(ENV, 300)
    state = ENV.play_moves([(4, 4), (3, 3)])
    key = jax.random.key(4)
    full = agent.act(state, key)
    # a deadline far away (even a starved machine reaches it only after the whole search)
    assert agent.act(state, key, deadline=time.perf_counter() + 3600) == full  # chunks == one run
    win = _position([(0, 6), (1, 6), (2, 6), (3, 6)], [(8, 0), (8, 1), (7, 3), (5, 5)])
    # An already-passed deadline: one chunk of simulations, still enough for a forced win.
    assert agent.act(win, key, deadline=time.perf_counter() - 1) == 4 * 9 + 6
    assert bool(state.legal_action_mask[agent.act(state, key, deadline=time.perf_counter())])


def test_a_deadline_search_runs_the_simulations_a_chunk_leaves_over():
    """Fewer simulations than a chunk, or a count that is no multiple of it: with time for
    all of them the deadline search runs them all (the same tree as without a deadline),
    and a passed deadline still runs the first chunk, simulations fewer than a chunk
    included."""
    import time

    state = ENV.play_moves([(4, 4), (3, 3)])
    key = jax.random.key(4)
    win = _position([(0, 6), (1, 6), (2, 6), (3, 6)], [(8, 0), (8, 1), (7, 3), (5, 5)])
    for sims in (20, 120):
        agent = pm.pure_mcts_agent(ENV, sims)
        tree, done = agent.search_by(state, key, time.perf_counter() + 3600)
        assert done == sims
        want = pm.search(ENV, agent.config, key, state)
        np.testing.assert_array_equal(pm._result(agent.config, tree, state).visits,
                                      want.visits)
        assert float(want.visits.sum()) == sims
        assert agent.act(state, key, deadline=time.perf_counter() + 3600) == int(want.action)
        _, done = agent.search_by(win, key, time.perf_counter() - 1)
        assert done == min(sims, agent.chunk)
        assert agent.act(win, key, deadline=time.perf_counter() - 1) == 4 * 9 + 6


def test_the_killer_wrapper_passes_the_deadline_on(monkeypatch):
    import time

    from gomoku_jax import agents

    asked = []
    search_by = pm.PureMCTSAgent.search_by
    monkeypatch.setattr(pm.PureMCTSAgent, "search_by",
                        lambda self, *a: asked.append(a[-1]) or search_by(self, *a))
    killer = agents.make("pure-mcts-60+killer", ENV)
    deadline = time.perf_counter() - 1
    state = ENV.play_moves([(4, 4), (3, 3)])
    assert bool(state.legal_action_mask[killer.act(state, jax.random.key(0), deadline)])
    assert asked == [deadline]
    win = _position([(0, 6), (1, 6), (2, 6), (3, 6)], [(8, 0), (8, 1), (7, 3), (5, 5)])
    assert killer.act(win, jax.random.key(0), deadline) == 4 * 9 + 6 and len(asked) == 1


def test_transpositions_share_nodes_between_symmetric_positions():
    env = Gomoku(3, 3)
    cfg = pm.MCTSConfig(simulations=60, transpositions=True)
    tree = jax.jit(lambda key, s: pm._run(env, cfg, pm._new_tree(env, cfg, s), key, 0, 60))(
        jax.random.key(0), env.init())
    root_children = np.asarray(tree.children[0])
    assert (root_children >= 0).all()
    # Nine first moves, three positions up to symmetry: centre, corner, edge.
    assert len(set(root_children.tolist())) == 3
    corners = {int(root_children[a]) for a in (0, 2, 6, 8)}
    edges = {int(root_children[a]) for a in (1, 3, 5, 7)}
    assert len(corners) == 1 and len(edges) == 1 and corners != edges
    plain = pm.MCTSConfig(simulations=60)
    untied = jax.jit(lambda key, s: pm._run(env, plain, pm._new_tree(env, plain, s), key, 0, 60))(
        jax.random.key(0), env.init())
    assert int(tree.size) < int(untied.size) == 61  # one node per simulation without sharing


def test_transposition_search_still_wins_and_blocks():
    cfg = pm.MCTSConfig(simulations=300, transpositions=True)
    search = jax.jit(lambda key, s: pm.search(ENV, cfg, key, s))
    win = _position([(0, 6), (1, 6), (2, 6), (3, 6)], [(8, 0), (8, 1), (7, 3), (5, 5)])
    block = _position([(0, 0), (1, 1), (2, 2), (3, 3)], [(0, 8), (8, 8), (8, 0)])
    assert int(search(jax.random.key(1), win).action) == 4 * 9 + 6
    assert int(search(jax.random.key(1), block).action) == 4 * 9 + 4


def test_pure_mcts_agents_built_alike_share_their_compiled_search():
    a, b = pm.pure_mcts_agent(ENV, 50), pm.pure_mcts_agent(ENV, 50)
    assert a.policy == b.policy and a._jit_policy is b._jit_policy
    assert pm.pure_mcts_agent(ENV, 60).policy != a.policy
    # the deadline search's chunks too
    assert pm._chunked(a.env, a.config) is pm._chunked(b.env, b.config)


# ------------------------------------------------------- limits: simulations and memory
@pytest.mark.parametrize("n", ["0", "3000000000", "99999999999999999999",
                               str(pm.MAX_SIMULATIONS + 1)])
def test_out_of_range_pure_mcts_names_are_refused_when_parsed(n):
    from gomoku_jax import agents

    text = (rf"agent 'pure-mcts-{n}': its simulations must be a positive integer "
            rf"\(1 to {pm.MAX_SIMULATIONS}\), got {int(n)}$")
    for spec in (f"pure-mcts-{n}", f"pure-mcts-{n}+killer"):
        with pytest.raises(ValueError, match=text):
            agents.make(spec, Gomoku(5, 4))
    with pytest.raises(ValueError, match=r"MCTSConfig.simulations must be a positive integer "
                                         rf"\(1 to {pm.MAX_SIMULATIONS}\)"):
        pm.MCTSConfig(simulations=int(n))


def test_the_simulation_bound_keeps_counts_exact_and_covers_play():
    from gomoku_jax import play

    assert pm.MAX_SIMULATIONS == 2**24  # float32 visit counts are exact up to here
    assert np.float32(pm.MAX_SIMULATIONS) - np.float32(pm.MAX_SIMULATIONS - 1) == 1
    assert pm.check_simulations(pm.MAX_SIMULATIONS) == pm.MAX_SIMULATIONS
    assert play.MAX_BUDGET <= pm.MAX_SIMULATIONS  # play's own, tighter limit stays


def test_a_tree_too_big_for_memory_is_refused_with_the_figures():
    per_sim = pm.NODE_BYTES + pm.CELL_BYTES * ENV.num_actions  # 438 on 9x9
    assert pm.memory_bytes(1, 10_000, ENV.num_actions) == 10_001 * per_sim
    with pytest.raises(ValueError, match=(
            rf"^agent 'pure-mcts-10000': a search of batch 1 x 10000 simulations needs a tree "
            rf"of 4\.2 MiB \({per_sim} bytes per game per node, 2 copies = 8\.4 MiB\), "
            r"over the memory_limit of 1\.0 MiB; use fewer simulations$")):
        pm.pure_mcts_agent(ENV, 10_000, memory_limit=2**20)
    need = pm.memory_bytes(8, 1000, 81)
    assert pm.check_memory(8, 1000, 81, limit_bytes=2 * need) == need
    with pytest.raises(ValueError, match="batch 8 x 1000 simulations.*use a smaller batch"):
        pm.check_memory(8, 1000, 81, limit_bytes=2 * need - 1)
    with pytest.raises(ValueError, match="limit_bytes must be a positive integer"):
        pm.check_memory(1, 10, 81, limit_bytes=0)
    with pytest.raises(ValueError, match=r"^memory_limit must be a positive integer \(bytes\), "
                                         r"got 1000000\.0$"):
        pm.pure_mcts_agent(ENV, 100, memory_limit=1e6)


def test_the_batch_policy_checks_the_whole_batch_before_allocating(monkeypatch):
    from gomoku_jax import agents, arena, tree_search

    env = Gomoku(5, 4)
    one_game = pm.memory_bytes(1, 200, env.num_actions)
    monkeypatch.setattr(tree_search, "available_bytes",  # room for one game, not four
                        lambda device=None: (3 * one_game, "test memory"))
    agent = agents.make("pure-mcts-200", env)
    with pytest.raises(ValueError, match=r"^pure MCTS of 200 simulations: a search of batch 4 x "
                                         r"200 simulations needs .* over the test memory"):
        arena.play_match(env, agent, agents.random_agent(), 4)


def test_memory_bytes_matches_the_compiled_search():
    env, batch, sims = Gomoku(7, 4), 4, 500
    config = pm.MCTSConfig(simulations=sims)
    keys = jax.random.split(jax.random.key(0), batch)
    states = jax.vmap(env.init)(keys)
    compiled = jax.jit(functools.partial(pm._batch_policy, env, config, None)).lower(
        keys, states).compile()
    analysis = compiled.memory_analysis()
    if analysis is None or not getattr(analysis, "temp_size_in_bytes", 0):
        pytest.skip("this backend reports no memory analysis")
    need = pm.memory_bytes(batch, sims, env.num_actions)
    # XLA updates the tree in place: about one copy, within the two the check asks for
    assert 0.8 * need <= analysis.temp_size_in_bytes <= 2 * need


def test_a_normal_pure_mcts_name_still_plays():
    from gomoku_jax import agents

    agent = agents.make("pure-mcts-50", Gomoku(5, 4))
    state = Gomoku(5, 4).init()
    move = agent.act(state, jax.random.key(0))
    assert 0 <= move < 25 and bool(state.legal_action_mask[move])


def test_uct_names_the_reports_plain_pure_mcts():
    """``uct-N``: the same search without MCTS-Solver or decisive expansion, so it can
    miss a win in one that ``pure-mcts-N`` always takes."""
    from gomoku_jax import agents

    plain, enhanced = (agents.make(name, ENV) for name in ("uct-3", "pure-mcts-3"))
    assert plain.name == "uct-3" and plain.config.simulations == 3
    assert (plain.config.solver, plain.config.decisive_expansion) == (False, False)
    assert (enhanced.config.solver, enhanced.config.decisive_expansion) == (True, True)
    win = _position([(0, 6), (1, 6), (2, 6), (3, 6)], [(8, 0), (8, 1), (7, 3), (5, 5)])
    moves = {int(plain.act(win, jax.random.key(s))) for s in range(8)}
    assert moves != {4 * 9 + 6}  # three playouts of 73 empty cells: not always found
    assert {int(enhanced.act(win, jax.random.key(s))) for s in range(8)} == {4 * 9 + 6}
    with pytest.raises(ValueError, match=r"did you mean 'uct-5'"):
        agents.make("utc-5", ENV)
