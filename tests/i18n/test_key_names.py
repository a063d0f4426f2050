"""The key names a Chinese console shows as they are (``untranslated.KEYS``) are
exactly those its footers and its help show: a word that is no key name cannot hide
there, and a key shown in a footer (``esc``: Textual's name) or in the
help (``Esc``, ``PgUp``) is never taken for untranslated English."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from types import SimpleNamespace

from textual.app import App
from textual.binding import Binding
from textual.dom import DOMNode
from untranslated import KEYS, NAMES, WORD, english_words

import gputui.ui
from gputui.common import i18n
from gputui.ui.app import GpuTuiApp
from gputui.ui.help_contents import help_sections


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _words(text: str) -> set[str]:
    return {w for w in WORD.findall(text) if len(w) >= 3}


def footer_key_words() -> set[str]:
    """The words of every key a footer shows (a shown binding of any screen or widget
    of the console), as Textual displays it."""
    for module in pkgutil.walk_packages(gputui.ui.__path__, "gputui.ui."):
        importlib.import_module(module.name)
    app = App[None]()
    out: set[str] = set()
    for cls in set(_subclasses(DOMNode)):
        if not cls.__module__.startswith("gputui."):
            continue
        for binding in vars(cls).get("BINDINGS", []):
            if not isinstance(binding, Binding) or not binding.show:
                continue
            for key in binding.key.split(","):
                one = Binding(key.strip(), binding.action, key_display=binding.key_display)
                out |= _words(app.get_key_display(one))
    return out


def help_key_words() -> set[str]:
    """The words of the keys the help screen lists, with and without a head."""
    from gputui.ui.head.console import HeadConsole

    out: set[str] = set()
    saved = i18n.language()
    i18n.choose("zh_CN")
    try:
        for link in (None, object()):
            head = HeadConsole.help_sections(SimpleNamespace(link=link))  # type: ignore[arg-type]
            for _title, rows in help_sections(GpuTuiApp.BINDINGS, head):
                for keys, _text in rows:
                    out |= _words(keys)
    finally:
        i18n.choose(saved)
    return out


def test_the_key_names_are_exactly_those_shown() -> None:
    shown = footer_key_words() | help_key_words()
    assert {"esc", "Esc", "PgUp"} <= shown
    assert "Click" not in shown  # the mouse's row names its action in the language read
    assert set(KEYS) == shown


def test_a_key_name_is_no_name_and_english_is_no_key() -> None:
    assert not KEYS & NAMES
    assert english_words("esc 关闭  Esc 关闭  PgUp 上一页", ()) == []
    assert english_words("escape close", ()) == ["escape", "close"]
