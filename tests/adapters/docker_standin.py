"""A `docker` stand-in for tests against a real sshd: answers the commands
production sends (docs/CONTRACTS.md) from files in a state directory.

``<state>/<name>.log``   lines ``RFC3339Nano text`` (written by the test);
``<state>/<name>.json``  ``{"Running": bool, "ExitCode": int, "StartedAt": ts,
                          "FinishedAt": ts, "Labels": {...}, "Cmd": [...]}``;
``<state>/<name>.delay`` seconds a ``logs -f`` waits before its first output
                          (a stream that starts late).

``logs -f`` polls the file and writes nothing while nothing is new: a silent
follower, the kind that outlives a closed channel without the follow wrapper.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from pathlib import Path

STATE = Path(__file__).with_name("state")


def _key(ts: str) -> float:
    return datetime.fromisoformat(ts).timestamp()


def _state(name: str) -> dict[str, object]:
    path = STATE / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _lines(name: str) -> list[str]:
    path = STATE / f"{name}.log"
    return path.read_text().splitlines(keepends=True) if path.exists() else []


def logs(args: list[str]) -> int:
    follow = "-f" in args
    since = args[args.index("--since") + 1] if "--since" in args else None
    name = args[-1]
    if not _state(name):
        sys.stderr.write(f"Error response from daemon: No such container: {name}\n")
        return 1
    delay = STATE / f"{name}.delay"
    if follow and delay.exists():
        time.sleep(float(delay.read_text()))
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
    for path in sorted(STATE.glob("*.json")):
        st = json.loads(path.read_text())
        labels = ",".join(f"{k}={v}" for k, v in st.get("Labels", {}).items())
        print(json.dumps({"Names": path.stem, "Image": "vllm", "Labels": labels,
                          "State": "running" if st.get("Running") else "exited",
                          "Status": "Up 1 minute" if st.get("Running") else "Exited (1)"}))
    return 0


def main(argv: list[str]) -> int:
    sub, rest = argv[0], argv[1:]
    handler = {"logs": logs, "inspect": inspect, "ps": ps}.get(sub)
    if handler is None:
        sys.stderr.write(f"docker: '{sub}' is not a docker command.\n")
        return 1
    return handler(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
