"""One logging set-up for every entry point: records on stderr as ``prog: LEVEL: message``, at
the level the flags ask for, the noisy libraries held at WARNING."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from mdsearch_ls import logs


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_records_at_the_flags_level_go_to_stderr_in_one_form(
        capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure_logging(logs.level_from_flags(verbose=1, quiet=False))
    logging.getLogger("mdsearch").info("searched through %s", "the holder")
    logging.getLogger("mdsearch_ls.engine").debug("not at -v")
    logging.getLogger("chromadb").info("a library's chatter")
    assert capsys.readouterr().err == "mdsearch: INFO: searched through the holder\n"


def test_quiet_keeps_only_errors_and_a_second_set_up_replaces_the_first(
        capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure_logging(logs.level_from_flags(verbose=0, quiet=True), prog="mdsearch-mcp")
    logs.configure_logging(logs.level_from_flags(verbose=0, quiet=True), prog="mdsearch-mcp")
    logging.getLogger("mdsearch_ls.engine").warning("held back by -q")
    logging.getLogger("mdsearch_ls.engine").error("the index is damaged")
    assert capsys.readouterr().err == "mdsearch-mcp: ERROR: the index is damaged\n"
