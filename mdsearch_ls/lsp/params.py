"""Why a message's params did not fit its lsprotocol type, in one line a person can act on.

cattrs reports a failed structure as nested exception groups and notes; an editor shows one
line. This walks them and names each field the way the protocol spells it, with what it should
have been and what came ("params.position.line: expected a non-negative integer, got 'x'"). Pure
text, no I/O: :mod:`mdsearch_ls.lsp.protocol` decides whom to answer with it.
"""

from __future__ import annotations

import collections.abc
import enum
import json
import re
import types as pytypes
import typing
from typing import Any

import attrs
from cattrs.errors import AttributeValidationNote, IterableValidationNote
from lsprotocol import validators

MAX_MESSAGE = 500  # characters of an error message sent to the client
MAX_PROBLEMS = 3  # fields named in one InvalidParams message

_MISSING = object()
NONE_TYPE = type(None)
# lsprotocol's integer validators raise from the class's __init__, after cattrs has left the
# attribute, so the attribute is only in their text: "Position.line should be in range
# [0:2147483647], but was -1."
_RANGE_ERROR = re.compile(
    r"^\w+\.(?P<attr>\w+) should be in range \[(?P<lo>-?\d+):(?P<hi>-?\d+)\], but was .*\.$"
)


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """The first non-blank line, cut to ``limit``: an editor shows one line of an error, and a
    multi-line exception text would put a traceback's worth in a popup."""
    first = next((line.strip() for line in str(text).splitlines() if line.strip()), "")
    return first if len(first) <= limit else first[: limit - 1] + "…"


def exception_text(exc: BaseException) -> str:
    """"ValueError: bad thing": what went wrong, without a traceback or a note."""
    text = one_line(str(exc))
    name = type(exc).__name__
    return one_line(f"{name}: {text}" if text else name)


# ---- naming what a field should have been ---------------------------------------------------


def _json_name(attr_name: str) -> str:
    """The JSON key of an lsprotocol attribute (lsprotocol's own camelCase rename)."""
    name = attr_name[:-1] if attr_name.endswith("_") else attr_name
    first, *rest = name.split("_")
    return first + "".join(p.title() for p in rest)


def _validators_of(field: attrs.Attribute | None) -> list[Any]:
    out: list[Any] = []
    todo = [field.validator] if field is not None and field.validator is not None else []
    while todo:
        v = todo.pop()
        out.append(v)
        todo.extend(getattr(v, "_validators", ()) or ())
        inner = getattr(v, "validator", None)
        if inner is not None:
            todo.append(inner)
    return out


def _int_range(field: attrs.Attribute | None) -> tuple[int, int] | None:
    found = _validators_of(field)
    if validators.uinteger_validator in found:
        return validators.UINTEGER_MIN_VALUE, validators.UINTEGER_MAX_VALUE
    if validators.integer_validator in found:
        return validators.INTEGER_MIN_VALUE, validators.INTEGER_MAX_VALUE
    return None


def _range_text(lo: int, hi: int) -> str:
    if lo == 0:
        return f"a non-negative integer up to {hi}"
    return f"an integer from {lo} to {hi}"


def _expected(tp: Any, field: attrs.Attribute | None = None) -> str:
    """A reader's name for a type: "a string", "an object", "a non-negative integer"."""
    if tp is int:
        bounds = _int_range(field)
        return _range_text(*bounds) if bounds else "an integer"
    if tp is str:
        return "a string"
    if tp is bool:
        return "true or false"
    if tp is float:
        return "a number"
    if tp is NONE_TYPE or tp is None:
        return "null"
    if tp is Any:
        return "a value"
    if isinstance(tp, type) and attrs.has(tp):
        return "an object"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [json.dumps(m.value) for m in tp]
        return "one of " + ", ".join(values[:8]) + (", …" if len(values) > 8 else "")
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or origin is pytypes.UnionType:
        parts: list[str] = []
        for arg in args:
            if arg is NONE_TYPE:
                continue
            text = _expected(arg, field)
            if text not in parts:
                parts.append(text)
        if NONE_TYPE in args:
            parts.append("null")
        return " or ".join(parts)
    if origin is typing.Literal:
        return "one of " + ", ".join(json.dumps(a) for a in args)
    if origin in (list, tuple, set, frozenset, collections.abc.Sequence,
                  collections.abc.MutableSequence, collections.abc.Set):
        return "an array"
    if origin in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        return "an object"
    return getattr(tp, "__name__", str(tp))


def got(value: Any) -> str:
    """A received value as JSON would show it (``null``, ``'x'``, ``an array``), short: the
    sender wrote JSON, so Python's ``None`` or a 10 kB repr would not tell them what they sent."""
    if value is _MISSING:
        return "nothing"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:39] + "…")
    if isinstance(value, int | float):
        text = json.dumps(value)
        return text if len(text) <= 40 else text[:39] + "…"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def _dotted(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "message"


def _sub_exceptions(exc: BaseException) -> tuple[BaseException, ...] | None:
    """The parts of an exception group (cattrs' errors are groups; 3.10 has the backport)."""
    subs = getattr(exc, "exceptions", None)
    if isinstance(subs, tuple | list) and all(isinstance(e, BaseException) for e in subs):
        return tuple(subs)
    return None


def _problems(
    exc: BaseException,
    path: tuple[str | int, ...],
    raw: Any,
    tp: Any,
    field: attrs.Attribute | None = None,
) -> collections.abc.Iterator[str]:
    """What is wrong where, from cattrs' nested errors and the raw JSON they came from.

    cattrs says which attribute failed in notes on each sub-exception; the value the client
    sent is looked up along the same path, so the message can say what it got.
    """
    subs = _sub_exceptions(exc)
    if subs is None:
        yield f"{_dotted(path)}: expected {_expected(tp, field)}, got {got(raw)}"
        return
    if isinstance(tp, type) and attrs.has(tp) and not isinstance(raw, dict):
        # Every attribute failed because the value is not an object at all: say that once.
        yield f"{_dotted(path)}: expected an object, got {got(raw)}"
        return
    fields = attrs.fields_dict(tp) if isinstance(tp, type) and attrs.has(tp) else {}
    for sub in subs:
        notes = getattr(sub, "__notes__", ())
        attr_note = next((n for n in notes if isinstance(n, AttributeValidationNote)), None)
        item_note = next((n for n in notes if isinstance(n, IterableValidationNote)), None)
        if attr_note is not None:
            key = _json_name(attr_note.name)
            child = raw.get(key, _MISSING) if isinstance(raw, dict) else _MISSING
            sub_field = fields.get(attr_note.name)
            if child is _MISSING and isinstance(sub, KeyError):
                yield (f"{_dotted((*path, key))}: missing "
                       f"(expected {_expected(attr_note.type, sub_field)})")
                continue
            yield from _problems(sub, (*path, key), child, attr_note.type, sub_field)
        elif item_note is not None:
            index = item_note.index
            in_list = isinstance(raw, list) and isinstance(index, int) and 0 <= index < len(raw)
            in_dict = isinstance(raw, dict) and index in raw
            child = raw[index] if in_list or in_dict else _MISSING
            yield from _problems(sub, (*path, index), child, item_note.type)
        elif m := _RANGE_ERROR.match(one_line(str(sub))):
            key = _json_name(m["attr"])
            child = raw.get(key, _MISSING) if isinstance(raw, dict) else _MISSING
            yield (f"{_dotted((*path, key))}: expected {_range_text(int(m['lo']), int(m['hi']))}"
                   f", got {got(child)}")
        elif _sub_exceptions(sub) is not None:
            yield from _problems(sub, path, raw, tp, field)
        else:
            yield f"{_dotted(path)}: {one_line(str(sub)) or type(sub).__name__}"


def describe_params_error(method: str, exc: BaseException, message: dict[str, Any],
                          message_type: Any) -> str:
    """One line naming every field (up to three) that kept ``message`` from its type."""
    found: list[str] = []
    for problem in _problems(exc, (), message, message_type):
        if problem not in found:
            found.append(problem)
    if not found:
        found.append(f"params: {exception_text(exc)}")
    text = "; ".join(found[:MAX_PROBLEMS])
    if len(found) > MAX_PROBLEMS:
        text += f" (and {len(found) - MAX_PROBLEMS} more)"
    return one_line(f"{method}: {text}")
