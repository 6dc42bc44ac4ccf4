"""The log follower against an in-memory docker: bursts, partial lines,
invalid UTF-8, dropped streams resumed with no duplicate and no gap,
bounded line buffers, merged ranks."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.errors import RemoteError
from sparktui.watch.follower import (
    LogFollower,
    LogLine,
    container_state,
    docker_logs_command,
)

follow_container = LogFollower.for_container


class InstantClock:
    def __init__(self) -> None:
        self.t = 0.0
        self.slept: list[float] = []

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds
        await asyncio.sleep(0)


def ts(i: int, same_second: bool = False) -> str:
    """Docker RFC3339Nano, zero-padded; several lines may share one stamp."""
    sec, ns = (0, i // 3) if same_second else divmod(i, 1000)
    return f"2026-11-29T01:{sec // 60 % 60:02d}:{sec % 60:02d}.{ns:09d}Z"


class FakeDocker:
    """Answers ``docker logs`` like docker: --since is inclusive, --tail counts
    from the end; chunks are cut at random byte offsets; ``drops`` makes a
    stream raise after that many bytes (a lost SSH channel)."""

    def __init__(self, log: list[bytes], *, seed: int = 1, drops: list[int] | None = None,
                 max_chunk: int = 97) -> None:
        self.log = log
        self.rng = random.Random(seed)
        self.drops = list(drops or [])
        self.max_chunk = max_chunk
        self.commands: list[str] = []

    def _select(self, cmd: str) -> bytes:
        since = re.search(r"--since (\S+)", cmd)
        tail = re.search(r"--tail (\d+)", cmd)
        lines = self.log
        if since:
            key = since.group(1).strip("'")
            lines = [ln for ln in lines if ln.split(b" ", 1)[0].decode() >= key]
        elif tail:
            lines = lines[-int(tail.group(1)):]
        return b"".join(lines)

    async def stream(self, cmd: str) -> AsyncIterator[bytes]:
        self.commands.append(cmd)
        data = self._select(cmd)
        drop_at = self.drops.pop(0) if self.drops else None
        pos = 0
        while pos < len(data):
            n = self.rng.randint(1, self.max_chunk)
            if drop_at is not None and pos + n >= drop_at:
                if drop_at > pos:
                    yield data[pos:drop_at]
                raise RemoteError("dgx1", cmd, "connection lost")
            yield data[pos:pos + n]
            pos += n
            await asyncio.sleep(0)


def make_log(n: int, same_second: bool = False) -> list[bytes]:
    return [f"{ts(i, same_second)} line {i} é\n".encode() for i in range(n)]


async def collect(f: LogFollower) -> list[LogLine]:
    return [line async for line in f.lines()]


def texts(lines: list[LogLine]) -> list[str]:
    return [ln.text for ln in lines]


def test_command_is_quoted_and_matches_the_contract() -> None:
    assert docker_logs_command("sparktui-m-r0", follow=True, tail=200) == (
        "docker logs -f --tail 200 --timestamps sparktui-m-r0 2>&1")
    assert docker_logs_command("x; rm -rf /", follow=False) == (
        "docker logs --timestamps 'x; rm -rf /' 2>&1")
    assert docker_logs_command("c", follow=True, since="2026-11-29T01:00:00.5Z") == (
        "docker logs -f --since 2026-11-29T01:00:00.5Z --timestamps c 2>&1")


async def test_burst_split_at_random_offsets_is_reassembled() -> None:
    docker = FakeDocker(make_log(2000), seed=7)
    lines = await collect(follow_container(docker, "c", rank=3, follow=False))
    assert texts(lines) == [f"line {i} é" for i in range(2000)]
    assert all(ln.rank == 3 for ln in lines)
    assert lines[5].ts == ts(5)


@pytest.mark.parametrize("seed", range(8))
async def test_dropped_streams_resume_without_duplicates_or_gaps(seed: int) -> None:
    log = make_log(1500, same_second=bool(seed % 2))
    rng = random.Random(seed)
    drops = sorted(rng.randint(10, 20000) for _ in range(4))
    docker = FakeDocker(log, seed=seed, drops=drops)
    clock = InstantClock()
    alive = [True]

    async def still_running() -> bool:
        return alive[0]

    f = follow_container(docker, "c", follow=True, still_running=still_running, clock=clock)
    got: list[LogLine] = []
    async for line in f.lines():
        got.append(line)
        if len(got) == len(log):
            break
    assert texts(got) == [f"line {i} é" for i in range(1500)]
    assert f.reconnects == len(drops)
    assert any("--since" in c for c in docker.commands[1:])


async def test_ended_container_stops_the_follow() -> None:
    docker = FakeDocker(make_log(10))

    async def dead() -> bool:
        return False

    lines = await collect(follow_container(docker, "c", still_running=dead, clock=InstantClock()))
    assert len(lines) == 10
    # one more read from the last line before giving up: nothing new, no duplicate
    assert docker.commands[1:] == [f"docker logs -f --since {ts(9)} --timestamps c 2>&1"]


class CutStream(FakeDocker):
    """The first stream is closed under the follower (a stalled probe dropped
    the connection: EOF, no error) before the engine's last lines, which are
    written while the container exits."""

    def __init__(self, log: list[bytes], last: list[bytes]) -> None:
        super().__init__(log)
        self.last = last

    async def stream(self, cmd: str):  # type: ignore[no-untyped-def]
        async for chunk in super().stream(cmd):
            yield chunk
        if len(self.commands) == 1:
            self.log = self.log + self.last  # written after the cut, then the exit


ENGINE_DEAD = [
    f"{ts(100)} (EngineCore_DP0 pid=312) ERROR 11-29 01:00:00 [core.py:1012] EngineCore "
    "encountered a fatal error.\n".encode(),
    f"{ts(101)} vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
    "See stack trace (above) for the root cause.\n".encode(),
]


@pytest.mark.parametrize("run", range(20))
async def test_a_cut_stream_still_delivers_the_last_lines_of_an_exited_container(
        run: int) -> None:
    """The console's missed EngineDead: the stream ended (closed under it),
    the container had exited meanwhile, and the follow ended without reading
    the lines written between the cut and the exit."""
    docker = CutStream(make_log(10 + run), ENGINE_DEAD)

    async def dead() -> bool:
        return False

    f = follow_container(docker, "c", still_running=dead, clock=InstantClock())
    lines = await collect(f)
    assert [ln.text for ln in lines[-2:]] == [ln.decode().split(" ", 1)[1].rstrip("\n")
                                               for ln in ENGINE_DEAD]
    assert len(lines) == 10 + run + 2 and f.ended


async def test_stream_that_ends_while_container_runs_is_resumed() -> None:
    docker = FakeDocker(make_log(10))
    calls = [0]

    async def running_then_dead() -> bool:
        calls[0] += 1
        if calls[0] == 1:
            docker.log += make_log(15)[10:]
            return True
        return False

    f = follow_container(docker, "c", still_running=running_then_dead, clock=InstantClock())
    lines = await collect(f)
    assert texts(lines) == [f"line {i} é" for i in range(15)]
    assert f.reconnects == 1


async def test_invalid_utf8_and_split_multibyte_characters() -> None:
    data = [b"2026-11-29T01:00:00.000000001Z bad \xff\xfe bytes\n",
            f"{ts(2)} caf\u00e9 \u2588\u2588 ok\n".encode()]

    class Bytewise:
        async def stream(self, cmd: str) -> AsyncIterator[bytes]:
            for b in b"".join(data):
                yield bytes([b])  # every multi-byte character split

    lines = await collect(follow_container(Bytewise(), "c", follow=False))
    assert lines[0].text == "bad \ufffd\ufffd bytes"
    assert lines[1].text == "caf\u00e9 \u2588\u2588 ok"


async def test_overlong_line_is_cut_and_buffer_stays_bounded() -> None:
    big = b"x" * 1_000_000

    class Flood:
        async def stream(self, cmd: str) -> AsyncIterator[bytes]:
            yield b"2026-11-29T01:00:00.000000001Z " + big[:500_000]
            yield big[500_000:] + b"\n" + f"{ts(5)} after\n".encode()

    lines = await collect(follow_container(Flood(), "c", follow=False, max_line_bytes=4096))
    assert len(lines) == 2
    assert lines[0].truncated and len(lines[0].raw) == 4096
    assert lines[1].text == "after" and not lines[1].truncated


async def test_tqdm_carriage_returns_and_crlf() -> None:
    class Tqdm:
        async def stream(self, cmd: str) -> AsyncIterator[bytes]:
            yield f"{ts(1)} \rbar 10%\rbar 20%\n{ts(2)} crlf line\r\n".encode()
            yield f"{ts(3)} no newline at end".encode()

    lines = await collect(follow_container(Tqdm(), "c", follow=False))
    assert texts(lines) == ["\rbar 10%\rbar 20%", "crlf line", "no newline at end"]


async def test_tail_is_passed_on_first_stream_then_since() -> None:
    docker = FakeDocker(make_log(50), drops=[100])
    clock = InstantClock()

    async def alive() -> bool:
        return len(docker.commands) < 2

    f = follow_container(docker, "c", tail=5, still_running=alive, clock=clock)
    lines = await collect(f)
    assert texts(lines) == [f"line {i} é" for i in range(45, 50)]
    assert "--tail 5" in docker.commands[0] and "--since" in docker.commands[1]


async def test_backoff_grows_on_repeated_failures() -> None:
    class Down:
        async def stream(self, cmd: str) -> AsyncIterator[bytes]:
            raise RemoteError("dgx1", cmd, "no route")
            yield b""  # pragma: no cover

    clock = InstantClock()
    f = follow_container(Down(), "c", clock=clock)
    it = f.batches().__aiter__()
    task = asyncio.create_task(it.__anext__())
    while len(clock.slept) < 7:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert clock.slept[:7] == [1.0, 2.0, 4.0, 8.0, 16.0, 16.0, 16.0]
    assert f.last_error == "no route"


async def test_container_state_parses_inspect_json() -> None:
    class Runner:
        def __init__(self, out: str) -> None:
            self.out = out
            self.cmds: list[str] = []

        async def run(self, cmd: str, timeout: float) -> object:
            self.cmds.append(cmd)
            return type("R", (), {"stdout": self.out})()

    r = Runner('{"Status":"exited","Running":false,"ExitCode":137,"OOMKilled":false}\n')
    state = await container_state(r, "sparktui-m-r5")
    assert state == {"Status": "exited", "Running": False, "ExitCode": 137, "OOMKilled": False}
    assert r.cmds == ["docker inspect --format '{{json .State}}' sparktui-m-r5 2>&1"]
    assert await container_state(Runner("Error: No such object: x\n"), "x") is None


async def test_journal_resumes_with_history_and_skips_what_was_delivered() -> None:
    journal = [f"2026-11-29T01:00:{i:02d}.000001+0000 dgx6 kernel: msg {i}\n".encode()
               for i in range(40)]

    class Journal:
        def __init__(self) -> None:
            self.commands: list[str] = []

        async def stream(self, cmd: str) -> AsyncIterator[bytes]:
            self.commands.append(cmd)
            n = int(re.search(r"-n (\d+)", cmd).group(1))
            if len(self.commands) == 1:
                for line in journal[:25]:  # new lines arrive, then the channel drops
                    yield line
                raise RemoteError("dgx6", cmd, "connection lost")
            for line in journal[max(0, 40 - n):]:
                yield line

    src = Journal()
    f = LogFollower.for_journal(src, "dgx6", clock=InstantClock())
    got: list[str] = []
    async for line in f.lines():
        got.append(line.text)
        if len(got) == 40:
            break
    assert got == [f"dgx6 kernel: msg {i}" for i in range(40)]
    assert src.commands == [
        "journalctl -b -f -o short-iso-precise --no-pager -n 0 "
        "_TRANSPORT=kernel + SYSLOG_IDENTIFIER=systemd-journald 2>&1",
        "journalctl -b -f -o short-iso-precise --no-pager -n 500 "
        "_TRANSPORT=kernel + SYSLOG_IDENTIFIER=systemd-journald 2>&1",
    ]


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=600), st.lists(st.integers(1, 64), min_size=1, max_size=40))
def test_any_bytes_any_chunking_give_the_same_lines(data: bytes, cuts: list[int]) -> None:
    """Property: however the stream is cut, the lines are the newline-split
    bytes, decoded with replacement, \\r-stripped, never longer than the cap."""

    class Cut:
        async def stream(self, cmd: str) -> AsyncIterator[bytes]:
            pos, i = 0, 0
            while pos < len(data):
                n = cuts[i % len(cuts)]
                yield data[pos:pos + n]
                pos, i = pos + n, i + 1

    cap = 100
    got = asyncio.run(collect(follow_container(Cut(), "c", follow=False, max_line_bytes=cap)))
    want = data.split(b"\n")
    if want and want[-1] == b"":
        want.pop()
    assert len(got) == len(want)
    for line, raw in zip(got, want, strict=True):
        raw = raw[:cap]
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        assert line.raw == raw.decode("utf-8", "replace")
