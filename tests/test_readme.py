"""The README stays true: its commands are the ones CI runs and its map names real files."""

import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def _bash_blocks(text):
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, re.S)]


def test_readme_opens_with_the_main_job_and_the_test_command():
    blocks = _bash_blocks(README)
    main_job, tests = blocks[0], blocks[1]
    for command in (main_job, tests):
        assert command.startswith("python3.11 -m venv .venv && .venv/bin/pip install -r requirements.txt")
    assert "gomoku-jax" in main_job
    # The whole suite (no selection), at most spread over worker processes.
    assert re.search(r"-m pytest( -n \d+)?$", tests), tests
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests in ci.splitlines(), ".ci/run must run the README's test command word for word"


def test_code_map_names_files_that_exist():
    block = README.split("## Map of the code", 1)[1].split("```", 2)[1]
    folder = None
    for line in block.splitlines():
        if not line.strip():
            continue
        name = line.split()[0]
        if not line[0].isspace():  # a top-level folder
            folder = name
            assert (ROOT / folder).is_dir(), f"{folder} is in the README map"
        elif name.endswith((".py", ".ipynb")):
            assert (ROOT / folder / name).exists(), f"{folder}{name} is in the README map"
        elif name.endswith("/"):
            assert (ROOT / folder / name).is_dir(), f"{folder}{name} is in the README map"


def test_the_python_training_example_takes_an_sgd_step_in_its_first_iteration(monkeypatch):
    """The README's first Python example, up to its one iteration (the rest trains a
    whole run): a reader who copies it sees a loss, not NaN."""
    import math

    monkeypatch.chdir(ROOT)  # its config path is relative to the repository

    block = README.split("In Python:\n\n```python\n", 1)[1].split("```", 1)[0]
    first = block.split("\nagent = ", 1)[0]  # load, make, init, iterate, print
    assert "learner.iteration(state)" in first and "print(" in first
    scope: dict = {}
    exec(compile(first, "README.md (Python example)", "exec"), scope)  # noqa: S102
    metrics = scope["metrics"]
    assert bool(metrics["trained"]) and math.isfinite(float(metrics["loss"]))


def test_the_python_search_example_runs_as_written(capsys):
    """The README's example of searching a batch from Python: both searches run and
    print the shapes its comments say."""
    marker = "Searching a batch of positions from Python"
    block = README.split(marker, 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict = {}
    exec(compile(block, "README.md (search example)", "exec"), scope)  # noqa: S102
    assert capsys.readouterr().out.strip() == "(16,) (16, 81)"
    assert scope["out"].action.shape == (16,)
    assert bool(scope["states"].legal_action_mask[
        np.arange(16), np.asarray(scope["out"].action)].all())


def test_the_plugin_example_runs_and_can_be_imported_again(tmp_path, monkeypatch, registries):
    """The README's ``my_plugin.py``, written to a file: its names work as the example
    after it uses them, and the module reloaded (a notebook cell run again) registers
    them again without an error."""
    import importlib
    import sys

    from gomoku_jax import Gomoku, agents, networks

    import jax

    block = README.split("```python\n# my_plugin.py\n", 1)[1].split("```", 1)[0]
    (tmp_path / "readme_plugin.py").write_text(block)
    monkeypatch.syspath_prepend(str(tmp_path))
    env, key = Gomoku(9, 5), jax.random.key(0)
    try:
        plugin = importlib.import_module("readme_plugin")
        assert networks.make_network("tiny-mlp", board_size=9, hidden=32).hidden == 32
        assert agents.make("first-empty", env).act(env.init(), key) == 0
        assert agents.make("nth-empty-3", env).act(env.init(), key) == 3
        importlib.reload(plugin)
        assert agents.make("first-empty", env).act(env.init(), key) == 0
    finally:
        sys.modules.pop("readme_plugin", None)
