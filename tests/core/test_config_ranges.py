"""Issue 27: a domain's lower bound means something. Timeouts of 1e-9 s were
accepted for Home Assistant, the probe, SSH and liveness; every one is now
refused naming the file, the line and the field, with the domain."""

from __future__ import annotations

import re

import pytest

from sparktui.core.config_load import load_config
from sparktui.core.errors import InputError
from sparktui.core.tomlschema import Range


def _only_problem(path):  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as info:
        load_config(path)
    (p,) = info.value.problems
    return p


def _section_key(text: str, section: str, key: str, value: str) -> str:
    """`text` with `key` of `[section]` set to `value` (written or replaced)."""
    head = f"[{section}]"
    start = text.index(head + "\n") if head + "\n" in text else text.index(head)
    end = text.find("\n[", start + 1)
    body = text[start:end]
    line = re.compile(rf"^{re.escape(key)}\s*=.*$", re.M)
    if line.search(body):
        body = line.sub(f"{key} = {value}", body, count=1)
    else:
        body = body.replace("\n", f"\n{key} = {value}\n", 1)
    return text[:start] + body + text[end:]


@pytest.mark.parametrize(("section", "key", "says"), [
    ("home_assistant", "timeout_s", ">= 0.5 and <= 300 s"),
    ("console", "probe_timeout_s", ">= 0.5 and <= 300 s"),
    ("ssh", "connect_timeout_s", ">= 1 and <= 300 s"),
    ("ssh", "keepalive_interval_s", "0 (off) or >= 1 and <= 3600 s"),
    ("liveness", "timeout_s", ">= 0.1 and <= 60 s"),
    ("power", "boot_timeout_s", ">= 1 and <= 86400 s"),
    ("power", "poweroff_timeout_s", ">= 1 and <= 86400 s"),
    ("power", "off_seconds", ">= 1 and <= 3600 s"),
    ("console", "stall_after_s", ">= 1 and <= 86400 s"),
    ("console", "canary_interval_s", "0 (off) or >= 1 and <= 86400 s"),
    ("thrash", "ssh_retry_interval_s", ">= 1 and <= 3600 s"),
    ("notify", "dedup_s", "0 (off) or >= 1 and <= 604,800 s"),
])
def test_a_nanosecond_timeout_is_refused_naming_file_line_and_field(
        config_copy, section, key, says):
    path = config_copy(lambda t: _section_key(t, section, key, "1e-9"))
    p = _only_problem(path)
    assert p.key == f"{section}.{key}" and p.file == path
    assert p.line is not None and f"{key} = 1e-9" in path.read_text().splitlines()[p.line - 1]
    assert p.message == f"1e-09 is out of range: must be {says}"


@pytest.mark.parametrize(("section", "key"), [("ssh", "keepalive_interval_s"),
                                              ("console", "canary_interval_s"),
                                              ("notify", "dedup_s")])
def test_zero_still_turns_a_feature_off(config_copy, section, key):
    config = load_config(config_copy(lambda t: _section_key(t, section, key, "0")))
    assert getattr(getattr(config, section), key) == 0


def test_an_integer_of_hundreds_of_digits_is_refused_not_an_overflow(config_copy):
    huge = "9" * 400
    p = _only_problem(config_copy(lambda t: _section_key(t, "power", "off_seconds", huge)))
    assert p.key == "power.off_seconds" and "finite" in p.message
    p = _only_problem(config_copy(lambda t: _section_key(t, "simulator", "seed", huge)))
    assert p.key == "simulator.seed"
    assert p.message.startswith("999999999999... (400 digits) is out of range")


def test_an_integer_past_the_conversion_limit_is_a_syntax_problem_with_its_line(config_copy):
    path = config_copy(lambda t: _section_key(t, "simulator", "seed", "9" * 5000))
    p = _only_problem(path)
    assert p.key == "(syntax)" and "thousands of digits" in p.message
    assert p.line is not None and path.read_text().splitlines()[p.line - 1].startswith("seed")


def test_range_compares_ints_of_any_size_exactly():
    r = Range(0, 2**63 - 1)
    assert r.check(2**63 - 1) is None
    assert r.check(2**63) == "9223372036854775808 is out of range: must be >= 0 and <= " \
                              "9,223,372,036,854,775,807"
    assert "digits" in (r.check(-(10**400)) or "")
    assert Range(1, 10, off=0).check(0) is None and Range(1, 10, off=0).check(0.5) is not None
