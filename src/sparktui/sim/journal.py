"""The node's journal (kernel lines and journald's own notices) and the
`journalctl` filters production uses, in short-iso-precise form."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .timefmt import journal_precise

NVRM_NO_MEMORY = (
    "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) "
    "returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359"
)
NVRM_IOVA = (
    "NVRM: _iovaspaceCreateMappingDataFromMemDesc: failed to allocate 0x176028 bytes for "
    "IOVA mapping metadata"
)
NVRM_ASSERT = (
    "NVRM: nvAssertOkFailedNoLog: Assertion failed: Out of memory [NV_ERR_NO_MEMORY] "
    "(0x00000051) returned from rmapiAllocWithSecInfo @ nv_gpu_ops.c:4647"
)
FLUSHING = "Under memory pressure, flushing caches."


def oom_kill_lines(container_id: str, pid: int, rss_kb: int) -> list[str]:
    """The kernel's global OOM-kill report (mm/oom_kill.c) for one process."""
    return [
        "python3 invoked oom-killer: gfp_mask=0x140dca(GFP_HIGHUSER_MOVABLE|__GFP_COMP|"
        "__GFP_ZERO), order=0, oom_score_adj=0",
        "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
        f"task_memcg=/system.slice/docker-{container_id}.scope,task=python3,pid={pid},uid=0",
        f"Out of memory: Killed process {pid} (python3) total-vm:{rss_kb + 41_943_040}kB, "
        f"anon-rss:{rss_kb}kB, file-rss:81920kB, shmem-rss:8192kB, UID:0 "
        f"pgtables:{rss_kb // 512}kB oom_score_adj:0",
    ]


@dataclass(frozen=True)
class JournalEntry:
    t: float
    ident: str
    """``kernel`` or ``systemd-journald[412]``."""
    message: str


class Journal:
    def __init__(self, hostname: str, max_entries: int = 20000) -> None:
        self.hostname = hostname
        self.entries: list[JournalEntry] = []
        self.max_entries = max_entries

    def kernel(self, t: float, message: str) -> None:
        self._add(JournalEntry(t, "kernel", message))

    def journald(self, t: float, message: str) -> None:
        self._add(JournalEntry(t, "systemd-journald[412]", message))

    def _add(self, entry: JournalEntry) -> None:
        self.entries.append(entry)
        if len(self.entries) > self.max_entries:
            del self.entries[: len(self.entries) - self.max_entries]

    def render(self, entry: JournalEntry) -> str:
        return f"{journal_precise(entry.t)} {self.hostname} {entry.ident}: {entry.message}\n"

    def boot(self, t: float, kernel: str) -> None:
        """The kernel lines of a fresh boot (the journal is per boot, as with -b)."""
        self.entries.clear()
        for dt, msg in [
            (0.0, f"Linux version {kernel} (buildd@bos03-arm64-041) (aarch64-linux-gnu-gcc-13 "
                  "(Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0, GNU ld 2.42) "
                  "#31-Ubuntu SMP PREEMPT_DYNAMIC"),
            (0.0, "Machine model: NVIDIA DGX Spark"),
            (2.1, "mlx5_core 0000:01:00.0: firmware version: 28.45.1020"),
            (2.4, "mlx5_core 0000:01:00.0 rocep1s0f0: renamed from mlx5_0"),
            (2.5, "mlx5_core 0002:01:00.0 roceP2p1s0f0: renamed from mlx5_2"),
            (4.8, "nvidia: loading out-of-tree module taints kernel."),
            (5.0, "NVRM: loading NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  "
                  "Release Build  (dvs-builder@U22-I3-AM02-24-3)"),
            (9.3, "NFS: Registering the id_resolver key type"),
        ]:
            self.kernel(t + dt, msg)


def _fields(entry: JournalEntry) -> dict[str, str]:
    """The journal fields a match can name. journald logs its own notices
    (such as "flushing caches") with transport ``driver``, not ``kernel``."""
    if entry.ident == "kernel":
        return {"_TRANSPORT": "kernel", "SYSLOG_IDENTIFIER": "kernel"}
    return {"_TRANSPORT": "driver", "SYSLOG_IDENTIFIER": entry.ident.split("[")[0]}


_VALUE_OPTIONS = {"-n", "--lines", "-o", "--output", "-u", "--unit", "--since", "--until"}
_FLAGS = {"-f", "--follow", "-k", "--dmesg", "-b", "--boot", "--no-pager", "-q", "--quiet"}


def journal_filter(args: list[str]) -> Callable[[JournalEntry], bool] | str:
    """journalctl's matching: ``FIELD=VALUE`` terms, ``+`` between alternatives
    (within a group, the same field ORs and different fields AND); ``-k`` keeps
    kernel lines only. Returns an error message for an option it does not know."""
    groups: list[dict[str, set[str]]] = [{}]
    kernel_only = False
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _VALUE_OPTIONS:
            skip = True
        elif arg in ("-k", "--dmesg"):
            kernel_only = True
        elif arg in _FLAGS or arg.startswith(("-o", "-n", "--output=", "--lines=")):
            continue
        elif arg == "+":
            groups.append({})
        elif "=" in arg and not arg.startswith("-"):
            field, _, value = arg.partition("=")
            groups[-1].setdefault(field, set()).add(value)
        elif arg.startswith("-"):
            return f"journalctl: unrecognized option '{arg}'"
        else:
            return f'Failed to add match \'{arg}\': Invalid argument'

    def wanted(entry: JournalEntry) -> bool:
        fields = _fields(entry)
        if kernel_only and fields["_TRANSPORT"] != "kernel":
            return False
        active = [g for g in groups if g]
        return not active or any(
            all(fields.get(f) in values for f, values in g.items()) for g in active)

    return wanted
