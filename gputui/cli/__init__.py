"""The ``gputui`` command's verbs, one module per group (``gputui.entry`` picks one).

Nothing is imported here: a verb loads its own modules only when it runs.
"""
