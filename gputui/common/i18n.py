"""The language a person reads: gettext catalogues shipped in the package.

Strings a user reads are looked up with ``_("…")`` (and ``ngettext`` for counts) at
the moment they are shown, never at import: the language is chosen after the
modules are loaded. A string in a module-level table is marked with ``N_("…")``
(which returns it unchanged, so the catalogue test finds it) and looked up with
``_()`` where it is drawn.

The language, first that says one: ``--lang`` (``choose``), the config key
``ui.lang`` (``configure``), then ``LC_ALL``, ``LC_MESSAGES``, ``LANG``; else
English. Only what ``LANGUAGES`` lists is offered; an environment naming another
language (or ``C``, ``POSIX``) gets English.

The catalogue is read on the first lookup, not at import: ``gputui --version`` and a
verb that prints nothing translated never open it.

A hot path (a grid line drawn every second, a notice's kind) reads its words from a
table made by ``per_language``: looked up once, and again only after the language
changes (``choose``, ``configure``, ``configure_later``, ``reset``).

Machine output (``--json``, ``--csv``, reason codes, ``/metrics``) never goes
through here: it is the same in every language.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, TypeVar

from gputui.common.printable import shown

if TYPE_CHECKING:
    import gettext

__all__ = [
    "LANGUAGES",
    "N_",
    "_",
    "choose",
    "configure",
    "configure_later",
    "language",
    "language_of",
    "marked",
    "ngettext",
    "per_language",
    "pgettext",
    "reset",
    "translates",
]

DOMAIN = "gputui"
LOCALE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "locale")
"""Where the compiled catalogues are: ``locale/<lang>/LC_MESSAGES/gputui.mo``."""

LANGUAGES = ("en", "zh_CN")
"""The languages gputui ships, English (the source strings) first."""

_ALIASES = {
    "en": "en",
    "zh": "zh_CN",
    "zh_cn": "zh_CN",
    "zh_sg": "zh_CN",
    "zh_hans": "zh_CN",
    "zh_hans_cn": "zh_CN",
}

_explicit: str | None = None
_configured: str | None = None
_translation: gettext.NullTranslations | _English | None = None
_reader: Callable[[], str | None] | None = None
_generation = 0
"""Counts the language's changes: what ``per_language`` made under another is made again."""

T = TypeVar("T")


def language_of(value: str) -> str | None:
    """The shipped language ``value`` names (``zh_CN.UTF-8``, ``zh-cn``, ``en_US``),
    or None where it names none of them."""
    text = value.strip()
    if len(text) > 64:
        return None
    base = text.split(".", 1)[0].split("@", 1)[0].replace("-", "_").lower()
    if base in _ALIASES:
        return _ALIASES[base]
    if base.startswith("en_"):
        return "en"
    return None


def _unknown(value: str, where: str) -> ValueError:
    said = _("{where}: unknown language {value}; known: {names}")
    return ValueError(
        said.format(where=where, value=repr(shown(value, 24)), names=", ".join(LANGUAGES))
    )


def choose(value: str | None) -> None:
    """The language ``--lang`` asks for (None: not given); an unknown one raises
    ValueError with the line to print."""
    global _explicit
    if value is None:
        _explicit = None
    else:
        lang = language_of(value)
        if lang is None:
            raise _unknown(value, "--lang")
        _explicit = lang
    _drop()


def configure(value: str | None, where: str = "ui.lang") -> None:
    """The language the config's ``ui.lang`` names (None: not set); below ``--lang``."""
    global _configured
    if value is None:
        _configured = None
    else:
        lang = language_of(value)
        if lang is None:
            raise _unknown(value, where)
        _configured = lang
    _drop()


def configure_later(reader: Callable[[], str | None]) -> None:
    """``ui.lang`` as ``reader`` gives it, asked on the first lookup only (a verb whose
    output is all machine output never reads the config for it). A reader that fails,
    or names no shipped language, leaves the environment's choice."""
    global _reader
    _reader = reader
    _drop()


def reset() -> None:
    """Forget ``--lang`` and the config's choice (tests)."""
    global _explicit, _configured, _reader
    _explicit = _configured = _reader = None
    _drop()


def _drop() -> None:
    global _translation, _generation
    _translation = None
    _generation += 1


def per_language(build: Callable[[], T]) -> Callable[[], T]:
    """A function that answers what ``build`` made in the language chosen now: made on
    the first call, kept until the language changes (``choose``, ``configure``,
    ``configure_later``, ``reset``), then made again. For words a hot path shows many
    times over (a table of translated words, looked up once instead of at every line);
    ``build`` looks its words up with ``_``, ``ngettext`` or ``pgettext``."""
    made: list[tuple[int, T]] = []

    def words() -> T:
        if not made or made[0][0] != _generation:
            generation = _generation  # the words below are of this language
            made[:] = [(generation, build())]
        return made[0][1]

    return words


def _from_environment() -> str:
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name)
        if value:  # the first one set decides, as in POSIX
            return language_of(value) or "en"
    return "en"


def language() -> str:
    """The language strings are shown in now: one of ``LANGUAGES``."""
    global _configured, _reader
    if _explicit is None and _reader is not None:
        reader, _reader = _reader, None
        try:
            value = reader()
        except Exception:  # the config's own errors are said where it is read for itself
            value = None
        if isinstance(value, str):
            _configured = language_of(value) or _configured
    return _explicit or _configured or _from_environment()


class _English:
    """English, the source strings: what ``gettext.NullTranslations`` answers, without
    importing ``gettext`` (a verb's start-up: its import compiles a regex or two)."""

    def gettext(self, message: str) -> str:
        return message

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        return singular if n == 1 else plural

    def pgettext(self, context: str, message: str) -> str:
        return message


def _catalogue() -> gettext.NullTranslations | _English:
    global _translation
    if _translation is None:
        lang = language()
        if lang == "en":
            _translation = _English()
        else:
            import gettext

            _translation = gettext.translation(
                DOMAIN, localedir=LOCALE_DIR, languages=[lang], fallback=True
            )
    return _translation


def _(message: str) -> str:
    """``message`` in the chosen language (itself where there is no translation)."""
    if not message:
        return message  # gettext's "" is the catalogue's header
    return _catalogue().gettext(message)


def translates(message: str) -> bool:
    """Whether the chosen language's catalogue has ``message`` (its translation may
    read the same: ``"book: {why}"``); English has none."""
    catalog = getattr(_catalogue(), "_catalog", None)
    return bool(message) and isinstance(catalog, dict) and message in catalog


@lru_cache(maxsize=1)
def _marked() -> frozenset[str]:
    """The msgids the shipped catalogues hold (each language's the same: every marked
    string, ``tests/i18n/test_catalogue.py`` holds them to it)."""
    import gettext

    found: set[str] = set()
    for lang in LANGUAGES[1:]:
        try:
            catalogue = gettext.translation(DOMAIN, localedir=LOCALE_DIR, languages=[lang])
        except OSError:
            continue
        catalog = getattr(catalogue, "_catalog", None)
        if isinstance(catalog, dict):
            found.update(k for k in catalog if isinstance(k, str) and k)
    return frozenset(found)


def marked(message: str) -> bool:
    """Whether ``message`` is a string gputui marks for translation, whatever the
    chosen language (English too): what the head, which translates nothing, asks
    before it sends a sentence as words a client looks up in its own catalogue."""
    return bool(message) and message in _marked()


def ngettext(singular: str, plural: str, n: int) -> str:
    """The form of ``singular`` / ``plural`` for ``n``, in the chosen language."""
    return _catalogue().ngettext(singular, plural, n)


def pgettext(context: str, message: str) -> str:
    """``message`` as it reads in ``context``: one English word with two meanings
    ("NOTE" a column title and a severity) gets a translation for each (the
    catalogue's ``msgctxt``)."""
    return _catalogue().pgettext(context, message)


def N_(message: str) -> str:
    """Marks ``message`` for the catalogue; it is looked up (``_``) where it is shown."""
    return message
