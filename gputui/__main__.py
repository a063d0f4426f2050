"""``python -m gputui``: the same as the ``gputui`` command."""

from gputui.entry import entry

if __name__ == "__main__":
    entry()
