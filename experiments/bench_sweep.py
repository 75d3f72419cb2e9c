"""Benchmark: what a sweep pays to compile, with programs shared against compiled per run.

Commands::

    gomoku-jax bench sweep --out experiments/results/bench_sweep_cpu.json
    gomoku-jax bench sweep --variant "" --values 0.001 0.002 0.004   # the CPU default
    gomoku-jax bench sweep --key search.c_puct --set search.algorithm=puct --values 1 2 4
    gomoku-jax bench sweep --quick

A learner compiles its iteration once for every config that differs from it only in
traced settings (`algorithms.common.ShardedLearner`: learning rates, loss weights, search
constants, the reward table...). For each value of ``--key``, a learner is built from
``--config`` (``--variant``, ``--set`` overrides, then the value) and its first iteration
is run from a fresh state, timed with the learner's construction: a sweep's cost per run
before it trains. The reference, in the same run: the same runs with the shared programs
forgotten before each (`algorithms.common.clear_programs`), so each run compiles its own,
as every run did when settings were constants of the program (JAX's persistent
compilation cache is off while it runs, so that compiles are timed, not loads from disk).
The report gives both
totals, their ratio and how many times each run traced its iteration (1 where it
compiled, 0 where it ran a program another run compiled).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import jax

import algorithms
from algorithms import common
from experiments.common import (add_out_argument, device_description, publish,
                                repository_path, run_script)
from gomoku_jax import config as cfglib
from gomoku_jax.cli import ArgumentParser, nonempty_path

DEFAULT_CONFIG = Path(__file__).parent / "configs" / "az_9x9_cpu.json"


def _learner(args, value):
    cls, make_learner = algorithms.learner_entry(cfglib.algorithm_of(args.config))
    overrides = [*args.set, f"{args.key}={json.dumps(value)}"]
    variants = [args.variant] if args.variant else []
    config, _ = cfglib.load_file(cls, args.config, variants=variants, overrides=overrides)
    return make_learner(config, devices=jax.devices()[:1])


def _first_iterations(args, shared: bool) -> list[dict]:
    """Build a learner per value and run its first iteration; time both."""
    rows = []
    common.clear_programs()
    for value in args.values:
        if not shared:
            common.clear_programs()
        start = time.perf_counter()
        learner = _learner(args, value)
        before = learner.trace_count  # its program's traces by earlier runs
        state, metrics = learner.iteration(learner.init())
        jax.block_until_ready((state, metrics))
        rows.append({"value": value, "seconds": time.perf_counter() - start,
                     "traces": learner.trace_count - before})
    return rows


def run(args) -> dict:
    # A program loaded from JAX's persistent cache on disk would make the reference's
    # compiles look free; this benchmark times compiling.
    cache = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        separate = _first_iterations(args, shared=False)
        shared = _first_iterations(args, shared=True)
    finally:
        jax.config.update("jax_enable_compilation_cache", cache)
    total = lambda rows: sum(r["seconds"] for r in rows)  # noqa: E731
    return {"device": device_description(), "config": repository_path(args.config),
            "variant": args.variant, "overrides": list(args.set), "key": args.key,
            "values": list(args.values), "compiled_per_run": separate, "shared": shared,
            "compiled_per_run_s": total(separate), "shared_s": total(shared),
            "ratio": total(separate) / max(total(shared), 1e-9)}


def format_report(report: dict) -> str:
    lines = [f"Sweep of {report['key']} over {report['values']} "
             f"({Path(report['config']).name}"
             + (f", variant {report['variant']}" if report["variant"] else "") + ")",
             f"device: {report['device']}",
             "build + first iteration, seconds per run (traces):",
             "  value        compiled per run    shared"]
    for a, b in zip(report["compiled_per_run"], report["shared"]):
        lines.append(f"  {str(a['value']):<12} {a['seconds']:8.1f} ({a['traces']})"
                     f"        {b['seconds']:8.1f} ({b['traces']})")
    lines.append(f"total: {report['compiled_per_run_s']:.1f} s compiled per run, "
                 f"{report['shared_s']:.1f} s shared: {report['ratio']:.1f}x")
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = ArgumentParser(
        prog="gomoku-jax bench sweep",
        description="A sweep's build and first iteration per run: programs shared by the "
                    "runs against each run compiling its own.")
    parser.add_argument("--config", type=nonempty_path, default=DEFAULT_CONFIG,
                        help="an experiment config (default: the CPU default)")
    parser.add_argument("--variant", default="smoke",
                        help="its variant (default: smoke; '' for none)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an override applied before the swept value (repeatable)")
    parser.add_argument("--key", default="train.learning_rate",
                        help="the dotted key swept (default: train.learning_rate)")
    parser.add_argument("--values", nargs="+", default=None,
                        help="its values, as JSON (default: 0.001 0.002 0.004 0.008)")
    parser.add_argument("--quick", action="store_true", help="two values")
    add_out_argument(parser, "experiments/results/bench_sweep_cpu.json")
    args = parser.parse_args(argv)
    if args.values is None:
        args.values = ["0.001", "0.002"] if args.quick else ["0.001", "0.002", "0.004",
                                                             "0.008"]
    try:  # a bad key, value, override or config fails here, before any compile
        for text in args.set:
            cfglib.parse_override(text)
        args.values = [cfglib.parse_override(f"{args.key}={v}")[1] for v in args.values]
        for value in args.values:
            _learner(args, value)
    except (cfglib.ConfigError, ValueError, OSError) as error:
        parser.error(str(error))
    report = run(args)
    return publish(report, format_report(report), args.out)


if __name__ == "__main__":
    run_script(main)
