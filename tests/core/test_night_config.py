"""[notify] and [record] in config.toml: defaults off/on, bad values named by line."""

from __future__ import annotations

import pytest

from sparktui.core.config_load import load_config
from sparktui.core.errors import InputError


def test_shipped_defaults(shipped_config) -> None:  # type: ignore[no-untyped-def]
    assert shipped_config.notify.service == ""  # phone alerts off until a phone is named
    assert "thrash" in shipped_config.notify.events
    assert shipped_config.record.enabled and shipped_config.record.max_mb > 0


@pytest.mark.parametrize("old,new,key,words", [
    ('service = ""                 # e.g.', 'service = "switch.dgx6"  # e.g.', "notify.service",
     "not a Home Assistant notify service"),
    ('events = ["thrash", "fatal"', 'events = ["thrash", "fatl"', "notify.events",
     "unknown event 'fatl'"),
    ("max_per_hour = 12 ", "max_per_hour = 0 ", "notify.max_per_hour", "out of range"),
    ("max_mb = 64.0 ", "max_mb = 0.0 ", "record.max_mb", "out of range"),
    ("max_mb = 64.0 ", "max_mb = 1e-9 ", "record.max_mb", "must be >= 1"),
    ("max_mb = 64.0 ", "max_md = 64.0 ", "record.max_md", "unknown key"),
])
def test_bad_values_are_named(config_copy, old, new, key, words) -> None:  # type: ignore[no-untyped-def]
    path = config_copy(lambda text: text.replace(old, new))
    with pytest.raises(InputError) as info:
        load_config(path)
    (problem,) = info.value.problems
    text = str(problem)
    assert key in text and words in text and f"{path}:" in text
