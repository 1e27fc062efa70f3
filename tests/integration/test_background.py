"""The background process (issue 26): a search answered in its own process starts one and says
so; the next searches and ``mdsearch index`` go through it and print what they print without
it; it is never started when switched off; it leaves when idle, and gives the index up to
``mdsearch index --rebuild`` and to a server opening the folder. Real processes, the real model,
a real index on disk."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLE_VAULT
from tests.integration.conftest import run_cli
from tests.mcp.mcp_harness import wait_until

pytestmark = pytest.mark.slow

QUERY = "what do we do when more than 5% of requests fail"
ON = {"MDSEARCH_BACKGROUND": ""}
STARTED = re.compile(r"started a background process \(pid (\d+)\)")


@pytest.fixture
def indexed(tmp_path: Path, real_embedder: Any, monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[tuple[Path, Path]]:
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.api import index_dir_of
    from mdsearch_ls.engine.workspace import Workspace

    vault = shutil.copytree(EXAMPLE_VAULT, tmp_path / "vault")
    cache = tmp_path / "cache"
    monkeypatch.setenv("MDSEARCH_CACHE_DIR", str(cache))
    with Workspace.open(vault, Settings(), embedder=real_embedder) as ws:
        ws.index()
    try:
        yield vault, cache
    finally:  # whatever a test left running goes with it
        ask_to_leave(index_dir_of(vault, Settings()))
        ask_socket(background_socket_path(cache), cache, {"v": 1, "stop": True})


def ask(vault: Path, request: dict[str, Any]) -> dict[str, Any] | None:
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.api import (
        PROTOCOL_RESIDENT,
        ask_socket,
        index_dir_of,
        resident_socket_path,
    from mdsearch_ls.engine.api import index_dir_of
def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped yet has exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def test_a_search_starts_one_says_so_and_the_next_searches_go_through_it(indexed):
    vault, cache = indexed
    first = run_cli("search", QUERY, "-k", "3", cwd=vault, cache=cache, env=ON)
    assert first.returncode == 0, first.stderr
    started = STARTED.search(first.stderr)
    assert started, first.stderr
    pid = int(started.group(1))
    who = wait_until(lambda: ask(vault, {"who": True}), 120, "the background process answers")
    assert who == {"v": 1, "pid": pid, "background": True}

    second = run_cli("search", QUERY, "-k", "3", "-v", cwd=vault, cache=cache, env=ON)
    from mdsearch_ls.engine.workspace import Workspace    assert f"searched through the mdsearch server (process {pid})" in second.stderr
    assert not STARTED.search(second.stderr)  # one is running: none started again
    assert second.stdout == first.stdout  # what a search in process printed
    status = run_cli("status", "--json", cwd=vault, cache=cache, env=ON)
    served = json.loads(status.stdout)["served_by"]
    assert served["pid"] == pid and served["background"] is True
    assert f"a background process (pid {pid})" in run_cli("status", cwd=vault, cache=cache).stdout

    # a note written since: `index` through it writes that note alone, and a search finds it
    (vault / "Zebras.md").write_text("# Zebra migration\n\nThe herd moves north each spring, "
                                     "along the river.\n", encoding="utf-8")
    index = run_cli("index", "-v", cwd=vault, cache=cache, env=ON)
    assert index.returncode == 0, index.stderr
    assert f"indexed through the mdsearch server (process {pid})" in index.stderr
    assert "21 files" in index.stdout and "1 indexed" in index.stdout, index.stdout
    again = run_cli("index", cwd=vault, cache=cache, env=ON)
    assert "(nothing had changed)" in again.stdout, again.stdout
    found = run_cli("search", "when does the herd move", "-k", "1", "--format", "paths",
                    cwd=vault, cache=cache, env=ON)
    assert found.stdout.strip().endswith("Zebras.md"), found
    # it wrote without Chroma (the next writer that opens it catches up): never even loaded
    assert "chromadb_rust_bindings" not in Path(f"/proc/{pid}/maps").read_text()

    # a rebuild needs the writer lock: the background process gives it up and exits
    rebuild = run_cli("index", "--rebuild", cwd=vault, cache=cache, env=ON)
    assert rebuild.returncode == 0, rebuild.stderr
    assert "21 files" in rebuild.stdout
    wait_until(lambda: not alive(pid), 60, "the background process exits")


@pytest.mark.parametrize("how", [{"MDSEARCH_BACKGROUND": "off"}, "--no-background",
                                 "--no-resident"])
def test_switched_off_none_is_started(indexed, how):
    vault, cache = indexed
    env, flags = (how, ()) if isinstance(how, dict) else (ON, (how,))
    run = run_cli("search", QUERY, "-k", "1", *flags, cwd=vault, cache=cache, env=env)
    assert run.returncode == 0, run.stderr
    assert "background" not in run.stderr
    assert ask(vault, {"who": True}) is None


def test_it_exits_after_its_idle_time(indexed, tmp_path):
    vault, _ = indexed
    with open(tmp_path / "log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mdsearch_ls", "background", str(vault),
                                 "--idle", "0.05", "-v"], stdout=log, stderr=log)
    try:
        wait_until(lambda: ask(vault, {"who": True}), 120, "the background process answers")
        assert proc.wait(timeout=60) == 0  # 3 s without a request
    finally:
        proc.kill()
    assert "no request for" in (tmp_path / "log").read_text()
    assert ask(vault, {"who": True}) is None


def test_a_server_opening_the_folder_becomes_its_writer_at_once(indexed, tmp_path,
                                                                real_embedder):
    """What the language and MCP servers do on start (the folders service they share): the
    background process leaves, and the server writes the index without the 10 s wait of a
    take-over from another server."""
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.api import Folders

    vault, _ = indexed
    with open(tmp_path / "log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mdsearch_ls", "background", str(vault)],
                                stdout=log, stderr=log)
    folders = Folders(Settings(), embedder=real_embedder)
    try:
        wait_until(lambda: ask(vault, {"who": True}), 120, "the background process answers")
        folder = folders.add(vault, Settings())
        assert folder is not None
        report = folders.index(folder).result(timeout=120)
        assert report is not None and folder.ws is not None and not folder.ws.read_only
        assert proc.wait(timeout=60) == 0
        # and the socket is now the server's, which a person started: it does not leave
        assert ask(vault, {"who": True})["background"] is False
        assert ask(vault, {"leave": True})["refused"].startswith("not a background process")
    finally:
        folders.close()
        proc.kill()


def test_a_search_it_cannot_answer_moves_it_aside(indexed):
    """Other ranking settings (or another release) than the background process's: the search
    runs in its own process, and where it must write first the background process lets the
    folder go instead of leaving the index un-updated (its only folder: it exits); a new one
    holds it with the new settings."""
    vault, cache = indexed
    first = run_cli("search", QUERY, "-k", "1", cwd=vault, cache=cache, env=ON)
    pid = int(STARTED.search(first.stderr).group(1))
    wait_until(lambda: ask(vault, {"who": True}), 120, "the background process answers")
    # answered through it: its first look at the notes is over, so the note below is news to
    # it (written during that look, it would be indexed there and the search need not write)
    through = run_cli("search", QUERY, "-k", "1", "-v", cwd=vault, cache=cache, env=ON)
    assert f"(process {pid})" in through.stderr, through.stderr
    (vault / "Zebras.md").write_text("# Zebra migration\n\nThe herd moves north each spring, "
                                     "along the river.\n", encoding="utf-8")
    other = run_cli("search", "when does the herd move", "-k", "1", "--fusion", "rrf",
                    "--format", "paths", "-v", cwd=vault, cache=cache, env=ON)
    assert other.returncode == 0, other.stderr
    assert "settings differ: fusion" in other.stderr
    assert "gave it over" in other.stderr, other.stderr
    assert other.stdout.strip().endswith("Zebras.md")  # updated first, as a search does
    assert "locked" not in other.stderr and "held by" not in other.stderr
    # that was its only folder: it exits at once, and a new one holds it with these settings
    wait_until(lambda: not alive(pid), 60, "the first background process exits")
    started = STARTED.search(other.stderr)
    assert started and int(started.group(1)) != pid, other.stderr
    new = int(started.group(1))
    wait_until(lambda: ask(vault, {"who": True}), 120, "the new one answers")
    again = run_cli("search", "when does the herd move", "-k", "1", "--fusion", "rrf", "-v",
                    cwd=vault, cache=cache, env=ON)
    assert f"searched through the mdsearch server (process {new})" in again.stderr


def test_an_mcp_server_started_on_the_folder_takes_it_over(indexed, tmp_path):
    """The same as a real ``mdsearch mcp`` process, through the MCP SDK's own client: the
    assistant's server writes the index from its first scan, and the CLI asks it from then on."""
    from tests.mcp.mcp_harness import start

    vault, cache = indexed
    first = run_cli("search", QUERY, "-k", "1", cwd=vault, cache=cache, env=ON)
    pid = int(STARTED.search(first.stderr).group(1))
    wait_until(lambda: ask(vault, {"who": True}), 120, "the background process answers")
    client = start(tmp_path, [vault], cache=cache)
    try:
        status = client.wait_ready()
        assert [f["read_only"] for f in status["folders"]] == [False]
        wait_until(lambda: not alive(pid), 60, "the background process exits")
        who = ask(vault, {"who": True})
        assert who is not None and who["background"] is False and who["pid"] != pid
        # its open left Chroma closed (its files as the last clean close left them): no
        # answer waited for its import; the first write opens it
        maps = Path(f"/proc/{who['pid']}/maps")
        assert "chromadb_rust_bindings" not in maps.read_text()
        later = run_cli("search", QUERY, "-k", "1", "-v", cwd=vault, cache=cache, env=ON)
        assert f"(process {who['pid']})" in later.stderr and not STARTED.search(later.stderr)
        (vault / "Zebras.md").write_text("# Zebra migration\n\nThe herd moves north each "
                                         "spring, along the river.\n", encoding="utf-8")
        found = run_cli("search", "when does the herd move", "-k", "1", "--format", "paths",
                        "-v", cwd=vault, cache=cache, env=ON)
        assert f"(process {who['pid']})" in found.stderr
        assert found.stdout.strip().endswith("Zebras.md"), found
        assert "chromadb_rust_bindings" in maps.read_text()
    finally:
        client.close()


def test_one_process_holds_every_folder_the_command_line_searched(indexed, tmp_path,
                                                                  real_embedder):
    """A search of a second folder asks the running background process to hold it too (one
    model in memory, not one per folder); letting one folder go keeps the other; --stop --all
    ends it."""
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.api import Workspace, ask_socket, background_socket_path

    vault, cache = indexed
    other = shutil.copytree(EXAMPLE_VAULT, tmp_path / "other")
    with Workspace.open(other, Settings(), embedder=real_embedder) as ws:
        ws.index()
    first = run_cli("search", QUERY, "-k", "1", cwd=vault, cache=cache, env=ON)
    pid = int(STARTED.search(first.stderr).group(1))
    wait_until(lambda: ask(vault, {"who": True}), 120, "the background process answers")

    second = run_cli("search", QUERY, "-k", "1", cwd=other, cache=cache, env=ON)
    assert second.returncode == 0, second.stderr
    assert not STARTED.search(second.stderr)
    assert f"the background process (pid {pid}) keeps this index loaded too" in second.stderr
    held = wait_until(lambda: ask(other, {"who": True}), 120, "it answers for the second folder")
    assert held["pid"] == pid and held["background"] is True
    control = ask_socket(background_socket_path(cache), cache, {"v": 1, "who": True})
    assert sorted(control["folders"]) == sorted([str(vault.resolve()), str(other.resolve())])
    through = run_cli("search", QUERY, "-k", "1", "-v", cwd=other, cache=cache, env=ON)
    assert f"(process {pid})" in through.stderr

    let_go = run_cli("background", "--stop", cwd=vault, cache=cache, env=ON)
    assert "let the index of" in let_go.stderr, let_go.stderr
    assert ask(vault, {"who": True}) is None and ask(other, {"who": True})["pid"] == pid
    assert alive(pid)
    stop = run_cli("background", "--stop", "--all", cwd=tmp_path, cache=cache, env=ON)
    assert f"stopped the background process (pid {pid})" in stop.stderr, stop.stderr
    wait_until(lambda: not alive(pid), 60, "the background process exits")
    assert ask(other, {"who": True}) is None


def test_the_server_prints_a_plain_search_as_the_cli_prints_it(indexed):
    """The plain form (a query and output flags) is printed by the background process with the
    CLI's own printer for the CLI's terminal and folder: the same bytes as a search in process,
    from a process that imported neither argparse nor the settings."""
    from tests.unit.test_resident_client import PRINTING_MODULES, _cli_modules

    vault, cache = indexed
    first = run_cli("search", QUERY, cwd=vault, cache=cache, env=ON)
    assert STARTED.search(first.stderr), first.stderr
    wait_until(lambda: ask(vault, {"who": True}), 120, "the background process answers")
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "COLUMNS": "100", **ON}
    env.pop("NO_COLOR", None)
    below = vault / "engineering"  # paths are shown relative to the folder a search runs in
    for cwd, flags in [(vault, []), (vault, ["--format", "json"]), (below, ["--format", "jsonl"]),
                       (below, ["--format=vimgrep", "-k", "2"]), (vault, ["-l", "-k", "8"]),
                       (below, ["--color", "always", "-k", "3", "--explain"]),
                       (vault, ["-q"]), (vault, ["--mode", "keyword", "-k", "4"])]:
        printed, modules = _cli_modules(cwd, env, "search", QUERY, *flags)
        alone = run_cli("search", QUERY, *flags, "--no-resident", "--no-update", cwd=cwd,
                        cache=cache)
        assert printed.returncode == alone.returncode == 0, (printed.stderr, alone.stderr)
        assert [m for m in PRINTING_MODULES if m in modules] == [], flags  # printed there
        assert printed.stdout == alone.stdout, flags
        assert printed.stdout.strip(), flags
    # a query the engine refuses is the CLI's to report: the same message and exit code
    bad = run_cli("search", "modified:>someday", cwd=vault, cache=cache, env=ON)
    alone = run_cli("search", "modified:>someday", "--no-resident", "--no-update", cwd=vault,
                    cache=cache)
    assert bad.returncode == alone.returncode == 2 and bad.stderr == alone.stderr
