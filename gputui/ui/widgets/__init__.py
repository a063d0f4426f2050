"""The console's widgets: the GPU grid (``gpu_grid``, drawn by ``grid_render``), the
summary line, the detail pane, the process table, the usage charts, border titles.

Widgets draw what they are given and do no I/O, not even through what they import: no
sockets, processes, threads, databases, SSH, fleet, head link or app (an
import-linter contract, indirect imports included).
"""
