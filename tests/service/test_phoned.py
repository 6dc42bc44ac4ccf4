"""The phone's memory on disk (service/phoned.py): a night desk started again
on the same state dir (a restarted sentinel) does not phone an incident the
last one phoned and that is still open; the file is 0600, written before the
message goes, never through a symlink; written on another clock, only its
incidents count, and a desk on another clock keeps what it does not read."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from sparktui.core.clock import SystemClock
from sparktui.core.notify import PhoneMemory
from sparktui.service import phoned
from sparktui.service.events import Alert, AlertCleared, AlertRaised

from .test_night_desk import desk

FATAL = Alert("fatal:x", "fatal", "x", ("rank 1: boom",), "stop the lane (x)")
THRASH = Alert("thrash:dgx6", "thrash", "dgx6", ("ping answers, SSH probe failed 3x",), "")


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_restarted_desk_does_not_phone_an_open_incident_again(tmp_path: Path) -> None:
    first, phone, _, clock = desk(tmp_path, events=("fatal", "thrash"))
    first.on_event(AlertRaised(FATAL))
    # on disk before the call is made (the phone task has not run yet)
    assert phoned.read(tmp_path, "simulated", clock.t).open == (("fatal", "x", clock.t),)
    assert oct(phoned.path_in(tmp_path).stat().st_mode & 0o777) == "0o600"
    await settle()
    assert [t for _, t, _ in phone.sent] == ["sparktui FATAL x"]
    await first.stop()  # or killed: the memory is on disk already

    again, phone2, _, _ = desk(tmp_path, events=("fatal", "thrash"), clock=clock)
    again.on_event(AlertRaised(FATAL))  # the new process finds the dead ranks again
    again.on_event(AlertRaised(THRASH))  # a new incident
    await settle()
    assert [t for _, t, _ in phone2.sent] == ["sparktui THRASH dgx6"]
    await again.stop()


async def test_an_incident_cleared_before_the_restart_is_new_after_it(tmp_path: Path) -> None:
    first, _, _, clock = desk(tmp_path, events=("thrash",))
    first.on_event(AlertRaised(THRASH))
    await settle()
    first.on_event(AlertCleared(THRASH.key))
    clock.t += 3600.0 + 1  # past the hold (its recovery goes) and the dedup window
    first.on_event(AlertCleared("nothing"))
    await settle()
    await first.stop()
    again, phone, _, _ = desk(tmp_path, events=("thrash",), clock=clock)
    again.on_event(AlertRaised(THRASH))
    await settle()
    assert [t for _, t, _ in phone.sent] == ["sparktui THRASH dgx6"]
    await again.stop()


def test_a_symlink_is_not_followed_and_another_clock_reads_only_the_incidents(
        tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    os.symlink(target, phoned.path_in(tmp_path))
    assert phoned.read(tmp_path, "", 5.0) == PhoneMemory()
    memory = PhoneMemory(open=(("fatal", "x", 1.0),), last=(("fatal", "x", 1.0),),
                         sent=(1.0,))
    phoned.write(tmp_path, memory, "simulated")
    assert target.read_text() == "keep" and not phoned.path_in(tmp_path).is_symlink()
    assert phoned.read(tmp_path, "simulated", 5.0) == memory
    assert phoned.read(tmp_path, "", 5.0) == PhoneMemory(open=(("fatal", "x", 5.0),))


async def test_two_live_desks_on_one_state_dir_phone_an_incident_once(tmp_path: Path) -> None:
    """A console watching alone and a sentinel just started (both phone until the
    console attaches): each desk read the memory when it began phoning, before
    the incident; the one that phones it first wins, the other reads so from
    the file, and its end is told once."""
    console, phone1, _, clock = desk(tmp_path, events=("fatal", "thrash"))
    sentinel, phone2, _, _ = desk(tmp_path, events=("fatal", "thrash"), clock=clock)
    console.on_event(AlertRaised(FATAL))
    clock.t += 2.0
    sentinel.on_event(AlertRaised(FATAL))  # the same dead ranks, seen a poll later
    sentinel.on_event(AlertRaised(THRASH))  # an incident only the sentinel phones
    console.on_event(AlertRaised(THRASH))
    await settle()
    assert [t for _, t, _ in phone1.sent] == ["sparktui FATAL x"]
    assert [t for _, t, _ in phone2.sent] == ["sparktui THRASH dgx6"]
    for d in (console, sentinel):
        d.on_event(AlertCleared(FATAL.key))
    clock.t += 121.0  # past the hold: whichever desk's next event comes first tells it
    for d in (sentinel, console):
        d.on_event(AlertCleared("nothing"))
    await settle()
    recovered = [t for p in (phone1, phone2) for _, t, _ in p.sent if "RECOVERED" in t]
    assert recovered == ["sparktui RECOVERED FATAL x"]
    await console.stop()
    await sentinel.stop()


class WallClock(SystemClock):
    """The wall's clock (``clock_of`` says so) at a time the test sets."""

    def __init__(self, t: float) -> None:
        self.t = t

    def time(self) -> float:
        return self.t


async def test_a_desk_on_another_clock_keeps_this_ones_dedup_window(tmp_path: Path) -> None:
    """A demo's console (the simulator's clock) beside a wall-clock sentinel on
    one state dir: the sentinel's write of its own incident used to leave the
    console only its open incidents, so a thrash that flapped back within the
    console's dedup window was phoned twice."""
    console, phone, _, clock = desk(tmp_path, events=("fatal", "thrash"))
    console.on_event(AlertRaised(THRASH))
    await settle()
    console.on_event(AlertCleared(THRASH.key))
    clock.t += 121.0  # past the hold: the recovery goes, the dedup window runs
    console.on_event(AlertCleared("nothing"))
    await settle()
    assert [t for _, t, _ in phone.sent] == ["sparktui THRASH dgx6",
                                             "sparktui RECOVERED THRASH dgx6"]
    sentinel, phone2, _, _ = desk(tmp_path, events=("fatal", "thrash"),
                                  clock=WallClock(1_900_000_000.0))
    sentinel.on_event(AlertRaised(FATAL))  # its own incident, written on its clock
    await settle()
    assert [t for _, t, _ in phone2.sent] == ["sparktui FATAL x"]
    clock.t += 60.0
    console.on_event(AlertRaised(THRASH))  # flapped back within the console's hour
    console.on_event(AlertRaised(FATAL))  # the sentinel's incident, open here too
    await settle()
    assert len(phone.sent) == 2
    on_the_console = phoned.read(tmp_path, "simulated", clock.t)
    assert ("thrash", "dgx6") in {(e, s) for e, s, _ in on_the_console.last}
    assert on_the_console.open == (("fatal", "x", clock.t),)  # its time is not ours
    await console.stop()
    await sentinel.stop()


def test_an_incident_another_clock_holds_keeps_its_time(tmp_path: Path) -> None:
    phoned.write(tmp_path, PhoneMemory(open=(("fatal", "x", 100.0),), sent=(100.0,)), "")
    adopted = phoned.read(tmp_path, "simulated", 7.0)
    assert adopted == PhoneMemory(open=(("fatal", "x", 7.0),))
    phoned.write(tmp_path, adopted, "simulated")
    assert phoned.read(tmp_path, "", 200.0) == PhoneMemory(open=(("fatal", "x", 100.0),),
                                                          sent=(100.0,))
    ended = PhoneMemory(open=(("fatal", "x", 7.0),), ending=(("fatal", "x", 9.0, "over"),))
    phoned.write(tmp_path, ended, "simulated")  # over, seen on the simulator's clock
    assert phoned.read(tmp_path, "", 200.0) == PhoneMemory(
        open=(("fatal", "x", 100.0),), ending=(("fatal", "x", 200.0, "over"),), sent=(100.0,))
    phoned.write(tmp_path, PhoneMemory(), "")  # its recovery went from the wall's desk
    assert phoned.read(tmp_path, "simulated", 10.0) == PhoneMemory()


def test_the_first_form_of_the_file_reads_on_its_clock(tmp_path: Path) -> None:
    phoned.path_in(tmp_path).write_text(
        '{"clock": "simulated", "open": [["fatal", "x", 1.0]], "ending": [], '
        '"last": [["fatal", "x", 1.0]], "sent": [1.0]}\n')
    assert phoned.read(tmp_path, "simulated", 5.0) == PhoneMemory(
        open=(("fatal", "x", 1.0),), last=(("fatal", "x", 1.0),), sent=(1.0,))
    assert phoned.read(tmp_path, "", 5.0) == PhoneMemory(open=(("fatal", "x", 5.0),))
