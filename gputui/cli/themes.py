"""The colour theme the console is asked for, checked before anything starts."""

from __future__ import annotations

from gputui.cli.errors import UsageError
from gputui.common.i18n import _
from gputui.config.models import Config


def theme_for(config: Config, theme: str | None) -> str:
    """``--theme``, else the config's, if the console can use it (``theme_named``)."""
    return theme_named(theme or config.theme)


def theme_named(name: str) -> str:
    """``name`` if it is a theme this console can use; else ``UsageError``, one line
    naming it and the themes there are."""
    from gputui.ui.themes import skipped_themes, theme_names

    names = theme_names()
    broken = skipped_themes()
    if name not in names and name in broken:
        raise UsageError(
            _("theme {name} cannot be used: {why}").format(name=repr(name), why=broken[name])
        )
    if name not in names:
        raise UsageError(
            _("unknown theme {name}; known themes: {names}").format(
                name=repr(name), names=", ".join(names)
            )
        )
    return name
