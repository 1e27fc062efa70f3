"""What goes over the channel: the engine's own request and result types, as versioned JSON.

Both ends use this module, so a request a client sends is the type the holder reads, and an
answer the holder sends is the type the client gets back (a :class:`SearchResult` is a
``SearchResult`` on both sides). A message is ``{"v": VERSION, "type": ..., ...}``:

* a request, ``type`` one of :data:`REQUESTS` (its fields in ``body``);
* an answer, ``{"type": "answer", "body": ...}``, or ``{"type": "error", "kind": ...,
  "message": ..., "field": ...}`` whose ``kind`` names one of the engine's error types, so the
  client raises the error the holder met, with the holder's sentence;
* before an answer, any number of ``{"type": "progress", "done", "total", "chunks"}`` (an index
  run shows its progress in the terminal that asked for it).

The codec (:func:`encode` / :func:`decode`) turns dataclasses into JSON objects by their fields
and back by their type hints, checking every value's type on the way in: a message that is not
what its type says is answered with a ``bad`` error, never half-read.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from mdsearch_ls.engine import errors
from mdsearch_ls.engine.search.hits import SearchResult
from mdsearch_ls.engine.search.requests import RelatedRequest, SearchRequest

VERSION = 1
"""Bumped when a message changes shape; a holder answers another version with an error."""


class MessageError(ValueError):
    """A message that is not what its type says (a field missing, a value of another type)."""


# ---- the codec ----------------------------------------------------------------------------------


def encode(value: Any) -> Any:
    """A dataclass as a JSON object of its fields (recursively); sequences as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple | set | frozenset):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def decode(tp: Any, data: Any) -> Any:
    """``data`` (what :func:`encode` made) as a value of type ``tp``; :class:`MessageError`
    when it is not one."""
    if tp is Any or tp is object:
        return data
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return decode(option, data)
            except MessageError:
                continue
        raise MessageError(f"{data!r} is none of {tp}")
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise MessageError(f"{tp.__name__}: expected an object, got {type(data).__name__}")
        hints = _hints(tp)
        values = {}
        for f in dataclasses.fields(tp):
            if not f.init:
                continue
            if f.name in data:
                values[f.name] = decode(hints[f.name], data[f.name])
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise MessageError(f"{tp.__name__}: {f.name} missing")
        return tp(**values)
    if origin in (list, tuple, set, frozenset) or tp in (list, tuple):
        if not isinstance(data, list):
            raise MessageError(f"expected a list, got {type(data).__name__}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(data):
                raise MessageError(f"expected {len(args)} items, got {len(data)}")
            return tuple(decode(a, v) for a, v in zip(args, data, strict=True))
        item = args[0] if args else Any
        return (origin or tp)(decode(item, v) for v in data)
    if origin is dict or tp is dict:
        if not isinstance(data, dict):
            raise MessageError(f"expected an object, got {type(data).__name__}")
        value_type = args[1] if args else Any
        return {str(k): decode(value_type, v) for k, v in data.items()}
    if origin is typing.Literal:
        if data not in args:
            raise MessageError(f"{data!r} is not one of {args}")
        return data
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError:
            raise MessageError(f"{data!r} is not a {tp.__name__}") from None
    if tp is float and isinstance(data, int) and not isinstance(data, bool):
        return float(data)
    if tp is Path and isinstance(data, str):
        return Path(data)
    wrong = isinstance(tp, type) and not isinstance(data, tp)
    if wrong or (tp is int and isinstance(data, bool)):
        raise MessageError(f"expected {getattr(tp, '__name__', tp)}, got {type(data).__name__}")
    return data


# ---- requests -----------------------------------------------------------------------------------

REQUESTS: dict[str, type] = {}
"""Every request type by its ``type`` word."""


def _request(cls: type) -> type:
    REQUESTS[cls.kind] = cls  # type: ignore[attr-defined]
    return cls


@_request
@dataclass(frozen=True)
class Hello:
    """Who holds what: answered with a :class:`Holder`."""

    kind: ClassVar[str] = "hello"


@_request
@dataclass(frozen=True)
class Search:
    """Queries of one folder, each answered alone (a :class:`QueryAnswer` each). ``given``: the
    index settings the asker named itself (a CLI flag): the holder refuses when its folder's
    differ, rather than answer from another index than the one asked about."""

    kind: ClassVar[str] = "search"
    root: str
    requests: list[SearchRequest]
    given: dict[str, Any] = field(default_factory=dict)


@_request
@dataclass(frozen=True)
class RelatedAsk:
    """Sections related to a place in a note: answered with a ``Related``."""

    kind: ClassVar[str] = "related"
    root: str
    request: RelatedRequest


@_request
@dataclass(frozen=True)
class AidAsk:
    """One of the writing aids (:data:`AIDS`), its keyword arguments as the method takes them;
    answered with the method's own return type."""

    kind: ClassVar[str] = "aid"
    root: str
    name: str
    args: dict[str, Any]


AIDS = frozenset({"complete_link", "resolve_link", "related_linked", "suggest_link",
                  "unlinked_mentions", "near_duplicates"})
"""The writing aids a client may ask for by name (``WritingAids``' public methods)."""


@_request
@dataclass(frozen=True)
class StatusAsk:
    """The folder's status record (the same dictionary ``IndexedFolder.status`` gives)."""

    kind: ClassVar[str] = "status"
    root: str


@_request
@dataclass(frozen=True)
class NotesAsk:
    """The notes in the folder's index, by root-relative path."""

    kind: ClassVar[str] = "notes"
    root: str
    among: list[str] | None = None
    """Only these (the ones the index holds): whether a few notes are indexed."""


@_request
@dataclass(frozen=True)
class IndexAsk:
    """Bring the index up to date (or rebuild it), sending progress as it goes: answered with
    an ``IndexReport``."""

    kind: ClassVar[str] = "index"
    root: str
    rebuild: bool = False
    given: dict[str, Any] = field(default_factory=dict)


@_request
@dataclass(frozen=True)
class Hold:
    """Asked of the background process: hold this folder too, with these settings (by name)."""

    kind: ClassVar[str] = "hold"
    root: str
    settings: dict[str, Any] = field(default_factory=dict)


@_request
@dataclass(frozen=True)
class Leave:
    """Asked of the background process: let this folder go (answered once its index is
    closed, so the asker can take it at once)."""

    kind: ClassVar[str] = "leave"
    root: str


@_request
@dataclass(frozen=True)
class Stop:
    """Asked of the background process: let every folder go and exit."""

    kind: ClassVar[str] = "stop"


# ---- answers ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Holder:
    """A holder's answer to :class:`Hello` and :class:`Hold`."""

    pid: int
    role: str
    folders: list[str]


@dataclass(frozen=True)
class Problem:
    """An error met while answering, as the engine raised it."""

    kind: str
    message: str
    field: str | None = None


@dataclass(frozen=True)
class QueryAnswer:
    """One query's answer: its result, or why it could not run."""

    result: SearchResult | None = None
    problem: Problem | None = None


# ---- envelopes ----------------------------------------------------------------------------------


def request_message(request: Any) -> dict[str, Any]:
    return {"v": VERSION, "type": request.kind, "body": encode(request)}


def read_request(message: dict[str, Any]) -> Any:
    """The request a message holds; :class:`MessageError` when it holds none this version
    knows (the holder answers that with :func:`problem_message`)."""
    if message.get("v") != VERSION:
        raise MessageError(f"this mdsearch speaks channel version {VERSION}, not "
                           f"{message.get('v')!r}: the two processes are of different releases")
    cls = REQUESTS.get(message.get("type"))  # type: ignore[arg-type]
    if cls is None:
        raise MessageError(f"unknown request type {message.get('type')!r}")
    return decode(cls, message.get("body") or {})


def answer_message(value: Any) -> dict[str, Any]:
    return {"v": VERSION, "type": "answer", "body": encode(value)}


def progress_message(done: int, total: int, chunks: int) -> dict[str, Any]:
    return {"v": VERSION, "type": "progress", "done": done, "total": total, "chunks": chunks}


ERRORS: dict[str, type[Exception]] = {
    cls.__name__: cls for cls in (
        errors.RequestError, errors.IndexLockedError, errors.BroadRootError,
        errors.NotIndexedError, errors.IndexOpenError, errors.VectorServerError,
        errors.MdsearchError)
}
"""The errors a holder passes on as they are (anything else arrives as a ``HolderError``)."""


class HolderError(errors.MdsearchError):
    """The holder failed in a way it did not expect, or refused the request (its sentence
    says which); the asker says so and goes on."""


class NotHeld(HolderError):
    """The process asked does not hold that folder (any more): the asker looks again for who
    does, as when a holder is gone."""


ERRORS[NotHeld.__name__] = NotHeld


def problem_of(exc: BaseException) -> Problem:
    """An exception as a :class:`Problem`: its type's name when the client knows the type."""
    name = type(exc).__name__
    kind = name if name in ERRORS else ("MessageError" if isinstance(exc, MessageError)
                                        else "HolderError")
    text = str(exc) if isinstance(exc, errors.MdsearchError | MessageError) else f"{name}: {exc}"
    return Problem(kind, text, getattr(exc, "field", None))


def problem_message(exc: BaseException) -> dict[str, Any]:
    return {"v": VERSION, "type": "error", **encode(problem_of(exc))}


def error_of(problem: Problem) -> Exception:
    """The exception a client raises for a holder's :class:`Problem`."""
    cls = ERRORS.get(problem.kind)
    if cls is errors.RequestError:
        return errors.RequestError(problem.message, problem.field)
    if cls is not None:
        return cls(problem.message)
    return HolderError(problem.message)


def read_answer(message: dict[str, Any], tp: Any) -> Any:
    """The answer a message holds, as ``tp``; the holder's error raised as it raised it."""
    if message.get("type") == "error":
        raise error_of(decode(Problem, {k: message.get(k) for k in ("kind", "message",
                                                                     "field")}))
    if message.get("type") != "answer":
        raise MessageError(f"expected an answer, got {message.get('type')!r}")
    return decode(tp, message.get("body"))


__all__ = [
    "AIDS", "REQUESTS", "VERSION", "AidAsk", "Hello", "Hold", "Holder", "HolderError",
    "IndexAsk", "Leave", "MessageError", "NotesAsk", "Problem", "QueryAnswer", "RelatedAsk",
    "Search", "StatusAsk", "Stop", "answer_message", "decode", "encode", "error_of",
    "problem_message", "progress_message", "read_answer", "read_request", "request_message",
]
