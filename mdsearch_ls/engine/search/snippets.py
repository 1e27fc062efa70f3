"""The one-line preview of a hit shown under its title (CLI, hover, QuickPick)."""

from __future__ import annotations

import re

_WS = re.compile(r"\s+")
_MD_NOISE = re.compile(r"^\s{0,3}(#{1,6}\s+|[-*+]\s+|>\s?|\d+[.)]\s+)", re.M)
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_ATX = re.compile(r"^\s{0,3}#{1,6}(\s|$)")


def make_snippet(text: str, limit: int = 200) -> str:
    """A one-line preview of the body: the heading is already shown as the title, so it goes, as
    does markup at line starts; whitespace is collapsed and the cut falls between words."""
    lines = text.split("\n")
    if len(lines) > 1 and _SETEXT.match(lines[1]) and lines[0].strip():
        lines = lines[2:]
    elif lines and _ATX.match(lines[0]):
        lines = lines[1:]
    body = "\n".join(lines)
    flat = _WS.sub(" ", _MD_NOISE.sub("", body)).strip() or _WS.sub(" ", text).strip()
    if len(flat) <= limit:
        return flat
    cut = flat.rfind(" ", 0, limit)
    return flat[: cut if cut > limit // 2 else limit].rstrip(" ,;:") + "…"
