"""``gputui gpus`` in Chinese: the head sends why a card is unavailable as words beside
its English line (``why_words``), and the table shows them with no English left but
the data (hosts, users, the drain's reason)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from headthread import LineClient, ThreadedHead, poll
from test_gpus_cli import QUICK, _cli, _hosts

from gputui.common import i18n

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "i18n"))
from untranslated import english_words

DATA = {"node", "bob", "root", "fan", "noise", "rack", "a100"}


def test_the_reasons_of_gputui_gpus_in_chinese(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    with (
        ThreadedHead(tmp_path, {"node1": 4, "node2": 2}, scripted=_hosts(), health=QUICK) as th,
        LineClient(th.sock) as c,
    ):
        c.ok("drain", {"target": "node2:1", "reason": "fan noise"})
        c.ok("drain", {"target": "node2", "reason": "rack"})
        ident = c.ok("submit", {"argv": ["train"], "gpus": 1})["job"]["id"]
        poll(lambda: c.ok("show", {"job_id": ident})["job"]["state"] == "running", what="job")
        code, out, err = _cli(th, capsys, "--json")
        assert code == 0, err
        english = {f"{r['host']}:{r['index']}": r["why"] for r in json.loads(out)["gpus"]}
        assert english["node1:0"] == "20.0 GiB held by no process (used last)"
        assert english["node2:1"] == "drained by root: fan noise"
        assert english["node2:0"] == "its host is drained"

        monkeypatch.setenv("LANG", "zh_CN.UTF-8")
        monkeypatch.delenv("LC_ALL", raising=False)
        monkeypatch.delenv("LC_MESSAGES", raising=False)
        i18n.reset()
        try:
            code, out, err = _cli(th, capsys)
            code_json, out_json, _ = _cli(th, capsys, "--json")
        finally:
            i18n.reset()
    assert code == 0, err
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "已被 root 排空\uff1afan noise" in lines["node2:1"]
    assert "其主机已排空" in lines["node2:0"]
    # node1:2's why is a health finding's title: the head sends it as words too.
    assert "最近 1 分钟里有 1 分钟硬件降频" in lines["node1:2"]
    text = "\n".join(lines.values())
    assert english_words(text, DATA) == [], text
    assert code_json == 0
    rows = json.loads(out_json)["gpus"]
    assert {f"{r['host']}:{r['index']}": r["why"] for r in rows} == english  # --json: English
