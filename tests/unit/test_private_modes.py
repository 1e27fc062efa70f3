"""``layout.make_private`` on an ``--index-dir`` that holds more than an index: the group and
other bits come off the index's own entries only, and never an owner's bit."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mdsearch_ls.engine.index.layout import make_private

pytestmark = pytest.mark.skipif(os.name == "nt", reason="file modes are ACLs on Windows")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_only_the_index_entries_lose_group_and_other_bits(tmp_path: Path) -> None:
    index = tmp_path / "index"
    (index / "chroma" / "seg").mkdir(parents=True)
    (index / "scripts").mkdir()
    for path, bits in ((index / "all.sqlite3", 0o644), (index / "tool", 0o755),
                       (index / "chroma" / "seg" / "data.bin", 0o644),
                       (index / "scripts" / "run.sh", 0o755)):
        path.write_text("x")
        path.chmod(bits)
    for folder in (index, index / "chroma", index / "chroma" / "seg", index / "scripts"):
        folder.chmod(0o755)
    make_private(index)
    assert {p.relative_to(index).as_posix(): oct(mode(p)) for p in [index, *index.rglob("*")]} == {
        ".": "0o700", "all.sqlite3": "0o600", "tool": "0o700", "chroma": "0o700",
        "chroma/seg": "0o700", "chroma/seg/data.bin": "0o600",
        "scripts": "0o755", "scripts/run.sh": "0o755"}  # not the index's: left as they were
