"""Experiment configs as data: JSON files read into frozen dataclasses, with checks.

A config file is a JSON object whose keys are the fields of a (nested) frozen
dataclass. Three keys are not fields: ``algorithm`` (which learner trains it, e.g.
``"alphazero"``; see `algorithms.LEARNERS`), ``description`` (free text: the command that
runs it and what to expect) and ``variants`` (named objects of dotted overrides, such
as the ablations of one report; every training config under ``experiments/configs/`` has a
``smoke`` variant that turns the experiment into a tiny one for tests and CI, and variants
combine in order). Command-line overrides are ``key=value`` strings with dotted keys
(``search.num_simulations=32``); the value is read as JSON when it parses (numbers,
booleans, null, lists, objects), else as a string.

Every mistake names the dotted key: an unknown key (with the valid ones listed), a
value of the wrong type, or an out-of-range value (raised by the dataclass itself).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import numbers
import os
import pathlib
import re
import sys
import types
import typing
import warnings
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = [
    "ConfigError",
    "ConfigWarning",
    "algorithm_of",
    "apply_overrides",
    "check_count",
    "check_int",
    "check_number",
    "changed",
    "closest",
    "DuplicateKeyError",
    "did_you_mean",
    "from_dict",
    "loads",
    "load_file",
    "parse_override",
    "parse_overrides",
    "plain_fields",
    "plain_scalars",
    "plain_values",
    "offset_seed",
    "read_json",
    "to_dict",
    "warn_inert",
]

_META_KEYS = ("algorithm", "description", "variants")


class ConfigError(ValueError):
    """A config file, a ``--set`` override or a config value is wrong."""


class ConfigWarning(UserWarning):
    """A setting that does nothing with the others as they are (``train.momentum`` under
    Adam, ...): `load_file` warns of each one, and the command line prints it as one
    line. A learner config lists them in its ``inert_settings()``."""


def changed(settings, name: str) -> bool:
    """Whether field ``name`` of the dataclass ``settings`` differs from its default."""
    field = next(f for f in dataclasses.fields(settings) if f.name == name)
    return getattr(settings, name) != field.default


def warn_inert(config, where: str) -> list[str]:
    """A `ConfigWarning` for each of ``config.inert_settings()`` (none when the config
    has no such method), each naming ``where`` the config was read; returns the
    messages."""
    inert = getattr(config, "inert_settings", None)
    messages = [f"{where}: {text}" for text in (inert() if inert is not None else [])]
    for message in messages:
        warnings.warn(message, ConfigWarning, stacklevel=3)
    return messages


class DuplicateKeyError(json.JSONDecodeError):
    """JSON with a key given twice in one object. Python's ``json`` keeps the last value
    silently, so a setting written twice (or a file pasted into another) would lose one
    of them without a word; `loads` refuses it instead, saying where the second one is
    (``pos``, ``lineno``, ``colno`` as for any ``json.JSONDecodeError``, when the text
    is known). A ``json.JSONDecodeError``, so every reader that reports bad JSON reports
    this too."""

    def __init__(self, key: str, keys: Sequence[str], doc: str = "", pos: int | None = None):
        others = [repr(k) for k in dict.fromkeys(keys) if k != key]
        shown = ", ".join(others[:8]) + (f" and {len(others) - 8} more" if len(others) > 8
                                         else "")
        where = ""
        lineno, colno = 1, 1
        if pos is not None:
            lineno = doc.count("\n", 0, pos) + 1
            colno = pos - doc.rfind("\n", 0, pos)
            where = f", the second time at line {lineno} column {colno}"
        message = (f"the key {key!r} appears twice in one object (" +
                   (f"beside {shown[:300]}" if others else "its only key") +
                   f"){where}; give it once")
        ValueError.__init__(self, message)
        self.msg, self.doc, self.pos = message, doc, 0 if pos is None else pos
        self.lineno, self.colno = lineno, colno
        self.key, self.keys, self._given = key, list(keys), pos

    def __reduce__(self):  # copy and pickle keep the message
        return type(self), (self.key, self.keys, self.doc, self._given)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(key, [k for k, _ in pairs])
        out[key] = value
    return out


def _second_key_at(text: str) -> int | None:
    """Where, in JSON ``text``, the key that `_unique_keys` refuses is given the second
    time: ``json`` calls the hook as each object closes, so this is the first repeated
    key of the first object to close that repeats one. None if the text cannot be
    followed that far (the scan only tracks strings, brackets and commas)."""
    frames: list[dict | None] = []  # per open bracket: an object's state, or None (array)
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':
            try:
                value, end = json.decoder.scanstring(text, i + 1)
            except (ValueError, IndexError):
                return None
            top = frames[-1] if frames else None
            if top is not None and top["want_key"]:
                top["want_key"] = False
                if value in top["keys"] and top["second"] is None:
                    top["second"] = i
                top["keys"].add(value)
            i = end
            continue
        if char == "{":
            frames.append({"keys": set(), "want_key": True, "second": None})
        elif char == "[":
            frames.append(None)
        elif char in "}]":
            if not frames:
                return None
            top = frames.pop()
            if top is not None and top["second"] is not None:
                return top["second"]
        elif char == "," and frames and frames[-1] is not None:
            frames[-1]["want_key"] = True
        i += 1
    return None


def loads(text: str | bytes) -> Any:
    """``json.loads`` that refuses a key given twice in one object (`DuplicateKeyError`,
    a ``json.JSONDecodeError``): the project's reader of settings, headers and records.
    An integer too long for Python to read (more than 4,300 digits) is a
    ``json.JSONDecodeError`` at its place, not a bare ``ValueError``."""

    def document() -> str:
        return text if isinstance(text, str) else text.decode(json.detect_encoding(text),
                                                              "surrogatepass")

    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except DuplicateKeyError as error:
        doc = document()
        pos = _second_key_at(doc)
        if pos is None or json.decoder.scanstring(doc, pos + 1)[0] != error.key:
            raise
        raise DuplicateKeyError(error.key, error.keys, doc, pos) from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except ValueError:  # int() refused a number's length (sys.get_int_max_str_digits)
        doc = document()
        found = re.search(r"\d{%d,}" % (sys.get_int_max_str_digits() + 1), doc)
        if not sys.get_int_max_str_digits() or found is None:
            raise
        raise json.JSONDecodeError(f"a number of {len(found.group())} digits, more than "
                                   "can be read", doc, found.start()) from None


# The largest seed: seeds are offset (per game, per evaluation) and become JAX keys, which
# take 64-bit integers, so they are kept to 32 bits.
SEED_MAX = 2**32 - 1


def check_int(owner: str, name: str, value, minimum: int | None = 1,
              maximum: int | None = None, *, allow_none: bool = False) -> int | None:
    """``value`` as an int when it is a Python or NumPy integer (not a bool) >= ``minimum``
    (any integer when ``minimum`` is None) and <= ``maximum`` (when given); None when it
    is None and ``allow_none``. Else a ValueError naming ``owner.name`` (``name`` alone
    when ``owner`` is empty). A config's ``__post_init__`` checks its fields with it."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or (
            minimum is not None and value < minimum) or (
            maximum is not None and value > maximum):
        label = f"{owner}.{name}" if owner else name
        if maximum is not None:
            bound = f" from {minimum} to {maximum}" if minimum is not None else f" <= {maximum}"
        else:
            bound = "" if minimum is None else f" >= {minimum}"
        none = " or None" if allow_none else ""
        raise ValueError(f"{label} must be an integer{bound}{none}, got {_brief_repr(value)}")
    return int(value)


def plain_fields(config) -> None:
    """Replace NumPy scalars among a frozen dataclass's fields (and in its tuple, list
    and dict fields) with the Python numbers and bools they hold, in place. A config's ``__post_init__``
    calls it first, so a config built from NumPy values (``np.int64(8)``, ``np.float32``,
    ``np.True_``, as a notebook's ``np.arange`` gives them) checks, compares, hashes and
    writes to ``config.json`` as one built from Python values."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        plain = plain_scalars(value)
        if plain is not value:
            object.__setattr__(config, field.name, plain)


def plain_scalars(value):
    """``value`` with its NumPy scalars, and those in its tuples, lists and dicts, as
    Python numbers and bools (see `plain_fields`)."""
    if isinstance(value, np.floating) and value.dtype.itemsize < 8:
        # float32 (JAX's default) at the shortest decimal that reads back as the same
        # float32: np.float32(0.001) is 0.001, not 0.0010000000474974513
        return float(np.format_float_positional(value, unique=True))  # not print options
    if _extension_float(value):  # bfloat16 and the other floats of ml_dtypes, likewise
        return _shortest_float(value)
    if isinstance(value, np.generic):
        return value.item()
    if type(value) in (tuple, list):
        items = [plain_scalars(item) for item in value]
        return value if all(a is b for a, b in zip(items, value)) else type(value)(items)
    if type(value) is dict:
        items = {key: plain_scalars(item) for key, item in value.items()}
        return value if all(items[key] is item for key, item in value.items()) else items
    return value


def plain_values(value: Any) -> Any:
    """``value`` as JSON would hold it: NumPy and JAX arrays as (nested) lists, tuples as
    lists, any mapping as a dict, and every NumPy scalar as a Python number or bool, a
    float32 (a bfloat16...) at its shortest decimal (`plain_scalars`). A 0-d array is its
    scalar. What a metrics file and a sweep's values and folder names are written from."""
    if isinstance(value, np.ndarray) or (
            hasattr(value, "__array__") and not isinstance(value, np.generic)):
        value = np.asarray(value)  # a jax.Array too, without importing JAX here
        return [plain_values(item) for item in value] if value.ndim else plain_values(
            value[()])
    if isinstance(value, np.generic):
        return plain_scalars(value)
    if isinstance(value, Mapping):
        return {name: plain_values(item) for name, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_values(item) for item in value]
    return value


def _extension_float(value) -> bool:
    """Whether ``value`` is a scalar of a float type that NumPy does not count among its
    own (``np.floating``): bfloat16, float8_e4m3fn... of ml_dtypes (JAX's)."""
    if isinstance(value, np.number) or not isinstance(value, np.generic) or (
            "ml_dtypes" not in sys.modules):  # none of its scalars exists before its import
        return False
    import ml_dtypes

    try:
        ml_dtypes.finfo(value.dtype)
    except ValueError:  # an integer type of ml_dtypes (int4...), or no ml_dtypes type
        return False
    return True


def _shortest_float(value) -> float:
    """The float of the shortest decimal that converts back to ``value``, a scalar of a
    float type of a few bits (`_extension_float`): bfloat16(0.001) is 0.001, not
    0.00099945068359375. NumPy's shortest printing (``format_float_positional``) knows
    only its own float types. Of the two decimals of as many significant digits around
    the value, the nearer one that converts back is kept (a tie: the even last digit, as
    NumPy prints); it must convert back both from the Python float and through float32,
    as JAX may convert it."""
    import decimal

    kind = type(value)
    exact = float(value)
    if not math.isfinite(exact) or exact == 0:
        return exact

    def same(number: float) -> bool:
        with np.errstate(over="ignore"):  # a decimal beyond the type's largest value
            return kind(number) == value and kind(np.float32(number)) == value

    known = decimal.Decimal(exact)  # every float of a few bits, exactly
    for digits in range(1, 18):  # 17 significant digits give any double back
        step = decimal.Decimal(1).scaleb(known.adjusted() - digits + 1)
        even = known.quantize(step, decimal.ROUND_HALF_EVEN)
        fits = sorted((abs(d - known), d != even, float(d))
                      for d in {known.quantize(step, decimal.ROUND_FLOOR),
                                known.quantize(step, decimal.ROUND_CEILING)}
                      if same(float(d)))
        if fits:
            return fits[0][2]
    return exact


def check_count(name: str, value, minimum: int = 1) -> int:
    """``value`` as an int when it is a Python or NumPy integer (not a bool) of at least
    ``minimum`` (1 or 0), else a ValueError naming ``name``: a count given to a function
    (games, a batch, a capacity), where `check_int` is a config's."""
    if not isinstance(value, bool) and isinstance(value, numbers.Integral) and (
            value >= minimum):
        return int(value)
    what = "a positive" if minimum == 1 else "a non-negative"
    raise ValueError(f"{name} must be {what} integer, got {_brief_repr(value)}")


def check_seed(owner: str, name: str, value) -> int:
    """`check_int` for a seed: from 0 to `SEED_MAX`."""
    return check_int(owner, name, value, 0, SEED_MAX)


def offset_seed(seed: int, offset: int) -> int:
    """``seed + offset`` kept from 0 to `SEED_MAX` (wrapping round): the seed of a part
    of a run (an evaluation, a match) derived from the run's seed, whatever that is."""
    return (int(seed) + int(offset)) % (SEED_MAX + 1)


PLAY_MAX_BUDGET = 20_000
"""The largest search budget (simulations a move) that `gomoku-jax play` and its page
accept (`gomoku_jax.play.MAX_BUDGET`); here, where the command line's options are read."""


def count_argument(minimum: int = 1, maximum: int | None = None):
    """An argparse ``type`` for an integer option with bounds (games, iterations,
    simulations, a batch, opening stones, a port...): the option's text read as ``int``
    reads it, refused unless it is from ``minimum`` to ``maximum`` (no upper bound when
    None) with an ``ArgumentTypeError`` that argparse prints after the option's name
    (``argument --games: must be an integer >= 1, got '0'``)."""
    import argparse

    bound = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"

    def count(text: str) -> int:
        try:
            value = int(text)
        except ValueError:  # not an integer, or one of more digits than int reads
            value = None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"must be an integer {bound}, "
                                             f"got {clip(repr(text))}")
        return value

    return count


def seed_argument(text: str) -> int:
    """An argparse ``type`` for ``--seed``: an integer from 0 to `SEED_MAX`."""
    return count_argument(0, SEED_MAX)(text)


def check_number(owner: str, name: str, value, low: float, high: float,
                 low_open: bool = False) -> float:
    """``value`` as a float when it is a finite Python or NumPy number (not a bool) in
    ``[low, high]`` (``(low, high]`` with ``low_open``), else a ValueError naming
    ``owner.name`` (``name`` alone when ``owner`` is empty). A config's
    ``__post_init__`` checks its fields with it."""
    number = not isinstance(value, bool) and isinstance(value, (int, float, np.integer,
                                                                np.floating))
    # an int is finite (math.isfinite cannot take one of more digits than a float holds)
    finite = number and (isinstance(value, (int, np.integer)) or math.isfinite(value))
    ok = finite and (value > low if low_open else value >= low) and value <= high
    if not ok:
        bound = "(" if low_open else "["
        label = f"{owner}.{name}" if owner else name
        raise ValueError(f"{label} must be in {bound}{low}, {high}], "
                         f"got {_brief_repr(value)}")
    return float(value)


def _json_hint(value) -> str:
    """Why an override's text that looks like a JSON object or list (``{channels: 8}``)
    was read as a string: JSON's own complaint, or ``""`` for other values."""
    if not isinstance(value, str) or value.lstrip()[:1] not in ("{", "["):
        return ""
    try:
        json.loads(value)
    except json.JSONDecodeError as error:
        return f" (a string: as JSON it fails with '{error.msg}' at column {error.colno})"
    except RecursionError:
        return ""
    return ""


def parse_override(text: str) -> tuple[str, Any]:
    """``"a.b=3"`` -> ``("a.b", 3)``; values are JSON when they parse, else strings."""
    if not isinstance(text, str) or "=" not in text:
        raise ConfigError(f"an override must look like key=value, got {text!r}")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"an override needs a dotted key before '=', got {text!r}")
    try:
        value = loads(raw)
    except DuplicateKeyError as error:
        raise ConfigError(f"override {key}: {error}") from None
    except json.JSONDecodeError:
        value = raw
    except RecursionError:
        raise ConfigError(f"override {key}: the value is JSON nested too deeply to read") from None
    return key, value


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``k=v`` strings (`parse_override`) as a dotted key -> value dict. A key given twice
    is refused (a ConfigError naming both): one of its values would be dropped without a
    word, as a key written twice in a file would (`DuplicateKeyError`)."""
    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    for item in items:
        key, value = parse_override(item)
        if key in given:
            raise ConfigError(f"override {key!r} is given twice ({clip(given[key], 60)!r} "
                              f"and {clip(item, 60)!r}); give it once")
        out[key], given[key] = value, item
    return out


def _override_mapping(overrides: Mapping[str, Any] | Sequence[str]) -> Mapping[str, Any]:
    """Overrides as a dotted key -> value mapping (``k=v`` strings parsed)."""
    if isinstance(overrides, Mapping):
        return overrides
    return parse_overrides(overrides)


def apply_overrides(
    data: Mapping[str, Any], overrides: Mapping[str, Any] | Sequence[str], schema=None
) -> dict[str, Any]:
    """A deep copy of ``data`` with dotted-key overrides set (a dict, or ``k=v`` strings).

    Intermediate objects are created when missing; unknown keys are caught later, by
    `from_dict`, which knows the schema. With ``schema`` (the config class), an object
    given for a whole section (a nested config: ``search={...}``) that leaves out some
    of the section's settings ``data`` holds is refused: it would replace the section,
    dropping them silently (a free-form mapping, such as ``network.options``, is
    replaced as given).
    """
    out = json.loads(json.dumps(data))
    overrides = _override_mapping(overrides)
    keys = list(overrides)
    for i, key in enumerate(keys):  # applied in order: a later object replaces it, lost
        whole = next((k for k in keys[i + 1:] if key.startswith(f"{k}.")), None)
        if whole is not None:
            raise ConfigError(
                f"override {key!r} would be lost: the later override {whole!r} sets that "
                f"whole object; give {key[len(whole) + 1:]!r} in the object, or set it "
                f"after the object")
    for key, value in overrides.items():
        node = out
        parts = key.split(".")
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(
                    f"cannot set {key!r}: {'.'.join(parts[: i + 1])!r} is not an object"
                )
            node = child
        held = node.get(parts[-1])
        if (schema is not None and isinstance(value, dict) and isinstance(held, dict)
                and _section_type(schema, parts) is not None):
            dropped = sorted(set(held) - set(value))
            if dropped:
                raise ConfigError(
                    f"{key}={clip(json.dumps(plain_values(value), default=str), 60)}: an "
                    f"object replaces the whole {key!r} section, which would drop its "
                    f"{', '.join(dropped)} as set before; set single settings with dotted keys "
                    f"({key}.{next(iter(value), dropped[0])}=...), or give every one")
        node[parts[-1]] = value
    return out


def _section_type(cls, parts: Sequence[str]):
    """The config class (a dataclass) at the dotted path ``parts`` of config class
    ``cls``, or None when it leads to a plain value or mapping, or nowhere."""
    def dataclass_of(tp):
        if dataclasses.is_dataclass(tp):
            return tp
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            found = [a for a in typing.get_args(tp) if dataclasses.is_dataclass(a)]
            return found[0] if len(found) == 1 else None
        return None

    tp = cls
    for part in parts:
        owner = dataclass_of(tp)
        if owner is None:
            return None
        try:
            hints = typing.get_type_hints(owner)
        except (NameError, TypeError):  # hints that cannot be resolved: no section known
            return None
        if part not in hints:
            return None
        tp = hints[part]
    return dataclass_of(tp)


def _type_name(tp) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _convert(tp, value, path: str):
    """Check and convert one JSON value to the annotated type ``tp``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, value, path)
            except ConfigError as error:
                errors.append(str(error))
        raise ConfigError(errors[0] if len(errors) == 1 else
                          f"{path}: {value!r} does not fit {_type_name(tp)}")
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: expected an object, got {value!r}{_json_hint(value)}")
        return from_dict(tp, value, path)
    if origin in (tuple, list, Sequence, typing.Sequence) or tp in (tuple, list):
        if not isinstance(value, (list, tuple)):
            hint = _json_hint(value) or (  # a lone item: how its list of one is written
                f" (one item is a list too: {json.dumps([value])})"
                if isinstance(value, (str, int, float)) else "")
            raise ConfigError(f"{path}: expected a list, got {value!r}{hint}")
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        item = args[0] if args else Any
        return tuple(_convert(item, v, f"{path}[{i}]") for i, v in enumerate(value))
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: expected an object, got {value!r}{_json_hint(value)}")
        return dict(value)
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        try:
            return float(value)
        except OverflowError:  # an integer of more than about 308 digits
            raise ConfigError(f"{path}: expected a number, got {_brief_repr(value)}, too "
                              "large for a floating-point number") from None
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
        return value
    return value


def closest(word: Any, known, cutoff: float = 0.75) -> str | None:
    """The name of ``known`` closest to a mistyped ``word`` (``difflib``'s similarity at
    least ``cutoff``), or None: what every "did you mean" of the project suggests. The
    same name in another case comes first ("2RB" for "2rb"), then the one name that
    begins with a word of 4 characters or more ("games_per_pair" for "games", rather
    than the closer "game")."""
    known, word = [str(k) for k in known], str(word)
    same = [k for k in known if k.lower() == word.lower()]
    begun = [k for k in known if len(word) >= 4 and k.lower().startswith(word.lower())]
    close = same or (begun if len(begun) == 1 else
                     difflib.get_close_matches(word, known, n=1, cutoff=cutoff))
    return close[0] if close else None


def closest_file(path, suffix: str) -> str | None:
    """The file ending in ``suffix`` in ``path``'s folder whose name is closest to
    ``path``'s (the suffix left out: ``final`` -> ``final.gjx``; a typo: ``az_9x9.json``
    -> ``az_9x9_cpu.json``), as a path beside ``path``; None when none is close."""
    folder, name = os.path.split(str(path))
    try:
        files = [f for f in os.listdir(folder or ".") if f.endswith(suffix)]
    except OSError:  # no such folder, or not one
        return None
    close = (name + suffix if name + suffix in files
             else closest(name, files, cutoff=0.8))
    return os.path.join(folder, close) if close else None


def did_you_mean(word: Any, known, prefix: str = "") -> str:
    """`` (did you mean 'PREFIX+name'?)`` for the name of ``known`` closest to a mistyped
    ``word`` (a key, an option; `closest`), or "" when none is close."""
    close = closest(word, known)
    return f" (did you mean {prefix + close!r}?)" if close else ""


def from_dict(cls, data: Mapping[str, Any], path: str = ""):
    """Build the frozen dataclass ``cls`` from a (nested) mapping, checking every key."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path or cls.__name__}: expected an object, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for key, value in data.items():
        dotted = f"{path}.{key}" if path else key
        if key in _META_KEYS and not path:
            continue
        if key not in fields:
            hint = did_you_mean(key, fields, f"{path}." if path else "")
            raise ConfigError(f"unknown config key {dotted!r}{hint}; valid keys here: "
                              f"{', '.join(sorted(fields))}")
        # a NumPy number given as an override (its lists and dicts too) as Python's
        kwargs[key] = _convert(hints[key], plain_scalars(value), dotted)
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{path or cls.__name__}: {error}") from None


def to_dict(config) -> dict[str, Any]:
    """The JSON-able dict of a (nested) config dataclass; tuples become lists."""

    def plain(x):
        if dataclasses.is_dataclass(x):
            return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x) if f.init}
        if isinstance(x, (list, tuple)):
            return [plain(v) for v in x]
        if isinstance(x, Mapping):
            return {str(k): plain(v) for k, v in x.items()}
        return x

    return plain(config)


def read_json(path, what: str = "config file"):
    """The JSON value of a settings file; a `ConfigError` naming the file (as ``what``)
    when it is missing, a directory, not UTF-8 text or not JSON."""
    name = f"{what} {str(path)!r}"
    try:
        # (utf-8-sig: a byte-order mark, which some editors write first, is skipped)
        return loads(pathlib.Path(path).read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        close = closest_file(path, ".json")
        raise ConfigError(f"{name} does not exist"
                          + (f" (did you mean {close!r}?)" if close else "")) from None
    except IsADirectoryError:
        raise ConfigError(f"{name} is a directory, not a JSON file") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{name} is not UTF-8 text (byte {error.start}: {error.reason}); "
                          "it should be JSON") from None
    except DuplicateKeyError as error:
        raise ConfigError(f"{name}: {error}") from None
    except json.JSONDecodeError as error:
        raise ConfigError(f"{name} is not valid JSON: {error}") from None
    except RecursionError:
        raise ConfigError(f"{name} is not valid JSON: nested too deeply to read") from None
    except OSError as error:
        raise ConfigError(f"{name} cannot be read: {error}") from None


def algorithm_of(path) -> str:
    """The ``algorithm`` named by a config file (``"alphazero"`` when it names none)."""
    data = read_json(path)
    if not isinstance(data, dict):
        kind = ("null" if data is None else "true/false" if isinstance(data, bool) else
                "a number" if isinstance(data, (int, float)) else "a string" if isinstance(
                    data, str) else "an array")
        raise ConfigError(f"config file {str(path)!r} must hold a JSON object, got {kind}")
    algorithm = data.get("algorithm", "alphazero")
    if not isinstance(algorithm, str):
        raise ConfigError(f"config file {str(path)!r}: 'algorithm' must be a string")
    return algorithm


def load_file(
    cls, path, overrides: Sequence[str] | Mapping[str, Any] = (),
    variants: str | Sequence[str] = ()
):
    """Read a JSON config file into ``cls``: the named ``variants`` first, in order (one
    name or a list), then ``overrides``. Returns ``(config, description)``: the config and
    the file's ``description`` text."""
    variants = [variants] if isinstance(variants, str) else list(variants)  # not letters
    path = pathlib.Path(path)
    data = read_json(path)
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a JSON object")
    if not data:  # an empty file written by mistake would start a long default run
        raise ConfigError(f"config file {str(path)!r} is an empty object and sets nothing; "
                          'for every default write {"algorithm": "alphazero"} (or another '
                          "algorithm)")
    known = data.get("variants", {})
    algorithm = data.get("algorithm", "alphazero")
    itself = data
    where = f"config file {str(path)!r}"
    if not isinstance(known, Mapping) or not all(
            isinstance(v, Mapping) for v in known.values()):
        raise ConfigError(f"{where}: variants must be an object of named "
                          'variants, each an object of overrides ({"smoke": {"train.batch": '
                          f"8}}}}), got {brief_json(known)}")
    for i, name in enumerate(variants):
        if not isinstance(name, str):
            raise ConfigError(f"a variant is named by a string, got {name!r}")
        if name in variants[:i]:  # applying it again changes nothing: a slip, say so
            raise ConfigError(f"variant {name!r} is given more than once; once is enough "
                              "(the command line's --smoke is the variant 'smoke')")
        if name not in known:
            raise ConfigError(f"{where} has no variant {name!r}{did_you_mean(name, known)}; "
                              f"it has: {', '.join(sorted(known)) or 'none'}")
        if known[name].get("algorithm", algorithm) != algorithm:
            raise ConfigError(f"{where}: variant {name!r} sets algorithm, "
                              f"which the file chooses ({algorithm!r}); a variant cannot "
                              "change it")
    if not isinstance(algorithm, str):  # (as algorithm_of refuses it)
        raise ConfigError(f"{where}: 'algorithm' must be a string, got {brief_json(algorithm)}")
    _check_learner_class(cls, where, algorithm)
    overrides = _override_mapping(overrides)
    _check_meta_overrides(path, overrides, algorithm)
    for name in variants:  # one that cannot apply: the file's own mistake, else its own
        try:
            data = apply_overrides(data, known[name], schema=cls)
        except ConfigError as err:
            raise _unappliable(cls, where, itself,
                               f"{where}, its variant {name!r}: {err}") from None
    try:
        data = apply_overrides(data, overrides, schema=cls)
    except ConfigError as err:
        raise _unappliable(cls, where, itself,
                           f"{err} (from the overrides, not {where})") from None
    try:
        config = _built(cls, data)
    except ConfigError as err:
        raise _attributed(err, cls, where, itself, known, variants) from None
    description = data.get("description", "")
    if variants:
        description += f" [variants: {', '.join(variants)}]"
        _check_without_variants(cls, path, itself, overrides, variants)
    named = ", ".join(repr(name) for name in variants)
    warn_inert(config, where + (f", its variant{'s' * (len(variants) > 1)} {named}"
                                if variants else "") + (", and the overrides" if overrides
                                                        else ""))
    return config, description


def _built(cls, data: Mapping):
    """``from_dict(cls, data)`` after checking the file's own ``description`` key."""
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(f"description: expected a string, got {brief_json(description)}")
    return from_dict(cls, data)


def _unappliable(cls, where: str, itself: Mapping, message: str) -> ConfigError:
    """The error of a variant or override that cannot be applied (it sets ``a.b`` where
    ``a`` is no object): the config file's own mistake when the file alone does not
    build (``"search": "gumbel"``), else ``message``."""
    try:
        _built(cls, itself)
    except ConfigError as mistake:
        return ConfigError(f"{where}: {mistake}")
    return ConfigError(message)


def _attributed(err: ConfigError, cls, where: str, itself: Mapping, known: Mapping,
                variants: Sequence[str]) -> ConfigError:
    """``err``, raised building a config from a file, its ``variants`` and overrides, as
    an error that says which holds the mistake: the file itself or the first variant that
    brings it in (whichever gives this very error first), else the overrides when the
    file and its variants build without them. Otherwise (an override mends one mistake
    and makes another, variants that only work together) ``err`` as it is."""
    text, data = str(err), itself
    for name in (None, *variants):
        step = where if name is None else f"{where}, its variant {name!r}"
        try:
            if name is not None:
                data = apply_overrides(data, known[name])
            _built(cls, data)
        except ConfigError as found:
            return ConfigError(f"{step}: {text}") if str(found) == text else err
    return ConfigError(f"{text} (from the overrides, not {where})")


def _check_learner_class(cls, where: str, algorithm) -> None:
    """ConfigError when ``cls`` is the config class of one learner and the file is
    another's (``algorithm`` its "algorithm"): ``load_file(AlphaZeroConfig,
    "dqn_9x9_cpu.json")`` would otherwise fail on the first key the classes do not
    share."""
    import algorithms  # the learners' names (the modules are not imported)

    ours = [name for name, (module, class_name) in algorithms.LEARNERS.items()
            if (module, class_name) == (cls.__module__, cls.__qualname__)]
    if ours and algorithm in algorithms.LEARNERS and algorithm not in ours:
        module, class_name = algorithms.LEARNERS[algorithm]
        raise ConfigError(f"{where} is a config of {algorithm!r} (its \"algorithm\"), not of "
                          f"{ours[0]!r}: read it with {module}.{class_name} "
                          f"(algorithms.learner_entry({algorithm!r}))")


def _check_without_variants(cls, path, itself: dict, overrides: Mapping[str, Any],
                            variants: Sequence[str]) -> None:
    """ConfigError for a mistake in the file that its variants hide (they replace the
    setting): the file is refused when neither it alone nor it with the overrides (which
    may mend it) is a valid config. An override meant for a variant's settings may not fit
    the file without it, so the file alone has the last word."""
    try:
        from_dict(cls, apply_overrides(itself, overrides))
        return
    except ConfigError:
        pass
    try:
        from_dict(cls, itself)
    except ConfigError as err:
        raise ConfigError(f"config file {str(path)!r}: {err} (in the file itself: the "
                          f"variant(s) {', '.join(variants)} replace it, so only a run "
                          "without them would fail)") from None


def same_definition(old, new) -> bool:
    """Whether ``new`` is ``old`` or the same definition made again: a class or function
    of the same module and qualified name, defined at a module's top level or in a class
    (not a lambda, nor one made inside a function, of which a module can hold many
    different ones under one name), as when a notebook cell or a reloaded plugin
    registers it once more. The registries (`networks.register_network`,
    `agents.register_agent`) take such a registration again without ``replace=True``."""
    if old is new:
        return True
    names = [(getattr(f, "__module__", None), getattr(f, "__qualname__", None))
             for f in (old, new)]
    module, qualname = names[0]
    return (isinstance(module, str) and isinstance(qualname, str) and names[0] == names[1]
            and "<lambda>" not in qualname and "<locals>" not in qualname)


def clip(text: str, width: int = 40) -> str:
    """``text`` cut to ``width`` characters (the last three ``...``), for an error
    message that quotes what it was given."""
    return text if len(text) <= width else text[: width - 3] + "..."


def _brief_repr(value, width: int = 60) -> str:
    """``repr(value)`` cut to ``width`` characters, for an error message that quotes a
    value it refuses (a long list is not echoed whole; an int too long for ``repr`` or a
    list nested too deeply is named by its type)."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    return clip(text, width)


def brief_json(value, width: int = 60) -> str:
    """``value`` as JSON, cut to ``width`` characters, for an error message."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):  # an int of > 4,300 digits too
        text = f"<{type(value).__name__}>"
    return clip(text, width)


def _check_meta_overrides(path, overrides: Mapping[str, Any], algorithm) -> None:
    """ConfigError for an override the config file keeps for itself: a different
    ``algorithm`` (the rest of the file is that algorithm's config) or the ``variants``
    (applied before any override)."""
    for key, value in overrides.items():
        if key == "algorithm" and value != algorithm:
            raise ConfigError(
                f"algorithm is chosen by the config file ({str(path)!r}: {algorithm!r}); "
                f"an override algorithm={brief_json(value)} (from --set, a sweep or "
                "overrides=) cannot change it: use a config file of that algorithm")
        if key.split(".")[0] == "variants":
            raise ConfigError(f"{key}: variants are applied (--variant, --smoke) before "
                              "any override; an override cannot change them")
