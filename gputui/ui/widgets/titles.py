"""Titles: border titles that repaint one line, not the widget; a view's status title.

Textual's ``border_title`` setter repaints the whole widget: every line of the
processes table and the detail pane's background, on every cursor move. The title is
drawn on the top border line only, so that line is all that is repainted here.
"""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Region
from textual.widget import Widget


def set_border_title(widget: Widget, title: str) -> None:
    """Show ``title`` in ``widget``'s top border, as ``widget.border_title = title`` does."""
    if title == widget.border_title:
        return  # setting it repaints the widget even when it is the same
    edge = widget.styles.border_top[0]
    if not widget.is_mounted or edge in ("", "none", "hidden"):
        widget.border_title = title
        return
    # As Textual's setter stores it (``Widget._border_title``, Textual 8), without its
    # ``refresh()`` of everything.
    widget._border_title = widget.render_str(title).expand_tabs(4).split()[0]
    left, top = widget.content_offset
    widget.refresh(Region(-left, -top, widget.outer_size.width, 1))


def view_title(name: str) -> Text:
    """The status line's start of a view (``gputui queue``, ``usage``, ``health``,
    ``audit``): its name in reverse, then two spaces before what the view says."""
    title = Text(f" gputui {name} ", "bold reverse", no_wrap=True, overflow="ellipsis", end="")
    title.append("  ")
    return title
