"""`sparktui export-rules`: the Prometheus alert rules (and, on request, their
promtool tests and the Grafana dashboard) for the sentinel's ``[export]``
metrics, with the thresholds of this config. The same files, made from the
shipped config, are under deploy/ in the source tree."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.config import ThrashConfig
from ..core.errors import InputError, Problem
from ..core.metrics_rules import (
    DASHBOARD_FILE,
    RULES_FILE,
    RULES_TEST_FILE,
    dashboard_json,
    rules_test_yaml,
    rules_yaml,
)
from .common import load


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export-rules", help="Prometheus alert rules and a Grafana dashboard "
                                            "for the sentinel's /metrics",
                       description=__doc__)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--dashboard", action="store_true",
                      help="print the Grafana dashboard JSON instead of the rules")
    what.add_argument("--tests", action="store_true",
                      help="print the promtool unit tests of the rules instead")
    what.add_argument("--out", type=Path, metavar="DIR",
                      help=f"write all three files under DIR ({RULES_FILE}, "
                           f"{RULES_TEST_FILE}, {DASHBOARD_FILE})")
    p.set_defaults(func=run)


def files(thrash: ThrashConfig) -> dict[str, str]:
    """Each shipped file's path under the output folder -> its text."""
    return {RULES_FILE: rules_yaml(thrash), RULES_TEST_FILE: rules_test_yaml(thrash),
            DASHBOARD_FILE: dashboard_json()}


def run(args: argparse.Namespace) -> int:
    config = load(args)
    if args.out is None:
        if args.dashboard:
            sys.stdout.write(dashboard_json())
        elif args.tests:
            sys.stdout.write(rules_test_yaml(config.thrash))
        else:
            sys.stdout.write(rules_yaml(config.thrash))
        return 0
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise InputError([Problem(config.path, None, "--out", f"{out} is not a directory")])
    written = []
    for name, text in files(config.thrash).items():
        path = out / name
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise InputError([Problem(config.path, None, "--out",
                                      f"cannot write {path}: {exc.strerror or exc}")]) from None
        written.append(str(path))
    print("wrote " + ", ".join(written))
    return 0
