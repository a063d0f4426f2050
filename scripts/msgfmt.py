#!/usr/bin/env python3
"""Compile gettext catalogues (.po) to the .mo files gputui ships, with no GNU tools.

    python3 scripts/msgfmt.py            # every gputui/locale/*/LC_MESSAGES/*.po
    python3 scripts/msgfmt.py FILE.po    # one (writes FILE.mo beside it)

The output is deterministic (entries in msgid order, no hash table), so the .mo in
the repository can be checked against its .po (tests/unit/test_i18n_catalogue.py).
Entries marked ``#, fuzzy`` and untranslated ones are left out, as msgfmt does.
"""

from __future__ import annotations

import ast
import struct
import sys
from pathlib import Path

LOCALE = Path(__file__).resolve().parent.parent / "gputui" / "locale"


class PoError(ValueError):
    pass


def parse(text: str, source: str = "<po>") -> list[tuple[str, str | None, list[str], bool]]:
    """The entries of a .po file: (msgid, msgid_plural, msgstr forms, fuzzy); an entry
    with a ``msgctxt`` has ``context + "\\x04" + msgid`` as its msgid, the key the .mo
    holds it under and ``pgettext`` looks up."""
    entries: list[tuple[str, str | None, list[str], bool]] = []
    msgid: list[str] | None = None
    plural: list[str] | None = None
    forms: dict[int, list[str]] = {}
    fuzzy = next_fuzzy = False
    current: list[str] | None = None
    context: list[str] | None = None

    def flush() -> None:
        nonlocal msgid, plural, forms, fuzzy, context
        if msgid is not None:
            strs = [("".join(forms[i])) for i in sorted(forms)]
            key = "".join(msgid)
            if context is not None:
                key = "".join(context) + "\x04" + key
            entries.append((key, None if plural is None else "".join(plural), strs, fuzzy))
            context = None
        msgid, plural, forms, fuzzy = None, None, {}, False

    for number, raw in enumerate(text.split("\n"), 1):  # not splitlines: U+2028 is text
        line = raw.strip(" \t\r")
        where = f"{source}:{number}"
        if not line:
            continue
        if line.startswith("#"):
            if line.startswith("#,") and "fuzzy" in line:
                next_fuzzy = True
            continue
        keyword, _, rest = line.partition(" ")
        if line.startswith('"'):
            if current is None:
                raise PoError(f"{where}: a string with no keyword before it")
            current.append(_string(line, where))
            continue
        if keyword == "msgctxt":
            flush()
            context = current = [_string(rest, where)]
            continue
        if keyword == "msgid":
            flush()
            fuzzy, next_fuzzy = next_fuzzy, False
            msgid = current = [_string(rest, where)]
        elif keyword == "msgid_plural":
            plural = current = [_string(rest, where)]
        elif keyword == "msgstr":
            forms[0] = current = [_string(rest, where)]
        elif keyword.startswith("msgstr[") and keyword.endswith("]"):
            forms[int(keyword[7:-1])] = current = [_string(rest, where)]
        else:
            raise PoError(f"{where}: unknown keyword {keyword!r}")
        if msgid is None:
            raise PoError(f"{where}: {keyword} before msgid")
    flush()
    return entries


def _string(token: str, where: str) -> str:
    token = token.strip()
    if not (len(token) >= 2 and token[0] == '"' and token[-1] == '"'):
        raise PoError(f"{where}: not a quoted string: {token[:40]!r}")
    value = ast.literal_eval(token)
    if not isinstance(value, str):  # pragma: no cover (a quoted literal is a str)
        raise PoError(f"{where}: not a string")
    if "\0" in value:
        raise PoError(f"{where}: a NUL in a string (the .mo format separates with it)")
    return value


def compile_po(text: str, source: str = "<po>") -> bytes:
    """The .mo bytes of a .po file's text."""
    catalogue: dict[bytes, bytes] = {}
    for msgid, plural, forms, fuzzy in parse(text, source):
        if fuzzy and msgid:
            continue
        if not any(forms):
            continue
        key = msgid if plural is None else msgid + "\0" + plural
        catalogue[key.encode()] = "\0".join(forms).encode()
    keys = sorted(catalogue)
    ids = strs = b""
    offsets = []
    for key in keys:
        offsets.append((len(ids), len(key), len(strs), len(catalogue[key])))
        ids += key + b"\0"
        strs += catalogue[key] + b"\0"
    start = 7 * 4
    ids_at = start + len(keys) * 16
    strs_at = ids_at + len(ids)
    table = [(id_len, ids_at + id_off) for id_off, id_len, _, _ in offsets]
    table += [(str_len, strs_at + str_off) for _, _, str_off, str_len in offsets]
    out = struct.pack("<7I", 0x950412DE, 0, len(keys), start, start + len(keys) * 8, 0, 0)
    out += b"".join(struct.pack("<2I", length, at) for length, at in table)
    return out + ids + strs


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or sorted(LOCALE.glob("*/LC_MESSAGES/*.po"))
    for po in files:
        try:
            data = compile_po(po.read_text(encoding="utf-8"), str(po))
        except (OSError, PoError, ValueError, SyntaxError) as exc:
            print(f"msgfmt: {exc}", file=sys.stderr)
            return 1
        po.with_suffix(".mo").write_bytes(data)
        print(f"msgfmt: {po.with_suffix('.mo')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
