"""A bundle holds an incident's logs: it is written 0600 in a 0700
``bundles`` dir whatever the umask, and a symlink planted in the state dir
(at ``bundles``, or at the temporary name a bundle is written under) is
never followed."""

from __future__ import annotations

import os
import stat
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from sparktui.core.errors import InputError
from sparktui.ops import bundle

T0 = 1_764_450_000.0


def write(state: Path) -> Path:
    return bundle._write(SimpleNamespace(state_dir=state),  # type: ignore[arg-type]
                         "lane", T0, {"SUMMARY.md": b"# Incident\n"})


def test_a_bundle_is_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        path = write(tmp_path / "state")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    with tarfile.open(path) as tar:
        assert [m.name for m in tar.getmembers()] == [f"{path.name[:-7]}/SUMMARY.md"]


def test_a_planted_symlink_in_the_state_dir_is_not_followed(tmp_path: Path) -> None:
    state, elsewhere = tmp_path / "state", tmp_path / "elsewhere"
    state.mkdir()
    elsewhere.mkdir()
    (state / bundle.BUNDLE_DIR).symlink_to(elsewhere)
    with pytest.raises(InputError, match="cannot write a bundle here"):
        write(state)
    assert list(elsewhere.iterdir()) == []
    (state / bundle.BUNDLE_DIR).unlink()
    victim = elsewhere / "victim"
    victim.write_bytes(b"keep")
    name = bundle.bundle_name("lane", T0)
    (state / bundle.BUNDLE_DIR).mkdir()
    (state / bundle.BUNDLE_DIR / f".{name}.tar.gz.tmp").symlink_to(victim)
    path = write(state)
    assert victim.read_bytes() == b"keep"
    assert path.is_file() and not path.is_symlink()
    assert sorted(p.name for p in path.parent.iterdir()) == [f"{name}.tar.gz"]
