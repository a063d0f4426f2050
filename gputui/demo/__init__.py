"""``gputui demo``: a whole cluster on this machine, to try gputui without GPUs.

``cluster`` runs simulated GPU hosts reached over real SSH (``server``: a small
in-process SSH server); ``head`` a real ``gputui head``; ``workloads`` real processes
posing as jobs; ``limits`` says how big a cluster this machine can run.

Beside the console, not under it: the demo may import config, the helper's simulator
and the scheduler's client; the console never imports the demo (the CLI's ``demo``
verb puts the two together).
"""
