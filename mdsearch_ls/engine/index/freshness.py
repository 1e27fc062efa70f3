"""Is an index up to date with its notes? Answered from a scan of file stats and the manifest.

A CLI search wants a fresh index, but updating one means opening it for writing: the writer lock,
and Chroma (importing it alone costs seconds). Most searches find nothing changed, so the CLI asks
here first, from a read-only open (SQLite only), and opens for writing only when something did
change. The rule is the indexer's own (a note is changed when its mtime or size differs from the
manifest's; a file skipped before in the same state stays skipped), so the two cannot disagree
about whether there is work to do.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mdsearch_ls.engine.notes import files as sources

if TYPE_CHECKING:
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.index.manifest import Manifest


def changed_notes(root: Path, settings: Settings, manifest: Manifest,
                  index_dir: Path | None) -> list[str] | None:
    """The notes an update would read or drop, by root-relative path (empty: the index is up
    to date); None when only a full update will do (a keyword index of an older format, which
    only a write open converts). A writer given this list updates these notes alone, without a
    second scan of the folder or a read of every note's record."""
    if manifest.keywords_outdated():
        return None
    found, _oversize = sources.stat_scan(
        root,
        include=settings.include,
        exclude=settings.exclude,
        index_dir=index_dir,
        max_file_bytes=settings.max_file_bytes,
        formats=settings.include_formats,
    )
    known = manifest.file_stats()
    skipped = manifest.skipped()
    changed = []
    for rel, seen in found.items():
        k = known.get(rel)
        if (skipped.get(rel) != seen) if k is None else (k != seen):
            changed.append(rel)
    # (a note grown past the size limit is not in `found`: an update drops it, as below)
    return changed + sorted(rel for rel in known if rel not in found)


def pending_changes(root: Path, settings: Settings, manifest: Manifest,
                    index_dir: Path | None) -> int:
    """How many notes an update would read or drop (0: the index is up to date). A keyword
    index of an older format counts as one change: only a write open converts it."""
    changed = changed_notes(root, settings, manifest, index_dir)
    return 1 if changed is None else len(changed)
