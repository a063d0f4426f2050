"""The console's scheduler side: the link to the head, what it pushes, and every request.

``HeadConsole`` (``console``) is the one object the app holds for all of it; the
parsed views of the head's answers (``view``, ``flags``, ``usage_view``) are plain
data that screens and widgets read.
"""
