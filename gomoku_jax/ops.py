"""Array operations that XLA's CPU backend runs slowly in their ``jax.numpy`` form.

`argmax` returns exactly what ``jnp.argmax`` returns (the first index of the largest
value; a NaN counts as the largest, so the first NaN wins) but is computed as a maximum
followed by the smallest index that reaches it, two float reductions. ``jnp.argmax``
lowers to one reduction over (value, index) pairs, which XLA's CPU backend runs element
by element: on a [64, 81] array, a batch of 9x9 policies, it took 11.0 to 11.5 us (19.1
to 19.4 us pinned to one core) against 2.2 to 2.5 us for this function (2-core AMD EPYC,
jax 0.10.2; `gomoku-jax bench search` times both, its reports' ``argmax``). The search's
selection steps and the learners' greedy moves take an argmax over every game's actions
at every step, so the difference adds up: it was about a third of a Gumbel search's time
per simulation. An earlier form of this function, whose index reduction was over int32
and whose NaN test was a boolean reduction (each two kernels on a CPU, where a float
reduction is one), took 3.6 to 3.7 us; a search of 16 or 800 simulations ran about 6%
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
    # The answer is the smallest "code" of the row: a NaN's index, or the index of a
    # maximum plus `size` (so any NaN comes before any maximum). The codes are float32
    # where every one is exact (XLA's CPU backend runs a float reduction as one fused
    # kernel, an integer or boolean one as two), int32 beyond.
    code_dtype = np.float32 if 2 * size <= _EXACT_FLOAT32 else np.int32
    index = jnp.asarray(np.arange(size, dtype=code_dtype).reshape(shape))
    past = jnp.asarray(2 * size, code_dtype)  # no hit
    if jnp.issubdtype(x.dtype, jnp.inexact):
        # A NaN is the maximum. Not through jnp.max: on a CPU its reduction of a large
        # array (4,096 values or more) may skip NaNs rather than return one. So NaNs
        # count as +inf for the maximum, and their codes come first.
        nan = jnp.isnan(x)
        best = jnp.max(jnp.where(nan, jnp.inf, x), axis=axis, keepdims=True)
        code = jnp.where(nan, index, jnp.where(x == best, index + size, past))
    else:
        code = jnp.where(x == jnp.max(x, axis=axis, keepdims=True), index + size, past)
    code = jnp.min(code, axis=axis)
    return jnp.where(code < size, code, code - size).astype(jnp.int32)


# Integers up to 2 ** 24 are exact in float32.
_EXACT_FLOAT32 = 2 ** 24
