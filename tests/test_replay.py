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
