"""The arena: reproducible matches, colours and openings, forfeits, round robins."""

import json
import random
import re
import types
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gomoku_jax import agents, arena
from helpers import line_of
from gomoku_jax.game import Gomoku

ENV = Gomoku(7, 4)


def _replay(env, record):
    """Replay a record in the engine; return the final state."""
    s = env.init()
    for a in record.moves:
        assert bool(s.legal_action_mask[a]) and not bool(s.terminated)
        s = env.step(s, a)
    return s


class _PyRandom(agents.PythonAgent):
    def __init__(self, name="py-random"):
        self.name = name

    def select(self, state, rng):
        return int(rng.choice(np.flatnonzero(np.asarray(state.legal_action_mask))))


@pytest.mark.parametrize("pair", ["jax", "python"])
def test_match_is_reproducible_alternates_colours_and_replays(pair):
    a = agents.heuristic_agent(ENV)
    b = agents.random_agent() if pair == "jax" else _PyRandom()
    m1 = arena.play_match(ENV, a, b, 6, seed=3, opening_stones=2)
    m2 = arena.play_match(ENV, a, b, 6, seed=3, opening_stones=2)
    assert [r.moves for r in m1.records] == [r.moves for r in m2.records]
    m3 = arena.play_match(ENV, a, b, 6, seed=4, opening_stones=2)
    assert [r.moves for r in m1.records] != [r.moves for r in m3.records]
    for g, r in enumerate(m1.records):
        assert (r.black, r.white) == ((a.name, b.name) if g % 2 == 0 else (b.name, a.name))
        assert r.opening == 2 and r.forfeit is None
        s = _replay(ENV, r)
        assert bool(s.terminated) and int(s.winner) == r.winner
    # Each pair of games shares its opening, with the colours swapped.
    for g in range(0, 6, 2):
        assert m1.records[g].moves[:2] == m1.records[g + 1].moves[:2]
    assert len({m1.records[g].moves[:2] for g in range(0, 6, 2)}) > 1
    score = m1.score(a.name)
    assert score["wins"] + score["losses"] + score["draws"] == score["games"] == 6
    assert score["wins_as_black"] + score["wins_as_white"] == score["wins"]


def test_an_agent_built_for_another_game_is_refused_before_a_move():
    other = Gomoku(5, 4)
    random = agents.random_agent()  # plays any game
    assert random.env is None
    for built in (agents.make("heuristic", other),  # a JAX agent: lockstep
                  agents.make("alphabeta-1", other),  # a Python agent: one game at a time
                  agents.make("heuristic+killer", Gomoku(7, 4, "standard"))):
        # Before: a broadcasting error from inside the compiled loop, or every game
        # forfeited with an IndexError.
        with pytest.raises(ValueError, match=rf"agent '{re.escape(built.name)}' was built for "
                                             rf"\d+x\d+ 4 in a row \(\w+\), not 7x7 4 in a row"):
            arena.play_match(ENV, random, built, 2)
        with pytest.raises(ValueError, match="was built for"):
            agents.with_killer(built, ENV)
        assert "build it for this game (e.g. agents.make(name, env))" in str(
            pytest.raises(ValueError, agents.check_env, built, ENV).value)
    # an agent with a trained network cannot be built again for another game
    trained = agents.JaxAgent("net.gjx", lambda params, key, state: jnp.int32(0),
                              params={"w": jnp.zeros(3)}, env=other)
    with pytest.raises(ValueError, match=r"'net.gjx' was built for 5x5 4 in a row \(freestyle\)"
                                         r", not 7x7 4 in a row \(freestyle\): its network was "
                                         r"trained for that game alone: play it there, or "
                                         r"train one for this game"):
        arena.play_match(ENV, random, trained, 2)
    assert arena.play_match(ENV, random, agents.make("heuristic", ENV), 2).score("random")[
        "games"] == 2
    # a round robin refuses it before its first match, not when its own turn comes
    field = [random, agents.make("heuristic", ENV), agents.make("heuristic-2", other)]
    with pytest.MonkeyPatch.context() as patch, pytest.raises(
            ValueError, match="agent 'heuristic-2' was built for 5x5"):
        patch.setattr(arena, "play_match", lambda *a, **k: pytest.fail("a match was played"))
        arena.round_robin(ENV, field, 2)
    with pytest.raises(ValueError, match="each agent plays once; repeated: random"):
        arena.round_robin(ENV, [random, random], 2)


def test_a_score_asked_for_an_agent_not_in_the_match_is_a_key_error():
    match = arena.play_match(ENV, agents.random_agent(), agents.make("heuristic-2", ENV), 2)
    with pytest.raises(KeyError, match="'heuristic' did not play in this match; its agents "
                                       "are 'random', 'heuristic-2'"):
        match.score("heuristic")


def test_openings_are_near_the_centre_and_never_decided():
    env = Gomoku(15, 5)
    for seed in range(20):
        cells = arena.opening_moves(env, jax.random.key(seed), 8)
        assert len(set(cells)) == 8
        assert all(abs(r - 7) <= 3 and abs(c - 7) <= 3 for r, c in map(lambda a: divmod(a, 15), cells))
        s = env.play_moves([divmod(a, 15) for a in cells])
        assert not bool(s.terminated)
    with pytest.raises(ValueError, match="at most 2\\*\\(k-1\\) = 8"):
        arena.opening_moves(env, jax.random.key(0), 9)
    with pytest.raises(ValueError, match="non-negative"):
        arena.opening_moves(env, jax.random.key(0), -1)


def test_a_numpy_integer_of_opening_stones_gives_reports_that_write_as_json():
    import json

    env = Gomoku(7, 4)
    players = [agents.make("random", env), agents.make("heuristic", env)]
    match = arena.play_match(env, *players, games=2, opening_stones=np.int64(2))
    assert type(match.records[0].opening) is int
    assert json.loads(json.dumps(match.to_dict()))["games"][0]["opening"] == 2
    report = arena.round_robin(env, players, 2, opening_stones=np.int64(2)).report()
    assert json.loads(json.dumps(report))["games"][1]["opening"] == 2


class _Cheat(agents.PythonAgent):
    def __init__(self, action, name="cheat"):
        self.name, self.action = name, action

    def select(self, state, rng):
        if self.action == "raise":
            raise RuntimeError("out of ideas")  # _RAISES
        if self.action == "index":
            return np.zeros(ENV.num_actions)[100]  # _INDEXES
        if self.action == "stdlib":
            return random.choice([])  # _CHOOSES
        return self.action


@pytest.mark.parametrize("action, reason", [
    (0, "played (0, 0), an occupied cell"),
    (49, "played action 49, off the 7x7 board"),
    ("e4", "returned 'e4', not an action index"),
    (jnp.float32(3), "returned a float32 scalar (3.0), not an action index"),
    # the agent's own line that raised, not NumPy's or the arena's
    ("raise", f"raised RuntimeError (at {line_of(__file__, '# _RAISES')}): out of ideas"),
    ("index", f"raised IndexError (at {line_of(__file__, '# _INDEXES')}): index 100 is out of "
              "bounds for axis 0 with size 49"),
    # raised inside Python's own library (random.py): still the agent's line
    ("stdlib", f"raised IndexError (at {line_of(__file__, '# _CHOOSES')}): Cannot choose "
               "from an empty sequence"),
])
def test_illegal_output_loses_with_its_reason(action, reason):
    first = _Cheat(action)  # (0, 0) is legal once; it always comes back to it
    m = arena.play_match(ENV, first, agents.random_agent(), 4, seed=0)
    for r in m.records:
        loser = 0 if r.black == "cheat" else 1
        assert r.winner == 1 - loser
        assert r.forfeit == f"cheat {reason}"


def test_illegal_jax_policy_is_a_forfeit_in_the_batched_loop():
    always_centre = agents.JaxAgent("centre", lambda p, k, s: jnp.int32(24))
    m = arena.play_match(ENV, always_centre, agents.random_agent(), 4, seed=0)
    for r in m.records:
        s = _replay(ENV, r)
        centre_player = 0 if r.black == "centre" else 1
        assert r.winner == 1 - centre_player  # its second move repeats the centre
        assert r.forfeit == "centre played (3, 3), an occupied cell"
        assert not bool(s.terminated)  # the replayed legal moves alone did not end it
    off_board = agents.JaxAgent("off", lambda p, k, s: jnp.int32(ENV.num_actions + 2))
    m = arena.play_match(ENV, off_board, always_centre, 2)
    assert {r.forfeit for r in m.records} == {"off played action 51, off the 7x7 board"}


def test_a_batched_match_with_64_bit_actions_names_the_illegal_cell():
    with jax.enable_x64(True):  # jnp.argmax answers int64 there; the match's loop keeps int32
        first_empty = agents.JaxAgent("first-empty", lambda p, k, s: jnp.argmax(
            s.legal_action_mask))
        centre = agents.JaxAgent("centre64", lambda p, k, s: jnp.int64(24))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no int64-into-int32 scatter (JAX's FutureWarning)
            m = arena.play_match(ENV, first_empty, centre, 2, seed=0)
    assert {r.forfeit for r in m.records} == {"centre64 played (3, 3), an occupied cell"}


def test_an_agent_answering_a_jax_or_numpy_integer_scalar_plays_that_move():
    """``jnp.argmax(...)`` is the action it holds, from a Python agent as from any other."""
    class ArgmaxAgent(agents.PythonAgent):
        name = "argmax"

        def select(self, state, rng):
            return jnp.argmax(state.legal_action_mask)  # the first empty cell

    class NumpyAgent(ArgmaxAgent):
        name = "numpy-argmax"

        def select(self, state, rng):
            return np.array(np.argmax(np.asarray(state.legal_action_mask)))

    for agent in (ArgmaxAgent(), NumpyAgent()):
        action = agent.act(ENV.init(), jax.random.key(0))
        assert type(action) is int and action == 0
        m = arena.play_match(ENV, agent, agents.random_agent(), 2, seed=0)
        assert all(r.forfeit is None for r in m.records)
    # an act that the Agent class does not wrap (a static method) is judged the same way
    class Unwrapped(agents.Agent):
        name = "unwrapped"
        act = staticmethod(lambda state, key, deadline=None: jnp.argmax(state.legal_action_mask))

    m = arena.play_match(ENV, Unwrapped(), agents.random_agent(), 2, seed=0)
    assert all(r.forfeit is None for r in m.records)
    # a one-element array or a bool array is still not an action
    assert arena.illegal_reason(ENV, ENV.init(), agents.plain_action(jnp.array([3]))) == (
        "returned an int32 array of shape (1,), not an action index")
    assert isinstance(agents.plain_action(np.array(True)), np.ndarray)  # left as it is


def test_bad_match_arguments():
    a, b = agents.random_agent(), agents.heuristic_agent(ENV)
    with pytest.raises(ValueError, match="positive integer"):
        arena.play_match(ENV, a, b, 0)
    with pytest.raises(ValueError, match="different names"):
        arena.play_match(ENV, a, agents.random_agent(), 2)


def test_round_robin_report_adds_up():
    ags = [agents.random_agent(), agents.heuristic_agent(ENV),
           agents.with_killer(agents.random_agent(), ENV, name="killer")]
    t = arena.round_robin(ENV, ags, 10, seed=0, opening_stones=2)
    rep = t.report()
    names = rep["agents"]
    assert names == ["random", "heuristic", "killer"]
    matrix = np.asarray(rep["win_rate_matrix"], dtype=float)
    assert np.isnan(np.diag(matrix)).all()
    for i, n in enumerate(names):
        a = rep["per_agent"][n]
        assert a["games"] == 20 and a["wins"] + a["losses"] + a["draws"] == 20
        assert a["wins_as_black"] + a["wins_as_white"] == a["wins"]
        # The row's win rates times games per pair give the agent's wins.
        assert np.nansum(matrix[i]) * 10 == pytest.approx(a["wins"])
    # Off the diagonal a pair's win rates and draws fill its games.
    for i in range(3):
        for j in range(i + 1, 3):
            assert matrix[i, j] + matrix[j, i] <= 1.0 + 1e-9
    c = rep["colours"]
    assert c["games"] == 30 and c["black_wins"] + c["white_wins"] + c["draws"] == 30
    assert sum(p["games"] for p in rep["pairings"]) == 30
    elo = {p["name"]: p for p in rep["ratings"]["players"]}
    assert elo["random"]["rating"] == 0.0  # the anchor
    assert elo["heuristic"]["rating"] > elo["random"]["rating"]
    md = t.to_markdown(rep)
    for heading in ("Win rate", "Per agent", "Pairings", "Elo"):
        assert heading in md
    with pytest.raises(ValueError, match="each agent plays once; repeated: random"):
        arena.round_robin(ENV, [agents.random_agent(), agents.random_agent()], 2)


def test_ladder_climbs_until_the_agent_wins_too_few():
    strong = agents.heuristic_agent(ENV)

    def opponent(sims):  # random below 300 "simulations", the heuristic itself from 300 on
        return agents.random_agent(f"rand-{sims}") if sims < 300 else agents.heuristic_agent(
            ENV, name=f"heur-{sims}")

    result = arena.ladder(ENV, strong, start=100, step=100, games=6, pass_wins=5,
                          max_simulations=1000, make_opponent=opponent, opening_stones=2)
    sims = [lvl["simulations"] for lvl in result["levels"]]
    assert sims == [100, 200, 300]  # stops at the first level it fails
    assert [lvl["opponent"] for lvl in result["levels"]] == ["rand-100", "rand-200", "heur-300"]
    assert result["cleared"] == 200
    assert all(lvl["games"] == 6 for lvl in result["levels"])
    assert result["levels"][-1]["wins"] < 5 <= result["levels"][0]["wins"]
    capped = arena.ladder(ENV, strong, start=100, step=50, games=2, pass_wins=1,
                          max_simulations=200, make_opponent=lambda s: agents.random_agent(f"r{s}"))
    assert [lvl["simulations"] for lvl in capped["levels"]] == [100, 150, 200]
    assert capped["cleared"] == 200
    with pytest.raises(ValueError, match="pass_wins must be from 1 to games=10"):
        arena.ladder(ENV, strong, pass_wins=11)


def _round_robin_report():
    return arena.round_robin(ENV, [agents.random_agent(), agents.heuristic_agent(ENV)],
                             2).report()


def _three_agents_report():  # a matrix whose transpose differs from it
    return {"agents": ["a", "b", "c"], "colours": {"games": 12},
            "win_rate_matrix": [[None, 0.75, 0.4], [0.25, None, 1.0], [0.5, 0.0, None]]}


@pytest.mark.parametrize("make_report", [_round_robin_report, _three_agents_report])
def test_heatmap_draws_the_win_rate_matrix(tmp_path, make_report):
    report = make_report()
    path = tmp_path / "heat.png"
    assert arena.heatmap(report, path) == path
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig = arena.heatmap_figure(report)  # what heatmap saved
    names, rates = report["agents"], report["win_rate_matrix"]
    ax, colour_bar = fig.axes
    assert ax.get_title() == f"Round robin, {report['colours']['games']} games"
    assert [t.get_text() for t in ax.get_xticklabels()] == names
    assert [t.get_text() for t in ax.get_yticklabels()] == names
    (image,) = ax.images
    cells = np.ma.filled(np.ma.asarray(image.get_array(), float), np.nan)
    assert cells.shape == (len(names), len(names))
    texts = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text()
             for t in ax.texts}
    for i, row in enumerate(rates):  # row i: agent i's win rate against agent j, in %
        for j, rate in enumerate(row):
            if rate is None:
                assert np.isnan(cells[i, j]) and texts[i, j] == "—"
            else:
                assert cells[i, j] == pytest.approx(100 * rate)
                assert texts[i, j] == f"{100 * rate:.0f}%"
    assert image.get_clim() == (0, 100)
    assert colour_bar.get_ylabel() == "win rate (%)"


def test_batched_and_one_game_at_a_time_matches_agree():
    """The lockstep loop and the sequential path play the same games for agents whose
    moves do not depend on the key; on a CPU backend search agents take the sequential
    path (their network inside the lockstep loop is many times slower there)."""
    import dataclasses

    from gomoku_jax import search

    cfg = search.SearchConfig(algorithm="gumbel", num_simulations=8, gumbel_scale=0.0,
                              max_num_considered_actions=4, backend="linear")
    searcher = search.search_agent("search", ENV, search.uniform_evaluate(ENV), None, cfg)
    assert searcher.batched is (jax.default_backend() != "cpu")
    first = agents.JaxAgent(
        "first", lambda params, key, state: jnp.argmax(state.legal_action_mask).astype(jnp.int32))
    runs = {}
    for batched in (True, False):
        a = dataclasses.replace(searcher, batched=batched)
        runs[batched] = arena.play_match(ENV, a, first, 4, seed=5, opening_stones=2)
    assert [r.moves for r in runs[True].records] == [r.moves for r in runs[False].records]
    assert [r.winner for r in runs[True].records] == [r.winner for r in runs[False].records]
    assert len({r.moves for r in runs[True].records}) > 1  # the openings differ
    # which path ran is recorded (the seconds mean the program's time split evenly or not)
    assert runs[True].lockstep is True and runs[False].lockstep is False
    assert runs[False].to_dict()["lockstep"] is False
    assert agents.with_killer(dataclasses.replace(first, batched=False), ENV).batched is False


def test_narrow_integer_answers_are_judged_alike_batched_or_not():
    """Actions as int8 or uint8 on a board of more cells than those types hold (17x17,
    289), both agents answering in one type: a batched match judges them in that type, as
    the game by game path does.
    The first empty cell as int8 is legal until cell 128, which int8 cannot say (-128:
    off the board; k = 17 keeps a line of stones from ending the game before); a uint8
    cell answered twice is an occupied cell (and no stone on cell 255 or a forfeit blamed
    on the other side)."""
    import dataclasses

    env = Gomoku(17, 17)

    def first(dtype):
        return lambda params, key, state: jnp.argmax(state.legal_action_mask).astype(dtype)

    def fixed(cell):
        return lambda params, key, state: jnp.uint8(cell)

    pairs = [(agents.JaxAgent("first8", first(jnp.int8)),
              agents.JaxAgent("also8", first(jnp.int8))),
             (agents.JaxAgent("ten", fixed(10)), agents.JaxAgent("twenty", fixed(20)))]
    for a, b in pairs:
        runs = {batched: arena.play_match(env, dataclasses.replace(a, batched=batched),
                                          dataclasses.replace(b, batched=batched), 2, seed=1)
                for batched in (True, False)}
        assert runs[True].lockstep and not runs[False].lockstep
        got = [[(r.moves, r.winner, r.forfeit) for r in runs[batched].records]
               for batched in (True, False)]
        assert got[0] == got[1], (a.name, got)
        assert all(forfeit for _, _, forfeit in got[0])
    first8 = arena.play_match(env, *pairs[0], 2).records
    assert first8[0].moves == tuple(range(128)) and "first8 played action -128" in (
        first8[0].forfeit)
    ten = arena.play_match(env, *pairs[1], 2).records
    assert ten[0].moves == (10, 20) and ten[0].winner == 1 and ten[0].forfeit.startswith(
        "ten played (0, 10), an occupied cell")


def test_heatmap_makes_room_for_long_names(tmp_path):
    """Two agents, one named by a long file path: the picture is laid out without
    matplotlib giving up (it used to warn that the layout could not be applied)."""
    names = ["experiments/results/some_run_with_a_long_name/final.gjx@3200", "heuristic"]
    report = {"agents": names, "win_rate_matrix": [[None, 0.75], [0.25, None]],
              "colours": {"games": 20}}
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        arena.heatmap(report, tmp_path / "long.png")
    assert (tmp_path / "long.png").stat().st_size > 1000


_CTRL_C_CHILD = """
import functools, os, signal, sys, threading
signal.signal(signal.SIGINT, signal.default_int_handler)
import jax, jax.numpy as jnp
from gomoku_jax import agents, arena
from gomoku_jax.game import Gomoku

env = Gomoku(7, 4)

@functools.partial(jax.jit, static_argnums=(1, 2))
def slow(x, games, actions):  # a match's results after seconds of work, well past the
    # timer's 0.5 s even on an idle machine (4,000 steps took 0.37 s there)
    y = jax.lax.fori_loop(0, 40000, lambda i, y: jnp.tanh(y @ y), x)
    zero = (y[0, 0] > 9).astype(jnp.int32)
    return (jnp.zeros((games, actions), jnp.int32) + zero, jnp.zeros((games,), jnp.int32),
            jnp.zeros((games,), bool) | (zero > 0), jnp.zeros((games,), jnp.int32))

x = jnp.full((256, 256), 1e-3)
jax.block_until_ready(slow(x, 2, env.num_actions))  # compiled before the match
running = []
timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))

def slow_lockstep(env, *args):  # the match's compiled loop, as long as `slow`
    out = slow(x, args[-1].shape[0], env.num_actions)
    running.append(out[0])
    timer.start()  # Ctrl-C once the match is under way
    return out

arena._lockstep = slow_lockstep
try:
    arena.play_match(env, agents.random_agent(), agents.make("heuristic", env), 2)
    print("finished")
except KeyboardInterrupt:
    print("interrupted", "running" if not running[0].is_ready() else "done")
sys.stdout.flush()
os._exit(0)  # as the command line does after Ctrl-C
"""


def test_ctrl_c_stops_a_compiled_match_while_it_runs():
    # In a child process: the interrupted fetch leaves XLA's computation running there.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _CTRL_C_CHILD], capture_output=True,
                          text=True, timeout=300)
    # the interrupt came while XLA still computed: np.asarray of the result raised it only
    # once the whole match had been played ("interrupted done")
    assert done.stdout.split() == ["interrupted", "running"], done.stdout + done.stderr


def test_names_and_other_non_agents_are_refused_before_a_game():
    random, heuristic = agents.random_agent(), agents.heuristic_agent(ENV)
    string = r"must be an Agent \(e\.g\. agents\.make\('{0}', env\)\), got the string '{0}'"
    with pytest.raises(TypeError, match="agent_a " + string.format("random")):
        arena.play_match(ENV, "random", "heuristic", 2)
    with pytest.raises(TypeError, match="agent_b " + string.format("heuristic")):
        arena.play_match(ENV, random, "heuristic", 2)
    with pytest.raises(TypeError, match=r"env must be a Gomoku \(e\.g\. Gomoku\(9, 5\)\), "
                                        "got int 9"):
        arena.play_match(9, random, heuristic, 2)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(arena, "_play_match", lambda *a, **k: pytest.fail("a match was played"))
        with pytest.raises(TypeError, match=r"agents\[1\] " + string.format("heuristic")):
            arena.round_robin(ENV, [random, "heuristic"], 2)
        with pytest.raises(TypeError, match=r"agents must be a list of Agents, got "
                                            r"JaxAgent\('random'\)"):
            arena.round_robin(ENV, random, 2)
        with pytest.raises(ValueError, match="games_per_pair must be a positive integer, got 0"):
            arena.round_robin(ENV, [random, heuristic], 0)
        with pytest.raises(TypeError, match="agent " + string.format("heuristic")):
            arena.ladder(ENV, "heuristic", start=2, step=2, games=1, pass_wins=1,
                         max_simulations=2)
        with pytest.raises(TypeError, match=r"make_opponent\(2\) must be an Agent"):
            arena.ladder(ENV, heuristic, start=2, step=2, games=2, pass_wins=1,
                         max_simulations=2, make_opponent=lambda sims: "pure-mcts-2")
    # a generator of agents is a field like any other
    t = arena.round_robin(ENV, (a for a in (random, heuristic)), 2)
    assert t.names == ["random", "heuristic"] and len(t.records) == 2


@pytest.mark.parametrize("seed", [jax.random.key(0), None, 1.5, -1, 2**64, "0", True])
def test_seeds_are_integers(seed):
    random, heuristic = agents.random_agent(), agents.heuristic_agent(ENV)
    match = r"seed must be an integer from 0 to 4294967295, got "
    with pytest.raises(ValueError, match=match):
        arena.play_match(ENV, random, heuristic, 2, seed=seed)
    with pytest.raises(ValueError, match=match):
        arena.round_robin(ENV, [random, heuristic], 2, seed=seed)
    with pytest.raises(ValueError, match=match):
        arena.ladder(ENV, heuristic, seed=seed)


def test_numpy_and_largest_seeds_play():
    random, heuristic = agents.random_agent(), agents.heuristic_agent(ENV)
    same = [arena.play_match(ENV, random, heuristic, 2, seed=s) for s in (3, np.int64(3))]
    assert [r.moves for r in same[0].records] == [r.moves for r in same[1].records]
    # the round robin offsets the seed of each pairing past the largest seed
    t = arena.round_robin(ENV, [random, heuristic, agents.make("heuristic-2", ENV)], 1,
                          seed=2**32 - 1)
    assert len(t.records) == 3


def test_opening_moves_want_a_key():
    with pytest.raises(ValueError, match=r"opening_moves: key must be a JAX random key "
                                         r"\(jax\.random\.key\(seed\)\), got int 0"):
        arena.opening_moves(ENV, 0, 2)
    assert arena.opening_moves(ENV, jax.random.PRNGKey(0), 2) == arena.opening_moves(
        ENV, jax.random.key(0), 2)


def test_a_match_answers_for_an_agent_or_its_name():
    random, heuristic = agents.random_agent(), agents.heuristic_agent(ENV)
    match = arena.play_match(ENV, random, heuristic, 2)
    assert match.score(heuristic) == match.score("heuristic")
    assert match.seconds_per_move(heuristic) == match.seconds_per_move("heuristic")
    with pytest.raises(KeyError, match="'heurstic' did not play in this match; its agents are "
                                       "'random', 'heuristic'"):
        match.seconds_per_move("heurstic")


def _tournament(winners: dict) -> arena.Tournament:
    """A round robin without playing: (a, b) -> each game's winner (None a draw), a black
    in even games."""
    names, matches = [], []
    for (a, b), results in winners.items():
        names += [n for n in (a, b) if n not in names]
        records = []
        for g, w in enumerate(results):
            black, white = (a, b) if g % 2 == 0 else (b, a)
            records.append(arena.GameRecord(black, white, (0,), 0,
                                            -1 if w is None else int(w == white)))
        matches.append(arena.MatchResult((a, b), records, {a: 0.0, b: 0.0}, {a: 1, b: 1}))
    return arena.Tournament(names, matches)


def test_report_flags_an_anchor_that_lost_every_game():
    t = _tournament({("random", "x"): ["x"] * 6, ("random", "y"): ["y"] * 6,
                     ("x", "y"): ["x"] * 3 + ["y"] * 2 + [None]})
    rep = t.report()
    assert rep["ratings"]["anchor"] == "random"
    assert rep["ratings"]["unmeasured"] == {"random": "all losses"}
    assert "| random (anchor, all losses) |" in rep["ratings_table"]
    other = rep["ratings_measured"]
    assert other["anchor"] == "y" and other["unmeasured"] == {"random": "all losses"}
    x = {p["name"]: p for p in rep["ratings"]["players"]}["x"]
    x_from_y = {p["name"]: p for p in other["players"]}["x"]
    y = {p["name"]: p for p in rep["ratings"]["players"]}["y"]
    assert x_from_y["rating"] == pytest.approx(x["rating"] - y["rating"])
    assert x_from_y["sd"] < x["sd"]  # the games, not the prior, set this one
    md = t.to_markdown(rep)
    assert ("### Elo (penalised maximum likelihood: a Gaussian prior of sd 1000 Elo on each "
            "rating difference; 95% interval)") in md
    assert "maximum likelihood, 95%" not in md
    assert "random lost every game, so its maximum-likelihood rating is minus infinity" in md
    assert "The same ratings measured from y, the weakest agent" in md
    assert rep["ratings_measured_table"] in md
    # Centred ratings (no agent named random) with an agent that lost every game: the
    # mean moves with the prior, so the second table measures from within the group.
    centred = _tournament({("w", "x"): ["x"] * 6, ("w", "y"): ["y"] * 6,
                           ("x", "y"): ["x"] * 3 + ["y"] * 2 + [None]}).report()
    assert centred["ratings"]["anchor"] is None
    assert centred["ratings"]["groups"] == [["x", "y"], ["w"]]
    assert "centred on the mean" in centred["ratings"]["note"]
    assert centred["ratings_measured"]["anchor"] == "y"
    # Two agents beat two others in every game, nobody with a perfect record: the note
    # names the groups; measured from random, whose group has two agents, no second table.
    split = _tournament({("random", "h"): ["h"] * 7 + ["random"] * 3,
                         ("x", "y"): ["x", "y"] * 3, ("x", "random"): ["x"] * 4,
                         ("x", "h"): ["x"] * 4, ("y", "random"): ["y"] * 4,
                         ("y", "h"): ["y"] * 4}).report()
    assert split["ratings"]["unmeasured"] == {}
    assert "groups, best first: {x, y}; {random, h}" in split["ratings"]["note"]
    assert "ratings_measured" not in split
    # No flagged anchor: no second table, no note; an old report still renders.
    fair = _tournament({("random", "x"): ["x", "random", "x", None]}).report()
    assert "ratings_measured" not in fair and fair["ratings"]["note"] == ""
    old = dict(fair, ratings={k: fair["ratings"][k] for k in ("anchor", "confidence",
                                                               "prior_sigma", "players")})
    assert "prior of sd 1000 Elo" in t.to_markdown(old)


def test_report_refuses_an_unknown_anchor():
    t = _tournament({("random", "x"): ["x", "random"], ("x", "y"): ["x", "y"],
                     ("random", "y"): ["y", None]})
    with pytest.raises(ValueError, match=r"anchor 'randon' is not among the players "
                                         r"\['random', 'x', 'y'\]"):
        t.report(anchor="randon")
    assert t.report(anchor="x")["ratings"]["anchor"] == "x"
    assert t.report(anchor=None)["ratings"]["anchor"] is None
    # the default, random, centres the ratings of a field without it
    assert _tournament({("a", "b"): ["a", "b"]}).report()["ratings"]["anchor"] is None


def test_heatmap_refuses_what_is_not_a_report_or_a_picture_path(tmp_path):
    t = _tournament({("random", "x"): ["x", "random"]})
    report = t.report()
    with pytest.raises(TypeError, match=r"report must be a round robin's report "
                                        r"\(Tournament\.report\(\)\), got a Tournament; pass "
                                        r"its \.report\(\)"):
        arena.heatmap(t, tmp_path / "h.png")
    with pytest.raises(TypeError, match="got the path '.*h.png'; the report comes first"):
        arena.heatmap(str(tmp_path / "h.png"), report)
    for name in ("heat", "heat.txt"):
        with pytest.raises(ValueError, match=r"path must end in a picture format's suffix "
                                             rf"\(\.png, \.svg, \.pdf, \.\.\.\), got '.*{name}'"):
            arena.heatmap(report, tmp_path / name)
    assert list(tmp_path.iterdir()) == []
    assert arena.heatmap(report, tmp_path / "h.svg") == tmp_path / "h.svg"


# ---------------------------------------------------------------- ladder settings
def test_ladder_takes_numpy_settings_as_ints_and_its_result_writes_as_json():
    import json

    strong = agents.heuristic_agent(ENV)
    result = arena.ladder(ENV, strong, start=np.int64(100), step=np.int32(100),
                          games=np.int64(2), pass_wins=np.int64(1),
                          max_simulations=np.int64(200),
                          make_opponent=lambda s: agents.random_agent(f"r{s}"))
    assert json.loads(json.dumps(result)) == result
    assert [lvl["simulations"] for lvl in result["levels"]] == [100, 200]
    for value in (result["games_per_level"], result["pass_wins"], result["cleared"],
                  *(lvl["simulations"] for lvl in result["levels"])):
        assert type(value) is int


def test_ladder_refuses_a_max_simulations_below_start():
    heuristic = agents.heuristic_agent(ENV)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(arena, "_play_match", lambda *a, **k: pytest.fail("a match was played"))
        with pytest.raises(ValueError, match=re.escape(
                "ladder: max_simulations must be at least start=5 (or no level is played), "
                "got 2")):
            arena.ladder(ENV, heuristic, start=5, max_simulations=2,
                         make_opponent=lambda s: pytest.fail("an opponent was made"))
        with pytest.raises(ValueError, match="ladder: step must be a positive integer, got "
                                             "True"):
            arena.ladder(ENV, heuristic, step=True)
        with pytest.raises(ValueError, match="ladder: opponent must be one of pure-mcts, uct"):
            arena.ladder(ENV, heuristic, opponent="mcts")


def test_the_ladder_climbs_against_the_opponent_named():
    """``opponent="uct"``: the reports' plain pure MCTS at every level."""
    made = []
    with pytest.MonkeyPatch.context() as patch:
        def play(env, a, b, *rest):  # wins two levels, then loses
            made.append(b)
            return types.SimpleNamespace(score=lambda name: {
                "wins": 2 if len(made) < 3 else 0, "games": 2})

        patch.setattr(arena, "_play_match", play)
        result = arena.ladder(ENV, agents.heuristic_agent(ENV), start=20, step=10, games=2,
                              pass_wins=1, opponent="uct")
    assert result["cleared"] == 30 and [a.name for a in made] == ["uct-20", "uct-30", "uct-40"]
    assert not any(a.config.solver or a.config.decisive_expansion for a in made)


@pytest.mark.parametrize("answer, reason", [
    (lambda state: jnp.float32(40.7), "returned a float32 scalar (40.7), not an action index"),
    (lambda state: state.legal_action_mask.astype(jnp.int32),  # the mask, not a move
     "returned an int32 array of shape (49,), not an action index")])
def test_a_jax_policy_that_answers_no_action_forfeits_in_a_match_of_batched_agents(
        answer, reason):
    """In a match of two batched JAX agents the wrong answer is found while the lockstep
    program is traced; the games are then played one at a time, each a forfeit saying
    what the answer was (a float used to be played as its integer part one game at a
    time and to crash the batched program)."""
    wrong = agents.JaxAgent("wrong", lambda params, key, state: answer(state))
    first = agents.JaxAgent(
        "first", lambda params, key, state: jnp.argmax(state.legal_action_mask).astype(jnp.int32))
    match = arena.play_match(ENV, wrong, first, 4, seed=0)
    assert match.lockstep is False
    assert [r.forfeit for r in match.records] == [f"wrong {reason}"] * 4
    assert match.score("first")["wins"] == 4
    assert arena.play_match(ENV, first, agents.random_agent(), 2, seed=0).lockstep is True


def test_a_jax_policy_that_raises_forfeits_in_a_match_of_batched_agents():
    """A batched JAX policy that raises while the lockstep program is traced costs it its
    games, as a raising agent's does one game at a time: the match goes on, each game a
    forfeit naming the policy's own line, instead of the error ending the match (and a
    whole round robin with it)."""
    def broken(params, key, state):
        raise IndexError("index 100 is out of bounds")  # the broken policy's line

    def bad_shape(params, key, state):
        return jnp.argmax(state.board.reshape(-1) + jnp.ones(7))  # the bad shape's line

    first = agents.JaxAgent(
        "first", lambda params, key, state: jnp.argmax(state.legal_action_mask).astype(jnp.int32))
    for policy, marker, error in ((broken, "# the broken policy's line", "IndexError"),
                                  (bad_shape, "# the bad shape's line", "TypeError")):
        match = arena.play_match(ENV, agents.JaxAgent("broken", policy), first, 4, seed=0)
        assert match.lockstep is False
        assert match.score("first")["wins"] == 4
        at = line_of(__file__, marker)
        assert all(r.forfeit.startswith(f"broken raised {error} (at {at}): ")
                   for r in match.records), [r.forfeit for r in match.records]


# ------------------------------------------------------------ resumable round robins
def _field():
    return [agents.random_agent(), agents.heuristic_agent(ENV), _PyRandom()]


def _interrupted_after(monkeypatch, matches: int):
    """``arena._play_match`` that raises KeyboardInterrupt once ``matches`` were played;
    returns the list of pairs it was asked to play."""
    real, asked = arena._play_match, []

    def play(env, a, b, *args, **kwargs):
        if len(asked) == matches:
            raise KeyboardInterrupt
        asked.append((a.name, b.name))
        return real(env, a, b, *args, **kwargs)

    monkeypatch.setattr(arena, "_play_match", play)
    return asked


def test_an_interrupted_round_robin_plays_only_its_unfinished_matches(tmp_path, monkeypatch):
    whole = arena.round_robin(ENV, _field(), 2, seed=5, opening_stones=2)
    path = tmp_path / "rr.jsonl"
    first = _interrupted_after(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):
        arena.round_robin(ENV, _field(), 2, seed=5, opening_stones=2, checkpoint=path)
    assert first == [("random", "heuristic")]
    assert len(path.read_text().splitlines()) == 2  # the settings and one match
    monkeypatch.undo()
    rest = _interrupted_after(monkeypatch, 10)
    again = arena.round_robin(ENV, _field(), 2, seed=5, opening_stones=2, checkpoint=path)
    assert rest == [("random", "py-random"), ("heuristic", "py-random")]
    assert [k["agents"] for k in again.kept] == [["random", "heuristic"]] and whole.kept == []
    assert again.kept[0]["device"] == arena.device_description()
    report = again.report()
    assert report["kept_matches"] == again.kept and whole.report()["kept_matches"] == []
    assert ("1 of 3 matches were played by an earlier run of this round robin, stopped "
            "before its end") in again.to_markdown(report)
    # the same games, results and report as the round robin played at once
    assert [m.records for m in again.matches] == [m.records for m in whole.matches]
    assert report["games"] == whole.report()["games"]
    kept = again.matches[0]
    assert kept.lockstep == whole.matches[0].lockstep and kept.decisions == (
        whole.matches[0].decisions)
    # run again: everything is kept, nothing is played
    monkeypatch.undo()
    none = _interrupted_after(monkeypatch, 0)
    assert len(arena.round_robin(ENV, _field(), 2, seed=5, opening_stones=2,
                                 checkpoint=path).kept) == 3
    assert none == []


def _untimed(text: str) -> list:
    """A checkpoint's lines as JSON, the matches' thinking times and the time each was
    played left out (a match played again is played at another second)."""
    import json

    lines = [json.loads(line) for line in text.splitlines()]
    return [{k: v for k, v in line.items() if k not in ("seconds", "date")} for line in lines]


def test_a_round_robin_checkpoint_of_other_settings_or_damaged_is_refused(tmp_path):
    path = tmp_path / "rr.jsonl"
    field = _field()[:2]
    arena.round_robin(ENV, field, 2, seed=1, checkpoint=path, identity={"random": "v1"})
    before = path.read_text()
    for changes, match in [({"seed": 2}, r"seed: kept 1, now 2"),
                           ({"games_per_pair": 4}, r"games_per_pair: kept 2, now 4"),
                           ({"identity": {"random": "v2"}},
                            r'identity: kept \{"random": "v1"\}, now \{"random": "v2"\}'),
                           ({"env": Gomoku(7, 5)}, r'game: kept "gomoku-7x7-k4-freestyle", now '
                                                   r'"gomoku-7x7-k5-freestyle"')]:
        kwargs = {"seed": 1, "games_per_pair": 2, "identity": {"random": "v1"}, **changes}
        env = kwargs.pop("env", ENV)
        with pytest.raises(arena.CheckpointMismatch, match=rf"checkpoint {path} holds matches "
                                                           rf"of another round robin \(.*{match}"):
            arena.round_robin(env, [agents.random_agent(), agents.heuristic_agent(env)],
                              kwargs.pop("games_per_pair"), checkpoint=path, **kwargs)
        assert path.read_text() == before  # refused, not overwritten
    with pytest.raises(arena.CheckpointMismatch, match=r"agents: kept \[\"random\", "
                                                       r"\"heuristic\"\], now"):
        arena.round_robin(ENV, field[::-1], 2, seed=1, checkpoint=path,
                          identity={"random": "v1"})
    # a match line cut short (interrupted while written) is played again, the file mended
    lines = before.splitlines()
    path.write_text(lines[0] + "\n" + lines[1][:40])
    again = arena.round_robin(ENV, field, 2, seed=1, checkpoint=path, identity={"random": "v1"})
    assert again.kept == [] and _untimed(path.read_text()) == _untimed(before)
    # a damaged line in the middle, or a file that is not a checkpoint: refused
    path.write_text(lines[0] + "\n" + lines[1].replace('"winner": ', '"winner": 7 + ') + "\n")
    with pytest.raises(arena.CheckpointRefused, match=rf"{path}:2: a damaged match"):
        arena.round_robin(ENV, field, 2, seed=1, checkpoint=path, identity={"random": "v1"})
    # a match that holds another number of games than the round robin plays per pair
    # (its header edited, or lines of two checkpoints put together): refused, not used
    for games in (1, 3):
        match = json.loads(lines[1])
        match["records"] = (match["records"] * 2)[:games]
        path.write_text(lines[0] + "\n" + json.dumps(match) + "\n")
        with pytest.raises(arena.CheckpointRefused,
                           match=rf"{path}:2: a damaged match \(the match of random and "
                                 rf"heuristic holds {games} games, but this round robin plays "
                                 r"2 per pair\)"):
            arena.round_robin(ENV, field, 2, seed=1, checkpoint=path, identity={"random": "v1"})
        assert json.loads(path.read_text().splitlines()[1]) == match  # not overwritten
    # a pair kept twice, or named by booleans (which Python counts as 0 and 1): refused
    boolean = json.loads(lines[1]) | {"pair": [False, True]}
    for text, why in ((lines[1] + "\n" + lines[1], r"3: a damaged match \(the match of "
                                                   r"random and heuristic is kept twice\)"),
                      (json.dumps(boolean), r"2: a damaged match \(pair \[False, True\] is "
                                            r"not one of the round robin's\)")):
        path.write_text(lines[0] + "\n" + text + "\n")
        with pytest.raises(arena.CheckpointRefused, match=rf"{path}:{why}"):
            arena.round_robin(ENV, field, 2, seed=1, checkpoint=path, identity={"random": "v1"})
    path.write_text('{"games": []}\n')
    with pytest.raises(arena.CheckpointRefused, match=rf"{path}:1: not a round robin "
                                                     r"checkpoint"):
        arena.round_robin(ENV, field, 2, seed=1, checkpoint=path)
    with pytest.raises(ValueError, match="is a folder"):
        arena.round_robin(ENV, field, 2, checkpoint=tmp_path)


def test_odd_numbers_of_games_are_warned_of():
    random, heuristic = agents.random_agent(), agents.heuristic_agent(ENV)
    with warnings.catch_warnings():  # a count refused is not warned of as odd first
        warnings.simplefilter("error", arena.ArenaWarning)
        with pytest.raises(ValueError, match="games"):
            arena.play_match(ENV, random, heuristic, -1)
    with pytest.warns(arena.ArenaWarning, match="3 games is odd, so random plays black 2 "
                                                "times and heuristic 1"):
        arena.play_match(ENV, random, heuristic, 3)
    with pytest.warns(arena.ArenaWarning, match="1 games per pair is odd, so in each pair the "
                                                "first agent plays black 1 times and the "
                                                "other 0"):
        arena.round_robin(ENV, [random, heuristic], 1)
    with pytest.warns(arena.ArenaWarning, match="3 games per level is odd, so at each level "
                                                "heuristic plays black 2 times and its "
                                                "opponent 1"):
        arena.ladder(ENV, heuristic, start=2, step=2, games=3, pass_wins=1, max_simulations=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", arena.ArenaWarning)
        arena.play_match(ENV, random, heuristic, 2)
        arena.round_robin(ENV, [random, heuristic], 2)
        arena.ladder(ENV, heuristic, start=2, step=2, games=2, pass_wins=1, max_simulations=2)
