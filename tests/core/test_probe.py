"""The probe script and its parser: real formats, missing sections, fuzzing."""

from __future__ import annotations

import shlex
import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.config import NodeConfig
from sparktui.core.probe import (
    FAST_SECTIONS,
    SLOW_SECTIONS,
    builtin_cat,
    parse_probe,
    parse_section,
    parse_up_for,
    probe_script,
)
from sparktui.core.state import DiskFree, MemInfo, ProbeResult, Psi, PsiLine


def _disk_at(r: ProbeResult, mountpoint: str) -> DiskFree | None:
    return next((d for d in r.disks if d.mountpoint == mountpoint), None)


def node(**kw: object) -> NodeConfig:
    fields: dict[str, object] = {
        "name": "dgx1",
        "rank": 0,
        "host": "dgx1.lan",
        "user": "kilork",
        "ib_ip": "10.0.0.1",
        "switch": "switch.dgx1",
        "role": "prod",
        "hf_cache": "/home/kilork/.cache/huggingface",
    }
    fields.update(kw)
    return NodeConfig(**fields)  # type: ignore[arg-type]


MEMINFO = """MemTotal:       127600748 kB
MemFree:         2822448 kB
MemAvailable:   24220260 kB
Buffers:           12345 kB
SwapTotal:             0 kB
SwapFree:              0 kB
HugePages_Total:       0"""

CONTAINER = (
    '{"Command":"\\"vllm serve\\"","CreatedAt":"2026-09-18 12:21:03 +0000 UTC",'
    '"ID":"a762a2b37a1d","Image":"ghcr.io/x/vllm:r37","Labels":"sparktui.lane=glm53,'
    'sparktui.rank=0,sparktui.cluster=4nodes-switch","LocalVolumes":"0","Mounts":"",'
    '"Names":"sparktui-glm53-r0","Networks":"host","Ports":"","RunningFor":"2 hours ago",'
    '"Size":"0B","State":"running","Status":"Up 2 hours (healthy)","HealthStatus":"healthy",'
    '"Platform":null}'
)
STALE = (
    '{"CreatedAt":"2026-09-17 10:00:00 +0000 UTC","ID":"b1","Image":"old:1","Labels":"",'
    '"Names":"sparktui-old-r0","State":"exited","Status":"Exited (137) 5 minutes ago"}'
)
IMAGE = (
    '{"Containers":"N/A","CreatedAt":"2026-09-10 01:02:03 +0000 UTC","Digest":"<none>",'
    '"ID":"sha256:abc","Repository":"ghcr.io/x/vllm","SharedSize":"N/A","Size":"31.2GB",'
    '"Tag":"r37"}'
)

FULL = f"""@@meminfo
{MEMINFO}
@@rc 0
@@psi
some avg10=12.50 avg60=3.10 avg300=0.90 total=123456789
full avg10=4.25 avg60=1.00 avg300=0.20 total=2345678
@@rc 0
@@loadavg
3.12 2.50 1.75 4/1234 56789
@@rc 0
@@uptime
12345.67 98765.43
@@rc 0
@@kernel
6.17.0-1031-nvidia
@@rc 0
@@mounts
/dev/nvme0n1p2 / ext4 rw,relatime 0 0
nas.lan:/sna /mnt/nas nfs4 rw,relatime,vers=4.2,nconnect=8 0 0
/dev/sdb1 /media/my\\040disk vfat rw 0 0
@@rc 0
@@hfcache
symbolic link|'/home/kilork/.cache/huggingface' -> '/mnt/nas/ai/huggingface'
@@rc 0
@@df
Filesystem     1024-blocks      Used Available Capacity Mounted on
/dev/nvme0n1p2  3844550452 319550452 3525000000       9% /
nas.lan:/sna   97656250000 48828125000 48828125000      50% /mnt/nas
@@rc 0
@@containers
{CONTAINER}
{STALE}
@@rc 0
@@images
{IMAGE}
@@rc 0
@@end
"""


def _commands(line: str) -> list[list[str]]:
    """The simple commands of one script line, as a POSIX shell would split them."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|>")
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token == ";":
            commands.append([])
        else:
            commands[-1].append(token)
    return commands


def test_script_quotes_paths_and_uses_only_the_vocabulary() -> None:
    hf = "/home/o'brien/hf cache;rm -rf /"
    script = probe_script(node(hf_cache=hf, nas_mount="/mnt/$(x)"))
    lines = script.splitlines()
    assert lines[0] == ": sparktui-probe"
    stat = next(ln for ln in lines if ln.startswith("echo @@hfcache"))
    assert _commands(stat)[1] == ["stat", "-c", "%F|%N", hf, "2", ">&", "1"]
    df = next(ln for ln in lines if ln.startswith("echo @@df"))
    assert _commands(df)[1] == ["df", "-Pk", "/", "/mnt/$(x)", "2", ">&", "1"]
    allowed = {"echo", "cat", "uname", "stat", "df", "docker", ":"}
    for line in lines:
        if line.split(";")[0] in {f"echo @@{s}" for s in FAST_SECTIONS}:
            continue  # the fork-free reads: see the next test
        for command in _commands(line):
            assert command[0] in allowed, command
    assert lines[-1] == "echo @@end"


def test_fast_tier_reads_proc_with_shell_builtins_only() -> None:
    """No command of the fast tick is a program: echo, while, read, printf
    and a `<` redirection are all sh builtins (nothing is forked)."""
    script = probe_script(node(hf_cache="/x"), FAST_SECTIONS)
    lines = script.splitlines()
    assert lines[0] == ": sparktui-probe" and lines[-1] == "echo @@end"
    assert [ln.split(";")[0] for ln in lines[1:-1]] == [f"echo @@{s}" for s in FAST_SECTIONS]
    for cmd in (c for ln in lines for c in _commands(ln)):
        assert cmd[0] in {":", "echo", "while", "do", "done"}, cmd
        assert cmd[0] != "while" or cmd[1:3] == ["IFS=", "read"], cmd
        assert cmd[0] != "do" or cmd[1] == "printf", cmd
    for path in ("/proc/meminfo", "/proc/pressure/memory", "/proc/loadavg", "/proc/uptime"):
        assert builtin_cat(path) in script
    slow = probe_script(node(hf_cache="/x"), SLOW_SECTIONS)
    assert "/proc/meminfo" not in slow and "docker ps" in slow


def test_script_leaves_out_hfcache_when_not_configured() -> None:
    assert "@@hfcache" not in probe_script(node(hf_cache=""))
    assert "hfcache" not in " ".join(parse_probe(FULL.replace("@@hfcache", "")).problems)


def test_parses_every_section_of_real_output() -> None:
    r = parse_probe(FULL)
    assert r.problems == ()
    assert r.meminfo == MemInfo(127600748, 24220260, 2822448, 0, 0)
    assert r.meminfo.used_kib == 127600748 - 24220260
    assert r.psi == Psi(PsiLine(12.5, 3.1, 0.9, 123456789), PsiLine(4.25, 1.0, 0.2, 2345678))
    assert r.loadavg is not None and (r.loadavg.one, r.loadavg.running) == (3.12, 4)
    assert r.uptime_s == 12345.67
    assert r.kernel == "6.17.0-1031-nvidia"
    nas = r.mount_at("/mnt/nas/")
    assert nas is not None and (nas.device, nas.fstype) == ("nas.lan:/sna", "nfs4")
    assert r.mount_at("/media/my disk") is not None
    assert r.hf_cache is not None and r.hf_cache.is_symlink
    assert r.hf_cache.target == "/mnt/nas/ai/huggingface"
    nas_disk = _disk_at(r, "/mnt/nas")
    assert nas_disk is not None and nas_disk.available_kib == 48828125000
    assert [c.name for c in r.containers] == ["sparktui-glm53-r0", "sparktui-old-r0"]
    running = r.running_containers
    assert len(running) == 1 and running[0].lane == "glm53"
    assert running[0].labels["sparktui.cluster"] == "4nodes-switch"
    assert running[0].up_for_s == 7200
    assert r.busy and r.docker_ok
    assert r.images is not None and r.images[0].ref == "ghcr.io/x/vllm:r37"


def test_old_kernel_without_psi_and_no_docker() -> None:
    text = (
        FULL.replace(
            "some avg10=12.50 avg60=3.10 avg300=0.90 total=123456789\n"
            "full avg10=4.25 avg60=1.00 avg300=0.20 total=2345678\n@@rc 0",
            "cat: /proc/pressure/memory: No such file or directory\n@@rc 1",
        )
        .replace(f"{CONTAINER}\n{STALE}\n@@rc 0", "sh: 1: docker: not found\n@@rc 127")
        .replace(
            f"{IMAGE}\n@@rc 0",
            "sh: 1: docker: not found\n@@rc 127",
        )
    )
    r = parse_probe(text)
    assert r.psi is None
    assert r.meminfo is not None
    assert not r.docker_ok and r.containers == () and r.images is None
    assert r.problems == (
        "psi: exit 1: cat: /proc/pressure/memory: No such file or directory",
        "containers: exit 127: sh: 1: docker: not found",
        "images: exit 127: sh: 1: docker: not found",
    )


def test_psi_without_full_line() -> None:
    r = parse_probe(FULL.replace("full avg10=4.25 avg60=1.00 avg300=0.20 total=2345678\n", ""))
    assert r.psi is not None and r.psi.full is None and r.problems == ()


def test_df_keeps_rows_when_nas_mountpoint_is_missing() -> None:
    text = FULL.replace(
        "nas.lan:/sna   97656250000 48828125000 48828125000      50% /mnt/nas\n@@rc 0",
        "df: /mnt/nas: No such file or directory\n@@rc 1",
    )
    r = parse_probe(text)
    assert _disk_at(r, "/") is not None and _disk_at(r, "/mnt/nas") is None
    assert r.problems == ("df: df: /mnt/nas: No such file or directory",)


def test_hf_cache_as_local_dir_or_missing() -> None:
    link = "symbolic link|'/home/kilork/.cache/huggingface' -> '/mnt/nas/ai/huggingface'"
    r = parse_probe(FULL.replace(link, "directory|'/home/kilork/.cache/huggingface'"))
    assert r.hf_cache is not None and r.hf_cache.kind == "directory" and not r.hf_cache.is_symlink
    missing = "stat: cannot statx '/home/kilork/.cache/huggingface': No such file or directory"
    r = parse_probe(FULL.replace(f"{link}\n@@rc 0", f"{missing}\n@@rc 1"))
    assert r.hf_cache is None
    assert r.problems == (f"hfcache: exit 1: {missing}",)


def test_truncated_output_keeps_what_arrived() -> None:
    r = parse_probe(FULL[: FULL.index("@@kernel")])
    assert r.meminfo is not None and r.uptime_s == 12345.67 and r.kernel is None
    assert r.problems[0] == "output ended before @@end (truncated)"
    assert "kernel: section missing" in r.problems


def test_garbled_container_lines_are_counted() -> None:
    r = parse_probe(FULL.replace(STALE, '{"Names": "half'))
    assert len(r.containers) == 1
    assert r.problems == ("containers: 1 unreadable line(s)",)


def test_up_for_follows_go_units_wording() -> None:
    assert parse_up_for("Up Less than a second") == 0
    assert parse_up_for("Up 1 second") == 1
    assert parse_up_for("Up About a minute") == 60
    assert parse_up_for("Up 45 minutes") == 2700
    assert parse_up_for("Up About an hour (healthy)") == 3600
    assert parse_up_for("Up 3 days") == 3 * 86400
    assert parse_up_for("Exited (137) 5 minutes ago") is None
    assert parse_up_for("Restarting (1) 3 seconds ago") is None


def test_script_runs_in_a_real_posix_shell() -> None:
    """The script is valid dash/sh and its output parses (this host's /proc)."""
    out = subprocess.run(
        ["sh"],
        input=probe_script(node(hf_cache="/nonexistent/hf")),
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    ).stdout
    r = parse_probe(out)
    assert r.meminfo is not None and r.meminfo.total_kib > 0
    assert r.kernel and r.uptime_s and r.loadavg and r.mount_at("/") is not None
    assert _disk_at(r, "/") is not None
    assert any(p.startswith("hfcache: exit 1: stat: cannot stat") for p in r.problems)


# -- fuzzing -----------------------------------------------------------------

_lines = st.one_of(
    st.text(max_size=80),
    st.sampled_from(FULL.splitlines()),
    st.sampled_from(["@@rc 0", "@@rc 1", "@@rc x", "@@rc ²", "@@end", "@@psi", "@@containers"]),
    st.builds(
        lambda k, v: f"{k}: {v} kB", st.sampled_from(["MemTotal", "MemAvailable"]), st.integers()
    ),
    st.builds(lambda v: f"some avg10={v} avg60=1 avg300=1 total=1", st.text(max_size=10)),
    st.builds(
        lambda j: f"{j}",
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=5),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
            max_leaves=6,
        ).map(lambda v: __import__("json").dumps(v)),
    ),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(_lines, max_size=60))
def test_parser_never_raises_on_mixed_lines(lines: list[str]) -> None:
    r = parse_probe("\n".join(lines))
    assert isinstance(r.problems, tuple)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.text())
def test_parser_never_raises_on_any_text(text: str) -> None:
    parse_probe(text)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.integers(min_value=0, max_value=len(FULL)), st.data())
def test_truncated_or_cut_output_never_raises(cut: int, data: st.DataObject) -> None:
    lines = FULL[:cut].splitlines()
    if lines:
        drop = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
        del lines[drop]
    r = parse_probe("\n".join(lines))
    if "@@end" not in lines:
        assert r.problems[0] == "output ended before @@end (truncated)"


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.integers(min_value=0, max_value=2**40),
    st.integers(min_value=0, max_value=2**40),
    st.lists(st.decimals(min_value=0, max_value=100, places=2), min_size=6, max_size=6),
)
def test_meminfo_and_psi_round_trip(total: int, avail: int, avgs: list) -> None:
    text = (
        f"@@meminfo\nMemTotal:       {total:8d} kB\nMemAvailable:   {avail:8d} kB\n@@rc 0\n"
        f"@@psi\nsome avg10={avgs[0]} avg60={avgs[1]} avg300={avgs[2]} total=7\n"
        f"full avg10={avgs[3]} avg60={avgs[4]} avg300={avgs[5]} total=8\n@@rc 0\n"
    )
    r = parse_probe(text)
    assert r.meminfo == MemInfo(total, avail)
    assert r.psi == Psi(
        PsiLine(float(avgs[0]), float(avgs[1]), float(avgs[2]), 7),
        PsiLine(float(avgs[3]), float(avgs[4]), float(avgs[5]), 8),
    )


def test_one_section_read_on_its_own_parses_as_in_the_probe() -> None:
    r = parse_section("meminfo", "MemTotal:       127600748 kB\nMemAvailable:   9000 kB\n")
    assert r.meminfo is not None and r.meminfo.available_kib == 9000 and r.problems == ()
    assert parse_section("containers", "").containers == ()
