"""Why a hosts.yaml or the head's socket directory is not trusted, in Chinese: each
reason is a whole sentence looked up as one (the file's mode, a directory above it
writable or owned by another user, a searched file that is not the reader's or
root's; the socket directory's own cases), with no English but the paths and names.
Real files, real modes and a real second user."""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from realusers import User, made_users
from untranslated import WORD, english_words

from gputui.common import i18n, locations

pytestmark = pytest.mark.root

FILE_MODES = [0o644, 0o664, 0o666]
DIR_MODES = [0o755, 0o775, 0o777, 0o1777]


@pytest.fixture(scope="module")
def stranger() -> Iterator[User]:
    with made_users(1, "gtz") as (user,):
        yield user


@pytest.fixture
def top() -> Iterator[Path]:
    """A directory of root's that only root may write (so only what a case sets up
    below it can be a reason)."""
    path = Path(tempfile.mkdtemp(prefix="gputui-trust-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _said(language: str, ask: object) -> str | None:
    i18n.choose(language)
    try:
        return ask()  # type: ignore[operator]
    finally:
        i18n.choose(None)


def _no_english(line: str, *data: object) -> list[str]:
    allowed = {w for d in data for w in WORD.findall(str(d))} | {"root", "chmod", "socket"}
    return english_words(line, allowed)


@pytest.mark.parametrize(
    ("file_mode", "dir_mode", "theirs", "how"),
    list(
        itertools.product(FILE_MODES, DIR_MODES, ["", "dir", "file"], ["searched", "mine", "named"])
    ),
)
def test_why_a_hosts_yaml_is_not_trusted_is_a_whole_chinese_line(
    stranger: User, top: Path, file_mode: int, dir_mode: int, theirs: str, how: str
) -> None:
    """``theirs``: the stranger owns the directory or the file; ``how``: found by
    search by root, or by the stranger ("mine"), or named by root."""
    directory = top / "conf"
    directory.mkdir()
    directory.chmod(dir_mode)
    path = directory / "hosts.yaml"
    path.write_text("hosts: []\n")
    path.chmod(file_mode)
    if theirs:
        os.chown(directory if theirs == "dir" else path, stranger.uid, stranger.gid)
    uid = stranger.uid if how == "mine" else None  # "mine": the stranger searches
    searched = how != "named"

    def ask() -> str | None:
        return locations.untrusted(path, searched=searched, uid=uid)

    english, chinese = _said("en", ask), _said("zh_CN", ask)
    assert (english is None) == (chinese is None)
    if chinese is not None:
        assert "\n" not in chinese and chinese != english
        assert _no_english(chinese, path, stranger.name) == [], chinese
    if how == "named" and chinese is not None:

        def named() -> str:
            with pytest.raises(locations.LocationError) as caught:
                locations.find_hosts(path)
            return caught.value.line

        line = _said("zh_CN", named)
        assert str(path) in line and _no_english(line, path, stranger.name) == [], line


@pytest.mark.parametrize(
    ("dir_mode", "theirs", "above"),
    list(itertools.product(DIR_MODES, [False, True], ["755", "775", "777", "theirs"])),
)
def test_why_a_socket_directory_is_refused_is_a_whole_chinese_line(
    stranger: User, top: Path, dir_mode: int, theirs: bool, above: str
) -> None:
    parent = top / "above"
    parent.mkdir()
    if above == "theirs":
        os.chown(parent, stranger.uid, stranger.gid)
    else:
        parent.chmod(int(above, 8))
    run = parent / "run"
    run.mkdir()
    run.chmod(dir_mode)
    if theirs:
        os.chown(run, stranger.uid, stranger.gid)

    def ask() -> str | None:
        return locations.socket_dir_problem(run / "head.sock")

    english, chinese = _said("en", ask), _said("zh_CN", ask)
    assert (
        (english is None)
        == (chinese is None)
        == (not theirs and dir_mode == 0o755 and above == "755")
    )
    if chinese is not None:
        assert "\n" not in chinese and chinese != english
        assert _no_english(chinese, run, stranger.name) == [], chinese


@pytest.mark.parametrize("what", ["missing", "file"])
def test_a_socket_directory_that_is_not_one_is_said_in_chinese(top: Path, what: str) -> None:
    run = top / "run"
    if what == "file":
        run.write_text("")

    def ask() -> str | None:
        return locations.socket_dir_problem(run / "head.sock")

    chinese = _said("zh_CN", ask)
    assert chinese is not None and "\n" not in chinese
    assert _no_english(chinese, run, os.strerror(errno.ENOENT)) == [], chinese  # the OS's words
