"""Word and HTML documents as markdown: their headings become the note's sections.

A ``.docx`` goes through mammoth (BSD-2: Word's heading styles become ``<h1>``...) and a saved
page through selectolax (MIT: scripts, styles and navigation removed); both then through
markdownify (MIT). No GPL library (not html2text). Images and link targets are left out: an
inline ``data:`` image would be megabytes of base64 in a section, and a URL's words are not what
a person searches for.
"""

from __future__ import annotations

import io
import re
import zipfile

from mdsearch_ls.engine.notes.formats import Budget, ConversionError, Converted, heading

MAX_UNZIPPED = 200_000_000
"""Most bytes the entries of a ``.docx`` may declare unpacked (a zip bomb declares gigabytes)."""
MAX_RATIO = 200
"""Most a ``.docx``'s entries may expand over their packed size (XML packs ~10:1)."""

# Not the page's content: scripts and styles, menus, forms, hidden parts, embedded frames.
_NOT_CONTENT = (
    "script, style, noscript, template, svg, canvas, iframe, object, embed, nav, form, button, "
    "select, dialog, [role=navigation], [role=banner], [role=contentinfo], [aria-hidden=true], "
    "[hidden]"
)
_BLANKS = re.compile(r"\n{3,}")


def _markdown(html: str, budget: Budget) -> str:
    from markdownify import markdownify

    md = markdownify(html, heading_style="ATX", bullets="-", strip=["a", "img"],
                     escape_underscores=False, escape_asterisks=False)
    md = _BLANKS.sub("\n\n", md.replace("\r\n", "\n")).strip() + "\n"
    if not budget.take(md):
        # Cut at a paragraph so no structure is left half open.
        md = md[: budget.chars].rsplit("\n\n", 1)[0] + "\n"
    return md


def _check_zip(raw: bytes) -> zipfile.ZipFile:
    if raw[:8] == b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1":
        raise ConversionError("encrypted Word file, or an old .doc renamed .docx (an OLE "
                              "container, not a zip)")
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
        infos = archive.infolist()
    except (zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise ConversionError(f"not a Word document, or a truncated one ({exc})") from None
    unpacked = sum(i.file_size for i in infos)
    packed = max(1, sum(i.compress_size for i in infos))
    if unpacked > MAX_UNZIPPED or (unpacked > MAX_RATIO * packed and unpacked > 10_000_000):
        raise ConversionError(f"its parts unpack to {unpacked / 1e6:,.0f} MB from "
                              f"{packed / 1e6:,.1f} MB (a zip bomb?)")
    if "word/document.xml" not in {i.filename for i in infos}:
        raise ConversionError("not a Word document (no word/document.xml in the zip)")
    return archive


def convert_docx(raw: bytes, title: str, budget: Budget) -> Converted:
    """Word's headings, lists, tables and paragraphs; the zip is checked before it is read."""
    _check_zip(raw)
    import mammoth

    # Word's Title style heads the note, as its first heading would.
    result = mammoth.convert_to_html(io.BytesIO(raw),
                                     style_map="p[style-name='Title'] => h1:fresh")
    return Converted(_markdown(result.value, budget))


def convert_html(raw: bytes, title: str, budget: Budget) -> Converted:
    """The page's main content (``<main>`` or a lone ``<article>`` when it has one, else the
    body) without what is not content; its ``<title>`` heads it when it has no ``<h1>``."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(raw, encoding=True)
    title_node = tree.css_first("title")
    page_title = " ".join(title_node.text().split()) if title_node is not None else ""
    for node in tree.css(_NOT_CONTENT):
        node.decompose()
    main = tree.css("main")
    articles = tree.css("article")
    root = main[0] if len(main) == 1 else articles[0] if len(articles) == 1 else tree.body
    if root is None:
        raise ConversionError("no body in this HTML file")
    for node in root.css("header, footer, aside"):
        if root.tag == "body" and node.parent is not None and node.parent.tag == "body":
            node.decompose()
    md = _markdown(root.html or "", budget)
    if page_title and not re.search(r"^# ", md, re.MULTILINE):
        md = heading(1, page_title) + "\n\n" + md
    return Converted(md)
