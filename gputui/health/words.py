"""The health checks' words in the reader's language, from the English a finding keeps.

A ``Finding`` carries its title, meaning, action and figures in English: they are
what ``--json``, the head's answer and the audit say, in every language. A screen
shows them through ``shown``, which finds the text in the catalogue as it is (a
fixed sentence: ``"GPU lost"``) or, for one with figures in it, matches it against
the templates below (``"{n} uncorrected ECC errors"``), and writes the template's
translation with the same figures, each figure itself shown (``"fenced by the
head: {why}"`` where ``why`` is another check's sentence). The checks format these
same constants, so a template and the English it matches cannot drift apart.

A text no entry and no template matches (a helper's own message, the driver's
words) is shown as it came.
"""

from __future__ import annotations

import re
from functools import lru_cache

from gputui.common.i18n import N_, _, marked
from gputui.wire.words import Words

__all__ = ["TEMPLATES", "said", "shown"]

# -- problems.py ---------------------------------------------------------------------------
DRIVER_NVML = N_("driver {driver}, NVML {nvml}")
NVML_FAILED = N_("NVML did not start: {error}")
GPUS_MISSING = N_("{seen} of {count} GPUs ({what})")
GPUS_MISSING_DETAIL = N_("{seen} seen, {count} {what}")
ORPHAN_MEMORY = N_("{mib} MiB held with no process")
# -- checks.py -----------------------------------------------------------------------------
ECC_ERRORS = N_("{n} uncorrected ECC errors")
REMAPPED_ROWS = N_("{n} rows for uncorrectable errors")
RETIRED_PAGES = N_("{n} memory pages retired for double-bit errors")
SLOWDOWN_SUSTAINED = N_("HW slowdown in {n} of the last {window} minutes")
MINUTES = N_("{n} minutes")
NEAR_SLOWDOWN = N_("{temp} °C, near its slowdown temperature ({slowdown} °C)")
PCIE_DOWN_LOADED = N_("PCIe Gen{gen} x{width} under load (at most Gen{max_gen} x{max_width})")
PCIE_DOWN = N_("PCIe Gen{gen} x{width} (at most Gen{max_gen} x{max_width})")
PCIE_LINK = N_("Gen{gen} x{width}")
PCIE_REPLAYS = N_("{n} PCIe replays")
NVLINK_DOWN = N_("NVLink {links} down")
NVLINK_ERRORS = N_("NVLink {links} counting errors")
FABRIC_NOT_READY = N_("NVSwitch fabric not ready: {what}")
FABRIC_FAILED = N_("failed ({status})")
FABRIC_STATES = (N_("not-started"), N_("in-progress"))
"""The fabric states ``FABRIC_NOT_READY`` names as they are."""
# -- board.py ------------------------------------------------------------------------------
HOST_STATUS = N_("host {status}")
NO_FRESH_FOR = N_("no fresh readings for {age} s")
SXID_FATAL = N_("SXid {code} on NVSwitch {switch} (fatal)")
SXID = N_("SXid {code} on NVSwitch {switch}")
XID_KIND = N_("Xid {code} ({kind})")
STALE_TITLE = N_("{title} (last known: the host's readings are stale)")
# -- xid.py --------------------------------------------------------------------------------
SEEN_TIMES = N_("{action} (seen {n} times)")
# -- outside.py ----------------------------------------------------------------------------
FENCED = N_("fenced by the head: {why}")
UNFENCE = N_("fix the cause, or: gputui unfence {host}:{index} --reason ...")
DRAINED = N_("drained: {why}")
UNDRAIN = N_("when it is back: gputui undrain {host}:{index}")
FLAGGED = N_("{label}: pid {pid} ({user}, {name})")
PID = N_("pid {pid}")
JOB_IDLE = N_("job {job} ({user}) idle for {hours} h")
JOB = N_("job {job}")
CLAIM_IDLE = N_("claim {claim} ({user}) idle for {idle}")
CLAIM_IDLE_RELEASE = N_("claim {claim} ({user}) idle for {idle}, released in {left}")
CLAIM = N_("claim {claim}")
RELEASE_OR = N_("ask the owner to end the run, or: gputui release c{claim} --reason ...")
RELEASE_NOW = N_("nothing, or free the GPUs now: gputui release c{claim}")
# -- fencing.py (a fence's reason, shown inside FENCED) -----------------------------------
FENCE_XID = N_("Xid {code}: {meaning}")
FENCE_ECC = N_("{n} uncorrected ECC errors (more than {most})")
FENCE_NVLINK = N_("NVLink {links} down on an NVSwitch system")

NVML_ERRORS = (
    N_("Uninitialized"),
    N_("InvalidArgument"),
    N_("NoPermission"),
    N_("NotFound"),
    N_("DriverNotLoaded"),
    N_("Timeout"),
    N_("LibraryNotFound"),
    N_("FunctionNotFound"),
    N_("GpuIsLost"),
    N_("ResetRequired"),
    N_("InUse"),
    N_("LibRmVersionMismatch"),
    N_("NotReady"),
    N_("Unknown"),
)
"""NVML's error names, as the reason a check could not be made (``NotSupported`` is
``applicable``'s): the name is the code (``--json``), its words are what is shown."""

TEMPLATES: tuple[str, ...] = (
    DRIVER_NVML,
    NVML_FAILED,
    GPUS_MISSING,
    GPUS_MISSING_DETAIL,
    ORPHAN_MEMORY,
    ECC_ERRORS,
    REMAPPED_ROWS,
    RETIRED_PAGES,
    SLOWDOWN_SUSTAINED,
    MINUTES,
    NEAR_SLOWDOWN,
    PCIE_DOWN_LOADED,
    PCIE_DOWN,
    PCIE_LINK,
    PCIE_REPLAYS,
    NVLINK_DOWN,
    NVLINK_ERRORS,
    FABRIC_NOT_READY,
    FABRIC_FAILED,
    HOST_STATUS,
    NO_FRESH_FOR,
    SXID_FATAL,
    SXID,
    XID_KIND,
    STALE_TITLE,
    SEEN_TIMES,
    FENCED,
    UNFENCE,
    DRAINED,
    UNDRAIN,
    FLAGGED,
    PID,
    JOB_IDLE,
    JOB,
    CLAIM_IDLE,
    CLAIM_IDLE_RELEASE,
    CLAIM,
    RELEASE_OR,
    RELEASE_NOW,
    FENCE_XID,
    FENCE_ECC,
    FENCE_NVLINK,
)
"""Every sentence with figures a finding (or a fence's reason) is made of."""

_FIELD = re.compile(r"\{(\w+)\}")
_DEPTH = 3
"""How deep a figure's own sentence is shown (``fenced by the head: Xid 79: ...``)."""
_LIMIT = 2048
"""Longer texts are shown as they came (no template matches so much)."""


@lru_cache(maxsize=1)
def _patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Each template as a pattern matching the English it formats, the one with the
    most fixed text first (so ``... (fatal)`` is tried before its shorter form)."""
    out = []
    for template in TEMPLATES:
        parts = _FIELD.split(template)
        regex = "".join(
            re.escape(part) if i % 2 == 0 else f"(?P<{part}>.+?)" for i, part in enumerate(parts)
        )
        fixed = sum(len(part) for part in parts[::2])
        out.append((fixed, template, re.compile(regex + r"\Z", re.DOTALL)))
    out.sort(key=lambda item: -item[0])
    return tuple((template, pattern) for _fixed, template, pattern in out)


def shown(text: str, depth: int = 0) -> str:
    """``text`` (a finding's English) in the reader's language."""
    if not text or len(text) > _LIMIT:
        return text
    said = _(text)
    if said != text or depth >= _DEPTH:
        return said
    for template, pattern in _patterns():
        match = pattern.match(text)
        if match is None:
            continue
        fields = {name: shown(value, depth + 1) for name, value in match.groupdict().items()}
        translated = _(template)
        if translated == template:
            return text
        return translated.format(**fields)
    return text


def _figure(text: str, depth: int) -> Words | str:
    """``text`` as words where it is a marked sentence or matches a template (its
    figures each the same, ``_DEPTH`` deep), else as it is (a figure, a name)."""
    if not text or len(text) > _LIMIT:
        return text
    if marked(text) and "{" not in text and "}" not in text:
        return Words(text)
    if depth >= _DEPTH:
        return text
    for template, pattern in _patterns():
        match = pattern.match(text)
        if match is not None:
            args = {name: _figure(value, depth + 1) for name, value in match.groupdict().items()}
            return Words(template, dict(args))
    return text


@lru_cache(maxsize=1024)
def said(text: str) -> Words:
    """``text`` (a finding's English, as the head has it) as words a client shows in
    its own language: a sentence of the catalogue, or a template with its figures
    (each a sentence of its own as words too); a text neither is sent as its English
    line (a client shows the English line). Remembered: the head asks it of every
    problem of a host's every sample, and a fleet has few titles (``Words`` is
    immutable)."""
    found = _figure(text, 0)
    return found if isinstance(found, Words) else Words(text, {}, text)
