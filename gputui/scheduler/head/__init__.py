"""The head daemon: one event loop that takes requests, applies each batch in one
transaction, and acts on the hosts.

``daemon`` is ``Head`` (the loop, the writer, the reader thread); ``batch`` applies one
batch; ``actions`` and ``transitions`` say what each request does, checked against who
asks; ``lifecycle`` places work, launches it and takes in what hosts report;
``drains``, ``fences`` and ``forcefree`` take GPUs out of service and back;
``reader``, ``explain_reads`` and ``usage_reads`` answer read-only requests off the
writer; ``publish`` and ``views`` are what clients are sent; ``hostops`` is what the
head needs of its hosts (``fleet_hostops``: a ``Fleet``); ``watch/`` is what it keeps
watching beside the store.

The top of the scheduler: it may import the store, the policy, the server, the fleet,
the health rules and config; nothing else in gputui but the CLI's ``gputui head``
imports it. Never textual or the console.
"""
