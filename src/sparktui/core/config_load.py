"""Load and validate config.toml into `core.config.Config`.

Strict: unknown keys are rejected (with the closest known key suggested),
required keys must be present, types must match, references between
sections (clusters → nodes, clusters → switches, guards → nodes, nccl →
clusters) must resolve, ranks must be unique, and every value that will
reach a remote shell must be plain. All problems are collected and raised
together as one `InputError`, each naming file, line and key.
"""

from __future__ import annotations

import difflib
import ipaddress
import urllib.parse
from pathlib import Path
from typing import Any

from . import plain
from .config import (
    NOTIFY_EVENTS,
    SIM_DIALECTS,
    ClusterConfig,
    Config,
    ConsoleConfig,
    ExportConfig,
    GuardConfig,
    HomeAssistantConfig,
    LivenessConfig,
    NodeConfig,
    NotifyConfig,
    PowerConfig,
    RecordConfig,
    SimulatorConfig,
    SshConfig,
    SwitchConfig,
    ThrashConfig,
    WebConfig,
)
from .errors import InputError, Problem
from .listen import parse_listen
from .tomlschema import Source, build

_SECTIONS: dict[str, type] = {
    "console": ConsoleConfig,
    "simulator": SimulatorConfig,
    "ssh": SshConfig,
    "liveness": LivenessConfig,
    "home_assistant": HomeAssistantConfig,
    "power": PowerConfig,
    "guards": GuardConfig,
    "thrash": ThrashConfig,
    "notify": NotifyConfig,
    "record": RecordConfig,
    "export": ExportConfig,
    "web": WebConfig,
}
_MAPS = ("nodes", "clusters", "switches", "nccl")
_TOP = ("recipes_dir",)


def load_config(path: Path) -> Config:
    """Read and validate `path`; raise `InputError` listing every problem."""
    path = Path(path)
    if not path.is_file():
        raise InputError([_missing(path)])
    src = Source.read(path)
    if src.problems:
        raise InputError(src.problems)
    config = _build(src)
    if src.problems or config is None:
        raise InputError(src.problems)
    return config


def _missing(path: Path) -> Problem:
    return Problem(path, None, "(file)", "config file not found")


def _build(src: Source) -> Config | None:
    data = src.data
    known = set(_SECTIONS) | set(_MAPS) | set(_TOP)
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
            src.error((key,), "unknown key" + (f"; did you mean {close[0]!r}?" if close else ""))

    sections: dict[str, Any] = {}
    for name, cls in _SECTIONS.items():
        table = data.get(name, {})
        if not isinstance(table, dict):
            src.error((name,), "expected a table")
            continue
        if name == "home_assistant" and "token" in table:
            src.error(
                (name, "token"),
                "the Home Assistant token never goes in config.toml: set the variable "
                "named by token_env or put it in token_file (mode 0600)",
            )
            table = {k: v for k, v in table.items() if k != "token"}
        if name == "home_assistant" and name not in data:
            src.error((name,), "required table is missing")
            continue
        sections[name] = build(src, (name,), table, cls)

    nodes = _nodes(src, data.get("nodes"))
    switches = _switches(src, data.get("switches", {}), nodes)
    # Cross references are checked against what is declared, valid or not, so that
    # one bad node reports one problem rather than one per cluster that lists it.
    declared_nodes = _declared(data.get("nodes"))
    clusters = _clusters(src, data.get("clusters"), declared_nodes,
                         _declared(data.get("switches")))
    nccl = _nccl(src, data.get("nccl", {}), _declared(data.get("clusters")))
    _check_sections(src, sections, nodes, declared_nodes)
    _check_together(src, sections, nodes)

    recipes_dir = data.get("recipes_dir", "recipes")
    if not isinstance(recipes_dir, str):
        src.error(("recipes_dir",), "expected a string")
        recipes_dir = "recipes"
    if src.problems or any(v is None for v in sections.values()):
        return None
    return Config(
        path=src.file,
        nodes=nodes,
        clusters=clusters,
        switches=switches,
        nccl=nccl,
        recipes_dir=(src.file.parent / recipes_dir).resolve(),
        **sections,
    )


def _declared(value: Any) -> set[str]:
    return set(value) if isinstance(value, dict) else set()


def _tables(src: Source, key: str, value: Any, required: bool) -> dict[str, dict[str, Any]]:
    if value is None:
        if required:
            src.error((key,), "required table is missing")
        return {}
    if not isinstance(value, dict):
        src.error((key,), "expected a table of tables")
        return {}
    out = {}
    for name, table in value.items():
        if not isinstance(table, dict):
            src.error((key, name), "expected a table")
            continue
        out[name] = table
    return out


def _nodes(src: Source, value: Any) -> dict[str, NodeConfig]:
    nodes: dict[str, NodeConfig] = {}
    ranks: dict[int, str] = {}
    for name, table in _tables(src, "nodes", value, required=True).items():
        path = ("nodes", name)
        if (why := plain.check("name", name)) is not None:
            src.error(path, why)
            continue
        user = table.get("user")
        defaults = ({"hf_cache": f"/home/{user}/.cache/huggingface"}
                    if isinstance(user, str) and plain.check("user", user) is None else {})
        node = build(src, path, {**defaults, **table}, NodeConfig, extra={"name": name})
        if node is None:
            continue
        if node.rank in ranks:
            src.error(path + ("rank",),
                      f"rank {node.rank} is already used by node {ranks[node.rank]}")
        ranks[node.rank] = name
        for key, kind in (("host", "host"), ("user", "user"), ("ib_ip", "ip"),
                          ("switch", "entity"), ("hf_cache", "abs_path"),
                          ("hf_cache_target", "abs_path"), ("nas_mount", "abs_path")):
            if key == "hf_cache" and not defaults and "hf_cache" not in table:
                continue  # derived from an invalid user, which is already reported
            if (why := plain.check(kind, getattr(node, key))) is not None:
                src.error(path + (key,), why)
        nodes[name] = node
    return nodes


def _switches(src: Source, value: Any, nodes: dict[str, NodeConfig]) -> dict[str, SwitchConfig]:
    switches: dict[str, SwitchConfig] = {}
    node_entities: dict[str, str] = {}
    for node in nodes.values():
        if node.switch in node_entities:
            src.error(("nodes", node.name, "switch"),
                      f"{node.switch} is also node {node_entities[node.switch]}'s plug: "
                      f"one plug, one node (power-cycling one would cut the other)")
        node_entities.setdefault(node.switch, node.name)
    for name, table in _tables(src, "switches", value, required=False).items():
        path = ("switches", name)
        sw = build(src, path, table, SwitchConfig, extra={"name": name})
        if sw is None:
            continue
        if (why := plain.check("entity", sw.entity)) is not None:
            src.error(path + ("entity",), why)
        if sw.entity in node_entities:
            src.error(path + ("entity",),
                      f"{sw.entity} is also node {node_entities[sw.entity]}'s plug")
        switches[name] = sw
    return switches


def _clusters(src: Source, value: Any, nodes: set[str],
              switches: set[str]) -> dict[str, ClusterConfig]:
    clusters: dict[str, ClusterConfig] = {}
    for name, table in _tables(src, "clusters", value, required=True).items():
        path = ("clusters", name)
        if (why := plain.check("name", name)) is not None:
            src.error(path, why)
            continue
        cluster = build(src, path, table, ClusterConfig, extra={"name": name})
        if cluster is None:
            continue
        if not cluster.nodes:
            src.error(path + ("nodes",), "a cluster needs at least one node")
        seen: set[str] = set()
        for n in cluster.nodes:
            if n not in nodes:
                known = ", ".join(sorted(nodes))
                src.error(path + ("nodes",), f"unknown node {n!r} (known: {known})")
            if n in seen:
                src.error(path + ("nodes",), f"node {n!r} is listed twice")
            seen.add(n)
        for s in cluster.switches:
            if s not in switches:
                src.error(path + ("switches",),
                          f"unknown switch {s!r} (known: {', '.join(sorted(switches)) or 'none'})")
        clusters[name] = cluster
    return clusters


def _nccl(src: Source, value: Any, clusters: set[str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for name, table in _tables(src, "nccl", value, required=False).items():
        path = ("nccl", name)
        if name not in clusters:
            src.error(path, f"unknown cluster {name!r} (known: {', '.join(sorted(clusters))})")
            continue
        env: dict[str, str] = {}
        for key, val in table.items():
            if not isinstance(val, str):
                src.error(path + (key,), f"expected a string, got {type(val).__name__}")
                continue
            for kind, text in (("env_name", key), ("env_value", val)):
                if (why := plain.check(kind, text)) is not None:
                    src.error(path + (key,), why)
            env[key] = val
        out[name] = env
    return out


def _check_sections(src: Source, sections: dict[str, Any], nodes: dict[str, NodeConfig],
                    declared_nodes: set[str]) -> None:
    guards: GuardConfig | None = sections.get("guards")
    if guards is not None:
        for n in guards.protected_nodes:
            if n not in declared_nodes:
                src.error(("guards", "protected_nodes"), f"unknown node {n!r}")
        for kernel in (guards.kernel_pin, *guards.kernel_bad):
            if kernel and (why := plain.check("kernel", kernel)) is not None:
                src.error(("guards", "kernel_pin" if kernel == guards.kernel_pin else "kernel_bad"),
                          why)
        if guards.admission_free_gib > guards.node_memory_gib:
            src.error(("guards", "admission_free_gib"),
                      f"must not exceed node_memory_gib ({guards.node_memory_gib:g})")
    liveness: LivenessConfig | None = sections.get("liveness")
    if liveness is not None and liveness.method not in ("icmp", "tcp"):
        src.error(("liveness", "method"), f"{liveness.method!r} is not one of: icmp, tcp")
    if liveness is not None and liveness.method == "tcp":
        for node in nodes.values():
            if node.liveness_port is None:
                src.error(("nodes", node.name, "liveness_port"),
                          'required when [liveness] method = "tcp"')
    sim: SimulatorConfig | None = sections.get("simulator")
    if sim is not None and sim.dialect not in SIM_DIALECTS:
        src.error(("simulator", "dialect"),
                  f"{sim.dialect!r} is not one of: {', '.join(SIM_DIALECTS)}")
    ha: HomeAssistantConfig | None = sections.get("home_assistant")
    if ha is not None and (why := url_problem(ha.url)) is not None:
        src.error(("home_assistant", "url"), why)
    if ha is not None and (why := plain.check("env_name", ha.token_env)) is not None:
        src.error(("home_assistant", "token_env"), why)
    _check_night(src, sections.get("notify"))
    _check_export(src, sections.get("export"))
    web: WebConfig | None = sections.get("web")
    if web is not None:
        try:
            parse_listen(web.listen)
        except ValueError as exc:
            src.error(("web", "listen"), str(exc))
        if (why := plain.check("env_name", web.token_env)) is not None:
            src.error(("web", "token_env"), why)



def _check_together(src: Source, sections: dict[str, Any],
                    nodes: dict[str, NodeConfig]) -> None:
    """Values each valid alone that mean nothing together (issue 27); each
    problem names both fields."""
    thrash: ThrashConfig | None = sections.get("thrash")
    guards: GuardConfig | None = sections.get("guards")
    console: ConsoleConfig | None = sections.get("console")
    if thrash is not None and thrash.psi_full_suspect >= thrash.psi_full_thrash:
        src.error(("thrash", "psi_full_suspect"),
                  f"{thrash.psi_full_suspect:g} must be below thrash.psi_full_thrash "
                  f"({thrash.psi_full_thrash:g}): suspicion comes before thrash")
    if thrash is not None and guards is not None \
            and thrash.mem_available_low_gib >= guards.node_memory_gib:
        src.error(("thrash", "mem_available_low_gib"),
                  f"{thrash.mem_available_low_gib:g} GiB is not below guards.node_memory_gib "
                  f"({guards.node_memory_gib:g} GiB): every node would always be low")
    if guards is not None and guards.kernel_pin and guards.kernel_pin in guards.kernel_bad:
        src.error(("guards", "kernel_pin"),
                  f"{guards.kernel_pin!r} is also listed in guards.kernel_bad: pin a kernel "
                  f"that is not known bad")
    if console is not None:
        if console.probe_timeout_s >= console.stall_after_s:
            src.error(("console", "probe_timeout_s"),
                      f"{console.probe_timeout_s:g} s is not below console.stall_after_s "
                      f"({console.stall_after_s:g} s): a probe could outlast the stall window")
        if (why := state_dir_problem(console.state_dir)) is not None:
            src.error(("console", "state_dir"), why)
    for key in ("host", "ib_ip"):  # a host may differ by port (a forward): host+port
        seen: dict[tuple[str, int], str] = {}
        for node in nodes.values():
            value = (getattr(node, key), node.port if key == "host" else 0)
            if value in seen:
                port = f" port {value[1]}" if key == "host" else ""
                src.error(("nodes", node.name, key),
                          f"{value[0]!r}{port} is also nodes.{seen[value]}.{key}: two nodes "
                          f"cannot be one machine")
            seen.setdefault(value, node.name)


def state_dir_problem(state_dir: str) -> str | None:
    """Why `state_dir` cannot hold the journal and locks, or None (no I/O)."""
    if not state_dir.strip():
        return "is empty: the journal and run locks need a directory"
    if state_dir != state_dir.strip() or any(ord(c) < 32 for c in state_dir):
        return f"{state_dir!r} has leading/trailing whitespace or a control character"
    norm = state_dir.rstrip("/") or "/"
    if norm == "/" or norm.startswith("/dev") or norm in ("/proc", "/sys"):
        return (f"{state_dir!r} is not a place for the journal and run locks -> use a "
                f"directory of your own (default ~/.local/state/sparktui)")
    return None


def url_problem(url: str) -> str | None:
    """Why `url` is not a usable http(s) base URL (scheme, host, port), or None."""
    if url != url.strip() or any(ord(c) < 32 or ord(c) == 127 for c in url):
        return f"{url!r} has leading/trailing whitespace or a control character (a newline?)"
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"{url!r} is not a URL: {exc}"
    if parts.scheme not in ("http", "https"):
        return f"{url!r} is not an http(s) URL (e.g. http://127.0.0.1:8123)"
    host = parts.hostname or ""
    if not host:
        return f"{url!r} has no host"
    if not host.startswith("["):
        try:
            ipaddress.ip_address(host)
        except ValueError:
            if (why := plain.check("host", host)) is not None:
                return f"{url!r}: host {why}"
    if port == 0:
        return f"{url!r}: port 0 is out of range 1-65535"
    if parts.query or parts.fragment or parts.username or parts.password:
        return f"{url!r}: give only scheme://host:port (no user, query or fragment)"
    return None


def _check_night(src: Source, notify: NotifyConfig | None) -> None:
    """[notify] (issue 15); the numbers are checked by their declared ranges."""
    if notify is not None:
        domain, _, name = notify.service.partition(".")
        if notify.service and (domain != "notify" or not name
                               or not all(c.isalnum() or c == "_" for c in name)):
            src.error(("notify", "service"), f"{notify.service!r} is not a Home Assistant "
                                             "notify service (notify.mobile_app_<phone>)")
        for event in notify.events:
            if event not in NOTIFY_EVENTS:
                src.error(("notify", "events"), f"unknown event {event!r} (known: "
                                                f"{', '.join(NOTIFY_EVENTS)})")


def _check_export(src: Source, export: ExportConfig | None) -> None:
    """[export]: a parseable address, on loopback unless allow_remote says otherwise."""
    if export is None or not export.listen:
        return
    try:
        listen = parse_listen(export.listen)
    except ValueError as exc:
        src.error(("export", "listen"), str(exc))
        return
    if not listen.loopback and not export.allow_remote:
        src.error(("export", "listen"),
                  f"{export.listen} is not a loopback address: /metrics has no "
                  "authentication; set [export] allow_remote = true to serve it there")
