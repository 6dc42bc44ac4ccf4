"""Where each node, its engines and Home Assistant are reached.

In production everything comes from config.toml. With ``[simulator] enabled``
the simulator's ports and keys come from ``<state_dir>/sim/endpoints.json``,
which `sparktui sim` writes when it starts (see docs/CONTRACTS.md); every
address in it must be loopback.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil

from sparktui.adapters.sshconfig import SshConfigError, resolve_alias
from sparktui.core.config import Config


class EndpointError(Exception):
    """The endpoints could not be resolved (simulator not running, bad file)."""


@dataclass(frozen=True)
class NodeEndpoint:
    """How to reach one node."""

    name: str
    ssh_host: str
    ssh_port: int
    username: str
    known_hosts: str
    """known_hosts file the host key is verified against (already ~-expanded)."""
    client_keys: tuple[str, ...]
    """Private key files; empty means asyncssh's defaults and ssh-agent."""
    ssh_config: tuple[str, ...]
    """OpenSSH client config files to honour; empty for none (the simulator)."""
    liveness_method: str
    """``icmp`` or ``tcp``."""
    liveness_host: str
    liveness_port: int | None
    api_host: str
    """Host the node's engines serve HTTP on."""


@dataclass(frozen=True)
class Endpoints:
    nodes: dict[str, NodeEndpoint]
    ha_url: str
    ha_token_file: str
    """File holding the HA token (never the token itself)."""
    simulated: bool

    def node(self, name: str) -> NodeEndpoint:
        try:
            return self.nodes[name]
        except KeyError:
            raise EndpointError(f"no endpoint for node {name!r}") from None


def sim_endpoints_path(config: Config) -> Path:
    return config.state_dir() / "sim" / "endpoints.json"


def resolve_endpoints(config: Config) -> Endpoints:
    """Endpoints for every configured node, from config or the running simulator."""
    if config.simulator.enabled:
        return _from_simulator(config)
    return _from_config(config)


def _expand(path: str) -> str:
    return str(Path(path).expanduser())


def _from_config(config: Config) -> Endpoints:
    ssh = config.ssh
    config_files = (_expand(ssh.config_file),) if ssh.config_file else ()
    nodes = {}
    for name, node in config.nodes.items():
        # an ~/.ssh/config alias: its HostName, Port, User and IdentityFile
        # apply as for `ssh ALIAS`; liveness and engine HTTP need the address
        try:
            target = resolve_alias(node.host, config_files)
        except SshConfigError as exc:
            raise EndpointError(f"node {name}: {exc}") from None
        keys = tuple(_expand(k) for k in ssh.client_keys) or target.identity_files
        nodes[name] = NodeEndpoint(
            name=name,
            ssh_host=node.host,
            ssh_port=target.port or node.port,
            username=target.user or node.user,
            known_hosts=_expand(ssh.known_hosts),
            client_keys=keys,
            ssh_config=config_files,
            liveness_method=config.liveness.method,
            liveness_host=target.host,
            liveness_port=node.liveness_port,
            api_host=target.host,
        )
    ha = config.home_assistant
    return Endpoints(nodes, ha.url, _expand(ha.token_file), simulated=False)


def _loopback(host: object, where: str) -> str:
    if not isinstance(host, str):
        raise EndpointError(f"{where}: host must be a string")
    try:
        if ipaddress.ip_address(host).is_loopback:
            return host
    except ValueError:
        pass
    raise EndpointError(f"{where}: {host!r} is not a loopback address")


def _port(value: object, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 65536:
        raise EndpointError(f"{where}: not a port number: {value!r}")
    return value


@dataclass(frozen=True)
class SimNodeEntry:
    """One node in the simulator's endpoints file."""

    host: str
    port: int
    """SSH port."""
    liveness_port: int
    api_host: str
    """The node's own loopback address: its engines and liveness listener bind there."""


@dataclass(frozen=True)
class SimEndpointsFile:
    """``<state_dir>/sim/endpoints.json`` (docs/CONTRACTS.md): the simulator writes it
    with `to_json`, production reads it with `parse`. One definition of the format."""

    nodes: dict[str, SimNodeEntry]
    ha_url: str
    ha_token_file: str
    client_key: str
    known_hosts: str
    pid: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"nodes": {n: asdict(e) for n, e in self.nodes.items()}, "ha_url": self.ha_url,
                "ha_token_file": self.ha_token_file, "client_key": self.client_key,
                "known_hosts": self.known_hosts, "pid": self.pid}

    @classmethod
    def parse(cls, data: object, where: str) -> SimEndpointsFile:
        """Check every field (addresses loopback, ports in range); EndpointError naming
        ``where`` and the field otherwise."""
        if not isinstance(data, dict) or not isinstance(data.get("nodes"), dict):
            raise EndpointError(f"{where}: no 'nodes' object")
        nodes: dict[str, SimNodeEntry] = {}
        for name, entry in data["nodes"].items():
            at = f"{where}: nodes.{name}"
            if not isinstance(entry, dict):
                raise EndpointError(f"{at}: not an object")
            host = _loopback(entry.get("host"), at)
            nodes[name] = SimNodeEntry(
                host=host, port=_port(entry.get("port"), f"{at}.port"),
                liveness_port=_port(entry.get("liveness_port"), f"{at}.liveness_port"),
                api_host=_loopback(entry.get("api_host", host), at))
        client_key, known_hosts = data.get("client_key"), data.get("known_hosts")
        if not isinstance(client_key, str) or not isinstance(known_hosts, str):
            raise EndpointError(f"{where}: 'client_key' and 'known_hosts' must be paths")
        ha_url, ha_token_file = data.get("ha_url"), data.get("ha_token_file")
        if not isinstance(ha_url, str) or not isinstance(ha_token_file, str):
            raise EndpointError(f"{where}: 'ha_url' and 'ha_token_file' must be strings")
        _loopback(urlsplit(ha_url).hostname, f"{where}: ha_url")
        pid = data.get("pid")
        return cls(nodes, ha_url, ha_token_file, client_key, known_hosts,
                   pid if isinstance(pid, int) and not isinstance(pid, bool) else None)


def read_sim_endpoints(path: Path) -> SimEndpointsFile:
    """The endpoints file at ``path``; EndpointError when missing or malformed."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise EndpointError(f"{path} does not exist") from None
    except (OSError, ValueError) as exc:
        raise EndpointError(f"{path}: unreadable simulator endpoints: {exc}") from None
    return SimEndpointsFile.parse(data, str(path))


def _from_simulator(config: Config) -> Endpoints:
    path = sim_endpoints_path(config)
    start_hint = f"start it with `sparktui sim --config {config.path}`"
    if not path.exists():
        raise EndpointError(
            f"[simulator] is enabled but {path} does not exist: the simulator is "
            f"not running; {start_hint}"
        )
    sim = read_sim_endpoints(path)
    if sim.pid is not None and not psutil.pid_exists(sim.pid):
        raise EndpointError(f"{path} is stale: simulator process {sim.pid} is gone; {start_hint}")
    nodes: dict[str, NodeEndpoint] = {}
    for name, node in config.nodes.items():
        entry = sim.nodes.get(name)
        if entry is None:
            raise EndpointError(f"{path}: nodes.{name}: missing (simulator started with "
                                f"another config?)")
        nodes[name] = NodeEndpoint(
            name=name,
            ssh_host=entry.host,
            ssh_port=entry.port,
            username=node.user,
            known_hosts=sim.known_hosts,
            client_keys=(sim.client_key,),
            ssh_config=(),
            liveness_method="tcp",
            liveness_host=entry.api_host,
            liveness_port=entry.liveness_port,
            api_host=entry.api_host,
        )
    return Endpoints(nodes, sim.ha_url, sim.ha_token_file, simulated=True)
