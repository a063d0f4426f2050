"""The shipped catalogue is complete and current: every string gputui marks for
translation (``_``, ``N_``, ``ngettext`` in its source) and every text the help and
the main footer show has a Simplified Chinese translation; the .mo in the package is
what ``scripts/msgfmt.py`` makes of the .po; the compiler reads back through the
stdlib's gettext whatever it is given."""

from __future__ import annotations

import gettext
import importlib.util
import io
import json
import string
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from i18n_messages import all_messages, marked_in, marked_in_source

from gputui.common import i18n

ROOT = Path(__file__).resolve().parents[2]
PO = ROOT / "gputui" / "locale" / "zh_CN" / "LC_MESSAGES" / "gputui.po"


def _msgfmt():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("msgfmt", ROOT / "scripts" / "msgfmt.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["msgfmt"] = module
    spec.loader.exec_module(module)
    return module


msgfmt = _msgfmt()


def translations() -> dict[str, str]:
    """The .po's translated, non-fuzzy entries (msgid -> msgstr; an entry with plural
    forms also as msgid_plural -> its last form)."""
    out = {}
    for msgid, plural, forms, fuzzy in msgfmt.parse(PO.read_text("utf-8"), str(PO)):
        if msgid and not fuzzy and forms and all(forms):
            out[msgid] = forms[0]
            if plural:
                out[plural] = forms[-1]
    return out


def test_every_marked_string_has_a_chinese_translation() -> None:
    have = translations()
    where = marked_in_source()
    missing = sorted(all_messages() - set(have))
    assert not missing, "no zh_CN translation for: " + "; ".join(
        f"{m!r} ({where.get(m, 'help or footer')})" for m in missing
    )


def test_the_catalogue_holds_nothing_that_is_no_longer_shown() -> None:
    stale = sorted(set(translations()) - all_messages())
    assert not stale, f"entries nothing marks any more: {stale}"


def _fields(text: str) -> list[str]:
    return sorted(name for _, name, _, _ in string.Formatter().parse(text) if name is not None)


def test_translations_keep_the_placeholders_and_are_one_line() -> None:
    for msgid, msgstr in translations().items():
        assert _fields(msgstr) == _fields(msgid), msgid
        assert "\n" not in msgstr and msgstr.strip() == msgstr, msgid


def test_the_shipped_mo_is_compiled_from_the_po() -> None:
    shipped = PO.with_suffix(".mo").read_bytes()
    assert shipped == msgfmt.compile_po(PO.read_text("utf-8"), str(PO)), (
        "gputui.mo is older than gputui.po: run `make locale`"
    )


def test_the_catalogue_is_loaded_from_the_package() -> None:
    i18n.choose("zh_CN")
    assert i18n._("MODEL") == "型号"
    assert i18n._("Idle {age}").format(age="2h") == "空闲 2h"
    assert i18n._("not a message gputui has") == "not a message gputui has"
    i18n.choose("en")
    assert i18n._("MODEL") == "MODEL"


def test_the_scan_finds_marker_calls_and_only_those() -> None:
    source = 'x = _("a")\ny = N_("b")\nz = ngettext("c", "cs", n)\nw = f("d")\nv = _(name)\n'
    assert marked_in(source) == {"a", "b", "c", "cs"}


_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=30)


@given(st.dictionaries(_TEXT.filter(bool), _TEXT.filter(bool), max_size=20))
def test_what_msgfmt_compiles_gettext_reads_back(entries: dict[str, str]) -> None:
    def quoted(text: str) -> str:
        return json.dumps(text, ensure_ascii=False)  # a JSON string is a .po string too

    lines = ['msgid ""', 'msgstr "Content-Type: text/plain; charset=UTF-8\\n"', ""]
    for msgid, msgstr in entries.items():
        lines += [f"msgid {quoted(msgid)}", f"msgstr {quoted(msgstr)}", ""]
    catalogue = gettext.GNUTranslations(io.BytesIO(msgfmt.compile_po("\n".join(lines))))
    for msgid, msgstr in entries.items():
        assert catalogue.gettext(msgid) == msgstr


@given(
    st.dictionaries(
        st.tuples(st.one_of(st.none(), _TEXT.filter(bool)), _TEXT.filter(bool)),
        _TEXT.filter(bool),
        max_size=20,
    )
)
def test_an_entry_with_a_context_is_read_back_by_pgettext(
    entries: dict[tuple[str | None, str], str],
) -> None:
    """The same msgid in two contexts ("NOTE" a column, "NOTE" a severity) is two
    entries, each found only in its own context."""

    def quoted(text: str) -> str:
        return json.dumps(text, ensure_ascii=False)

    lines = ['msgid ""', 'msgstr "Content-Type: text/plain; charset=UTF-8\\n"', ""]
    for (context, msgid), msgstr in entries.items():
        if context is not None:
            lines.append(f"msgctxt {quoted(context)}")
        lines += [f"msgid {quoted(msgid)}", f"msgstr {quoted(msgstr)}", ""]
    catalogue = gettext.GNUTranslations(io.BytesIO(msgfmt.compile_po("\n".join(lines))))
    for (context, msgid), msgstr in entries.items():
        if context is None:
            assert catalogue.gettext(msgid) == msgstr
        else:
            assert catalogue.pgettext(context, msgid) == msgstr
