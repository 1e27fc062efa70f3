"""Real Emacs (batch, Debian's emacs-nox) against the real server: the eglot and lsp-mode
snippets of docs/editors.md, taken from the page as they are, loaded as the user's init; opening
a note starts ``mdsearch serve`` (found on PATH) and the answers to ``C-M-.``'s workspace/symbol
and to hover reach Emacs's own client. ``.ci/run`` installs emacs-nox, elpa-eglot and
elpa-lsp-mode (eglot is built in from Emacs 29; Debian 12 has 28.2)."""

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
BIN = REPO / ".venv" / "bin"
DRIVER = Path(__file__).with_name("emacs_lsp.el")
VAULT = REPO / "tests" / "fixtures" / "lsp-vault"
EDITORS_DOC = REPO / "docs" / "editors.md"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("emacs") is None,
                       reason="emacs is not installed (apt-get install emacs-nox elpa-eglot "
                              "elpa-lsp-mode)"),
]


def doc_snippet(tag: str) -> str:
    """The fenced block of docs/editors.md whose info string is ``elisp TAG``."""
    blocks = re.findall(r"^```elisp " + re.escape(tag) + r"\n(.*?)^```$",
                        EDITORS_DOC.read_text(), re.S | re.M)
    assert len(blocks) == 1, f"docs/editors.md must hold one ```elisp {tag} block"
    return blocks[0]


@pytest.mark.parametrize("client", ["eglot", "lsp-mode"])
def test_emacs_snippet_searches_and_hovers(client: str, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(VAULT, vault)
    (vault / ".obsidian").mkdir()
    home = tmp_path / "home"  # a fresh ~/.emacs.d (lsp-mode keeps its session file there)
    home.mkdir()
    init = tmp_path / "init.el"
    init.write_text(doc_snippet(client))
    out = tmp_path / "out.json"
    lines = (vault / "sourdough.md").read_text().splitlines()
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "MDSEARCH_CACHE_DIR": str(tmp_path / "cache"),
        "MDSEARCH_CLIENT": client,
        "MDSEARCH_VAULT": str(vault),
        "MDSEARCH_NOTE": "sourdough.md",
        "MDSEARCH_QUERY": "how do I keep my wild yeast culture alive",
        "MDSEARCH_LINE": str(lines.index("## Feeding the starter") + 2),
        "MDSEARCH_OUT": str(out),
    }
    t = time.monotonic()
    # --batch skips the start-up's package activation an interactive Emacs does before init
    proc = subprocess.run(
        ["emacs", "--batch", "--eval", "(package-activate-all)", "-l", str(init),
         "-l", str(DRIVER)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240,
    )
    print(f"emacs with {client}: {time.monotonic() - t:.1f}s")
    assert out.exists(), (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    data = json.loads(out.read_text())
    assert proc.returncode == 0 and "error" not in data, (data, proc.stderr[-3000:])
    assert data["mode"] == "markdown-mode"
    assert Path(data["root"]).resolve() == vault.resolve(), data["root"]
    assert data["backend"] == ("eglot" if client == "eglot" else "xref-lsp")
    symbols = data["symbols"]
    assert "Feeding the starter" in symbols[0]["name"], symbols
    assert Path(symbols[0]["file"]).name == "sourdough.md", symbols
    assert len(symbols) <= 10, symbols  # the snippet's maxResults (12 sections match at 20)
    assert "flour.md" in data["hover"], data["hover"]
    assert "Unknown notification" not in proc.stderr, proc.stderr[-2000:]
