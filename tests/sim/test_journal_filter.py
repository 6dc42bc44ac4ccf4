"""journalctl's matching in the simulator: -k hides journald's own notices,
FIELD=VALUE terms with + between alternatives show both, unknown options fail."""

from sparktui.core.config import Config
from sparktui.sim.journal import FLUSHING, Journal, journal_filter
from sparktui.sim.testing import running_sim

from .conftest import exec_on


def _journal() -> Journal:
    j = Journal("dgx6")
    j.kernel(100.0, "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory")
    j.journald(101.0, FLUSHING)
    return j


def _shown(args: list[str]) -> list[str]:
    wanted = journal_filter(args)
    assert callable(wanted)
    return [e.message for e in _journal().entries if wanted(e)]


def test_dash_k_shows_kernel_lines_only():
    assert _shown(["-k", "-f"]) == ["NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory"]


def test_production_matches_show_kernel_and_journald():
    args = ["-b", "-f", "-o", "short-iso-precise", "--no-pager", "-n", "0",
            "_TRANSPORT=kernel", "+", "SYSLOG_IDENTIFIER=systemd-journald"]
    assert len(_shown(args)) == 2


def test_single_match_and_no_match():
    assert _shown(["SYSLOG_IDENTIFIER=systemd-journald"]) == [FLUSHING]
    assert _shown([]) == [e.message for e in _journal().entries]


def test_rendered_identifier_is_journald_with_pid():
    j = _journal()
    assert " dgx6 systemd-journald[412]: Under memory pressure, flushing caches." in \
        j.render(j.entries[1])


def test_unknown_option_is_an_error():
    assert journal_filter(["--frobnicate"]) == "journalctl: unrecognized option '--frobnicate'"


async def test_since_at_epoch_shows_lines_from_then_and_other_forms_fail(fleet: Config) -> None:
    """``--since @N`` (systemd.time(7): seconds since the epoch), as the exit's
    kernel-journal read asks (watch/lane_oom.kernel_journal_command)."""
    async with running_sim(fleet) as sim:
        j = sim.nodes["dgx1"].journal
        t = sim.wall()
        j.kernel(t + 10.0, "before")
        j.kernel(t + 20.0, "Out of memory: Killed process 4242 (python3)")
        out, _, status = await exec_on(
            sim, "dgx1", f"journalctl -k -o short-iso-precise --no-pager --since @{int(t + 15)} "
                         "-n 5000 2>/dev/null")
        assert status == 0 and out.endswith("kernel: Out of memory: Killed process 4242 "
                                            "(python3)\n") and "before" not in out
        _, err, status = await exec_on(sim, "dgx1", "journalctl -k --since yesterday")
        assert (status, err) == (1, "Failed to parse timestamp: yesterday\n")
