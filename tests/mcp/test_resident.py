"""``mdsearch search`` through the server that holds the index (issue 26's resident process): a
real ``mdsearch mcp`` process on a copy of the bundled vault, the CLI as a real process beside it.

The CLI must print exactly what it prints when it searches by itself (``--no-resident``), see an
edit made a moment before it was run, search by itself whenever the server cannot answer as it
would (other ranking settings, a dead server's socket file, garbage on the socket), and the
socket must be the owner's alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_harness import EXAMPLE_VAULT, PYTHON, McpClient, start, wait_until
from mdsearch_ls.engine.index.notewatch import local_tree

pytestmark = pytest.mark.slow

QUERY = "what do we do when more than 5% of requests fail"
THROUGH = "searched through the mdsearch server"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[McpClient, Path, Path]]:
    tmp = tmp_path_factory.mktemp("resident")
    vault = shutil.copytree(EXAMPLE_VAULT, tmp / "vault")
    client = start(tmp, [vault])
    try:
        client.wait_ready()
        yield client, vault, tmp / "cache"
    finally:
        client.close()


def cli(vault: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "COLUMNS": "100"}
    return subprocess.run([PYTHON, "-m", "mdsearch_ls", "search", *args, "-v"], cwd=vault,
                          env=env, capture_output=True, text=True, timeout=300)


def socket_file(cache: Path) -> Path:
    

    indexes = list((cache / "indexes").iterdir())
    assert len(indexes) == 1, indexes
    found = resident_socket_path(indexes[0])
    assert found.exists(), found
    return found


def raw(path: Path, payload: bytes) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(60)
        s.connect(str(path))
        s.sendall(payload)
        data = b""
        while not data.endswith(b"\n"):
            more = s.recv(65536)
            if not more:
                break
            data += more
    return json.loads(data)


@pytest.mark.parametrize("args", [
    (QUERY, "-k", "5"),
    (QUERY, "--format", "json", "--explain"),
    ("backup keys", "--format", "jsonl", "--mode", "keyword"),
    ("invoices tag:finance", "--format", "vimgrep"),
    ("escalation", "--path", "operations/", "--format", "paths", "-k", "3"),
    ("\"restore test\" backups", "-k", "4"),
])
def test_the_server_answers_what_the_cli_would_print(
        served: tuple[McpClient, Path, Path], args: tuple[str, ...]) -> None:
    _, vault, cache = served
    through = cli(vault, cache, *args)
    alone = cli(vault, cache, *args, "--no-resident")
    assert through.returncode == alone.returncode == 0, through.stderr
    assert THROUGH in through.stderr and THROUGH not in alone.stderr
    assert through.stdout == alone.stdout and through.stdout.strip()


# What a search answered through the socket must not import: the model's runtime, the vector
# store, the note rules and the chunker, the engine's workspace and searcher, and the server's own
# side of the socket (issue 26: the whole client process in well under 100 ms).
HEAVY = ("numpy", "onnxruntime", "tokenizers", "chromadb", "pathspec",
         "mdsearch_ls.engine.notes.files", "mdsearch_ls.engine.notes.chunking",
         "mdsearch_ls.engine.workspace", "mdsearch_ls.engine.search.searcher",
         "mdsearch_ls.engine.index.manifest", "mdsearch_ls.engine.embedding.onnx_backend",
         "mdsearch_ls.engine.service.resident")
# Nor what costs a few ms of a process that is over in well under 100 ms: SQLite (the formats the
# index remembers come with the server's answer), OpenSSL's hashlib (the index folder's digest is
# the builtin _sha1's), socket.py (the C module connects), shutil (the terminal's width is read
# without it) and the embedding package (the engine's error types are imported on a failure).
LIGHT = ("sqlite3", "_hashlib", "socket", "shutil", "mdsearch_ls.engine.embedding")
# The CLI's own entry, then what it imported, on stderr after everything it printed.
MODULES_AFTER = ("import json, sys\n"
                 "from mdsearch_ls.cli import main\n"
                 "code = main(sys.argv[1:])\n"
                 "sys.stderr.write('MODULES ' + json.dumps(sorted(sys.modules)) + '\\n')\n"
                 "raise SystemExit(code)\n")


def cli_modules(vault: Path, cache: Path, *args: str
                ) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``mdsearch search ARGS -v`` run through the CLI's entry in a fresh interpreter, and the
    modules that process had imported when it was done."""
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "COLUMNS": "100"}
    done = subprocess.run([PYTHON, "-c", MODULES_AFTER, "search", *args, "-v"], cwd=vault,
                          env=env, capture_output=True, text=True, timeout=300)
    line = next(ln for ln in done.stderr.splitlines() if ln.startswith("MODULES "))
    return done, set(json.loads(line.removeprefix("MODULES ")))


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return [n for n in names if n in modules]


@pytest.mark.parametrize("fmt", ["paths", "text", "json"])
def test_a_search_through_the_server_imports_none_of_the_engine(
        served: tuple[McpClient, Path, Path], fmt: str) -> None:
    _, vault, cache = served
    through, modules = cli_modules(vault, cache, QUERY, "--format", fmt)
    assert through.returncode == 0 and THROUGH in through.stderr, through.stderr
    alone, alone_modules = cli_modules(vault, cache, QUERY, "--format", fmt, "--no-resident")
    assert alone.returncode == 0 and through.stdout == alone.stdout and through.stdout.strip()
    assert _loaded(modules, HEAVY) == []
    assert _loaded(modules, LIGHT) == []
    # the check can fail: the same process searching by itself loads all of them but Chroma
    # (a read of an up-to-date index needs no vector store) and the server's socket
    assert set(_loaded(alone_modules, HEAVY)) >= {"numpy", "onnxruntime",
                                                  "mdsearch_ls.engine.workspace",
                                                  "mdsearch_ls.engine.search.searcher"}
    assert "sqlite3" in alone_modules
    # the server sends each section as the plain text a snippet is cut from: the markdown
    # parser that renders it is the server's, and the process searching by itself loads it
    assert "markdown_it" not in modules
    assert ("markdown_it" in alone_modules) == (fmt != "paths")


def test_an_edit_made_a_moment_ago_is_found(served: tuple[McpClient, Path, Path]) -> None:
    """At once, whether the server's check stats every note or (Linux, a local disk: an inotify
    queue read at request time) only the files its watch named since the last search."""
    _, vault, cache = served
    watched = sys.platform.startswith("linux") and local_tree(vault) is None
    cli(vault, cache, "a search first: the server's first check looks at every note")
    note = vault / "operations" / "Parking garage.md"
    note.write_text("# Parking garage\n\nThe garage door code is changed every quarter by the "
                    "office manager; ask Lotte for the current four digits.\n", encoding="utf-8")
    try:
        done = cli(vault, cache, "which code opens the garage door", "-k", "1",
                   "--format", "paths")  # at once: the server's check sees what a scan would
        assert done.returncode == 0 and THROUGH in done.stderr, done.stderr
        assert done.stdout.strip() == "operations/Parking garage.md"
        assert ("only what its watch named (1 file)" in done.stderr) == watched, done.stderr
        note.write_text(note.read_text(encoding="utf-8").replace("Lotte", "the concierge"),
                        encoding="utf-8")  # in place, no new file: the stat alone tells
        done = cli(vault, cache, "who knows the garage door code", "-k", "1", "--format", "json")
        assert "concierge" in done.stdout and "Lotte" not in done.stdout, done.stdout
    finally:
        note.unlink()
    done = cli(vault, cache, "which code opens the garage door", "-k", "3", "--format", "paths")
    assert "operations/Parking garage.md" not in done.stdout


def test_other_ranking_settings_are_searched_here(served: tuple[McpClient, Path, Path]) -> None:
    _, vault, cache = served
    through = cli(vault, cache, QUERY, "--fusion", "rrf", "--format", "jsonl")
    alone = cli(vault, cache, QUERY, "--fusion", "rrf", "--format", "jsonl", "--no-resident")
    assert through.returncode == 0 and THROUGH not in through.stderr
    assert "settings differ: fusion" in through.stderr
    assert through.stdout == alone.stdout


def test_the_socket_is_the_owners_and_refuses_garbage(
        served: tuple[McpClient, Path, Path]) -> None:
    client, vault, cache = served
    path = socket_file(cache)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "refused" in raw(path, b"not json at all\n")
    assert "refused" in raw(path, b'{"v": 99}\n')
    assert "not a JSON object" in raw(path, b'[1, 2]\n')["refused"]
    answer = raw(path, json.dumps({"v": 1, "settings": {}, "queries": []}).encode() + b"\n")
    assert "settings differ" in answer["refused"]
    assert client.ready()  # the server took it all and goes on
    done = cli(vault, cache, QUERY, "-k", "1")
    assert done.returncode == 0 and THROUGH in done.stderr


def test_a_dead_servers_socket_file_costs_nothing(tmp_path: Path) -> None:
    vault = shutil.copytree(EXAMPLE_VAULT, tmp_path / "vault")
    client = start(tmp_path, [vault])
    try:
        client.wait_ready()
        path = socket_file(tmp_path / "cache")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(str(path))
            creds = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        server_pid = int.from_bytes(creds[:4], "little")
        os.kill(server_pid, signal.SIGKILL)
        wait_until(lambda: not _alive(server_pid), 30, "the server gone")
    finally:
        with contextlib.suppress(BaseException):  # the server was killed under it
            client.close()
    assert path.exists()  # kill -9 leaves the file behind
    done = cli(vault, tmp_path / "cache", QUERY, "-k", "2", "--format", "paths")
    assert done.returncode == 0 and THROUGH not in done.stderr, done.stderr
    assert done.stdout.splitlines()[0] == "operations/Crisis management and escalation.md"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (killed, not reaped yet) counts as gone
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return False


@pytest.mark.parametrize("args", [(QUERY,), (QUERY, "--format", "json", "-k", "3"),
                                  ("backup keys", "--mode", "keyword", "--color", "always")])
def test_the_server_prints_a_plain_search_for_the_cli(
        served: tuple[McpClient, Path, Path], args: tuple[str, ...]) -> None:
    """The plain form (a query, output flags): the MCP server prints it with the CLI's printer
    (cli/rendering.py, handed to the engine when `mdsearch mcp` starts), and the CLI process
    imports neither argparse nor the settings nor the printer."""
    _, vault, cache = served
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "COLUMNS": "100"}
    done = subprocess.run([PYTHON, "-c", MODULES_AFTER, "search", *args], cwd=vault, env=env,
                          capture_output=True, text=True, timeout=300)
    line = next(ln for ln in done.stderr.splitlines() if ln.startswith("MODULES "))
    modules = set(json.loads(line.removeprefix("MODULES ")))
    alone = cli(vault, cache, *args, "--no-resident")
    assert done.returncode == alone.returncode == 0, done.stderr
    assert done.stdout == alone.stdout and done.stdout.strip()
    assert _loaded(modules, ("argparse", "mdsearch_ls.config", "mdsearch_ls.cli.output",
                             "dataclasses", *HEAVY, *LIGHT)) == []


def test_status_is_read_by_the_server_that_holds_the_index(
        served: tuple[McpClient, Path, Path]) -> None:
    """`mdsearch status` asks the holder first (issue 26: status under 150 ms): the same fields
    as a read of the index in this process, without importing the engine's index modules."""
    _, vault, cache = served
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "COLUMNS": "100"}

    def status(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
        done = subprocess.run([PYTHON, "-c", MODULES_AFTER, "status", "--json", "-v", *args],
                              cwd=vault, env=env, capture_output=True, text=True, timeout=300)
        line = next(ln for ln in done.stderr.splitlines() if ln.startswith("MODULES "))
        return done, set(json.loads(line.removeprefix("MODULES ")))

    (done, modules), (alone, alone_modules) = status(), status("--no-resident")
    assert done.returncode == alone.returncode == 0, done.stderr + alone.stderr
    assert "status from the mdsearch server (process" in done.stderr
    assert "status from the mdsearch server" not in alone.stderr
    through, here = json.loads(done.stdout), json.loads(alone.stdout)
    # the holder writes the index, this process only reads it: the one field that says so
    assert through.pop("read_only") is False and here.pop("read_only") is True
    assert through == here and through["files"] > 10 and through["index"]["state"] == "ready"
    assert through["served_by"]["background"] is False  # a server a person started
    assert _loaded(modules, ("numpy", "mdsearch_ls.engine.workspace",
                             "mdsearch_ls.engine.index.manifest",
                             "mdsearch_ls.engine.notes.files")) == []
    # read here, the index is opened read-only: nothing of the writer's is imported either
    assert "mdsearch_ls.engine.workspace" in alone_modules
    assert _loaded(alone_modules, ("mdsearch_ls.engine.index.indexer", "chromadb")) == []
