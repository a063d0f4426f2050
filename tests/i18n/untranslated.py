"""Finds English a Chinese screen or CLI output still shows: the test half of "every
string a user reads is translated".

``english_words(text, allowed)`` lists the words of three or more Latin letters in
``text`` that are neither in ``ALWAYS`` (names and units a Chinese console keeps as
they are: GPU, NVML, kWh, Xid...) nor in ``allowed`` (what the test's own data
put there: host names, user names, commands, job names). A test renders a screen or
runs a verb under ``zh_CN`` and asserts the list is empty, so a string that was not
marked, or marked and not translated, fails it by name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

WORD = re.compile(r"[A-Za-z][A-Za-z_\-.]*[A-Za-z]|[A-Za-z]")

NAMES = frozenset(
    """
    GPU GPUs CPU MIG NVML AMD NVIDIA ROCm amdsmi SSH Xid XID ECC PCIe UUID MIG- PID
    kWh MiB GiB TiB KiB MHz RPM SM TDP HBM DCGM CUDA CUDA_VISIBLE_DEVICES HIP
    Slurm slurm SLURM gputui tmux sshd UTC JSON CSV YAML hosts.yaml head.host
    A100 H100 V100 A40 L40S MI250X MI300X SXM4 PCIE SXM5 SXM NVLink
    TERM KILL SIGTERM SIGKILL SIGINT SIGSTOP SIGCONT
    Docker docker Podman podman Apptainer apptainer conda venv
    sbatch srun salloc squeue sinfo sprio sshare scontrol sacct scancel
    """.split()  # noqa: SIM905 (a list of 80 words reads better as words)
)
"""Names and units a Chinese console shows as they are."""

KEYS = frozenset(
    """
    Ctrl Esc Enter Tab Space PgUp PgDn Home End esc
    """.split()  # noqa: SIM905
)
"""Key names as the console shows them: the help's (``Esc``, ``PgUp``) and the
footers' (Textual's own, lower-case: ``esc``); exactly the names some binding
shows, ``test_key_names`` holds it to them."""

ALWAYS = NAMES | KEYS
"""Names, units and keys a Chinese console shows as they are."""


def english_words(text: str, allowed: Iterable[str] = ()) -> list[str]:
    """The words of ``text`` that are English a translation should have replaced,
    in the order they first appear (each once)."""
    keep = ALWAYS | set(allowed)
    seen: dict[str, None] = {}
    for match in WORD.finditer(text):
        word = match.group()
        if len(word) < 3 or word in keep or word.strip("-_.") in keep:
            continue
        seen.setdefault(word, None)
    return list(seen)
