"""Every string gputui marks for translation: the ``_("…")``, ``N_("…")`` and
``ngettext("…", "…", n)`` calls in its source (found with ``ast``), and what the help
screen and the main screen's footer show (built from the bindings themselves)."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import gputui

SOURCE = Path(gputui.__file__).resolve().parent
SHOWN_FROM_THE_HELPER = frozenset({Path("remote/sim/spec.py")})
"""The helper's files whose marked words the console shows: a sim spec's errors, when
hosts.yaml's ``sim:`` is checked."""
MARKERS = {"_": 1, "N_": 1, "ngettext": 2}
"""Marker call -> how many of its first arguments are messages."""


def marked_in(text: str, where: str = "<source>") -> set[str]:
    """The literal messages of the marker calls in ``text``; a marker called with
    anything but string literals is an error (the catalogue could not hold it)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(text, where)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        if node.func.id == "pgettext" and len(node.args) >= 2:
            context, message = node.args[:2]
            if (
                isinstance(context, ast.Constant)
                and isinstance(context.value, str)
                and isinstance(message, ast.Constant)
                and isinstance(message.value, str)
            ):
                found.add(f"{context.value}\x04{message.value}")
            continue
        count = MARKERS.get(node.func.id)
        if count is None or not node.args:
            continue
        for arg in node.args[:count]:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.add(arg.value)
    return found


def marked_in_source() -> dict[str, str]:
    """Every marked message -> the first file (relative) that marks it."""
    out: dict[str, str] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        relative = path.relative_to(SOURCE)
        if "remote" in relative.parts and relative not in SHOWN_FROM_THE_HELPER:
            continue  # the helper runs on GPU hosts: it shows nobody anything
        for message in marked_in(path.read_text(encoding="utf-8"), str(path)):
            out.setdefault(message, str(path.relative_to(SOURCE)))
    return out


def help_messages() -> set[str]:
    """The help screen's titles and key texts, with and without a head, as English
    (what ``help_sections`` looks up), and the main screen's footer labels."""
    from gputui.common import i18n
    from gputui.ui.app import GpuTuiApp
    from gputui.ui.head.console import HeadConsole
    from gputui.ui.help_contents import help_sections
    from gputui.ui.screens.main import MainScreen

    out: set[str] = set()
    saved = i18n.language()
    i18n.choose("en")
    try:
        for link in (None, object()):
            head = HeadConsole.help_sections(SimpleNamespace(link=link))  # type: ignore[arg-type]
            for title, rows in help_sections(GpuTuiApp.BINDINGS, head):
                out.add(title)
                out.update(text for _, text in rows)
    finally:
        i18n.choose(saved)
    for binding in [*GpuTuiApp.BINDINGS, *MainScreen.BINDINGS, *MainScreen.SCHEDULER_BINDINGS]:
        description = getattr(binding, "description", "")
        if description:
            out.add(description)
        tooltip = getattr(binding, "tooltip", "")
        if tooltip:
            out.add(tooltip)
    return out


def all_messages() -> set[str]:
    return set(marked_in_source()) | help_messages()


HEAD_SOURCES = ("scheduler", "wire")
"""Where the head's words are made (``gputui.wire.words.say``), relative to the package."""


def _literals(node: ast.AST) -> list[str] | None:
    """The templates a ``say`` call's first argument can be: an ``N_("…")`` or a choice
    of them (``a if x else b``); None where it is a variable (a template marked with
    ``N_`` where it was defined, found by the scan of ``N_``)."""
    if isinstance(node, ast.IfExp):
        body, orelse = _literals(node.body), _literals(node.orelse)
        return None if body is None or orelse is None else body + orelse
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "N_"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return [node.args[0].value]
    return None


def head_sources() -> list[Path]:
    return sorted(p for part in HEAD_SOURCES for p in (SOURCE / part).rglob("*.py"))


def say_calls() -> list[tuple[str, ast.Call, list[str] | None]]:
    """Every ``say(…)`` in the head's source: where, the call, its templates (None:
    a variable)."""
    out = []
    for path in head_sources():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            if node.func.id == "say" and node.args:
                where = f"{path.relative_to(SOURCE)}:{node.lineno}"
                out.append((where, node, _literals(node.args[0])))
    return out


def head_templates() -> dict[str, str]:
    """Every template the head can send -> where: the ``N_`` strings of its source (a
    ``say`` call names one, or a variable holding one marked where it is defined)."""
    out: dict[str, str] = {}
    for path in head_sources():
        for message in marked_in(path.read_text(encoding="utf-8"), str(path)):
            out.setdefault(message, str(path.relative_to(SOURCE)))
    return out


def plain_refusals() -> list[str]:
    """Refusals the head still makes of an English line written at the call site (a
    literal or an f-string) instead of a template: ``Refusal(code, "…")``,
    ``HeadError(code, f"…")``, ``wire.error(id, code, "…")``. Only the head's side:
    the client's own errors (``scheduler/client``) are its own business."""
    found = []
    for path in head_sources():
        if "client" in path.relative_to(SOURCE).parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            at = {"Refusal": 1, "HeadError": 1, "error": 2}.get(name or "")
            if at is None or len(node.args) <= at:
                continue
            if name == "error" and not isinstance(func, ast.Attribute):
                continue
            if isinstance(node.args[at], (ast.Constant, ast.JoinedStr)):
                found.append(f"{path.relative_to(SOURCE)}:{node.lineno}")
    return found
