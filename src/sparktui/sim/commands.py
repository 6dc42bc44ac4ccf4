"""The node's file and system commands: cat, grep -H ., uname -r, stat -c, df -Pk,
journalctl, with GNU coreutils' and systemd's exact output and errors."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .fs import ENOENT, FsError
from .journal import journal_filter
from .shell import Command, Ctx

if TYPE_CHECKING:
    from .cluster import Sim
    from .node import Node

_EPOCH = re.compile(r"@\d+(?:\.\d+)?")
"""journalctl --since's "@" form (seconds since the epoch)."""


def node_commands(sim: Sim, node: Node) -> dict[str, Command]:
    from .docker_cli import docker_command

    async def cat(ctx: Ctx) -> int:
        if len(ctx.argv) == 1:
            data = await ctx.stdin.read() if ctx.stdin is not None else b""
            ctx.out_sink.write(data)
            return 0
        status = 0
        for path in ctx.argv[1:]:
            try:
                ctx.out(node.fs.read(path))
            except FsError as e:
                ctx.err(f"cat: {path}: {e.reason}\n")
                status = 1
        return status

    async def grep(ctx: Ctx) -> int:
        args = ctx.argv[1:]
        with_name = False
        while args and args[0].startswith("-") and args[0] != "-":
            flag = args.pop(0)
            if flag not in ("-H", "-s"):
                ctx.err(f"grep: invalid option -- '{flag.lstrip('-')[:1]}'\n"
                        "Usage: grep [OPTION]... PATTERNS [FILE]...\n"
                        "Try 'grep --help' for more information.\n")
                return 2
            with_name = with_name or flag == "-H"
        if not args or args[0] != ".":
            ctx.err("grep: only the pattern '.' is supported on this node\n")
            return 2
        files = args[1:]
        found, error = False, False
        for path in files:
            try:
                text = node.fs.read(path)
            except FsError as e:
                ctx.err(f"grep: {path}: {e.reason}\n")
                error = True
                continue
            for line in text.splitlines():
                if line:
                    found = True
                    ctx.out(f"{path}:{line}\n" if with_name or len(files) > 1 else line + "\n")
        return 2 if error else (0 if found else 1)

    async def uname(ctx: Ctx) -> int:
        if ctx.argv[1:] == ["-r"]:
            ctx.out(node.spec.kernel + "\n")
        elif ctx.argv[1:] in ([], ["-s"]):
            ctx.out("Linux\n")
        else:
            ctx.out(f"Linux {node.name} {node.spec.kernel} #31-Ubuntu SMP PREEMPT_DYNAMIC "
                    "aarch64 aarch64 aarch64 GNU/Linux\n")
        return 0

    async def stat(ctx: Ctx) -> int:
        args = ctx.argv[1:]
        if len(args) < 3 or args[0] != "-c":
            ctx.err("stat: missing operand\nTry 'stat --help' for more information.\n")
            return 1
        fmt, paths = args[1], args[2:]
        status = 0
        for path in paths:
            entry = node.fs.lentry(path)
            if entry is None:
                ctx.err(f"stat: cannot statx '{path}': {ENOENT}\n")
                status = 1
                continue
            kind = {"dir": "directory", "link": "symbolic link"}.get(entry.kind, "regular file")
            if entry.kind == "file" and not callable(entry.content) and not entry.content:
                kind = "regular empty file"
            name = f"'{path}' -> '{entry.target}'" if entry.kind == "link" else f"'{path}'"
            ctx.out(fmt.replace("%F", kind).replace("%N", name).replace("%n", path) + "\n")
        return status

    async def df(ctx: Ctx) -> int:
        paths = [a for a in ctx.argv[1:] if not a.startswith("-")]
        mounts = node.filesystems()
        rows: list[tuple[str, str, str, str, str, str]] = []
        status = 0
        for path in paths or [m[1] for m in mounts]:
            real = node.fs.resolve(path)
            if real is None:
                ctx.err(f"df: {path}: {ENOENT}\n")
                status = 1
                continue
            dev, mnt, size, used = max(
                (m for m in mounts if real == m[1] or real.startswith(m[1].rstrip("/") + "/")),
                key=lambda m: len(m[1]))
            avail = size - used
            rows.append((dev, str(size), str(used), str(avail),
                         f"{-(-used * 100 // size)}%", mnt))
        if rows:
            head = ("Filesystem", "1024-blocks", "Used", "Available", "Capacity", "Mounted on")
            widths = [max(len(r[i]) for r in [*rows, head]) for i in range(5)]
            lines = [" ".join([head[0].ljust(widths[0])]
                              + [head[i].rjust(widths[i]) for i in range(1, 5)] + [head[5]])]
            lines += [" ".join([r[0].ljust(widths[0])] + [r[i].rjust(widths[i])
                                                          for i in range(1, 5)] + [r[5]])
                      for r in rows]
            ctx.out("\n".join(lines) + "\n")
        return status

    async def journalctl(ctx: Ctx) -> int:
        args = ctx.argv[1:]
        follow = "-f" in args or "--follow" in args
        n: int | None = None
        if "-n" in args:
            i = args.index("-n")
            n = int(args[i + 1]) if i + 1 < len(args) and args[i + 1].isdigit() else 10
        elif follow:
            n = 10
        wanted = journal_filter(args)
        if isinstance(wanted, str):
            ctx.err(f"{wanted}\n")
            return 1
        since = float("-inf")
        if "--since" in args:
            # systemd.time(7): "@" and seconds since the epoch; other forms are not simulated
            i = args.index("--since")
            value = args[i + 1] if i + 1 < len(args) else ""
            if not _EPOCH.fullmatch(value):
                ctx.err(f"Failed to parse timestamp: {value}\n")
                return 1
            since = float(value[1:])
        entries = [e for e in node.journal.entries if wanted(e) and e.t >= since]
        shown = entries if n is None else entries[-n:] if n else []
        if not shown and not follow:
            ctx.out("-- No entries --\n")
        for e in shown:
            ctx.out(node.journal.render(e))
        if not follow:
            return 0
        seen = len(node.journal.entries)
        first = node.journal.entries[0] if node.journal.entries else None
        while ctx.alive() and node.up:
            await sim.wait_change(timeout=1.0)
            entries = node.journal.entries
            if entries and entries[0] is not first:
                seen, first = 0, entries[0]
            for e in entries[seen:]:
                if node.responsive and wanted(e):
                    ctx.out(node.journal.render(e))
            if node.responsive:
                seen = len(entries)
        return 0

    async def systemctl(ctx: Ctx) -> int:
        """Only ``systemctl poweroff|reboot`` (graceful power-down)."""
        verb = ctx.argv[1] if len(ctx.argv) == 2 else ""
        if verb not in ("poweroff", "reboot"):
            ctx.err(f"sparktui-sim: systemctl {' '.join(ctx.argv[1:])}: not simulated\n")
            return 1
        sim.shutdown(node.name, reboot=verb == "reboot")
        return 0

    return {"cat": cat, "grep": grep, "uname": uname, "stat": stat, "df": df,
            "journalctl": journalctl, "systemctl": systemctl, "docker": docker_command(sim, node)}
