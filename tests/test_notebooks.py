"""Every notebook runs end to end: its code cells are executed in order in one namespace."""

import json
import tempfile
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no notebook"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, capsys, tmp_path, monkeypatch):
    # a notebook's "fresh temporary folder" lands in this test's folder, cleaned by pytest
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    nb = json.loads(path.read_text())
    assert nb["nbformat"] == 4
    namespace = {"__name__": "__notebook__"}
    code_cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code_cells
    for i, cell in enumerate(code_cells):
        source = "".join(cell["source"])
        assert not any(line.lstrip().startswith(("%", "!")) for line in source.splitlines()), (
            f"{path.name} cell {i}: shell or magic lines cannot run outside Jupyter"
        )
        exec(compile(source, f"{path.name}[cell {i}]", "exec"), namespace)
    assert capsys.readouterr().out  # the tour prints what it shows
