"""The rules the CLI and the server that holds an index both read from
``engine/service/resident_rules.py`` (issue 26): where the socket is, which folder may hold it,
and which settings must match for the server's answer to be the CLI's."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import types
from pathlib import Path
from typing import Any

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.service import resident_rules


@pytest.mark.parametrize("settings", [
    Settings(),
    Settings(include=("notes/**/*.md",), exclude=("drafts/**",), include_formats=("pdf",),
             fusion="rrf", per_file=3, chunk_size=600, chunk_overlap=100),
])
def test_only_settings_that_change_a_ranking_must_match(settings: Settings) -> None:
    mine = resident_rules.ranking_settings(settings)
    assert set(mine) == set(resident_rules.RANKING_FIELDS)
    other = dataclasses.replace(settings, mode="keyword", max_results=3)  # not ranking ones
    assert resident_rules.ranking_settings(other) == mine
    assert resident_rules.ranking_settings(dataclasses.replace(settings, fusion=(
        "convex" if settings.fusion == "rrf" else "rrf"))) != mine
    assert all(not isinstance(v, tuple) for v in mine.values())  # JSON values: lists


def test_the_socket_path_short_and_long(tmp_path: Path) -> None:
    short = tmp_path / "idx"
    long = tmp_path / ("x" * 120) / "idx"
    assert resident_rules.resident_socket_path(short) == short / "search.sock"
    moved = resident_rules.resident_socket_path(long)
    assert moved.parent.name == f"mdsearch-{os.getuid()}" and moved.suffix == ".sock"
    assert len(os.fsencode(str(moved))) < 100
    assert moved == resident_rules.resident_socket_path(long)  # both sides find the same one


def test_a_private_folder(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    assert resident_rules.private_dir(mine, create=True) and mine.is_dir()
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    assert not resident_rules.private_dir(shared, create=False)
    assert not resident_rules.private_dir(tmp_path / "absent", create=False)


# ---- the CLI's side against a stand-in server: which formats it asks with ----------------------

HIT = {"path": "a.md", "title": "A", "start_line": 0, "end_line": 1, "breadcrumb": "A",
       "score": 0.5, "keyword_rank": 1, "snippet": "", "chunk_id": "c1", "plain": "text"}


class _StandIn:
    """A socket that answers as a server whose own ``include_formats`` is ``mine`` and whose
    index remembers ``remembered`` (absent: a server from before answers named them)."""

    def __init__(self, path: Path, mine: list[str], remembered: Any,
                 index: dict[str, Any] | None = None, *, knows_defaults: bool = True,
                 rendered: dict[str, Any] | None = None) -> None:
        """``knows_defaults``: takes a request that says ``defaults`` instead of its settings
        (the CLI's question sent ahead); ``rendered``: what it printed for the CLI."""
        self.asked: list[list[str]] = []
        self.requests: list[dict[str, Any]] = []
        self.mine, self.remembered, self.index = mine, remembered, index or {}
        self.knows_defaults, self.rendered = knows_defaults, rendered
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(4)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while not data.endswith(b"\n"):
                    data += conn.recv(65536)
                request = json.loads(data)
                self.requests.append(request)
                defaults = "settings" not in request and request.get("defaults") is True
                formats = [] if defaults else request["settings"]["include_formats"]
                self.asked.append(formats)
                if formats != self.mine or (defaults and not self.knows_defaults):
                    answer: dict[str, Any] = {"v": 1, "refused": "settings differ"}
                else:
                    answer = {"v": 1, "pid": 1, "checked": "every note",
                              "results": [{"hits": [HIT], "notes": [], "index": self.index}]}
                    if self.remembered is not ABSENT:
                        answer["index_formats"] = self.remembered
                    if self.rendered is not None and "render" in request:
                        answer["rendered"] = self.rendered
                conn.sendall(json.dumps(answer).encode() + b"\n")


ABSENT = object()


@pytest.mark.parametrize(("flag", "mine", "remembered", "stored", "asked", "answered"), [
    # the index remembers no formats: one question, and the manifest is not opened
    (None, [], [], "unread", [[]], True),
    (None, [], None, "unread", [[]], True),
    # it remembers PDFs (the server itself reads none): asked again with them, refused, so the
    # CLI searches by itself, as it did when it read them from the manifest first
    (None, [], ["pdf"], "unread", [[], ["pdf"]], False),
    # the server reads PDFs: it refuses the CLI's none; the manifest says PDFs; asked again
    (None, ["pdf"], ["pdf"], ("pdf",), [[], ["pdf"]], True),
    # a server from before answers named them: read from the manifest, as before
    (None, [], ABSENT, None, [[]], True),
    (None, [], ABSENT, ("pdf",), [[], ["pdf"]], False),
    # --include-formats given: the index's memory does not count
    ("none", [], ["pdf"], "unread", [[]], True),
])
def test_a_search_asks_with_the_formats_the_index_remembers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        flag: str | None, mine: list[str], remembered: Any, stored: Any,
        asked: list[list[str]], answered: bool) -> None:
    from mdsearch_ls.cli import resident
    from mdsearch_ls.config import settings_from_flags
    from mdsearch_ls.engine import api
    from mdsearch_ls.engine.index.layout import index_dir_of

    monkeypatch.setenv("MDSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "notes"
    root.mkdir()
    monkeypatch.chdir(root)  # paths are printed relative to the folder the search runs in
    settings = settings_from_flags({"include_formats": flag})
    index_dir = index_dir_of(root, settings)
    index_dir.mkdir(parents=True)
    path = resident_rules.resident_socket_path(index_dir)
    assert path.parent == index_dir or resident_rules.private_dir(path.parent, create=True)

    def read(_root: Path, _settings: Settings) -> Any:
        assert stored != "unread", "the manifest was opened"
        return stored

    monkeypatch.setattr(api, "index_formats", read, raising=False)
    server = _StandIn(path, mine, remembered)
    args = argparse.Namespace(include_formats=flag, no_update=False, k=None, mode=None,
                              min_score=None, format="paths", color="never", explain=False,
                              queries=None, open=None, quiet=True, phrase=None)
    query = types.SimpleNamespace(text="q", error=None, request=None)
    try:
        code = resident.run(args, settings, root, [query], {}, None)
    finally:
        server.sock.close()
        path.unlink()
    assert server.asked == asked
    assert (code, capsys.readouterr().out) == ((0, "a.md\n") if answered else (None, ""))


# ---- what the CLI process itself costs when a server answers ------------------------------------

# The CLI's own entry, then what it imported, on stderr after everything it printed.
MODULES_AFTER = ("import json, sys\n"
                 "from mdsearch_ls.cli import main\n"
                 "try:\n"
                 "    code = main(sys.argv[1:])\n"
                 "except SystemExit as exc:\n"
                 "    code = exc.code\n"
                 "sys.stderr.write('MODULES ' + json.dumps(sorted(sys.modules)) + '\\n')\n"
                 "raise SystemExit(code)\n")
# Nothing a search answered by the server uses: the printer's and argparse's terminal width is
# read without shutil (and its zlib, bz2, lzma), logging is set up only when the search runs in
# process or something is to be said, and the engine's error types only on a failure.
UNUSED = ("logging", "shutil", "zlib", "threading", "mdsearch_ls.engine.embedding", "numpy",
          "markdown_it", "sqlite3", "mdsearch_ls.engine.notes.chunking",
          "mdsearch_ls.engine.workspace")


def _cli_modules(cwd: Path, env: dict[str, str], *args: str
                 ) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    done = subprocess.run([sys.executable, "-c", MODULES_AFTER, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    line = next(ln for ln in done.stderr.splitlines() if ln.startswith("MODULES "))
    return done, set(json.loads(line.removeprefix("MODULES ")))


def test_a_search_the_server_answers_imports_only_what_it_prints_with(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mdsearch_ls.engine.index.layout import index_dir_of

    # a short cache path: a socket path too long for the socket's own folder brings tempfile
    cache = Path(tempfile.mkdtemp(prefix="mds", dir="/tmp"))
    monkeypatch.setenv("MDSEARCH_CACHE_DIR", str(cache))
    env = {**os.environ, "COLUMNS": "100", "MDSEARCH_BACKGROUND": "off"}
    root = tmp_path / "notes"
    root.mkdir()
    index_dir = index_dir_of(root, Settings())
    index_dir.mkdir(parents=True)
    path = resident_rules.resident_socket_path(index_dir)
    assert path.parent == index_dir
    server = _StandIn(path, [], [], index={"state": "ready"})
    try:
        quiet, modules = _cli_modules(root, env, "search", "text", "--root", str(root))
        told, told_modules = _cli_modules(root, env, "search", "text", "--root", str(root), "-v")
        alone, alone_modules = _cli_modules(root, env, "search", "text", "--root", str(root),
                                            "--no-resident", "--no-update")
    finally:
        server.sock.close()
        shutil.rmtree(cache)
    assert quiet.returncode == 0 and "a.md:1" in quiet.stdout and "text" in quiet.stdout
    assert quiet.stderr.splitlines()[:-1] == []  # nothing said but the modules line
    assert [m for m in UNUSED if m in modules] == []
    # -v: what the server did is said, through logging, as before
    assert told.returncode == 0 and told.stdout == quiet.stdout
    assert "mdsearch: INFO: searched through the mdsearch server" in told.stderr
    assert "logging" in told_modules
    # the check can fail: searching by itself (here: no index to search) sets up logging first
    assert alone.returncode == 2 and "logging" in alone_modules


def test_help_imports_no_command_the_engine_or_logging(tmp_path: Path) -> None:
    done, modules = _cli_modules(tmp_path, {**os.environ, "COLUMNS": "100"}, "--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: mdsearch")
    assert "mdsearch search" in done.stdout
    assert sorted(m for m in modules if m.startswith("mdsearch_ls.")) == [
        "mdsearch_ls.cli", "mdsearch_ls.cli.common", "mdsearch_ls.cli.early",
        "mdsearch_ls.cli.parser", "mdsearch_ls.config", "mdsearch_ls.logs"]
    assert [m for m in ("logging", "shutil") if m in modules] == []


# ---- the question sent before the CLI is imported, and the answer the server printed ----------

def _indexed_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """``(cache, notes folder, socket path)`` of a folder ``find_index_root`` finds indexed."""
    from mdsearch_ls.engine.index.layout import index_dir_of

    cache = Path(tempfile.mkdtemp(prefix="mds", dir="/tmp"))  # short: the socket's own folder
    monkeypatch.setenv("MDSEARCH_CACHE_DIR", str(cache))
    root = tmp_path / "notes"
    root.mkdir()
    index_dir = index_dir_of(root, Settings())
    index_dir.mkdir(parents=True)
    (index_dir / "index.sqlite3").write_bytes(b"")  # what marks a folder indexed
    path = resident_rules.resident_socket_path(index_dir)
    assert path.parent == index_dir
    return cache, root, path


PRINTING_MODULES = ("argparse", "dataclasses", "mdsearch_ls.config", "mdsearch_ls.cli.parser",
                    "mdsearch_ls.cli.output", "mdsearch_ls.cli.commands", "logging")


@pytest.mark.parametrize("code", [0, 2])
def test_what_the_server_printed_is_written_and_nothing_else_is_imported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    cache, root, path = _indexed_folder(tmp_path, monkeypatch)
    env = {**os.environ, "COLUMNS": "93", "MDSEARCH_BACKGROUND": "off"}
    env.pop("NO_COLOR", None)
    printed = {"out": "printed by the server\n", "err": "mdsearch: note: said there\n",
               "exit": code}
    server = _StandIn(path, [], [], index={"state": "ready"}, rendered=printed)
    argv = ["search", "how do we deploy", "--format", "paths", "-k", "3", "--color=never"]
    try:
        done, modules = _cli_modules(root, env, *argv)
    finally:
        server.sock.close()
        shutil.rmtree(cache)
    assert (done.returncode, done.stdout) == (code, "printed by the server\n")
    assert done.stderr.startswith("mdsearch: note: said there\n")
    assert [m for m in PRINTING_MODULES if m in modules] == []
    # one question, sent with the default settings and what the server needs to print it
    assert len(server.requests) == 1
    request = server.requests[0]
    assert request["defaults"] is True and "settings" not in request
    assert request["queries"] == [{"query": "how do we deploy", "k": 3, "mode": None,
                                   "filters": None, "min_score": None}]
    assert request["render"] == {"argv": argv, "cwd": str(root), "columns": 93, "tty": False,
                                 "no_color": False, "dumb": False}


@pytest.mark.parametrize(("knows_defaults", "argv", "asked"), [
    # a server that cannot print it: the CLI prints the answer to the question it sent ahead
    (True, ["search", "text"], ["ahead"]),
    # a server of a release before the question sent ahead: asked again, as before
    (False, ["search", "text"], ["ahead", "settings"]),
    # a flag the question sent ahead does not know: the CLI asks, once, as before
    (True, ["search", "text", "--fusion", "rrf"], ["settings"]),
    (True, ["search", "text", "-v"], ["settings"]),
])
def test_the_cli_prints_the_answer_when_the_server_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, knows_defaults: bool, argv: list[str],
        asked: list[str]) -> None:
    cache, root, path = _indexed_folder(tmp_path, monkeypatch)
    env = {**os.environ, "COLUMNS": "100", "MDSEARCH_BACKGROUND": "off"}
    server = _StandIn(path, [], [], index={"state": "ready"}, knows_defaults=knows_defaults)
    try:
        done, _ = _cli_modules(root, env, *argv)
    finally:
        server.sock.close()
        shutil.rmtree(cache)
    assert done.returncode == 0, done.stderr
    assert "a.md:1" in done.stdout and "text" in done.stdout
    assert ["ahead" if "defaults" in r else "settings" for r in server.requests] == asked
    assert all(("render" in r) == ("defaults" in r) for r in server.requests)


@pytest.mark.parametrize(("argv", "k"), [
    (["search", "q"], 5),
    (["search", "-k", "3", "q"], 3),
    (["search", "q", "--limit=7", "--json", "-q"], 7),
    (["search", "q", "-k9", "--format", "vimgrep", "--explain", "--colour", "always"], 9),
    (["search", "q", "--open", "2"], 5),
    (["search", "q", "--mode", "keyword"], 5),
    (["search", "q", "--mode", "exact"], None),
    (["search"], None),  # no query
    (["search", ""], None),
    (["search", "q", "r"], None),  # two: argparse's error
    (["search", "q", "--format", "yaml"], None),  # not a choice: argparse's error
    (["search", "q", "-k", "many"], None),
    (["search", "q", "-v"], None),  # logging is the CLI's
    (["search", "q", "--fusion", "rrf"], None),  # a ranking setting
    (["search", "q", "--path", "a/"], None),  # filters
    (["search", "q", "--root", "."], None),
    (["search", "q", "--form", "json"], None),  # an abbreviation argparse would take
    (["search", "--", "-q"], None),
    (["index"], None),
])
def test_only_a_plain_search_is_sent_ahead(argv: list[str], k: int | None) -> None:
    from mdsearch_ls.cli import early

    request = early._request(argv)
    if k is None:
        assert request is None
        return
    assert request is not None and request["queries"][0]["k"] == k
    assert request["queries"][0]["mode"] == ("keyword" if "keyword" in argv else None)
    assert request["queries"][0]["query"] == "q" and request["render"]["argv"] == argv


def test_a_question_sent_ahead_is_taken_only_as_the_same_question(tmp_path: Path) -> None:
    from mdsearch_ls.cli import early
    from mdsearch_ls.engine.api import ranking_settings

    defaults = ranking_settings(Settings())
    closed: list[int] = []

    class Sent:
        def __call__(self) -> dict[str, Any]:
            return {"results": []}

        def close(self) -> None:
            closed.append(1)

    ahead = early._request(["search", "q"])
    assert ahead is not None
    asked = {k: v for k, v in ahead.items() if k not in ("defaults", "render")}
    asked["settings"] = defaults
    path = tmp_path / "search.sock"
    for other_path, request, taken in [
            (path, asked, True),
            (tmp_path / "other.sock", asked, False),  # another folder's index
            (path, {**asked, "settings": {**defaults, "fusion": "rrf"}}, False),
            (path, {**asked, "queries": [{**asked["queries"][0], "k": 6}]}, False),
            (path, {**asked, "update": False}, False)]:
        early._sent = (str(path), ahead, Sent())
        got = early.take(other_path, request, defaults)
        assert (got is not None) == taken
        assert early._sent is None  # taken once, or dropped
    assert len(closed) == 4  # every question not taken was closed unread


@pytest.mark.parametrize("value", [
    {"v": 1, "defaults": True, "update": True,
     "queries": [{"query": "naïve \"quoted\" \\ 日本 \u2028 \x00", "k": 5, "mode": None,
                  "filters": None, "min_score": None}],
     "render": {"argv": ["search", "q"], "cwd": "/tmp/ü", "columns": 80, "tty": False}},
    {"settings": {"include": ["a/**"], "chunk_size": 1000, "per_file": None}},
    {"min_score": 0.25},  # a float: through json
])
def test_a_request_is_the_json_line_json_writes(value: dict[str, Any]) -> None:
    line = resident_rules.json_line(value)
    assert line.endswith(b"\n") and json.loads(line) == value
    if "min_score" not in value:
        assert line == (json.dumps(value) + "\n").encode()


def test_ctrl_c_while_the_server_searches_is_the_cli_s_interrupt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import signal

    cache, root, path = _indexed_folder(tmp_path, monkeypatch)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    env = {**os.environ, "MDSEARCH_BACKGROUND": "off"}
    proc = subprocess.Popen([sys.executable, "-m", "mdsearch_ls", "search", "slow question"],
                            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        listener.settimeout(60)
        conn, _ = listener.accept()  # the question has come: the CLI now waits for its answer
        data = b""
        while not data.endswith(b"\n"):
            data += conn.recv(65536)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        conn.close()
    finally:
        listener.close()
        shutil.rmtree(cache)
    assert json.loads(data)["defaults"] is True
    assert proc.returncode == 130, err
    assert err == "mdsearch: error: interrupted\n" and out == ""
