"""The verbs' kept hosts.yaml documents (``gputui.config.doccache``): a document comes
back only for the very bytes it was read from, only from this user's own file, and
only where JSON gives back exactly what the reader made; a verb that finds it loads
no YAML."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from privileged import need_root

from gputui.config import doccache

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=12)
)
_DOCS = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.integers(0, 9), inner, max_size=4)
    ),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to itself (what the reader would make again)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=_DOCS, raw=st.binary(max_size=64), other=st.binary(max_size=64))
@example(doc={"a": [float("nan")]}, raw=b"a: [.nan]", other=b"")
@example(doc={"a": float("-inf")}, raw=b"a: -.inf", other=b"")
@example(doc={"a": 2**65}, raw=b"a: 36893488147419103232", other=b"")
@example(doc={1: "x"}, raw=b"1: x", other=b"")
def test_a_document_comes_back_only_for_its_own_bytes_and_only_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, doc: Any, raw: bytes, other: bytes
) -> None:
    here = tmp_path / uuid.uuid4().hex  # each example its own cache (one tmp_path for all)
    monkeypatch.setenv("XDG_CACHE_HOME", str(here / "cache"))
    path = str(here / "hosts.yaml")
    doccache.store(path, raw, doc)
    kept = doccache.lookup(path, raw)
    assert kept is doccache.MISSING or _same(kept, doc)
    if other != raw:
        assert doccache.lookup(path, other) is doccache.MISSING
    assert doccache.lookup(path + "x", raw) is doccache.MISSING
    # What JSON holds exactly is kept: the common case is never a miss.
    plain = {"slurm": {"refresh_s": 2, "login": "local"}, "hosts": ["a", "b"]}
    doccache.store(path, raw, plain)
    assert doccache.lookup(path, raw) == plain


def test_a_file_another_user_owns_or_others_may_write_is_not_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_root("to give a cache file to another user")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path, raw = str(tmp_path / "hosts.yaml"), b"head: {}\n"
    doccache.store(path, raw, {"head": {}})
    (kept,) = (tmp_path / "cache" / "gputui").iterdir()
    assert doccache.lookup(path, raw) == {"head": {}}
    kept.chmod(0o620)
    assert doccache.lookup(path, raw) is doccache.MISSING
    kept.chmod(0o600)
    os.chown(kept, 65534, 65534)  # nobody's
    assert doccache.lookup(path, raw) is doccache.MISSING
    os.chown(kept, os.geteuid(), os.getegid())
    target = tmp_path / "elsewhere.json"
    kept.rename(target)
    kept.symlink_to(target)  # a link is not followed
    assert doccache.lookup(path, raw) is doccache.MISSING


def test_nothing_is_written_into_another_users_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_root("to give a cache folder to another user")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "gputui"
    folder.mkdir(parents=True)
    os.chown(folder, 65534, 65534)
    doccache.store(str(tmp_path / "hosts.yaml"), b"x: 1\n", {"x": 1})
    assert list(folder.iterdir()) == []


_PROBE = """
import sys
from gputui.scheduler.client.place import config_section
found = config_section(sys.argv[1], "slurm")
print(found[0] if found else None, "yaml" in sys.modules)
"""


def test_a_verb_that_finds_the_same_bytes_loads_no_yaml_and_an_edit_is_read(
    tmp_path: Path,
) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("slurm:\n  refresh_s: 2\n", encoding="utf-8")

    def probe() -> str:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(hosts)], capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    assert probe() == "{'refresh_s': 2} True"  # read, and kept
    assert probe() == "{'refresh_s': 2} False"  # taken as kept: no YAML loaded
    stat = hosts.stat()
    hosts.write_text("slurm:\n  refresh_s: 3\n", encoding="utf-8")  # same size
    os.utime(hosts, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same time
    assert probe() == "{'refresh_s': 3} True"
    assert probe() == "{'refresh_s': 3} False"
