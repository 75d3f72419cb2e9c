"""Generate game records for imitation learning (seed 001 section IV-D).

Command (GomokuBot against itself on 15x15 from random 4-stone openings; a game took
about 3 s on one core of a shared 2-core CPU, so 100 games take a few minutes)::

    python -m experiments.generate_records --games 100 --workers 2 --out data/bot_15x15.jsonl.gz

or ``gomoku-jax records generate ...`` with the same options. Each game starts from
``--opening-stones`` random stones near the centre (`gomoku_jax.arena.opening_moves`,
alternating colours from black; at most ``2 (k - 1)``), then ``--black`` and ``--white``
(any `gomoku_jax.agents.make` name: ``gomokubot``, ``gomokubot-4``, ``alphabeta-3``,
``pure-mcts-400``, ``heuristic``, ``random``, an exported ``.gjx``...) play it out.
The games are written in the records format of `gomoku_jax.records` (``.jsonl`` or
``.jsonl.gz``), with the settings in the header's metadata.

Game ``g`` draws everything (its opening, the agents' randomness) from
``fold_in(key(seed), g)``, and the games are written in order, so a seed gives the same
file, byte for byte, whatever the number of ``--workers`` (processes started with the
"spawn" method, each building the agents once). Agents think without a time limit (a
deadline would make the games depend on the machine's speed); pick their strength by
name (``gomokubot-D``, ``pure-mcts-N``). A game an agent loses by an illegal move (or by
raising) has no result on the board and is left out; the count is printed.

Expect from GomokuBot against itself on 15x15: games of some 20 to 40 moves, nearly all
won (draws are rare; on 9x9, where the board fills sooner, ``gomokubot-2`` draws nearly half
its games against itself: `experiments/data/gomokubot2_9x9/`);
`gomoku_jax.records.split_by_winner` gives seed 001's three splits and
`gomoku_jax.records.positions` the training targets.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
from pathlib import Path

__all__ = ["WorkerDied", "WorkerPool", "generate", "main", "play_game"]

_WORKER: dict = {}  # per worker process: the env and the two agents, built once


def _make(size: int, k: int, rule: str, black: str, white: str):
    from gomoku_jax import agents
    from gomoku_jax.game import Gomoku

    env = Gomoku(size, k, rule)
    return env, agents.make(black, env), agents.make(white, env)


def play_game(env, black, white, seed: int, index: int, opening_stones: int):
    """Game ``index`` of a run seeded ``seed``: ``opening_stones`` random stones, then
    ``black`` and ``white`` (agents) play to the end. Returns an arena `GameRecord`
    (``forfeit`` set when an agent played an illegal move or raised)."""
    import jax
    import jax.numpy as jnp

    from gomoku_jax import arena

    key = jax.random.fold_in(jax.random.key(seed), index)
    opening_key, play_key = jax.random.split(key)
    opening = arena.opening_moves(env, opening_key, opening_stones)
    state = env.init()
    for a in opening:
        state = env._jit_step(state, jnp.int32(a))
    moves, forfeit, ply = list(opening), None, 0
    players = (black, white)
    while not bool(state.terminated):
        agent = players[int(state.current_player)]
        try:
            action = agent.act(state, jax.random.fold_in(play_key, ply))
        except Exception as err:  # an agent's crash costs it the game, not the run
            forfeit = f"{agent.name} {arena.raised_reason(err)}"
            break
        ply += 1
        reason = arena.illegal_reason(env, state, action)  # as a match judges it
        if reason is not None:
            forfeit = f"{agent.name} {reason}"
            break
        action = int(action)  # a NumPy integer too
        moves.append(action)
        state = env._jit_step(state, jnp.int32(action))
    winner = 1 - int(state.current_player) if forfeit else int(state.winner)
    return arena.GameRecord(black.name, white.name, tuple(moves), len(opening), winner, forfeit)


def _plugin_modules() -> tuple[str, ...]:
    """The modules a worker process imports first: the command line's ``--plugin``
    modules, and those of the agents and networks registered in this process (a
    function defined in ``__main__``, e.g. a notebook's, cannot be imported there)."""
    from gomoku_jax import agents, cli, networks

    modules = list(cli.PLUGINS)
    for obj in [*agents.AGENTS.values(), *(entry[0] for entry in networks.NETWORKS.values())]:
        name = getattr(obj, "__module__", None) or "__main__"
        if name != "__main__" and name.partition(".")[0] not in ("gomoku_jax", "algorithms"):
            modules += [name] if name not in modules else []
    return tuple(modules)


def _init_worker(settings: dict, plugins: tuple[str, ...] = ()) -> None:
    # An error here is kept for the first game to raise: a Pool whose initializer raises
    # starts new workers for ever instead of failing.
    import importlib

    import signal

    # Ctrl-C in a terminal reaches every process of the group: the parent stops the pool
    # and keeps the finished games; a worker's traceback would only bury its message.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for module in plugins:  # the parent's --plugin modules: their registered names
            importlib.import_module(module)
        _WORKER["game"] = _make(settings["size"], settings["k"], settings["rule"],
                                settings["black"], settings["white"])
    except Exception as error:  # noqa: BLE001 (raised again by _work, named)
        _WORKER["error"] = f"{type(error).__name__}: {error}"


class WorkerError(ValueError):
    """A worker process could not build its game and agents (an agent or a ``--plugin``
    module that imports or builds in this process but fails in a fresh one); the message
    names the worker's error."""


def _work(task: tuple[int, int, int]):
    if "error" in _WORKER:
        raise WorkerError(f"a worker process could not build its game and agents: "
                          f"{_WORKER['error']}")
    seed, index, opening_stones = task
    env, black, white = _WORKER["game"]
    return index, play_game(env, black, white, seed, index, opening_stones)


class WorkerDied(ChildProcessError):
    """A worker process ended while the games were played (killed: the out-of-memory
    killer, ``kill -9``): its game would never come back, so `generate` stops rather
    than wait for ever. ``records``, ``finished`` and ``asked`` as `Interrupted`'s."""

    def __init__(self, message: str, records: list = (), finished: int = 0, asked: int = 0):
        super().__init__(message)
        self.records, self.finished, self.asked = list(records), finished, asked


# How often `WorkerPool.play` looks at its workers while it waits for a game.
_POLL_S = 1.0


class WorkerPool:
    """``workers`` spawned processes, each holding the game and the two agents, for
    several runs of `generate` with the same players (other seeds, other counts):
    started once, they skip the start-up (imports, compilation, the agents' tables)
    of a pool per run. Use it as a context manager; `generate` refuses it for other
    players."""

    def __init__(self, size: int, k: int, rule: str, black: str, white: str, workers: int):
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 2:
            raise ValueError(f"a WorkerPool needs at least 2 workers, got {workers!r}")
        self.players = dict(size=size, k=k, rule=rule, black=black, white=white)
        self._pool = multiprocessing.get_context("spawn").Pool(
            workers, initializer=_init_worker, initargs=(self.players, _plugin_modules()))
        self._broken = False  # a worker died: the pool plays no more

    def play(self, seed: int, games: int, opening_stones: int):
        """``(index, GameRecord)`` pairs of games ``0 .. games - 1``, as they finish;
        `WorkerDied` when a worker process ends meanwhile (its game is lost: a pool
        starts another worker but never plays the game again, and would wait for it for
        ever)."""
        if self._broken:
            raise WorkerDied("a worker process of this pool ended before; make another pool")
        # the workers now: none of them ends by itself while the pool is open
        workers = [p for p in self._pool._pool if p.exitcode is None]
        results = self._pool.imap_unordered(
            _work, [(seed, g, opening_stones) for g in range(games)])
        for _ in range(games):
            while True:  # looked at before each game and each second while waiting
                dead = [p for p in workers if p.exitcode is not None]
                if dead:  # stopped now: the other workers' games would be dropped anyway
                    self._broken = True
                    raise WorkerDied(_died(dead[0]))
                try:
                    item = results.next(timeout=_POLL_S)
                    break
                except multiprocessing.TimeoutError:
                    continue
            yield item

    def close(self) -> None:
        if self._broken:
            self._release_dead()
        self._pool.terminate()
        self._pool.join()

    def _release_dead(self) -> None:
        """After a worker died: keep the pool from starting others, end its workers, and
        free the queue locks a worker killed inside a get or a put may have held (nothing
        else takes them), which ``terminate`` would otherwise wait for for ever."""
        from multiprocessing import pool as mp_pool

        pool = self._pool
        pool._worker_handler._state = mp_pool.TERMINATE
        pool._change_notifier.put(None)
        pool._worker_handler.join(10)
        for process in list(pool._pool):
            if process.exitcode is None:
                process.kill()
            process.join(10)
        for lock in (pool._inqueue._rlock, pool._outqueue._wlock):  # the workers' locks
            lock.acquire(block=False)  # taken now, or held by a worker that no longer runs:
            lock.release()  # free either way

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _died(process) -> str:
    """What happened to a worker ``process`` that ended, in words."""
    code = process.exitcode
    how = (f"killed by signal {-code}" + (" (SIGKILL: the out-of-memory killer, or kill -9)"
                                          if -code == 9 else "")
           if code < 0 else f"exit code {code}")
    return (f"worker process {process.pid} ended while the games were played ({how}); "
            "its game would never come back")


def generate(size: int = 15, k: int = 5, rule: str = "freestyle", games: int = 100,
             black: str = "gomokubot", white: str = "gomokubot", opening_stones: int = 4,
             workers: int = 1, seed: int = 0, progress: bool = True,
             pool: WorkerPool | None = None) -> list:
    """Play ``games`` games (see the module docstring) on ``workers`` processes, or on
    ``pool``'s (a `WorkerPool` of the same players; ``workers`` is then ignored).
    Returns them as arena `GameRecord`s in game order (``forfeit`` set for the games
    an agent lost by an illegal move)."""
    from gomoku_jax.config import check_int, check_seed

    games = check_int("", "games", games)
    workers = check_int("", "workers", workers)
    opening_stones = check_int("", "opening_stones", opening_stones, 0)
    check_seed("", "seed", seed)  # from 0 to SEED_MAX, as --seed
    import jax
    from tqdm import tqdm

    from gomoku_jax import arena

    players = dict(size=size, k=k, rule=rule, black=black, white=white)
    if pool is not None and pool.players != players:
        raise ValueError(f"the worker pool plays {pool.players}, not {players}")
    env, black_agent, white_agent = _make(size, k, rule, black, white)  # checks the names
    arena.opening_moves(env, jax.random.key(0), opening_stones)  # checks K
    bar = tqdm(total=games, desc=f"{black_agent.name} vs {white_agent.name}", disable=not progress)
    results: dict = {}
    try:
        if pool is None and (workers == 1 or games == 1):
            for g in range(games):
                results[g] = play_game(env, black_agent, white_agent, seed, g, opening_stones)
                bar.update()
        else:
            own = pool is None
            if own:
                pool = WorkerPool(size, k, rule, black, white, min(workers, games))
            try:
                for g, record in pool.play(seed, games, opening_stones):
                    results[g] = record
                    bar.update()
            finally:
                if own:
                    pool.close()
    except (KeyboardInterrupt, WorkerDied) as stop:
        bar.close()
        first = 0
        while first in results:
            first += 1
        kept = [results[g] for g in range(first)]
        if isinstance(stop, WorkerDied):
            raise WorkerDied(str(stop), kept, len(results), games) from None
        raise Interrupted(kept, len(results), games) from None
    bar.close()
    return [results[g] for g in range(games)]


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during `generate`: ``records`` are the finished games 0 .. n-1 (what a run
    of n games gives), ``finished`` counts every finished game, ``asked`` the games asked."""

    def __init__(self, records: list, finished: int, asked: int):
        super().__init__(f"{finished} of {asked} games finished")
        self.records, self.finished, self.asked = records, finished, asked


def build_parser() -> argparse.ArgumentParser:
    from gomoku_jax.cli import ArgumentParser, output_file  # JAX: not in the workers' imports
    from gomoku_jax.config import count_argument, seed_argument

    parser = ArgumentParser(
        prog="gomoku-jax records generate",
        description="Play games between two agents from random openings and write them as "
                    "game records (seed 001 IV-D).")
    # The board: each of --size, --k and --rule is the option's, else the first exported
    # agent's (black's, then white's), else 15x15 five in a row freestyle.
    parser.add_argument("--size", type=int,
                        help="board side (default: the exported agent's, else 15)")
    parser.add_argument("--k", type=int,
                        help="stones in a row to win (default: the exported agent's, else 5)")
    parser.add_argument("--rule", choices=["freestyle", "standard"],
                        help="default: the exported agent's, else freestyle")
    parser.add_argument("--games", type=count_argument(1), default=100,
                        help="games to play (default 100)")
    parser.add_argument("--black", default="gomokubot",
                        help="agent playing black (default gomokubot)")
    parser.add_argument("--white", default="gomokubot",
                        help="agent playing white (default gomokubot)")
    parser.add_argument("--opening-stones", type=count_argument(0), default=4,
                        help="random stones near the centre before the agents play, at most "
                             "2(k-1) (default 4)")
    parser.add_argument("--workers", type=count_argument(1),
                        default=max(1, min(os.cpu_count() or 1, 8)),
                        help="worker processes (default: the CPU count, at most 8)")
    parser.add_argument("--seed", type=seed_argument, default=0, help="random seed (default 0)")
    parser.add_argument("--out", type=output_file, required=True,
                        help="the records file to write (.jsonl or .jsonl.gz)")
    parser.add_argument("--force", action="store_true",
                        help="replace --out if it exists (refused without it)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def main(argv: list[str] | None = None, pool: WorkerPool | None = None) -> int:
    """The command line; ``pool``: play on this `WorkerPool` (``--workers`` ignored)."""
    args = build_parser().parse_args(argv)
    from gomoku_jax.io import check_new_files

    if not args.out.name.lower().endswith((".jsonl", ".jsonl.gz")):  # as records reads it
        raise ValueError(f"--out {args.out}: a records file is .jsonl, or .jsonl.gz "
                         "compressed (the name tells readers which)")
    # (--out's folder was checked as the option was read, by `output_file`)
    check_new_files([args.out], args.force)  # before the games, which may take hours
    from gomoku_jax.cli import exported_game

    board = {**{"size": 15, "k": 5, "rule": "freestyle"},
             **exported_game([args.black, args.white]),
             **{key: getattr(args, key) for key in ("size", "k", "rule")
                if getattr(args, key) is not None}}
    args.size, args.k, args.rule = board["size"], board["k"], board["rule"]
    from gomoku_jax import arena
    from gomoku_jax.game import Gomoku

    env = Gomoku(args.size, args.k, args.rule)  # (its own error names the setting)
    try:  # named by its option here (generate's own check names its argument)
        arena.check_opening_stones(env, args.opening_stones)
    except ValueError as err:
        raise ValueError(f"--opening-stones: {err}") from None

    try:
        played = generate(args.size, args.k, args.rule, args.games, args.black, args.white,
                          args.opening_stones, args.workers, args.seed,
                          progress=not args.no_progress, pool=pool)
    except (Interrupted, WorkerDied) as stop:  # keep what a shorter run would have written
        if stop.records:
            args.games = len(stop.records)
            _write(args, stop.records)
        kept = (f"{'wrote' if stop.records else 'no file:'} the first {len(stop.records)} "
                f"games of the {stop.asked} asked, as --games {len(stop.records)} writes "
                f"them ({stop.finished - len(stop.records)} more finished out of order were "
                "dropped)")
        if isinstance(stop, WorkerDied):
            raise WorkerDied(f"{stop}: {kept}") from None
        print(f"interrupted: {kept}", file=sys.stderr)
        raise KeyboardInterrupt from None
    return _write(args, played)


def _write(args, played) -> int:
    """Write ``played`` (`GameRecord`s of games 0, 1, ...) to ``args.out``."""
    from gomoku_jax import records
    from gomoku_jax.game import Gomoku

    env = Gomoku(args.size, args.k, args.rule)
    forfeited = [r for r in played if r.forfeit]
    # The players as the games name them (``gomokubot`` plays as ``gomokubot-6``).
    black, white = (played[0].black, played[0].white) if played else (args.black, args.white)
    metadata = {"generator": "experiments.generate_records", "black": black,
                "white": white, "games": args.games, "opening_stones": args.opening_stones,
                "seed": args.seed, "forfeits_left_out": len(forfeited)}
    tag = f"experiments.generate_records seed={args.seed}"
    with_source = [records.Game(env.size, env.k, env.rule, r.moves, r.winner, r.black, r.white,
                                r.opening, f"{tag} game={g}")
                   for g, r in enumerate(played) if not r.forfeit]
    if args.out.parent != Path(""):
        args.out.parent.mkdir(parents=True, exist_ok=True)
    written = records.write_records(args.out, with_source, env, metadata=metadata)
    splits = records.split_by_winner(with_source)
    lengths = [g.length for g in with_source]
    print(f"wrote {written} games to {args.out}: black won {len(splits['black'])}, white "
          f"{len(splits['white'])}, draws {len(splits['draw'])}; mean length "
          f"{sum(lengths) / max(len(lengths), 1):.1f} moves")
    for r in forfeited:
        print(f"left out a forfeited game: {r.forfeit}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    from experiments.common import run_script  # here: the workers import this module, not JAX

    run_script(main)
