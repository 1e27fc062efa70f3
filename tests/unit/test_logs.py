"""Logging set up later (``logs.configure_later``): a search the server answers imports no
``logging``, yet every record that would have been shown is shown, in the same form."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from mdsearch_ls import logs
from mdsearch_ls.cli.common import log


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    logs._later = None
    root.handlers[:] = handlers
    root.setLevel(level)


def _ours() -> list[logging.Handler]:
    return [h for h in logging.getLogger().handlers if getattr(h, "_mdsearch", False)]


def test_below_the_level_nothing_is_set_up_at_or_above_it_is(
        capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure_later(logs.WARNING)
    assert _ours() == [] and not logs.shown(logs.INFO) and logs.shown(logs.WARNING)
    log.info("not shown at the default level")
    log.debug("nor this")
    assert _ours() == [] and capsys.readouterr().err == ""
    log.warning("the index is %s", "old")
    assert len(_ours()) == 1
    assert capsys.readouterr().err == "mdsearch: WARNING: the index is old\n"
    logs.configure_now()  # already done: nothing more
    assert len(_ours()) == 1


def test_verbose_is_set_up_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure_later(logs.INFO)
    assert len(_ours()) == 1 and logs.shown(logs.INFO)
    log.info("searched through %s", "the server")
    logging.getLogger("mdsearch_ls.engine").info("an engine record")
    assert capsys.readouterr().err == ("mdsearch: INFO: searched through the server\n"
                                       "mdsearch: INFO: an engine record\n")


def test_configure_now_sets_up_what_was_put_off(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure_later(logs.ERROR)
    logs.configure_now()
    assert len(_ours()) == 1 and logging.getLogger().level == logging.ERROR
    logging.getLogger("mdsearch_ls.engine").warning("held back by -q")
    assert capsys.readouterr().err == ""
    logs.configure_later(logs.WARNING)
    logs.configure_logging(logs.INFO)  # set up now: nothing is left to do later
    assert logs.shown(logs.DEBUG)
