"""The language server's composition root: the one place that knows every feature.

Features import the server type only for annotations (``TYPE_CHECKING``), and the server module
knows no feature, so nothing imports in a circle: this module builds a server, registers each
feature on it and runs it over stdio.
"""

from __future__ import annotations

import logging
import os
import sys

from mdsearch_ls.logs import configure_logging
from mdsearch_ls.lsp.features import (
    actions,
    commands,
    completion,
    definition,
    diagnostics,
    hover,
    lenses,
    lifecycle,
    symbols,
    sync,
)
from mdsearch_ls.lsp.framing import ResyncingStdin
from mdsearch_ls.lsp.server import MdSearchServer, _ClientLogHandler

FEATURES = (lifecycle, sync, symbols, hover, commands, completion, definition, lenses, actions,
            diagnostics)


def run_stdio() -> int:
    """Serve over stdio, every feature registered. Stray prints from libraries must never reach
    the protocol stream, so the real stdout is kept for LSP only and fd 1 is pointed at stderr."""
    configure_logging(logging.INFO, prog="mdsearch-ls")
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    server = MdSearchServer()
    for feature in FEATURES:
        feature.register(server)
    handler = _ClientLogHandler(server)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    logging.getLogger("mdsearch_ls").addHandler(handler)
    try:
        server.start_io(ResyncingStdin(sys.stdin.buffer), proto_out)  # type: ignore[arg-type]
    finally:
        server.exit_now(server.protocol.exit_code)
    return 0  # pragma: no cover - exit_now does not return
