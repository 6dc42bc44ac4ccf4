"""Issue 27 done-when: a mutation test over the cross-field rules. Hypothesis
draws the values that must agree (thresholds, windows, kernels, machines, state
dir, HA url, the recipe's qualify floor); each draw either loads with every
rule holding, or is refused with problems naming file and key — never another
exception, never an accepted contradiction. Pure loaders, in-process: thousands
of examples in seconds."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.core.config_load import load_config
from sparktui.core.errors import InputError
from sparktui.core.recipe_load import recipe_from_text

numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                    st.floats(min_value=0, max_value=200),
                    st.sampled_from([0, 1e-9, 0.05, 0.5, 1, 1e308, 10**400]))
texts = st.one_of(st.sampled_from(["", " ", "/", "/dev/null", "~/s", "/tmp/s\n", "rel"]),
                  st.text(max_size=12))
hosts = st.sampled_from(["127.0.0.1", "127.0.0.2"])
kernels = st.sampled_from(["", "6.11.0-1016-nvidia", "6.14.0-1015-nvidia"])


def _num(x: float) -> str:
    return json.dumps(x).replace("Infinity", "inf").replace("NaN", "nan")


def _config(v: dict) -> str:
    return f'''
[home_assistant]
url = {json.dumps(v["url"])}
timeout_s = {_num(v["ha_timeout"])}
[ssh]
connect_timeout_s = {_num(v["ssh_timeout"])}
keepalive_interval_s = {_num(v["keepalive"])}
[liveness]
timeout_s = {_num(v["ping_timeout"])}
[power]
boot_timeout_s = {_num(v["boot"])}
[console]
probe_timeout_s = {_num(v["probe"])}
stall_after_s = {_num(v["stall"])}
state_dir = {json.dumps(v["state_dir"])}
[thrash]
psi_full_suspect = {_num(v["suspect"])}
psi_full_thrash = {_num(v["thrash"])}
mem_available_low_gib = {_num(v["low"])}
[guards]
kernel_pin = {json.dumps(v["pin"])}
kernel_bad = {json.dumps(v["bad"])}
[nodes.a]
host = "127.0.0.1"
user = "u"
ib_ip = "10.0.0.1"
rank = 0
switch = "switch.a"
role = "test"
[nodes.b]
host = {json.dumps(v["host_b"])}
user = "u"
ib_ip = {json.dumps(v["ib_b"])}
rank = 1
switch = "switch.b"
role = "test"
[clusters.c]
nodes = ["a", "b"]
'''


@given(st.fixed_dictionaries({
    "url": st.sampled_from(["http://127.0.0.1:8123", "http://127.0.0.1:8123\n",
                            " http://127.0.0.1:8123", "http://127.0.0.1:0"]),
    "probe": numbers, "stall": numbers, "state_dir": texts, "suspect": numbers,
    "thrash": numbers, "low": numbers, "pin": kernels,
    "bad": st.lists(kernels.filter(bool), max_size=2),
    "host_b": hosts, "ib_b": st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    "ha_timeout": numbers, "ssh_timeout": numbers, "keepalive": numbers,
    "ping_timeout": numbers, "boot": numbers}))
@settings(max_examples=1500, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
def test_no_accepted_contradiction_in_the_config(tmp_path: Path, v: dict) -> None:
    path = tmp_path / "config.toml"
    path.write_text(_config(v))
    try:
        cfg = load_config(path)
    except InputError as exc:
        assert exc.problems and all(p.file == path and p.key for p in exc.problems)
        return
    t, c, g = cfg.thrash, cfg.console, cfg.guards
    assert t.psi_full_suspect < t.psi_full_thrash
    assert t.mem_available_low_gib < g.node_memory_gib
    assert c.probe_timeout_s < c.stall_after_s
    assert not g.kernel_pin or g.kernel_pin not in g.kernel_bad
    assert len({n.host for n in cfg.nodes.values()}) == 2
    assert len({n.ib_ip for n in cfg.nodes.values()}) == 2
    assert c.state_dir.strip() == c.state_dir and c.state_dir.rstrip("/") not in ("", "/dev/null")
    assert cfg.home_assistant.url == cfg.home_assistant.url.strip()
    # a lower bound means something: no timeout of a nanosecond (issue 27)
    assert cfg.home_assistant.timeout_s >= 0.5 and c.probe_timeout_s >= 0.5
    assert cfg.ssh.connect_timeout_s >= 1 and cfg.liveness.timeout_s >= 0.1
    assert cfg.ssh.keepalive_interval_s == 0 or cfg.ssh.keepalive_interval_s >= 1
    assert c.stall_after_s >= 1 and cfg.power.boot_timeout_s >= 1


@given(floor=numbers, rate=numbers, kv=st.sampled_from([None, 0, 1, 53_946]))
@settings(max_examples=1000, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # read-only config
def test_no_accepted_contradiction_in_a_recipe(shipped_config, floor, rate, kv) -> None:
    text = ('engine = "vllm"\nimage = "vllm/vllm-openai:v0.11.0"\ncluster = "2nodes-dac"\n'
            '[model]\nrepo = "org/model"\nsize_gb = 10.0\n'
            + ("" if kv is None else f"kv_bytes_per_token = {kv}\n")
            + f"[qualify]\ndecode_tps_min = {_num(floor)}\ndecode_tps = {_num(rate)}\n")
    try:
        r = recipe_from_text(shipped_config, "m", text)
    except InputError as exc:
        assert exc.problems and all(p.key for p in exc.problems)
        return
    q = r.qualify
    assert q.decode_tps_min is None or q.decode_tps is None or q.decode_tps_min <= q.decode_tps
    assert kv != 0
