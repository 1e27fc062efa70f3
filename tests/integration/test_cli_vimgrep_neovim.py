"""``mdsearch search --format vimgrep`` in real headless Neovim's quickfix list (``nvim -q``, the
default 'errorformat'): every entry opens its note at the hit's line, paths with spaces too."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import IndexedVault, run_cli

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nvim") is None,
                       reason="nvim is not installed (apt-get install -y neovim)"),
]

VISIT = (
    "lua local out = {} "
    "for i, e in ipairs(vim.fn.getqflist()) do "
    "  vim.cmd('cc ' .. i) "
    "  table.insert(out, {valid = e.valid, lnum = e.lnum, col = e.col, "
    "    line = vim.fn.line('.'), file = vim.fn.expand('%:p'), text = vim.fn.getline('.')}) "
    "end "
    "vim.fn.writefile({vim.fn.json_encode(out)}, vim.env.QF_OUT)"
)


@pytest.mark.parametrize("where", ["inside", "outside"])
def test_vimgrep_lines_open_at_the_hit_in_neovim(
    indexed_vault: IndexedVault, tmp_path: Path, where: str
) -> None:
    vault, cache = indexed_vault.vault, indexed_vault.cache
    cwd = vault if where == "inside" else tmp_path
    q = ("search", "restore backup keys", "--mode", "keyword", "--no-update", "-k", "6",
         "--root", str(vault))
    hits = json.loads(run_cli(*q, "--json", cache=cache, cwd=cwd).stdout)["results"]
    res = run_cli(*q, "--format", "vimgrep", cache=cache, cwd=cwd)
    assert res.returncode == 0, res.stderr
    listing = tmp_path / "hits.txt"
    listing.write_text(res.stdout, "utf-8")
    out = tmp_path / "qf.json"
    proc = subprocess.run(
        ["nvim", "--headless", "--clean", "-q", str(listing), "-c", VISIT, "-c", "qa!"],
        cwd=cwd, capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "QF_OUT": str(out),
             "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_DATA_HOME": str(tmp_path / "d")},
    )
    assert out.exists(), proc.stderr[-2000:]
    entries = json.loads(out.read_text("utf-8"))
    assert len(entries) == len(hits) >= 3
    assert any(" " in h["path"] for h in hits)  # the file names have spaces
    for entry, hit in zip(entries, hits, strict=True):
        assert entry["valid"] == 1
        assert Path(entry["file"]) == Path(hit["file"])
        assert entry["lnum"] == entry["line"] == hit["line"]
        assert entry["col"] == 1
        lines = Path(hit["file"]).read_text("utf-8").splitlines()
        assert entry["text"] == lines[hit["line"] - 1]
