"""Make untrusted strings (from hosts, helpers, NVML, /proc) safe to display.

Anything that came over the wire may carry terminal escape sequences, control
characters, bidi overrides or megabytes of text. ``clean`` removes the first three
and caps the last, so nothing a host says can move the cursor, retitle the
terminal or flood the screen.
"""

from __future__ import annotations

import re

# CSI / OSC / DCS / single-character escapes, then C0 and C1 controls, DEL, and the
# Unicode bidi and invisible-format characters that can reorder what is displayed.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI ... final byte
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC ... BEL or ST
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC ... ST
    r"|\x1b[@-Z\\-_]"  # two-byte escapes
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
# Runs of combining marks ("Zalgo" text) that would smear over neighbouring cells:
# keep the first two of a run, enough for real accents.
_COMBINING_RUN = re.compile(
    "([\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]{2})"
    "[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+"
)
_WHITESPACE = re.compile(r"[\t\n\r]+")

DEFAULT_LIMIT = 256


def clean(value: object, limit: int = DEFAULT_LIMIT) -> str:
    """Return ``value`` as a single display-safe line of at most ``limit`` characters."""
    if value is None:
        return ""
    if type(value) is str and len(value) <= limit and value.isascii() and value.isprintable():
        return value  # the common case, on every sample: nothing to strip
    if isinstance(value, bytes):
        text = value.decode("utf-8", errors="replace")
    else:
        text = str(value)
    if len(text) > limit * 4:
        text = text[: limit * 4]
    text = _ESCAPES.sub("", text)
    text = _WHITESPACE.sub(" ", text)
    text = _CONTROLS.sub("", text)
    text = _COMBINING_RUN.sub(r"\1", text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text
