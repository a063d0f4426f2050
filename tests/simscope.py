"""Each test process simulates GPUs of its own.

The simulator counts as a GPU's process any process on the machine whose environment
names that GPU, unless scoped (``GPUTUI_SIM_SCOPE``, see ``gputui.remote.sim.env``).
Every test process (each pytest-xdist worker, and every run beside it on the machine)
takes a scope of its own at start (``claim``), which its helpers, jobs and children
inherit; a process a test starts with an environment of its own carries it through
``sim_env``.
"""

from __future__ import annotations

import os
import secrets

from gputui.remote.sim.env import ENV_SCOPE


def claim() -> str:
    """Give this test process a scope of its own (never one it inherited: an xdist
    worker starts with its controller's environment); returns it."""
    scope = f"t{os.getpid()}x{secrets.token_hex(4)}"
    os.environ[ENV_SCOPE] = scope
    return scope


def sim_env(**env: str) -> dict[str, str]:
    """``env`` with this test process's scope: what a hand-made process on a simulated
    GPU needs to be seen by this process's simulators."""
    return {**env, ENV_SCOPE: os.environ[ENV_SCOPE]}
