"""A device-resident ring buffer as pure functions: ``init`` / ``add`` / ``sample``.

The buffer is a frozen pytree, so it lives inside a compiled training step, is sharded
or replicated like any other array, and is saved in checkpoints as it is. Items are any
pytree whose leaves have a leading item axis.

``add`` takes a *mask* with the items, because compiled code produces fixed-size
batches of which only some entries are real (finished games, known value targets):
the masked-in items are written one after another at the write position, the rest
are dropped, with no host round trip.

The buffer keeps the structure, shapes and dtypes of ``init``'s example: ``add``
refuses items of another structure, item shape or dtype kind (a float into an integer
slot would be truncated; give the example ``0.0``, not ``0``, for a float leaf). These
checks are on static shapes and dtypes, made when the call is traced: nothing is added
to the compiled code.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from gomoku_jax.config import check_count
from gomoku_jax.game import check_key

__all__ = ["MAX_CAPACITY", "ReplayBuffer", "init", "add", "sample"]

MAX_CAPACITY = 2**31 - 1
"""The most items a buffer holds: its positions and sizes are int32 on the device."""


@struct.dataclass
class ReplayBuffer:
    data: Any  # pytree, every leaf [capacity, ...]
    position: jax.Array  # [] int32: next slot to write
    size: jax.Array  # [] int32: filled slots (<= capacity)
    added: jax.Array  # [] int32: items ever added (wraps only past 2**31)

    @property
    def capacity(self) -> int:
        return jax.tree.leaves(self.data)[0].shape[0]


def init(example: Any, capacity: int) -> ReplayBuffer:
    """An empty buffer of ``capacity`` items shaped like ``example`` (one item, no item axis)."""
    capacity = check_count("replay capacity", capacity)
    if capacity > MAX_CAPACITY:  # before the buffer is allocated
        raise ValueError(f"replay capacity must be at most {MAX_CAPACITY} (2**31 - 1: the "
                         f"buffer's positions are int32), got {capacity}")
    leaves = jax.tree.leaves(example)
    if not leaves or not all(isinstance(x, (jax.Array, np.ndarray, np.generic, bool, int, float))
                             for x in leaves):
        raise ValueError(f"example must be one item: a pytree of arrays or numbers, "
                         f"got {example!r}")
    data = jax.tree.map(
        lambda x: jnp.zeros((capacity,) + jnp.shape(x), jnp.asarray(x).dtype), example
    )
    zero = jnp.zeros((), jnp.int32)
    return ReplayBuffer(data=data, position=zero, size=zero, added=zero)


def add(buffer: ReplayBuffer, items: Any, mask: jax.Array | None = None) -> ReplayBuffer:
    """Write the items whose ``mask`` is True (``items`` leaves ``[M, ...]``, mask ``[M]``).

    Kept items go to consecutive slots from the write position, wrapping around; when
    more than ``capacity`` are kept at once only the last ``capacity`` of them stay.
    """
    capacity = buffer.capacity
    m = _check_items(buffer, items)
    if mask is not None and jnp.shape(mask) != (m,):
        raise ValueError(f"mask must have shape ({m},) (one entry per item), "
                         f"got {jnp.shape(mask)}")
    if mask is not None and jnp.result_type(mask) != jnp.bool_:
        raise ValueError(f"mask must be booleans (True: write the item), got "
                         f"{jnp.result_type(mask)}; a weight is not a mask")
    mask = jnp.ones((m,), jnp.bool_) if mask is None else jnp.asarray(mask, jnp.bool_)
    rank = jnp.cumsum(mask.astype(jnp.int32)) - 1  # order among kept items
    count = rank[-1] + 1 if m else jnp.int32(0)
    keep = mask & (rank >= count - capacity)
    slot = jnp.where(keep, (buffer.position + rank) % capacity, capacity)  # capacity: dropped
    data = jax.tree.map(
        lambda store, new: store.at[slot].set(new.astype(store.dtype), mode="drop"),
        buffer.data,
        items,
    )
    written = jnp.minimum(count, capacity)
    return ReplayBuffer(
        data=data,
        position=((buffer.position + count) % capacity).astype(jnp.int32),
        size=jnp.minimum(buffer.size + written, capacity).astype(jnp.int32),
        added=(buffer.added + count).astype(jnp.int32),
    )


def sample(buffer: ReplayBuffer, key: jax.Array, batch_size: int) -> Any:
    """``batch_size`` items drawn uniformly, with replacement, from the filled slots.

    An empty buffer gives copies of slot 0 (zeros); callers gate on ``buffer.size``.
    """
    batch_size = check_count("batch_size", batch_size, 0)
    check_key(key, "sample: key")
    index = jax.random.randint(key, (batch_size,), 0, jnp.maximum(buffer.size, 1))
    return jax.tree.map(lambda store: store[index], buffer.data)


def _paths(tree: Any) -> list[str]:
    return [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_leaves_with_path(tree)]


def _check_items(buffer: ReplayBuffer, items: Any) -> int:
    """The number of ``items`` (their leading axis), after checking them against the
    buffer: the same pytree structure, each leaf ``[M, <the slot's shape>]`` of a dtype
    that converts to the slot's within its kind. Static: no traced values."""
    if jax.tree.structure(items) != jax.tree.structure(buffer.data):
        held, given = _paths(buffer.data), _paths(items)
        missing = [p for p in held if p not in given]
        extra = [p for p in given if p not in held]
        why = "; ".join(([f"missing {', '.join(missing)}"] if missing else [])
                        + ([f"not in the buffer {', '.join(extra)}"] if extra else []))
        raise ValueError("items must have the structure of the buffer's items: " + (
            why or f"{jax.tree.structure(buffer.data)}, got {jax.tree.structure(items)}"))
    m = None
    for name, store, new in zip(_paths(buffer.data), jax.tree.leaves(buffer.data),
                                jax.tree.leaves(items)):
        shape, slot = jnp.shape(new), store.shape[1:]
        if len(shape) != len(slot) + 1 or shape[1:] != slot:
            want = "[" + ", ".join(["M", *map(str, slot)]) + "]"
            raise ValueError(f"items leaf {name or 'items'} must be {want} (a leading item "
                             f"axis, then the example's shape {slot}), got shape {shape}")
        if m is not None and shape[0] != m:
            raise ValueError(f"items leaf {name} has {shape[0]} items, the leaves before it {m}")
        m = shape[0]
        dtype = jnp.result_type(new)
        if not jnp.can_cast(dtype, store.dtype, casting="same_kind"):
            raise ValueError(f"items leaf {name or 'items'} is {dtype}, but the buffer stores "
                             f"{store.dtype}: converting would change the values (make "
                             f"init's example {dtype} too, e.g. 0.0 rather than 0 for a float)")
    return m
