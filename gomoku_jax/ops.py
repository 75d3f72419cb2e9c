"""Array operations that XLA's CPU backend runs slowly in their ``jax.numpy`` form.

`argmax` returns exactly what ``jnp.argmax`` returns (the first index of the largest
value; a NaN counts as the largest, so the first NaN wins) but is computed as a maximum
followed by the smallest index that reaches it, two float reductions. ``jnp.argmax``
lowers to one reduction over (value, index) pairs, which XLA's CPU backend runs element
by element: on a [64, 81] array, a batch of 9x9 policies, it took 11.0 to 13.0 us (19.1
to 19.4 us pinned to one core) against 2.2 to 2.5 us for this function (2-core AMD EPYC,
jax 0.10.2; `gomoku-jax bench search` times both, its reports' ``argmax``). The search's
selection steps and the learners' greedy moves take an argmax over every game's actions
at every step, so the difference adds up: it was about a third of a Gumbel search's time
per simulation. An earlier form of this function, whose index reduction was over int32
and whose NaN test was a boolean reduction (each two kernels on a CPU, where a float
reduction is one), took 3.6 to 3.8 us; a search of 16 or 800 simulations ran about 6%
faster with this one. On a GPU the forms have not been timed against each other; all
are a few passes over a small array.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["argmax"]


def argmax(x, axis: int = -1) -> jax.Array:
    """``jnp.argmax(x, axis)`` as int32 (``jnp.argmax`` gives int64 under x64): the first
    index of the maximum along ``axis``; with a NaN there, the first NaN's index (as
    ``jnp.argmax``). ``x``: a float, integer or bool array with a non-empty ``axis``;
    ``axis`` an int (``jnp.argmax``'s ``None``, the flattened array, is not taken)."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise ValueError(f"axis must be an int (None, the flattened array, is not taken), "
                         f"got {axis!r}")
    x = jnp.asarray(x)
    if x.ndim == 0:
        raise ValueError("argmax needs an array with at least one axis, got a scalar")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is out of range for an array of {x.ndim} axes")
    axis = int(axis) % x.ndim
    size = x.shape[axis]
    if size == 0:
        raise ValueError("argmax of an empty axis")
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise ValueError(f"argmax of a complex array ({x.dtype}) is not defined here")
    if x.dtype == jnp.bool_:
        x = x.astype(jnp.int8)
    shape = [1] * x.ndim
    shape[axis] = size
    nan = jnp.isnan(x) if jnp.issubdtype(x.dtype, jnp.inexact) else None
    if nan is None:
        best = jnp.max(x, axis=axis, keepdims=True)
    else:
        # A NaN is the maximum. Not through jnp.max: on a CPU its reduction of a large
        # array (4,096 values or more) may skip NaNs rather than return one. So NaNs
        # count as +inf for the maximum, and are looked for apart (below).
        best = jnp.max(jnp.where(nan, jnp.inf, x), axis=axis, keepdims=True)
    hit = x == best  # never a NaN
    if 2 * size <= _EXACT_FLOAT32:
        # The answer is the smallest "code" of the row: a NaN's index, or the index of a
        # maximum plus `size` (so any NaN comes before any maximum), in float32, where
        # each is exact: XLA's CPU backend runs a float reduction as one fused kernel, an
        # integer or boolean one as two.
        index = jnp.asarray(np.arange(size, dtype=np.float32).reshape(shape))
        code = jnp.where(hit, index + size, np.float32(2 * size))  # 2 * size: no hit
        if nan is not None:
            code = jnp.where(nan, index, code)
        code = jnp.min(code, axis=axis)
        return jnp.where(code < size, code, code - size).astype(jnp.int32)
    # Longer rows: the first NaN and the first maximum apart, in int32 (`size`: none).
    index = jnp.asarray(np.arange(size, dtype=np.int32).reshape(shape))
    first = jnp.min(jnp.where(hit, index, np.int32(size)), axis=axis)
    if nan is None:
        return first
    first_nan = jnp.min(jnp.where(nan, index, np.int32(size)), axis=axis)
    return jnp.where(first_nan < size, first_nan, first)


# Integers up to 2 ** 24 are exact in float32.
_EXACT_FLOAT32 = 2 ** 24
