"""``ADDR:PORT``: where a server listens (``gputui head --metrics``, ``head.metrics``).

``ADDR`` is an IPv4 address, an IPv6 address in brackets (``[::1]:9400``) or a host
name; an empty one (``:9400``) means every IPv4 interface, as dcgm-exporter's
``:9400``. ``PORT`` is 1..65535. Anything else is refused with one line saying why.
"""

from __future__ import annotations

import ipaddress
import re

from gputui.common.i18n import _

ALL_INTERFACES = "0.0.0.0"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")
_MAX_TEXT = 300


def parse_listen(text: str) -> tuple[str, int]:
    """``(address, port)`` of ``ADDR:PORT``; ``ValueError`` with one line when it is not one."""
    if not isinstance(text, str) or not text or len(text) > _MAX_TEXT:
        raise ValueError(_("expected ADDR:PORT, e.g. 127.0.0.1:9400 or [::1]:9400 or :9400"))
    addr, sep, port_text = text.rpartition(":")
    if not sep:
        raise ValueError(
            _("{text} has no port: expected ADDR:PORT, e.g. 127.0.0.1:9400").format(text=repr(text))
        )
    if not port_text.isascii() or not port_text.isdigit() or len(port_text) > 5:
        raise ValueError(
            _("port {port} is not a number from 1 to 65535").format(port=repr(port_text))
        )
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise ValueError(_("port {port} is not from 1 to 65535").format(port=port))
    return _address(addr), port


def _address(addr: str) -> str:
    if addr == "":
        return ALL_INTERFACES
    if addr.startswith("[") and addr.endswith("]"):
        inner = addr[1:-1]
        try:
            return str(ipaddress.IPv6Address(inner))
        except ValueError:
            raise ValueError(
                _("{addr} is not an IPv6 address in brackets").format(addr=repr(addr))
            ) from None
    if ":" in addr:
        raise ValueError(
            _("{addr}: write an IPv6 address in brackets, e.g. [::1]:9400").format(addr=repr(addr))
        )
    try:
        return str(ipaddress.IPv4Address(addr))
    except ValueError:
        if re.fullmatch(r"[0-9.]+", addr):
            raise ValueError(_("{addr} is not an IPv4 address").format(addr=repr(addr))) from None
    if len(addr) > 253 or not addr.isascii() or _HOST_NAME.fullmatch(addr) is None:
        raise ValueError(_("{addr} is not an IP address or a host name").format(addr=repr(addr)))
    return addr


def listen_text(addr: str, port: int) -> str:
    """``ADDR:PORT`` again (brackets around an IPv6 address)."""
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"
