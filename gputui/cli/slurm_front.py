"""Reaching Slurm from a verb, and a bare ``gputui queue``'s early start.

Its own module, free of the verbs' parsers: ``gputui.entry`` starts a bare ``gputui
queue``'s ``squeue`` through it before ``argparse`` and the verbs' command line are
even loaded, so the listing runs while they load.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gputui.scheduler.client.errors import HeadError

if TYPE_CHECKING:
    from gputui.scheduler.client.slurm.backend import SlurmBackend


def hosts_named(argv: Sequence[str]) -> str | None:
    """The ``--hosts FILE`` (or ``--hosts=FILE``) given before the verb, if any."""
    items = iter(argv)
    for item in items:
        if item == "--hosts":
            return next(items, None)
        if item.startswith("--hosts="):
            return item.partition("=")[2]
        if item == "--socket":
            next(items, None)
        elif not item.startswith("-"):
            return None  # the verb: what follows is its own
    return None


def early_queue(argv: Sequence[str]) -> SlurmBackend | None:
    """For a bare ``gputui queue`` (``--hosts FILE`` at most before it, nothing after
    it) on Slurm: the backend with its ``squeue`` already started, before the command
    line is parsed, so the listing runs while the parsers and the verb's code load. Its
    options can only be the defaults. None for anything else, and where hosts.yaml or
    Slurm says no: the usual path then says it, in its words.

    Where Slurm's commands run here (no ``slurm.login``, or ``local``), ``squeue``
    starts even before the Slurm section's model and the backend load: its command
    line holds nothing from hosts.yaml. The section is checked right after; a section
    that is refused stops that ``squeue``."""
    args = list(argv)
    if args[-1:] != ["queue"]:
        return None
    before = args[:-1]
    bare = not before or (
        (len(before) == 2 and before[0] == "--hosts")
        or (len(before) == 1 and before[0].startswith("--hosts="))
    )
    if not bare:
        return None
    hosts_file = hosts_named(args)
    proc = None
    try:
        from gputui.scheduler.client.place import config_section

        found = config_section(hosts_file, "slurm")
        if found is None:
            return None
        if found[0].get("login", "local") == "local":
            from gputui.scheduler.client.slurm.fields import Markers, squeue_argv, table_fields
            from gputui.scheduler.client.slurm.runner import Runner

            asked, markers = table_fields(), Markers()
            proc = Runner().start(*squeue_argv(markers, asked))
        slurm = slurm_backend(hosts_file)
        if slurm is not None and proc is not None and slurm.local:
            slurm.adopt_listing(markers, asked, proc)
            proc = None
        elif slurm is not None:
            slurm.prefetch_queue(all=False, user=None, table=True)
    except HeadError:
        return None
    finally:
        if proc is not None:  # the section refused: its listing is not read
            proc.kill()
            proc.communicate()
    return slurm


def slurm_backend(hosts_file: str | None) -> SlurmBackend | None:
    """The Slurm backend where hosts.yaml has a ``slurm:`` section (checked by its
    model: one line naming what is wrong), else None."""
    from gputui.scheduler.client.place import config_section

    found = config_section(hosts_file, "slurm")
    if found is None:
        return None
    section, path = found
    from gputui.config.slurm import SlurmConfig
    from gputui.scheduler.client.slurm.backend import SlurmBackend
    from gputui.scheduler.client.slurm.runner import Runner

    try:
        conf = SlurmConfig.parse(section)
    except ValueError as exc:
        raise HeadError("config", f"{path}: slurm.{exc}") from None
    runner = Runner(conf.login, timeout_s=conf.command_timeout_s, ssh_config=conf.ssh_config)
    head = None
    if config_section(hosts_file, "head") is not None:  # force-free's last steps go there

        def head() -> Any:
            from gputui.scheduler.client.session import head_session

            return head_session(None, hosts_file)

    return SlurmBackend(
        runner, partitions=conf.partitions, qos=conf.qos, nodes=conf.nodes, head=head
    )
