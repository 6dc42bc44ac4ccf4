"""Every guard rule refuses with what, why, the numbers and the fix; overrides
clear only what they may clear."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import pytest

from sparktui.core.config import Config, SwitchConfig
from sparktui.core.recipe_load import load_recipe
from sparktui.core.state import (
    ClusterSnapshot,
    ContainerInfo,
    DiskFree,
    ImageInfo,
    MemInfo,
    Mount,
    NodeSnapshot,
    NodeState,
    PathKind,
    ProbeResult,
)
from sparktui.ops import guards
from sparktui.ops.guards import Override

IMAGE = "ghcr.io/eugr/spark-vllm-b12x:nightly-20260910"
R37 = "ghcr.io/jovian-judgement/vllm-sm121:r37"
B = "4nodes-switch-b"
ON = {"switch.sw6_mt": "on"}


def probe(node: str = "dgx5", *, kernel: str = "6.17.0-1031-nvidia", nas: bool = True,
          cache: PathKind | None = None, images: tuple[str, ...] = (IMAGE, R37),
          containers: tuple[ContainerInfo, ...] = ()) -> ProbeResult:
    home = "/home/kilork/.cache/huggingface"
    return ProbeResult(
        meminfo=MemInfo(total_kib=127600748, available_kib=124000000),
        kernel=kernel,
        mounts=(Mount("nas.lan:/sna", "/mnt/nas", "nfs4", "rw"),) if nas else (),
        hf_cache=cache or PathKind(home, "symbolic link", "/mnt/nas/ai/huggingface"),
        images=tuple(ImageInfo(*ref.rsplit(":", 1), id="sha256:1") for ref in images),
        containers=containers, docker_ok=True)


def snap(node: str, p: ProbeResult | None = None, state: NodeState = NodeState.ONLINE
         ) -> NodeSnapshot:
    return NodeSnapshot(node, state, 1.0, probe=p if state is NodeState.ONLINE else None,
                        error="" if state is NodeState.ONLINE else "ssh: connect timed out")


def cluster(**overrides: ProbeResult | NodeSnapshot) -> ClusterSnapshot:
    nodes = []
    for n in ("dgx1", "dgx2", "dgx3", "dgx4", "dgx5", "dgx6", "dgx7", "dgx8"):
        v = overrides.get(n)
        nodes.append(v if isinstance(v, NodeSnapshot) else snap(n, v or probe(n)))
    return ClusterSnapshot(1.0, tuple(nodes))


@pytest.fixture
def cfg(shipped_config: Config) -> Config:
    nodes = {n: replace(c, hf_cache="/home/kilork/.cache/huggingface")
             for n, c in shipped_config.nodes.items()}
    return replace(shipped_config, nodes=nodes)


def serve(cfg, snapshot=None, recipe="glm53-flash-eugr-2x", cl=B, states=ON, **kw):
    r = load_recipe(cfg, recipe)
    return guards.evaluate_serve(cfg, r, cl, snapshot or cluster(), switch_states=states, **kw)


def refusal(report, guard, subject=None):
    found = [v for v in report.refused if v.guard == guard
             and (subject is None or v.subject == subject)]
    assert found, f"no {guard} refusal in {[v.to_json() for v in report.refused]}"
    return found[0]


def test_a_clean_free_cluster_passes_every_guard(cfg):
    report = serve(cfg)
    assert report.allowed, [v.message for v in report.refused]
    assert not report.warnings


def test_protected_nodes_refuse_serve_stop_and_power(cfg):
    v = refusal(serve(cfg, cl="4nodes-switch"), "protected-node", "dgx1")
    assert "protected_nodes" in v.message and v.override is None
    assert not guards.evaluate_stop(cfg, "some-lane", ["dgx2"]).allowed
    report = guards.evaluate_power(cfg, "dgx3", "power cycle")
    assert "no power cycle on it" in refusal(report, "protected-node").message


def test_protected_lane_refuses_stop_not_serve(cfg):
    report = guards.evaluate_stop(cfg, "glm53-flash-eugr-2x", ["dgx5"])
    v = refusal(report, "protected-lane")
    assert "must NOT be stopped" in v.message and v.override is None
    assert serve(cfg).allowed


def test_a_node_whose_plug_is_a_shared_switch_is_never_toggled(cfg):
    bad = replace(cfg, nodes={**cfg.nodes, "dgx6": replace(cfg.nodes["dgx6"],
                                                           switch="switch.sw6_mt")})
    v = refusal(guards.evaluate_power(bad, "dgx6", "power cycle"), "shared-switch")
    assert "shared switch sw6_mt" in v.message and v.override is None


@pytest.mark.parametrize("state,overridable", [("off", False), ("unavailable", False),
                                               (None, True)])
def test_blocking_switch_off_or_unknown_refuses_serve(cfg, state, overridable):
    report = serve(cfg, states={"switch.sw6_mt": state})
    v = refusal(report, "blocking-switch")
    assert "sw6_mt" in v.message
    assert (v.override is Override.SWITCH_UNKNOWN) == overridable
    if state == "off":
        assert "power cluster on" in v.message


def test_non_blocking_switch_is_not_a_serve_guard(cfg):
    assert serve(cfg, states={"switch.sw6_mt": "on", "switch.sw7_fan": "off"}).allowed


def test_kernel_pin_and_known_bad(cfg):
    bad = serve(cfg, cluster(dgx8=probe("dgx8", kernel="7.0.0-1019-nvidia")))
    v = refusal(bad, "kernel", "dgx8")
    assert "known bad" in v.message and "6.17.0-1031" in v.message and v.override is None
    off = serve(cfg, cluster(dgx7=probe("dgx7", kernel="6.17.0-1040-nvidia")))
    v = refusal(off, "kernel", "dgx7")
    assert "not the pinned 6.17.0-1031" in v.message and v.override is Override.KERNEL
    assert serve(cfg, cluster(dgx7=probe("dgx7", kernel="6.17.0-1040-nvidia")),
                 overrides=frozenset({Override.KERNEL})).allowed
    assert guards.kernel(cfg, "dgx5", "6.17.0-1031").passed
    assert not guards.kernel(cfg, "dgx5", "6.17.0-10310").passed


def test_boot_d_is_refused_by_fit_with_its_numbers(cfg):
    v = refusal(serve(cfg, recipe="dsv41-flash-r37-4x-eager"), "fit")
    assert "127.6 GB" in v.message and "121.6 GiB" in v.message
    assert "serve on >= 5 ranks" in v.message
    assert v.override is Override.FIT


def test_gmu_091_and_the_short_kv_pin_are_refused_by_fit(cfg):
    v = refusal(serve(cfg, recipe="dsv41-flash-8x-lab-gmu091", cl="8nodes-switch"), "fit")
    assert "free 108.78 < 110.66 required" in v.message
    v = refusal(serve(cfg, recipe="glm53-full-mxfp4-4x-dspark8-pin8"), "fit")
    assert "needs 8.08 GiB" in v.message and "short by 0.08 GiB" in v.message


def test_missing_nas_mount(cfg):
    v = refusal(serve(cfg, cluster(dgx7=probe("dgx7", nas=False))), "nas-mount", "dgx7")
    assert "/mnt/nas is not mounted" in v.message and v.override is Override.NAS_MOUNT


@pytest.mark.parametrize("kind,target,expect", [
    ("directory", None, "is a directory, not the symlink"),
    ("missing", None, "does not exist"),
    ("symbolic link", "/tmp/elsewhere", "points to /tmp/elsewhere"),
])
def test_hf_cache_must_be_the_nas_symlink(cfg, kind, target, expect):
    cache = PathKind("/home/kilork/.cache/huggingface", kind, target)
    v = refusal(serve(cfg, cluster(dgx6=probe("dgx6", cache=cache))), "hf-cache", "dgx6")
    assert expect in v.message and v.override is Override.HF_CACHE
    if kind == "directory":
        assert "LocalEntryNotFoundError" in v.message
        assert "rmdir /home/kilork/.cache/huggingface && ln -s /mnt/nas/ai/huggingface" in \
            v.message


def test_missing_image_is_synced_from_a_node_that_has_it_or_refused(cfg):
    report = serve(cfg, cluster(dgx6=probe("dgx6", images=()), dgx7=probe("dgx7", images=())))
    assert report.allowed
    msgs = [v.message for v in report.verdicts if v.guard == "image" and v.subject == "dgx6"]
    assert "will sync from dgx5 (a node of 4nodes-switch-b, the lane's own cluster" in msgs[0]
    pref = serve(cfg, cluster(dgx6=probe("dgx6", images=())), build_node="dgx8")
    assert any("will sync from dgx8 (the build node" in v.message for v in pref.verdicts)
    none = cluster(**{n: probe(n, images=()) for n in
                      ("dgx1", "dgx2", "dgx3", "dgx4", "dgx5", "dgx6", "dgx7", "dgx8")})
    v = refusal(serve(cfg, none), "image", "dgx5")
    assert "no online node has it" in v.message and v.override is None


def test_image_refs_with_registry_ports_and_implicit_latest():
    assert guards.image_ref("vllm-node") == "vllm-node:latest"
    assert guards.image_ref("reg:5000/vllm") == "reg:5000/vllm:latest"
    assert guards.image_ref("reg:5000/vllm:r37") == "reg:5000/vllm:r37"


def _container(name, state="exited", lane=None, status="Exited (137) 1 hour ago"):
    labels = MappingProxyType({"sparktui.lane": lane} if lane else {})
    return ContainerInfo(name=name, image=IMAGE, state=state, status=status, labels=labels)


def test_stale_container_of_the_same_name(cfg):
    stale = _container("sparktui-glm53-flash-eugr-2x-r0")
    v = refusal(serve(cfg, cluster(dgx5=probe("dgx5", containers=(stale,)))),
                "stale-container", "dgx5")
    assert "stale container sparktui-glm53-flash-eugr-2x-r0" in v.message
    assert "Exited (137)" in v.message and v.override is Override.STALE_CONTAINER
    running = _container("sparktui-glm53-flash-eugr-2x-r0", "running", "glm53-flash-eugr-2x",
                         "Up 2 hours")
    v = refusal(serve(cfg, cluster(dgx5=probe("dgx5", containers=(running,)))),
                "stale-container", "dgx5")
    assert "already running" in v.message and v.override is None


def test_busy_node(cfg):
    other = _container("bench", "running", None, "Up 5 minutes")
    v = refusal(serve(cfg, cluster(dgx8=probe("dgx8", containers=(other,)))), "node-busy",
                "dgx8")
    assert "bench" in v.message and "MemAvailable" in v.message
    assert v.override is Override.NODE_BUSY


def test_offline_node_refuses_without_override(cfg):
    report = serve(cfg, cluster(dgx6=snap("dgx6", state=NodeState.STARVED)))
    v = refusal(report, "online", "dgx6")
    assert "starved" in v.message and "sparktui recover dgx6" in v.message
    assert v.override is None
    assert not report.needed_overrides() and report.blocking()


def test_runlock_held_by_another_workflow(cfg):
    report = serve(cfg, locks={"dgx7": "power-cycle dgx7 (wf-1, pid 42 on box); -> wait for "
                                       "it, or `sparktui runlock close dgx7` if it is stale"})
    v = refusal(report, "runlock", "dgx7")
    assert "power-cycle dgx7" in v.message and "runlock close dgx7" in v.message


def test_duplicate_host_keys_are_flagged_not_refused(cfg):
    fps = {n: "SHA256:aUXh" for n in ("dgx1", "dgx5", "dgx6")} | {"dgx7": "SHA256:x"}
    report = serve(cfg, fingerprints=fps)
    assert report.allowed
    warned = {v.subject for v in report.warnings if v.guard == "host-key"}
    assert warned == {"dgx5", "dgx6"}
    assert "dgx1" in next(v.message for v in report.warnings if v.subject == "dgx5")


def test_overrides_are_explicit_and_never_clear_protection(cfg):
    with pytest.raises(ValueError, match="valid: kernel, fit"):
        guards.parse_overrides(["protected-node"])
    everything = frozenset(Override)
    report = serve(cfg, recipe="dsv41-flash-r37-4x-eager", cl="4nodes-switch",
                   overrides=everything)
    assert {v.guard for v in report.refused} == {"protected-node"}
    assert [v.guard for v in report.overridden] == ["fit"]


def test_cluster_power_skips_protected_nodes_and_keeps_shared_switches(cfg):
    p = guards.plan_cluster_power(cfg, "8nodes-switch", on=False)
    assert p.nodes == ("dgx5", "dgx6", "dgx7", "dgx8")
    assert {v.subject for v in p.report.warnings if v.guard == "protected-node"} == \
        {"dgx1", "dgx2", "dgx3", "dgx4"}
    assert p.switches_after == ()
    assert p.report.allowed
    on = guards.plan_cluster_power(cfg, B, on=True)
    assert on.switches_before == ("switch.sw6_mt", "switch.sw7_fan")
    assert on.nodes == ("dgx5", "dgx6", "dgx7", "dgx8")


def test_cluster_power_off_turns_a_switch_off_last_when_nobody_else_uses_it(cfg):
    lone = replace(cfg, switches={**cfg.switches,
                                  "sw9": SwitchConfig("sw9", "switch.sw9", True)},
                   clusters={**cfg.clusters, B: replace(cfg.clusters[B], switches=("sw9",))})
    p = guards.plan_cluster_power(lone, B, on=False)
    assert p.switches_after == ("switch.sw9",)
    locked = guards.plan_cluster_power(lone, B, on=False, locks={"dgx6": "serve x"})
    assert "dgx6" not in locked.nodes and not locked.report.allowed


def test_a_lane_runs_on_one_cluster_at_a_time(cfg):
    running = ContainerInfo(
        name="sparktui-glm53-flash-eugr-2x-r0", image=IMAGE, state="running", status="Up 1 hour",
        labels=MappingProxyType({"sparktui.lane": "glm53-flash-eugr-2x",
                                 "sparktui.cluster": "2nodes-dac"}))
    v = refusal(serve(cfg, cluster(dgx1=probe("dgx1", containers=(running,)))),
                "lane-running", "dgx1")
    assert "already runs on dgx1" in v.message and "cluster 2nodes-dac" in v.message
    assert v.override is None


def _lane_container(node: str, lane: str, rank: int = 0, port: int = 8000,
                    running: bool = True) -> ContainerInfo:
    labels = {"sparktui.lane": lane, "sparktui.rank": str(rank), "sparktui.nranks": "1",
              "sparktui.port": str(port), "sparktui.cluster": "x"}
    return ContainerInfo(f"sparktui-{lane}-r{rank}", IMAGE, "running" if running else "exited",
                         "Up 1 hour" if running else "Exited (1)", MappingProxyType(labels))


def only_dgx1_protected(cfg: Config) -> Config:
    return replace(cfg, guards=replace(cfg.guards, protected_nodes=("dgx1",)))


def test_image_sync_never_from_a_protected_node_when_another_has_it(cfg):
    """dgx1 is protected and first in config order; only it and dgx3 (another
    cluster) have the image: dgx3 is chosen, and the message says why."""
    cfg = only_dgx1_protected(cfg)
    bare = {n: probe(n, images=()) for n in ("dgx2", "dgx4", "dgx5", "dgx6", "dgx7", "dgx8")}
    report = serve(cfg, cluster(**bare))
    (v,) = [v for v in report.verdicts if v.guard == "image" and v.subject == "dgx5"]
    assert "will sync from dgx3 (no node of 4nodes-switch-b has it; dgx3 is not protected" \
        in v.message
    only_protected = serve(cfg, cluster(**bare, dgx3=probe("dgx3", images=())))
    (v,) = [v for v in only_protected.verdicts if v.guard == "image" and v.subject == "dgx5"]
    assert "will sync from dgx1 (a protected node, but no other online node has the image" \
        in v.message
    # a protected node asked for as the build node is still passed over
    asked = serve(cfg, cluster(**bare), build_node="dgx1")
    assert any("will sync from dgx3" in v.message for v in asked.verdicts if v.guard == "image")


def test_a_node_running_a_protected_lane_is_no_image_source_either(cfg):
    cfg = only_dgx1_protected(cfg)
    prot = cfg.guards.protected_lanes[0]
    bare = {n: probe(n, images=()) for n in ("dgx1", "dgx5", "dgx6", "dgx7", "dgx8")}
    busy = probe("dgx2", containers=(_lane_container("dgx2", prot),))
    report = serve(cfg, cluster(**bare, dgx2=busy))
    assert any("will sync from dgx3" in v.message for v in report.verdicts if v.guard == "image")


def test_port_in_use_refuses_naming_the_lane_that_holds_it(cfg):
    holder = probe("dgx5", containers=(_lane_container("dgx5", "other-lane", port=8000),))
    report = serve(cfg, cluster(dgx5=holder), ports={("dgx5", 8000): True},
                   overrides=frozenset(Override))
    v = refusal(report, "port", "dgx5:8000")
    assert "held by lane other-lane (sparktui-other-lane-r0)" in v.message
    assert "sparktui stop other-lane" in v.message and v.override is None


def test_port_in_use_by_an_unknown_process_or_a_protected_lane(cfg):
    v = refusal(serve(cfg, ports={("dgx5", 8000): True}), "port", "dgx5:8000")
    assert "a process that is not a sparktui lane" in v.message and "ss -ltnp" in v.message
    prot = cfg.guards.protected_lanes[0]
    held = probe("dgx5", containers=(_lane_container("dgx5", prot, port=8000),))
    v = refusal(serve(cfg, cluster(dgx5=held), ports={("dgx5", 8000): True}), "port")
    assert "must NOT be stopped" in v.message and "sparktui stop" not in v.message
    free = serve(cfg, ports={("dgx5", 8000): False, ("dgx5", 29501): False})
    assert free.allowed
    assert {v.subject for v in free.verdicts if v.guard == "port"} == {"dgx5:8000", "dgx5:29501"}


def test_node_busy_with_a_protected_lane_is_never_overridable(cfg):
    prot = cfg.guards.protected_lanes[0]
    other_recipe = "glm53-full-mxfp4-4x-dspark8"
    busy = probe("dgx6", containers=(_lane_container("dgx6", prot, rank=1),))
    report = serve(cfg, cluster(dgx6=busy), recipe=other_recipe,
                   overrides=frozenset({Override.NODE_BUSY}))
    v = refusal(report, "node-busy", "dgx6")
    assert v.override is None and not v.overridden
    assert "must NOT be stopped" in v.message and "stop it first" not in v.message
    other = probe("dgx6", containers=(_lane_container("dgx6", "scratch", rank=1),))
    ok = serve(cfg, cluster(dgx6=other), recipe=other_recipe,
               overrides=frozenset({Override.NODE_BUSY}))
    assert [v.guard for v in ok.overridden] == ["node-busy"]
    assert not [v for v in ok.refused if v.guard == "node-busy"]


def test_fit_uses_the_memory_the_node_reports_when_it_is_less(cfg):
    recipe = "glm53-flash-eugr-2x"
    assert serve(cfg, recipe=recipe).allowed
    small = ProbeResult(**{**probe("dgx6").__dict__,
                           "meminfo": MemInfo(total_kib=64 * 1024 * 1024,
                                              available_kib=60 * 1024 * 1024)})
    report = serve(cfg, cluster(dgx6=small), recipe=recipe)
    v = refusal(report, "fit")
    assert "node memory 64.0 GiB from the nodes' MemTotal, below the configured 121.6" \
        in v.message


def test_memtotal_far_from_the_config_is_a_health_finding(cfg):
    from sparktui.core.nodehealth import node_findings

    small = ProbeResult(**{**probe("dgx6").__dict__,
                           "meminfo": MemInfo(total_kib=110 * 1024 * 1024,
                                              available_kib=100 * 1024 * 1024)})
    (f,) = node_findings(cfg, snap("dgx6", small), "dgx6")
    assert f.check == "memtotal" and not f.blocks_serve
    assert "MemTotal 110.0 GiB but [guards] node_memory_gib is 121.6" in f.message
    assert node_findings(cfg, snap("dgx6", probe("dgx6")), "dgx6") == []


def test_low_free_disk_is_a_health_finding(cfg):
    from sparktui.core.nodehealth import node_findings

    assert cfg.guards.disk_free_min_gib == 20.0
    root = DiskFree("/dev/nvme0n1p2", 3_905_109_820, 3_895_109_820, 10 * 1024 * 1024, "/")
    nas = DiskFree("nas.lan:/sna", 62_499_999_744, 41_234_567_168, 21_265_432_576, "/mnt/nas")
    full = replace(probe("dgx6"), disks=(root, nas))
    (f,) = node_findings(cfg, snap("dgx6", full), "dgx6")
    assert f.check == "disk" and f.subject == "dgx6" and not f.blocks_serve
    assert f.summary == "/: 10.0 GiB free"
    assert "only 10.0 GiB free on / (/dev/nvme0n1p2, 100% used; [guards] " \
           "disk_free_min_gib = 20)" in f.message and "`docker image prune`" in f.message
    roomy = replace(probe("dgx6"), disks=(replace(root, available_kib=25 * 1024 * 1024), nas))
    assert node_findings(cfg, snap("dgx6", roomy), "dgx6") == []
    off = replace(cfg, guards=replace(cfg.guards, disk_free_min_gib=0.0))
    assert node_findings(off, snap("dgx6", full), "dgx6") == []
    # the serve guards do not refuse on it
    assert serve(cfg, cluster(dgx6=full)).allowed


def test_disk_free_floor_is_range_checked_with_file_and_line(config_copy):
    from sparktui.core.config_load import load_config
    from sparktui.core.errors import InputError

    path = config_copy(lambda t: t.replace("disk_free_min_gib = 20.0", "disk_free_min_gib = -3"))
    with pytest.raises(InputError) as info:
        load_config(path)
    (problem,) = info.value.problems
    text = str(problem)
    assert f"{path}:" in text and "guards.disk_free_min_gib" in text and "-3" in text


def test_a_prompt_beyond_the_measured_ceiling_is_refused_overridably():
    assert guards.prompt_length("lane", 100_000, 102_400, 8192).passed
    v = guards.prompt_length("lane", 131_072, 102_400, 8192, "the last rung")
    assert not v.passed and v.override is Override.PROMPT_LENGTH
    assert "the last rung of 131,072 tokens exceeds lane's longest safe prompt, 102,400" \
        in v.message


def test_an_unmeasured_lane_takes_no_prompt_beyond_the_first_rung():
    assert guards.prompt_length("lane", 8192, None, 8192).passed
    v = guards.prompt_length("lane", 8193, None, 8192, "the d8193 bench prompt")
    assert not v.passed and v.override is Override.PROMPT_LENGTH
    assert "measure it first (`sparktui envelope lane`)" in v.message
