"""Tests for gomoku_jax.networks: shapes, seed parameter counts, options, registry, configs."""

import json
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gomoku_jax import networks as nets

N = 5
C = 4
B = 3

# Tiny options per registered name (the architecture, not the width, is under test).
TINY = {
    "cnn": dict(channels=(4, 6, 8)),
    "net": dict(channels=(4, 6, 8)),
    "simplenet": dict(channels=(4, 6), value_hidden=8),
    "resnet": dict(blocks=2, filters=6, value_hidden=8),
    "resnet-q": dict(blocks=2, filters=6, hidden=8),
    "dueling": dict(channels=(4, 6), value_hidden=8),
    "duelnet": dict(channels=(4, 6), value_hidden=8),
}


def _planes(key, n=N, c=C, b=B, scale=1.0):
    return scale * jax.random.normal(key, (b, n, n, c), jnp.float32)


def _fake_variables(module, shape, seed=0):
    """Variables with init's exact tree, shapes and dtypes, filled from numpy.

    Compiling many random initialisers is slow on a loaded CPU; the architecture tests
    only need well-scaled values (``test_init_network`` covers the real init).
    """
    shapes = jax.eval_shape(lambda k: nets.init_network(module, k, shape), jax.random.key(0))
    return _fill(shapes, seed)


def _fill(shapes, seed=0):
    rng = np.random.default_rng(seed)

    def fill(path, leaf):
        name = jax.tree_util.keystr(path[-1:])
        if "kernel" in name:
            fan_in = int(np.prod(leaf.shape[:-1]))
            value = rng.normal(size=leaf.shape) / np.sqrt(fan_in)
        elif "scale" in name or "var" in name:
            value = 1.0 + 0.2 * np.abs(rng.normal(size=leaf.shape))
        else:
            value = 0.1 * rng.normal(size=leaf.shape)
        return jnp.asarray(value, leaf.dtype)

    return jax.tree_util.tree_map_with_path(fill, shapes)


def _build(name, n=N, c=C, **kwargs):
    module = nets.make_network(name, board_size=n, **{**TINY.get(name, {}), **kwargs})
    return module, _fake_variables(module, (n, n, c))


def test_tiny_table_covers_registry():
    assert set(TINY) == set(nets.NETWORKS)
    for cls, kind, desc in nets.NETWORKS.values():
        assert kind in ("policy-value", "q") and cls.kind == kind and desc


@pytest.mark.parametrize("name", sorted(nets.NETWORKS))
def test_every_network_shapes_dtypes_and_value_range(name):
    module, variables = _build(name)
    assert set(variables) <= {"params", "batch_stats"}
    # Large inputs push the value pre-activation far from 0: tanh must still bound it.
    x = _planes(jax.random.key(1), scale=50.0)
    out = jax.jit(module.apply, static_argnames="train")(variables, x, train=False)
    if nets.NETWORKS[name][1] == "q":
        assert out.shape == (B, N * N) and out.dtype == jnp.float32
        assert np.all(np.isfinite(out))
    else:
        logits, value = out
        assert logits.shape == (B, N * N) and logits.dtype == jnp.float32
        assert value.shape == (B,) and value.dtype == jnp.float32
        assert np.all(np.abs(np.asarray(value)) <= 1.0)
        assert np.all(np.isfinite(logits))
    # The train flag is accepted by every network (with or without BatchNorm).
    out_train, updates = jax.jit(module.apply, static_argnames=("train", "mutable"))(
        variables, x, train=True, mutable=("batch_stats",))
    assert jax.tree.map(jnp.shape, out_train) == jax.tree.map(jnp.shape, out)
    assert ("batch_stats" in variables) == bool(updates)


def test_init_network_real_init_is_deterministic_float32():
    module = nets.make_network("resnet", board_size=N, blocks=1, filters=4, value_hidden=8)
    a = nets.init_network(module, jax.random.key(0), (N, N, C))
    b = nets.init_network(module, jax.random.key(0), (N, N, C))
    c = nets.init_network(module, jax.random.key(1), (N, N, C))
    assert set(a) == {"params", "batch_stats"}
    assert jax.tree.map(lambda x: (x.shape, x.dtype), a) == jax.tree.map(
        lambda x: (x.shape, x.dtype), _fake_variables(module, (N, N, C)))
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(a))
    assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
    kernel = "block0", "conv1", "kernel"
    p = lambda v: v["params"][kernel[0]][kernel[1]][kernel[2]]  # noqa: E731
    assert not np.array_equal(p(a), p(c))
    # Fresh BatchNorm statistics: mean 0, variance 1.
    assert all(np.all(x == 0) for x in jax.tree.leaves(a["batch_stats"])[0::2])
    assert all(np.all(x == 1) for x in jax.tree.leaves(a["batch_stats"])[1::2])
    logits, value = module.apply(a, jnp.ones((2, N, N, C)))
    assert logits.shape == (2, N * N) and value.shape == (2,)


def test_resnet_has_seed000_parameter_count():
    module = nets.make_network("resnet", board_size=9, blocks=10, filters=128)
    variables = jax.eval_shape(lambda k: nets.init_network(module, k, (9, 9, 3)),
                               jax.random.key(0))
    assert nets.param_count(variables["params"]) == 2_992_794
    assert nets.param_count(variables) == 2_992_794  # whole variables: params only
    # Running mean and variance of every BN: 2 * (128 * 21 + 2 + 1).
    assert nets.param_count(variables["batch_stats"]) == 2 * (128 * 21 + 3)
    assert "2,992,794" in nets.network_summary(module, (9, 9, 3))
    # Seed 000's default widths are the defaults.
    assert nets.make_network("resnet", board_size=9) == module


def test_small_networks_parameter_counts_by_hand():
    # Seed 003 Table I on 9x9 with 4 planes.
    cnn = nets.make_network("cnn", board_size=9)
    shapes = jax.eval_shape(lambda k: nets.init_network(cnn, k, (9, 9, 4)), jax.random.key(0))
    expected = ((4 * 9 * 32 + 32) + (32 * 9 * 64 + 64) + (64 * 9 * 128 + 128)
                + (128 * 4 + 4) + (4 * 81 * 81 + 81)
                + (128 * 2 + 2) + (2 * 81 * 64 + 64) + (64 + 1))
    assert nets.param_count(shapes["params"]) == expected == 131_132
    # Seed 002's SimpleNet on 7x7 with 4 planes.
    simple = nets.make_network("simplenet", board_size=7)
    shapes = jax.eval_shape(lambda k: nets.init_network(simple, k, (7, 7, 4)),
                            jax.random.key(0))
    flat = 32 * 49
    expected = ((4 * 9 * 16 + 16) + (16 * 9 * 32 + 32) + (flat * 49 + 49)
                + (flat * 32 + 32) + (32 + 1))
    assert nets.param_count(shapes["params"]) == expected
    # "net" is the same architecture as "cnn".
    assert nets.NETWORKS["net"][0] is nets.NETWORKS["cnn"][0]


def test_bfloat16_compute_close_to_float32_with_float32_params():
    opts = dict(global_pooling=True, gpool_every=1)
    m32, variables = _build("resnet", **opts)
    m16 = nets.make_network("resnet", board_size=N, **TINY["resnet"], **opts, dtype="bfloat16")
    assert m16.dtype == "bfloat16"
    v16 = jax.eval_shape(lambda k: nets.init_network(m16, k, (N, N, C)), jax.random.key(0))
    assert jax.tree.map(lambda a: (a.shape, a.dtype), v16) == jax.tree.map(
        lambda a: (a.shape, a.dtype), variables)
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(v16))
    x = _planes(jax.random.key(2))
    l32, v32 = jax.jit(m32.apply)(variables, x)
    l16, vb16 = jax.jit(m16.apply)(variables, x)  # same float32 params, bfloat16 compute
    assert l16.dtype == jnp.float32 and vb16.dtype == jnp.float32
    np.testing.assert_allclose(l16, l32, atol=0.1 + 0.05 * float(jnp.max(jnp.abs(l32))))
    np.testing.assert_allclose(vb16, v32, atol=0.05)
    assert not np.array_equal(np.asarray(l16), np.asarray(l32))  # really computed in bf16
    # jnp dtypes are accepted and normalised to their names.
    q = nets.make_network("resnet-q", board_size=N, dtype=jnp.bfloat16, **TINY["resnet-q"])
    assert q.dtype == "bfloat16"


def test_train_updates_batch_stats_and_eval_does_not():
    module, variables = _build("resnet", garb=True, blocks=3, global_pooling=True)
    x = _planes(jax.random.key(3), scale=3.0)
    _, upd = module.apply(variables, x, train=True, mutable=["batch_stats"])
    before, after = jax.tree.leaves(variables["batch_stats"]), jax.tree.leaves(upd)
    assert len(before) == len(after)
    assert all(not np.allclose(a, b) for a, b in zip(before, after))
    _, same = module.apply(variables, x, train=False, mutable=["batch_stats"])
    assert all(np.array_equal(a, b) for a, b in
               zip(before, jax.tree.leaves(same["batch_stats"])))
    # Eval uses running statistics: one position's output does not depend on the batch.
    logits, value = module.apply(variables, x, train=False)
    l0, v0 = module.apply(variables, x[:1], train=False)
    np.testing.assert_allclose(l0[0], logits[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(v0, value[:1], rtol=1e-5, atol=1e-5)
    # Train mode normalises with batch statistics: it does.
    lt, _ = module.apply(variables, x, train=True, mutable=["batch_stats"])[0]
    lt0, _ = module.apply(variables, x[:1], train=True, mutable=["batch_stats"])[0]
    assert not np.allclose(lt0[0], lt[0], atol=1e-3)


@pytest.mark.parametrize("name,extra", [("dueling", {}), ("resnet-q", {"dueling": True})])
def test_dueling_q_is_value_plus_centred_advantage(name, extra):
    module, variables = _build(name, **extra)
    x = _planes(jax.random.key(4))
    q, inter = module.apply(variables, x, mutable=["intermediates"])
    (v,) = inter["intermediates"]["value"]
    (a,) = inter["intermediates"]["advantage"]
    assert v.shape == (B,) and a.shape == (B, N * N)
    np.testing.assert_allclose(jnp.mean(q - v[:, None], axis=-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(q, v[:, None] + a - a.mean(-1, keepdims=True), atol=1e-5)
    assert float(jnp.max(jnp.abs(a.mean(-1)))) > 1e-4  # the centring does something


def test_resnet_q_plain_head_records_nothing():
    module, variables = _build("resnet-q")
    assert "value_fc1" not in variables["params"] and "fc2" in variables["params"]
    _, inter = module.apply(variables, _planes(jax.random.key(5)), mutable=["intermediates"])
    assert not inter


def test_resnet_q_without_batch_norm_reads_the_same_in_train_and_eval():
    module, variables = _build("resnet-q", batch_norm=False)
    assert "batch_stats" not in variables
    params = variables["params"]
    assert not any("bn" in name for name in params) and "bias" in params["stem_conv"]
    assert "bias" in params["block0"]["conv1"]
    x = _planes(jax.random.key(7))
    q_eval = module.apply(variables, x, train=False)
    q_train = module.apply(variables, x, train=True)
    np.testing.assert_allclose(q_train, q_eval, atol=1e-6)
    # One position alone gives what it gives inside the batch (no batch statistics).
    np.testing.assert_allclose(module.apply(variables, x[:1], train=True)[0], q_eval[0],
                               rtol=1e-5, atol=1e-5)
    bad = "option 'batch_norm' of network 'resnet-q' must be bool, got 'no'"
    with pytest.raises(ValueError, match=bad):
        nets.make_network("resnet-q", board_size=N, batch_norm="no")
    with pytest.raises(ValueError, match="batch_norm must be a bool, got 1"):
        nets.ResNetQ(board_size=N, batch_norm=1)  # direct construction too


@pytest.mark.parametrize("dueling", [False, True])
def test_resnet_q_conv_head_is_the_same_function_at_every_cell(dueling):
    n, f, hidden = 11, 6, 8
    module, variables = _build("resnet-q", n=n, blocks=1, filters=f, hidden=hidden,
                               batch_norm=False, head="conv", dueling=dueling)
    params = variables["params"]
    assert "fc1" not in params and "fc2" not in params
    # stem + one block, then the head: 1x1 convs (hidden, 1) and a dense layer (1).
    trunk = (C * 9 * f + f) + 2 * (f * 9 * f + f)
    assert nets.param_count(params) == trunk + (f * hidden + hidden) + (hidden + 1) + (f + 1)
    # An input the same everywhere: cells whose 7x7 receptive field (stem and one block)
    # stays on the board all read the same features, so get the same Q; a dense head
    # gives each cell weights of its own.
    x = jnp.ones((1, n, n, C))
    q = np.asarray(module.apply(variables, x)).reshape(n, n)
    inner = q[3:n - 3, 3:n - 3]
    np.testing.assert_allclose(inner, inner[0, 0], rtol=1e-6)
    assert not np.allclose(q[0, 0], inner[0, 0])  # the edge is seen
    dense, dense_vars = _build("resnet-q", n=n, blocks=1, filters=f, hidden=hidden,
                               batch_norm=False)
    q_dense = np.asarray(dense.apply(dense_vars, x)).reshape(n, n)[3:n - 3, 3:n - 3]
    assert not np.allclose(q_dense, q_dense[0, 0])
    _, inter = module.apply(variables, x, mutable=["intermediates"])
    assert bool(inter) == dueling  # V and A are recorded for the dueling form only
    with pytest.raises(ValueError, match="head must be 'dense' or 'conv', got 'both'"):
        nets.make_network("resnet-q", board_size=N, head="both")


def test_duelnet_is_dueling_as_policy_value():
    q_net, variables = _build("dueling")
    pv_net = nets.make_network("duelnet", board_size=N, **TINY["duelnet"])
    x = _planes(jax.random.key(6))
    q, inter = q_net.apply(variables, x, mutable=["intermediates"])
    logits, value = pv_net.apply(variables, x)  # same parameter tree
    np.testing.assert_allclose(logits, q, atol=1e-6)
    np.testing.assert_allclose(value, jnp.tanh(inter["intermediates"]["value"][0]), atol=1e-6)


def test_block_layout_of_garb_and_global_pooling():
    def kinds(**kw):
        return nets.make_network("resnet", board_size=N, filters=6, **kw).block_kinds

    assert kinds(blocks=5, garb=True) == ("plain", "garb", "plain", "garb", "plain")
    assert kinds(blocks=1, garb=True) == ("plain",)
    # KataGo-like placement: every third block (b4c32: the third), else the last one.
    assert kinds(blocks=4, global_pooling=True) == ("plain", "plain", "gpool", "plain")
    assert kinds(blocks=2, global_pooling=True) == ("plain", "gpool")
    assert kinds(blocks=1, global_pooling=True) == ("gpool",)
    assert kinds(blocks=10, global_pooling=True).count("gpool") == 3
    assert kinds(blocks=3, global_pooling=True, gpool_every=1) == ("gpool",) * 3
    assert kinds(blocks=5, garb=True, global_pooling=True) == (
        "plain", "garb", "plain", "garb", "gpool")
    module, variables = _build("resnet", blocks=3, garb=True, global_pooling=True)
    assert set(variables["params"]) >= {"block0", "block1_garb", "block2_gpool"}
    # GARB of C = 6: X gets 4 channels, G gets 2.
    garb = variables["params"]["block1_garb"]
    assert garb["x_conv"]["kernel"].shape == (3, 3, 4, 4)
    assert garb["g_conv"]["kernel"].shape == (3, 3, 2, 2)
    assert garb["g_fc"]["kernel"].shape == (4, 4)  # [mean, max] of 2 channels -> 4
    assert garb["out_conv"]["kernel"].shape == (3, 3, 4, 6)
    gp = variables["params"]["block2_gpool"]
    assert gp["conv1"]["kernel"].shape == (3, 3, 6, 6 + 1)  # X + G (6 // 4 channels)
    assert gp["gpool_fc"]["kernel"].shape == (3 * 1, 6)  # [mean, scaled mean, max]


def test_unused_options_are_named_and_change_nothing():
    """A ResNet's global-pooling settings without global pooling are named by
    `unused_options` (a config warns of them) and leave the network as it is: the same
    blocks and the same variables. With global pooling they are used and not named."""
    def resnet(**kw):
        return nets.make_network("resnet", board_size=N, **{**TINY["resnet"], **kw})

    gpool = dict(gpool_channels=5, gpool_every=1)
    plain, unused, used = resnet(), resnet(**gpool), resnet(global_pooling=True, **gpool)
    assert nets.unused_options(plain) == []
    assert nets.unused_options(resnet(gpool_every=3)) == []  # its default
    assert nets.unused_options(unused) == [
        f"{name} ({value}) does nothing without global_pooling: the network has no "
        "global-pooling block" for name, value in gpool.items()]
    assert nets.unused_options(used) == []
    assert unused.block_kinds == plain.block_kinds != used.block_kinds
    key = jax.random.key(0)
    jax.tree.map(np.testing.assert_array_equal,  # raises on different structures too
                 nets.init_network(unused, key, (N, N, C)),
                 nets.init_network(plain, key, (N, N, C)))
    assert nets.unused_options(_build("simplenet")[0]) == []  # a class without the method


def test_garb_with_one_block_is_named_as_unused():
    """``garb`` makes the odd-indexed blocks GARBs: with one block there is none, so the
    option is named (a config warns of it) and the network is the plain one."""
    def resnet(**kw):
        return nets.make_network("resnet", board_size=N, **{**TINY["resnet"], **kw})

    one, plain = resnet(blocks=1, garb=True), resnet(blocks=1)
    assert one.block_kinds == plain.block_kinds == ("plain",)
    assert nets.unused_options(one) == [
        "garb (True) does nothing with blocks=1: the GARBs are the odd-indexed blocks, "
        "and the one block is plain"]
    assert nets.unused_options(resnet(blocks=3, garb=True)) == []
    assert len(nets.unused_options(resnet(blocks=1, garb=True, gpool_every=2))) == 2


@pytest.mark.parametrize("block", ["plain", "gpool", "garb"])
def test_global_blocks_see_the_whole_board(block):
    """A plain block (two 3x3 convs) only sees 2 cells away; the global ones see all."""
    n, f = 7, 6
    if block == "plain":
        mod = nets._ResidualBlock(f, jnp.float32)
    elif block == "gpool":
        mod = nets._GlobalPoolingBlock(f, 2, n, jnp.float32)
    else:
        mod = nets._GlobalAttentionBlock(f, jnp.float32)
    x = jax.nn.relu(jax.random.normal(jax.random.key(7), (1, n, n, f)))
    variables = _fill(jax.eval_shape(lambda k: mod.init(k, x, False), jax.random.key(8)))
    y = mod.apply(variables, x, False)
    y2 = mod.apply(variables, x.at[0, 0, 0].add(3.0), False)
    far = np.abs(np.asarray(y2 - y)[0, 4:, 4:])  # cells >= 4 rows/cols from the change
    if block == "plain":
        assert np.all(far == 0)
    else:
        assert far.max() > 1e-6


def test_first_padding_keeps_output_shapes_and_grows_fc_heads():
    module, variables = _build("resnet", first_padding=3, global_pooling=True)
    logits, value = module.apply(variables, _planes(jax.random.key(9)))
    assert logits.shape == (B, N * N) and value.shape == (B,)
    m = N + 2 * 3 - 2  # trunk map side
    assert variables["params"]["policy_fc"]["kernel"].shape == (2 * m * m, N * N)
    assert variables["params"]["value_fc1"]["kernel"].shape == (1 * m * m, 8)
    with pytest.raises(ValueError, match="first_padding"):
        nets.make_network("resnet", board_size=N, first_padding=-1)


@pytest.mark.parametrize("name,extra", [
    ("resnet", dict(blocks=3, garb=True, global_pooling=True, first_padding=3)),
    ("resnet-q", dict(dueling=True)),
    ("simplenet", {}),
])
def test_jit_apply_equals_eager(name, extra):
    module, variables = _build(name, **extra)
    x = _planes(jax.random.key(10))
    eager = module.apply(variables, x, train=False)
    jitted = jax.jit(lambda v, x: module.apply(v, x, train=False))(variables, x)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5),
                 eager, jitted)
    # Vmapped over positions (one position per call) agrees with the batch in eval.
    one = jax.vmap(lambda xi: module.apply(variables, xi[None], train=False))(x)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a[:, 0], b, rtol=1e-5, atol=1e-5),
                 one, eager)


def test_garb_with_even_blocks_raises():
    with pytest.raises(ValueError, match="blocks must be odd"):
        nets.make_network("resnet", board_size=N, blocks=4, garb=True)
    with pytest.raises(ValueError, match="blocks must be odd"):
        nets.ResNet(board_size=N, blocks=2, garb=True)  # direct construction too


def test_unknown_names_and_bad_options_raise_naming_them():
    with pytest.raises(ValueError, match=r"unknown network 'resnet50'.*resnet-q"):
        nets.make_network("resnet50", board_size=N)
    with pytest.raises(ValueError, match=r"unknown network 'RESNET' \(did you mean 'resnet'\?\)"):
        nets.make_network("RESNET", board_size=N)
    with pytest.raises(ValueError, match=r"unknown option 'blokcs' for network 'resnet' \(did you "
                                         r"mean 'blocks'\?\); valid options: .*filters"):
        nets.make_network("resnet", board_size=N, blokcs=3)
    with pytest.raises(ValueError, match=r"'blocks'.*int.*'3'"):
        nets.make_network("resnet", board_size=N, blocks="3")
    with pytest.raises(ValueError, match=r"'garb'.*bool"):
        nets.make_network("resnet", board_size=N, blocks=3, garb=1)
    with pytest.raises(ValueError, match=r"'dtype'.*int8"):
        nets.make_network("cnn", board_size=N, dtype="int8")
    with pytest.raises(ValueError, match=r"'channels'.*tuple of int"):
        nets.make_network("cnn", board_size=N, channels=(4, "8"))
    with pytest.raises(ValueError, match="filters must be a positive int"):
        nets.make_network("resnet", board_size=N, filters=0)
    with pytest.raises(ValueError, match="board_size"):
        nets.make_network("cnn", board_size=0)
    with pytest.raises(ValueError, match="name_or_config"):
        nets.make_network(3, board_size=N)
    module = nets.make_network("cnn", board_size=N)
    with pytest.raises(ValueError, match="observation_shape"):
        nets.init_network(module, jax.random.key(0), (N + 1, N + 1, C))
    with pytest.raises(ValueError, match=r"x must have shape \[B, 5, 5, C\]"):
        module.apply(_fake_variables(module, (N, N, C)), jnp.zeros((1, 6, 6, C)))


def test_network_config_json_round_trip_and_build():
    cfg = nets.NetworkConfig("resnet", {"blocks": 3, "filters": 6, "garb": True,
                                        "dtype": jnp.bfloat16, "gpool_channels": None})
    assert cfg.kwargs["dtype"] == "bfloat16"
    back = nets.NetworkConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert back == cfg and hash(back) == hash(cfg)
    cnn = nets.NetworkConfig("cnn", {"channels": [4, 6]})  # lists stored as tuples
    assert cnn.kwargs["channels"] == (4, 6)
    assert nets.NetworkConfig.from_dict(json.loads(json.dumps(cnn.to_dict()))) == cnn
    assert jax.jit(lambda x, c: x, static_argnums=1)(1.0, cfg) == 1.0  # hashable static
    m = nets.make_network(cfg, board_size=N)
    assert m == nets.make_network("resnet", board_size=N, blocks=3, filters=6, garb=True,
                                  dtype="bfloat16")
    assert nets.make_network(cfg, board_size=N, filters=9).filters == 9  # kwargs override
    with pytest.raises(ValueError, match="unknown option 'width'"):
        nets.NetworkConfig("resnet", {"width": 3})
    with pytest.raises(ValueError, match="unknown network"):
        nets.NetworkConfig.from_dict({"name": "nope"})
    with pytest.raises(ValueError, match="'name'"):
        nets.NetworkConfig.from_dict({"kwargs": {}})


# --------------------------------------------------------------------------- registration


class _TinyMLP(nn.Module):
    """A network of one's own: one hidden layer, policy and value heads."""

    kind = "policy-value"

    board_size: int
    hidden: int = 8
    dtype: Any = "float32"

    @nn.compact
    def __call__(self, x, train: bool = False):
        del train
        n = self.board_size
        h = nn.relu(nn.Dense(self.hidden, dtype=self.dtype)(x.reshape(x.shape[0], -1)))
        logits = nn.Dense(n * n, dtype=self.dtype)(h).astype(jnp.float32)
        return logits, jnp.tanh(nn.Dense(1, dtype=self.dtype)(h)[:, 0].astype(jnp.float32))


class _NoBoardSize(nn.Module):
    hidden: int = 8

    def __call__(self, x, train=False):
        return x


class _NoDefault(nn.Module):
    board_size: int
    width: int  # an option without a default: a config could not build it

    def __call__(self, x, train=False):
        return x


# A module whose option's type hint names no type: its hints cannot be read.
_UnresolvedHint = type("_UnresolvedHint", (nn.Module,), {
    "__module__": __name__, "__annotations__": {"board_size": int, "hidden": "NoSuchType"},
    "hidden": 8, "__call__": lambda self, x, train=False: x})


@pytest.fixture
def registry(registries):
    return registries[0]


def test_register_network_checks_every_argument(registry):
    nets.register_network("tiny-mlp", _TinyMLP, "policy-value", "one hidden layer")
    assert registry["tiny-mlp"] == (_TinyMLP, "policy-value", "one hidden layer")
    assert "register_network" in nets.__all__
    refusals = [
        (("", _TinyMLP, "policy-value", "d"), "non-empty string without spaces"),
        (("tiny mlp", _TinyMLP, "policy-value", "d"), "non-empty string without spaces"),
        ((3, _TinyMLP, "policy-value", "d"), "non-empty string"),
        (("tiny-mlp", _KindlessMLP, "policy-value", "d"), "'tiny-mlp' is already registered"),
        (("resnet", _TinyMLP, "policy-value", "d"), "'resnet' is already registered"),
        (("x", int, "policy-value", "d"), "flax.linen.Module subclass"),
        (("x", _TinyMLP(board_size=5), "policy-value", "d"), "flax.linen.Module subclass"),
        (("x", _NoBoardSize, "policy-value", "d"), "_NoBoardSize .* has no board_size field"),
        (("x", _UnresolvedHint, "policy-value", "d"), "type hints .* cannot be resolved"),
        (("x", _NoDefault, "policy-value", "d"),
         "the options of network 'x' need defaults, but _NoDefault's width has none"),
        (("x", _TinyMLP, "value", "d"), "must be one of policy-value, q, got 'value'"),
        (("x", _TinyMLP, "q", "d"), "_TinyMLP.kind is 'policy-value' but .* as 'q'"),
        (("x", _TinyMLP, "policy-value", " "), "description .* non-empty string"),
    ]
    for args, message in refusals:
        with pytest.raises(ValueError, match=message):
            nets.register_network(*args)
    assert set(registry) == set(TINY) | {"tiny-mlp"}  # nothing refused was added
    # replace=True takes a name over, built-in or not
    nets.register_network("tiny-mlp", _TinyMLP, "policy-value", "wider", replace=True)
    assert registry["tiny-mlp"][2] == "wider"
    nets.register_network("cnn", _TinyMLP, "policy-value", "mine", replace=True)
    assert type(nets.make_network("cnn", board_size=N)) is _TinyMLP


def _made_again(source: str, name: str):
    """The top-level definition ``name`` of ``source`` run again, as a notebook cell or
    a reloaded plugin runs it: another object of the same module and qualified name."""
    namespace = {"__name__": "a_plugin"}
    exec(compile(source, "a_plugin.py", "exec"), namespace)
    return namespace[name]


_AGAIN = """
import flax.linen as nn

class Again(nn.Module):
    board_size: int

    @nn.compact
    def __call__(self, x, train=False):
        h = nn.Dense(self.board_size ** 2 + 1)(x.reshape(x.shape[0], -1))
        return h[:, :-1], h[:, -1]
"""


def test_the_same_definition_registers_again_without_replace(registry):
    nets.register_network("tiny-mlp", _TinyMLP, "policy-value", "one hidden layer")
    nets.register_network("tiny-mlp", _TinyMLP, "policy-value", "described anew")
    assert registry["tiny-mlp"] == (_TinyMLP, "policy-value", "described anew")
    first, second = _made_again(_AGAIN, "Again"), _made_again(_AGAIN, "Again")
    assert first is not second and first.__qualname__ == second.__qualname__ == "Again"
    nets.register_network("again", first, "policy-value", "d")
    nets.register_network("again", second, "policy-value", "d")
    assert registry["again"][0] is second
    with pytest.raises(ValueError, match="'again' is already registered"):  # another kind
        nets.register_network("again", second, "q", "d")
    nets.register_network("resnet", nets.ResNet, "policy-value", "the built-in itself")
    with pytest.raises(ValueError, match="'resnet' is already registered"):
        nets.register_network("resnet", second, "policy-value", "d")

    def made_inside():  # two classes a function makes are not one definition
        class Inner(_KindlessMLP):
            pass
        return Inner

    nets.register_network("inner", made_inside(), "policy-value", "d")
    with pytest.raises(ValueError, match="'inner' is already registered"):
        nets.register_network("inner", made_inside(), "policy-value", "d")


def test_a_registered_network_builds_exports_and_loads(registry, tmp_path):
    from algorithms import alphazero
    from gomoku_jax import exported
    from gomoku_jax import io as gio
    from gomoku_jax import search as search_lib
    from gomoku_jax.game import Gomoku

    nets.register_network("tiny-mlp", _TinyMLP, "policy-value", "one hidden layer")
    module = nets.make_network("tiny-mlp", board_size=N, hidden=6)
    assert module == nets.make_network(nets.NetworkConfig("tiny-mlp", {"hidden": 6}),
                                       board_size=N)
    with pytest.raises(ValueError, match=r"'hidden' of network 'tiny-mlp' must be int"):
        nets.make_network("tiny-mlp", board_size=N, hidden="6")
    with pytest.raises(ValueError, match=r"unknown option 'width'.*dtype, hidden"):
        nets.make_network("tiny-mlp", board_size=N, width=6)
    alphazero.NetworkSettings("tiny-mlp", {"hidden": 6}).check(N, "policy-value", "AlphaZero")
    with pytest.raises(ValueError, match="'tiny-mlp' is a policy-value network"):
        alphazero.NetworkSettings("tiny-mlp").check(N, "q", "DDQN")
    assert "_TinyMLP (policy-value)" in nets.network_summary(module, (N, N, 3))

    env = Gomoku(N, 4)
    variables = nets.init_network(module, jax.random.key(0), env.observation_shape)
    logits, value = module.apply(variables, _planes(jax.random.key(1), c=3))
    assert logits.shape == (B, N * N) and value.shape == (B,)

    class Learner:  # what export_agent asks of a learner
        def export_metadata(self):
            search = search_lib.SearchConfig("gumbel", 4, max_num_considered_actions=4)
            return {"agent": "search", "game": {"size": N, "k": 4, "rule": "freestyle",
                                                "observation": "stones-colour"},
                    "network": {"name": "tiny-mlp", "options": {"hidden": 6}},
                    "search": search.to_dict()}

    path = tmp_path / "tiny.gjx"
    exported.export_agent(path, Learner(), variables)
    meta, loaded_env, loaded, loaded_variables = exported.load_network(path)
    assert meta["network"]["name"] == "tiny-mlp" and loaded == module
    assert loaded_env.config == env.config
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(variables),
                                                    jax.tree.leaves(loaded_variables)))
    agent = exported.load_agent(path)
    action = agent.act(env.init(), jax.random.key(0))
    assert 0 <= action < N * N

    del registry["tiny-mlp"]  # another process, where nothing registered it
    with pytest.raises(gio.CheckpointError,
                       match=r"unknown network 'tiny-mlp'.*register_network.*--plugin"):
        exported.load_agent(path)


class _DropoutNet(_TinyMLP):
    """Asks for a 'dropout' random stream in training, which no learner gives."""

    @nn.compact
    def __call__(self, x, train: bool = False):
        h = nn.Dense(self.hidden)(x.reshape(x.shape[0], -1))
        h = nn.Dropout(0.5, deterministic=not train)(h)
        return nn.Dense(self.board_size ** 2)(h), jnp.tanh(nn.Dense(1)(h))[:, 0]


class _NoTrainFlag(_TinyMLP):
    @nn.compact
    def __call__(self, x):
        return super().__call__(x)


class _ColumnValue(_TinyMLP):
    @nn.compact
    def __call__(self, x, train: bool = False):
        logits, value = super().__call__(x, train)
        return logits, value[:, None]


class _Broken(_TinyMLP):
    def __call__(self, x, train: bool = False):
        return self.no_such_layer(x)  # the line the error must point at


class _IntegerOutputs(_TinyMLP):
    @nn.compact
    def __call__(self, x, train: bool = False):
        logits, value = super().__call__(x, train)
        return logits.astype(jnp.int32), value.astype(jnp.int32)


class _WideQ(nn.Module):
    board_size: int

    @nn.compact
    def __call__(self, x, train: bool = False):
        return nn.Dense(self.board_size ** 2 + 1)(x.reshape(x.shape[0], -1))


@pytest.mark.parametrize("cls, kind, message", [
    (_DropoutNet, "policy-value",
     r"network 'bad' \(_DropoutNet\) fails a training pass \(train=True\) on planes "
     r"\[B, 5, 5, 3\]: InvalidRngError: Dropout_0 needs PRNG.*\(Dropout\) are not supported"),
    (_NoTrainFlag, "policy-value",
     r"fails to initialise .*TypeError: .*unexpected keyword argument 'train'"),
    (_ColumnValue, "policy-value",
     r"must return \(policy_logits \[B, N\*N\], value \[B\]\): \(\(2, 25\), \(2,\)\) .* "
     r"got \(\(2, 25\), \(2, 1\)\)"),
    (_Broken, "policy-value",
     r"AttributeError: .*no_such_layer.* \(at test_networks.py:\d+\)"),
    (_WideQ, "q", r"'bad' \(_WideQ\) is a q network and must return q \[B, N\*N\]: "
                  r"\(2, 25\) .* got \(2, 26\)"),
    (_IntegerOutputs, "policy-value",  # trained with no gradient: it never learnt
     r"'bad' \(_IntegerOutputs\) must return floats .* so it would never learn; got int32, "
     r"int32"),
])
def test_a_network_that_cannot_train_is_named_before_any_step(registry, cls, kind, message):
    nets.register_network("bad", cls, kind, "cannot train")
    module = nets.make_network("bad", board_size=5)
    with pytest.raises(ValueError, match=message):
        nets.init_network(module, jax.random.key(0), (5, 5, 3))


def test_a_network_that_can_train_passes_the_check(registry):
    nets.register_network("tiny-mlp", _TinyMLP, "policy-value", "one hidden layer")
    for module in (nets.make_network("tiny-mlp", board_size=5),
                   nets.make_network("resnet-q", board_size=5, blocks=1, filters=4, hidden=8,
                                     dueling=True)):
        assert nets.check_calls(module, (5, 5, 3)) is None


class _KindlessMLP(nn.Module):
    """A policy-value network that does not say its kind (no ``kind`` attribute)."""

    board_size: int

    @nn.compact
    def __call__(self, x, train: bool = False):
        del train
        h = nn.Dense(self.board_size ** 2 + 1)(x.reshape(x.shape[0], -1))
        return h[:, :-1], jnp.tanh(h[:, -1])


def test_a_class_registered_as_both_kinds_is_checked_as_the_kind_asked(registry):
    """One class under two names of different kinds: the kind the learner asks for is
    checked (a policy-value class used as a q network is refused before any step)."""
    nets.register_network("tiny-pv", _KindlessMLP, "policy-value", "one layer")
    nets.register_network("tiny-as-q", _KindlessMLP, "q", "the same class, by mistake")
    module = nets.make_network("tiny-as-q", board_size=5)
    assert nets.check_calls(module, (5, 5, 3), "policy-value") is None
    with pytest.raises(ValueError, match=r"network _KindlessMLP is a q network and must return "
                                         r"q \[B, N\*N\]: \(2, 25\) .* got \(\(2, 25\), \(2,\)\)"):
        nets.init_network(module, jax.random.key(0), (5, 5, 3), "q")
    with pytest.raises(ValueError, match=r"kind must be one of 'policy-value', 'q', got 'v'"):
        nets.check_calls(module, (5, 5, 3), "v")


def test_a_dqn_learner_refuses_a_policy_value_class_registered_as_q_too(registry):
    from algorithms import dqn

    nets.register_network("tiny-pv", _KindlessMLP, "policy-value", "one layer")
    nets.register_network("tiny-as-q", _KindlessMLP, "q", "the same class, by mistake")
    from gomoku_jax import config as cfglib

    cfg, _ = cfglib.load_file(dqn.DQNConfig, "experiments/configs/dqn_9x9_cpu.json",
                              variants=["smoke"],
                              overrides={"network": {"name": "tiny-as-q", "options": {}}})
    with pytest.raises(ValueError, match=r"is a q network and must return q"):
        dqn.make_learner(cfg).init()


class _PlainTupleOption(_TinyMLP):
    widths: tuple = (8,)  # a bare tuple hint: its items are not typed


def test_a_bare_tuple_option_takes_a_json_list(registry):
    nets.register_network("plain-tuple", _PlainTupleOption, "policy-value", "bare tuple")
    config = nets.NetworkConfig.from_dict({"name": "plain-tuple", "kwargs": {"widths": [16, 4]}})
    assert config.kwargs["widths"] == (16, 4)
    assert nets.make_network(config, board_size=5).widths == (16, 4)
    assert nets.NetworkConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match=r"'widths' of network 'plain-tuple' must be a tuple "
                                         r"\(a list in JSON\), got 16"):
        nets.make_network("plain-tuple", board_size=5, widths=16)
    with pytest.raises(ValueError, match=r"must be a tuple"):
        nets.make_network("plain-tuple", board_size=5, widths=[{"a": 1}])


def test_params_whose_keys_hold_dots_do_not_fit_the_network():
    """``{"stem.kernel": ...}`` is one key, not ``stem`` then ``kernel``: such params are
    named as not fitting (they would fail at every move), with the dotted key quoted."""
    module = nets.make_network("simplenet", board_size=5, channels=(4, 4), value_hidden=8)
    variables = nets.init_network(module, jax.random.key(0), (5, 5, 3))
    assert nets.variables_mismatch(module, variables, (5, 5, 3)) == []
    params = variables["params"]
    layer = sorted(params)[0]
    flat = {**{k: v for k, v in params.items() if k != layer},
            **{f"{layer}.{leaf}": value for leaf, value in params[layer].items()}}
    lines = nets.variables_mismatch(module, {**variables, "params": flat}, (5, 5, 3))
    for leaf in params[layer]:
        assert f"params.{layer}.{leaf}: missing" in lines
        assert f"params.'{layer}.{leaf}': not in this network" in lines
