# ruff: noqa: RUF001 (the Chinese lines asserted on use fullwidth punctuation)
"""``gputui health`` (its table, what each finding means, ``--keys``) and ``gputui
incident`` (its Xid and problem entries) show a finding in the reader's language:
no English but the host's name, a problem's key (``a:1:xid-79``, for ``--ack``)
and what the driver's own log said. ``--json`` keeps
the English (``test_health_incident_zh`` holds it the same in both languages)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "i18n"))
from columns import assert_in_line
from test_health_incident_zh import gputui
from untranslated import WORD, english_words

from gputui.common.text import cells


@pytest.fixture(scope="module")
def driver_words(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """What the kernel log said of the Xid (the driver's words, shown as they came)."""
    tmp = tmp_path_factory.mktemp("driver")
    _, out, _ = gputui(tmp, "en", "incident", "a", "--since", "2d", "--json")
    words: set[str] = set()
    for e in json.loads(out)["entries"]:
        if e["kind"] == "xid":
            words |= set(WORD.findall(e["text"].partition(" -- ")[2]))
    assert words
    return words


@pytest.mark.parametrize("columns", [80, 200])
@pytest.mark.parametrize(
    "args",
    [("health",), ("health", "--keys"), ("incident", "a", "--since", "2d"), ("incident", "a:1")],
    ids=" ".join,
)
def test_findings_read_in_chinese(
    tmp_path: Path, driver_words: set[str], args: tuple[str, ...], columns: int
) -> None:
    code, out, err = gputui(tmp_path, "zh", *args, columns=columns)
    assert code == (2 if args[0] == "health" else 0), err
    assert english_words(out + err, {"a", "ok", "kernel-log", "xid"} | driver_words) == []
    assert all(cells(line) <= columns for line in out.splitlines())
    assert columns == 80 or "GPU 已从总线上掉线" in out
    if args[0] == "health":
        table = out.split("\n\n")[0].splitlines()
        assert_in_line(table, columns)
        assert "重启主机" in table[1]
    if "--keys" in args:
        keys = out.split("\n\n")[-1].splitlines()
        assert keys[0].split() == ["键", "问题"]
        assert keys[1].startswith("a:1:xid-79  Xid 79（硬件）")
        assert_in_line(keys, columns)


def test_keys_stay_english_in_english(tmp_path: Path) -> None:
    _, out, _ = gputui(tmp_path, "en", "health", "--keys")
    keys = out.split("\n\n")[-1].splitlines()
    assert keys == ["KEY         PROBLEM", "a:1:xid-79  Xid 79 (hardware)"]
