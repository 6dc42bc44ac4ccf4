"""The command palette: every action by name (`:` or ctrl+p), k9s-like.

Opened empty it offers a short list: the demo's triggers first, then one
entry per verb (``serve <recipe>``, ``recover <node>``, ...) and the commands
that take nothing. Choosing a verb opens it again with the verb typed
(``serve ``), so its suggestions are that verb's entries (``serve glm53-…``);
typing a query searches every entry (``recover dgx6`` directly). The flat
list of ~40 entries (fit × 12, serve × 12, ...) is what a search reaches, not
what the palette opens on. The only provider the console has: Textual's own
system commands (theme, screenshot, ...) came first or last at random
(discovery hits all score 0, shown as they arrive)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, TypeAlias, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from sparktui.ops.guards import Override

if TYPE_CHECKING:
    from sparktui.tui.app import SparkTUI

Command: TypeAlias = tuple[str, Callable[[], object], str]
"""(name, callback, help) of one palette entry."""
PLAIN = ("help", "runlock list", "shift log", "serve a recipe…", "runlock close…")
"""The entries without an argument, offered as they are."""


def _propose_lane(app: SparkTUI, kind: str, lane: str,
                  overrides: frozenset[Override] = frozenset()) -> None:
    """The envelope or the bench of a serving lane in the confirm modal, as the CLI
    plans it; a prompt-length refusal offers ``o`` (the lane's name typed)."""
    s = app.service
    preview = s.preview_envelope if kind == "envelope" else s.preview_bench
    app.propose(lambda: preview(lane, overrides), f"{kind} {lane}",
                partial(_propose_lane, app, kind, lane))


class ActionCommands(Provider):
    """Serve, stop, power, recover, cluster power, fit, runlocks, shift log.
    In read-only mode only the commands that change nothing are offered."""

    def _commands(self) -> list[Command]:
        app = cast("SparkTUI", self.app)
        service = app.service
        out: list[Command] = []
        for recipe in sorted(service.recipes):
            r = service.recipes[recipe]
            out.append((f"fit {recipe} on {r.cluster}", partial(app.show_fit, recipe),
                        "memory envelope: weights, KV, prefill scratch (changes nothing)"))
        out.append(("help", app.action_help, "every key and command"))
        out.append(("runlock list", app.show_runlocks, "the per-node workflow locks"))
        out.append(("shift log", app.show_shift_log, "the night's workflows from the journal"))
        if app.read_only:
            return out
        if app.demo_commands is not None:
            out[:0] = app.demo_commands()
        for recipe, boot in sorted(app.record_offers.items()):
            out.append((f"record {recipe}'s boot figures",
                        partial(app.propose, partial(service.preview_record_boot, recipe, boot),
                                f"record {recipe}"),
                        f"boot {boot.boot} measured {boot.describe()}"))
        out.append(("serve a recipe…", app.pick_and_serve, "pick a recipe and a cluster"))
        for recipe in sorted(service.recipes):
            out.append((f"serve {recipe}", partial(app.propose_serve, recipe),
                        f"on {service.recipes[recipe].cluster}"))
        for lane, view in sorted(service.lanes().items()):
            if view.phase == "serving":
                out.append((f"qualify {lane}", partial(app.qualify_lane, lane),
                            "quality gate: copy fidelity, identifiers, smoke bench"))
                out.append((f"envelope {lane}", partial(_propose_lane, app, "envelope", lane),
                            "long-prompt ladder 8K-128K: prefill scratch, longest safe prompt"))
                out.append((f"bench {lane}", partial(_propose_lane, app, "bench", lane),
                            "prefill/decode tokens/s and TTFT, d0/d4096/d8192 x c1/c2"))
            out.append((f"stop {lane}", partial(app.propose_named, "stop", lane),
                        "stop every rank (typed confirmation)"))
        for node in app.config.nodes:
            out.append((f"power-cycle {node}", partial(app.propose_named, "power-cycle", node),
                        "Home Assistant plug off, wait, on"))
            out.append((f"recover {node}", partial(app.propose_named, "recover", node),
                        "SSH retries, then a plug cycle"))
        for cluster in app.config.clusters:
            out.append((f"cluster power off {cluster}",
                        partial(app.propose_named, "cluster-off", cluster),
                        "end of the night: every node's plug off"))
            out.append((f"cluster power on {cluster}",
                        partial(app.propose_named, "cluster-on", cluster),
                        "every node's plug on"))
        out.append(("runlock close…", app.pick_runlock_close,
                    "remove a node's workflow lock (typed confirmation)"))
        return out

    def _verbs(self) -> list[Command]:
        """What the empty palette offers: the demo's triggers, each verb once,
        the commands without an argument, quit."""
        app = cast("SparkTUI", self.app)
        service = app.service
        lanes = sorted(service.lanes().items())
        verbs = [("fit", "recipe", "memory envelope of a recipe (changes nothing)")]
        if not app.read_only:
            verbs += [("serve", "recipe", "guards, then the confirm; each recipe on its own "
                                          "cluster"),
                      *([("qualify", "lane", "quality gate of a serving lane"),
                         ("envelope", "lane", "long-prompt ladder of a serving lane"),
                         ("bench", "lane", "throughput bench of a serving lane")]
                        if any(v.phase == "serving" for _, v in lanes) else []),
                      *([("stop", "lane", "stop every rank (typed confirmation)")]
                        if lanes else []),
                      ("power-cycle", "node", "Home Assistant plug off, wait, on"),
                      ("recover", "node", "SSH retries, then a plug cycle"),
                      ("cluster power", "off|on cluster", "every node's plug")]
        out: list[Command] = list(app.demo_commands()) \
            if app.demo_commands is not None and not app.read_only else []
        out += [(f"{verb} <{arg}>", partial(app.command_mode, verb), help_text)
                for verb, arg, help_text in verbs]
        out += [c for c in self._commands()
                if c[0] in PLAIN or c[0].startswith("record ")]  # a boot's offers, as they are
        out.append(("quit", app.exit, "close the console (workflows it runs are stopped)"))
        return out

    async def discover(self) -> Hits:
        for name, callback, help_text in self._verbs():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, text=name, help=help_text)
