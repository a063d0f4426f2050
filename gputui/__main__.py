"""``python -m gputui``: the same as the ``gputui`` command."""

from gputui.entry import entry

entry()
