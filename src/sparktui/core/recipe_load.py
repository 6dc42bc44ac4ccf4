"""Load and validate recipes/<name>/recipe.toml, as strictly as config.toml.

Every value that would reach a remote shell (image, model repo, env, mounts,
extra args) must be a plain value; `core/render.py` quotes them as well.
"""

from __future__ import annotations

import re
from pathlib import Path

from . import plain
from .config import Config
from .errors import InputError, Problem
from .recipe import Recipe
from .tomlschema import Source, build, read_text

ENGINES = ("vllm", "sglang")
LOAD_FORMATS = ("auto", "safetensors", "instanttensor", "fastsafetensors", "runai_streamer",
                "dummy")
KV_DTYPES = ("auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla")
_MOUNT = re.compile(r"(?P<src>/[^:]*):(?P<dst>/[^:]*)(:(?P<mode>ro|rw))?")


def recipe_file(recipes_dir: Path, name: str) -> Path:
    return recipes_dir / name / "recipe.toml"


def list_recipes(recipes_dir: Path) -> list[str]:
    """Names of the recipe folders under `recipes_dir`, sorted."""
    if not recipes_dir.is_dir():
        return []
    return sorted(p.parent.name for p in recipes_dir.glob("*/recipe.toml"))


def load_recipe(config: Config, name: str) -> Recipe:
    """Load one recipe by name; raise `InputError` listing every problem."""
    path = recipe_file(config.recipes_dir, name)
    if not path.is_file():
        known = ", ".join(list_recipes(config.recipes_dir)) or "none"
        raise InputError([Problem(path, None, "(file)", f"no recipe {name!r} (known: {known})")])
    return _finish(Source.read(path), config, name)


def recipe_from_text(config: Config, name: str, text: str) -> Recipe:
    """Recipe `name` as if its recipe.toml held `text` (e.g. an edit about to
    be written); problems name the real file."""
    return _finish(Source.parse(recipe_file(config.recipes_dir, name), text), config, name)


def _finish(src: Source, config: Config, name: str) -> Recipe:
    recipe = None if src.problems else _build(src, config, name)
    if src.problems or recipe is None:
        raise InputError(src.problems)
    return recipe


def load_all_recipes(config: Config) -> tuple[dict[str, Recipe], list[Problem]]:
    """Every recipe that loads, plus the problems of those that do not."""
    recipes: dict[str, Recipe] = {}
    problems: list[Problem] = []
    for name in list_recipes(config.recipes_dir):
        try:
            recipes[name] = load_recipe(config, name)
        except InputError as exc:
            problems.extend(exc.problems)
    return recipes, problems


def _build(src: Source, config: Config, name: str) -> Recipe | None:
    path = src.file
    notes_file = path.parent / "notes.md"
    try:
        notes = read_text(notes_file) if notes_file.is_file() else ""
    except InputError as exc:
        src.problems.extend(exc.problems)
        return None
    if (why := plain.check("name", name)) is not None:
        src.error((), f"recipe folder name: {why}")
    recipe = build(src, (), src.data, Recipe, extra={"name": name, "path": path, "notes": notes})
    if recipe is None or src.problems:
        return None  # the value checks below need a structurally complete recipe
    _check(src, config, recipe)
    return recipe


def _check(src: Source, config: Config, r: Recipe) -> None:
    err = src.error
    if r.engine not in ENGINES:
        err(("engine",), f"{r.engine!r} is not one of: {', '.join(ENGINES)}")
    if (why := plain.check("image", r.image)) is not None:
        err(("image",), why)
    if r.cluster not in config.clusters:
        err(("cluster",), f"unknown cluster {r.cluster!r} (known: {', '.join(config.clusters)})")
    m = r.model
    if (why := plain.check("model_repo", m.repo)) is not None:
        err(("model", "repo"), why)
    if m.revision and (why := plain.check("revision", m.revision)) is not None:
        err(("model", "revision"), why)
    if m.served_name and (why := plain.check("name", m.served_name)) is not None:
        err(("model", "served_name"), why)
    e = r.engine_args
    if e.kv_cache_dtype not in KV_DTYPES:
        err(("engine_args", "kv_cache_dtype"), f"{e.kv_cache_dtype!r} is not one of: "
            + ", ".join(KV_DTYPES))
    if e.load_format not in LOAD_FORMATS:
        err(("engine_args", "load_format"), f"{e.load_format!r} is not one of: "
            + ", ".join(LOAD_FORMATS))
    if r.engine == "sglang" and e.kv_cache_memory_gib is not None:
        err(("engine_args", "kv_cache_memory_gib"), "SGLang has no KV pin; size KV with "
            "gpu_memory_utilization (mem-fraction-static)")
    s = r.speculative
    if s is not None:
        if (why := plain.check("name", s.method)) is not None:
            err(("speculative", "method"), why)
        if s.model and (why := plain.check("model_repo", s.model)) is not None:
            err(("speculative", "model"), why)
    q = r.qualify
    if q.decode_tps_min is not None and q.decode_tps is not None \
            and q.decode_tps_min > q.decode_tps:
        err(("qualify", "decode_tps_min"),
            f"{q.decode_tps_min:g} tok/s is above qualify.decode_tps ({q.decode_tps:g}, the "
            f"recorded rate): the gate would call the lane's own measured rate slow")
    f = r.fit
    if (f.prefill_scratch_base_gib is None) != (f.prefill_scratch_gib_per_token is None):
        err(("fit",), "prefill_scratch_base_gib and prefill_scratch_gib_per_token go together")
    for key, value in r.env.items():
        for kind, text in (("env_name", key), ("env_value", value)):
            if (why := plain.check(kind, text)) is not None:
                err(("env", key), why)
    for mount in r.mounts:
        match = _MOUNT.fullmatch(mount)
        if match is None:
            err(("mounts",), f"{mount!r} is not SRC:DST or SRC:DST:ro with absolute paths")
            continue
        for part in ("src", "dst"):
            if (why := plain.check("abs_path", match.group(part))) is not None:
                err(("mounts",), why)
    for arg in r.extra_args:
        if (why := plain.check("arg", arg)) is not None:
            err(("extra_args",), why + " — shell metacharacters are not allowed")
