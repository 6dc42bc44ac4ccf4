"""The node shell over real SSH: exec channels, the long-lived sh, dash's answers."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import asyncssh
import pytest

from sparktui.sim.testing import connect

from .conftest import exec_on


async def test_exec_runs_the_contract_vocabulary(sim):
    out, err, status = await exec_on(sim, "dgx5", "uname -r; echo \"rc=$?\"; : sparktui-probe")
    assert out == "6.17.0-1031-nvidia\nrc=0\n"
    assert (err, status) == ("", 0)


async def test_unknown_command_answers_like_dash(sim):
    out, err, status = await exec_on(sim, "dgx1", "nvidia-smi")
    assert (out, err, status) == ("", "sh: 1: nvidia-smi: not found\n", 127)


async def test_lists_and_redirections(sim):
    out, err, status = await exec_on(
        sim, "dgx1", "false && echo no || echo yes; cat /nope 2>&1; cat /nope 2>/dev/null; "
                     "echo \"last=$?\"; echo hidden >/dev/null; exit 3")
    assert out == "yes\ncat: /nope: No such file or directory\nlast=1\n"
    assert (err, status) == ("", 3)


async def test_sh_dash_c_runs_a_child_shell(sim):
    out, _, status = await exec_on(sim, "dgx1", "sh -c 'echo a; exit 3'; echo \"rc=$?\"")
    assert (out, status) == ("a\nrc=3\n", 0)


async def test_globs_expand_against_the_node_files(sim):
    out, _, status = await exec_on(
        sim, "dgx5", "grep -H . /sys/class/infiniband/rocep1s0f0/ports/1/gid_attrs/types/*")
    assert status == 2  # unused GID slots answer EINVAL, as in sysfs
    assert "/sys/class/infiniband/rocep1s0f0/ports/1/gid_attrs/types/3:RoCE v2\n" in out
    gids, _, _ = await exec_on(sim, "dgx5", "cat /sys/class/infiniband/rocep1s0f0/ports/1/gids/3")
    assert gids == "0000:0000:0000:0000:0000:ffff:7f00:c80b\n"  # ib_ip 127.0.200.11 mapped


async def test_long_lived_sh_keeps_status_between_scripts(sim):
    async with connect(sim, "dgx2") as conn:
        proc = await conn.create_process("sh", stderr=asyncssh.STDOUT)
        for nonce, script in (("a", "false"), ("b", "echo @@x; cat /proc/loadavg"),
                              ("c", "missing-tool")):
            proc.stdin.write(f"{script}\necho \"@@sparktui-done {nonce} $?\"\n")
            lines = []
            while True:
                line = await asyncio.wait_for(proc.stdout.readline(), 5)
                lines.append(line)
                if line.startswith("@@sparktui-done"):
                    break
            if nonce == "a":
                assert lines == ["@@sparktui-done a 1\n"]
            elif nonce == "b":
                assert lines[0] == "@@x\n"
                assert re.fullmatch(r"[\d.]+ [\d.]+ [\d.]+ \d+/\d+ \d+\n", lines[1])
                assert lines[2] == "@@sparktui-done b 0\n"
            else:
                assert lines == ["sh: 5: missing-tool: not found\n", "@@sparktui-done c 127\n"]
        proc.stdin.write("exit 4\n")
        result = await asyncio.wait_for(proc.wait(), 5)
        assert result.exit_status == 4


async def test_proc_files_have_the_kernel_formats(sim):
    out, _, _ = await exec_on(sim, "dgx3", "cat /proc/meminfo /proc/pressure/memory /proc/uptime")
    assert out.startswith("MemTotal:       127600748 kB\nMemFree:  ")
    assert "\nHugePages_Total:       0\n" in out
    assert re.search(r"^some avg10=0\.00 avg60=0\.00 avg300=0\.00 total=0\n"
                     r"full avg10=0\.00 avg60=0\.00 avg300=0\.00 total=0\n", out, re.M)


async def test_stat_and_df(sim):
    out, err, status = await exec_on(
        sim, "dgx1", "stat -c '%F|%N' /home/kilork/.cache/huggingface /mnt/nas /nope; "
                     "df -Pk / /mnt/nas")
    assert out.splitlines()[:2] == [
        "symbolic link|'/home/kilork/.cache/huggingface' -> '/mnt/nas/ai/huggingface'",
        "directory|'/mnt/nas'"]
    assert out.splitlines()[2].split() == ["Filesystem", "1024-blocks", "Used", "Available",
                                           "Capacity", "Mounted", "on"]
    assert out.splitlines()[4].startswith("nas.lan:/sna ")
    assert err == "stat: cannot statx '/nope': No such file or directory\n"
    assert status == 0  # df, the last command, succeeded


async def test_wrong_client_key_is_refused(sim, tmp_path):
    other = asyncssh.generate_private_key("ssh-ed25519")
    with pytest.raises(asyncssh.PermissionDenied):
        async with connect(sim, "dgx1", client_keys=[other]):
            pass


async def test_host_keys_are_verified_and_distinct(sim, tmp_path):
    keys = [line.split()[2] for line in sim.known_hosts_path.read_text().splitlines()]
    assert len(set(keys)) == len(sim.nodes)
    wrong = tmp_path / "known_hosts"
    port1 = sim.endpoints()["nodes"]["dgx1"]["port"]
    port2 = sim.endpoints()["nodes"]["dgx2"]["port"]
    line2 = next(x for x in sim.known_hosts_path.read_text().splitlines()
                 if x.startswith(f"[127.0.0.1]:{port2} "))
    wrong.write_text(line2.replace(f":{port2} ", f":{port1} ") + "\n")
    with pytest.raises(asyncssh.HostKeyNotVerifiable):
        async with connect(sim, "dgx1", known_hosts=str(wrong)):
            pass


@pytest.mark.skipif(not Path("/usr/bin/ssh").exists(), reason="OpenSSH client not installed")
async def test_openssh_client_logs_in(sim):
    ep = sim.endpoints()["nodes"]["dgx4"]
    proc = await asyncio.create_subprocess_exec(
        "/usr/bin/ssh", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={sim.known_hosts_path}",
        "-o", "StrictHostKeyChecking=yes", "-o", "IdentitiesOnly=yes", "-F", "/dev/null",
        "-i", str(sim.client_key_path), "-p", str(ep["port"]), "kilork@127.0.0.1",
        "uname -r; nope", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 20)
    assert out == b"6.17.0-1031-nvidia\n"
    assert b"sh: 1: nope: not found" in err
    assert proc.returncode == 127
