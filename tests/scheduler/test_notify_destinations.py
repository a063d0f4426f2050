"""Where the head may send for a user: it connects as itself, often from a network its
users cannot reach, so a user's channel never makes it reach a cloud metadata service
(link-local, 100.100.100.200, fd00:ec2::254), and, unless ``user_private: true``, no
loopback or private address either. Checked when the channel is set (an address in
the URL) and, for any name, at each connect a send makes (after DNS, and wherever a
plugin takes its host from). A team channel (the admin's) is not bound."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest
from chatserver import ChatServer
from headthread import LineClient, ThreadedHead, poll, refusal
from hypothesis import given
from hypothesis import strategies as st

from gputui.config.notify import NotifyConfig, TeamChannel, address_problem

FAST = {"backoff_s": 0.05, "backoff_max_s": 0.2, "timeout_s": 2.0}
TOKEN = "dtTOKEN0123456789"


def _forms(ip: ipaddress.IPv4Address) -> list[str]:
    """An IPv4 address as a socket may be given it: plain, IPv4-mapped, NAT64."""
    return [str(ip), f"::ffff:{ip}", str(ipaddress.IPv6Address(int(ip) | (0x64FF9B << 96)))]


@given(st.ip_addresses(v=4, network="169.254.0.0/16"), st.booleans())
def test_link_local_is_never_reached_in_any_form(ip: ipaddress.IPv4Address, private: bool) -> None:
    for form in _forms(ip):
        assert address_problem(form, private) is not None, form


@given(st.ip_addresses(v=4, network="127.0.0.0/8") | st.ip_addresses(v=4, network="10.0.0.0/8"))
def test_loopback_and_private_only_when_the_head_allows(ip: ipaddress.IPv4Address) -> None:
    for form in _forms(ip):
        assert address_problem(form, True) is None, form
        assert "user_private" in (address_problem(form, False) or ""), form


@pytest.mark.parametrize("host", ["100.100.100.200", "fd00:ec2::254", "0.0.0.0", "224.0.0.1"])
def test_metadata_and_odd_addresses_are_refused(host: str) -> None:
    assert address_problem(host, True) is not None


def test_public_addresses_pass() -> None:
    assert address_problem("93.184.216.34", False) is None
    assert address_problem("2606:4700::1111", False) is None


def test_a_user_cannot_point_the_head_at_metadata_nor_by_default_at_loopback(
    tmp_path: Path,
) -> None:
    with ChatServer() as chat:
        port = chat.base.rsplit(":", 1)[1]
        team = TeamChannel(name="lab", url=f"{chat.base}/robot/send?access_token={TOKEN}")
        config = NotifyConfig(channels=[team], **FAST)  # user_private: false, the default
        with ThreadedHead(tmp_path, {"gpu01": 1}, notify=config) as th, LineClient(th.sock) as c:
            for url in (
                f"https://169.254.169.254/robot/send?access_token={TOKEN}",
                f"json://169.254.169.254:{port}/",
                f"json://127.0.0.1:{port}/",
                f"json://localhost:{port}/",
                f"form://[::1]:{port}/",
            ):
                code, line = refusal(c.ask("notify_set", {"url": url}))
                assert code == "refused" and line.startswith("notify_set: url: "), (url, line)
            # A name that only resolves to loopback (2130706433 is 127.0.0.1) passes the
            # set, and is refused where the send connects: nothing reaches the server.
            c.ok("notify_set", {"url": f"json://2130706433:{port}/hook", "name": "sly"})
            results = c.ok("notify_test")["results"]
            assert [(r["name"], r["ok"]) for r in results] == [("sly", False)]
            job = int(c.ok("submit", {"argv": ["train"], "gpus": 1})["job"]["id"])
            # The team's channel (the admin's, on loopback) still gets the start.
            chat.wait(lambda h: any(f"job {job} " in json.dumps(x.body) for x in h), what="team")
            poll(
                lambda: (
                    th.rows(
                        "SELECT s.state FROM notify_sent s JOIN notify_channel c"
                        " ON c.id = s.channel_id WHERE c.name = 'sly'"
                    )
                    == [("failed",)]
                ),
                what="the user's delivery given up",
            )
        assert [h.path for h in chat.heard if h.path == "/hook"] == []
        assert all(h.path == "/robot/send" for h in chat.heard)


def test_with_user_private_a_user_may_use_a_relay_on_this_machine(tmp_path: Path) -> None:
    with ChatServer() as chat:
        port = chat.base.rsplit(":", 1)[1]
        with (
            ThreadedHead(
                tmp_path, {"gpu01": 1}, notify=NotifyConfig(user_private=True, **FAST)
            ) as th,
            LineClient(th.sock) as c,
        ):
            c.ok("notify_set", {"url": f"json://2130706433:{port}/hook"})
            assert [r["ok"] for r in c.ok("notify_test")["results"]] == [True]
        assert [h.path for h in chat.heard] == ["/hook"]


def test_a_users_url_is_read_once_when_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """apprise parses a channel's URL once per ``notify_set``: what is shown and where
    it points come from that one reading (a refused loopback address as a kept one)."""
    import apprise

    readings: list[str] = []
    instantiate = apprise.Apprise.instantiate

    def counted(url: str, *args: object, **kwargs: object) -> object:
        readings.append(url)
        return instantiate(url, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(apprise.Apprise, "instantiate", staticmethod(counted))
    with ThreadedHead(tmp_path, {"gpu01": 1}) as th, LineClient(th.sock) as c:
        refused = "json://127.0.0.1:9/hook"
        code, line = refusal(c.ask("notify_set", {"url": refused}))
        assert code == "refused" and "user_private" in line, line
        assert readings == [refused]
        kept = "json://hooks.example.com/hook"
        c.ok("notify_set", {"url": kept, "name": "ok"})
        assert readings == [refused, kept]
