"""`sparktui sim` as a process: endpoints JSON first, the endpoints file while it
runs, a real SSH login through it, and a clean exit on SIGINT."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import asyncssh

from sparktui.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


async def test_sim_command_publishes_endpoints_and_cleans_up(config_copy, tmp_path):
    state = tmp_path / "state"
    cfg = config_copy(lambda text: text.replace('state_dir = "~/.local/state/sparktui"',
                                                f'state_dir = "{state}"'))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sparktui.cli.main", "--config", str(cfg), "sim", "--speed", "100",
        "--dialect", "vllm-0.11", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        endpoints = json.loads(line)
        assert set(endpoints) == {"nodes", "ha_url", "ha_token_file", "client_key",
                                  "known_hosts", "pid"}
        assert endpoints["pid"] == proc.pid
        banner = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert ", dialect vllm-0.11, " in banner, banner
        published = state / "sim" / "endpoints.json"
        assert json.loads(published.read_text()) == endpoints
        dgx1 = endpoints["nodes"]["dgx1"]
        async with asyncssh.connect(dgx1["host"], dgx1["port"], username="kilork",
                                    known_hosts=endpoints["known_hosts"],
                                    client_keys=[endpoints["client_key"]],
                                    connect_timeout=10) as conn:
            result = await conn.run("uname -r", timeout=10)
        assert result.stdout == "6.17.0-1031-nvidia\n"
        health = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sparktui.cli.main", "--config", str(cfg), "health",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(health.communicate(), 60)
        assert health.returncode == 0, (out, err)
        assert b"8/8 online" in out
        second = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sparktui.cli.main", "--config", str(cfg), "sim",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(second.communicate(), 30)
        assert second.returncode == 1
        assert f"a simulator (pid {proc.pid}) already publishes".encode() in err
        assert json.loads(published.read_text()) == endpoints  # left alone
    finally:
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.wait(), 30)
    assert proc.returncode == 0
    assert not (state / "sim" / "endpoints.json").exists()


def test_list_scenarios(capsys):
    """In this process: the listing needs no process of its own."""
    assert main(["sim", "--list-scenarios"]) == 0
    out = capsys.readouterr().out
    names = [line.split()[0] for line in out.splitlines()]
    assert {"normal", "boot-d-oom", "long-prompt", "switch-off", "images-missing"} <= set(names)
