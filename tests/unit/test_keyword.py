"""Tests for keyword: typed text -> FTS5 MATCH, checked against a real FTS table too."""

from __future__ import annotations

import pytest

from mdsearch_ls.engine.index.manifest import Manifest
from mdsearch_ls.engine.locations import ChunkRecord, FileRecord, FileUpdate
from mdsearch_ls.engine.search.keyword import STOPWORDS, build_match, phrase_match, tokens


def test_tokens_split_like_unicode61():
    assert tokens("backup.retention_days") == ["backup", "retention", "days"]
    assert tokens("Ctrl+Shift+F") == ["ctrl", "shift", "f"]
    assert tokens("Café déjà-vu") == ["café", "déjà", "vu"]


def test_plain_words_are_ored():
    assert build_match("revenue tracking") == '"revenue" OR "tracking"'


def test_pairs_adds_adjacent_content_words_as_phrases():
    assert build_match("revenue tracking", pairs=True) == (
        '"revenue" OR "tracking" OR "revenue tracking"'
    )
    assert build_match("rotate keys weekly", pairs=True) == (
        '"rotate" OR "keys" OR "weekly" OR "rotate keys" OR "keys weekly"'
    )
    assert build_match("budget Budget", pairs=True) == '"budget"'


def test_no_pair_across_a_stopword():
    assert build_match("copy of files", pairs=True) == '"copy" OR "files"'


def test_repeated_words_appear_once():
    assert build_match("budget Budget BUDGET") == '"budget"'


def test_stopwords_are_dropped():
    assert build_match("how do I rotate the keys") == '"rotate" OR "keys"'
    assert {"how", "the", "i"} <= STOPWORDS


def test_only_stopwords_keeps_them():
    # "what is it" is a poor query, but matching nothing at all would be worse.
    assert build_match("what is it") == '"what" OR "is" OR "it"'


def test_dotted_identifier_adds_its_exact_sequence():
    match = build_match("backup.retention_days")
    terms = match.split(" OR ")
    assert terms[:3] == ['"backup"', '"retention"', '"days"']
    assert '"backup retention days"' in terms


def test_key_combination():
    match = build_match("Ctrl+Shift+F")
    assert '"ctrl shift f"' in match.split(" OR ")
    assert '"f"' in match.split(" OR ")


def test_error_code():
    match = build_match("ERR_CERT_DATE_INVALID in chrome")
    terms = match.split(" OR ")
    assert '"err cert date invalid"' in terms
    assert '"chrome"' in terms
    assert '"in"' not in terms


def test_phrases_are_required():
    assert build_match("deploy", ["release train"]) == '"release train" AND ("deploy")'
    assert (
        build_match("x", ["code freeze", "Release Train"])
        == '"code freeze" AND "release train" AND ("x")'
    )
    assert build_match("", ["release train"]) == '"release train"'


def test_nothing_to_match():
    assert build_match("") is None
    assert build_match("  +++ ... ") is None
    assert build_match("", ["!!!"]) is None


def test_quotes_cannot_break_the_expression():
    match = build_match('say "hi" or "bye"')
    assert match.count('"') % 2 == 0


def test_phrase_match():
    assert phrase_match(["release train"]) == '"release train"'
    assert phrase_match(["a b", "C-D"]) == '"a b" AND "c d"'
    assert phrase_match([]) is None
    assert phrase_match(["..."]) is None


# ---- against a real FTS5 table -------------------------------------------------------------


@pytest.fixture
def fts(tmp_path):
    m = Manifest(tmp_path / "kw.sqlite3")
    texts = {
        "cfg": "Set backup.retention_days to 30 in the config file.",
        "keys": "Press Ctrl+Shift+F to search every file.",
        "cert": "The browser shows ERR_CERT_DATE_INVALID when the clock is wrong.",
        "days": "Retention of documents: seven days for drafts.",
        "together": "Print the current working directory of the shell, then list it.",
        "apart": "Working copy: see the directory.",
        "plain": "Nothing of interest here.",
        "stem": "We are tracking revenues monthly.",
    }
    updates = []
    for cid, text in texts.items():
        chunk = ChunkRecord(id=cid, path=f"{cid}.md", ordinal=0, section=0, title=cid,
                            breadcrumb=cid, start_line=0, end_line=0, text=text,
                            embed_hash=f"e{cid}", body_hash=f"b{cid}")
        file = FileRecord(f"{cid}.md", "h", 0.0, len(text), cid, (), (), (cid,))
        updates.append(FileUpdate(file, (chunk,), (("", text),)))
    m.apply(updates)
    yield m
    m.close()


def ids(m: Manifest, match: str | None) -> list[str]:
    assert match is not None
    return [cid for cid, _ in m.keyword_search(match, 10)]


def test_a_word_finds_it_inside_an_identifier(fts):
    assert "cfg" in ids(fts, build_match("retention"))


def test_the_exact_identifier_ranks_first(fts):
    found = ids(fts, build_match("backup.retention_days"))
    assert found[0] == "cfg"
    assert "days" in found  # shares words: still a candidate, ranked lower


def test_key_combination_and_error_code_are_found(fts):
    assert ids(fts, build_match("Ctrl+Shift+F"))[0] == "keys"
    assert ids(fts, build_match("ERR_CERT_DATE_INVALID"))[0] == "cert"
    assert ids(fts, build_match("cert date"))[0] == "cert"


def test_adjacent_pair_outranks_the_words_apart(fts):
    # "apart" has both words, but not next to each other, and is shorter, so the words alone
    # rank it first ('"working" OR "directory"'); "together" has the pair and wins with it.
    assert ids(fts, '"working" OR "directory"')[:2] == ["apart", "together"]
    assert ids(fts, build_match("working directory"))[:2] == ["apart", "together"]
    assert ids(fts, build_match("working directory", pairs=True))[:2] == ["together", "apart"]


def test_porter_stemming(fts):
    assert ids(fts, build_match("track revenue")) == ["stem"]


def test_stopword_query_does_not_match_everything(fts):
    found = ids(fts, build_match("what is the retention"))
    assert set(found) == {"cfg", "days"}


def test_required_phrase_on_fts(fts):
    assert ids(fts, build_match("file", ["every file"])) == ["keys"]
    assert fts.phrase_chunk_ids(phrase_match(["retention days"])) == {"cfg"}
    assert fts.phrase_chunk_ids(phrase_match(["days retention"])) == set()


def test_phrase_holders_among_candidates(fts, monkeypatch):
    """Which candidates hold a phrase: read whole when few chunks hold it (or few for so many
    candidates), asked chunk by chunk when many do; the ways agree, and a chunk that is not a
    candidate is never named."""
    from mdsearch_ls.engine.index import manifest

    every = {"cfg", "keys", "cert", "days", "together", "apart", "plain", "stem"}
    the = phrase_match(["the"])
    holders = {"cfg", "cert", "together", "apart"}
    assert fts.phrase_holders(the, every) == holders
    assert fts.phrase_holders(the, every, scan=1) == holders  # more than the scan: counted
    assert fts.phrase_holders(the, {"cfg", "plain"}, scan=1) == {"cfg"}
    monkeypatch.setattr(manifest, "_READ_PER_SEEK", 0)  # too common: chunk by chunk
    assert fts.phrase_holders(the, every, scan=1) == holders
    assert fts.phrase_holders(the, {"cfg", "plain"}, scan=1) == {"cfg"}
    monkeypatch.undo()
    assert fts.phrase_holders(the, {"cfg", "plain"}) == {"cfg"}
    assert fts.phrase_holders(phrase_match(["days retention"]), every) == set()
    assert fts.phrase_holders(the, set()) == set()
    assert fts.phrase_exists(the) and not fts.phrase_exists(phrase_match(["days retention"]))


def test_every_built_expression_is_valid_fts5(fts):
    for q in ['a "b', "(x) AND", "NOT near", "col:umn", "x* ^y", "-minus +plus", "NEAR(a b)",
              "OR", "AND AND", '"', "''", "ü ß 東京", "NEAR AND OR NOT"]:
        for pairs in (False, True):
            match = build_match(q, pairs=pairs)
            if match is not None:
                fts.keyword_search(match, 5)  # must not raise
