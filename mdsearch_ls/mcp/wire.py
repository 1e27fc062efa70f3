"""The stdio wire in front of the SDK: every line a client sends gets an answer.

The SDK's stdio transport parses each line with pydantic's JSON parser, which refuses a lone
surrogate escape (``"\\ud800"``, half of an emoji a client cut in two), and hands the failure to
the server loop, which drops it: the request is never answered and nothing is logged. Invalid
JSON meets the same fate. So each line is checked here first, with Python's parser, which
accepts both forms the SDK refuses:

* a line that is not JSON gets ``-32700 Parse error`` (``id`` null, as JSON-RPC 2.0 says);
* a request holding a lone surrogate gets ``-32602 Invalid params`` naming the field (a
  notification is logged and dropped: it has no one to answer);
* everything else goes to the SDK as it came.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from io import TextIOWrapper
from typing import Any

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from mdsearch_ls.engine.api import lone_surrogate_field

log = logging.getLogger(__name__)

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_ECHO = 80


def problem_of(line: str) -> types.JSONRPCError | None:
    """The error answer a line needs instead of the SDK, or None when the SDK can take it."""
    if not line.strip():
        return None
    try:
        message = json.loads(line)
    except ValueError as exc:
        return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(
            code=types.PARSE_ERROR, message=f"Parse error: not JSON ({exc.msg} at character "
                                            f"{exc.pos})"))
    if not _SURROGATE_ESCAPE.search(line) or not isinstance(message, dict):
        return None
    field = lone_surrogate_field(message.get("params"), "params")
    if field is None:
        return None
    msg_id = message.get("id")
    if not isinstance(msg_id, str | int) or isinstance(msg_id, bool):
        log.warning("dropped a notification %s: %s holds a lone surrogate",
                    str(message.get("method"))[:_ECHO], field)
        return None
    return types.JSONRPCError(jsonrpc="2.0", id=msg_id, error=types.ErrorData(
        code=types.INVALID_PARAMS,
        message=f"Invalid params: {field} holds a lone surrogate (half of a UTF-16 pair, such "
                f"as an emoji cut in two); send whole characters"))


class _CheckedLines:
    """The process's stdin lines, the ones the SDK would drop answered here instead."""

    def __init__(self) -> None:
        text = TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
        self._lines = anyio.wrap_file(text)
        self.write: Any = None
        self.ready = anyio.Event()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._checked()

    async def _checked(self) -> AsyncIterator[str]:
        async for line in self._lines:
            error = problem_of(line)
            if error is None:
                yield line
                continue
            log.info("answered a request the SDK cannot parse: %s", error.error.message[:120])
            await self.ready.wait()
            await self.write.send(SessionMessage(error))


@asynccontextmanager
async def checked_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's ``stdio_server`` over :class:`_CheckedLines`."""
    lines = _CheckedLines()
    async with stdio_server(stdin=lines) as (read_stream, write_stream):  # type: ignore[arg-type]
        lines.write = write_stream
        lines.ready.set()
        yield read_stream, write_stream
