"""Benchmark: the cost of one simulation as the tree grows, mctx vs `gomoku_jax.tree_search`.

Commands::

    gomoku-jax bench search --out experiments/results/bench_search_cpu.json
    gomoku-jax bench search --preset gpu --warmup 0 --repeats 1 --min-seconds 0.3 \
        --simulations 16 800 --mctx-simulations 800 \
        --out experiments/results/bench_search_gpu_h200.json
    gomoku-jax bench search --quick

The GPU command is the README's (about 6 minutes on an H200): one timed call at 800
simulations, since mctx's PUCT search of 800 at batch 1,024 takes 42 s a call, and with the
defaults (3 warm-up calls, 5 timed) mctx's runs at 800 would be skipped by the time budget.

For each algorithm (``puct``: ``muzero_policy``; ``gumbel``: ``gumbel_muzero_policy``) and
number of simulations, one jitted `gomoku_jax.search.run_search` searches a batch of
openings (``--opening-stones`` random stones near the centre) with ``backend="linear"``
(ours, ``--simulations``) and ``backend="mctx"`` (the reference, ``--mctx-simulations``,
timed in the same run). After a call that compiles and ``--warmup`` untimed calls, calls
are timed until there are ``--repeats`` of them and they took ``--min-seconds`` together
(a search of 16 simulations takes milliseconds: one slow call among three would be the
figure), and the median kept: seconds per search and seconds per simulation (one
simulation advances every game of the batch by one simulation). mctx's cost per simulation grows with
the tree, so its largest run is estimated first (from its run at half the simulations,
assuming the cost per simulation doubles) and skipped, with a note, when the estimate
exceeds ``--mctx-budget-s``.

``--searches-per-call N`` makes each timed call one compiled program that runs N searches
one after the other, as self-play runs them inside its compiled iteration. With one search
a call (the default) every call allocates its tree afresh (about 100 MB at 800 simulations
and batch 64), and on a CPU that fresh memory costs page faults; a program of N searches
allocates it once. The difference shows in the depth-1 control, which is no deeper at 800
simulations than at 16: per call its cost per simulation grows with the tree, in one
program it does not (see the README).

The summary gives, per algorithm, ours' cost per simulation at the largest count over the
smallest (target <= 1.5) and the speedup over mctx at 400 simulations (target >= 8), and
the mean depth of the simulations (the depth of the nodes they created): a simulation
costs O(depth), so part of the growth of ours from 16 to 800 simulations is the deeper
tree. The control separates the two: ours at the fewest and the most simulations with
``max_depth=1`` (every simulation stops at a child of the root; rows with backend
``linear-depth1``), whose growth is the tree's size alone (summary ``depth1_growth``).
And one selection step is timed alone (`time_selection`, rows under ``selection``): the
root's and an interior node's, for the whole batch, on the tree of ours' largest search.
A level of a path costs one interior step, so the extra depth of the largest search times
that step, over a simulation at the fewest, is the growth the deeper paths bring whatever
the rest of the search costs (summary ``selection_growth``).

Presets. ``cpu`` (default): 9x9 (the CPU default config's rules), batch 64, the uniform
network (`search.uniform_evaluate`, no parameters), ours at 16 64 200 400 800 and mctx
at 16 64 200 400 800 (800 within the budget). ``gpu``: batches 256 and 1024, seed 000's
10 x 128 ResNet in bfloat16 (`gomoku_jax.networks`), 16 and 800 simulations for both
(for an H100 / H200; on a CPU it takes hours).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from experiments.bench_alphazero import SEARCH_OBSERVATION, choose_network, game_env, openings
from experiments.common import (add_search_bench_arguments, device_description, publish,
                                run_script, time_calls)
from gomoku_jax import networks, ops
from gomoku_jax import search as search_lib
from gomoku_jax import tree_search
from gomoku_jax.cli import ArgumentParser
from gomoku_jax.config import count_argument
from gomoku_jax.game import MAX_SIZE

PRESETS = {
    "cpu": {"batches": (64,), "simulations": (16, 64, 200, 400, 800),
            "mctx_simulations": (16, 64, 200, 400, 800), "network": "uniform"},
    "gpu": {"batches": (256, 1024), "simulations": (16, 800),
            "mctx_simulations": (16, 800), "network": "gpu"},
}
QUICK = {"batches": (8,), "simulations": (8, 16), "mctx_simulations": (8, 16),
         "selection_iterations": 20}
SPEEDUP_AT = 400
# Selection steps per timed loop of `time_selection` (about 0.1 s on a 2-core CPU).
SELECTION_ITERATIONS = 1000


def _depths(parents: np.ndarray) -> np.ndarray:
    """Depth of every node (-1 for unused) from ``parents [B, N]`` (parents first)."""
    depth = np.full(parents.shape, -1, np.int64)
    depth[:, 0] = 0
    rows = np.arange(parents.shape[0])
    for i in range(1, parents.shape[1]):
        p = parents[:, i]
        depth[:, i] = np.where(p >= 0, depth[rows, np.maximum(p, 0)] + 1, -1)
    return depth


def mean_depth(parents) -> float:
    """Mean depth of the nodes the simulations created (their path lengths), from a
    tree's ``parents [B, N]``."""
    depth = _depths(np.asarray(parents))
    return float(depth[:, 1:][depth[:, 1:] > 0].mean()) if (depth[:, 1:] > 0).any() else 0.0


def _minor_faults() -> int | None:
    """Page faults this process has taken that needed no disk (new memory pages), from
    ``getrusage``; None where the platform has no such count."""
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


def time_search(env, evaluate, params, states, algorithm: str, sims: int, backend: str,
                repeats: int, seed: int, warmup: int = 0, min_seconds: float = 0.0,
                max_depth: int | None = None, searches: int = 1) -> dict:
    """Median seconds of a jitted search (`experiments.common.time_calls`), the mean
    depth of the tree of the first call, and the median page faults of a call that
    needed no disk (``faults_per_call``: new memory pages; None where not counted).

    With ``searches`` > 1 each timed call is one compiled program that runs that many
    searches one after the other (a ``fori_loop``, a fresh key each), as self-play runs
    its searches: the tree's memory is then allocated once per call, not once per search.
    Each search's states pass through an ``optimization_barrier`` with the loop index, so
    XLA cannot hoist the root's evaluation (the same states every time) out of the loop,
    and every search's actions and weights are summed into the result, so none is
    dropped. ``seconds`` stays per call; ``s_per_sim`` is per simulation of one search."""
    config = search_lib.SearchConfig(algorithm=algorithm, num_simulations=sims, backend=backend,
                                     max_depth=max_depth)

    def one(params, states, key):
        out = search_lib.run_search(env, evaluate, params, states, key, config)
        return out.action, out.action_weights, out.search_tree.parents

    @jax.jit
    def run(params, states, key):
        first = one(params, states, key)
        if searches == 1:
            return first

        def body(i, total):  # the other searches
            fresh, i = jax.lax.optimization_barrier((states, i))
            action, weights, _ = one(params, fresh, jax.random.fold_in(key, i))
            return total + jnp.sum(action) + jnp.sum(weights)

        return first + (jax.lax.fori_loop(1, searches, body, jnp.float32(0)),)

    outputs, faults = [], []  # the compiling call's outputs, for the depth: no extra search

    def kept(*args):
        before = _minor_faults()
        out = jax.block_until_ready(run(*args))
        if before is not None:
            faults.append(_minor_faults() - before)
        if not outputs:
            outputs.append(out)
        return out

    timed = time_calls(kept, lambda r: (params, states, jax.random.key(seed + r)), repeats,
                       warmup, min_seconds)
    parents = outputs[0][2]
    median = timed["seconds"] / searches
    timed_faults = faults[-len(timed["seconds_all"]):]  # those of the timed calls
    return {**timed, "searches_per_call": searches, "s_per_sim": median / sims,
            "ms_per_sim": 1000.0 * median / sims, "mean_depth": mean_depth(parents),
            "faults_per_call": float(np.median(timed_faults)) if timed_faults else None}


def time_argmax(batch: int, num_actions: int, seed: int, repeats: int, warmup: int = 0,
                min_seconds: float = 0.0, iterations: int = SELECTION_ITERATIONS) -> dict:
    """Microseconds of one argmax over ``[batch, num_actions]`` random values, as
    ``jnp.argmax`` and as `gomoku_jax.ops.argmax` (what the search's selections take),
    each a jitted loop of ``iterations`` whose step ``i`` depends on step ``i - 1``'s
    answer; a loop doing the same but a plain maximum is the baseline subtracted."""
    values = jax.random.normal(jax.random.key(seed), (batch, num_actions))

    def loop_of(pick):
        @jax.jit
        def loop(values):
            def body(_, carry):
                shifted = values + carry[:, None].astype(values.dtype)
                return pick(shifted).astype(jnp.int32) % 2

            return jax.lax.fori_loop(0, iterations, body, jnp.zeros((batch,), jnp.int32))

        return loop

    out = {"batch": batch, "num_actions": num_actions, "iterations": iterations}
    for name, pick in (("baseline", lambda x: jnp.max(x, axis=-1) > 0),
                       ("jnp", lambda x: jnp.argmax(x, axis=-1)),
                       ("ops", lambda x: ops.argmax(x, axis=-1))):
        timed = time_calls(loop_of(pick), lambda r: (values,), repeats, warmup, min_seconds)
        out[f"{name}_us"] = 1e6 * timed["seconds"] / iterations
    for name in ("jnp", "ops"):
        out[f"{name}_argmax_us"] = out[f"{name}_us"] - out["baseline_us"]
    return out


def argmax_line(result: dict) -> str:
    """``time_argmax``'s figures as one line. A difference from the baseline that is not
    above zero is within the loop's noise (on a GPU each step is a kernel launch of 10 us
    or more), so it is said to be, with the loop's own time, rather than printed as a
    negative cost."""
    def cost(name):
        us = result[f"{name}_argmax_us"]
        if us > 0:
            return f"{us:.1f} us"
        return (f"not measurable (a step {result[f'{name}_us']:.1f} us, the baseline's "
                f"{result['baseline_us']:.1f} us)")

    return (f"argmax over [{result['batch']}, {result['num_actions']}]: jnp.argmax "
            f"{cost('jnp')}, ops.argmax {cost('ops')}")


def time_selection(env, evaluate, params, states, algorithm: str, sims: int, seed: int,
                   repeats: int, warmup: int = 0, min_seconds: float = 0.0,
                   iterations: int = SELECTION_ITERATIONS) -> dict:
    """Seconds of one selection step for the whole batch, alone: the root's and an interior
    node's (`search.selection_functions`), on the tree of ours' search of ``sims``
    simulations.

    Each is a jitted loop of ``iterations`` steps; step ``i`` selects at a node of every
    game's tree that depends on step ``i - 1``'s action (so no step can be hoisted out of
    the loop), with fresh keys per step as the search splits them. A simulation makes one
    root step and, per level below the root, one interior step for the batch.
    """
    config = search_lib.SearchConfig(algorithm=algorithm, num_simulations=sims,
                                     backend="linear")
    tree = jax.jit(lambda p, s, k: search_lib.run_search(env, evaluate, p, s, k, config)
                   .search_tree)(params, states, jax.random.key(seed))
    root_fn, interior_fn = search_lib.selection_functions(config)
    batch = tree.node_visits.shape[0]
    used = jnp.maximum(tree_search.num_nodes(tree), 1)  # [B] nodes in use
    depth = jnp.ones((batch,), tree.node_values.dtype)  # interior: below the root

    def loop_of(select):
        @jax.jit
        def loop(tree, key):
            def body(_, carry):
                node, key = carry
                key, sub = jax.random.split(key)
                action = select(jax.random.split(sub, batch), tree, node)
                return (node + action + 1) % used, key

            return jax.lax.fori_loop(0, iterations, body,
                                     (jnp.zeros((batch,), jnp.int32), key))[0]

        return loop

    out = {"iterations": iterations}
    for name, select in (
            ("root", lambda keys, tree, node: jax.vmap(root_fn)(keys, tree, node)),
            ("interior", lambda keys, tree, node: jax.vmap(interior_fn)(keys, tree, node,
                                                                         depth))):
        timed = time_calls(loop_of(select), lambda r: (tree, jax.random.key(seed + r)),
                           repeats, warmup, min_seconds)
        out[f"{name}_s"] = timed["seconds"] / iterations
        out[f"{name}_us"] = 1e6 * timed["seconds"] / iterations
    return out


def summarize(rows: list[dict], selection: list[dict] = ()) -> dict:
    """Per algorithm: ours' per-simulation cost at the most simulations over the fewest,
    and the speedup over mctx at every count both measured. With ``selection`` (rows of
    `time_selection`): ``selection_growth``, the growth that the interior selection steps
    alone bring, ``1 + (depth_most - depth_fewest) * interior_s / s_per_sim_fewest``: the
    extra levels a simulation descends at the most simulations, each one interior step for
    the batch, against a whole simulation at the fewest (a lower estimate: games that stop
    earlier still wait for the deepest one)."""
    out = {}
    for algo in sorted({r["algorithm"] for r in rows}):
        for batch in sorted({r["batch"] for r in rows}):
            mine = {r["simulations"]: r for r in rows if r["algorithm"] == algo
                    and r["batch"] == batch and r["backend"] == "linear"}
            ref = {r["simulations"]: r for r in rows if r["algorithm"] == algo
                   and r["batch"] == batch and r["backend"] == "mctx"}
            if not mine:
                continue
            flat = {r["simulations"]: r for r in rows if r["algorithm"] == algo
                    and r["batch"] == batch and r["backend"] == "linear-depth1"}
            lo, hi = min(mine), max(mine)
            entry = {
                "linear_growth": {"from": lo, "to": hi,
                                  "ratio": mine[hi]["s_per_sim"] / mine[lo]["s_per_sim"],
                                  "mean_depth": [mine[lo]["mean_depth"], mine[hi]["mean_depth"]]},
                "speedup_vs_mctx": {str(s): ref[s]["s_per_sim"] / mine[s]["s_per_sim"]
                                    for s in sorted(set(mine) & set(ref))},
            }
            if lo in flat and hi in flat and lo != hi:
                entry["depth1_growth"] = {"from": lo, "to": hi,
                                          "ratio": flat[hi]["s_per_sim"] / flat[lo]["s_per_sim"]}
            sel = [s for s in selection if (s["algorithm"], s["batch"]) == (algo, batch)]
            if sel and lo != hi:
                extra = mine[hi]["mean_depth"] - mine[lo]["mean_depth"]
                entry["selection_growth"] = {
                    "from": lo, "to": hi, "extra_levels": extra,
                    "interior_us": sel[0]["interior_us"], "root_us": sel[0]["root_us"],
                    "ratio": 1.0 + extra * sel[0]["interior_s"] / mine[lo]["s_per_sim"]}
            if ref:
                rlo, rhi = min(ref), max(ref)
                entry["mctx_growth"] = {"from": rlo, "to": rhi,
                                        "ratio": ref[rhi]["s_per_sim"] / ref[rlo]["s_per_sim"]}
            out[f"{algo} batch {batch}"] = entry
    return out


def run_bench(size: int, batches, simulations, mctx_simulations, algorithms, network: str,
              repeats: int, opening_stones: int, mctx_budget_s: float, seed: int,
              warmup: int = 0, min_seconds: float = 0.0,
              selection_iterations: int = SELECTION_ITERATIONS, searches: int = 1) -> dict:
    env = game_env(size)
    if network == "uniform":
        evaluate, params, net = search_lib.uniform_evaluate(env), None, "uniform"
    else:
        name, options = choose_network("gpu")
        module = networks.make_network(name, board_size=size, **options)
        params = networks.init_network(module, jax.random.key(seed), env.observation_shape)
        evaluate, net = search_lib.network_evaluate(module), {"name": name, "options": options}
    rows, skipped, selection, argmax = [], [], [], []
    for batch in batches:
        states = openings(env, jax.random.key(seed + 1), batch, opening_stones)
        # An argmax over the batch's actions, as jnp.argmax and as the selections take it.
        result = time_argmax(batch, env.num_actions, seed, repeats, warmup, min_seconds,
                             selection_iterations)
        argmax.append(result)
        print(argmax_line(result), flush=True)
        for algo in algorithms:
            for backend, counts in (("linear", simulations), ("mctx", mctx_simulations)):
                done = {}
                for sims in sorted(counts):
                    below = [s for s in done if s < sims]
                    if backend == "mctx" and below:
                        prev = max(below)
                        # mctx's cost per simulation grows about linearly with the tree.
                        est = (done[prev]["s_per_sim"] * (sims / prev) * sims * searches
                               * (repeats + warmup + 1))
                        if est > mctx_budget_s:
                            note = (f"mctx {algo} batch {batch} {sims} sims skipped: estimated "
                                    f"{est:.0f} s > --mctx-budget-s {mctx_budget_s:g}")
                            print(note, flush=True)
                            skipped.append({"algorithm": algo, "batch": batch,
                                            "simulations": sims, "reason": note})
                            continue
                    result = time_search(env, evaluate, params, states, algo, sims, backend,
                                         repeats, seed, warmup, min_seconds,
                                         searches=searches)
                    done[sims] = result
                    rows.append({"algorithm": algo, "batch": batch, "simulations": sims,
                                 "backend": backend, **result})
                    print(f"{algo:6s} batch {batch:5d} {backend:6s} {sims:4d} sims: "
                          f"{result['seconds'] / searches:8.3f} s/search  "
                          f"{result['ms_per_sim']:7.3f} "
                          f"ms/sim  depth {result['mean_depth']:.2f}  page faults a call "
                          f"{result['faults_per_call']}", flush=True)
            # The control: ours with every simulation stopped at depth 1, at the fewest and
            # the most simulations. Same tree sizes, no deeper paths: what growth remains
            # is the tree's size.
            for sims in sorted({min(simulations), max(simulations)}):
                result = time_search(env, evaluate, params, states, algo, sims, "linear",
                                     repeats, seed, warmup, min_seconds, max_depth=1,
                                     searches=searches)
                rows.append({"algorithm": algo, "batch": batch, "simulations": sims,
                             "backend": "linear-depth1", **result})
                print(f"{algo:6s} batch {batch:5d} depth 1 {sims:4d} sims: "
                      f"{result['ms_per_sim']:7.3f} ms/sim", flush=True)
            # One selection step alone, on the largest tree: what a level of a path costs.
            result = time_selection(env, evaluate, params, states, algo, max(simulations),
                                    seed, repeats, warmup, min_seconds, selection_iterations)
            selection.append({"algorithm": algo, "batch": batch,
                              "simulations": max(simulations), **result})
            print(f"{algo:6s} batch {batch:5d} one selection step: root "
                  f"{result['root_us']:.1f} us, interior {result['interior_us']:.1f} us",
                  flush=True)
    return {"network": net, "rows": rows, "skipped": skipped, "selection": selection,
            "argmax": argmax, "summary": summarize(rows, selection)}


def report_text(report: dict) -> str:
    net = report["network"] if isinstance(report["network"], str) else report["network"]["name"]
    per_call = report.get("searches_per_call", 1)
    lines = [f"bench search on {report['device']}, {report['size']}x{report['size']}, "
             f"network {net}"
             + (f", {per_call} searches per compiled call" if per_call > 1 else ""),
             "", "| algorithm | batch | sims | ours ms/sim | mctx ms/sim | speedup | depth | "
             "ours page faults per search |",
             "|---|---|---|---|---|---|---|---|"]
    rows = report["rows"]
    keys = sorted({(r["algorithm"], r["batch"], r["simulations"]) for r in rows})
    for algo, batch, sims in keys:
        get = {r["backend"]: r for r in rows
               if (r["algorithm"], r["batch"], r["simulations"]) == (algo, batch, sims)}
        mine, ref = get.get("linear"), get.get("mctx")
        ours_ms = f"{mine['ms_per_sim']:.3f}" if mine else "-"
        ref_ms = f"{ref['ms_per_sim']:.3f}" if ref else "-"
        speed = f"{ref['s_per_sim'] / mine['s_per_sim']:.1f}x" if mine and ref else "-"
        depth = (mine or ref)["mean_depth"]
        faults = mine.get("faults_per_call") if mine else None
        faults = "-" if faults is None else f"{faults / mine['searches_per_call']:,.0f}"
        lines.append(f"| {algo} | {batch} | {sims} | {ours_ms} | {ref_ms} | {speed} | "
                     f"{depth:.2f} | {faults} |")
    lines.append("")
    for name, entry in report["summary"].items():
        g = entry["linear_growth"]
        text = (f"{name}: ours {g['to']} vs {g['from']} sims: {g['ratio']:.2f}x per sim "
                f"(mean depth {g['mean_depth'][0]:.2f} -> {g['mean_depth'][1]:.2f})")
        if "depth1_growth" in entry:
            text += f"; all at depth 1: {entry['depth1_growth']['ratio']:.2f}x"
        if "selection_growth" in entry:
            s = entry["selection_growth"]
            text += (f"; one interior selection step {s['interior_us']:.0f} us (root "
                     f"{s['root_us']:.0f} us), so the {s['extra_levels']:.2f} more levels "
                     f"alone give {s['ratio']:.2f}x")
        if "mctx_growth" in entry:
            m = entry["mctx_growth"]
            text += f"; mctx {m['to']} vs {m['from']}: {m['ratio']:.2f}x"
        if str(SPEEDUP_AT) in entry["speedup_vs_mctx"]:
            text += f"; speedup at {SPEEDUP_AT}: {entry['speedup_vs_mctx'][str(SPEEDUP_AT)]:.1f}x"
        lines.append(text)
    lines.extend(argmax_line(a) for a in report.get("argmax", ()))
    for s in report["skipped"]:
        lines.append(s["reason"])
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = ArgumentParser(prog="gomoku-jax bench search",
                            description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="cpu",
                        help="cpu: batch 64, uniform network; gpu: batches 256 1024, "
                             "resnet 10x128 bfloat16, 16 and 800 simulations (default cpu)")
    parser.add_argument("--size", type=count_argument(5, MAX_SIZE), default=9,
                        help=f"board side from 5 to {MAX_SIZE}, k=5 (default 9)")
    add_search_bench_arguments(parser, "games searched in lockstep (default: the preset's)",
                               "simulations of ours (default: the preset's)", 5,
                               "timed calls at least, median kept (default 5)",
                               "experiments/results/bench_search_cpu.json")
    parser.add_argument("--mctx-simulations", type=count_argument(1), nargs="+", default=None,
                        help="simulations of mctx (default: the preset's)")
    parser.add_argument("--warmup", type=count_argument(0), default=3,
                        help="untimed calls after the compiling one (default 3)")
    parser.add_argument("--min-seconds", type=float, default=1.0,
                        help="time calls until they took this long together (default 1)")
    parser.add_argument("--mctx-budget-s", type=float, default=120.0,
                        help="skip an mctx run estimated to take longer, seconds (default 120)")
    parser.add_argument("--searches-per-call", type=count_argument(1), default=1,
                        help="searches one timed call runs one after the other in one "
                             "compiled loop, as self-play does (the tree is then allocated "
                             "once per call; default 1)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny: batch 8, 8 and 16 simulations")
    args = parser.parse_args(argv)
    preset = {**PRESETS[args.preset], **(QUICK if args.quick else {})}
    batches = tuple(args.batches or preset["batches"])
    simulations = tuple(args.simulations or preset["simulations"])
    mctx_simulations = tuple(args.mctx_simulations or preset["mctx_simulations"])
    if not 0 <= args.min_seconds < float("inf"):  # (nan too; inf would time for ever)
        parser.error(f"--min-seconds must be a finite number >= 0, got {args.min_seconds}")
    if not args.mctx_budget_s >= 0:  # (nan would skip nothing)
        parser.error(f"--mctx-budget-s must be >= 0, got {args.mctx_budget_s}")
    result = run_bench(args.size, batches, simulations, mctx_simulations, args.algorithms,
                       preset["network"], args.repeats, args.opening_stones, args.mctx_budget_s,
                       args.seed, args.warmup, args.min_seconds,
                       preset.get("selection_iterations", SELECTION_ITERATIONS),
                       args.searches_per_call)
    report = {"benchmark": "search", "device": device_description(), "size": args.size,
              "preset": args.preset, "repeats": args.repeats, "warmup": args.warmup,
              "searches_per_call": args.searches_per_call,
              "min_seconds": args.min_seconds,
              "opening_stones": args.opening_stones, "observation": SEARCH_OBSERVATION,
              **result,
              "targets": {"linear_growth_800_vs_16": "<= 1.5", f"speedup_at_{SPEEDUP_AT}": ">= 8"}}
    return publish(report, report_text(report), args.out)


if __name__ == "__main__":
    run_script(main)
