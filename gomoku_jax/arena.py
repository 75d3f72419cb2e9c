"""Matches between agents: colours alternating, optional random openings, seeded.

`play_match(env, a, b, games)` plays ``games`` games with ``a`` black in the even-numbered
games and white in the odd ones. With ``opening_stones=K`` each pair of games starts from
the same K random stones near the centre (alternating colours, black first) with the
colours swapped, so deterministic agents do not replay one game and neither side gets the
better opening. Everything derives from ``seed``: the same seed gives the same games.

When both agents are `JaxAgent`s that allow it (``batched``) the whole match runs as one
compiled loop over all games in lockstep; otherwise games are played one after the other,
one move at a time. Search agents on a CPU backend do not batch: there the network inside
the lockstep loop inside the search loop runs many times slower than one game at a time
(the CPU default's 100-game evaluation took over an hour in lockstep, a few minutes one
game at a time).

An agent that returns an illegal action (or raises) loses that game; the record keeps the
reason. An odd number of games gives one agent black once more: `play_match`,
`round_robin` and `ladder` warn of it (`ArenaWarning`).

A round robin given a ``checkpoint`` file keeps each finished match in it (JSON lines: the
settings, then one match a line), so one interrupted (Ctrl-C, a crash, a batch system's
time limit) and run again with the same settings plays only the matches it had not
finished.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import platform
import time
import warnings
from pathlib import Path
from typing import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gomoku_jax import compiled
from gomoku_jax import io as gio
from gomoku_jax import ratings as _ratings
from gomoku_jax.agents import Agent, JaxAgent, check_env, plain_action
from gomoku_jax.config import SEED_MAX, check_count, check_seed, plain_scalars
from gomoku_jax.game import Gomoku, State, cell_or_off, check_key


def device_description() -> str:
    """The device this process computes on, in words: the CPU's model and cores, or the
    accelerator's kind and count, with the jax version. Runs and reports record it beside
    their figures."""
    dev = jax.devices()[0]
    if dev.platform == "cpu":
        model = platform.processor() or "CPU"
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        cores = f"{os.cpu_count()} cores"
        usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        if usable is not None and usable != os.cpu_count():
            cores += f", this process pinned to {usable}"
        return f"cpu: {model}, {cores} (jax {jax.__version__})"
    return f"{dev.platform}: {dev.device_kind} x{jax.device_count()} (jax {jax.__version__})"


__all__ = [
    "ArenaWarning",
    "CheckpointMismatch",
    "CheckpointRefused",
    "GameRecord",
    "MatchResult",
    "Tournament",
    "device_description",
    "heatmap",
    "ladder",
    "opening_moves",
    "play_match",
    "round_robin",
]


class ArenaWarning(UserWarning):
    """A match or round robin whose colours do not balance (an odd number of games); the
    command line prints it as one line."""


class CheckpointRefused(ValueError):
    """A round robin's ``checkpoint`` file it cannot use: damaged, not a checkpoint, or
    of other settings (`CheckpointMismatch`). It is refused, not overwritten."""


class CheckpointMismatch(CheckpointRefused):
    """A round robin's ``checkpoint`` file holds matches of other settings (other agents,
    games, seed, board or openings): it is refused, not overwritten."""


@dataclasses.dataclass(frozen=True)
class GameRecord:
    """One finished game."""

    black: str
    white: str
    moves: tuple[int, ...]  # every action played, opening included
    opening: int  # how many of ``moves`` were the random opening
    winner: int  # -1 draw, 0 black, 1 white
    forfeit: str | None = None  # why the loser lost, when it played an illegal move

    @property
    def length(self) -> int:
        return len(self.moves)

    def result_for(self, name: str) -> float:
        """1 win, 0.5 draw, 0 loss for the player ``name``."""
        if self.winner < 0:
            return 0.5
        return 1.0 if (self.black, self.white)[self.winner] == name else 0.0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self) | {"moves": list(self.moves)}


@dataclasses.dataclass
class MatchResult:
    """The games of one match and the thinking time each agent used."""

    names: tuple[str, str]
    records: list[GameRecord]
    seconds: dict[str, float]  # total thinking time per agent
    decisions: dict[str, int]  # moves each agent chose (openings excluded)
    # whether the games ran as one batched lockstep program (both agents batched JAX
    # policies): each agent's seconds are then the program's time split evenly, and its
    # decisions half of all the moves (both policies answer at every ply)
    lockstep: bool = False

    def _player(self, who) -> str:
        """The name of ``who`` (a name or an `Agent`), KeyError when it did not play."""
        name = who.name if isinstance(who, Agent) else who
        if name not in self.names:
            raise KeyError(f"{name!r} did not play in this match; its agents are "
                           f"{', '.join(map(repr, self.names))}")
        return name

    def score(self, name: str | Agent) -> dict:
        """Wins / losses / draws of ``name`` (or of an `Agent`, by its name), also split by
        colour (KeyError for a name that did not play)."""
        name = self._player(name)
        out = dict(wins=0, losses=0, draws=0, wins_as_black=0, wins_as_white=0, games=0)
        for r in self.records:
            if name not in (r.black, r.white):
                continue
            out["games"] += 1
            s = r.result_for(name)
            if s == 0.5:
                out["draws"] += 1
            elif s == 1.0:
                out["wins"] += 1
                out["wins_as_black" if r.black == name else "wins_as_white"] += 1
            else:
                out["losses"] += 1
        return out

    def seconds_per_move(self, name: str | Agent) -> float:
        """Mean thinking time of ``name`` (or of an `Agent`) per move it chose."""
        name = self._player(name)
        return self.seconds[name] / max(self.decisions[name], 1)

    def to_dict(self) -> dict:
        return {
            "names": list(self.names),
            "scores": {n: self.score(n) for n in self.names},
            "seconds_per_move": {n: self.seconds_per_move(n) for n in self.names},
            "lockstep": self.lockstep,
            "games": [r.to_dict() for r in self.records],
        }


def check_opening_stones(env: Gomoku, stones, name: str = "opening_stones") -> int:
    """``stones`` as an int (NumPy integers too, so that the records it goes into write as
    JSON); ValueError (naming the setting ``name``) unless it is an integer from 0 to
    ``2(k-1)``: more could make an opening that is already won."""
    if isinstance(stones, bool) or not isinstance(stones, (int, np.integer)) or stones < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {stones!r}")
    if stones > 2 * (env.k - 1):
        raise ValueError(
            f"{name} must be at most 2*(k-1) = {2 * (env.k - 1)} so that no opening "
            f"is already won, got {stones}"
        )
    return int(stones)


def check_game(env) -> None:
    """TypeError unless ``env`` is a `Gomoku`."""
    if not isinstance(env, Gomoku):
        raise TypeError(f"env must be a Gomoku (e.g. Gomoku(9, 5)), got {_described(env)}")


def check_agent(argument: str, agent) -> None:
    """TypeError (naming ``argument``) unless ``agent`` is an `Agent`: a name is not one."""
    if not isinstance(agent, Agent):
        example = agent if isinstance(agent, str) else "random"
        raise TypeError(f"{argument} must be an Agent (e.g. agents.make({example!r}, env)), "
                        f"got {_described(agent)}")


def _described(value) -> str:
    """``value`` in words for an error: its type and repr."""
    if isinstance(value, str):
        return f"the string {value!r}"
    text = repr(value)
    return text if text.startswith(type(value).__name__) else f"{type(value).__name__} {text}"


def opening_moves(env: Gomoku, key: jax.Array, stones: int) -> list[int]:
    """``stones`` random distinct cells near the centre (within a square of side about
    ``2 * ceil(sqrt(stones)) + 1``), played alternately from black. At most ``2(k-1)``
    stones, so an opening can never already be a win."""
    check_game(env)
    check_key(key, "opening_moves: key")
    check_opening_stones(env, stones)
    n = env.size
    radius = int(np.ceil(np.sqrt(stones))) if stones else 0
    lo, hi = max(0, (n - 1) // 2 - radius), min(n - 1, n // 2 + radius)
    cells = np.array([r * n + c for r in range(lo, hi + 1) for c in range(lo, hi + 1)])
    if stones > len(cells):
        raise ValueError(f"opening_stones={stones} do not fit near the centre of a {n}x{n} board")
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())
    return [int(a) for a in rng.choice(cells, size=stones, replace=False)]


def illegal_reason(env: Gomoku, state: State, action) -> str | None:
    """Why ``action``, an agent's answer in ``state``, loses the game (None: it is a
    legal move). An action is a Python or NumPy integer, or a 0-d integer array (JAX's
    too; `agents.plain_action`), not a bool, on an empty cell;
    the text follows the agent's name in a forfeit (``"a played action 81, off the 9x9
    board"``)."""
    action = plain_action(action)  # (done by every agent's act; here for any other caller)
    if isinstance(action, (np.ndarray, jax.Array)) and not isinstance(
            action, jax.core.Tracer):  # its dtype and shape, not a repr of many lines
        kind = f"a{'n' * (str(action.dtype)[0] in 'aeiou')} {action.dtype}"
        shown = (f"{kind} scalar ({plain_scalars(np.asarray(action)[()])!r})"
                 if action.ndim == 0 else f"{kind} array of shape {tuple(action.shape)}")
        return f"returned {shown}, not an action index"
    if isinstance(action, bool) or not isinstance(action, (int, np.integer)):
        return f"returned {action!r}, not an action index"
    return _off_or_occupied(env.size, int(action), lambda a: int(
        np.asarray(state.board).reshape(-1)[a]) != 0)


def _off_or_occupied(n: int, action: int, occupied: Callable[[int], bool]) -> str | None:
    """`illegal_reason`'s text for an integer ``action`` on an ``n`` x ``n`` board whose
    cells ``occupied`` tells (None: a legal move)."""
    if not 0 <= action < n * n:
        return f"played action {action}, off the {n}x{n} board"
    if occupied(action):
        return f"played {divmod(action, n)}, an occupied cell"
    return None


def raised_reason(err: Exception) -> str:
    """What an agent that raised ``err`` did, for a forfeit or a note: its type, the
    agent's own line that raised it (`io.raised_at`; none when it came from this
    framework, e.g. an engine that exited) and its message, e.g.
    ``"raised IndexError (at my_agents.py:42): index 100 is out of bounds"``. The line
    comes first: reports show a forfeit's first line."""
    at = gio.raised_at(err)
    where = f" (at {Path(at.filename).name}:{at.lineno})" if at else ""
    return f"raised {type(err).__name__}{where}: {err}"


def _forfeit(env: Gomoku, state: State) -> State:
    """The mover loses at once (the engine's forfeit, by an off-board action)."""
    return env._jit_step(state, jnp.int32(-1))


def _play_one(env: Gomoku, black: Agent, white: Agent, opening: Sequence[int], key,
              seconds: dict, decisions: dict) -> GameRecord:
    state = env.init()
    for a in opening:
        state = env._jit_step(state, jnp.int32(a))
    moves, forfeit = list(opening), None
    players = (black, white)
    ply = 0
    while not bool(state.terminated):
        agent = players[int(state.current_player)]
        start = time.perf_counter()
        try:
            action = agent.act(state, jax.random.fold_in(key, ply))
        except Exception as err:  # an agent's crash costs it the game, not the match
            action, reason = None, raised_reason(err)
        else:
            reason = illegal_reason(env, state, action)
        seconds[agent.name] += time.perf_counter() - start
        decisions[agent.name] += 1
        ply += 1
        if reason is not None:
            forfeit = f"{agent.name} {reason}"
            state = _forfeit(env, state)
            break
        moves.append(int(action))
        state = env._jit_step(state, jnp.int32(action))
    return GameRecord(black.name, white.name, tuple(moves), len(opening), int(state.winner), forfeit)


class _NotActions(Exception):
    """Raised while `_lockstep` is traced: an agent answers a batch with something other
    than ``[B]`` integer actions; the match is then played game by game, where each such
    answer is a forfeit that says what it was."""


def _batch_actions(answer, batch: int):
    """``answer`` when it is ``[batch]`` integer actions (static facts, checked while
    traced), else `_NotActions`."""
    dtype = getattr(answer, "dtype", None)
    if jnp.shape(answer) != (batch,) or dtype is None or not jnp.issubdtype(
            dtype, jnp.integer):
        raise _NotActions()
    return answer


@functools.partial(jax.jit, static_argnames=("env", "batch_a", "batch_b"))
def _lockstep(env, batch_a, batch_b, params_a, params_b, key, a_is_black, openings):
    """All games of a JAX-vs-JAX match at once. Returns moves [B, N*N] (-1 padded), the
    winners [B], a flag [B] for games lost by an illegal action and that action [B]."""
    batch, n_open = openings.shape
    nn = env.num_actions
    step = jax.vmap(env.step)
    act_a, act_b = batch_a, batch_b  # the agents' policies over the batch
    state = jax.vmap(env.init)(jax.random.split(key, batch))
    moves = jnp.full((batch, nn), -1, jnp.int32)
    for t in range(n_open):
        state = step(state, openings[:, t])
        moves = moves.at[:, t].set(openings[:, t])

    def body(carry):
        t, state, moves, illegal, bad = carry
        keys = jax.random.split(jax.random.fold_in(key, t), 2 * batch)
        a_moves = (state.current_player == 0) == a_is_black
        answers = [_batch_actions(act(params, k, state), batch) for act, params, k in (
            (act_a, params_a, keys[:batch]), (act_b, params_b, keys[batch:]))]
        # each in its own dtype (an int8 answer against 225 cells, a uint8 one and -1):
        # the cell, -1 off the board; and the answer as said, for the forfeit's message
        cell = jnp.where(a_moves, *(cell_or_off(x, nn) for x in answers))
        said = jnp.where(a_moves, *(x.astype(bad.dtype) for x in answers))
        live = ~state.terminated
        ok = (cell >= 0) & jnp.take_along_axis(
            state.legal_action_mask, jnp.clip(cell, 0, nn - 1)[:, None], axis=1)[:, 0]
        illegal = illegal | (live & ~ok)
        bad = jnp.where(live & ~ok, said, bad)
        action = jnp.where(ok, cell, -1)  # -1: the engine's forfeit
        moves = moves.at[:, t].set(jnp.where(live & ok, action, moves[:, t]))
        return t + 1, step(state, action), moves, illegal, bad

    def cond(carry):
        t, state = carry[:2]
        return (t < nn) & ~jnp.all(state.terminated)

    init = (jnp.int32(n_open), state, moves, jnp.zeros((batch,), bool),
            jnp.zeros((batch,), jax.dtypes.canonicalize_dtype(jnp.int64)))  # int32 but x64
    _, state, moves, illegal, bad = jax.lax.while_loop(cond, body, init)
    return moves, state.winner, illegal, bad


def check_match_seed(seed, name: str = "seed") -> int:
    """``seed`` as an int (NumPy integers too), ValueError (naming ``name``) unless it is
    one from 0 to `config.SEED_MAX`: the seed of a match, round robin or ladder."""
    seed = int(seed) if isinstance(seed, np.integer) else seed
    if isinstance(seed, jax.Array):  # its repr spans lines
        raise ValueError(f"{name} must be an integer from 0 to {SEED_MAX}, got a JAX array "
                         f"of {seed.dtype}: the arena makes its keys from an int seed")
    check_seed("", name, seed)
    return seed


def _warn_unbalanced(games: int, unit: str, first: str, second: str) -> None:
    """An `ArenaWarning` when ``games`` (``unit``: " per pair", ...) is odd: ``first`` has
    black once more than ``second``. Its caller's caller is named as where it came from."""
    if games % 2:
        warnings.warn(f"{games} games{unit} is odd, so {first} plays black {games // 2 + 1} "
                      f"times and {second} {games // 2}; an even number balances the "
                      "colours", ArenaWarning, stacklevel=3)


def play_match(env: Gomoku, agent_a: Agent, agent_b: Agent, games: int, seed: int = 0,
               opening_stones: int = 0, progress: bool = False) -> MatchResult:
    """Play ``games`` games between two agents (``agent_a`` black in even games). An agent
    built for another game (`agents.check_env`) is refused; an odd ``games`` is warned
    of (`ArenaWarning`): ``agent_a`` has black once more."""
    check_count("games", games)
    _warn_unbalanced(games, "", *(getattr(a, "name", "?") for a in (agent_a, agent_b)))
    return _play_match(env, agent_a, agent_b, games, check_match_seed(seed), opening_stones,
                       progress)


def _play_match(env: Gomoku, agent_a: Agent, agent_b: Agent, games: int, seed: int,
                opening_stones: int = 0, progress: bool = False) -> MatchResult:
    """`play_match` for a checked seed (round robins and ladders offset theirs)."""
    check_game(env)
    check_agent("agent_a", agent_a)
    check_agent("agent_b", agent_b)
    check_count("games", games)
    opening_stones = check_opening_stones(env, opening_stones)
    for agent in (agent_a, agent_b):
        check_env(agent, env)
    if agent_a.name == agent_b.name:
        raise ValueError(f"the two agents need different names, both are {agent_a.name!r}")
    compiled.release_if_crowded()  # each pairing may compile programs of its own
    key = jax.random.key(seed)
    openings = [opening_moves(env, jax.random.fold_in(key, 10_000 + g // 2), opening_stones)
                for g in range(games)]
    names = (agent_a.name, agent_b.name)
    seconds = {n: 0.0 for n in names}
    decisions = {n: 0 for n in names}
    records: list[GameRecord] = []
    lockstep = all(isinstance(a, JaxAgent) and a.batched for a in (agent_a, agent_b))
    if lockstep:
        a_is_black = jnp.asarray([g % 2 == 0 for g in range(games)])
        start = time.perf_counter()
        try:
            moves, winners, illegal, bad = _lockstep(
                env, agent_a.batch_policy(), agent_b.batch_policy(), agent_a.params,
                agent_b.params, key,
                a_is_black, jnp.asarray(openings, jnp.int32).reshape(games, opening_stones))
        except _NotActions:  # a policy that answers no action: its games are forfeits
            lockstep = False
        except Exception as err:  # noqa: BLE001
            # a policy's own code that raised while traced (not a refusal of the
            # framework's, such as a search tree too big for the device): played game by
            # game, where each raise is a forfeit naming the policy's line
            if gio.raised_at(err) is None:
                raise
            lockstep = False
    if lockstep:
        # jax.device_get, not np.asarray: it lets Ctrl-C through while the match runs (a
        # blocking np.asarray holds it until the last game ends)
        moves, winners, illegal, bad = map(np.asarray,
                                           jax.device_get((moves, winners, illegal, bad)))
        elapsed = time.perf_counter() - start
        for g in range(games):
            black, white = names if g % 2 == 0 else names[::-1]
            played = tuple(int(a) for a in moves[g] if a >= 0)
            forfeit = None
            if illegal[g]:
                loser = (black, white)[1 - int(winners[g])]
                why = _off_or_occupied(env.size, int(bad[g]), played.__contains__)
                forfeit = f"{loser} {why or f'played action {int(bad[g])}'}"
            records.append(GameRecord(black, white, played, opening_stones, int(winners[g]), forfeit))
        total = sum(r.length - r.opening for r in records) + int(illegal.sum())
        for n in names:  # both policies run on every ply of the lockstep loop
            seconds[n] = elapsed / 2
            decisions[n] = max(total // 2, 1)
    else:
        iterator = range(games)
        if progress:
            from tqdm import tqdm

            iterator = tqdm(iterator, desc=f"{names[0]} vs {names[1]}")
        for g in iterator:
            black, white = (agent_a, agent_b) if g % 2 == 0 else (agent_b, agent_a)
            records.append(_play_one(env, black, white, openings[g], jax.random.fold_in(key, g),
                                     seconds, decisions))
    return MatchResult(names, records, seconds, decisions, lockstep)


def forfeit_lines(reasons: Sequence[str], width: int = 300) -> list[str]:
    """Markdown lines naming why games were forfeited (an agent that raised or played an
    illegal move), each distinct reason once with its count; empty when none was."""
    if not reasons:
        return []
    counts: dict[str, int] = {}
    for reason in reasons:
        counts[reason] = counts.get(reason, 0) + 1
    lines = [f"**{len(reasons)} game{'s' if len(reasons) > 1 else ''} forfeited** (the "
             "named agent lost it):", ""]
    for reason, n in counts.items():
        lines.append(f"- {n} x {gio.brief(reason, width)}")
    return lines + [""]


def _colour_split(records: Sequence[GameRecord]) -> dict:
    """Black wins, white wins and draws among ``records``."""
    return {
        "black_wins": sum(r.winner == 0 for r in records),
        "white_wins": sum(r.winner == 1 for r in records),
        "draws": sum(r.winner < 0 for r in records),
    }


@dataclasses.dataclass
class Tournament:
    """A round robin: every pair of agents played one match. ``kept``: the matches read
    back from a checkpoint rather than played (see `round_robin`), each as ``{"agents":
    [a, b], "device": ..., "date": ...}``, where and when it was played."""

    names: list[str]
    matches: list[MatchResult]
    kept: list[dict] = dataclasses.field(default_factory=list)

    @property
    def records(self) -> list[GameRecord]:
        return [r for m in self.matches for r in m.records]

    def report(self, anchor: str | None = "random") -> dict:
        """Seed 000 section 5's tables plus Elo ratings and time per move (seed 003). The
        ratings are measured from ``anchor`` (ValueError for a name that did not play);
        None, or the default ``"random"`` when no agent has that name, centres them. When
        the anchor won or lost every game the prior, not the games, sets every rating
        measured from it: ``ratings_measured`` (and its table) then gives the same fit
        measured from the weakest agent of the largest of the groups the games measure
        (`ratings.Ratings.groups`: those who did neither, when they scored against each
        other), when it has two agents or more; so it does for centred ratings when the
        games split the agents into groups.
        ``games``: every game (`GameRecord.to_dict`: the players, the moves, the winner),
        from which everything else here can be checked."""
        names, records = self.names, self.records
        index = {n: i for i, n in enumerate(names)}
        if anchor == _ratings.DEFAULT_ANCHOR and anchor not in names:
            anchor = None
        results = [(index[r.black], index[r.white], r.result_for(r.black)) for r in records]
        elo = _ratings.elo_from_games(names, results, anchor=anchor)
        extra = {}
        groups = elo.groups()
        largest = max(groups, key=len)  # the first (best) of the largest, on a tie
        alone = elo.anchor is None or any(g == (elo.anchor,) for g in groups)
        if len(groups) > 1 and alone and len(largest) > 1:
            other = _ratings.elo_from_games(names, results,
                                            anchor=min(largest, key=elo.__getitem__))
            extra = {"ratings_measured": other.to_dict(),
                     "ratings_measured_table": other.table()}
        k = len(names)
        wins = np.zeros((k, k), int)
        games = np.zeros((k, k), int)
        pairings = []
        for m in self.matches:
            a, b = m.names
            lengths = [r.length for r in m.records]
            pairings.append({
                "pairing": f"{a} vs {b}",
                "games": len(m.records),
                "mean_moves": float(np.mean(lengths)),
                **_colour_split(m.records),
            })
        for r in records:
            i, j = index[r.black], index[r.white]
            games[i, j] += 1
            games[j, i] += 1
            if r.winner == 0:
                wins[i, j] += 1
            elif r.winner == 1:
                wins[j, i] += 1
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.where(games > 0, wins / np.maximum(games, 1), np.nan)
        per_agent = {}
        for n in names:
            total = dict(wins=0, losses=0, draws=0, wins_as_black=0, wins_as_white=0, games=0)
            seconds, decisions = 0.0, 0
            for m in self.matches:
                if n in m.names:
                    for key, value in m.score(n).items():
                        total[key] += value
                    seconds += m.seconds[n]
                    decisions += m.decisions[n]
            total["win_rate"] = total["wins"] / max(total["games"], 1)
            total["seconds_per_move"] = seconds / max(decisions, 1)
            per_agent[n] = total
        return {
            "agents": names,
            "win_rate_matrix": [[None if np.isnan(x) else float(x) for x in row] for row in rate],
            "per_agent": per_agent,
            "pairings": pairings,
            "colours": {"games": len(records), **_colour_split(records)},
            "forfeits": [r.forfeit for r in records if r.forfeit],
            "ratings": elo.to_dict(),
            "ratings_table": elo.table(),
            **extra,
            "kept_matches": self.kept,  # played by an earlier, interrupted run
            "games": [r.to_dict() for r in records],  # to check the report game by game
        }

    def to_markdown(self, report: dict | None = None) -> str:
        report = report or self.report()
        names = report["agents"]
        config = report.get("config")  # the command line's settings, when it added them
        heading = []
        if config:
            game = config["game"]
            heading = [f"{game['size']}x{game['size']}, {game['k']} in a row ({game['rule']}); "
                       f"{config['games_per_pair']} games per pairing, "
                       f"{config['opening_stones']} random opening stone(s), "
                       f"seed {config['seed']}.", ""]
        kept = report.get("kept_matches") or []
        if kept:
            heading += [f"{len(kept)} of {len(report['pairings'])} matches were played by an "
                        "earlier run of this round robin, stopped before its end (on "
                        f"{', '.join(sorted({k['device'] for k in kept}))}).", ""]
        lines = heading + forfeit_lines(report["forfeits"]) + [
                 "### Win rate (row agent's wins against the column agent)", "",
                 "| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        for n, row in zip(names, report["win_rate_matrix"]):
            cells = ["—" if x is None else f"{100 * x:.0f}%" for x in row]
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
        lines += ["", "### Per agent", "",
                  "| agent | W | L | D | win % | W as black | W as white | s / move |",
                  "|---|---|---|---|---|---|---|---|"]
        for n in names:
            a = report["per_agent"][n]
            lines.append(f"| {n} | {a['wins']} | {a['losses']} | {a['draws']} | "
                         f"{100 * a['win_rate']:.1f}% | {a['wins_as_black']} | {a['wins_as_white']} | "
                         f"{a['seconds_per_move']:.4f} |")
        lines += ["", "### Pairings", "", "| pairing | games | mean moves | black wins | white wins | draws |",
                  "|---|---|---|---|---|---|"]
        for p in report["pairings"]:
            lines.append(f"| {p['pairing']} | {p['games']} | {p['mean_moves']:.1f} | "
                         f"{p['black_wins']} | {p['white_wins']} | {p['draws']} |")
        c = report["colours"]
        lines += ["", f"Black won {c['black_wins']}, white {c['white_wins']}, draws {c['draws']} "
                  f"of {c['games']} games.", "", _elo_heading(report["ratings"]), ""]
        lines.append(report["ratings_table"])
        note = report["ratings"].get("note")
        if note:
            lines += ["", note]
        if "ratings_measured" in report:
            lines += ["", f"The same ratings measured from {report['ratings_measured']['anchor']}, "
                      "the weakest agent of the largest group whose differences the games "
                      "measure (of those that neither won nor lost every game, when they "
                      "scored against each other), so that the intervals show what the games "
                      "say:", "", report["ratings_measured_table"]]
        return "\n".join(lines)


def _elo_heading(ratings: dict) -> str:
    """The Markdown heading of a report's Elo table: how the ratings were fitted."""
    pct = f"{100 * ratings.get('confidence', 0.95):g}% interval"
    sigma = ratings.get("prior_sigma")
    if sigma is None:
        return f"### Elo (maximum likelihood, {pct})"
    return (f"### Elo (penalised maximum likelihood: a Gaussian prior of sd {sigma:g} Elo on "
            f"each rating difference; {pct})")


def check_entrants(names: Sequence[str]) -> None:
    """ValueError unless ``names`` are at least two, each once."""
    if len(names) < 2:
        raise ValueError(f"a round robin needs at least two agents, got {list(names)}")
    repeated = sorted({name for name in names if list(names).count(name) > 1})
    if repeated:
        raise ValueError(f"each agent plays once; repeated: {', '.join(repeated)}")


def round_robin(env: Gomoku, agents: Sequence[Agent], games_per_pair: int, seed: int = 0,
                opening_stones: int = 0, progress: bool = False, checkpoint=None,
                identity: Mapping[str, str] | None = None) -> Tournament:
    """Every pair of ``agents`` plays a match of ``games_per_pair`` games (an odd number
    is warned of, `ArenaWarning`: the first agent of each pair has black once more).

    ``checkpoint``: a file that keeps every finished match (JSON lines, written after each
    match), so that a round robin interrupted and run again with the same settings plays
    only the matches it had not finished; the file stays when the round robin ends (remove
    it once the reports are kept). A match cut off while it was being written is played
    again. A checkpoint of other settings (agents, ``games_per_pair``, ``seed``, the board,
    ``opening_stones``, ``identity``) raises `CheckpointMismatch` naming what differs, and
    a damaged one (a match line that is not one, or that holds another number of games
    than ``games_per_pair``) `CheckpointRefused` naming its line; neither is overwritten.
    ``identity``: per agent name, what else makes it the same agent (the command line
    gives an exported file's SHA-256), checked with the settings."""
    check_game(env)
    if isinstance(agents, (str, Agent)):
        raise TypeError(f"agents must be a list of Agents, got {_described(agents)}")
    try:
        agents = list(agents)
    except TypeError:
        raise TypeError(f"agents must be a list of Agents, got {_described(agents)}") from None
    for k, agent in enumerate(agents):
        check_agent(f"agents[{k}]", agent)
    check_count("games_per_pair", games_per_pair)
    seed = check_match_seed(seed)
    names = [a.name for a in agents]
    check_entrants(names)
    for agent in agents:  # before any game, not at its first pairing
        check_env(agent, env)
    opening_stones = check_opening_stones(env, opening_stones)
    _warn_unbalanced(games_per_pair, " per pair", "in each pair the first agent", "the other")
    pairs = [(i, j) for i in range(len(agents)) for j in range(i + 1, len(agents))]
    done: dict[tuple[int, int], tuple[MatchResult, tuple[str, str]]] = {}
    if checkpoint is not None:
        settings = {"game": env.id, "agents": names, "games_per_pair": int(games_per_pair),
                    "seed": seed, "opening_stones": opening_stones,
                    "identity": {n: str(v) for n, v in sorted(dict(identity or {}).items())}}
        done = _read_round_robin_checkpoint(checkpoint, settings)
    iterator = pairs
    if progress:
        from tqdm import tqdm

        iterator = tqdm(pairs, desc="round robin")
    matches = []
    for i, j in iterator:
        if (i, j) in done:
            matches.append(done[(i, j)][0])
            continue
        match = _play_match(env, agents[i], agents[j], games_per_pair,
                            seed=seed + 1_000 * (i * len(agents) + j),
                            opening_stones=opening_stones)
        if checkpoint is not None:
            _append_line(checkpoint, {"pair": [i, j], **_match_state(match),
                                      "device": device_description(), "date": utc_now()})
        matches.append(match)
    kept = [{"agents": list(m.names), "device": where[0], "date": where[1]}
            for m, where in done.values()]
    return Tournament(names, matches, kept=kept)


_CHECKPOINT_FORMAT = "gomoku-jax round robin"


def utc_now() -> str:
    """The time now, UTC, to the second, as ISO 8601: a report's or kept match's date."""
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def kept_match_count(checkpoint) -> int:
    """How many finished matches a round robin's ``checkpoint`` file holds (its whole
    lines after the header), without checking them: what an interrupted run reports."""
    text = Path(checkpoint).read_text(encoding="utf-8", errors="replace")
    return max(0, text.count("\n") - 1)


def _match_state(match: MatchResult) -> dict:
    """What a checkpoint keeps of a match: all of it, as JSON."""
    return {"names": list(match.names), "records": [r.to_dict() for r in match.records],
            "seconds": match.seconds, "decisions": match.decisions,
            "lockstep": match.lockstep}


def _append_line(path, data: dict) -> None:
    """One JSON line appended to ``path`` and flushed to the disk."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(data) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _match_from_state(data, pair: tuple[str, str]) -> MatchResult:
    """A checkpoint line's match (`_match_state`); ValueError when it is not one of
    ``pair``."""
    if not isinstance(data, dict) or data.get("names") != list(pair):
        raise ValueError(f"not a match of {pair[0]} and {pair[1]}")
    records = []
    for r in data["records"]:
        record = GameRecord(black=r["black"], white=r["white"], moves=tuple(r["moves"]),
                            opening=r["opening"], winner=r["winner"], forfeit=r["forfeit"])
        if ({record.black, record.white} != set(pair) or record.winner not in (-1, 0, 1)
                or not all(isinstance(m, int) and not isinstance(m, bool)
                           for m in record.moves)
                or not (isinstance(record.opening, int) and 0 <= record.opening
                        <= len(record.moves))
                or not isinstance(record.forfeit, (str, type(None)))):
            raise ValueError(f"a game record that is not one: {gio.brief(json.dumps(r), 80)}")
        records.append(record)
    seconds, decisions = data["seconds"], data["decisions"]
    if set(seconds) != set(pair) or set(decisions) != set(pair):
        raise ValueError("seconds and decisions must name the two agents")
    return MatchResult(tuple(pair), records, {n: float(seconds[n]) for n in pair},
                       {n: int(decisions[n]) for n in pair}, bool(data["lockstep"]))


def _read_round_robin_checkpoint(path, settings: dict
                                 ) -> dict[tuple[int, int], tuple[MatchResult, tuple[str, str]]]:
    """The finished matches kept in ``path`` for a round robin of ``settings``, by pair,
    each with ``(device, date)`` where it was played; a new (or empty) file gets the
    settings' header line. A last line cut short (an interrupt while it was written) is
    dropped from the file."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"checkpoint {path} is a folder; give a file")
    if not path.exists() or path.stat().st_size == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
        gio.write_atomic(path, json.dumps({"format": _CHECKPOINT_FORMAT,
                                           "settings": settings}) + "\n")
        return {}
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.split("\n")
    cut = lines[-1] != ""  # the last line has no end: written when interrupted
    lines = lines[:-1]
    try:
        header = json.loads(lines[0]) if lines else None
    except json.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("format") != _CHECKPOINT_FORMAT:
        raise CheckpointRefused(f"{path}:1: not a round robin checkpoint (its first line is "
                                f"not the header {_CHECKPOINT_FORMAT!r}); remove it or give "
                                "another file")
    stored = header.get("settings")
    if stored != settings:
        differ = sorted(k for k in set(settings) | set(stored or {})
                        if (stored or {}).get(k) != settings.get(k))
        shown = "; ".join(f"{k}: kept {json.dumps((stored or {}).get(k))}, now "
                          f"{json.dumps(settings.get(k))}" for k in differ)
        raise CheckpointMismatch(f"checkpoint {path} holds matches of another round robin "
                                 f"({gio.brief(shown, 400)}); remove it or give another "
                                 "file to play this one")
    names = settings["agents"]
    done: dict[tuple[int, int], tuple[MatchResult, tuple[str, str]]] = {}
    for number, line in enumerate(lines[1:], start=2):
        try:
            data = json.loads(line)
            i, j = data["pair"]
            if not (all(isinstance(x, int) and not isinstance(x, bool) for x in (i, j))
                    and 0 <= i < j < len(names)):
                raise ValueError(f"pair {data['pair']!r} is not one of the round robin's")
            if (i, j) in done:  # one match a pair: a second one is an edit or a mix-up
                raise ValueError(f"the match of {names[i]} and {names[j]} is kept twice")
            where = (str(data.get("device", "unknown device")), str(data.get("date", "")))
            match = _match_from_state(data, (names[i], names[j]))
            if len(match.records) != settings["games_per_pair"]:  # edited, or mixed up
                raise ValueError(f"the match of {names[i]} and {names[j]} holds "
                                 f"{len(match.records)} games, but this round robin plays "
                                 f"{settings['games_per_pair']} per pair")
            done[(i, j)] = match, where
        except (ValueError, KeyError, TypeError) as err:
            raise CheckpointRefused(f"{path}:{number}: a damaged match ({gio.brief(err, 200)}"
                                    "); remove the file to play the round robin again"
                                    ) from None
    if cut:  # rewritten without it, so that the next match starts a line of its own
        gio.write_atomic(path, "\n".join(lines) + "\n")
    return done


def heatmap(report: dict, path, title: str | None = None):
    """Draw a round robin's win-rate matrix as a picture (PNG, SVG or PDF by suffix) at
    ``path``; returns ``path``."""
    check_picture_path(path)
    heatmap_figure(report, title).savefig(path, dpi=120)
    return path


def check_picture_path(path, name: str = "path") -> None:
    """ValueError (naming ``name``) unless a file path ``path`` ends in the suffix of a
    picture format matplotlib writes (``.png``, ``.svg``, ``.pdf``...): matplotlib would
    otherwise add one, writing another file than the one named. Other objects (open
    files) are left to matplotlib."""
    from matplotlib.backend_bases import FigureCanvasBase

    if isinstance(path, (str, os.PathLike)):
        suffix = os.path.splitext(os.fspath(path))[1][1:].lower()
        if suffix not in FigureCanvasBase.get_supported_filetypes():
            raise ValueError(f"{name} must end in a picture format's suffix (.png, .svg, "
                             f".pdf, ...), got {os.fspath(path)!r}")


def _check_report(report) -> None:
    """TypeError unless ``report`` is a round robin's report (`Tournament.report`)."""
    if isinstance(report, dict) and {"agents", "win_rate_matrix"} <= report.keys():
        return
    if isinstance(report, Tournament):
        got = "a Tournament; pass its .report()"
    elif isinstance(report, (str, os.PathLike)):
        got = f"the path {os.fspath(report)!r}; the report comes first, then the path"
    elif isinstance(report, dict):
        got = "a dict without 'agents' and 'win_rate_matrix'"
    else:
        got = _described(report)
    raise TypeError(f"report must be a round robin's report (Tournament.report()), got {got}")


def heatmap_figure(report: dict, title: str | None = None):
    """The matplotlib figure `heatmap` saves: a ``matplotlib.figure.Figure`` that pyplot
    does not hold (nothing to close, no backend chosen; a notebook shows it)."""
    from matplotlib.figure import Figure

    _check_report(report)
    names = report["agents"]
    matrix = np.array([[np.nan if x is None else 100 * x for x in row]
                       for row in report["win_rate_matrix"]], dtype=float)
    size = 1.0 + 0.9 * len(names)
    # Room for the names (file paths can be long): the row labels take their length in
    # width, the column labels (at 35 degrees) about 0.6 of it in height.
    label = 0.075 * max(len(str(n)) for n in names)
    fig = Figure(figsize=(size + 1.5 + label, size + 0.6 * label), layout="constrained")
    ax = fig.subplots()
    image = ax.imshow(matrix, cmap="RdYlGn", vmin=0, vmax=100)
    ax.set_xticks(range(len(names)), names, rotation=35, ha="right")
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("opponent")
    ax.set_ylabel("agent (row): its win rate")
    for i in range(len(names)):
        for j in range(len(names)):
            text = "—" if np.isnan(matrix[i, j]) else f"{matrix[i, j]:.0f}%"
            ax.text(j, i, text, ha="center", va="center", fontsize=9)
    fig.colorbar(image, ax=ax, label="win rate (%)")
    ax.set_title(title or f"Round robin, {report['colours']['games']} games")
    return fig


def check_ladder_opponent(opponent) -> str:
    """``opponent`` when it is one of `LADDER_OPPONENTS`, else a ValueError."""
    if opponent not in LADDER_OPPONENTS:
        raise ValueError(f"ladder: opponent must be one of {', '.join(LADDER_OPPONENTS)} "
                         f"(pure MCTS as enhanced here, or the reports' plain UCT), got "
                         f"{opponent!r}")
    return opponent


def check_ladder(start: int, step: int, games: int, pass_wins: int,
                 max_simulations: int) -> tuple[int, int, int, int, int]:
    """`ladder`'s settings as Python ints (NumPy integers are converted, so that its
    result writes as JSON), or a ValueError naming the first that is wrong."""
    start, step, games, pass_wins, max_simulations = (
        check_count(f"ladder: {name}", value) for name, value in (
            ("start", start), ("step", step), ("games", games), ("pass_wins", pass_wins),
            ("max_simulations", max_simulations)))
    if pass_wins > games:
        raise ValueError(f"ladder: pass_wins must be from 1 to games={games}, got {pass_wins}")
    if max_simulations < start:
        raise ValueError(f"ladder: max_simulations must be at least start={start} (or no "
                         f"level is played), got {max_simulations}")
    return start, step, games, pass_wins, max_simulations


LADDER_OPPONENTS = ("pure-mcts", "uct")  # `ladder`'s opponent: agent names without "-N"


def ladder(env: Gomoku, agent: Agent, start: int = 100, step: int = 100, games: int = 10,
           pass_wins: int = 8, max_simulations: int = 5000, seed: int = 0,
           opening_stones: int = 0, make_opponent=None, progress: bool = False,
           opponent: str = "pure-mcts") -> dict:
    """Seed 003's ladder: ``agent`` plays ``games`` games against pure MCTS at ``start``
    simulations, then ``+step`` at a time, until it wins fewer than ``pass_wins`` (7 or
    fewer of 10 by default) or ``max_simulations`` is passed. Reports every level and the
    last one cleared (0 if none); each level's entry names its ``opponent`` agent (e.g.
    ``uct-300``) beside its ``simulations`` and score. ``opponent``: ``"pure-mcts"``
    (with MCTS-Solver and decisive expansion) or ``"uct"`` (the reports' plain pure MCTS,
    seed 003's own); ``make_opponent(simulations)`` builds another kind instead."""
    check_game(env)
    check_agent("agent", agent)
    start, step, games, pass_wins, max_simulations = check_ladder(
        start, step, games, pass_wins, max_simulations)
    seed = check_match_seed(seed)
    opening_stones = check_opening_stones(env, opening_stones)
    check_ladder_opponent(opponent)
    _warn_unbalanced(games, " per level", f"at each level {agent.name}", "its opponent")
    if make_opponent is None:
        from gomoku_jax import agents as agents_lib

        make_opponent = lambda sims: agents_lib.make(f"{opponent}-{sims}", env)  # noqa: E731
    levels, cleared, sims = [], 0, start
    while sims <= max_simulations:
        rival = make_opponent(sims)
        check_agent(f"make_opponent({sims})", rival)
        match = _play_match(env, agent, rival, games, seed + sims, opening_stones)
        score = match.score(agent.name)
        levels.append({"simulations": sims, "opponent": rival.name, **score})
        if progress:
            print(f"ladder: {agent.name} vs {sims} simulations: {score['wins']}/{games} wins",
                  flush=True)
        if score["wins"] < pass_wins:
            break
        cleared, sims = sims, sims + step
    return {"agent": agent.name, "games_per_level": games, "pass_wins": pass_wins,
            "cleared": cleared, "levels": levels}
