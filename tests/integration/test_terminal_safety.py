"""Note text cannot drive the terminal of whoever searches (issue 58): real ``mdsearch``
processes over a vault whose note (and a file name) hold the sequences a terminal obeys: OSC 52
(write the clipboard), OSC 0 (the window title), CSI 2J (clear the screen), OSC 8 (a hidden
link), a C1 CSI. Every human format shows them escaped; JSON already escapes them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.integration.conftest import run_cli

pytestmark = pytest.mark.slow

EVIL_NOTE = ("# Clipboard \x1b]52;c;ZXZpbA==\x07 heading\n\nThe deploy runbook says "
             "\x1b]0;pwned\x07 restart the \x1b[2J service, see "
             "\x1b]8;;http://evil.example\x1b\\here\x1b]8;;\x1b\\ and \x9b31m red.\n")
EVIL_NAME = "ev\x1b[2Jil.md"
QUERY = "deploy runbook restart the service"
OUR_COLOURS = re.compile(r"\x1b\[[0-9;]*m")
"""The only escape sequences mdsearch itself writes (SGR colours, with --color always)."""


def obeyed(out: str) -> list[str]:
    """What a terminal would act on in ``out``: control characters but tab and newline, once
    mdsearch's own colours are taken out."""
    return re.findall(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", OUR_COLOURS.sub("", out))


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("evil")
    notes = base / "vault"
    notes.mkdir()
    (notes / "deploy.md").write_text(EVIL_NOTE, encoding="utf-8")
    (notes / EVIL_NAME).write_text("# Other\n\nThe deploy runbook is\x1b[31m elsewhere.\n",
                                   encoding="utf-8")
    done = run_cli("index", str(notes), cache=base / "cache")
    assert done.returncode == 0, done.stderr
    return notes, base / "cache"


@pytest.mark.parametrize("color", ["never", "always"])
@pytest.mark.parametrize("fmt", ["text", "vimgrep", "paths"])
def test_search_shows_control_characters_escaped(vault: tuple[Path, Path], fmt: str,
                                                 color: str) -> None:
    notes, cache = vault
    done = run_cli("search", QUERY, "--root", str(notes), "--format", fmt, "--color", color,
                   "--no-update", cache=cache)
    assert done.returncode == 0, done.stderr
    assert obeyed(done.stdout) == []
    assert "ev\\x1b[2Jil.md" in done.stdout  # the file name, shown
    if fmt != "paths":
        assert "\\x1b]52;c;ZXZpbA==\\x07" in done.stdout and "\\x9b31m" in done.stdout


def test_related_text_shows_control_characters_escaped(vault: tuple[Path, Path]) -> None:
    notes, cache = vault
    done = run_cli("related", EVIL_NAME, "--root", str(notes), "--color", "always",
                   cache=cache, cwd=notes)
    assert done.returncode == 0, done.stderr
    assert obeyed(done.stdout) == [] and "ev\\x1b[2Jil.md" in done.stdout
    assert "\\x1b]52" in done.stdout


def test_json_keeps_the_text_as_it_is(vault: tuple[Path, Path]) -> None:
    notes, cache = vault
    done = run_cli("search", QUERY, "--root", str(notes), "--json", "--no-update", cache=cache)
    assert done.returncode == 0  # JSON escapes C0 (C1 is left as JSON allows: for programs)
    assert re.findall(r"[\x00-\x1f]", done.stdout) == ["\n"]
    hits = json.loads(done.stdout)["results"]
    assert any("\x1b]52;c;ZXZpbA==\x07" in h["breadcrumb"] for h in hits)
    assert any("\x1b]0;pwned\x07" in h["snippet"] for h in hits)
