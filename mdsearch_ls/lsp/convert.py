"""Engine results -> LSP shapes, and the escaping every string needs on its way out.

Everything a feature sends that came from a note or a file name passes through here. Markdown is
escaped at this edge (the engine returns raw text): a title, snippet or path rendered into hover
markdown must never become a link, a code span that ends early, or HTML, so a note or a file
name cannot inject a ``command:`` link into the editor. Structured results (command answers)
stay raw; their clients render them as plain text.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import from_fs_path, to_fs_path
from pygls.workspace import PositionCodec
from pygls.workspace.position_codec import ServerTextPosition

from mdsearch_ls.engine.api import Hit


def uri_to_path(uri: str) -> Path | None:
    path = to_fs_path(uri)
    return Path(path) if path else None


def path_to_uri(path: Path | str) -> str:
    return from_fs_path(str(path)) or Path(path).as_uri()


def hit_uri(root: Path, hit: Hit) -> str:
    return path_to_uri(root / hit.path)


def hit_range(hit: Hit) -> types.Range:
    """The whole section: from its heading line to the start of the line after its end. In a
    converted document (a PDF, a notebook) the file's top: its lines are not the file's."""
    if not hit.file_lines:
        return types.Range(start=types.Position(line=0, character=0),
                           end=types.Position(line=0, character=0))
    return types.Range(
        start=types.Position(line=hit.start_line, character=0),
        end=types.Position(line=hit.end_line + 1, character=0),
    )


def hit_json(root: Path, hit: Hit) -> dict[str, Any]:
    """A hit as a command result: the CLI's JSON fields plus ``uri`` and ``root``."""
    out = hit.to_json()
    out["uri"] = hit_uri(root, hit)
    out["root"] = str(root)
    return out


class Lines:
    """A buffer's lines and the client's position encoding, to convert LSP positions (UTF-16
    code units by default) to the engine's code-point columns and back: a note with an emoji or
    a CJK character before the cursor must not move a link by one."""

    def __init__(self, text: str, codec: PositionCodec | None = None) -> None:
        self.text = text
        self.lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self.codec = codec or PositionCodec()

    def point(self, position: types.Position) -> tuple[int, int]:
        """(line, column in code points) of a client position."""
        copy = types.Position(line=position.line, character=position.character)
        p = self.codec.position_from_client_units(self.lines, copy)
        return p.line, p.character

    def position(self, line: int, column: int) -> types.Position:
        if line >= len(self.lines):
            return types.Position(line=line, character=0)
        return self.codec.position_to_client_units(self.lines, ServerTextPosition(line, column))

    def range(self, line: int, column: int, end_line: int, end_column: int) -> types.Range:
        return types.Range(start=self.position(line, column),
                           end=self.position(end_line, end_column))

    def line_range(self, line: int) -> types.Range:
        """A whole line, up to its end."""
        end = len(self.lines[line]) if 0 <= line < len(self.lines) else 0
        return self.range(line, 0, line, end)


# Every character that can start markdown structure or HTML in a CommonMark renderer.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~\"'&:=$^])")


def escape_markdown(text: str) -> str:
    """Text shown literally in markdown: every structural character backslash-escaped and line
    breaks flattened, so nothing in a note or a file name can open a link, a code span, an
    autolink or an HTML tag (CommonMark honours a backslash before any ASCII punctuation)."""
    flat = " ".join(text.split())
    return _MD_SPECIAL.sub(r"\\\1", flat)


def related_markdown(root: Path, hits: list[Hit]) -> str:
    """Hover markdown: a link to each section's line, its breadcrumb, file, score and snippet.

    The link target is a ``file:`` URI we build from the index's root and a path we percent-
    encode (no quote, space or parenthesis survives), and every text is escaped.
    """
    lines = ["**Related sections**", ""]
    for hit in hits:
        link = hit_uri(root, hit) + (f"#L{hit.start_line + 1}" if hit.file_lines else "")
        score = f" · {hit.score:.2f}" if hit.score is not None else ""
        lines.append(f"- [{escape_markdown(hit.title)}]({link}) · "
                     f"{escape_markdown(hit.path)}{score}  ")
        where = f" (page {hit.page})" if hit.page is not None else ""
        lines.append(f"  {escape_markdown(hit.breadcrumb)}{where}  ")
        if hit.snippet:
            lines.append(f"  _{escape_markdown(hit.snippet)}_")
    return "\n".join(lines)


__all__ = [
    "Lines",
    "escape_markdown",
    "hit_json",
    "hit_range",
    "hit_uri",
    "path_to_uri",
    "related_markdown",
    "uri_to_path",
]
