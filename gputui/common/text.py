"""Make untrusted strings (from hosts, helpers, NVML, /proc, config) safe to display.

Anything that came from outside may carry terminal escape sequences, control
characters, bidi overrides, characters that terminals draw at different widths, or
megabytes of text. ``clean`` is the one sanitiser: every string is passed through
it where it enters the program (the wire decoder, the config loader, error
messages), so nothing a host or a file says can move the cursor, retitle the
terminal, write the clipboard, or push a column out of line.

What it does, in order:

1. caps the input (before any regex work, so a huge string costs no more than a
   short one);
2. removes escape sequences: CSI, OSC, DCS, SOS, PM and APC in their 7-bit and
   8-bit forms. A string-type sequence (OSC, DCS ...) with no terminator loses only
   its introducer: its text stays visible instead of swallowing the rest of the line
   as a terminal would;
3. turns tabs and newlines into spaces and removes every other control and format
   character (C0, DEL, C1, bidi overrides, zero-width characters, soft hyphens);
4. removes what terminals disagree on the width of: Hangul fillers and conjoining
   jamo, variation selectors, emoji skin-tone modifiers, regional indicators,
   enclosing marks, unassigned and private-use code points, lone surrogates;
5. keeps at most two combining marks on a character and none with nothing to sit on;
6. cuts to ``limit`` display cells (wide CJK and emoji count two) with an ellipsis.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from rich.cells import cell_len, get_character_cell_size

DEFAULT_LIMIT = 256
ELLIPSIS = "…"

# String terminators: BEL, ESC \ and the 8-bit ST.
_ST = r"(?:\x07|\x1b\\|\x9c)"
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"  # CSI ... final byte
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*" + _ST  # OSC/DCS/SOS/PM/APC
)
# What is left of a sequence with no terminator or final byte: the introducer (and
# an OSC's number), then any two-character escape.
_INTRODUCERS = re.compile(r"\x1b\]\d*;?|\x1b[PX^_\[]|\x1b[ -~]?")
_WHITESPACE = re.compile(r"[\t\n\r\v\f]+")

# Categories dropped whole: controls, format (bidi, zero-width, soft hyphen, tags),
# surrogates, private use, unassigned, line and paragraph separators, enclosing marks.
_DROP_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Me"})
# Code points terminals draw at different widths (or join with their neighbours).
_DROP_RANGES = (
    (0x115F, 0x115F),  # Hangul choseong filler
    (0x1160, 0x11FF),  # Hangul jungseong filler and conjoining jamo
    (0x3164, 0x3164),  # Hangul filler
    (0xD7B0, 0xD7FF),  # Hangul jamo extended-B
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors (text vs emoji presentation)
    (0xE0100, 0xE01EF),  # variation selectors supplement
    (0x1F1E6, 0x1F1FF),  # regional indicators (flags)
    (0x1F3FB, 0x1F3FF),  # emoji skin-tone modifiers
)
_MAX_MARKS = 2  # combining marks kept on one character: enough for real accents


def _dropped(char: str) -> bool:
    code = ord(char)
    for low, high in _DROP_RANGES:
        if low <= code <= high:
            return True
    return unicodedata.category(char) in _DROP_CATEGORIES


def _filter(text: str) -> str:
    """Steps 3-5 for text that is not plain printable ASCII."""
    out: list[str] = []
    marks = 0
    for char in text:
        if char < "\x7f":
            if char >= " ":
                out.append(char)
                marks = 0
            continue
        if _dropped(char):
            continue
        if unicodedata.combining(char):
            if not out or marks >= _MAX_MARKS:
                continue
            marks += 1
        else:
            marks = 0
        out.append(char)
    return "".join(out)


def cells(text: str) -> int:
    """How many terminal cells ``text`` takes (wide characters count two)."""
    return len(text) if text.isascii() else cell_len(text)


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, ending in "…" when something was cut."""
    if width <= 0:
        return ""
    if cells(text) <= width:
        return text
    room = width - 1
    used = 0
    end = len(text)
    for index, char in enumerate(text):
        used += get_character_cell_size(char)
        if used > room:
            end = index
            break
    while end and cells(text[:end]) > room:  # a grapheme Rich measures as a whole
        end -= 1
    return text[:end] + ELLIPSIS


def fit(text: str, width: int, *, right: bool = False) -> str:
    """``text`` cut or padded with spaces to exactly ``width`` cells (left-aligned;
    ``right``: right-aligned). Wide (CJK) characters count two cells, combining
    marks none, so columns of Chinese text stay in line."""
    if text.isascii() and len(text) <= width:  # the common case: no cell counting
        return text.rjust(width) if right else text.ljust(width)
    text = cut(text, width)
    gap = " " * max(0, width - cells(text))
    return gap + text if right else text + gap


def clean(value: object, limit: int = DEFAULT_LIMIT) -> str:
    """``value`` as one display-safe line of at most ``limit`` cells."""
    if value is None:
        return ""
    if type(value) is str:
        if len(value) <= limit and value.isascii() and value.isprintable():
            return value  # the common case, on every sample: nothing to strip
        if len(value) <= _CACHED_LEN:
            return _clean_text_cached(value, limit)
        return _clean_text(value, limit)
    if isinstance(value, bytes | bytearray):
        return _clean_text(bytes(value[: limit * 8]).decode("utf-8", errors="replace"), limit)
    return _clean_text(str(value), limit)


def error_line(exc: BaseException, limit: int = 200) -> str:
    """What a failure says (a driver's, the system's), as one display-safe line of at
    most ``limit`` cells; its type's name when it says nothing."""
    return clean(str(exc), limit).strip() or cut(type(exc).__name__, limit)


def clean_str(value: object, limit: int = DEFAULT_LIMIT) -> str:
    """A string field of an untrusted answer: cleaned, cut to ``limit`` cells and
    stripped; "" for anything that is not a string."""
    return clean(value, limit).strip() if isinstance(value, str) else ""


def _clean_text(text: str, limit: int) -> str:
    if len(text) > limit * 4:
        text = text[: limit * 4]
    if "\x1b" in text or not text.isascii():
        text = _ESCAPES.sub("", text)
        text = _INTRODUCERS.sub("", text)
    text = _WHITESPACE.sub(" ", text)
    if not (text.isascii() and text.isprintable()):
        text = _filter(text)
    return cut(text, limit)


# A process name in CJK, or with an escape in it, comes again in every sample: its
# clean copy is kept (4,096 strings of at most 512 characters, and their copies:
# 16 MB at the very worst)
# rather than made anew each second.
_CACHED_LEN = 512
_clean_text_cached = lru_cache(maxsize=4096)(_clean_text)
