"""``mdsearch mcp --print-config CLIENT``: the entry an MCP client's configuration needs to start
this server, with this machine's paths filled in, in the form that client reads (JSON, TOML or
a command line). ``docs/mcp.md`` has the same entries without any absolute path, for copying;
this is for a user who wants theirs exact, and it needs no network and no docs at hand.

The entry goes to stdout alone (so it can be piped or pasted); where it goes, to stderr.
Nothing is written to a client's file: merging into a file that holds the user's other servers
is the client's or the user's business, and a wrong merge would lose them.

The command is this installation's: ``mdsearch`` when that name on PATH is this very
executable, else its absolute path; ``uvx --from mdsearch-ls mdsearch`` when this process runs
from uvx's cache (whose environments uv may delete). Claude Desktop always gets absolute paths:
a desktop app started from the Dock or the Start menu does not read the shell's PATH, where
pipx and uv put ``mdsearch`` (the editors' agents resolve the login shell's PATH themselves).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from mdsearch_ls.cli.parser import MCP_DOCS_URL
from mdsearch_ls.config import cli_settings

SERVER_NAME = "notes"
"""The server's name in each client's configuration (what the assistant calls it)."""


def claude_desktop_config() -> Path:
    """Where Claude Desktop reads its servers on this system."""
    if sys.platform == "darwin":
        return Path("~/Library/Application Support/Claude/claude_desktop_config.json").expanduser()
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA", "~/AppData/Roaming")).expanduser() / "Claude" / (
            "claude_desktop_config.json")
    return Path(os.environ.get("XDG_CONFIG_HOME", "~/.config")).expanduser() / "Claude" / (
        "claude_desktop_config.json")


def where(client: str) -> str:
    """The sentence on stderr that says where the printed entry goes."""
    home = Path("~").expanduser()
    return {
        "claude-desktop": f"merge it into {claude_desktop_config()} (beside any other "
                          "mcpServers), then restart Claude Desktop",
        "claude-code": "run it once; --scope user makes the server available in every project "
                       "(--scope project writes it to the repository's .mcp.json instead)",
        "cursor": f"merge it into {home / '.cursor' / 'mcp.json'} (every project) or a "
                  "project's .cursor/mcp.json",
        "vscode": "merge it into your user mcp.json (command 'MCP: Open User Configuration') "
                  "or a workspace's .vscode/mcp.json",
        "codex": f"append it to {home / '.codex' / 'config.toml'}",
        "zed": "merge it into Zed's settings.json (command 'zed: open settings'), beside any "
               "other context_servers",
        "windsurf": f"merge it into {home / '.codeium' / 'windsurf' / 'mcp_config.json'}",
    }[client]


def _this_script() -> Path | None:
    """This installation's ``mdsearch`` executable: the script that is running, else the one the
    installer put beside this interpreter (``python -m mdsearch_ls``); None when neither is."""
    name = "mdsearch.exe" if sys.platform == "win32" else "mdsearch"
    running = Path(sys.argv[0])  # (pip's Windows launchers leave .exe off it)
    candidates = [running, running.with_name(name), Path(sys.executable).parent / name]
    for candidate in candidates:
        if candidate.stem == "mdsearch" and candidate.is_file():
            return candidate.absolute()
    return None


def installed_command(client: str, prefix: str | None = None) -> list[str]:
    """What a client runs to start this mdsearch (before ``mcp ...``). ``prefix``: the
    environment it runs from (``sys.prefix``; tests give another)."""
    desktop = client == "claude-desktop"
    if "archive-v0" in Path(prefix or sys.prefix).parts:  # uvx: a cache entry, not an install
        uvx = shutil.which("uvx")
        if uvx is None and os.environ.get("UV"):  # uv names itself to what it runs
            uvx = shutil.which("uvx", path=str(Path(os.environ["UV"]).parent))
        return [uvx if desktop and uvx else "uvx", "--from", "mdsearch-ls", "mdsearch"]
    script = _this_script()
    if script is None:
        return [sys.executable, "-m", "mdsearch_ls"]
    on_path = shutil.which("mdsearch")
    if not desktop and on_path and os.path.samefile(on_path, script):
        return ["mdsearch"]
    return [str(script)]


def server_args(args: argparse.Namespace) -> list[str]:
    """``mcp`` and the options given with ``--print-config``, folders made absolute (a client
    starts the server in a folder of its own choosing)."""
    if args.http:
        raise ValueError("--print-config prints the entry of a client that starts the server "
                         f"(stdio); a shared --http server is described in {MCP_DOCS_URL}")
    out = ["mcp"]
    for root in args.root or ["."]:
        path = Path(root).expanduser().resolve()
        if not path.is_dir():
            raise ValueError(f"--root {root}: no such folder")
        out += ["--root", str(path)]
    if args.yes:
        out.append("--yes")
    for info in cli_settings():
        value = getattr(args, info.name, None)
        if value is None:
            continue
        for one in value if isinstance(value, list) else [value]:
            if info.name == "index_dir" or (info.name == "model" and (
                    one.startswith(("~", ".")) or "/" in one or os.sep in one)):
                one = str(Path(one).expanduser().resolve())
            out += [info.flag, one]
    return out


def render(client: str, command: list[str]) -> str:
    """The entry in the form ``client`` reads, for ``command`` (the program and its
    arguments)."""
    program, args = command[0], command[1:]
    if client == "claude-code":
        join = subprocess.list2cmdline if sys.platform == "win32" else shlex.join
        return join(["claude", "mcp", "add", "--scope", "user", SERVER_NAME, "--", *command])
    if client == "codex":  # TOML; a JSON string is a TOML basic string
        return (f"[mcp_servers.{SERVER_NAME}]\ncommand = {json.dumps(program)}\n"
                f"args = [{', '.join(json.dumps(a) for a in args)}]")
    if client == "vscode":
        entry: dict = {"servers": {SERVER_NAME: {"type": "stdio", "command": program,
                                                  "args": args}}}
    elif client == "zed":
        entry = {"context_servers": {SERVER_NAME: {"command": program, "args": args,
                                                   "env": {}}}}
    else:  # claude-desktop, cursor, windsurf
        entry = {"mcpServers": {SERVER_NAME: {"command": program, "args": args}}}
    return json.dumps(entry, indent=2)


def print_config(args: argparse.Namespace) -> int:
    """Print the entry for ``args.print_config``; a ValueError is the user's to fix."""
    client = args.print_config
    command = installed_command(client) + server_args(args)
    print(render(client, command))
    print(f"mdsearch: {where(client)}", file=sys.stderr)
    return 0
