"""Sections rendered for people: markdown to one line of plain text, cut between words, with the
query's words marked (engine/search/preview.py, shared by the CLI and the language server's
hover)."""

from __future__ import annotations

import pytest

from mdsearch_ls.engine.search.highlight import ELLIPSIS, Snippet, match_spans, query_terms, wrap
from mdsearch_ls.engine.search.preview import plain_text, snippet

SECTION = """## Rotating the keys

Rotate the **backup keys** every _90 days_. See [[Security protocols#Keys|the key policy]] and
the [restic docs](https://restic.readthedocs.io).

- first step: `restic key list`
- second ==highlighted== step ^abc123

```bash
$ restic key add --repo s3:bucket
$ restic key remove old
```

%%not for readers%%

> [!warning] Do not lose the old key
> It decrypts older snapshots.

| who | when |
|-----|------|
| Ana | May  |
"""


def test_markup_goes_and_the_words_stay() -> None:
    text = plain_text(SECTION)
    assert text.startswith("Rotate the backup keys every 90 days. See the key policy and the "
                           "restic docs.")
    for noise in ("**", "_90", "[[", "]]", "](", "==", "^abc123", "```", "%%", "[!warning]",
                  "|---", "Rotating the keys", "\n"):
        assert noise not in text, noise
    assert "first step: restic key list · second highlighted step" in text


def test_a_code_block_reads_as_its_first_line() -> None:
    text = plain_text(SECTION)
    assert "$ restic key add --repo s3:bucket" in text
    assert "restic key remove old" not in text


def test_comments_callouts_and_tables() -> None:
    text = plain_text(SECTION)
    assert "not for readers" not in text
    assert "Do not lose the old key: It decrypts older snapshots." in text
    assert "who | when · Ana | May" in text


def test_percent_signs_inside_code_are_code() -> None:
    md = "# T\n\n```\nprintf %%d\n```\n\nUse %% carefully %% here."
    assert plain_text(md) == "printf %%d · Use here."
    assert plain_text("Run `date +%%Y` %%not this%% now.") == "Run date +%%Y now."


def test_a_heading_alone_is_still_shown() -> None:
    assert plain_text("# Only a heading") == ""
    assert snippet("# Only a heading").text == "Only a heading"
    assert plain_text("# Title\n\nBody.", drop_heading=False) == "Title · Body."


def test_query_terms_drop_common_words_and_keep_phrases() -> None:
    terms = query_terms("how do I rotate the backup keys", ["Old Key"])
    assert "how" not in terms and "the" not in terms
    assert "old key" in terms
    text = "Rotating backups: the key rotation of old keys. Old key here."
    marked = [text[s:e] for s, e in match_spans(text, terms)]
    assert marked == ["Rotating", "backups", "key", "old keys", "Old key"]


def test_window_moves_to_the_words_the_query_asked_for() -> None:
    filler = " ".join(f"word{i}" for i in range(80))
    md = f"# H\n\n{filler}. The restic key is kept in the office safe."
    plain = snippet(md, (), 80)
    assert plain.text.startswith("word0 ") and plain.text.endswith(ELLIPSIS)
    found = snippet(md, query_terms("where is the restic key"), 80)
    assert found.text.startswith(ELLIPSIS) and "restic key is kept" in found.text
    assert [found.text[s:e] for s, e in found.spans] == ["restic", "key"]


def test_a_match_at_the_end_of_a_section_still_fills_the_window() -> None:
    # "deploy" only in the last sentence: the snippet showed "…exceeds 5% in the 10 minutes
    # after a deploy." (49 characters of 200) instead of the sentences that lead to it.
    md = ("## Rolling back\n\nIf a release causes errors, roll back first and investigate later. "
          "A rollback is announced in the releases channel and, if customers noticed, handled as "
          "an incident. An automatic rollback triggers when the error rate exceeds 5% in the 10 "
          "minutes after a deploy.")
    snip = snippet(md, query_terms("undo a deploy"), 200)
    assert len(snip.text) > 150, snip.text
    assert snip.text.endswith("after a deploy.")
    assert snip.text.startswith(ELLIPSIS) and " " not in snip.text[:2]  # from a word start
    assert [snip.text[s:e] for s, e in snip.spans] == ["deploy"]
    # A sentence start is preferred when it still fills most of the window.
    short = snippet(md, query_terms("undo a deploy"), 130)
    assert short.text == ELLIPSIS + ("An automatic rollback triggers when the error rate exceeds "
                                     "5% in the 10 minutes after a deploy."), short.text


@pytest.mark.parametrize("limit", [20, 37, 64, 100, 159, 200])
def test_cuts_fall_between_words(limit: int) -> None:
    sentence = "Escalate to the on-call lead when more than five percent of requests "
    md = "# H\n\n" + sentence * 6
    snip = snippet(md, query_terms("requests"), limit)
    assert len(snip.text) <= limit
    assert snip.text.endswith(ELLIPSIS)
    body = snip.text.strip(ELLIPSIS)
    words = set(sentence.split())
    assert all(w in words for w in body.split()), snip.text  # no word cut in half
    for s, e in snip.spans:
        assert snip.text[s:e].lower().startswith("request")


def test_wrap_gives_at_most_the_lines_asked_for_and_keeps_the_marks() -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron"
    snip = Snippet(text, tuple(match_spans(text, ("theta", "xi"))))
    lines = wrap(snip, 20, 2)
    assert len(lines) == 2
    assert all(len(line.text) <= 20 for line in lines)
    assert lines[-1].text.endswith(ELLIPSIS)
    shown = " ".join(line.text for line in lines).replace(ELLIPSIS, "").split()
    assert shown == text.split()[: len(shown)]  # in order, nothing dropped in between
    marked = [line.text[s:e] for line in lines for s, e in line.spans]
    assert marked == [w for w in ("theta", "xi") if any(w in line.text for line in lines)]
    short = wrap(Snippet("two words"), 20, 2)
    assert [line.text for line in short] == ["two words"]


def test_a_word_longer_than_the_width_is_cut_rather_than_lost() -> None:
    url = "https://example.com/" + "x" * 300
    snip = snippet(f"# H\n\n{url}", (), 60)
    assert len(snip.text) <= 60 and snip.text.startswith("https://example.com/")
