"""The simulator: a ``pynvml`` stand-in the helper runs with ``--sim SPEC``.

``engine`` (``SimNvml``, the NVML function surface), ``device`` (one card's state),
``health`` (its health readings), ``env`` (which processes belong to which GPU) and
``spec`` (the ``--sim`` spec and its faults). Stdlib only, like the rest of the
helper, and shipped with it. Nothing is imported here: reading a spec
(``sim.spec``) does not load the engine.
"""
