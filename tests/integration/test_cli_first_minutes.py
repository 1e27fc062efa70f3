"""What a new user meets in their first minutes at the prompt (issue 56): a search that finds
nothing exits 1 as grep does; an error names the flag that was typed; an unquoted query of
several words gets a hint; ``--open`` with no editor set falls back as git does; a filter that
no note passes says so; a server started at a prompt says what it waits for and stops on the
first Ctrl-C. Real processes, the real model."""

from __future__ import annotations

import os
import pty
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import IndexedVault, run_cli
from tests.mcp.mcp_harness import wait_until

pytestmark = pytest.mark.slow


def test_a_search_that_finds_nothing_exits_1_and_says_so(indexed_vault: IndexedVault) -> None:
    res = run_cli("search", "zzqxjv", "--mode", "keyword", cwd=indexed_vault.vault,
                  cache=indexed_vault.cache)
    assert res.returncode == 1, res.stderr
    assert "no results for 'zzqxjv'" in res.stdout
    found = run_cli("search", "backup keys", "--mode", "keyword", "-k", "1",
                    cwd=indexed_vault.vault, cache=indexed_vault.cache)
    assert found.returncode == 0, found.stderr


def test_a_filter_no_note_passes_says_so(indexed_vault: IndexedVault) -> None:
    res = run_cli("search", "backup keys path:nowhere/", cwd=indexed_vault.vault,
                  cache=indexed_vault.cache)
    assert res.returncode == 1
    assert "no note matches path:nowhere/" in res.stderr


@pytest.mark.parametrize(("args", "flag"), [(("-k", "0"), "-k/--limit"),
                                            (("--min-score", "3"), "--min-score")])
def test_an_error_names_the_flag_typed(indexed_vault: IndexedVault, args: tuple[str, ...],
                                       flag: str) -> None:
    res = run_cli("search", "backup keys", *args, cwd=indexed_vault.vault,
                  cache=indexed_vault.cache)
    assert res.returncode == 2 and res.stderr.startswith(f"mdsearch: error: {flag} must be"), \
        res.stderr


def test_an_unquoted_query_of_several_words_gets_a_hint(indexed_vault: IndexedVault) -> None:
    res = run_cli("search", "how", "do", "I", "rotate", cwd=indexed_vault.vault,
                  cache=indexed_vault.cache)
    assert res.returncode == 2
    assert "put it in quotes" in res.stderr and "Traceback" not in res.stderr


def test_open_with_no_editor_set_falls_back_to_vi(indexed_vault: IndexedVault,
                                                  tmp_path: Path) -> None:
    """As git does: no $VISUAL or $EDITOR, then vi (here a stand-in on PATH that says what it
    was asked to open)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    vi = bin_dir / "vi"
    vi.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "opened"}\n', encoding="utf-8")
    vi.chmod(vi.stat().st_mode | stat.S_IEXEC)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "VISUAL": "", "EDITOR": ""}
    res = run_cli("search", "what do we do when more than 5% of requests fail", "--open", "1",
                  cwd=indexed_vault.vault, cache=indexed_vault.cache, env=env)
    assert res.returncode == 0, res.stderr
    line, path = (tmp_path / "opened").read_text(encoding="utf-8").rstrip("\n").split(" ", 1)
    assert line.startswith("+") and Path(path).name == "Crisis management and escalation.md"


@pytest.mark.parametrize("command", [("serve",), ("mcp", "--root", ".")])
def test_a_server_started_at_a_prompt_says_what_it_waits_for_and_stops_on_ctrl_c(
        indexed_vault: IndexedVault, command: tuple[str, ...]) -> None:
    main, tty = pty.openpty()  # stdin a terminal, as a person typing the command gives it
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(indexed_vault.cache)}
    proc = subprocess.Popen([sys.executable, "-m", "mdsearch_ls", *command], stdin=tty,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=indexed_vault.vault, env=env)
    os.close(tty)
    try:
        said = proc.stderr.readline()  # type: ignore[union-attr]
        assert "waits for" in said and "Ctrl-C stops it" in said, said
        proc.send_signal(signal.SIGINT)  # the first one
        wait_until(lambda: proc.poll() is not None, 30, "it stops on the first Ctrl-C")
        assert proc.returncode == 130
    finally:
        os.close(main)
        if proc.poll() is None:
            proc.kill()
