"""The cluster configuration (config.toml) as frozen dataclasses.

Loading and validation live in `core/config_load.py`; this module only
declares the model, each field documented where it is declared.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated

from .tomlschema import GiB, GiBOrZero, Percent, Port, Range, Seconds


@dataclass(frozen=True)
class NodeConfig:
    name: str
    rank: Annotated[int, Range(0, 4095)]
    """Position in the fleet; a cluster's rank 0 is its first node in this order."""
    host: str
    """SSH host (name or address). With the simulator enabled it is resolved
    through the simulator's endpoints file instead."""
    user: str
    ib_ip: str
    """Fabric (200G RoCE) address of NIC A port 0: the master address when rank 0."""
    switch: str
    """Home Assistant entity of the node's smart plug, e.g. ``switch.dgx1``."""
    role: str
    """Free text such as ``prod`` or ``test``; protection is set in [guards]."""
    port: Port = 22
    hf_cache: str = ""
    """Hugging Face cache path on the node; must be a symlink to ``hf_cache_target``."""
    hf_cache_target: str = "/mnt/nas/ai/huggingface"
    nas_mount: str = "/mnt/nas"
    liveness_port: Port | None = None
    """TCP port for the liveness probe when ``[liveness] method = "tcp"``."""


@dataclass(frozen=True)
class SwitchConfig:
    """A shared switch entity (fabric switch relay, fan) that no node action may toggle."""

    name: str
    entity: str
    blocking: bool
    """When true, clusters that list this switch may not serve while it is off."""


@dataclass(frozen=True)
class ClusterConfig:
    name: str
    nodes: tuple[str, ...]
    """Node names in rank order."""
    switches: tuple[str, ...] = ()
    """Names of shared switches this cluster's fabric depends on."""
    master_port: Port = 29501


@dataclass(frozen=True)
class GuardConfig:
    protected_nodes: tuple[str, ...] = ()
    protected_lanes: tuple[str, ...] = ()
    kernel_pin: str = ""
    kernel_bad: tuple[str, ...] = ()
    node_memory_gib: GiB = 121.6
    admission_free_gib: GiB = 108.78
    """Free memory GB10 reports at engine admission (node memory less the
    baseline reservation); GMU x node memory must not exceed it."""
    runtime_reserve_gib: GiBOrZero = 5.0
    """Default non-KV engine memory inside the GMU budget (activations,
    CUDA graphs) for recipes that have not measured theirs."""
    disk_free_min_gib: GiBOrZero = 20.0
    """A node filesystem the probe reads (``/``, the NAS mount) with less free
    space than this is a health finding (image syncs, container logs and HF
    downloads need room); 0 turns the finding off."""


@dataclass(frozen=True)
class HomeAssistantConfig:
    url: str
    token_env: str = "SPARKTUI_HA_TOKEN"
    """Environment variable holding the long-lived access token."""
    token_file: str = "~/.config/sparktui/ha_token"
    """File holding the token; must be mode 0600. Used when the variable is unset."""
    timeout_s: Annotated[float, Range(0.5, 300, unit="s")] = 10.0
    """One request's bound: under half a second a loaded Home Assistant (or a real
    plug's lag, hundreds of ms) times out a healthy answer."""


@dataclass(frozen=True)
class SshConfig:
    known_hosts: str = "~/.ssh/known_hosts"
    client_keys: tuple[str, ...] = ()
    """Private key files; empty means asyncssh's defaults and ssh-agent."""
    config_file: str = "~/.ssh/config"
    connect_timeout_s: Annotated[float, Range(1, 300, unit="s")] = 10.0
    """A login alone takes seconds (rc files: REFERENCE §8); under 1 s none connects."""
    keepalive_interval_s: Annotated[float, Range(1, 3600, unit="s", off=0)] = 15.0
    """0 turns keepalives off."""
    keepalive_count_max: Annotated[int, Range(1, 100)] = 3


@dataclass(frozen=True)
class LivenessConfig:
    method: str = "icmp"
    """``icmp`` (the real ping) or ``tcp`` (connect to the node's liveness port)."""
    timeout_s: Annotated[float, Range(0.1, 60, unit="s")] = 1.0
    """A LAN ping answers in a millisecond; under 0.1 s a busy node reads as down."""


@dataclass(frozen=True)
class PowerConfig:
    off_seconds: Annotated[float, Range(1, 3600, unit="s")] = 35.0
    """How long a cycle keeps the plug off (the seeds' runbook: 35 s). At least
    1 s: a shorter cut is no power cycle (the supply rides through it)."""
    boot_timeout_s: Seconds = 600.0
    auto_recover: bool = False
    poweroff_timeout_s: Seconds = 180.0
    """Graceful power-off: how long a node may take to stop answering after
    ``systemctl poweroff`` before its plug is cut anyway."""


@dataclass(frozen=True)
class ConsoleConfig:
    poll_interval_s: Annotated[float, Range(0.1, 3600, unit="s")] = 2.0
    probe_timeout_s: Annotated[float, Range(0.5, 300, unit="s")] = 3.0
    """One probe round's bound (a round of ten commands is ~140 ms: REFERENCE §8)."""
    state_dir: str = "~/.local/state/sparktui"
    stall_after_s: Seconds = 900.0
    """A boot is stalled only after this long without any progress."""
    slow_probe_interval_s: Annotated[float, Range(0.1, 3600, unit="s")] = 15.0
    """How often a node's loop also reads the probe's slow tier (uname, mounts,
    HF cache, df, docker); every tick reads /proc without forking."""
    canary_interval_s: Annotated[float, Range(1, 86_400, unit="s", off=0)] = 60.0
    """Seconds between serving canaries (a 1-token completion) per serving
    lane; 0 turns the canary off (a recipe can opt out: [readiness] canary)."""

    def with_tick(self, poll_interval_s: float) -> ConsoleConfig:
        """The same cadence at another tick (a simulator's faster clock): the
        slow tier stays as many ticks apart as configured, not on every tick
        once a tick is longer than ``slow_probe_interval_s``."""
        return replace(self, poll_interval_s=poll_interval_s, slow_probe_interval_s=(
            self.slow_probe_interval_s * poll_interval_s / self.poll_interval_s))


@dataclass(frozen=True)
class ThrashConfig:
    """Thresholds of the OOM-thrash detector (defaults from earlyoom/nohang/systemd-oomd)."""

    psi_some_pressure: Percent = 10.0
    psi_full_suspect: Percent = 20.0
    psi_full_thrash: Percent = 60.0
    mem_available_low_gib: GiBOrZero = 4.0
    mem_available_low_frac: Annotated[float, Range(0, 1)] = 0.05
    ssh_retries: Annotated[int, Range(0, 100)] = 3
    ssh_retry_interval_s: Annotated[float, Range(1, 3600, unit="s")] = 30.0


NOTIFY_EVENTS = ("thrash", "fatal", "stall", "unresponsive", "predicted-oom", "lane-ready",
                 "lane-qualified", "workflow-failed")


@dataclass(frozen=True)
class NotifyConfig:
    """Phone alerts through a Home Assistant ``notify`` service."""

    service: str = ""
    """``notify.mobile_app_<phone>``; empty turns phone alerts off."""
    events: tuple[str, ...] = ("thrash", "fatal", "stall", "unresponsive", "predicted-oom",
                               "workflow-failed")
    """Which of: thrash, fatal, stall, unresponsive, predicted-oom, lane-ready,
    lane-qualified, workflow-failed."""
    dedup_s: Annotated[float, Range(1, 7 * 86400, unit="s", off=0)] = 3600.0
    """One message per event and node/lane within this window (one per incident)."""
    max_per_hour: Annotated[int, Range(1, 3600)] = 12
    """Messages per rolling hour; the next one sent says how many were held back."""


@dataclass(frozen=True)
class RecordConfig:
    """The console's recording of the night (``sparktui replay``)."""

    enabled: bool = True
    max_mb: Annotated[float, Range(1, 100_000, unit="MB")] = 64.0
    """Compressed size of one night's file; past it only alerts, lanes and
    workflows are kept, then nothing. At least 1 MB (1e-9 kept nothing at all)."""


@dataclass(frozen=True)
class ExportConfig:
    """Prometheus exposition of the fleet from the sentinel (``/metrics``)."""

    listen: str = ""
    """``host:port`` the sentinel serves ``/metrics`` on, e.g. ``127.0.0.1:9464``;
    empty (the default) turns the export off."""
    allow_remote: bool = False
    """A ``listen`` address outside loopback is refused unless this is true: the
    endpoint has no authentication and names every node and lane."""


@dataclass(frozen=True)
class WebConfig:
    """The read-only browser view (`sparktui web`)."""

    listen: str = "127.0.0.1:8765"
    """``host:port``; an address outside loopback needs a token (below)."""
    token_env: str = "SPARKTUI_WEB_TOKEN"
    """Environment variable holding the token a browser must present."""
    token_file: str = "~/.config/sparktui/web_token"
    """File holding the token; must be mode 0600. Used when the variable is unset."""


SIM_DIALECTS = ("vllm-0.11", "vllm-0.33", "sglang-0.5")
"""Engine releases the simulator speaks (sim/dialects/<name>.json, read from
the wheels; docs/DIALECTS.md)."""


@dataclass(frozen=True)
class SimulatorConfig:
    enabled: bool = False
    seed: Annotated[int, Range(0, 2**63 - 1)] = 1
    speed: Annotated[float, Range(0, 100_000, lo_open=True, unit="x")] = 60.0
    scenario: str = "normal"
    shared_host_key: bool = False
    dialect: str = "vllm-0.33"
    """Which release the simulated engines of that kind speak, one of
    :data:`SIM_DIALECTS` (the other kind speaks its default: SGLang engines
    sglang-0.5, vLLM engines vllm-0.33). ``sparktui sim --dialect`` overrides
    it; a scenario that reproduces one release's behaviour speaks that
    release unless the flag says otherwise (sim/scenarios.py)."""


@dataclass(frozen=True)
class Config:
    path: Path
    nodes: dict[str, NodeConfig]
    clusters: dict[str, ClusterConfig]
    switches: dict[str, SwitchConfig]
    nccl: dict[str, dict[str, str]]
    """Per-cluster NCCL environment passed to every rank."""
    home_assistant: HomeAssistantConfig
    guards: GuardConfig = field(default_factory=GuardConfig)
    ssh: SshConfig = field(default_factory=SshConfig)
    liveness: LivenessConfig = field(default_factory=LivenessConfig)
    power: PowerConfig = field(default_factory=PowerConfig)
    console: ConsoleConfig = field(default_factory=ConsoleConfig)
    thrash: ThrashConfig = field(default_factory=ThrashConfig)
    simulator: SimulatorConfig = field(default_factory=SimulatorConfig)
    notify: NotifyConfig = field(default_factory=NotifyConfig)
    record: RecordConfig = field(default_factory=RecordConfig)
    export: ExportConfig = field(default_factory=ExportConfig)
    web: WebConfig = field(default_factory=WebConfig)
    recipes_dir: Path = Path("recipes")

    def state_dir(self) -> Path:
        return Path(self.console.state_dir).expanduser()

    def cluster_nodes(self, cluster: str) -> list[NodeConfig]:
        return [self.nodes[n] for n in self.clusters[cluster].nodes]
