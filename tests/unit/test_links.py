"""Links in notes: what counts as one, how one is written, which note and heading it names."""

from __future__ import annotations

import pytest

from mdsearch_ls.engine.notes.links import (
    Link,
    Resolver,
    find_block,
    find_heading,
    github_anchor,
    markdown_link,
    relative_target,
    scan,
    wikilink,
)

NOTE = """---
title: Front
links: "[[in front matter]]"
---
# Head

See [[Worm bins#Setup|the bins]], ![[diagram.png]] and [md](sub/My%20Note.md#some-heading).
Also [web](https://example.com/a.md), [image](pic.png) and [here](#local-anchor).
`[[in a code span]]` and %%[[in a comment]]%%

```
[[in a fence]] [x](fenced.md)
```
[[#Local heading]] [a](<with space.md>) [[folder/Deep note.md]]
"""


def test_links_are_found_outside_code_comments_and_front_matter() -> None:
    links = [link for link, _, _ in scan(NOTE).links]
    assert [(k.kind, k.target, k.anchor, k.text) for k in links] == [
        ("wiki", "Worm bins", "Setup", "the bins"),
        ("embed", "diagram.png", "", ""),
        ("markdown", "sub/My Note.md", "some-heading", "md"),
        ("markdown", "", "local-anchor", "here"),
        ("wiki", "", "Local heading", ""),
        ("markdown", "with space.md", "", "a"),
        ("wiki", "folder/Deep note.md", "", ""),
    ]
    first = links[0]
    line = NOTE.split("\n")[first.line]
    assert line[first.start:first.end] == "[[Worm bins#Setup|the bins]]"


def test_link_at_a_cursor() -> None:
    text = scan("Go to [[Alpha#Beta]] now\n")
    assert text.link_at(0, 6) is not None  # on the first bracket
    assert text.link_at(0, 20) is not None  # just after the last one
    assert text.link_at(0, 3) is None
    assert text.link_at(1, 0) is None


@pytest.mark.parametrize(("heading", "slug"), [
    ("Watering schedule", "watering-schedule"),
    ("What's new? (2024)", "whats-new-2024"),
    ("Café & crème", "café--crème"),
    ("snake_case-and-dash", "snake_case-and-dash"),
])
def test_github_anchor(heading: str, slug: str) -> None:
    assert github_anchor(heading) == slug


def test_writing_links() -> None:
    assert wikilink("Worm bins") == "[[Worm bins]]"
    assert wikilink("Worm bins", "Set [up] #2 | now") == "[[Worm bins#Set up 2 now]]"
    assert wikilink("Composting", None, "compost heap") == "[[Composting|compost heap]]"
    assert wikilink("Composting", None, "Composting") == "[[Composting]]"  # says the same
    assert wikilink("Composting", None, "composting") == "[[Composting|composting]]"
    assert wikilink("x", embed=True) == "![[x]]"
    assert relative_target("garden/Worm bins.md", "journal/Garden journal.md", "Feeding") == (
        "../garden/Worm%20bins.md#feeding")
    assert markdown_link("a [b]", "n (1).md", "n2.md") == "[a \\[b\\]](n%20%281%29.md)"
    # what is written resolves back to the note and heading
    written = scan(markdown_link("Feeding", "garden/Worm bins.md", "journal/J.md", "Feeding"))
    link = written.links[0][0]
    names = {"garden/Worm bins.md": ("Worm bins",), "journal/J.md": ("J",)}
    assert Resolver(names).resolve(link, "journal/J.md") == "garden/Worm bins.md"
    assert find_heading([("Setup", 2), ("Feeding", 9)], link.anchor) == 9


NAMES = {
    "Inbox.md": ("Inbox",),
    "garden/Worm bins.md": ("Worm bins",),
    "archive/Worm bins.md": ("Worm bins",),
    "archive/old/Worm bins.md": ("Worm bins",),
    "garden/Composting.md": ("Composting", "compost heap"),
    "people/jd.md": ("Jane Doe", "JD"),
}


def _wiki(target: str) -> Link:
    return Link("wiki", target, "", "", 0, 0, 0)


@pytest.mark.parametrize(("target", "source", "expected"), [
    ("Inbox", "garden/Composting.md", "Inbox.md"),
    ("inbox.md", "x.md", "Inbox.md"),
    ("Worm bins", "garden/Composting.md", "garden/Worm bins.md"),  # the same folder first
    ("Worm bins", "archive/x.md", "archive/Worm bins.md"),
    ("Worm bins", "Inbox.md", "garden/Worm bins.md"),  # else the shortest path
    ("old/Worm bins", "Inbox.md", "archive/old/Worm bins.md"),  # a path suffix
    ("archive/Worm bins.md", "Inbox.md", "archive/Worm bins.md"),
    ("compost heap", "Inbox.md", "garden/Composting.md"),  # an alias
    ("Jane Doe", "Inbox.md", "people/jd.md"),  # a front-matter title
    ("Nowhere", "Inbox.md", None),
    ("", "Inbox.md", "Inbox.md"),  # [[#Heading]]: this note
])
def test_wikilinks_resolve_as_obsidian_does(target, source, expected) -> None:
    assert Resolver(NAMES).resolve(_wiki(target), source) == expected


def test_markdown_links_resolve_relative_to_the_note() -> None:
    r = Resolver(NAMES)
    link = Link("markdown", "../garden/Composting.md", "", "", 0, 0, 0)
    assert r.resolve(link, "journal/Day.md") == "garden/Composting.md"
    assert r.resolve(Link("markdown", "/Inbox.md", "", "", 0, 0, 0), "a/b/c.md") == "Inbox.md"
    assert r.resolve(Link("markdown", "Composting.md", "", "", 0, 0, 0), "Inbox.md") is None


def test_link_names_are_the_shortest_that_is_unique() -> None:
    r = Resolver(NAMES)
    assert r.link_name("garden/Composting.md") == "Composting"
    assert r.link_name("archive/Worm bins.md") == "archive/Worm bins"


def test_headings_by_text_slug_repeat_and_nesting() -> None:
    heads = [("Intro", 0), ("Set up", 4), ("Notes", 8), ("Notes", 12)]
    assert find_heading(heads, "set up") == 4
    assert find_heading(heads, "set-up") == 4
    assert find_heading(heads, "notes-1") == 12
    assert find_heading(heads, "Intro#Set up") == 4
    assert find_heading(heads, "Missing") is None
    assert find_heading(heads, "^block") is None


def test_block_references() -> None:
    lines = ["# A", "", "A paragraph to cite. ^cite-me", "", "Another ^cite"]
    assert find_block(lines, "^cite-me") == 2
    assert find_block(lines, "Heading#^cite") == 4
    assert find_block(lines, "^nope") is None
