"""The footer, its key labels in the chosen language (``gputui.common.i18n``).

Textual's ``Footer`` shows each binding's description as it is written (English);
this one looks each up as it is drawn, and the tooltip with it. The bindings stay as
they are: the help screen and the command palette read the same English words and
translate them where they show them.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from gputui.common.i18n import _


class TranslatedFooter(Footer):
    """A ``Footer`` whose key labels and tooltips are in the chosen language."""

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                widget.description = _(widget.description)
                if isinstance(widget.tooltip, str):
                    widget.tooltip = _(widget.tooltip)
            yield widget
