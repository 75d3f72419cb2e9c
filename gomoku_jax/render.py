"""Pictures of one game: a text board for terminals and an SVG board for notebooks.

Both renderers take a `State` of one game (unbatched) or a bare board array ``[N, N]``
(numpy or jax, values 0 empty, 1 black, 2 white). A batched state, a board that is not
square, or a board with other values raises `ValueError`.

* `text` draws ``X`` for black, ``O`` for white and ``.`` for empty, in 3-character
  cells so that columns stay aligned up to 19x19 (two-digit indices). Coordinates are
  the 0-based ``(row, col)`` of `Gomoku.play`; row 0 is the top row. The last move is
  bracketed, e.g. ``[X]``, and the bottom line gives the status (`describe_result`),
  the move count and the last move::

         0  1  2
      0  X  .  .
      1  O  X  .
      2 [O] .  .
      black to move | moves: 4 | last: O (2, 0)

* `svg` returns an `SvgBoard`: a self-contained SVG string (no external files, fonts or
  ids) of a wooden Go-style board that Jupyter displays by itself. Its elements carry
  classes that tools and tests can rely on: ``wood`` (board), ``grid-row`` /
  ``grid-col`` (grid lines, in index order), ``star``, ``coord``, ``policy`` (one
  translucent square per empty cell with positive probability, with a ``<title>``
  tooltip), ``stone black`` / ``stone white`` (one circle per stone), ``shadow`` /
  ``shine`` (decoration) and ``last-move`` (a red dot on the last stone).

* `game_record_text` lists a move sequence as ``1. B (7, 7)  2. W (7, 8)  ...``.

Rendering is plain string building on numpy arrays: no plotting library is needed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable
from xml.sax.saxutils import escape as _escape
from xml.sax.saxutils import quoteattr as _quoteattr

import numpy as np

from gomoku_jax.game import BLACK_STONE, EMPTY, WHITE_STONE, State, describe_result

__all__ = ["SvgBoard", "game_record_text", "svg", "text"]

_SYMBOLS = {EMPTY: ".", BLACK_STONE: "X", WHITE_STONE: "O"}

# SVG palette.
_WOOD = "#dcb35c"
_WOOD_EDGE = "#b0843a"
_GRAIN = "#b98a3e"
_LINE = "#3a2a12"
_BLACK_FILL, _BLACK_EDGE = "#1c1c1c", "#000000"
_WHITE_FILL, _WHITE_EDGE = "#f6f5f0", "#6a6a6a"
_MARKER = "#e0352b"
_POLICY = "#1f5fd6"


# --------------------------------------------------------------------- input checks
def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_board(board, caller: str) -> np.ndarray:
    """The board as an int8 ``[N, N]`` numpy array, or a clear `ValueError`."""
    try:
        arr = np.asarray(board)
    except Exception as err:  # e.g. ragged nested lists
        raise ValueError(f"{caller}: cannot read the board as an array ({err})") from None
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_
    ):
        raise ValueError(f"{caller}: the board must hold numbers, got dtype {arr.dtype}")
    if arr.ndim == 3 and arr.shape[1] == arr.shape[2]:
        raise ValueError(
            f"{caller} draws one game, but got a batch of boards of shape {arr.shape}; "
            "pass one board [N, N], e.g. boards[0]"
        )
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise ValueError(f"{caller}: the board must be square [N, N], got shape {arr.shape}")
    bad = ~np.isin(arr, (EMPTY, BLACK_STONE, WHITE_STONE))
    if bad.any():
        r, c = (int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{caller}: board values must be 0 (empty), 1 (black) or 2 (white); "
            f"found {arr[r, c].item()!r} at ({r}, {c})"
        )
    return arr.astype(np.int8)


def _check_last_action(last_action, board: np.ndarray, caller: str) -> int | None:
    """The last move as an action index, or None for no marker (None or -1)."""
    n = board.shape[0]
    if last_action is None:
        return None
    if isinstance(last_action, (tuple, list)):
        if len(last_action) != 2 or not all(_is_int(v) for v in last_action):
            raise ValueError(
                f"{caller}: last_action must be an action index or a (row, col) pair "
                f"of integers, got {last_action!r}"
            )
        row, col = (int(v) for v in last_action)
        if not (0 <= row < n and 0 <= col < n):
            raise ValueError(
                f"{caller}: last_action {(row, col)} is off the {n}x{n} board"
            )
        action = row * n + col
    else:
        value = last_action
        if not _is_int(value):
            arr = np.asarray(value) if not isinstance(value, (bool, float, str)) else None
            if arr is None or arr.ndim != 0 or not np.issubdtype(arr.dtype, np.integer):
                raise ValueError(
                    f"{caller}: last_action must be an action index or a (row, col) pair "
                    f"of integers, got {last_action!r}"
                )
            value = arr.item()
        action = int(value)
        if action == -1:
            return None
        if not 0 <= action < n * n:
            raise ValueError(
                f"{caller}: last_action must be -1 (none) or an action from 0 to "
                f"{n * n - 1} on a {n}x{n} board, got {action}"
            )
    row, col = divmod(action, n)
    if board[row, col] == EMPTY:
        raise ValueError(f"{caller}: the last move ({row}, {col}) points at an empty cell")
    return action


def _position(state_or_board, last_action, caller: str):
    """``(board, last_action or None, state or None)`` for one game."""
    if isinstance(state_or_board, State):
        state = state_or_board
        shape = np.shape(state.board)
        if len(shape) != 2:
            raise ValueError(
                f"{caller} draws one game, but got a batched State (board shape {shape}); "
                "pick one game first, e.g. jax.tree.map(lambda x: x[0], state)"
            )
        board = _check_board(state.board, caller)
        if last_action is None:
            last_action = int(np.asarray(state.last_action))
        return board, _check_last_action(last_action, board, caller), state
    board = _check_board(state_or_board, caller)
    return board, _check_last_action(last_action, board, caller), None


def _status(board: np.ndarray, last: int | None, state: State | None) -> str:
    """One line: result, move count and last move."""
    if state is not None:
        parts = [describe_result(state), f"moves: {int(np.asarray(state.move_count))}"]
    else:
        n_black = int(np.count_nonzero(board == BLACK_STONE))
        n_white = int(np.count_nonzero(board == WHITE_STONE))
        parts = ["board only", f"stones: {n_black + n_white} ({n_black} X, {n_white} O)"]
    if last is not None:
        row, col = divmod(last, board.shape[0])
        parts.append(f"last: {_SYMBOLS[int(board[row, col])]} ({row}, {col})")
    return " | ".join(parts)


# ------------------------------------------------------------------------------ text
def text(
    state_or_board,
    last_action=None,
    show_coordinates: bool = True,
    show_status: bool = True,
) -> str:
    """A text board for terminals.

    Args:
      state_or_board: a `State` of one game, or a board ``[N, N]`` (0/1/2).
      last_action: the move to mark: an action index, a ``(row, col)`` pair, or -1 for
        none. Default: the state's last move (none for a bare board).
      show_coordinates: print column indices on top and row indices on the left.
      show_status: end with a status line (result, move count, last move).

    Returns:
      Lines joined by newlines, without a trailing newline. Cells are 3 characters
      wide; the stone sits in the middle, under the last digit of its column index,
      and the last move is bracketed (``[X]``).
    """
    board, last, state = _position(state_or_board, last_action, "render.text")
    n = board.shape[0]
    label = len(str(n - 1))
    width = max(3, label + 1)  # cell width; the stone sits at index width - 2
    lines = []
    if show_coordinates:
        header = "".join(f"{c:>{width - 1}} " for c in range(n))
        lines.append(" " * (label + 1) + header)
    for r in range(n):
        cells = []
        for c in range(n):
            symbol = _SYMBOLS[int(board[r, c])]
            if last == r * n + c:
                cells.append(" " * (width - 3) + f"[{symbol}]")
            else:
                cells.append(" " * (width - 2) + symbol + " ")
        row = "".join(cells)
        lines.append((f"{r:>{label}} " + row) if show_coordinates else row)
    lines = [line.rstrip() for line in lines]
    if show_status:
        lines.append(_status(board, last, state))
    return "\n".join(lines)


# ------------------------------------------------------------------------------- svg
class SvgBoard(str):
    """An SVG document as a `str` that Jupyter displays as a picture.

    It is an ordinary string (write it to a file, embed it in HTML); `_repr_svg_` and
    `_repr_html_` let notebooks draw it, and `save` writes it to a ``.svg`` file.
    """

    __slots__ = ()

    def _repr_svg_(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return str(self)

    def save(self, path: str | Path) -> Path:
        """Write the SVG to ``path`` (UTF-8) and return the path."""
        path = Path(path)
        path.write_text(str(self), encoding="utf-8")
        return path


def _num(x: float) -> str:
    """A compact decimal for SVG attributes (two places, no trailing zeros)."""
    s = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def _attrs(**kwargs) -> str:
    """XML attributes from keywords (``class_`` -> ``class``, ``_`` -> ``-``)."""
    out = []
    for key, value in kwargs.items():
        name = key.rstrip("_").replace("_", "-")
        if isinstance(value, float):
            value = _num(value)
        out.append(f"{name}={_quoteattr(str(value))}")
    return " ".join(out)


def _star_points(n: int) -> list[tuple[int, int]]:
    """Hoshi: the usual 4, 5 or 9 points for boards of 9 and up, none below."""
    if n < 9:
        return []
    edge = 2 if n < 13 else 3
    lines = [edge, n - 1 - edge]
    if n % 2 == 1 and n >= 15:
        lines.insert(1, n // 2)
    points = [(r, c) for r in lines for c in lines]
    if n % 2 == 1 and n < 15:
        points.append((n // 2, n // 2))
    return points


def _check_policy(policy, n: int) -> np.ndarray:
    """The policy as a float ``[N, N]`` array of finite non-negative values."""
    try:
        arr = np.asarray(policy, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"render.svg: cannot read the policy as numbers ({err})") from None
    if arr.shape not in ((n * n,), (n, n)):
        raise ValueError(
            f"render.svg: policy must have shape [{n * n}] or [{n}, {n}] for a {n}x{n} "
            f"board, got {list(arr.shape)}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError("render.svg: policy has NaN or infinite values")
    if np.any(arr < 0):
        raise ValueError(
            "render.svg: policy values must be probabilities (>= 0), got a minimum of "
            f"{arr.min():g}; apply a softmax to logits first"
        )
    return arr.reshape(n, n)


def svg(
    state_or_board,
    last_action=None,
    size_px: float = 480,
    show_coordinates: bool = True,
    policy=None,
    star_points: bool = True,
) -> SvgBoard:
    """An SVG picture of the board (a wooden Go-style board with stones).

    Args:
      state_or_board: a `State` of one game, or a board ``[N, N]`` (0/1/2).
      last_action: the move to mark (action index, ``(row, col)`` or -1 for none).
        Default: the state's last move (none for a bare board).
      size_px: width and height of the picture in pixels.
      show_coordinates: 0-based column indices along the top edge and row indices
        along the left edge (the ``(row, col)`` of `Gomoku.play`).
      policy: optional probabilities ``[N*N]`` or ``[N, N]`` (e.g. an agent's policy).
        Each empty cell with a positive value gets a translucent blue square whose
        opacity grows with the value (the largest value on an empty cell is the most
        opaque); hovering shows the value. Values need not sum to one.
      star_points: draw the usual star points (boards of 9x9 and larger).

    Returns:
      An `SvgBoard` (a `str`) that notebooks display as a picture.
    """
    board, last, state = _position(state_or_board, last_action, "render.svg")
    n = board.shape[0]
    if (
        isinstance(size_px, bool)
        or not isinstance(size_px, (int, float, np.integer, np.floating))
        or not math.isfinite(size_px)
        or size_px <= 0
    ):
        raise ValueError(f"render.svg: size_px must be a positive number, got {size_px!r}")
    probs = None if policy is None else _check_policy(policy, n)

    size = float(size_px)
    margin = 1.0 if show_coordinates else 0.6  # in cells, around the outer grid lines
    cell = size / (n - 1 + 2 * margin)
    origin = margin * cell

    def at(i: int) -> float:
        return origin + i * cell

    status = _status(board, last, state)
    title = f"Gomoku {n}x{n}: {status}"
    parts = [
        "<svg "
        + _attrs(
            xmlns="http://www.w3.org/2000/svg",
            width=_num(size),
            height=_num(size),
            viewBox=f"0 0 {_num(size)} {_num(size)}",
            role="img",
            aria_label=title,
        )
        + ">",
        f"<title>{_escape(title)}</title>",
        # Board and a few faint wavy grain lines.
        "<rect "
        + _attrs(
            class_="wood", x=0.0, y=0.0, width=size, height=size, rx=size * 0.015,
            fill=_WOOD, stroke=_WOOD_EDGE, stroke_width=max(size * 0.006, 1.0),
        )
        + "/>",
    ]
    grain = []
    for i in range(9):
        y = size * (i + 0.5) / 9
        amp = size * 0.012 * (1 if i % 2 else -1)
        grain.append(
            f'<path d="M0 {_num(y)} Q{_num(size * 0.3)} {_num(y + amp)} '
            f'{_num(size * 0.55)} {_num(y)} T{_num(size)} {_num(y + amp * 0.5)}"/>'
        )
    parts.append(
        "<g "
        + _attrs(class_="grain", fill="none", stroke=_GRAIN, stroke_opacity=0.35,
                 stroke_width=max(size * 0.003, 0.5))
        + ">" + "".join(grain) + "</g>"
    )

    # Grid: horizontal lines (one per row), then vertical lines (one per column).
    first, last_line = at(0), at(n - 1)
    grid = []
    for i in range(n):
        grid.append("<line " + _attrs(class_="grid-row", x1=first, y1=at(i),
                                      x2=last_line, y2=at(i)) + "/>")
    for i in range(n):
        grid.append("<line " + _attrs(class_="grid-col", x1=at(i), y1=first,
                                      x2=at(i), y2=last_line) + "/>")
    parts.append(
        "<g " + _attrs(stroke=_LINE, stroke_width=max(cell * 0.035, 0.6),
                       stroke_linecap="square") + ">" + "".join(grid) + "</g>"
    )
    if star_points:
        for r, c in _star_points(n):
            parts.append("<circle " + _attrs(class_="star", cx=at(c), cy=at(r),
                                             r=cell * 0.1, fill=_LINE) + "/>")

    if show_coordinates:
        # Labels stay clear of the edge stones (radius about half a cell): column
        # indices centred above, row indices right-aligned to the left of the grid.
        font = cell * 0.4
        top, left = [], []
        for i in range(n):
            top.append(f'<text class="coord" x="{_num(at(i))}" y="{_num(origin * 0.28)}">{i}</text>')
            left.append(f'<text class="coord" x="{_num(origin - cell * 0.56)}" y="{_num(at(i))}">{i}</text>')
        for anchor, labels in (("middle", top), ("end", left)):
            parts.append(
                "<g " + _attrs(font_family="Helvetica, Arial, sans-serif", font_size=font,
                               fill=_LINE, text_anchor=anchor,
                               dominant_baseline="central") + ">" + "".join(labels) + "</g>"
            )

    if probs is not None:
        shown = np.where(board == EMPTY, probs, 0.0)
        top = float(shown.max())
        squares = []
        side = cell * 0.86
        for r, c in zip(*np.nonzero(shown > 0)):
            p = float(shown[r, c])
            opacity = 0.12 + 0.68 * p / top
            squares.append(
                "<rect " + _attrs(class_="policy", x=at(c) - side / 2, y=at(r) - side / 2,
                                  width=side, height=side, rx=cell * 0.12,
                                  fill_opacity=f"{opacity:.3f}")
                + f"><title>({r}, {c}) p={p:.4g}</title></rect>"
            )
        parts.append("<g " + _attrs(fill=_POLICY) + ">" + "".join(squares) + "</g>")

    radius = cell * 0.47
    stones = []
    for r, c in zip(*np.nonzero(board)):
        x, y = at(c), at(r)
        black = board[r, c] == BLACK_STONE
        stones.append("<circle " + _attrs(class_="shadow", cx=x + cell * 0.04,
                                          cy=y + cell * 0.06, r=radius, fill="#000000",
                                          fill_opacity=0.25) + "/>")
        stones.append(
            "<circle "
            + _attrs(
                class_="stone black" if black else "stone white", cx=x, cy=y, r=radius,
                fill=_BLACK_FILL if black else _WHITE_FILL,
                stroke=_BLACK_EDGE if black else _WHITE_EDGE,
                stroke_width=max(cell * 0.04, 0.5),
            )
            + "/>"
        )
        stones.append("<circle " + _attrs(class_="shine", cx=x - cell * 0.14,
                                          cy=y - cell * 0.15, r=radius * 0.38,
                                          fill="#ffffff",
                                          fill_opacity=0.16 if black else 0.7) + "/>")
    parts.extend(stones)

    if last is not None:
        r, c = divmod(last, n)
        parts.append("<circle " + _attrs(class_="last-move", cx=at(c), cy=at(r),
                                         r=cell * 0.15, fill=_MARKER,
                                         stroke="#ffffff" if board[r, c] == BLACK_STONE else "#000000",
                                         stroke_width=max(cell * 0.03, 0.4)) + "/>")
    parts.append("</svg>")
    return SvgBoard("\n".join(parts))


# ------------------------------------------------------------------------ game record
def game_record_text(moves: Iterable, size: int, per_line: int | None = 10) -> str:
    """A numbered move list: ``1. B (7, 7)  2. W (7, 8)  ...`` (black moves first).

    Args:
      moves: action indices (``row * size + col``) or ``(row, col)`` pairs, e.g. a row
        of the ``moves`` that ``random_games(..., record=True)`` returns; trailing -1
        padding is ignored.
      size: board side N.
      per_line: moves per line (None: all on one line).
    """
    if not _is_int(size) or size < 1:
        raise ValueError(f"game_record_text: size must be a positive integer, got {size!r}")
    if per_line is not None and (not _is_int(per_line) or per_line < 1):
        raise ValueError(
            f"game_record_text: per_line must be a positive integer or None, got {per_line!r}"
        )
    if hasattr(moves, "shape"):  # numpy or jax array
        moves = np.asarray(moves).tolist()
    cells: list[tuple[int, int]] = []
    ended_at = None
    for i, move in enumerate(moves):
        if isinstance(move, (tuple, list)):
            if len(move) != 2 or not all(_is_int(v) for v in move):
                raise ValueError(f"game_record_text: move {i + 1} is not (row, col): {move!r}")
            row, col = (int(v) for v in move)
            if not (0 <= row < size and 0 <= col < size):
                raise ValueError(
                    f"game_record_text: move {i + 1} {(row, col)} is off the {size}x{size} board"
                )
        elif _is_int(move):
            if move == -1:
                ended_at = i if ended_at is None else ended_at
                continue
            if not 0 <= move < size * size:
                raise ValueError(
                    f"game_record_text: move {i + 1} is action {int(move)}, not from 0 to "
                    f"{size * size - 1} (or -1 padding)"
                )
            row, col = divmod(int(move), size)
        else:
            raise ValueError(
                f"game_record_text: move {i + 1} must be an action index or (row, col), "
                f"got {move!r}"
            )
        if ended_at is not None:
            raise ValueError(
                f"game_record_text: move {i + 1} comes after -1 padding at move {ended_at + 1}"
            )
        cells.append((row, col))
    entries = [f"{i + 1}. {'BW'[i % 2]} ({r}, {c})" for i, (r, c) in enumerate(cells)]
    step = per_line or max(len(entries), 1)
    return "\n".join("  ".join(entries[i : i + step]) for i in range(0, len(entries), step))
