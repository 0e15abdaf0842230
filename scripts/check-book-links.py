#!/usr/bin/env python3
"""Check the internal links of a built mdBook (HTML), stdlib only.

Usage: scripts/check-book-links.py [BOOK_DIR]   (default: docs/book)

Every relative href (and src) in every HTML file must point to a file that
exists in the book, and every #fragment -- in-page or on another page -- to
an element with that id (or an <a name=...>) in the target page. External
links (http:, https:, mailto:, ...) are not checked. A page's <base href>
is honoured; an href starting with "/" is taken from the book's root.

Exit status 0 when every link resolves, 1 otherwise (each broken link is
printed as FILE: LINK: WHY), 2 when the book directory is missing.
"""

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

EXTERNAL_SCHEMES = {"http", "https", "mailto", "ftp", "javascript", "data", "tel"}


class Page(HTMLParser):
    """The ids, links and <base href> of one HTML page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set = set()
        self.links: list = []  # (attribute, value)
        self.base: str = ""

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        if tag == "base" and a.get("href") is not None:
            self.base = a["href"]
        for attr in ("href", "src"):
            value = a.get(attr)
            if value is not None and tag in ("a", "link", "script", "img", "iframe", "area", "source"):
                self.links.append((attr, value))

    handle_startendtag = handle_starttag


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    return page


def main() -> int:
    book = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/book").resolve()
    if not book.is_dir():
        print(f"check-book-links: {book} does not exist: build the book first (mdbook build docs)", file=sys.stderr)
        return 2
    pages = {p.resolve(): parse(p) for p in sorted(book.rglob("*.html"))}
    broken = []
    checked = 0
    for path, page in pages.items():
        rel_page = path.relative_to(book)
        for attr, link in page.links:
            parts = urlsplit(link)
            if parts.scheme.lower() in EXTERNAL_SCHEMES or link.startswith("//"):
                continue
            if parts.scheme:
                broken.append(f"{rel_page}: {link}: unknown scheme `{parts.scheme}`")
                continue
            checked += 1
            target_path = unquote(parts.path)
            if not target_path:
                target = path  # "#frag" (or "") within this page
            else:
                base_dir = path.parent
                if page.base:
                    base = unquote(urlsplit(page.base).path)
                    base_dir = book / base.lstrip("/") if base.startswith("/") else path.parent / base
                if target_path.startswith("/"):
                    target = book / target_path.lstrip("/")
                else:
                    target = base_dir / target_path
                target = target.resolve()
                if target.is_dir():
                    target = target / "index.html"
            try:
                target.relative_to(book)
            except ValueError:
                broken.append(f"{rel_page}: {link}: points outside the book ({target})")
                continue
            if not target.is_file():
                broken.append(f"{rel_page}: {link}: no such file {target.relative_to(book)}")
                continue
            fragment = unquote(parts.fragment)
            if fragment and attr == "href":
                ids = pages[target].ids if target in pages else None
                if ids is None:
                    broken.append(f"{rel_page}: {link}: a #fragment into a file that is not HTML")
                elif fragment not in ids:
                    broken.append(f"{rel_page}: {link}: no id `{fragment}` in {target.relative_to(book)}")
    for b in broken:
        print(b)
    print(
        f"check-book-links: {len(pages)} pages, {checked} internal links, {len(broken)} broken",
        file=sys.stderr,
    )
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
