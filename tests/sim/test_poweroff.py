"""The simulated nodes' graceful power-down (issue 15, part 4's simulator
side): ``systemctl poweroff`` / ``reboot`` over SSH, the node dark a few
simulated seconds later, and every plug cut counted clean or unclean."""

from __future__ import annotations

import asyncssh
import pytest

from sparktui.sim.cluster import SHUTDOWN_SECONDS
from sparktui.sim.testing import connect

from .conftest import exec_on


async def test_a_plug_cut_under_a_running_os_is_an_unclean_loss(sim):
    await sim.power("dgx5", False)
    assert sim.nodes["dgx5"].power == "off"
    assert sim.nodes["dgx5"].unclean_losses == 1


async def test_poweroff_then_cut_is_clean(sim, serve):
    results = await serve(sim, "glm53-flash-eugr-2x", "4nodes-switch-b")
    assert all(r[3] == 0 for r in results)
    _, _, status = await exec_on(sim, "dgx5", "systemctl poweroff")
    assert status == 0
    await sim.advance(SHUTDOWN_SECONDS + 1)
    node = sim.nodes["dgx5"]
    assert node.power == "halted" and not node.docker.containers
    with pytest.raises((OSError, asyncssh.Error)):
        async with connect(sim, "dgx5", connect_timeout=2):
            pass
    assert sim.spec.entities["switch.dgx5"].state == "on"  # the plug does not know
    await sim.power("dgx5", False)
    assert node.power == "off" and node.unclean_losses == 0
    await sim.power("dgx5", True)
    await sim.advance(node.spec.boot_seconds + 1)
    assert node.up and node.unclean_losses == 0


async def test_reboot_comes_back_by_itself(sim):
    node = sim.nodes["dgx6"]
    booted = node.boot_t
    _, _, status = await exec_on(sim, "dgx6", "systemctl reboot")
    assert status == 0
    await sim.advance(SHUTDOWN_SECONDS + 1)
    assert not node.up
    await sim.advance(node.spec.boot_seconds + 1)
    assert node.up and node.boot_t > booted and node.unclean_losses == 0
    out, _, _ = await exec_on(sim, "dgx6", "uname -r")
    assert out.strip()


async def test_other_systemctl_verbs_are_not_simulated(sim):
    _, err, status = await exec_on(sim, "dgx7", "systemctl restart docker")
    assert status == 1 and "not simulated" in err
    assert sim.nodes["dgx7"].up
