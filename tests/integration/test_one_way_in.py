"""One way in (issue 54): every process reaches an index through the one process that holds it.

Real processes, the real model, a real index on disk: a search with nothing holding the index
starts the background process and asks it (and says so); the next searches, ``index`` and
``status`` ask it; switched off, a search holds the index for its own run; a language or MCP
server opening the folder takes it from the background process; searches racing to start it
start one; a holder killed with kill -9 leaves nothing in the way of the next; and the channel
of a real holder answers a bad message with a typed error and goes on serving. Run a second
time in CI with ``AF_UNIX``, ``fork`` and ``fcntl`` taken away (``tests/portable``), as on
Windows.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import connection as mpc
from pathlib import Path
from typing import Any

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.api import default_index_dir
from mdsearch_ls.engine.service.channel import Endpoint
from mdsearch_ls.engine.service.remote import find_holder
from mdsearch_ls.engine.workspace import Workspace
from tests.conftest import EXAMPLE_VAULT
from tests.integration.conftest import run_cli
from tests.mcp.mcp_harness import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.portable]

QUERY = "what do we do when more than 5% of requests fail"
ON = {"MDSEARCH_BACKGROUND": ""}
STARTED = re.compile(r"started a background process \(pid (\d+)\)")
TOO = re.compile(r"the background process \(pid (\d+)\) keeps this index loaded too")


@pytest.fixture
def indexed(tmp_path: Path, real_embedder: Any, monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[tuple[Path, Path]]:
    vault = shutil.copytree(EXAMPLE_VAULT, tmp_path / "vault")
    cache = tmp_path / "cache"
    monkeypatch.setenv("MDSEARCH_CACHE_DIR", str(cache))
    with Workspace.open(vault, Settings(), embedder=real_embedder) as ws:
        ws.index()
    try:
        yield vault, cache
    finally:  # whatever a test left running goes with it
        run_cli("background", "--stop", "--all", cache=cache, cwd=tmp_path)


def holder(vault: Path) -> tuple[int, str] | None:
    """The process that answers for ``vault``'s index: ``(pid, role)``, or None."""
    found = find_holder(vault, default_index_dir(vault))
    if found is None:
        return None
    found.index.close()
    return found.index.pid, found.role


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped yet has exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def background_processes(vault: Path) -> list[int]:
    """The pids of running ``mdsearch background`` processes started for ``vault``."""
    found = []
    for name in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        if (name.isdigit() and b"mdsearch_ls\x00background" in cmdline
                and os.fsencode(vault) in cmdline and alive(int(name))):
            found.append(int(name))
    return found


def started(run: subprocess.CompletedProcess[str]) -> int:
    found = STARTED.search(run.stderr)
    assert found, run.stderr
    return int(found.group(1))


def test_a_search_with_nothing_holding_it_starts_the_background_process_and_asks_it(indexed):
    vault, cache = indexed
    first = run_cli("search", QUERY, "-k", "3", cwd=vault, cache=cache, env=ON)
    assert first.returncode == 0, first.stderr
    pid = started(first)
    assert holder(vault) == (pid, "background")
    assert first.stdout.count("similarity") == 3

    second = run_cli("search", QUERY, "-k", "3", cwd=vault, cache=cache, env=ON)
    assert second.returncode == 0 and not STARTED.search(second.stderr), second.stderr
    assert second.stdout == first.stdout
    status = json.loads(run_cli("status", "--json", cwd=vault, cache=cache).stdout)
    assert status["held_by"] == {"pid": pid, "role": "background"} and status["files"] == 20
    assert f"the background process (pid {pid})" in run_cli("status", cwd=vault,
                                                             cache=cache).stdout

    # a note written since: the holder's watch finds it, and the next search does too
    (vault / "Zebras.md").write_text("# Zebra migration\n\nThe herd moves north each spring, "
                                     "along the river.\n", encoding="utf-8")
    wait_until(lambda: run_cli("search", "when does the herd move", "-k", "1", "--format",
                               "paths", cwd=vault, cache=cache).stdout.strip()
               .endswith("Zebras.md"), 60, "the holder indexed the new note")
    index = run_cli("index", cwd=vault, cache=cache, env=ON)  # asked of it, said the same
    assert index.returncode == 0, index.stderr
    assert "21 files" in index.stdout and "0 indexed" in index.stdout, index.stdout
    rebuild = run_cli("index", "--rebuild", cwd=vault, cache=cache, env=ON)
    assert rebuild.returncode == 0 and "21 indexed" in rebuild.stdout, rebuild
    assert holder(vault) == (pid, "background")

    stop = run_cli("background", "--stop", cwd=vault, cache=cache, env=ON)
    assert f"(pid {pid}) let the index of" in stop.stderr, stop.stderr
    wait_until(lambda: not alive(pid), 60, "its last folder gone, it exits")
    assert holder(vault) is None


@pytest.mark.parametrize("how", [{"MDSEARCH_BACKGROUND": "off"}, "--no-background"])
def test_switched_off_a_search_holds_the_index_for_its_own_run(indexed, how):
    vault, cache = indexed
    env, flags = (how, ()) if isinstance(how, dict) else (ON, (how,))
    alone = run_cli("search", QUERY, "-k", "3", *flags, cwd=vault, cache=cache, env=env)
    assert alone.returncode == 0, alone.stderr
    assert "background" not in alone.stderr and holder(vault) is None
    through = run_cli("search", QUERY, "-k", "3", cwd=vault, cache=cache, env=ON)
    assert through.stdout == alone.stdout  # one ranking, whoever holds the index


def test_it_exits_after_its_idle_time(indexed, tmp_path):
    vault, _cache = indexed
    with open(tmp_path / "log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mdsearch_ls", "background", str(vault),
                                 "--idle", "0.05", "-v"], stdout=log, stderr=log)
    try:
        wait_until(lambda: holder(vault), 120, "the background process answers")
        assert proc.wait(timeout=90) == 0  # 3 s without a request
    finally:
        proc.kill()
    assert "no request for" in (tmp_path / "log").read_text()
    assert holder(vault) is None


def test_a_server_opening_the_folder_takes_it_from_the_background_process(indexed, tmp_path):
    """An MCP server (a real process, through the MCP SDK's own client) holds the index from its
    first look; the background process lets it go at once, and the CLI asks the server."""
    from tests.mcp.mcp_harness import start

    vault, cache = indexed
    pid = started(run_cli("search", QUERY, "-k", "1", cwd=vault, cache=cache, env=ON))
    client = start(tmp_path, [vault], cache=cache)
    try:
        status = client.wait_ready()
        assert [f["read_only"] for f in status["folders"]] == [False]
        wait_until(lambda: not alive(pid), 60, "the background process, its folder gone, exits")
        server = holder(vault)
        assert server is not None and server[1] == "server" and server[0] != pid
        later = run_cli("search", QUERY, "-k", "1", cwd=vault, cache=cache, env=ON)
        assert later.returncode == 0 and "background" not in later.stderr, later.stderr
        assert later.stdout.startswith(" 1. operations/Crisis management and escalation.md")
        answer = client.call("search_markdown", {"query": QUERY, "limit": 1})
        assert answer.structured_content["results"][0]["path"] == \
            "operations/Crisis management and escalation.md"
    finally:
        client.close()


def test_one_process_holds_every_folder_the_command_line_searched(indexed, tmp_path,
                                                                  real_embedder):
    vault, cache = indexed
    other = shutil.copytree(EXAMPLE_VAULT, tmp_path / "other")
    with Workspace.open(other, Settings(), embedder=real_embedder) as ws:
        ws.index()
    pid = started(run_cli("search", QUERY, "-k", "1", cwd=vault, cache=cache, env=ON))
    second = run_cli("search", QUERY, "-k", "1", cwd=other, cache=cache, env=ON)
    assert second.returncode == 0 and not STARTED.search(second.stderr), second.stderr
    assert TOO.search(second.stderr) and int(TOO.search(second.stderr).group(1)) == pid
    assert holder(other) == holder(vault) == (pid, "background")

    let_go = run_cli("background", "--stop", cwd=vault, cache=cache, env=ON)
    assert "let the index of" in let_go.stderr, let_go.stderr
    assert holder(vault) is None and holder(other) == (pid, "background")
    stop = run_cli("background", "--stop", "--all", cwd=tmp_path, cache=cache, env=ON)
    assert f"stopped the background process (pid {pid})" in stop.stderr, stop.stderr
    wait_until(lambda: not alive(pid), 60, "the background process exits")
    assert holder(other) is None


def test_searches_racing_to_start_it_start_one(indexed):
    vault, cache = indexed
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda _: run_cli("search", QUERY, "-k", "1", cwd=vault,
                                               cache=cache, env=ON), range(4)))
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    assert len({r.stdout for r in runs}) == 1
    live = holder(vault)
    assert live is not None and live[1] == "background"
    said = [r.stderr for r in runs]
    pids = {int(m.group(1)) for s in said for m in (STARTED.search(s), TOO.search(s)) if m}
    assert pids <= {live[0]}, said  # none names a process that is not the one running
    started_pids = {int(m.group(1)) for s in said if (m := STARTED.search(s))}
    assert started_pids <= {live[0]}
    others = [p for p in background_processes(vault) if p != live[0]]
    assert others == [], "a background process that lost the race is still running"


def test_a_holder_killed_with_kill_9_leaves_nothing_in_the_way(indexed):
    vault, cache = indexed
    pid = started(run_cli("search", QUERY, "-k", "1", cwd=vault, cache=cache, env=ON))
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not alive(pid), 30, "the holder is gone")
    assert (default_index_dir(vault) / "holder.json").exists()  # its record stays behind
    again = run_cli("search", QUERY, "-k", "1", cwd=vault, cache=cache, env=ON)
    assert again.returncode == 0, again.stderr
    new = started(again)
    assert new != pid and holder(vault) == (new, "background")
    off = run_cli("index", cwd=vault, cache=cache, env={"MDSEARCH_BACKGROUND": "off"})
    assert off.returncode == 0 and "20 files" in off.stdout  # asked of the new one


def test_other_index_settings_are_the_background_processs_to_take(indexed):
    """A search naming index settings of its own: the background process holds the folder
    with those from then on (it exists for the command line), rather than answer from an index
    the search did not ask about."""
    vault, cache = indexed
    pid = started(run_cli("search", QUERY, "-k", "1", cwd=vault, cache=cache, env=ON))
    narrowed = run_cli("search", QUERY, "-k", "5", "--exclude", "operations/", "--format",
                       "paths", cwd=vault, cache=cache, env=ON)
    assert narrowed.returncode == 0, narrowed.stderr
    assert narrowed.stdout and "operations/" not in narrowed.stdout
    assert holder(vault) == (pid, "background")


def test_the_channel_of_a_real_holder_answers_bad_messages_and_serves_on(indexed, tmp_path):
    vault, cache = indexed
    pid = started(run_cli("search", QUERY, "-k", "1", cwd=vault, cache=cache, env=ON))
    record = default_index_dir(vault) / "holder.json"
    endpoint = Endpoint.load(record)
    assert endpoint is not None and endpoint.pid == pid
    address = tuple(endpoint.address) if endpoint.family == "AF_INET" else endpoint.address
    conn = mpc.Client(address, endpoint.family, authkey=bytes.fromhex(endpoint.key))
    try:
        for raw, kind in [(b"\xff not json", "MessageError"),
                          (b'{"v": 1, "type": "explode", "body": {}}', "MessageError"),
                          (b'{"v": 99, "type": "hello", "body": {}}', "MessageError"),
                          (json.dumps({"v": 1, "type": "search", "body": {
                              "root": str(vault), "requests": [{"query": 5, "k": 1}]}}
                          ).encode(), "MessageError"),
                          (json.dumps({"v": 1, "type": "search", "body": {
                              "root": "/elsewhere", "requests": []}}).encode(), "NotHeld")]:
            conn.send_bytes(raw)
            answer = json.loads(conn.recv_bytes())
            assert (answer["type"], answer["kind"]) == ("error", kind), (raw, answer)
        conn.send_bytes(b'{"v": 1, "type": "hello", "body": {}}')
        assert json.loads(conn.recv_bytes())["body"]["pid"] == pid
    finally:
        conn.close()
    with pytest.raises(mpc.AuthenticationError):
        mpc.Client(address, endpoint.family, authkey=b"not the key").close()
    if os.name == "posix":
        assert record.stat().st_mode & 0o077 == 0
        if os.geteuid() == 0:  # another user cannot even read where it listens
            other = subprocess.run(["cat", str(record)], capture_output=True, text=True,
                                   cwd="/", preexec_fn=lambda: os.setuid(65534))
            assert other.returncode != 0 and "Permission denied" in other.stderr
    after = run_cli("search", QUERY, "-k", "1", cwd=vault, cache=cache, env=ON)
    assert after.returncode == 0 and not STARTED.search(after.stderr)


def test_a_background_process_whose_index_folder_is_deleted_lets_it_go(indexed):
    """A temporary folder removed while its index was held: the background process notices,
    lets it go without writing anything back, and exits with its last folder."""
    vault, cache = indexed
    pid = started(run_cli("search", QUERY, "-k", "1", cwd=vault, cache=cache, env=ON))
    index_dir = default_index_dir(vault)
    shutil.rmtree(index_dir)
    wait_until(lambda: not alive(pid), 90, "the background process lets the folder go")
    assert not index_dir.exists()  # nothing written back into the deleted path


def test_the_watch_stays_inside_the_vault(indexed, real_embedder):
    """A symbolic link to / inside a vault is not followed by the holder's watch: a change
    under the vault is seen, the folders watched are the vault's own."""
    from mdsearch_ls.engine.api import Folders, SearchRequest

    vault, _cache = indexed
    (vault / "everything").symlink_to("/")
    folders = Folders(Settings(), embedder=real_embedder)
    try:
        folder = folders.add(vault, Settings())
        folder.start_index().result(timeout=300)
        watched = wait_until(lambda: folders.watcher._watched, 30, "the watch starts")
        assert all(Path(p).resolve().is_relative_to(vault.resolve()) for p in watched)
        assert len(watched) < 50  # the vault's folders, not a whole disk's
        (vault / "Zebras.md").write_text("# Zebra migration\n\nThe herd moves north each "
                                         "spring, along the river.\n", encoding="utf-8")
        request = SearchRequest.build("when does the herd move", k=1)
        wait_until(lambda: [h.path for h in folder.search(request).hits] == ["Zebras.md"], 60,
                   "the watch saw the new note")
    finally:
        folders.close(timeout=30)
