"""hosts.yaml: what it may say, and the one way it is read.

``models`` holds the pydantic models (``scheduler`` those of the ``scheduler:``
section); ``loader`` reads and validates the file under bounds (``load_config``,
``ConfigError``); ``yamlbounds`` composes the YAML under limits; ``where`` turns a
problem into its ``FILE:LINE: field: problem`` line; ``sshjump`` parses a ProxyJump
chain.

It imports ``common`` and the wire's limits (``gputui.wire``), and the helper's
``sim.spec`` only to check a ``sim:`` value. Never the fleet, the health rules, the
scheduler or the console: they read their settings from here (import-linter's
layers). Nothing is imported here: a module loads only what it names.
"""
