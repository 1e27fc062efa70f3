"""The MCP protocol glue: the official SDK's ``MCPServer`` over stdio, serving :mod:`.tools`.

What this module decides, and nothing else:

* **Start-up order.** The SDK is imported first and the server answers ``initialize`` as soon as
  it reads it; the engine import, the model and the first index start on background threads
  when the :class:`Library` is made, so nothing slow stands between a client and its handshake.
* **Tool calls.** ``list_tools`` and ``call_tool`` are overridden (public methods of
  ``MCPServer``): the input schemas are written by hand (short, with the few words a model needs)
  and arguments are checked by :func:`tools.normalise` and the engine's request types instead of
  a pydantic model, so guessed argument names are accepted, unknown ones are refused with the
  valid list, and every error reads as plain text. Each call runs on a worker thread.
* **Resources.** ``mdsearch://note/{+path}``: a template, plus one resource per indexed note,
  read-only, through the same path checks as the tools.
* **Exit.** When stdin closes, the server loop ends; the watcher stops, every writer is asked to
  stop and, if one does not within a few seconds, its lock is released and the process exits
  anyway (an interrupted write is repaired by the next open).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import anyio
import anyio.to_thread
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from mcp.types import Resource as MCPResource
from mcp.types import ResourceTemplate as MCPResourceTemplate
from mcp.types import Tool as MCPTool

from mdsearch_ls import __version__
from mdsearch_ls.config import Settings
from mdsearch_ls.mcp import tools
from mdsearch_ls.mcp.roots import Library

log = logging.getLogger(__name__)

NOTE_PREFIX = "mdsearch://note/"
RESOURCE_PAGE = 200
"""Notes per ``resources/list`` page."""
NOTE_TEMPLATE = "mdsearch://note/{+path}"

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                             open_world_hint=False)
_WRITES_INDEX = ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                idempotent_hint=True, open_world_hint=False)


def note_uri(path: str) -> str:
    """The resource URI of a note path as tools show it (spaces and the like %-encoded)."""
    return NOTE_PREFIX + quote(path, safe="/")


class NotesServer(MCPServer):
    """``MCPServer`` whose tools and resources are the :class:`Library`'s."""

    def __init__(self, library: Library, *, token_verifier: Any = None) -> None:
        """``token_verifier``: the SDK's ``TokenVerifier`` that guards HTTP (:mod:`.http`)."""
        self.library = library
        auth = None
        if token_verifier is not None:
            from mcp.server.auth.settings import AuthSettings

            # Required fields of the SDK's settings; no OAuth server is offered or advertised.
            auth = AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None)
        super().__init__(
            name="mdsearch",
            title="mdsearch: markdown notes search",
            version=__version__,
            instructions=tools.INSTRUCTIONS,
            log_level="WARNING",
            token_verifier=token_verifier,
            auth=auth,
        )

    async def run_stdio_async(self) -> None:
        """The SDK's stdio loop behind :func:`wire.checked_stdio`: a line it would drop (not
        JSON, a lone surrogate) is answered there instead."""
        from mdsearch_ls.mcp.wire import checked_stdio

        async with checked_stdio() as (read_stream, write_stream):
            await self._lowlevel_server.run(
                read_stream, write_stream, self._lowlevel_server.create_initialization_options())

    # ---- tools ----------------------------------------------------------------------------------

    async def list_tools(self) -> list[MCPTool]:
        return [
            MCPTool(
                name=spec.name,
                description=spec.description,
                input_schema=spec.schema,
                annotations=_WRITES_INDEX if spec.name == "update_files" else _READ_ONLY,
            )
            for spec in tools.SPECS.values()
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Any = None
    ) -> CallToolResult:
        if name not in tools.SPECS:
            raise ToolError(f"unknown tool {name!r}; tools: {', '.join(tools.SPECS)}")
        try:
            answer = await anyio.to_thread.run_sync(tools.call, self.library, name, arguments,
                                                   abandon_on_cancel=True)
        except tools.ToolInputError as exc:
            raise ToolError(str(exc)) from None
        return CallToolResult(content=[TextContent(type="text", text=answer.text)],
                              structured_content=answer.structured)

    # ---- resources ----------------------------------------------------------------------------

    async def _handle_list_resources(self, ctx: Any, params: Any) -> Any:
        """``resources/list`` in pages of :data:`RESOURCE_PAGE` notes, the cursor an offset
        (the SDK's own handler returns every note at once: a 50,000-note vault in one answer)."""
        from mcp.types import ListResourcesResult

        cursor = getattr(params, "cursor", None)
        try:
            start = int(cursor) if cursor else 0
        except ValueError:
            start = -1
        if start < 0:
            raise ValueError(f"invalid cursor {tools.cut_echo(str(cursor))!r}: pass back the "
                             f"nextCursor of the previous page")
        notes = await self.list_resources()
        page = notes[start:start + RESOURCE_PAGE]
        more = start + RESOURCE_PAGE < len(notes)
        return ListResourcesResult(resources=page,
                                   next_cursor=str(start + RESOURCE_PAGE) if more else None)

    async def list_resources(self) -> list[MCPResource]:
        notes = await anyio.to_thread.run_sync(self.library.notes, abandon_on_cancel=True)
        out = []
        for folder, rel in notes:
            shown = self.library.display(folder, rel)
            out.append(MCPResource(uri=note_uri(shown), name=shown, mime_type="text/markdown"))
        return out

    async def list_resource_templates(self) -> list[MCPResourceTemplate]:
        return [MCPResourceTemplate(
            uri_template=NOTE_TEMPLATE, name="note", mime_type="text/markdown",
            description="A markdown note, read-only; path as search results show it.",
        )]

    async def read_resource(self, uri: Any, context: Any = None) -> Iterable[ReadResourceContents]:
        text_uri = str(uri)
        if not text_uri.startswith(NOTE_PREFIX):
            raise ResourceNotFoundError(f"unknown resource {text_uri}; notes are "
                                        f"{NOTE_TEMPLATE}")
        path = unquote(text_uri[len(NOTE_PREFIX):])
        try:
            _loc, text = await anyio.to_thread.run_sync(
                tools.answered, self.library, lambda: self.library.read(path),
                abandon_on_cancel=True)
        except tools.ToolInputError as exc:
            raise ResourceNotFoundError(str(exc)) from None
        return [ReadResourceContents(content=text, mime_type="text/markdown")]


def check_roots(roots: Sequence[str]) -> list[Path]:
    """The roots as folders, or ValueError naming the first one that is not a folder."""
    out = []
    for r in roots:
        p = Path(r).expanduser()
        if not p.is_dir():
            raise ValueError(f"--root {r}: not a folder" if p.exists()
                             else f"--root {r}: no such folder")
        out.append(p.resolve())
    return out


def run(roots: Sequence[str], settings: Settings, *, http: str | None = None,
        token_file: str | None = None, allow_hosts: Sequence[str] = ()) -> int:
    """Serve MCP over stdio until stdin closes, or over HTTP (``http``: ``HOST:PORT``) until
    SIGINT/SIGTERM; the process exit code."""
    from mdsearch_ls.mcp import http as web

    try:
        folders = check_roots(roots)
        listen = web.parse_listen(http) if http is not None else None
        if listen is not None and not listen.loopback and token_file is None:
            raise ValueError(f"--http {http}: listening beyond this machine needs --token-file "
                             f"FILE (one 'NAME TOKEN' a line); without one, bind 127.0.0.1")
        if token_file is not None and listen is None:
            raise ValueError("--token-file guards --http; stdio needs no token")
        verifier = (web.MembersVerifier(web.TokenFile(Path(token_file).expanduser()))
                    if token_file is not None else None)
        sock = web.bind(listen) if listen is not None else None
    except (ValueError, web.HttpSetupError) as exc:
        print(f"mdsearch mcp: error: {exc}", file=sys.stderr)
        return 2
    library = Library(folders, settings, remote=listen is not None)
    server = NotesServer(library, token_verifier=verifier)
    try:
        if listen is None:
            anyio.run(server.run_stdio_async)
        else:
            web.serve(server, listen, sock, token_file, list(allow_hosts))
    except KeyboardInterrupt:
        pass
    except BaseException as exc:
        if not _client_gone(exc):
            raise
        log.info("mdsearch mcp: the client closed its end of the pipe")  # no traceback
    finally:
        clean = library.close()
        log.info("mdsearch mcp: %s, exiting%s", "stopped" if listen else "stdin closed",
                 "" if clean else " (an index write was cut short; the next start repairs it)")
        sys.stderr.flush()
    # Writer threads are not daemons and a library thread may still run (the model load):
    # exit now rather than wait for them; the locks are released and nothing is mid-write.
    os._exit(0)


def _client_gone(exc: BaseException) -> bool:
    """Whether ``exc`` only says the client went away mid-answer (killed, or closed stdout):
    an ordinary end, not a crash worth 60 lines of traceback."""
    group = getattr(exc, "exceptions", None)  # an ExceptionGroup from the SDK's task group
    if isinstance(group, tuple) and group:
        return all(_client_gone(e) for e in group)
    return isinstance(exc, BrokenPipeError | ConnectionResetError | anyio.ClosedResourceError
                      | anyio.BrokenResourceError)
