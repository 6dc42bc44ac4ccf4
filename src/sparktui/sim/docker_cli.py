"""`docker` as the production code calls it (docs/CONTRACTS.md), printing what
the real CLI prints: JSON lines with sorted keys, 4-space indented inspect
arrays, RFC3339Nano log timestamps, and the daemon's error messages."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Callable
from typing import TYPE_CHECKING

from .dialects import for_engine
from .docker import ZERO_TIME, Container, Image, LogLine
from .engine import Engine
from .engine_args import ArgError, parse_engine_argv
from .engine_sglang import SglangStyle
from .engine_vllm import VllmStyle
from .fs import ENOENT, FsError
from .shell import Command, Ctx
from .timefmt import docker_created, human_duration, parse_since, rfc3339nano, rfc3339nano_trimmed

if TYPE_CHECKING:
    from .cluster import Sim
    from .node import Node

_RUN_VALUE_OPTS = {"--name", "--network", "--ipc", "--gpus", "--shm-size", "--ulimit", "--label",
                   "-l", "-e", "--env", "-v", "--volume", "--restart", "--entrypoint", "-w",
                   "--workdir", "--user", "-u", "--pid", "--runtime", "--device", "--cap-add"}
_RUN_FLAGS = {"-d", "--detach", "--rm", "--privileged", "--init", "-i", "-t", "-it"}


def gojson(obj: object, indent: int | None = None) -> str:
    """JSON as Go's encoder writes it (HTML characters escaped)."""
    text = json.dumps(obj, indent=indent, ensure_ascii=False, separators=(
        (",", ": ") if indent else (",", ":")))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


API_SERVER_READ_BYTES = 48_000_000
"""What a rank's API server process has read (its Python and libraries)."""


def io_text(read: int, written: int = 0) -> str:
    """A process's ``/proc/<pid>/io`` (fs/proc/base.c ``do_io_accounting``)."""
    return (f"rchar: {read}\nwchar: {written}\nsyscr: {read // 131072 + 1}\n"
            f"syscw: {written // 4096}\nread_bytes: {read}\nwrite_bytes: {written}\n"
            "cancelled_write_bytes: 0\n")


def add_process_files(node: Node, c: Container, engine: Engine) -> None:
    """A rank container's processes as the node's /proc and cgroup v2 tree show
    them while it runs (what watch/lane.io_command reads): its main process
    (``State.Pid``, the API server) and the engine core it started, both in
    the container's ``system.slice/docker-<id>.scope``. Gone when it stops."""
    main, core = c.pid, c.pid + 1  # next_pid() steps by 97: pid + 1 is never handed out
    scope = f"system.slice/docker-{c.id}.scope"

    def while_running(path: str, text: Callable[[], str]) -> None:
        def content() -> str:
            if c.status != "running" or c.pid != main:
                raise FsError(path, ENOENT)
            return text()

        node.fs.add_file(path, content)

    while_running(f"/proc/{main}/cgroup", lambda: f"0::/{scope}\n")
    while_running(f"/sys/fs/cgroup/{scope}/cgroup.procs", lambda: f"{main}\n{core}\n")
    while_running(f"/proc/{main}/io", lambda: io_text(API_SERVER_READ_BYTES))
    while_running(f"/proc/{core}/io", lambda: io_text(engine.bytes_read()))


def docker_command(sim: Sim, node: Node) -> Command:
    daemon = node.docker

    def no_such(ctx: Ctx, name: str) -> int:
        ctx.err(f"Error response from daemon: No such container: {name}\n")
        return 1

    def state_obj(c: Container) -> dict[str, object]:
        return {
            "Status": c.status, "Running": c.status == "running", "Paused": False,
            "Restarting": False, "OOMKilled": c.oom_killed, "Dead": c.status == "dead",
            "Pid": c.pid, "ExitCode": c.exit_code, "Error": "",
            "StartedAt": rfc3339nano_trimmed(c.started_t) if c.started_t else ZERO_TIME,
            "FinishedAt": rfc3339nano_trimmed(c.finished_t) if c.finished_t else ZERO_TIME,
        }

    def status_text(c: Container, now: float) -> str:
        if c.status == "running" and c.started_t is not None:
            return f"Up {human_duration(now - c.started_t)}"
        if c.status == "exited" and c.finished_t is not None:
            return f"Exited ({c.exit_code}) {human_duration(now - c.finished_t)} ago"
        return c.status.capitalize()

    def ps_row(c: Container, now: float, *, trunc: bool) -> dict[str, object]:
        command = " ".join(c.args)
        if trunc and len(command) > 20:
            command = command[:19] + "…"
        return {
            "Command": f'"{command}"', "CreatedAt": docker_created(c.created_t),
            "HealthStatus": "", "ID": c.id[:12] if trunc else c.id, "Image": c.image_arg,
            "Labels": ",".join(f"{k}={v}" for k, v in sorted(c.labels.items())),
            "LocalVolumes": "0", "Mounts": ",".join(b.split(":")[0] for b in c.binds),
            "Names": c.name, "Networks": "host", "Platform": None, "Ports": "",
            "RunningFor": human_duration(now - c.created_t) + " ago", "Size": "0B",
            "State": c.status, "Status": status_text(c, now),
        }

    def inspect_obj(c: Container) -> dict[str, object]:
        env = [*c.env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
        return {
            "Id": c.id, "Created": rfc3339nano_trimmed(c.created_t), "Path": c.args[0],
            "Args": c.args[1:], "State": state_obj(c), "Image": "sha256:" + c.image.id,
            "Name": "/" + c.name, "RestartCount": 0, "Driver": "overlay2", "Platform": "linux",
            "HostConfig": {"Binds": c.binds, "NetworkMode": "host", "IpcMode": "host",
                           "ShmSize": 68719476736, "Runtime": "nvidia"},
            "Mounts": [{"Type": "bind", "Source": b.split(":")[0], "Destination": b.split(":")[1],
                        "Mode": b.split(":")[2] if b.count(":") > 1 else "",
                        "RW": not b.endswith(":ro"), "Propagation": "rprivate"}
                       for b in c.binds],
            "Config": {"Hostname": node.name, "Env": env, "Cmd": c.args, "Image": c.image_arg,
                       "Labels": dict(sorted(c.labels.items()))},
            "NetworkSettings": {"Networks": {"host": {"NetworkID": "host"}}},
        }

    async def ps(ctx: Ctx, args: list[str]) -> int:
        show_all = "-a" in args or "--all" in args
        quiet = "-q" in args or "--quiet" in args
        trunc = "--no-trunc" not in args
        now = sim.wall()
        for c in sorted(daemon.containers.values(), key=lambda c: -c.created_t):
            if show_all or c.status == "running":
                ctx.out((c.id[:12] if trunc else c.id) + "\n" if quiet
                        else gojson(ps_row(c, now, trunc=trunc)) + "\n")
        return 0

    async def images(ctx: Ctx, args: list[str]) -> int:
        now = sim.wall()
        for img in sorted(daemon.images.values(), key=lambda i: -i.created_t):
            size = f"{img.size_bytes / 1e9:.1f}GB"
            ctx.out(gojson({
                "Containers": "N/A", "CreatedAt": docker_created(img.created_t),
                "CreatedSince": human_duration(now - img.created_t) + " ago",
                "Digest": "<none>", "ID": img.id[:12], "Repository": img.repo,
                "SharedSize": "N/A", "Size": size, "Tag": img.tag, "UniqueSize": "N/A",
                "VirtualSize": size}) + "\n")
        return 0

    async def inspect(ctx: Ctx, args: list[str]) -> int:
        fmt = None
        if "--format" in args:
            i = args.index("--format")
            fmt, args = args[i + 1], args[:i] + args[i + 2:]
        found: list[Container] = []
        status = 0
        for name in args:
            c = daemon.find(name)
            if c is None:
                ctx.err(f"Error: No such object: {name}\n")
                status = 1
            else:
                found.append(c)
        if fmt is None:
            ctx.out(gojson([inspect_obj(c) for c in found], indent=4) + "\n")
        elif fmt == "{{json .State}}":
            for c in found:
                ctx.out(gojson(state_obj(c)) + "\n")
        else:
            ctx.err(f"template: :1: unsupported by the simulator: {fmt}\n")
            return 1
        return status

    async def image(ctx: Ctx, args: list[str]) -> int:
        if len(args) == 4 and args[0] == "inspect" and args[1] == "--format":
            img = daemon.find_image(args[3])
            if img is None:
                ctx.err(f"Error response from daemon: No such image: {args[3]}\n")
                return 1
            key = args[2].removeprefix('{{index .Config.Labels "').removesuffix('"}}')
            ctx.out(img.labels.get(key, "<no value>") + "\n")
            return 0
        ctx.err("docker: 'image' subcommand not supported by the simulator\n")
        return 1

    async def logs(ctx: Ctx, args: list[str]) -> int:
        follow = timestamps = False
        tail: int | None = None
        since: float | None = None
        name = ""
        i = 0
        while i < len(args):
            a = args[i]
            if a in ("-f", "--follow"):
                follow = True
            elif a in ("-t", "--timestamps"):
                timestamps = True
            elif a in ("--tail", "-n"):
                i += 1
                tail = None if args[i] == "all" else int(args[i])
            elif a == "--since":
                i += 1
                since = parse_since(args[i], sim.wall())
            else:
                name = a
            i += 1
        c = daemon.find(name)
        if c is None:
            return no_such(ctx, name)
        lines = [ln for ln in c.logs if since is None or ln.t >= since]
        if tail is not None:
            lines = lines[-tail:] if tail else []

        def emit(ln: LogLine) -> None:
            """One message as ``WriteLogStream`` writes it (moby
            api/server/httputils/write_log_stream.go): its stamp, if asked,
            before every message, a partial piece's included; a newline only
            after a whole line or a line's last piece."""
            text = ln.text if ln.partial else ln.text + "\n"
            if timestamps:
                text = rfc3339nano(ln.t) + " " + text
            (ctx.out if ln.stream == "stdout" else ctx.err)(text)

        for ln in lines:
            emit(ln)
        if not follow:
            return 0
        seen = len(c.logs)
        while ctx.alive() and node.up:
            if node.responsive:
                for ln in c.logs[seen:]:
                    emit(ln)
                seen = len(c.logs)
                if c.status != "running" or daemon.containers.get(c.name) is not c:
                    return 0
            await sim.wait_change(timeout=1.0)
        return 0

    async def run(ctx: Ctx, args: list[str]) -> int:
        opts: dict[str, list[str]] = {}
        i = 0
        while i < len(args) and args[i].startswith("-"):
            a = args[i]
            key, eq, val = a.partition("=")
            if key in _RUN_VALUE_OPTS:
                if not eq:
                    i += 1
                    val = args[i] if i < len(args) else ""
                opts.setdefault(key, []).append(val)
            elif a not in _RUN_FLAGS:
                ctx.err(f"unknown flag: {a}\nSee 'docker run --help'.\n")
                return 125
            i += 1
        if i >= len(args):
            ctx.err('"docker run" requires at least 1 argument.\nSee \'docker run --help\'.\n')
            return 125
        image_ref, argv = args[i], args[i + 1:]
        name = (opts.get("--name") or [""])[-1]
        img = daemon.find_image(image_ref)
        if name and name in daemon.containers:
            other = daemon.containers[name]
            ctx.err(f'docker: Error response from daemon: Conflict. The container name "/{name}" '
                    f'is already in use by container "{other.id}". You have to remove (or '
                    "rename) that container to be able to reuse that name.\n\n"
                    "Run 'docker run --help' for more information\n")
            return 125
        if img is None:
            repo = image_ref.rsplit(":", 1)[0] if ":" in image_ref.rsplit("/", 1)[-1] else image_ref
            ctx.err(f"Unable to find image '{image_ref}' locally\n"
                    f"docker: Error response from daemon: pull access denied for {repo}, "
                    "repository does not exist or may require 'docker login': denied: "
                    "requested access to the resource is denied\n\n"
                    "Run 'docker run --help' for more information\n")
            return 125
        binds = opts.get("-v", []) + opts.get("--volume", [])
        for b in binds:
            src = b.split(":")[0]
            if node.fs.lentry(src) is not None and not node.fs.exists(src):
                ctx.err("docker: Error response from daemon: error while creating mount source "
                        f"path '{src}': mkdir {src}: file exists.\n\n"
                        "Run 'docker run --help' for more information\n")
                return 125
        for b in binds:
            src = b.split(":")[0]
            if node.fs.lentry(src) is None:
                node.fs.add_dir(src)  # the daemon creates a missing bind source, empty, as root
        labels = dict(kv.partition("=")[::2] for kv in opts.get("--label", []) + opts.get("-l", []))
        cid = sim.new_container_id()
        c = Container(id=cid, name=name or sim.random_name(), image=img, image_arg=image_ref,
                      args=argv, labels=labels, env=opts.get("-e", []) + opts.get("--env", []),
                      binds=binds, created_t=sim.wall())
        daemon.containers[c.name] = c
        if not argv:
            ctx.err("docker: Error response from daemon: no command specified\n")
            del daemon.containers[c.name]
            return 125
        try:
            eargs = parse_engine_argv(argv)
        except ArgError as e:
            if str(e).startswith("exec:"):
                del daemon.containers[c.name]
                ctx.err("docker: Error response from daemon: failed to create task for container:"
                        f" failed to create shim task: OCI runtime create failed: {e}: unknown\n")
                return 127
            c.status, c.started_t, c.pid = "running", sim.wall(), node.next_pid()
            c.log(sim.wall(), str(e), "stderr")
            c.finish(sim.wall(), 2)
            ctx.out(cid + "\n")
            return 0
        c.status, c.started_t, c.pid = "running", sim.wall(), node.next_pid()
        d = for_engine(eargs.kind, sim.spec.dialect)
        style = VllmStyle(d) if eargs.kind == "vllm" else SglangStyle(d)
        engine = Engine(sim, node, c, eargs, style, pid=node.next_pid() % 1000 + 100)
        c.engine = engine
        add_process_files(node, c, engine)
        engine.start()
        sim.notify()
        ctx.out(cid + "\n")
        return 0

    async def stop(ctx: Ctx, args: list[str], *, remove: bool = False) -> int:
        force = False
        names: list[str] = []
        i = 0
        while i < len(args):
            if args[i] in ("-t", "--time", "--timeout"):
                i += 1
            elif args[i] in ("-f", "--force"):
                force = True
            elif not args[i].startswith("-"):
                names.append(args[i])
            i += 1
        status = 0
        for name in names:
            c = daemon.find(name)
            if c is None:
                status = no_such(ctx, name)
                continue
            if remove:
                if c.status == "running" and not force:
                    ctx.err(f'Error response from daemon: cannot remove container "/{c.name}": '
                            "container is running: stop the container before removing or force "
                            "remove\n")
                    status = 1
                    continue
                if c.engine is not None:
                    c.engine.stop(kill=True)
                del daemon.containers[c.name]
            elif c.engine is not None:
                c.engine.stop(kill=False)
            ctx.out(name + "\n")
        sim.notify()
        return status

    async def save(ctx: Ctx, args: list[str]) -> int:
        img = daemon.find_image(args[-1]) if args else None
        if img is None:
            ctx.err(f"Error response from daemon: reference does not exist: {args[-1:]}\n")
            return 1
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            manifest = json.dumps([{"Config": f"blobs/sha256/{img.id}",
                                    "RepoTags": [img.ref], "Layers": [],
                                    "Labels": img.labels, "Size": img.size_bytes,
                                    "Created": img.created_t}]).encode()
            info = tarfile.TarInfo("manifest.json")
            info.size = len(manifest)
            tar.addfile(info, io.BytesIO(manifest))
        ctx.out_sink.write(buf.getvalue())
        return 0

    async def load(ctx: Ctx, args: list[str]) -> int:
        data = await ctx.stdin.read() if ctx.stdin is not None else b""
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
                member = tar.extractfile("manifest.json")
                manifest = json.loads(member.read()) if member else []
        except (tarfile.TarError, KeyError, ValueError):
            ctx.err("Error response from daemon: unexpected EOF\n")
            return 1
        for m in manifest:
            repo, _, tag = m["RepoTags"][0].rpartition(":")
            img = Image(repo, tag, m["Config"].rsplit("/", 1)[-1], int(m["Size"]),
                        float(m["Created"]), dict(m["Labels"]))
            daemon.images[img.ref] = img
            ctx.out(f"Loaded image: {img.ref}\n")
        return 0

    async def docker(ctx: Ctx) -> int:
        sim.sync()
        if not node.up:
            return 1
        args = ctx.argv[1:]
        if not args:
            ctx.err("Usage:  docker [OPTIONS] COMMAND\n")
            return 0
        sub, rest = args[0], args[1:]
        if sub == "container" and rest:
            sub, rest = rest[0], rest[1:]
        if sub in ("rm",):
            return await stop(ctx, rest, remove=True)
        handlers = {"ps": ps, "images": images, "inspect": inspect, "logs": logs, "run": run,
                    "stop": stop, "image": image, "save": save, "load": load}
        handler = handlers.get(sub)
        if handler is None:
            ctx.err(f"docker: '{sub}' is not a docker command.\nSee 'docker --help'\n")
            return 1
        return await handler(ctx, rest)

    return docker
