"""Recipes: every shipped one loads; bad input names file, line and key; shell is refused."""

from __future__ import annotations

import pytest

from sparktui.core.config_load import load_config
from sparktui.core.errors import InputError
from sparktui.core.recipe_load import list_recipes, load_all_recipes, load_recipe

SEED_RECIPES = {
    "glm53-full-mxfp4-4x-dspark8", "dsv41-flash-8x", "glm53-full-native-8x-dspark8",
    "dsv41-flash-eugr-0913-4x", "glm53-flash-eugr-2x", "glm53-mxfp4-fp8-4x-r39",
    "dsv41-flash-r37-4x-eager",
}


def test_every_shipped_recipe_loads(shipped_config):
    recipes, problems = load_all_recipes(shipped_config)
    assert problems == []
    assert set(recipes) >= SEED_RECIPES
    assert {r.engine for r in recipes.values()} == {"vllm", "sglang"}
    for r in recipes.values():
        assert r.cluster in shipped_config.clusters


def test_seed_figures_are_carried(shipped_config):
    native = load_recipe(shipped_config, "glm53-full-native-8x-dspark8")
    assert native.model.size_gb == 753.3 and native.model.shards == 141
    assert native.model.revision == "aca966e4"
    assert native.engine_args.gpu_memory_utilization == 0.85
    assert native.engine_args.max_model_len == 65536
    assert native.speculative is not None and native.speculative.num_tokens == 8
    boot_d = load_recipe(shipped_config, "dsv41-flash-r37-4x-eager")
    assert boot_d.engine_args.load_format == "safetensors"
    assert not any(k.startswith("DSV41_ENGRAM") for k in boot_d.env)


def _write(config_copy, name: str, text: str):
    path = config_copy()
    folder = path.parent / "recipes" / name
    folder.mkdir()
    (folder / "recipe.toml").write_text(text)
    return load_config(path), folder / "recipe.toml"


GOOD = '''engine = "vllm"
image = "vllm/vllm-openai:v0.11.0"
cluster = "2nodes-dac"

[model]
repo = "org/model"
size_gb = 10.0

[env]
FOO = "bar"
'''


def _problems(config, name):
    with pytest.raises(InputError) as info:
        load_recipe(config, name)
    return info.value.problems


def test_minimal_recipe_loads(config_copy):
    config, _ = _write(config_copy, "mini", GOOD)
    assert load_recipe(config, "mini").model.repo == "org/model"


@pytest.mark.parametrize("old,new,key", [
    ('image = "vllm/vllm-openai:v0.11.0"', 'image = "vllm/x:1; curl evil"', "image"),
    ('FOO = "bar"', 'FOO = "$(reboot)"', "env.FOO"),
    ('repo = "org/model"', 'repo = "org/model && id"', "model.repo"),
    ('cluster = "2nodes-dac"', 'cluster = "3nodes"', "cluster"),
    ('engine = "vllm"', 'engine = "trtllm"', "engine"),
    ('size_gb = 10.0', 'size_gb = "ten"', "model.size_gb"),
    ('[env]', '[engine_args]\ngpu_memory_utilisation = 0.85\n[env]',
     "engine_args.gpu_memory_utilisation"),
    # issue 27: a floor above the recorded rate; a written KV size of 0
    ('[env]', '[qualify]\ndecode_tps_min = 40.0\ndecode_tps = 30.0\n[env]',
     "qualify.decode_tps_min"),
    ('size_gb = 10.0', 'size_gb = 10.0\nkv_bytes_per_token = 0', "model.kv_bytes_per_token"),
])
def test_bad_recipe_values(config_copy, old, new, key):
    config, path = _write(config_copy, "bad", GOOD.replace(old, new))
    problems = _problems(config, "bad")
    assert [p.key for p in problems] == [key]
    p = problems[0]
    assert p.file == path
    assert key.split(".")[-1] in path.read_text().splitlines()[p.line - 1]


def test_unknown_key_suggestion(config_copy):
    typo = GOOD.replace("[env]", "[engine_args]\nmax_model_length = 4096\n[env]")
    config, _ = _write(config_copy, "typo", typo)
    (p,) = _problems(config, "typo")
    assert "did you mean 'max_model_len'" in p.message


def test_extra_args_and_mounts_reject_shell(config_copy):
    text = GOOD.replace('cluster = "2nodes-dac"',
                        'cluster = "2nodes-dac"\nmounts = ["/a:/b", "/c:/d;id"]\n'
                        'extra_args = ["--ok", "$(id)"]')
    config, _ = _write(config_copy, "inj", text)
    keys = [p.key for p in _problems(config, "inj")]
    assert keys == ["mounts", "extra_args"]


def test_unknown_recipe_lists_known(shipped_config):
    (p,) = _problems(shipped_config, "nope")
    assert "glm53-full-native-8x-dspark8" in p.message


def test_list_recipes_sorted(shipped_config):
    names = list_recipes(shipped_config.recipes_dir)
    assert names == sorted(names) and len(names) >= 7
