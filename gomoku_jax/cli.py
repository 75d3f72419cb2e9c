"""The ``gomoku-jax`` command line.

Subcommands:

* ``bench game``: throughput of random full games, JAX vs a NumPy engine
  (`experiments/bench_game.py`; its options follow the subcommand).
* ``bench mcts``: pure MCTS speed, JAX vs a plain NumPy search (`experiments/bench_mcts.py`).
* ``bench alphazero``: PUCT / Gumbel search with a network vs without one, and the
  AlphaZero learner's moves/s and SGD samples/s (`experiments/bench_alphazero.py`).
* ``bench search``: seconds per simulation as the tree grows, the linear-time
  `gomoku_jax.tree_search` vs mctx (`experiments/bench_search.py`).
* ``bench sweep``: what a sweep pays to compile, programs shared by its runs vs compiled
  per run (`experiments/bench_sweep.py`).
* ``random-game``: play one game of random legal moves and print the board
  (optionally write an SVG picture and the move list).
* ``tournament``: a round robin between named agents (from a JSON config or the
  command line), with a progress bar (``--no-progress``: none); writes the report as
  JSON and Markdown.
* ``pbrain``: run an agent as a Gomocup (Piskvork) brain on stdin / stdout
  (`gomoku_jax.gomocup`).
* ``train``: train an experiment config (``--set key=value`` overrides, ``--smoke``
  for its tiny variant) in a work directory, resuming from its checkpoints; compiled
  programs are kept on disk (`compile_cache_dir`) unless ``--no-compile-cache``.
* ``export``: write the agent of a training work directory (latest or best) to one
  portable params file.
* ``play``: play against any agent in the browser (a local page served by
  `gomoku_jax.play`; ``--port 0`` picks a free port and prints it).
* ``records generate``: play games between two agents from random openings and write
  them as game records (`experiments/generate_records.py`; its options follow).

``--plugin MODULE`` (repeatable, before the subcommand) imports MODULE first, so that the
networks and agents it registers (`gomoku_jax.networks.register_network`,
`gomoku_jax.agents.register_agent`) can be named by any subcommand.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

BENCHMARKS = ("game", "mcts", "alphazero", "search", "sweep")
OVERVIEWS = {
    "bench": "usage: gomoku-jax bench {" + ",".join(BENCHMARKS) + "} [options]\n\n"
             "Benchmarks (each prints its figures next to a reference timed in the same run):\n"
             "  game   random full games: JAX engine vs a NumPy engine\n"
             "  mcts   pure MCTS: one-move latency and batched simulations/s vs a NumPy search\n"
             "  alphazero  PUCT / Gumbel search simulations/s with a network vs a uniform\n"
             "             evaluate; the learner's self-play moves/s and SGD samples/s\n"
             "  search seconds per simulation from 16 to 800 simulations: the linear-time\n"
             "         tree search vs mctx\n"
             "  sweep  a sweep's build and first iteration per run: compiled programs\n"
             "         shared by the runs vs compiled per run\n\n"
             "Options of one benchmark: gomoku-jax bench NAME --help",
    "records": "usage: gomoku-jax records generate [options]\n\n"
               "  generate  play games between two agents from random openings and write them\n"
               "            as game records (JSON Lines)\n\n"
               "Options: gomoku-jax records generate --help",
}


def _random_game(args: argparse.Namespace) -> int:
    import jax
    import numpy as np

    from gomoku_jax import render
    from gomoku_jax.game import Gomoku, random_games
    env = Gomoku(args.size, args.k, args.rule)
    final, moves = random_games(env, jax.random.key(args.seed), 1, record=True)
    state = jax.tree.map(lambda x: x[0], final)
    played = [int(a) for a in np.asarray(moves[0]) if a >= 0]
    print(f"One random game on {env.id} (seed {args.seed}):")
    print(render.text(state))
    if args.moves:
        print(render.game_record_text(played, env.size))
    if args.svg:
        args.svg.parent.mkdir(parents=True, exist_ok=True)
        args.svg.write_text(render.svg(state))
        print(f"SVG written to {args.svg}")
    return 0


# "description": what the tournament is for and the command that runs it (free text)
TOURNAMENT_KEYS = {"description", "game", "agents", "games_per_pair", "opening_stones", "seed"}


def _tournament_config(args: argparse.Namespace) -> dict:
    """The tournament settings: the config file, overridden by explicit options."""
    import dataclasses

    from gomoku_jax import config as config_lib
    from gomoku_jax.game import Gomoku

    config: dict = {}
    if args.config is not None:
        config = config_lib.read_json(args.config, "tournament config")
        if not isinstance(config, dict):
            raise ValueError(f"tournament config {args.config} must be a JSON object")
        unknown = set(config) - TOURNAMENT_KEYS
        if unknown and ("algorithm" in config or unknown & {"train", "network", "search"}):
            raise ValueError(f"{args.config} is a training config, not a tournament one: "
                             f"train it with gomoku-jax train --config {args.config}")
        if unknown:
            named = ", ".join(f"{key!r}{config_lib.did_you_mean(key, TOURNAMENT_KEYS)}"
                              for key in sorted(unknown))
            raise ValueError(
                f"tournament config {args.config}: unknown key{'s' * (len(unknown) > 1)} "
                f"{named}; allowed: {sorted(TOURNAMENT_KEYS)}"
            )
        try:
            _check_tournament_file(config)
        except ValueError as err:
            raise config_lib.ConfigError(f"tournament config {args.config}: {err}") from None
    game = dict(config.get("game", {}))
    source = {key: f"tournament config {args.config}" for key in game}  # for errors
    for key in ("size", "k", "rule"):
        if getattr(args, key) is not None:
            game[key] = getattr(args, key)
            source[key] = f"--{key}"
    config["game"] = game
    for key in ("agents", "games_per_pair", "opening_stones", "seed"):
        if getattr(args, key) is not None:
            config[key] = getattr(args, key)
    if not config.get("agents"):
        raise ValueError("a tournament needs agents: --agents NAME NAME ... or a config's \"agents\"")
    for key, value in exported_game(config["agents"]).items():
        if key not in game:  # what was not given: an exported agent's game
            game[key], source[key] = value, "the first exported agent's file"
    # the rest: the game's defaults, all in the report; a wrong value names its game.KEY
    # and where it came from
    try:
        env = config_lib.from_dict(Gomoku, game, "game")
    except config_lib.ConfigError as err:
        key = (re.search(r"\b(?:game|GameConfig)\.(\w+)", str(err))
               or re.match(r"game: (\w+) ", str(err)))  # "game: positional_bias must ..."
        where = None if key is None else source.get(
            key.group(1), f"the default {key.group(1)}; give --{key.group(1)}" + (
                f" or the config's game.{key.group(1)}" if args.config is not None else ""))
        raise config_lib.ConfigError(f"{err} (from {where})" if where else str(err)) from None
    config["game"] = {field.name: getattr(env, field.name) for field in dataclasses.fields(env)}
    for key, value in (("games_per_pair", 20), ("opening_stones", 0), ("seed", 0)):
        config.setdefault(key, value)  # every setting in the report, defaults included
    # what the round robin would refuse, refused here naming where the value came from
    where = {key: f"--{key.replace('_', '-')}" if getattr(args, key) is not None
             else f"tournament config {args.config}" for key in ("agents", "opening_stones")}
    from gomoku_jax.arena import check_entrants, check_opening_stones

    for key, check in (("agents", lambda: check_entrants(config["agents"])),
                       ("opening_stones", lambda: check_opening_stones(
                           env, config["opening_stones"]))):
        try:
            check()
        except ValueError as err:
            raise ValueError(f"{where[key]}: {err}") from None
    return config


def _check_tournament_file(config: dict) -> None:
    """ValueError naming the key of a tournament config file whose value is wrong (the
    game's values are checked with the options merged in, by `config.from_dict`)."""
    import dataclasses

    from gomoku_jax import config as config_lib
    from gomoku_jax.game import Gomoku

    if "game" in config:
        game = config["game"]
        known = [field.name for field in dataclasses.fields(Gomoku) if field.init]
        if not isinstance(game, dict):
            raise ValueError(f"game must be an object with {', '.join(known)}, got {game!r}")
        for key in game:
            if key not in known:
                raise ValueError(f"game.{key}: unknown setting; known: {', '.join(known)}")
    if "agents" in config:
        names = config["agents"]
        if not isinstance(names, list):
            raise ValueError(f"agents must be a list of agent names, got {names!r}")
        for i, name in enumerate(names):
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"agents[{i}] must be an agent name (a non-empty string), "
                                 f"got {name!r}")
    for key, minimum in (("games_per_pair", 1), ("opening_stones", 0)):
        if key in config:
            config_lib.check_int("", key, config[key], minimum)
    if "seed" in config:
        config_lib.check_seed("", "seed", config["seed"])
    if not isinstance(config.get("description", ""), str):
        raise ValueError(f"description must be a string, got {config['description']!r}")


def exported_game(names) -> dict:
    """``size``, ``k`` and ``rule`` of the first exported agent (``FILE.gjx``) among
    ``names``; empty when there is none."""
    from gomoku_jax import agents
    from gomoku_jax import io as gio

    for name in names:
        path = agents.exported_path(name) if isinstance(name, str) else None
        if path is not None and Path(path).is_file():
            game = gio.read_exported(path)[0].get("game")
            if isinstance(game, dict):
                return {key: game[key] for key in ("size", "k", "rule") if key in game}
    return {}


# The files `tournament --out DIR` writes into DIR.
TOURNAMENT_REPORTS = ("tournament.json", "tournament.md", "heatmap.png")
# Where `tournament --out DIR` keeps each finished match until the reports are written.
TOURNAMENT_CHECKPOINT = "tournament.partial.jsonl"


def _tournament(args: argparse.Namespace) -> int:
    import io

    from gomoku_jax import agents, arena
    from gomoku_jax.game import Gomoku
    from gomoku_jax.io import check_folder, check_new_files, file_sha256, write_atomic

    config = _tournament_config(args)
    where = {"agents": "--agents" if args.agents is not None
             else f"tournament config {args.config}"}
    if args.out is not None:  # checked before any game: a long round robin is not lost
        check_folder(args.out, "--out", "give a folder for the reports")
        try:
            check_new_files([args.out / name for name in TOURNAMENT_REPORTS], args.force,
                            f"--out {args.out}")
        except ValueError as err:  # cut short while writing its reports: say what is kept
            kept = args.out / TOURNAMENT_CHECKPOINT
            if not kept.exists():
                raise
            raise ValueError(f"{err} (with --force, the finished matches kept in {kept} "
                             "are not played again)") from None
    env = Gomoku(**config["game"])
    players = [agents.make(name, env) for name in config["agents"]]
    built: dict[str, str] = {}  # an agent's full name -> the name it was asked for by
    for asked, player in zip(config["agents"], players):
        if player.name in built:
            raise ValueError(f"{where['agents']}: {built[player.name]!r} and {asked!r} are the "
                             f"same agent, {player.name}; each agent plays once")
        built[player.name] = asked
    games = int(config["games_per_pair"])
    checkpoint, identity = None, {}
    if args.out is not None:  # finished matches are kept there until the reports are
        checkpoint = args.out / TOURNAMENT_CHECKPOINT
        for asked, player in zip(config["agents"], players):
            path = agents.exported_path(asked)
            if path is not None:  # the same file name may hold other params by now
                identity[player.name] = f"sha256:{file_sha256(path)}"

    def play():
        return arena.round_robin(
            env, players, games, seed=int(config["seed"]),
            opening_stones=int(config["opening_stones"]), progress=not args.no_progress,
            checkpoint=checkpoint, identity=identity)

    try:
        try:
            result = play()
        except arena.CheckpointRefused as err:
            if not args.force:
                raise ValueError(f"--out {args.out}: {err} (--force plays this one from the "
                                 "start, replacing it)") from None
            checkpoint.unlink()
            print(f"gomoku-jax: --force: {checkpoint} could not be resumed; playing this "
                  "round robin from the start", file=sys.stderr)
            result = play()
    except KeyboardInterrupt:
        if checkpoint is None or not checkpoint.exists():
            raise
        kept = arena.kept_match_count(checkpoint)
        print(f"\ngomoku-jax: interrupted; {kept} finished match{'' if kept == 1 else 'es'} "
              f"kept in {checkpoint}: the same command plays the others", file=sys.stderr)
        return 130
    if result.kept:
        print(f"gomoku-jax: {len(result.kept)} of {len(result.matches)} matches were kept "
              f"from an interrupted run of this round robin ({checkpoint}), not played again",
              file=sys.stderr)
    report = result.report()
    report["config"] = config
    markdown = result.to_markdown(report)
    report["device"] = arena.device_description()  # where and when it was played
    report["date"] = arena.utc_now()
    print(markdown)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        report_json, report_md, heatmap = (args.out / name for name in TOURNAMENT_REPORTS)
        picture = io.BytesIO()
        arena.heatmap(report, picture, title=f"{env.id}: {report['colours']['games']} games")
        # each file whole or not at all (an interrupt while they are written leaves the
        # older report or the newer, and the kept matches to write them again)
        write_atomic(report_json, json.dumps(report, indent=2))
        write_atomic(report_md, markdown + "\n")
        write_atomic(heatmap, picture.getvalue())
        checkpoint.unlink(missing_ok=True)  # its matches are in the reports now
        print(f"report written to {args.out}/tournament.json, tournament.md and heatmap.png")
    return 0


def _play(args: argparse.Namespace) -> int:
    from gomoku_jax import play

    app = play.PlayApp(args.agent, budget=args.simulations, colour=args.colour, size=args.size,
                       k=args.k, rule=args.rule, seed=args.seed, budget_name="--simulations")
    play.serve(app, host=args.host, port=args.port, open_browser=args.open,
               verbose=args.verbose)
    return 0


def _pbrain(args: argparse.Namespace) -> int:
    from gomoku_jax import gomocup

    return gomocup.run_engine(args.agent, sys.stdin, sys.stdout, seed=args.seed)


def compile_cache_dir() -> Path:
    """Where `gomoku-jax train` keeps compiled programs: ``$JAX_COMPILATION_CACHE_DIR``
    if set, else ``gomoku-jax/xla`` in the user's cache folder (``$XDG_CACHE_HOME``,
    default ``~/.cache``)."""
    given = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if given:
        return Path(given).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(base).expanduser() / "gomoku-jax" / "xla"


def _use_compile_cache(args: argparse.Namespace) -> Path | None:
    """JAX's persistent compilation cache in `compile_cache_dir` for this process, unless
    ``--no-compile-cache``: the main job compiles for minutes on a CPU, and a run
    interrupted before its first checkpoint, a resumed one or a rerun would compile the
    same programs again. Returns the folder; a folder that cannot be made is said and
    skipped (None)."""
    import jax

    if args.no_compile_cache:  # JAX_COMPILATION_CACHE_DIR alone would still keep them
        jax.config.update("jax_enable_compilation_cache", False)
        return None

    folder = compile_cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        print(f"gomoku-jax: warning: compiled programs are not kept on disk: {err}",
              file=sys.stderr)
        return None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    return folder


def _train(args: argparse.Namespace) -> int:
    from gomoku_jax import training
    from gomoku_jax.io import check_folder

    check_folder(args.workdir, "--workdir", "give the folder of a run (new or to resume)")
    cache = _use_compile_cache(args)
    learner, description, named = _learner_from_args(args)
    training.check_iterations(learner.config, args.iterations, "--iterations",
                              "--set train.iterations=N")
    print(f"training {args.config} in {args.workdir}")
    if cache is not None:
        print(f"compiled programs are kept in {cache} (--no-compile-cache: not kept)")
    if not named:  # a partial file starts a full default run
        print(f'{args.config} names no "algorithm": it trains alphazero, the default, with '
              "the defaults for every setting the file leaves out")
    if description:
        print(description)
    env = getattr(learner, "env", None)
    if env is not None:  # as trained, overrides included (a description may name another)
        print(f"game: {env.words}")
    # a learner with its own driver (algorithms.pipeline: stages in subdirectories) runs itself
    run = getattr(learner, "run", None) or (lambda *a, **k: training.run(learner, *a, **k))
    workdir = Path(args.workdir).resolve()  # orbax refuses relative checkpoint paths
    try:  # SIGTERM (kill, timeout) stops it as Ctrl-C does, said the same way
        with training.sigterm_as_interrupt():
            report = run(workdir, iterations=args.iterations, progress=not args.no_progress)
    except KeyboardInterrupt:
        from gomoku_jax.io import checkpoint_steps

        steps = checkpoint_steps(workdir / "checkpoints")
        kept = (f"the checkpoints in {args.workdir}/checkpoints are kept: run the same "
                "command to resume from the last one" if steps else
                "no checkpoint was written yet: the same command starts the run afresh")
        print(f"\ngomoku-jax: interrupted; {kept}", file=sys.stderr)
        return 130
    import jax

    if jax.process_index() == 0:  # the process that wrote them
        print((Path(args.workdir) / "report.md").read_text())
        print(f"exported agent: {Path(args.workdir) / 'final.gjx'}")
    return 0 if report["iterations"] > 0 else 1


def _learner_from_args(args: argparse.Namespace):
    import algorithms
    from gomoku_jax import config as config_lib

    data = config_lib.read_json(args.config)
    # "agents" is a tournament file's alone ("game" and "seed" are training settings too)
    if isinstance(data, dict) and "algorithm" not in data and "agents" in data:
        raise ValueError(f"{args.config} is a tournament config (it lists agents), not a "
                         f"training one: run it with gomoku-jax tournament --config "
                         f"{args.config}")
    config_class, make_learner = algorithms.learner_entry(config_lib.algorithm_of(args.config))
    cfg, description = config_lib.load_file(
        config_class, args.config, overrides=args.set or (),
        variants=(args.variant or []) + (["smoke"] if args.smoke else []))
    return make_learner(cfg), description, "algorithm" in data


def _export(args: argparse.Namespace) -> int:
    import algorithms
    from gomoku_jax import config as config_lib, exported, training
    from gomoku_jax import io as gio
    from gomoku_jax.io import check_folder, check_new_files

    workdir = Path(args.workdir)
    if args.out.is_dir():
        raise ValueError(f"--out {args.out} is a directory; give the file to write, e.g. "
                         f"{args.out / 'agent.gjx'}")
    if args.out.suffix != ".gjx":  # agent names are told from files by this suffix
        raise ValueError(f"--out {args.out}: an exported agent's file name ends in .gjx "
                         "(how gomoku-jax tournament, play and pbrain recognise it), e.g. "
                         f"{args.out.with_suffix('.gjx')}")
    check_folder(args.out, "--out", for_file=True)
    for own in ("best.gjx", "final.gjx"):  # files the run itself writes, now or later
        if os.path.realpath(args.out) == os.path.realpath(workdir / own) or (
                args.out.exists() and (workdir / own).exists()
                and args.out.samefile(workdir / own)):
            raise ValueError(f"--out {args.out} is {workdir / own} itself, the run's own "
                             f"{own}, which training writes; choose another path")
    check_new_files([args.out], args.force, "--out")
    if args.which == "best":
        source = workdir / "best.gjx"
        if not source.exists():
            raise ValueError(f"{workdir} has no best.gjx (it is written by evaluations during "
                             "training: set eval.every)")
        data = source.read_bytes()
        gio.read_exported(source)  # a damaged file is refused, not copied
        args.out.parent.mkdir(parents=True, exist_ok=True)
        gio.write_atomic(args.out, data)  # a copy cut short leaves the file it replaces
        print(f"wrote {args.out} (best model, copied from {source})")
        return 0
    config_path = workdir / "config.json"
    if config_path.exists():
        config_class, make_learner = algorithms.learner_entry(
            config_lib.algorithm_of(config_path))
        data = gio.read_json_object(config_path, "restore the run's config.json or train again")
        try:
            cfg = config_lib.from_dict(config_class, data)
        except ValueError as err:
            raise ValueError(f"config file '{config_path}': {err}") from None
    else:
        cfg, make_learner = _config_kept_by_checkpoints(workdir)
    learner = make_learner(cfg)
    state, _ = training.restore(learner, workdir)
    if state is None:
        raise ValueError(f"{workdir} has no checkpoint yet")
    iteration = int(state.iteration)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    final = workdir / "final.gjx"
    if final.is_file():  # the run's own export of that checkpoint: its settings may be
        try:             # newer than config.json (a change stored once the run trains on)
            agent = final.read_bytes()
            made = gio.read_exported(final)[0].get("iteration")
        except (OSError, ValueError):
            made = None  # damaged: exported afresh from the checkpoint
        if made == iteration:
            gio.write_atomic(args.out, agent)
            print(f"wrote {args.out} (iteration {iteration}, copied from {final}, the "
                  "run's agent at that checkpoint)")
            return 0
    exported.export_agent(args.out, learner, state.variables,
                          extra={"iteration": iteration})
    print(f"wrote {args.out} (iteration {iteration})")
    return 0


def _config_kept_by_checkpoints(workdir: Path):
    """``(config, make_learner)`` of a run that lost its ``config.json``, from the copy
    its checkpoints keep (``checkpoints/config.json``, as training resumes with). That
    copy does not name the algorithm: it is the one learner whose config reads it."""
    import algorithms
    from gomoku_jax import config as config_lib
    from gomoku_jax import io as gio

    kept = workdir / "checkpoints" / "config.json"
    if not kept.exists():
        raise ValueError(f"{workdir} is not a training work directory (no config.json, "
                         "and no checkpoints/config.json)")
    stored = gio.read_json_object(kept, "train again")
    fits = []
    for algorithm in sorted(algorithms.LEARNERS):
        config_class, make_learner = algorithms.learner_entry(algorithm)
        try:
            fits.append((algorithm, config_lib.from_dict(config_class, stored), make_learner))
        except (TypeError, ValueError):
            continue
    if len(fits) != 1:
        raise ValueError(f"{workdir} has lost its config.json, and the copy its checkpoints "
                         f"keep ({kept}) fits {len(fits)} learners' configs, not one; restore "
                         "config.json (the run's --config, with its algorithm)")
    algorithm, cfg, make_learner = fits[0]
    print(f"{workdir} has no config.json: the {algorithm} config its checkpoints keep is used")
    return cfg, make_learner


PLUGINS: list[str] = []
"""The modules ``--plugin`` imported, in order (worker processes import them too)."""


def _load_plugins(modules: list[str]) -> None:
    """Import the ``--plugin`` modules, in order; ValueError naming one that fails."""
    import importlib
    import os

    if not modules:
        return
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # after the installed packages: it shadows none
    importlib.invalidate_caches()  # a module written since the last import is found
    for module in modules:
        if module.endswith(".py") or "/" in module or "\\" in module:
            stem = Path(module).stem
            raise ValueError(f"--plugin {module}: give a module name (e.g. {stem}, with its "
                             "folder as the current directory), not a file")
        try:
            imported = importlib.import_module(module)
        except Exception as error:  # noqa: BLE001 (whatever the module raises)
            from gomoku_jax.io import brief

            first = brief(error)
            detail = f"{type(error).__name__}: {first}" if first else type(error).__name__
            missing = (isinstance(error, ModuleNotFoundError) and error.name is not None
                       and (module + ".").startswith(error.name + "."))  # not one it imports
            hint = ("; a plugin is found by its module name in the current folder or a "
                    "folder of PYTHONPATH" if missing else "")
            raise ValueError(f"--plugin {module}: cannot import it ({detail}"
                             f"{_raised_at(error)}){hint}") from None
        _check_not_shadowed(module, imported)
        PLUGINS.append(module)


def _raised_at(error: BaseException) -> str:
    """`` at FILE:LINE`` of the plugin's own line that raised ``error`` (`io.raised_at`:
    a plugin's ``register_network`` refused in `networks` is named at the plugin's call),
    else of the innermost frame outside the import machinery and this file; or ``""``."""
    from gomoku_jax import io as gio

    at = gio.raised_at(error, fallback=True, skip=(__file__,))
    return f" at {at.filename}:{at.lineno}" if at else ""


def _check_not_shadowed(name: str, module) -> None:
    """A warning on stderr when ``--plugin name`` imported an installed module although
    the current folder holds a module of that name (``test.py`` against the standard
    library's ``test``): the plugin there was not loaded. (Not an error: it may be the
    source of the installed package.)"""
    import os

    top = name.partition(".")[0]
    file, folder = Path(os.getcwd()) / f"{top}.py", Path(os.getcwd()) / top
    here = [p for p in (file, folder) if p.exists()]
    # where the import found it: its file, or a namespace package's folders
    found = [Path(p) for p in ([module.__file__] if getattr(module, "__file__", None)
                               else getattr(module, "__path__", []))]
    ours = any(p.resolve() == file.resolve() or p.resolve().is_relative_to(folder.resolve())
               for p in found)
    if here and not ours:
        shown = found[0] if found else "a built-in module"
        print(f"gomoku-jax: warning: --plugin {name} imported {shown}, "
              f"not {here[0].name} in this folder: an installed module of that name comes "
              "first; rename yours if it is the plugin", file=sys.stderr, flush=True)


def nonempty_path(text: str) -> Path:
    """An ``argparse`` type: ``text`` as a `Path`, refusing an empty string (``Path("")``
    is the current folder, which an empty ``--workdir ""`` from a script's unset variable
    never means)."""
    if not text:
        raise argparse.ArgumentTypeError("the path is empty")
    return Path(text)


def output_file(text: str) -> Path:
    """An ``argparse`` type for a file a command writes when it is done: a directory, or
    a place where its folder cannot be made or written (a file in the way, no write
    permission), is refused at once, not after the work."""
    from gomoku_jax.io import check_folder

    if text == "":
        raise argparse.ArgumentTypeError("the path is empty; give the file to write")
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory; give the file to write")
    try:
        check_folder(path, "", for_file=True)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).strip()) from None
    return path


_NUMBER = re.compile(r"-\d+(\.\d*)?([eE][-+]?\d+)?|-\.\d+")


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` that takes options only as spelled, and names an
    unknown option before missing ones.

    Exact options: argparse's abbreviations (``allow_abbrev``, on by default there) are
    off, so ``tournament --games 3`` is refused as an unknown option instead of being
    read as ``--games-per-pair 3``, and a script's options keep their meaning when a
    command gains an option that shares a prefix. Pass ``allow_abbrev=True`` to have
    them back.

    Unknown before missing: argparse checks the required arguments before it reports
    unrecognised ones, so a mistyped option (``train --confg x.json``) was answered only
    with "the following arguments are required: --config". This parser answers
    "unrecognized arguments: --confg" then. Its sub-commands' parsers are of the same
    class. Every command and experiment script of the project parses with it.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def chosen(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The innermost sub-command's parser that ``parsed`` went through (else this
        parser): the one to refuse arguments left over after it, so that its usage is
        printed (``gomoku-jax train: error: unrecognized arguments: --iter 3``)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(parsed, action.dest, None) or "")
                if chosen is not None:
                    return chosen.chosen(parsed) if isinstance(chosen, ArgumentParser) else chosen
        return self

    def parse_known_args(self, args=None, namespace=None):
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def _unknown_options(self) -> list[str]:
        unknown = []
        for token in getattr(self, "_given", ()):
            if token == "--":
                break
            if not token.startswith("-") or token == "-" or _NUMBER.fullmatch(token):
                continue
            name = token.split("=", 1)[0]
            known = self._option_string_actions
            if name in known or (self.allow_abbrev and name.startswith("--") and any(
                    option.startswith(name) for option in known)):
                continue
            unknown.append(token)
        return unknown

    def error(self, message):
        if message.startswith("the following arguments are required"):
            unknown = self._unknown_options()
            if unknown:
                message = f"unrecognized arguments: {' '.join(unknown)}"
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    from gomoku_jax import config as config_lib

    count = config_lib.count_argument  # integer options with bounds: games, ports...

    parser = ArgumentParser(
        prog="gomoku-jax",
        description="A JAX-native research framework for Gomoku and other k-in-a-row games.",
    )
    parser.add_argument(
        "--plugin", action="append", default=[], metavar="MODULE",
        help="import MODULE (a dotted module name; the current directory is searched too) "
             "before the command, so that its register_network / register_agent calls take "
             "effect (repeatable; give it before the command)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bench = sub.add_parser(
        "bench", help="run a benchmark (options after the name; see `bench game --help`)",
        add_help=False,
    )
    bench.add_argument("which", choices=BENCHMARKS, help="which benchmark")
    game = sub.add_parser("random-game", help="play and print one game of random moves")
    game.add_argument("--size", type=int, default=15, help="board side, 3 to 19 (default 15)")
    game.add_argument("--k", type=int, default=5, help="stones in a row to win (default 5)")
    game.add_argument("--rule", default="freestyle", choices=["freestyle", "standard"])
    game.add_argument("--seed", type=config_lib.seed_argument, default=0,
                      help="random seed (default 0)")
    game.add_argument("--moves", action="store_true", help="also print the move list")
    game.add_argument("--svg", type=output_file, default=None, help="write an SVG picture here")
    tour = sub.add_parser("tournament", help="round robin between named agents")
    tour.add_argument("--config", type=nonempty_path, default=None,
                      help="JSON with game, agents, games_per_pair, opening_stones, seed and a "
                           "description (free text)")
    tour.add_argument("--agents", nargs="+", default=None,
                      help="agent names, e.g. random heuristic random+killer alphabeta-2 "
                           "(replaces a --config's list)")
    tour.add_argument("--size", type=int, default=None,
                      help="board side (config, else an exported agent's game, else 15)")
    tour.add_argument("--k", type=int, default=None,
                      help="stones in a row to win (config, else an exported agent's game, else 5)")
    tour.add_argument("--rule", default=None, choices=["freestyle", "standard"])
    tour.add_argument("--games-per-pair", type=count(1), default=None,
                      help="games each pair plays, colours alternating (config or 20)")
    tour.add_argument("--opening-stones", type=count(0), default=None,
                      help="random stones near the centre before each pair of games (config or 0)")
    tour.add_argument("--seed", type=config_lib.seed_argument, default=None,
                      help="random seed (config or 0)")
    tour.add_argument("--out", type=nonempty_path, default=None,
                      help="folder for the reports: tournament.json, tournament.md and "
                           "heatmap.png (the win rate of each pairing, draws not counted as wins)")
    tour.add_argument("--force", action="store_true",
                      help="replace the reports already in --out (refused without it), and "
                           "play from the start where its kept matches cannot be resumed")
    tour.add_argument("--no-progress", action="store_true", help="no progress bar")
    play = sub.add_parser("play", help="play against an agent in the browser (a local page)")
    play.add_argument("--agent", default="heuristic",
                      help="agent name, e.g. heuristic, pure-mcts-1000, runs/x/final.gjx@200 "
                           "(default heuristic; the page can change it)")
    play.add_argument("--simulations", type=count(1, config_lib.PLAY_MAX_BUDGET), default=None,
                      help="simulations per move of a search agent (default: its own)")
    play.add_argument("--colour", choices=["black", "white"], default="black",
                      help="your colour (white: the agent opens; default black)")
    play.add_argument("--size", type=int, default=None,
                      help="board side (default: an exported agent's game, else 15)")
    play.add_argument("--k", type=int, default=None,
                      help="stones in a row to win (default: an exported agent's game, else 5)")
    play.add_argument("--rule", default=None, choices=["freestyle", "standard"])
    play.add_argument("--host", default="127.0.0.1",
                      help="address to bind, IPv4 or IPv6 (default 127.0.0.1: this machine only)")
    play.add_argument("--port", type=count(0, 65535), default=8000,
                      help="port (default 8000; 0 = a free port, printed on start)")
    play.add_argument("--seed", type=config_lib.seed_argument, default=0,
                      help="random seed for the agent (default 0)")
    play.add_argument("--open", action="store_true", help="open the page in a web browser")
    play.add_argument("--verbose", action="store_true", help="log every request")
    pbrain = sub.add_parser("pbrain", help="run an agent as a Gomocup (Piskvork) brain on stdin/stdout")
    pbrain.add_argument("--agent", default="heuristic",
                        help="agent name, e.g. random, heuristic, alphabeta-3, or an exported "
                             "agent's .gjx file (default heuristic)")
    pbrain.add_argument("--seed", type=config_lib.seed_argument, default=0,
                        help="random seed for the agent (default 0)")
    train = sub.add_parser("train", help="train an experiment config (resumes from checkpoints)")
    train.add_argument("--config", type=nonempty_path, required=True,
                       help="experiment JSON, e.g. experiments/configs/az_9x9_cpu.json")
    train.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a config value by dotted key (repeatable), "
                            "e.g. --set search.num_simulations=32")
    train.add_argument("--variant", action="append", metavar="NAME",
                       help="apply a named variant of the config file (repeatable), "
                            "e.g. --variant 2rb")
    train.add_argument("--smoke", action="store_true",
                       help="the config's tiny smoke variant (after any --variant)")
    train.add_argument("--workdir", type=nonempty_path, required=True,
                       help="folder for checkpoints, logs, reports and exported params")
    train.add_argument("--iterations", type=count(1), default=None,
                       help="stop after this many iterations (the schedule still follows "
                            "the config)")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.add_argument("--no-compile-cache", action="store_true",
                       help="do not keep compiled programs on disk (by default they go to "
                            "$JAX_COMPILATION_CACHE_DIR, else ~/.cache/gomoku-jax/xla, so "
                            "that a rerun or a resume loads them instead of compiling)")
    train.add_argument("--distributed", action="store_true",
                       help="several hosts: call jax.distributed.initialize() first (it finds "
                            "its settings itself under SLURM, Open MPI, Cloud TPU and GKE; "
                            "elsewhere give the three options below)")
    train.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                       help="with --distributed: process 0's address, the same for every "
                            "process (or JAX_COORDINATOR_ADDRESS)")
    train.add_argument("--num-processes", type=count(1), default=None,
                       help="with --distributed: how many processes run the command")
    train.add_argument("--process-id", type=count(0), default=None,
                       help="with --distributed: this process's number, 0 to N-1")
    export = sub.add_parser("export", help="write a training run's agent to one params file")
    export.add_argument("--workdir", type=nonempty_path, required=True,
                        help="the training work directory")
    export.add_argument("--out", type=nonempty_path, required=True, help="the file to write (.gjx)")
    export.add_argument("--which", choices=["latest", "best"], default="latest",
                        help="latest checkpoint or best evaluated model (default latest)")
    export.add_argument("--force", action="store_true",
                        help="replace --out if it exists (refused without it)")
    records = sub.add_parser(
        "records", help="game records (options after the action; see `records generate --help`)",
        add_help=False,
    )
    records.add_argument("action", choices=["generate"], help="what to do")
    return parser


def _is_plugin(token: str) -> bool:
    """Whether ``token`` is the ``--plugin`` option (``--plugin`` or ``--plugin=MODULE``)."""
    return token == "--plugin" or token.startswith("--plugin=")


def _command_at(argv: list[str]) -> int:
    """The index in ``argv`` of the first token after the options that go before the
    command (``--plugin MODULE``, ``--plugin=MODULE``): the command, or what stands in
    its place."""
    i = 0
    while i < len(argv) and _is_plugin(argv[i]):
        i += 2 if argv[i] == "--plugin" else 1
    return i


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    at = _command_at(argv)
    if at < len(argv) and argv[at].startswith("-") and argv[at] not in ("-h", "--help"):
        parser.error(f"unrecognized arguments: {argv[at]} (only --plugin MODULE goes before "
                     "the command)")
    command = argv[at:]
    if command[:1] in (["bench"], ["records"]) and (
            len(command) == 1 or command[1] in ("-h", "--help")):
        # these pass their options on to the chosen script: an overview of the choices
        if len(command) > 1:
            print(OVERVIEWS[command[0]])
            return 0
        choice = "a benchmark" if command[0] == "bench" else "an action"
        print(f"{OVERVIEWS[command[0]]}\n\ngomoku-jax {command[0]}: error: give {choice}",
              file=sys.stderr)
        return 2
    if command[:1] in (["bench"], ["records"]) and command[1].startswith("-"):
        # their options belong to the chosen script, which comes first
        first = "a benchmark" if command[0] == "bench" else "the action"
        parser.error(f"{command[0]}: give {first} before its options (gomoku-jax {command[0]} "
                     f"{'NAME' if command[0] == 'bench' else 'generate'} "
                     f"{' '.join(command[1:])}); got {command[1]}")
    args, rest = parser.parse_known_args(argv)
    if rest and args.command not in ("bench", "records"):  # (theirs go to their script)
        # refused by the command's parser, with its usage, before anything starts
        hint = ("; --plugin goes before the command (gomoku-jax --plugin MODULE "
                f"{args.command} ...)" if any(map(_is_plugin, rest)) else "")
        parser.chosen(args).error(f"unrecognized arguments: {' '.join(rest)}{hint}")
    try:
        multi = [f"--{name.replace('_', '-')}" for name in ("coordinator", "num_processes",
                                                            "process_id")
                 if getattr(args, name, None) is not None]
        if multi and not args.distributed:  # else N runs would write one workdir each alone
            raise ValueError(f"{', '.join(multi)} set up a run of several processes: add "
                             "--distributed")
        if getattr(args, "distributed", False):  # before anything (a plugin) touches a device
            _initialize_distributed(args)
        _load_plugins(args.plugin)
        if args.command == "bench":
            import importlib

            importlib.import_module(f"experiments.bench_{args.which}").main(rest)
            return 0
        if args.command == "records":
            from experiments import generate_records

            return generate_records.main(rest)
        if args.command == "tournament":
            return _tournament(args)
        if args.command == "pbrain":
            return _pbrain(args)
        if args.command == "play":
            return _play(args)
        if args.command == "train":
            return _train(args)
        if args.command == "export":
            return _export(args)
        return _random_game(args)
    except (ValueError, OSError) as err:  # bad settings or files: one clear line
        print(f"gomoku-jax: error: {err}", file=sys.stderr)
        return 2
    except (FloatingPointError, MemoryError) as err:  # a run that diverged, or ran out
        # of device memory; others (JAX_DEBUG_NANS, Python's own MemoryError) raise
        from gomoku_jax.training import OutOfDeviceMemory, TrainingDiverged

        if not isinstance(err, (TrainingDiverged, OutOfDeviceMemory)):
            raise
        print(f"gomoku-jax: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ngomoku-jax: interrupted", file=sys.stderr)
        return 130


def _initialize_distributed(args: argparse.Namespace) -> None:
    """``jax.distributed.initialize`` with the command's options; its own detection
    (SLURM, Open MPI, Cloud TPU, GKE) fills what they leave out."""
    import jax

    given = {"coordinator_address": args.coordinator, "num_processes": args.num_processes,
             "process_id": args.process_id}
    if args.num_processes is not None and args.process_id is not None and not (
            0 <= args.process_id < args.num_processes):
        raise ValueError(f"--process-id must be from 0 to --num-processes - 1 = "
                         f"{args.num_processes - 1}, got {args.process_id}")
    from gomoku_jax.agents import digits

    host, _, port = (args.coordinator or "").rpartition(":")
    if args.coordinator is not None and not (host.strip("[]") and digits(port)
                                             and 1 <= int(port) <= 65535):
        raise ValueError(f"--coordinator must be HOST:PORT (process 0's address and a "
                         f"free port from 1 to 65535), got {args.coordinator!r}")
    if host.strip("[]") in ("127.0.0.1", "localhost", "::1"):
        # every process on this machine: the coordinator listens on loopback only (JAX
        # binds every interface by default, which processes on other hosts need)
        given["coordinator_bind_address"] = f"{host}:{port}"
    if args.num_processes is not None and args.num_processes > 1:
        who = "this process" if args.process_id is None else f"process {args.process_id}"
        print(f"--distributed: {who} of {args.num_processes} waiting "
              f"for the others at {args.coordinator or 'the detected coordinator'} (JAX "
              "gives up after 300 s)", file=sys.stderr, flush=True)
    try:
        jax.distributed.initialize(**{k: v for k, v in given.items() if v is not None})
    except ValueError as err:
        raise ValueError(
            f"--distributed: {err} Outside SLURM, Open MPI, Cloud TPU and GKE give every "
            "process --coordinator HOST:PORT (process 0's address), --num-processes N and "
            "its own --process-id") from None


def _one_line_warnings(show):
    """A ``warnings.showwarning`` that prints the project's own warnings (a skipped game
    record, a damaged file a finished run writes again, a setting that does nothing) as
    one line each, without Python's source line, and passes the others (JAX's,
    orbax's...) to ``show``."""
    from gomoku_jax.arena import ArenaWarning
    from gomoku_jax.config import ConfigWarning
    from gomoku_jax.records import RecordWarning
    from gomoku_jax.training import RunWarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if not issubclass(category, (ArenaWarning, ConfigWarning, RecordWarning, RunWarning)):
            return show(message, category, filename, lineno, file, line)
        text = " ".join(str(message).split())
        print(f"gomoku-jax: warning: {text}", file=sys.stderr if file is None else file)

    return showwarning


def console() -> None:
    """The ``gomoku-jax`` command: `main`, then exit with its status. After Ctrl-C the
    process ends at once (its files are already closed and its message written): XLA may
    still be compiling on its own threads, and tearing the interpreter down under them
    can crash it (a segmentation fault or an LLVM abort instead of exit status 130).
    Warnings print as one line."""
    import warnings

    warnings.showwarning = _one_line_warnings(warnings.showwarning)
    code = main()
    if code == 130:
        if "multiprocessing" in sys.modules:  # what its atexit hook does, which os._exit skips:
            # release the semaphores of worker pools (else its resource tracker warns of leaks)
            import multiprocessing.util

            try:
                multiprocessing.util._exit_function()
            except BaseException:  # noqa: BLE001 - a second Ctrl-C: end all the same
                pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except OSError:  # e.g. a closed pipe: exit all the same
                pass
        os._exit(130)
    sys.exit(code)


if __name__ == "__main__":
    console()
