"""``explain``'s passed-over cards in Chinese: the head sends why each was passed over
as words beside its English line (``why_words``), on a real head."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from headthread import LineClient, ThreadedHead, poll
from test_placement_head import HOST, QUICK, _hosts, _submit, job

from gputui.cli import verbs
from gputui.common import i18n

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "i18n"))
from untranslated import english_words


def test_the_cards_passed_over_say_why_in_chinese(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        ThreadedHead(tmp_path, {HOST: 4}, scripted=_hosts(), health=QUICK) as th,
        LineClient(th.sock) as c,
    ):
        first = _submit(c)
        poll(lambda: job(c, first)["state"] == "running", what="the first job running")
        monkeypatch.setenv("LANG", "zh_CN.UTF-8")
        monkeypatch.delenv("LC_ALL", raising=False)
        monkeypatch.delenv("LC_MESSAGES", raising=False)
        i18n.reset()
        try:
            assert verbs.main(["--socket", str(th.sock), "explain", str(first)]) == 0
        finally:
            i18n.reset()
    said = [
        line for line in capsys.readouterr().out.splitlines() if "gpu0 " in line or "gpu1 " in line
    ]
    assert len(said) == 2, said
    assert "20.0 GiB 被占用但没有进程" in said[0]
    assert "bob 的进程 4242" in said[1] and "77%" in said[1]
    assert english_words("\n".join(said), {"gpu0", "gpu1", "node", "bob", "gpu"}) == [], said
