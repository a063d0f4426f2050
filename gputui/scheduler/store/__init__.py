"""The head's database: what is stored (``tables``), every query the head makes,
how SQLite is opened and migrated (``engine``, ``migrations/``), online backups
(``backup``), each text column's cap (``caps``) and job row (``jobrow``), and the
change stream (``changes``, ``pgchanges``: what other processes commit).

All of the head's SQL lives here. It may import the policy's pure types and maths and
the wire's limits; never the daemon (``head/``), the socket server (``server/``), the
client, the console or the CLI: the store knows nothing of who uses it.
"""
