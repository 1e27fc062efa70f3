"""Overview pages recognised by their links, not their names (issue 21, defect 4).

A page that links to many notes (Core plugins, Getting started, a home note) is close in
meaning to every question about the notes it lists, and often came first above the very page
it links to. When an overview and a page it links to are both among the first notes, the
overview steps back by ``hub_penalty``: the person is better served by the page it points to,
and still sees the overview next.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from mdsearch_ls.engine.notes import links as links_mod

if TYPE_CHECKING:
    from mdsearch_ls.engine.index.manifest import Manifest
    from mdsearch_ls.engine.search.ranking import Candidate, RankingParams

_lock = threading.Lock()
_outlinks: dict[str, tuple[int, dict[str, frozenset[str]]]] = {}


def outlinks(manifest: Manifest) -> dict[str, frozenset[str]]:
    """Each note's resolved outgoing links (embeds and links to itself aside), read once per
    index generation."""
    key, gen = str(manifest.path), manifest.generation
    with _lock:
        hit = _outlinks.get(key)
    if hit is not None and hit[0] == gen:
        return hit[1]
    resolver = links_mod.Resolver(manifest.titles())
    out: dict[str, set[str]] = {}
    for path, kind, target, anchor in manifest.read(
            "SELECT path, kind, target, anchor FROM links WHERE kind != 'embed'"):
        dest = resolver.resolve(links_mod.Link(kind=kind, target=target, anchor=anchor, text='',
                                                 line=0, start=0, end=0), path)
        if dest is not None and dest != path:
            out.setdefault(path, set()).add(dest)
    table = {p: frozenset(d) for p, d in out.items()}
    with _lock:
        _outlinks[key] = (gen, table)
    return table


def demote(ordered: Sequence[Candidate], manifest: Manifest, params: RankingParams
           ) -> list[Candidate]:
    """``ordered`` (best first) with every overview among the first ``hub_window`` notes that
    links to another of them ``hub_penalty`` lower, re-sorted."""
    links = outlinks(manifest)
    first: list[str] = []
    for c in ordered:
        if c.chunk.path not in first:
            first.append(c.chunk.path)
            if len(first) >= params.hub_window:
                break
    top = set(first)
    hubs = {p for p in first if len(links.get(p, ())) >= params.hub_min_links
            and (links.get(p, frozenset()) & top) - {p}}
    if not hubs:
        return list(ordered)
    out = [replace(c, fused=c.fused - params.hub_penalty) if c.chunk.path in hubs else c
           for c in ordered]
    return sorted(out, key=lambda c: (-c.required_share, -c.fused, -(c.cosine or 0.0),
                                      c.chunk.id))
