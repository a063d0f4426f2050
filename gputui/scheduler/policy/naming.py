"""A job's default name, from its command: the script it runs, not the interpreter.

``python3 train.py`` is ``train.py``, ``python -m pkg.mod`` is ``pkg.mod``, ``bash
run.sh`` is ``run.sh``; wrappers in front (``env A=1``, ``nice -n 5``, ``nohup``,
``time``, ``uv run``, ...) are looked through. A command that is no interpreter is
named after its program (``./bin/sweep --lr 3`` is ``sweep``). Pure and total: any
argv gives a name of 1 to ``MAX_NAME`` characters with no ``/``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["MAX_NAME", "job_name"]

MAX_NAME = 128
"""The longest name the head keeps (``submit --name`` is held to it as well)."""

_INTERPRETER = re.compile(
    r"(python|pypy)[0-9.]*|(ba|da|z|k)?sh|perl|ruby|node|Rscript|julia|torchrun|deepspeed"
)
"""Programs whose job is the script they are given."""
_RUNS = {"uv": "run", "poetry": "run", "pipenv": "run", "conda": "run", "accelerate": "launch"}
"""``PROGRAM SUBCOMMAND`` wrappers: what follows the subcommand is the command."""
_PLAIN_WRAPPERS = frozenset({"env", "nice", "nohup", "time", "exec", "stdbuf", "ionice", "command"})
"""Programs that run the rest of the line (their own options, then the command)."""
_VALUE_OPTIONS: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p", "--class", "--classdata"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "python": frozenset({"-W", "-X", "-Q"}),
    "sh": frozenset({"-o", "-O", "+o", "+O"}),
    "torchrun": frozenset(
        [
            "--nproc-per-node",
            "--nproc_per_node",
            "--nnodes",
            "--node-rank",
            "--node_rank",
            "--master-addr",
            "--master_addr",
            "--master-port",
            "--master_port",
            "--rdzv-backend",
            "--rdzv_backend",
            "--rdzv-endpoint",
            "--rdzv_endpoint",
            "--rdzv-id",
            "--rdzv_id",
        ]
    ),
    "run": frozenset(
        [
            "--with",
            "--python",
            "-p",
            "--project",
            "--directory",
            "--env-file",
            "-n",
            "--name",
            "--prefix",
            "--config_file",
            "--num_processes",
            "--gpu_ids",
            "--main_process_port",
        ]
    ),
}
"""Options that take the next word as their value, by the program family reading them."""
_CODE_OPTIONS: dict[str, tuple[str, ...]] = {
    "perl": ("-e", "-E"),
    "ruby": ("-e",),
    "node": ("-e", "--eval", "-p", "--print"),
    "julia": ("-e", "--eval"),
    "Rscript": ("-e",),
}
"""Options whose value is the code to run (no script to name it after); ``-c`` else."""
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)


def _base(word: str) -> str:
    return word.rstrip("/").rsplit("/", 1)[-1]


def _family(program: str) -> str:
    if re.fullmatch(r"(python|pypy)[0-9.]*", program):
        return "python"
    if re.fullmatch(r"(ba|da|z|k)?sh", program):
        return "sh"
    return program


def _after_options(argv: Sequence[str], at: int, family: str) -> int:
    """The index of the first word at or after ``at`` that is neither an option nor
    an option's value (``--`` ends the options)."""
    takes = _VALUE_OPTIONS.get(family, frozenset())
    while at < len(argv):
        word = argv[at]
        if word == "--":
            return at + 1
        if family == "env" and _ASSIGNMENT.fullmatch(word):
            at += 1
            continue
        if not word.startswith(("-", "+")) or word in ("-", "+"):
            return at
        at += 2 if word in takes else 1
    return at


def _unwrapped(argv: Sequence[str]) -> int:
    """Where the command is once leading ``VAR=value`` words and wrappers are skipped."""
    at = 0
    for _ in range(16):  # wrappers in wrappers, to a bound
        while at < len(argv) and _ASSIGNMENT.fullmatch(argv[at]):
            at += 1
        if at >= len(argv):
            return at
        program = _base(argv[at])
        if program in _PLAIN_WRAPPERS:
            at = _after_options(argv, at + 1, program)
        elif program in _RUNS and at + 1 < len(argv) and argv[at + 1] == _RUNS[program]:
            at = _after_options(argv, at + 2, "run")
        else:
            return at
    return at


def _script(argv: Sequence[str], at: int) -> str | None:
    """What the interpreter at ``argv[at]`` runs: its script, or its ``-m`` module;
    None for ``-c`` code, standard input or nothing."""
    family = _family(_base(argv[at]))
    i = at + 1
    while i < len(argv):
        word = argv[i]
        if family == "python" and word.startswith("-m") and not word.startswith("--"):
            module = word[2:] or (argv[i + 1] if i + 1 < len(argv) else "")
            return module or None
        if (
            word == "-"
            or word in _CODE_OPTIONS.get(family, ("-c",))
            or (family == "python" and word.startswith("-c") and not word.startswith("--"))
        ):
            return None
        if word == "--":
            i += 1
            break
        if not word.startswith(("-", "+")):
            break
        i += 2 if word in _VALUE_OPTIONS.get(family, frozenset()) else 1
    return argv[i] if i < len(argv) else None


def job_name(argv: Sequence[str]) -> str:
    """The name a job gets without ``--name``: its script (or ``-m`` module), else its
    program, with wrappers looked through; 1 to ``MAX_NAME`` characters, no ``/``."""
    at = _unwrapped(argv)
    if at >= len(argv):
        at = 0  # only wrappers (``env A=1``): the first of them
    name = _base(argv[at]) if argv else ""
    if _INTERPRETER.fullmatch(name):
        script = _script(argv, at)
        if script is not None and _base(script):
            name = _base(script)
    name = "".join(c for c in name if c.isprintable())[:MAX_NAME]
    return name or "job"
