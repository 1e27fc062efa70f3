"""The one channel between processes (engine/service/channel.py, messages.py, holder.py): the
engine's types go over it and come back the same, a bad message gets a typed error answer and
the holder goes on serving everyone else, and no client (no key, silent, trickling, too big,
gone mid-answer) can hold up another. Real sockets (or loopback TCP) with real handshakes;
two services in one process stand for two processes where the engine's folders are concerned.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from multiprocessing import connection as mpc
from pathlib import Path
from typing import Any

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.api import (
    Folders,
    RelatedRequest,
    RequestError,
    SearchRequest,
    SearchResult,
)
from mdsearch_ls.engine.index.report import IndexReport
from mdsearch_ls.engine.service import channel, messages
from mdsearch_ls.engine.service.channel import ChannelError, Client, Endpoint, Server
from tests.conftest import FakeEmbedder, write_note

WRITING_VAULT = Path(__file__).resolve().parents[1] / "fixtures" / "writing-vault"
JOURNAL = "journal/Garden journal.md"


# ---- the codec ------------------------------------------------------------------------------


def test_engine_results_come_back_as_the_same_values(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    write_note(root, "a.md", "# Apples\n\nApples grow in orchards.\n\n## Kinds\n\nCox, Gala.\n")
    folders = Folders(Settings(), embedder=FakeEmbedder(), watch=False)
    try:
        folder = folders.add(root, Settings())
        report = folder.start_index().result(timeout=30)
        result = folder.search(SearchRequest.build('apples "grow in" path:a.md', k=3))
        related = folder.related(RelatedRequest.build("a.md", 5, k=3))
    finally:
        folders.close()
    assert result.hits and result.hits[0].text  # (a hit carries its section)
    request = SearchRequest.build("apples tag:fruit", k=4, mode="keyword",
                                  filters={"path": "notes/"}, min_score=0.5)
    for value, tp in ((result, SearchResult), (related, type(related)),
                      (report, IndexReport), (request, SearchRequest)):
        wire = json.loads(json.dumps(messages.encode(value)))
        assert messages.decode(tp, wire) == value
    assert messages.decode(SearchResult, messages.encode(result)).hits[0].text == \
        result.hits[0].text


@pytest.mark.parametrize(("message", "says"), [
    ({"v": 1, "type": "search", "body": {"root": "/x"}}, "requests missing"),
    ({"v": 1, "type": "search", "body": {"root": 7, "requests": []}}, "expected str"),
    ({"v": 1, "type": "nonsense", "body": {}}, "unknown request type 'nonsense'"),
    ({"v": 2, "type": "hello", "body": {}}, "channel version 1, not 2"),
    ({"type": "hello"}, "not None"),
    ({"bad": "not JSON: Expecting value"}, "not JSON"),
])
def test_a_bad_message_gets_a_typed_error_answer(message: dict[str, Any], says: str) -> None:
    from mdsearch_ls.engine.service import holder

    folders = Folders(Settings(), embedder=FakeEmbedder(), watch=False)
    try:
        answer = holder.answer(folders, message, lambda _: None)
    finally:
        folders.close()
    assert answer["type"] == "error" and answer["kind"] == "MessageError"
    assert says in answer["message"]


def test_an_error_the_holder_meets_is_raised_as_its_own_type() -> None:
    answer = messages.problem_message(RequestError("'limit' must be from 1 to 500", "limit"))
    with pytest.raises(RequestError, match="'limit' must be") as err:
        messages.read_answer(json.loads(json.dumps(answer)), SearchResult)
    assert err.value.field == "limit"


# ---- the transport ----------------------------------------------------------------------------


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    seen: list[dict[str, Any]] = []

    def handler(request: dict[str, Any], reply: Any) -> dict[str, Any]:
        seen.append(request)
        if request.get("type") == "slow":
            for n in range(3):
                reply({"type": "progress", "n": n})
            return {"type": "answer", "body": "done"}
        if "bad" in request:
            return {"type": "error", "message": request["bad"]}
        return {"type": "answer", "body": request.get("body")}

    srv = Server(handler, tmp_path / "run", "server")
    srv.seen = seen  # type: ignore[attr-defined]
    yield srv
    srv.close()


def test_requests_and_progress_go_both_ways_on_one_connection(server: Server) -> None:
    client = Client(server.endpoint)
    try:
        assert client.ask({"type": "echo", "body": [1, "two"]})["body"] == [1, "two"]
        progress: list[int] = []
        answer = client.ask({"type": "slow"}, on_progress=lambda m: progress.append(m["n"]))
        assert answer["body"] == "done" and progress == [0, 1, 2]
        assert client.ask({"type": "echo", "body": "é\u2028"})["body"] == "é\u2028"
    finally:
        client.close()


def test_no_key_no_entry_and_the_holder_goes_on(server: Server) -> None:
    wrong = Endpoint(server.endpoint.family, server.endpoint.address, "00" * 32,
                     server.endpoint.pid, "server")
    with pytest.raises(ChannelError, match="did not let us in"):
        Client(wrong)
    assert Client(server.endpoint).ask({"type": "echo", "body": 1})["body"] == 1
    assert server.seen == [{"type": "echo", "body": 1}]  # type: ignore[attr-defined]


def _raw(endpoint: Endpoint) -> socket.socket:
    """A bare connection to the endpoint, as a client that knows no key would open."""
    if endpoint.family == "AF_UNIX":
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(endpoint.address)
    else:
        sock = socket.create_connection(tuple(endpoint.address))
    return sock


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the other end closes ``sock`` within ``seconds`` (what it sent is read past)."""
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    return True


def test_silent_trickling_and_oversized_clients_hold_up_nobody(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(channel, "HANDSHAKE_S", 0.5)
    monkeypatch.setattr(channel, "READ_S", 0.5)
    silent = [_raw(server.endpoint) for _ in range(5)]  # connect, then say nothing
    trickle = _raw(server.endpoint)
    trickle.sendall(b"\x00")  # the first byte of a length, then nothing more
    client = Client(server.endpoint)
    try:
        for n in range(3):  # answered at once, with the others still connected
            assert client.ask({"type": "echo", "body": n}, timeout=5)["body"] == n
        for sock in (*silent, trickle):  # closed by the holder once their time was up
            assert _closed_within(sock, 10)
        big = Client(server.endpoint)
        with pytest.raises(ChannelError):
            big.ask({"type": "echo", "body": "x" * (channel.MAX_MESSAGE + 1)}, timeout=10)
        assert client.ask({"type": "echo", "body": "still"}, timeout=5)["body"] == "still"
    finally:
        for sock in (*silent, trickle):
            sock.close()
        client.close()


def test_a_client_gone_mid_answer_costs_nothing(tmp_path: Path) -> None:
    answering, sent = threading.Event(), threading.Event()

    def handler(request: dict[str, Any], reply: Any) -> dict[str, Any]:
        if request.get("type") == "wait":
            answering.set()
            sent.wait(10)
        return {"type": "answer", "body": request.get("type")}

    srv = Server(handler, tmp_path / "run", "server")
    try:
        gone = Client(srv.endpoint)
        gone._conn.send_bytes(json.dumps({"type": "wait"}).encode())
        assert answering.wait(10)
        gone.close()  # (Ctrl-C, `| head`)
        sent.set()
        assert Client(srv.endpoint).ask({"type": "after"})["body"] == "after"
    finally:
        srv.close()


def test_the_request_that_stops_a_holder_still_gets_its_answer(tmp_path: Path) -> None:
    """``Leave`` of a background process's last folder, or ``Stop``: the holder closes its
    endpoint while that very answer is on its way, and the asker reads it."""
    stopping = threading.Event()

    def handler(request: dict[str, Any], reply: Any) -> dict[str, Any]:
        stopping.set()  # the process's main thread now closes the endpoint
        closed.wait(10)  # and the answer is sent once it has begun to
        return {"type": "answer", "body": "done"}

    closed = threading.Event()
    srv = Server(handler, tmp_path / "run", "server")
    client = Client(srv.endpoint)
    asked: list[Any] = []
    asking = threading.Thread(target=lambda: asked.append(client.ask({"type": "stop"})))
    asking.start()
    assert stopping.wait(10)
    closing = threading.Thread(target=srv.close)
    closing.start()
    closed.set()
    asking.join(10)
    closing.join(10)
    client.close()
    assert asked and asked[0]["body"] == "done"


def test_the_record_is_the_users_alone(server: Server, tmp_path: Path) -> None:
    record = tmp_path / "holder.json"
    server.endpoint.save(record)
    assert Endpoint.load(record) == server.endpoint
    if os.name == "posix":
        assert record.stat().st_mode & 0o077 == 0
        if server.endpoint.family == "AF_UNIX":
            assert Path(server.endpoint.address).parent.stat().st_mode & 0o077 == 0
    server.endpoint.forget(record)
    assert not record.exists()


def test_where_no_unix_socket_fits_loopback_tcp_carries_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A system without ``AF_UNIX`` (Windows' Python) or a socket path too long for one."""
    monkeypatch.setattr(channel, "UNIX_PATH_MAX", 0)
    srv = Server(lambda r, reply: {"type": "answer", "body": r["body"]}, tmp_path / "run",
                 "server")
    try:
        assert srv.endpoint.family == ("AF_PIPE" if os.name == "nt" else "AF_INET")
        assert srv.endpoint.address[0] == "127.0.0.1"
        assert Client(srv.endpoint).ask({"body": "over tcp"})["body"] == "over tcp"
        with pytest.raises(mpc.AuthenticationError):  # the port alone lets nobody in
            mpc.Client(tuple(srv.endpoint.address), "AF_INET", authkey=b"guess")
        record = tmp_path / "holder.json"  # and its record goes with it, as a socket's does
        srv.endpoint.save(record)
        assert Endpoint.load(record) == srv.endpoint
        srv.endpoint.forget(record)
        assert not record.exists()
    finally:
        srv.close()


@pytest.mark.skipif(os.name != "posix", reason="folder modes and links are POSIX's")
@pytest.mark.parametrize("make", ["open to all", "a link"])
def test_a_run_folder_others_could_enter_is_not_used(tmp_path: Path, make: str) -> None:
    """Someone who made the run folder first, or left it writable, cannot stand in for the
    socket: the holder listens on loopback TCP instead, the key still guarding it."""
    run = tmp_path / "run"
    if make == "open to all":
        run.mkdir()
        run.chmod(0o777)
    else:
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        run.symlink_to(tmp_path / "elsewhere")
    srv = Server(lambda r, reply: {"type": "answer", "body": r["body"]}, run, "server")
    try:
        assert srv.endpoint.family == "AF_INET"
        assert Client(srv.endpoint).ask({"body": "still served"})["body"] == "still served"
        assert not any(run.iterdir())  # no socket was left where others could reach it
    finally:
        srv.close()


# ---- the engine over it ---------------------------------------------------------------------


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """A folder held by one service, and the same folder asked of it by another."""
    vault = Path(shutil.copytree(WRITING_VAULT, tmp_path / "vault"))
    holder = Folders(Settings(), embedder=FakeEmbedder(), watch=False)
    asker = Folders(Settings(), embedder=FakeEmbedder(), watch=False)
    try:
        held = holder.add(vault, Settings())
        held.start_index().result(timeout=30)
        asked = asker.add(vault, Settings())
        asked.open_now()
        assert held.held and not asked.held
        yield held, asked
    finally:
        asker.close()
        holder.close()


def test_the_writing_aids_answer_alike_held_or_asked(two: tuple[Any, Any]) -> None:
    held, asked = two
    journal = (held.root / JOURNAL).read_text(encoding="utf-8")
    draft = "# Draft\n\nThe rose bushes need cutting back. [[Tom"
    lines = journal.split("\n")
    april = next(i for i, line in enumerate(lines) if line.startswith("## April"))
    calls = [
        ("complete_link", ("draft.md", draft, 2, len(draft.split("\n")[2])), {}),
        ("resolve_link", ("garden/Tomatoes.md",
                          (held.root / "garden/Tomatoes.md").read_text(encoding="utf-8"), 0, 0),
         {}),
        ("related_linked", ("garden/Tomatoes.md", 0, None), {"k": 5, "min_score": -1.0}),
        ("suggest_link", (JOURNAL, journal, april + 2), {"min_score": 0.1}),
        ("unlinked_mentions", (JOURNAL, journal), {}),
        ("near_duplicates", ("baking/Bread baking.md",), {}),
    ]
    for name, args, kwargs in calls:
        here = getattr(held.writing, name)(*args, **kwargs)
        there = getattr(asked.writing, name)(*args, **kwargs)
        assert there == here, name
    assert held.writing.unlinked_mentions(JOURNAL, journal), "the vault has mentions to find"


def test_a_request_the_engine_refuses_is_refused_alike_held_or_asked(two) -> None:
    held, asked = two
    for folder in (held, asked):
        with pytest.raises(RequestError) as err:
            folder.related(RelatedRequest.build("../outside.md", 0))
        assert err.value.field == "path"


def test_a_client_naming_other_index_settings_is_told_which(two) -> None:
    _held, asked = two
    asked.given = {"chunk_size": 500}
    with pytest.raises(RequestError, match=r"other settings \(chunk_size\)"):
        asked.search(SearchRequest.build("roses", k=3))
