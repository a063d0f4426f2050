"""Colour themes: the YAML files shipped in ``gputui.themes`` plus the user's own.

A theme file is one mapping: ``name``, ``dark``, the Textual colour slots
(``primary`` ... ``error``, optional ``boost``) and ``variables`` for the gauge
colours the grid uses (``gauge-low``, ``gauge-mid``, ``gauge-high``, ``gauge-mem``,
``gauge-empty``, ``muted``). A bad file gives one line naming the file and field.
"""

from __future__ import annotations

import importlib.resources
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from textual.color import Color, ColorParseError
from textual.css.stylesheet import Stylesheet
from textual.theme import BUILTIN_THEMES, Theme

PACKAGE = "gputui.themes"
DEFAULT_THEME = "gputui-dark"

GAUGE_DEFAULTS: dict[str, str] = {
    "gauge-low": "#4EBF71",
    "gauge-mid": "#E8C15A",
    "gauge-high": "#E8615A",
    "gauge-mem": "#5FA8E8",
    "gauge-empty": "#3B4252",
    "muted": "#7B8494",
}
"""Gauge colours for themes that do not set them (e.g. Textual's own)."""

_REQUIRED = ("name", "primary")
_COLOURS = (
    "primary",
    "secondary",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "success",
    "warning",
    "error",
    "boost",
)
_KNOWN = frozenset((*_COLOURS, "name", "dark", "variables", "luminosity_spread", "text_alpha"))


class ThemeError(ValueError):
    """A theme file that cannot be used; the message is one line: ``FILE: field: problem``.

    ``theme`` is the name the file would have given its theme (its ``name``, else
    the file's stem), so a request for that theme can say why it is missing.
    """

    def __init__(self, message: str, theme: str | None = None) -> None:
        super().__init__(message)
        self.theme = theme


def user_theme_dir() -> Path:
    """Where a user's own themes live: ``~/.config/gputui/themes/*.yaml``."""
    return Path.home() / ".config" / "gputui" / "themes"


def parse_theme(text: str, source: str) -> Theme:
    """Build a Textual ``Theme`` from one YAML document, or raise ``ThemeError``."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ThemeError(f"{where}: yaml: {problem}") from None
    if not isinstance(data, dict):
        raise ThemeError(f"{source}: (top level): must be a mapping of theme settings")
    for key in data:
        if key not in _KNOWN:
            raise ThemeError(f"{source}: {key}: unknown key")
    for key in _REQUIRED:
        if not data.get(key):
            raise ThemeError(f"{source}: {key}: required")
    name = data["name"]
    if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
        raise ThemeError(f"{source}: name: must be letters, digits, '-' or '_'")
    try:
        return _build(data, name, source)
    except ThemeError as exc:
        exc.theme = name
        raise


def _build(data: dict[str, Any], name: str, source: str) -> Theme:
    colours: dict[str, str] = {}
    for key in _COLOURS:
        if data.get(key) is not None:
            colours[key] = _colour(data[key], source, key)
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise ThemeError(f"{source}: dark: must be true or false")
    variables = data.get("variables") or {}
    if not isinstance(variables, dict):
        raise ThemeError(f"{source}: variables: must be a mapping of name: colour")
    checked: dict[str, str] = {}
    for key, raw in variables.items():
        if not isinstance(key, str) or not isinstance(raw, str | int | float):
            raise ThemeError(f"{source}: variables.{key}: must be a name: value pair")
        checked[key] = _variable(key, str(raw), source)
    extra: dict[str, float] = {}
    for key in ("luminosity_spread", "text_alpha"):
        if key in data:
            if not isinstance(data[key], int | float) or not 0 <= data[key] <= 1:
                raise ThemeError(f"{source}: {key}: must be a number from 0 to 1")
            extra[key] = float(data[key])
    return Theme(
        name=name,
        primary=colours["primary"],
        secondary=colours.get("secondary"),
        warning=colours.get("warning"),
        error=colours.get("error"),
        success=colours.get("success"),
        accent=colours.get("accent"),
        foreground=colours.get("foreground"),
        background=colours.get("background"),
        surface=colours.get("surface"),
        panel=colours.get("panel"),
        boost=colours.get("boost"),
        dark=dark,
        luminosity_spread=extra.get("luminosity_spread", 0.15),
        text_alpha=extra.get("text_alpha", 0.95),
        variables={**GAUGE_DEFAULTS, **checked},
    )


def _colour(value: object, source: str, field: str) -> str:
    if not isinstance(value, str):
        raise ThemeError(f"{source}: {field}: must be a colour string like '#1e90ff'")
    try:
        Color.parse(value)
    except ColorParseError:
        raise ThemeError(f"{source}: {field}: {value!r} is not a colour") from None
    return value


_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _is_text_style(name: str) -> bool:
    """Textual's variables that hold a text style (``bold``, ``b reverse``), not a colour."""
    return name.endswith("-text-style") or name.startswith("link-style")


def _variable(name: str, value: str, source: str) -> str:
    """Check one extra variable the way Textual will use it, in a throwaway stylesheet.

    Textual reads every theme variable into the app's stylesheet; one that does not
    parse ("Error in stylesheet") ends the app, so a theme with such a value must
    be refused here, with the file and field named.
    """
    where = f"{source}: variables.{name}"
    if not _VARIABLE_NAME.fullmatch(name):
        raise ThemeError(f"{where}: not a variable name (letters, digits, '-' or '_')")
    if name in GAUGE_DEFAULTS:
        return _colour(value, source, f"variables.{name}")
    kind, prop = ("a text style", "text-style") if _is_text_style(name) else ("a colour", "color")
    stylesheet = Stylesheet(variables={name: value})
    stylesheet.add_source(f"ThemeCheck {{ {prop}: ${name}; }}", read_from=(source, name))
    try:
        stylesheet.parse()
    except Exception:  # Textual raises several kinds here (TokenError, StylesheetParseError)
        raise ThemeError(f"{where}: {value!r} is not {kind}") from None
    return value


def packaged_themes() -> dict[str, Theme]:
    """The themes shipped with gputui, by name. A broken one is a bug: it raises."""
    themes: dict[str, Theme] = {}
    for item in sorted(importlib.resources.files(PACKAGE).iterdir(), key=lambda p: p.name):
        if item.name.endswith(".yaml"):
            theme = parse_theme(item.read_text(encoding="utf-8"), f"{PACKAGE}/{item.name}")
            themes[theme.name] = theme
    return themes


def user_themes(directory: Path | None = None) -> tuple[dict[str, Theme], list[ThemeError]]:
    """The user's themes, and one error (one line) per file that could not be used."""
    directory = user_theme_dir() if directory is None else directory
    themes: dict[str, Theme] = {}
    errors: list[ThemeError] = []
    if not directory.is_dir():
        return themes, errors
    for path in sorted(directory.glob("*.yaml")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(ThemeError(f"{path}: cannot read: {type(exc).__name__}", path.stem))
            continue
        try:
            theme = parse_theme(text, str(path))
        except ThemeError as exc:
            exc.theme = exc.theme or path.stem
            errors.append(exc)
            continue
        themes[theme.name] = theme
    return themes, errors


def all_themes(directory: Path | None = None) -> tuple[dict[str, Theme], list[ThemeError]]:
    """gputui's themes, then the user's (which may override by name), then Textual's."""
    themes = packaged_themes()
    mine, errors = user_themes(directory)
    themes.update(mine)
    for name, theme in BUILTIN_THEMES.items():
        themes.setdefault(name, theme)
    return themes, errors


def skipped_themes(directory: Path | None = None) -> dict[str, str]:
    """User themes whose files could not be used: theme name (or file stem) -> error line."""
    return {error.theme or "": str(error) for error in user_themes(directory)[1]}


def theme_names(directory: Path | None = None) -> list[str]:
    """Every theme name ``--theme`` accepts, gputui's first (for the CLI's help/errors)."""
    return list(all_themes(directory)[0])


def resolve_theme(name: str, known: Iterable[str] | Mapping[str, object]) -> str:
    """``name`` if it is a known theme, else ``ValueError`` listing the known names."""
    names = list(known)
    if name in names:
        return name
    raise ValueError(f"unknown theme {name!r}; known themes: {', '.join(names)}")
