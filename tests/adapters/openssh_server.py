"""A private OpenSSH sshd on a free loopback port, with its own host key,
authorized key and config, for tests against the real server.

Install: ``apt-get install -y openssh-server`` (as root, sshd also needs its
privilege-separation directory ``/run/sshd``, created here when missing).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


class SshdUnavailable(Exception):
    """Why a real sshd cannot be started here (the caller skips)."""


@dataclass
class OpenSshServer:
    port: int
    user: str
    client_key: Path
    known_hosts: Path
    process: subprocess.Popen[bytes]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, timeout=30
    )


@contextlib.contextmanager
def openssh_server(tmp: Path, extra_config: str = "") -> Iterator[OpenSshServer]:
    """``extra_config``: more sshd_config lines (e.g. ``SetEnv PATH=...``)."""
    if not os.path.exists(SSHD) or not shutil.which("ssh-keygen"):
        raise SshdUnavailable("OpenSSH sshd not installed (apt-get install -y openssh-server)")
    if os.geteuid() == 0 and not os.path.isdir("/run/sshd"):
        try:
            os.makedirs("/run/sshd", mode=0o755)
        except OSError as exc:
            raise SshdUnavailable(f"cannot create /run/sshd: {exc}") from None
    _keygen(tmp / "host_key")
    _keygen(tmp / "client_key")
    (tmp / "authorized_keys").write_text((tmp / "client_key.pub").read_text())
    host_pub = (tmp / "host_key.pub").read_text().split()
    for attempt in range(BIND_ATTEMPTS):
        port = _free_port()
        proc = _start(tmp, port, extra_config)
        try:
            _wait_listening(proc, port)
            break
        except _PortTaken:
            if attempt == BIND_ATTEMPTS - 1:
                raise SshdUnavailable(f"no free port after {BIND_ATTEMPTS} tries") from None
        except BaseException:
            _end(proc)
            raise
    known_hosts = tmp / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    try:
        yield OpenSshServer(port, getpass.getuser(), tmp / "client_key", known_hosts, proc)
    finally:
        _end(proc)


BIND_ATTEMPTS = 5
"""The port is free when picked and taken by sshd a moment later: another
test process (pytest-xdist worker) may bind it in between; then another port."""


class _PortTaken(Exception):
    pass


def _start(tmp: Path, port: int, extra_config: str) -> subprocess.Popen[bytes]:
    config = tmp / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {tmp / 'host_key'}\n"
        f"PidFile {tmp / 'sshd.pid'}\nAuthorizedKeysFile {tmp / 'authorized_keys'}\n"
        "StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "UsePAM no\nPermitRootLogin prohibit-password\nMaxSessions 64\nMaxStartups 100\n"
        "LogLevel ERROR\n" + extra_config
    )
    return subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def _wait_listening(proc: subprocess.Popen[bytes], port: int) -> None:
    """Until our sshd answers on ``port`` (an OpenSSH banner: not a simulated
    node of another test process that took the port first)."""
    deadline = time.monotonic() + 10
    while True:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            if "Address already in use" in err or "Cannot bind any address" in err:
                raise _PortTaken(err)
            raise SshdUnavailable(f"sshd exited {proc.returncode}: {err.strip()[:300]}")
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", port), timeout=0.5) as s,
        ):
            banner = s.recv(64)
            if banner.startswith(b"SSH-2.0-OpenSSH"):
                return
            if banner.startswith(b"SSH-"):
                _end(proc)
                raise _PortTaken(banner.decode(errors="replace"))
        if time.monotonic() > deadline:
            raise SshdUnavailable("sshd did not answer within 10 s")
        time.sleep(0.05)


def _end(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
