"""Which notes may have changed since the last full look, from the kernel's own record (Linux).

A freshness check that stats every note costs what the vault costs: 0.5 s at 89,000 notes, paid by
every CLI search a server answers. A server has a cheaper way to know: inotify. The kernel queues
an event for a folder's entry inside the system call that changes it, so an edit whose ``write``
has returned is in the queue before the next request is read; draining the queue (a non-blocking
read) names exactly the notes to look at. A thread of our own would add a delay in which a
moment-old edit is missed; a read of the queue at request time has none.

The watch is trusted only when it covers everything a full look covers:

* it is set on each folder by the full look's own walk, before that folder is listed (a change
  before the watch is seen by the stat, one after it by the queue);
* only on local file systems (a network or FUSE mount does not report changes made elsewhere);
* anything it cannot name note by note (a queue overflow, a folder created, moved or removed, a
  ``.gitignore`` changed, a watch that could not be set, a note that is a symbolic link) makes
  the next look a full one, which sets the watch again.

Everywhere else (macOS, Windows, a file system not on the list) there is no watch and every look
is the full one, as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import re
import struct
import sys
from pathlib import Path

log = logging.getLogger(__name__)

_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF, _IN_UNMOUNT = 0x400, 0x800, 0x2000
_IN_Q_OVERFLOW, _IN_IGNORED, _IN_ONLYDIR, _IN_ISDIR = 0x4000, 0x8000, 0x01000000, 0x40000000
_IN_NONBLOCK, _IN_CLOEXEC = os.O_NONBLOCK, 0o2000000
_MASK = (_IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE
         | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR)
_LOST = _IN_Q_OVERFLOW | _IN_IGNORED | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_UNMOUNT
_EVENT = struct.Struct("iIII")

LOCAL_FILE_SYSTEMS = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "f2fs", "bcachefs",
    "reiserfs", "jfs", "ramfs", "nilfs2", "hfsplus", "vfat", "exfat", "ntfs3",
})
"""File systems whose changes all pass through this machine's kernel (so inotify sees them).
Not NFS, SMB, FUSE (sshfs, rclone, a Windows drive seen from WSL) or 9p: changes made on the
other side never reach the queue."""


def _mounts() -> list[tuple[str, str]]:
    """``(mount point, file system)`` of every mount, from /proc/self/mounts."""
    mounts = []
    with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3:  # the kernel writes a space in a path as \040
                point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), parts[1])
                mounts.append((point, parts[2]))
    return mounts


def local_tree(root: Path) -> str | None:
    """Why changes under ``root`` may not reach inotify (a mount of a file system not known to
    be local, at the root or below it), or None when they all do."""
    real = os.path.realpath(root)
    inside = real.rstrip("/") + "/"
    owner, kind = "/", ""
    for point, fs in _mounts():
        if (real + "/").startswith(point.rstrip("/") + "/") and len(point) >= len(owner):
            owner, kind = point, fs
        elif point.startswith(inside) and fs not in LOCAL_FILE_SYSTEMS:
            return f"{point} below it is a {fs} mount"
    return None if kind in LOCAL_FILE_SYSTEMS else f"it is on a {kind or 'unknown'} mount"


def watch_budget() -> int:
    """How many folders one notes root may watch: a quarter of the user's inotify watches
    (``fs.inotify.max_user_watches``: 8,192 on older kernels, more on newer), at most 4,096."""
    try:
        with open("/proc/sys/fs/inotify/max_user_watches", encoding="ascii") as f:
            return min(4096, int(f.read()) // 4)
    except (OSError, ValueError):
        return 2048


class NoteWatch:
    """An inotify queue over the folders of one notes root, read only when asked.

    Thread-safety is the caller's: the resident search asks under one lock.
    """

    def __init__(self, root: Path) -> None:
        """Use :meth:`for_root`, which says why there is no watch where there cannot be one."""
        self.root = root
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        self._add = libc.inotify_add_watch
        self._add.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        self._fd = fd
        self._closed = False
        self._budget = watch_budget()
        self._folders: dict[int, str] = {}
        self._touched: set[str] = set()
        self._trusted = False
        self._doubt: str | None = None
        self.full_looks = 0
        """How many full looks the watch needed (tests and logs read it)."""

    @classmethod
    def for_root(cls, root: Path) -> NoteWatch | None:
        """A watch of ``root``, or None (and a log line saying why) where none can be trusted."""
        if not sys.platform.startswith("linux"):
            return None
        try:
            why = local_tree(root)
            if why is not None:
                log.info("no watch of %s for the search socket: %s", root, why)
                return None
            return cls(root)
        except (OSError, AttributeError) as exc:
            log.info("no watch of %s for the search socket: %s", root, exc)
            return None

    # ---- the walk's side (files.WalkWatch) --------------------------------------------------

    def directory(self, path: str, rel_dir: str) -> None:
        if self._closed:
            return
        if len(self._folders) >= self._budget:
            # inotify watches are the user's, shared with editors and file managers: a vault of
            # more folders than our share of them is looked at in full instead
            self._doubt = f"more than {self._budget} folders (a share of the user's watches)"
            self.close()
            return
        wd = self._add(self._fd, os.fsencode(path), _MASK)
        if wd < 0:  # the user's watch limit (fs.inotify.max_user_watches), a folder gone
            err = ctypes.get_errno()
            self._doubt = f"cannot watch {rel_dir or '.'}: {os.strerror(err)}"
        else:
            self._folders.setdefault(wd, rel_dir)  # a folder linked twice: the walk's first name

    def linked_note(self, rel: str) -> None:
        self._doubt = f"{rel} is a symbolic link (its edits happen in another folder)"

    # ---- the asker's side -------------------------------------------------------------------

    def start_full_look(self) -> None:
        """Call before a full look walks the folders (with this as its watch): what is queued
        until now is covered by that look's own stats."""
        self._read()
        self._touched.clear()
        self._doubt = None
        self.full_looks += 1

    def full_look_done(self) -> None:
        """The full look ended and the index took in what it found: trust the queue from here
        (unless the walk met something the queue cannot name)."""
        self._trusted = self._doubt is None
        if self._doubt is not None:
            log.info("%s: every search looks at every note: %s", self.root, self._doubt)

    def touched(self) -> set[str] | None:
        """The notes (root-relative) an event named since the last full look and not yet
        :meth:`settled`; None when only a full look can tell."""
        self._read()
        return set(self._touched) if self._trusted and not self._closed else None

    def settled(self, rels: set[str]) -> None:
        """These notes were looked at and the index took in what was found."""
        self._touched -= rels

    def distrust(self) -> None:
        """Something went wrong between a look and the index (a failed update): look fully."""
        self._trusted = False

    def close(self) -> None:
        """Give the watches back (closing the queue removes them all)."""
        if not self._closed:
            self._closed = True
            self._trusted = False
            with contextlib.suppress(OSError):
                os.close(self._fd)

    def _read(self) -> None:
        while not self._closed:
            try:
                buf = os.read(self._fd, 65536)
            except BlockingIOError:
                return
            except OSError as exc:
                self._lose(f"the watch could not be read: {exc}")
                return
            off = 0
            while off + _EVENT.size <= len(buf):
                wd, mask, _cookie, length = _EVENT.unpack_from(buf, off)
                name = buf[off + _EVENT.size:off + _EVENT.size + length].rstrip(b"\0")
                off += _EVENT.size + length
                self._event(wd, mask, os.fsdecode(name))

    def _event(self, wd: int, mask: int, name: str) -> None:
        folder = self._folders.get(wd)
        if mask & _LOST or folder is None:
            self._lose("the watch lost track (a folder moved or removed, or a queue overflow)")
        elif mask & _IN_ISDIR or not name:
            self._lose(f"a folder changed in {folder or '.'} (created, moved, removed, chmod)")
        elif name == ".gitignore":
            self._lose(f"the ignore rules of {folder or '.'} changed")
        else:
            self._touched.add(f"{folder}/{name}" if folder else name)

    def _lose(self, why: str) -> None:
        if self._trusted:
            log.info("%s: the next search looks at every note: %s", self.root, why)
        self._trusted = False
