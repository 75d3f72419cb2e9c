"""Flax (linen) policy-value networks and Q networks, with a registry by name.

Every module is built for one board size and is called as

    module.apply(variables, x, train=False, mutable=...)   # x: [B, N, N, C] float planes

A ``"policy-value"`` network returns ``(policy_logits [B, N*N] float32, value [B] float32
in [-1, 1])``; the logits are raw (no softmax, no legality mask). A ``"q"`` network returns
``q [B, N*N] float32``. Networks with BatchNorm keep running statistics in the
``batch_stats`` collection and use them when ``train=False``; a training step passes
``train=True, mutable=["batch_stats"]``. Networks without BatchNorm accept (and ignore)
the same ``train`` flag, so a learner can treat every network alike.

Registry (`NETWORKS`: name -> (constructor, kind, description)); `register_network` adds
a network of your own (checked; the built-ins below go through it too):

* ``cnn`` / ``net``: seed 003 Table I, which is also seed 002's ``Net``: three 3x3 convs
  (32, 64, 128, padding 1, ReLU); policy 1x1 conv 4 + ReLU -> FC N*N; value 1x1 conv 2 +
  ReLU -> FC 64 + ReLU -> FC 1 + tanh.
* ``simplenet``: seed 002's SimpleNet: 3x3 convs 16 and 32 (ReLU), flatten; policy FC
  N*N; value FC 32 + ReLU -> FC 1 + tanh.
* ``resnet``: seed 000 section 4.2 (AlphaZero-style, post-activation): 3x3 input conv ->
  BN -> ReLU, ``blocks`` residual blocks of ``filters`` (conv-BN-ReLU-conv-BN, skip,
  ReLU); policy 1x1 conv 2 + BN + ReLU -> FC N*N; value 1x1 conv 1 + BN + ReLU -> FC 256
  + ReLU -> FC 1 + tanh. Convs followed by BN have no bias. With ``blocks=10,
  filters=128`` on 9x9x3 planes it has seed 000's 2,992,794 parameters (BN scale and
  bias counted, running statistics not). Seed 003's options:

  - ``global_pooling`` (seed 003 III-B-2, KataGo's global pooling bias structure): some
    residual blocks become global-pooling blocks. Their first 3x3 conv has
    ``filters + gpool_channels`` outputs split into X (``filters``) and G
    (``gpool_channels``, default ``max(1, filters // 4)``); G -> BN -> ReLU -> pool to
    ``[mean, mean * (N - 14) / 10, max]`` (KataGo's width scaling with the board width
    N) -> FC to ``filters`` -> added channelwise to X; then the block goes on as a plain
    one (BN -> ReLU -> conv -> BN -> + input -> ReLU). This is KataGo's pre-activation
    gpool block moved to this post-activation trunk. Placement: every
    ``gpool_every``-th plain block (0-based indices 2, 5, 8, ... for the default 3, as
    in KataGo's b4c32 config), or the last plain block if that picks none.
  - ``garb`` (seed 003 III-C, NoGoZero+'s global attention residual block): odd-indexed
    blocks are GARBs, so the stack reads plain, GARB, plain, ..., plain and ``blocks``
    must be odd. A GARB splits its input channels C into X (C - C // 3, about 2/3) and G
    (C // 3); each goes BN -> ReLU -> 3x3 conv; G is pooled to ``[mean, max]`` -> FC ->
    added channelwise to X; a 3x3 conv takes X back to C channels, added to the input.
    With both options on, global pooling is placed among the plain blocks.
  - ``first_padding`` (seed 003 III-D, boundary enhancement): zero padding of the input
    conv (default 1; 3 enlarges the trunk's maps to ``N + 2 * first_padding - 2`` per
    side). Every later conv keeps that size, and the heads' fully connected layers take
    the flattened enlarged map to exactly N*N logits and one value, so the outputs keep
    their shapes (only the FC layers grow).

* ``resnet-q``: seed 000 section 3.1's DQN network: 3x3 stem conv (64) + BN + ReLU, 4
  residual blocks of 64, flatten, two dense layers (``hidden``, then N*N): one Q value per
  cell. ``dueling=True`` splits the dense part into value and advantage streams and
  returns Q = V + A - mean(A). The report does not give the hidden width; 256 is assumed.
  ``batch_norm=False`` removes every BatchNorm (the convs get biases): Q then reads the
  same in training and acting, where BatchNorm's batch statistics and running averages
  can disagree.
* ``dueling``: seed 001's DuelNet as a Q network: the ``cnn`` convolutional trunk, a value
  stream (1x1 conv 2 + ReLU -> FC 64 + ReLU -> FC 1 = V) and an advantage stream (1x1 conv
  4 + ReLU -> FC N*N = A), Q = V + A - mean(A).
* ``duelnet``: the same module as a policy-value network, as seed 001 trains it with the
  AlphaZero loss: policy logits are Q (so the policy is softmax(A)), value is tanh(V).

Dueling networks record V ``[B]`` and A ``[B, N*N]`` (float32) with ``sow`` in the
``intermediates`` collection (``mutable=["intermediates"]`` reads them).

Every network takes ``dtype``: the compute dtype (``"float32"`` default, ``"bfloat16"``,
``"float16"`` or the jnp dtypes); parameters stay float32 and outputs are cast to
float32. BatchNorm uses momentum 0.9 and epsilon 1e-5 (PyTorch's defaults).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax.core.frozen_dict import FrozenDict

from gomoku_jax.config import changed, did_you_mean, same_definition

__all__ = [
    "ConvNet",
    "DuelingNet",
    "DuelingPolicyValueNet",
    "NETWORKS",
    "NETWORK_KINDS",
    "NetworkConfig",
    "ResNet",
    "ResNetQ",
    "SimpleNet",
    "apply_train",
    "init_network",
    "make_network",
    "network_summary",
    "param_count",
    "register_network",
    "split_params",
    "unused_options",
    "variables_mismatch",
]

_DTYPES = ("float32", "bfloat16", "float16")
_BN_MOMENTUM = 0.9
_BN_EPSILON = 1e-5


# --------------------------------------------------------------------------- helpers


def _dtype_name(value: Any, what: str = "dtype") -> str:
    """Canonical name (one of ``_DTYPES``) of a compute dtype given as a string or dtype."""
    try:
        name = jnp.dtype(value).name
    except (TypeError, ValueError):
        name = None
    if isinstance(value, bool) or name not in _DTYPES:
        raise ValueError(f"{what} must be one of {', '.join(_DTYPES)}, got {value!r}")
    return name


def _as_dtype(value: Any) -> jnp.dtype:
    return jnp.dtype(_dtype_name(value))


def _conv(features: int, kernel: int, dtype, *, use_bias: bool, padding: int | None = None,
          name: str) -> nn.Conv:
    pad = kernel // 2 if padding is None else padding
    return nn.Conv(features, (kernel, kernel), padding=pad, use_bias=use_bias, dtype=dtype,
                   param_dtype=jnp.float32, name=name)


def _bn(train: bool, dtype, name: str) -> nn.BatchNorm:
    return nn.BatchNorm(use_running_average=not train, momentum=_BN_MOMENTUM,
                        epsilon=_BN_EPSILON, dtype=dtype, param_dtype=jnp.float32, name=name)


def _maybe_bn(h: jax.Array, enabled: bool, train: bool, dtype, name: str) -> jax.Array:
    """``h`` through a BatchNorm named ``name`` (called inside a compact method), or
    ``h`` as it is when ``enabled`` is False."""
    return _bn(train, dtype, name)(h) if enabled else h


def _dense(features: int, dtype, name: str) -> nn.Dense:
    return nn.Dense(features, dtype=dtype, param_dtype=jnp.float32, name=name)


def _flatten(x: jax.Array) -> jax.Array:
    return x.reshape(x.shape[0], -1)  # [B, H, W, C] -> [B, H*W*C]


def _check_input(x: jax.Array, board_size: int, dtype) -> jax.Array:
    """Checks ``x: [B, N, N, C]`` and casts it to the compute dtype."""
    if x.ndim != 4 or x.shape[1] != board_size or x.shape[2] != board_size:
        raise ValueError(
            f"x must have shape [B, {board_size}, {board_size}, C] (channels last), "
            f"got {tuple(x.shape)}"
        )
    return jnp.asarray(x).astype(dtype)


def _mean_pool(x: jax.Array) -> jax.Array:
    """Channel means ``[B, C]`` of ``[B, H, W, C]``, accumulated in float32."""
    return jnp.mean(x.astype(jnp.float32), axis=(1, 2)).astype(x.dtype)


def _max_pool(x: jax.Array) -> jax.Array:
    return jnp.max(x, axis=(1, 2))  # [B, C]


def _dueling_q(v: jax.Array, a: jax.Array) -> jax.Array:
    """Q = V + A - mean(A) for ``v: [B]``, ``a: [B, A]`` (float32) -> ``[B, A]``. The mean
    is over every cell of the board, occupied ones included (the network does not see the
    legal moves; the learner masks them when it picks or bootstraps a move)."""
    return v[:, None] + a - jnp.mean(a, axis=-1, keepdims=True)


def _block_kinds(blocks: int, garb: bool, global_pooling: bool, gpool_every: int
                 ) -> tuple[str, ...]:
    """Kinds ("plain", "gpool", "garb") of a ResNet's residual blocks, in order."""
    kinds = ["garb" if garb and i % 2 == 1 else "plain" for i in range(blocks)]
    if global_pooling:
        plain = [i for i, kind in enumerate(kinds) if kind == "plain"]
        chosen = [i for j, i in enumerate(plain) if j % gpool_every == gpool_every - 1]
        for i in chosen or plain[-1:]:
            kinds[i] = "gpool"
    return tuple(kinds)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _check_common(module: nn.Module) -> None:
    n = module.board_size
    _require(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1,
             f"board_size must be a positive int, got {n!r}")
    _dtype_name(module.dtype)


def _check_positive(module: nn.Module, *names: str) -> None:
    for name in names:
        value = getattr(module, name)
        _require(isinstance(value, (int, np.integer)) and not isinstance(value, bool)
                 and value >= 1, f"{name} must be a positive int, got {value!r}")


def _check_bool(module: nn.Module, *names: str) -> None:
    for name in names:
        value = getattr(module, name)
        _require(isinstance(value, bool), f"{name} must be a bool, got {value!r}")


def _check_channels(module: nn.Module) -> None:
    ch = module.channels
    _require(isinstance(ch, tuple) and len(ch) >= 1 and all(
        isinstance(c, (int, np.integer)) and not isinstance(c, bool) and c >= 1 for c in ch),
        f"channels must be a non-empty tuple of positive ints, got {ch!r}")


# --------------------------------------------------------------------------- blocks


class _ResidualBlock(nn.Module):
    """AlphaZero residual block: conv-BN-ReLU-conv-BN, + input, ReLU (``[B, H, W, F]``);
    ``batch_norm=False`` drops the BNs and gives the convs biases instead."""

    filters: int
    dtype: Any
    batch_norm: bool = True

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        dt, norm = self.dtype, self.batch_norm
        y = _conv(self.filters, 3, dt, use_bias=not norm, name="conv1")(x)
        y = nn.relu(_maybe_bn(y, norm, train, dt, "bn1"))
        y = _conv(self.filters, 3, dt, use_bias=not norm, name="conv2")(y)
        return nn.relu(x + _maybe_bn(y, norm, train, dt, "bn2"))


class _GlobalPoolingBlock(nn.Module):
    """Residual block with KataGo's global pooling bias structure (see module docs)."""

    filters: int
    gpool_channels: int
    board_size: int
    dtype: Any

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        f = self.filters
        h = _conv(f + self.gpool_channels, 3, self.dtype, use_bias=False, name="conv1")(x)
        xs, g = h[..., :f], h[..., f:]  # X [B, H, W, F], G [B, H, W, c_G]
        g = nn.relu(_bn(train, self.dtype, "gpool_bn")(g))
        mean = _mean_pool(g)
        pooled = jnp.concatenate(
            [mean, mean * ((self.board_size - 14) / 10), _max_pool(g)], axis=-1
        )  # [B, 3 c_G]
        bias = _dense(f, self.dtype, "gpool_fc")(pooled)  # [B, F]
        y = xs + bias[:, None, None, :]
        y = nn.relu(_bn(train, self.dtype, "bn1")(y))
        y = _conv(f, 3, self.dtype, use_bias=False, name="conv2")(y)
        y = _bn(train, self.dtype, "bn2")(y)
        return nn.relu(x + y)


class _GlobalAttentionBlock(nn.Module):
    """Seed 003's global attention residual block (GARB, from NoGoZero+)."""

    filters: int
    dtype: Any

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        c2 = self.filters // 3
        c1 = self.filters - c2
        xs, g = x[..., :c1], x[..., c1:]  # X [B, H, W, C1], G [B, H, W, C2]
        xs = nn.relu(_bn(train, self.dtype, "x_bn")(xs))
        # No bias: the pooled FC below adds one per channel.
        xs = _conv(c1, 3, self.dtype, use_bias=False, name="x_conv")(xs)
        g = nn.relu(_bn(train, self.dtype, "g_bn")(g))
        g = _conv(c2, 3, self.dtype, use_bias=True, name="g_conv")(g)
        pooled = jnp.concatenate([_mean_pool(g), _max_pool(g)], axis=-1)  # [B, 2 C2]
        xs = xs + _dense(c1, self.dtype, "g_fc")(pooled)[:, None, None, :]
        y = _conv(self.filters, 3, self.dtype, use_bias=True, name="out_conv")(xs)
        return x + y


def _conv_trunk(x: jax.Array, channels: tuple[int, ...], dtype) -> jax.Array:
    """Plain 3x3 conv (padding 1) + ReLU stack; called inside a compact method."""
    for i, c in enumerate(channels):
        x = nn.relu(_conv(c, 3, dtype, use_bias=True, name=f"conv{i + 1}")(x))
    return x


# --------------------------------------------------------------------------- networks


class ConvNet(nn.Module):
    """Seed 003 Table I / seed 002 ``Net`` (registry names ``cnn`` and ``net``)."""

    kind = "policy-value"

    board_size: int
    channels: tuple[int, ...] = (32, 64, 128)
    policy_channels: int = 4
    value_channels: int = 2
    value_hidden: int = 64
    dtype: Any = "float32"

    def __post_init__(self):
        _check_common(self)
        _check_channels(self)
        _check_positive(self, "policy_channels", "value_channels", "value_hidden")
        super().__post_init__()

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> tuple[jax.Array, jax.Array]:
        del train  # no BatchNorm
        dt, n = _as_dtype(self.dtype), self.board_size
        h = _conv_trunk(_check_input(x, n, dt), self.channels, dt)
        p = nn.relu(_conv(self.policy_channels, 1, dt, use_bias=True, name="policy_conv")(h))
        logits = _dense(n * n, dt, "policy_fc")(_flatten(p))  # [B, N*N]
        v = nn.relu(_conv(self.value_channels, 1, dt, use_bias=True, name="value_conv")(h))
        v = nn.relu(_dense(self.value_hidden, dt, "value_fc1")(_flatten(v)))
        v = _dense(1, dt, "value_fc2")(v)[:, 0]  # [B]
        return logits.astype(jnp.float32), jnp.tanh(v.astype(jnp.float32))


class SimpleNet(nn.Module):
    """Seed 002's SimpleNet: two convs, flatten, FC policy and FC-FC value, as the
    report's diagram draws it. On 7x7 with 4 planes that is 132,354 parameters, more
    than its Net (the `ConvNet` "cnn": 110,364); the report's table gives Net 132,354 and
    SimpleNet 26,359, which its diagrams do not give (the table's Net figure is this
    SimpleNet's)."""

    kind = "policy-value"

    board_size: int
    channels: tuple[int, ...] = (16, 32)
    value_hidden: int = 32
    dtype: Any = "float32"

    def __post_init__(self):
        _check_common(self)
        _check_channels(self)
        _check_positive(self, "value_hidden")
        super().__post_init__()

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> tuple[jax.Array, jax.Array]:
        del train  # no BatchNorm
        dt, n = _as_dtype(self.dtype), self.board_size
        h = _flatten(_conv_trunk(_check_input(x, n, dt), self.channels, dt))
        logits = _dense(n * n, dt, "policy_fc")(h)  # [B, N*N]
        v = nn.relu(_dense(self.value_hidden, dt, "value_fc1")(h))
        v = _dense(1, dt, "value_fc2")(v)[:, 0]  # [B]
        return logits.astype(jnp.float32), jnp.tanh(v.astype(jnp.float32))


class ResNet(nn.Module):
    """Seed 000's AlphaZero ResNet with seed 003's options (see module docs)."""

    kind = "policy-value"

    board_size: int
    blocks: int = 10
    filters: int = 128
    policy_channels: int = 2
    value_channels: int = 1
    value_hidden: int = 256
    global_pooling: bool = False
    gpool_channels: int | None = None
    gpool_every: int = 3
    garb: bool = False
    first_padding: int = 1
    dtype: Any = "float32"

    def __post_init__(self):
        _check_common(self)
        _check_positive(self, "blocks", "filters", "policy_channels", "value_channels",
                        "value_hidden", "gpool_every")
        _check_bool(self, "global_pooling", "garb")
        if self.gpool_channels is not None:
            _check_positive(self, "gpool_channels")
        if self.garb:
            _require(self.blocks % 2 == 1,
                     f"blocks must be odd when garb=True (plain, GARB, ..., plain), "
                     f"got blocks={self.blocks}")
            _require(self.filters >= 3,
                     f"filters must be >= 3 when garb=True, got {self.filters}")
        p = self.first_padding
        _require(isinstance(p, (int, np.integer)) and not isinstance(p, bool) and p >= 0
                 and self.board_size + 2 * p - 2 >= 1,
                 f"first_padding must be an int >= 0 leaving a non-empty map "
                 f"(board_size + 2 * first_padding - 2 >= 1), got {p!r}")
        super().__post_init__()

    def unused_options(self) -> list[str]:
        """The options set away from their defaults that change nothing about this
        network, each in a sentence (see `unused_options`): ``gpool_channels`` and
        ``gpool_every`` without ``global_pooling``, ``garb`` with one block (the GARBs
        are the odd-indexed blocks)."""
        out = []
        if self.garb and self.blocks == 1:
            out.append("garb (True) does nothing with blocks=1: the GARBs are the "
                       "odd-indexed blocks, and the one block is plain")
        if self.global_pooling:
            return out
        return out + [f"{name} ({getattr(self, name)!r}) does nothing without "
                      "global_pooling: the network has no global-pooling block"
                      for name in ("gpool_channels", "gpool_every") if changed(self, name)]

    @property
    def block_kinds(self) -> tuple[str, ...]:
        """Kind of each residual block in order: "plain", "gpool" or "garb"."""
        return _block_kinds(self.blocks, self.garb, self.global_pooling, self.gpool_every)

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> tuple[jax.Array, jax.Array]:
        dt, n, f = _as_dtype(self.dtype), self.board_size, self.filters
        h = _check_input(x, n, dt)
        h = _conv(f, 3, dt, use_bias=False, padding=self.first_padding, name="stem_conv")(h)
        h = nn.relu(_bn(train, dt, "stem_bn")(h))  # [B, M, M, F], M = N + 2 pad - 2
        gpool_channels = self.gpool_channels or max(1, f // 4)
        for i, kind in enumerate(self.block_kinds):
            if kind == "plain":
                block = _ResidualBlock(f, dt, name=f"block{i}")
            elif kind == "gpool":
                block = _GlobalPoolingBlock(f, gpool_channels, n, dt, name=f"block{i}_gpool")
            else:
                block = _GlobalAttentionBlock(f, dt, name=f"block{i}_garb")
            h = block(h, train)
        p = _conv(self.policy_channels, 1, dt, use_bias=False, name="policy_conv")(h)
        p = nn.relu(_bn(train, dt, "policy_bn")(p))
        logits = _dense(n * n, dt, "policy_fc")(_flatten(p))  # [B, N*N]
        v = _conv(self.value_channels, 1, dt, use_bias=False, name="value_conv")(h)
        v = nn.relu(_bn(train, dt, "value_bn")(v))
        v = nn.relu(_dense(self.value_hidden, dt, "value_fc1")(_flatten(v)))
        v = _dense(1, dt, "value_fc2")(v)[:, 0]  # [B]
        return logits.astype(jnp.float32), jnp.tanh(v.astype(jnp.float32))


class ResNetQ(nn.Module):
    """Seed 000's DQN residual Q network; ``dueling`` gives Q = V + A - mean(A).

    ``head="dense"`` (seed 000): the trunk flattened, then two dense layers, one Q per
    cell. ``head="conv"``: the Q of each cell is read from that cell's features by two
    1x1 convolutions (``hidden`` channels, then one), plus a board-wide term from a
    dense layer on the features averaged over the board (with ``dueling``, that term
    is V and the per-cell part A). The per-cell part is the same function at every
    cell, so what is learnt about a shape in one place holds everywhere (and the
    head has far fewer parameters).
    """

    kind = "q"

    board_size: int
    blocks: int = 4
    filters: int = 64
    hidden: int = 256
    dueling: bool = False
    batch_norm: bool = True
    head: str = "dense"
    dtype: Any = "float32"

    def __post_init__(self):
        _check_common(self)
        _check_positive(self, "blocks", "filters", "hidden")
        _check_bool(self, "dueling", "batch_norm")
        _require(self.head in ("dense", "conv"),
                 f"head must be 'dense' or 'conv', got {self.head!r}")
        super().__post_init__()

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
        dt, n, f, norm = _as_dtype(self.dtype), self.board_size, self.filters, self.batch_norm
        h = _conv(f, 3, dt, use_bias=not norm, name="stem_conv")(_check_input(x, n, dt))
        h = nn.relu(_maybe_bn(h, norm, train, dt, "stem_bn"))
        for i in range(self.blocks):
            h = _ResidualBlock(f, dt, norm, name=f"block{i}")(h, train)
        if self.head == "conv":
            a = nn.relu(_conv(self.hidden, 1, dt, use_bias=True, name="cell_conv1")(h))
            a = _flatten(_conv(1, 1, dt, use_bias=True, name="cell_conv2")(a))
            a = a.astype(jnp.float32)  # [B, N*N]
            v = _dense(1, dt, "board_fc")(jnp.mean(h, axis=(1, 2)))[:, 0].astype(jnp.float32)
            if not self.dueling:
                return v[:, None] + a
            self.sow("intermediates", "value", v)
            self.sow("intermediates", "advantage", a)
            return _dueling_q(v, a)
        h = _flatten(h)  # [B, N*N*F]
        if not self.dueling:
            h = nn.relu(_dense(self.hidden, dt, "fc1")(h))
            return _dense(n * n, dt, "fc2")(h).astype(jnp.float32)  # [B, N*N]
        v = nn.relu(_dense(self.hidden, dt, "value_fc1")(h))
        v = _dense(1, dt, "value_fc2")(v)[:, 0].astype(jnp.float32)  # [B]
        a = nn.relu(_dense(self.hidden, dt, "advantage_fc1")(h))
        a = _dense(n * n, dt, "advantage_fc2")(a).astype(jnp.float32)  # [B, N*N]
        self.sow("intermediates", "value", v)
        self.sow("intermediates", "advantage", a)
        return _dueling_q(v, a)


class DuelingNet(nn.Module):
    """Seed 001's DuelNet as a Q network: conv trunk, V and A streams, Q = V + A - mean A."""

    kind = "q"

    board_size: int
    channels: tuple[int, ...] = (32, 64, 128)
    advantage_channels: int = 4
    value_channels: int = 2
    value_hidden: int = 64
    dtype: Any = "float32"

    def __post_init__(self):
        _check_common(self)
        _check_channels(self)
        _check_positive(self, "advantage_channels", "value_channels", "value_hidden")
        super().__post_init__()

    def _streams(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        """V ``[B]`` and A ``[B, N*N]`` in float32 (called inside a compact method)."""
        dt, n = _as_dtype(self.dtype), self.board_size
        h = _conv_trunk(_check_input(x, n, dt), self.channels, dt)
        a = nn.relu(_conv(self.advantage_channels, 1, dt, use_bias=True,
                          name="advantage_conv")(h))
        a = _dense(n * n, dt, "advantage_fc")(_flatten(a)).astype(jnp.float32)
        v = nn.relu(_conv(self.value_channels, 1, dt, use_bias=True, name="value_conv")(h))
        v = nn.relu(_dense(self.value_hidden, dt, "value_fc1")(_flatten(v)))
        v = _dense(1, dt, "value_fc2")(v)[:, 0].astype(jnp.float32)
        self.sow("intermediates", "value", v)
        self.sow("intermediates", "advantage", a)
        return v, a

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
        del train  # no BatchNorm
        return _dueling_q(*self._streams(x))  # [B, N*N]


class DuelingPolicyValueNet(DuelingNet):
    """``DuelingNet`` trained as a policy-value net (seed 001): logits Q, value tanh(V)."""

    kind = "policy-value"

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> tuple[jax.Array, jax.Array]:
        del train  # no BatchNorm
        v, a = self._streams(x)
        return _dueling_q(v, a), jnp.tanh(v)


NETWORK_KINDS = ("policy-value", "q")
"""What a registered network returns: ``policy-value`` (logits and value) or ``q``."""

NETWORKS: dict[str, tuple[type[nn.Module], str, str]] = {}
"""The registry, name -> (class, kind, description). Read it freely; add to it with
`register_network`, which checks the entry."""


def _option_hints(cls: type) -> dict[str, Any]:
    """Option name -> type hint for a network class (its dataclass fields)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)
            if f.name not in ("parent", "name", "board_size")}


def register_network(name: str, cls: type[nn.Module], kind: str, description: str, *,
                     replace: bool = False) -> None:
    """Make network class ``cls`` available by ``name`` everywhere a network is named:
    `make_network`, `NetworkConfig`, a config's ``network.name`` and exported files
    (which store the name, so a file of a custom network loads once its network is
    registered, e.g. by ``gomoku-jax --plugin MODULE``).

    ``cls``: a ``flax.linen.Module`` subclass with a ``board_size: int`` field, called
    as ``module.apply(variables, x [B, N, N, C], train=...)``; its other fields, with
    type hints (``int``, ``float``, ``bool``, ``str``, tuples of them, ``X | None``;
    ``dtype: Any`` for a compute dtype) and defaults, are the network's options.
    ``kind``: one of `NETWORK_KINDS`, what it returns (see the module docs); a ``kind``
    class attribute, where ``cls`` has one, must agree. ``description``: one line for
    listings. A name already taken (built-in or not) is refused unless ``replace=True``,
    or unless it is taken by the same definition of the same kind
    (`config.same_definition`: a notebook cell or a reloaded plugin run again), which is
    replaced. Every refusal is a ``ValueError``.
    """
    if not isinstance(name, str) or not name or any(ch.isspace() for ch in name):
        raise ValueError(f"register_network: name must be a non-empty string without "
                         f"spaces, got {name!r}")
    if not isinstance(replace, bool):
        raise ValueError(f"register_network: replace must be a bool, got {replace!r}")
    if name in NETWORKS and not replace and not (
            NETWORKS[name][1] == kind and same_definition(NETWORKS[name][0], cls)):
        raise ValueError(f"register_network: network {name!r} is already registered (as "
                         f"{NETWORKS[name][0].__name__}); pass replace=True to replace it")
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ValueError(f"register_network: cls of network {name!r} must be a "
                         f"flax.linen.Module subclass, got {cls!r}")
    if "board_size" not in {f.name for f in dataclasses.fields(cls)}:
        raise ValueError(f"register_network: {cls.__name__} (network {name!r}) has no "
                         "board_size field; give it one (board_size: int), as make_network "
                         "builds every network for one board size")
    try:
        _option_hints(cls)
    except Exception as error:  # noqa: BLE001 (an unresolvable hint can raise anything)
        raise ValueError(f"register_network: the type hints of {cls.__name__}'s fields "
                         f"(network {name!r}) cannot be resolved: {error}") from None
    required = [f.name for f in dataclasses.fields(cls)
                if f.name not in ("parent", "name", "board_size")
                and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]
    if required:  # a config naming the network without them could not build it
        raise ValueError(f"register_network: the options of network {name!r} need "
                         f"defaults, but {cls.__name__}'s {', '.join(required)} "
                         f"{'has' if len(required) == 1 else 'have'} none (give each a "
                         "value: width: int = 32)")
    if kind not in NETWORK_KINDS:
        raise ValueError(f"register_network: kind of network {name!r} must be one of "
                         f"{', '.join(NETWORK_KINDS)}, got {kind!r}")
    declared = getattr(cls, "kind", None)
    if declared is not None and declared != kind:
        raise ValueError(f"register_network: {cls.__name__}.kind is {declared!r} but "
                         f"network {name!r} is registered as {kind!r}")
    if not isinstance(description, str) or not description.strip():
        raise ValueError(f"register_network: description of network {name!r} must be a "
                         f"non-empty string, got {description!r}")
    NETWORKS[name] = (cls, kind, description)


register_network("cnn", ConvNet, "policy-value",
                 "seed 003 Table I: 3 convs 32/64/128, conv+FC policy, conv+FC+FC value")
register_network("net", ConvNet, "policy-value", "seed 002 Net: the same architecture as cnn")
register_network("simplenet", SimpleNet, "policy-value",
                 "seed 002 SimpleNet: convs 16/32, FC policy, FC 32 + FC 1 value")
register_network("resnet", ResNet, "policy-value",
                 "seed 000 AlphaZero ResNet (10x128), options: global_pooling, garb, "
                 "first_padding (seed 003)")
register_network("resnet-q", ResNetQ, "q",
                 "seed 000 DQN residual Q network (4x64, two dense layers), options dueling, "
                 "batch_norm, head (dense or conv)")
register_network("dueling", DuelingNet, "q",
                 "seed 001 DuelNet: conv trunk, Q = V + A - mean(A)")
register_network("duelnet", DuelingPolicyValueNet, "policy-value",
                 "seed 001 DuelNet as policy-value net: logits Q, value tanh(V)")


# --------------------------------------------------------------------------- options


def _type_name(hint: Any) -> str:
    if hint is Any:
        return f"a dtype ({', '.join(_DTYPES)})"
    if hint is type(None):
        return "None"
    if hint is tuple:
        return "a tuple (a list in JSON)"
    if isinstance(hint, type):
        return hint.__name__
    if typing.get_origin(hint) is tuple:
        return f"a tuple of {_type_name(typing.get_args(hint)[0])}"
    return " or ".join(_type_name(a) for a in typing.get_args(hint)) or str(hint)


def _coerce(network: str, option: str, value: Any, hint: Any) -> Any:
    """``value`` checked against ``hint`` and normalised (lists -> tuples, dtype -> name)."""

    full_hint = hint

    def bad() -> ValueError:
        return ValueError(f"option {option!r} of network {network!r} must be "
                          f"{_type_name(full_hint)}, got {value!r}")

    if option == "dtype" or hint is Any:
        try:
            return _dtype_name(value, what=f"option {option!r} of network {network!r}")
        except ValueError:
            raise bad() from None
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        (hint,) = [a for a in args if a is not type(None)]
    if hint is bool:
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        raise bad()
    if hint is int:
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            return int(value)
        raise bad()
    if hint is float:
        if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
                value, (bool, np.bool_)) and math.isfinite(value):
            return float(value)
        raise bad()
    if hint is tuple:  # untyped items: JSON's scalars
        if isinstance(value, (list, tuple)) and all(
                isinstance(v, (bool, int, float, str)) for v in value):
            return tuple(value)
        raise bad()
    if typing.get_origin(hint) is tuple:
        item = typing.get_args(hint)[0]
        if isinstance(value, (list, tuple)):
            try:
                return tuple(_coerce(network, option, v, item) for v in value)
            except ValueError:
                raise bad() from None
        raise bad()
    if hint is str:
        if isinstance(value, str):
            return value
        raise bad()
    raise bad()


def _check_options(network: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Options of a registered network, checked by name and type and normalised."""
    if network not in NETWORKS:
        raise ValueError(f"unknown network {network!r}{did_you_mean(network, NETWORKS)}; "
                         f"valid names: {', '.join(NETWORKS)} "
                         "(a network of your own must be registered first: "
                         "networks.register_network, or gomoku-jax --plugin MODULE)")
    hints = _option_hints(NETWORKS[network][0])
    out = {}
    for key, value in options.items():
        if key not in hints:
            raise ValueError(f"unknown option {key!r} for network {network!r}"
                             f"{did_you_mean(key, hints)}; valid options: "
                             f"{', '.join(sorted(hints))} (and board_size)")
        out[key] = _coerce(network, key, value, hints[key])
    return out


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """A network as data: registry ``name`` and its options (board size given apart).

    ``kwargs`` is stored as a hashable frozen mapping with lists turned into tuples and
    dtypes into their names, so configs can be static arguments and JSON round trips
    (`to_dict` / `from_dict`) give back an equal config.
    """

    name: str
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.name, str):
            raise ValueError(f"name must be a str, got {self.name!r}")
        if not isinstance(self.kwargs, Mapping):
            raise ValueError(f"kwargs must be a mapping, got {self.kwargs!r}")
        if "board_size" in self.kwargs:
            raise ValueError("kwargs must not hold board_size; pass board_size to "
                             "make_network")
        checked = _check_options(self.name, self.kwargs)
        object.__setattr__(self, "kwargs", FrozenDict(sorted(checked.items())))

    def __repr__(self) -> str:
        return f"NetworkConfig(name={self.name!r}, kwargs={dict(self.kwargs)!r})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready ``{"name": ..., "kwargs": {...}}`` (tuples become lists)."""
        def plain(v):
            return [plain(x) for x in v] if isinstance(v, tuple) else v

        return {"name": self.name, "kwargs": {k: plain(v) for k, v in self.kwargs.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NetworkConfig:
        """Inverse of `to_dict`."""
        if not isinstance(d, Mapping) or "name" not in d or set(d) - {"name", "kwargs"}:
            raise ValueError(f"d must be a mapping with keys 'name' and optional 'kwargs', "
                             f"got {d!r}")
        return cls(d["name"], dict(d.get("kwargs", {})))


def make_network(name_or_config: str | NetworkConfig, *, board_size: int, **kwargs
                 ) -> nn.Module:
    """The registered network ``name_or_config`` for ``board_size`` x ``board_size`` boards.

    ``kwargs`` override a config's options. Unknown names, unknown or wrong-typed options
    and invalid values raise ``ValueError`` naming them.
    """
    if isinstance(name_or_config, NetworkConfig):
        name, options = name_or_config.name, {**name_or_config.kwargs, **kwargs}
    elif isinstance(name_or_config, str):
        name, options = name_or_config, kwargs
    else:
        raise ValueError(f"name_or_config must be a network name or a NetworkConfig, "
                         f"got {name_or_config!r}")
    if isinstance(board_size, bool) or not isinstance(board_size, (int, np.integer)) or (
            board_size < 1):
        raise ValueError(f"board_size must be a positive int, got {board_size!r}")
    options = _check_options(name, options)
    return NETWORKS[name][0](board_size=int(board_size), **options)


# --------------------------------------------------------------------------- utilities


def unused_options(module: nn.Module) -> list[str]:
    """Sentences for the options of ``module`` that are set away from their defaults and
    change nothing about it with its other options as they are (a ResNet's
    ``gpool_channels`` without ``global_pooling``). A network class lists them in an
    ``unused_options()`` method of its own; a class without one has none. A config
    reading the network warns of them (`gomoku_jax.config.ConfigWarning`)."""
    method = getattr(module, "unused_options", None)
    return list(method()) if callable(method) else []


def init_network(module: nn.Module, key: jax.Array, observation_shape,
                 kind: str | None = None) -> dict[str, Any]:
    """Variables of ``module`` for planes of ``observation_shape = (N, N, C)``.

    Returns a dict with ``params`` and, for networks with BatchNorm, ``batch_stats``.
    ``kind`` (``"policy-value"`` or ``"q"``): what the caller will use the network as,
    whose outputs `check_calls` checks; by default the kind the network is registered as.
    """
    shape = tuple(int(s) for s in observation_shape)
    n = getattr(module, "board_size", None)
    if len(shape) != 3 or (n is not None and shape[:2] != (n, n)):
        raise ValueError(f"observation_shape must be (N, N, C) with N = board_size = {n}, "
                         f"got {tuple(observation_shape)}")
    check_calls(module, shape, kind)
    return _jit_init(module, key, shape)


@functools.lru_cache(maxsize=128)
def check_calls(module: nn.Module, observation_shape: tuple[int, ...],
                kind: str | None = None) -> None:
    """Raise ``ValueError`` unless ``module`` initialises, and runs both with
    ``train=False`` and as a training pass (`apply_train`), on planes of
    ``observation_shape`` and returns what its kind asks (see the module docs): ``kind``,
    else the kind its class is registered as (not checked for a class registered as
    both kinds: learners pass the kind they use).

    Only shapes are traced (``jax.eval_shape``): nothing is computed. `init_network`
    calls it, so a network of one's own that cannot train (a ``__call__`` without
    ``train``, a Dropout layer asking for a random stream, a value of shape ``[B, 1]``)
    is named when a learner starts, not deep inside its first training step.
    """
    shape = tuple(int(s) for s in observation_shape)
    cls = type(module)
    names = [name for name, (c, _, _) in NETWORKS.items() if c is cls]
    what = (f"network {names[0]!r} ({cls.__name__})" if len(names) == 1
            else f"network {cls.__name__}")
    planes = f"planes [B, {', '.join(map(str, shape))}]"

    def fail(stage: str, error: Exception) -> ValueError:
        # the innermost line of the network's own code (not JAX's, Flax's or ours)
        from gomoku_jax import io as gio

        own = gio.raised_at(error)
        where = f" (at {Path(own.filename).name}:{own.lineno})" if own else ""
        text = (str(error).strip().splitlines() or [""])[0]
        hint = ("; networks are called without random streams, so layers that need one "
                "(Dropout) are not supported" if "PRNG" in text else "")
        return ValueError(f"{what} fails {stage} on {planes}: {type(error).__name__}: "
                          f"{text}{where}{hint}. Networks are called as module.apply("
                          "variables, x, train=True or False)")

    try:
        variables = jax.eval_shape(functools.partial(_jit_init, module, shape=shape),
                                   jax.random.PRNGKey(0))
    except Exception as error:  # noqa: BLE001 - a network of one's own can raise anything
        raise fail("to initialise", error) from None
    x = jax.ShapeDtypeStruct((2, *shape), jnp.float32)
    passes = (("a pass with train=False",
               lambda v, x: module.apply(v, x, train=False)),
              ("a training pass (train=True)",
               lambda v, x: apply_train(module, *split_params(v), x)[0]))
    if kind is not None and kind not in NETWORK_KINDS:
        raise ValueError(f"kind must be one of {', '.join(map(repr, NETWORK_KINDS))}, "
                         f"got {kind!r}")
    # the kind asked for; else the one the class is registered as (none when registered
    # as both: the caller must say)
    kinds = {k for c, k, _ in NETWORKS.values() if c is cls} or (
        {module.kind} if getattr(module, "kind", None) in NETWORK_KINDS else set())
    if kind is not None:
        kinds = {kind}
    cells = shape[0] * shape[1]
    for stage, call in passes:
        try:
            out = jax.eval_shape(call, variables, x)
        except Exception as error:  # noqa: BLE001
            raise fail(stage, error) from None
        if len(kinds) != 1:
            continue
        (kind,) = kinds
        got = (tuple(getattr(o, "shape", None) for o in out) if isinstance(out, tuple)
               else getattr(out, "shape", None))
        want = ((2, cells), (2,)) if kind == "policy-value" else (2, cells)
        if got != want:
            expected = ("(policy_logits [B, N*N], value [B])" if kind == "policy-value"
                        else "q [B, N*N]")
            raise ValueError(f"{what} is a {kind} network and must return {expected}: "
                             f"{want} for a batch of 2 on {planes}, got {got}")
        dtypes = [o.dtype for o in (out if isinstance(out, tuple) else (out,))]
        if not all(jnp.issubdtype(d, jnp.floating) for d in dtypes):  # no gradient
            raise ValueError(f"{what} must return floats (float32, bfloat16...): a loss "
                             f"has no gradient through other outputs, so it would never "
                             f"learn; got {', '.join(map(str, dtypes))}")


@functools.partial(jax.jit, static_argnums=(0, 2))
def _jit_init(module: nn.Module, key: jax.Array, shape: tuple[int, ...]) -> dict[str, Any]:
    """Compiled once per (module, shape): init is many small random ops."""
    variables = module.init(key, jnp.zeros((1, *shape), jnp.float32), train=False)
    return {k: v for k, v in variables.items() if k != "intermediates"}


class _TooManyVariables(Exception):
    """Raised inside `_at_most_variables` with the number of variables made so far."""


@contextlib.contextmanager
def _at_most_variables(limit: int):
    """Stop a module's ``init`` (raise `_TooManyVariables`) as soon as it has made more
    than ``limit`` variables, counted after each submodule call. Tracing a network costs
    time in its number of layers, so a header that asks for 100,000 blocks is refused
    after a few more layers than its file holds, not after minutes."""

    def count(next_fun, args, kwargs, context):
        out = next_fun(*args, **kwargs)
        scope = getattr(context.module, "scope", None)
        root = getattr(scope, "root", None)
        if root is not None and hasattr(root, "variables"):
            made = len(jax.tree.leaves(root.variables()))
            if made > limit:
                raise _TooManyVariables(made)
        return out

    with nn.intercept_methods(count):
        yield


def variables_mismatch(module: nn.Module, variables, observation_shape) -> list[str]:
    """How ``variables`` (a nested dict of arrays) fail to fit ``module`` on planes of
    ``observation_shape``: one line per missing or extra leaf and per leaf of another
    shape or dtype (``params.policy_fc.kernel: float32 (162, 81), expected float32 (450,
    225)``); empty when they fit. Nothing is initialised: the expected leaves come from
    ``jax.eval_shape``, which stops (one line then says so) once the network has made
    more arrays than ``variables`` holds."""
    shape = tuple(int(s) for s in observation_shape)
    held = len(jax.tree.leaves(variables))
    try:  # a header asking for far more layers than the file holds is not traced whole
        with _at_most_variables(held):
            expected = jax.eval_shape(functools.partial(_jit_init, module, shape=shape),
                                      jax.random.PRNGKey(0))
    except _TooManyVariables as error:
        return [f"the network makes more than the {held} arrays given (at least "
                f"{error.args[0]}; stopped building it there)"]

    def flat(tree):  # leaf path (a tuple: a key with a dot in it is not two keys) -> leaf
        leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
        return {tuple(str(getattr(k, "key", getattr(k, "idx", k))) for k in path):
                f"{np.dtype(leaf.dtype).name} {tuple(np.shape(leaf))}" for path, leaf in leaves}

    def named(path):  # params.stem.kernel; a key with a dot in it quoted
        return ".".join(repr(k) if "." in k else k for k in path)

    want, have = flat(expected), flat(variables)
    lines = [f"{named(p)}: missing" for p in want if p not in have]
    lines += [f"{named(p)}: not in this network" for p in have if p not in want]
    lines += [f"{named(p)}: {have[p]}, expected {want[p]}"
              for p in want if p in have and have[p] != want[p]]
    return lines


def split_params(variables: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """``(params, other collections)`` of a variables dict (e.g. ``batch_stats``)."""
    return variables["params"], {k: v for k, v in variables.items() if k != "params"}


def apply_train(module: nn.Module, params, collections: Mapping[str, Any], x: jax.Array):
    """``(outputs, updated collections)`` of a training-mode pass: BatchNorm statistics
    are updated where the network has them, and ``{}`` comes back where it has none."""
    variables = {"params": params, **collections}
    if not collections:
        return module.apply(variables, x, train=True), {}
    out, updated = module.apply(variables, x, train=True, mutable=list(collections))
    return out, dict(updated)


def param_count(params) -> int:
    """Number of scalars in ``params`` (given whole variables, counts ``params`` only)."""
    if isinstance(params, Mapping) and "params" in params:
        params = params["params"]
    return int(sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(params)))


def network_summary(module: nn.Module, observation_shape) -> str:
    """A short text summary: options, output shapes, parameters per top-level layer."""
    shape = tuple(int(s) for s in observation_shape)
    variables = jax.eval_shape(lambda k: init_network(module, k, shape), jax.random.key(0))
    out = jax.eval_shape(lambda v: module.apply(v, jnp.zeros((1, *shape)), train=False),
                         variables)
    names = ("policy_logits", "value") if isinstance(out, tuple) else ("q",)
    outs = out if isinstance(out, tuple) else (out,)
    shown = ", ".join(f"{nm} [B, {', '.join(map(str, o.shape[1:]))}] {o.dtype}".replace(
        "[B, ]", "[B]") for nm, o in zip(names, outs))
    options = ", ".join(f"{f.name}={getattr(module, f.name)!r}"
                        for f in dataclasses.fields(module) if f.name not in ("parent", "name"))
    kind = getattr(module, "kind", None) or next(
        (k for c, k, _ in NETWORKS.values() if c is type(module)), "?")
    lines = [
        f"{type(module).__name__} ({kind}) on {list(shape)} -> {shown}",
        f"options: {options}",
        f"params: {param_count(variables['params']):,}"
        + (f"; batch_stats: {param_count(variables['batch_stats']):,}"
           if "batch_stats" in variables else ""),
    ]
    width = max(len(k) for k in variables["params"])
    natural = lambda k: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", k)]  # noqa: E731
    for k in sorted(variables["params"], key=natural):
        sub = variables["params"][k]
        lines.append(f"  {k:<{width}}  {param_count(sub):>12,}")
    return "\n".join(lines)
