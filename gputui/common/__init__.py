"""Small helpers every other folder shares, each one thing.

``text`` and ``printable`` make untrusted strings safe for a terminal; ``durations``
reads and writes lengths of time (``30m``, ``1-12:00``); ``locations`` says where
hosts.yaml and the head's socket are found (one search order for every caller);
``untrusted`` reads numbers out of another process's answer; ``thishost`` says which
of the head's hosts this machine is; ``gpu_env`` builds the ``CUDA_VISIBLE_DEVICES``
line from checked GPU UUIDs.

The bottom layer: the standard library (and ``rich``'s cell widths, in ``text``),
never anything else of gputui, so every folder may import it, a light CLI verb
included. Nothing is imported here: a module loads only what it names.
"""
