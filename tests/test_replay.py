import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gomoku_jax import replay


def _items(values):
    values = jnp.asarray(values, jnp.int32)
    return {"x": values, "y": jnp.stack([values, -values], axis=1).astype(jnp.float32)}


def test_add_writes_masked_items_in_order_and_wraps():
    buf = replay.init({"x": jnp.int32(0), "y": jnp.zeros(2)}, capacity=5)
    buf = replay.add(buf, _items([1, 2, 3, 4]), jnp.array([True, False, True, True]))
    np.testing.assert_array_equal(buf.data["x"], [1, 3, 4, 0, 0])
    np.testing.assert_array_equal(buf.data["y"][:3, 1], [-1, -3, -4])
    assert (int(buf.position), int(buf.size), int(buf.added)) == (3, 3, 3)
    buf = replay.add(buf, _items([5, 6, 7]))
    np.testing.assert_array_equal(buf.data["x"], [7, 3, 4, 5, 6])
    assert (int(buf.position), int(buf.size), int(buf.added)) == (1, 5, 6)


def test_add_more_than_capacity_keeps_the_last_items():
    buf = replay.init({"x": jnp.int32(0), "y": jnp.zeros(2)}, capacity=3)
    buf = replay.add(buf, _items(np.arange(1, 9)), jnp.arange(8) % 2 == 0)  # keeps 1,3,5,7
    assert sorted(np.asarray(buf.data["x"]).tolist()) == [3, 5, 7]
    assert int(buf.size) == 3 and int(buf.added) == 4
    # the next write continues after the newest item
    buf = replay.add(buf, _items([9]))
    assert 3 not in np.asarray(buf.data["x"]).tolist()


def test_sample_draws_only_filled_slots_and_is_jittable():
    buf = replay.init({"x": jnp.int32(0), "y": jnp.zeros(2)}, capacity=100)
    buf = replay.add(buf, _items([11, 12, 13]))
    batch = jax.jit(replay.sample, static_argnums=2)(buf, jax.random.PRNGKey(0), 500)
    values = set(np.asarray(batch["x"]).tolist())
    assert values == {11, 12, 13}
    np.testing.assert_array_equal(batch["y"][:, 0], batch["x"])


def test_bad_capacity_is_refused():
    with pytest.raises(ValueError, match="capacity"):
        replay.init({"x": jnp.int32(0)}, capacity=0)


def test_capacity_past_int32_is_refused_before_it_is_allocated():
    # positions are int32: a larger buffer would wrap; refused before 2**31 slots exist
    with pytest.raises(ValueError, match=r"replay capacity must be at most 2147483647"):
        replay.init({"x": jnp.int32(0)}, capacity=2**31)


BOARD = {"board": jnp.zeros((7, 7), jnp.int8), "value": jnp.float32(0)}


@pytest.mark.parametrize("items, mask, phrase", [
    ({"board": jnp.ones((7, 7), jnp.int8), "value": jnp.float32(1)}, None,  # no item axis
     r"items leaf \['board'\] must be \[M, 7, 7\] \(a leading item axis, then the example's "
     r"shape \(7, 7\)\), got shape \(7, 7\)"),
    ({"board": jnp.ones((3, 9, 9), jnp.int8), "value": jnp.zeros(3)}, None,
     r"items leaf \['board'\] must be \[M, 7, 7\] .*got shape \(3, 9, 9\)"),
    ({"board": jnp.ones((3, 7, 7), jnp.int8), "value": jnp.zeros(2)}, None,
     r"items leaf \['value'\] has 2 items, the leaves before it 3"),
    ({"board": jnp.ones((3, 7, 7), jnp.int8)}, None,
     r"items must have the structure of the buffer's items: missing \['value'\]"),
    ({"board": jnp.ones((3, 7, 7), jnp.int8), "value": jnp.zeros(3), "x": jnp.zeros(3)}, None,
     r"items must have the structure of the buffer's items: not in the buffer \['x'\]"),
    ({"board": jnp.ones((3, 7, 7)), "value": jnp.zeros(3)}, None,
     r"items leaf \['board'\] is float32, but the buffer stores int8"),
    ({"board": jnp.ones((3, 7, 7), jnp.int8), "value": jnp.zeros(3)}, jnp.array([True, False]),
     r"mask must have shape \(3,\) \(one entry per item\), got \(2,\)"),
    ({"board": jnp.ones((3, 7, 7), jnp.int8), "value": jnp.zeros(3)}, jnp.array([1.0, 0.5, 0.0]),
     r"mask must be booleans \(True: write the item\), got float32"),  # was read as != 0
])
def test_add_refuses_items_unlike_the_buffers(items, mask, phrase):
    buf = replay.init(BOARD, 8)
    with pytest.raises(ValueError, match=phrase):
        replay.add(buf, items, mask)
    with pytest.raises(ValueError, match=phrase):  # when traced, as in training
        jax.jit(replay.add)(buf, items, mask)


def test_a_python_int_example_makes_an_int_slot_that_refuses_floats():
    buf = replay.init({"board": jnp.zeros((7, 7), jnp.int8), "value": 0}, 8)
    assert buf.data["value"].dtype == jnp.int32
    values = jnp.array([1.0, -1.0, 0.5])
    with pytest.raises(ValueError, match=r"items leaf \['value'\] is float32, but the buffer "
                                         r"stores int32: .* e\.g\. 0\.0 rather than 0"):
        replay.add(buf, {"board": jnp.ones((3, 7, 7), jnp.int8), "value": values})
    buf = replay.init({"board": jnp.zeros((7, 7), jnp.int8), "value": 0.0}, 8)
    buf = replay.add(buf, {"board": jnp.ones((3, 7, 7), jnp.int32), "value": values})
    np.testing.assert_array_equal(buf.data["value"][:3], [1.0, -1.0, 0.5])
    assert buf.data["board"].dtype == jnp.int8  # integers of another width still convert


def test_bad_init_and_sample_arguments_are_refused():
    assert replay.init(BOARD, np.int64(8)).capacity == 8
    for example in (None, {}, "abc"):
        with pytest.raises(ValueError, match="example must be one item: a pytree of arrays"):
            replay.init(example, 8)
    buf = replay.add(replay.init(BOARD, 8), {"board": jnp.ones((2, 7, 7), jnp.int8),
                                              "value": jnp.ones(2)})
    for size in (-1, 2.0, True):
        with pytest.raises(ValueError, match="batch_size must be a non-negative integer"):
            replay.sample(buf, jax.random.key(0), size)
    with pytest.raises(ValueError, match=r"sample: key must be a JAX random key "
                                         r"\(jax.random.key\(seed\)\), got int 0"):
        replay.sample(buf, 0, 2)
    assert replay.sample(buf, jax.random.PRNGKey(0), 3)["board"].shape == (3, 7, 7)
    assert replay.sample(buf, jax.random.key(0), 0)["value"].shape == (0,)
