"""Tests for mdsearch_ls.engine.notes.chunking: outline, sections, chunks, Obsidian syntax."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mdsearch_ls.engine.notes.chunking import (
    Chunk,
    ParsedNote,
    normalize_obsidian,
    parse_note,
    section_at_line,
)
from mdsearch_ls.engine.notes.outline import Heading, outline

# The CommonMark spec's heading examples (CC-BY-SA 4.0, see the license file beside it).
CM_TABLE = Path(__file__).parents[1] / "fixtures" / "commonmark-headings.jsonl"

# Examples where our deliberate extensions (not markdown-it-py) change the answer.
CM_XFAIL = {
    "cm096": "'---\\nFoo\\n---' at the top of a file is YAML front matter for us (Obsidian, "
    "Jekyll, Hugo), so the setext heading 'Foo' is not a heading",
}


def _cm_examples() -> list:
    params = []
    for line in CM_TABLE.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        ex = json.loads(line)
        marks = (
            [pytest.mark.xfail(reason=CM_XFAIL[ex["id"]], strict=True)]
            if (ex["id"] in CM_XFAIL)
            else []
        )
        expected = [(level, title) for level, title in ex["headings"]]
        params.append(pytest.param(ex["markdown"], expected, id=ex["id"], marks=marks))
    return params


@pytest.mark.parametrize(("markdown", "expected"), _cm_examples())
def test_commonmark_headings(markdown: str, expected: list) -> None:
    assert [(h.level, h.title) for h in outline(markdown)] == expected


def note(text: str, **kw) -> ParsedNote:
    return parse_note(text, fallback_title=kw.pop("fallback_title", "stem"), **kw)


def norm_lines(text: str) -> list[str]:
    text = text.removeprefix("\ufeff")
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


# --------------------------------------------------------------------------- outline


def test_outline_ranges_and_setext() -> None:
    md = "# A\ntext\n\nB\n---\nmore\n\n# C\n\n"
    hs = outline(md)
    assert hs == (
        Heading("A", 1, 0, 6, 0, 1, ("A",), None),
        Heading("B", 2, 3, 6, 4, 5, ("A", "B"), 0),
        Heading("C", 1, 7, 9, 7, 7, ("C",), None),
    )


def test_heading_title_is_plain_text() -> None:
    (h,) = outline("## A [link](http://x) `code` **b** \\#c &amp;\n")
    assert h.title == "A link code b #c &"


@pytest.mark.parametrize(
    "md",
    [
        "```\n# not\n```\n",
        "~~~\n# not\n~~~\n",
        "    # not indented code\n",
        "<div>\n# not\n</div>\n",
        "---\ntitle: x\n# not: a heading\n---\n",
        "#hashtag line\n",
        "#\tnot? no, this is a heading\n",
    ],
)
def test_hash_that_is_not_a_heading(md: str) -> None:
    got = [h.title for h in outline(md)]
    if md.startswith("#\t"):
        assert got == ["not? no, this is a heading"]  # a tab is a valid ATX separator
    else:
        assert got == []


def test_heading_inside_list_or_quote_is_not_a_section() -> None:
    n = note("# Top\n> # quoted\n- # listed\n")
    assert [h.title for h in n.headings] == ["Top"]
    assert [s.title for s in n.sections] == ["Top"]


# --------------------------------------------------------------------------- line endings


@pytest.mark.parametrize("nl", ["\n", "\r\n", "\r"])
def test_line_numbers_with_any_line_ending(nl: str) -> None:
    md = nl.join(["intro", "", "# One", "body one", "", "## Two", "body two", ""])
    n = note(md)
    assert [(s.title, s.start_line, s.end_line) for s in n.sections] == [
        ("stem", 0, 0),
        ("One", 2, 3),
        ("Two", 5, 6),
    ]
    assert [(c.start_line, c.end_line) for c in n.chunks] == [(0, 0), (2, 3), (5, 6)]
    assert "\r" not in "".join(c.text for c in n.chunks)


def test_mixed_line_endings_count_like_an_editor() -> None:
    md = "a\r\nb\rc\n# H\r\nx"
    n = note(md)
    assert n.headings[0].line == 3
    assert n.chunks[-1].end_line == 4


def test_bom_is_stripped() -> None:
    n = note("\ufeff# Title\nbody\n")
    assert n.headings[0] == Heading("Title", 1, 0, 2, 0, 1, ("Title",), None)
    assert n.chunks[0].text.startswith("# Title")


def test_tabs_and_unicode() -> None:
    md = "# Ünïcødé 日本語 🎉\n\n\tindented code #nottag\n\nCafé\tcrème #été\n"
    n = note(md)
    assert n.headings[0].title == "Ünïcødé 日本語 🎉"
    assert n.meta.tags == ("été",)
    assert "Café\tcrème" in n.chunks[0].text


@pytest.mark.parametrize("md", ["", "\n\n", "   \n\t\n", "\ufeff"])
def test_empty_or_blank_file(md: str) -> None:
    n = note(md)
    assert n.sections == ()
    assert n.chunks == ()
    assert n.headings == ()
    assert n.warnings == ()
    assert n.meta.title == "stem"
    assert section_at_line(n, 0) is None


# --------------------------------------------------------------------------- front matter


def test_only_front_matter() -> None:
    n = note("---\ntitle: Hello\ntags: [a]\n---\n\n")
    assert n.meta.title == "Hello"
    assert n.meta.tags == ("a",)
    assert n.sections == ()
    assert n.chunks == ()


@pytest.mark.parametrize(
    ("fm", "tags", "aliases"),
    [
        (
            "tags: [Foo, '#bar', baz/qux]\naliases: [One Two, Three]",
            ("foo", "bar", "baz/qux"),
            ("One Two", "Three"),
        ),
        ("tags: foo, Bar baz\naliases: Only One", ("foo", "bar", "baz"), ("Only One",)),
        ("tags: '#x #y'\naliases: 'A, B'", ("x", "y"), ("A", "B")),
        ("tag: single\nalias: [Solo]", ("single",), ("Solo",)),
        ("tags:\n  - a\n  - A\n  - 2024\n", ("a", "2024"), ()),
        ("tags:\naliases:", (), ()),
    ],
)
def test_front_matter_tags_and_aliases(fm: str, tags: tuple, aliases: tuple) -> None:
    n = note(f"---\n{fm}\n---\n# H\n")
    assert n.meta.tags == tags
    assert n.meta.aliases == aliases
    assert n.warnings == ()


@pytest.mark.parametrize(
    ("fm", "needle"),
    [
        ("title: [unclosed", "not valid YAML"),
        ("- a\n- b", "not a mapping"),
        ("just a string", "not a mapping"),
        ("a: b: c", "not valid YAML"),
    ],
)
def test_bad_front_matter_is_a_warning(fm: str, needle: str) -> None:
    n = note(f"---\n{fm}\n---\nbody #tag\n", fallback_title="file")
    assert len(n.warnings) == 1
    assert needle in n.warnings[0]
    assert n.meta.title == "file"
    assert n.meta.tags == ("tag",)
    assert [(s.start_line, s.end_line) for s in n.sections] == [(len(fm.split("\n")) + 2,) * 2]


def test_front_matter_title_used_and_preamble_starts_after_it() -> None:
    n = note("---\ntitle: Real Title\n---\n\nIntro text.\n\n# First\nx\n")
    pre = n.sections[0]
    assert (pre.title, pre.level, pre.breadcrumb, pre.start_line, pre.end_line) == (
        "Real Title",
        0,
        ("Real Title",),
        4,
        4,
    )
    # the note title is not repeated when the breadcrumb starts with it
    assert n.chunks[0].embed_text == "Real Title\n\nIntro text."
    assert n.chunks[1].embed_text == "Real Title\nFirst\n\nx"


# --------------------------------------------------------------------------- sections


def test_preamble_only_when_non_blank() -> None:
    assert [s.title for s in note("\n\n# H\n").sections] == ["H"]
    assert [s.title for s in note("hi\n# H\n").sections] == ["stem", "H"]


def test_breadcrumbs_with_skipped_levels() -> None:
    md = "# Operations\n### Crisis management\n#### Escalation\ntext\n## Other\n# Two\n"
    n = note(md)
    crumbs = [s.breadcrumb for s in n.sections]
    assert crumbs == [
        ("Operations",),
        ("Operations", "Crisis management"),
        ("Operations", "Crisis management", "Escalation"),
        ("Operations", "Other"),
        ("Two",),
    ]
    esc = n.chunks[2]
    assert esc.breadcrumb == "Operations > Crisis management > Escalation"
    assert esc.embed_text == "stem\nOperations > Crisis management > Escalation\n\ntext"
    assert esc.keyword_text.startswith("Operations > Crisis management > Escalation")
    assert "text" in esc.keyword_text


def test_section_ranges_trim_trailing_blank_lines_and_empty_sections_get_a_chunk() -> None:
    md = "# A\n\n\n## B\nbody\n\n\n"
    n = note(md)
    assert [(s.title, s.start_line, s.end_line, s.text) for s in n.sections] == [
        ("A", 0, 0, "# A"),
        ("B", 3, 4, "## B\nbody"),
    ]
    a = n.chunks[0]
    assert (a.text, a.start_line, a.end_line, a.embed_text) == ("# A", 0, 0, "stem\nA")
    assert n.headings[0].end_line == 7  # outline range runs to the last line of the file


def test_section_at_line() -> None:
    md = "---\ntitle: T\n---\nintro\n\n# A\na\n\n\n# B\nb\n"
    n = note(md)
    assert section_at_line(n, 0).title == "T"  # front matter maps to the first section
    assert section_at_line(n, 3).title == "T"
    assert section_at_line(n, 5).title == "A"
    assert section_at_line(n, 8).title == "A"  # trailing blank line of A
    assert section_at_line(n, 9).title == "B"
    assert section_at_line(n, 100).title == "B"


# --------------------------------------------------------------------------- splitting


def test_invalid_chunk_settings() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        note("x", chunk_size=0)
    with pytest.raises(ValueError, match="chunk_overlap"):
        note("x", chunk_size=10, chunk_overlap=10)
    with pytest.raises(ValueError, match="chunk_overlap"):
        note("x", chunk_size=10, chunk_overlap=-1)


def test_long_section_split_with_real_overlap() -> None:
    sentences = [f"Sentence number {i} talks about topic {i * 7}." for i in range(60)]
    md = "# Long\n\n" + " ".join(sentences) + "\n"
    n = note(md, chunk_size=300, chunk_overlap=80)
    chunks = n.chunks
    assert len(chunks) > 5
    assert chunks[0].text.startswith("# Long\n")
    for c in chunks:
        body = c.text.removeprefix("# Long\n\n")
        assert len(body) <= 300
        # sentence boundary preferred: every chunk ends at the end of a sentence
        assert c.text.endswith("."), c.text
        assert c.start_line == c.end_line == 2 or c.start_line == 0
    for prev, cur in itertools.pairwise(chunks):
        shared = _longest_suffix_prefix(prev.text, cur.text)
        assert shared >= 20, (prev.text, cur.text)
        assert shared <= 80


def _longest_suffix_prefix(a: str, b: str) -> int:
    for k in range(min(len(a), len(b)), 0, -1):
        if a.endswith(b[:k]):
            return k
    return 0


def test_paragraph_boundary_preferred_over_sentence() -> None:
    p1 = "Alpha beta gamma. " * 5
    p2 = "Delta epsilon zeta. " * 5
    md = f"{p1.strip()}\n\n{p2.strip()}\n"
    n = note(md, chunk_size=150, chunk_overlap=0)
    assert [c.text for c in n.chunks] == [p1.strip(), p2.strip()]
    assert [(c.start_line, c.end_line) for c in n.chunks] == [(0, 0), (2, 2)]


def test_word_boundary_when_no_sentence_or_paragraph() -> None:
    md = " ".join(f"word{i}" for i in range(200))
    n = note(md, chunk_size=100, chunk_overlap=0)
    words = set(md.split())
    for c in n.chunks:
        assert len(c.text) <= 100
        assert all(w in words for w in c.text.split())
    assert " ".join(c.text for c in n.chunks) == md


def test_word_longer_than_chunk_size_is_hard_split() -> None:
    md = "short " + "x" * 250 + " tail"
    n = note(md, chunk_size=100, chunk_overlap=20)
    # a hard split is mid-word, so no overlap is carried across it
    assert [c.text for c in n.chunks] == ["short", "x" * 100, "x" * 100, "x" * 50 + " tail"]


def test_list_items_are_block_boundaries() -> None:
    items = [f"- item {i} with some words" for i in range(20)]
    n = note("# L\n" + "\n".join(items) + "\n", chunk_size=120, chunk_overlap=0)
    for c in n.chunks:
        lines = c.text.split("\n")
        assert all(ln in items or ln == "# L" for ln in lines), c.text


# --------------------------------------------------------------------------- Obsidian


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("see [[Note]] here", "see Note here"),
        ("see [[Note|the alias]]", "see the alias"),
        ("see [[Note#Heading]]", "see Note Heading"),
        ("see [[#Heading]]", "see Heading"),
        ("see [[Note#^block1]]", "see Note"),
        ("![[embed.png]]", "embed"),
        ("![[photo.jpg|300]]", "photo"),
        ("![[Note]]", "Note"),
        ("[[folder/Sub Note]]", "Sub Note"),
        ("a [text](https://x.org/a_(b)) b", "a text b"),
        ("![alt text](img.png)", "alt text"),
        ("keep %%hidden%% this", "keep  this"),
        ("before\n%%\nmulti\nline\n%%\nafter", "before\n\nafter"),
        ("> [!note] My Title\n> body", "> My Title\n> body"),
        ("> [!warning]- \n> careful", "> warning\n> careful"),
        ("```\n[[raw]] %%kept%%\n```", "```\n[[raw]] %%kept%%\n```"),
        ("`printf %%d` and `%%`", "`printf %%d` and `%%`"),
        ("a ==key point== here", "a key point here"),
        ("if a == b and c==d", "if a == b and c==d"),
        ("`x ==y==` and ==z==", "`x ==y==` and z"),
        ("A paragraph. ^intro-2\nnext line", "A paragraph.\nnext line"),
        ("- item ^li1", "- item"),
        ("> a quote\n\n^quote-1\n\nnext", "> a quote\n\n\n\nnext"),
        ("see `[[raw]]` and [[cooked]]", "see `[[raw]]` and cooked"),
        ("``a ` [[b]]`` [[c]]", "``a ` [[b]]`` c"),
        # A stray backtick in one paragraph does not pair with the next paragraph's code span.
        ("Press ` to open.\n\nSee `[[raw]]` and [[cooked]].",
         "Press ` to open.\n\nSee `[[raw]]` and cooked."),
        ("2^10 is 1024, x ^y z", "2^10 is 1024, x ^y z"),
    ],
)
def test_normalize_obsidian(src: str, expected: str) -> None:
    assert normalize_obsidian(src) == expected


def test_obsidian_in_chunks_display_text_is_raw_but_comments_are_hidden() -> None:
    md = "# H\nSee [[Other Note|other]] and [[Third#Part]] ![[pic.png]] %%secret%%\n"
    n = note(md)
    (c,) = n.chunks
    assert "[[Other Note|other]]" in c.text
    # A comment is hidden in Obsidian's reading view: a snippet or hover must not show it.
    assert "secret" not in c.text and "secret" not in n.sections[0].text
    assert c.text.split("\n")[1].startswith("See [[Other Note|other]]")
    assert len(c.text) == len(md.rstrip("\n"))  # blanked in place: offsets do not move
    assert c.embed_text == "stem\nH\n\nSee other and Third Part pic"
    assert "secret" not in c.keyword_text
    assert [link.target for link in n.links] == ["Other Note", "Third", "pic.png"]


def test_a_comment_between_two_stray_backticks_stays_hidden() -> None:
    """A lone backtick in one paragraph and another in a later one are not a code span (spans
    end with their paragraph), so the comment between them is a comment."""
    n = note("# Note\n\nUse the ` key.\n\n%%private%%\n\nAnother ` here.\n")
    assert n.chunks
    for c in n.chunks:
        assert "private" not in c.text
        assert "private" not in c.embed_text
        assert "private" not in c.keyword_text
        assert "private" not in c.body
    assert "Use the ` key." in n.chunks[0].embed_text
    assert "Another ` here." in n.chunks[0].embed_text


def test_chunks_carry_their_location_and_body() -> None:
    n = parse_note("# T\n\nBody text.\n\n## Sub\n\nMore.\n", fallback_title="T",
                   path="dir/T.md")
    assert [(c.path, c.title, c.breadcrumb, c.start_line, c.end_line) for c in n.chunks] == [
        ("dir/T.md", "T", "T", 0, 2),
        ("dir/T.md", "Sub", "T > Sub", 4, 6),
    ]
    assert [c.body for c in n.chunks] == ["Body text.", "More."]
    assert n.chunks[1].embed_text == "T > Sub\n\nMore."


def test_comment_hides_headings_and_tags_without_moving_lines() -> None:
    md = "a\n%%\n# hidden heading #t1\n%%\n# Real\n#t2\n"
    n = note(md)
    assert [(h.title, h.line) for h in n.headings] == [("Real", 4)]
    assert n.meta.tags == ("t2",)


def test_inline_tags() -> None:
    md = (
        "# Heading #notag\n"
        "Text #Alpha, #beta/child and #with-dash #under_score.\n"
        "Not: `#code`, #123, a#b, [[N#h]], \\#escaped, http://x.org/#frag\n"
        "```\n#infence\n```\n"
        "    #indented\n"
        "- list #listtag\n"
        "> quote #quotetag #ALPHA\n"
    )
    n = note(md)
    assert n.meta.tags == ("alpha", "beta/child", "with-dash", "under_score", "listtag", "quotetag")
    assert [link.target for link in n.links] == ["N"]


def test_frontmatter_and_inline_tags_merge_in_first_seen_order() -> None:
    n = note("---\ntags: [b, a]\n---\ntext #c #B\n")
    assert n.meta.tags == ("b", "a", "c")


# --------------------------------------------------------------------------- properties

_WORDS = st.sampled_from(
    [
        "alpha",
        "beta",
        "gamma",
        "δέλτα",
        "日本語",
        "naïve",
        "🎉",
        "x",
        "end.",
        "why?",
        "#tag",
        "a#b",
        "[[Link]]",
        "`code`",
        "(paren)",
        "wow!",
        "tab\there",
    ]
)
_LONG_WORD = st.integers(1, 400).map(lambda n: "L" * n)


def _text_line(max_words: int = 30) -> st.SearchStrategy[str]:
    return st.lists(st.one_of(_WORDS, _LONG_WORD), min_size=1, max_size=max_words).map(" ".join)


_BLOCK = st.one_of(
    st.tuples(st.integers(1, 6), _text_line(5)).map(lambda t: "#" * t[0] + " " + t[1]),
    st.tuples(_text_line(4), st.sampled_from(["===", "---"])).map(lambda t: f"{t[0]}\n{t[1]}"),
    st.lists(_text_line(), min_size=1, max_size=4).map("\n".join),
    st.lists(_text_line(6), min_size=1, max_size=5).map(lambda xs: "\n".join(f"- {x}" for x in xs)),
    st.tuples(st.sampled_from(["```", "~~~"]), st.lists(_text_line(4), max_size=4)).map(
        lambda t: "\n".join([t[0], "# not a heading", *t[1], t[0]])
    ),
    _text_line(8).map(lambda x: "    " + x),
    st.just(""),
    st.just("   "),
)


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, int, int]:
    blocks = draw(st.lists(_BLOCK, max_size=12))
    sep = draw(st.sampled_from(["\n", "\n\n"]))
    nl = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    text = sep.join(blocks)
    if draw(st.booleans()):
        text += "\n"
    size = draw(st.integers(20, 300))
    overlap = draw(st.integers(0, size - 1))
    return text.replace("\n", nl), size, overlap


def _word_len_at(doc: str, pos: int) -> int:
    a = pos
    while a > 0 and not doc[a - 1].isspace():
        a -= 1
    b = pos
    while b < len(doc) and not doc[b].isspace():
        b += 1
    return b - a


def _clean_edges(doc: str, pos: int, end: int, size: int) -> bool:
    """A chunk may start or end inside a word only if that word is longer than size."""
    if pos > 0 and not doc[pos - 1].isspace() and _word_len_at(doc, pos) <= size:
        return False
    return not (end < len(doc) and not doc[end].isspace() and _word_len_at(doc, end) <= size)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_chunk_properties(case: tuple[str, int, int]) -> None:
    text, size, overlap = case
    n = parse_note(text, fallback_title="doc", chunk_size=size, chunk_overlap=overlap)
    lines = norm_lines(text)
    doc = "\n".join(lines)
    starts = [0]
    for ln in lines[:-1]:
        starts.append(starts[-1] + len(ln) + 1)
    heading_at = {h.line: h for h in n.headings}

    covered = set()
    prev: Chunk | None = None
    for c in n.chunks:
        assert 0 <= c.start_line <= c.end_line < len(lines)
        covered.update(range(c.start_line, c.end_line + 1))
        sec = n.sections[c.section]
        assert sec.start_line <= c.start_line <= c.end_line <= sec.end_line
        if prev is not None:
            assert c.ordinal == prev.ordinal + 1
            assert (c.section, c.start_line) >= (prev.section, prev.start_line)
            assert c.end_line >= prev.end_line
        prev = c

        head = heading_at.get(c.start_line)
        is_first = (
            head is not None
            and c.text.startswith(lines[c.start_line])
            and (c.start_line == sec.start_line)
        )
        head_len = len("\n".join(lines[head.line : head.selection_end_line + 1])) if is_first else 0
        assert len(c.text) <= size + head_len + 1

        # The chunk is a slice of the document starting on start_line and ending on
        # end_line; repetitive text may hold several such slices, one must be clean.
        line_end = starts[c.start_line] + len(lines[c.start_line])
        found = []
        pos = doc.find(c.text, starts[c.start_line])
        while -1 < pos <= line_end:
            if doc.count("\n", pos, pos + len(c.text)) == c.end_line - c.start_line:
                found.append(pos)
            pos = doc.find(c.text, pos + 1)
        assert found, c
        assert any(_clean_edges(doc, p, p + len(c.text), size) for p in found), c
        assert c.embed_text and c.keyword_text

    for i, ln in enumerate(lines):
        if ln.strip():
            assert i in covered, (i, ln)
    if not doc.strip():
        assert n.chunks == ()


@settings(max_examples=100, deadline=None)
@given(documents())
def test_outline_matches_parse_note_and_sections_tile(case: tuple[str, int, int]) -> None:
    text, size, overlap = case
    n = parse_note(text, fallback_title="doc", chunk_size=size, chunk_overlap=overlap)
    assert outline(text) == n.headings
    for a, b in itertools.pairwise(n.sections):
        assert a.end_line < b.start_line
    for h in n.headings:
        assert h.line <= h.selection_end_line <= h.end_line
        assert section_at_line(n, h.line).start_line == h.line
