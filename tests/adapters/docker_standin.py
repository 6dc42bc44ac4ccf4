"""A `docker` stand-in for tests against a real sshd: answers the commands
production sends (docs/CONTRACTS.md) from files in a state directory.

``<state>/<name>.log``   lines ``RFC3339Nano text`` (written by the test);
``<state>/<name>.json``  ``{"Running": bool, "ExitCode": int, "StartedAt": ts,
                          "FinishedAt": ts, "Labels": {...}, "Cmd": [...]}``;
``<state>/<name>.delay`` seconds a ``logs -f`` waits before its first output
                          (a stream that starts late).

``logs -f`` polls the file and writes nothing while nothing is new: a silent
follower, the kind that outlives a closed channel without the follow wrapper.

It starts no heavier than needed (a catch-up read starts one per rank while a
verdict waits): standard library only, run without ``site`` (``python -S``),
``json`` imported only by the commands that parse state, no ``pathlib`` nor
``datetime``.
"""

from __future__ import annotations

import os
import sys
import time

STATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "state")


def _path(name: str, ext: str) -> str:
    return os.path.join(STATE, f"{name}.{ext}")


def _key(ts: str) -> str:
    """A UTC RFC 3339 timestamp (``Z``, up to nanoseconds) as text that sorts
    by time: the fraction padded to nine digits (no ``datetime`` import)."""
    whole, _, frac = ts.rstrip("Z").partition(".")
    return whole + "." + frac.ljust(9, "0")


def _state(name: str) -> dict[str, object]:
    import json

    try:
        with open(_path(name, "json")) as f:
            return dict(json.load(f))
    except FileNotFoundError:
        return {}


def _lines(name: str) -> list[str]:
    """The log's lines as docker keeps them: split at ``\n`` only (a tqdm bar's
    ``\r`` redraws stay inside their line, under its one timestamp)."""
    try:
        with open(_path(name, "log"), newline="") as f:
            text = f.read()
    except FileNotFoundError:
        return []
    return [line + "\n" for line in text.split("\n")[:-1]]


def logs(args: list[str]) -> int:
    follow = "-f" in args
    since = args[args.index("--since") + 1] if "--since" in args else None
    name = args[-1]
    if not os.path.exists(_path(name, "json")):
        sys.stderr.write(f"Error response from daemon: No such container: {name}\n")
        return 1
    delay = _path(name, "delay")
    if follow and os.path.exists(delay):
        with open(delay) as f:
            time.sleep(float(f.read()))
    done = 0
    while True:
        lines = _lines(name)
        for line in lines[done:]:
            if since is None or _key(line.split(" ", 1)[0]) >= _key(since):
                sys.stdout.write(line)
        sys.stdout.flush()
        done = len(lines)
        if not follow or not _state(name).get("Running"):
            return 0
        time.sleep(0.01)


def inspect(args: list[str]) -> int:
    import json

    if args[0] == "--format":
        print(json.dumps({k: v for k, v in _state(args[2]).items()
                          if k not in ("Labels", "Cmd")}))
        return 0
    st = _state(args[0])
    if not st:
        print("[]")
        return 1
    print(json.dumps([{"State": {k: v for k, v in st.items() if k not in ("Labels", "Cmd")},
                       "Config": {"Cmd": st.get("Cmd", []), "Labels": st.get("Labels", {})}}]))
    return 0


def ps(args: list[str]) -> int:
    import json

    for entry in sorted(os.listdir(STATE)):
        if not entry.endswith(".json"):
            continue
        name = entry.removesuffix(".json")
        st = _state(name)
        labels = ",".join(f"{k}={v}" for k, v in st.get("Labels", {}).items())
        print(json.dumps({"Names": name, "Image": "vllm", "Labels": labels,
                          "State": "running" if st.get("Running") else "exited",
                          "Status": "Up 1 minute" if st.get("Running") else "Exited (1)"}))
    return 0


def install(bin_dir: str) -> str:
    """Write this stand-in as ``bin_dir/docker`` (run by this interpreter,
    without ``site``) and return its path; its state directory is beside it."""
    os.makedirs(os.path.join(bin_dir, "state"), exist_ok=True)
    path = os.path.join(bin_dir, "docker")
    with open(__file__) as src, open(path, "w") as out:
        out.write(f"#!{sys.executable} -S\n" + src.read())
    os.chmod(path, 0o755)
    return path


def main(argv: list[str]) -> int:
    sub, rest = argv[0], argv[1:]
    handler = {"logs": logs, "inspect": inspect, "ps": ps}.get(sub)
    if handler is None:
        sys.stderr.write(f"docker: '{sub}' is not a docker command.\n")
        return 1
    return handler(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
