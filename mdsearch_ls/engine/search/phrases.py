"""Quoted phrases: which sections hold them, and what to tell a person when none does.

A phrase is a requirement when it is given as a filter (``--phrase``, the ``phrase`` filter
argument) and, with ``RankingParams.phrase_mode`` "require", when it is typed in quotes; by
default a typed quote is a preference. Either way a phrase no section holds never empties the
result: the search runs without it and a note says so (see ``Searcher``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mdsearch_ls.engine.search import keyword

if TYPE_CHECKING:
    from mdsearch_ls.engine.index.manifest import Manifest


def searchable(phrases: Sequence[str]) -> tuple[str, ...]:
    """The phrases that have a word to look for (``"%%"`` has none), each once."""
    return tuple(dict.fromkeys(p for p in phrases if keyword.tokens(p)))


@dataclass
class Holding:
    """For a set of phrases: which no chunk holds, and how many of them each chunk holds,
    learnt only for the chunks ranked (:meth:`fill`): listing every holder of a common phrase
    cost more at 96k chunks than the rest of the search."""

    phrases: tuple[str, ...]
    counts: dict[str, int] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    manifest: Manifest | None = None
    checked: set[str] = field(default_factory=set)

    def fill(self, chunk_ids: Iterable[str]) -> None:
        """Learn which of these chunks hold which phrases (each chunk asked about once)."""
        new = [c for c in dict.fromkeys(chunk_ids) if c not in self.checked]
        if not new or self.manifest is None:
            return
        self.checked.update(new)
        for p in self.phrases:
            match = keyword.phrase_match([p]) if p not in self.missing else None
            for cid in self.manifest.phrase_holders(match, new) if match else ():
                self.counts[cid] = self.counts.get(cid, 0) + 1

    def share(self, chunk_id: str) -> float:
        """The share of the phrases the chunk holds (0 when there are none; the chunk must have
        been :meth:`fill`-ed)."""
        return self.counts.get(chunk_id, 0) / len(self.phrases) if self.phrases else 0.0


def holding(manifest: Manifest, phrases: Sequence[str]) -> Holding:
    """Which phrases some chunk holds, one FTS lookup each, cut at the first holder (a
    preference must be found wherever it is, not only where all the others are); which chunks
    hold them is asked per candidate, by :meth:`Holding.fill`."""
    out = Holding(tuple(phrases), manifest=manifest)
    for p in out.phrases:
        match = keyword.phrase_match([p])
        if not match or not manifest.phrase_exists(match):
            out.missing.append(p)
    return out


def _quoted(phrases: Sequence[str]) -> str:
    return ", ".join(f'"{p}"' for p in phrases)


def dropped_note(held: Holding, *, filtered: bool) -> str:
    """Why required phrases did not restrict the search, and what was shown instead."""
    phrases, missing = held.phrases, held.missing
    if missing:
        why = f"no section contains {_quoted(missing)}"
    elif filtered:
        why = f"no section the filters allow contains {_quoted(phrases)}"
    else:
        why = f"no section contains {_quoted(phrases)}" + (" together" if len(phrases) > 1 else "")
    if len(phrases) > len(missing):
        return why + "; showing the closest matches, sections with the phrases first"
    return why + "; showing the closest matches"


def missing_note(missing: Sequence[str]) -> str:
    """A preferred phrase no section holds: said, so a typo in it does not go unnoticed."""
    return f"no section contains {_quoted(missing)}; showing the closest matches"
