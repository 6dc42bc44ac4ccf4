"""Hostile and tired input: ≥ 1,000 mutations of the shipped config.toml and of
every shipped recipe (wrong types, non-finite numbers, out-of-range values,
bad encodings, oversized values). Each must either load, with every number
finite and sane, and go through fit and lint without an exception, or be
refused with problems that name file, line (where there is one) and key —
never any other exception. Runs the pure loaders in-process, so it is fast."""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.core.config_load import load_config
from sparktui.core.errors import InputError
from sparktui.core.fit import fit
from sparktui.core.lint import lint
from sparktui.core.recipe_load import list_recipes, load_recipe, recipe_file, recipe_from_text
from sparktui.core.tomledit import set_value
from sparktui.core.tomlschema import KeyLines

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_CONFIG = ROOT / "config.toml"
SHIPPED_RECIPES = list_recipes(ROOT / "recipes")
SETTINGS = settings(max_examples=300, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


def _leaves(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for key, value in data.items():
        path = prefix + (key,)
        if isinstance(value, dict):
            out.extend(_leaves(value, path))
        else:
            out.append(path)
    return out


CONFIG_TEXT = SHIPPED_CONFIG.read_text(encoding="utf-8")
CONFIG_LEAVES = _leaves(tomllib.loads(CONFIG_TEXT))
RECIPE_TEXTS = {n: recipe_file(ROOT / "recipes", n).read_text(encoding="utf-8")
                for n in SHIPPED_RECIPES}
RECIPE_LEAVES = [(n, p) for n, t in RECIPE_TEXTS.items() for p in _leaves(tomllib.loads(t))]
# fields a mutation may add that the shipped files leave at their default
RECIPE_LEAVES += [(n, p) for n in SHIPPED_RECIPES for p in (
    ("port",), ("model", "weights_per_rank_gib"), ("model", "nfs_read_per_rank_gb"),
    ("fit", "runtime_reserve_gib"), ("fit", "pinned_extras_gib"),
    ("readiness", "stall_after_s"), ("engine_args", "kv_cache_memory_gib"))]

NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])
ABSURD = st.sampled_from([-1, -5.0, 0, 0.0, 1e308, -1e308, 2**63 - 1, -(2**63), 70000,
                          65536, 1e12, 1e-300, 5e-324])
VALUES = st.one_of(
    NON_FINITE, ABSURD,
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.booleans(),
    st.text(max_size=20),
    st.integers(1, 20_000).map(lambda n: "a" * n),
    st.sampled_from(["nan", "inf", "-1", "http://[::1", "ftp://x", "", "x" * 300]),
    st.lists(st.one_of(st.integers(-5, 5), st.text(max_size=5), NON_FINITE), max_size=3),
    st.dictionaries(st.sampled_from(["a", "port", "nan"]), st.integers(-1, 1), max_size=2),
)


_VALUE = re.compile(r"^(?P<key>[^=]+=\s*)(?P<value>.*?)(?P<comment>\s+#[^\"']*)?$")


@functools.cache
def _slot(text: str, path: tuple[str, ...]) -> tuple[int, str, str] | None:
    """(line index, text before the value, text after it) when `path`'s value is
    written on one line of its own, else None (then tomlkit edits the document)."""
    data: Any = tomllib.loads(text)
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    number = KeyLines(text).line(path)
    if number is None:
        return None
    line = text.splitlines()[number - 1]
    m = _VALUE.match(line)
    if m is None or not line.lstrip().startswith(_quoted(path[-1])):
        return None
    try:
        if tomllib.loads(f"x = {m.group('value')}")["x"] != data:
            return None
    except tomllib.TOMLDecodeError:
        return None
    return number - 1, m.group("key"), m.group("comment") or ""


def _quoted(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else f'"{key}"'


def _mutate(text: str, path: tuple[str, ...], value: Any) -> str:
    """`text` with `path` set to `value`: a one-line edit where the value sits on
    a line of its own (fast), else a tomlkit round trip."""
    slot = _slot(text, path)
    if slot is None:
        return set_value(text, path, value)
    index, before, after = slot
    lines = text.splitlines()
    lines[index] = before + tomlkit.item(value).as_string() + after
    return "\n".join(lines) + "\n"


def _numbers(obj: Any, where: str = "") -> list[tuple[str, float]]:
    """Every number inside a loaded dataclass tree, with its dotted name."""
    if isinstance(obj, bool):
        return []
    if isinstance(obj, int | float):
        return [(where, obj)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [n for f in dataclasses.fields(obj)
                for n in _numbers(getattr(obj, f.name), f"{where}.{f.name}")]
    if isinstance(obj, dict):
        return [n for k, v in obj.items() for n in _numbers(v, f"{where}.{k}")]
    return []


SIGNED = {".simulator.seed"}


def _assert_sane(obj: Any) -> None:
    for name, number in _numbers(obj):
        assert math.isfinite(number), f"{name} = {number} accepted"
        assert name in SIGNED or number >= 0, f"{name} = {number} accepted"
        assert name in SIGNED or number < 1e10, f"{name} = {number} accepted"


def _refused_well(exc: InputError, file: Path) -> None:
    assert exc.problems, "an InputError without problems"
    for p in exc.problems:
        assert p.file.name == file.name and p.key and p.message
        assert "Traceback" not in p.message and "Error(" not in p.message


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "recipes", tmp_path / "recipes")
    return tmp_path


def _check_config(workdir: Path, data: bytes) -> None:
    path = workdir / "config.toml"
    path.write_bytes(data)
    try:
        config = load_config(path)
    except InputError as exc:
        _refused_well(exc, path)
        return
    _assert_sane(config)


@SETTINGS
@given(leaf=st.sampled_from(CONFIG_LEAVES), value=VALUES)
def test_config_value_mutations(workdir: Path, leaf: tuple[str, ...], value: Any) -> None:
    _check_config(workdir, _mutate(CONFIG_TEXT, leaf, value).encode())


@SETTINGS
@given(data=st.binary(min_size=1, max_size=8), at=st.floats(0, 1))
def test_config_byte_mutations(workdir: Path, data: bytes, at: float) -> None:
    raw = CONFIG_TEXT.encode()
    i = int(at * len(raw))
    _check_config(workdir, raw[:i] + data + raw[i + len(data):])


@pytest.fixture(scope="module")
def config():
    return load_config(SHIPPED_CONFIG)


def _check_recipe(config: Any, name: str, text: str) -> None:
    try:
        recipe = recipe_from_text(config, name, text)
    except InputError as exc:
        _refused_well(exc, recipe_file(config.recipes_dir, name))
        return
    _assert_sane(recipe)
    fit(config, recipe, recipe.cluster)  # `inf`/`1e308` once crashed here
    lint(config, recipe)


@SETTINGS
@given(leaf=st.sampled_from(RECIPE_LEAVES), value=VALUES)
def test_recipe_value_mutations(config: Any, leaf: tuple[str, tuple[str, ...]], value: Any
                                ) -> None:
    name, path = leaf
    _check_recipe(config, name, _mutate(RECIPE_TEXTS[name], path, value))


@SETTINGS
@given(name=st.sampled_from(SHIPPED_RECIPES), data=st.binary(min_size=1, max_size=8),
       at=st.floats(0, 1))
def test_recipe_byte_mutations(config: Any, name: str, data: bytes, at: float) -> None:
    raw = RECIPE_TEXTS[name].encode()
    i = int(at * len(raw))
    mutated = raw[:i] + data + raw[i + len(data):]
    try:
        text = mutated.decode("utf-8")
    except UnicodeDecodeError:
        return  # the loader's decoding is tested on real files below
    _check_recipe(config, name, text)




def test_non_utf8_files_are_named(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "recipes", tmp_path / "recipes")
    cfg = tmp_path / "config.toml"
    cfg.write_text(CONFIG_TEXT)
    config = load_config(cfg)
    name = SHIPPED_RECIPES[0]
    target = recipe_file(config.recipes_dir, name)
    target.write_bytes(b"# ok\n" + b"engine = \"\xff\"\n")
    with pytest.raises(InputError) as exc:
        load_recipe(config, name)
    assert str(exc.value.problems[0]).startswith(f"{target}:2: (encoding)")
    (target.parent / "notes.md").write_bytes(b"\xfe notes")
    target.write_text(RECIPE_TEXTS[name])
    with pytest.raises(InputError) as exc:
        load_recipe(config, name)
    assert "notes.md:1: (encoding)" in str(exc.value)
    cfg.write_bytes(CONFIG_TEXT.encode() + b"\n# \x80\n")
    with pytest.raises(InputError) as exc:
        load_config(cfg)
    assert "(encoding)" in str(exc.value)
