"""``mdsearch search --server URL``: the CLI as a client of a team's ``mdsearch mcp --http``.

The notes and their index live on another machine; this asks that server's ``search_markdown``
tool through the MCP SDK's own streamable HTTP client and prints the answer with the same
printer as a local search, so the output (formats, order, lines, scores, excerpts) is the same.
The query is parsed here first, so a mistyped filter is reported before any request, and the
query words are marked as a local search marks them.

What the server's tool cannot take (``--phrase``, ``--type``, ``--min-score``, ``--explain``,
``--open``, the index settings) is refused with a message rather than silently dropped: typed
``"exact phrase"`` and ``type:md`` inside the query still work, the server parses them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from mdsearch_ls.cli.common import UsageError
from mdsearch_ls.cli.output import QueryFailed, _Printer, print_queries
from mdsearch_ls.config import cli_settings
from mdsearch_ls.engine.api import Hit
from mdsearch_ls.engine.errors import IndexOpenError

TOKEN_ENV = "MDSEARCH_TOKEN"
TIMEOUT_S = 60.0
"""A search over HTTP that has not answered in a minute is a server in trouble: say so."""
WHOLE = 100_000
"""The largest ``max_tokens`` the tool takes: a terminal shows excerpts, cut here, not there."""


class RemoteError(IndexOpenError):
    """The server could not be reached or refused us; the message says what to do (exit 4, as
    an index that cannot be opened)."""


def server_url(url: str) -> str:
    """``http://host:port`` as typed, completed with the SDK's ``/mcp`` path when it has none."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--server: expected a URL like http://host:8765/mcp, got {url!r}")
    path = parts.path if parts.path not in ("", "/") else "/mcp"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def read_token(token_file: str | None) -> str | None:
    """The bearer token: ``--token-file`` (the token alone, or a member line ``NAME TOKEN``;
    blank lines and ``#`` comments skipped), else ``$MDSEARCH_TOKEN``, else none (a loopback
    server started without a token file takes none)."""
    if token_file:
        try:
            text = Path(token_file).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--token-file: cannot read {token_file}: "
                             f"{getattr(exc, 'strerror', None) or exc}") from None
        for line in text.splitlines():
            words = line.split()
            if words and not words[0].startswith("#"):
                return words[-1]
        raise UsageError(f"--token-file: {token_file} holds no token")
    token = os.environ.get(TOKEN_ENV, "").strip()
    return token or None


def check_args(args: argparse.Namespace) -> None:
    """Refuse what a search through the server cannot honour, naming the flag."""
    refused = [flag for flag, given in (
        ("--root", args.root is not None),
        ("--phrase", bool(args.phrase)),
        ("--type", bool(args.type)),
        ("--min-score", args.min_score is not None),
        ("--explain", bool(args.explain)),
        ("--open", args.open is not None),
        ("--no-update", bool(args.no_update)),
        ("--yes", bool(args.yes)),
    ) if given]
    refused += [info.flag for info in cli_settings()
                if info.name != "mode" and getattr(args, info.name, None) is not None]
    if refused:
        raise UsageError(
            f"--server searches the server's own index with its settings: {', '.join(refused)} "
            f"cannot be used with it (type \"exact phrase\" or type:md in the query instead of "
            f"--phrase or --type)")


# ---- what the printer reads, built from the tool's structured answer ---------------------------


def make_hit(path: str, title: str, breadcrumb: str, start_line: int, end_line: int,
             score: float | None, keyword_rank: int | None, chunk_id: str, text: str) -> Hit:
    """A hit as a local search makes it (the engine's own ``Hit``: its JSON, page, format and
    snippet are a local hit's by construction), from the fields a server sent."""
    return Hit(path=path, title=title, breadcrumb=breadcrumb, start_line=start_line,
               end_line=end_line, score=score, chunk_id=chunk_id,
               keyword_rank=keyword_rank, text=text)


class RemoteIndex:
    """The server's index state, as ``index_status`` reports it."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    def __getattr__(self, name: str) -> Any:
        try:
            return self.raw[name]
        except KeyError:
            raise AttributeError(name) from None

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)


class RemoteResult(NamedTuple):
    hits: list[Any]
    notes: tuple[str, ...]
    index: RemoteIndex


class _RemoteRoot:
    """Stands where a local search has its folder: a hit's path joins it unchanged (the server
    shows paths relative to its folders), and as text it is the server's URL."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __truediv__(self, rel: str) -> PurePosixPath:
        return PurePosixPath(rel)

    def __str__(self) -> str:
        return self.url


_SETEXT = re.compile(r"[ \t]{0,3}(=+|-+)[ \t]*")


def _starts_with_heading(text: str) -> bool:
    """Whether a section's text begins with its heading line (ATX ``#`` or setext underline)."""
    lines = text.split("\n", 2)
    return lines[0].lstrip().startswith("#") or (
        len(lines) > 1 and bool(lines[0].strip()) and _SETEXT.fullmatch(lines[1]) is not None)


def _result(structured: dict[str, Any], texts: Sequence[str]) -> RemoteResult:
    hits = []
    for n, (r, text) in enumerate(zip(structured.get("results") or [], texts, strict=True)):
        crumb = str(r.get("heading_path") or "")
        # The printer cuts an excerpt from a section's markdown, its heading line first (and
        # shows the heading when the section has no text): the same input a local search gives.
        title = str(r.get("title") or crumb.rsplit(" > ", 1)[-1])
        heading = _starts_with_heading(text)  # read_section's text keeps its heading
        hits.append(make_hit(
            path=str(r["path"]), title=title, start_line=int(r["start_line"]) - 1,
            end_line=int(r["end_line"]) - 1, breadcrumb=crumb,
            score=None if r.get("score") is None else float(r["score"]),
            keyword_rank=r.get("keyword_rank"),
            chunk_id=f"{n}:{r['path']}:{r['start_line']}",
            text=text if heading or not title else f"# {title}\n{text}"))
    return RemoteResult(hits, tuple(structured.get("notes") or ()),
                        RemoteIndex(dict(structured.get("index") or {})))


# ---- the client ---------------------------------------------------------------------------------


def _tool_error(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content).strip() or "the tool failed"


class _HttpRefused(Exception):
    """The server answered a request with an HTTP error status, which the SDK's client reports
    only as "Server returned an error response": the status is what a person can act on."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status


async def _session_run(url: str, token: str | None, jobs: list[dict[str, Any]]
                       ) -> list[tuple[dict[str, Any] | None, list[str], str | None]]:
    """Each job's structured answer and its hits' full texts, or its error, over one session."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    refused: list[int] = []

    async def record(response: Any) -> None:
        if response.status_code >= 400:
            refused.append(int(response.status_code))

    try:
        return await _jobs(url, headers, record, jobs)
    except Exception:
        if refused:
            raise _HttpRefused(refused[0]) from None
        raise


async def _jobs(url: str, headers: dict[str, str], record: Any, jobs: list[dict[str, Any]]
                ) -> list[tuple[dict[str, Any] | None, list[str], str | None]]:
    out: list[tuple[dict[str, Any] | None, list[str], str | None]] = []
    async with httpx2.AsyncClient(headers=headers, timeout=TIMEOUT_S,
                                  event_hooks={"response": [record]}) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        for arguments in jobs:
            res = await session.call_tool("search_markdown", {**arguments, "max_tokens": WHOLE})
            if res.is_error:
                out.append((None, [], _tool_error(res)))
                continue
            structured = dict(res.structured_content or {})
            texts = []
            for r in structured.get("results") or []:
                text = str(r.get("text") or "")
                if r.get("truncated"):  # an excerpt: read the section whole, as a local hit has it
                    more = await session.call_tool("read_section", {
                        "path": r["path"], "start_line": r["start_line"],
                        "end_line": r["end_line"], "max_tokens": WHOLE})
                    if not more.is_error and more.structured_content:
                        text = str(more.structured_content.get("text") or text)
                texts.append(text)
            out.append((structured, texts, None))
    return out


def _explain_failure(url: str, exc: BaseException) -> str:
    """What went wrong in words a person can act on (the SDK wraps errors in groups)."""
    while getattr(exc, "exceptions", None):  # an exception group (Python 3.11+, or its backport)
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    name = type(exc).__name__
    status = getattr(exc, "status_code", None) or getattr(
        getattr(exc, "response", None), "status_code", None)
    if status == 401:
        return (f"{url} refused the token (401): set {TOKEN_ENV} or --token-file to a member's "
                f"token from the server's token file")
    if status in (403, 421):
        return (f"{url} refused this host name (HTTP {status}): the server accepts only the "
                f"names it was started for (mdsearch mcp --allow-host NAME adds one)")
    if status is not None:
        return f"{url} answered HTTP {status}: is it an mdsearch mcp --http server?"
    if "Timeout" in name:
        return f"{url} did not answer within {TIMEOUT_S:.0f} s"
    if "Connect" in name or isinstance(exc, OSError):
        return f"cannot reach {url} ({exc or name}): is `mdsearch mcp --http` running there?"
    return f"searching through {url} failed: {name}: {exc}"


def run(args: argparse.Namespace, queries: list[Any]) -> int:
    """Send each parsed query to the server and print its answer; the exit code."""
    check_args(args)
    url = server_url(args.server)
    token = read_token(args.token_file)
    filters = {"path": args.path, "tag": args.tag, "modified": args.modified}
    base = {k: v for k, v in filters.items() if v}
    jobs = [{"query": q.text, "limit": args.k, **base, **({"mode": args.mode} if args.mode else {})}
            for q in queries if q.error is None]
    try:
        answers = asyncio.run(_session_run(url, token, jobs))
    except Exception as exc:  # every way a network call fails ends in one message
        raise RemoteError(_explain_failure(url, exc)) from None
    printer = _Printer(args, _RemoteRoot(url), args.mode or "hybrid")  # type: ignore[arg-type]
    by_query = dict(zip(map(id, [q for q in queries if q.error is None]), answers, strict=True))

    def search(q: Any) -> RemoteResult:
        structured, texts, error = by_query[id(q)]
        if structured is None:
            raise QueryFailed(str(error))
        printer.mode = str(structured.get("mode") or printer.mode)
        return _result(structured, texts)  # its notes say how complete the index is

    return print_queries(args, printer, queries, search)[0]
