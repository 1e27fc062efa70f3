"""A second, independent client: the official TypeScript MCP SDK (npm @modelcontextprotocol/sdk
1.32) lists the tools of ``mdsearch mcp`` and calls search_markdown once.

Needs node and npm (the package is installed with ``npm ci`` into a temporary folder from the
committed lockfile); skipped on a machine without them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from mcp_harness import EXAMPLE_VAULT, install_node_client, server_command

pytestmark = pytest.mark.slow



@pytest.mark.skipif(not (shutil.which("node") and shutil.which("npm")),
                    reason="node and npm are needed for the TypeScript SDK client")
def test_the_typescript_sdk_client_lists_tools_and_searches(tmp_path: Path) -> None:
    client = install_node_client(tmp_path / "client")
    vault = shutil.copytree(EXAMPLE_VAULT, tmp_path / "vault")
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        ["node", "client.mjs", json.dumps(server_command([vault])),
         "how do we know if we're making more money each month"],
        cwd=client, env=env, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["server"]["name"] == "mdsearch"
    assert len(out["instructions"].splitlines()) == 2
    assert out["tools"] == ["search_markdown", "read_section", "related_sections",
                            "update_files", "index_status"]
    assert out["isError"] is False
    paths = [r["path"] for r in out["structured"]["results"]]
    assert len(paths) == 3 and "finance/Revenue tracking.md" in paths
    assert "finance/Revenue tracking.md:" in out["text"]
