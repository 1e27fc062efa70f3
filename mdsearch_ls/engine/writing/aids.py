"""Help while writing: links by meaning, related sections that are not linked yet, where a link
goes. Unlinked mentions and near-duplicates are in :mod:`~mdsearch_ls.engine.writing.mentions`.

Every answer reuses what the index holds (the Chroma collection for what is near what, the
outline of every note, the link graph; see :mod:`~mdsearch_ls.engine.writing.vault_view`):
nothing re-embeds a whole note per keystroke.
Link completion embeds one paragraph, the one being written, and keeps its vector per paragraph
text, so typing on after ``[[`` costs no model call at all.

:class:`WritingAids` is what a front end calls, as ``Workspace.writing``; its methods take the
editor's buffer (unsaved edits count) and return positions as 0-based lines and code-point
columns.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mdsearch_ls.config import LINK_STYLES, Settings
from mdsearch_ls.engine.notes.links import (
    Link,
    find_block,
    find_heading,
    markdown_link,
    scan,
    wikilink,
)
from mdsearch_ls.engine.notes.outline import heading_at, outline, trim_end
from mdsearch_ls.engine.search.requests import RelatedRequest
from mdsearch_ls.engine.search.searcher import Hit
from mdsearch_ls.engine.writing import mentions as hygiene
from mdsearch_ls.engine.writing.completion import (
    HEADING_LINE,
    LinkCandidate,
    LinkCompleter,
    LinkCompletion,
)
from mdsearch_ls.engine.writing.vault_view import Vault, VaultView

if TYPE_CHECKING:
    from mdsearch_ls.engine.index.manifest import Manifest
    from mdsearch_ls.engine.workspace import Workspace

MIN_SUGGEST_CHARS = 120
"""Characters of body a section needs before a link is suggested for it: a stub says too little
for its nearest neighbour to mean anything."""



@dataclass(frozen=True)
class LinkTarget:
    """Where a link goes: a note, and a line in it (0 for the note itself)."""

    path: str
    line: int
    heading: str | None = None


@dataclass(frozen=True)
class LinkedRelated:
    """Related sections of one section, and which of their notes are already linked with it."""

    start_line: int | None
    hits: list[Hit]
    linked: list[bool]

    @property
    def n_linked(self) -> int:
        return sum(self.linked)


@dataclass(frozen=True)
class LinkSuggestion:
    """ "Link to Note#Heading": the text to insert at the end of a section."""

    hit: Hit
    link: str
    label: str
    """What the link points to, as "Note#Heading"."""
    line: int
    column: int
    new_text: str

def _reading(method: Callable[..., Any]) -> Callable[..., Any]:
    """Damage a read of the index meets is said as the index's damage, with what heals it (and
    the next open checks every page), not as a bare SQLite error."""

    @functools.wraps(method)
    def guarded(self: WritingAids, *args: Any, **kwargs: Any) -> Any:
        with self._ws._reading():
            return method(self, *args, **kwargs)

    return guarded


class WritingAids:
    """Help while writing over one workspace's index. Any thread; nothing here writes."""

    def __init__(self, ws: Workspace) -> None:
        self._ws = ws
        self.vault = Vault(ws.manifest)
        self._completer = LinkCompleter(self)
        # One text's vector, kept per text: typing after ``[[`` leaves the paragraph as it was,
        # so its vector is reused.
        self.embed: Callable[[str], np.ndarray] = functools.lru_cache(maxsize=128)(
            lambda text: np.asarray(ws.embedder.embed_query(text), dtype=np.float32))

    # ---- shared ---------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self._ws.settings

    def view(self) -> VaultView:
        """The index as the writing aids read it (names, sections, links), current."""
        return self.vault.view()

    @property
    def manifest(self) -> Manifest:
        return self._ws.manifest

    def chunk_texts(self, chunk_ids: Iterable[str]) -> dict[str, str]:
        return self._ws.chunk_texts(chunk_ids)

    def nearest(self, vectors: list[np.ndarray], k: int) -> list[list[tuple[str, float]]]:
        """For each of ``vectors``, the ``k`` nearest chunks as (id, cosine), best first: the
        Chroma collection's answer, the one place the writing aids learn what is near what."""
        return self._ws.store.query_many(vectors, k)

    def linked_paths(self, path: str, text: str | None = None) -> set[str]:
        """Notes linked with note ``path`` either way: its links (from ``text``, the buffer,
        when given) and the notes whose links resolve to it."""
        view = self.view()
        linked = set(view.graph.incoming.get(path, ()))
        if text is None:
            return linked | view.graph.outgoing.get(path, set())
        for link, _, _ in scan(text).links:
            dest = view.resolver.resolve(link, path)
            if dest is not None and dest != path:
                linked.add(dest)
        return linked

    def link_to(self, path: str, source: str, heading: str | None = None,
                text: str | None = None, *, style: str | None = None,
                embed: bool = False) -> str:
        """A link from note ``source`` to note ``path`` (and a heading in it) in the link style
        of the settings; ``text`` is what it shows (an alias, the words it replaces); ``embed``:
        a wikilink written ``![[...]]``."""
        view = self.view()
        if (style or self._ws.settings.links_style) == "markdown":
            return markdown_link(text or heading or view.title(path), path, source, heading)
        return wikilink(view.resolver.link_name(path), heading, text, embed=embed)
    # ---- completion (engine/writing/completion.py) -------------------------------------------

    @_reading
    def complete_link(self, path: str, text: str, line: int, column: int, *,
                      style: str | None = None, limit: int = 50,
                      semantic: bool = True) -> LinkCompletion | None:
        """Notes and headings for the link being typed at (line, column) of note ``path``'s
        buffer: after ``[[`` (wikilinks, or markdown links when the style says so) or after
        ``](``. None when the cursor is not in a link (or is in code). ``semantic`` False:
        names only, no model call (a front end whose model is still loading)."""
        return self._completer.complete(path, text, line, column, style=style, limit=limit,
                                        semantic=semantic)

    # ---- where a link goes ----------------------------------------------------------------

    @_reading
    def resolve_link(self, path: str, text: str, line: int, column: int) -> LinkTarget | None:
        """The note (and heading or block) the link under the cursor goes to; None when the
        cursor is on no link or the link names nothing that exists."""
        link = scan(text).link_at(line, column)
        if link is None:
            return None
        view = self.view()
        dest = view.resolver.resolve(link, path)
        if dest is None:
            return self._unindexed_target(link, path)
        if not link.anchor:
            return LinkTarget(dest, 0)
        if dest == path:
            heads = [(h.title, h.line) for h in outline(text)]
            lines = text.split("\n")
        else:
            table = view.sections
            heads = [(table.titles[r], int(table.start_lines[r])) for r in table.rows(dest)]
            lines = []
        found = find_heading(heads, link.anchor)
        if found is None and link.anchor.lstrip("#").startswith("^"):
            if not lines:
                file = self._ws.root / dest
                lines = file.read_text("utf-8", errors="replace").split("\n") if (
                    file.is_file()) else []
            found = find_block(lines, link.anchor)
        return LinkTarget(dest, found or 0, link.anchor if found is not None else None)

    def _unindexed_target(self, link: Link, source: str) -> LinkTarget | None:
        """A link to a file the index does not hold (an image, a note not indexed yet), when it
        exists on disk."""
        if not link.target:
            return None
        root = self._ws.root
        folder = (root / source).parent
        for base in (folder, root):
            for name in (link.target, link.target + ".md"):
                candidate = base / name
                rel = self._ws.relpath(candidate)
                if rel is not None and candidate.is_file():
                    return LinkTarget(rel, 0)
        return None

    # ---- related, not linked --------------------------------------------------------------

    @_reading
    def related_linked(self, path: str, line: int, text: str | None, *, k: int,
                       min_score: float) -> LinkedRelated:
        """``related`` for the section at ``line`` (the same request the related command
        makes), with which hits' notes are linked with this one either way."""
        related = self._ws.related(RelatedRequest(path, line, text=text, k=k,
                                                  min_score=min_score))
        linked = self.linked_paths(path, text) if related.hits else set()
        start = related.section.start_line if related.section is not None else None
        return LinkedRelated(start, related.hits, [h.path in linked for h in related.hits])

    @_reading
    def suggest_link(self, path: str, text: str, line: int, *,
                     min_score: float | None = None) -> LinkSuggestion | None:
        """"Link to Note#Heading" for the section at ``line``: when its best related section in
        another note scores at least ``min_score`` (the ``suggest.minScore`` setting) and the
        two notes are not linked either way. Sections under ``MIN_SUGGEST_CHARS`` get none."""
        heads = outline(text)
        lines = text.replace("\r\n", "\n").split("\n")
        at = heading_at(heads, line)
        if at >= 0:
            start, end = heads[at].line, heads[at].section_end_line
        else:  # the text before the first heading, front matter included
            start, end = 0, trim_end(lines, 0, (heads[0].line if heads else len(lines)) - 1)
        body = "\n".join(lines[start + (1 if HEADING_LINE.match(lines[start]) else 0):end + 1])
        if len(body.strip()) < MIN_SUGGEST_CHARS:
            return None
        threshold = self._ws.settings.suggest_min_score if min_score is None else min_score
        found = self.related_linked(path, line, text, k=1, min_score=threshold)
        if not found.hits or found.linked[0]:
            return None
        hit = found.hits[0]
        view = self.view()
        row = view.sections.row_at(hit.path, hit.start_line)
        if row is not None and view.sections.boiler[row] >= hygiene.BOILERPLATE_NOTES:
            return None  # a template section: every note made from it would be "related"
        heading = None if _is_title_hit(view, hit) else hit.title
        link = self.link_to(hit.path, path, heading)
        last = lines[end]
        if re.match(r"^\s*see also:", last, re.IGNORECASE):
            new_text = f", {link}"
        else:
            new_text = f"\n\nSee also: {link}"
        name = view.resolver.link_name(hit.path)
        label = f"{name}#{heading}" if heading else name
        return LinkSuggestion(hit, link, label, end, len(last), new_text)

    # ---- mentions and duplicates (engine/writing/mentions.py) --------------------------------

    @_reading
    def unlinked_mentions(self, path: str, text: str, *, limit: int = 100,
                          style: str | None = None) -> list[hygiene.Mention]:
        """Other notes' names written as plain text in ``text``: the first mention of each note
        this one does not link to yet, outside code, links and headings."""
        view = self.view()
        found = hygiene.unlinked_mentions(view, scan(text), path,
                                          self.linked_paths(path, text), limit=limit)
        return [dataclasses.replace(m, replacement=self.link_to(m.path, path, None, m.text,
                                                                style=style)) for m in found]

    @_reading
    def near_duplicates(self, path: str, *, min_score: float | None = None,
                        limit: int = 20) -> list[hygiene.Duplicate]:
        """Sections of note ``path`` (as indexed) almost identical to a section of another note
        (template boilerplate aside)."""
        threshold = self._ws.settings.duplicates_min_score if min_score is None else min_score
        return hygiene.near_duplicates(self, path, threshold, limit=limit)

def _is_title_hit(view: VaultView, hit: Hit) -> bool:
    return " > " not in hit.breadcrumb and hit.title.strip().casefold() == (
        view.title(hit.path).strip().casefold())


__all__ = [
    "LINK_STYLES",
    "LinkCandidate",
    "LinkCompletion",
    "LinkSuggestion",
    "LinkTarget",
    "LinkedRelated",
    "WritingAids",
]
