"""Issue 27: values each valid alone that mean nothing together passed `check`.
Each is now a problem naming file, line and both fields."""

from __future__ import annotations

import pytest

from sparktui.core.config_load import load_config
from sparktui.core.errors import InputError

BASE = '''
[home_assistant]
url = "http://127.0.0.1:8123"

[nodes.a]
host = "127.0.0.1"
user = "u"
ib_ip = "10.0.0.1"
rank = 0
switch = "switch.a"
role = "test"

[nodes.b]
host = "127.0.0.2"
user = "u"
ib_ip = "10.0.0.2"
rank = 1
switch = "switch.b"
role = "test"

[clusters.c]
nodes = ["a", "b"]
'''


def problems(tmp_path, text: str, recipes: bool = True) -> list[str]:
    if recipes:
        (tmp_path / "recipes").mkdir(exist_ok=True)
    path = tmp_path / "config.toml"
    path.write_text(text)
    try:
        load_config(path)
    except InputError as exc:
        return [str(p) for p in exc.problems]
    return []


def test_the_base_is_valid(tmp_path) -> None:
    assert problems(tmp_path, BASE) == []


@pytest.mark.parametrize(("extra", "key", "other"), [
    ("[thrash]\npsi_full_suspect = 70\npsi_full_thrash = 60\n", "thrash.psi_full_suspect",
     "psi_full_thrash"),
    ("[thrash]\nmem_available_low_gib = 200\n", "thrash.mem_available_low_gib",
     "guards.node_memory_gib"),
    ("[console]\nprobe_timeout_s = 120\nstall_after_s = 60\n", "console.probe_timeout_s",
     "console.stall_after_s"),
    ('[guards]\nkernel_pin = "6.11.0-1016-nvidia"\nkernel_bad = ["6.11.0-1016-nvidia"]\n',
     "guards.kernel_pin", "guards.kernel_bad"),
    ('[console]\nstate_dir = ""\n', "console.state_dir", "empty"),
    ('[console]\nstate_dir = "   "\n', "console.state_dir", "empty"),
    ('[console]\nstate_dir = "/"\n', "console.state_dir", "not a place"),
    ('[console]\nstate_dir = "/dev/null"\n', "console.state_dir", "not a place"),
])
def test_a_contradiction_names_both_fields_and_a_line(tmp_path, extra, key, other) -> None:
    found = problems(tmp_path, BASE + "\n" + extra)
    assert len(found) == 1, found
    assert key in found[0] and other in found[0]
    assert ":" in found[0].split(key)[0]  # file:line before the key


@pytest.mark.parametrize(("key", "b_value", "a_value"), [
    ("host", '"127.0.0.2"', '"127.0.0.1"'), ("ib_ip", '"10.0.0.2"', '"10.0.0.1"')])
def test_two_nodes_with_one_machine(tmp_path, key, b_value, a_value) -> None:
    text = BASE.replace(f"{key} = {b_value}", f"{key} = {a_value}")
    found = problems(tmp_path, text)
    assert len(found) == 1 and f"nodes.b.{key}" in found[0] and f"nodes.a.{key}" in found[0]


def test_an_ha_url_ending_in_a_newline(tmp_path) -> None:
    text = BASE.replace('"http://127.0.0.1:8123"', '"http://127.0.0.1:8123\\n"')
    found = problems(tmp_path, text)
    assert len(found) == 1 and "home_assistant.url" in found[0] and "newline" in found[0]


def test_a_bom_is_named(tmp_path) -> None:
    (tmp_path / "recipes").mkdir()
    path = tmp_path / "config.toml"
    path.write_bytes(b"\xef\xbb\xbf" + BASE.encode())
    with pytest.raises(InputError) as info:
        load_config(path)
    assert "byte-order mark (BOM)" in str(info.value)


def _check(capsys, tmp_path, text: str) -> tuple[int, str]:
    from sparktui.cli.main import main

    path = tmp_path / "config.toml"
    path.write_text(text)
    code = main(["check", "--config", str(path)])
    out, err = capsys.readouterr()
    return code, out + err


def test_check_refuses_a_missing_recipes_dir_and_ssh_files(tmp_path, capsys) -> None:
    """'0 recipes valid' passed `check`; client_keys missing or known_hosts empty
    failed only at connect."""
    known = tmp_path / "known_hosts"
    known.write_text("")
    text = BASE + (f'\n[ssh]\nknown_hosts = "{known}"\n'
                   f'client_keys = ["{tmp_path / "id_missing"}"]\n')
    code, said = _check(capsys, tmp_path, text)
    assert code == 1
    assert "recipes_dir" in said and "is not a directory" in said
    assert "ssh.client_keys" in said and "id_missing does not exist" in said
    assert "ssh.known_hosts" in said and "is empty" in said
    (tmp_path / "recipes").mkdir()
    known.write_text("127.0.0.1 ssh-ed25519 AAAA\n")
    (tmp_path / "id_missing").write_text("key")
    code, said = _check(capsys, tmp_path, text)
    assert code == 0, said
