"""What a lane's watch reads of its nodes while the lane boots (watch/lane.py):
each rank node's memory (from the console's poller, or a read of its own) and
the bytes its ranks' engines read (their ``/proc/<pid>/io``; the node's disk
and NFS counters when they cannot be read) -- load progress in a silent load
-- in one fork-free read per node and period; and the reads themselves.
They are the watcher's own parts: each takes the watcher and reads and
changes its state as its methods did."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparktui.core.errors import RemoteError
from sparktui.core.probe import builtin_cat, builtin_cat_word, parse_section
from sparktui.core.state import NodeSnapshot
from sparktui.watch.follower import (
    CommandRunner,
)
from sparktui.watch.lane_model import MemoryRead
from sparktui.watch.readiness import (
    NodeLink,
    inspect_container,
)

if TYPE_CHECKING:
    from sparktui.watch.lane import LaneWatcher

RESOURCE_TIMEOUT_S = 10.0
IO_PROGRESS_BYTES = 256 * 1024 * 1024
"""This many more bytes read by a rank's engine (or, when its processes
cannot be read, on its node from disk or NFS) is load progress."""
IO_POLL_S = 60.0
"""How often a watcher whose memory comes from the console's poller reads
the ranks' I/O (a 900 s stall window needs far less)."""
NODE_IO_READ = f"{builtin_cat('/proc/diskstats')}; {builtin_cat('/proc/self/mountstats')}"
"""Block-device sectors read and NFS bytes read on a node (page-cache reads
of a sparse shard show in no MemAvailable change, only here)."""
MEMORY_READ = builtin_cat("/proc/meminfo")
"""MemAvailable, for a boot whose watcher reads memory itself (the CLI's
serve and wait; the console's watchers take it from the poller)."""


def on_snapshot(w: LaneWatcher, snap: NodeSnapshot) -> None:
    """A poll of one node (the console's poller): memory filling on a
    rank's node is load progress. Ignored while the watcher reads the
    nodes itself (one source of memory readings, not two)."""
    if w.resource_poll_s is not None or w.tracker.done \
            or all(rc.node != snap.node for rc in w.ranks):
        return
    mem = snap.probe.meminfo if snap.probe is not None else None
    if mem is not None:
        memory_read(w, snap.node, mem.available_kib)


def memory_read(w: LaneWatcher, node: str, available_kib: int) -> None:
    """One MemAvailable reading of a rank's node: counted (before it is
    told, so a subscriber reads the load with it), told, and noted as
    progress when it is another step resident."""
    said = w.memory.observe(node, available_kib, w.clock.monotonic())
    w._emit(MemoryRead(w.lane, node, available_kib))
    note(w, said)


def note(w: LaneWatcher, note: str | None) -> None:
    if note is not None:
        w.tracker.note_progress(note, w.clock.monotonic())
        w._phase_changed()


async def resources(w: LaneWatcher) -> None:
    """While the lane boots: each rank node's memory (unless the poller
    gives it) and the bytes its ranks' engines read."""
    own_memory = w.resource_poll_s is not None
    period = w.resource_poll_s if own_memory else w.io_poll_s
    assert period is not None
    while not w.tracker.done:
        for node in sorted({r.node for r in w.ranks if r.node in w.links}):
            await read_node(w, node, own_memory)
        await w.clock.sleep(period)


async def read_node(w: LaneWatcher, node: str, own_memory: bool) -> None:
    """One command on ``node`` (:func:`resource_command`): its memory
    (``own_memory``), the bytes its ranks' engines read and the bytes read
    on the node, each part only while it can be read there."""
    link = w.links[node]
    ranks = [st for st in w._ranks.values() if st.rc.node == node and not st.ended]
    pids: dict[int, int] = {}
    if w._engines.get(node, True):
        for st in ranks:
            if st.pid is None and (facts := await inspect_container(link, st.rc.container)):
                st.pid = facts.pid
        pids = {st.pid: st.rc.rank for st in ranks if st.pid is not None}
    node_io = node not in w._io_unreadable and not (pids and w._engines.get(node))
    if not (own_memory or pids or node_io):
        return
    text = await run(w, link, resource_command(own_memory, sorted(pids), node_io))
    if text is None:
        return
    parts = resource_parts(text)
    if own_memory and (
            mem := parse_section("meminfo", parts.get("meminfo", "")).meminfo) is not None:
        memory_read(w, node, mem.available_kib)
    engines = engine_read_bytes(parts.get("engines", "")) if pids else {}
    if pids:  # none read: another user's processes, another shell
        w._engines[node] = bool(engines)
    for pid, read in engines.items():
        if pid in pids:
            note(w, io_progress(w, f"rank {pids[pid]} ({node})", read,
                                "read by its engine"))
    if engines or not node_io:
        return
    total = read_bytes(parts.get("io", ""))
    if total is None:
        w._io_unreadable.add(node)  # no counter at all there: not asked again
    note(w, io_progress(w, node, total, "read from disk/NFS"))


async def run(w: LaneWatcher, link: NodeLink, cmd: str) -> str | None:
    """A resource read, in the node's reader shell: every 10 s on every
    rank node of a boot, an exec channel each was a session setup (a login
    shell forked by sshd) on nodes whose memory is filling."""
    try:
        return str(getattr(await reader(link).run(cmd, RESOURCE_TIMEOUT_S), "stdout", ""))
    except RemoteError:
        return None


def io_progress(w: LaneWatcher, who: str, total: int | None, how: str) -> str | None:
    if total is None:
        return None
    before = w._io.get(who)
    if before is None or total < before:
        w._io[who] = total
        return None
    if total - before < IO_PROGRESS_BYTES:
        return None
    w._io[who] = total
    return f"{who}: {(total - before) / 2**30:.1f} GiB more {how}"


@dataclass(frozen=True)
class _ShellReads:
    """A link's long-lived reader shell as a CommandRunner."""

    read: Callable[[str, float], Awaitable[object]]

    async def run(self, cmd: str, timeout: float) -> object:
        return await self.read(cmd, timeout)


def reader(link: NodeLink) -> CommandRunner:
    """Where a watch's short reads go (the one-shot log reads of the fatal
    decision, the boot's memory and I/O reads): the node's long-lived reader
    shell when the link has one (adapters/ssh.NodeConnection.read: no session
    setup per read, which was most of fatal line -> verdict over a real sshd),
    else a command of its own."""
    read = getattr(link, "read", None)
    return _ShellReads(read) if read is not None else link


def resource_command(memory: bool, pids: Sequence[int], node_io: bool) -> str:
    """One read of a boot's resources on a node, in sections ``@@meminfo``
    (when ``memory``), ``@@engines`` (:func:`io_command` of ``pids``, when
    any) and ``@@io`` (:data:`NODE_IO_READ`, when ``node_io``): one round
    trip each period, and shell builtins only (no fork on a node whose
    memory is filling)."""
    parts = []
    if memory:
        parts.append(f"echo @@meminfo; {MEMORY_READ}")
    if pids:
        parts.append(f"echo @@engines; {io_command(pids)}")
    if node_io:
        parts.append(f"echo @@io; {NODE_IO_READ}")
    return "; ".join(parts)


def resource_parts(text: str) -> dict[str, str]:
    """:func:`resource_command`'s output by section."""
    parts: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for line in text.splitlines(keepends=True):
        tag = line.rstrip("\n")
        if tag in ("@@meminfo", "@@engines", "@@io"):
            if name is not None:
                parts[name] = "".join(lines)
            name, lines = tag[2:], []
        elif name is not None:
            lines.append(line)
    if name is not None:
        parts[name] = "".join(lines)
    return parts


def io_command(pids: Sequence[int]) -> str:
    """For each rank engine's main process (``@@pid P``) the I/O counters of
    every process of its container (its cgroup v2; the main process alone
    otherwise). Shell builtins only: no fork however many processes. The
    pids are validated integers: nothing else reaches the shell."""
    each_process = builtin_cat_word('"/proc/$q/io"')
    parts = []
    for pid in pids:
        p = int(pid)
        if p <= 0:
            raise ValueError(f"not a process id: {pid!r}")
        parts.append(
            f'echo "@@pid {p}"; {{ cg=""; read -r cg < /proc/{p}/cgroup; case "$cg" in '
            f'0::/) f="";; 0::/*) f="/sys/fs/cgroup${{cg#0::}}/cgroup.procs";; *) f="";; esac; '
            f'if [ -n "$f" ] && [ -r "$f" ]; then while read -r q; do '
            f'{each_process}; done < "$f"; '
            f'else {builtin_cat_word(f"/proc/{p}/io")}; fi; }} 2>/dev/null')
    return "; ".join(parts)


def engine_read_bytes(text: str) -> dict[int, int]:
    """Bytes read so far by each rank's engine (by main pid), from
    :func:`io_command`'s output: per process the larger of ``rchar`` (read
    calls, page-cache hits included) and ``read_bytes`` (from storage, page
    faults of mmapped shards included). Ranks whose processes could not be
    read are absent."""
    out: dict[int, int] = {}
    pid: int | None = None
    rchar = 0
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "@@pid":
            pid = int(value) if value.strip().isdigit() else None
        elif pid is not None and key in ("rchar:", "read_bytes:") and value.strip().isdigit():
            if key == "rchar:":
                rchar = int(value)
            else:
                out[pid] = out.get(pid, 0) + max(rchar, int(value))
                rchar = 0
    return out


def read_bytes(text: str) -> int | None:
    """Bytes read on a node so far: sectors read of every block device in
    ``/proc/diskstats`` (a partition counts with its disk too: only growth
    matters here) plus the NFS bytes read from the server, page-ins of
    mmapped shards included (``bytes:`` of ``/proc/self/mountstats``). None
    when neither is there."""
    total = 0
    found = False
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 14 and parts[0].isdigit() and parts[1].isdigit():
            if parts[2].startswith(("loop", "ram")):
                continue
            with contextlib.suppress(ValueError):
                total += int(parts[5]) * 512
                found = True
        elif parts[:1] == ["bytes:"] and len(parts) >= 7:
            with contextlib.suppress(ValueError):
                total += int(parts[5])
                found = True
    return total if found else None


