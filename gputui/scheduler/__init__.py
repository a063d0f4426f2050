"""The scheduler: claims and a job queue on the GPU hosts, kept by one durable head.

``policy/`` decides (pure functions from a view of the cluster to decisions);
``store/`` keeps (the head's database: tables, queries, migrations, backups);
``head/`` is the daemon that runs both against the hosts (batches, actions, the job
life cycle; its watchers in ``head/watch/``); ``server/`` is the head's Unix socket
(peer identity, the head's wire); ``client/`` reaches the head (the
``SchedulerBackend`` seam, the blocking and the asyncio clients).

Imports go down, never up: ``head``, then ``server`` | ``store``, then ``policy`` |
``client`` (siblings never import each other). Nothing of the scheduler imports
textual or the console; import-linter checks both. Nothing is imported here.
"""
