"""Vectors on a Chroma server (``chroma_url``): real ``chroma run`` processes on loopback ports.

What the index promises with its own Chroma folder it promises with a server too: the same
chunks, the same answers, a cheap check on open that trusts the server only when it still holds
what the manifest says (a wiped server, or a manifest restored from a backup, heals from the
vector cache without the model), a server killed mid-index heals to a clean build, and a
server that is down, answers garbage or never answers is a clear message within seconds with
nothing written.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.errors import VectorServerError
from mdsearch_ls.engine.index.layout import (
    INDEX_ID_META,
    collection_name,
    recorded_model,
    space_name,
)
from mdsearch_ls.engine.index.vector_store import ChromaStore
from mdsearch_ls.engine.service.folders import Folders
from mdsearch_ls.engine.workspace import Workspace
from tests.chroma_server import ChromaServer, free_port
from tests.conftest import EXAMPLE_VAULT, REPO, FakeEmbedder, copy_vault, write_note
from tests.index_state import assert_consistent, clean_build, snapshot
from tests.integration.test_kill import committed, wait_for

QUERIES = ["crisis escalation threshold", "how do we pay invoices", "hiring interview loop"]


def remote(server: ChromaServer) -> Settings:
    return Settings(chroma_url=server.url)


def hits(ws: Workspace) -> list[list[tuple[str, int]]]:
    return [[(h.path, h.start_line) for h in ws.hits(q, 5)] for q in QUERIES]


def server_collections(server: ChromaServer) -> dict[str, int]:
    """What the server holds, asked through a client of our own: {collection: count}."""
    import chromadb

    client = chromadb.HttpClient(host="127.0.0.1", port=server.port)
    try:
        return {c.name: c.count() for c in client.list_collections()}
    finally:
        client.close()


def test_an_index_on_a_server_equals_one_in_the_index_folder(chroma_server, tmp_path):
    vault = copy_vault(tmp_path / "vault")
    local = tmp_path / "local-index"
    on_server = tmp_path / "server-index"
    with Workspace.open(vault, Settings(), embedder=FakeEmbedder(), index_dir=local) as ws:
        ws.index()
        want, want_hits = snapshot(ws), hits(ws)
    settings = remote(chroma_server)
    with Workspace.open(vault, settings, embedder=FakeEmbedder(), index_dir=on_server) as ws:
        ws.index()
        assert ws.store.remote
        assert_consistent(ws)
        got, got_hits = snapshot(ws), hits(ws)
        name = ws.store.name
        assert ws.status()["vectors"] == f"{chroma_server.url} (collection {name})"
    assert got == want, got.diff(want)
    assert got_hits == want_hits
    assert not (on_server / "chroma").exists()  # the vectors are on the server only
    assert name == collection_name(settings, recorded_model(
        on_server / f"{space_name(settings)}.sqlite3", INDEX_ID_META) or "")
    assert name.startswith(space_name(settings) + "-i")
    assert server_collections(chroma_server)[name] == len(got.chunk_ids)


def test_two_indexes_on_one_server_never_share_a_collection(chroma_server, tmp_path, write):
    settings = remote(chroma_server)
    names = []
    for n in (1, 2):
        vault = tmp_path / f"vault{n}"
        for i in range(n * 3):
            write(vault, f"note{i}.md", f"# Note {i} of vault {n}\n\nText {i} {n}.\n")
        with Workspace.open(vault, settings, embedder=FakeEmbedder(),
                            index_dir=tmp_path / f"index{n}") as ws:
            ws.index()
            names.append(ws.store.name)
    assert names[0] != names[1]
    held = server_collections(chroma_server)
    assert (held[names[0]], held[names[1]]) == (3, 6)
    # Reopening one and pruning its old spaces leaves the other index's collection alone.
    with Workspace.open(tmp_path / "vault1", Settings(chroma_url=settings.chroma_url,
                                                      chunk_size=500, chunk_overlap=50),
                        embedder=FakeEmbedder(), index_dir=tmp_path / "index1") as ws:
        ws.index()
    assert server_collections(chroma_server)[names[1]] == 6


def cli(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    """``mdsearch ARGS``, a real process with the real model."""
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "MDSEARCH_BACKGROUND": "off"}
    done = subprocess.run([sys.executable, "-m", "mdsearch_ls", *args], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return done


def test_two_machines_cloned_from_one_image_never_share_a_collection(chroma_server, tmp_path,
                                                                     write):
    """The same machine id and the same index folder (one machine, then its clone, each
    indexing its own notes there) are two indexes: two collections, neither emptied."""
    index = tmp_path / "index"  # the same path on both machines
    names = []
    for n in (1, 2):
        vault = tmp_path / f"vault{n}"
        for i in range(n * 2):
            write(vault, f"note{i}.md", f"# Note {i} of machine {n}\n\nText {i} {n}.\n")
        shutil.rmtree(index, ignore_errors=True)  # the clone has no index yet
        cli("index", str(vault), "--index-dir", str(index), "--chroma-url", chroma_server.url,
            cache=tmp_path / "cache")
        status = json.loads(cli("status", "--root", str(vault), "--index-dir", str(index), "--json",
                                "--chroma-url", chroma_server.url,
                                cache=tmp_path / "cache").stdout)
        names.append(status["vectors"].rpartition("(collection ")[2].rstrip(")"))
    held = server_collections(chroma_server)
    assert names[0] != names[1]
    assert (held.get(names[0]), held.get(names[1])) == (2, 4)


def test_an_index_made_before_its_id_gets_one_at_its_next_write_open(chroma_server, tmp_path,
                                                                     write):
    vault = tmp_path / "vault"
    for i in range(3):
        write(vault, f"note{i}.md", f"# Note {i}\n\nText about item {i}.\n")
    index, cache = tmp_path / "index", tmp_path / "cache"
    args = ("--index-dir", str(index), "--chroma-url", chroma_server.url)
    cli("index", str(vault), *args, cache=cache)
    manifest = next(index.glob("*.sqlite3"))
    with sqlite3.connect(manifest) as conn:  # as a release before the ids left it
        conn.execute("DELETE FROM meta WHERE key = ?", (INDEX_ID_META,))
    conn.close()
    write(vault, "note3.md", "# Note 3\n\nText about item 3.\n")
    said = cli("index", str(vault), *args, cache=cache).stderr
    assert "named by an id of its own" in said
    index_id = recorded_model(manifest, INDEX_ID_META)
    assert index_id and len(index_id) == 12
    found = json.loads(cli("search", "item", "--root", str(vault), "--json", "--no-update",
                           *args, cache=cache).stdout)
    assert len({r["path"] for r in found["results"]}) == 4
    assert any(name.endswith(f"-i{index_id}") and count >= 4
               for name, count in server_collections(chroma_server).items())


def test_a_clean_reopen_trusts_the_server_and_a_wiped_server_heals_without_the_model(
    chroma_server, tmp_path, monkeypatch
):
    vault = copy_vault(tmp_path / "vault")
    index = tmp_path / "index"
    settings = remote(chroma_server)
    with Workspace.open(vault, settings, embedder=FakeEmbedder(), index_dir=index) as ws:
        ws.index()
        want = snapshot(ws)
        name = ws.store.name
    walked = []
    real_all_ids = ChromaStore.all_ids
    monkeypatch.setattr(ChromaStore, "all_ids",
                        lambda self: walked.append(1) or real_all_ids(self))
    with Workspace.open(vault, settings, embedder=FakeEmbedder(), index_dir=index) as ws:
        assert ws.repaired == 0
    assert walked == []  # sealed on close, so the open only compared two counts and a token

    import chromadb

    client = chromadb.HttpClient(host="127.0.0.1", port=chroma_server.port)
    client.delete_collection(name)  # the server lost it (wiped, restarted elsewhere...)
    client.close()
    model = FakeEmbedder()
    with Workspace.open(vault, settings, embedder=model, index_dir=index) as ws:
        assert ws.repaired == len(want.chunk_ids)
        assert_consistent(ws)
        assert snapshot(ws) == want
        assert ws.store.probe(ws.manifest.sample_vectors(50)) is None
    assert model.documents_embedded == 0


def test_a_manifest_restored_from_a_backup_is_checked_against_the_server(
    chroma_server, tmp_path
):
    """The manifest is older than the server's collection (restored from a backup): its clean
    token no longer matches the collection's, so the open compares id by id and heals; before
    the token, equal counts let the open trust a collection holding another version's ids."""
    vault = copy_vault(tmp_path / "vault")
    index = tmp_path / "index"
    settings = remote(chroma_server)
    with Workspace.open(vault, settings, embedder=FakeEmbedder(), index_dir=index) as ws:
        ws.index()
        older = snapshot(ws).chunk_ids
    manifest = index / f"{space_name(settings)}.sqlite3"
    backup = tmp_path / "backup.sqlite3"
    shutil.copy2(manifest, backup)
    # One section reworded: the same number of chunks, one of them another id.
    note = vault / "finance" / "Revenue tracking.md"
    text = note.read_text(encoding="utf-8")
    note.write_text(text.replace("counts as monthly recurring revenue",
                                 "counts as monthly recurring income"), encoding="utf-8")
    os.utime(note, (time.time() + 5, time.time() + 5))
    with Workspace.open(vault, settings, embedder=FakeEmbedder(), index_dir=index) as ws:
        report = ws.index()
        assert report.files_indexed == 1
        newer = snapshot(ws).chunk_ids
    assert len(newer) == len(older) and newer != older
    for suffix in ("-wal", "-shm"):
        (index / (manifest.name + suffix)).unlink(missing_ok=True)
    shutil.copy2(backup, manifest)
    with Workspace.open(vault, settings, embedder=FakeEmbedder(), index_dir=index) as ws:
        assert ws.repaired and ws.repaired > 0
        assert_consistent(ws)  # before any update: Chroma holds exactly the old manifest's ids
        assert snapshot(ws).chunk_ids == older
        ws.index()
        assert snapshot(ws).chunk_ids == newer
        assert_consistent(ws)


def test_an_index_opened_without_its_server_says_so_before_it_copies_the_vectors(
    chroma_server, tmp_path, caplog
):
    """A ``chroma_url`` set in one front end and forgotten in another: the open keeps the
    vectors where its settings say (the index folder), but warns before it fills that store
    from the vector cache (minutes at a million chunks), names the server to set back, and
    counts no damage; once, and the way back to the server is said the same way, by the
    folder service too."""
    vault = copy_vault(tmp_path / "vault")
    index = tmp_path / "index"
    settings = remote(chroma_server)
    with Workspace.open(vault, settings, embedder=FakeEmbedder(), index_dir=index) as ws:
        ws.index()
        want, want_hits = snapshot(ws), hits(ws)
        assert ws.vectors_moved is None  # a new index: kept nowhere before
    model = FakeEmbedder()
    caplog.set_level(logging.INFO, logger="mdsearch_ls")
    with Workspace.open(vault, Settings(), embedder=model, index_dir=index) as ws:
        said = ws.vectors_moved
        assert said and f"were kept on the Chroma server at {chroma_server.url};" in said
        assert f"keeps them in {index / 'chroma'}" in said
        assert f"{len(want.chunk_ids):,} chunks" in said
        assert f"Set chroma_url (--chroma-url) to {chroma_server.url}" in said
        assert ws.repaired == 0  # a move, not damage
        assert not ws.store.remote and ws.store.count() == len(want.chunk_ids)
        assert snapshot(ws) == want and hits(ws) == want_hits
        assert_consistent(ws)
    assert model.documents_embedded == 0
    messages = [r.getMessage() for r in caplog.records]
    copied = [i for i, m in enumerate(messages) if m.startswith("moving the vectors")]
    assert copied and messages.index(said) < copied[0]  # warned before the copy
    assert not [m for m in messages if m.startswith("repairing index")]
    with Workspace.open(vault, Settings(), embedder=model, index_dir=index) as ws:
        assert ws.vectors_moved is None  # said once: the index folder is where they are now
    shown: list[tuple[str, str]] = []
    folders = Folders(Settings(), embedder=model, watch=False,
                      on_message=lambda text, level: shown.append((text, level)))
    try:
        folder = folders.add(vault, Settings(chroma_url=chroma_server.url, index_dir=str(index)))
        assert folder.start_index().result(timeout=120) is not None
        assert folder.ws.store.remote and snapshot(folder.ws) == want
    finally:
        folders.close(timeout=30)
    moves = [(text, level) for text, level in shown if "were kept" in text]
    assert len(moves) == 1 and moves[0][1] == "warning"
    assert f"were kept in {index / 'chroma'}; this open keeps them on the Chroma server at " \
        f"{chroma_server.url}" in moves[0][0] and "Set chroma_url" not in moves[0][0]
    assert model.documents_embedded == 0


# ---- a server that is down, answers garbage, or never answers -------------------------------


def run_cli(*args: str, cache: Path, timeout: float = 120) -> tuple[subprocess.CompletedProcess[
        str], float]:
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mdsearch_ls", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO,
                          env={**os.environ, "MDSEARCH_CACHE_DIR": str(cache)})
    return done, time.monotonic() - t0


class _Garbage(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html>hello, I am not Chroma</html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def garbage_url() -> Iterator[str]:
    """A web server on a loopback port that answers 200 with a page that is not Chroma's."""
    server = HTTPServer(("127.0.0.1", 0), _Garbage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A socket that takes connections (the kernel completes them) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


@pytest.mark.parametrize("kind", ["down", "garbage",
                                  pytest.param("silent", marks=pytest.mark.slow)])
def test_a_bad_chroma_server_is_a_clear_message_and_nothing_is_written(
    kind, tmp_path, request
):
    if kind == "down":
        url, said, within = f"http://127.0.0.1:{free_port()}", "connection refused", 10
    elif kind == "garbage":
        url = request.getfixturevalue("garbage_url")
        said, within = "does not answer as a Chroma server does", 10
    else:
        url = request.getfixturevalue("silent_url")
        said, within = "did not answer in time", 25
    vault = tmp_path / "vault"
    write_note(vault, "a.md", "# A\n\nSome text.\n")
    cache = tmp_path / "cache"
    index = tmp_path / "index"
    done, took = run_cli("index", str(vault), "--index-dir", str(index), "--chroma-url", url,
                         cache=cache)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and url in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert took < within, took
    assert not index.exists() and not cache.exists()
    # A search of a folder never indexed would index it first: refused the same way.
    done, _ = run_cli("search", "text", "--root", str(vault), "--chroma-url", url, cache=cache)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert not cache.exists()


def test_a_bad_url_is_a_usage_error_naming_the_flag(tmp_path):
    done, _ = run_cli("index", str(tmp_path), "--chroma-url", "ftp://127.0.0.1:1",
                      cache=tmp_path / "cache")
    assert done.returncode == 2
    assert "--chroma-url: expected a URL such as http://127.0.0.1:8000" in done.stderr


def test_a_server_that_dies_mid_write_is_an_error_after_bounded_retries(tmp_path):
    """In process: the server killed between two writes; the next write is tried again for a
    few seconds, then fails with a message naming the server, and the index heals to a clean
    build once the server is back."""
    server = ChromaServer(tmp_path / "db").start()
    try:
        vault = copy_vault(tmp_path / "vault")
        index = tmp_path / "index"
        settings = remote(server)
        with Workspace.open(vault, settings, embedder=FakeEmbedder(), index_dir=index) as ws:
            ws.index()
            server.kill()
            write_note(vault, "new.md", "# New\n\nA note written while Chroma was down.\n")
            t0 = time.monotonic()
            with pytest.raises(VectorServerError, match="does not answer"):
                ws.update(["new.md"])
            assert time.monotonic() - t0 < 15
            server.start()
            ws.update(["new.md"])  # a write after a failed one compares in full first
            assert_consistent(ws)
            final = snapshot(ws)
    finally:
        server.kill()
    assert final == clean_build(vault, tmp_path / "clean", FakeEmbedder())


def test_a_collection_lost_while_the_writer_runs_is_refilled_by_its_next_write(
    chroma_server, tmp_path
):
    """The server lost the collection under a running writer (wiped, restarted on another
    folder): the write that meets it fails with a message, and the next one looks the
    collection up again and refills it from the vector cache, without the model."""
    import chromadb

    vault = copy_vault(tmp_path / "vault")
    model = FakeEmbedder()
    with Workspace.open(vault, remote(chroma_server), embedder=model,
                        index_dir=tmp_path / "index") as ws:
        ws.index()
        client = chromadb.HttpClient(host="127.0.0.1", port=chroma_server.port)
        client.delete_collection(ws.store.name)
        client.close()
        write_note(vault, "new.md", "# New\n\nWritten after the collection was lost.\n")
        with pytest.raises(VectorServerError, match="does not exist"):
            ws.update(["new.md"])
        model.reset_counts()
        ws.update(["new.md"])
        assert model.documents_embedded == 0  # its vector was cached by the failed write
        assert_consistent(ws)
        final = snapshot(ws)
    assert final == clean_build(vault, tmp_path / "clean", FakeEmbedder())


@pytest.mark.slow
def test_kill_9_of_the_chroma_server_mid_index_heals_to_a_clean_build(tmp_path):
    """``mdsearch index --chroma-url`` with the real model; the Chroma server is killed with
    SIGKILL right after the run committed its first batch (seen in the manifest, as another
    process would see it). The run stops with a message naming the server instead of hanging;
    the server restarts on the same folder and port, and the next run finishes an index equal
    to a clean build, Chroma answering for every vector."""
    vault = copy_vault(tmp_path / "vault")
    (vault / "Log.md").write_text("# Log\n\n" + "\n".join(
        f"## Day {i}\n\nShipped change {i} to the {('billing', 'search', 'sync')[i % 3]} "
        f"service.\n" for i in range(100)), encoding="utf-8")
    server = ChromaServer(tmp_path / "db").start()
    index = tmp_path / "index"
    settings = remote(server)
    manifest = index / f"{space_name(settings)}.sqlite3"
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "mdsearch_ls", "index", str(vault), "--index-dir", str(index),
           "--chroma-url", server.url]
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env, cwd=REPO)
        wait_for(lambda: committed(manifest)[1] > 0, proc)  # a first batch of notes written
        server.kill()
        _, err = proc.communicate(timeout=60)  # the retries end within seconds: no hang
        assert proc.returncode == 2, err[-3000:]
        assert f"the Chroma server at {server.url} does not answer" in err, err[-3000:]
        server.start()
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO,
                              timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        with Workspace.open(vault, settings, embedder=FakeEmbedder(), index_dir=index) as ws:
            assert ws.repaired == 0  # the CLI left it sound
            assert_consistent(ws)
            final = snapshot(ws)
            assert ws.store.probe(ws.manifest.sample_vectors(400)) is None
        res = subprocess.run(
            [sys.executable, "-m", "mdsearch_ls", "search", "crisis escalation threshold",
             "--root", str(vault), "--index-dir", str(index), "--chroma-url", server.url,
             "--json", "-k", "1"], capture_output=True, text=True, env=env, cwd=REPO,
            timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
        assert '"operations/Crisis management and escalation.md"' in res.stdout
    finally:
        server.kill()
    clean = clean_build(vault, tmp_path / "clean", FakeEmbedder())
    assert final == clean, final.diff(clean)


@pytest.mark.slow
def test_a_search_while_the_server_is_down_says_so_and_does_not_hang(tmp_path):
    """Chroma answers the vector search, so with its server gone a search cannot: it says
    which server does not answer and how to go on, at once and without a traceback, and a
    search once the server is back answers as before (real model)."""
    server = ChromaServer(tmp_path / "db").start()
    vault = tmp_path / "vault"
    for rel in ("operations/Crisis management and escalation.md",
                "finance/Revenue tracking.md"):
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(EXAMPLE_VAULT / rel, vault / rel)
    cache = tmp_path / "cache"
    try:
        done, _ = run_cli("index", str(vault), "--chroma-url", server.url, cache=cache,
                          timeout=600)
        assert done.returncode == 0, done.stderr
    finally:
        server.kill()
    write_note(vault, "later.md", "# Later\n\nWritten after the server went away.\n")
    done, _ = run_cli("search", "crisis escalation threshold", "--root", str(vault),
                      "--chroma-url", server.url, "-k", "1", "--json", cache=cache, timeout=120)
    assert done.returncode == 2 and not done.stdout, done
    assert f"the Chroma server at {server.url} does not answer" in done.stderr, done.stderr
    assert "chroma run --path" in done.stderr and "Traceback" not in done.stderr
    server.start()
    try:
        done, _ = run_cli("search", "crisis escalation threshold", "--root", str(vault),
                          "--chroma-url", server.url, "-k", "1", "--json", cache=cache,
                          timeout=600)
        assert done.returncode == 0, done.stderr
        assert '"operations/Crisis management and escalation.md"' in done.stdout
    finally:
        server.kill()


@pytest.mark.slow
def test_the_cli_warns_before_it_moves_the_vectors_off_a_server_it_was_not_given(
    chroma_server, tmp_path
):
    """Real model, whole processes: ``mdsearch index`` without ``--chroma-url`` brings the index
    in line with its settings (the vectors in the index folder), saying first, on stderr, where
    they were and how to keep them there; once. A search of it needs no Chroma at all."""
    vault = tmp_path / "vault"
    rel = "operations/Crisis management and escalation.md"
    (vault / rel).parent.mkdir(parents=True)
    shutil.copy2(EXAMPLE_VAULT / rel, vault / rel)
    cache = tmp_path / "cache"
    done, _ = run_cli("index", str(vault), "--chroma-url", chroma_server.url, cache=cache,
                      timeout=600)
    assert done.returncode == 0, done.stderr
    done, _ = run_cli("index", str(vault), cache=cache, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"were kept on the Chroma server at {chroma_server.url};" in done.stderr
    assert f"Set chroma_url (--chroma-url) to {chroma_server.url}" in done.stderr
    assert "repairing" not in done.stderr and "Traceback" not in done.stderr
    write_note(vault, "later.md", "# Later\n\nWritten after the move.\n")
    done, _ = run_cli("index", str(vault), cache=cache, timeout=600)
    assert done.returncode == 0 and "were kept" not in done.stderr, done.stderr
    done, _ = run_cli("search", "crisis escalation threshold", "--root", str(vault), "-k", "1",
                      "--json", "--no-background", cache=cache, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f'"{rel}"' in done.stdout and "were kept" not in done.stderr


def test_a_long_running_server_shows_the_folder_in_error_when_chroma_does_not_answer(tmp_path):
    """The language and MCP servers share the folders service: a Chroma server that is down is
    the folder's error, with the message naming it, and nothing written."""
    from mdsearch_ls.engine.api import Folders, FolderState
    from mdsearch_ls.engine.index.layout import default_index_dir

    root = tmp_path / "vault"
    write_note(root, "a.md", "# A\n\nalpha\n")
    settings = Settings(chroma_url=f"http://127.0.0.1:{free_port()}")
    messages: list[str] = []
    folders = Folders(settings, embedder=FakeEmbedder(),
                      on_message=lambda text, level: messages.append(f"{level}: {text}"))
    try:
        folder = folders.add(root, settings)
        assert folder is not None
        with pytest.raises(VectorServerError):
            folders.index(folder).result(timeout=60)
        assert folder.state == FolderState.ERROR
        assert settings.chroma_url in (folder.last_error or "")
        assert any(m.startswith("error: ") and "connection refused" in m for m in messages)
        assert not default_index_dir(root).exists()
    finally:
        folders.close(timeout=10)


def test_a_frozen_server_is_a_timeout_not_a_hang(tmp_path, monkeypatch):
    """SIGSTOP on the real server mid-session: the kernel still takes connections but nothing
    answers, which without a timeout on Chroma's client would hold the writer for ever. With
    it, the write is tried again for a bounded time, then fails naming the server; once the
    server runs again, so does the store."""
    import numpy as np

    from mdsearch_ls.engine.index import chroma_server

    monkeypatch.setattr(chroma_server, "REQUEST_TIMEOUT_S", 1.0)
    monkeypatch.setattr(chroma_server, "RETRY_DELAYS_S", (0.2, 0.2))
    server = ChromaServer(tmp_path / "db").start()
    assert server.proc is not None
    store = ChromaStore(None, "frozen-v1-ifrozen", url=server.url, space="frozen-v1")
    vec = np.ones((1, 4), dtype=np.float32) / 2
    meta = {"path": "a.md"}
    outcome: list[BaseException | None] = []

    def write() -> None:
        try:
            store.upsert(["a"], vec, [meta])
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    try:
        os.kill(server.proc.pid, signal.SIGSTOP)
        worker = threading.Thread(target=write, daemon=True)
        worker.start()
        worker.join(timeout=30)
        assert not worker.is_alive(), "the write hung on a frozen server"
        assert isinstance(outcome[0], VectorServerError), outcome
        assert "did not answer in time" in str(outcome[0]) and "3 attempts" in str(outcome[0])
        os.kill(server.proc.pid, signal.SIGCONT)
        store.upsert(["a"], vec, [meta])
        assert store.count() == 1
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
        store.close()
        server.kill()


def test_a_server_collection_that_fails_the_probe_is_emptied_and_refilled(
    chroma_server, tmp_path, monkeypatch
):
    """A graph that cannot find its own vectors is damage; on a server there are no files of
    ours to set aside, so the collection is emptied and refilled from the vector cache (the
    probe's failure is staged: a server's graph cannot be damaged from outside on purpose)."""
    vault = copy_vault(tmp_path / "vault")
    index = tmp_path / "index"
    settings = remote(chroma_server)
    with Workspace.open(vault, settings, embedder=FakeEmbedder(), index_dir=index) as ws:
        ws.index()
        want = snapshot(ws)
    real_probe = ChromaStore.probe
    staged = iter(["5 of 8 stored vectors are not found by a query"])
    monkeypatch.setattr(ChromaStore, "probe",
                        lambda self, vecs: next(staged, None) or real_probe(self, vecs))
    model = FakeEmbedder()
    with Workspace.open(vault, settings, embedder=model, index_dir=index) as ws:
        assert ws.healed and "vector store: 5 of 8 stored vectors" in ws.healed
        assert "restored from the manifest's cache" in ws.healed
        assert ws.repaired == len(want.chunk_ids)  # every vector written back
        assert_consistent(ws)
        assert snapshot(ws) == want
    assert model.documents_embedded == 0
    assert not list(index.glob("damaged-*"))
