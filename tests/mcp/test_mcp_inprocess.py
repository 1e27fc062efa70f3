"""The MCP tools in-process, over the fake embedder: the token budget, trimming, argument
handling and path resolution, over one folder and two, checked over many inputs quickly. (The
same behaviour through a real process and the real model: test_mcp_tools.py.)"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_harness import EXAMPLE_VAULT, wait_until

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.api import RequestError
from mdsearch_ls.mcp import answers as render
from mdsearch_ls.mcp import tools
from mdsearch_ls.mcp.roots import Library
from mdsearch_ls.mcp.tokens import TokenCounter, share

TOKENS = TokenCounter()


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory, fake_embedder_cls: Any) -> Any:
    base = tmp_path_factory.mktemp("mcp-inprocess")
    vault = shutil.copytree(EXAMPLE_VAULT, base / "vault")
    library = Library([vault], Settings(index_dir=str(base / "index")),
                      embedder=fake_embedder_cls(), watch=False)
    wait_until(lambda: library.index_state()["state"] == "ready", 120, "index ready")
    yield library
    library.close()


def call(lib: Library, name: str, **arguments: Any) -> tools.Answer:
    return tools.call(lib, name, arguments)


# ---- tokens -------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400),
       st.integers(min_value=0, max_value=120))
def test_trim_fits_and_never_cuts_a_word(text: str, limit: int) -> None:
    shown, cut = TOKENS.trim(text, limit)
    assert TOKENS.count(shown) <= limit
    assert text.startswith(shown)
    if not cut:
        assert shown == text
    else:
        rest = text[len(shown):]
        assert not rest or rest[0].isspace() or not shown, (shown[-10:], rest[:10])


def test_trim_prefers_a_line_end() -> None:
    text = "the first line of this section says a fair amount\nsecond line goes on and on"
    shown, cut = TOKENS.trim(text, 12)  # the line end is near the cut: stop there
    assert cut and shown == "the first line of this section says a fair amount"
    text = "a short first line\nthen a second line that goes on and on and on for a while"
    shown, cut = TOKENS.trim(text, 12)  # the line end is far back: stop between words
    assert cut and shown == "a short first line\nthen a second line that goes on and"


def test_counts_add_up_across_whitespace() -> None:
    a, b = "Net new MRR = new + expansion", "| Churn | cancellation | −€900 |"
    assert TOKENS.count(a + "\n" + b) == TOKENS.count(a) + TOKENS.count(b)
    assert TOKENS.count("世界") == 2  # a token per CJK character, where chars/4 would say 1


@given(st.lists(st.integers(min_value=0, max_value=500), max_size=12),
       st.integers(min_value=0, max_value=3000))
def test_share_is_fair_and_within_budget(needs: list[int], budget: int) -> None:
    allot = share(needs, budget)
    assert sum(allot) <= budget
    assert all(0 <= a <= n for a, n in zip(allot, needs, strict=True))
    if sum(needs) <= budget:
        assert allot == needs
    else:
        short = [a for a, n in zip(allot, needs, strict=True) if a < n]
        assert max(short) - min(short) <= 1  # the ones cut all got (about) the same
        assert sum(allot) >= budget - len(needs)


# ---- arguments ----------------------------------------------------------------------------------


def test_guessed_names_lists_and_numbers_are_normalised() -> None:
    spec = tools.SPECS["search_markdown"]
    args = tools.normalise(spec, {"q": "x", "k": "3", "tag": "a, b", "path": '["p/", "q/"]',
                                  "max_tokens": 500.0})
    assert args == {"query": "x", "limit": 3, "tag": ["a", "b"], "path": ["p/", "q/"],
                    "max_tokens": 500}
    with pytest.raises(tools.ToolInputError, match="valid: query, limit, mode"):
        tools.normalise(spec, {"query": "x", "size": 3})
    with pytest.raises(tools.ToolInputError, match="'k' and 'limit' mean the same"):
        tools.normalise(spec, {"query": "x", "limit": 2, "k": 3})
    assert tools.normalise(spec, {"query": "x", "limit": 2, "k": 2})["limit"] == 2
    assert tools.normalise(tools.SPECS["update_files"], {"files": "a.md,b.md"}) == {
        "paths": ["a.md", "b.md"]}


def test_tool_descriptions_are_short() -> None:
    assert all(len(s.description) < 300 for s in tools.SPECS.values())
    assert len(tools.INSTRUCTIONS.splitlines()) == 2


# ---- budgets over many sizes --------------------------------------------------------------------


@pytest.mark.parametrize("query", ["backup", "how do we write up what went wrong after an outage",
                                   "revenue invoices late payment", "onboarding laptop"])
def test_search_never_exceeds_max_tokens(lib, query) -> None:
    for budget in range(100, 2600, 61):
        answer = call(lib, "search_markdown", query=query, max_tokens=budget)
        n = TOKENS.count(answer.text)
        assert n <= budget, (query, budget, n)
        assert answer.structured["total_tokens"] == n
        assert answer.structured["results"]


def test_the_best_hits_are_whole_the_rest_excerpts(lib) -> None:
    answer = call(lib, "search_markdown", query="backup restore database", limit=8,
                  max_tokens=20_000)
    results = answer.structured["results"]
    assert len(results) == 8
    assert not any(r["truncated"] for r in results[: render.FULL_HITS])
    assert all(r["tokens"] <= render.EXCERPT_TOKENS for r in results[render.FULL_HITS:])
    for i, r in enumerate(results, start=1):
        block = answer.text.split(f"[{i}] ", 1)[1].split("\n\n[", 1)[0]
        if r["truncated"]:
            # Says where the rest is: from the first line not shown whole to the section's end.
            shown = r["text"].split("\n")
            lines = (lib.roots[0] / r["path"]).read_text("utf-8").split("\n")
            first = int(re.search(r"…\(truncated: the rest is lines? (\d+)", block)[1])
            assert r["start_line"] < first <= r["end_line"]
            assert lines[first - 1] not in shown
            assert all(lines[n - 1] in shown for n in range(first - len(shown) + 1, first)
                       if lines[n - 1].strip())
            assert block.rstrip().endswith((f"-{r['end_line']})", f"line {r['end_line']})"))
        else:
            assert "…(truncated" not in block


def test_read_section_never_exceeds_max_tokens_and_continues_exactly(lib) -> None:
    rel = "engineering/LLM assistant context management.md"
    lines = (lib.roots[0] / rel).read_text(encoding="utf-8").split("\n")
    for budget in range(100, 1500, 53):
        answer = call(lib, "read_section", path=rel, max_tokens=budget)
        assert TOKENS.count(answer.text) <= budget
    # Reading on from next_start_line, page after page, shows every line exactly once.
    seen: list[int] = []
    start = 1
    while True:
        sc = call(lib, "read_section", path=rel, start_line=start, end_line=len(lines),
                  max_tokens=150).structured
        shown = sc["text"].split("\n") if sc["text"] else []
        for i, text in enumerate(shown):
            n = sc["start_line"] + i
            assert lines[n - 1].startswith(text)
            if not seen or seen[-1] != n:
                seen.append(n)
        if not sc["truncated"]:
            break
        assert sc["next_start_line"] > start
        start = sc["next_start_line"]
    last = max(i for i, t in enumerate(lines, start=1) if t.strip())
    assert seen == list(range(1, last + 1))


def test_read_section_heading_forms(lib) -> None:
    rel = "finance/Revenue tracking.md"
    a = call(lib, "read_section", path=rel, heading="chasing late payments").structured
    b = call(lib, "read_section", path=rel, heading="Invoices > Chasing late payments").structured
    c = call(lib, "read_section", path=rel,
             heading="## Revenue tracking > Invoices > Chasing late payments").structured
    assert a["start_line"] == b["start_line"] == c["start_line"]
    assert a["siblings"] == []  # the only subsection of Invoices
    line_only = call(lib, "read_section", path=rel, start_line=a["start_line"] + 1).structured
    assert line_only["heading_path"] == "Revenue tracking > Invoices > Chasing late payments"
    assert line_only["section_end_line"] == a["section_end_line"]


# ---- paths -------------------------------------------------------------------------------------


def test_paths_resolve_inside_the_root_only(lib) -> None:
    root = lib.roots[0]
    assert lib.locate("finance/Revenue tracking.md").rel == "finance/Revenue tracking.md"
    assert lib.locate(str(root / "finance" / "Revenue tracking.md")).rel == \
        "finance/Revenue tracking.md"
    assert lib.locate("./finance/../finance/Expense policy.md").rel == "finance/Expense policy.md"
    assert lib.locate("vault/Home.md").rel == "Home.md"  # the root's own name in front
    for bad in ("../x.md", "finance/../../x.md", "/etc/passwd", str(root.parent / "x.md")):
        with pytest.raises(tools.ToolInputError, match="outside the folders"):
            lib.locate(bad)


def test_two_roots_with_one_name_get_distinct_names(tmp_path: Path, fake_embedder_cls) -> None:
    a, b = tmp_path / "x" / "notes", tmp_path / "y" / "notes"
    for root in (a, b):
        root.mkdir(parents=True)
        (root / "n.md").write_text(f"# N\n\nIn {root.parent.name}.\n", encoding="utf-8")
    # One --index-dir for two roots: an index each, in a subfolder named after the root.
    library = Library([a, b], Settings(index_dir=str(tmp_path / "idx")),
                      embedder=fake_embedder_cls(), watch=False)
    try:
        assert [library.names[a], library.names[b]] == ["notes", "notes-2"]
        wait_until(lambda: library.index_state()["state"] == "ready", 60, "ready")
        assert [Path(f["index_dir"]) for f in library.status()["folders"]] == [
            tmp_path / "idx" / "notes", tmp_path / "idx" / "notes-2"]
        assert all(not f["read_only"] for f in library.status()["folders"])
        assert library.locate("notes-2/n.md").folder.root == b
        assert library.read("notes/n.md")[1] == "# N\n\nIn x.\n"
        with pytest.raises(RequestError, match="does not exist"):
            library.read("other/n.md")  # a subfolder of the first root, which has none
    finally:
        library.close()



def test_resources_come_in_pages_that_add_up_to_every_note(lib: Library, monkeypatch) -> None:
    """``resources/list`` is paged (issue 22): following nextCursor gives every note once."""
    import asyncio

    from mcp.types import PaginatedRequestParams

    from mdsearch_ls.mcp import server as mcp_server

    monkeypatch.setattr(mcp_server, "RESOURCE_PAGE", 7)
    notes = mcp_server.NotesServer(lib)
    everything = asyncio.run(notes.list_resources())
    seen, cursor, pages = [], None, 0
    while True:
        params = PaginatedRequestParams(cursor=cursor)
        page = asyncio.run(notes._handle_list_resources(None, params))
        assert len(page.resources) <= 7
        seen.extend(r.name for r in page.resources)
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [r.name for r in everything] and len(seen) > 7
    assert pages == -(-len(seen) // 7)
    with pytest.raises(ValueError, match="invalid cursor"):
        asyncio.run(notes._handle_list_resources(None, PaginatedRequestParams(cursor="x")))
