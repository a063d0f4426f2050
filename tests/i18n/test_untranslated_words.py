"""The finder of left-over English (``untranslated.english_words``) finds a word put
into any Chinese text, and nothing in text with only names and units it keeps."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from untranslated import ALWAYS, english_words

CJK = st.text(st.characters(min_codepoint=0x4E00, max_codepoint=0x9FA5), max_size=20)
KEPT = st.sampled_from(sorted(ALWAYS))
GAP = st.sampled_from([" ", "  ", "\uff1a", "\uff0c", "(", ")", "3", "%"])  # full-width : ,


@given(st.lists(st.one_of(CJK, KEPT), max_size=12), st.lists(GAP, min_size=12, max_size=12))
def test_chinese_with_kept_names_has_no_english(parts: list[str], gaps: list[str]) -> None:
    text = "".join(p + g for p, g in zip(parts, gaps, strict=False))
    assert english_words(text) == []


@given(CJK, CJK, st.sampled_from(["Waiting", "free", "running", "no-allocation", "Pool"]))
def test_an_english_word_is_found_by_name(before: str, after: str, word: str) -> None:
    assert english_words(f"{before} {word} {after}") == [word]
    assert english_words(f"{before} {word} {after}", allowed={word}) == []
