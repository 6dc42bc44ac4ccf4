"""The simulator's shell runs ``if``, ``case``, ``{ ...; }`` groups,
``${NAME#PATTERN}`` and ``[`` as dash does, and production's per-rank I/O
read (watch/lane_reads.io_command) prints the same from both over the same files."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from sparktui.sim.fs import NodeFs
from sparktui.sim.shell import BufferSink, Shell, ShellEnv, ShellExit
from sparktui.watch.lane_reads import engine_read_bytes, io_command


def sim_run(script: str, files: dict[str, str]) -> tuple[int, bytes]:
    fs = NodeFs()
    for path, text in files.items():
        fs.add_file(path, text)
    env = ShellEnv(commands={}, glob=fs.glob, home="/home/u", read_file=fs.read)
    out, err = BufferSink(), BufferSink()

    async def go() -> int:
        try:
            return await Shell(env, out, err, None).run(script)
        except ShellExit as e:
            return e.status

    return asyncio.run(go()), bytes(out.data) + bytes(err.data)


def dash(script: str, root: Path) -> tuple[int, bytes]:
    done = subprocess.run(["/bin/sh", "-c", script], cwd=root, capture_output=True, timeout=10)
    return done.returncode, done.stdout + done.stderr


def tree(root: Path, files: dict[str, str]) -> dict[str, str]:
    """Write ``files`` (paths relative to ``root``) and return them by absolute path."""
    out = {}
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        out[str(path)] = text
    return out


SCRIPTS = [
    'x=0::/system.slice/docker-ab.scope; echo "${x#0::}" "${x##*/}" "${x%.scope}" '
    '"${x%%/*}" "${x#nomatch}"',
    'case "0::/" in 0::/) echo root;; 0::/*) echo sub;; *) echo other;; esac; echo "rc $?"',
    'case "0::/a/b" in (0::/) echo root;; 0::/*|x) echo sub;; esac',
    "case zzz in a) echo a;; esac; echo \"rc $?\"",
    'if [ -n "" ]; then echo yes; elif [ -z "" ]; then echo elif; else echo no; fi',
    'if false; then echo yes; fi; echo "rc $?"',
    'if [ a = a ] && [ a != b ] && [ ! -n "" ]; then echo eq; else echo ne; fi',
    "[ -r {root}/f ] && echo readable; [ -r {root}/missing ] || echo missing; "
    "[ -d {root} ] && echo dir; [ -f {root}/f ] && echo file",
    "{ echo in; read -r l < {root}/missing; echo after; } 2>/dev/null; echo \"rc $?\"",
    "{ echo one; echo two; }; echo three",
    'while read -r q; do while read -r l; do echo "$q:$l"; done < "{root}/$q"; done '
    "< {root}/list",
]


@pytest.mark.parametrize("template", SCRIPTS)
def test_compound_commands_answer_as_dash(tmp_path: Path, template: str) -> None:
    files = tree(tmp_path, {"f": "x\n", "list": "f\nlist\n"})
    script = template.replace("{root}", str(tmp_path))
    real = dash(script, tmp_path)
    status, out = sim_run(script, files)
    assert status == real[0], (script, out, real)
    assert out.replace(b"sh: 1: ", b"") == real[1].replace(b"/bin/sh: 1: ", b""), script


IO = "rchar: {r}\nwchar: 7\nsyscr: 3\nsyscw: 1\nread_bytes: {b}\nwrite_bytes: 0\n" \
     "cancelled_write_bytes: 0\n"


def test_the_per_rank_io_read_prints_as_from_dash(tmp_path: Path) -> None:
    """production's script, its /proc and /sys/fs/cgroup moved under a temp
    root: a rank in a container's cgroup (two processes), one whose cgroup is
    the root (its own /proc/P/io), one gone (nothing)."""
    scope = "system.slice/docker-4f1c.scope"
    files = tree(tmp_path, {
        "proc/2000/cgroup": f"0::/{scope}\n",
        f"sys/fs/cgroup/{scope}/cgroup.procs": "2000\n2097\n",
        "proc/2000/io": IO.format(r=52_000_000, b=0),
        "proc/2097/io": IO.format(r=7_000_000_000, b=6_500_000_000),
        "proc/3000/cgroup": "0::/\n",
        "proc/3000/io": IO.format(r=10, b=4096),
    })
    script = io_command([2000, 3000, 4000]).replace(
        "/proc/", f"{tmp_path}/proc/").replace("/sys/fs/cgroup", f"{tmp_path}/sys/fs/cgroup")
    real = dash(script, tmp_path)
    status, out = sim_run(script, files)
    assert (status, out) == real
    assert engine_read_bytes(out.decode()) == {2000: 52_000_000 + 7_000_000_000, 3000: 4096}
