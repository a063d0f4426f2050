"""Which of the head's hosts this machine is: a ``local: true`` host when the head
runs here, else by hostname, FQDN and addresses; none or several is one line that
names the choices."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputui.common import thishost
from gputui.common.thishost import HeadHost, Here, NoHost

names = st.text("abcdefgh-0123", min_size=1, max_size=12)
tables = st.lists(
    st.builds(HeadHost, names, st.one_of(names, st.just("10.0.0.7")), st.booleans()),
    max_size=20,
    unique_by=lambda h: h.name,
)


def _me(*, on_head: bool, name: str = "dgx-0413", addresses: tuple[str, ...] = ()) -> Here:
    return Here(name, frozenset({name, f"{name}.cluster.example"}), frozenset(addresses), on_head)


def _nothing(_: str) -> list[str]:
    return []


@given(tables, st.booleans(), names)
def test_the_answer_is_one_host_of_the_table_or_one_line_naming_the_choices(
    table: list[HeadHost], on_head: bool, hostname: str
) -> None:
    me = _me(on_head=on_head, name=hostname, addresses=("10.0.0.7",))
    try:
        got = thishost.pick(table, me, _nothing)
    except NoHost as exc:
        line = str(exc)
        assert "\n" not in line and "--host" in line and len(line) < 1000
        # The choices are named (sorted, the first SHOWN of them): some host of the
        # table, not necessarily one of its first few in table order.
        assert not table or any(h.name in line for h in table)
        return
    assert got in {h.name for h in table}
    chosen = next(h for h in table if h.name == got)
    local = [h for h in table if h.local]
    if on_head and len(local) == 1:
        assert chosen.local
    else:
        assert hostname in {chosen.name, chosen.address} or chosen.address == "10.0.0.7"


def test_a_local_host_is_this_machine_when_the_head_runs_here_whatever_its_name() -> None:
    table = [HeadHost("gpu-a", "gpu-a", local=True), HeadHost("gpu-b", "10.1.1.2")]
    assert thishost.pick(table, _me(on_head=True), _nothing) == "gpu-a"
    # Over SSH the head's own machine is not this one.
    with pytest.raises(NoHost, match=r"none of the head's hosts \(gpu-a, gpu-b\)"):
        thishost.pick(table, _me(on_head=False), _nothing)


def test_the_hostname_the_fqdn_or_an_address_names_it() -> None:
    table = [HeadHost("a", "dgx-0413.cluster.example"), HeadHost("b", "b")]
    assert thishost.pick(table, _me(on_head=False), _nothing) == "a"
    table = [HeadHost("a", "10.0.0.7"), HeadHost("b", "b")]
    assert thishost.pick(table, _me(on_head=False, addresses=("10.0.0.7",)), _nothing) == "a"
    table = [HeadHost("a", "node-a.example"), HeadHost("b", "b")]
    resolved = {"node-a.example": ["10.0.0.7"]}
    me = _me(on_head=False, addresses=("10.0.0.7",))
    assert thishost.pick(table, me, lambda n: resolved.get(n, [])) == "a"


def test_several_matches_name_them_all() -> None:
    table = [HeadHost("x", "dgx-0413"), HeadHost("y", "dgx-0413"), HeadHost("z", "z")]
    with pytest.raises(NoHost, match=r"matches several of the head's hosts: x, y; name one"):
        thishost.pick(table, _me(on_head=False), _nothing)


def test_this_machines_addresses_come_from_the_kernels_tables(tmp_path: Path) -> None:
    fib = tmp_path / "fib_trie"
    fib.write_text(
        "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 127.0.0.1\n        /32 host LOCAL\n"
        "     |-- 192.0.2.2\n        /32 host LOCAL\n     |-- 192.0.2.255\n"
        "        /32 link BROADCAST\n"
    )
    inet6 = tmp_path / "if_inet6"
    inet6.write_text(
        "fd000000000000000000000000000002 02 40 00 80 eth0\n"
        "fe8000000000000000fc00fffe000001 02 40 20 80 eth0\n"
        "00000000000000000000000000000001 01 80 10 80 lo\n"
    )
    me = thishost.here(on_head=False, fib_trie=fib, if_inet6=inet6)
    assert {"192.0.2.2", "fd00::2"} <= me.addresses
    assert not me.addresses & {"127.0.0.1", "::1", "192.0.2.255", "fe80::fc:ff:fe00:1"}
    assert "localhost" not in me.names
