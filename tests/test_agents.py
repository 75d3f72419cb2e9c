"""Baseline agents: legal play, the heuristic's priority order, the killer wrapper."""

import pathlib
import re
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gomoku_jax import agents, arena
from gomoku_jax.game import Gomoku, random_games

ENV = Gomoku(9, 5)


def _pos(stones, to_move=0, env=ENV):
    board = np.zeros((env.size, env.size), np.int8)
    for (r, c), v in stones.items():
        board[r, c] = v
    return env.from_board(board, to_move=to_move)


def _acts(agent, state, seeds=range(8)):
    return {divmod(agent.act(state, jax.random.key(s)), ENV.size) for s in seeds}


def test_random_agent_plays_only_legal_moves():
    rng = np.random.default_rng(0)
    agent = agents.random_agent()
    for _ in range(4):
        cells = rng.permutation(81)[:40]
        s = _pos({divmod(int(a), 9): 1 + (i % 2) for i, a in enumerate(cells)})
        chosen = {agent.act(s, jax.random.key(seed)) for seed in range(30)}
        assert all(bool(s.legal_action_mask[a]) for a in chosen)
        assert len(chosen) > 10  # spread over the 41 empty cells, not stuck on one


def test_heuristic_takes_a_win_before_blocking():
    # Black (to move) has four at (4,1..4); white has four at (0,0..3).
    stones = {(4, c): 1 for c in range(1, 5)} | {(0, c): 2 for c in range(4)}
    s = _pos(stones, to_move=0)
    assert _acts(agents.heuristic_agent(ENV), s) <= {(4, 0), (4, 5)}
    assert _acts(agents.heuristic_agent(ENV), s) == {(4, 5)}  # the more central winning cell


def test_heuristic_blocks_a_four_then_an_open_three():
    four = {(2, c): 2 for c in range(2, 6)} | {(8, 0): 1, (8, 2): 1, (8, 4): 1}
    assert _acts(agents.heuristic_agent(ENV), _pos(four, to_move=0)) == {(2, 6)}
    three = {(4, 2): 2, (4, 3): 2, (4, 4): 2, (0, 0): 1, (0, 8): 1, (8, 0): 1}
    # White's .XXX. on row 4: blocks at (4, 1) and (4, 5); (4, 5) is nearer the centre.
    assert _acts(agents.heuristic_agent(ENV), _pos(three, to_move=0)) == {(4, 5)}
    broken = {(4, 2): 2, (4, 4): 2, (4, 5): 2, (0, 0): 1, (0, 8): 1, (8, 0): 1}
    assert _acts(agents.heuristic_agent(ENV), _pos(broken, to_move=0)) == {(4, 3)}  # the gap


def test_a_heuristic_that_blocks_with_probability_p_still_takes_its_wins():
    four = {(2, c): 2 for c in range(2, 6)} | {(8, 0): 1, (8, 2): 1, (8, 4): 1}
    three = {(1, 2): 2, (1, 3): 2, (1, 4): 2, (0, 0): 1, (0, 8): 1, (8, 0): 1}
    seeds = range(40)
    for stones, blocks in ((four, {(2, 1), (2, 6)}), (three, {(1, 1), (1, 5)})):
        never = _acts(agents.heuristic_agent(ENV, block_probability=0.0), _pos(stones), seeds)
        assert not never & blocks  # no threat is answered: it plays near the centre
        half = _acts(agents.heuristic_agent(ENV, block_probability=0.5), _pos(stones), seeds)
        assert half & blocks and half - blocks  # some moves answer, some do not
    win = {(4, c): 1 for c in range(1, 5)} | {(0, c): 2 for c in range(4)}
    assert _acts(agents.heuristic_agent(ENV, block_probability=0.0), _pos(win), seeds) == {
        (4, 5)}
    for bad in (-0.1, 1.5, True, "half"):
        with pytest.raises(ValueError, match="block_probability"):
            agents.heuristic_agent(ENV, block_probability=bad)


def test_heuristic_opens_near_the_centre_with_light_randomisation():
    moves = _acts(agents.heuristic_agent(ENV, top_k=3), ENV.init(), seeds=range(40))
    centre_ring = {(4, 4), (3, 4), (4, 3), (4, 5), (5, 4)}
    assert moves <= centre_ring and len(moves) >= 2
    assert _acts(agents.heuristic_agent(ENV, top_k=1), ENV.init(), seeds=range(10)) == {(4, 4)}
    with pytest.raises(ValueError, match="top_k"):
        agents.heuristic_agent(ENV, top_k=0)


def test_batched_policy_equals_single_calls():
    agent = agents.heuristic_agent(ENV)
    final, moves = random_games(ENV, jax.random.key(1), 16, record=True)
    # Positions after 6 random plies of each recorded game.
    states = []
    for g in range(16):
        s = ENV.init()
        for a in np.asarray(moves[g][:6]):
            s = ENV.step(s, int(a))
        states.append(s)
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *states)
    keys = jax.random.split(jax.random.key(2), 16)
    batch = np.asarray(jax.jit(agent.batch_policy())(None, keys, stacked))
    single = [agent.act(states[g], keys[g]) for g in range(16)]
    assert batch.tolist() == single


class _Fixed(agents.PythonAgent):
    def __init__(self, action):
        self.name, self.action = "fixed", action

    def select(self, state, rng):
        return self.action


@pytest.mark.parametrize("make", [lambda: agents.random_agent(), lambda: _Fixed(0)])
def test_killer_takes_a_win_then_blocks_a_loss(make):
    killer = agents.with_killer(make(), ENV)
    assert isinstance(killer, agents.JaxAgent) == isinstance(make(), agents.JaxAgent)
    win = {(6, c): 1 for c in range(4)} | {(0, c): 2 for c in range(4)}
    assert _acts(killer, _pos(win, to_move=0)) == {(6, 4)}
    block = {(0, c): 2 for c in range(4)} | {(8, 0): 1, (8, 2): 1, (8, 4): 1}
    assert _acts(killer, _pos(block, to_move=0)) == {(0, 4)}
    quiet = _pos({(4, 4): 1}, to_move=1)
    moves = _acts(killer, quiet)
    assert all(quiet.legal_action_mask[r * 9 + c] for r, c in moves)


def _corner(params, key, state):
    return jnp.int32(80)


@pytest.mark.parametrize("make", [lambda: agents.JaxAgent("corner", _corner),
                                  lambda: _Fixed(80)])
def test_a_killer_without_blocks_takes_a_win_only(make):
    """Seed 001's killer (IV-E4) takes a win and leaves every other move, a block
    included, to the agent it wraps."""
    killer = agents.with_killer(make(), ENV, blocks=False)
    assert killer.name == f"{make().name}+killer(win only)"
    assert isinstance(killer, agents.JaxAgent) == isinstance(make(), agents.JaxAgent)
    win = {(6, c): 1 for c in range(4)} | {(0, c): 2 for c in range(4)}
    assert _acts(killer, _pos(win, to_move=0)) == {(6, 4)}
    block = {(0, c): 2 for c in range(4)} | {(8, 0): 1, (8, 2): 1, (8, 4): 1}
    assert _acts(killer, _pos(block, to_move=0)) == {(8, 8)}  # the agent's own move
    assert _acts(agents.with_killer(make(), ENV), _pos(block, to_move=0)) == {(0, 4)}
    if isinstance(killer, agents.JaxAgent):  # and batched, as the arena plays it
        states = jax.tree.map(lambda *x: jnp.stack(x), _pos(win, to_move=0),
                              _pos(block, to_move=0))
        keys = jax.random.split(jax.random.key(0), 2)
        moves = jax.jit(killer.batch_policy())(killer.params, keys, states)
        assert [divmod(int(a), 9) for a in moves] == [(6, 4), (8, 8)]
    with pytest.raises(TypeError, match="blocks must be True or False, got 'no'"):
        agents.with_killer(make(), ENV, blocks="no")


def test_a_killer_without_blocks_keeps_an_agents_own_act():
    """Pure MCTS answers by its own ``act`` (a deadline): the killer keeps it, and its
    blocks setting."""
    killer = agents.with_killer(agents.make("pure-mcts-4", ENV), ENV, blocks=False)
    assert killer.blocks is False and killer.inner.name == "pure-mcts-4"
    win = {(6, c): 1 for c in range(4)} | {(0, c): 2 for c in range(4)}
    assert _acts(killer, _pos(win, to_move=0), seeds=range(3)) == {(6, 4)}


# A game on 5x5 (k=4); the positions after 2 to 8 of its moves have black (even) and
# white (odd) to move, each with a last move on the board.
MOVES = [(2, 2), (1, 1), (2, 3), (3, 3), (1, 2), (3, 1), (2, 1), (0, 4)]


@pytest.mark.parametrize("kind", ["search", "q-greedy"])
def test_an_exported_agent_sees_positions_in_its_own_input_planes(tmp_path, kind):
    """A file trained on 4 planes (last move marked) plays in an arena whose game
    makes 3-plane states: the agent reads every position in its own encoding, the last
    move included."""
    from gomoku_jax import arena, exported, networks
    from gomoku_jax import io as gio
    from gomoku_jax import search as search_lib

    trained = Gomoku(5, 4, observation="stones-last-colour")
    name = "resnet" if kind == "search" else "resnet-q"
    options = {"blocks": 1, "filters": 4}
    module = networks.make_network(name, board_size=5, **options)
    variables = networks.init_network(module, jax.random.key(0), trained.observation_shape)
    meta = {"agent": kind, "game": {"size": 5, "k": 4, "rule": "freestyle",
                                    "observation": "stones-last-colour"},
            "network": {"name": name, "options": options}}
    if kind == "search":  # without Gumbel noise, so that the move follows the network
        meta["search"] = search_lib.SearchConfig(
            algorithm="gumbel", num_simulations=4, max_num_considered_actions=4,
            gumbel_scale=0.0).to_dict()
    path = tmp_path / "four_planes.gjx"
    gio.write_exported(path, meta, jax.device_get(variables))
    env = Gomoku(5, 4)  # three planes
    assert env.observation_shape[-1] != trained.observation_shape[-1]
    agent = agents.make(str(path), env)
    result = arena.play_match(env, agent, agents.make("random", env), games=2)
    assert all(r.forfeit is None for r in result.records)

    native = exported.load_agent(path)  # plays the trained game's own states
    key = jax.random.key(3)
    native_policy, policy = jax.jit(native.policy), jax.jit(agent.policy)  # as agents run

    def move(state, last=None):  # the native agent's move, the last move moved to ``last``
        if last is not None:
            state = state.replace(last_action=jnp.int32(last))
        return int(native_policy(agent.params, key, state))

    unmarked, earlier = [], []
    for n in range(2, len(MOVES) + 1):
        position = env.play_moves(MOVES[:n])
        own = trained.play_moves(MOVES[:n])
        assert int(own.last_action) == int(position.last_action) >= 0
        expected = move(own)
        assert int(policy(agent.params, key, position)) == expected, MOVES[:n]
        unmarked.append(move(own, last=-1) != expected)
        r, c = MOVES[n - 2]  # the move before the last
        earlier.append(move(own, last=r * 5 + c) != expected)
    # the comparisons can tell: with the last move left out, or marked on the move
    # before it, the agent plays otherwise in some of these positions
    assert any(unmarked) and any(earlier), (unmarked, earlier)


@pytest.mark.parametrize("drop", ["game", "network"])
def test_an_exported_file_missing_a_setting_names_it(tmp_path, drop):
    from gomoku_jax import exported, networks
    from gomoku_jax import io as gio

    module = networks.make_network("resnet", board_size=5, blocks=1, filters=4)
    env = Gomoku(5, 4)
    variables = networks.init_network(module, jax.random.key(0), env.observation_shape)
    meta = {"agent": "search", "game": {"size": 5, "k": 4, "rule": "freestyle",
                                        "observation": env.observation},
            "network": {"name": "resnet", "options": {"blocks": 1, "filters": 4}}}
    del meta[drop]
    path = tmp_path / "partial.gjx"
    gio.write_exported(path, meta, jax.device_get(variables))
    with pytest.raises(gio.CheckpointError, match=rf"partial.gjx: the exported file's settings "
                                                  rf"cannot rebuild an agent \(the setting "
                                                  rf"'{drop}' is missing\)$"):
        exported.load_agent(path)


def test_make_builds_a_weakened_heuristic_by_name():
    four = {(2, c): 2 for c in range(2, 6)} | {(8, 0): 1, (8, 2): 1, (8, 4): 1}
    seeds = range(40)
    never = agents.make("heuristic@0", ENV)
    assert never.name == "heuristic@0" and not _acts(never, _pos(four), seeds) & {(2, 1), (2, 6)}
    assert _acts(agents.make("heuristic-1@1", ENV), _pos(four), seeds) == {(2, 6)}
    half = _acts(agents.make("heuristic@0.5+killer", ENV), _pos(four), seeds)
    assert half == {(2, 6)}  # the killer blocks the four whatever the heuristic's coin says
    assert _acts(agents.make("heuristic-1@0", ENV), ENV.init(), seeds=range(5)) == {(4, 4)}
    for bad, message in (("heuristic@half", "after '@' must be a number"),
                         # the agent's own name, not heuristic_agent's argument
                         ("heuristic@1.5", r"^'heuristic@1.5': the block probability after "
                                           r"'@' must be a number in \[0, 1\], got '1.5'$"),
                         ("heuristic@nan", "after '@' must be a number in"),
                         ("heuristic-0", r"^agent 'heuristic-0': its K \(how many of the "
                                         r"best moves it picks among\) must be a positive "
                                         r"integer, got 0$"),
                         ("heuristic-00@0.5", r"^agent 'heuristic-00@0.5': its K"),
                         ("heuristic-x@0.5", "unknown agent"),
                         ("heuristic-\u00b2", "unknown agent"),  # a superscript 2
                         ("pure-mcts-\u00b2", "unknown agent"),  # int() refused it
                         ("pure-mcts-\uff11\uff10", "unknown agent"),  # full-width 10
                         ("heuristic@\uff10.\uff15", "after '@' must be a number"),
                         ("alphabeta-\uff12", "unknown agent"),
                         ("gomokubot-\u0663", "unknown agent")):  # an Arabic-Indic 3
        with pytest.raises(ValueError, match=message):
            agents.make(bad, ENV)


@pytest.mark.parametrize("name, why", [
    ("minimax", "'minimax' solves boards up to 4x4"),  # a known name on too big a board
    ("minimax-3", "minimax searches to the end and takes no depth"),
    ("alphabeta-0", "the depth must be at least 1"),
    ("gomokubot-0", "the depth must be at least 1"),
])
def test_make_passes_on_why_a_search_agent_name_is_refused(name, why):
    with pytest.raises(ValueError) as error:
        agents.make(name, ENV)
    assert why in str(error.value) and "unknown agent" not in str(error.value)


@pytest.mark.parametrize("template", ["pure-mcts-{}", "heuristic-{}", "alphabeta-{}",
                                      "gomokubot-{}", "x.gjx@{}", "pure-mcts-{}+killer"])
def test_a_number_too_long_to_read_in_an_agent_name_names_the_agent(template):
    name = template.format("9" * 5000)  # Python's int() reads at most 4,300 digits
    with pytest.raises(ValueError) as error:
        agents.make(name, ENV)
    message = str(error.value)
    assert message.startswith("agent " + repr(name)[:20]) and len(message) < 150, message
    assert message.endswith("its number of 5000 digits is far too large")


def test_exported_agent_names_are_parsed_one_way():
    assert agents.parse_exported("runs/a@b/final.gjx") == ("runs/a@b/final.gjx", None)
    assert agents.parse_exported("runs/a@b/final.gjx@64") == ("runs/a@b/final.gjx", 64)
    assert agents.parse_exported("heuristic@0.5") is None
    assert agents.parse_exported("pure-mcts-100") is None
    for bad in ("final.gjx@many", "final.gjx@0", "final.gjx@-3", "final.gjx@\u00b2"):
        with pytest.raises(ValueError, match=rf"'{bad}': the simulations after '@' must be a "
                                             "whole number >= 1"):
            agents.parse_exported(bad)
    assert agents.exported_path("x/final.gjx@64+killer") == "x/final.gjx"
    assert agents.exported_path("x/final.gjx+killer+killer") == "x/final.gjx"
    assert agents.exported_path("heuristic+killer") is None


def test_agents_built_alike_share_one_compiled_policy():
    # A policy is compared by value: evaluations and tournaments that rebuild their
    # agents find the program compiled for the previous ones.
    a, b = agents.make("heuristic", ENV), agents.make("heuristic", ENV)
    assert a.policy == b.policy and hash(a.policy) == hash(b.policy)
    assert a._jit_policy is b._jit_policy
    killer_a, killer_b = agents.make("heuristic+killer", ENV), agents.make("heuristic+killer", ENV)
    assert killer_a.policy == killer_b.policy
    # other settings, another game or another function: another policy
    assert agents.make("heuristic-5", ENV).policy != a.policy
    assert agents.heuristic_agent(Gomoku(7, 4)).policy != a.policy
    assert killer_a.policy != a.policy
    # an unhashable argument (an array) is compared by identity, not refused
    p = agents.static_partial(lambda w, params, key, state: w, jnp.zeros(3))
    q = agents.static_partial(p.func, p.args[0])
    assert p == p and p != q and hash(p) != hash(q)
    # equal values of other types are other policies (a program traced for 1 returns an
    # int where one for 1.0 returns a float)
    ones = [agents.static_partial(_policy_of, one) for one in (1, 1.0, True)]
    assert ones[0] != ones[1] != ones[2] != ones[0]
    assert agents.static_partial(_policy_of, w=1) != agents.static_partial(_policy_of, w=1.0)
    # killer wrappers of a game share its compiled forced-move check
    first, second = (agents.make(name, ENV) for name in ("alphabeta-1+killer",
                                                         "pure-mcts-5+killer"))
    assert agents._forced_check(first.env) is agents._forced_check(second.env)


def _policy_of(w, params=None, key=None, state=None):
    return w


def test_a_rebuilt_agent_does_not_recompile_the_arenas_match_loop():
    from gomoku_jax import arena

    def match():
        arena.play_match(ENV, agents.make("heuristic", ENV), agents.make("random", ENV), 2,
                         seed=0, opening_stones=0)

    match()
    compiled = arena._lockstep._cache_size()
    match()
    assert arena._lockstep._cache_size() == compiled


# ----------------------------------------------------------------- registered agents


class _NthEmpty(agents.PythonAgent):
    """Plays the n-th empty cell in reading order (a registered agent of one's own)."""

    def __init__(self, name, n=0):
        self.name, self.n = name, n

    def select(self, state, rng):
        empty = np.flatnonzero(np.asarray(state.legal_action_mask))
        return int(empty[min(self.n, len(empty) - 1)])


def _nth_empty(spec, env):
    base, _, _ = spec.partition("@")
    n = base[len("nth-empty-"):]
    if not n.isdigit():
        raise ValueError(f"{spec!r}: nth-empty-N takes a number N")
    return _NthEmpty(spec, int(n))


@pytest.fixture
def agent_registry(registries):
    return registries[1]


def test_register_agent_checks_names_and_factories(agent_registry):
    assert {"register_agent", "AGENTS"} <= set(agents.__all__)
    agents.register_agent("first-empty", lambda spec, env: _NthEmpty(spec))
    agents.register_agent("nth-empty-", _nth_empty)
    assert set(agent_registry) == {"first-empty", "nth-empty-"}
    refusals = [
        ("", "a name must be letters"), ("two words", "a name must be letters"),
        ("mine@2", "a name must be letters"), ("mine+killer", "a name must be letters"),
        ("runs/mine", "a name must be letters"), ("mine.gjx", "a name must be letters"),
        (None, "a name must be letters"),
        ("first-empty", "'first-empty' is already registered"),
        ("random", "'random' clashes with the built-in agents"),
        ("Minimax", "clashes with the built-in agents"),
        ("gomokubot-7", "clashes with the built-in agents"),
        ("heuristic-x", "clashes with the built-in agents"),
        ("pure-", "clashes with the built-in agents"),  # a prefix over pure-mcts-N
    ]
    for name, message in refusals:
        with pytest.raises(ValueError, match=message):
            agents.register_agent(name, _nth_empty)
    with pytest.raises(ValueError, match="must be callable"):
        agents.register_agent("mine", "not a function")
    # a factory that cannot be called as factory(spec, env): refused now, not at make
    for factory in (lambda spec: None, lambda spec, env, depth: None):
        with pytest.raises(ValueError, match=r"the factory of 'mine' must take two arguments, "
                                             r"factory\(spec, env\) -> Agent \((too many|miss)"):
            agents.register_agent("mine", factory)
    agents.register_agent("mine", lambda *args, depth=2: _NthEmpty(args[0]), replace=True)
    del agent_registry["mine"]  # (callable with two: taken)
    assert set(agent_registry) == {"first-empty", "nth-empty-"}  # nothing refused was added
    # replace=True takes a name over, built-in or not; the registered agent comes first
    agents.register_agent("random", lambda spec, env: _NthEmpty(spec, 2), replace=True)
    assert isinstance(agents.make("random", ENV), _NthEmpty)
    agents.register_agent("first-empty", lambda spec, env: _NthEmpty(spec, 1), replace=True)
    assert agents.make("first-empty", ENV).n == 1
    agents.register_agent("bad", lambda spec, env: "not an agent")
    with pytest.raises(ValueError, match="registered as 'bad' returned 'not an agent'"):
        agents.make("bad", ENV)
    # an agent of another name: refused when made, not when a match keeps its results
    agents.register_agent("alias", lambda spec, env: agents.make("heuristic", env))
    with pytest.raises(ValueError, match=r"the factory registered as 'alias' returned an agent "
                                         r"named 'heuristic' for 'alias'; name it 'alias'"):
        agents.make("alias", ENV)


def _factory_made_again():
    """The same top-level factory definition run again (a notebook cell, a reloaded
    plugin): another function of the same module and qualified name."""
    namespace = {"__name__": "a_plugin", "_NthEmpty": _NthEmpty}
    exec(compile("def factory(spec, env):\n    return _NthEmpty(spec, 3)\n", "a_plugin.py",
                 "exec"), namespace)
    return namespace["factory"]


def test_the_same_factory_registers_again_without_replace(agent_registry):
    """A notebook cell or a reloaded plugin may register its agents again; another
    factory under a taken name still needs replace=True."""
    agents.register_agent("nth-empty-", _nth_empty)
    agents.register_agent("nth-empty-", _nth_empty)
    first, second = _factory_made_again(), _factory_made_again()
    agents.register_agent("third-empty", first)
    agents.register_agent("third-empty", second)
    assert agent_registry["third-empty"] is second
    with pytest.raises(ValueError, match="'third-empty' is already registered"):
        agents.register_agent("third-empty", _nth_empty)
    agents.register_agent("random", first, replace=True)  # shadowing a built-in, run again
    agents.register_agent("random", second)
    assert agents.make("random", ENV).n == 3
    with pytest.raises(ValueError, match="clashes with the built-in agents"):
        agents.register_agent("heuristic", second)
    # two lambdas of one module are not one definition
    agents.register_agent("lambda-agent", lambda spec, env: _NthEmpty(spec, 1))
    with pytest.raises(ValueError, match="'lambda-agent' is already registered"):
        agents.register_agent("lambda-agent", lambda spec, env: _NthEmpty(spec, 2))


def test_a_registered_agent_plays_by_name_with_killer_and_in_a_match(agent_registry):
    from gomoku_jax import arena, training

    agents.register_agent("first-empty", lambda spec, env: _NthEmpty(spec))
    agents.register_agent("nth-empty-", _nth_empty)
    agents.register_agent("centre-heuristic", lambda spec, env: agents.heuristic_agent(
        env, top_k=1, name=spec))
    plain = agents.make("first-empty", ENV)
    assert isinstance(plain, _NthEmpty) and plain.name == "first-empty"
    assert agents.make("nth-empty-7", ENV).n == 7
    assert agents.make("nth-empty-7@x", ENV).name == "nth-empty-7@x"  # '@...' is the factory's
    with pytest.raises(ValueError, match="nth-empty-N takes a number"):
        agents.make("nth-empty-many", ENV)
    killer = agents.make("first-empty+killer", ENV)
    assert killer.name == "first-empty+killer" and not isinstance(killer, agents.JaxAgent)
    block = {(0, c): 2 for c in range(1, 5)} | {(8, 0): 1, (8, 2): 1, (8, 4): 1}
    assert _acts(plain, _pos(block), seeds=range(2)) == {(0, 0)}  # the first empty cell
    assert _acts(killer, _pos(block), seeds=range(2)) == {(0, 5)}  # the killer blocks the four
    jax_killer = agents.make("centre-heuristic+killer", ENV)  # a JAX agent stays one
    assert isinstance(jax_killer, agents.JaxAgent) and jax_killer.name == (
        "centre-heuristic+killer")
    result = arena.play_match(ENV, agents.make("nth-empty-3+killer", ENV),
                              agents.make("random", ENV), games=2, seed=0)
    assert len(result.records) == 2 and all(r.forfeit is None for r in result.records)
    assert result.score("nth-empty-3+killer")["games"] == 2
    training.check_agent_name(ENV, "nth-empty-2+killer", "eval.opponents[0]")  # configs too


def test_the_unknown_agent_error_lists_registered_names(agent_registry):
    with pytest.raises(ValueError, match="unknown agent 'first-empty'") as plain:
        agents.make("first-empty", ENV)
    assert "the registered" not in str(plain.value)  # none yet
    assert "registered first: agents.register_agent, or gomoku-jax --plugin MODULE" in str(
        plain.value)
    agents.register_agent("first-empty", lambda spec, env: _NthEmpty(spec))
    agents.register_agent("nth-empty-", _nth_empty)
    for name, close in (("frist-empty", "'first-empty'"),
                        ("nth-empty-", "'nth-empty-N' with a whole number N"),  # no number
                        ("first-empty-2", "'first-empty'")):
        hint = re.escape(f" (did you mean {close}?)")
        with pytest.raises(ValueError, match=rf"unknown agent '{name}'{hint}: known are random, "
                                             r".*the registered first-empty, nth-empty-\*, "
                                             "each optionally with \\+killer"):
            agents.make(name, ENV)


@pytest.mark.parametrize("spec,close", [
    ("heuristc", "heuristic"), ("minmax", "minimax"), ("radnom", "random"),
    ("alphabet", "alphabeta"), ("pure-mcst-100", "pure-mcts-100"),  # the number kept
    ("pure-mcts-1OO", "pure-mcts-100"), ("alphabeta-l", "alphabeta-1"),  # letters for digits
    ("pure-mcts-1x0", None), ("pure-mcts", "pure-mcts-N' with a whole number N?"),
    ("heuristic-", "heuristic-N' with a whole number N?"), ("minimax-", "minimax"),
    ("minmax-3", "minimax"), ("alphabeta-3+kiler", "alphabeta-3+killer"),
    ("gomokubot+killr", "gomokubot+killer"),
    ("experiments/results/az_9x9_cpu/final", "experiments/results/az_9x9_cpu/final.gjx"),
    ("experiments/results/az_9x9_cpu/final.gj", "experiments/results/az_9x9_cpu/final.gjx"),
    ("experiments/results/az_9x9_cpu/final.gj@50", "experiments/results/az_9x9_cpu/final.gjx@50"),
    ("zzz", None), ("experiments/results/az_9x9_cpu/zzz.gj", None)])
def test_a_mistyped_agent_name_or_file_gets_the_closest_one(spec, close, monkeypatch):
    monkeypatch.chdir(pathlib.Path(__file__).resolve().parents[1])  # for the relative paths
    with pytest.raises(ValueError) as error:
        agents.make(spec, ENV)
    message = str(error.value)
    assert message.startswith(f"unknown agent {spec!r}")
    if close is None:
        assert "did you mean" not in message
    elif close.endswith("?"):  # a prefix without its number
        assert message.startswith(f"unknown agent {spec!r} (did you mean '{close}): known")
    else:
        assert message.startswith(f"unknown agent {spec!r} (did you mean {close!r}?): known")


@pytest.mark.parametrize("spec, moved", [
    ("heuristic+killer@0.5", "heuristic@0.5+killer"),
    ("heuristic-5+killer@0", "heuristic-5@0+killer"),
    ("runs/final.gjx+killer@64", "runs/final.gjx@64+killer"),
])
def test_killer_typed_before_the_at_gets_the_name_with_it_last(spec, moved):
    with pytest.raises(ValueError) as error:
        agents.make(spec, ENV)
    assert str(error.value).startswith(f"unknown agent {spec!r} (did you mean {moved!r}? "
                                       "+killer comes last): known")
    if moved.startswith("heuristic"):  # the name suggested is one that is made
        assert agents.make(moved, ENV).name == moved


@pytest.mark.parametrize("spec, name", [("pure-mcts-10@3", "pure-mcts-10"),
                                        ("uct-50@200+killer", "uct-50"),  # the killer's agent
                                        ("random@0.5", "random"), ("alphabeta-2@4", "alphabeta-2")])
def test_an_at_after_a_name_that_takes_none_is_said(spec, name):
    with pytest.raises(ValueError) as error:
        agents.make(spec, ENV)
    assert str(error.value).startswith(
        f"unknown agent {spec.removesuffix('+killer')!r} (did you mean {name!r}? '@' follows "
        "only an exported "
        "FILE.gjx, for its simulations, or a heuristic, for its block probability): known")


def test_a_missing_exported_file_gets_the_closest_one_in_its_folder(monkeypatch):
    monkeypatch.chdir(pathlib.Path(__file__).resolve().parents[1])
    for spec in ("experiments/results/az_9x9_cpu/finl.gjx",
                 "experiments/results/az_9x9_cpu/finl.gjx@50"):
        with pytest.raises(ValueError, match=re.escape(
                "experiments/results/az_9x9_cpu/finl.gjx: no such params file (in the current "
                "folder, ") + ".*" + re.escape(
                "(did you mean experiments/results/az_9x9_cpu/final.gjx?)")):
            agents.make(spec, ENV)
    with pytest.raises(ValueError, match=r"no such params file \(in the current folder, [^)]*\)$"):
        agents.make("experiments/results/az_9x9_cpu/other.gjx", ENV)


def test_the_play_page_lists_registered_agents(agent_registry):
    import json
    import threading
    import urllib.request

    from gomoku_jax import play

    agents.register_agent("first-empty", lambda spec, env: _NthEmpty(spec))
    agents.register_agent("nth-empty-", _nth_empty)
    server = play.make_server(play.PlayApp("first-empty", size=5, k=4), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/api/agents"
        with urllib.request.urlopen(url, timeout=60) as response:
            listed = json.loads(response.read())["baselines"]
    finally:
        server.shutdown()
        server.server_close()
    assert listed == [*play.BASELINES, "first-empty"]  # a prefix needs its suffix: not listed


def test_a_file_or_folder_that_is_not_an_exported_agent_is_named_and_never_read(
        tmp_path, monkeypatch):
    import pickle

    class Marker:  # unpickling it would create the file "ran"
        def __reduce__(self):
            return open, (str(tmp_path / "ran"), "w")

    monkeypatch.chdir(tmp_path)
    (tmp_path / "agent.pkl").write_bytes(pickle.dumps(Marker()))
    (tmp_path / "agent.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w')\n")
    (tmp_path / "README.md").write_text("# notes\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "final.gjx").write_bytes(b"")
    (tmp_path / "empty").mkdir()
    for spec, message in (
            ("README.md", "the file README.md exists but is not an exported agent"),
            ("agent.pkl", "the file agent.pkl exists but is not an exported agent"),
            ("agent.pkl@3+killer", "the file agent.pkl exists but is not an exported agent"),
            ("agent.py", "the file agent.py exists but is not an exported agent"),
            ("empty", "empty is a folder, not an exported agent"),
            ("run", r"run is a folder, not an exported agent .*did you mean run/final.gjx\?")):
        with pytest.raises(ValueError, match=message) as error:
            agents.make(spec, ENV)
        assert "unknown agent" not in str(error.value)
    assert not (tmp_path / "ran").exists()
    with pytest.raises(ValueError, match="unknown agent 'nothing.pkl'"):
        agents.make("nothing.pkl", ENV)  # no such file: an unknown name


def test_a_heuristic_built_in_python_is_named_as_make_names_it():
    # two heuristics of different strength in one match need different names
    for kwargs, name in ((dict(), "heuristic"), (dict(top_k=5), "heuristic-5"),
                         (dict(block_probability=0.5), "heuristic@0.5"),
                         (dict(top_k=1, block_probability=0.25), "heuristic-1@0.25"),
                         (dict(block_probability=0.5, name="weak"), "weak")):
        agent = agents.heuristic_agent(ENV, **kwargs)
        assert agent.name == name
        if "name" not in kwargs:
            assert agents.make(name, ENV).name == name
    match = arena.play_match(ENV, agents.heuristic_agent(ENV),
                             agents.heuristic_agent(ENV, block_probability=0.5), 2, seed=0)
    assert {r.black for r in match.records} == {"heuristic", "heuristic@0.5"}


# ------------------------------------------------------- a state of another board size

BIG = Gomoku(15, 5)
# every kind of agent `make` builds for a game (random plays any: see below)
_BUILT_FOR_ONE_GAME = ["heuristic", "heuristic-5", "heuristic@0.5", "heuristic+killer",
                       "pure-mcts-10", "pure-mcts-10+killer", "alphabeta-1", "negamax-1",
                       "gomokubot-2", "alphabeta-1+killer"]


def _built_for(name, built, given):
    return (rf"^agent '{re.escape(name)}' was built for {built}x{built} 5 in a row "
            rf"\(freestyle\), not a {given}x{given} board: build it for this game")


@pytest.mark.parametrize("name", _BUILT_FOR_ONE_GAME)
def test_an_agent_handed_a_board_of_another_size_names_the_mismatch(name):
    agent = agents.make(name, BIG)
    for deadline in (None, time.perf_counter() + 60):  # the budgeted searches' path too
        with pytest.raises(ValueError, match=_built_for(name, 15, 9)):
            agent.act(ENV.init(), jax.random.key(0), deadline)
    with pytest.raises(ValueError, match=_built_for(name, 9, 15)):
        agents.make(name, ENV).act(BIG.init(), jax.random.key(0))


@pytest.mark.parametrize("name", _BUILT_FOR_ONE_GAME)
def test_an_agent_handed_a_board_of_its_own_size_still_plays(name):
    state = _pos({(4, 4): 1, (3, 4): 2}, to_move=0)
    action = agents.make(name, ENV).act(state, jax.random.key(0))
    assert isinstance(action, int) and bool(state.legal_action_mask[action])


@pytest.mark.parametrize("name", _BUILT_FOR_ONE_GAME)
def test_an_agent_handed_a_game_of_another_k_or_rule_names_the_mismatch(name):
    """The board's size is not all: a 9x9 agent for five in a row refuses a 9x9 game of
    four in a row, or of the standard rule (the state's static data says which)."""
    agent = agents.make(name, ENV)
    for other in (Gomoku(9, 4), Gomoku(9, 5, "standard")):
        words = re.escape(f"9x9 {other.k} in a row ({other.rule})")
        with pytest.raises(ValueError, match=rf"^agent '{re.escape(name)}' was built for 9x9 5 "
                           rf"in a row \(freestyle\), not {words}: build it for this game"):
            agent.act(other.init(), jax.random.key(0))


def test_an_agent_asked_to_move_in_a_finished_game_says_it_is_over():
    """A finished game's every cell counts as legal (a step after the end changes
    nothing), so an agent would answer with some move: ``act`` refuses instead, for
    agents built for a game and for those that play any."""
    state = ENV.init()
    for action in (0, 9, 1, 10, 2, 11, 3, 12, 4):  # black: five in the first row
        state = ENV.step(state, action)
    assert bool(state.terminated)
    exported_like = agents.JaxAgent("net.gjx", lambda params, key, state: jnp.int32(0),
                                    {"w": jnp.zeros(2)}, env=ENV)
    for agent in (agents.make("heuristic", ENV), agents.make("random", ENV), exported_like):
        with pytest.raises(ValueError, match=rf"^agent '{re.escape(agent.name)}' was asked for "
                           r"a move in a game that is over \(black wins\)$"):
            agent.act(state, jax.random.key(0))
    truncated = ENV.init().replace(truncated=jnp.bool_(True))
    with pytest.raises(ValueError, match="game that is over"):
        agents.make("heuristic", ENV).act(truncated, jax.random.key(0))


def test_a_mismatched_board_is_named_for_every_agent_with_a_game():
    # minimax (small boards only), a trained network's agent, an agent of one's own
    minimax = agents.make("minimax", Gomoku(4, 4))
    with pytest.raises(ValueError, match=r"^agent 'minimax' was built for 4x4 4 in a row "
                       r"\(freestyle\), not a 3x3 board"):
        minimax.act(Gomoku(3, 3).init(), jax.random.key(0))
    trained = agents.JaxAgent("net.gjx", lambda params, key, state: jnp.int32(0),
                              {"w": jnp.zeros(2)}, env=BIG)
    with pytest.raises(ValueError, match=r"^agent 'net.gjx' was built for 15x15 5 in a row "
                       r"\(freestyle\), not a 9x9 board: its network was trained for that "
                       "game alone"):
        trained.act(ENV.init(), jax.random.key(0))

    class Own(agents.PythonAgent):
        name, env = "own", BIG

        def select(self, state, rng):
            return 0

    with pytest.raises(ValueError, match=_built_for("own", 15, 9)):
        Own().act(ENV.init(), jax.random.key(0))
    assert Own().act(BIG.init(), jax.random.key(0)) == 0
    # the random agent is built for no game: it plays any
    state = ENV.init()
    assert bool(state.legal_action_mask[agents.make("random", BIG).act(state, jax.random.key(0))])


def test_a_batch_of_another_size_is_refused_by_act_and_the_batch_policy():
    agent = agents.make("heuristic+killer", ENV)
    keys = jax.random.split(jax.random.key(0), 2)
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), ENV.init())
    with pytest.raises(ValueError, match=r"^agent 'heuristic\+killer' plays one game of 9x9 5 "
                       r"in a row \(freestyle\) at a time \(board \[9, 9\]\), got a board of "
                       r"shape \(2, 9, 9\)"):
        agent.act(batch, keys[0])
    other = jax.tree.map(lambda x: jnp.stack([x, x]), Gomoku(7, 5).init())
    policy = jax.jit(agent.batch_policy())  # the check reads static shapes while traced
    with pytest.raises(ValueError, match=r"^agent 'heuristic\+killer' was built for 9x9 5 in a "
                       r"row \(freestyle\): its batch policy takes a batch of those games "
                       r"\(board \[B, 9, 9\]\), got a board of shape \(2, 7, 7\)"):
        policy(None, keys, other)
    assert np.asarray(policy(None, keys, batch)).shape == (2,)
    four = jax.tree.map(lambda x: jnp.stack([x, x]), Gomoku(9, 4).init())  # the same board
    with pytest.raises(ValueError, match=r"its batch policy takes a batch of those games, got "
                       r"games of 9x9 4 in a row \(freestyle\)"):
        policy(None, keys, four)
    # the check leaves compiled match loops shared between equal policies: the agent's
    # name, which only its messages use, is not part of the policy's equality or hash
    one, two = (agents.heuristic_agent(ENV, name=name).batch_policy() for name in "ab")
    assert one == two and hash(one) == hash(two)
    assert one != agents.heuristic_agent(BIG, name="a").batch_policy()  # another game


def test_killer_given_twice_is_refused():
    with pytest.raises(ValueError, match=r"'heuristic\+killer\+killer': \+killer is given more "
                                         r"than once; once is enough"):
        agents.make("heuristic+killer+killer", ENV)
    assert agents.make("heuristic+killer", ENV).name == "heuristic+killer"
