"""Tests for gomoku_jax.ops: `argmax` gives ``jnp.argmax``'s answer in every case."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gomoku_jax import ops

# Few distinct values, so that ties, infinities, signed zeros and NaNs are common.
FLOATS = st.sampled_from([0.0, -0.0, 1.0, 2.0, -3.5, np.inf, -np.inf, np.nan])


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_argmax_is_jnp_argmax(data):
    kind = data.draw(st.sampled_from(["float32", "int32", "bool"]))
    elements = {"float32": FLOATS, "int32": st.integers(-3, 3), "bool": st.booleans()}[kind]
    x = data.draw(hnp.arrays(kind, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                             elements=elements))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    # compiled whole, as the search calls it (one program an example, not one per op)
    got = jax.jit(ops.argmax, static_argnums=1)(x, axis)
    assert got.dtype == jnp.int32
    np.testing.assert_array_equal(got, jnp.argmax(x, axis=axis))


@pytest.mark.parametrize("shape", [(64, 81), (256, 81), (1, 4096), (8, 8)])
def test_argmax_of_large_arrays_with_nans(shape):
    """A NaN wins in arrays of the search's size as well: there XLA's CPU reduction behind
    ``jnp.max`` skips NaNs (a [64, 81] array's row maxima come out as numbers)."""
    rng = np.random.default_rng(sum(shape))
    x = rng.normal(size=shape).astype(np.float32)
    x[rng.random(shape) < 0.03] = np.nan
    x[0] = np.nan  # a row (or column) of NaNs only
    for axis in (0, 1):
        want = jnp.argmax(x, axis=axis)
        np.testing.assert_array_equal(ops.argmax(x, axis=axis), want)
        np.testing.assert_array_equal(jax.jit(ops.argmax, static_argnums=1)(x, axis), want)


@pytest.mark.parametrize("size", [2 ** 23, 2 ** 23 + 3])
@pytest.mark.parametrize("where", ["last", "nan"])
def test_argmax_at_and_past_float32_exact_indices(where, size):
    """Up to 2 ** 23 values a row's codes (an index, or an index plus the row's length,
    up to 2 ** 24) are exact in float32; beyond, the index is found in int32 instead. At
    the largest float32 row and just past it, the last value, or a NaN after a +inf, is
    still found."""
    x = np.zeros((1, size), np.float32)
    if where == "last":
        x[0, -1] = 1.0
        want = size - 1
    else:
        x[0, -3] = np.inf
        x[0, -2] = np.nan
        want = size - 2
    assert int(ops.argmax(x)[0]) == want == int(jnp.argmax(x, axis=-1)[0])


def test_argmax_by_hand_under_jit_and_vmap():
    x = jnp.array([[1.0, 3.0, 3.0, -jnp.inf],      # a tie: the first
                   [jnp.nan, 5.0, jnp.nan, 1.0],   # a NaN wins, the first one
                   [-jnp.inf, -jnp.inf, -jnp.inf, -jnp.inf],  # all excluded: 0
                   [-0.0, 0.0, -1.0, -2.0]])       # -0 == 0: the first
    want = [1, 0, 0, 0]
    np.testing.assert_array_equal(ops.argmax(x), want)
    np.testing.assert_array_equal(jax.jit(ops.argmax)(x), want)
    np.testing.assert_array_equal(jax.vmap(ops.argmax)(x), want)
    np.testing.assert_array_equal(ops.argmax(x.T, axis=0), want)


@pytest.mark.parametrize("x,axis,message", [
    (np.float32(1.0), -1, "at least one axis"),
    (np.zeros((2, 0)), -1, "empty axis"),
    (np.zeros((2, 3)), 2, "axis 2 is out of range"),
    (np.zeros((2, 3)), -3, "axis -3 is out of range"),
    (np.zeros(3, np.complex64), -1, "complex"),
    (np.zeros((2, 3)), None, "axis must be an int"),
])
def test_argmax_refuses_what_has_no_answer(x, axis, message):
    with pytest.raises(ValueError, match=message):
        ops.argmax(x, axis=axis)
