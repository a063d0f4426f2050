"""The helper that runs on each GPU host: NVML samples, verified signals, a simulator.

Stdlib plus ``pynvml`` only, Python >= 3.8, and nothing else of gputui: the console
ships these files over the SSH channel (see ``bundle``) and runs them from memory.
"""

from __future__ import annotations

HELPER_VERSION = "0.1.0"
PROTOCOL_VERSION = 1
