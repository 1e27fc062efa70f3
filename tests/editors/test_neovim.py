"""Real headless Neovim (0.7+ built-in LSP client) against the real server."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYTHON = str(REPO / ".venv" / "bin" / "python")
SCRIPT = Path(__file__).with_name("nvim_lsp.lua")
WRITING_SCRIPT = Path(__file__).with_name("nvim_writing.lua")
VAULT = REPO / "tests" / "fixtures" / "lsp-vault"
WRITING_VAULT = REPO / "tests" / "fixtures" / "writing-vault"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nvim") is None,
                       reason="nvim is not installed (apt-get install -y neovim)"),
]


def test_neovim_symbol_and_hover(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(VAULT, vault)
    out = tmp_path / "out.json"
    lines = (vault / "sourdough.md").read_text().splitlines()
    line = lines.index("## Feeding the starter") + 2
    env = {
        **os.environ,
        "MDSEARCH_CACHE_DIR": str(tmp_path / "cache"),
        "MDSEARCH_PYTHON": PYTHON,
        "MDSEARCH_VAULT": str(vault),
        "MDSEARCH_OUT": str(out),
        "MDSEARCH_NOTE": "sourdough.md",
        "MDSEARCH_LINE": str(line),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    t = time.monotonic()
    proc = subprocess.run(
        ["nvim", "--headless", "--clean", "-c", f"luafile {SCRIPT}"],
        env=env, cwd=vault, capture_output=True, text=True, timeout=180,
    )
    print(f"neovim session: {time.monotonic() - t:.1f}s")
    assert out.exists(), (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    data = json.loads(out.read_text())
    assert proc.returncode == 0 and "error" not in data, data
    names = [s["name"] for s in data["symbols"]]
    assert names[0] == "Feeding the starter", names
    assert data["symbols"][0]["location"]["uri"].endswith("/sourdough.md")
    assert len(names) <= 5  # init_options.maxResults reached the server
    value = data["hover"]["contents"]["value"]
    links = re.findall(r"\]\(([^)#\s]+)", value)
    assert links and all(link != data["note_uri"] for link in links), value
    assert any(link.endswith("/flour.md") for link in links), value


def test_neovim_link_completion_and_code_action(tmp_path: Path) -> None:
    """Writing help through Neovim's own client: "[[" after a paraphrase offers the note it
    describes, and the "Link to" action, applied by Neovim, appends the link."""
    vault = tmp_path / "vault"
    shutil.copytree(WRITING_VAULT, vault)
    out = tmp_path / "out.json"
    journal = (vault / "journal/Garden journal.md").read_text().splitlines()
    env = {
        **os.environ,
        "MDSEARCH_CACHE_DIR": str(tmp_path / "cache"),
        "MDSEARCH_PYTHON": PYTHON,
        "MDSEARCH_VAULT": str(vault),
        "MDSEARCH_OUT": str(out),
        "MDSEARCH_PARAGRAPH": "It is February and the rose bushes need cutting back before "
                              "they leaf out; I want to trim them just above the outward buds.",
        "MDSEARCH_NOTE": "journal/Garden journal.md",
        "MDSEARCH_LINE": str(journal.index("## April") + 2),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    proc = subprocess.run(
        ["nvim", "--headless", "--clean", "-c", f"luafile {WRITING_SCRIPT}"],
        env=env, cwd=vault, capture_output=True, text=True, timeout=240,
    )
    assert out.exists(), (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    data = json.loads(out.read_text())
    assert proc.returncode == 0 and "error" not in data, data
    first = data["completion"][0]["insert"]
    assert first.startswith("[[Pruning roses"), data["completion"]
    assert data["draft_line"].endswith(first), data["draft_line"]
    assert "Link to Worm bins#Feeding the worms" in " ".join(data["actions"]), data["actions"]
    assert "See also: [[Worm bins#Feeding the worms]]" in data["note_lines"], data["note_lines"]
    # Neovim edited its buffer only: the note on disk is untouched until the user saves
    assert "See also" not in (vault / "journal/Garden journal.md").read_text()
