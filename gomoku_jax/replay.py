"""A device-resident ring buffer as pure functions: ``init`` / ``add`` / ``sample``.

The buffer is a frozen pytree, so it lives inside a compiled training step, is sharded
or replicated like any other array, and is saved in checkpoints as it is. Items are any
pytree whose leaves have a leading item axis.

``add`` takes a *mask* with the items, because compiled code produces fixed-size
batches of which only some entries are real (finished games, known value targets):
the masked-in items are written one after another at the write position, the rest
are dropped, with no host round trip.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

__all__ = ["ReplayBuffer", "init", "add", "sample"]


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
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise ValueError(f"replay capacity must be a positive integer, got {capacity!r}")
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
    m = jax.tree.leaves(items)[0].shape[0]
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
    index = jax.random.randint(key, (batch_size,), 0, jnp.maximum(buffer.size, 1))
    return jax.tree.map(lambda store: store[index], buffer.data)
