"""One sweep for English left in the Chinese console and CLI: what no per-screen test
thought to look at.

The console: the demo's simulated cluster with its real head, under ``zh_CN`` at 80x24
and 200x50; every screen and modal a user reaches by a key is visited and its text
collected (the terminal, and each pane's full text where it scrolls). The CLI: every
verb the parser has (iterated from the parser itself), its ``--help`` and a run
against a real head with the demo's jobs and claim.

``english_words`` must find nothing but the demo's own data: host, user, pool, model,
job names and commands, all derived from the demo's modules and from what the head
and hosts report, never typed here. What two other pieces of work are closing now is
listed in ``PENDING`` by where it shows, and emptied when they land.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import grp
import json
import os
import pwd
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from gputui import themes as gputui_themes
from gputui.cli import args as cli_args
from gputui.cli import flagged
from gputui.demo import cluster as demo_cluster
from gputui.demo import head as demo_head
from gputui.demo import workloads as demo_workloads
from gputui.demo.cluster import DemoCluster
from gputui.fleet.fleet import Fleet
from gputui.remote.sim import spec as sim_spec
from gputui.scheduler.head import gpu_table
from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import GpuRow, HostRow
from gputui.ui.widgets.process_table import ProcessTable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ui"))
from ui_helpers import help_text, screen_text, select, until
from untranslated import WORD, english_words

DEADLINE_S = 90.0
THEMES = Path(gputui_themes.__file__).parent
"""The themes that ship (their names are shown as they are)."""

TYPED = frozenset(
    # What a person types as it is, that a line quotes as an example: the submit form's
    # keywords (NONE, ALL), its example values and the names of what goes there
    # (KEY1, conda ENV, venv PATH, image IMAGE), a script's directive prefixes, a
    # host:GPU argument, the filter's keyword and an example pool (:claim 2 --pool a100),
    # and the shell's eval in the line a claim says to paste.
    # Not data, and the same in every language.
    """
    free a100 SEED WANDB_MODE offline NONE ALL KEY KEY1 KEY2 ENV PATH IMAGE image GPUTUI
    SBATCH HOST eval
    """.split()  # noqa: SIM905 (words read better as words)
)
HELP_NAMES = frozenset(
    # What the --help texts name as it is: programs and services, formats, the values a
    # flag takes (job states, the start of a booking, notify channels, priority classes
    # of the default config), metavars inside a sentence, Slurm's flags a submit reads.
    """
    Unix SQLite postgresql psycopg http Prometheus dcgm exporter systemd cron apprise
    webhook CLK-LOW rogue fenced unhealthy requeued failed timeout now mon tomorrow urgent
    low night VERB INDEX ARGS CMD ARRAY_TASK YYYY-MM-DD gres job-name dependency xrtx hello
    instance dcgm-exporter pid
    """.split()  # noqa: SIM905 (words read better as words)
)
KEYS = frozenset({"esc", "OSC"})
"""Keys as Textual's footer draws them (the help says ``Esc``), and the terminal's
escape sequence a copy goes by (OSC 52)."""


def _w(text: str) -> set[str]:
    return set(text.split())


PENDING: dict[str, set[str]] = {}
"""English that work under way is closing: where it shows -> its words (empty: none)."""
FOUND: dict[str, set[str]] = {
    # What stays English on purpose. What the head recorded stays as it wrote it
    # (README): an audit row's outcome (a record, read back as it was written), and a
    # job's stored reason (why it was preempted) as show prints it.
    "audit": _w("before ran gets SIGK"),
    "show 1": _w("preempted starts its cards"),
}


def demo_words(*live: Iterable[str]) -> set[str]:
    """The demo's own data, as words: hosts, models (and the names the simulated
    cards report), the workloads' commands, the seeded jobs' output, the users that
    own them, and whatever ``live`` adds (what the head and hosts reported)."""
    blob: list[str] = [*demo_cluster.MODELS, *demo_cluster.MIG_MODELS.values()]
    blob += [m.name for m in sim_spec.MODELS.values()]
    blob += [" ".join(job) for job in demo_workloads.JOBS]
    blob += demo_workloads.workload_owners()
    # What the demo's train.py prints (its log): the literals of its print lines.
    for line in demo_head.JOB_SCRIPT.splitlines():
        if line.lstrip().startswith("print("):
            blob += re.findall(r'"([^"]*)"', line)
    blob += demo_head.job_argv("python3", "demo", 1)
    for piece in live:
        blob += list(piece)
    return {m.group() for m in WORD.finditer("\n".join(blob))}


def reported(values: object) -> Iterator[str]:
    """Every string a host reported (a hello's and a sample's values, and the names of
    the fields it could not read, as its ``errors`` map gives them)."""
    if isinstance(values, str):
        yield values
    elif isinstance(values, dict):
        if all(isinstance(v, str) for v in values.values()):
            yield from values  # an errors map: field -> NVML's error name
        for value in values.values():
            yield from reported(value)
    elif isinstance(values, list | tuple):
        for value in values:
            yield from reported(value)


def cluster_words(cluster: DemoCluster, view: Any, heard: Iterable[str]) -> set[str]:
    """What the running demo has that the modules do not say: the head's jobs, claims
    and pools, the hosts' reports, the demo's files (its directory, the jobs' logs),
    the Python running the jobs, where the console runs, the head's currency, and what
    the hosts reported while the screens were looked at (``heard``)."""
    live: list[str] = [*cluster.names, str(Path.cwd()), sys.executable, *heard]
    for job in view.jobs:
        live += [job.name, job.user, job.pool or "", *job.gpu_uuids]
    for claim in view.claims:
        live += [claim.user, claim.note, *claim.gpu_uuids]
    live += [f"{g.pool} {g.uuid}" for g in view.gpus]
    for user in {*live, *demo_workloads.workload_owners()}:
        with contextlib.suppress(KeyError):
            live.append(grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name)
    assert cluster.directory is not None
    live += [str(p) for p in cluster.directory.rglob("*")]
    live.append(cluster.config().scheduler.accounting.currency)
    return demo_words(live)


def console_commands() -> set[str]:
    """The ``:`` line's commands and the words they take (``sort util``), from the
    console's own tables, and the CLI's verbs and flags a line quotes."""
    from gputui.ui import commands
    from gputui.ui.model import SORT_KEYS

    words = {s for v in commands.VERBS for s in (v.name, *v.aliases)}
    words |= {k.name for k in SORT_KEYS}
    return words | cli_words()


def cli_words() -> set[str]:
    """Every verb of the CLI and every flag's words, from its parser."""
    from gputui.cli import args

    words: set[str] = set()
    for name, sub in verb_parsers(args.parser()).items():
        words.add(name)
        for action in sub._actions:
            for flag in action.option_strings:
                words |= {flag.lstrip("-"), *flag.lstrip("-").split("-")}
    return words


def verb_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's verbs, as its subparsers action has them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


IDENTIFIER = re.compile(r"[\w~-]*/[\w./~-]*|\b\w+(?:[._]\w+)+\b")
"""Paths (``~/.config/gputui/hosts.yaml``), config keys and names of the environment
(``head.socket``, ``GPUTUI_HOSTS``, ``zh_CN``): typed as they are, in any language."""

HEXISH = re.compile(r"(?<![\w])[0-9A-Fa-f][0-9A-Fa-f-]{2,}[0-9A-Fa-f]|[0-9A-Fa-f]{4,}")
"""A run of hex digits (a uuid, a hash, a container id, whole or cut at an edge): a
value, when it holds a digit, not a word (a cut ``…3ffe`` read ``ffe``)."""


def _no_hex(text: str) -> str:
    def value(m: re.Match[str]) -> str:
        run = m.group()
        return " " if any(c.isdigit() for c in run) and len(run.replace("-", "")) >= 4 else run

    return HEXISH.sub(value, text)


CUT = re.compile(rf"({WORD.pattern})(\u2026| *$)", re.MULTILINE)


def uncut(text: str, allowed: set[str]) -> str:
    """``text`` with a word cut short (at an ellipsis, or at the end of a line: the
    terminal's edge) left out where it is the start of an allowed one (``trai…`` of
    ``train.py`` at 80 columns), so only what is shown whole is judged (a cut word of
    the interface is still there to find)."""

    def drop(match: re.Match[str]) -> str:
        word = match.group(1)
        return match.group(2) if any(a.startswith(word) for a in allowed) else match.group()

    return CUT.sub(drop, text)


def findings(seen: dict[str, str], allowed: set[str]) -> dict[str, list[str]]:
    """Per place: the English words it showed that neither the data nor PENDING (nor
    FOUND) allow."""
    out = {}
    for place, text in seen.items():
        excused = PENDING.get(place, set()) | FOUND.get(place, set())
        words = english_words(_no_hex(IDENTIFIER.sub(" ", uncut(text, allowed))), allowed | excused)
        if words:
            out[place] = words
    return out


def _static(app: GpuTuiApp, selector: str) -> str:
    with contextlib.suppress(Exception):
        rendered = app.screen.query_one(selector, Static).render()
        return str(getattr(rendered, "plain", rendered))
    return ""


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_every_screen_of_the_demo_is_chinese(chinese: None, size: tuple[int, int]) -> None:
    seen: dict[str, str] = {}
    async with DemoCluster(hosts=2, gpus=6, head=True) as cluster:
        config = cluster.config()
        app = GpuTuiApp(Fleet(config), config)
        async with app.run_test(size=size) as pilot:
            heard: list[str] = []

            def look(place: str, *more: str) -> None:
                seen[place] = "\n".join([screen_text(app), *more])
                # What the hosts reported then (what is shown changes with each sample).
                for snap in app.source.snapshots().values():  # type: ignore[attr-defined]
                    for part in (snap.hello, snap.sample):
                        if part is not None:
                            heard.extend(reported(part.model_dump()))

            async def key(k: str, place: str, ready: Any = None) -> None:
                await pilot.press(k)
                if ready is not None:
                    await until(pilot, ready, place, DEADLINE_S)
                await pilot.pause(0.2)
                look(place)

            async def back() -> None:
                """Escape from whatever is on top (a modal, then its screen) to the GPUs."""
                for _ in range(4):
                    if app.screen is app.main:
                        return
                    top = app.screen
                    await pilot.press("escape")
                    await until(pilot, lambda top=top: app.screen is not top, "the screen closed")
                assert app.screen is app.main

            await until(
                pilot, lambda: app.head.link is not None and app.head.link.connected, "the head"
            )
            done = await cluster.seed_head()
            assert not [d for d in done if "stopped" in d or "refused" in d], done
            link = app.head.link
            assert link is not None

            def view() -> Any:
                assert link.view is not None
                return link.view

            await until(
                pilot,
                lambda: (
                    link.view is not None
                    and any(j.state == "running" for j in view().jobs)
                    and view().claims
                ),
                "the seeded jobs",
                DEADLINE_S,
            )
            # Main: a GPU with a process, its host line, the process selected.
            running = next(j for j in view().jobs if j.state == "running")
            gpu = next(g for g in view().gpus if g.uuid == running.gpu_uuids[0])
            await select(pilot, app, HostRow(gpu.host))
            await pilot.pause(0.3)
            look("main: a host", _static(app, "#detail-text"))
            await select(pilot, app, GpuRow(gpu.host, gpu.index))
            await pilot.pause(0.3)
            look("main: a GPU", _static(app, "#detail-text"))
            table = app.main.query_one(ProcessTable)
            await until(pilot, lambda: table.row_count > 0, "the GPU's processes", DEADLINE_S)
            table.focus()
            await pilot.pause(0.3)
            look("main: a process", _static(app, "#detail-text"))
            await key("T", "confirm: SIGTERM to a process", lambda: app.screen is not app.main)
            await back()
            app.main.grid.focus()
            # Your claim's GPU: release asks; a drain asks why (you are an admin).
            mine = next(c for c in view().claims if c.user == view().me.user)
            held = next(g for g in view().gpus if g.uuid == mine.gpu_uuids[0])
            await select(pilot, app, GpuRow(held.host, held.index))
            await key("u", "release your claim")
            await key("c", "claim it again")
            await key("D", "drain: asks why", lambda: app.screen is not app.main)
            await back()
            # A job's GPU: release and claim are refused, in the console's words.
            await select(pilot, app, GpuRow(gpu.host, gpu.index))
            await key("u", "refused: release a job's GPU")
            await key("c", "refused: claim a job's GPU")
            # The health (h), help (?), notices (N).
            await key("h", "health", lambda: app.screen is not app.main)
            seen["health"] += "\n" + _static(app, "#health-detail")
            await back()
            await key("question_mark", "help", lambda: app.screen is not app.main)
            seen["help"] += "\n" + help_text(app)
            await back()
            # The queue and a job's detail.
            await key("Q", "queue", lambda: app.screen is not app.main)
            await pilot.pause(0.5)
            seen["queue"] += "\n" + _static(app, "#job-detail")
            await key("x", "queue: cancel a running job asks")
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is not app.main and not app.screen.is_modal, "q")
            await key("K", "queue: kill a running job asks")
            await back()
            # Usage at each period.
            await key("U", "usage", lambda: app.screen is not app.main)
            for period in ("d", "w", "m"):
                await key(period, f"usage: {period}")
            await back()
            # The week, by GPU and by pool.
            await key("W", "week by GPU", lambda: app.screen is not app.main)
            await key("p", "week by pool")
            await back()
            # The audit.
            await key("A", "audit", lambda: app.screen is not app.main)
            await back()
            # The forms.
            await key("C", "claim form", lambda: app.screen is not app.main)
            await back()
            await key("n", "submit form", lambda: app.screen is not app.main)
            await back()
            # Confirm dialogs: a signal to a process.
            # The : line with an error.
            await key("colon", "command line", lambda: app.screen is not app.main)
            for ch in "frobnicate":
                await pilot.press(ch)
            await key("enter", "command line: an error")
            await back()
            # Force-free's modal.
            await key("F", "force-free")
            await back()
            await key("N", "notices", lambda: app.screen is not app.main)
            await key("h", "notices: the head's record")
            await pilot.pause(0.5)
            look("notices: the head's record")
            await back()
            allowed = cluster_words(cluster, view(), heard)
            allowed |= {"frobnicate"}  # the unknown command this test typed
    allowed |= console_commands() | TYPED | KEYS
    found = findings(seen, allowed)
    assert not found, "\n".join(f"{place}: {words}" for place, words in found.items())


# -- the CLI ---------------------------------------------------------------------------

RUN_S = 30.0
"""The longest one verb may take (``run`` and ``wait`` wait on a job: cut there, what
they said so far is judged)."""


def every_parser() -> dict[str, argparse.ArgumentParser]:
    """``gputui``'s parsers by the command line that shows each one's ``--help``: the
    console's and its commands, the head's, and every scheduler verb's."""
    from gputui.cli import args, console, head

    out: dict[str, argparse.ArgumentParser] = {"": console.parser(), "head": head.parser()}
    out |= verb_parsers(console.parser())
    return out | verb_parsers(args.parser())


def parser_words(parsers: Iterable[argparse.ArgumentParser]) -> set[str]:
    """What a usage line quotes as it is: flags, metavars, choices and the names
    argparse gives positionals (``job``, ``gpu``)."""
    words: set[str] = set()
    for parser in parsers:
        words |= {parser.prog.split()[-1]}
        for action in parser._actions:
            for flag in action.option_strings:
                words |= {flag.lstrip("-"), *flag.lstrip("-").split("-")}
            metavar = action.metavar
            names = metavar if isinstance(metavar, tuple) else (metavar or action.dest.upper(),)
            words |= {*names, action.dest}
            words |= {str(c) for c in action.choices or ()}
    return {m.group() for m in WORD.finditer(" ".join(words))}


def typical(jobs: dict[str, int], host: str, gpu: str) -> dict[str, list[str]]:
    """Each verb's typical run on the demo: read-only verbs as they are, the others
    on the seeded jobs (yours and other users'), a host and a GPU of the demo.
    Refusals are runs too: each says why in Chinese."""
    job = {name: str(number) for name, number in jobs.items()}
    return {
        "claim": ["-g", "1", "--no-wait"],
        "release": [],
        "book": ["-g", "1", "--for", "1h"],
        "unbook": ["99"],
        "submit": ["-g", "1", "--", "true"],
        "run": ["-g", "1", "--", "true"],
        "attach": [job["eval-big"]],
        "show": [job["resnet50"]],
        "logs": [job["resnet50"]],
        "explain": [job["sweep-all"]],
        "wait": [job["quick-test"]],
        "hold": [job["sweep-all"]],
        "release-hold": [job["sweep-all"]],
        "preempt": [job["vit-b16"]],
        "requeue": [job["llama-lora"]],
        "kill": [job["quick-test"]],
        "cancel": [job["eval-big"]],
        "notify": ["show"],
        "drain": [host, "--reason", "maintenance"],
        "undrain": [host],
        "unfence": [host, "--reason", "maintenance"],
        "force-free": [gpu, "--reason", "maintenance"],
    }


async def gputui(*argv: str, lang: str = "zh_CN.UTF-8") -> str:
    """``gputui ARGV`` as a user runs it (a process of its own, in
    ``lang`` at 80 columns): what it wrote, stdout then stderr."""
    env = {**os.environ, "LANG": lang, "COLUMNS": "80"}
    for name in ("LC_ALL", "LC_MESSAGES"):
        env.pop(name, None)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gputui.entry", *argv,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(process.communicate(), RUN_S)
    except TimeoutError:
        process.kill()
        out, err = await process.communicate()
    return (out + err).decode("utf-8", "replace")


async def test_every_verb_of_the_cli_is_chinese() -> None:
    parsers = every_parser()
    assert {"queue", "submit", "claim", "cancel", "head", "demo"} <= set(parsers)
    seen: dict[str, str] = {}
    async with DemoCluster(hosts=2, gpus=6, head=True) as cluster:
        assert cluster.head is not None
        sock = str(cluster.head.socket)
        done = await cluster.seed_head()
        assert not [d for d in done if "stopped" in d or "refused" in d], done

        queue = json.loads(
            await gputui("--socket", sock, "queue", "--all", "--json", lang="en_US.UTF-8")
        )
        rows = queue["jobs"] if isinstance(queue, dict) else queue
        jobs = {row["name"]: int(row["id"]) for row in rows}
        free = next(g for g in cluster.names)
        for command in parsers:
            seen[f"{command} --help".strip()] = await gputui(*command.split(), "--help")
        calls = typical(jobs, free, f"{cluster.names[-1]}:0")
        for verb in verb_parsers(cli_args.parser()):
            argv = [verb, *calls.get(verb, [])]
            seen[" ".join(argv)] = await gputui("--socket", sock, *argv)
        machine = [
            await gputui("--socket", sock, verb, *more, "--json", lang="en_US.UTF-8")
            for verb, more in (("queue", ["--all"]), ("claims", []), ("gpus", []))
        ]
        live = [*cluster.names, str(cluster.directory), sys.executable, *machine]
        live.append(cluster.config().scheduler.accounting.currency)
        for text in machine:
            with contextlib.suppress(ValueError):
                live += reported(json.loads(text))
        allowed = demo_words(live) | parser_words(parsers.values()) | cli_words()
        allowed |= TYPED | KEYS | HELP_NAMES | {"maintenance", "true"}  # what this test typed
        allowed |= set(flagged.KINDS) | {p.stem for p in THEMES.glob("*.yaml")}  # as they are
        allowed |= set(gpu_table.STATES)  # `gpus` names its states as --json gives them
    found = findings(seen, allowed)
    assert not found, "\n".join(f"{place}: {words}" for place, words in found.items())
