"""Every request gets an answer: malformed JSON-RPC, written by hand to a real server process.

pytest-lsp refuses to send malformed messages, so these tests start ``python -m mdsearch_ls
serve`` themselves and write Content-Length frames by hand. A reader thread parses what the
server writes into a queue, so every wait has a deadline (2 s for an answer) and a server that
never answers fails the test instead of hanging it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.stdio_client import ABSENT, StdioClient

from .conftest import SERVER_CMD

pytestmark = pytest.mark.slow

ANSWER_TIMEOUT = 2.0  # every answer, error or not, must come within this
READY_TIMEOUT = 180.0  # model load and the first index of a one-note folder
LIFECYCLE_TIMEOUT = 30.0  # shutdown closes the folder indexes; exit ends the process

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND = -32700, -32600, -32601
INVALID_PARAMS, INTERNAL_ERROR, SERVER_NOT_INITIALIZED = -32602, -32603, -32002

NOTE = "# Sourdough starter\n\nFeed the starter flour and water every day; keep it warm.\n"


class RawServer(StdioClient):
    """A server process and the shared stdio client, with this file's checks: every answer
    comes within ANSWER_TIMEOUT and carries no traceback. ``request`` sends and returns the id
    (these tests look at whole responses, errors included)."""

    def __init__(self, root: Path, cache: Path, stderr_path: Path) -> None:
        env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "ANONYMIZED_TELEMETRY": "False"}
        super().__init__(SERVER_CMD, env, stderr=stderr_path)
        self.root = root
        self.stderr_path = stderr_path
        self.responses: list[Any] = []  # every response seen, for the no-traceback check
        self._ids = iter(range(1000, 10**6))  # clear of the ids the tests write by hand

    def request(self, method: str, params: Any = ABSENT, *,  # type: ignore[override]
                msg_id: Any = ABSENT) -> Any:
        return self.send_request(method, params, msg_id=msg_id)

    def answer(self, msg_id: Any, timeout: float = ANSWER_TIMEOUT) -> dict[str, Any]:
        """The response to ``msg_id``; notifications met on the way are dropped."""
        before = len(self.seen)
        try:
            msg = super().answer(msg_id, timeout)
        except TimeoutError:
            raise AssertionError(f"no answer to request {msg_id!r} within {timeout}s") from None
        except EOFError as exc:
            raise AssertionError(str(exc)) from None
        for seen in self.seen[before:]:
            if isinstance(seen, dict) and "method" not in seen:
                self.responses.append(seen)
                assert_no_traceback(seen)
        return msg

    def call(self, method: str, params: Any = ABSENT, timeout: float = ANSWER_TIMEOUT) -> Any:
        return self.answer(self.request(method, params), timeout)

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    # -- lifecycle -------------------------------------------------------------------------

    def initialize(self, *, initialized: bool = True) -> dict[str, Any]:
        reply = self.call("initialize", {
            "processId": os.getpid(),  # the server exits with the test run, whatever happens
            "rootUri": self.root.as_uri(),
            "capabilities": {},
            "workspaceFolders": [{"uri": self.root.as_uri(), "name": self.root.name}],
        }, timeout=LIFECYCLE_TIMEOUT)
        assert "result" in reply, reply
        if initialized:
            self.notify("initialized", {})
        return reply["result"]

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            status = self.call("workspace/executeCommand", {"command": "mdsearch.status"})
            st = status["result"]
            if st["state"] == "ready" and all(f["state"] == "ready" for f in st["folders"]):
                return
            assert time.monotonic() < deadline, f"not ready after {READY_TIMEOUT}s: {st}"
            time.sleep(0.2)  # polling interval of a condition, not synchronisation

    def wait_exit(self, timeout: float = LIFECYCLE_TIMEOUT) -> int:
        return super().wait_exit(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                self.answer(self.request("shutdown"), LIFECYCLE_TIMEOUT)
                self.notify("exit")
                self.proc.wait(timeout=LIFECYCLE_TIMEOUT)
        self.kill()


def assert_no_traceback(response: dict[str, Any]) -> None:
    text = json.dumps(response)
    for leak in ("Traceback", 'File \\"', "site-packages"):
        assert leak not in text, f"{leak!r} leaked into a response: {text}"


def assert_error(response: dict[str, Any], code: int, *contains: str) -> str:
    assert "error" in response and "result" not in response, response
    error = response["error"]
    assert error["code"] == code, response
    message = error["message"]
    assert "\n" not in message and len(message) <= 500, message
    for part in contains:
        assert part in message, f"{part!r} not in {message!r}"
    return message


def start(tmp: Path, name: str, *, note: bool = False) -> RawServer:
    root = tmp / name / "notes"
    root.mkdir(parents=True)
    if note:
        (root / "sourdough.md").write_text(NOTE, encoding="utf-8")
    return RawServer(root, tmp / name / "cache", tmp / name / "stderr.log")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    """One server over a one-note folder, initialized and indexed, for the whole module."""
    srv = start(tmp_path_factory.mktemp("raw"), "shared", note=True)
    try:
        srv.initialize()
        srv.wait_ready()
        yield srv
    finally:
        srv.close()


def assert_still_serves(srv: RawServer) -> None:
    """A normal request right after: answered in time, with the note it should find."""
    reply = srv.call("workspace/symbol", {"query": "sourdough starter"})
    assert "result" in reply, reply
    assert [s["name"] for s in reply["result"]] == ["Sourdough starter"], reply


HOVER_DOC = {"uri": "file:///nowhere/note.md"}

MALFORMED = [
    # (test id, method, params, what the message must name)
    ("symbol-null", "workspace/symbol", None, ["params: expected an object, got null"]),
    ("symbol-empty", "workspace/symbol", {}, ["params.query: missing"]),
    ("symbol-array", "workspace/symbol", [], ["params: expected an object, got an array"]),
    ("symbol-absent", "workspace/symbol", ABSENT, ["params: missing"]),
    # Not read as the text "None" or "5" and searched: a string is a string.
    ("symbol-query-null", "workspace/symbol", {"query": None},
     ["params.query: expected a string, got null"]),
    ("symbol-query-number", "workspace/symbol", {"query": 5},
     ["params.query: expected a string, got 5"]),
    ("hover-null", "textDocument/hover", None, ["params: expected an object, got null"]),
    ("hover-empty", "textDocument/hover", {},
     ["params.textDocument: missing", "params.position: missing"]),
    ("hover-line-x", "textDocument/hover",
     {"textDocument": HOVER_DOC, "position": {"line": "x", "character": 0}},
     ["params.position.line", "non-negative integer", "got 'x'"]),
    ("hover-line-negative", "textDocument/hover",
     {"textDocument": HOVER_DOC, "position": {"line": -1, "character": 0}},
     ["params.position.line", "got -1"]),
    ("hover-line-1e12", "textDocument/hover",
     {"textDocument": HOVER_DOC, "position": {"line": 10**12, "character": 0}},
     ["params.position.line", "got 1000000000000"]),
    ("hover-no-character", "textDocument/hover",
     {"textDocument": HOVER_DOC, "position": {"line": 0}},
     ["params.position.character: missing"]),
    ("hover-uri-null", "textDocument/hover",
     {"textDocument": {"uri": None}, "position": {"line": 0, "character": 0}},
     ["params.textDocument.uri: expected a string, got null"]),
    ("hover-document-number", "textDocument/hover",
     {"textDocument": 7, "position": {"line": 0, "character": 0}},
     ["params.textDocument: expected an object, got 7"]),
    ("command-missing", "workspace/executeCommand", {"arguments": []},
     ["params.command: missing"]),
    ("command-arguments-number", "workspace/executeCommand",
     {"command": "mdsearch.search", "arguments": 5}, ["params.arguments"]),
    # Half of an emoji a client cut in two: the tokenizer cannot take it (was -32603).
    ("symbol-lone-surrogate", "workspace/symbol", {"query": "bread \ud83c"},
     ["params.query holds a lone surrogate"]),
    ("command-lone-surrogate", "workspace/executeCommand",
     {"command": "mdsearch.search", "arguments": [{"query": "\udc00 starter"}]},
     ["params.arguments[0].query holds a lone surrogate"]),
]


@pytest.mark.parametrize(("method", "params", "names"), [m[1:] for m in MALFORMED],
                         ids=[m[0] for m in MALFORMED])
def test_malformed_params_answer_invalid_params(server: RawServer, method: str, params: Any,
                                                names: list[str]) -> None:
    msg_id = server.request(method, params)
    message = assert_error(server.answer(msg_id), INVALID_PARAMS, f"{method}: ", *names)
    print(f"{method} {json.dumps(params) if params is not ABSENT else '(no params)'}: {message}")
    assert_still_serves(server)


def test_malformed_notification_is_logged_once_and_ignored(server: RawServer) -> None:
    seen = len(server.responses)
    server.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///n.md"}})
    server.notify("textDocument/didChange", None)
    assert_still_serves(server)  # the log lines are written before this request is read
    log = server.stderr()
    did_open = [line for line in log.splitlines() if "textDocument/didOpen: params" in line]
    did_change = [line for line in log.splitlines() if "textDocument/didChange: params" in line]
    assert len(did_open) == 1 and "params.textDocument.languageId: missing" in did_open[0], log
    assert len(did_change) == 1 and "expected an object, got null" in did_change[0], log
    # No response went out for a notification (only the two workspace/symbol answers above).
    assert all(r.get("id") is not None for r in server.responses[seen:]), server.responses


def test_unknown_methods(server: RawServer) -> None:
    assert_error(server.call("mdsearch/noSuchMethod", {}), METHOD_NOT_FOUND,
                 "mdsearch/noSuchMethod")
    # A $/ request must be answered MethodNotFound (LSP 3.17); a $/ notification is ignored.
    assert_error(server.call("$/noSuchThing", {}), METHOD_NOT_FOUND)
    server.notify("$/noSuchThing", {"x": 1})
    server.notify("$/cancelRequest", {"id": 999_999})
    assert_still_serves(server)


def test_handler_exception_answers_without_traceback(server: RawServer) -> None:
    reply = server.call("workspace/executeCommand", {
        "command": "mdsearch.search", "arguments": [{"query": "bread", "filters": {"tag": 5}}],
    })
    # -32603 from the generic layer today; the engine's own validation may make it -32602.
    assert reply["error"]["code"] in (INVALID_PARAMS, INTERNAL_ERROR), reply
    message = assert_error(reply, reply["error"]["code"])
    assert "data" not in reply["error"] or "traceback" not in json.dumps(reply["error"]["data"])
    if reply["error"]["code"] == INTERNAL_ERROR:
        assert "workspace/executeCommand failed: " in message, message
        assert "Traceback" in server.stderr()  # the traceback went to the log instead
    assert_still_serves(server)


def test_invalid_messages_answer_invalid_request(server: RawServer) -> None:
    server.send_body(b"{this is not json")
    assert_error(server.answer(None), PARSE_ERROR, "Parse error")
    server.send([{"jsonrpc": "2.0", "id": 1, "method": "workspace/symbol"}])
    assert_error(server.answer(None), INVALID_REQUEST, "batch")
    server.send({"id": 77, "method": "workspace/symbol", "params": {"query": "x"}})
    assert_error(server.answer(77), INVALID_REQUEST, "jsonrpc")
    server.send({"jsonrpc": "2.0", "id": {"an": "object"}, "method": "workspace/symbol"})
    assert_error(server.answer(None), INVALID_REQUEST, "id")
    server.send({"jsonrpc": "2.0", "id": 78})
    assert_error(server.answer(78), INVALID_REQUEST, "method")
    server.send({"jsonrpc": "2.0", "id": 79, "method": 5})
    assert_error(server.answer(79), INVALID_REQUEST, "method")
    # A notification sent as a request would otherwise run and never be answered.
    reply = server.call("textDocument/didClose", {"textDocument": {"uri": "file:///n.md"}})
    assert_error(reply, INVALID_REQUEST, "textDocument/didClose is a notification")
    assert_error(server.call("initialize", {"capabilities": {}}), INVALID_REQUEST, "once")
    assert_still_serves(server)


def test_requests_before_initialize(tmp_path: Path) -> None:
    srv = start(tmp_path, "early")
    try:
        # The process is just starting: the first answer may take the import time.
        reply = srv.answer(srv.request("workspace/symbol", {"query": "x"}), LIFECYCLE_TIMEOUT)
        assert_error(reply, SERVER_NOT_INITIALIZED, "initialize")
        assert_error(srv.call("shutdown"), SERVER_NOT_INITIALIZED)
        assert_error(srv.call("mdsearch/noSuchMethod"), SERVER_NOT_INITIALIZED)
        srv.notify("textDocument/didOpen", {"textDocument": {
            "uri": (srv.root / "a.md").as_uri(), "languageId": "markdown", "version": 1,
            "text": "# A\n"}})  # dropped before initialize (LSP 3.17), not a crash
        # initialize itself with bad params is an InvalidParams, and the server stays new.
        assert_error(srv.call("initialize", {"capabilities": 5}), INVALID_PARAMS,
                     "params.capabilities")
        assert_error(srv.call("workspace/symbol", {"query": "x"}), SERVER_NOT_INITIALIZED)
        result = srv.initialize(initialized=False)
        assert result["capabilities"]["hoverProvider"], result
        assert srv.call("workspace/symbol", {"query": "x"})["result"] == []
        assert srv.answer(srv.request("shutdown"), LIFECYCLE_TIMEOUT)["result"] is None
        srv.notify("exit")
        assert srv.wait_exit() == 0
    finally:
        srv.close()


def test_requests_after_shutdown(tmp_path: Path) -> None:
    srv = start(tmp_path, "late")
    try:
        srv.initialize()
        reply = srv.answer(srv.request("shutdown"), LIFECYCLE_TIMEOUT)
        assert reply == {"jsonrpc": "2.0", "id": reply["id"], "result": None}, reply
        assert_error(srv.call("workspace/symbol", {"query": "x"}), INVALID_REQUEST, "shutting down")
        assert_error(srv.call("textDocument/hover", {}), INVALID_REQUEST)
        assert_error(srv.call("workspace/executeCommand", {"command": "mdsearch.status"}),
                     INVALID_REQUEST)
        assert_error(srv.call("shutdown"), INVALID_REQUEST)
        srv.notify("textDocument/didClose", {"textDocument": {"uri": "file:///n.md"}})
        srv.notify("exit")
        assert srv.wait_exit() == 0
        log = srv.stderr()
        assert "Traceback" not in log, log
    finally:
        srv.close()


# ---- the protocol layer in-process: paths the real server's handlers never take ---------------


class _Collect:
    """A pygls writer that keeps what the server writes, one decoded message per write."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        header, _, body = data.partition(b"\r\n\r\n")
        assert int(header.split(b"\r\n")[0].split(b":")[1]) == len(body)
        self.messages.append(json.loads(body))

    def close(self) -> None:
        pass


def _bare_server() -> tuple[Any, _Collect]:
    from pygls.lsp.server import LanguageServer

    from mdsearch_ls.lsp.protocol import MdSearchProtocol

    ls = LanguageServer("raw-test", "0", protocol_cls=MdSearchProtocol)
    out = _Collect()
    ls.protocol.set_writer(out)
    return ls, out


def _feed(ls: Any, message: Any) -> None:
    body = json.dumps(message)
    ls.protocol.handle_message(json.loads(body, object_hook=ls.protocol.structure_message))


def test_unencodable_result_and_failing_notification(caplog: pytest.LogCaptureFixture) -> None:
    """A result json cannot encode is still an answer; a notification handler that raises is
    one log record with its traceback, and nothing is sent."""
    ls, out = _bare_server()

    @ls.feature("test/aSet")
    def a_set(ls: Any, params: Any) -> Any:
        return {1, 2}  # not JSON

    @ls.feature("test/boom")
    def boom(ls: Any, params: Any) -> None:
        raise RuntimeError("boom in a notification")

    _feed(ls, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": None, "rootUri": None, "capabilities": {}}})
    assert "result" in out.messages.pop(), out.messages
    _feed(ls, {"jsonrpc": "2.0", "id": 2, "method": "test/aSet", "params": {}})
    (reply,) = out.messages
    assert reply["id"] == 2 and reply["error"]["code"] == INTERNAL_ERROR, reply
    assert "could not encode" in reply["error"]["message"], reply
    assert_no_traceback(reply)
    out.messages.clear()
    caplog.clear()
    with caplog.at_level("INFO", logger="mdsearch_ls.lsp.protocol"):
        _feed(ls, {"jsonrpc": "2.0", "method": "test/boom", "params": {}})
    assert out.messages == []
    records = [r for r in caplog.records if "boom in a notification" in r.getMessage()]
    assert len(records) == 1 and records[0].exc_info, caplog.records


def test_params_optional_and_nested_messages_stay_data() -> None:
    """JSON-RPC params may be left out; an object inside params that looks like a message is
    still data (pygls' object hook turned it into a message object)."""
    ls, out = _bare_server()
    seen: list[Any] = []

    @ls.feature("test/nothing")
    def nothing(ls: Any, params: Any) -> str:
        seen.append(params)
        return "ok"

    @ls.feature("test/ping")
    def ping(ls: Any, params: Any) -> None:
        seen.append(("ping", params))

    @ls.command("test.echo")
    def echo(ls: Any, *args: Any) -> Any:
        seen.append(args)
        return list(args)

    _feed(ls, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": None, "rootUri": None, "capabilities": {}}})
    out.messages.clear()
    _feed(ls, {"jsonrpc": "2.0", "id": 2, "method": "test/nothing"})
    _feed(ls, {"jsonrpc": "2.0", "method": "test/ping"})
    inner = {"jsonrpc": "2.0", "id": 9, "method": "shutdown"}
    _feed(ls, {"jsonrpc": "2.0", "id": 3, "method": "workspace/executeCommand",
               "params": {"command": "test.echo", "arguments": [inner]}})
    assert out.messages == [
        {"jsonrpc": "2.0", "id": 2, "result": "ok"},
        {"jsonrpc": "2.0", "id": 3, "result": [inner]},
    ], out.messages
    assert seen == [None, ("ping", None), (inner,)], seen


def test_exit_without_shutdown_exits_1(tmp_path: Path) -> None:
    """LSP 3.17: exit code 1 when exit arrives without a shutdown before it."""
    srv = start(tmp_path, "abrupt")
    try:
        srv.initialize()
        srv.notify("exit")
        assert srv.wait_exit() == 1
    finally:
        srv.close()


@pytest.mark.parametrize("off_by", [7, 40, -9], ids=["too-long-by-7", "too-long-by-40",
                                                    "too-short-by-9"])
def test_a_wrong_content_length_costs_no_other_message(server: RawServer, off_by: int) -> None:
    """One wrong Content-Length once left the next valid request unanswered, nothing logged
    (issue 27): the next frame is found again, and the mistake is logged."""
    first = json.dumps({"jsonrpc": "2.0", "id": 501 + off_by, "method": "workspace/symbol",
                        "params": {"query": "bread"}}).encode()
    second = json.dumps({"jsonrpc": "2.0", "id": 601 + off_by, "method": "workspace/symbol",
                         "params": {"query": "starter"}}).encode()
    server.send_raw(b"Content-Length: %d\r\n\r\n" % (len(first) + off_by) + first
                    + b"Content-Length: %d\r\n\r\n" % len(second) + second)
    reply = server.answer(601 + off_by)
    assert "result" in reply, reply

    def earlier(msg_id: Any) -> dict[str, Any]:
        """Its answer, seen on the way to the second's or still to come (handlers run in
        parallel: answers need not keep the order of requests)."""
        seen = [m for m in server.seen if isinstance(m, dict) and "method" not in m
                and m.get("id") == msg_id]
        return seen[0] if seen else server.answer(msg_id)

    if off_by > 0:  # too long: the first message was whole, and is answered too
        assert "result" in earlier(501 + off_by)
    else:  # too short: the cut first message is a parse error, answered without an id
        assert_error(earlier(None), PARSE_ERROR)
    assert "Content-Length" in server.stderr()
    assert_still_serves(server)
