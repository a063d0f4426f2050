"""Xid history from the kernel log: lines like ``NVRM: Xid (PCI:0000:19:00): 48, ...``,
and NVSwitch SXids: ``nvidia-nvswitch3: SXid (PCI:0000:c5:00.0): 24007, Fatal, ...``.

NVML's Xid events only cover what happens while the helper runs; what happened
before comes from /dev/kmsg (or ``dmesg``) where the helper may read it. Reading is
non-blocking and bounded, and skipped silently where the kernel says no.
"""

from __future__ import annotations

import errno
import os
import re
from typing import Any, NamedTuple, Sequence

MAX_RECORDS = 20000
MAX_EVENTS = 200
TEXT_MAX = 512

_XID_RE = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+)(?:, (.*))?$")
_SXID_RE = re.compile(r"SXid \(PCI:([0-9A-Fa-f:.]+)\): (\d+)(?:, (.*))?$")
_KMSG_RE = re.compile(r"^\d+,\d+,(\d+),[^;]*;")
_MONO_RE = re.compile(r"^\[\s*(\d+\.\d+)\]")
_CTIME_RE = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]")
_ISO_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:[,.](\d+))?([+-]\d\d:?\d\d|Z)?")


# Short descriptions of common Xids (NVIDIA Xid catalog), for events NVML reports.
XID_TEXT = {
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "Preemptive cleanup, due to previous errors",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU",
    63: "Row Remapper: New row marked for remapping, reset gpu to activate.",
    64: "Row Remapper: remapping failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus.",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "Timeout after 6s of waiting for RPC response from GPU GSP!",
}


class XidRecord(NamedTuple):
    pci_bus_id: str
    xid: int
    text: str
    time: float | None
    kind: str = "xid"
    """``xid`` (a GPU's) or ``sxid`` (an NVSwitch's)."""


def pci_key(bus_id: str) -> tuple[int, int, int] | None:
    """(domain, bus, device) so ``0000:19:00`` matches NVML's ``00000000:19:00.0``."""
    parts = bus_id.strip().split(":")
    try:
        if len(parts) == 3:
            domain, bus, dev = int(parts[0], 16), int(parts[1], 16), int(parts[2].split(".")[0], 16)
        elif len(parts) == 2:
            domain, bus, dev = 0, int(parts[0], 16), int(parts[1].split(".")[0], 16)
        else:
            return None
    except ValueError:
        return None
    return domain, bus, dev


def _line_time(line: str, boot: float | None) -> tuple[float | None, str]:
    """The time a log line carries (kmsg, ``[ 12.3]``, ``[ctime]`` or ISO) and the rest."""
    match = _KMSG_RE.match(line)
    if match:
        usec = int(match.group(1))
        return (boot + usec / 1e6 if boot is not None else None), line[match.end() :]
    match = _MONO_RE.match(line)
    if match:
        secs = float(match.group(1))
        return (boot + secs if boot is not None else None), line[match.end() :]
    match = _CTIME_RE.match(line)
    if match:
        import datetime  # only for syslog-style lines: not paid at every helper start

        try:
            when = datetime.datetime.strptime(match.group(1), "%a %b %d %H:%M:%S %Y")
            return when.timestamp(), line[match.end() :]
        except ValueError:
            return None, line
    match = _ISO_RE.match(line)
    if match:
        import datetime

        frac = (match.group(2) or "0")[:6].ljust(6, "0")
        tz = match.group(3) or ""
        tz = "+00:00" if tz == "Z" else (tz if ":" in tz or not tz else tz[:3] + ":" + tz[3:])
        try:
            when = datetime.datetime.fromisoformat(f"{match.group(1)}.{frac}{tz}")
            return when.timestamp(), line[match.end() :]
        except ValueError:
            return None, line
    return None, line


def parse_xid_line(line: str, boot: float | None = None) -> XidRecord | None:
    """One kernel-log line -> an ``XidRecord``, or None when it is not an Xid line."""
    if "NVRM: Xid" in line:
        pattern, kind = _XID_RE, "xid"
    elif "SXid (PCI:" in line:
        pattern, kind = _SXID_RE, "sxid"
    else:
        return None
    when, _ = _line_time(line, boot)
    match = pattern.search(line.rstrip("\r\n"))
    if not match:
        return None
    text = (match.group(3) or "").strip()[:TEXT_MAX]
    return XidRecord(match.group(1), int(match.group(2)), text, when, kind)


def parse_xid_lines(lines: Sequence[str], boot: float | None = None) -> list[XidRecord]:
    found = []
    for line in lines:
        record = parse_xid_line(line, boot)
        if record is not None:
            found.append(record)
    return found[-MAX_EVENTS:]


def read_kmsg(path: str = "/dev/kmsg", max_records: int = MAX_RECORDS) -> list[str] | None:
    """Records already in the kernel ring buffer, without blocking; None if not readable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    lines: list[str] = []
    try:
        while len(lines) < max_records:
            try:
                data = os.read(fd, 16384)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten while reading: go on
                    continue
                break
            if not data:
                break
            if b"NVRM" in data or b"SXid" in data:
                lines.append(data.decode("utf-8", errors="replace").split("\n", 1)[0])
    finally:
        os.close(fd)
    return lines


def read_dmesg(timeout: float = 3.0) -> list[str] | None:
    """``dmesg`` output where /dev/kmsg could not be opened; bounded in time and size."""
    import subprocess  # only on this fallback: not paid at every helper start

    try:
        proc = subprocess.run(
            ["dmesg"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    text = proc.stdout[-(8 << 20) :].decode("utf-8", errors="replace")
    return [line for line in text.splitlines() if "NVRM" in line or "SXid" in line]


def kernel_xid_history(boot: float | None) -> list[XidRecord]:
    lines = read_kmsg()
    if lines is None:
        lines = read_dmesg()
    return parse_xid_lines(lines or [], boot)


def xid_events(
    records: Sequence[XidRecord], gpus: Sequence[dict[str, Any]], now: float
) -> list[dict[str, Any]]:
    """Wire ``event`` objects for kernel-log Xids, matched to GPUs by PCI bus id."""
    by_pci = {}
    for gpu in gpus:
        key = pci_key(gpu.get("pci_bus_id") or "")
        if key is not None:
            by_pci[key] = gpu
    events = []
    for rec in records:
        match = by_pci.get(pci_key(rec.pci_bus_id) or (-1, -1, -1))
        switch = rec.kind == "sxid"  # an NVSwitch's: no GPU of this host has its bus id
        events.append(
            {
                "type": "event",
                "kind": rec.kind,
                "source": "kernel-log",
                "time": rec.time if rec.time is not None else now,
                "gpu_uuid": match["uuid"] if match and not switch else None,
                "gpu_index": match["index"] if match and not switch else None,
                "pci_bus_id": rec.pci_bus_id,
                "xid": None if switch else rec.xid,
                "sxid": rec.xid if switch else None,
                "text": rec.text,
            }
        )
    return events
