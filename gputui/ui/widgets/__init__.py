"""The console's widgets: the GPU grid (``gpu_grid``, drawn by ``grid_render`` into
``line_builder``'s strips, laid out by the column plan of ``grid_columns``), the
summary line, the detail pane, the process table, the usage charts, border titles.

Widgets draw what they are given and do no I/O, not even through what they import: no
sockets, processes, threads, databases, SSH, fleet, head link or app (an
import-linter contract, indirect imports included).
"""
