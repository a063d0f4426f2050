"""gputui's entries in the command palette (Ctrl+P).

Two kinds, both searched by the palette's fuzzy matcher on their name and words:
every command of the ``:`` line (``gputui.ui.commands.VERBS``; ``sort`` once per
key, so "sort util" finds it), and every key of the screen the palette was opened
on (the queue's Kill, Hold, Preempt; the health view's Acknowledge; the main
screen's Claim, Release, SIGTERM...), each with its key, run as the key would be.
An entry whose key the screen does not offer now (no head configured) is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from gputui.ui.command_run import CommandRunner
from gputui.ui.commands import VERBS
from gputui.ui.model import SORT_KEYS
from gputui.ui.screens.help import key_label

Entry = tuple[str, str, Callable[[], object]]
"""(name, what it does, run it)."""


_OWN = frozenset({"command_palette", "command_line", "quit", "help", "app.health"})
"""Keys whose command is listed already (or is the palette itself)."""


class GpuTuiCommands(Provider):
    """The ``:`` commands and the keys of the screen below the palette."""

    def _entries(self) -> Iterator[Entry]:
        runner = getattr(self.app, "commands", None)
        if not isinstance(runner, CommandRunner):
            return
        seen: set[str] = set()
        for verb in VERBS:
            if verb.name == "sort":
                for key in SORT_KEYS:
                    line = f"sort {key.name}"
                    yield line, f"Sort the GPUs by {key.label}", partial(runner.run_line, line)
                continue
            seen.add(verb.name)
            yield verb.name, verb.help, partial(runner.run_line, verb.name)
        for active in self.screen.active_bindings.values():
            binding = active.binding
            name = binding.description
            if not name or not active.enabled or binding.action in _OWN:
                continue
            if name.lower() in seen:
                continue
            seen.add(name.lower())
            what = f"{binding.tooltip or name} ({key_label(binding.key)})"
            yield name, what, partial(self.app.run_action, binding.action, active.node)

    async def discover(self) -> Hits:
        for name, what, run in self._entries():
            yield DiscoveryHit(name, run, help=what)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, what, run in self._entries():
            score = max(matcher.match(name), matcher.match(f"{name} {what}") * 0.9)
            if score > 0:
                yield Hit(score, matcher.highlight(name), run, help=what)
