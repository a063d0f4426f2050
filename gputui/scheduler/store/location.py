"""Where the head's database lives: a safe place for it, and one head at a time on it.

``prepare_location`` makes the directory (0700) and the file (0600) and refuses what
another user could change or a network filesystem (SQLite's locking is unsafe there);
``hold_exclusively`` takes the database's lock file for the head's lifetime.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
from pathlib import Path

from gputui.scheduler.store.api import StoreError

MOUNTINFO = Path("/proc/self/mountinfo")
NETWORK_FSTYPES = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "9p", "ceph", "glusterfs",
        "lustre", "afs", "gpfs", "beegfs", "fuse.ceph-fuse", "fuse.glusterfs",
    }
)  # fmt: skip


def prepare_location(path: Path, *, mountinfo: Path = MOUNTINFO) -> None:
    """Make ``path``'s directory (0700) and file (0600) safe to hold the head's state.

    Refuses a directory others can write or that is not ours, a file that is a symlink,
    not regular or not ours, and a network filesystem (SQLite's locking is unsafe there).
    """
    path = Path(path)
    directory = path.parent
    uid = os.geteuid()
    check_local_disk(directory, mountinfo=mountinfo)
    try:
        if not directory.exists():
            directory.parent.mkdir(parents=True, exist_ok=True)
            directory.mkdir(mode=0o700)
            os.chmod(directory, 0o700)
        info = directory.stat()
    except OSError as e:
        raise StoreError(f"cannot create the database directory {directory}: {_os_why(e)}") from e
    if not stat.S_ISDIR(info.st_mode):
        raise StoreError(f"{directory} is not a directory; choose another --database")
    if info.st_uid != uid:
        raise StoreError(
            f"database directory {directory} belongs to uid {info.st_uid}, not to this user "
            f"(uid {uid}); chown it or choose another --database"
        )
    if info.st_mode & 0o022:
        raise StoreError(
            f"database directory {directory} is writable by group or others "
            f"(mode {stat.S_IMODE(info.st_mode):04o}); run chmod 700 {directory}"
        )
    _secure_file(path, uid, create=True)
    for suffix in ("-wal", "-shm"):
        _secure_file(Path(f"{path}{suffix}"), uid, create=False)


def _secure_file(path: Path, uid: int, *, create: bool) -> None:
    """Open without following links or blocking, then check and chmod what was opened."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        if not create:
            return
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        except OSError as e:
            raise StoreError(f"cannot create database {path}: {_os_why(e)}") from e
    except OSError as e:
        if path.is_symlink():
            raise StoreError(
                f"database {path} is a symbolic link; name the real file with --database"
            ) from e
        raise StoreError(f"cannot open database {path}: {_os_why(e)}") from e
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"database {path} is not a regular file; choose another --database")
        if info.st_uid != uid:
            raise StoreError(
                f"database {path} belongs to uid {info.st_uid}, not to this user (uid {uid}); "
                "chown it or choose another --database"
            )
        if stat.S_IMODE(info.st_mode) != 0o600:
            os.fchmod(fd, 0o600)
    except OSError as e:
        raise StoreError(f"cannot set mode 0600 on database {path}: {_os_why(e)}") from e
    finally:
        os.close(fd)


def check_local_disk(directory: Path, *, mountinfo: Path = MOUNTINFO) -> None:
    """Refuse a directory on a network filesystem; say nothing when the mount table is
    unreadable (not Linux): that cannot be told, so it is not guessed."""
    try:
        text = os.fsdecode(mountinfo.read_bytes())
    except OSError:
        return
    real = os.path.realpath(directory)
    found = mount_of(real, text)
    if found is not None and found[1] in NETWORK_FSTYPES:
        point, fstype = found
        raise StoreError(
            f"database directory {directory} is on a network filesystem ({fstype} at {point}); "
            "SQLite's locking is unsafe there, so use a local disk for --database"
        )


_OCTAL = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def mount_of(real_path: str, mountinfo_text: str) -> tuple[str, str] | None:
    """``(mount point, fstype)`` of the mount holding ``real_path``: the longest mount
    point that is a prefix of it (the later line wins a tie: it is mounted on top).
    Lines that do not parse are skipped; see proc(5) for the format."""
    best: tuple[str, str] | None = None
    for line in mountinfo_text.splitlines():
        fields = line.split(" ")
        try:
            sep = fields.index("-", 6)
        except ValueError:
            continue
        if sep + 1 >= len(fields):
            continue
        point, fstype = _unescape(fields[4]), _unescape(fields[sep + 1])
        if not point.startswith("/") or not _under(real_path, point):
            continue
        if best is None or len(point) >= len(best[0]):
            best = (point, fstype)
    return best


def _under(path: str, point: str) -> bool:
    if point == "/":
        return path.startswith("/")
    point = point.rstrip("/")
    return path == point or path.startswith(point + "/")


def _os_why(e: OSError) -> str:
    return e.strerror or type(e).__name__


def hold_exclusively(database: Path) -> int:
    """Take ``DATABASE.lock`` for this process's lifetime (the kernel lets go when it
    ends, however it ends); ``StoreError`` when another head holds it. Two heads on
    one database would each schedule onto the same GPUs."""
    lock = Path(f"{database}.lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise StoreError(f"cannot open {lock}: {_os_why(e)}") from e
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreError(
            f"database {database} is in use by another gputui head; stop it first"
        ) from None
    except OSError as e:
        os.close(fd)
        raise StoreError(f"cannot lock {lock}: {_os_why(e)}") from e
    return fd
