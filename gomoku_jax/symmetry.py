"""The 8 dihedral symmetries of the square board, for planes, boards, policies and actions.

Transform ``t`` in ``0..7`` is ``t = 4 * flip + rot``: first mirror left-right (reverse
the columns) if ``flip``, then rotate ``rot`` quarter turns counter-clockwise (as
``numpy.rot90`` does with row 0 on top). ``t = 0`` is the identity, ``inverse(t)`` undoes
``t``. The rules of k-in-a-row are invariant under all eight, so they serve for data
augmentation (seeds 000, 002, 003) and for canonical forms (seed 004).

Every function accepts ``t`` as a Python int (static slicing, no gather) or as a traced
integer (inside ``jit`` / ``vmap``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from gomoku_jax.game import MAX_SIZE, MIN_SIZE

__all__ = [
    "NUM_TRANSFORMS",
    "inverse",
    "transform_board",
    "transform_planes",
    "transform_policy",
    "transform_action",
    "all_boards",
    "canonical_board",
]

NUM_TRANSFORMS = 8


def inverse(t):
    """The transform that undoes ``t``: reflections are their own inverse, rotations
    turn back."""
    if _is_static(t):
        return int(t) if t >= 4 else (4 - int(t)) % 4
    t = jnp.asarray(t)
    return jnp.where(t >= 4, t, (4 - t) % 4)


def _is_static(t) -> bool:
    """Whether transform ``t`` is a Python or NumPy integer (checked: 0 to 7) rather than
    an integer array (traced: values out of range are clamped); a ValueError for
    anything else (a float, a string, a bool)."""
    if isinstance(t, (int, np.integer)) and not isinstance(t, (bool, np.bool_)):
        if not 0 <= int(t) < NUM_TRANSFORMS:
            raise ValueError(f"symmetry transform must be from 0 to 7, got {t}")
        return True
    if not hasattr(t, "dtype") or not jnp.issubdtype(t.dtype, jnp.integer):
        raise ValueError(f"symmetry transform must be an integer from 0 to 7 (or an integer "
                         f"array of them), got {t!r}")
    return False


def _static(x: jax.Array, t: int, axes: tuple[int, int]) -> jax.Array:
    if t >= 4:
        x = jnp.flip(x, axis=axes[1])
    return jnp.rot90(x, t % 4, axes=axes)


def _apply(x: jax.Array, t, axes: tuple[int, int]) -> jax.Array:
    x = jnp.asarray(x)
    if x.ndim < -axes[0] or x.shape[axes[0]] != x.shape[axes[1]]:
        what = ("[..., N, N, C] planes (the square board before the channels)"
                if axes == (-3, -2) else "[..., N, N] arrays (the square board last)")
        raise ValueError(f"symmetry transforms take {what}, got shape {x.shape}")
    if _is_static(t):
        return _static(x, int(t), axes)
    t = jnp.asarray(t)
    if t.ndim:
        raise ValueError(f"symmetry transforms take one transform (vmap for one per "
                         f"example), got an array of shape {t.shape}")
    # One gather of the cells from where they come: under vmap (a transform per example)
    # this stays one pass, where a switch over the 8 transforms would run all 8.
    n = x.shape[axes[1]]
    source = jnp.asarray(_sources(n))[jnp.clip(t, 0, NUM_TRANSFORMS - 1)]  # [N*N]
    lead, channels = x.shape[:x.ndim + axes[0]], x.shape[x.ndim + axes[1] + 1:]
    flat = x.reshape(*lead, n * n, *channels)  # channels: () for boards, (C,) for planes
    return jnp.take(flat, source, axis=len(lead)).reshape(x.shape)


def transform_board(board: jax.Array, t) -> jax.Array:
    """Transform ``[..., N, N]`` (boards, masks, single planes)."""
    return _apply(board, t, (-2, -1))


def transform_planes(planes: jax.Array, t) -> jax.Array:
    """Transform channels-last observation planes ``[..., N, N, C]``."""
    return _apply(planes, t, (-3, -2))


def transform_policy(policy: jax.Array, t) -> jax.Array:
    """Transform flat per-action vectors ``[..., N*N]`` (policies, legal masks, Q-values)."""
    policy = jnp.asarray(policy)
    nn = policy.shape[-1]
    n = _side(nn)
    board = policy.reshape(*policy.shape[:-1], n, n)
    return transform_board(board, t).reshape(policy.shape)


def _side(nn: int) -> int:
    n = int(round(nn**0.5))
    if n * n != nn:
        raise ValueError(f"a policy over a square board needs N*N entries, got {nn}")
    return n


@functools.lru_cache(maxsize=None)
def _sources(size: int) -> np.ndarray:
    """``[8, N*N]`` int32: the cell each cell of the image comes from, per transform;
    read-only."""
    cells = np.arange(size * size, dtype=np.int32).reshape(size, size)
    with jax.ensure_compile_time_eval():  # a constant table, even when first built in a trace
        table = np.stack([np.asarray(_static(jnp.asarray(cells), t, (0, 1))).reshape(-1)
                          for t in range(NUM_TRANSFORMS)]).astype(np.int32)
    table.flags.writeable = False
    return table


@functools.lru_cache(maxsize=None)
def _destinations(size: int) -> np.ndarray:
    """``[8, N*N]`` int32: where each cell goes under each transform (`_sources`
    inverted); read-only."""
    source = _sources(size)
    dest = np.empty_like(source)
    np.put_along_axis(dest, source, np.arange(size * size, dtype=np.int32)[None], axis=1)
    dest.flags.writeable = False
    return dest


def transform_action(action, t, size: int):
    """Where action index ``action`` lands under transform ``t`` on a ``size`` board.

    Consistent with `transform_board`: the stone at ``action`` on a board is at
    ``transform_action(action, t, size)`` on ``transform_board(board, t)``. Negative
    actions (no move) stay as they are. An action is a Python or NumPy integer (not a
    bool) or an integer array; all but traced values (inside ``jit``) are checked to be
    on the board.
    """
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or not (
            MIN_SIZE <= size <= MAX_SIZE):
        raise ValueError(f"transform_action: size must be a board size from {MIN_SIZE} to "
                         f"{MAX_SIZE}, got {size!r}")
    dest = _destinations(int(size))
    static = _is_static(t)
    scalar = isinstance(action, (int, np.integer)) and not isinstance(action, bool)
    if not scalar and not (hasattr(action, "dtype")
                           and jnp.issubdtype(action.dtype, jnp.integer)):
        raise ValueError(f"transform_action: action is an action index (row * {size} + col) "
                         f"or an integer array of them, got {action!r}")
    if not isinstance(action, jax.core.Tracer):  # a traced action cannot be checked
        values = np.asarray(action)
        if (values >= size * size).any():
            off = int(values[values >= size * size].flat[0])
            raise ValueError(f"transform_action: action {off} is off the {size}x{size} "
                             f"board (0 to {size * size - 1}, or negative for no move)")
    if scalar and static:
        return int(dest[t, action]) if action >= 0 else int(action)
    action = jnp.asarray(action)
    moved = jnp.asarray(dest)[t, jnp.maximum(action, 0)]
    return jnp.where(action >= 0, moved, action)


def all_boards(board: jax.Array) -> jax.Array:
    """The 8 transforms of ``[..., N, N]`` stacked on a new leading axis: ``[8, ..., N, N]``."""
    return jnp.stack([transform_board(board, t) for t in range(NUM_TRANSFORMS)])


def canonical_board(board: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Seed 004's canonical form of one board ``[N, N]``: the lexicographically smallest
    of its 8 transforms read row by row, and the transform ``t`` that reaches it (the
    smallest such ``t`` when several do). ``vmap`` it for a batch.

    ``transform_board(board, t)`` equals the canonical board, and boards that are
    symmetric images of each other share it.
    """
    board = jnp.asarray(board)
    if board.ndim != 2:
        raise ValueError(f"canonical_board takes one [N, N] board, got shape {board.shape}")
    flat = all_boards(board).reshape(NUM_TRANSFORMS, -1).astype(jnp.int32)  # [8, NN]
    differs = flat[:, None, :] != flat[None, :, :]  # [8, 8, NN]
    first = jnp.argmax(differs, axis=-1)  # [8, 8]: first differing cell of (i, j)
    value_i = jnp.take_along_axis(flat, first, axis=1)  # flat[i, first[i, j]]
    value_j = jnp.take_along_axis(flat, first.T, axis=1).T  # flat[j, first[i, j]]
    smaller = jnp.any(differs, axis=-1) & (value_j < value_i)  # [i, j]: j < i
    t = jnp.argmax(~jnp.any(smaller, axis=1)).astype(jnp.int32)
    return flat[t].reshape(board.shape).astype(board.dtype), t
