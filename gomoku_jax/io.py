"""Checkpoints and exported parameter files.

Two formats, both data only (nothing here pickles or evaluates code):

* :class:`Checkpointer`: a run's training state, saved with orbax-checkpoint under one
  directory, one sub-directory per step, beside the run's ``config.json``.
* :func:`write_exported` / :func:`read_exported`: one self-describing file holding a
  network's variables and the metadata needed to use them (network name and kwargs,
  game settings, observation encoding, search settings...).

Checkpoints
-----------
Layout of ``directory``::

    config.json          the run's config (JSON), written by the first save (and
                         by a save or `Checkpointer.store_config` after settings that
                         may change did: see ``may_change``)
    <step>/              one finished checkpoint per step (orbax); the newest
                         ``max_to_keep`` are kept
    <step>.orbax-checkpoint-tmp-<t>/
                         a save in progress, or one a crash interrupted: ignored, and
                         removed when the run's writer opens the directory again
                         (``cleanup=True``)

A save is written into the temporary directory and renamed when complete, so a crash
mid-save leaves the earlier checkpoints intact. Each save also records a SHA-256 of
every leaf (in the step's orbax metadata); :meth:`Checkpointer.restore` checks the
config, the tree structure, every leaf's shape and dtype, that every stored value reads
back (a truncated or missing data file), and these hashes, and raises
:class:`CheckpointError` saying what is wrong instead of returning damaged values.

Leaves may be ``jax.Array`` (any sharding), NumPy arrays and scalars, Python
``bool``/``int``/``float`` (stored as 0-d arrays of JAX's default dtype, as
``jax.eval_shape`` describes them, and restored as the target leaf's kind),
and PRNG keys, raw ``uint32`` (``jax.random.PRNGKey``) or typed (``jax.random.key``):
a typed key is stored as its ``jax.random.key_data`` and rebuilt with the key
implementation of the restore target's leaf, so a target leaf's kind (typed or raw)
decides what comes back. Targets are usually ``jax.eval_shape(init, ...)``: a
``jax.ShapeDtypeStruct`` without a sharding is restored onto the first local device.

Exported parameter files
------------------------
Byte layout (all integers little-endian)::

    offset   size  content
    0        8     magic: b"\\x89GMKJAX\\n" (EXPORT_MAGIC)
    8        4     H: length of the header in bytes, unsigned 32-bit
    12       H     header: a UTF-8 JSON object
                     "format":         "gomoku-jax-params"  (EXPORT_FORMAT)
                     "version":        2                    (EXPORT_VERSION)
                     "payload_size":   P, the payload's length in bytes
                     "payload_sha256": SHA-256 of the payload, 64 lowercase hex digits
                     "metadata":       the writer's JSON object (network, game,
                                       observation encoding, search settings...)
                     "metadata_sha256": SHA-256 of the metadata as `metadata_text`
                                       writes it (sorted keys, ASCII, no spaces)
    12 + H   P     payload: the variables as a nested map of string keys to arrays,
                   encoded with flax.serialization.msgpack_serialize (msgpack; an
                   array is ext type 1 holding the msgpack array
                   [shape, dtype name, C-order bytes])

The file ends right after the payload. A reader checks the magic, the format, the
version, the sizes and the hashes before decoding the payload. It reads versions 1 and 2:
version 1 is version 2 without ``metadata_sha256`` (its metadata unchecked).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import math
import os
import struct
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import jax
import numpy as np
from flax import serialization

from gomoku_jax import config as config_lib

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_MAGIC",
    "EXPORT_VERSION",
    "CheckpointError",
    "Checkpointer",
    "brief",
    "checkpoint_steps",
    "config_differences",
    "metadata_text",
    "naming",
    "read_exported",
    "read_json_object",
    "write_atomic",
    "write_exported",
]

EXPORT_FORMAT = "gomoku-jax-params"
"""The ``format`` field of an exported parameter file's header."""

EXPORT_VERSION = 2
"""The exported-file format version this module writes (it reads `_READS_VERSIONS`)."""

_READS_VERSIONS = (1, 2)  # 1: no metadata_sha256


def metadata_text(metadata: Mapping) -> str:
    """The text of an exported file's metadata that ``metadata_sha256`` hashes: JSON with
    sorted keys, ASCII only, no spaces (the same for the metadata read back)."""
    return json.dumps(metadata, sort_keys=True, allow_nan=False, separators=(",", ":"))

EXPORT_MAGIC = b"\x89GMKJAX\n"
"""The 8 bytes an exported parameter file starts with."""

_LENGTH = struct.Struct("<I")  # header length, unsigned 32-bit little-endian
_HEADER_START = len(EXPORT_MAGIC) + _LENGTH.size  # 12
_CONFIG_FILE = "config.json"
_METADATA_KEY = "gomoku_jax"  # our entry in an orbax step's custom metadata
_ITEM = "default"  # the sub-directory of a step holding the state (orbax's item name)
_TS_DETAILS = " See full TensorStore details"  # where tensorstore errors quote a whole spec
_READS_AT_ONCE = 64  # values read together by the data check (bounds its memory)
# In the name of a save not finished (``<step>.orbax-checkpoint-tmp-<t>``): in progress, or
# cut short by a crash or Ctrl-C.
UNFINISHED_SAVE = ".orbax-checkpoint-tmp"
# Between a file's name and the writer's process id in `write_atomic`'s temporary file
# (``<file>.tmp-<pid>``, which `is_write_leftover` knows).
_WRITING = ".tmp-"


def _reason(error) -> str:
    """A storage error in one line, without the whole storage spec that TensorStore
    errors quote."""
    return brief(str(error).split(_TS_DETAILS)[0].rstrip(" ."))


@contextlib.contextmanager
def naming(path):
    """An OSError raised inside it that names no file (a write or flush that failed,
    e.g. ``[Errno 28] No space left on device``) is raised again naming ``path``, so the
    command line's one-line error says which file (or folder) could not be written."""
    try:
        yield
    except OSError as error:
        if error.filename is None and error.errno:
            raise OSError(error.errno, error.strerror or str(error),
                          os.fspath(path)) from error
        raise


def write_atomic(path, data: bytes | str) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` through a temporary file renamed over
    it: a reader (another process of a run, a crash half-way) sees the old file or the
    new one, never a part. An OSError names ``path`` (see `naming`)."""
    path = os.fspath(path)
    tmp = f"{path}{_WRITING}{os.getpid()}"
    try:
        with naming(path), open(tmp, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def is_write_leftover(name: str, of) -> bool:
    """Whether the file name ``name`` is what `write_atomic` leaves of one of the files
    named in ``of`` when its process is killed mid-write (``<file>.tmp-<pid>``): no
    result of a run, only a part of a file that was being replaced."""
    file, dot, rest = name.rpartition(_WRITING)
    return bool(dot) and file in of and rest.isascii() and rest.isdigit()


def _can_write_in(folder: Path) -> str | None:
    """None if a file can be made in ``folder``, else why not. Permissions alone do not
    say (root passes ``os.access`` everywhere, and a read-only mount or a kernel folder
    such as /proc refuses files whatever they say), so an empty probe file is made and
    removed."""
    try:
        fd, name = tempfile.mkstemp(prefix=".gomoku-jax-write-check-", dir=folder)
    except OSError as error:
        return error.strerror or str(error)
    os.close(fd)
    os.unlink(name)
    return None


def check_folder(path, option: str, advice: str = "", *, for_file: bool = False) -> None:
    """ValueError, before any work, unless ``path`` is a folder or one can be made there
    (no file in the way, a file can be made in the nearest existing folder); with
    ``for_file``, the same for the folder that is to hold the file ``path``. ``option``
    names where the path came from, ``advice`` what to give instead when ``path`` is a
    file. An empty path is refused (it would mean the current folder)."""
    if os.fspath(path) == "":
        raise ValueError(f"{option} is empty; " + (advice or "give a path"))
    path = Path(path)
    for part in (path.parents if for_file else (path, *path.parents)):
        if part.is_dir():
            why = _can_write_in(part)
            if why is not None:
                raise ValueError(f"{option} {path}: {part} is not writable ({why})")
            return
        if part.exists() or part.is_symlink():
            if part == path:
                raise ValueError(f"{option} {path} exists and is not a folder; {advice}")
            raise ValueError(f"{option} {path}: {part} exists and is not a folder, so no "
                             "folder can be made inside it")


def check_new_files(paths, force: bool, option: str = "--out") -> None:
    """Refuse, before any work, to replace files that exist unless ``force`` (a command's
    ``--force``): an export, a dataset or a report written over by mistake is lost.
    ``option`` names the command-line option the paths come from."""
    existing = [os.fspath(p) for p in paths if os.path.exists(p)]
    if existing and not force:
        raise ValueError(f"{option}: {', '.join(existing)} already "
                         f"{'exists' if len(existing) == 1 else 'exist'}; pass --force to "
                         "replace, or choose another path")


def checkpoint_steps(directory) -> list[int]:
    """The steps of the checkpoint folders in ``directory`` (those named by their step;
    their contents are not read, so a damaged one counts), ascending; none when it is not
    there. From the names alone, without orbax: cheap, for a look at a run before it is
    opened. ``directory``: a path, or an ``etils.epath`` path (orbax's)."""
    if not hasattr(directory, "iterdir"):
        directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit() and p.is_dir())


class CheckpointError(ValueError):
    """A checkpoint or exported file cannot be written or read as asked; says why."""


def brief(text: str, width: int = 300) -> str:
    """The first line of an error message, cut to ``width`` characters: storage
    libraries' and agents' messages can run to pages."""
    return config_lib.clip((str(text).strip().splitlines() or [""])[0], width)


def raised_at(error: BaseException, fallback: bool = False, skip: tuple[str, ...] = ()):
    """The innermost frame (a ``traceback.FrameSummary``) of ``error``'s traceback in a
    user's own code: outside this framework (``gomoku_jax``, ``algorithms``), installed
    packages (``site-packages``, ``dist-packages``), Python's standard library and its
    import machinery; with ``fallback``, else the innermost outside the import machinery
    and the files ``skip``; else None. It names the line of a plugin, a network or an agent
    of one's own that raised, not JAX's, ``random``'s or ours below it."""
    import importlib
    import sys
    import sysconfig
    import traceback

    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not f.filename.startswith("<frozen")
              and f.filename not in (importlib.__file__, *skip)]
    ours = tuple(os.path.dirname(m.__file__) + os.sep
                 for m in (sys.modules["gomoku_jax"], sys.modules.get("algorithms"))
                 if m is not None and getattr(m, "__file__", None))
    library = tuple(sysconfig.get_paths()[name] + os.sep for name in ("stdlib", "platstdlib"))
    own = [f for f in frames if not f.filename.startswith(ours + library)
           and not {"site-packages", "dist-packages"} & set(Path(f.filename).parts)]
    chosen = own or (frames if fallback else [])
    return chosen[-1] if chosen else None


def file_sha256(path) -> str:
    """The SHA-256 of the file at ``path``, hex."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def read_json_object(path, advice: str) -> dict:
    """The JSON object a run keeps in ``path`` (e.g. its ``config.json``); a
    CheckpointError naming the file, followed by ``advice``, when it cannot be read or
    holds something else."""
    try:
        stored = config_lib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise CheckpointError(f"{path} is unreadable ({brief(e)}); {advice}") from None
    if not isinstance(stored, dict):
        raise CheckpointError(f"{path} must hold a JSON object, found {brief(_json(stored))}; "
                              f"{advice}")
    return stored


# ---------------------------------------------------------------------------- helpers


def _path_str(path) -> str:
    """A pytree key path as ``a.b.0.c`` (dict keys, attribute names, indices)."""
    parts = []
    for key in path:
        if isinstance(key, jax.tree_util.DictKey):
            parts.append(str(key.key))
        elif isinstance(key, jax.tree_util.GetAttrKey):
            parts.append(key.name)
        elif isinstance(key, jax.tree_util.SequenceKey):
            parts.append(str(key.idx))
        elif isinstance(key, jax.tree_util.FlattenedIndexKey):
            parts.append(str(key.key))
        else:
            parts.append(str(key))
    return ".".join(parts) or "<root>"


def _brief_path(where: str, width: int = 120) -> str:
    """A key path for an error about a file's content: whole when short, else its start
    and end around ``...`` (a corrupt file may nest hundreds of maps)."""
    if len(where) <= width:
        return where
    head = width // 3
    return f"{where[:head]}...{where[len(where) - (width - head - 3):]}"


def _json(value) -> str:
    return json.dumps(value, sort_keys=True)


def _normalise_json(value, name: str):
    """``value`` as it reads back from JSON (tuples become lists, keys strings)."""
    def plain(obj):
        if isinstance(obj, Mapping):
            return dict(obj)
        raise TypeError(f"{type(obj).__name__} is not JSON-serialisable")

    try:
        return json.loads(json.dumps(value, default=plain))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be JSON-serialisable, got {value!r}: {e}") from None


def _json_equal(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return a == b


_MISSING = object()  # a key one side of a config comparison lacks


def _config_changes(stored, given, prefix: str = "") -> list[tuple]:
    """``(path, stored value, given value)`` for every differing key (dotted paths), in
    key order; a key one side lacks has `_MISSING` there."""
    out = []
    for key in sorted(set(stored) | set(given)):
        path = f"{prefix}{key}"
        a, b = stored.get(key, _MISSING), given.get(key, _MISSING)
        if isinstance(a, dict) and isinstance(b, dict):
            out.extend(_config_changes(a, b, path + "."))
        elif a is _MISSING or b is _MISSING or not _json_equal(a, b):
            out.append((path, a, b))
    return out


def _change_line(path: str, a, b, note: str | None = None) -> str:
    if a is _MISSING:
        line = f"{path}: missing in the stored config, given {_json(b)}"
    elif b is _MISSING:
        line = f"{path}: stored {_json(a)}, missing in the given config"
    else:
        line = f"{path}: stored {_json(a)}, given {_json(b)}"
    return f"{line} ({note})" if note else line


# ``may_change(path, stored value, given value)``: True when the setting at the dotted
# ``path`` may differ from the stored config; False, or a note saying why not (added to
# its line of the refusal), when it may not. Never asked about a setting one side lacks.
_MayChange = Callable[[str, object, object], bool | str]


def _split_changes(stored: Mapping, given: Mapping, upgrade, may_change
                   ) -> tuple[list[tuple[str, object, object]], list[str]]:
    """``(allowed, refused)``: the changes from ``stored`` to ``given`` that
    ``may_change`` allows, ``(path, stored value, given value)`` each, and a line for
    each of the others (all of them without ``may_change``)."""
    stored = dict(stored)
    if upgrade is not None:
        try:
            stored = _normalise_json(upgrade(stored), "stored config")
        except (TypeError, ValueError):
            pass
    allowed, refused = [], []
    for path, a, b in _config_changes(stored, _normalise_json(dict(given), "config")):
        verdict = (False if may_change is None or a is _MISSING or b is _MISSING
                   else may_change(path, a, b))
        if verdict is True:
            allowed.append((path, a, b))
        else:
            refused.append(_change_line(path, a, b, verdict or None))
    return allowed, refused


def config_differences(stored: Mapping, given: Mapping,
                       upgrade: Callable[[dict], dict] | None = None,
                       may_change: _MayChange | None = None) -> list[str]:
    """Lines ``key.path: stored X, given Y`` for every setting in which a stored config
    (read back from JSON) differs from ``given``; empty when they agree. ``upgrade`` maps
    the stored config to today's form first (settings added since it was written take
    their defaults); when it raises ``ValueError``/``TypeError`` the stored config is
    compared as it is, so the lines name what differs. With ``may_change`` (see
    `Checkpointer`) the settings it allows to change are left out, and a note it gives
    for one it refuses ends that setting's line, in parentheses."""
    return _split_changes(stored, given, upgrade, may_change)[1]


def _is_typed_key(x) -> bool:
    dtype = getattr(x, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def _key_impl(x):
    """The PRNG implementation of a typed key array or of its ``ShapeDtypeStruct``."""
    if isinstance(x, jax.Array):
        return jax.random.key_impl(x)
    found = []
    jax.eval_shape(lambda k: found.append(jax.random.key_impl(k)), x)
    return found[0]


def _leaf_hashes(tree) -> dict[str, str]:
    """``{path: SHA-256 of the leaf's C-order bytes}`` for the leaves this process sees
    whole (a leaf sharded over several processes is left out); one device-to-host copy."""
    named = [
        (_path_str(path), leaf)
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]
        if not (isinstance(leaf, jax.Array) and not leaf.is_fully_addressable)
    ]
    host = jax.device_get([leaf for _, leaf in named])
    return {
        name: hashlib.sha256(np.ascontiguousarray(arr).reshape(-1).view(np.uint8)).hexdigest()
        for (name, _), arr in zip(named, host)
    }


def _scalar_array(x) -> np.ndarray:
    """A scalar as a 0-d array: NumPy scalars keep their dtype, Python ones take JAX's
    default (``int32``/``float32`` unless x64 is on), as ``jax.eval_shape`` gives them."""
    if isinstance(x, np.generic):
        return np.asarray(x)
    return np.asarray(x, dtype=jax.dtypes.result_type(x))


def _savable(path, x):
    """One state leaf as orbax stores it: arrays as they are, keys as their data."""
    if _is_typed_key(x):
        return jax.random.key_data(x)
    if isinstance(x, (jax.Array, np.ndarray)):
        return x
    if isinstance(x, (bool, int, float, np.generic)):
        return _scalar_array(x)
    raise ValueError(
        f"state leaf {_path_str(path)!r} must be an array, a NumPy scalar, a bool, "
        f"an int or a float, got {type(x).__name__}: {x!r}"
    )


def _restorable(path, x):
    """One target leaf as orbax restores it (a typed key becomes its raw data)."""
    if _is_typed_key(x):
        if isinstance(x, jax.Array):
            return jax.random.key_data(x)
        return _restorable(path, jax.eval_shape(jax.random.key_data, x))
    if isinstance(x, jax.ShapeDtypeStruct):
        if x.sharding is None:
            sharding = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
            return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding)
        return x
    if isinstance(x, (jax.Array, np.ndarray)):
        return x
    if isinstance(x, (bool, int, float, np.generic)):
        return _scalar_array(x)
    raise ValueError(
        f"target leaf {_path_str(path)!r} must be an array, a ShapeDtypeStruct, a NumPy "
        f"scalar, a bool, an int or a float, got {type(x).__name__}: {x!r}"
    )


def _like_target(x, target):
    """A restored leaf in the kind of the target's leaf."""
    if _is_typed_key(target):
        return jax.random.wrap_key_data(x, impl=_key_impl(target))
    if isinstance(target, (bool, int, float)):
        return type(target)(np.asarray(x).item())
    if isinstance(target, np.generic):
        return np.asarray(x)[()]
    if isinstance(target, np.ndarray):
        return np.asarray(x)
    return x


# ------------------------------------------------------------------------ checkpoints


class _OrbaxNoise(logging.Filter):
    """Drops orbax's log lines that only bury the one error a `Checkpointer` raises.

    * A step's metadata file it cannot parse ("Failed to json parse"): orbax logs it on
      the ``absl`` logger, several times, from its own threads too, and goes on;
      `Checkpointer.restore` turns the same damage into one `CheckpointError` that names
      the step and what to do.
    * A save thread that failed ("_SignalingThread.run() raised an exception", with its
      traceback, once per thread): `Checkpointer.save` waits for the save, so the same
      error reaches it and is raised there (a full disk as one `CheckpointError`).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        return not (message.startswith("Failed to json parse")
                    or "_SignalingThread.run() raised an exception" in message)


_ORBAX_NOISE = _OrbaxNoise()


@contextlib.contextmanager
def _abandoned_writes_quiet():
    """While a save runs, and after it if it failed: a write orbax abandons when its save
    fails may finish later and call back into the event loop the save had closed, which
    Python reports as an unraisable ``RuntimeError: Event loop is closed`` with its
    traceback (a dozen after a full disk, some after the run's own error). Those are
    dropped; any other unraisable error is reported as before. A save that succeeded
    puts the previous hook back."""
    previous = sys.unraisablehook

    def hook(unraisable):
        error = unraisable.exc_value
        if not (isinstance(error, RuntimeError) and str(error) == "Event loop is closed"):
            previous(unraisable)

    sys.unraisablehook = hook
    yield
    if sys.unraisablehook is hook:  # (an exception leaves it: late writes may follow)
        sys.unraisablehook = previous


class Checkpointer:
    """Checkpoints of one run in ``directory`` (orbax), guarded by the run's config.

    Args:
      directory: where the steps and ``config.json`` live (created if missing).
      config: the run's config, a JSON-serialisable mapping; written to
        ``config.json`` by the first save and compared by every restore.
      max_to_keep: how many of the newest checkpoints to keep (``None``: all).
      upgrade: maps the stored config to today's form before the comparison (the
        training loop fills in settings added since the run began with their
        defaults); when it raises ``ValueError``/``TypeError`` the stored config is
        compared as it is.
      cleanup: remove the saves a crash or Ctrl-C cut short (orbax's temporary step
        folders), and older steps whose removal was cut short (no step metadata or no
        data folder), when opening; only for the run that writes the checkpoints, once it
        knows the directory is its own (a reader, such as an export while the run
        trains, must not remove a save in progress).
      may_change: ``may_change(path, stored value, given value)`` says whether the
        setting at the dotted ``path`` may differ from the stored config: True, or False
        or a note saying why not (added to that setting's line when the config is
        refused). Settings it allows are not refused; `config_changes` lists them,
        and the next save (or `store_config`) stores this config in their place, so
        that a later restore compares with it. None: every difference is refused.

    Saves are synchronous. Use one ``Checkpointer`` per process; in a multi-process
    run every process calls ``save``/``restore`` (orbax coordinates) and process 0
    writes ``config.json``.
    """

    def __init__(self, directory, *, config: Mapping, max_to_keep: int | None = 3,
                 upgrade: Callable[[dict], dict] | None = None, cleanup: bool = False,
                 may_change: _MayChange | None = None):
        import orbax.checkpoint as ocp
        from etils import epath

        logging.getLogger("absl").addFilter(_ORBAX_NOISE)  # added once

        if not isinstance(config, Mapping):
            raise ValueError(f"config must be a mapping, got {type(config).__name__}: {config!r}")
        max_to_keep = config_lib.check_int("", "max_to_keep", max_to_keep, allow_none=True)
        self._ocp = ocp
        # orbax needs an absolute path; a relative one is taken from the working directory
        self.directory = epath.Path(os.path.abspath(os.fspath(directory)))
        self.config = _normalise_json(dict(config), "config")
        self.max_to_keep = max_to_keep
        self._upgrade = upgrade
        self._may_change = may_change
        latest_n = getattr(getattr(ocp, "checkpoint_managers", None), "LatestN", None)
        if latest_n is not None:
            keep = {"preservation_policy": latest_n(max_to_keep)}
        else:  # older orbax
            keep = {"max_to_keep": max_to_keep}
        if cleanup and jax.process_index() == 0 and self.directory.exists():
            # Saves that a crash or Ctrl-C cut short are never restorable; left there,
            # orbax removes each one, with a warning in the middle of the run, when it
            # saves that step again. (orbax's own clean-up option runs in the background;
            # this one is done when the constructor returns.)
            for unfinished in self.directory.glob(f"*{UNFINISHED_SAVE}*"):
                if unfinished.is_dir():
                    unfinished.rmtree()
            # An older step that orbax was pruning when a crash or Ctrl-C cut it short
            # (its metadata or data folder gone) is never restorable either, and orbax
            # warns of it at every start; the newest step is left for restore to judge.
            for step in checkpoint_steps(self.directory)[:-1]:
                step_dir = self.directory / str(step)
                if not ((step_dir / "_CHECKPOINT_METADATA").exists()
                        and (step_dir / _ITEM).is_dir()):
                    step_dir.rmtree()
        options = ocp.CheckpointManagerOptions(
            enable_async_checkpointing=False, create=True, **keep
        )
        self._manager = ocp.CheckpointManager(
            self.directory, options=options, item_handlers=ocp.StandardCheckpointHandler()
        )

    # -- queries

    def steps(self) -> list[int]:
        """The finished checkpoints' steps, ascending (re-read from disk)."""
        self._manager.reload()
        return sorted(int(s) for s in self._manager.all_steps())

    def latest_step(self) -> int | None:
        """The newest finished checkpoint's step, or None when there is none."""
        steps = self.steps()
        return steps[-1] if steps else None

    def close(self) -> None:
        """Releases orbax's resources."""
        self._manager.close()

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- config

    @property
    def _config_path(self):
        return self.directory / _CONFIG_FILE

    def _stored_config(self) -> dict | None:
        path = self._config_path
        if not path.exists():
            return None
        return read_json_object(path, "restore it or use another directory")

    def _check_config(self, stored: dict) -> list[tuple[str, object, object]]:
        """The changes from ``stored`` that ``may_change`` allows; CheckpointError naming
        the others, if any."""
        allowed, diff = _split_changes(stored, self.config, self._upgrade, self._may_change)
        if diff:
            raise CheckpointError(
                f"the config differs from the one stored in {self._config_path}:\n  "
                + "\n  ".join(diff)
                + "\nuse the run's original config or another directory"
            )
        return allowed

    def config_changes(self) -> list[tuple[str, object, object]]:
        """The settings in which this config differs from the stored ``config.json``,
        each allowed by ``may_change``: ``(dotted path, stored value, given value)``,
        values as JSON reads them back; ``[]`` when none is stored. Raises
        CheckpointError, as `restore` does, when a setting differs that may not."""
        stored = self._stored_config()
        return [] if stored is None else self._check_config(stored)

    def store_config(self) -> None:
        """Make this config the stored one (``config.json``, written by process 0), so
        that later restores compare with it; CheckpointError, writing nothing, when the
        stored one differs in a setting that may not change (see ``may_change``)."""
        self.config_changes()
        self._write_config()

    def _write_config(self) -> None:
        if jax.process_index() != 0:
            return
        write_atomic(self._config_path, json.dumps(self.config, indent=2, sort_keys=True) + "\n")

    # -- save / restore

    def save(self, step: int, state) -> None:
        """Writes ``state`` (a pytree) as checkpoint ``step``, then prunes old ones.

        The first save into a directory without checkpoints writes ``config.json``
        (replacing one left by a run that saved nothing), and so does a save whose
        config differs from the stored one only in settings that ``may_change`` allows
        (after the step is written: until then the stored config is the one of the
        checkpoints there). Raises CheckpointError if ``step`` is not after the latest
        step, or if the directory already holds checkpoints of a different config.
        """
        step = config_lib.check_count("step", step, 0)  # a bool's True is no step 1
        steps = self.steps()
        if steps and step <= steps[-1]:
            raise CheckpointError(
                f"step {step} must be after the latest checkpoint step {steps[-1]} in "
                f"{self.directory}"
            )
        stored = self._stored_config()
        changed = self._check_config(stored) if stored is not None and steps else []
        savable = jax.tree_util.tree_map_with_path(_savable, state)
        hashes = _leaf_hashes(savable)
        if stored is None or not steps:
            self._write_config()
        try:
            with _abandoned_writes_quiet():
                saved = self._manager.save(
                    step,
                    args=self._ocp.args.StandardSave(savable),
                    custom_metadata={_METADATA_KEY: {"sha256": hashes}},
                )
                self._manager.wait_until_finished()
        except Exception as e:  # noqa: BLE001 - orbax / tensorstore raise many kinds
            text = f"{type(e).__name__}: {e}"
            if getattr(e, "errno", None) == errno.ENOSPC or any(
                    mark in text for mark in ("No space left", "RESOURCE_EXHAUSTED")):
                kept = (f"the run resumes from step {steps[-1]}" if steps
                        else "no checkpoint was kept, the run starts afresh")
                raise CheckpointError(
                    f"no space left on the disk of {self.directory} while saving step {step} "
                    f"(the unfinished save is removed at the next start); free some space and "
                    f"run the same command again: {kept}") from None
            raise
        if not saved:
            raise CheckpointError(f"orbax declined to save step {step} in {self.directory}")
        if changed:
            self._write_config()

    def _corrupt(self, step: int, what: str) -> CheckpointError:
        step_dir = self.directory / str(step)
        older = [s for s in self.steps() if s < step]
        what = brief(what)
        fallback = (f"Delete that directory to go back to the previous checkpoint (step "
                    f"{older[-1]}, which a run resumes from)" if older
                    else "Delete that directory to start afresh")
        return CheckpointError(
            f"checkpoint {step_dir} (step {step}) is unreadable or corrupt: {what}. {fallback}, "
            "or choose another workdir"
        )

    def restore(self, target, step: int | None = None):
        """Checkpoint ``step`` (default: the latest) in the structure of ``target``.

        ``target`` is a pytree like the saved state: concrete arrays (their shardings
        are used) or ``jax.ShapeDtypeStruct`` leaves, e.g. from ``jax.eval_shape``.
        Raises CheckpointError when there is no such checkpoint, the stored config
        differs, the structure, a leaf's shape or dtype differs, or the files are
        damaged; a ``step`` that is not a non-negative int (a bool, a float) is a
        ValueError, as in `save`.
        """
        if step is not None:
            step = config_lib.check_count("step", step, 0)
        steps = self.steps()
        if not steps:
            raise CheckpointError(f"no checkpoint in {self.directory}")
        if step is None:
            step = steps[-1]
        if step not in steps:
            raise CheckpointError(f"no checkpoint step {step} in {self.directory}; found {steps}")
        stored = self._stored_config()
        if stored is None:
            raise CheckpointError(
                f"{self._config_path} is missing, so the checkpoints there cannot be "
                "checked against the config; restore the file or use another directory"
            )
        self._check_config(stored)

        abstract = jax.tree_util.tree_map_with_path(_restorable, target)
        if not (self.directory / str(step) / _ITEM).is_dir():  # (orbax: a registry error)
            raise self._corrupt(step, f"its data folder {_ITEM}/ is missing")
        # The data files first, with no event loop (see `_check_data`): a damaged index
        # read by orbax's metadata calls floods the terminal with its threads' tracebacks.
        self._check_data(step)
        try:
            step_meta = self._manager.metadata(step)
            tree_meta = self._manager.item_metadata(step)
        except Exception as e:  # noqa: BLE001 - orbax / tensorstore raise many kinds
            raise self._corrupt(step, f"{type(e).__name__}: {_reason(e)}") from e
        custom = getattr(step_meta, "custom_metadata", None) or {}
        hashes = custom.get(_METADATA_KEY, {}).get("sha256") if isinstance(custom, dict) else None
        if not isinstance(hashes, dict):
            raise self._corrupt(
                step, "its step metadata (_CHECKPOINT_METADATA) is missing or unreadable"
            )
        tree = getattr(tree_meta, "tree", tree_meta)
        if tree is None:
            raise self._corrupt(
                step, f"its tree metadata ({_ITEM}/_METADATA) is missing or unreadable"
            )
        self._check_tree(step, tree, abstract)

        try:
            restored = self._manager.restore(
                step, args=self._ocp.args.StandardRestore(abstract)
            )
        except Exception as e:  # noqa: BLE001
            raise self._corrupt(step, f"{type(e).__name__}: {_reason(e)}") from e

        for name, found in _leaf_hashes(restored).items():
            if name not in hashes:  # every save records them all: a map cut short
                raise self._corrupt(step, f"leaf {name!r} has no SHA-256 in its step "
                                    "metadata (_CHECKPOINT_METADATA), which lists every leaf")
            if hashes[name] != found:
                raise self._corrupt(step, f"leaf {name!r} does not match its SHA-256")
        return jax.tree_util.tree_map(_like_target, restored, target)

    def _check_data(self, step: int) -> None:
        """Reads every stored value of checkpoint ``step`` (`_READS_AT_ONCE` at a time),
        raising CheckpointError if one cannot be read (a data file truncated, damaged or
        gone).

        orbax's restore reads all arrays concurrently on an event loop it closes as soon
        as one read fails; the reads still in flight then fail against the closed loop
        on TensorStore's threads, which print a traceback each. Reading here first, with
        no event loop, turns such damage into one error before orbax starts.
        """
        item = self.directory / str(step) / _ITEM
        if not (item / "manifest.ocdbt").exists():
            return  # not an OCDBT store (or its manifest is gone): orbax's restore reports it
        import tensorstore as ts

        spec = {"driver": "ocdbt", "base": {"driver": "file", "path": f"{item}/"}}
        try:
            store = ts.KvStore.open(spec).result()
            keys = store.list().result()
        except Exception as e:  # noqa: BLE001 - tensorstore raises several kinds
            raise self._corrupt(
                step, f"the index of its data files ({_ITEM}/manifest.ocdbt, {_ITEM}/d/, "
                f"{_ITEM}/ocdbt.process_*/) is truncated or damaged ({_reason(e)})"
            ) from None
        for start in range(0, len(keys), _READS_AT_ONCE):
            batch = keys[start:start + _READS_AT_ONCE]
            reads = [store.read(key) for key in batch]  # concurrent, on TensorStore's threads
            for key, read in zip(batch, reads):
                try:
                    # Every value orbax stores (array metadata, a compressed chunk) has
                    # bytes; TensorStore reads one whose data file is gone as empty.
                    why = "its data file is missing" if not read.result().value else ""
                except Exception as e:  # noqa: BLE001
                    why = _reason(e)
                if why:
                    raise self._corrupt(
                        step, f"a data file under {_ITEM}/ocdbt.process_*/d/ is truncated, "
                        f"damaged or missing (reading {key.decode('utf-8', 'replace')!r}: {why})"
                    )

    def _check_tree(self, step: int, tree, abstract) -> None:
        flat = jax.tree_util.tree_flatten_with_path
        stored = {_path_str(p): leaf for p, leaf in flat(tree)[0]}
        wanted = {_path_str(p): leaf for p, leaf in flat(abstract)[0]}
        missing = sorted(set(wanted) - set(stored))
        extra = sorted(set(stored) - set(wanted))
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"in the target but not the checkpoint: {', '.join(missing)}")
            if extra:
                parts.append(f"in the checkpoint but not the target: {', '.join(extra)}")
            raise CheckpointError(
                f"checkpoint {self.directory / str(step)} has a different tree structure "
                f"than the target; " + "; ".join(parts)
            )
        for name, want in wanted.items():
            have = stored[name]
            have_shape = tuple(getattr(have, "shape", ()) or ())
            have_dtype = np.dtype(have.dtype) if getattr(have, "dtype", None) is not None else None
            want_shape, want_dtype = tuple(np.shape(want)), np.dtype(want.dtype)
            if have_shape != want_shape or (have_dtype is not None and have_dtype != want_dtype):
                raise CheckpointError(
                    f"leaf {name!r} of checkpoint {self.directory / str(step)} has shape "
                    f"{have_shape} dtype {have_dtype}, the target has shape {want_shape} "
                    f"dtype {want_dtype}"
                )


# --------------------------------------------------------------------- exported files


def _as_numpy_tree(path, x):
    if x is None:
        return None
    if _is_typed_key(x):
        raise ValueError(
            f"variables leaf {_path_str(path)!r} is a typed PRNG key; export "
            "jax.random.key_data(key) instead"
        )
    arr = np.asarray(jax.device_get(x))
    if arr.dtype.hasobject or arr.dtype.fields is not None:
        raise ValueError(
            f"variables leaf {_path_str(path)!r} must be a numeric array, got dtype {arr.dtype}"
        )
    return arr


def _finite(leaf) -> bool:
    """Whether an array leaf holds no NaN or infinity (always, for integers and booleans)."""
    leaf = np.asarray(leaf)
    return not jax.dtypes.issubdtype(leaf.dtype, np.inexact) or bool(np.isfinite(leaf).all())


def write_exported(path, metadata: Mapping, variables) -> None:
    """Writes ``variables`` (a pytree of arrays) and ``metadata`` to the file ``path``.

    The variables are stored as a nested dict of NumPy arrays (flax state-dict form:
    ``FrozenDict`` becomes dict, sequence items are keyed ``"0"``, ``"1"``...). The
    file is written beside ``path`` and renamed into place, so readers never see a
    partial file.
    """
    if not isinstance(metadata, Mapping):
        raise ValueError(f"metadata must be a mapping, got {type(metadata).__name__}: {metadata!r}")
    state = serialization.to_state_dict(variables)
    if not isinstance(state, dict):
        raise ValueError(f"variables must be a pytree of dicts, got {type(variables).__name__}")
    state = jax.tree_util.tree_map_with_path(_as_numpy_tree, state)
    for leaf_path, leaf in jax.tree_util.tree_leaves_with_path(state):
        if not _finite(leaf):  # it would be refused when read
            raise ValueError(f"variables: {_path_str(leaf_path)} holds NaN or infinite "
                             "values; a broken network is not exported")
    payload = serialization.msgpack_serialize(state, in_place=True)
    try:  # the metadata is the header's only part that may not be JSON
        digest = hashlib.sha256(metadata_text(dict(metadata)).encode("ascii")).hexdigest()
    except (TypeError, ValueError) as e:
        raise ValueError(f"metadata must be JSON-serialisable, got {metadata!r}: {e}") from None
    header = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "payload_size": len(payload),
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
        "metadata": dict(metadata),
        "metadata_sha256": digest,
    }
    header_bytes = json.dumps(header, sort_keys=True, allow_nan=False).encode("utf-8")
    write_atomic(path, EXPORT_MAGIC + _LENGTH.pack(len(header_bytes)) + header_bytes + payload)


def _non_string_key(tree: dict) -> tuple[str, object] | None:
    """``(where, key)`` for the first map key of ``tree`` (nested maps and lists) that is
    not a string, ``where`` as ``a.b.0``; None when every key is a string."""
    pending = [("", tree)]
    while pending:
        where, node = pending.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            if isinstance(node, dict) and not isinstance(key, str):
                return where, key
            if isinstance(value, (dict, list)):
                pending.append((f"{where}.{key}" if where else str(key), value))
    return None


def read_exported(path) -> tuple[dict, dict]:
    """``(metadata, variables)`` from a file written by :func:`write_exported`.

    ``variables`` is a nested dict of NumPy arrays. Raises CheckpointError naming the
    file when it is not such a file, has another format version, or is truncated,
    corrupt or modified.
    """
    name = os.fspath(path)
    with open(name, "rb") as f:
        data = f.read()

    def fail(why: str) -> CheckpointError:
        return CheckpointError(f"{name}: {why}")

    head = data[: len(EXPORT_MAGIC)]
    if not data:
        raise fail("empty file, not a gomoku-jax params file")
    if head != EXPORT_MAGIC[: len(head)]:
        raise fail(f"not a gomoku-jax params file (it does not start with {EXPORT_MAGIC!r})")
    if len(data) < _HEADER_START:
        raise fail(f"truncated: {len(data)} bytes, shorter than the {_HEADER_START}-byte preamble")
    (header_len,) = _LENGTH.unpack_from(data, len(EXPORT_MAGIC))
    header_end = _HEADER_START + header_len
    if header_end > len(data):
        raise fail(
            f"truncated: the header should be {header_len} bytes, only "
            f"{len(data) - _HEADER_START} follow"
        )
    try:
        header = config_lib.loads(data[_HEADER_START:header_end].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise fail(f"corrupt header (not UTF-8 JSON: {e})") from None
    if not isinstance(header, dict) or header.get("format") != EXPORT_FORMAT:
        found = header.get("format") if isinstance(header, dict) else header
        raise fail(
            f"not a gomoku-jax params file (header format {found!r}, expected {EXPORT_FORMAT!r})"
        )
    version = header.get("version")
    if type(version) is not int or version not in _READS_VERSIONS:
        raise fail(
            f"written by format version {version!r}, this gomoku-jax reads versions "
            f"{' and '.join(map(str, _READS_VERSIONS))}"
        )
    size, digest, metadata = (header.get(k) for k in ("payload_size", "payload_sha256", "metadata"))
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise fail(f"corrupt header: payload_size must be a non-negative int, found {size!r}")
    if not isinstance(digest, str) or len(digest) != 64:
        raise fail(f"corrupt header: payload_sha256 must be 64 hex digits, found {digest!r}")
    if not isinstance(metadata, dict):
        raise fail(f"corrupt header: metadata must be a JSON object, found {metadata!r}")
    if version >= 2:  # the header's settings, hashed as the payload is
        meta_digest = header.get("metadata_sha256")
        if not isinstance(meta_digest, str) or len(meta_digest) != 64:
            raise fail(f"corrupt header: metadata_sha256 must be 64 hex digits, found "
                       f"{config_lib.clip(repr(meta_digest))}")
        try:
            text = metadata_text(metadata)
        except ValueError:  # NaN: written by no writer of this format
            text = ""
        if hashlib.sha256(text.encode("ascii")).hexdigest() != meta_digest.lower():
            raise fail("corrupt or modified: the metadata (the game, network and search "
                       "settings) does not match its SHA-256 in the header")
    payload = data[header_end:]
    if len(payload) < size:
        raise fail(f"truncated: the payload should be {size} bytes, only {len(payload)} follow")
    if len(payload) > size:
        raise fail(f"corrupt: {len(payload) - size} unexpected bytes after the {size}-byte payload")
    if hashlib.sha256(payload).hexdigest() != digest.lower():
        raise fail("corrupt or modified: the payload does not match its SHA-256 in the header")
    try:
        variables = serialization.msgpack_restore(payload)
    except Exception as e:  # noqa: BLE001 - msgpack raises several kinds
        raise fail(f"corrupt payload ({type(e).__name__}: {e})") from None
    if not isinstance(variables, dict):
        raise fail(
            f"corrupt payload: expected a map of variables, found {type(variables).__name__}"
        )
    bad_key = _non_string_key(variables)  # before any pytree code sorts the keys
    if bad_key is not None:
        where, key = bad_key
        raise fail(f"corrupt payload: {_brief_path(where) or '<root>'} holds the key "
                   f"{config_lib.clip(repr(key))}, not a string (the variables are maps of "
                   "names to arrays)")
    for path, leaf in jax.tree_util.tree_leaves_with_path(variables):
        if not isinstance(leaf, np.ndarray) or not (
                jax.dtypes.issubdtype(leaf.dtype, np.number) or leaf.dtype == np.bool_):
            kind = (f"an array of {leaf.dtype}" if isinstance(leaf, np.ndarray)
                    else f"a {type(leaf).__name__}")
            raise fail(f"corrupt payload: {_brief_path(_path_str(path))} is {kind}, not an "
                       "array of numbers")
        if not _finite(leaf):
            raise fail(f"{_brief_path(_path_str(path))} holds NaN or infinite values: the network is "
                       "broken (exported from a run that had diverged?)")
    variables = jax.tree_util.tree_map(np.array, variables)
    return metadata, variables
