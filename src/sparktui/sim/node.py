"""One simulated DGX Spark: power, kernel, files, memory, docker, journal."""

from __future__ import annotations

import ipaddress
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field

from .catalog import ModelInfo, repo_dir
from .docker import DockerDaemon, Image
from .fs import EINVAL, Entry, NodeFs
from .journal import Journal
from .memory import Memory

NAS_EXPORT = "nas.lan:/sna"
NAS_ADDR = "192.0.2.10"  # documentation range: never routed
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
GID_SLOTS = 256
"""A port's GID table: every slot has a file; an unused one reads as zeros,
and its type fails to read (EINVAL), as on the real sysfs."""
ZERO_GID_FILE = Entry("file", content=ZERO_GID + "\n")
UNUSED_TYPE_FILE = Entry("file", read_error=EINVAL)


@dataclass
class NodeSpec:
    """Everything that makes one node differ from its siblings (scenarios edit these)."""

    name: str
    index: int
    """1-based position; also the last octet of its api_host."""
    user: str = "kilork"
    ib_ip: str = "127.0.200.1"
    hca: tuple[str, ...] = ("rocep1s0f0", "roceP2p1s0f0")
    kernel: str = "6.17.0-1031-nvidia"
    hf_cache: str = ""
    hf_cache_target: str = "/mnt/nas/ai/huggingface"
    hf_cache_kind: str = "link"
    """``link`` (the NAS symlink), ``dir`` (a local dir: the seeds' dgx6-8 mistake)
    or ``missing``."""
    nas_mount: str = "/mnt/nas"
    nas_present: bool = True
    images: list[Image] = field(default_factory=list)
    extra_os_gib: float = 0.0
    """System memory beyond the common baseline (per-node services)."""
    boot_seconds: float = 45.0
    gid_index: int = 3
    """Slot of the RoCE v2 GID carrying the IPv4 address (it drifts: 3 -> 4)."""
    decode_factor: float = 1.0
    """Decode speed against a healthy GB10 (slow-decode: a clock cap left behind)."""
    oom_kill_after_s: float | None = None
    """Seconds of thrash after which the kernel's OOM killer finally takes the largest
    process (the node recovers by itself); None: the host wedges silently, as GB10
    hosts do (no OOM kill, no panic) until power-cycled."""

    @property
    def home(self) -> str:
        return f"/home/{self.user}"

    @property
    def hf_cache_path(self) -> str:
        return self.hf_cache or f"{self.home}/.cache/huggingface"


class Node:
    def __init__(self, spec: NodeSpec, *, usable_gib: float, catalog: dict[str, ModelInfo],
                 now: Callable[[], float], mono: Callable[[], float]) -> None:
        self.spec = spec
        self.name = spec.name
        self.catalog = catalog
        self._now = now
        """Wall-clock (epoch) seconds: journal and uptime."""
        self._mono = mono
        """Simulated seconds since start: the memory model's time base."""
        self.power = "on"
        """on | off | booting | halted (the OS shut down, the plug still on)"""
        self.unclean_losses = 0
        """Plug cuts while the OS ran (filesystems and NAS mounts at risk)."""
        self.probe_shells = 0
        """Long-lived shells that carried a probe (``: sparktui-probe``): one per poller."""
        self.probes = 0
        """Probe scripts answered, over every shell."""
        self.boot_t = 0.0
        self.memory = Memory(usable_gib=usable_gib, os_gib=2.82 + spec.extra_os_gib)
        self.docker = DockerDaemon()
        self.journal = Journal(spec.name)
        self.fs = NodeFs()
        self.api_host = ""
        self.pid_counter = 4000
        self.thrash_onset: float | None = None
        for img in spec.images:
            self.docker.images[img.ref] = img
        self._build_fs()

    @property
    def up(self) -> bool:
        return self.power == "on"

    @property
    def thrashing(self) -> bool:
        return self.up and self.memory.thrashing

    @property
    def responsive(self) -> bool:
        return self.up and not self.memory.thrashing

    def next_pid(self) -> int:
        self.pid_counter += 97
        return self.pid_counter

    def uptime(self) -> float:
        return max(0.0, self._now() - self.boot_t)

    # --- files ----------------------------------------------------------------
    def rebuild_fs(self) -> None:
        """A new file tree from the (changed) spec; what docker created is lost."""
        self.fs = NodeFs()
        self._build_fs()

    def _build_fs(self) -> None:
        s, fs = self.spec, self.fs
        fs.add_file("/proc/meminfo", self.memory.meminfo_text)
        fs.add_file("/proc/pressure/memory", self.memory.pressure_text)
        fs.add_file("/proc/loadavg", self._loadavg)
        fs.add_file("/proc/uptime", self._uptime_text)
        fs.add_file("/proc/mounts", self._mounts)
        fs.add_dir(s.home)
        fs.add_dir(posixpath.dirname(s.hf_cache_path))
        fs.add_dir("/var/lib/docker")
        if s.nas_present:
            root = posixpath.join(s.hf_cache_target, "hub")
            for m in self.catalog.values():
                snap = posixpath.join(root, repo_dir(m.repo), "snapshots", m.snapshot)
                fs.add_file(posixpath.join(snap, "config.json"), "{}\n")
                fs.add_file(posixpath.join(root, repo_dir(m.repo), "refs", "main"),
                            m.snapshot + "\n")
        if s.hf_cache_kind == "link":
            fs.add_link(s.hf_cache_path, s.hf_cache_target)
        elif s.hf_cache_kind == "dir":
            fs.add_dir(s.hf_cache_path)
        ip = ipaddress.ip_address(s.ib_ip)
        mapped = ipaddress.IPv6Address(b"\0" * 10 + b"\xff\xff" + ip.packed).exploded
        for n, hca in enumerate(s.hca):
            base = f"/sys/class/infiniband/{hca}/ports/1"
            link_local = f"fe80:0000:0000:0000:0ec5:2dff:fe{30 + n:02x}:{0x1000 + s.index:04x}"
            ula = f"fd00:0000:0000:00c8:0ec5:2dff:fe{30 + n:02x}:{0x1000 + s.index:04x}"
            table = [(link_local, "IB/RoCE v1"), (link_local, "RoCE v2")]
            # each IPv6 address added before the IPv4 one pushes it one slot on
            table += [(ula, "RoCE v2")] * (s.gid_index - 3)
            table += [(mapped, "IB/RoCE v1"), (mapped, "RoCE v2")]
            gids: list[tuple[str, Entry]] = []
            types: list[tuple[str, Entry]] = []
            for i, (gid, kind) in enumerate(table[:GID_SLOTS]):
                gids.append((str(i), Entry("file", content=gid + "\n")))
                types.append((str(i), Entry("file", content=kind + "\n")))
            for i in range(len(table), GID_SLOTS):
                gids.append((str(i), ZERO_GID_FILE))
                types.append((str(i), UNUSED_TYPE_FILE))
            fs.add_table(f"{base}/gids", gids)
            fs.add_table(f"{base}/gid_attrs/types", types)

    def _loadavg(self) -> str:
        busy = len(self.docker.running())
        load = 0.4 + 1.2 * busy + (18.0 if self.memory.thrashing else 0.0)
        return f"{load:.2f} {load * 0.9:.2f} {load * 0.8:.2f} {1 + busy}/{412 + 40 * busy} " \
               f"{self.pid_counter}\n"

    def _uptime_text(self) -> str:
        up = self.uptime()
        return f"{up:.2f} {up * 19.2:.2f}\n"

    def _mounts(self) -> str:
        s = self.spec
        lines = [
            "/dev/nvme0n1p2 / ext4 rw,relatime 0 0",
            "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0",
            "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0",
            "tmpfs /run tmpfs rw,nosuid,nodev,noexec,relatime,size=12760076k,mode=755 0 0",
            "/dev/nvme0n1p1 /boot/efi vfat rw,relatime,fmask=0077,dmask=0077 0 0",
        ]
        if s.nas_present:
            lines.append(
                f"{NAS_EXPORT} {s.nas_mount} nfs4 rw,relatime,vers=4.2,rsize=1048576,"
                "wsize=1048576,namlen=255,hard,proto=tcp,nconnect=8,timeo=600,retrans=2,"
                f"sec=sys,clientaddr=192.0.2.{100 + s.index},local_lock=none,addr={NAS_ADDR} 0 0")
        return "\n".join(lines) + "\n"

    def filesystems(self) -> list[tuple[str, str, int, int]]:
        """(device, mount point, size kB, used kB) for df."""
        used_root = 812_345_600 + 31_000_000 * len(self.docker.images)
        rows = [("/dev/nvme0n1p2", "/", 3_905_109_820, used_root)]
        if self.spec.nas_present:
            rows.append((NAS_EXPORT, self.spec.nas_mount, 62_499_999_744, 41_234_567_168))
        return rows

    # --- power ----------------------------------------------------------------
    def power_off(self) -> None:
        """Plug off: every process, container and memory holding is gone. A cut
        while the OS runs (or boots) is an unclean power loss; after a
        ``systemctl poweroff`` it is not."""
        if self.power in ("on", "booting"):
            self.unclean_losses += 1
        self.power = "off"
        self.thrash_onset = None
        for c in list(self.docker.containers.values()):
            if c.engine is not None:
                c.engine.stop(kill=True)
        self.docker.clear()
        self.memory.reset(self._mono())

    def halt(self) -> None:
        """``systemctl poweroff`` finished: containers stopped cleanly, OS off."""
        for c in list(self.docker.containers.values()):
            if c.engine is not None:
                c.engine.stop(kill=False)
        self.docker.clear()
        self.memory.reset(self._mono())
        self.thrash_onset = None
        self.power = "halted"

    def begin_boot(self) -> None:
        self.power = "booting"

    def finish_boot(self) -> None:
        self.power = "on"
        self.boot_t = self._now() - 12.0
        self.memory.reset(self._mono())
        self.journal.boot(self.boot_t, self.spec.kernel)

