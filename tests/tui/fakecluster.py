"""A scripted stand-in for the SSH fleet, in the real output formats.

Until the simulator (issue 3) exposes an in-process cluster, the console's
tests drive the real service (poller, parser, thrash detector, followers,
phase tracker) through this fake at the adapter boundary: it answers the
probe script with /proc, uname, stat, df and `docker ps --format '{{json .}}'`
text, streams `docker logs --timestamps` lines, and `docker inspect` state.
Everything is deterministic: no clock, no randomness.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from sparktui.adapters.endpoints import Endpoints, NodeEndpoint
from sparktui.adapters.homeassistant import SwitchState
from sparktui.adapters.ssh import ProbeStalled
from sparktui.core.config import Config

GIB_KIB = 1024 * 1024
TOTAL_KIB = 127_600_748


@dataclass
class FakeContainer:
    name: str
    lane: str
    cluster: str
    rank: int
    nranks: int
    port: int = 8000
    engine: str = "vllm"
    status: str = "Up 5 minutes"
    running: bool = True
    log: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)
    backlog: list[str] = field(default_factory=list)

    def ps_json(self) -> str:
        labels = ",".join([
            f"sparktui.cluster={self.cluster}", f"sparktui.engine={self.engine}",
            f"sparktui.lane={self.lane}", f"sparktui.nranks={self.nranks}",
            f"sparktui.port={self.port}", f"sparktui.rank={self.rank}"])
        return json.dumps({
            "Command": "\"vllm serve\"", "CreatedAt": "2026-11-29 22:40:00 +0000 UTC",
            "ID": f"{abs(hash(self.name)) % 16**12:012x}", "Image": "vllm-node:nightly-20260913",
            "Labels": labels, "LocalVolumes": "0", "Mounts": "", "Names": self.name,
            "Networks": "host", "Ports": "", "RunningFor": "5 minutes ago", "Size": "0B",
            "State": "running" if self.running else "exited", "Status": self.status})


@dataclass
class FakeNode:
    name: str
    kernel: str = "6.17.0-1031-nvidia"
    avail_kib: int = 110 * GIB_KIB
    psi_some: float = 0.0
    psi_full: float = 0.0
    responsive: bool = True
    powered: bool = True
    pings: bool = True
    """False: off the network (no ping) while its plug still says on."""
    hf_kind: str = "link"
    containers: list[FakeContainer] = field(default_factory=list)
    journal: asyncio.Queue[str] = field(default_factory=asyncio.Queue)
    probes: int = 0
    series: list[tuple[int, float]] = field(default_factory=list)
    """(MemAvailable KiB, PSI full avg10) for the first probes, one per probe;
    after the last one the node stops answering probes until the test ends
    (a scene then has exactly len(series) samples, whatever the timing)."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    """Set to end a frozen series (a scene's next act: the node starves)."""
    stalls: int | None = None
    """While unresponsive: fail this many probes, then freeze (None: fail forever)."""

    def probe_text(self) -> str:
        cache = "/home/kilork/.cache/huggingface"
        hf = (f"symbolic link|'{cache}' -> '/mnt/nas/ai/huggingface'" if self.hf_kind == "link"
              else f"directory|'{cache}'")
        ps = "\n".join(c.ps_json() for c in self.containers)
        sections = {
            "meminfo": (f"MemTotal:       {TOTAL_KIB} kB\nMemFree:        {self.avail_kib // 2}"
                        f" kB\nMemAvailable:   {self.avail_kib} kB\nSwapTotal:             0 kB\n"
                        "SwapFree:              0 kB"),
            "psi": (f"some avg10={self.psi_some:.2f} avg60=0.00 avg300=0.00 total=1000\n"
                    f"full avg10={self.psi_full:.2f} avg60=0.00 avg300=0.00 total=500"),
            "loadavg": "0.52 0.48 0.40 2/1234 5678",
            "uptime": "86400.00 600000.00",
            "kernel": self.kernel,
            "mounts": ("/dev/nvme0n1p2 / ext4 rw,relatime 0 0\n"
                       "nas.lan:/sna /mnt/nas nfs4 rw,relatime 0 0"),
            "hfcache": hf,
            "df": ("Filesystem     1024-blocks      Used Available Capacity Mounted on\n"
                   "/dev/nvme0n1p2  3840000000 900000000 2940000000      24% /\n"
                   "nas.lan:/sna   99000000000 50000000000 49000000000  51% /mnt/nas"),
            "containers": ps,
            "images": json.dumps({"Repository": "vllm-node", "Tag": "nightly-20260913",
                                  "ID": "sha256:0123456789ab", "Size": "21.3GB"}),
        }
        body = "".join(f"@@{k}\n{v}\n@@rc 0\n" for k, v in sections.items())
        return body + "@@end\n"


class FakeLink:
    """One node's link: probe, run, stream (what `adapters.ssh.NodeConnection` offers)."""

    def __init__(self, node: FakeNode) -> None:
        self.node = node

    async def probe(self, script: str, timeout: float) -> str:
        node = self.node
        if node.series and node.responsive and node.powered:
            if node.probes >= len(node.series):
                await node.wake.wait()  # frozen until the scene moves on (or forever)
            else:
                node.avail_kib, node.psi_full = node.series[node.probes]
        self.node.probes += 1
        if not node.responsive and node.stalls is not None:
            if node.stalls <= 0:
                await asyncio.Event().wait()  # frozen: the scene is complete
            node.stalls -= 1
        if not self.node.responsive or not self.node.powered:
            raise ProbeStalled(self.node.name, "probe",
                               f"no answer within {timeout:.0f} s")
        await asyncio.sleep(0)
        return self.node.probe_text()

    async def run(self, cmd: str, timeout: float) -> object:
        for c in self.node.containers:
            if c.name in cmd and "inspect" in cmd:
                state = {"Status": "running" if c.running else "exited", "Running": c.running}
                return _Result(json.dumps(state))
        return _Result("")

    async def stream(self, cmd: str) -> AsyncIterator[bytes]:
        if cmd.startswith("journalctl"):
            while True:
                yield (await self.node.journal.get()).encode() + b"\n"
        for c in self.node.containers:
            if c.name in cmd:
                for line in c.backlog:
                    yield line.encode() + b"\n"
                while True:
                    line = await c.log.get()
                    if line is None:
                        return
                    c.backlog.append(line)
                    yield line.encode() + b"\n"
        return


@dataclass
class _Result:
    stdout: str
    exit_status: int = 0


class FakeFleet:
    def __init__(self, nodes: dict[str, FakeNode]) -> None:
        self.nodes = nodes
        self.links = {n: FakeLink(node) for n, node in nodes.items()}

    def get(self, name: str) -> FakeLink:
        return self.links[name]

    async def alive(self, endpoint: NodeEndpoint, timeout: float) -> bool:
        """Liveness: a powered node answers ping, even when its sshd is starved."""
        node = self.nodes[endpoint.name]
        return node.powered and node.pings


def fake_fleet(config: Config) -> FakeFleet:
    return FakeFleet({n: FakeNode(n) for n in config.nodes})


def fake_endpoints(config: Config) -> Endpoints:
    return Endpoints(
        {n: NodeEndpoint(n, "127.0.0.1", 22, "kilork", "known_hosts", (), (), "tcp",
                         "127.0.0.1", 1, f"127.0.0.{i + 1}")
         for i, n in enumerate(config.nodes)},
        "http://127.0.0.1:8123", "ha_token", simulated=True)



def add_lane(fleet: FakeFleet, lane: str, cluster: str, nodes: list[str], *,
             port: int = 8000) -> list[FakeContainer]:
    out = []
    for rank, node in enumerate(nodes):
        c = FakeContainer(f"sparktui-{lane}-r{rank}", lane, cluster, rank, len(nodes), port)
        fleet.nodes[node].containers.append(c)
        out.append(c)
    return out


def ts(second: int) -> str:
    """A docker --timestamps prefix, ``second`` seconds after 22:40:00."""
    return f"2026-11-29T22:{40 + second // 60:02d}:{second % 60:02d}.000000000Z"


def vllm_boot_lines(shards: int = 4, upto: str = "serving") -> list[str]:
    """A vLLM 0.33 boot in the real formats (REFERENCE.md §1)."""
    head = "(EngineCore_DP0 pid=312) INFO 11-29 22:40:{s:02d} [{f}] {m}"
    lines = [
        (0, "(APIServer pid=1) INFO 11-29 22:40:00 [api_server.py:1] vLLM server version "
            "0.33.0, serving model zai-org/GLM-5.3-Flash"),
        (1, head.format(s=1, f="gpu_model_runner.py:2000",
                        m="Starting to load model zai-org/GLM-5.3-Flash...")),
    ]
    for i in range(1, shards + 1):
        pct = 100 * i // shards
        lines.append((1 + i * 30, f"\rLoading safetensors checkpoint shards: {pct:3d}% Completed"
                                  f" | {i}/{shards} [{i * 30 // 60:02d}:{i * 30 % 60:02d}<"
                                  f"00:{(shards - i) * 30 % 60:02d}, 30.00s/it]"))
        if upto == "loading" and i == shards // 2:
            return [f"{ts(t)} {text}" for t, text in lines]
    t = 2 + shards * 30
    lines += [
        (t, head.format(s=0, f="gpu_model_runner.py:5089",
                        m="Model loading took 47.12 GiB memory and 120.000000 seconds")),
        (t + 5, head.format(s=0, f="gpu_worker.py:300", m="Available KV cache memory: 40.5 GiB")),
        (t + 6, head.format(s=0, f="kv_cache_utils.py:1000",
                            m="GPU KV cache size: 2,621,440 tokens, Maximum concurrency for "
                              "262,144 tokens per request: 10.00x")),
        (t + 30, head.format(s=0, f="core.py:100",
                             m="init engine (profile, create kv cache, warmup model) took "
                               "30.00 s")),
        (t + 31, "(APIServer pid=1) INFO 11-29 22:45:00 [api_server.py:2] Starting vLLM server "
                 "on http://0.0.0.0:8000"),
        (t + 32, "(APIServer pid=1) INFO:     Application startup complete."),
    ]
    return [f"{ts(t)} {text}" for t, text in lines]


class FakePower:
    """Home Assistant's switch states for the fake fleet's plugs."""

    def __init__(self, fleet: FakeFleet, config: Config) -> None:
        self.fleet = fleet
        self.by_entity = {n.switch: n.name for n in config.nodes.values()}
        self.switches = {s.entity: True for s in config.switches.values()}
        """Shared switches (sw6_mt ...): on, as in the seeds' night."""
        self.calls: list[tuple[str, str]] = []

    async def state(self, entity: str) -> SwitchState:
        if entity in self.switches:
            return SwitchState(entity, "on" if self.switches[entity] else "off")
        node = self.fleet.nodes[self.by_entity[entity]]
        return SwitchState(entity, "on" if node.powered else "off")

    async def turn(self, entity: str, on: bool) -> SwitchState:
        self.calls.append(("turn_on" if on else "turn_off", entity))
        if entity in self.switches:
            self.switches[entity] = on
        else:
            self.fleet.nodes[self.by_entity[entity]].powered = on
        return await self.state(entity)
