"""What the head keeps watching beside the store, fed by the hosts' snapshots.

``hosts`` (``HostWatch``: what the head knows of each host), ``flags`` (ownership
flags, their enforcement, idle jobs), ``health`` (the cluster's health board),
``readings`` (each GPU's recent readings, for ``gputui incident``) and ``history``
(those readings to the store and back), ``meter`` (busy GPU-seconds and energy: the
daemon's side of ``policy.meter``).

Part of the head: a watcher may import the head's other modules, the store, the
policy and the health rules; nothing outside ``head/`` imports a watcher, the store
included.
"""
