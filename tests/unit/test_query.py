"""Tests for the query grammar: filters, phrases, text as typed, notes, path patterns."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from mdsearch_ls.engine.search.query import (
    Filters,
    QueryError,
    parse_query,
    path_matches,
    structured_filters,
)


def ts(day: str) -> float:
    return datetime.strptime(day, "%Y-%m-%d").timestamp()


def split(query: str) -> tuple[str, Filters]:
    parsed = parse_query(query)
    return parsed.text, parsed.filters


# ---- parse_query ----------------------------------------------------------------------------


def test_plain_text_has_no_filters():
    text, f = split("how do we  track revenue")
    assert text == "how do we track revenue"
    assert f == Filters()
    assert not f.file_level


@pytest.mark.parametrize(
    ("query", "paths"),
    [
        ("revenue path:finance/", ("finance/",)),
        ("revenue path:finance", ("finance",)),
        ("revenue path:./finance/", ("finance/",)),
        ("x path:**/2024-*.md", ("**/2024-*.md",)),
        ("x path:daily/2024-07-* path:finance/", ("daily/2024-07-*", "finance/")),
        ("x PATH:finance/", ("finance/",)),
    ],
)
def test_path_filter(query, paths):
    text, f = split(query)
    assert f.paths == paths
    assert "path" not in text.lower()
    assert f.file_level


def test_tag_filter_lowercases_and_strips_hash():
    text, f = split("plan tag:#Project/Alpha tag:urgent")
    assert text == "plan"
    assert f.tags == ("project/alpha", "urgent")


def test_type_filter():
    assert parse_query("x type:md").filters.types == ("md",)
    assert parse_query("x type:.markdown").filters.types == ("markdown",)
    with pytest.raises(QueryError, match="md and markdown"):
        parse_query("x type:txt")


def test_modified_after_a_day_starts_the_next_day():
    _, f = split("x modified:>2025-01-01")
    assert f.modified_after == ts("2025-01-02")
    assert f.modified_before is None
    _, f = split("x modified:>=2025-01-01")
    assert f.modified_after == ts("2025-01-01")


def test_modified_before():
    _, f = split("x modified:<2025-01-01")
    assert f.modified_before == ts("2025-01-01")
    assert f.modified_after is None
    _, f = split("x modified:<=2025-01-01")
    assert f.modified_before == ts("2025-01-02")


def test_modified_on_a_day():
    for q in ("x modified:=2025-03-14", "x modified:2025-03-14"):
        _, f = split(q)
        assert (f.modified_after, f.modified_before) == (ts("2025-03-14"), ts("2025-03-15"))


def test_modified_relative_days_and_weeks():
    now = time.time()
    _, f = split("x modified:>7d")
    assert f.modified_after == pytest.approx(now - 7 * 86400, abs=60)
    _, f = split("x modified:2w")  # no operator: within the last two weeks
    assert f.modified_after == pytest.approx(now - 14 * 86400, abs=60)
    _, f = split("x modified:<1y")  # older than a year
    assert f.modified_before == pytest.approx(now - 365 * 86400, abs=60)


def test_modified_filters_intersect():
    _, f = split("x modified:>2025-01-01 modified:<2025-02-01 modified:>2025-01-10")
    assert f.modified_after == ts("2025-01-11")
    assert f.modified_before == ts("2025-02-01")


def test_modified_on_a_month_covers_the_month():
    _, f = split("x modified:=2025-06")
    assert (f.modified_after, f.modified_before) == (ts("2025-06-01"), ts("2025-07-01"))
    _, f = split("x modified:>2025-12")
    assert f.modified_after == ts("2026-01-01")
    _, f = split("x modified:<2025-12")
    assert f.modified_before == ts("2025-12-01")


def test_bad_date_is_a_query_error():
    with pytest.raises(QueryError, match=">2025-01-01"):
        parse_query("x modified:yesterday")


def test_quoted_phrases_are_required_and_stay_in_the_text():
    text, f = split('deploy "release train" "code freeze"')
    assert f.phrases == ("release train", "code freeze")
    assert "release train" in text and "code freeze" in text and "deploy" in text
    assert not f.file_level


def test_a_quoted_name_colon_value_is_text_not_a_filter():
    text, f = split('"todo:later" list')
    assert f.phrases == ("todo:later",)
    assert "todo:later" in text


def test_quoted_filter_value_with_a_space():
    text, f = split('budget path:"Client work/"')
    assert f.paths == ("Client work/",)
    assert text == "budget"


@pytest.mark.parametrize(
    "query",
    [
        "see https://example.com/docs:page for more",
        "note: the VPN needs a restart",
        "standup at 10:30 tomorrow",
        "ratio 3:2 and time 9:05",
        "path: with a space is prose",
    ],
)
def test_prose_urls_and_times_stay_text(query):
    text, f = split(query)
    assert f == Filters()
    assert text == " ".join(query.split())


@pytest.mark.parametrize(
    "query",
    [
        "obsidian daily:append content=",
        "[aliases:null]",
        "root:x:0:0",
        "http://example.com/",
        "curl http://example.com/ -o page.html",
        "C:\\Users\\me\\notes\\plan.md",
        "backup todo:later key:value",
        "ERROR level:warn at 10:30:01",
        'name:"two words" stays',
    ],
)
def test_anything_but_a_filter_name_is_text_as_typed(query):
    parsed = parse_query(query)
    assert parsed.filters == Filters()
    assert parsed.text == " ".join(query.split())
    assert parsed.notes == ()


@pytest.mark.parametrize(
    ("query", "typed", "meant"),
    [("budget tga:finance", "tga", "tag"), ("pth:notes/ plan", "pth", "path"),
     ("x tags:work", "tags", "tag"), ("x Modifed:>7d", "Modifed", "modified"),
     ("x typ:md", "typ", "type")],
)
def test_a_near_filter_name_is_text_with_a_did_you_mean(query, typed, meant):
    parsed = parse_query(query)
    assert parsed.filters == Filters()
    assert f"{typed}:" in parsed.text
    assert parsed.notes == (
        f"`{typed}:` is not a filter, searched as text; did you mean `{meant}:`?",
    )


def test_names_far_from_every_filter_get_no_note():
    for word in ("date", "time", "note", "http", "to", "daily", "root", "C"):
        assert parse_query(f"{word}:x").notes == (), word


def test_filter_names_in_any_case_still_filter():
    parsed = parse_query("plan TAG:Work Path:projects/")
    assert parsed.text == "plan"
    assert parsed.filters.tags == ("work",) and parsed.filters.paths == ("projects/",)


@pytest.mark.parametrize(
    ("query", "needle"),
    [("notes modified:last week", "expected a date"), ("x type:txt", "md and markdown"),
     ('x tag:""', "needs a value")],
)
def test_a_known_filter_with_an_unusable_value_is_still_an_error(query, needle):
    with pytest.raises(QueryError, match=needle):
        parse_query(query)


def test_filter_only_query_has_empty_text():
    text, f = split("tag:finance path:finance/")
    assert text == ""
    assert f.tags == ("finance",)


def test_path_matches():
    assert path_matches("finance/Revenue.md", "finance/")
    assert path_matches("finance/Revenue.md", "finance")
    assert not path_matches("financial/x.md", "finance/")
    assert path_matches("daily/2024-07-08.md", "daily/2024-*")
    assert path_matches("2024-07-08.md", "**/2024-*.md")
    assert path_matches("a/b/2024-07-08.md", "**/2024-*.md")
    assert not path_matches("a/b/2023-07-08.md", "**/2024-*.md")


def test_structured_filters_mean_what_the_inline_syntax_means():
    got = structured_filters(path="Client work/", tag=["#Finance", "q3"], type="md",
                             modified=">2025-01-01", phrase="net 30")
    inline = split('path:"Client work/" tag:finance tag:q3 type:md modified:>2025-01-01')[1]
    assert got == Filters(inline.paths, inline.tags, inline.types, inline.modified_after,
                          inline.modified_before, ("net 30",))
    assert structured_filters() == Filters()
    assert structured_filters(path=None, tag=[]) == Filters()


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"folder": "a/"}, "valid filters are"),
        ({"modified": "yesterday"}, "expected a date"),
        ({"type": "txt"}, "md and markdown"),
        ({"tag": ""}, "non-empty"),
        ({"tag": [3]}, "non-empty"),
        ({"path": 'a"b'}, "double quote"),
    ],
)
def test_bad_structured_filters_say_what_is_wrong(kwargs, needle):
    with pytest.raises(QueryError, match=needle):
        structured_filters(**kwargs)


def test_filters_merge():
    a = Filters(paths=("a/",), modified_after=10.0, modified_before=100.0)
    b = Filters(tags=("t",), modified_after=20.0, modified_before=50.0, phrases=("p q",))
    m = a.merged(b)
    assert m.paths == ("a/",) and m.tags == ("t",) and m.phrases == ("p q",)
    assert (m.modified_after, m.modified_before) == (20.0, 50.0)
