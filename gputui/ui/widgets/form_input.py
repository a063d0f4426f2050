"""An input field whose own keys act on it, even in a burst of keys with Tab.

Textual resolves a widget's key bindings (Backspace, Delete, the arrows, Enter) only
once the key has bubbled back up to the app, against whatever has the focus *then*.
A form moves the focus on Tab at once, so in ``1 Backspace 2 Tab x y`` typed
faster than the app draws, the Backspace reached the next field and ate the ``y``.
``FormInput`` runs its own bindings when the key reaches it, on itself.
"""

from __future__ import annotations

from textual import events
from textual.binding import Binding
from textual.widgets import Input


def _own_keys() -> dict[str, str]:
    keys: dict[str, str] = {}
    for item in Input.BINDINGS:
        key, action = (item.key, item.action) if isinstance(item, Binding) else item[:2]
        for one in key.split(","):
            keys.setdefault(one.strip(), action)
    return keys


OWN_KEYS = _own_keys()
"""Key -> action of every binding of Textual's ``Input``."""


class FormInput(Input):
    """An ``Input`` that acts on its own keys where they land."""

    async def on_key(self, event: events.Key) -> None:
        action = None if event.is_printable else OWN_KEYS.get(event.key)
        if action is None:
            return  # typed text, or a key for the form (Ctrl+S, Esc)
        event.stop()
        event.prevent_default()
        await self.run_action(action)
