"""Notices in the team's chat: the stored notices, sent to each user's channels and
the team's (``outbox``), through apprise or our own signed webhooks (``senders``);
the ``notify`` ops (``channels``)."""
