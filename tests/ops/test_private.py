"""The state dir is private (ops/private.py, issue 25): every directory in
it 0700 and every file 0600 whatever the umask, and a symlink planted in it
is never followed. A bundle holds an incident's logs: it is written 0600 in a
0700 ``bundles`` dir, and a link at ``bundles`` or at the temporary name a
bundle is written under is not followed. Then every other writer of the state
dir, run under umask 000 and walked, and a link planted in place of each of
its subdirs and files, refused in one line."""

from __future__ import annotations

import logging
import os
import stat
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from sparktui.core.errors import InputError
from sparktui.ops import bundle
from sparktui.ops.private import NotPrivate

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


# -- the whole state dir: every product path under umask 0, then one walk ---------


def _walk(state: Path) -> dict[str, int]:
    """Every place under ``state`` (itself included) -> its permission bits; a
    symlink anywhere fails the test."""
    modes = {".": stat.S_IFDIR | stat.S_IMODE(os.lstat(state).st_mode)}
    for folder, dirs, files in os.walk(state):
        for name in dirs + files:
            path = Path(folder) / name
            st = os.lstat(path)
            assert not stat.S_ISLNK(st.st_mode), path
            modes[str(path.relative_to(state))] = stat.S_IMODE(st.st_mode) | (
                stat.S_IFDIR if stat.S_ISDIR(st.st_mode) else 0)
    return modes


async def test_every_dir_is_0700_and_every_file_0600_whatever_the_umask(
        tmp_path: Path) -> None:
    """The product's own code paths, each writing what it writes in the state
    dir, under umask 000 (so ``mkdir``/``open`` modes are not masked at all):
    the journal and its reserve, a run lock taken over from a dead owner, the
    phone lock and memory, the sentinel's pid lock, socket and last_good.json,
    the console's debug log, a crash log, the night's recording and a bundle."""
    from sparktui.cli.crash import _write_log
    from sparktui.core.clock import SystemClock
    from sparktui.core.notify import PhoneMemory
    from sparktui.ops import sentinel_state
    from sparktui.ops.journal import Journal
    from sparktui.ops.runlocks import RunLocks
    from sparktui.service import phoned
    from sparktui.service.attach import SentinelHub, socket_path
    from sparktui.service.recording import Recorder, night_path
    from sparktui.service.sentinel import PID_FILE, PidLock
    from sparktui.tui.logsink import logged_to_file

    from .test_runlocks import dead_pid

    state = tmp_path / "h" / "l" / "s"  # short: a Unix socket's path is at most 107 bytes
    os.chmod(tmp_path, 0o755)
    old = os.umask(0)
    try:
        journal = Journal.in_state_dir(state)
        journal.reserve()
        journal.append("serve-x", "begin", workflow="serve", target="lane")
        locks = RunLocks.in_state_dir(state)
        common = {"wf": "serve-x", "workflow": "serve", "target": "lane", "started_at": T0}
        locks.acquire(["dgx1"], pid=dead_pid(), **common)  # type: ignore[arg-type]
        locks.acquire(["dgx1"], **common)  # type: ignore[arg-type]  # the take-over
        with phoned.locked(state):
            phoned.write(state, PhoneMemory(sent=(T0,)), "")
        pid = PidLock(state / PID_FILE)
        pid.acquire()
        hub = SentinelHub(socket_path(state), clock=SystemClock(), pid=os.getpid())
        await hub.start()
        sentinel_state.write(state, sentinel_state.LastGood(os.getpid(), T0, {"dgx1": T0}))
        with logged_to_file(state / "debug.log"):
            logging.getLogger("sparktui.test").warning("logged")
        assert _write_log(RuntimeError("boom"), "sparktui", state) == state / "debug.log"
        clock = SystemClock()
        rec = Recorder(night_path(state, clock.time()), max_bytes=1_000_000, clock=clock)
        rec.open()  # its first line is written as it opens
        rec.close()
        write(state)
        modes = _walk(state)
        await hub.close()
        pid.release()
    finally:
        os.umask(old)
    for d in (state.parent, state.parent.parent):  # made by us: 0700
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o755  # there before: not ours
    files = {"journal.jsonl", "journal.reserve", "runlocks/dgx1.json", "runlocks/.takeover",
             "phone.lock", "phone.json", "sentinel.pid", "sentinel.sock",
             "sentinel/last_good.json", "debug.log"}
    assert files <= modes.keys(), sorted(modes)
    assert {p.split("/")[0] for p in modes} >= {"recordings", "bundles"}
    wrong = {p: f"{m & 0o7777:04o}" for p, m in modes.items()
             if m != (stat.S_IFDIR | 0o700 if m & stat.S_IFDIR else 0o600)}
    assert not wrong, wrong


def test_a_state_dir_made_wider_is_tightened_and_nothing_above_it_is_touched(
        tmp_path: Path) -> None:
    from sparktui.ops.journal import Journal

    above = tmp_path / "srv"
    above.mkdir(mode=0o755)
    os.chmod(above, 0o755)
    state = above / "sparktui"
    state.mkdir()
    os.chmod(state, 0o777)  # an older sparktui's mkdir under umask 000
    (state / "journal.jsonl").write_text("")
    os.chmod(state / "journal.jsonl", 0o666)
    Journal.in_state_dir(state).append("w", "begin", workflow="stop", target="x")
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / "journal.jsonl").stat().st_mode) == 0o600
    assert stat.S_IMODE(above.stat().st_mode) == 0o755


def test_a_symlinked_state_dir_is_the_operators_and_is_followed(tmp_path: Path) -> None:
    """Only below the state dir is a link refused: the state dir itself is
    named by the operator, who may keep it on another disk."""
    from sparktui.ops.runlocks import RunLocks

    kept = tmp_path / "disk" / "sparktui"
    kept.mkdir(parents=True)
    os.chmod(kept, 0o755)
    state = tmp_path / "state"
    state.symlink_to(kept)
    RunLocks.in_state_dir(state).acquire(["dgx1"], wf="w", workflow="serve", target="x",
                                         started_at=T0)
    assert state.is_symlink() and (kept / "runlocks" / "dgx1.json").is_file()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o700


@pytest.mark.parametrize("planted", ["runlocks", "sentinel", "journal.jsonl", "phone.lock",
                                     "sentinel.pid", "debug.log"])
def test_a_symlink_planted_in_the_state_dir_is_refused_in_one_line(
        tmp_path: Path, planted: str, capsys: pytest.CaptureFixture[str]) -> None:
    """In place of a subdir or a file of the state dir: refused with one line
    naming the path (what the CLI prints, no traceback), its target untouched."""
    from sparktui.cli import crash
    from sparktui.ops import sentinel_state
    from sparktui.ops.journal import Journal, JournalError
    from sparktui.ops.runlocks import RunLocks
    from sparktui.service import phoned
    from sparktui.service.sentinel import PidLock
    from sparktui.tui.logsink import logged_to_file

    state, elsewhere = tmp_path / "state", tmp_path / "elsewhere"
    state.mkdir()
    elsewhere.mkdir()
    target = elsewhere / "victim"
    is_dir = "." not in planted
    if is_dir:
        target.mkdir()
    else:
        target.write_text("keep")
    (state / planted).symlink_to(target)
    acts = {
        "runlocks": lambda: RunLocks.in_state_dir(state).acquire(
            ["dgx1"], wf="w", workflow="serve", target="x", started_at=T0),
        "sentinel": lambda: sentinel_state.write(state, sentinel_state.LastGood(1, T0)),
        "journal.jsonl": lambda: Journal.in_state_dir(state).append(
            "w", "begin", workflow="stop", target="x"),
        "phone.lock": lambda: phoned.locked(state).__enter__(),
        "sentinel.pid": lambda: PidLock(state / planted).acquire(),
        "debug.log": lambda: logged_to_file(state / planted).__enter__(),
    }
    with pytest.raises((NotPrivate, JournalError)) as caught:
        acts[planted]()
    kind = "directory" if is_dir else "file"
    assert f"{state / planted}: a symlink where a {kind} belongs: refused, not followed" \
        in str(caught.value)
    assert (list(target.iterdir()) == [] if is_dir else target.read_text() == "keep")
    assert crash.report(caught.value, "serve", [], tmp_path / "none.toml") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(state / planted) in err and "Traceback" not in err
    assert [p.name for p in state.iterdir()] == [planted]  # nor a debug log


def test_a_file_where_the_state_dir_belongs_is_said(tmp_path: Path) -> None:
    from sparktui.ops.journal import Journal, JournalError

    state = tmp_path / "state"
    state.write_text("")
    with pytest.raises(JournalError, match=f"{state}: not a directory"):
        Journal.in_state_dir(state).append("w", "begin", workflow="stop", target="x")


def test_the_systemd_unit_is_0644_whatever_the_umask(tmp_path: Path) -> None:
    """Not in the state dir, but it names what systemd runs as this user: never
    writable by others. Its missing dirs are made 0700; an existing one stays."""
    from sparktui.cli.sentinel_cmd import UNIT_NAME, install_unit
    from sparktui.core.config_load import load_config

    os.chmod(tmp_path, 0o755)
    unit_dir = tmp_path / "config" / "systemd" / "user"
    old = os.umask(0)
    try:
        install_unit(load_config(Path(__file__).parents[2] / "config.toml"), unit_dir)
    finally:
        os.umask(old)
    assert stat.S_IMODE((unit_dir / UNIT_NAME).stat().st_mode) == 0o644
    assert stat.S_IMODE(unit_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o755
    assert sorted(p.name for p in unit_dir.iterdir()) == [UNIT_NAME]
