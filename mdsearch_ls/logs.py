"""Logging set-up, one function for every entry point (CLI, language server, MCP server).

Logs go to stderr, always: stdout carries the CLI's results or a protocol's messages, and a log
line there would corrupt either. The libraries mdsearch drives are noisy at INFO, so they are
held at WARNING unless the user asks for debug output.

``logging`` itself is imported only when something is set up or said: with what it brings
(``traceback``, ``threading``, ``string``) it is ~5 ms of a search that the server holding the
index answers, a process that says nothing at the default level (:func:`configure_later`).
"""

from __future__ import annotations

import sys

DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40
"""``logging``'s levels, known without importing it."""

NOISY = ("chromadb", "httpx", "urllib3", "sentence_transformers", "transformers", "pygls",
         "onnxruntime", "mcp")

_later: tuple[int, str] | None = None
"""The set-up :func:`configure_later` put off: (level, prog)."""


def configure_logging(level: int = WARNING, *, prog: str = "mdsearch") -> None:
    """Log to stderr as ``<prog>: LEVEL: message`` at ``level``."""
    import logging

    global _later
    _later = None
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


def configure_later(level: int, *, prog: str = "mdsearch") -> None:
    """:func:`configure_logging`, put off until :func:`configure_now` or a record of the CLI's
    own logger (``cli.common.log``) at ``level`` or above. Below WARNING (``-v``) it is set up at
    once: what a verbose run prints must not depend on who logs first. The caller must call
    :func:`configure_now` before it imports modules that log by themselves."""
    global _later
    if level < WARNING:
        configure_logging(level, prog=prog)
    else:
        _later = (level, prog)


def configure_now() -> None:
    """The set-up :func:`configure_later` put off, if any."""
    if _later is not None:
        level, prog = _later
        configure_logging(level, prog=prog)


def shown(level: int) -> bool:
    """Whether a record at ``level`` can be shown: False only below a put-off set-up's level,
    which is when nothing needs ``logging`` yet."""
    return _later is None or level >= _later[0]


def level_from_flags(verbose: int, quiet: bool) -> int:
    """``-q`` -> ERROR, default WARNING, ``-v`` INFO, ``-vv`` DEBUG."""
    if quiet:
        return ERROR
    return (WARNING, INFO, DEBUG)[min(max(verbose, 0), 2)]
