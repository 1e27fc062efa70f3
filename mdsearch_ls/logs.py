"""Logging set-up, one function for every entry point (CLI, language server, MCP server).

Logs go to stderr, always: stdout carries the CLI's results or a protocol's messages, and a log
line there would corrupt either. The libraries mdsearch drives are noisy at INFO, so they are
held at WARNING unless the user asks for debug output.
"""

from __future__ import annotations

import logging
import sys

NOISY = ("chromadb", "httpx", "urllib3", "sentence_transformers", "transformers", "pygls",
         "onnxruntime", "mcp", "watchfiles")


def configure_logging(level: int = logging.WARNING, *, prog: str = "mdsearch") -> None:
    """Log to stderr as ``<prog>: LEVEL: message`` at ``level``."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_mdsearch", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{prog}: %(levelname)s: %(message)s"))
    handler._mdsearch = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
    for name in NOISY:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))


def level_from_flags(verbose: int, quiet: bool) -> int:
    """``-q`` -> ERROR, default WARNING, ``-v`` INFO, ``-vv`` DEBUG."""
    if quiet:
        return logging.ERROR
    return (logging.WARNING, logging.INFO, logging.DEBUG)[min(max(verbose, 0), 2)]
