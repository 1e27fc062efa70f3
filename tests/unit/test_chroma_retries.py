"""The retry rule for a Chroma server (engine/index/chroma_server.py): what is tried again,
how often, and what the error says when it gives up. The real server cases (down, garbage,
silent, killed mid-run) are in tests/integration/test_chroma_server.py."""

from __future__ import annotations

import httpx
import pytest

from mdsearch_ls.engine.errors import VectorServerError
from mdsearch_ls.engine.index import chroma_server

URL = "http://127.0.0.1:9"


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(chroma_server.time, "sleep", slept.append)
    return slept


def failing(times: int, exc: Exception):
    calls = []

    def fn() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise exc
        return "answer"

    fn.calls = calls  # type: ignore[attr-defined]
    return fn


def test_a_server_back_within_the_retries_is_answered(no_pauses):
    fn = failing(2, httpx.ConnectError("[Errno 111] Connection refused"))
    assert chroma_server.with_retries(URL, "writing", fn) == "answer"
    assert len(fn.calls) == 3
    assert no_pauses == list(chroma_server.RETRY_DELAYS_S[:2])


def test_a_server_that_stays_away_is_an_error_naming_it_after_bounded_attempts(no_pauses):
    fn = failing(99, httpx.ConnectError("[Errno 111] Connection refused"))
    with pytest.raises(VectorServerError) as err:
        chroma_server.with_retries(URL, "writing", fn)
    assert len(fn.calls) == len(chroma_server.RETRY_DELAYS_S) + 1
    text = str(err.value)
    assert URL in text and "connection refused" in text and "4 attempts" in text
    assert "chroma run --path DIR --host 127.0.0.1 --port 9" in text


def test_a_timeout_is_tried_again_and_named(no_pauses):
    fn = failing(99, httpx.ReadTimeout("timed out"))
    with pytest.raises(VectorServerError, match="did not answer in time"):
        chroma_server.with_retries(URL, "writing", fn)


def test_chroma_s_wrapped_connect_error_counts_as_unreachable(no_pauses):
    def fn() -> None:
        try:
            raise httpx.ConnectError("refused")
        except httpx.ConnectError:
            raise ValueError("Could not connect to a Chroma server.")  # noqa: B904 - as Chroma does

    with pytest.raises(VectorServerError):
        chroma_server.with_retries(URL, "connecting", fn)
    assert len(no_pauses) == len(chroma_server.RETRY_DELAYS_S)


def test_other_errors_are_not_tried_again(no_pauses):
    fn = failing(99, ValueError("a bad argument"))
    with pytest.raises(ValueError, match="a bad argument"):
        chroma_server.with_retries(URL, "writing", fn)
    assert len(fn.calls) == 1 and no_pauses == []


def test_the_budget_stops_retries_early(no_pauses, monkeypatch):
    monkeypatch.setattr(chroma_server, "RETRY_BUDGET_S", 0.0)
    fn = failing(99, httpx.ConnectError("refused"))
    with pytest.raises(VectorServerError, match="1 attempt over"):
        chroma_server.with_retries(URL, "writing", fn)
    assert len(fn.calls) == 1
