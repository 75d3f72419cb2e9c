"""Tests for gomoku_jax.io: orbax checkpoints and exported parameter files."""

from __future__ import annotations

import hashlib
import json
import re
import os
import pickle
import shutil
import struct

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct as flax_struct
from flax.core import FrozenDict, unfreeze
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from gomoku_jax.io import (
    EXPORT_FORMAT,
    EXPORT_MAGIC,
    EXPORT_VERSION,
    CheckpointError,
    Checkpointer,
    _reason,
    checkpoint_steps,
    metadata_text,
    read_exported,
    write_exported,
)

CONFIG = {"lr": 0.1, "net": {"depth": 3, "width": 8}, "seed": 0, "sizes": (9, 15)}


@flax_struct.dataclass
class TrainState:
    params: dict  # {"w": [3, 4] float32, "b": [4] float32}
    step: jax.Array  # [] int32
    key: jax.Array  # [2] uint32, a raw key
    typed_key: jax.Array  # [2] key<fry>
    extra: dict  # nested: mask [5] bool, buf [2, 3] int8 (numpy), count int, temp float


def _state(seed: int = 0) -> TrainState:
    key = jax.random.PRNGKey(seed)
    k1, k2 = jax.random.split(key)
    return TrainState(
        params={"w": jax.random.normal(k1, (3, 4)), "b": jnp.arange(4.0) + seed},
        step=jnp.int32(10 * seed + 7),
        key=k2,
        typed_key=jax.random.split(jax.random.key(seed + 100), 2),
        extra={
            "mask": jnp.array([True, False, True, True, seed % 2 == 0]),
            "buf": {"x": np.arange(6, dtype=np.int8).reshape(2, 3) * (seed + 1)},
            "count": 3 + seed,
            "temp": 0.5 + seed,
        },
    )


def _assert_state_equal(got: TrainState, want: TrainState):
    assert type(got) is TrainState
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        if jax.dtypes.issubdtype(getattr(w, "dtype", np.float32), jax.dtypes.prng_key):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(jax.random.key_data(g), jax.random.key_data(w))
        elif isinstance(w, (int, float)):
            # Into a Python scalar target: that type; into an abstract one: JAX's default.
            assert g == w
            if not isinstance(g, (int, float)):
                assert g.dtype == jax.dtypes.result_type(w)
        else:
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def _ckpt(tmp_path, config=CONFIG, **kw) -> Checkpointer:
    return Checkpointer(tmp_path / "run", config=config, **kw)


# ------------------------------------------------------------------------ checkpoints


def test_round_trip_keeps_values_dtypes_and_kinds(tmp_path):
    state = _state(1)
    ck = _ckpt(tmp_path)
    assert ck.latest_step() is None and ck.steps() == []
    ck.save(5, state)
    stored = json.loads((tmp_path / "run" / "config.json").read_text())
    assert stored == json.loads(json.dumps(CONFIG))

    # From an abstract target (what a resuming trainer builds) ...
    abstract = jax.eval_shape(lambda: _state(0))
    _assert_state_equal(ck.restore(abstract), state)
    # ... and from a concrete one, in a fresh Checkpointer; typed keys stay typed,
    # raw keys raw, numpy leaves numpy, Python scalars Python scalars.
    got = _ckpt(tmp_path).restore(_state(0), step=5)
    _assert_state_equal(got, state)
    assert type(got.extra["count"]) is int and type(got.extra["temp"]) is float
    assert isinstance(got.extra["buf"]["x"], np.ndarray)
    assert isinstance(got.params["w"], jax.Array)
    assert got.key.dtype == jnp.uint32


def test_a_relative_directory_is_taken_from_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    state = _state(2)
    ck = Checkpointer("runs/relative", config=CONFIG)
    ck.save(1, state)
    assert ck.directory.is_absolute()
    assert (tmp_path / "runs" / "relative" / "config.json").exists()
    _assert_state_equal(Checkpointer("runs/relative", config=CONFIG).restore(_state(0)), state)


def test_typed_key_target_accepts_raw_key_data(tmp_path):
    # A typed key is stored as its key data: the target decides what comes back.
    ck = _ckpt(tmp_path)
    key = jax.random.key(3)
    ck.save(0, {"k": key})
    raw = ck.restore({"k": jax.random.key_data(key)})["k"]
    assert raw.dtype == jnp.uint32
    np.testing.assert_array_equal(raw, jax.random.key_data(key))
    typed = ck.restore(jax.eval_shape(lambda: {"k": key}))["k"]
    np.testing.assert_array_equal(jax.random.key_data(typed), raw)
    assert jax.random.uniform(typed) == jax.random.uniform(key)


def test_latest_step_and_max_to_keep(tmp_path):
    ck = _ckpt(tmp_path, max_to_keep=2)
    for step in (1, 2, 3, 4, 5):
        ck.save(step, _state(step))
    assert ck.steps() == [4, 5]
    assert ck.latest_step() == 5
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["4", "5", "config.json"]
    # A second Checkpointer on the same directory sees the same steps.
    other = _ckpt(tmp_path, max_to_keep=2)
    assert other.latest_step() == 5
    target = jax.eval_shape(lambda: _state(0))
    _assert_state_equal(other.restore(target), _state(5))
    _assert_state_equal(other.restore(target, step=4), _state(4))
    with pytest.raises(CheckpointError, match=r"no checkpoint step 1 .*\[4, 5\]"):
        other.restore(target, step=1)
    with pytest.raises(CheckpointError, match="step 5 must be after the latest checkpoint step 5"):
        ck.save(5, _state(5))


def test_sharded_arrays_keep_the_target_sharding(tmp_path):
    mesh = Mesh(np.array(jax.devices()), ("d",))  # 4 fake CPU devices (conftest)
    rows = NamedSharding(mesh, PartitionSpec("d"))
    state = {"x": jax.device_put(jnp.arange(16.0).reshape(8, 2), rows), "y": jnp.ones(3)}
    ck = _ckpt(tmp_path)
    ck.save(0, state)
    target = {"x": jax.ShapeDtypeStruct((8, 2), jnp.float32, sharding=rows), "y": state["y"]}
    got = ck.restore(target)
    assert got["x"].sharding == rows
    np.testing.assert_array_equal(got["x"], state["x"])
    # An abstract leaf without a sharding lands on the first device.
    got = ck.restore(jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), state))
    assert got["x"].sharding == jax.sharding.SingleDeviceSharding(jax.devices()[0])
    np.testing.assert_array_equal(got["x"], state["x"])


def test_restore_from_empty_directory_is_refused(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint in"):
        _ckpt(tmp_path).restore(jax.eval_shape(lambda: _state(0)))


def test_different_config_is_refused_naming_keys_and_values(tmp_path):
    _ckpt(tmp_path).save(1, _state(0))
    # Tuples and lists are the same config once in JSON.
    same = dict(CONFIG, sizes=[9, 15])
    _ckpt(tmp_path, config=same).restore(jax.eval_shape(lambda: _state(0)))

    changed = {"lr": 0.1, "net": {"depth": 4, "width": 8}, "seed": 0, "sizes": [9, 15], "new": "x"}
    ck = _ckpt(tmp_path, config=changed)
    with pytest.raises(CheckpointError) as err:
        ck.restore(jax.eval_shape(lambda: _state(0)))
    msg = str(err.value)
    assert "config.json" in msg
    assert "net.depth: stored 3, given 4" in msg
    assert 'new: missing in the stored config, given "x"' in msg
    assert "lr" not in msg and "width" not in msg  # equal keys are not listed
    # Saving into a directory that holds another config's checkpoints is refused too.
    with pytest.raises(CheckpointError, match="net.depth: stored 3, given 4"):
        ck.save(2, _state(0))
    assert ck.steps() == [1]


def test_settings_that_may_change_are_restored_and_stored_with_the_next_save(tmp_path):
    _ckpt(tmp_path).save(1, _state(0))
    abstract = jax.eval_shape(lambda: _state(0))

    def may_change(path, stored, given):
        return True if path == "lr" else "fixed for the run" if path == "net.depth" else False

    def stored_lr():
        return json.loads((tmp_path / "run" / "config.json").read_text())["lr"]

    ck = _ckpt(tmp_path, config=dict(CONFIG, lr=0.2), may_change=may_change)
    _assert_state_equal(ck.restore(abstract), _state(0))
    assert ck.config_changes() == [("lr", 0.1, 0.2)]
    assert stored_lr() == 0.1  # a restore writes nothing
    ck.save(2, _state(1))
    assert stored_lr() == 0.2 and ck.config_changes() == []  # what later restores compare with
    with pytest.raises(CheckpointError, match=r"lr: stored 0.2, given 0.1"):
        _ckpt(tmp_path).restore(abstract)  # without may_change: refused, as any change
    # one that may not change, beside one that may: only it is named, with its note
    other = _ckpt(tmp_path, config=dict(CONFIG, lr=0.3, net={"depth": 4, "width": 8}),
                  may_change=may_change)
    for call in (lambda: other.restore(abstract), other.config_changes, other.store_config):
        with pytest.raises(CheckpointError) as err:
            call()
        assert str(err.value).splitlines()[1:] == [
            "  net.depth: stored 3, given 4 (fixed for the run)",
            "use the run's original config or another directory"]
    assert stored_lr() == 0.2
    # stored without a save
    _ckpt(tmp_path, config=dict(CONFIG, lr=0.3), may_change=may_change).store_config()
    assert stored_lr() == 0.3
    assert _ckpt(tmp_path, config=dict(CONFIG, lr=0.3)).steps() == [1, 2]


def test_target_with_other_shape_dtype_or_structure_is_refused(tmp_path):
    ck = _ckpt(tmp_path)
    ck.save(1, _state(0))
    good = jax.eval_shape(lambda: _state(0))

    wide = good.replace(params={**good.params, "w": jax.ShapeDtypeStruct((3, 5), jnp.float32)})
    with pytest.raises(CheckpointError, match=r"leaf 'params\.w' .*shape \(3, 4\) .*shape \(3, 5\)"):
        ck.restore(wide)

    half = good.replace(params={**good.params, "b": jax.ShapeDtypeStruct((4,), jnp.float16)})
    with pytest.raises(CheckpointError, match=r"leaf 'params\.b' .*dtype float32.*dtype float16"):
        ck.restore(half)

    renamed = good.replace(params={"w": good.params["w"], "bias": good.params["b"]})
    with pytest.raises(CheckpointError) as err:
        ck.restore(renamed)
    msg = str(err.value)
    assert "in the target but not the checkpoint: params.bias" in msg
    assert "in the checkpoint but not the target: params.b" in msg


def _files(directory) -> list[str]:
    return sorted(
        os.path.join(root, f) for root, _, files in os.walk(directory) for f in files
    )


def _truncate(path):
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


# Orbax's reader threads may log "Event loop is closed" after a failed read.
_QUIET = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@_QUIET
@pytest.mark.parametrize(
    "damage",
    ["truncate b-tree nodes", "truncate tree metadata", "truncate step metadata"],
)
def test_corrupt_checkpoint_raises_checkpoint_error(tmp_path, damage, capfd, caplog):
    ck = _ckpt(tmp_path)
    ck.save(1, _state(1))
    ck.save(2, _state(2))
    step_dir = tmp_path / "run" / "2"
    if damage == "truncate b-tree nodes":
        victims = _files(step_dir / "default" / "d")
    elif damage == "truncate tree metadata":
        victims = [step_dir / "default" / "_METADATA"]
    else:
        victims = [step_dir / "_CHECKPOINT_METADATA"]
    assert victims
    for victim in victims:
        _truncate(victim)
    target = jax.eval_shape(lambda: _state(0))
    with pytest.raises(CheckpointError) as err:
        _ckpt(tmp_path).restore(target)
    msg = str(err.value)
    assert str(step_dir) in msg and "corrupt" in msg
    assert "previous checkpoint (step 1" in msg and "another workdir" in msg
    assert "\n" not in msg and len(msg) < 1000  # not the storage library's pages
    # orbax's own log lines about the file it could not parse would bury that error
    assert "Failed to json parse" not in capfd.readouterr().err + caplog.text
    _assert_state_equal(_ckpt(tmp_path).restore(target, step=1), _state(1))


def test_a_damaged_index_gives_one_clean_error_and_no_tracebacks(tmp_path, capfd):
    state = {f"w{i}": jnp.full((32, 32), float(i)) for i in range(20)}
    ck = _ckpt(tmp_path)
    ck.save(1, state)
    ck.save(2, state)
    (tmp_path / "run" / "2" / "default" / "manifest.ocdbt").write_text("garbage\n")
    capfd.readouterr()
    with pytest.raises(CheckpointError, match=r"\(step 2\) is unreadable or corrupt: the index "
                                              r"of its data files .* is truncated or damaged"):
        _ckpt(tmp_path).restore(state)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Event loop is closed" not in err, err[:2000]
    back = _ckpt(tmp_path).restore(state, step=1)
    assert all(np.array_equal(back[k], state[k]) for k in state)


def test_a_full_disk_during_a_save_says_so_and_what_is_kept(tmp_path, monkeypatch):
    import errno

    ck = _ckpt(tmp_path)
    ck.save(1, _state(1))

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ck._manager, "save", full)
    with pytest.raises(CheckpointError, match=r"no space left on the disk of .* while saving "
                                              r"step 2 .*free some space and run the same "
                                              r"command again: the run resumes from step 1"):
        ck.save(2, _state(2))
    monkeypatch.setattr(ck._manager, "save", lambda *a, **k: (_ for _ in ()).throw(
        RuntimeError("something else")))
    with pytest.raises(RuntimeError, match="something else"):  # not every failure is space
        ck.save(2, _state(2))


def test_a_failed_save_is_one_error_not_orbax_s_thread_noise(tmp_path, monkeypatch, caplog):
    # A full disk made orbax log each save thread's failure with its traceback, and the
    # writes it abandoned report "Event loop is closed" as unraisable errors, a dozen
    # tracebacks around the one line that said what happened.
    import errno
    import sys

    from absl import logging as absl_logging

    class LateWrite:  # an abandoned write calling back into a closed event loop
        def __del__(self):
            raise RuntimeError("Event loop is closed")

    class OtherError:
        def __del__(self):
            raise ValueError("not orbax's")

    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))
    ck = _ckpt(tmp_path)
    ck.save(1, _state(1))
    assert sys.unraisablehook is not None and not reported
    saved_hook = sys.unraisablehook

    def full(*args, **kwargs):
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as error:
            absl_logging.exception("[process=%d][thread=%s][operation_id=%s] "
                                   "_SignalingThread.run() raised an exception: %s",
                                   0, "np_type_handler", 1, error)
            LateWrite()
            raise

    monkeypatch.setattr(ck._manager, "save", full)
    with caplog.at_level("INFO"), pytest.raises(CheckpointError, match="no space left"):
        ck.save(2, _state(2))
    LateWrite()  # after the error too
    OtherError()
    assert [type(e).__name__ for e in reported] == ["ValueError"]  # only the other one
    assert not [r for r in caplog.records if "_SignalingThread" in str(r.msg)]
    absl_logging.error("a save of something else: %s", "kept")  # other lines stay
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == ["a save of something else: kept"]
    assert saved_hook is not sys.unraisablehook  # the quiet hook stays after a failure


def test_a_save_that_succeeds_leaves_the_unraisable_hook_as_it_was(tmp_path, monkeypatch):
    import sys

    mine = lambda u: None  # noqa: E731
    monkeypatch.setattr(sys, "unraisablehook", mine)
    _ckpt(tmp_path).save(1, _state(1))
    assert sys.unraisablehook is mine


def test_a_file_write_that_fails_on_a_full_disk_names_the_file(tmp_path, monkeypatch):
    # A write or flush that fails (ENOSPC) raises an OSError naming no file, which the
    # command line printed as a bare "[Errno 28] No space left on device".
    import builtins
    import errno

    from gomoku_jax import io as gio

    def full(path, mode="r", *args, **kwargs):  # every file is /dev/full: writes fail
        return builtins.open("/dev/full" if "w" in mode or "a" in mode else path, mode,
                             *args, **kwargs)

    target = tmp_path / "metrics.csv"
    monkeypatch.setattr(gio, "open", full, raising=False)
    with pytest.raises(OSError) as err:
        gio.write_atomic(target, "iteration\n" * 100_000)
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(target)
    assert str(target) in str(err.value) and not target.exists()
    with pytest.raises(OSError) as err, gio.naming(target):
        raise OSError(errno.EIO, "Input/output error")
    assert err.value.filename == str(target)
    with pytest.raises(FileNotFoundError) as err, gio.naming(target):  # one that names its own
        open(tmp_path / "nowhere" / "x")
    assert err.value.filename == str(tmp_path / "nowhere" / "x")


@pytest.mark.parametrize("damage", ["truncate", "remove"])
def test_truncated_data_file_gives_one_clean_error(tmp_path, capfd, damage):
    # A data file cut short (e.g. a disk that filled up) used to fail inside orbax's
    # concurrent restore, whose other reads then printed "Event loop is closed"
    # tracebacks from TensorStore's threads, and the error quoted a TensorStore repr.
    state = {f"w{i}": jax.random.normal(jax.random.PRNGKey(i), (32, 32)) for i in range(40)}
    ck = _ckpt(tmp_path)
    ck.save(1, state)
    ck.save(2, state)
    step_dir = tmp_path / "run" / "2"
    data_files = _files(step_dir / "default" / "ocdbt.process_0" / "d")
    biggest = max(data_files, key=os.path.getsize)
    if damage == "truncate":
        with open(biggest, "r+b") as f:
            f.truncate(100)
    else:
        os.remove(biggest)
    capfd.readouterr()
    with pytest.raises(CheckpointError) as err:
        _ckpt(tmp_path).restore(state)
    msg = str(err.value)
    assert f"checkpoint {step_dir} (step 2) is unreadable or corrupt" in msg
    assert "a data file under default/ocdbt.process_*/d/ is truncated, damaged or missing" in msg
    assert "previous checkpoint (step 1" in msg and "another workdir" in msg
    assert "TensorStore" not in msg and "\n" not in msg and len(msg) < 600
    out, errors = capfd.readouterr()
    assert out == "" and errors == ""
    got = _ckpt(tmp_path).restore(state, step=1)
    assert all(np.array_equal(got[k], state[k]) for k in state)


def test_a_tensorstore_repr_is_left_out_of_the_message(tmp_path):
    ck = _ckpt(tmp_path)
    ck.save(1, _state(1))
    error = ValueError("Encountered error while reading array index: (slice(0, 4, 1),). See "
                       "full TensorStore details: <bound method spec of TensorStore({")
    err = ck._corrupt(1, f"the store ({_reason(error)})")
    # cut before the spec, the sentence and its parenthesis closed
    assert "reading array index: (slice(0, 4, 1),)). Delete that directory" in str(err)
    assert "TensorStore" not in str(err)


def test_silently_damaged_array_data_is_caught_by_the_hashes(tmp_path):
    # Random bits do not compress, so the array's bytes lie in the data file as they
    # are; flipping one changes a value without any decoding error.
    state = {"x": jax.random.bits(jax.random.PRNGKey(0), (4096,), jnp.uint32)}
    ck = _ckpt(tmp_path)
    ck.save(1, state)
    data_files = _files(tmp_path / "run" / "1" / "default" / "ocdbt.process_0" / "d")
    biggest = max(data_files, key=os.path.getsize)
    assert os.path.getsize(biggest) > 4 * 4096
    blob = bytearray(open(biggest, "rb").read())
    blob[len(blob) // 2] ^= 0x40
    open(biggest, "wb").write(blob)

    # Orbax alone returns the damaged values (so only the hash check can catch it).
    import orbax.checkpoint as ocp

    raw = ocp.StandardCheckpointer().restore(tmp_path / "run" / "1" / "default", state)
    assert not np.array_equal(np.asarray(raw["x"]), np.asarray(state["x"]))
    with pytest.raises(CheckpointError, match=r"leaf 'x' does not match its SHA-256"):
        ck.restore(state)


def test_interrupted_save_leaves_previous_checkpoints_usable(tmp_path):
    ck = _ckpt(tmp_path)
    ck.save(1, _state(1))
    ck.save(2, _state(2))
    run = tmp_path / "run"
    # A crash mid-save leaves orbax's temporary directory, never a step directory.
    partial = run / "3.orbax-checkpoint-tmp-1700000000000000"
    shutil.copytree(run / "2", partial)
    os.remove(partial / "default" / "_METADATA")

    target = jax.eval_shape(lambda: _state(0))
    reader = _ckpt(tmp_path)  # e.g. an export while the run trains: touches no save
    assert reader.steps() == [1, 2] and partial.exists()
    resumed = _ckpt(tmp_path, cleanup=True)  # the run's own writer
    assert not partial.exists()  # the unfinished save is gone before anything else
    assert sorted(p.name for p in run.iterdir()) == ["1", "2", "config.json"]
    assert resumed.steps() == [1, 2]
    _assert_state_equal(resumed.restore(target), _state(2))
    resumed.save(3, _state(3))
    assert resumed.steps() == [1, 2, 3]
    _assert_state_equal(resumed.restore(target), _state(3))


def test_an_old_step_whose_removal_was_cut_short_is_removed_by_the_runs_writer(tmp_path):
    """orbax prunes old steps by deleting their folders; cut short, a step is left
    without its metadata (or data folder) and orbax warns of it at every start. The
    run's writer removes such older steps; the newest is left for restore to judge."""
    ck = _ckpt(tmp_path)
    for step in (1, 2, 3):
        ck.save(step, _state(step))
    run = tmp_path / "run"
    os.remove(run / "1" / "_CHECKPOINT_METADATA")
    shutil.rmtree(run / "2" / "default")
    os.remove(run / "3" / "_CHECKPOINT_METADATA")  # the newest: kept, refused on restore
    reader = _ckpt(tmp_path)  # a reader removes nothing
    assert (run / "1").exists() and (run / "2").exists()
    del reader
    _ckpt(tmp_path, cleanup=True)
    assert sorted(p.name for p in run.iterdir()) == ["3", "config.json"]


@_QUIET
def test_missing_files_in_latest_step_are_reported_clearly(tmp_path):
    ck = _ckpt(tmp_path)
    ck.save(1, _state(1))
    ck.save(2, _state(2))
    step_dir = tmp_path / "run" / "2"
    os.remove(step_dir / "default" / "_METADATA")
    os.remove(step_dir / "default" / "manifest.ocdbt")
    target = jax.eval_shape(lambda: _state(0))
    with pytest.raises(CheckpointError, match=rf"{step_dir}.*previous checkpoint \(step 1"):
        ck.restore(target)
    _assert_state_equal(ck.restore(target, step=1), _state(1))


def test_a_step_without_its_data_folder_is_named_plainly(tmp_path, capfd, caplog):
    ck = _ckpt(tmp_path)
    ck.save(1, _state(1))
    ck.save(2, _state(2))
    shutil.rmtree(tmp_path / "run" / "2" / "default")  # e.g. a copy that left it out
    (tmp_path / "run" / "3").mkdir()  # or an empty step folder
    target = jax.eval_shape(lambda: _state(0))
    for step in (3, 2):
        with pytest.raises(CheckpointError, match=rf"{tmp_path / 'run' / str(step)} \(step "
                                                  rf"{step}\) is unreadable or corrupt: its data "
                                                  r"folder default/ is missing\. Delete"):
            _ckpt(tmp_path).restore(target, step=step)
    assert "handler" not in capfd.readouterr().err + caplog.text  # no orbax internals
    _assert_state_equal(_ckpt(tmp_path).restore(target, step=1), _state(1))


def test_missing_config_file_is_refused(tmp_path):
    ck = _ckpt(tmp_path)
    ck.save(1, _state(1))
    os.remove(tmp_path / "run" / "config.json")
    with pytest.raises(CheckpointError, match="config.json is missing"):
        ck.restore(jax.eval_shape(lambda: _state(0)))


def test_checkpointer_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="config must be JSON-serialisable"):
        Checkpointer(tmp_path / "a", config={"f": np.float32})
    nested = Checkpointer(tmp_path / "b", config={"net": FrozenDict(depth=2)})
    assert nested.config == {"net": {"depth": 2}}
    with pytest.raises(ValueError, match="config must be a mapping"):
        Checkpointer(tmp_path / "a", config=[1, 2])
    with pytest.raises(ValueError, match="max_to_keep must be an integer >= 1 or None, got 0"):
        Checkpointer(tmp_path / "a", config={}, max_to_keep=0)
    ck = Checkpointer(tmp_path / "a", config={})
    with pytest.raises(ValueError, match="step must be a non-negative integer, got -1"):
        ck.save(-1, {"x": np.zeros(2)})
    with pytest.raises(ValueError, match=r"state leaf 'x\.name' must be an array"):
        ck.save(0, {"x": {"name": "text"}})


# --------------------------------------------------------------------- exported files

METADATA = {
    "network": {"name": "resnet", "kwargs": {"blocks": 2, "channels": 16}},
    "game": {"size": 9, "k": 5, "rule": "freestyle"},
    "observation": "4-plane",
    "search": {"simulations": 64, "c_puct": 1.25},
}


def _variables():
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    return FrozenDict(
        params={
            "conv": {"kernel": jax.random.normal(k1, (3, 3, 4, 8)), "bias": jnp.zeros(8)},
            "head": {"kernel": jax.random.normal(k2, (8, 81)).astype(jnp.bfloat16)},
        },
        batch_stats={"mean": np.arange(8, dtype=np.float32), "count": np.int32(5)},
        layers=[jnp.ones(2, jnp.int32), jnp.array([True, False])],
    )


def test_exported_round_trip_and_byte_layout(tmp_path):
    path = tmp_path / "agent.gjx"
    variables = _variables()
    write_exported(path, METADATA, variables)
    metadata, got = read_exported(path)
    assert metadata == METADATA
    assert isinstance(got, dict) and type(got["params"]) is dict
    want = {
        "params": unfreeze(variables["params"]),
        "batch_stats": unfreeze(variables["batch_stats"]),
        "layers": {"0": variables["layers"][0], "1": variables["layers"][1]},
    }
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert isinstance(g, np.ndarray)
        assert g.dtype == np.asarray(w).dtype and g.shape == np.shape(w)
        np.testing.assert_array_equal(g, np.asarray(w))
    assert got["params"]["head"]["kernel"].dtype == jnp.bfloat16
    got["params"]["conv"]["bias"][0] = 1.0  # writable copies

    # The documented layout: magic, u32 LE header length, JSON header, payload.
    data = path.read_bytes()
    assert data[:8] == EXPORT_MAGIC
    (n,) = struct.unpack("<I", data[8:12])
    header = json.loads(data[12 : 12 + n].decode("utf-8"))
    payload = data[12 + n :]
    assert header["format"] == EXPORT_FORMAT == "gomoku-jax-params"
    assert header["version"] == EXPORT_VERSION == 2
    assert header["metadata"] == METADATA
    assert header["metadata_sha256"] == hashlib.sha256(json.dumps(
        METADATA, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert header["payload_size"] == len(payload)
    assert header["payload_sha256"] == hashlib.sha256(payload).hexdigest()
    assert not [p for p in tmp_path.iterdir() if p.name != "agent.gjx"]  # no temp files


def _spliced(path, body: bytes | None = None, payload: bytes | None = None):
    """Rewrites an exported file with another header text and/or payload (the magic kept,
    the header's length made to match)."""
    data = path.read_bytes()
    (n,) = struct.unpack("<I", data[8:12])
    body = data[12 : 12 + n] if body is None else body
    payload = data[12 + n :] if payload is None else payload
    path.write_bytes(data[:8] + struct.pack("<I", len(body)) + body + payload)


def _with_header(path, payload: bytes | None = None, **changes):
    """Rewrites an exported file's header fields (and its payload, when given); new
    metadata gets its hash, as a writer would give it (unless the changes give one)."""
    data = path.read_bytes()
    (n,) = struct.unpack("<I", data[8:12])
    header = json.loads(data[12 : 12 + n])
    if "metadata" in changes and "metadata_sha256" not in changes:
        changes["metadata_sha256"] = hashlib.sha256(
            metadata_text(changes["metadata"]).encode()).hexdigest()
    header.update(changes)
    _spliced(path, json.dumps(header).encode(), payload)


def test_exported_wrong_magic_or_format(tmp_path):
    path = tmp_path / "p.bin"
    path.write_bytes(b"PK\x03\x04 this is a zip, not params")
    with pytest.raises(CheckpointError, match=rf"{path}: not a gomoku-jax params file"):
        read_exported(path)
    path.write_bytes(b"")
    with pytest.raises(CheckpointError, match="not a gomoku-jax params file"):
        read_exported(path)
    write_exported(path, METADATA, _variables())
    _with_header(path, format="something-else")
    with pytest.raises(CheckpointError, match="not a gomoku-jax params file.*something-else"):
        read_exported(path)


def test_exported_newer_version_is_refused(tmp_path):
    path = tmp_path / "p.bin"
    write_exported(path, METADATA, _variables())
    _with_header(path, version=3)
    with pytest.raises(
        CheckpointError,
        match=r"written by format version 3, this gomoku-jax reads versions 1 and 2"
    ):
        read_exported(path)


def test_exported_metadata_changed_after_writing_is_caught(tmp_path):
    """The header's settings are hashed as the payload is: one changed value (a bit
    flipped in a number, a key renamed) is refused; a version 1 file, which has no
    such hash, reads as it is."""
    path = tmp_path / "p.gjx"
    write_exported(path, METADATA, _variables())
    meta, variables = read_exported(path)
    assert meta == METADATA
    (n,) = struct.unpack("<I", path.read_bytes()[8:12])
    text = path.read_bytes()[12:12 + n]
    for old, new in ((b'"size": 9', b'"size": 8'), (b'"size"', b'"sizf"')):
        assert old in text
        _spliced(path, body=text.replace(old, new, 1))
        with pytest.raises(CheckpointError, match=rf"{path}: corrupt or modified: the "
                                                  r"metadata .* does not match its SHA-256"):
            read_exported(path)
    _spliced(path, body=text)
    _with_header(path, metadata_sha256=None)
    with pytest.raises(CheckpointError, match="metadata_sha256 must be 64 hex digits"):
        read_exported(path)
    write_exported(path, METADATA, _variables())
    header = json.loads(text)
    del header["metadata_sha256"]
    header["version"] = 1
    header["metadata"]["game"]["size"] = 8  # version 1: not checked
    _spliced(path, body=json.dumps(header).encode())
    meta, _ = read_exported(path)
    assert meta["game"]["size"] == 8


def test_exported_flipped_payload_byte_is_caught(tmp_path):
    path = tmp_path / "p.bin"
    write_exported(path, METADATA, _variables())
    data = bytearray(path.read_bytes())
    data[-100] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=rf"{path}: .*does not match its SHA-256"):
        read_exported(path)


def test_exported_corrupt_header_is_caught(tmp_path):
    path = tmp_path / "p.bin"
    write_exported(path, METADATA, _variables())
    data = bytearray(path.read_bytes())
    data[12] = ord("[")  # the JSON object's opening brace
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupt header"):
        read_exported(path)


def _with_payload(path, state):
    """Rewrite an exported file around another (msgpack) payload, its header's size and
    hash made to match: a file whose bytes are intact but whose content is wrong."""
    import hashlib

    from flax import serialization

    payload = serialization.msgpack_serialize(state)
    _with_header(path, payload, payload_size=len(payload),
                 payload_sha256=hashlib.sha256(payload).hexdigest())


@pytest.mark.parametrize("leaf, where, kind", [("hello", "bad", "a str"), (3, "bad", "a int"),
                                               ({"deeper": [1.0]}, "bad.deeper.0", "a float")])
def test_exported_leaf_that_is_not_numbers_is_refused(tmp_path, leaf, where, kind):
    path = tmp_path / "p.gjx"
    write_exported(path, METADATA, _variables())
    _with_payload(path, {"params": {"w": np.zeros(2, np.float32), "bad": leaf}})
    with pytest.raises(CheckpointError, match=rf"{path}: corrupt payload: params.{where} is "
                                              rf"{re.escape(kind)}, not an array of numbers"):
        read_exported(path)


@pytest.mark.parametrize("leaf, kind", [("x", "is a str, not an array of numbers"),
                                        ({1: 2}, "holds the key 1, not a string"),
                                        (np.array([np.nan]), "holds NaN or infinite values")])
def test_a_deeply_nested_payload_is_named_by_a_short_path(tmp_path, leaf, kind):
    """A corrupt file nesting 900 maps is named by the start and end of the path, not
    900 names."""
    path = tmp_path / "p.gjx"
    write_exported(path, METADATA, _variables())
    tree = leaf
    for depth in reversed(range(900)):
        tree = {f"k{depth}": tree}
    _with_payload(path, tree)
    with pytest.raises(CheckpointError) as error:
        read_exported(path)
    message = str(error.value)
    assert kind in message and ": k0.k1.k2." in message and "k898.k899 " in message, message
    assert "k450" not in message, message
    assert len(message) < len(str(path)) + 250, message


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_network_with_nan_or_inf_is_neither_written_nor_read(tmp_path, bad):
    path = tmp_path / "p.gjx"
    broken = {"params": {"w": np.array([0.5, bad], np.float32), "n": np.arange(3)}}
    with pytest.raises(ValueError, match=r"variables: params.w holds NaN or infinite values; "
                                         "a broken network is not exported"):
        write_exported(path, METADATA, broken)
    assert not path.exists()
    write_exported(path, METADATA, _variables())
    _with_payload(path, broken)  # written by something else
    with pytest.raises(CheckpointError, match=rf"{path}: params.w holds NaN or infinite "
                                              r"values: the network is broken"):
        read_exported(path)
    _with_payload(path, {"params": {"w": np.array([0.5, 1e30], np.float32),
                                    "n": np.arange(3)}})
    assert read_exported(path)[1]["params"]["w"][1] == np.float32(1e30)  # large is fine


def test_exported_header_nested_too_deep_is_corrupt_not_a_crash(tmp_path):
    path = tmp_path / "p.gjx"
    write_exported(path, METADATA, _variables())
    _spliced(path, body=("[" * 100_000 + "]" * 100_000).encode())
    with pytest.raises(CheckpointError, match="corrupt header"):
        read_exported(path)


def test_exported_header_with_a_key_twice_is_corrupt(tmp_path):
    path = tmp_path / "p.gjx"
    write_exported(path, METADATA, _variables())
    (n,) = struct.unpack("<I", path.read_bytes()[8:12])
    text = path.read_bytes()[12:12 + n]
    _spliced(path, body=text[:-1] + b', "version": ' + str(EXPORT_VERSION).encode() + b"}")
    with pytest.raises(CheckpointError, match=r"corrupt header \(not UTF-8 JSON: the key "
                                              r"'version' appears twice"):
        read_exported(path)


def test_exported_truncated_anywhere_is_caught(tmp_path):
    path = tmp_path / "p.bin"
    write_exported(path, METADATA, _variables())
    data = path.read_bytes()
    (n,) = struct.unpack("<I", data[8:12])
    for cut in (5, 10, 12 + n // 2, 12 + n, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(CheckpointError, match=rf"{path}: truncated"):
            read_exported(path)
    path.write_bytes(data + b"\x00")
    with pytest.raises(CheckpointError, match="unexpected bytes after"):
        read_exported(path)


UNPICKLED = []  # each test sets its own list (see below)


def _note_unpickled():
    UNPICKLED.append(True)


class _Trap:
    def __reduce__(self):
        return (_note_unpickled, ())


def test_a_pickle_is_refused_without_unpickling(tmp_path, monkeypatch):
    noted = []  # what `_note_unpickled` appends to, for this test alone
    monkeypatch.setitem(globals(), "UNPICKLED", noted)
    path = tmp_path / "params.pkl"
    blob = pickle.dumps({"params": _Trap()})
    path.write_bytes(blob)
    with pytest.raises(CheckpointError, match="not a gomoku-jax params file"):
        read_exported(path)
    assert noted == []
    pickle.loads(blob)  # the trap works: unpickling would have been noticed
    assert noted == [True]


def test_write_exported_bad_arguments(tmp_path):
    path = tmp_path / "p.bin"
    with pytest.raises(ValueError, match="metadata must be JSON-serialisable"):
        write_exported(path, {"x": float("nan")}, {"w": np.zeros(2)})
    with pytest.raises(ValueError, match="metadata must be a mapping"):
        write_exported(path, "resnet", {"w": np.zeros(2)})
    with pytest.raises(ValueError, match=r"variables leaf 'rng' is a typed PRNG key"):
        write_exported(path, {}, {"rng": jax.random.key(0)})
    assert not path.exists()


@pytest.mark.parametrize("version", [0, 3, 99, "1", "2", None])
def test_exported_file_of_another_version_is_refused_saying_the_version(tmp_path, version):
    from gomoku_jax import exported

    path = tmp_path / "agent.gjx"
    _tiny_agent_file(path)
    _with_header(path, version=version)
    message = (rf"written by format version {version!r}, this gomoku-jax reads versions 1 "
               "and 2")
    with pytest.raises(CheckpointError, match=message):
        read_exported(path)
    with pytest.raises(CheckpointError, match=rf"{path}: {message}"):
        exported.load_agent(path)  # the path users take refuses it the same way


@pytest.mark.parametrize("kind", [[], {"a": 1}, None, "", "Search", "q"])
def test_an_exported_file_naming_an_unknown_agent_kind_is_refused_saying_so(tmp_path, kind):
    """A header's ``agent`` other than "search" or "q-greedy" (a list, an object, another
    word) is refused by name, not met with a TypeError deep inside."""
    from gomoku_jax import exported
    from gomoku_jax.play import PlayApp

    path = tmp_path / "agent.gjx"
    _tiny_agent_file(path)
    meta, _ = read_exported(path)
    _with_header(path, metadata={**meta, "agent": kind})
    message = rf"{path}: unknown agent kind {re.escape(repr(kind))} in its header"
    with pytest.raises(CheckpointError, match=message):
        exported.load_agent(path)
    with pytest.raises(ValueError, match=message):  # the browser's path to the file
        PlayApp(str(path))


def _tiny_agent_file(path):
    """A real exported search agent: 5x5 four-in-a-row, a tiny SimpleNet, 4 simulations."""
    from gomoku_jax import networks
    from gomoku_jax.game import Gomoku
    from gomoku_jax.search import SearchConfig

    env = Gomoku(5, 4)
    module = networks.make_network("simplenet", board_size=5, channels=(4, 4), value_hidden=8)
    variables = networks.init_network(module, jax.random.key(0), env.observation_shape)
    meta = {"agent": "search",
            "game": {"size": 5, "k": 4, "rule": "freestyle", "observation": "stones-colour"},
            "network": {"name": "simplenet", "options": {"channels": [4, 4], "value_hidden": 8}},
            "search": SearchConfig("puct", 4).to_dict()}
    write_exported(path, meta, jax.device_get(variables))


_FRESH_SESSION = """
import sys
import jax
import gomoku_jax
from gomoku_jax import exported

loaded = exported.load(sys.argv[1])
state = loaded.env.play(loaded.env.init(), 2, 2)  # black in the centre; white to move
action = loaded.agent.act(state, jax.random.key(0))
project = sorted(m for m in sys.modules if m.split(".")[0] in ("algorithms", "experiments"))
print(loaded.env.id, action, bool(state.legal_action_mask[action]), project)
"""


def test_a_fresh_python_with_only_gomoku_jax_loads_a_file_and_plays(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "agent.gjx"
    _tiny_agent_file(path)
    done = subprocess.run([sys.executable, "-c", _FRESH_SESSION, str(path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr
    game, action, legal, project = done.stdout.strip().split(" ", 3)
    assert game == "gomoku-5x5-k4-freestyle"
    assert 0 <= int(action) < 25 and int(action) != 12 and legal == "True"
    assert project == "[]"  # no training or experiment code was imported


@pytest.mark.parametrize("bad", [True, 1.0, np.float32(1.0), -1, "1", np.True_])
def test_restore_refuses_a_step_that_is_not_a_non_negative_int(tmp_path, bad):
    ck = _ckpt(tmp_path)
    ck.save(1, _state(1))
    files = sorted(p.relative_to(tmp_path) for p in (tmp_path / "run").rglob("*"))
    with pytest.raises(ValueError, match=re.escape(f"step must be a non-negative integer, got {bad!r}")):
        ck.restore(jax.eval_shape(lambda: _state(0)), step=bad)
    # The healthy checkpoint is left as it was and still restores, by a NumPy step too.
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "run").rglob("*")) == files
    _assert_state_equal(ck.restore(_state(0), step=np.int64(1)), _state(1))


def test_a_leaf_without_its_hash_in_the_metadata_is_refused(tmp_path):
    """Every save records each leaf's SHA-256; a metadata file whose list was cut short
    (edited, half-rewritten) is refused rather than taken as nothing to check."""
    state = {"x": jnp.arange(8.0), "y": jnp.ones((3,), jnp.int32)}
    ck = _ckpt(tmp_path)
    ck.save(1, state)
    path = tmp_path / "run" / "1" / "_CHECKPOINT_METADATA"
    meta = json.loads(path.read_text())
    hashes = meta["custom_metadata"]
    for key in list(hashes):  # the project's entry: {"sha256": {leaf: hash}}
        assert set(hashes[key]["sha256"]) == {"x", "y"}
        del hashes[key]["sha256"]["y"]
    path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"leaf 'y' has no SHA-256 in its step metadata"):
        ck.restore(state)


def test_checkpoint_steps_are_the_numbered_folders_ascending(tmp_path):
    assert checkpoint_steps(tmp_path / "none") == []
    for name in ("10", "2", "3.orbax-checkpoint-tmp-1", "notes"):
        (tmp_path / name).mkdir()
    (tmp_path / "7").write_text("a file, not a step")
    assert checkpoint_steps(tmp_path) == [2, 10]
    assert checkpoint_steps(str(tmp_path)) == [2, 10]


@pytest.mark.parametrize("key", [1, b"w2", 2.5])
def test_exported_map_key_that_is_not_a_string_is_refused(tmp_path, key):
    # msgpack maps may have keys of any type; a mix cannot even be sorted into a pytree
    import hashlib

    import msgpack

    path = tmp_path / "p.gjx"
    write_exported(path, METADATA, _variables())
    payload = msgpack.packb({"params": {"w": 1.0, key: {"b": 2.0}}})
    _with_header(path, payload, payload_size=len(payload),
                 payload_sha256=hashlib.sha256(payload).hexdigest())
    with pytest.raises(CheckpointError, match=rf"{path}: corrupt payload: params holds the key "
                                              rf"{re.escape(repr(key))}, not a string"):
        read_exported(path)
