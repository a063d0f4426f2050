"""A checkbox that reads ``[x]`` when on and ``[ ]`` when off.

Textual's own checkbox draws the same ``X`` either way and tells on from off by
colour alone, which a terminal without colour (``NO_COLOR``, a monochrome theme,
a screen reader) loses.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Checkbox

ON = "[x]"
OFF = "[ ]"


class TickBox(Checkbox):
    """A ``Checkbox`` whose mark is a glyph, not only a colour."""

    def render(self) -> Content:
        mark = ON if self.value else OFF
        label = self.label.pad(1, 0).stylize_before(self.get_visual_style("toggle--label"))
        return Content.assemble((mark, self.get_visual_style("toggle--button")), label)
