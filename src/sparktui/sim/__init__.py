"""A simulated DGX Spark cluster on loopback that speaks the real protocols.

Imported only by tests, benchmarks and `cli/sim_cmd.py` / `cli/demo_cmd.py`.

- `cluster.Sim`: the cluster (nodes, sshd, liveness, engines' HTTP, Home
  Assistant), its clock (`clock.SimClock`) and event scheduler.
- `spec`: what the cluster is made of (`spec_from_config`, `small_spec`).
- `scenarios`: the seeds' incidents as world states (`SCENARIOS`).
- `testing.running_sim` / `testing.connect`: helpers for tests of every layer.
- `runner.published_sim`: the simulator as a service with its endpoints file.

Node side: `ssh_server` (asyncssh + a front listener that starves on thrash),
`shell` (the dash subset of docs/CONTRACTS.md), `commands` and `docker_cli`
(real output formats), `fs`, `memory` (MemAvailable, PSI), `journal`,
`docker` (daemon state). Engines: `engine` (boot as a model of the recipe,
node and fabric), `engine_vllm` / `engine_sglang` (their wording),
`engine_http` (/health, /v1/models, /metrics, chat). `ha`: Home Assistant.
"""
