"""Immutable snapshots of what the poller learned about each node.

The poller (`watch/poller.py`) builds these; watchers, guards and the TUI only
read them. Everything here is a frozen dataclass holding tuples or read-only
mappings, so a snapshot handed to a subscriber can never change under it.

Sizes are kept in the units the kernel reports (KiB) and converted by
properties, so nothing is lost to rounding.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

KIB_PER_GIB = 1024 * 1024


class NodeState(StrEnum):
    """What the operator needs to know first about a node."""

    ONLINE = "online"
    """SSH answers and the probe came back."""
    UNREACHABLE = "unreachable"
    """Neither liveness nor SSH answers: down, unplugged, or off the network."""
    STARVED = "starved"
    """Liveness answers but SSH or the probe does not: the OOM-thrash signature
    (ping alive, sshd starved), or sshd itself down."""
    POWERED_OFF = "powered_off"
    """The power source (Home Assistant plug) says the node is off."""
    UNKNOWN = "unknown"
    """Not polled yet, or failed in a way that says nothing about the node's
    health (host-key mismatch, authentication refused, internal error)."""


@dataclass(frozen=True)
class MemInfo:
    """The lines of /proc/meminfo the console uses, in KiB."""

    total_kib: int
    available_kib: int
    free_kib: int | None = None
    swap_total_kib: int | None = None
    swap_free_kib: int | None = None

    @property
    def used_kib(self) -> int:
        """MemTotal - MemAvailable: the GB10 way to read "used" (nvidia-smi cannot)."""
        return self.total_kib - self.available_kib

    @property
    def total_gib(self) -> float:
        return self.total_kib / KIB_PER_GIB

    @property
    def available_gib(self) -> float:
        return self.available_kib / KIB_PER_GIB

    @property
    def used_gib(self) -> float:
        return self.used_kib / KIB_PER_GIB


@dataclass(frozen=True)
class PsiLine:
    """One line of /proc/pressure/memory: percentages of time stalled, and total µs."""

    avg10: float
    avg60: float
    avg300: float
    total_us: int


@dataclass(frozen=True)
class Psi:
    """Memory pressure. ``full`` is None on kernels that only report ``some``."""

    some: PsiLine
    full: PsiLine | None = None


@dataclass(frozen=True)
class LoadAvg:
    one: float
    five: float
    fifteen: float
    running: int | None = None
    """Runnable scheduling entities (the 4th field's numerator)."""
    entities: int | None = None


@dataclass(frozen=True)
class Mount:
    """One line of /proc/mounts (octal escapes such as ``\\040`` decoded)."""

    device: str
    mountpoint: str
    fstype: str
    options: str


@dataclass(frozen=True)
class PathKind:
    """What ``stat -c '%F|%N'`` said about a path (the Hugging Face cache)."""

    path: str
    kind: str
    """``symbolic link``, ``directory``, ``regular file``, ... or ``missing``."""
    target: str | None = None
    """Where a symbolic link points, as stored in the link."""

    @property
    def is_symlink(self) -> bool:
        return self.kind == "symbolic link"


@dataclass(frozen=True)
class DiskFree:
    """One row of ``df -Pk``."""

    filesystem: str
    size_kib: int
    used_kib: int
    available_kib: int
    mountpoint: str

    @property
    def available_gib(self) -> float:
        return self.available_kib / KIB_PER_GIB


@dataclass(frozen=True)
class ContainerInfo:
    """One container from ``docker ps -a --format '{{json .}}'``.

    ``created`` is docker's ``CreatedAt`` text; docker ps does not give the
    start time, so ``up_for_s`` is read back from ``Status`` (``Up 5 minutes``)
    at docker's own (go-units) precision, None when not running.
    """

    name: str
    image: str
    state: str
    """created, running, paused, restarting, removing, exited or dead."""
    status: str
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    created: str = ""
    id: str = ""
    up_for_s: float | None = None

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def lane(self) -> str | None:
        """The sparktui lane (recipe) this container serves, if we started it."""
        return self.labels.get("sparktui.lane")


@dataclass(frozen=True)
class ImageInfo:
    """One image from ``docker images --format '{{json .}}'``."""

    repository: str
    tag: str
    id: str
    size: str = ""

    @property
    def ref(self) -> str:
        return f"{self.repository}:{self.tag}"


class ProbeTier(StrEnum):
    """Which part of the node probe a result read on its tick."""

    FAST = "fast"
    """Only /proc/meminfo, PSI, loadavg and uptime, read with shell builtins
    (nothing forked on the node); the slow fields are the last full probe's."""
    FULL = "full"
    """The fast reads plus the slow tier: uname, mounts, HF cache, df, docker."""


@dataclass(frozen=True)
class ProbeResult:
    """Everything one probe read from a node. A field is None (or empty) when
    its section was missing or unreadable; ``problems`` says which and why."""

    meminfo: MemInfo | None = None
    psi: Psi | None = None
    loadavg: LoadAvg | None = None
    uptime_s: float | None = None
    kernel: str | None = None
    mounts: tuple[Mount, ...] = ()
    hf_cache: PathKind | None = None
    disks: tuple[DiskFree, ...] = ()
    containers: tuple[ContainerInfo, ...] = ()
    images: tuple[ImageInfo, ...] | None = None
    """None when docker did not answer (absent or daemon down)."""
    docker_ok: bool = False
    problems: tuple[str, ...] = ()
    tier: ProbeTier = ProbeTier.FULL
    """FAST: the slow fields (kernel .. docker_ok) were carried over from an
    earlier tick's full probe, not read on this one."""
    slow_error: str = ""
    """Why the slow tier, due on this tick, did not answer (a hung ``docker``)
    while the fast one did; its fields are then the last ones read."""

    def mount_at(self, path: str) -> Mount | None:
        """The mount whose mountpoint is exactly ``path`` (e.g. the NAS)."""
        wanted = path.rstrip("/") or "/"
        for mount in self.mounts:
            if mount.mountpoint == wanted:
                return mount
        return None

    @property
    def running_containers(self) -> tuple[ContainerInfo, ...]:
        return tuple(c for c in self.containers if c.running)

    @property
    def busy(self) -> bool:
        """A node is busy when any container runs on it (ours or not)."""
        return any(c.running for c in self.containers)


@dataclass(frozen=True)
class NodeSnapshot:
    """One node at one poll."""

    node: str
    state: NodeState
    taken_at: float
    """Wall-clock time (epoch s) the poll ended."""
    probe: ProbeResult | None = None
    """The parsed probe; None when it did not come back."""
    error: str = ""
    """Why the probe or connection failed, naming the node and what was tried."""
    probe_latency_s: float | None = None
    liveness: bool | None = None
    """Did the liveness check (ICMP or TCP) answer; None when not run."""
    powered: bool | None = None
    """What the power source says; None when there is none or it did not answer."""
    plug_changed: str = ""
    """When the plug last switched, as Home Assistant says it (``last_changed``);
    "" without one. Only ever compared with the same plug's earlier word, never
    with a clock of ours: when it moved between two polls that both read the
    plug on, the plug went off and on in between (a short cycle, which a
    simulator at 60x makes in half a wall second)."""
    stalled: bool = False
    """The long-lived shell stopped answering within the probe timeout and was
    replaced: evidence for the thrash detector, not a crash."""
    consecutive_failures: int = 0
    """Polls in a row, ending with this one, where the probe did not come back."""
    last_ok_at: float | None = None
    """When the probe last came back (epoch s), carried across failures."""
    containers_at: float | None = None
    """When (epoch s) the container list in ``probe`` was asked for. The slow
    tier is read every ``slow_probe_interval_s`` and carried into the fast
    ticks between, so the list can be older than ``taken_at``: a lane that
    another process stopped is still listed running for up to that long.
    None: no list (or a recording made before this was kept)."""

    def listed_since(self) -> float:
        """The time this snapshot's containers are known as of (``taken_at``
        where the list's own time is not known)."""
        return self.containers_at if self.containers_at is not None else self.taken_at

    @property
    def online(self) -> bool:
        return self.state is NodeState.ONLINE


@dataclass(frozen=True)
class HistoryPoint:
    """One sample of a node's memory history, for sparklines and trends."""

    t: float
    mem_available_kib: int | None
    mem_total_kib: int | None
    psi_some_avg10: float | None
    psi_full_avg10: float | None


@dataclass(frozen=True)
class ClusterSnapshot:
    """The latest snapshot of every node, in config (rank) order."""

    taken_at: float
    nodes: tuple[NodeSnapshot, ...]

    def get(self, name: str) -> NodeSnapshot | None:
        for snap in self.nodes:
            if snap.node == name:
                return snap
        return None

    def select(self, names: list[str] | tuple[str, ...]) -> ClusterSnapshot:
        """The same snapshot restricted to ``names`` (a cluster), in that order."""
        by_name = {s.node: s for s in self.nodes}
        return ClusterSnapshot(self.taken_at, tuple(by_name[n] for n in names if n in by_name))

    def count(self, state: NodeState) -> int:
        return sum(1 for s in self.nodes if s.state is state)
