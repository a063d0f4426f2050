"""The head's Unix socket: ``listener`` (connections, framing, bounded everything),
``connection`` (what one client is and may cost), ``peer`` (who is calling: the
kernel's ``SO_PEERCRED`` and the user database), ``wire`` (the head's socket
protocol: JSON lines, one request or answer a line) and the argument models its
requests are checked against: ``op_args`` (the mutating ops), ``read_args`` (the
rest) and ``arg_types`` (the limits and field types they share).

Between the daemon and its clients: it may import the client's one set of mutating
ops (``gputui.scheduler.client.ops``) and the policy's types; never the daemon
(``head/``, above it) or the store (beside it). Not the helper protocol: that is
``gputui.wire``.
"""
