"""Small helpers shared by test files (importable as ``helpers``: pytest puts this folder
on ``sys.path``)."""

import pathlib


def line_of(test_file: str, marker: str) -> str:
    """``NAME:N``: the file name of ``test_file`` and the number of its one line that ends
    with ``marker`` (a comment on a line whose number a message should name)."""
    path = pathlib.Path(test_file)
    lines = [i for i, text in enumerate(path.read_text().splitlines(), 1)
             if text.endswith(marker)]
    assert len(lines) == 1, f"{marker!r} ends {len(lines)} lines of {path.name}, not one"
    return f"{path.name}:{lines[0]}"
