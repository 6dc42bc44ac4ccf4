"""Was a rank's container killed by the kernel's OOM killer? The pure half of
the answer: the kernel's own report read from the node's journal, and the rule
that pairs one of its kills with one container.

Exit 137 is a SIGKILL and nothing more: SGLang SIGKILLs its own process tree
after a plain Python error (``kill_process_tree``), ``docker rm -f`` kills too.
docker's ``State.OOMKilled`` is set only for a kill inside the container's own
memory cgroup; the host's global OOM killer (the usual death on a GB10 whose
128 GB are shared by CPU and GPU) leaves it false. So a 137 is an OOM here only
with the kernel's word for it, and the word names the container.

The kernel's report (Linux ``mm/oom_kill.c``, current mainline; read in
AOSC-Tracking/ubuntu-linux-mainline-crack@72c0e479 ``dump_header``,
``dump_oom_summary``, ``__oom_kill_process``; ``mm/memcontrol.c``
``mem_cgroup_print_oom_context``)::

    %s invoked oom-killer: gfp_mask=%#x(%pGg), order=%d, oom_score_adj=%hd
    ... the stack, the memory state, the task dump ...
    oom-kill:constraint=%s,nodemask=%*pbl,cpuset=%s,mems_allowed=%*pbl
        (,global_oom | ,oom_memcg=PATH),task_memcg=PATH,task=%s,pid=%d,uid=%d
    %s: Killed process %d (%s) total-vm:%lukB, anon-rss:%lukB, file-rss:%lukB,
        shmem-rss:%lukB, UID:%u pgtables:%lukB oom_score_adj:%hd

where the last line's ``%s`` is ``Out of memory`` (global; ``Out of memory
(oom_kill_allocating_task)`` with that sysctl) or ``Memory cgroup out of
memory``. The one-line ``oom-kill:`` summary is printed by ``dump_header``,
which is rate-limited (``__ratelimit(&oom_rs)``); the ``Killed process`` line is
not. Kernels before 4.19 print no summary at all.

The pairing (:func:`container_kill`), decided as sound:

- **by cgroup** (the proof): the summary's ``task_memcg`` names the container's
  full 64-hex id (``/system.slice/docker-<id>.scope`` with systemd's cgroup
  driver, ``/docker/<id>`` with cgroupfs; a process the engine forked is in the
  same cgroup, so the EngineCore or a scheduler child counts as the container).
  An id never names another container.
- **by pid** (when the summary was rate-limited away): the killed pid is one of
  the container's processes as read while it ran (docker's ``State.Pid``, the
  main process; a child killed alone is found by cgroup only).
- **in time** either way: the kill is stamped within the container's life
  (``StartedAt`` to ``FinishedAt``, plus :data:`AFTER_EXIT_S` for journald's
  receipt stamp, which lags the kernel under memory pressure). Both clocks are
  the rank node's own. A pid outside that window may be another process's
  (pids are reused); a kill with no readable stamp counts by cgroup only.
- **never by time alone**: a kill of some other process on the node shortly
  before the exit is not this container's, and SGLang's own SIGKILL of its
  tree comes with no oom-killer line at all. Without a pairing, 137 stays
  ``killed (SIGKILL)``.

MemAvailable is not taken as evidence here: the lane's readings stop once it
serves and are missing while a node thrashes (its SSH is starved), and after a
kill the memory is back, so a reading "at the exit" is either stale or shows
the memory freed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sparktui.core.logsig import Kind, LogEvent, Phase, Severity, parse_timestamp, split_timestamp
from sparktui.core.state import KIB_PER_GIB

AFTER_EXIT_S = 60.0
"""A kill stamped up to this long after the container's FinishedAt is still
its own: journald stamps a kernel line when it reads it, late on a starved node."""
LOOKBACK_S = 600.0
"""How far before the exit (or the fatal line) the node's journal is read: a
child's kill and the container's exit are seconds apart (vLLM's API server
exits ~5 s after its engine core died)."""

_KILLED = re.compile(
    r"(?P<message>Out of memory(?: \(oom_kill_allocating_task\))?|Memory cgroup out of memory)"
    r": Killed process (?P<pid>\d+) \((?P<task>.{0,16}?)\)"
    r"(?: total-vm:(?P<total_vm>\d+)kB, anon-rss:(?P<anon_rss>\d+)kB)?")
_SUMMARY = re.compile(
    r"oom-kill:constraint=(?P<constraint>\w+),.*?(?P<scope>,global_oom|,oom_memcg=[^,]*)?"
    r",task_memcg=(?P<memcg>[^,]*),task=(?P<task>.*),pid=\s*(?P<pid>\d+),uid=\s*\d+\s*$")
_DOCKER_ID = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class OomKill:
    """One process the kernel's OOM killer killed, as its report says."""

    pid: int
    task: str
    """The process's name (``comm``, at most 15 characters)."""
    at: float | None
    """The journal's stamp of the ``Killed process`` line (epoch seconds)."""
    stamp: str | None
    """That stamp as the journal printed it (RFC 3339)."""
    anon_rss_kib: int | None
    host: bool
    """A global OOM (``Out of memory``), not a memory cgroup's limit."""
    memcg: str | None = None
    """The victim's memory cgroup (``task_memcg``) from the summary line, when
    one was printed for this kill."""

    def evidence(self) -> str:
        """``python3 (pid 4242), anon-rss 99.0 GiB``."""
        rss = (f", anon-rss {self.anon_rss_kib / KIB_PER_GIB:.1f} GiB"
               if self.anon_rss_kib is not None else "")
        return f"{self.task} (pid {self.pid}){rss}"


def parse_oom_kills(lines: Iterable[str]) -> list[OomKill]:
    """The kills in journal lines (``journalctl -o short-iso-precise``, or bare
    messages), oldest first; each ``Killed process`` line paired with the
    summary line of the same pid printed before it, when there is one."""
    summaries: dict[int, str] = {}
    kills: list[OomKill] = []
    for line in lines:
        stamp, body = split_timestamp(line.rstrip("\n"))
        if "oom-kill:" in body:
            m = _SUMMARY.search(body)
            if m is not None:
                summaries[int(m["pid"])] = m["memcg"]
            continue
        m = _KILLED.search(body)
        if m is None:
            continue
        pid = int(m["pid"])
        rss = m["anon_rss"]
        kills.append(OomKill(pid, m["task"], parse_timestamp(stamp), stamp,
                             int(rss) if rss is not None else None,
                             m["message"] != "Memory cgroup out of memory",
                             summaries.pop(pid, None)))
    return kills


def container_kill(kills: Sequence[OomKill], *, container_id: str | None, pids: Iterable[int],
                   started: float | None, until: float | None) -> OomKill | None:
    """The latest kill of a process of this container within its life
    (``started`` to ``until``, its FinishedAt or now, plus AFTER_EXIT_S): by its
    cgroup naming ``container_id`` (the full id), else by its pid among
    ``pids``; None when no kill is this container's (see the module doc)."""
    full_id = container_id if container_id and _DOCKER_ID.fullmatch(container_id) else None
    known = {p for p in pids if p > 0}
    for kill in reversed(kills):
        if kill.at is not None and (
                (started is not None and kill.at < started)
                or (until is not None and kill.at > until + AFTER_EXIT_S)):
            continue
        if full_id is not None and kill.memcg is not None and full_id in kill.memcg:
            return kill
        if kill.at is not None and started is not None and kill.pid in known:
            return kill
    return None


def oom_exit(kill: OomKill, node: str, exit_code: int | None) -> LogEvent:
    """The lane's failure (or its cause) when the kernel's OOM killer took a
    process of a rank's container: what it killed, where, and how the
    container ended (``exit_code`` None: it had not exited yet)."""
    where = f"host out of memory on {node}" if kill.host else f"memory cgroup limit on {node}"
    ended = ("" if exit_code is None else "; container killed (SIGKILL)" if exit_code == 137
             else f"; container exited with code {exit_code}")
    fields = {"pid": str(kill.pid), "task": kill.task, "node": node,
              "oom_kind": "host" if kill.host else "memcg"}
    if kill.anon_rss_kib is not None:
        fields["anon_rss_kib"] = str(kill.anon_rss_kib)
    if exit_code is not None:
        fields["exit_code"] = str(exit_code)
    return LogEvent(Kind.KERNEL_OOM_KILL, Severity.FATAL, Phase.FAILED, fields,
                    f"OOM: the kernel's OOM killer killed {kill.evidence()} ({where}){ended}")
