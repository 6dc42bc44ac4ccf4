"""config.toml: the shipped file loads; each kind of bad input names file, line and key."""

from __future__ import annotations

import re

import pytest

from sparktui.core.config_load import load_config
from sparktui.core.errors import InputError


def _problems(path):
    with pytest.raises(InputError) as info:
        load_config(path)
    return info.value.problems


def _line_of(path, needle: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(needle)


def test_shipped_config_models_the_seed_fleet(shipped_config):
    c = shipped_config
    assert list(c.nodes) == [f"dgx{i}" for i in range(1, 9)]
    assert [n.rank for n in c.nodes.values()] == list(range(8))
    assert c.clusters["2nodes-dac"].nodes == ("dgx1", "dgx2")
    assert c.clusters["4nodes-switch-b"].nodes == ("dgx5", "dgx6", "dgx7", "dgx8")
    assert c.clusters["8nodes-switch"].switches == ("sw6_mt", "sw7_fan")
    assert c.switches["sw6_mt"].blocking and not c.switches["sw7_fan"].blocking
    assert c.nccl["8nodes-switch"]["NCCL_IB_HCA"] == "rocep1s0f0,roceP2p1s0f0"
    assert c.guards.protected_nodes == ("dgx1", "dgx2", "dgx3", "dgx4")
    assert c.guards.kernel_pin == "6.17.0-1031" and c.guards.kernel_bad == ("7.0.0-1019",)
    assert c.guards.node_memory_gib == 121.6
    assert c.simulator.enabled
    assert c.nodes["dgx6"].hf_cache == "/home/kilork/.cache/huggingface"


def test_shipped_config_has_only_loopback_addresses(shipped_config):
    for node in shipped_config.nodes.values():
        assert node.ib_ip.startswith("127.")
    assert shipped_config.home_assistant.url.startswith("http://127.0.0.1")


def test_unknown_key_suggests_the_closest(config_copy):
    path = config_copy(lambda t: t.replace("poll_interval_s = 2.0", "poll_intervall_s = 2.0"))
    (p,) = _problems(path)
    assert p.key == "console.poll_intervall_s"
    assert p.line == _line_of(path, "poll_intervall_s")
    assert "did you mean 'poll_interval_s'" in p.message
    assert str(p).startswith(f"{path}:{p.line}: console.poll_intervall_s:")


def test_missing_required_key(config_copy):
    path = config_copy(lambda t: t.replace('user = "kilork"\nib_ip = "127.0.200.17"',
                                           'ib_ip = "127.0.200.17"'))
    (p,) = _problems(path)
    assert p.key == "nodes.dgx3.user" and "required" in p.message
    assert p.line == _line_of(path, "[nodes.dgx3]")


def test_wrong_type(config_copy):
    path = config_copy(lambda t: t.replace("rank = 4\n", 'rank = "four"\n'))
    (p,) = _problems(path)
    assert p.key == "nodes.dgx5.rank"
    assert "expected integer" in p.message and "'four'" in p.message
    assert p.line == _line_of(path, 'rank = "four"')


def test_unknown_node_in_cluster(config_copy):
    path = config_copy(lambda t: t.replace('nodes = ["dgx1", "dgx2"]', 'nodes = ["dgx1", "dgx9"]'))
    (p,) = _problems(path)
    assert p.key == 'clusters.2nodes-dac.nodes' and "unknown node 'dgx9'" in p.message
    assert p.line == _line_of(path, '"dgx9"')


def test_unknown_switch_and_nccl_cluster(config_copy):
    def edit(t: str) -> str:
        t = t.replace('switches = ["sw6_mt", "sw7_fan"]\n\n[clusters."4nodes-switch-b"]',
                      'switches = ["sw6_mt", "sw9"]\n\n[clusters."4nodes-switch-b"]')
        return t.replace('[nccl."2nodes-dac"]', '[nccl."2nodes-dacc"]')

    problems = _problems(config_copy(edit))
    messages = {p.key: p.message for p in problems}
    assert "unknown switch 'sw9'" in messages['clusters.4nodes-switch.switches']
    assert "unknown cluster '2nodes-dacc'" in messages['nccl.2nodes-dacc']


def test_duplicate_rank(config_copy):
    path = config_copy(lambda t: t.replace("rank = 7\n", "rank = 6\n"))
    (p,) = _problems(path)
    assert p.key == "nodes.dgx8.rank" and "already used by node dgx7" in p.message


def test_unknown_protected_node(config_copy):
    path = config_copy(lambda t: t.replace('protected_nodes = ["dgx1",',
                                           'protected_nodes = ["dgx0",'))
    (p,) = _problems(path)
    assert p.key == "guards.protected_nodes" and "dgx0" in p.message


def test_token_in_config_is_refused_and_not_echoed(config_copy):
    secret = "eyJhbGciOiJIUzI1NiJ9.super-secret"
    path = config_copy(lambda t: t.replace('token_env = "SPARKTUI_HA_TOKEN"',
                                           f'token = "{secret}"\ntoken_env = "SPARKTUI_HA_TOKEN"'))
    (p,) = _problems(path)
    assert p.key == "home_assistant.token" and "never goes in config.toml" in p.message
    assert secret not in str(p)


@pytest.mark.parametrize("field,value", [
    ("host", "dgx1; rm -rf /"), ("user", "kilork`id`"), ("ib_ip", "200.15"),
    ("switch", "light.dgx1"),
])
def test_shell_unsafe_node_values_are_rejected(config_copy, field, value):
    original = {"host": 'host = "dgx1"', "user": 'user = "kilork"\n# real: 200.15',
                "ib_ip": 'ib_ip = "127.0.200.15"', "switch": 'switch = "switch.dgx1"'}[field]
    replacement = original.replace(re.search(r'"[^"]*"', original).group(0), f'"{value}"', 1)
    path = config_copy(lambda t: t.replace(original, replacement, 1))
    problems = _problems(path)
    assert [p.key for p in problems] == [f"nodes.dgx1.{field}"]


def test_nccl_value_with_shell_metacharacters(config_copy):
    path = config_copy(lambda t: t.replace('NCCL_CROSS_NIC = "1"',
                                           'NCCL_CROSS_NIC = "1;reboot"', 1))
    (p,) = _problems(path)
    assert p.key == 'nccl.4nodes-switch.NCCL_CROSS_NIC'


def test_syntax_error_names_the_line(config_copy):
    path = config_copy(lambda t: t.replace("seed = 1", "seed = = 1"))
    (p,) = _problems(path)
    assert p.key == "(syntax)" and p.line == _line_of(path, "seed = = 1")


def test_all_problems_are_reported_together(config_copy):
    def edit(t: str) -> str:
        return t.replace("speed = 60.0", "speed = -1.0").replace("rank = 5\n", "rank = 4\n")

    keys = {p.key for p in _problems(config_copy(edit))}
    assert {"simulator.speed", "nodes.dgx6.rank"} <= keys


def test_missing_file(tmp_path):
    (p,) = _problems(tmp_path / "nope.toml")
    assert "not found" in p.message


def test_one_plug_one_node(config_copy):
    """Two nodes naming the same plug entity: power-cycling one would cut the other."""
    path = config_copy(lambda t: t.replace('switch = "switch.dgx7"', 'switch = "switch.dgx6"'))
    (p,) = _problems(path)
    lines = path.read_text().splitlines()
    second = [i for i, line in enumerate(lines, 1) if 'switch = "switch.dgx6"' in line][1]
    assert p.key == "nodes.dgx7.switch" and p.line == second
    assert "switch.dgx6 is also node dgx6's plug" in p.message and "one plug, one node" in p.message
    assert str(p).startswith(f"{path}:{p.line}: nodes.dgx7.switch:")


def test_a_node_plug_may_not_be_a_shared_switch(config_copy):
    path = config_copy(lambda t: t.replace('switch = "switch.dgx8"', 'switch = "switch.sw6_mt"'))
    (p,) = _problems(path)
    assert p.key == "switches.sw6_mt.entity" and p.line is not None
    assert "is also node dgx8's plug" in p.message


@pytest.mark.parametrize(("old", "new", "key", "says"), [
    ("poll_interval_s = 2.0", "poll_interval_s = nan", "console.poll_interval_s",
     "must be a finite number (>= 0.1 and <= 3600 s), got nan"),
    ("poll_interval_s = 2.0", "poll_interval_s = inf", "console.poll_interval_s", "finite"),
    ("off_seconds = 35.0", "off_seconds = -5.0", "power.off_seconds",
     "-5 is out of range: must be >= 1 and <= 3600 s"),
    ("boot_timeout_s = 600.0", "boot_timeout_s = 0.0", "power.boot_timeout_s", ">= 1"),
    ("speed = 60.0", "speed = -1.0", "simulator.speed", "> 0"),
    ('dialect = "vllm-0.33"', 'dialect = "vllm-0.34"', "simulator.dialect",
     "'vllm-0.34' is not one of: vllm-0.11, vllm-0.33, sglang-0.5"),
    ("connect_timeout_s = 10.0", "connect_timeout_s = 1e308", "ssh.connect_timeout_s",
     "<= 300 s"),
    ('url = "http://127.0.0.1:8123"', 'url = "http://[::1"', "home_assistant.url", "not a URL"),
    ('url = "http://127.0.0.1:8123"', 'url = "http://127.0.0.1:0"', "home_assistant.url",
     "port 0"),
    ('url = "http://127.0.0.1:8123"', 'url = "http://127.0.0.1:70000"', "home_assistant.url",
     "not a URL"),
    ('url = "http://127.0.0.1:8123"', 'url = "127.0.0.1:8123"', "home_assistant.url",
     "not an http(s) URL"),
])
def test_every_value_has_a_domain(config_copy, old, new, key, says):
    path = config_copy(lambda t: t.replace(old, new, 1))
    assert new in path.read_text()
    (p,) = _problems(path)
    assert p.key == key and says in p.message
    assert p.line == _line_of(path, new)


def test_ports_are_1_to_65535(config_copy):
    path = config_copy(lambda t: t.replace('[nodes.dgx5]', '[nodes.dgx5]\nport = 70000', 1))
    (p,) = _problems(path)
    assert p.key == "nodes.dgx5.port" and "must be >= 1 and <= 65535" in p.message
