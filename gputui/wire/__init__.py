"""The helper protocol: what the helper on a GPU host and its clients (the fleet, and
through it the console and the head) say to each other, as JSON lines.

``messages`` holds the messages (``hello``, ``sample``, ``event``, ``result``,
``jobs``, ``error``) and their limits; ``ops`` the requests to a helper and their
results; ``fields`` the cleaned text and ranged numbers every message is made of;
``health`` a GPU's health readings; ``decode`` the one decoder of a helper's line.
``words`` is what the head's socket protocol says to people: an English template and
its args beside the English line, shown by a client in its user's language.

It imports ``common`` and pydantic, nothing else: never the helper (``gputui.remote``
is shipped alone and keeps its own copies of the limits, held equal by a test) and no
I/O. Not the head's socket protocol: that is ``gputui.scheduler.server.wire``.
"""
