"""The ``mdsearch mcp`` process: a fast handshake, answers while the index is built, several
roots as one set, and a clean exit when the client goes away."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from mcp_harness import EXAMPLE_VAULT, PYTHON, server_command, start, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.portable]


def _sdk_import_seconds() -> float:
    """How long this machine takes, right now, just to import the MCP SDK (a baseline: the
    server cannot answer before its own SDK is imported)."""
    t0 = time.monotonic()
    subprocess.run([PYTHON, "-c", "import mcp.server.mcpserver"], check=True)
    return time.monotonic() - t0


def test_initialize_answers_before_the_model_loads(tmp_path: Path) -> None:
    vault = shutil.copytree(EXAMPLE_VAULT, tmp_path / "vault")
    baseline = _sdk_import_seconds()
    client = start(tmp_path, [vault])
    try:
        status = client.status()
        # Answered while the model was still loading (it takes seconds): nothing waited on it.
        assert status["model"]["state"] == "loading", status
        assert client.init_result.server_info.name == "mdsearch"
        # Spawn to initialize result: the SDK's own import plus well under a second of ours.
        assert client.init_seconds < baseline + 1.0, (client.init_seconds, baseline)
    finally:
        client.close()


def _raw_initialize(proc: subprocess.Popen) -> dict:
    assert proc.stdin is not None and proc.stdout is not None
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"}}}
    proc.stdin.write((json.dumps(request) + "\n").encode())
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    proc.stdin.flush()
    return answer


def _synthetic_vault(root: Path, notes: int) -> Path:
    """Enough notes that the first index takes a while, with distinct words per note."""
    root.mkdir()
    words = ["harbour", "crane", "ledger", "tariff", "pallet", "invoice", "roster", "forklift",
             "quay", "berth", "manifest", "customs", "freight", "tugboat", "dredger", "bollard",
             "gantry", "reefer", "lashing", "stevedore"]
    for i in range(notes):
        body = " ".join(words[(i * 7 + j) % len(words)] for j in range(60))
        (root / f"note-{i:04d}.md").write_text(
            f"# Note {i}\n\n## Part one\n\n{body}.\n\n## Part two\n\nItem {i}: {body[::-1]}.\n",
            encoding="utf-8")
    return root


@pytest.mark.parametrize("while_indexing", [False, True], ids=["idle", "while-indexing"])
def test_closing_stdin_ends_the_process(tmp_path: Path, while_indexing: bool) -> None:
    vault = (_synthetic_vault(tmp_path / "big", 1500) if while_indexing
             else shutil.copytree(EXAMPLE_VAULT, tmp_path / "vault"))
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(tmp_path / "cache")}
    with open(tmp_path / "server.log", "wb") as log:
        proc = subprocess.Popen(server_command([vault]), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=log, env=env)
        try:
            answer = _raw_initialize(proc)
            assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "mdsearch"
            if while_indexing:
                # Wait until the writer is busy with the first index, then hang up.
                index_dirs = tmp_path / "cache" / "indexes"
                wait_until(lambda: any(index_dirs.glob("*/holder.lock")), 120,
                           "the first index started")
            assert proc.stdin is not None
            proc.stdin.close()
            code = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert code == 0, (tmp_path / "server.log").read_text(errors="replace")


def test_a_search_while_the_first_index_runs_says_so(tmp_path: Path) -> None:
    vault = _synthetic_vault(tmp_path / "big", 3000)
    client = start(tmp_path, [vault])
    try:
        result = client.call("search_markdown", {"query": "tugboat berth customs"})
        assert not result.is_error, result.content[0].text
        sc = result.structured_content
        index = sc["index"]
        assert index["state"] == "building", sc
        assert index["files_done"] < index["files_total"] or index["files_total"] == 0
        text = result.content[0].text
        # Never an empty list that looks like "no match": the answer says the index is not done.
        assert "still being built" in text or "Nothing is indexed yet" in text, text
        if not sc["results"]:
            assert text.startswith('No results yet for "tugboat berth customs"')
    finally:
        client.close()


def test_several_roots_are_one_searchable_set(tmp_path: Path) -> None:
    work = shutil.copytree(EXAMPLE_VAULT, tmp_path / "work")
    home = tmp_path / "home"
    (home / "garden").mkdir(parents=True)
    (home / "garden" / "Tomatoes.md").write_text(
        "# Tomatoes\n\n## Watering\n\nWater tomatoes at the base every morning; wet leaves "
        "invite blight.\n", encoding="utf-8")
    (home / "Expenses.md").write_text(
        "# Household expenses\n\nThe energy bill is paid by direct debit on the 3rd; the "
        "receipt goes in the blue folder.\n", encoding="utf-8")
    client = start(tmp_path, [work, home])
    try:
        client.wait_ready()
        st = client.status()
        assert [f["name"] for f in st["folders"]] == ["work", "home"]
        hits = client.call("search_markdown", {"query": "how often should I water the tomato "
                                               "plants", "limit": 3}).structured_content
        assert hits["results"][0]["path"] == "home/garden/Tomatoes.md"
        # One query, hits from both folders, each shown with its folder.
        both = client.call("search_markdown", {"query": "where do receipts go",
                                                "limit": 8}).structured_content["results"]
        assert {h["path"].split("/")[0] for h in both} == {"work", "home"}
        # Each folder's own order is kept in the merged list.
        work_only = client.call("search_markdown", {"query": "where do receipts go", "limit": 8,
                                                    "path": "work/"}).structured_content
        assert all(h["path"].startswith("work/") for h in work_only["results"])
        merged_work = [h["path"] for h in both if h["path"].startswith("work/")]
        assert merged_work == [h["path"] for h in work_only["results"]][:len(merged_work)]
        read = client.call("read_section", {"path": "home/garden/Tomatoes.md",
                                            "heading": "Watering"})
        assert "base every morning" in read.structured_content["text"]
        assert client.call("read_section", {"path": str(home / "Expenses.md")}).structured_content[
            "path"] == "home/Expenses.md"
        resources = client.run(lambda s: s.list_resources()).resources
        assert "mdsearch://note/home/garden/Tomatoes.md" in {str(r.uri) for r in resources}
    finally:
        client.close()


def test_a_symlink_out_of_the_root_is_not_read(tmp_path: Path) -> None:
    vault = shutil.copytree(EXAMPLE_VAULT, tmp_path / "vault")
    secret = tmp_path / "secret.md"
    secret.write_text("# Secret\n\nThe safe code is 4711.\n", encoding="utf-8")
    (vault / "link.md").symlink_to(secret)
    client = start(tmp_path, [vault])
    try:
        result = client.call("read_section", {"path": "link.md"})
        assert result.is_error and "leads outside" in result.content[0].text
        assert "4711" not in result.content[0].text
    finally:
        client.close()


def test_an_excluded_note_is_answered_as_a_missing_one(tmp_path: Path) -> None:
    """Whoever reads through the server cannot tell an ignored, excluded or hidden note that
    exists from one that does not: the tool and the resource answer both alike."""
    vault = tmp_path / "vault"
    for rel in ("open.md", "ignored.md", "drafts/plan.md", ".private/diary.md"):
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text("# Secret\n\nThe safe code is 4711.\n", encoding="utf-8")
    (vault / ".gitignore").write_text("ignored.md\n", encoding="utf-8")
    client = start(tmp_path, [vault], "--exclude", "drafts/")
    try:
        def answers(rel: str) -> tuple[str, str]:
            tool = client.call("read_section", {"path": rel})
            assert tool.is_error
            try:
                client.run(lambda s: s.read_resource(f"mdsearch://note/{rel}"))
                resource = "read"
            except Exception as exc:  # the SDK raises the server's error
                resource = str(exc)
            return (tool.content[0].text.replace(rel, "PATH"), resource.replace(rel, "PATH"))

        for there, missing in (("ignored.md", "absent.md"), ("drafts/plan.md", "drafts/no.md"),
                               (".private/diary.md", ".private/no.md")):
            assert answers(there) == answers(missing), there
            assert "does not exist" in answers(there)[0]
        assert not client.call("read_section", {"path": "open.md"}).is_error
    finally:
        client.close()


def test_a_missing_root_is_a_usage_error() -> None:
    proc = subprocess.run([*server_command([Path("/nonexistent/notes")])],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--root /nonexistent/notes: no such folder" in proc.stderr
    assert proc.stdout == ""



def test_every_line_gets_an_answer_lone_surrogates_and_invalid_json(tmp_path: Path) -> None:
    """The SDK drops a line it cannot parse (never answered, nothing logged, issue 27): a lone
    surrogate gets -32602 naming the field, invalid JSON -32700, and the server goes on."""
    vault = shutil.copytree(EXAMPLE_VAULT, tmp_path / "vault")
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen(server_command([vault]), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        _raw_initialize(proc)
        lines = [
            # json.dumps writes "\ud83c" as the escape a client that cut an emoji sends
            json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "search_markdown", "arguments": {"query": "late invoices \ud83c"}}}),
            json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                "name": "read_section", "arguments": {"path": "finance/\udc00.md"}}}),
            "{this is not json",
            json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}}),
        ]
        proc.stdin.write(("\n".join(lines) + "\n").encode())
        proc.stdin.flush()
        answers = [json.loads(proc.stdout.readline()) for _ in range(4)]
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    by_id = {a.get("id"): a for a in answers}
    assert by_id[2]["error"]["code"] == -32602
    assert "params.arguments.query holds a lone surrogate" in by_id[2]["error"]["message"]
    assert by_id[3]["error"]["code"] == -32602
    assert "params.arguments.path" in by_id[3]["error"]["message"]
    assert by_id[None]["error"]["code"] == -32700
    assert "search_markdown" in json.dumps(by_id[4]["result"])  # still serving


def _status_and_search(proc: subprocess.Popen) -> tuple[dict, dict]:
    assert proc.stdin is not None and proc.stdout is not None
    for n in range(2, 400):
        proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                      "params": {"name": "index_status", "arguments": {}}})
                          + "\n").encode())
        proc.stdin.flush()
        status = json.loads(proc.stdout.readline())["result"]
        folders = status["structuredContent"]["folders"]
        if folders and folders[0]["state"] in ("error", "ready"):
            break
        time.sleep(0.1)
    proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": 999, "method": "tools/call", "params": {
        "name": "search_markdown", "arguments": {"query": "late invoices"}}}) + "\n").encode())
    proc.stdin.flush()
    return status, json.loads(proc.stdout.readline())["result"]


@pytest.mark.parametrize("allowed", [False, True], ids=["refused", "with-yes"])
def test_the_home_folder_is_refused_unless_allowed(tmp_path: Path, allowed: bool) -> None:
    """As the CLI asks for --yes at / and the home folder, the server refuses them (issue 27):
    an error in index_status, a tool error naming the reason, nothing indexed or watched."""
    home = tmp_path / "home"
    shutil.copytree(EXAMPLE_VAULT, home / "notes")
    cache = tmp_path / "cache"
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "HOME": str(home)}
    proc = subprocess.Popen(server_command([home], *(["--yes"] if allowed else [])),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    try:
        _raw_initialize(proc)
        status, search = _status_and_search(proc)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
    folder = status["structuredContent"]["folders"][0]
    if allowed:
        assert folder["state"] == "ready" and folder["files"] > 0
        assert not search.get("isError") and search["structuredContent"]["results"]
        return
    assert folder["state"] == "error" and "is your home folder" in folder["last_error"]
    assert "allow_any_root" in folder["last_error"]
    assert not status["structuredContent"]["watching"]
    assert search["isError"] and "is your home folder" in search["content"][0]["text"]
    assert not (cache / "indexes").exists() or not any((cache / "indexes").iterdir())


def test_bad_arguments_get_short_errors_that_name_no_server_path(tmp_path: Path) -> None:
    """A 5 MB path once came back as a 5 MB error, a long name as the OS's error quoting the
    server's absolute path, a NUL was stripped (``Home.md\\0../../etc/passwd`` read
    ``etc/passwd``) and ``line=10**9`` was accepted (issues 22 and 27)."""
    vault = shutil.copytree(EXAMPLE_VAULT, tmp_path / "vault")
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen(server_command([vault]), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    cases = [
        ("read_section", {"path": "x" * 5_000_000}, "longer than any note's path"),
        ("read_section", {"path": "a" * 300 + ".md"}, "File name too long"),
        ("read_section", {"path": "Home.md\x00../../etc/passwd"}, "NUL character"),
        ("related_sections", {"path": "Home.md", "line": 10**9}, "past the end of Home.md"),
        ("search_markdown", {"query": "x", "mode": "z" * 100_000}, "'mode' must be one of"),
        ("search_markdown", {"query": "x", "bogus" * 10_000: 1}, "unknown argument"),
        ("update_files", {"paths": ["z" * 1_000_000]}, ""),
    ]
    assert proc.stdin is not None and proc.stdout is not None
    try:
        _raw_initialize(proc)
        answers = []
        for n, (name, arguments, _) in enumerate(cases, start=10):
            proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                          "params": {"name": name, "arguments": arguments}})
                              + "\n").encode())
            proc.stdin.flush()
            answers.append(json.loads(proc.stdout.readline()))
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    for (name, _, words), answer in zip(cases, answers, strict=True):
        result = answer["result"]
        text = result["content"][0]["text"]
        assert result["isError"], (name, text[:200])
        assert len(text) <= 400, (name, len(text))
        assert words in text, (name, text[:200])
        assert str(vault) not in text and "/etc/passwd" not in text, (name, text[:200])


def test_a_client_gone_mid_answer_leaves_no_traceback(tmp_path: Path) -> None:
    """A client killed while its answer is written once left a 60-line BrokenPipe traceback
    (issue 27): the server ends quietly, exit 0."""
    vault = shutil.copytree(EXAMPLE_VAULT, tmp_path / "vault")
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(tmp_path / "cache")}
    with open(tmp_path / "server.log", "wb") as log:
        proc = subprocess.Popen(server_command([vault]), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=log, env=env)
        assert proc.stdin is not None and proc.stdout is not None
        _raw_initialize(proc)
        proc.stdout.close()  # killed: nobody reads what comes next...
        request = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        try:
            proc.stdin.write((json.dumps(request) + "\n").encode())
            proc.stdin.flush()
            proc.stdin.close()  # ...and nobody writes: whichever the server meets first,
        except BrokenPipeError:  # its answer to tools/list cannot be written
            pass
        code = proc.wait(timeout=120)
    text = (tmp_path / "server.log").read_text(errors="replace")
    assert code == 0, text
    assert "Traceback" not in text and "BrokenPipeError" not in text, text
