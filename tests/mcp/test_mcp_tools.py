"""Every tool of ``mdsearch mcp`` on valid and invalid input, through the SDK's stdio client,
against one real server process with the real model over a copy of examples/vault."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError
from mcp_harness import EXAMPLE_VAULT, McpClient, start, wait_until

from mdsearch_ls.mcp.tokens import TokenCounter

pytestmark = pytest.mark.slow

TOKENS = TokenCounter()
NOTES = 20  # markdown notes in examples/vault (.obsidian/ holds none)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpClient]:
    """One server over a copy of examples/vault, index built and model loaded."""
    base = tmp_path_factory.mktemp("mcp-indexed")
    vault = base / "vault"
    shutil.copytree(EXAMPLE_VAULT, vault)
    client = start(base, [vault])
    try:
        client.wait_ready()
        yield client
    finally:
        client.close()


def lines_of(root: Path, rel: str) -> list[str]:
    return (root / rel).read_text(encoding="utf-8").split("\n")


# ---- listing ------------------------------------------------------------------------------------


def test_five_short_tools_and_two_lines_of_instructions(indexed) -> None:
    tools = indexed.run(lambda s: s.list_tools()).tools
    assert [t.name for t in tools] == ["search_markdown", "read_section", "related_sections",
                                      "update_files", "index_status"]
    for t in tools:
        assert t.description and len(t.description) < 300, t.name
        assert t.input_schema["type"] == "object"
    instructions = indexed.init_result.instructions
    assert len(instructions.splitlines()) == 2
    assert "search_markdown" in instructions and "read_section" in instructions


def test_index_status_says_what_is_indexed(indexed) -> None:
    result = indexed.call("index_status")
    st = result.structured_content
    assert not result.is_error
    assert st["index"]["state"] == "ready"
    (folder,) = st["folders"]
    assert folder["files"] == NOTES and folder["chunks"] > NOTES
    assert folder["read_only"] is False
    assert st["model"]["state"] == "loaded" and st["watching"] is True
    assert st["token_estimate"].startswith("all-MiniLM-L6-v2")
    text = result.content[0].text
    assert text.startswith("ready:") and f"{NOTES} notes" in text


# ---- search_markdown ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected", "heading"),
    [
        ("revenue tracking", "finance/Revenue tracking.md", "Revenue tracking"),
        ("security protocols", "security/Security protocols.md", "Security protocols"),
        ("crisis escalation threshold", "operations/Crisis management and escalation.md",
         "Crisis management and escalation"),
        ("token efficiency", "engineering/LLM assistant context management.md",
         "LLM assistant context management"),
    ],
)
def test_search_finds_the_expected_section(indexed, query, expected, heading) -> None:
    result = indexed.call("search_markdown", {"query": query, "limit": 3})
    assert not result.is_error, result.content[0].text
    hits = result.structured_content["results"]
    assert expected in [h["path"] for h in hits], (query, hits)
    hit = next(h for h in hits if h["path"] == expected)
    assert hit["heading_path"].startswith(heading)
    lines = lines_of(indexed.roots[0], expected)
    # 1-based, inclusive, and pointing at the section: its first line is its heading.
    assert 1 <= hit["start_line"] <= hit["end_line"] <= len(lines)
    first = lines[hit["start_line"] - 1]
    assert first.lstrip("#").strip() == hit["heading_path"].split(" > ")[-1]
    assert hit["text"] and hit["text"] in "\n".join(lines[hit["start_line"] - 1:hit["end_line"]])
    assert -1 <= hit["score"] <= 1
    assert f"{expected}:{hit['start_line']}-{hit['end_line']}" in result.content[0].text


def test_search_result_shape_and_text_rendering(indexed) -> None:
    result = indexed.call("search_markdown", {"query": "what happens when a client pays late"})
    sc = result.structured_content
    assert sc["query"] == "what happens when a client pays late"
    assert sc["mode"] == "hybrid" and sc["max_tokens"] == 2000
    assert sc["index"]["state"] == "ready"
    assert 1 <= len(sc["results"]) <= 8
    assert sc["results"][0]["path"] == "finance/Revenue tracking.md"
    assert sc["results"][0]["heading_path"].endswith("Chasing late payments")
    for r in sc["results"]:
        assert set(r) == {"path", "heading_path", "start_line", "end_line", "score",
                          "keyword_rank", "text", "truncated", "tokens"}
        assert r["tokens"] == TOKENS.count(r["text"])
        assert r["text"] in result.content[0].text
    assert sc["total_tokens"] == TOKENS.count(result.content[0].text) <= 2000


def test_search_accepts_guessed_names_and_comma_lists(indexed) -> None:
    result = indexed.call("search_markdown", {"q": "how do we handle money", "k": "3",
                                              "path": "finance/, operations/"})
    assert not result.is_error, result.content[0].text
    paths = [h["path"] for h in result.structured_content["results"]]
    assert len(paths) == 3
    assert all(p.startswith(("finance/", "operations/")) for p in paths)
    result = indexed.call("search_markdown", {"text": "context window", "num_results": 2,
                                              "tag": "llm"})
    paths = [h["path"] for h in result.structured_content["results"]]
    assert paths and set(paths) == {"engineering/LLM assistant context management.md"}


def test_search_typed_filters_mean_the_same_as_arguments(indexed) -> None:
    typed = indexed.call("search_markdown", {"query": "context window tag:llm", "limit": 3})
    given = indexed.call("search_markdown", {"query": "context window", "tag": ["llm"],
                                             "limit": 3})
    assert [h["path"] for h in typed.structured_content["results"]] == \
        [h["path"] for h in given.structured_content["results"]]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"query": "x", "foo": 1}, "unknown argument 'foo' for search_markdown; valid: query, "
                                   "limit, mode, path, tag, modified, max_tokens"),
        ({}, "search_markdown needs 'query'"),
        ({"query": ""}, "search_markdown needs 'query'"),
        ({"query": 5}, "'query' must be text"),
        ({"query": "x", "limit": 0}, "'limit' must be from 1 to"),
        ({"query": "x", "limit": "lots"}, "'limit' must be a whole number"),
        ({"query": "x", "mode": "fuzzy"}, "'mode' must be one of hybrid, semantic, keyword"),
        ({"query": "x modified:yesterday"}, "expected a date"),
        ({"query": "x", "modified": "yesterday-ish"}, "modified"),
        ({"query": "x", "max_tokens": 5}, "'max_tokens' must be from 100"),
        ({"query": "tag:finance"}, "no words to search for"),
        ({"query": "x", "q": "y"}, "mean the same argument"),
    ],
)
def test_search_rejects_bad_input_in_plain_words(indexed, arguments, message) -> None:
    result = indexed.call("search_markdown", arguments)
    assert result.is_error
    text = result.content[0].text
    assert message in text, text
    assert "Traceback" not in text and not text.lstrip().startswith("{")


def test_max_tokens_is_never_exceeded(indexed) -> None:
    queries = ["backup", "how do we write up what went wrong after an outage",
               "what happens when a client pays late", "onboarding laptop first day"]
    for query in queries:
        for budget in (100, 137, 250, 600, 2000):
            result = indexed.call("search_markdown", {"query": query, "max_tokens": budget})
            assert not result.is_error, result.content[0].text
            text = result.content[0].text
            sc = result.structured_content
            assert TOKENS.count(text) <= budget, (query, budget, text)
            assert sc["total_tokens"] == TOKENS.count(text)
            assert sum(r["tokens"] for r in sc["results"]) <= budget
            assert sc["results"], (query, budget)  # something useful still fits
            for r in sc["results"]:
                if r["truncated"]:
                    # Cut between words: what is shown is a prefix of the section that ends
                    # where a word ends.
                    section = "\n".join(lines_of(indexed.roots[0], r["path"])
                                        [r["start_line"] - 1:r["end_line"]])
                    at = section.find(r["text"])
                    assert at >= 0
                    after = section[at + len(r["text"]):]
                    assert not after or after[0].isspace(), (r["text"][-20:], after[:20])
    small = indexed.call("search_markdown", {"query": "backup", "max_tokens": 100})
    assert any(r["truncated"] for r in small.structured_content["results"])


# ---- read_section ------------------------------------------------------------------------------


def _numbered(text: str) -> list[tuple[int, str]]:
    out = []
    for line in text.split("\n"):
        m = re.match(r"^(\d+)\t(.*)$", line)
        if m:
            out.append((int(m.group(1)), m.group(2)))
    return out


def test_read_section_by_heading_with_line_numbers_and_siblings(indexed) -> None:
    rel = "finance/Revenue tracking.md"
    lines = lines_of(indexed.roots[0], rel)
    result = indexed.call("read_section", {"path": rel, "heading": "Invoices"})
    assert not result.is_error, result.content[0].text
    sc = result.structured_content
    assert sc["heading_path"] == "Revenue tracking > Invoices"
    assert lines[sc["start_line"] - 1] == "## Invoices"
    numbered = _numbered(result.content[0].text)
    assert numbered[0][0] == sc["start_line"]
    for n, text in numbered:
        assert lines[n - 1] == text
    # The subsection is inside the section; the next ## heading is not.
    shown = [t for _, t in numbered]
    assert "### Chasing late payments" in shown
    assert not any(t.startswith("## ") and t != "## Invoices" for t in shown)
    assert sc["truncated"] is False and sc["next_start_line"] is None
    siblings = [s["heading_path"] for s in sc["siblings"]]
    assert siblings == ["Revenue tracking > Monthly recurring revenue",
                        "Revenue tracking > The monthly revenue report",
                        "Revenue tracking > Related"]
    for s in sc["siblings"]:
        assert lines[s["start_line"] - 1].lstrip("#").strip() == s["heading_path"].split(" > ")[-1]


def test_read_section_takes_a_heading_path_from_search(indexed) -> None:
    hit = indexed.call("search_markdown", {"query": "what happens when a client pays late",
                                           "limit": 1}).structured_content["results"][0]
    result = indexed.call("read_section", {"path": hit["path"], "heading": hit["heading_path"]})
    sc = result.structured_content
    assert sc["start_line"] == hit["start_line"]
    assert sc["heading_path"] == hit["heading_path"]


def test_read_section_by_lines_and_whole_note_within_budget(indexed) -> None:
    rel = "operations/Crisis management and escalation.md"
    lines = lines_of(indexed.roots[0], rel)
    result = indexed.call("read_section", {"path": rel, "start_line": 3, "end_line": 7})
    sc = result.structured_content
    assert (sc["start_line"], sc["end_line"]) == (3, 7)
    assert sc["text"] == "\n".join(lines[2:7])
    whole = indexed.call("read_section", {"file": rel, "max_tokens": 150})
    sc = whole.structured_content
    assert TOKENS.count(whole.content[0].text) <= 150
    assert sc["truncated"] is True and sc["start_line"] == 1
    nxt = sc["next_start_line"]
    assert nxt == sc["end_line"] + 1 or nxt == sc["end_line"]
    assert f"continue with start_line={nxt}" in whole.content[0].text
    assert [s["heading_path"] for s in sc["siblings"]] == ["Crisis management and escalation"]
    # Continuing where it stopped picks up exactly there.
    more = indexed.call("read_section", {"path": rel, "start_line": nxt, "max_tokens": 150})
    assert more.structured_content["start_line"] == nxt
    for budget in (100, 180, 333, 1000):
        r = indexed.call("read_section", {"path": rel, "max_tokens": budget})
        assert TOKENS.count(r.content[0].text) <= budget
        assert r.structured_content["total_tokens"] == TOKENS.count(r.content[0].text)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "read_section needs 'path'"),
        ({"path": "../outside.md"}, "outside the folders this server reads"),
        ({"path": "/etc/passwd"}, "outside the folders this server reads"),
        ({"path": "finance/Nope.md"}, "does not exist"),
        ({"path": ".obsidian/app.json"}, "not a markdown note"),
        ({"path": "finance/Revenue tracking.md", "heading": "Nope"},
         "no heading 'Nope' in this note; its headings: Revenue tracking; "),
        ({"path": "finance/Revenue tracking.md", "heading": "Invoices", "start_line": 3},
         "not both"),
        ({"path": "finance/Revenue tracking.md", "start_line": 0}, "from 1"),
        ({"path": "finance/Revenue tracking.md", "start_line": 9, "end_line": 2},
         "is before"),
        ({"path": "finance/Revenue tracking.md", "start_line": 100000}, "past the end"),
        ({"path": "finance/Revenue tracking.md", "colour": "red"},
         "valid: path, heading, start_line, end_line, max_tokens"),
    ],
)
def test_read_section_rejects_bad_input(indexed, arguments, message) -> None:
    result = indexed.call("read_section", arguments)
    assert result.is_error
    assert message in result.content[0].text, result.content[0].text


# ---- related_sections ------------------------------------------------------------------------


def test_related_sections_come_from_other_notes(indexed) -> None:
    rel = "finance/Revenue tracking.md"
    lines = lines_of(indexed.roots[0], rel)
    line = lines.index("## Monthly recurring revenue") + 1
    result = indexed.call("related_sections", {"path": rel, "line": line + 2, "limit": 3})
    assert not result.is_error, result.content[0].text
    sc = result.structured_content
    assert sc["section"] == "Revenue tracking > Monthly recurring revenue"
    assert 1 <= len(sc["results"]) <= 3
    assert all(r["path"] != rel for r in sc["results"])
    # The planning note's MRR key result is the closest thing in the vault.
    assert "operations/Quarterly planning Q3 2024.md" in [r["path"] for r in sc["results"]]
    assert TOKENS.count(result.content[0].text) <= sc["max_tokens"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"path": "finance/Revenue tracking.md", "line": 0}, "from 1"),
        ({"path": "/etc/hosts"}, "outside the folders"),
        ({"path": "finance/Revenue tracking.md", "limit": 0}, "'limit' must be from 1"),
        ({"line": 3}, "related_sections needs 'path'"),
    ],
)
def test_related_sections_rejects_bad_input(indexed, arguments, message) -> None:
    result = indexed.call("related_sections", arguments)
    assert result.is_error
    assert message in result.content[0].text, result.content[0].text


# ---- update_files, freshness ---------------------------------------------------------------


def test_update_files_indexes_and_drops_notes_now(indexed) -> None:
    root = indexed.roots[0]
    note = root / "people" / "Parking.md"
    note.write_text("# Parking\n\nThe zebra-striped bays behind the warehouse are for "
                    "visitors; staff park at the Lindenplein garage.\n", encoding="utf-8")
    try:
        result = indexed.call("update_files", {"paths": "people/Parking.md, /etc/passwd"})
        assert not result.is_error, result.content[0].text
        statuses = {r["path"]: r["status"] for r in result.structured_content["results"]}
        assert statuses["people/Parking.md"] == "indexed"
        assert statuses["/etc/passwd"].startswith("refused: /etc/passwd is outside")
        hits = indexed.call("search_markdown", {"query": "where do visitors park",
                                                "limit": 1}).structured_content["results"]
        assert hits[0]["path"] == "people/Parking.md"
    finally:
        note.unlink()
    result = indexed.call("update_files", {"paths": [str(note)]})  # absolute paths work too
    assert result.structured_content["results"][0]["status"].startswith("removed")
    hits = indexed.call("search_markdown", {"query": "zebra-striped bays Lindenplein garage",
                                            "mode": "keyword"}).structured_content["results"]
    assert "people/Parking.md" not in [h["path"] for h in hits]


def test_update_files_refuses_what_it_cannot_index(indexed) -> None:
    result = indexed.call("update_files", {"paths": ["../x.md", ".obsidian/app.json"]})
    assert result.is_error
    text = result.content[0].text
    assert "../x.md: refused" in text and "not a markdown note" in text
    assert indexed.call("update_files", {}).is_error
    assert indexed.call("index_status", {"verbose": True}).is_error


def test_a_note_edited_on_disk_is_found_within_3_s(indexed) -> None:
    """No update_files: the server's watcher sees the edit and reindexes the note."""
    rel = "people/Hiring process.md"
    path = indexed.roots[0] / rel
    original = path.read_text(encoding="utf-8")
    sentence = "Candidates who bring a homemade sourdough loaf get a bonus interview slot."
    try:
        path.write_text(original.rstrip("\n") + "\n\n" + sentence + "\n", encoding="utf-8")
        written = time.monotonic()

        def found() -> bool:
            hits = indexed.call("search_markdown", {"query": "bring bread to the interview",
                                                    "limit": 3}).structured_content["results"]
            return any(h["path"] == rel and "sourdough" in h["text"] for h in hits)

        wait_until(found, 3.0, "the edited note found by its new sentence", interval=0.05)
        assert time.monotonic() - written < 3.0
    finally:
        path.write_text(original, encoding="utf-8")
    wait_until(lambda: not any("sourdough" in h["text"] for h in indexed.call(
        "search_markdown", {"query": "sourdough loaf interview", "mode": "keyword"}
    ).structured_content["results"]), 30, "the edit undone in the index")


# ---- resources ----------------------------------------------------------------------------


def test_every_note_is_a_read_only_resource(indexed) -> None:
    resources = indexed.run(lambda s: s.list_resources()).resources
    root = indexed.roots[0]
    on_disk = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md")
                     if ".obsidian" not in p.parts)
    assert sorted(r.name for r in resources) == on_disk
    uri = next(str(r.uri) for r in resources if r.name == "finance/Revenue tracking.md")
    assert uri == "mdsearch://note/finance/Revenue%20tracking.md"
    contents = indexed.run(lambda s: s.read_resource(uri)).contents
    assert contents[0].text == (root / "finance" / "Revenue tracking.md").read_text("utf-8")
    assert contents[0].mime_type == "text/markdown"
    templates = indexed.run(lambda s: s.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["mdsearch://note/{+path}"]


@pytest.mark.parametrize(("uri", "message"), [
    ("mdsearch://note/..%2F..%2Fetc%2Fpasswd", "outside the folders this server reads"),
    ("mdsearch://note/%2Fetc%2Fpasswd", "outside the folders this server reads"),
    ("mdsearch://note/finance/Nope.md", "does not exist"),
    ("mdsearch://other/x.md", "unknown resource"),
])
def test_resources_outside_the_roots_are_refused(indexed, uri, message) -> None:
    with pytest.raises(MCPError) as info:
        indexed.run(lambda s: s.read_resource(uri))
    assert message in info.value.error.message
