"""An index is as private as the notes it was built from (issue 58): real ``mdsearch`` processes
under a fresh home whose ``~/.cache`` mdsearch creates, then a second user who tries to read it.

The tests run as root (as CI does), so "another user" is made from what root can do: the index
is handed to uid 65534 (``chown``), and the reader is a process of uid 0 without the two
capabilities that let root past file modes (CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, dropped
from its bounding set before it starts). That reader is the owner of nothing in the index and in
none of its groups: exactly what the modes must stop. (A process of uid 65534 could not start
this interpreter at all, which lives under root's 0700 home here.)"""

from __future__ import annotations

import ctypes
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import copy_vault

pytestmark = pytest.mark.slow

QUERY = "what do we do when more than 5% of requests fail"
OTHER_UID = 65534
ROOT = os.name == "posix" and os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="another user's uid needs root (CI runs as root)")


def not_owner_nor_root() -> None:
    """In the child before it starts: drop root's powers over file modes (``prctl``
    ``PR_CAPBSET_DROP`` of CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def mdsearch(*args: str, home: Path, env: dict[str, str] | None = None,
             other: bool = False) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items()
            if k not in ("MDSEARCH_CACHE_DIR", "XDG_CACHE_HOME", "MDSEARCH_ALLOW_OTHER_OWNER")}
    full.update(HOME=str(home), MDSEARCH_BACKGROUND="off", **(env or {}))
    return subprocess.run([sys.executable, "-m", "mdsearch_ls", *args], capture_output=True,
                          text=True, timeout=300, env=full, cwd="/",
                          preexec_fn=not_owner_nor_root if other else None)


def modes(top: Path) -> dict[str, int]:
    """Every folder and file under ``top`` (itself included) and its permission bits."""
    found = {str(top): stat.S_IMODE(top.stat().st_mode)}
    for here, folders, names in os.walk(top):
        for name in folders + names:
            path = Path(here, name)
            if not path.is_symlink():
                found[str(path)] = stat.S_IMODE(path.lstat().st_mode)
    return found


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """A folder another user can walk into (pytest's own temporary folders are 0700), holding a
    home without ``.cache`` and a copy of the example vault, readable by all."""
    folder = Path(tempfile.mkdtemp(prefix="mdsearch-private-"))
    try:
        folder.chmod(0o755)
        (folder / "home").mkdir(mode=0o755)
        copy_vault(folder / "vault")
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def indexed(base: Path) -> Path:
    """The index folder of the vault, made by ``mdsearch index`` under the fresh home."""
    done = mdsearch("index", str(base / "vault"), "--yes", home=base / "home")
    assert done.returncode == 0, done.stderr
    found = list((base / "home/.cache/mdsearch/indexes").iterdir())
    assert len(found) == 1
    return found[0]


def test_mdsearch_creates_the_cache_and_the_index_private(base: Path, indexed: Path) -> None:
    # a search writes too (it brings the index up to date): nothing it adds is open either
    done = mdsearch("search", QUERY, "--root", str(base / "vault"), home=base / "home")
    assert done.returncode == 0, done.stderr
    found = modes(base / "home/.cache")
    assert any(p.endswith(".sqlite3") for p in found) and any("holder.lock" in p for p in found)
    assert any("chroma" in p for p in found)
    open_to_others = {p: oct(m) for p, m in found.items()
                      if m != (0o700 if Path(p).is_dir() else 0o600)}
    assert open_to_others == {}


def test_an_index_left_open_is_made_private_on_the_next_write_open_and_said_once(
        base: Path, indexed: Path) -> None:
    for path in modes(indexed):  # as a release before this one left it
        os.chmod(path, 0o755 if Path(path).is_dir() else 0o644)
    with (base / "vault/Home.md").open("a", encoding="utf-8") as note:  # (something to write)
        note.write("\nA line added so that the next index writes.\n")
    first = mdsearch("index", str(base / "vault"), home=base / "home")
    assert first.returncode == 0, first.stderr
    assert first.stderr.count("made them private") == 1, first.stderr
    assert {oct(m) for p, m in modes(indexed).items()} == {"0o700", "0o600"}
    again = mdsearch("index", str(base / "vault"), home=base / "home")
    assert again.returncode == 0 and "private" not in again.stderr, again.stderr


@needs_root
def test_another_user_cannot_read_the_index(base: Path, indexed: Path, tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"  # the cache as mdsearch made it (modes kept), given to 65534
    shutil.copytree(base / "home/.cache", theirs)
    tmp_path.chmod(0o755)
    for path in modes(theirs):
        os.chown(path, OTHER_UID, OTHER_UID)
    index = theirs / indexed.relative_to(base / "home/.cache")
    manifest = next(p for p in modes(theirs) if p.endswith(".sqlite3"))
    read = subprocess.run([sys.executable, "-c", "import sqlite3, sys; print(sqlite3.connect("
                           "f'file:{sys.argv[1]}?immutable=1', uri=True).execute("
                           "'SELECT text FROM chunks').fetchall())", manifest],
                          capture_output=True, text=True, preexec_fn=not_owner_nor_root)
    assert read.returncode != 0 and "unable to open" in read.stderr, read.stderr
    assert "hospitals and logistics" not in read.stdout
    # (the other user asks past the owner check: the modes alone must stop them)
    done = mdsearch("search", "--index-dir", str(index), "--root", str(base / "vault"),
                    "--no-update", "--format", "json", QUERY, home=base / "home",
                    env={"MDSEARCH_ALLOW_OTHER_OWNER": "1"},
                    other=True)
    assert done.returncode != 0
    assert '"path"' not in done.stdout and "Permission denied" in done.stderr, done.stderr


@needs_root
def test_an_index_another_user_owns_is_refused_unless_asked(base: Path, indexed: Path,
                                                            tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    shutil.copytree(indexed, theirs)
    for path in modes(theirs):
        os.chown(path, OTHER_UID, OTHER_UID)
    args = ("search", "--index-dir", str(theirs), "--no-update", "--format", "paths", QUERY)
    refused = mdsearch(*args, home=base / "home")
    assert refused.returncode == 4, refused.stderr
    assert f"uid {OTHER_UID}" in refused.stderr and "MDSEARCH_ALLOW_OTHER_OWNER=1" in \
        refused.stderr, refused.stderr
    assert refused.stdout == ""
    asked = mdsearch(*args, home=base / "home", env={"MDSEARCH_ALLOW_OTHER_OWNER": "1"})
    assert asked.returncode == 0, asked.stderr
    assert ".md" in asked.stdout
