"""Settings: one typed place for every knob, merged from defaults, client options and CLI flags.

Front ends differ in how settings reach them (LSP ``initializationOptions`` and
``workspace/configuration`` in camelCase, CLI flags in kebab-case), but the core only ever sees a
:class:`Settings`. An invalid value never stops the program: it is reported by name and the default
is used, because a typo in an editor's settings file should cost a warning, not the search engine.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

MODES = ("hybrid", "semantic", "keyword")
FUSIONS = ("convex", "rrf")
EMBEDDER_BACKENDS = ("onnx", "onnx-int8", "torch")  # engine/embedding/__init__.py says why


@dataclass(frozen=True)
class Settings:
    """Everything a user can tune. Field docs are what the editor shows in its settings UI."""

    include: tuple[str, ...] = ()
    """Gitignore-style globs of notes to index, relative to the folder; empty means every note."""
    exclude: tuple[str, ...] = ()
    """Globs to leave out, on top of .git/, node_modules/, .obsidian/, .trash/ and .gitignore."""
    index_dir: str | None = None
    """Where the index lives; by default a folder in the user cache keyed by the notes' path."""
    model: str | None = None
    """A local sentence-transformers model folder or a cached name; default: the bundled
    all-MiniLM-L6-v2."""
    embedder_backend: str = "onnx"
    """onnx (the bundled model on ONNX Runtime, fast to start), onnx-int8 (smaller and faster,
    slightly different vectors: its own index) or torch (sentence-transformers, for a GPU or
    another model; needs the mdsearch-ls[torch] extra)."""
    chunk_size: int = 1000
    """Longest chunk in characters before a section is split."""
    chunk_overlap: int = 200
    """Characters shared by consecutive chunks of a long section, so no sentence loses context."""
    max_results: int = 20
    """Most hits a search (and workspace/symbol) returns."""
    mode: str = "hybrid"
    """hybrid (meaning + exact words, fused), semantic or keyword."""
    fusion: str = "convex"
    """How hybrid mode merges meaning and keyword results: convex (scores) or rrf (ranks)."""
    per_file: int = 2
    """Most hits from one note in a result list, so one long note cannot crowd out the rest."""
    hover_enabled: bool = True
    """Show related sections from other notes when hovering a markdown line."""
    hover_max_results: int = 5
    """Most related sections in a hover."""
    hover_min_score: float = 0.35
    """Lowest cosine similarity worth showing in a hover; below it the hover stays empty."""
    document_symbols: bool = True
    """Serve the heading outline (documentSymbol); editors with their own outline turn it off."""
    batch_size: int = 1000
    """Largest write to the vector store; capped further by the store's own limit."""
    max_file_bytes: int = 2_000_000
    """Notes larger than this are skipped with a warning (they are rarely notes)."""


# camelCase client name -> (field name, validator). Nested "hover.x" keys come flattened.
_CLIENT_KEYS: dict[str, str] = {
    "include": "include",
    "exclude": "exclude",
    "indexDir": "index_dir",
    "model": "model",
    "embedder.backend": "embedder_backend",
    "chunkSize": "chunk_size",
    "chunkOverlap": "chunk_overlap",
    "maxResults": "max_results",
    "mode": "mode",
    "fusion": "fusion",
    "perFile": "per_file",
    "hover.enabled": "hover_enabled",
    "hover.maxResults": "hover_max_results",
    "hover.minScore": "hover_min_score",
    "documentSymbols": "document_symbols",
    "batchSize": "batch_size",
    "maxFileBytes": "max_file_bytes",
}
# Keys the VS Code extension owns; the server accepts and ignores them instead of warning.
_CLIENT_ONLY = {"server", "trace"}


def _globs(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(p for p in (s.strip() for s in value.split(",")) if p)
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(v for v in value if v.strip())
    raise ValueError("expected a list of glob strings")


def _opt_str(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return os.path.expanduser(value)
    raise ValueError("expected a string")


def _int(lo: int, hi: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
            raise ValueError("expected a whole number")
        if not lo <= value <= hi:
            raise ValueError(f"expected a number from {lo} to {hi}")
        return int(value)

    return check


def _float(lo: float, hi: float) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("expected a number")
        if not lo <= value <= hi:
            raise ValueError(f"expected a number from {lo} to {hi}")
        return float(value)

    return check


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError("expected true or false")


def _fusion(value: Any) -> str:
    if value in FUSIONS:
        return str(value)
    raise ValueError(f"expected one of {', '.join(FUSIONS)}")


def _backend(value: Any) -> str:
    if value in EMBEDDER_BACKENDS:
        return str(value)
    raise ValueError(f"expected one of {', '.join(EMBEDDER_BACKENDS)}")


def _mode(value: Any) -> str:
    if value in MODES:
        return str(value)
    raise ValueError(f"expected one of {', '.join(MODES)}")


_VALIDATORS: dict[str, Callable[[Any], Any]] = {
    "include": _globs,
    "exclude": _globs,
    "index_dir": _opt_str,
    "model": _opt_str,
    "embedder_backend": _backend,
    "chunk_size": _int(100, 20_000),
    "chunk_overlap": _int(0, 10_000),
    "max_results": _int(1, 500),
    "mode": _mode,
    "fusion": _fusion,
    "per_file": _int(1, 100),
    "hover_enabled": _bool,
    "hover_max_results": _int(1, 50),
    "hover_min_score": _float(-1.0, 1.0),
    "document_symbols": _bool,
    "batch_size": _int(1, 100_000),
    "max_file_bytes": _int(1, 1_000_000_000),
}


def _flatten(options: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in options.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and name in ("hover", "embedder"):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


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
        if key.split(".")[0] in _CLIENT_ONLY:
            continue
        field_name = _CLIENT_KEYS.get(key)
        if field_name is None:
            warnings.append(f"mdsearch.{key}: unknown setting, ignored")
            continue
        if value is None:
            continue
        try:
            changes[field_name] = _VALIDATORS[field_name](value)
        except ValueError as exc:
            default = getattr(base, field_name)
            warnings.append(f"mdsearch.{key}: {exc}, got {value!r}; using {default!r}")
    merged = dataclasses.replace(base, **changes)
    if merged.chunk_overlap >= merged.chunk_size:
        warnings.append(
            f"mdsearch.chunkOverlap ({merged.chunk_overlap}) must be smaller than "
            f"mdsearch.chunkSize ({merged.chunk_size}); using "
            f"{base.chunk_overlap if base.chunk_overlap < merged.chunk_size else 0}"
        )
        merged = dataclasses.replace(
            merged,
            chunk_overlap=base.chunk_overlap if base.chunk_overlap < merged.chunk_size else 0,
        )
    return merged, warnings


def with_overrides(settings: Settings, **overrides: Any) -> Settings:
    """Apply CLI flags that were actually given (``None`` means "not given")."""
    given = {k: v for k, v in overrides.items() if v is not None}
    return dataclasses.replace(settings, **given) if given else settings


__all__ = ["EMBEDDER_BACKENDS", "FUSIONS", "MODES", "Settings", "settings_from_client",
           "with_overrides"]
