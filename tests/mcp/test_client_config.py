"""The MCP clients' entries: every one docs/mcp.md shows and every one ``mdsearch mcp
--print-config CLIENT`` prints, parsed as its client reads it (JSON, TOML, a shell line),
checked to be ``mdsearch mcp`` with real arguments, and started for real through the MCP SDK's
own Python client: five tools listed, a search answered from the vault.

The page's entries start ``uvx --from mdsearch-ls mdsearch``, which would fetch the published
package; here the ``mdsearch`` of this install stands in for that, with the same arguments, a
home folder holding the ``~/notes`` they name, and ``${workspaceFolder}`` replaced as VS Code
replaces it."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import tomllib
from mcp_harness import PYTHON, start

from mdsearch_ls.cli import mcp_config
from mdsearch_ls.cli.parser import MCP_CLIENTS as CLIENTS
from mdsearch_ls.cli.parser import build_parser

REPO = Path(__file__).resolve().parents[2]
MCP_DOC = REPO / "docs" / "mcp.md"
BIN = Path(PYTHON).parent
MDSEARCH = BIN / "mdsearch"
VAULT = REPO / "tests" / "fixtures" / "lsp-vault"
TOOLS = ["search_markdown", "read_section", "related_sections", "update_files", "index_status"]
QUERY = "how do I keep my wild yeast culture alive"


def doc_entries() -> dict[str, str]:
    """The page's tagged blocks (```json claude-desktop): tag -> text."""
    found: dict[str, str] = {}
    for tag, text in re.findall(r"^```\w+ ([\w.-]+)\n(.*?)^```$", MCP_DOC.read_text(),
                                re.S | re.M):
        assert tag not in found, f"two blocks tagged {tag}"
        found[tag] = text
    return found


def parse(client: str, text: str) -> list[str]:
    """The command line an entry makes its client start, read as that client reads it."""
    if client == "claude-code":
        words = shlex.split(text)
        assert words[:3] == ["claude", "mcp", "add"], words
        cut = words.index("--")
        assert words[cut - 1] == "notes", words
        return words[cut + 1:]
    if client == "codex":
        server = tomllib.loads(text)["mcp_servers"]["notes"]
    else:
        key = {"vscode": "servers", "zed": "context_servers"}.get(client, "mcpServers")
        (name, server), = json.loads(text)[key].items()
        assert name == "notes"
        if client == "vscode":
            assert server["type"] == "stdio"
        if client == "zed":  # Zed reads a stdio server only with its args (a list) present
            assert isinstance(server["args"], list) and isinstance(server["env"], dict)
    assert isinstance(server["command"], str)
    assert all(isinstance(a, str) for a in server["args"])
    return [server["command"], *server["args"]]


def mdsearch_args(command: list[str]) -> list[str]:
    """The arguments mdsearch itself gets from a command line (after uvx's own), checked to be
    ``mdsearch mcp``'s."""
    program = Path(command[0]).name
    if program in ("uvx", "uvx.exe"):
        assert command[1:4] == ["--from", "mdsearch-ls", "mdsearch"], command
        args = command[4:]
    else:
        assert program in ("mdsearch", "mdsearch.exe"), command
        args = command[1:]
    parsed = build_parser().parse_args(args)
    assert parsed.command == "mcp" and parsed.root and parsed.http is None, args
    return args


def serve_and_search(tmp: Path, command: list[str], env: dict[str, str]) -> None:
    """Start ``command`` as a client would and use it: the tools, a search in the vault."""
    tmp.mkdir(parents=True, exist_ok=True)
    client = start(tmp, [VAULT], command=command, env=env)
    try:
        tools = client.run(lambda s: s.list_tools()).tools
        assert [t.name for t in tools] == TOOLS
        client.wait_ready()
        hits = client.call("search_markdown", {"query": QUERY, "limit": 3}).structured_content
        assert hits["results"][0]["path"] == "sourdough.md", hits
    finally:
        client.close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home folder whose ``notes`` is a copy of the vault, as ``~/notes`` in the entries."""
    home = tmp_path / "home"
    shutil.copytree(VAULT, home / "notes")
    return home


def test_the_page_has_an_entry_for_every_client() -> None:
    tags = set(doc_entries())
    assert tags == {*CLIENTS, "claude-desktop-installed"}, tags


def test_the_readme_shows_the_pages_entry() -> None:
    (readme,) = re.findall(r"^```json claude-desktop\n(.*?)^```$",
                           (REPO / "README.md").read_text(), re.S | re.M)
    assert parse("claude-desktop", readme) == parse("claude-desktop",
                                                    doc_entries()["claude-desktop"])


@pytest.mark.slow
def test_doc_entries_start_a_working_server(home: Path, tmp_path: Path) -> None:
    """Each entry parsed; each distinct command line they make started (the clients themselves
    do not run here, so starting the same line again would test nothing more)."""
    vault = home / "notes"
    lines: dict[tuple[str, ...], list[str]] = {}
    for tag, text in doc_entries().items():
        args = mdsearch_args(parse(tag.removesuffix("-installed"), text))
        assert not any(Path(a).is_absolute() for a in args), (tag, args)  # no machine's path
        args = [a.replace("${workspaceFolder}", str(vault)) for a in args]
        lines.setdefault(tuple(args), []).append(tag)
    assert len(lines) == 2, lines  # ~/notes, and VS Code's ${workspaceFolder}
    for n, (args, tags) in enumerate(lines.items()):
        print(f"starting mdsearch {shlex.join(args)} (the entries of {', '.join(tags)})")
        serve_and_search(tmp_path / str(n), [str(MDSEARCH), *args],
                         {"HOME": str(home), "USERPROFILE": str(home)})


def print_config(client: str, *args: str, path: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(MDSEARCH), "mcp", *args, "--print-config", client],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": path})


@pytest.mark.slow
def test_print_config_starts_a_working_server(home: Path, tmp_path: Path) -> None:
    """For each client: with ``mdsearch`` on PATH the entry names it so (Claude Desktop: by its
    absolute path, the app does not read the shell's PATH); the folder is absolute, the options
    kept. Each distinct command line is then started."""
    vault = home / "notes"
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    lines: dict[tuple[str, ...], list[str]] = {}
    for client in CLIENTS:
        proc = print_config(client, "--root", str(vault), "--mode", "keyword", path=path)
        assert proc.returncode == 0, (client, proc.stderr)
        assert proc.stderr.startswith("mdsearch: ") and proc.stderr.count("\n") == 1, proc.stderr
        command = parse(client, proc.stdout)
        expected = str(MDSEARCH) if client == "claude-desktop" else "mdsearch"
        assert command[0] == expected, (client, command)
        args = mdsearch_args(command)
        assert args == ["mcp", "--root", str(vault.resolve()), "--mode", "keyword"], args
        lines.setdefault(tuple(command), []).append(client)
    assert len(lines) == 2, lines  # "mdsearch ...", and Claude Desktop's absolute path
    for n, (command, clients) in enumerate(lines.items()):
        print(f"starting {shlex.join(command)} (the entries of {', '.join(clients)})")
        serve_and_search(tmp_path / str(n), list(command), {"PATH": path})


def test_print_config_without_mdsearch_on_path_names_its_absolute_path(tmp_path: Path) -> None:
    proc = print_config("cursor", "--root", str(tmp_path), path=os.defpath)
    assert proc.returncode == 0, proc.stderr
    assert parse("cursor", proc.stdout)[0] == str(MDSEARCH)


def test_print_config_resolves_folders_and_paths(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    proc = subprocess.run(
        [str(MDSEARCH), "mcp", "--root", "notes", "--index-dir", "idx", "--exclude", "a b/**",
         "--print-config", "codex"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    args = parse("codex", proc.stdout)[1:]
    assert args == ["mcp", "--root", str((tmp_path / "notes").resolve()),
                    "--exclude", "a b/**", "--index-dir", str((tmp_path / "idx").resolve())]


@pytest.mark.parametrize(("args", "message"), [
    (["--root", "no-such-folder"], "--root no-such-folder: no such folder"),
    (["--root", ".", "--http", "8765"], "--print-config prints the entry of a client"),
])
def test_print_config_refuses_what_it_cannot_print(args: list[str], message: str,
                                                   tmp_path: Path) -> None:
    proc = subprocess.run([str(MDSEARCH), "mcp", *args, "--print-config", "zed"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert proc.stdout == ""


def test_a_uvx_run_prints_the_uvx_command() -> None:
    """Run from uvx's cache (an environment uv may delete), the entry fetches the package again
    rather than name a path that will be gone."""
    cache_env = str(Path("/home/me/.cache/uv/archive-v0/Xb3kq/"))
    assert mcp_config.installed_command("vscode", prefix=cache_env) == [
        "uvx", "--from", "mdsearch-ls", "mdsearch"]
