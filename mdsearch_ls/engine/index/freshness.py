"""Is an index up to date with its notes? Answered from a scan of file stats and the manifest.

A CLI search wants a fresh index, but updating one means opening it for writing: the writer lock,
and Chroma (importing it alone costs seconds). Most searches find nothing changed, so the CLI asks
here first, from a read-only open (SQLite only), and opens for writing only when something did
change. The rule is the indexer's own (a note is changed when its mtime or size differs from the
manifest's; a file skipped before in the same state stays skipped), so the two cannot disagree
about whether there is work to do.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from mdsearch_ls.engine.notes import files as sources

if TYPE_CHECKING:
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.index.manifest import Manifest

TARGETED_MAX = 200
"""Changed notes a search brings in one by one (no second scan of the folder, no read of every
note's record: a one-note update at 96k notes); more go through a full, cancellable index."""


def changed_notes(root: Path, settings: Settings, manifest: Manifest, index_dir: Path | None,
                  *, among: Iterable[str] | None = None,
                  watch: sources.WalkWatch | None = None) -> list[str] | None:
    """The notes an update would read or drop, by root-relative path (empty: the index is up
    to date); None when only a full update will do (a keyword index of an older format, which
    only a write open converts). A writer given this list updates these notes alone, without a
    second scan of the folder or a read of every note's record. ``among``: look at these notes
    only (a watch of the folders named them), by the same rule; ``watch``: see ``stat_scan``."""
    if manifest.keywords_outdated():
        return None
    if among is not None:
        return _changed_among(root, settings, manifest, index_dir, among)
    found, _oversize = sources.stat_scan(
        root,
        include=settings.include,
        exclude=settings.exclude,
        index_dir=index_dir,
        max_file_bytes=settings.max_file_bytes,
        formats=settings.include_formats,
        watch=watch,
    )
    known = manifest.file_stats()
    skipped = manifest.skipped()
    # (an unchanged note, nearly every one, is a lookup and a compare: the rule's call per
    # note cost 70 ms of a 96k-note look)
    changed = [rel for rel, seen in found.items()
               if known.get(rel) != seen and _differs(seen, known.get(rel), skipped.get(rel))]
    # (a note grown past the size limit is not in `found`: an update drops it, as below)
    return changed + sorted(rel for rel in known if rel not in found)


def _differs(seen: tuple[float, int] | None, indexed: tuple[float, int] | None,
             skipped_as: tuple[float, int] | None) -> bool:
    """The indexer's rule: a note is changed when its ``(mtime, size)`` is not the manifest's
    (gone, or new), and a file skipped before in the same state stays skipped."""
    if seen is None:
        return indexed is not None
    return skipped_as != seen if indexed is None else indexed != seen


def _changed_among(root: Path, settings: Settings, manifest: Manifest, index_dir: Path | None,
                   among: Iterable[str]) -> list[str]:
    """:func:`changed_notes` for a few named notes: a stat of each, not a walk."""
    flt = sources.SourceFilter(root, include=settings.include, exclude=settings.exclude,
                               index_dir=index_dir, formats=settings.include_formats)
    rels = sorted(set(among))
    known = {rel: (r.mtime, r.size) for rel, r in manifest.files_of(rels).items()}
    skipped = manifest.skipped()
    changed = []
    for rel in rels:
        seen = None
        if flt.accepts(rel):
            try:
                st = os.stat(os.path.join(flt.root, rel))
            except OSError:  # gone: an update drops it
                st = None
            if (st is not None and stat.S_ISREG(st.st_mode) and not sources._oversize(
                    rel, st.st_size, settings.max_file_bytes, settings.include_formats)):
                seen = (st.st_mtime, st.st_size)
        if _differs(seen, known.get(rel), skipped.get(rel)):
            changed.append(rel)
    return changed
