"""The console's screens: ``main`` (summary, grid, processes, detail; its keys in
``main_keys``, what its side panes show in ``main_selection``), ``queue``,
``health``, ``usage`` and ``audit``, and the modals (``confirm``, ``forms``,
``forcefree``, ``help``).

A screen draws what the app and ``HeadConsole`` hand it (the model, the head's parsed
views in ``gputui.ui.head``) and posts what the user asks for as messages; it reaches
neither the hosts nor the head itself.
"""
