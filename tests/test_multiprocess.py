"""Training over two processes (``jax.distributed`` on CPU, one device each): the
games are split over the processes' devices, checkpoints gather them, a second run
resumes, only the first process writes the run's files, and a third start of the
finished run gives every process its report."""

import json
import os
import socket
import subprocess
import sys

import pytest

_SCRIPT = r'''
import json, sys
import jax

process, port, workdir, iterations = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2,
                           process_id=int(process))
assert len(jax.devices()) == 2 and len(jax.local_devices()) == 1
from algorithms import alphazero
from gomoku_jax import config, training

if sys.argv[6:] == ["unseen"] and process != "0":  # as on a host that does not see the
    training._finished_report = lambda *args: None  # workdir's files: no report to read

cfg, _ = config.load_file(
    alphazero.AlphaZeroConfig, sys.argv[5], variants=["smoke"],
    overrides={"train.iterations": 2, "checkpoint_every": 1, "eval.every": 0,
               "eval.final_games": 2,
               # compile faster: no tactical prior or augmentation, 2 SGD steps (not 12)
               "tactical": None, "train.augment": False, "train.epochs": 0.25})
learner = alphazero.make_learner(cfg)
assert learner.mesh.size == 2
report = training.run(learner, workdir, progress=False, tensorboard=False,
                      iterations=None if iterations == "all" else int(iterations))
print("REPORT " + json.dumps({k: report.get(k) for k in ("iterations", "evaluation",
                                                         "devices", "processes")}))
'''


# What the coordinator (process 0) writes when it cannot listen on its port: gRPC's log
# line, then JAX's error (or, at times, a crash right after the log line).
_PORT_TAKEN = ("Failed to add port to server", "Failed to start RPC server")


class _PortTaken(Exception):
    """The coordinator could not listen on the port it was given."""


def _free_port() -> int:
    """A port nobody listens on now. Another process can still take it before the
    coordinator listens on it: `_run_two` then starts the two processes once more."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The suite's XLA flags (conftest.py) without its fake devices: one CPU device a process.
_ONE_DEVICE_FLAGS = " ".join(flag for flag in os.environ.get("XLA_FLAGS", "").split()
                             if not flag.startswith("--xla_force_host_platform_device_count"))


def _launch_two(args):
    """Run the two processes on a free port (``args``: the script, then its arguments
    after the process number and the port); ``[(returncode, stdout, stderr)]`` of each.
    `_PortTaken` when the coordinator could not listen on that port (the other process
    is then stopped)."""
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, args[0], str(i), port, *args[1:]],
                              env=dict(os.environ, XLA_FLAGS=_ONE_DEVICE_FLAGS,
                                       PYTHONPATH=os.pathsep.join(sys.path)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    try:
        results = []
        for proc in procs:
            try:
                out, err = proc.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                pytest.fail("a training process did not finish in 10 minutes")
            results.append((proc.returncode, out, err))
            if proc is procs[0] and proc.returncode != 0 and any(
                    text in err for text in _PORT_TAKEN):
                raise _PortTaken(f"port {port}: {err[-3000:]}")
        return results
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def _run_two(tmp_path, workdir, iterations, *more):
    script = tmp_path / "train_process.py"
    script.write_text(_SCRIPT)
    config = os.path.join(os.path.dirname(__file__), "..", "experiments", "configs",
                          "az_9x9_cpu.json")
    args = [str(script), str(workdir), str(iterations), config, *more]
    try:
        results = _launch_two(args)
    except _PortTaken:  # taken since `_free_port` found it free: once more, on another
        results = _launch_two(args)
    reports = []
    for returncode, out, err in results:
        assert returncode == 0, err[-3000:]
        line = [l for l in out.splitlines() if l.startswith("REPORT ")]
        reports.append(json.loads(line[-1][len("REPORT "):]))
    return reports


def test_two_processes_train_checkpoint_and_resume(tmp_path):
    workdir = tmp_path / "run"
    first = _run_two(tmp_path, workdir, 1)  # stops after iteration 1 (of 2)
    assert [r["iterations"] for r in first] == [1, 1]
    assert (workdir / "checkpoints" / "1").is_dir()
    second = _run_two(tmp_path, workdir, "all")  # resumes from the checkpoint
    results = [{name: (r["wins"], r["losses"], r["draws"], r["games"])
                for name, r in report["evaluation"].items()} for report in second]
    assert results[0] == results[1]  # the processes evaluated in step (the same games)
    assert [r["iterations"] for r in second] == [2, 2]
    assert all(games == 2 for *_, games in results[0].values()) and results[0]
    assert sorted(p.name for p in (workdir / "checkpoints").iterdir()
                  if p.name.isdigit()) == ["1", "2"]
    rows = (workdir / "metrics.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["1", "2"]  # one row each: one writer
    stored = json.loads((workdir / "report.json").read_text())
    assert stored["iterations"] == 2
    assert (stored["devices"], stored["processes"]) == (2, 2)  # the learner's mesh spans both
    assert (workdir / "final.gjx").exists()
    # the finished run again: nothing trained, and each process returns the run's report,
    # process 0's (the second process here reads no report of its own)
    third = _run_two(tmp_path, workdir, "all", "unseen")
    assert third == [{k: stored[k] for k in ("iterations", "evaluation", "devices",
                                             "processes")}] * 2


def test_the_suites_fake_devices_come_with_other_xla_flags_of_the_environment():
    # conftest.py's 4 fake CPU devices, for the sharding tests, when XLA_FLAGS already
    # holds a flag of the user's (it used to leave them one device)
    here = os.path.dirname(__file__)
    code = "import conftest, jax; print(jax.device_count(), flush=True)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, cwd=here,
                         env=dict(os.environ, XLA_FLAGS="--xla_backend_optimization_level=3",
                                  PYTHONPATH=os.pathsep.join([here, *sys.path])))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-1] == "4"


def test_the_suite_adds_the_fusion_emitter_flag_only_where_xla_knows_it():
    # An XLA flag this jaxlib does not know aborts the process, so conftest.py asks first.
    import conftest

    assert not conftest._xla_knows("--xla_cpu_no_such_flag=true")
    knows = conftest._xla_knows("--xla_cpu_use_fusion_emitters=false")
    named = [f for f in os.environ["XLA_FLAGS"].split()
             if f.startswith("--xla_cpu_use_fusion_emitters=")]  # the suite's, or yours
    assert knows == bool(named)
