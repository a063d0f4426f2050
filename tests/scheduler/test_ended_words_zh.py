"""What the head writes that a reader sees in Chinese: the ended notice's ``{how}``
(a time limit, on a real cluster) and a head that takes channels of no scheme; the
English line as it was, words beside it."""

from __future__ import annotations

import sys
from pathlib import Path

from headthread import LineClient, ThreadedHead
from test_e2e_jobs import Cluster, cluster, script  # noqa: F401 (cluster: the fixture)
from test_notify_chat import FAST, PRIVATE

from gputui.config.models import NotifyConfig
from gputui.wire.words import shown

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "i18n"))
from untranslated import english_words


def test_a_head_that_takes_no_scheme_says_so_in_chinese(tmp_path: Path, chinese: None) -> None:
    config = NotifyConfig(user_schemes=[], **PRIVATE, **FAST)
    with ThreadedHead(tmp_path, {"gpu01": 1}, notify=config) as th, LineClient(th.sock) as c:
        error = c.ask("notify_set", {"url": "mailto://u:p@example.com"})["error"]
    assert error["message"] == (
        "this head takes channels of no scheme only (notify: user_schemes), not mailto://"
    )
    line = shown(error["message"], error.get("msg"), error.get("args"))
    assert english_words(line, {"notify", "user_schemes", "mailto"}) == [], line


async def test_the_ended_notice_says_how_in_chinese(
    cluster: Cluster,  # noqa: F811 (the fixture)
    chinese: None,
) -> None:
    client = await cluster.start(grace=0.5)
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
    submitted = await client.call(
        "submit",
        {"argv": script(code), "gpus": 1, "cwd": "/", "time_limit_s": 1.0, "name": "probe"},
    )
    ended = await client.call("wait", {"job_id": submitted["job"]["id"]}, timeout=30)
    assert ended["job"]["reason"] == "time limit reached"
    notices = (await client.call("notices", {"all": True}))["notices"]
    said = [n for n in notices if n["kind"] == "ended"]
    assert said and said[-1]["text"].endswith("timeout (time limit reached)")
    line = shown(said[-1]["text"], said[-1].get("msg"), said[-1].get("args"))
    assert english_words(line, {"probe"}) == [], line
