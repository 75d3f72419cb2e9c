"""Benchmark: AlphaZero search (PUCT and Gumbel) with a network, and the learner's speed.

Commands (the full sweep takes long on a 2-core CPU; ``--quick`` about 3 minutes)::

    gomoku-jax bench alphazero --out experiments/results/bench_alphazero_cpu.json
    gomoku-jax bench alphazero --parts search --backend linear \
        --out experiments/results/bench_alphazero_cpu_linear.json
    gomoku-jax bench alphazero --preset gpu --out experiments/results/bench_alphazero_gpu.json
    gomoku-jax bench alphazero --quick

Part 1, search. For each board (``--sizes``, k=5), batch (``--batches``), number of
simulations (``--simulations``) and algorithm (``--algorithms``), one jitted
`gomoku_jax.search.run_search` (``mctx.muzero_policy`` for ``puct``,
``mctx.gumbel_muzero_policy`` for ``gumbel``; ``--backend linear``: the same policies from
`gomoku_jax.tree_search`, whose cost per simulation does not grow with the simulations, as
the CPU default trains with) searches a batch of openings of
``--opening-stones`` random stones near the centre. After a warm-up call (which compiles)
``--repeats`` calls are timed: simulations/s = batch * simulations / seconds, and ms per
simulation step (one step advances every game of the batch by one simulation). The
reference, timed in the same run, is the same search with `search.uniform_evaluate`
(no network); the network's share of the cost is ``1 - uniform seconds / network seconds``.
The network is the CPU default's (``network`` of ``experiments/configs/az_9x9_cpu.json``),
or ``--preset gpu`` (seed 000's 10 x 128 ResNet in bfloat16), or ``--network`` /
``--options`` / ``--dtype``. A combination whose search tree (its bytes computed from the
``Tree`` shapes with ``jax.eval_shape``) exceeds ``--max-tree-gb`` is skipped, with a
note and an entry under ``"skipped"`` in the report.

The search part's game has the stone planes (``SEARCH_OBSERVATION``), the planes of every
recorded search figure, whatever the CPU default's are.

Part 2, learner. `algorithms.alphazero.make_learner` on the CPU default config (the
network chosen above, then ``--set key=value`` overrides; the recorded figures predate the
default's threat planes and sparring partner: ``--set game.observation=stones-colour --set
selfplay.opponent=null`` repeats them): one ``iteration`` as a warm-up,
then ``--repeats`` timed iterations, moves/s from ``metrics["moves"]``; and the learner's
SGD part alone (its ``_train``, jitted, on a buffer filled with random positions):
samples/s = sgd_steps * batch_size / seconds. Self-play moves/s is estimated as the moves
over the iteration's time less the SGD time.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from experiments.common import (add_search_bench_arguments, device_description, fill_unset,
                                publish, run_script, time_calls, write_report)
from gomoku_jax import config as config_lib
from gomoku_jax import networks
from gomoku_jax import search as search_lib
from gomoku_jax.cli import ArgumentParser
from gomoku_jax.game import MAX_SIZE, Gomoku, sample_legal_action

CPU_CONFIG = Path(__file__).resolve().parent / "configs" / "az_9x9_cpu.json"
DEFAULT_SIZES = (9, 15)
DEFAULT_BATCHES = (64, 256)
DEFAULT_SIMULATIONS = (16, 64, 200, 400, 800)
QUICK = {"sizes": (9,), "batches": (8,), "simulations": (8, 16)}
GPU_NETWORK = ("resnet", {"blocks": 10, "filters": 128, "dtype": "bfloat16"})
GIB = 1024 ** 3


# ------------------------------------------------------------------------ settings
def cpu_default() -> dict:
    """The CPU default config file as a dict."""
    return json.loads(CPU_CONFIG.read_text())


def choose_network(preset: str = "cpu", name: str | None = None, options: dict | None = None,
                   dtype: str | None = None) -> tuple[str, dict]:
    """``(name, options)`` of the benchmarked network: the preset's, with ``name``
    replacing it (and its options), ``options`` merged over and ``dtype`` set last."""
    if preset == "cpu":
        net = cpu_default()["network"]
        base = (net["name"], dict(net.get("options", {})))
    elif preset == "gpu":
        base = (GPU_NETWORK[0], dict(GPU_NETWORK[1]))
    else:
        raise ValueError(f"preset must be 'cpu' or 'gpu', got {preset!r}")
    net_name, net_options = base if name is None else (name, {})
    net_options = {**net_options, **(options or {})}
    if dtype is not None:
        net_options["dtype"] = dtype
    networks.make_network(net_name, board_size=9, **net_options)  # a clear error now
    return net_name, net_options


# The search benchmarks' input planes: the stone planes (3), which every recorded search
# figure used. The CPU default has since gained threat planes, whose features cost more to
# compute at every expanded node; a fixed choice keeps the search figures comparable.
SEARCH_OBSERVATION = "stones-colour"


def game_env(size: int, observation: str = SEARCH_OBSERVATION) -> Gomoku:
    """The CPU default's game (its rule) on a ``size`` x ``size`` board, with the
    ``observation`` planes (the search benchmarks' fixed choice unless given)."""
    return Gomoku(**{**cpu_default()["game"], "size": size, "observation": observation})


@functools.partial(jax.jit, static_argnums=(0, 2, 3))
def openings(env: Gomoku, key: jax.Array, batch: int, stones: int):
    """``batch`` games [B] after ``stones`` uniformly random moves in the central 5x5."""
    n = env.size
    rows = np.abs(np.arange(n) - n // 2) <= 2
    centre = jnp.asarray((rows[:, None] & rows[None, :]).reshape(-1))  # [A]
    states = jax.vmap(lambda _: env.init())(jnp.arange(batch))
    step = jax.vmap(env.step)
    pick = jax.vmap(sample_legal_action)
    for key in jax.random.split(key, stones):
        legal = states.legal_action_mask & centre
        states = step(states, pick(jax.random.split(key, batch), legal))
    return states


def search_fn(env: Gomoku, evaluate, config: search_lib.SearchConfig):
    """``(params, states [B], key) -> PolicyOutput`` of one search (not jitted)."""
    def fn(params, states, key):
        return search_lib.run_search(env, evaluate, params, states, key, config)
    return fn


def tree_bytes(env: Gomoku, evaluate, params, batch: int, config: search_lib.SearchConfig) -> int:
    """Bytes of the ``Tree`` a search of ``batch`` games builds (from its shapes)."""
    states = jax.eval_shape(lambda: jax.vmap(lambda _: env.init())(jnp.arange(batch)))
    out = jax.eval_shape(search_fn(env, evaluate, config), params, states, jax.random.key(0))
    return int(sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize
                   for x in jax.tree.leaves(out.search_tree)))


def time_search(env, evaluate, params, states, config, repeats: int, seed: int) -> dict:
    batch = states.current_player.shape[0]
    run = search_fn(env, evaluate, config)
    fn = jax.jit(lambda p, s, k: (lambda o: (o.action, o.action_weights))(run(p, s, k)))
    result = time_calls(fn, lambda r: (params, states, jax.random.key(seed + r)), repeats)
    sims = config.num_simulations
    result["sims_per_s"] = batch * sims / result["seconds"]
    result["ms_per_step"] = 1000.0 * result["seconds"] / sims
    return result


# --------------------------------------------------------------------------- search
def run_search_bench(net_name: str, net_options: dict, sizes, batches, simulations,
                     algorithms, repeats: int = 2, opening_stones: int = 4,
                     max_tree_gb: float = 4.0, seed: int = 0, progress: bool = True,
                     on_row=None, backend: str = "mctx") -> dict:
    """Part 1: every (size, batch, simulations, algorithm), network and uniform.
    ``on_row(result)`` gets the result so far after each combination (a run stopped at a
    time limit keeps what it measured)."""
    jobs = [(n, b, s, a) for n in sizes for b in batches for s in simulations for a in algorithms]
    rows, skipped, params_count = [], [], {}
    bar = tqdm(total=len(jobs), desc="bench alphazero: search", disable=not progress)
    for n in sizes:
        env = game_env(n)
        module = networks.make_network(net_name, board_size=n, **net_options)
        variables = networks.init_network(module, jax.random.key(seed), env.observation_shape)
        params_count[str(n)] = networks.param_count(variables)
        evaluate, uniform = search_lib.network_evaluate(module), search_lib.uniform_evaluate(env)
        for b in batches:
            states = openings(env, jax.random.key(seed + 1), b, opening_stones)
            for sims in simulations:
                for algo in algorithms:
                    config = search_lib.SearchConfig(algorithm=algo, num_simulations=sims,
                                                     backend=backend)
                    gb = tree_bytes(env, evaluate, variables, b, config) / GIB
                    where = dict(size=n, batch=b, simulations=sims, algorithm=algo, tree_gb=gb)
                    bar.set_postfix_str(f"{n}x{n} B={b} {algo} {sims}")
                    if gb > max_tree_gb:
                        reason = f"tree {gb:.3g} GiB > --max-tree-gb {max_tree_gb:g}"
                        tqdm.write(f"skipped {n}x{n} batch {b} {algo} {sims} sims: {reason}")
                        skipped.append({**where, "reason": reason})
                        bar.update()
                        continue
                    net = time_search(env, evaluate, variables, states, config, repeats, seed)
                    ref = time_search(env, uniform, None, states, config, repeats, seed)
                    rows.append({**where, "network": net, "uniform": ref,
                                 "ratio": net["sims_per_s"] / ref["sims_per_s"],
                                 "network_share": 1.0 - ref["seconds"] / net["seconds"]})
                    tqdm.write(f"{n}x{n} batch {b} {algo} {sims} sims: "
                               f"{net['sims_per_s']:,.0f} sims/s (uniform "
                               f"{ref['sims_per_s']:,.0f})")
                    if on_row is not None:
                        on_row({"params": params_count, "rows": rows, "skipped": skipped})
                    bar.update()
    bar.close()
    return {"params": params_count, "rows": rows, "skipped": skipped}


# -------------------------------------------------------------------------- learner
def learner_config(net_name: str, net_options: dict, overrides=(), quick: bool = False):
    """The CPU default `AlphaZeroConfig` (its smoke variant when ``quick``) with the
    benchmarked network, then ``overrides`` (``key=value`` strings)."""
    from algorithms import alphazero

    given = config_lib.parse_overrides(overrides)
    network = {"network.name": net_name, "network.options": json.loads(json.dumps(net_options))}
    # the network first, then the overrides in their order (one that sets a network key
    # again replaces the benchmark's, in its own place)
    ordered = {**{k: v for k, v in network.items() if k not in given}, **given}
    cfg, _ = config_lib.load_file(alphazero.AlphaZeroConfig, CPU_CONFIG, overrides=ordered,
                                  variants=["smoke"] if quick else [])
    return cfg


def _fill_buffer(buffer, key, count: int, size: int):
    """``buffer`` with ``count`` random positions added (random stones, uniform policy
    over the empty cells, random +-1 values): SGD costs the same on any content."""
    from gomoku_jax import replay

    k_board, k_player, k_value = jax.random.split(key, 3)
    board = jax.random.choice(k_board, jnp.arange(3, dtype=jnp.int8), (count, size, size),
                              p=jnp.array([0.7, 0.15, 0.15]))
    empty = (board == 0).reshape(count, -1).astype(jnp.float32)  # [M, A]
    policy = empty / jnp.maximum(empty.sum(-1, keepdims=True), 1.0)
    items = buffer.data.replace(
        board=board, player=jax.random.randint(k_player, (count,), 0, 2, jnp.int32),
        last_action=jnp.full((count,), -1, jnp.int32), policy=policy,
        value=jnp.where(jax.random.bernoulli(k_value, 0.5, (count,)), 1.0, -1.0))
    return replay.add(buffer, items)


def run_learner_bench(cfg, repeats: int = 2, seed: int = 0, progress: bool = True,
                      sgd_reference: bool = True) -> dict:
    """Part 2: the learner's iteration (moves/s) and its SGD part alone (samples/s);
    with ``sgd_reference`` also the SGD steps the other way (written out vs a loop),
    which for a large network and many steps written out takes minutes to compile."""
    from algorithms import alphazero

    learner = alphazero.make_learner(cfg)
    bar = tqdm(total=(3 if sgd_reference else 2) * (repeats + 1),
               desc="bench alphazero: learner", disable=not progress)
    start = time.perf_counter()
    state = learner.init(jax.random.PRNGKey(seed))
    state, metrics = learner.iteration(state)
    jax.block_until_ready(metrics)
    compile_s = time.perf_counter() - start
    bar.update()
    moves, elapsed = 0, 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        state, metrics = learner.iteration(state)
        moves += int(metrics["moves"])  # waits for the result
        elapsed += time.perf_counter() - start
        bar.update()
    iteration_s = elapsed / repeats

    tcfg = cfg.train
    count = min(tcfg.buffer_capacity, max(tcfg.min_buffer, 4 * tcfg.batch_size))
    buffer = _fill_buffer(state.buffer, jax.random.key(seed + 1), count, cfg.game.size)
    lr = jnp.float32(tcfg.learning_rate)

    def time_sgd(sgd_learner):
        train = jax.jit(sgd_learner._train)
        timed = time_calls(train, lambda r: (state.variables, state.opt_state, buffer,
                                              jax.random.key(seed + 2 + r), lr), repeats,
                           on_call=bar.update)
        return timed["seconds"], timed["compile_and_first_call_s"]

    sgd_s, sgd_compile_s = time_sgd(learner)
    # the reference in the same run: the SGD steps the other way (loop vs written out)
    other_s = other_compile_s = None
    if sgd_reference:
        other = dataclasses.replace(cfg, train=dataclasses.replace(tcfg, unroll=not tcfg.unroll))
        other_s, other_compile_s = time_sgd(alphazero.make_learner(other))
    bar.close()
    loop_s, unrolled_s = (other_s, sgd_s) if tcfg.unroll else (sgd_s, other_s)
    steps, batch_size = cfg.sgd_steps, tcfg.batch_size
    moves_per_iteration = moves // repeats
    selfplay_s = iteration_s - sgd_s
    return {
        "game": f"{cfg.game.size}x{cfg.game.size}, k={cfg.game.k}",
        "search": {"algorithm": cfg.search.algorithm,
                   "num_simulations": cfg.search.num_simulations},
        "selfplay_batch": cfg.selfplay.batch,
        "selfplay_steps": cfg.selfplay.steps,
        "sgd_steps": steps,
        "batch_size": batch_size,
        "devices": learner.mesh.size,
        "iteration_s": iteration_s,
        "moves_per_iteration": moves_per_iteration,
        "moves_per_s": moves_per_iteration / iteration_s,
        "compile_and_first_iteration_s": compile_s,
        "sgd_s": sgd_s,
        "samples_per_s": steps * batch_size / sgd_s,
        "sgd_compile_and_first_call_s": sgd_compile_s,
        "sgd_unroll": bool(tcfg.unroll),
        "sgd_loop_s": loop_s,
        "sgd_unrolled_s": unrolled_s,
        "sgd_unrolled_speedup": loop_s / unrolled_s if sgd_reference else None,
        "sgd_other_compile_and_first_call_s": other_compile_s,
        "sgd_share": sgd_s / iteration_s,
        "selfplay_moves_per_s": moves_per_iteration / selfplay_s if selfplay_s > 0 else None,
    }


# --------------------------------------------------------------------------- report
def run(net_name: str, net_options: dict, sizes=DEFAULT_SIZES, batches=DEFAULT_BATCHES,
        simulations=DEFAULT_SIMULATIONS, algorithms=search_lib.ALGORITHMS, repeats: int = 2,
        opening_stones: int = 4, max_tree_gb: float = 4.0, overrides=(), quick: bool = False,
        parts=("search", "learner"), seed: int = 0, progress: bool = True,
        partial_path: Path | None = None, sgd_reference: bool = True,
        backend: str = "mctx") -> dict:
    """Both parts; returns the report. With ``partial_path`` the report so far is
    written there (``"partial": true``) after each search combination."""
    report = {
        "benchmark": "AlphaZero search and learner",
        "device": device_description(),
        "network": {"name": net_name, "options": net_options},
        "settings": {"sizes": list(sizes), "batches": list(batches),
                     "simulations": list(simulations), "algorithms": list(algorithms),
                     "k": 5, "repeats": repeats, "opening_stones": opening_stones,
                     "max_tree_gb": max_tree_gb, "quick": quick, "seed": seed,
                     "observation": SEARCH_OBSERVATION, "backend": backend},
    }

    def on_row(result):
        write_report({**report, "partial": True, "search": result["rows"],
                      "skipped": result["skipped"]}, partial_path)

    if "search" in parts:
        result = run_search_bench(net_name, net_options, sizes, batches, simulations,
                                  algorithms, repeats, opening_stones, max_tree_gb, seed,
                                  progress, on_row=on_row if partial_path else None,
                                  backend=backend)
        report["network"]["params"] = result["params"]
        report["search"] = result["rows"]
        report["skipped"] = result["skipped"]
    if "learner" in parts:
        cfg = learner_config(net_name, net_options, overrides, quick)
        report["learner"] = run_learner_bench(cfg, repeats, seed, progress, sgd_reference)
        report["learner"]["config"] = config_lib.to_dict(cfg)
        report["learner"]["overrides"] = list(overrides)
    return report


def format_report(r: dict) -> str:
    net = r["network"]
    options = ", ".join(f"{k}={v}" for k, v in net["options"].items())
    lines = [f"AlphaZero benchmark, network {net['name']}({options}), device: {r['device']}"]
    if "search" in r:
        params = ", ".join(f"{n}x{n}: {c:,}" for n, c in net.get("params", {}).items())
        backend = r["settings"].get("backend", "mctx")
        lines += [
            f"Search ({backend} backend): sims/s = batch x simulations / s; reference = the "
            f"same search with a uniform evaluate (no network); params {params}",
            f"{'board':>7} {'batch':>6} {'algo':>6} {'sims':>5} {'tree MiB':>9} {'sims/s':>11} "
            f"{'ms/step':>9} {'uniform sims/s':>15} {'ratio':>6} {'net share':>9} {'compile s':>9}",
        ]
        rows = [(row, False) for row in r["search"]] + [(row, True) for row in r["skipped"]]
        rows.sort(key=lambda x: (x[0]["size"], x[0]["batch"], x[0]["algorithm"],
                                 x[0]["simulations"]))
        for row, skipped in rows:
            head = (f"{row['size']:>4}x{row['size']:<2} {row['batch']:>6} {row['algorithm']:>6} "
                    f"{row['simulations']:>5} {row['tree_gb'] * 1024:>9.1f}")
            if skipped:
                lines.append(f"{head}   skipped: {row['reason']}")
                continue
            n, u = row["network"], row["uniform"]
            lines.append(f"{head} {n['sims_per_s']:>11,.0f} {n['ms_per_step']:>9.2f} "
                         f"{u['sims_per_s']:>15,.0f} {row['ratio']:>6.2f} "
                         f"{row['network_share']:>8.0%} {n['compile_and_first_call_s']:>9.1f}")
    if "learner" in r:
        le = r["learner"]
        search = le["search"]
        selfplay = le["selfplay_moves_per_s"]
        lines += [
            f"Learner ({le['game']}, {search['algorithm']} {search['num_simulations']} sims, "
            f"{le['selfplay_batch']} games x {le['selfplay_steps']} moves, {le['sgd_steps']} SGD "
            f"steps of {le['batch_size']}, {le['devices']} device(s)):",
            f"  iteration : {le['iteration_s']:.2f} s, {le['moves_per_s']:,.0f} moves/s "
            f"(compile and first iteration {le['compile_and_first_iteration_s']:.1f} s)",
            f"  SGD alone : {le['sgd_s']:.2f} s, {le['samples_per_s']:,.0f} samples/s "
            f"({le['sgd_share']:.0%} of the iteration)",
            (f"  SGD steps written out vs as a loop: {le['sgd_unrolled_s']:.2f} s vs "
             f"{le['sgd_loop_s']:.2f} s ({le['sgd_unrolled_speedup']:.1f}x; this config "
             f"{'unrolls' if le['sgd_unroll'] else 'loops'})")
            if le["sgd_unrolled_speedup"] is not None
            else f"  SGD steps {'written out' if le['sgd_unroll'] else 'as a loop'} "
                 "(the other way not measured: --no-sgd-reference)",
            f"  self-play : {selfplay:,.0f} moves/s (iteration less SGD)" if selfplay
            else "  self-play : (SGD time not below the iteration's)",
        ]
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = ArgumentParser(prog="gomoku-jax bench alphazero",
                            description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=config_lib.count_argument(5, MAX_SIZE), nargs="+",
                        default=None, help=f"board sides, k=5: 5 (for the central 5x5) to "
                                           f"{MAX_SIZE} (default 9 15)")
    parser.add_argument("--preset", choices=["cpu", "gpu"], default="cpu",
                        help="cpu: the CPU default config's network; gpu: resnet blocks=10 "
                             "filters=128 in bfloat16 (default cpu)")
    parser.add_argument("--network", default=None, help="network name (replaces the preset's)")
    parser.add_argument("--options", default=None,
                        help='network options as JSON, merged over the preset\'s, e.g. '
                             '\'{"blocks": 4, "filters": 32}\'')
    parser.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"],
                        help="compute dtype of the network")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a value of the learner's config (repeatable), "
                             "e.g. --set selfplay.batch=128")
    parser.add_argument("--parts", nargs="+", choices=["search", "learner"],
                        default=["search", "learner"], help="what to measure (default both)")
    parser.add_argument("--max-tree-gb", type=float, default=4.0,
                        help="skip a combination whose search tree is larger (GiB, default 4)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny: 9x9, batch 8, 8 and 16 simulations, the learner's smoke "
                             "variant (explicit options still apply)")
    add_search_bench_arguments(parser, "games searched in lockstep (default 64 256)",
                               "simulations a search (default 16 64 200 400 800)", 2,
                               "timed calls after the warm-up (default 2)",
                               "experiments/results/bench_alphazero_cpu.json")
    parser.add_argument("--backend", choices=search_lib.BACKENDS, default=None,
                        help="search implementation: mctx's policies or the linear-time "
                             "gomoku_jax.tree_search (default mctx)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--sgd-reference", action=argparse.BooleanOptionalAction, default=True,
                        help="also time the learner's SGD steps the other way (written out "
                             "vs a loop; default on; off for large networks, whose written-out "
                             "steps take minutes to compile)")
    args = parser.parse_args(argv)

    fill_unset(args, QUICK if args.quick else {"sizes": DEFAULT_SIZES, "batches": DEFAULT_BATCHES,
                                               "simulations": DEFAULT_SIMULATIONS})
    sizes, batches, simulations = tuple(args.sizes), tuple(args.batches), tuple(args.simulations)
    if args.set and "learner" not in args.parts:  # (they would go unread)
        parser.error(f"--set overrides the learner's config, which --parts "
                     f"{' '.join(args.parts)} does not measure")
    if args.backend is not None and "search" not in args.parts:  # (it would go unused)
        parser.error(f"--backend chooses the search timed, which --parts "
                     f"{' '.join(args.parts)} does not measure")
    backend = args.backend or "mctx"
    if not args.max_tree_gb > 0:  # (nan too, which would skip nothing)
        parser.error(f"--max-tree-gb must be above 0, got {args.max_tree_gb}")
    for n in sizes:
        game_env(n)  # a clear error before any timing
    options = None
    if args.options is not None:
        try:
            options = config_lib.loads(args.options)  # a key given twice is refused
        except json.JSONDecodeError as error:
            parser.error(f"--options is not valid JSON ({error}): {args.options!r}")
        if not isinstance(options, dict):
            parser.error(f"--options must be a JSON object, got {args.options!r}")
    try:
        net_name, net_options = choose_network(args.preset, args.network, options, args.dtype)
        cfg = (learner_config(net_name, net_options, args.set, args.quick)
               if "learner" in args.parts else None)
    except ValueError as error:
        parser.error(str(error))
    del cfg  # checked here; `run` builds it again
    report = run(net_name, net_options, sizes, batches, simulations, tuple(args.algorithms),
                 args.repeats, args.opening_stones, args.max_tree_gb, tuple(args.set),
                 args.quick, tuple(args.parts), args.seed, progress=not args.no_progress,
                 partial_path=partial_report(args.out), sgd_reference=args.sgd_reference,
                 backend=backend)
    publish(report, format_report(report), args.out)
    if args.out is not None:  # the whole report is in --out now
        partial_report(args.out).unlink(missing_ok=True)
    return report


def partial_report(out: Path | None) -> Path | None:
    """Where the report so far goes while the benchmark runs: beside ``out``
    (``NAME.partial.json``), so that an interrupted run keeps what it measured without
    replacing an earlier complete report in ``out``."""
    if out is None:
        return None
    return out.with_name(f"{out.name[:-5] if out.name.endswith('.json') else out.name}"
                         ".partial.json")


if __name__ == "__main__":
    run_script(main)
