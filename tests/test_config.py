import dataclasses
import json
import pathlib
import re
import typing

import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from algorithms import LEARNERS, learner_entry
from gomoku_jax import config as cfglib

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / "experiments" / "configs"


@dataclasses.dataclass(frozen=True)
class Inner:
    depth: int = 2
    rate: float = 0.1
    name: str = "a"
    tags: tuple[str, ...] = ()

    def __post_init__(self):
        if self.depth < 1:
            raise ValueError(f"depth must be >= 1, got {self.depth}")


@dataclasses.dataclass(frozen=True)
class Outer:
    inner: Inner = Inner()
    maybe: Inner | None = None
    seed: int = 0
    flag: bool = False


def test_parse_override_reads_json_values_else_strings():
    assert cfglib.parse_override("a.b=3") == ("a.b", 3)
    assert cfglib.parse_override("x=0.5") == ("x", 0.5)
    assert cfglib.parse_override("x=true") == ("x", True)
    assert cfglib.parse_override("x=null") == ("x", None)
    assert cfglib.parse_override('x=["p","q"]') == ("x", ["p", "q"])
    assert cfglib.parse_override("x=resnet") == ("x", "resnet")
    with pytest.raises(cfglib.ConfigError, match="key=value"):
        cfglib.parse_override("novalue")


def test_an_override_given_twice_is_refused_not_silently_dropped(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"seed": 1}))
    assert cfglib.load_file(Outer, path, ["seed=2", "inner.depth=3"])[0].seed == 2
    message = r"override 'seed' is given twice \('seed=2' and 'seed =5'\); give it once"
    with pytest.raises(cfglib.ConfigError, match=message):
        cfglib.load_file(Outer, path, ["seed=2", "inner.depth=3", "seed =5"])
    with pytest.raises(cfglib.ConfigError, match=message):
        cfglib.apply_overrides({"seed": 1}, ["seed=2", "seed =5"])
    assert cfglib.parse_overrides(["a.b=1", "a.c=2"]) == {"a.b": 1, "a.c": 2}


def test_from_dict_builds_nested_frozen_config_and_round_trips():
    cfg = cfglib.from_dict(Outer, {"inner": {"depth": 3, "rate": 1, "tags": ["t"]},
                                   "maybe": {"name": "m"}, "seed": 4})
    assert cfg == Outer(Inner(3, 1.0, "a", ("t",)), Inner(name="m"), 4)
    assert isinstance(cfg.inner.rate, float)
    assert cfglib.from_dict(Outer, json.loads(json.dumps(cfglib.to_dict(cfg)))) == cfg


@pytest.mark.parametrize("override, message", [
    ("inner.depht=3", "unknown config key 'inner.depht' (did you mean 'inner.depth'?); "
                      "valid keys here: depth, name, rate, tags"),
    ("sed=1", "unknown config key 'sed' (did you mean 'seed'?)"),
    ("zzz=1", "unknown config key 'zzz'; valid keys here"),  # nothing close: no guess
    ("inner.depth=2.5", "inner.depth: expected an integer"),
    ("flag=1", "flag: expected true or false"),
    ("inner.depth=0", "depth must be >= 1"),
    ("inner=3", "inner: expected an object"),
    # one item for a list: how it is written as a list of one
    ("inner.tags=fast", "inner.tags: expected a list, got 'fast' (one item is a list too: "
                        '["fast"])'),
    ("inner.tags=[fast", "inner.tags: expected a list, got '[fast' (a string: as JSON it "),
    # text meant as JSON but not JSON (unquoted keys) is read as a string: JSON's complaint
    ("inner={depth: 3}", "inner: expected an object, got '{depth: 3}' (a string: as JSON it "
                         "fails with 'Expecting property name enclosed in double quotes' at "
                         "column 2)"),
])
def test_wrong_keys_and_values_are_named(override, message):
    data = cfglib.apply_overrides({}, [override])
    with pytest.raises(cfglib.ConfigError, match=re.escape(message)):
        cfglib.from_dict(Outer, data)


def test_an_object_for_a_section_that_would_drop_its_settings_is_refused(tmp_path):
    """``inner={...}`` replaces the section: where the file set settings the object leaves
    out, that would reset them silently, so it is refused, from an override or a variant;
    an object that gives them all, or a section the file left unset, is taken."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"inner": {"depth": 5, "rate": 0.3},
                                "variants": {"nested": {"inner": {"depth": 1}}}}))
    message = re.escape("inner={\"depth\": 3}: an object replaces the whole 'inner' section, "
                        "which would drop its rate as set before; set single settings with "
                        "dotted keys (inner.depth=...), or give every one")
    with pytest.raises(cfglib.ConfigError, match=message):
        cfglib.load_file(Outer, path, ['inner={"depth": 3}'])
    with pytest.raises(cfglib.ConfigError, match="variant 'nested': inner=.*would drop its rate"):
        cfglib.load_file(Outer, path, variants=["nested"])
    cfg, _ = cfglib.load_file(Outer, path, ['inner={"depth": 3, "rate": 0.5}'])
    assert (cfg.inner.depth, cfg.inner.rate) == (3, 0.5)
    cfg, _ = cfglib.load_file(Outer, path, ['maybe={"depth": 4}', "inner.depth=2"])
    assert cfg.maybe.depth == 4 and (cfg.inner.depth, cfg.inner.rate) == (2, 0.3)
    # an empty object names a setting it would drop; NumPy numbers are shown as numbers
    with pytest.raises(cfglib.ConfigError, match=re.escape(
            "inner={}: an object replaces the whole 'inner' section, which would drop its "
            "depth, rate as set before; set single settings with dotted keys "
            "(inner.depth=...)")):
        cfglib.load_file(Outer, path, ["inner={}"])
    with pytest.raises(cfglib.ConfigError, match=re.escape('inner={"depth": 3}: an object')):
        cfglib.load_file(Outer, path, {"inner": {"depth": np.int64(3)}})


def test_an_override_a_later_object_replaces_is_refused_not_silently_dropped(tmp_path):
    """``inner.depth=2`` then ``inner={...}``: the object would drop the setting without
    a word, so it is refused, naming the two; the object first, then the setting, is
    taken (it refines the object)."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"inner": {"depth": 5, "rate": 0.3}}))
    both = ["inner.depth=2", 'inner={"depth": 3, "rate": 0.5}']
    for overrides in (both, {"inner.depth": 2, "inner": {"depth": 3, "rate": 1}}):
        with pytest.raises(cfglib.ConfigError, match=re.escape(
                "override 'inner.depth' would be lost: the later override 'inner' sets that "
                "whole object; give 'depth' in the object, or set it after the object")):
            cfglib.load_file(Outer, path, overrides)
    cfg, _ = cfglib.load_file(Outer, path, both[::-1])
    assert (cfg.inner.depth, cfg.inner.rate) == (2, 0.5)
    # a key that only starts like another is not inside it
    cfg, _ = cfglib.load_file(Outer, path, ["seed=3", "inner.depth=2"])
    assert (cfg.seed, cfg.inner.depth) == (3, 2)


def test_load_file_applies_variants_in_order_then_overrides(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({
        "description": "demo", "inner": {"depth": 5},
        "variants": {"smoke": {"inner.depth": 1, "seed": 9}, "deep": {"inner.depth": 7}},
    }))
    cfg, text = cfglib.load_file(Outer, path)
    assert cfg.inner.depth == 5 and text == "demo"
    cfg, _ = cfglib.load_file(Outer, path, variants=["deep", "smoke"])
    assert (cfg.inner.depth, cfg.seed) == (1, 9)
    cfg, _ = cfglib.load_file(Outer, path, ["seed=3"], variants=["smoke"])
    assert cfg.seed == 3
    # one variant may be given as its name alone (not read as its letters)
    assert cfglib.load_file(Outer, path, variants="deep") == cfglib.load_file(
        Outer, path, variants=["deep"])
    with pytest.raises(cfglib.ConfigError, match="no variant 'tiny'.*deep, smoke"):
        cfglib.load_file(Outer, path, variants=["tiny"])
    with pytest.raises(cfglib.ConfigError, match="variant 'smoke' is given more than once"):
        cfglib.load_file(Outer, path, variants=("smoke", "deep", "smoke"))
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(cfglib.ConfigError, match="not valid JSON"):
        cfglib.load_file(Outer, tmp_path / "bad.json")
    with pytest.raises(cfglib.ConfigError, match=r"missing.json' does not exist$"):
        cfglib.load_file(Outer, tmp_path / "missing.json")
    for typed in ("c", "C.json", "cc.json"):  # the closest file is suggested
        with pytest.raises(cfglib.ConfigError, match=re.escape(
                f"does not exist (did you mean {str(path)!r}?)")):
            cfglib.load_file(Outer, tmp_path / typed)
    with pytest.raises(cfglib.ConfigError, match=re.escape(
            "no variant 'Deep' (did you mean 'deep'?); it has: deep, smoke")):
        cfglib.load_file(Outer, path, variants=["Deep"])
    # an empty object would be a default run of the whole experiment: refused
    (tmp_path / "empty.json").write_text("{}\n")
    with pytest.raises(cfglib.ConfigError, match=r"empty.json' is an empty object and sets "
                                                 r'nothing; for every default write \{"algorithm"'):
        cfglib.load_file(Outer, tmp_path / "empty.json")
    (tmp_path / "defaults.json").write_text('{"algorithm": "alphazero"}')
    assert cfglib.load_file(Outer, tmp_path / "defaults.json")[0] == Outer()


def test_a_mistake_in_the_file_that_a_variant_replaces_is_still_refused(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"inner": {"depth": "5"}, "variants": {"smoke": {"inner.depth": 1}}}))
    # Under the variant the bad value is replaced: the smoke run passed, the real one failed.
    with pytest.raises(cfglib.ConfigError, match=r"c.json': .*inner.depth.* \(in the file "
                                                 r"itself: the variant\(s\) smoke replace it, so "
                                                 r"only a run without them would fail\)"):
        cfglib.load_file(Outer, path, variants=["smoke"])
    with pytest.raises(cfglib.ConfigError, match="inner.depth"):
        cfglib.load_file(Outer, path)
    # an override that mends the file is taken, with or without the variant
    path.write_text(json.dumps({"inner": {"depth": "TODO"}, "variants": {"smoke": {"seed": 9}}}))
    for variants in ([], ["smoke"]):
        cfg, _ = cfglib.load_file(Outer, path, ["inner.depth=3"], variants=variants)
        assert cfg.inner.depth == 3
    # and one meant for what the variant sets need not fit the file without it: here
    # options of the network the variant chooses
    from algorithms.alphazero import AlphaZeroConfig

    path.write_text(json.dumps({
        "algorithm": "alphazero", "network": {"name": "resnet", "options": {"blocks": 1}},
        "variants": {"small": {"network": {"name": "simplenet", "options": {}}}}}))
    override = ["network.options.channels=[4, 4]"]
    with pytest.raises(cfglib.ConfigError, match="unknown option 'channels'"):
        cfglib.load_file(AlphaZeroConfig, path, override)  # resnet has no channels
    cfg, _ = cfglib.load_file(AlphaZeroConfig, path, override, variants=["small"])
    assert cfg.network.name == "simplenet" and tuple(cfg.network.options["channels"]) == (4, 4)


def test_a_mistake_is_traced_to_the_file_the_variant_or_the_overrides(tmp_path):
    from algorithms.alphazero import AlphaZeroConfig

    path = tmp_path / "c.json"
    file = f"config file {str(path)!r}"
    path.write_text(json.dumps({"algorithm": "alphazero", "serch": {},
                                "variants": {"smoke": {"seed": 1}}}))
    for variants in ([], ["smoke"]):
        with pytest.raises(cfglib.ConfigError) as err:
            cfglib.load_file(AlphaZeroConfig, path, variants=variants)
        assert str(err.value).startswith(f"{file}: unknown config key 'serch'"), err.value
    # a setting the variant cannot apply to the file: the file's own mistake is named
    path.write_text(json.dumps({"algorithm": "alphazero", "search": "gumbel",
                                "variants": {"smoke": {"search.num_simulations": 4}}}))
    with pytest.raises(cfglib.ConfigError) as err:
        cfglib.load_file(AlphaZeroConfig, path, variants=["smoke"])
    assert str(err.value) == f"{file}: search: expected an object, got 'gumbel'"
    # the variant's own mistake: the variant is named
    path.write_text(json.dumps({"algorithm": "alphazero", "variants": {
        "fine": {"seed": 2}, "smoke": {"network.options.filterz": 3}}}))
    with pytest.raises(cfglib.ConfigError) as err:
        cfglib.load_file(AlphaZeroConfig, path, variants=["fine", "smoke"])
    assert str(err.value).startswith(f"{file}, its variant 'smoke': AlphaZeroConfig: network: "
                                     "unknown option 'filterz'"), err.value
    # an override's: the overrides are named, not the file
    for variants in ([], ["fine"]):
        with pytest.raises(cfglib.ConfigError) as err:
            cfglib.load_file(AlphaZeroConfig, path, ["train.batch=8"], variants=variants)
        assert str(err.value).startswith("unknown config key 'train.batch'"), err.value
        assert str(err.value).endswith(f" (from the overrides, not {file})"), err.value
    # an override that cannot apply to the file's own mistake: the file's is named
    path.write_text(json.dumps({"algorithm": "alphazero", "search": "gumbel"}))
    with pytest.raises(cfglib.ConfigError) as err:
        cfglib.load_file(AlphaZeroConfig, path, ["search.num_simulations=4"])
    assert str(err.value) == f"{file}: search: expected an object, got 'gumbel'"
    # Where no one step gives this very error, it is left as it is (no wrong blame):
    # an override mends the file's mistake and another override makes one,
    path.write_text(json.dumps({"algorithm": "alphazero", "seed": "x",
                                "variants": {"smoke": {"seed": 1}}}))
    for overrides, variants in ((["seed=3", "train.batchsize=8"], []),
                                (["train.batchsize=8"], ["smoke"])):  # or a variant does
        with pytest.raises(cfglib.ConfigError) as err:
            cfglib.load_file(AlphaZeroConfig, path, overrides, variants=variants)
        assert str(err.value).startswith("unknown config key 'train.batchsize'"), err.value
        assert "config file" not in str(err.value)
    # and variants that only build together
    path.write_text(json.dumps({
        "algorithm": "alphazero", "network": {"name": "resnet", "options": {"blocks": 1}},
        "variants": {"a": {"network.name": "simplenet"},
                     "b": {"network.options": {"channels": [4, 4]}}}}))
    assert cfglib.load_file(AlphaZeroConfig, path, variants=["a", "b"])[0].network.name == (
        "simplenet")
    with pytest.raises(cfglib.ConfigError) as err:
        cfglib.load_file(AlphaZeroConfig, path, ["train.batchsize=8"], variants=["a", "b"])
    assert str(err.value).startswith("unknown config key 'train.batchsize'"), err.value
    assert "config file" not in str(err.value)


def test_a_file_of_another_learner_is_named_as_such(tmp_path):
    from algorithms.alphazero import AlphaZeroConfig
    from algorithms.dqn import DQNConfig

    path = "experiments/configs/dqn_9x9_cpu.json"
    with pytest.raises(cfglib.ConfigError) as err:
        cfglib.load_file(AlphaZeroConfig, path)
    assert str(err.value) == (
        f"config file {path!r} is a config of 'dqn' (its \"algorithm\"), not of 'alphazero': "
        "read it with algorithms.dqn.DQNConfig (algorithms.learner_entry('dqn'))")
    assert isinstance(cfglib.load_file(DQNConfig, path)[0], DQNConfig)
    # an algorithm that is no string is refused as such (not a TypeError)
    odd = tmp_path / "odd.json"
    odd.write_text('{"algorithm": ["dqn"]}')
    with pytest.raises(cfglib.ConfigError, match=r"odd.json': 'algorithm' must be a string, "
                                                 r'got \["dqn"\]'):
        cfglib.load_file(DQNConfig, odd)
    # a file that names no algorithm is AlphaZero's
    bare = tmp_path / "bare.json"
    bare.write_text('{"seed": 3}')
    with pytest.raises(cfglib.ConfigError, match="is a config of 'alphazero'"):
        cfglib.load_file(DQNConfig, bare)


def test_a_config_file_may_begin_with_a_byte_order_mark(tmp_path):
    from algorithms.dqn import DQNConfig

    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"algorithm": "dqn", "seed": 7}')
    assert cfglib.load_file(DQNConfig, path)[0].seed == 7
    assert cfglib.algorithm_of(path) == "dqn"


def test_the_file_keeps_its_algorithm_and_variants_from_overrides(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({
        "algorithm": "dqn", "inner": {"depth": 5},
        "variants": {"smoke": {"seed": 9}, "other": {"algorithm": "alphazero"},
                     "same": {"algorithm": "dqn", "seed": 2}},
    }))
    for overrides in (["algorithm=alphazero"], ["algorithm=banana"], {"algorithm": "x"}):
        with pytest.raises(cfglib.ConfigError, match=r"algorithm is chosen by the config file "
                                                     r"\(.*c.json': 'dqn'\); an override"):
            cfglib.load_file(Outer, path, overrides)
    with pytest.raises(cfglib.ConfigError, match="variants are applied .* before any override"):
        cfglib.load_file(Outer, path, ["variants.smoke.seed=3"], variants=["smoke"])
    with pytest.raises(cfglib.ConfigError, match="variant 'other' sets algorithm"):
        cfglib.load_file(Outer, path, variants=["other"])
    # the file's own algorithm, restated, changes nothing
    cfg, _ = cfglib.load_file(Outer, path, ["algorithm=dqn"], variants=["same"])
    assert cfg.seed == 2


@pytest.mark.parametrize("data, args, message", [
    ({"variants": {"smoke": 5}}, {"variants": ["smoke"]},
     r"variants must be an object of named variants, each an object of overrides .* got "
     r'\{"smoke": 5\}'),
    ({"variants": ["smoke"]}, {}, r'variants must be an object .* got \["smoke"\]'),
    ({"variants": {"smoke": {}}}, {"variants": [1]}, "a variant is named by a string, got 1"),
    ({"description": 5, "seed": 1}, {}, "description: expected a string, got 5"),
    ({"seed": 1}, {"overrides": ["description=5"]}, "description: expected a string, got 5"),
    ({"seed": 1}, {"overrides": ["seed=" + "[" * 100_000]}, "seed: the value is JSON nested too "
                                                           "deeply"),
])
def test_meta_keys_of_the_wrong_kind_are_named(tmp_path, data, args, message):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    with pytest.raises(cfglib.ConfigError, match=message):
        cfglib.load_file(Outer, path, **args)


def test_json_nested_too_deeply_is_not_valid_json(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(cfglib.ConfigError, match="deep.json' is not valid JSON: nested too "
                                                 "deeply to read"):
        cfglib.load_file(Outer, path)


def test_a_key_given_twice_is_refused_not_silently_dropped(tmp_path):
    path = tmp_path / "twice.json"
    path.write_text('{"seed": 1, "inner": {"depth": 2, "rate": 0.5, "depth": 4}}')
    with pytest.raises(cfglib.ConfigError, match=r"twice.json': the key "
                       r"'depth' appears twice in one object \(beside 'rate'\), the second "
                       r"time at line 1 column 48; give it once"):
        cfglib.load_file(Outer, path)
    with pytest.raises(cfglib.ConfigError, match=r"override inner: the key 'depth' appears "
                                                 r"twice in one object \(its only key\)"):
        cfglib.parse_override('inner={"depth": 2, "depth": 3}')
    path.write_text('{"seed": 1, "inner": {"depth": 2, "rate": 0.5}}')  # once each: read
    assert cfglib.load_file(Outer, path)[0].inner.depth == 2
    assert cfglib.parse_override('inner={"depth": 2}') == ("inner", {"depth": 2})


@pytest.mark.parametrize("text, kind", [("[1, 2]", "an array"), ('"az"', "a string"),
                                        ("3", "a number"), ("null", "null"),
                                        ("true", "true/false")])
def test_a_config_that_is_not_an_object_says_so(tmp_path, text, kind):
    path = tmp_path / "c.json"
    path.write_text(text)
    for read in (cfglib.algorithm_of, lambda p: cfglib.load_file(Outer, p)):
        with pytest.raises(cfglib.ConfigError, match=r"c.json' must hold a JSON object"):
            read(path)
    with pytest.raises(cfglib.ConfigError, match=rf"must hold a JSON object, got {kind}$"):
        cfglib.algorithm_of(path)


def test_a_key_given_twice_is_located_at_its_second_time():
    text = ('{"a": 1,\n "b": {"c": "}{,\\"c\\": [", "d": [{"c": 0}, "c"],\n'
            '   "c": 2},\n "a": 3}')
    with pytest.raises(cfglib.DuplicateKeyError) as caught:
        cfglib.loads(text)
    error = caught.value  # the inner object closes first: its "c" is the one refused
    assert (error.key, error.lineno, error.colno) == ("c", 3, 4)
    assert text[error.pos:].startswith('"c": 2') and str(error).endswith(
        "the second time at line 3 column 4; give it once")
    with pytest.raises(cfglib.DuplicateKeyError, match="line 3 column 4;"):
        cfglib.loads(text.encode("utf-16"))  # bytes: json's encodings, the same place
    with pytest.raises(cfglib.DuplicateKeyError, match="key 'a' .* line 4 column 2;"):
        cfglib.loads(text.replace('"c": 2', '"e": 2'))  # then the outer "a"


def test_an_integer_too_long_to_read_is_a_json_error_at_its_place(tmp_path):
    # Python's int() reads at most 4,300 digits; json.loads then raises a bare ValueError
    text = '{"train": {"seed": 1,\n  "iterations": ' + "9" * 5000 + "}}"
    with pytest.raises(json.JSONDecodeError) as caught:
        cfglib.loads(text)
    error = caught.value
    assert (error.lineno, error.colno) == (2, 17) and text[error.pos:].startswith("999")
    assert str(error).startswith("a number of 5000 digits, more than can be read")
    assert cfglib.loads('{"a": ' + "9" * 4300 + "}")["a"] == int("9" * 4300)  # the limit
    path = tmp_path / "long.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="a number of 5000 digits.*line 2 column 17"):
        cfglib.read_json(path)


def test_an_integer_too_large_for_a_float_setting_is_a_config_error_naming_it():
    # 10**400 reads as a JSON integer, but float() of it raises OverflowError, which is not
    # a ValueError: the command line would print a traceback instead of the setting's name
    with pytest.raises(cfglib.ConfigError, match=r"^inner\.rate: expected a number, got "
                                                 r"1000.*, too large for a floating-point "
                                                 r"number"):
        cfglib.from_dict(Outer, {"inner": {"rate": 10**400}})
    assert cfglib.from_dict(Outer, {"inner": {"rate": 10**300}}).inner.rate == 1e300


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.integers() | st.text(max_size=4),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=12),
       st.text(max_size=3), st.data())
def test_the_second_time_of_a_repeated_key_is_where_json_refuses_it(value, key, data):
    # a random document with one object given `key` twice; the error points at the second
    head = {key: value, **{f"{key}_{i}": i for i in range(data.draw(st.integers(0, 2)))}}
    body = json.dumps(head, indent=data.draw(st.sampled_from([None, 1])))
    second = len(body[:-1].rstrip()) + 2  # where the key is written again
    text = body[:-1].rstrip() + f', {json.dumps(key)}: {json.dumps(value)}}}'
    for _ in range(data.draw(st.integers(0, 2))):  # buried in arrays and objects
        outer = data.draw(st.sampled_from(['[1, {0}, "}}"]', '{{"x": {0}}}', '[{0}]']))
        second += outer.format("\0").index("\0")
        text = outer.format(text)
    with pytest.raises(cfglib.DuplicateKeyError) as caught:
        cfglib.loads(text)
    error = caught.value
    assert error.key == key and error.pos == second
    assert (error.lineno, error.colno) == (text.count("\n", 0, error.pos) + 1,
                                           error.pos - text.rfind("\n", 0, error.pos))
    assert f"line {error.lineno} column {error.colno}" in str(error)


def test_a_sweep_refuses_to_sweep_or_override_the_algorithm(tmp_path):
    from gomoku_jax import sweep

    config = "experiments/configs/az_9x9_cpu.json"
    with pytest.raises(cfglib.ConfigError, match="algorithm is chosen by the config file"):
        sweep.sweep(config, "algorithm", ["dqn"], workdir=tmp_path / "a", variant="smoke")
    with pytest.raises(cfglib.ConfigError, match="algorithm is chosen by the config file"):
        sweep.sweep(config, "seed", [1], overrides=["algorithm=dqn"], workdir=tmp_path / "b",
                    variant="smoke")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_check_int_names_a_bare_key_and_takes_any_integer_without_a_minimum():
    cfglib.check_int("", "seed", -3, None)
    with pytest.raises(ValueError, match=r"^seed must be an integer, got 'abc'$"):
        cfglib.check_int("", "seed", "abc", None)
    with pytest.raises(ValueError, match=r"^train.steps must be an integer >= 1, got 0$"):
        cfglib.check_int("train", "steps", 0)


def test_seeds_are_kept_to_32_bits_everywhere_they_are_given():
    import argparse

    cfglib.check_seed("config", "seed", cfglib.SEED_MAX)
    for bad in (-1, cfglib.SEED_MAX + 1, 10**30, 1.0, True):
        with pytest.raises(ValueError, match=rf"config.seed must be an integer from 0 to "
                                             rf"{cfglib.SEED_MAX}, got {bad!r}"):
            cfglib.check_seed("config", "seed", bad)
    assert cfglib.seed_argument("7") == 7
    for text in ("-1", "99999999999999999999", "1.5", "x"):
        with pytest.raises(argparse.ArgumentTypeError, match=rf"from 0 to {cfglib.SEED_MAX}"):
            cfglib.seed_argument(text)


def _numpy_leaves(value):
    """``value`` (a config's `to_dict`) with every number and bool as a NumPy scalar."""
    if isinstance(value, dict):
        return {key: _numpy_leaves(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_numpy_leaves(item) for item in value]
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, int):
        return np.int64(value)
    if isinstance(value, float):
        return np.float64(value)
    return value


def _built_directly(cls, data):
    """``cls`` built by calling the dataclasses themselves (not `from_dict`), innermost
    first, so every config's own ``__post_init__`` meets the NumPy values."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for field in dataclasses.fields(cls):
        if field.name not in data:
            continue
        value, kind = data[field.name], hints[field.name]
        kinds = [kind, *typing.get_args(kind)]
        inner = next((k for k in kinds if dataclasses.is_dataclass(k)), None)
        if inner is not None and isinstance(value, dict):
            value = _built_directly(inner, value)
        elif isinstance(value, list):  # a tuple field, maybe of configs (DQN's phases)
            items = next((k for k in typing.get_args(kind) if dataclasses.is_dataclass(k)),
                         None)
            value = tuple(_built_directly(items, v) if items is not None and isinstance(v, dict)
                          else v for v in value)
        kwargs[field.name] = value
    return cls(**kwargs)


@pytest.mark.parametrize("algorithm", sorted(LEARNERS))
def test_a_config_built_from_numpy_values_is_the_one_built_from_python_values(algorithm):
    cls, _ = learner_entry(algorithm)
    for path in sorted(CONFIGS.glob("*.json")):
        data = cfglib.read_json(path)
        if cfglib.algorithm_of(path) != algorithm or "smoke" not in data.get("variants", {}):
            continue  # not a training config (a tournament's, say)
        config, _ = cfglib.load_file(cls, path)
        plain = cfglib.to_dict(config)
        numpy = _numpy_leaves(plain)
        assert "np.int64(" in repr(numpy) and "np.float64(" in repr(numpy)  # really NumPy
        for built in (cfglib.from_dict(cls, numpy), _built_directly(cls, numpy)):
            assert built == config, path.name
            assert hash(built) == hash(config), path.name
            assert json.dumps(cfglib.to_dict(built)) == json.dumps(plain), path.name


def test_numpy_settings_are_stored_as_python_values_and_still_checked():
    from algorithms.alphazero import SelfPlaySettings
    from gomoku_jax.search import SearchConfig

    settings_ = SelfPlaySettings(batch=np.int32(8), temperature=np.float32(0.5),
                                 opponent="heuristic", opponent_greedy=np.True_)
    assert (settings_.batch, settings_.temperature, settings_.opponent_greedy) == (8, 0.5, True)
    assert [type(v) for v in (settings_.batch, settings_.temperature,
                              settings_.opponent_greedy)] == [int, float, bool]
    assert SearchConfig(num_simulations=np.uint8(8)).num_simulations == 8
    with pytest.raises(ValueError, match=r"selfplay.batch must be an integer >= 1, got 0"):
        SelfPlaySettings(batch=np.int64(0))
    with pytest.raises(ValueError, match=r"selfplay.temperature must be in \[0.0, 100.0\], "
                                         r"got nan"):
        SelfPlaySettings(temperature=np.float32("nan"))
    with pytest.raises(ValueError, match=r"selfplay.batch must be an integer >= 1, got 8.0"):
        SelfPlaySettings(batch=np.float64(8.0))
    # an override given from Python as a NumPy number reads as the number
    path = CONFIGS / "az_9x9_cpu.json"
    from algorithms.alphazero import AlphaZeroConfig
    config, _ = cfglib.load_file(AlphaZeroConfig, path, {"selfplay.batch": np.int64(12),
                                                         "train.learning_rate": np.float32(0.003)})
    assert (config.selfplay.batch, config.train.learning_rate) == (12, 0.003)  # float32's


def test_check_int_takes_numpy_integers_as_ints_and_refuses_bools_and_floats():
    assert cfglib.check_int("", "n", np.int16(5)) == 5
    assert type(cfglib.check_int("", "n", np.uint64(5))) is int
    assert cfglib.check_int("", "n", None, allow_none=True) is None
    for bad in (True, np.True_, 5.0, np.float32(5), "5", None):
        with pytest.raises(ValueError, match=r"^n must be an integer >= 1, got "):
            cfglib.check_int("", "n", bad)
    with pytest.raises(ValueError, match=r"^n must be an integer from 1 to 3 or None, got np.int8\(4\)$"):
        cfglib.check_int("", "n", np.int8(4), 1, 3, allow_none=True)


def test_check_number_takes_numpy_numbers_as_floats_and_refuses_bools():
    assert cfglib.check_number("o", "x", np.float32(0.5), 0.0, 1.0) == 0.5
    assert type(cfglib.check_number("o", "x", np.int64(1), 0.0, 1.0)) is float
    for bad in (True, np.True_, np.float32("inf"), "0.5", np.float64(1.5)):
        with pytest.raises(ValueError, match=r"^o.x must be in \[0.0, 1.0\], got "):
            cfglib.check_number("o", "x", bad, 0.0, 1.0)


def test_functions_taking_counts_take_numpy_integers(tmp_path):
    from gomoku_jax import agents, io
    from gomoku_jax.game import Gomoku

    env = Gomoku(5, 4)
    agent = agents.heuristic_agent(env, top_k=np.int64(2), block_probability=np.float32(0.5))
    assert agent.act(env.init(jax.random.PRNGKey(0)), jax.random.PRNGKey(1)) in range(25)
    with pytest.raises(ValueError, match=r"heuristic_agent.top_k must be an integer >= 1"):
        agents.heuristic_agent(env, top_k=np.int64(0))
    with pytest.raises(ValueError, match=r"max_to_keep must be an integer >= 1 or None"):
        io.Checkpointer(tmp_path / "run", config={"a": 1}, max_to_keep=True)
    assert not (tmp_path / "run").exists()


def test_a_float32_becomes_its_shortest_decimal_whatever_numpys_print_options():
    before = np.get_printoptions()
    try:
        np.set_printoptions(legacy="1.13", precision=3)  # str() of a float32 would round
        for value in (0.123456789, 1234567.9, 1e-30, 0.001):
            plain = cfglib.plain_scalars(np.float32(value))
            assert type(plain) is float and np.float32(plain) == np.float32(value)
            assert len(repr(plain)) <= len(repr(float(np.float32(value))))
        assert cfglib.plain_scalars(np.float32(0.001)) == 0.001
    finally:
        np.set_printoptions(**before)


def test_a_bfloat16_becomes_the_shortest_decimal_that_is_the_same_bfloat16():
    import ml_dtypes

    bf16 = ml_dtypes.bfloat16
    assert bf16(0.001).item() == 0.00099945068359375  # what .item() alone would give
    for value, shortest in ((0.001, 0.001), (0.1, 0.1), (-0.002, -0.002), (3e-4, 3e-4),
                            (123456.0, 123400.0), (1.0, 1.0)):
        plain = cfglib.plain_scalars(bf16(value))
        assert type(plain) is float and plain == shortest
    assert cfglib.plain_scalars([bf16(0.001), {"lr": bf16(0.01)}]) == [0.001, {"lr": 0.01}]
    # every finite bfloat16 converts back to itself, from the float and through float32
    every = np.arange(2**16, dtype=np.uint16).view(bf16)
    for value in every[np.isfinite(every.astype(np.float32))]:
        plain = cfglib.plain_scalars(value)
        assert bf16(plain) == value and bf16(np.float32(plain)) == value, value
    nan, inf = (cfglib.plain_scalars(bf16(x)) for x in ("nan", "inf"))
    assert np.isnan(nan) and inf == float("inf")
    assert str(cfglib.plain_scalars(bf16(-0.0))) == "-0.0"
    for kind in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2):  # the other small floats
        assert cfglib.plain_scalars(kind(0.3)) == 0.3
        assert type(cfglib.plain_scalars(ml_dtypes.int4(3))) is int


def test_plain_values_gives_json_values_for_arrays_tuples_mappings_and_scalars():
    import json
    import types

    import jax.numpy as jnp

    value = {"lr": jnp.float32(0.001), "grid": (np.float32(0.1), jnp.arange(2)),
             "nested": types.MappingProxyType({"m": np.array([[1.5], [2.5]], np.float32)}),
             "zero_d": np.array(7), "flag": np.True_, "name": "b", "none": None}
    plain = cfglib.plain_values(value)
    assert plain == {"lr": 0.001, "grid": [0.1, [0, 1]], "nested": {"m": [[1.5], [2.5]]},
                     "zero_d": 7, "flag": True, "name": "b", "none": None}
    assert type(plain["grid"][1][0]) is int and type(plain["flag"]) is bool
    assert json.loads(json.dumps(plain)) == plain  # nothing NumPy is left


def test_the_shortest_decimal_of_a_small_float_is_numpys_for_every_float16():
    """The search `plain_scalars` runs for bfloat16 (NumPy's printing does not know it)
    gives, for every float16, the digits NumPy's shortest printing gives: the shortest
    decimal that reads back, the nearest of those, a tie to the even digit."""
    every = np.arange(2**16, dtype=np.uint16).view(np.float16)
    for value in every[np.isfinite(every)]:
        assert cfglib._shortest_float(value) == float(
            np.format_float_positional(value, unique=True)), value


def test_a_refused_value_is_quoted_briefly():
    import sys

    deep: list = []
    for _ in range(sys.getrecursionlimit() + 100):
        deep = [deep]
    checks = [lambda v: cfglib.check_int("Owner", "n", v),
              lambda v: cfglib.check_count("n", v),
              lambda v: cfglib.check_number("Owner", "x", v, 0.0, 1.0)]
    for check in checks:
        for bad in (list(range(100_000)), "x" * 100_000, deep):
            with pytest.raises(ValueError, match=r"must be .*, got ") as error:
                check(bad)
            assert len(str(error.value)) < 150, str(error.value)[:200]
        with pytest.raises(ValueError, match=r"got \[0, 1, 2, .*\.\.\.$"):
            check(list(range(100)))
    # an int too long for repr is named by its type, not by a ValueError of its own
    with pytest.raises(ValueError, match=r"^Owner.n must be an integer from 1 to 9, got <int>$"):
        cfglib.check_int("Owner", "n", 10**5000, 1, 9)
    with pytest.raises(ValueError, match=r"^Owner.x must be in \[0.0, 1.0\], got <int>$"):
        cfglib.check_number("Owner", "x", -10**5000, 0.0, 1.0)


def test_numbers_a_config_cannot_write_are_refused():
    import fractions

    from algorithms.alphazero import TrainSettings

    with pytest.raises(ValueError, match=r"train.learning_rate must be in"):
        TrainSettings(learning_rate=fractions.Fraction(1, 100))
    with pytest.raises(ValueError, match=r"^n must be an integer >= 1"):
        cfglib.check_int("", "n", fractions.Fraction(2, 1))


def test_equal_network_settings_hash_alike():
    from algorithms.alphazero import NetworkSettings

    pairs = ((NetworkSettings("resnet", {"blocks": 2, "dropout": 0}),
              NetworkSettings("resnet", {"blocks": 2, "dropout": 0.0})),
             (NetworkSettings("convnet", {"channels": [8, 16]}),
              NetworkSettings("convnet", {"channels": (8, 16)})))
    for a, b in pairs:
        assert hash(a) == hash(b)
    assert pairs[0][0] == pairs[0][1]
    assert hash(NetworkSettings("resnet", {"blocks": 2})) != hash(
        NetworkSettings("resnet", {"blocks": 3}))


# ------------------------------------------------------- settings that do nothing
def _inert(tmp_path, cls, data, overrides=(), variants=()):
    """The `ConfigWarning` messages of loading ``data`` as a config file."""
    import warnings

    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cfglib.load_file(cls, path, overrides, variants)
    return [str(w.message) for w in caught if issubclass(w.category, cfglib.ConfigWarning)]


def test_a_setting_that_does_nothing_is_warned_of(tmp_path):
    """A setting changed from its default that the others switch off is warned of,
    naming the file, the setting and why; the same setting where it acts is not."""
    from algorithms import alphazero, dqn, imitation, pipeline

    az = {"algorithm": "alphazero"}
    where = f"config file {str(tmp_path / 'c.json')!r}"
    assert _inert(tmp_path, alphazero.AlphaZeroConfig, az,
                  ['train.optimizer="adam"', "train.momentum=0.5"]) == [
        f"{where}, and the overrides: train.momentum (0.5) does nothing with train.optimizer "
        "'adam': only sgd uses it"]
    adam = {**az, "variants": {"adam": {"train.optimizer": "adam"}, "slow": {
        "train.momentum": 0.8}}}
    assert _inert(tmp_path, alphazero.AlphaZeroConfig, adam, variants=["adam", "slow"]) == [
        f"{where}, its variants 'adam', 'slow': train.momentum (0.8) does nothing with "
        "train.optimizer 'adam': only sgd uses it"]
    for overrides in (['train.optimizer="adam"'],  # momentum at its default
                      ['train.optimizer="sgd"', "train.momentum=0.5"]):  # where it acts
        assert _inert(tmp_path, alphazero.AlphaZeroConfig, az, overrides) == []
    gumbel = {**az, "search": {"algorithm": "gumbel"}}
    assert _inert(tmp_path, alphazero.AlphaZeroConfig,
                  {**gumbel, "selfplay": {"temperature": 0.5, "temperature_moves": 3}}) == [
        f"{where}: selfplay.{name} ({value}) does nothing with search.algorithm 'gumbel', "
        "which samples moves through its own Gumbel noise"
        for name, value in (("temperature", 0.5), ("temperature_moves", 3))]
    assert _inert(tmp_path, alphazero.AlphaZeroConfig,
                  {**gumbel, "selfplay": {"gumbel_moves": 10}}) == []
    assert _inert(tmp_path, alphazero.AlphaZeroConfig,
                  {**az, "search": {"algorithm": "puct"}, "selfplay": {"gumbel_moves": 10}}) == [
        f"{where}: selfplay.gumbel_moves (10) does nothing with search.algorithm 'puct': only "
        "gumbel uses it"]

    puct = {**az, "search": {"algorithm": "puct"}}
    assert _inert(tmp_path, alphazero.AlphaZeroConfig, puct,
                  ["selfplay.temperature_moves=0", "selfplay.temperature=0.5"]) == [
        f"{where}, and the overrides: selfplay.temperature (0.5) does nothing with "
        "selfplay.temperature_moves 0: every move is the most visited"]
    assert _inert(tmp_path, alphazero.AlphaZeroConfig, puct,
                  ["selfplay.temperature=0", "selfplay.temperature_moves=30"]) == [
        f"{where}, and the overrides: selfplay.temperature_moves (30) does nothing with "
        "selfplay.temperature 0: every move is the most visited"]
    assert _inert(tmp_path, alphazero.AlphaZeroConfig, puct,
                  ["selfplay.temperature=0.5", "selfplay.temperature_moves=30"]) == []

    # a pipeline's stages, named by their own keys (the search is the pipeline's)
    pipe = {"algorithm": "pipeline", "search": {"algorithm": "gumbel"},
            "imitation": {"data": {"paths": ["r.jsonl.gz"]}}}
    assert _inert(tmp_path, pipeline.PipelineConfig, pipe, [
        "selfplay.selfplay.temperature=0.5", 'master.train.optimizer="sgd"',
        "master.train.weight_decay=0.1", 'imitation.train.optimizer="adamw"',
        "imitation.train.momentum=0.5", "search.dirichlet_fraction=0.5"]) == [
        f"{where}, and the overrides: {text}" for text in (
            "imitation.train.momentum (0.5) does nothing with imitation.train.optimizer "
            "'adamw': only sgd uses it",
            "selfplay.selfplay.temperature (0.5) does nothing with search.algorithm 'gumbel', "
            "which samples moves through its own Gumbel noise",
            "master.train.weight_decay (0.1) does nothing with master.train.optimizer 'sgd': "
            "only adamw uses it")]

    q = {"algorithm": "dqn"}
    assert _inert(tmp_path, dqn.DQNConfig, q, ["train.target_tau=0.01",
                                                "train.target_period=500"]) == [
        f"{where}, and the overrides: train.target_period (500) does nothing with "
        "train.target_tau (0.01): the target network tracks the online one at every step"]
    assert _inert(tmp_path, dqn.DQNConfig, q, ["train.target_period=500"]) == []
    assert _inert(tmp_path, dqn.DQNConfig, q, ["eval.simulations=400"]) == [
        f"{where}, and the overrides: eval.simulations (400) does nothing for DDQN: its agent "
        "plays the legal move of highest Q, without a search"]
    # a phase's heuristic settings without heuristic games; self_opponent without self-play
    assert _inert(tmp_path, dqn.DQNConfig, q, [
        'curriculum.phases=[{"opponent": "random", "episodes": 10, "heuristic_blocks": 0.5}, '
        '{"opponent": {"heuristic": 1, "random": 1}, "episodes": 10, "heuristic_top_k": 9}]',
        'curriculum.self_opponent="latest"']) == [
        f"{where}, and the overrides: {text}" for text in (
            "curriculum.phases[0].heuristic_blocks (0.5) does nothing: the phase has no "
            "heuristic games",
            "curriculum.self_opponent ('latest') does nothing: no phase has self-play games")]
    assert _inert(tmp_path, dqn.DQNConfig, q, ['curriculum.self_opponent="latest"']) == []
    # how patterns are paid for, with none paid for (the plain game's reward)
    assert _inert(tmp_path, dqn.DQNConfig, q, ['rewards.shaping="none"',
                                                'rewards.form="potential"']) == [
        f"{where}, and the overrides: rewards.form ('potential') does nothing with "
        "rewards.shaping 'none': no pattern is paid for"]
    for paid in (['rewards.shaping="table1"'], ['rewards.shaping="none"',
                                                 'rewards.weights={"open_three": 0.1}']):
        assert _inert(tmp_path, dqn.DQNConfig, q, paid + ['rewards.form="potential"']) == []

    # a network's options: a ResNet's global-pooling settings without global pooling,
    # named once in a pipeline (whose stages share its network)
    gpool = ["network.options.gpool_channels=16", "network.options.gpool_every=2"]
    unused = [f"{where}, and the overrides: network.options.{name} ({value}) does nothing "
              "without global_pooling: the network has no global-pooling block"
              for name, value in (("gpool_channels", 16), ("gpool_every", 2))]
    resnet = {**az, "network": {"name": "resnet", "options": {"blocks": 3, "filters": 8}}}
    assert _inert(tmp_path, alphazero.AlphaZeroConfig, resnet, gpool) == unused
    assert _inert(tmp_path, alphazero.AlphaZeroConfig, resnet,
                  gpool + ["network.options.global_pooling=true"]) == []
    assert _inert(tmp_path, alphazero.AlphaZeroConfig, resnet,  # set to its default
                  ["network.options.gpool_every=3"]) == []
    assert _inert(tmp_path, pipeline.PipelineConfig,
                  {**pipe, "network": resnet["network"]}, gpool) == unused
    assert _inert(tmp_path, imitation.ImitationConfig,
                  {"algorithm": "imitation", "data": {"paths": ["r.jsonl.gz"]},
                   "network": resnet["network"]}, gpool) == unused

    im = {"algorithm": "imitation", "data": {"paths": ["r.jsonl.gz"]}}
    assert _inert(tmp_path, imitation.ImitationConfig, im, ["train.weight_decay=0.01"]) == [
        f"{where}, and the overrides: train.weight_decay (0.01) does nothing with "
        "train.optimizer 'adam': only adamw uses it"]
    assert _inert(tmp_path, imitation.ImitationConfig, im, [
        'train.optimizer="adamw"', "train.weight_decay=0.01"]) == []
    # imitation reads its search only to play, without noise
    assert _inert(tmp_path, imitation.ImitationConfig, im, [
        "search.gumbel_scale=0.5", "search.dirichlet_fraction=0.5"]) == [
        f"{where}, and the overrides: search.{name} (0.5) does nothing for imitation: its "
        "agent searches without noise" for name in ("dirichlet_fraction", "gumbel_scale")]

    # the search's: a reuse capacity without tree reuse, named once in a pipeline
    reuse = [f"{where}, and the overrides: search.reuse_capacity (8) does nothing without "
             "search.reuse_tree: no tree is kept between moves"]
    for cls, data in ((alphazero.AlphaZeroConfig, puct), (imitation.ImitationConfig, im),
                      (pipeline.PipelineConfig, {**pipe, "search": {"algorithm": "puct"}})):
        assert _inert(tmp_path, cls, data, ["search.reuse_capacity=8"]) == reuse
        assert _inert(tmp_path, cls, data, ['search.backend="linear"', "search.reuse_tree=true",
                                            "search.reuse_capacity=8"]) == []


@pytest.mark.parametrize("optimizer, inert", [("adam", "momentum"), ("sgd", "weight_decay"),
                                              ("adamw", "momentum")])
def test_the_optimizer_setting_warned_of_changes_no_update(optimizer, inert):
    """What the warning says: under ``optimizer``, the setting ``inert`` changes no
    update of `make_optimizer`'s (so a run with it differs in nothing)."""
    import optax
    from algorithms import imitation
    from algorithms.common import make_optimizer, unused_optimizer_settings

    params = {"w": jax.numpy.array([1.0, -2.0, 3.0])}
    grads = [{"w": jax.numpy.array(g)} for g in ([0.5, -1.0, 2.0], [1.0, 0.3, -0.2])]
    base = imitation.ImitationTrainSettings(optimizer=optimizer)
    other = dataclasses.replace(base, **{inert: 0.3})
    assert unused_optimizer_settings(other) and not unused_optimizer_settings(base)
    updates = []
    for train in (base, other):
        tx = make_optimizer(train)
        state, p, steps = tx.init(params), params, []
        for g in grads:
            u, state = tx.update(g, state, p)
            p = optax.apply_updates(p, u)
            steps.append(np.asarray(u["w"]))
        updates.append(steps)
    np.testing.assert_array_equal(np.asarray(updates[0]), np.asarray(updates[1]))


def test_no_shipped_config_sets_what_does_nothing():
    """Every experiment config, alone and with each of its variants, loads without a
    `ConfigWarning`."""
    import warnings

    root = pathlib.Path(__file__).parents[1] / "experiments" / "configs"
    checked = 0
    for path in sorted(root.glob("*.json")):
        data = json.loads(path.read_text())
        if data.get("algorithm") not in LEARNERS:  # not a training config (a tournament's)
            continue
        cls, _ = learner_entry(data["algorithm"])
        for variant in [None, *data.get("variants", {})]:
            with warnings.catch_warnings():
                warnings.simplefilter("error", cfglib.ConfigWarning)
                cfglib.load_file(cls, path, variants=[variant] if variant else [])
            checked += 1
    assert checked > 30


def test_did_you_mean_prefers_the_one_name_a_word_begins():
    """A word that begins exactly one known name is taken as that name cut short
    ("games" for games_per_pair, not the closer "game"); otherwise the closest name."""
    known = ["game", "games_per_pair", "agents", "eval_every", "eval_games"]
    assert cfglib.closest("games", known) == "games_per_pair"
    assert cfglib.closest("Games_Per_Pair", known) == "games_per_pair"
    assert cfglib.closest("agent", known) == "agents"
    assert cfglib.closest("eval", known) is None  # two begin with it, neither is close
    assert cfglib.closest("gam", known) == "game"  # too short to be a beginning
    assert cfglib.did_you_mean("games", known) == " (did you mean 'games_per_pair'?)"
