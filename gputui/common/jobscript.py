"""Submit scripts: the job options ``gputui submit`` takes, and the ``#GPUTUI`` and
``#SBATCH`` directives at the top of a script, read with the same parser.

One parser (``add_job_options``) serves the command line, ``#GPUTUI`` lines and the
``#SBATCH`` options that map (turned into the same flags first), so an option never
changes meaning between the three. Flags given on the command line override
directives; the script's text is read once, here, and sent with the job (a later
edit does not change a queued job, as with ``sbatch``).

Stdlib only (besides the durations' and argument types' parsers): the CLI and the
console's enqueue form both use it.
"""

from __future__ import annotations

import argparse
import functools
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from gputui.common.argtypes import gpu_count, job_ids
from gputui.common.arrays import ArrayError, parse_array
from gputui.common.durations import parse_duration
from gputui.common.jobenv import RUNTIMES
from gputui.common.mig_profile import mig_arg

MAX_SCRIPT_BYTES = 256 * 1024
"""The largest script sent with a job: the command line's, the head's and the wire's one
limit (the helper, shipped alone, keeps its copy: ``remote.launch.SCRIPT_MAX``)."""
MAX_DIRECTIVE_LINE = 4096
MAX_DIRECTIVES = 256
MAX_OUTPUT = 4096
"""The longest ``--output`` pattern."""
MAX_MESSAGE = 300
"""The longest refusal: a hostile value is cut, not echoed whole."""

OPTIONS = (
    "gpus", "pool", "host", "name", "cwd", "time", "preemptible", "priority", "project",
    "after", "after_ok", "array", "output", "mig",
    "env", "export", "conda", "venv", "image", "runtime",
)  # fmt: skip
"""The job options' destinations (what a directive may set)."""


class DirectiveError(ValueError):
    """A script or directive that cannot be used: one line naming file and line."""

    def __init__(self, message: str) -> None:
        super().__init__(_short(message))


def _short(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…"


def time_limit(text: str) -> float:
    """``--time``'s type: ``parse_duration``'s (a short text, a finite time of at most
    ten years)."""
    return parse_duration(text)


def array_spec(text: str) -> str:
    """``--array``'s type: checked here, sent as given (the head reads it again)."""
    try:
        parse_array(text)
    except ArrayError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--array: ")) from None
    return text.strip()


def output_pattern(text: str) -> str:
    if not text or len(text) > MAX_OUTPUT or not text.isprintable():
        raise argparse.ArgumentTypeError(f"not a file name pattern: {text[:60]!r}")
    return text


def add_job_options(p: argparse.ArgumentParser) -> None:
    """The options of a job, with no defaults (None: not given), for ``submit`` and
    for directives alike."""
    p.add_argument("-g", "--gpus", type=gpu_count, help="how many GPUs (default 1)")
    p.add_argument("--pool")
    p.add_argument("--host")
    p.add_argument(
        "--mig", type=mig_arg, metavar="PROFILE", help="MIG slices of this profile (1g.10gb)"
    )
    p.add_argument("--name")
    p.add_argument("--cwd", help="working directory on the host (default: this one)")
    p.add_argument("--time", type=time_limit, help="time limit (30m, 2h, 1-00:00)")
    p.add_argument("--preemptible", action="store_true", default=None)
    p.add_argument("--priority", help="priority class (urgent, normal, low, night by default)")
    p.add_argument("--project", help="tag the job for accounting")
    p.add_argument("--after", type=job_ids, metavar="JOB[,JOB...]", help="start after these ended")
    p.add_argument(
        "--after-ok",
        type=job_ids,
        metavar="JOB[,JOB...]",
        help="start after these completed; cancelled if one did not",
    )
    p.add_argument(
        "--env",
        action="append",
        metavar="KEY=VALUE",
        help="set a variable for the job (again for more)",
    )
    p.add_argument(
        "--export",
        metavar="NONE|ALL|KEY,...",
        help="what the job takes from this environment (default NONE)",
    )
    p.add_argument("--conda", metavar="ENV", help="activate this conda environment (name or path)")
    p.add_argument("--venv", metavar="PATH", help="activate this virtual environment")
    p.add_argument("--image", metavar="IMAGE", help="run the command in a container of this image")
    p.add_argument(
        "--runtime",
        choices=RUNTIMES,
        help="container runtime for --image (default: the head's jobs.runtime)",
    )
    p.add_argument(
        "--array",
        type=array_spec,
        metavar="SPEC",
        help="a job array: 0-31%%4 (at most 4 at once), 1,3,5, 0-99:10",
    )
    p.add_argument(
        "-o",
        "--output",
        type=output_pattern,
        metavar="PATTERN",
        help="output file on the host: %%j job id, %%A array id, %%a task id",
    )


class _Refusing(argparse.ArgumentParser):
    """A parser that raises instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise DirectiveError(message)


@functools.cache
def _directive_parser() -> argparse.ArgumentParser:
    """One parser for every directive line (parsing keeps no state in it)."""
    p = _Refusing(prog="directive", add_help=False, allow_abbrev=False)
    add_job_options(p)
    return p


def parse_options(tokens: Sequence[str]) -> dict[str, Any]:
    """Job options from flags (a directive's, or a command line's without its command):
    only those given."""
    space = _directive_parser().parse_args(list(tokens))
    return {k: v for k, v in vars(space).items() if v is not None}


# #SBATCH: the options that map onto gputui's (long name -> our flag), and those that
# take no value (so the next word is not taken for theirs).
_SBATCH_MAP = {
    "--gpus": "--gpus",
    "-G": "--gpus",
    "--gres": "--gpus",
    "--time": "--time",
    "-t": "--time",
    "--job-name": "--name",
    "-J": "--name",
    "--array": "--array",
    "-a": "--array",
    "--dependency": "--after",
    "-d": "--after",
    "--output": "--output",
    "-o": "--output",
}
_SBATCH_FLAGS = frozenset(
    {
        "--exclusive", "--requeue", "--no-requeue", "-H", "--hold", "-W", "--wait",
        "--parsable", "--test-only", "-Q", "--quiet", "-v", "--verbose", "-O",
        "--overcommit", "--contiguous", "--spread-job", "--use-min-nodes", "--ignore-pbs",
        "--no-kill", "-k", "-h", "--help", "--usage", "-V", "--version", "-s", "--oversubscribe",
    }
)  # fmt: skip


def _gpu_count(option: str, value: str) -> str:
    """``--gres=gpu:2``, ``gpu:a100:2``, ``--gpus=a100:2`` -> ``2``."""
    parts = value.split(":")
    if option == "--gres":
        if parts[0] != "gpu" or "," in value:
            raise DirectiveError(f"--gres={value[:40]}: only gpu:N (or gpu:TYPE:N) maps here")
        parts = parts[1:] or ["1"]
    count = parts[-1]
    if not count.isdigit():
        raise DirectiveError(f"{option}={value[:40]}: not a number of GPUs")
    return count


def _dependency(value: str) -> list[str]:
    """``afterok:1:2`` -> ``--after-ok 1,2``; ``afterany:3``/``after:3`` -> ``--after 3``."""
    kind, _, ids = value.partition(":")
    if kind in ("afterany", "after") and ids:
        return ["--after", ids]
    if kind == "afterok" and ids:
        return ["--after-ok", ids]
    raise DirectiveError(
        f"--dependency={value[:40]}: only afterok:JOB[:JOB...] and afterany:JOB map here"
    )


def sbatch_tokens(words: Sequence[str], warn: set[str]) -> list[str]:
    """An ``#SBATCH`` line's words as gputui flags; options with no meaning here go
    into ``warn`` (by name) and are left out."""
    out: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-"):
            raise DirectiveError(f"#SBATCH: {word[:40]!r} is not an option")
        option, eq, value = word.partition("=")
        if not eq and not option.startswith("--") and len(option) > 2:
            option, value, eq = option[:2], option[2:], "="  # -t30 -> -t 30
        mapped = _SBATCH_MAP.get(option)
        takes = option not in _SBATCH_FLAGS
        if not eq and takes and i < len(words) and not words[i].startswith("-"):
            value, eq = words[i], "="
            i += 1
        if mapped is None:
            warn.add(option)
            continue
        if not eq:
            raise DirectiveError(f"#SBATCH {option}: needs a value")
        if mapped == "--gpus":
            out += ["--gpus", _gpu_count(option, value)]
        elif mapped == "--after":
            out += _dependency(value)
        else:
            out += [mapped, value]
    return out


@dataclass(slots=True)
class Script:
    """A submit script as read at submit: its text, and the options its directives set."""

    text: str
    options: dict[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    """``#SBATCH`` options with no meaning here, each named once."""


def _hostile(line: str) -> bool:
    return any(not c.isprintable() and c != "\t" for c in line)


def read_text(data: bytes, where: str) -> str:
    """A script's bytes as text, or one line saying why it is not a script."""
    if len(data) > MAX_SCRIPT_BYTES:
        raise DirectiveError(f"{where}: over {MAX_SCRIPT_BYTES // 1024} KiB (too big to copy)")
    if b"\x00" in data:
        raise DirectiveError(f"{where}: not a text file (a NUL byte)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise DirectiveError(f"{where}: not UTF-8 text") from None
    if not text.startswith("#!"):
        raise DirectiveError(f"{where}: no #! line (say what runs it, e.g. #!/bin/bash)")
    return text


def parse_script(text: str, where: str) -> Script:
    """The ``#GPUTUI`` and ``#SBATCH`` lines at the top (up to the first line that is
    neither blank nor a comment), in order: a later one overrides an earlier one."""
    tokens: list[str] = []
    ignored: set[str] = set()
    order: list[str] = []
    lines = text.split("\n")
    count = 0
    for number, line in enumerate(lines[1:], start=2):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break
        head = stripped.split(None, 1)[0] if stripped else ""
        if head not in ("#GPUTUI", "#SBATCH"):
            continue
        at = f"{where}:{number}"
        count += 1
        if count > MAX_DIRECTIVES:
            raise DirectiveError(f"{at}: more than {MAX_DIRECTIVES} directives")
        if len(line) > MAX_DIRECTIVE_LINE:
            raise DirectiveError(f"{at}: a directive over {MAX_DIRECTIVE_LINE} characters")
        if _hostile(line):
            dos = line.endswith("\r") and not _hostile(line[:-1])
            why = "a DOS line break (\\r\\n): convert it with dos2unix" if dos else ""
            raise DirectiveError(f"{at}: {why or 'a control character in a directive'}")
        rest = stripped[len(head) :]
        try:
            words = shlex.split(rest, comments=True)
        except ValueError as exc:
            raise DirectiveError(f"{at}: {head}: {exc}") from None
        try:
            if head == "#SBATCH":
                before = set(ignored)
                words = sbatch_tokens(words, ignored)
                order += sorted(ignored - before)
            parse_options(words)  # each line on its own, so an error names its line
        except DirectiveError as exc:
            raise DirectiveError(f"{at}: {head}: {exc}") from None
        tokens += words
    options = parse_options(tokens)
    return Script(text=text, options=options, ignored=order)


def load_script(path: str) -> Script:
    """Read a script file (at most ``MAX_SCRIPT_BYTES``) and its directives."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_SCRIPT_BYTES + 1)
    except OSError as exc:
        raise DirectiveError(f"{path}: {exc.strerror or exc}") from None
    return parse_script(read_text(data, path), path)


def merged(directives: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """The job's options: the directives', then those given on the command line."""
    out = dict(directives)
    out.update({k: v for k, v in given.items() if k in OPTIONS and v is not None})
    if directives.get("env") and given.get("env"):  # both: the command line's last, so it wins
        out["env"] = [*directives["env"], *given["env"]]
    return out


def submit_kwargs(options: dict[str, Any]) -> dict[str, Any]:
    """Job options (``parse_options``' names) as ``SchedulerBackend.submit``'s
    keywords, for those given."""
    out: dict[str, Any] = {}
    for key in ("gpus", "pool", "host", "name", "priority", "project", "array", "output", "mig"):
        if options.get(key) is not None:
            out[key] = options[key]
    if options.get("cwd"):
        out["cwd"] = options["cwd"]
    if options.get("time") is not None:
        out["time_limit_s"] = options["time"]
    if options.get("preemptible"):
        out["preemptible"] = True
    if options.get("after_ok"):
        out["after"], out["after_ok"] = list(options["after_ok"]), True
    elif options.get("after"):
        out["after"] = list(options["after"])
    return out
