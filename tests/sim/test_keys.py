"""The simulator's client private key is 0600 from the moment it exists, and
what it writes beside it (in the state dir, under ``sim/``) is 0600 in a 0700
dir whatever the umask."""

from __future__ import annotations

import os
import stat

from sparktui.sim.keys import host_keys, make_client_key, write_known_hosts


def test_private_key_is_created_0600_even_with_umask_0(tmp_path):
    old = os.umask(0)
    try:
        (tmp_path / "id_ed25519").write_text("leftover")
        os.chmod(tmp_path / "id_ed25519", 0o666)
        keys = make_client_key(tmp_path)
        host = host_keys(["dgx1"], shared=True)["dgx1"]
        write_known_hosts(keys.known_hosts_path, [(40001, host)])
    finally:
        os.umask(old)
    assert keys.client_key_path.stat().st_mode & 0o777 == 0o600
    assert b"PRIVATE KEY" in keys.client_key_path.read_bytes()
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {"id_ed25519": 0o600, "id_ed25519.pub": 0o600, "known_hosts": 0o600}
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o700
