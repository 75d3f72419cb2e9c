"""Batched tree search whose cost per simulation does not grow with the tree.

`muzero_policy` and `gumbel_muzero_policy` take the arguments of mctx's policies of the
same names and return the same ``mctx.PolicyOutput`` (an ``mctx.Tree`` inside): for the
same inputs and keys they give the same actions, action weights and tree (a float may
differ in its last bit where XLA fuses an operation into another program shape: with a
traced ``dirichlet_fraction``, the root's noisy logits did; visits and actions did not).
They differ in how one simulation updates the tree. mctx's backward pass is a ``jax.vmap`` of a
``while_loop`` that carries the whole tree; under ``vmap`` its predicate is batched, so
each step of the loop becomes a ``select`` over every node of every tree and one
simulation costs O(B * nodes * actions). Here every per-simulation update is written for
the batch directly:

* selection: the first step picks a root action for all B games (root selection
  function); then a ``while_loop`` whose predicate is a scalar ("any game still
  descending") applies the interior selection function to the B current nodes, gathered
  from the tree, which is only read;
* expansion: the B new nodes and B new edges are written with scatters
  (``tree.x.at[batch, node].set``);
* backward: a ``while_loop`` over depth with the scalar predicate "any game still
  climbing" updates the B parents on the paths with scatters; a game already at its root
  writes nothing (its index is out of range and ``mode="drop"``).

XLA updates the loop-carried tree in place, so a simulation costs O(B * actions * depth)
whatever the number of simulations (see ``experiments/bench_search.py``).

Random keys are consumed exactly as mctx does (per simulation ``split(key, 3)``, per game
``split`` at every selection step), so a search started from a fresh root reproduces
mctx's tree node for node: the node created by simulation ``s`` has index ``s + 1``.

Selection. `muzero_action_selection`, `gumbel_muzero_root_action_selection` and
`gumbel_muzero_interior_action_selection` are mctx's functions of the same names, formula
for formula, except that they take their argmax with `gomoku_jax.ops.argmax` (the same
answer; ``jnp.argmax`` runs as an element-by-element reduction on a CPU, which was a third
of a Gumbel search's time per simulation there).

Tree reuse. `reuse_subtree` turns the tree of one search into the tree of the next: per
game the subtree under the played root action becomes the root, nodes renumbered in
creation order (a parent always has a smaller index than its child), statistics carried
over; a game whose child was never expanded or is terminal, or that restarted, gets an
empty tree. Pass it as ``tree=`` to `muzero_policy` (Gumbel's sequential halving assumes
a root without visits, so `gumbel_muzero_policy` refuses a ``tree``). Capacity: a tree
keeps its shape (``capacity`` nodes, static, so a jitted loop never recompiles); a game
that starts with ``n`` nodes writes its new nodes from index ``n`` on, in the order the
simulations make them, and records ``min(num_simulations, capacity - n)`` new
simulations (re-expansions at ``max_depth`` need no slot, so they always count and leave
none unused); the batch runs in lockstep, so a game
whose tree is full still takes its turn of every step (its network call included) and
writes nothing. With the default capacity
``num_simulations + 1`` the visits at the root stay about ``num_simulations`` (the kept
nodes count towards the budget); for a full ``num_simulations`` new simulations per move
start the first search with a larger ``capacity=`` and call ``reuse_subtree(...,
max_nodes=capacity - num_simulations)``, which keeps the first ``max_nodes`` nodes in
creation order.

Memory. A tree holds per game and per node (one node per simulation, plus the root)
``20 + 24 * num_actions + embedding_bytes`` bytes (float32 / int32 fields; see
`search_memory_bytes`). The policies check, while tracing and so before anything is
allocated, that two copies of the tree fit the device (`check_search_memory`) and raise a
``ValueError`` with the figures otherwise.
"""

from __future__ import annotations

import functools
import math
import os
from typing import Any, Callable

import jax
import jax.numpy as jnp
import mctx
import numpy as np

from gomoku_jax import ops
from gomoku_jax.config import check_int, check_number, clip

__all__ = [
    "NODE_BYTES",
    "EDGE_BYTES",
    "IGNORES_KEY",
    "available_bytes",
    "check_root_memory",
    "check_search_memory",
    "check_tree_memory",
    "considered_visits_table",
    "gumbel_muzero_interior_action_selection",
    "gumbel_muzero_policy",
    "gumbel_muzero_root_action_selection",
    "gumbel_selection",
    "least_available_bytes",
    "muzero_action_selection",
    "muzero_policy",
    "num_nodes",
    "puct_selection",
    "reuse_subtree",
    "search",
    "search_memory_bytes",
]

Tree = mctx.Tree
_ROOT = Tree.ROOT_INDEX
_UNVISITED = Tree.UNVISITED
_NO_PARENT = Tree.NO_PARENT

# Bytes of a tree per node: node_visits, raw_values, node_values, parents,
# action_from_parent (4 bytes each) ...
NODE_BYTES = 20
# ... and per node and action: children_index, children_prior_logits, children_visits,
# children_rewards, children_discounts, children_values (4 bytes each).
EDGE_BYTES = 24
# A selection function with this attribute set to True promises never to read its key
# (mctx's Gumbel functions ``del rng_key``): `search` then splits no keys to descend, which
# changes no result (the splits only feed the selection functions).
IGNORES_KEY = "ignores_key"
# Copies of the tree the check requires to fit: the search loop may hold its input
# tree and the updated one.
_COPIES = 2
# Folded into a simulation's key for its local-exploration coins ("lo").
_LOCAL = 0x6C6F


# -------------------------------------------------------------------- memory
def search_memory_bytes(batch: int, num_simulations: int, num_actions: int,
                        embedding_bytes: int, *, value_bytes: int = 4,
                        logit_bytes: int = 4) -> int:
    """Bytes of the search tree of ``batch`` games and ``num_simulations`` simulations.

    Per game and per simulation (one node each, plus the root) the tree holds
    ``NODE_BYTES + EDGE_BYTES * num_actions + embedding_bytes = 20 + 24 * num_actions +
    embedding_bytes`` bytes; per game ``8 * num_actions`` more (root mask, Gumbel
    noise). Total: ``batch * ((num_simulations + 1) * (20 + 24 * num_actions +
    embedding_bytes) + 8 * num_actions)``. E.g. 9x9 Gomoku (81 actions, its 188-byte
    game state): 2,152 bytes per game per simulation, 1.77 GB for 1024 games x 800.

    Those figures are for float32 values and logits; ``value_bytes`` (the bytes of the
    root value's dtype: two fields per node, three per edge) and ``logit_bytes`` (the
    prior logits': one per edge) count other dtypes (float64 under x64, bfloat16).
    """
    for name, value, low in (("batch", batch, 1), ("num_simulations", num_simulations, 1),
                             ("num_actions", num_actions, 1),
                             ("embedding_bytes", embedding_bytes, 0),
                             ("value_bytes", value_bytes, 1), ("logit_bytes", logit_bytes, 1)):
        check_int("", name, value, low)
    node = NODE_BYTES + 2 * (int(value_bytes) - 4)
    edge = EDGE_BYTES + 3 * (int(value_bytes) - 4) + int(logit_bytes) - 4
    per_node = node + edge * int(num_actions) + int(embedding_bytes)
    return int(batch) * ((int(num_simulations) + 1) * per_node + 8 * int(num_actions))


def available_bytes(device=None) -> tuple[int, str]:
    """Free memory of ``device`` (default ``jax.devices()[0]``) and where it came from:
    the device's ``memory_stats()`` when it has them, else the host's available RAM."""
    device = jax.devices()[0] if device is None else device
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - backends without memory stats raise or return None
        stats = None
    if stats and "bytes_limit" in stats:
        free = int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
        return free, f"free memory of {device.device_kind}"
    return _host_available_bytes()


def _host_available_bytes() -> tuple[int, str]:
    """The host's available RAM: Linux's ``MemAvailable`` (free memory plus the page cache
    it can reclaim), else the free pages, and at most what this process's cgroup (a
    container's limit) leaves."""
    free = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    free = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if free is None:
        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return 1 << 62, "unknown host memory"
    try:  # cgroup v2: memory.max ("max" when unlimited) and memory.current
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        if limit != "max":
            with open("/sys/fs/cgroup/memory.current") as f:
                left = int(limit) - int(f.read().strip())
            if left < free:
                return max(left, 0), "memory left under this container's limit"
    except (OSError, ValueError):
        pass
    return int(free), "available host RAM"


def _size(n: float) -> str:
    """Bytes as a short figure: ``512 bytes``, ``9.8 KiB``, ``1.0 MiB``, ``2.35 GiB``."""
    for unit, scale, digits in (("GiB", 2**30, 2), ("MiB", 2**20, 1), ("KiB", 2**10, 1)):
        if n >= scale:
            return f"{n / scale:.{digits}f} {unit}"
    return f"{n:.0f} bytes"


def least_available_bytes(devices) -> tuple[int, str]:
    """`available_bytes` of the device of ``devices`` with the least free memory, and
    where it came from."""
    found = [available_bytes(d) for d in devices]
    limit, source = min(found)
    return limit, f"{source} (the device with the least)" if len(found) > 1 else source


def _split_over(device) -> tuple[list, int, str]:
    """``(devices to read the free memory of, how many parts the batch is split into,
    what holds a part)`` for `check_tree_memory`'s ``device``: one device (or None)
    holds the whole batch; a sequence of devices holds equal parts, one each, read from
    this process's devices (another process's memory is not visible here); CPU devices
    share their host's RAM, so there a part is what one process's devices hold. An
    array of devices (a mesh's ``devices``) is a sequence; a string or a number is no
    device (a ``ValueError``)."""
    if isinstance(device, np.ndarray):
        device = device.ravel().tolist()
    if isinstance(device, (str, bytes, int, float, complex)):  # bool is an int
        raise ValueError(f"devices must be a device or a sequence of devices (a list, a "
                         f"tuple, a mesh's devices array), got {clip(repr(device))}")
    if device is None or not isinstance(device, (list, tuple)):
        return [device], 1, ""
    devices = list(device)
    if not devices:
        raise ValueError("device: an empty list of devices")
    local = [d for d in devices if d.process_index == jax.process_index()] or devices[:1]
    if all(d.platform == "cpu" for d in devices):
        return local[:1], max(1, len(devices) // len(local)), "process"
    return local, len(devices), "device"


def check_tree_memory(need: int, batch: int, num_simulations: int,
                      limit_bytes: int | None = None, device=None, what: str = "search", *,
                      limit_name: str = "limit_bytes", capacity: int | None = None,
                      capacity_name: str = "capacity") -> int:
    """Refuse trees of ``need`` bytes (``batch`` games of ``num_simulations``
    simulations) that would not fit; returns ``need``. The one check behind every
    search's memory (this module's, pure MCTS's).

    Raises ``ValueError`` (starting with ``what``) naming the size, per game and per
    node, and the limit when twice ``need`` exceeds ``limit_bytes`` (default: the
    free memory of ``device`` from its ``memory_stats()``, or the host's available RAM
    when the device has no statistics, e.g. the CPU). ``device`` may be a list: the
    devices the batch is split over in equal parts (a learner's mesh), each part
    checked against the device with the least free memory (or ``limit_bytes``, then
    per device); CPU devices share their host's RAM, so there the parts of one
    process's devices are checked together (all of them with one process).
    ``limit_name``: what the caller calls ``limit_bytes`` (its argument, as the
    messages name it). ``capacity``: nodes per game when the trees are not
    ``num_simulations + 1`` nodes (then the message says so, and to make
    ``capacity_name`` smaller).
    """
    devices, parts, holder = _split_over(device)
    if limit_bytes is None:
        limit, source = least_available_bytes(devices)
    else:
        if isinstance(limit_bytes, bool) or not isinstance(limit_bytes, (int, np.integer)) or (
            limit_bytes <= 0
        ):
            raise ValueError(f"{limit_name} must be a positive integer (bytes), got "
                             f"{limit_bytes!r}")
        limit, source = int(limit_bytes), limit_name
    share = -(-need // parts)  # what one device holds
    if _COPIES * share > limit:
        nodes = num_simulations + 1 if capacity is None else capacity
        fewer = "fewer simulations" if capacity is None else f"a smaller {capacity_name}"
        fewer = fewer if batch == 1 else f"a smaller batch or {fewer}"
        trees = "" if capacity is None else f" in trees of {capacity} nodes ({capacity_name})"
        plural = {"device": "devices", "process": "processes"}.get(holder, "")
        split = "" if parts == 1 else f" split over {parts} {plural}"
        each = "" if parts == 1 else f", {_size(share)} a {holder}"
        raise ValueError(
            f"{what} of batch {batch} x {num_simulations} simulations{trees}{split} needs a "
            f"tree of {_size(need)}{each} ({need / (batch * nodes):.0f} bytes per game per "
            f"node, {_COPIES} copies = {_size(_COPIES * share)}), over the {source} of "
            f"{_size(limit)}; use {fewer}"
        )
    return need


def check_search_memory(batch: int, num_simulations: int, num_actions: int,
                        embedding_bytes: int, limit_bytes: int | None = None,
                        device=None, *, capacity: int | None = None, value_bytes: int = 4,
                        logit_bytes: int = 4, limit_name: str = "limit_bytes",
                        capacity_name: str = "capacity") -> int:
    """Refuse a search whose tree (`search_memory_bytes`, with ``value_bytes`` and
    ``logit_bytes``; ``capacity`` nodes per game when given, else ``num_simulations +
    1``) would not fit; returns its bytes (`check_tree_memory`, with ``limit_name`` and
    ``capacity_name``)."""
    nodes = num_simulations if capacity is None else capacity - 1
    need = search_memory_bytes(batch, nodes, num_actions, embedding_bytes,
                               value_bytes=value_bytes, logit_bytes=logit_bytes)
    return check_tree_memory(need, batch, num_simulations, limit_bytes, device,
                             limit_name=limit_name, capacity=capacity,
                             capacity_name=capacity_name)


def check_root_memory(root: mctx.RootFnOutput, num_simulations: int,
                      memory_limit: int | None = None, devices=None, *,
                      capacity: int | None = None) -> int:
    """`check_search_memory` for a search of ``num_simulations`` from ``root`` (its
    batch, actions, embedding and dtypes); ``memory_limit`` and ``capacity`` named as the
    policies name them. mctx's own search allocates a tree of the same layout, so this
    checks it too. Returns the tree's bytes."""
    batch, num_actions = _batch_size(root)
    return check_search_memory(batch, num_simulations, num_actions,
                               _embedding_bytes(root.embedding), memory_limit, devices,
                               capacity=capacity, limit_name="memory_limit",
                               value_bytes=jnp.dtype(root.value.dtype).itemsize,
                               logit_bytes=jnp.dtype(root.prior_logits.dtype).itemsize)


def _embedding_bytes(embedding) -> int:
    """Bytes of one game's embedding (leaves ``[B, ...]``)."""
    total = 0
    for leaf in jax.tree_util.tree_leaves(embedding):
        shape = np.shape(leaf)
        total += int(np.prod(shape[1:], dtype=np.int64)) * jnp.dtype(leaf.dtype).itemsize
    return total


# ---------------------------------------------------------------- tree building
def _batch_size(root: mctx.RootFnOutput, invalid_actions=None) -> tuple[int, int]:
    """``(B, num_actions)`` of ``root``; a ValueError naming the argument whose shape does
    not agree: ``root.prior_logits [B, A]``, ``root.value [B]``, every leaf of
    ``root.embedding`` (``[B, ...]``) and ``invalid_actions [B, A]`` (when given)."""
    if np.ndim(root.prior_logits) != 2:
        raise ValueError(
            f"root.prior_logits must be [B, num_actions], got shape {np.shape(root.prior_logits)}"
        )
    batch, num_actions = root.prior_logits.shape
    if np.shape(root.value) != (batch,):
        raise ValueError(f"root.value must be [{batch}], got shape {np.shape(root.value)}")
    for path, leaf in jax.tree_util.tree_leaves_with_path(root.embedding):
        if np.ndim(leaf) == 0 or np.shape(leaf)[0] != batch:
            raise ValueError(f"root.embedding{jax.tree_util.keystr(path)} must have the batch "
                             f"{batch} as its first axis, got shape {np.shape(leaf)}")
    if invalid_actions is not None and np.shape(invalid_actions) != (batch, num_actions):
        raise ValueError(f"invalid_actions must be [{batch}, {num_actions}] (as "
                         f"root.prior_logits), got shape {np.shape(invalid_actions)}")
    return batch, num_actions


def _empty_tree(root: mctx.RootFnOutput, capacity: int, invalid_actions, extra_data) -> Tree:
    """A tree of ``capacity`` nodes per game, none used."""
    batch, num_actions = _batch_size(root)
    data = root.value.dtype
    bn, bna = (batch, capacity), (batch, capacity, num_actions)
    return Tree(
        node_visits=jnp.zeros(bn, jnp.int32),
        raw_values=jnp.zeros(bn, data),
        node_values=jnp.zeros(bn, data),
        parents=jnp.full(bn, _NO_PARENT, jnp.int32),
        action_from_parent=jnp.full(bn, _NO_PARENT, jnp.int32),
        children_index=jnp.full(bna, _UNVISITED, jnp.int32),
        children_prior_logits=jnp.zeros(bna, root.prior_logits.dtype),
        children_values=jnp.zeros(bna, data),
        children_visits=jnp.zeros(bna, jnp.int32),
        children_rewards=jnp.zeros(bna, data),
        children_discounts=jnp.zeros(bna, data),
        embeddings=jax.tree.map(
            lambda x: jnp.zeros((batch, capacity) + x.shape[1:], x.dtype), root.embedding),
        root_invalid_actions=invalid_actions,
        extra_data=extra_data,
    )


def _check_tree(tree: Tree, root: mctx.RootFnOutput) -> None:
    batch, num_actions = _batch_size(root)
    if not isinstance(tree, Tree):
        raise ValueError(f"tree must be an mctx.Tree, got {type(tree).__name__}")
    if tree.children_index.shape[0] != batch or tree.num_actions != num_actions:
        raise ValueError(
            f"tree has batch {tree.children_index.shape[0]} and {tree.num_actions} actions, "
            f"the root {batch} and {num_actions}"
        )
    want = jax.tree.map(lambda x: (x.shape[1:], x.dtype), root.embedding)
    have = jax.tree.map(lambda x: (x.shape[2:], x.dtype), tree.embeddings)
    if jax.tree.structure(want) != jax.tree.structure(have) or jax.tree.leaves(
            want) != jax.tree.leaves(have):
        raise ValueError("tree.embeddings do not match root.embedding (structure, shapes, dtypes)")


def _set_root(tree: Tree, root: mctx.RootFnOutput, invalid_actions, extra_data) -> Tree:
    """Put ``root`` at node 0 of every game: an empty game gets the root's prior, value
    and embedding and one visit; a kept root keeps its visits and values and takes the
    new prior logits (noise, tactics) and embedding."""
    empty = tree.node_visits[:, _ROOT] == 0  # [B]
    value = root.value.astype(tree.node_values.dtype)
    return tree.replace(
        children_prior_logits=tree.children_prior_logits.at[:, _ROOT].set(
            root.prior_logits.astype(tree.children_prior_logits.dtype)),
        raw_values=tree.raw_values.at[:, _ROOT].set(
            jnp.where(empty, value, tree.raw_values[:, _ROOT])),
        node_values=tree.node_values.at[:, _ROOT].set(
            jnp.where(empty, value, tree.node_values[:, _ROOT])),
        node_visits=tree.node_visits.at[:, _ROOT].set(
            jnp.where(empty, 1, tree.node_visits[:, _ROOT])),
        embeddings=jax.tree.map(lambda t, s: t.at[:, _ROOT].set(s), tree.embeddings,
                                root.embedding),
        root_invalid_actions=invalid_actions,
        extra_data=extra_data,
    )


def num_nodes(tree: Tree) -> jax.Array:
    """Nodes in use per game, ``[B]`` int32: one past the last node with a visit (0 for
    an empty tree). New nodes of the next search go from this index on."""
    capacity = tree.node_visits.shape[-1]
    used = jnp.where(tree.node_visits > 0, jnp.arange(1, capacity + 1, dtype=jnp.int32), 0)
    return jnp.max(used, axis=-1)


# ------------------------------------------------------------ one simulation
# Per-game reads and writes of the tree are written for one game and vmapped, not indexed
# with ``jnp.arange(B)``: the two compile to the same gather / scatter on one device, but
# only the vmapped form (batching dimensions) lets XLA's partitioner keep each game's
# reads and writes on the device that holds the game when the games are split over
# devices; the arange form costs collectives at every step of every simulation.
def _gather(x: jax.Array, *index: jax.Array) -> jax.Array:
    """``x[b, index[0][b], index[1][b], ...]`` for every game ``b``."""
    return jax.vmap(lambda x, *i: x[i])(x, *index)


def _scatter(x: jax.Array, value: jax.Array, *index: jax.Array) -> jax.Array:
    """``x`` with ``x[b, index[0][b], ...] = value[b]`` for every game ``b``; an index out
    of range writes nothing."""
    return jax.vmap(lambda x, v, *i: x.at[i].set(v.astype(x.dtype), mode="drop"))(
        x, value, *index)


def _split(keys: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per-game ``jax.random.split(key)``: ``[B]`` keys -> two ``[B]`` keys."""
    pairs = jax.vmap(jax.random.split)(keys)  # [B, 2, ...]
    return pairs[:, 0], pairs[:, 1]


def _ignores_key(fn) -> bool:
    """Whether selection function ``fn`` is marked as never reading its key (see
    `gumbel_selection`)."""
    return getattr(fn, IGNORES_KEY, False) is True


def _simulate(keys, tree: Tree, root_fn, interior_fn, max_depth):
    """Descend all B trees from the root until an unexpanded action or ``max_depth``.

    Returns ``(parent [B], action [B], depth [B])``: the node reached, the action to
    expand and the depth of its child (edges from the root). ``max_depth``: an int, or
    ``[B]`` per game.
    Step 0 is the root (depth 0) for every game; the loop runs while any game is still
    descending and leaves the finished games as they are. ``keys``: ``[B]`` keys, split
    per game at every level as mctx does; or one key when both selection functions
    ignore theirs (`IGNORES_KEY`, Gumbel's), which is then passed to every call unsplit
    (mctx's splits there are thrown away).
    """
    keyed = not (_ignores_key(root_fn) and _ignores_key(interior_fn))
    split = _split if keyed else (lambda key: (key, key))
    axis = 0 if keyed else None  # the selection functions' key: per game, or the one
    batch = tree.node_visits.shape[0]
    node = jnp.full((batch,), _ROOT, jnp.int32)
    keys, select_keys = split(keys)
    action = jax.vmap(root_fn, in_axes=(axis, 0, 0))(select_keys, tree, node)
    nxt = _gather(tree.children_index, node, action)
    depth = jnp.ones((batch,), tree.children_prior_logits.dtype)
    going = (nxt != _UNVISITED) & (depth < max_depth)

    def cond(carry):
        return jnp.any(carry[-1])

    def body(carry):
        keys, node, action, nxt, depth, going = carry
        new_node = nxt
        new_keys, select_keys = split(keys)
        new_action = jax.vmap(interior_fn, in_axes=(axis, 0, 0, 0))(select_keys, tree,
                                                                     new_node, depth)
        new_nxt = _gather(tree.children_index, new_node, new_action)
        new_depth = depth + 1
        new_going = (new_nxt != _UNVISITED) & (new_depth < max_depth)
        keep = lambda new, old: jnp.where(  # noqa: E731
            going.reshape(going.shape + (1,) * (new.ndim - 1)), new, old)
        return (keep(new_keys, keys) if keyed else keys, keep(new_node, node),
                keep(new_action, action), keep(new_nxt, nxt), keep(new_depth, depth),
                going & new_going)

    _, node, action, _, depth, _ = jax.lax.while_loop(
        cond, body, (keys, node, action, nxt, depth, going))
    return node, action, depth


def _expand(params, key, tree: Tree, recurrent_fn, parent, action, node, write,
            local=None) -> tuple[Tree, jax.Array]:
    """Evaluate ``action`` from ``parent`` and store the result at ``node`` (all ``[B]``);
    games with ``write`` False change nothing. Returns the tree and the value [B] to back
    up. ``local [B]``: games whose simulation stopped early at an expanded ``node``
    (local exploration): the node keeps its prior and raw value, and the new value joins
    its mean as one more visit's (elsewhere mctx's rule: the node takes the new value)."""
    batch, capacity = tree.node_visits.shape
    embedding = jax.tree.map(lambda x: _gather(x, parent), tree.embeddings)
    step, embedding = recurrent_fn(params, key, action, embedding)
    for name, got, want in (("prior_logits", step.prior_logits, (batch, tree.num_actions)),
                            ("reward", step.reward, (batch,)),
                            ("discount", step.discount, (batch,)),
                            ("value", step.value, (batch,))):
        if got.shape != want:
            raise ValueError(f"recurrent_fn returned {name} of shape {got.shape}, want {want}")
    shapes = lambda tree: jax.tree.map(lambda x: tuple(x.shape), tree)  # noqa: E731
    want_embedding = jax.tree.map(lambda x: (x.shape[0],) + tuple(x.shape[2:]),
                                  tree.embeddings)
    if (jax.tree.structure(embedding) != jax.tree.structure(tree.embeddings)
            or shapes(embedding) != want_embedding):
        raise ValueError(f"recurrent_fn returned an embedding of shapes {shapes(embedding)}, "
                         f"want the root's, {want_embedding}")
    at = jnp.where(write, node, capacity)  # out of range: dropped
    from_ = jnp.where(write, parent, capacity)
    count = _gather(tree.node_visits, node)
    visits = count + 1  # > 1 when max_depth (or local exploration) re-expands a node
    put = _scatter
    node_value, prior, raw = step.value, step.prior_logits, step.value
    if local is not None:  # the node keeps its prior: a tactical prior's coins stay drawn
        mean = (_gather(tree.node_values, node) * count + step.value) / visits
        node_value = jnp.where(local, mean, step.value)
        prior = jnp.where(local[:, None], _gather(tree.children_prior_logits, node), prior)
        raw = jnp.where(local, _gather(tree.raw_values, node), raw)
    return tree.replace(
        children_prior_logits=put(tree.children_prior_logits, prior, at),
        raw_values=put(tree.raw_values, raw, at),
        node_values=put(tree.node_values, node_value, at),
        node_visits=put(tree.node_visits, visits, at),
        embeddings=jax.tree.map(lambda t, s: put(t, s, at), tree.embeddings, embedding),
        children_index=put(tree.children_index, node, from_, action),
        children_rewards=put(tree.children_rewards, step.reward, from_, action),
        children_discounts=put(tree.children_discounts, step.discount, from_, action),
        parents=put(tree.parents, parent, at),
        action_from_parent=put(tree.action_from_parent, action, at),
    ), step.value


def _backward(tree: Tree, leaf, write, value) -> Tree:
    """Back ``value [B]``, the evaluation of ``leaf [B]``, up to the root; only the B
    parents on the paths are touched per step, games with ``write`` False (or at the
    root) write nothing."""
    capacity = tree.node_visits.shape[1]
    index = jnp.where(write, leaf, _ROOT)
    # As mctx, the value backed up is the leaf's as the tree stores it (in the tree's
    # dtype, whatever recurrent_fn's); the loop's carry keeps that dtype.
    value = value.astype(tree.node_values.dtype)

    def cond(carry):
        return jnp.any(carry[2] != _ROOT)

    def body(carry):
        tree, value, index = carry
        climbing = index != _ROOT
        parent = jnp.where(climbing, _gather(tree.parents, index), _ROOT)
        action = jnp.where(climbing, _gather(tree.action_from_parent, index), 0)
        count = _gather(tree.node_visits, parent)
        new_value = (_gather(tree.children_rewards, parent, action)
                     + _gather(tree.children_discounts, parent, action) * value)
        # One gather for both reads of node_values: it then precedes the scatter into
        # node_values, which XLA can do in place (two gathers cost a copy per step).
        values = _gather(tree.node_values, jnp.stack([parent, index], axis=1))
        parent_value = (values[:, 0] * count + new_value) / (count + 1.0)
        child_value = values[:, 1]
        child_visits = _gather(tree.children_visits, parent, action) + 1
        at = jnp.where(climbing, parent, capacity)  # out of range: dropped
        tree = tree.replace(
            node_values=_scatter(tree.node_values, parent_value, at),
            node_visits=_scatter(tree.node_visits, count + 1, at),
            children_values=_scatter(tree.children_values, child_value, at, action),
            children_visits=_scatter(tree.children_visits, child_visits, at, action),
        )
        return tree, jnp.where(climbing, new_value, value), jnp.where(climbing, parent, index)

    tree, _, _ = jax.lax.while_loop(cond, body, (tree, value, index))
    return tree


# -------------------------------------------------------------------- search
def search(params, rng_key: jax.Array, *, root: mctx.RootFnOutput, recurrent_fn: Callable,
           root_action_selection_fn: Callable, interior_action_selection_fn: Callable,
           num_simulations: int, max_depth: int | None = None, invalid_actions=None,
           extra_data: Any = None, loop_fn: Callable = jax.lax.fori_loop,
           tree: Tree | None = None, capacity: int | None = None,
           memory_limit: int | None = None, devices=None,
           local_exploration: float = 0.0) -> Tree:
    """mctx's ``search`` (same arguments, same tree) with per-simulation updates batched.

    ``root_action_selection_fn(key, tree, node)`` and
    ``interior_action_selection_fn(key, tree, node, depth)`` act on one unbatched tree,
    as in mctx. ``tree``: start from this tree (e.g. from `reuse_subtree`); ``capacity``:
    nodes per game of a new tree (default and least ``num_simulations + 1``; ignored
    with a ``tree``). ``max_depth`` None means ``capacity - 1``. ``memory_limit``: bytes for
    `check_search_memory` (default: the device's free memory); ``devices``: the devices
    the batch is split over when the search runs sharded (`check_tree_memory`'s
    ``device``; default: one device holds it all).

    ``local_exploration`` p (seed 003's "playout cap randomization"): each game's
    simulation is, with probability p, a local one, which descends only half the tree's
    average height, read as the mean depth of the nodes this search created (rounded
    up; 1 before the first), and evaluates the node it stops at, expanded or not: its
    network value is backed up from there as a leaf's, and the node keeps its prior and
    statistics, the value joining its mean as one more visit. A local re-evaluation takes
    no node slot (with local exploration, as from a kept ``tree``, the nodes are numbered
    in creation order, not by simulation). The coins come from a key folded from the
    simulation's, so with p = 0 (the default) the search is mctx's, key for key.
    """
    num_simulations = check_int("", "num_simulations", num_simulations, 1)
    max_depth = check_int("", "max_depth", max_depth, 1, allow_none=True)
    batch, num_actions = _batch_size(root, invalid_actions)
    if invalid_actions is None:
        invalid_actions = jnp.zeros_like(root.prior_logits)
    kept = tree is not None  # its new nodes numbered as made (mctx's: by simulation)
    if tree is None:
        given = capacity
        capacity = num_simulations + 1 if capacity is None else capacity
        capacity = check_int("", "capacity", capacity, 2)
        if capacity < num_simulations + 1:
            raise ValueError(
                f"capacity {capacity} is below num_simulations + 1 = {num_simulations + 1}: "
                f"each simulation adds a node to a new tree, so a smaller one would drop "
                f"simulations")
        check_root_memory(root, num_simulations, memory_limit, devices,
                          capacity=None if given is None else capacity)
        tree = _empty_tree(root, capacity, invalid_actions, extra_data)
    else:
        _check_tree(tree, root)
    capacity = tree.node_visits.shape[-1]
    if max_depth is None:
        max_depth = capacity - 1
    tree = _set_root(tree, root, invalid_actions, extra_data)
    start = num_nodes(tree)  # [B] first free node
    keyless = _ignores_key(root_action_selection_fn) and _ignores_key(
        interior_action_selection_fn)
    local_p = check_number("", "local_exploration", local_exploration, 0.0, 1.0)

    counting = bool(local_p) or kept  # static: without either the search is mctx's

    def body(sim, carry):
        # counting: the sum of the depths of the nodes this search created, and their
        # number
        key, tree, *created = carry
        key, simulate_key, expand_key = jax.random.split(key, 3)
        simulate_keys = simulate_key if keyless else jax.random.split(simulate_key, batch)
        limit, local = max_depth, None
        fresh = start + sim  # the node simulation `sim` creates (mctx's numbering)
        if counting:
            depths, count = created
            fresh = start + count  # a re-expansion (at max_depth, or local) takes no slot
        if local_p:
            mean = jnp.where(count > 0, depths / jnp.maximum(count, 1), 1.0)  # [B]
            near = jnp.maximum(1.0, jnp.ceil(mean / 2))
            coin = jax.random.uniform(jax.random.fold_in(simulate_key, _LOCAL),
                                      (batch,)) < local_p
            local = coin & (near < max_depth)
            limit = jnp.where(local, near, float(max_depth))
        parent, action, depth = _simulate(simulate_keys, tree, root_action_selection_fn,
                                          interior_action_selection_fn, limit)
        child = _gather(tree.children_index, parent, action)
        node = jnp.where(child == _UNVISITED, fresh, child)
        write = (child != _UNVISITED) | (fresh < capacity)
        if local is not None:
            local = local & (child != _UNVISITED)  # stopped early at an expanded node
        tree, value = _expand(params, expand_key, tree, recurrent_fn, parent, action, node,
                              write, local)
        tree = _backward(tree, node, write, value)
        if not counting:
            return key, tree
        new = write & (child == _UNVISITED)
        return (key, tree, depths + jnp.where(new, depth, 0.0).astype(depths.dtype),
                count + new.astype(count.dtype))

    created = ((jnp.zeros((batch,), jnp.float32), jnp.zeros((batch,), jnp.int32))
               if counting else ())
    return loop_fn(0, num_simulations, body, (rng_key, tree, *created))[1]


# ------------------------------------------------------------------ policies
def _mask_invalid(logits, invalid_actions):
    """Logits shifted to a max of 0, invalid actions at the smallest finite float."""
    if invalid_actions is None:
        return logits
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    return jnp.where(invalid_actions, jnp.finfo(logits.dtype).min, logits)


def _log_probs(probs):
    return jnp.log(jnp.maximum(probs, jnp.finfo(probs.dtype).tiny))


def _masked_argmax(scores, invalid_actions):
    """The first best of ``scores`` over the last axis, ``invalid_actions`` excluded (all
    excluded: action 0), as ``mctx``'s ``masked_argmax``; `ops.argmax` instead of
    ``jnp.argmax`` (same result, several times faster on a CPU)."""
    if invalid_actions is not None:
        scores = jnp.where(invalid_actions, -jnp.inf, scores)
    return ops.argmax(scores, axis=-1)


# The selection functions: mctx's, formula for formula (so the same actions for the same
# tree), for one unbatched tree and a node, as `search` vmaps them; they differ from
# mctx's only in taking the argmax with `ops.argmax`.
def muzero_action_selection(rng_key, tree: Tree, node_index, depth, *, pb_c_init=1.25,
                            pb_c_base=19652.0,
                            qtransform: Callable = mctx.qtransform_by_parent_and_siblings):
    """``mctx.muzero_action_selection``: the PUCT score of MuZero (its Appendix B) plus
    a 1e-7 uniform draw from ``rng_key`` to break ties; the root's invalid actions are
    excluded at depth 0."""
    visits = tree.children_visits[node_index]
    count = tree.node_visits[node_index]
    scale = pb_c_init + jnp.log((count + pb_c_base + 1.) / pb_c_base)
    prior = jax.nn.softmax(tree.children_prior_logits[node_index])
    exploration = jnp.sqrt(count) * scale * prior / (visits + 1)
    tie_break = 1e-7 * jax.random.uniform(rng_key, (tree.num_actions,))
    score = qtransform(tree, node_index) + exploration + tie_break
    return _masked_argmax(score, tree.root_invalid_actions * (depth == 0))


@functools.lru_cache(maxsize=64)
def considered_visits_table(max_num_considered_actions: int, num_simulations: int
                            ) -> np.ndarray:
    """Sequential Halving's schedule (Gumbel MuZero, Danihelka et al. 2022), as mctx
    plays it: row ``m`` (0 to ``max_num_considered_actions``) holds, for each simulation
    index, the visit count an action must have to be chosen at the root when ``m``
    actions are considered. With one action or none the count is the index itself.
    Otherwise the budget is spread over ``ceil(log2 m)`` phases: a phase gives each of
    the ``c`` actions still in play ``max(1, n // (phases * c))`` more visits, one round
    at a time, and then keeps the better half (never fewer than 2). Int32, shape
    ``(max_num_considered_actions + 1, num_simulations)``; read-only."""
    table = np.empty((max_num_considered_actions + 1, num_simulations), np.int32)
    for m in range(max_num_considered_actions + 1):
        if m <= 1:
            table[m] = np.arange(num_simulations)
            continue
        phases = math.ceil(math.log2(m))
        row: list[int] = []
        visits, in_play = 0, m
        while len(row) < num_simulations:
            for _ in range(max(1, num_simulations // (phases * in_play))):
                row += [visits] * in_play
                visits += 1
            in_play = max(2, in_play // 2)
        table[m] = row[:num_simulations]
    table.flags.writeable = False
    return table


def _halving_score(considered, gumbel, logits, completed_q, visits):
    """The root's Sequential Halving score: ``gumbel + logits + completed Q`` (logits
    shifted so their largest is 0, the sum floored at -1e9 so a child stays choosable
    when it is the only one considered), and -inf for a child whose visit count is not
    ``considered``."""
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    score = jnp.maximum(-1e9, gumbel + logits + completed_q)
    return score + jnp.where(visits == considered, 0.0, -jnp.inf)


def gumbel_muzero_root_action_selection(rng_key, tree: Tree, node_index, *,
                                        num_simulations, max_num_considered_actions,
                                        qtransform: Callable = (
                                            mctx.qtransform_completed_by_mix_value)):
    """``mctx.gumbel_muzero_root_action_selection``: sequential halving over the Gumbel
    top-k. The simulation's index is the root's visit count; the table of considered
    visits says how many visits the actions still in play have at that index, and the
    best of those by ``gumbel + logits + completed Q`` is taken. ``rng_key`` is unused."""
    del rng_key
    visits = tree.children_visits[node_index]
    completed = qtransform(tree, node_index)
    table = jnp.asarray(considered_visits_table(max_num_considered_actions, num_simulations))
    valid = jnp.sum(1 - tree.root_invalid_actions, axis=-1).astype(jnp.int32)
    considered = table[jnp.minimum(max_num_considered_actions, valid), jnp.sum(visits, -1)]
    score = _halving_score(considered, tree.extra_data.root_gumbel,
                           tree.children_prior_logits[node_index], completed, visits)
    return _masked_argmax(score, tree.root_invalid_actions)


def gumbel_muzero_interior_action_selection(rng_key, tree: Tree, node_index, depth, *,
                                            qtransform: Callable = (
                                                mctx.qtransform_completed_by_mix_value)):
    """``mctx.gumbel_muzero_interior_action_selection``: the deterministic selection
    whose visit frequencies follow ``softmax(logits + completed Q)``; ``rng_key`` and
    ``depth`` are unused."""
    del rng_key, depth
    visits = tree.children_visits[node_index]
    improved = jax.nn.softmax(tree.children_prior_logits[node_index]
                              + qtransform(tree, node_index))
    return ops.argmax(improved - visits / (1 + jnp.sum(visits, keepdims=True, axis=-1)))


def puct_selection(*, pb_c_init=1.25, pb_c_base=19652,
                   qtransform: Callable = mctx.qtransform_by_parent_and_siblings):
    """``(root_fn, interior_fn)`` of `muzero_policy`: `muzero_action_selection` (mctx's
    PUCT), the root's at depth 0 (where the root's invalid actions are masked)."""
    interior = functools.partial(muzero_action_selection, pb_c_base=pb_c_base,
                                 pb_c_init=pb_c_init, qtransform=qtransform)
    return functools.partial(interior, depth=0), interior


def gumbel_selection(num_simulations: int, *, max_num_considered_actions: int = 16,
                     qtransform: Callable = mctx.qtransform_completed_by_mix_value):
    """``(root_fn, interior_fn)`` of `gumbel_muzero_policy`: sequential halving over the
    Gumbel top-k at the root, the deterministic selection below (mctx's)."""
    max_num_considered_actions = check_int("", "max_num_considered_actions",
                                                max_num_considered_actions, 1)
    root = functools.partial(
        gumbel_muzero_root_action_selection, num_simulations=num_simulations,
        max_num_considered_actions=max_num_considered_actions, qtransform=qtransform)
    interior = functools.partial(gumbel_muzero_interior_action_selection,
                                 qtransform=qtransform)
    for fn in (root, interior):  # neither reads its key
        setattr(fn, IGNORES_KEY, True)
    return root, interior


def muzero_policy(params, rng_key: jax.Array, root: mctx.RootFnOutput, recurrent_fn: Callable,
                  num_simulations: int, invalid_actions=None, max_depth: int | None = None,
                  loop_fn: Callable = jax.lax.fori_loop, *,
                  qtransform: Callable = mctx.qtransform_by_parent_and_siblings,
                  dirichlet_fraction=0.25, dirichlet_alpha=0.3, pb_c_init=1.25,
                  pb_c_base=19652, temperature=1.0, tree: Tree | None = None,
                  capacity: int | None = None, memory_limit: int | None = None,
                  devices=None, local_exploration: float = 0.0) -> mctx.PolicyOutput:
    """``mctx.muzero_policy`` (PUCT, Dirichlet noise at the root) on the batched search.

    Same arguments and result as mctx's; in addition ``tree`` (start from a kept tree,
    see `reuse_subtree`; its root's visits and values are kept, its prior is replaced by
    the noisy ``root.prior_logits``; carried visits to actions now in
    ``invalid_actions`` stay in the tree but get no weight, so at temperatures up to
    about 1 they are never the action; as in mctx, a very high ``temperature`` flattens
    the logits enough to draw any action, an invalid one included),
    ``capacity``, ``memory_limit``, ``devices`` and
    ``local_exploration`` (see `search`).
    """
    batch, num_actions = _batch_size(root, invalid_actions)
    rng_key, noise_key, search_key = jax.random.split(rng_key, 3)
    probs = jax.nn.softmax(root.prior_logits)
    noise = jax.random.dirichlet(
        noise_key, alpha=jnp.full([num_actions], fill_value=dirichlet_alpha), shape=(batch,))
    noisy = (1 - dirichlet_fraction) * probs + dirichlet_fraction * noise
    root = root.replace(prior_logits=_mask_invalid(_log_probs(noisy), invalid_actions))
    root_fn, interior_fn = puct_selection(pb_c_init=pb_c_init, pb_c_base=pb_c_base,
                                          qtransform=qtransform)
    search_tree = search(
        params, search_key, root=root, recurrent_fn=recurrent_fn,
        root_action_selection_fn=root_fn,
        interior_action_selection_fn=interior_fn, num_simulations=num_simulations,
        max_depth=max_depth, invalid_actions=invalid_actions, loop_fn=loop_fn, tree=tree,
        capacity=capacity, memory_limit=memory_limit, devices=devices,
        local_exploration=local_exploration)
    if tree is not None and invalid_actions is not None:
        # A kept root may carry visits to actions that are invalid now (the previous
        # search chose them below its root, where nothing is masked): as mctx's policy,
        # give them no weight, so they are neither played nor trained towards.
        weights = _valid_visit_probs(search_tree, invalid_actions)
    else:
        weights = search_tree.summary().visit_probs
    logits = _log_probs(weights)
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    logits = logits / jnp.maximum(jnp.finfo(logits.dtype).tiny, temperature)
    action = jax.random.categorical(rng_key, logits)
    return mctx.PolicyOutput(action=action, action_weights=weights, search_tree=search_tree)


def _valid_visit_probs(tree: Tree, invalid_actions) -> jax.Array:
    """``tree.summary().visit_probs`` over the root's valid actions only: the visits of
    ``invalid_actions [B, A]`` count as none (uniform over the valid actions when no
    valid one was visited). A game with no valid action keeps mctx's weights (its
    root's visits went to action 0, as mctx's masked argmax)."""
    invalid = jnp.asarray(invalid_actions, bool)
    probs = tree.summary().visit_probs
    counts = tree.children_visits[:, _ROOT].astype(probs.dtype)
    counts = jnp.where(invalid, jnp.zeros((), counts.dtype), counts)
    total = jnp.sum(counts, axis=-1, keepdims=True)
    valid = (~invalid).astype(counts.dtype)
    uniform = valid / jnp.maximum(jnp.sum(valid, axis=-1, keepdims=True), 1)
    masked = jnp.where(total > 0, counts / jnp.maximum(total, 1), uniform)
    return jnp.where(jnp.any(~invalid, axis=-1, keepdims=True), masked, probs)


def gumbel_muzero_policy(params, rng_key: jax.Array, root: mctx.RootFnOutput,
                         recurrent_fn: Callable, num_simulations: int, invalid_actions=None,
                         max_depth: int | None = None, loop_fn: Callable = jax.lax.fori_loop,
                         *, qtransform: Callable = mctx.qtransform_completed_by_mix_value,
                         max_num_considered_actions: int = 16, gumbel_scale=1.0,
                         tree: Tree | None = None, memory_limit: int | None = None,
                         devices=None) -> mctx.PolicyOutput:
    """``mctx.gumbel_muzero_policy`` (Gumbel top-k and sequential halving at the root,
    deterministic interior selection) on the batched search; same arguments and result.

    ``tree`` must be None: sequential halving needs a root without visits.
    ``memory_limit`` and ``devices``: see `search`.
    """
    if tree is not None:
        raise ValueError(
            "gumbel_muzero_policy: tree must be None (sequential halving at a Gumbel root "
            "starts from zero visits); reuse trees with muzero_policy"
        )
    _batch_size(root, invalid_actions)
    root = root.replace(prior_logits=_mask_invalid(root.prior_logits, invalid_actions))
    rng_key, gumbel_key = jax.random.split(rng_key)
    gumbel = gumbel_scale * jax.random.gumbel(
        gumbel_key, shape=root.prior_logits.shape, dtype=root.prior_logits.dtype)
    root_fn, interior_fn = gumbel_selection(
        num_simulations, max_num_considered_actions=max_num_considered_actions,
        qtransform=qtransform)
    search_tree = search(
        params, rng_key, root=root, recurrent_fn=recurrent_fn,
        root_action_selection_fn=root_fn, interior_action_selection_fn=interior_fn,
        num_simulations=num_simulations, max_depth=max_depth,
        invalid_actions=invalid_actions,
        extra_data=mctx.GumbelMuZeroExtraData(root_gumbel=gumbel), loop_fn=loop_fn,
        memory_limit=memory_limit, devices=devices)
    visits = search_tree.summary().visit_counts
    considered = jnp.max(visits, axis=-1, keepdims=True)
    roots = jnp.full((visits.shape[0],), _ROOT, jnp.int32)
    completed_q = jax.vmap(qtransform)(search_tree, roots)
    scores = _halving_score(considered, gumbel, root.prior_logits, completed_q, visits)
    action = _masked_argmax(scores, invalid_actions)
    weights = jax.nn.softmax(_mask_invalid(root.prior_logits + completed_q, invalid_actions))
    return mctx.PolicyOutput(action=action, action_weights=weights, search_tree=search_tree)


# ---------------------------------------------------------------- tree reuse
@functools.partial(jax.jit, static_argnames=("max_nodes",))
def reuse_subtree(tree: Tree, action, reset=None, max_nodes: int | None = None) -> Tree:
    """The tree of the next search after playing ``action [B]`` at each root.

    Per game the subtree under the root's child ``action`` becomes the tree: its nodes
    renumbered in creation order (the child is node 0; a parent keeps a smaller index
    than its child), every statistic (visits, values, priors, rewards, discounts,
    embeddings) carried over. A game whose child was never expanded, is terminal (its
    edge has discount 0, as this project's ``recurrent_fn`` marks a finished game), whose
    ``action`` is negative or out of range, or with ``reset [B]`` True (its game
    restarted) gets an empty tree (no node visited: the next search starts it from its
    root). At most ``max_nodes`` nodes are kept (default: all), the first in creation
    order; an edge to a dropped child is reset to unexpanded (its parent's own visits and
    value keep the dropped simulations). The capacity, ``root_invalid_actions`` (zeroed) and
    ``extra_data`` keep their shapes; the next search sets the last two. Jitted
    (``max_nodes`` static).
    """
    if not isinstance(tree, Tree):
        raise ValueError(f"tree must be an mctx.Tree (a search's search_tree), got "
                         f"{type(tree).__name__}")
    if np.ndim(tree.node_visits) != 2:
        raise ValueError(f"tree must be a batch of trees (node_visits [B, capacity]), got "
                         f"node_visits of shape {np.shape(tree.node_visits)}")
    batch, capacity = tree.node_visits.shape
    num_actions = tree.num_actions
    check_int("", "max_nodes", max_nodes, 1, capacity, allow_none=True)
    if not jnp.issubdtype(jnp.asarray(action).dtype, jnp.integer):
        raise ValueError(f"action must be integers (the moves played), got dtype "
                         f"{jnp.asarray(action).dtype}")
    action = jnp.asarray(action, jnp.int32)
    if action.shape != (batch,):
        raise ValueError(f"action must have shape ({batch},), got {action.shape}")
    if reset is None:
        reset = jnp.zeros((batch,), bool)
    reset = jnp.asarray(reset, bool)
    if reset.shape != (batch,):
        raise ValueError(f"reset must have shape ({batch},), got {reset.shape}")
    # One game's renumbering, vmapped (see `_gather`: each game stays on its device).
    kept = jax.vmap(functools.partial(_reuse_one, num_actions=num_actions,
                                      max_nodes=max_nodes))(
        tree.replace(extra_data=None), action, reset)
    return kept.replace(extra_data=tree.extra_data,
                        root_invalid_actions=jnp.zeros_like(tree.root_invalid_actions))


def _reuse_one(tree: Tree, action, reset, *, num_actions: int, max_nodes: int | None) -> Tree:
    """`reuse_subtree` for one game (``tree`` without its batch axis)."""
    capacity = tree.node_visits.shape[0]
    valid = (action >= 0) & (action < num_actions) & (tree.node_visits[_ROOT] > 0)
    played = jnp.clip(action, 0, num_actions - 1)
    child = tree.children_index[_ROOT, played]
    terminal = tree.children_discounts[_ROOT, played] == 0
    child = jnp.where(valid & ~terminal & ~reset, child, _UNVISITED)

    def mark(i, keep):  # keep [capacity]: node i is `child` or under a kept node
        parent = tree.parents[i]
        under = keep[jnp.maximum(parent, 0)] & (parent >= 0)
        return keep.at[i].set((child == i) | under)

    keep = jax.lax.fori_loop(1, capacity, mark, jnp.zeros((capacity,), bool))
    rank = jnp.cumsum(keep, dtype=jnp.int32) - 1  # new index of a kept node
    if max_nodes is not None:
        keep = keep & (rank < max_nodes)
    new_index = jnp.where(keep, rank, _UNVISITED)  # old -> new
    old = jnp.arange(capacity, dtype=jnp.int32)
    source = jnp.zeros((capacity,), jnp.int32).at[jnp.where(keep, rank, capacity)].set(
        old, mode="drop")  # new -> old
    used = old < jnp.sum(keep, dtype=jnp.int32)

    def take(x, fill):
        got = x[source]
        mask = used.reshape(used.shape + (1,) * (got.ndim - 1))
        return jnp.where(mask, got, jnp.asarray(fill, x.dtype))

    def renumber(index):  # old node indices (or -1) -> new (or -1)
        return jnp.where(index >= 0, new_index[jnp.maximum(index, 0)], _UNVISITED)

    old_children = take(tree.children_index, _UNVISITED)
    children = renumber(old_children)
    dropped = (old_children >= 0) & (children < 0)  # edges to truncated nodes
    clear = lambda x: jnp.where(dropped, jnp.zeros((), x.dtype), x)  # noqa: E731
    parents = renumber(take(tree.parents, _NO_PARENT))
    action_from_parent = take(tree.action_from_parent, _NO_PARENT)
    return tree.replace(
        node_visits=take(tree.node_visits, 0),
        raw_values=take(tree.raw_values, 0),
        node_values=take(tree.node_values, 0),
        parents=parents.at[_ROOT].set(_NO_PARENT),
        action_from_parent=action_from_parent.at[_ROOT].set(_NO_PARENT),
        children_index=children,
        children_prior_logits=take(tree.children_prior_logits, 0),
        children_visits=clear(take(tree.children_visits, 0)),
        children_rewards=clear(take(tree.children_rewards, 0)),
        children_discounts=clear(take(tree.children_discounts, 0)),
        children_values=clear(take(tree.children_values, 0)),
        embeddings=jax.tree.map(lambda x: take(x, 0), tree.embeddings),
    )
