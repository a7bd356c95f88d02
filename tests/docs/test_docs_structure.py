"""The docs as a newcomer meets them (issue 39, section 4): a short path read in an hour within its word
budget, every page reachable from the README, every relative link and #anchor resolving.

The short path is SHORT_PATH (tests/docs/commands.py), the one list of its pages. Its words are
``len(text.split())`` over each whole file, code blocks and tables included (a newcomer reads those too).
Links and headings come from markdown-it-py's CommonMark parser (tables enabled, as GitHub renders
them); heading anchors from mdit-py-plugins' GitHub-style slugs (lower case, punctuation dropped, spaces
to hyphens, ``-1``, ``-2`` for repeats), so neither is this module's own parsing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt
from mdit_py_plugins.anchors import anchors_plugin

from tests.docs.commands import SHORT_PATH, docs_files

REPO = Path(__file__).resolve().parents[2]
WORD_BUDGET = 2500
MARKDOWN = MarkdownIt("commonmark").enable("table").use(anchors_plugin, max_level=6)


@dataclass(frozen=True)
class Link:
    page: Path
    line: int
    href: str

    def where(self, root: Path) -> str:
        return f"{self.page.relative_to(root).as_posix()}:{self.line}: {self.href}"


def doc_pages(root: Path) -> list[Path]:
    """The pages that must be linked: docs/*.md and docs/design/*.md."""
    return sorted([*(root / "docs").glob("*.md"), *(root / "docs" / "design").glob("*.md")])


def words(root: Path, pages: tuple[str, ...] = SHORT_PATH) -> dict[str, int]:
    return {page: len((root / page).read_text(encoding="utf-8").split()) for page in pages}


@lru_cache(maxsize=256)
def tokens(text: str) -> tuple:
    """The block tokens of a Markdown text (each text parsed once per session)."""
    return tuple(MARKDOWN.parse(text))


def links(page: Path) -> list[Link]:
    """Every link of a Markdown page (inline and reference links alike), with its line."""
    found = []
    for block in tokens(page.read_text(encoding="utf-8")):
        for child in block.children or ():
            if child.type == "link_open":
                found.append(Link(page, block.map[0] + 1 if block.map else 0, str(child.attrGet("href"))))
    return found


def anchors(page: Path) -> set[str]:
    return {
        str(t.attrGet("id")) for t in tokens(page.read_text(encoding="utf-8")) if t.type == "heading_open"
    }


def is_relative(href: str) -> bool:
    parts = urlsplit(href)
    return not parts.scheme and not parts.netloc


def broken_links(root: Path) -> list[str]:
    """Relative links of README.md and the doc pages whose file or #anchor does not exist."""
    broken, headings = [], {}  # page -> its anchors, each page parsed once
    for page in [root / "README.md", *doc_pages(root)]:
        for link in links(page):
            if not is_relative(link.href):
                continue
            parts = urlsplit(link.href)
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if not target.exists():
                broken.append(f"{link.where(root)}: no such file")
                continue
            if parts.fragment and target.suffix == ".md" and target not in headings:
                headings[target] = anchors(target)
            if parts.fragment and (target.suffix != ".md" or unquote(parts.fragment) not in headings[target]):
                broken.append(f"{link.where(root)}: no heading with this anchor in {target.name}")
    return broken


def orphans(root: Path) -> list[str]:
    """Doc pages not reachable from README.md through relative links between Markdown pages."""
    seen, todo = set(), [(root / "README.md").resolve()]
    while todo:
        page = todo.pop()
        if page in seen or not page.is_file():
            continue
        seen.add(page)
        for link in links(page):
            path = urlsplit(link.href).path
            if is_relative(link.href) and path.endswith(".md"):
                todo.append((page.parent / unquote(path)).resolve())
    return [p.relative_to(root).as_posix() for p in doc_pages(root) if p.resolve() not in seen]


def test_the_short_path_fits_the_word_budget() -> None:
    counted = words(REPO)
    assert sum(counted.values()) <= WORD_BUDGET, f"the short path has {counted} words, over {WORD_BUDGET}"


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    assert len(doc_pages(REPO)) > 15 and (REPO / "docs" / "design" / "README.md") in doc_pages(REPO)
    assert not orphans(REPO), f"pages no linked page links to: {orphans(REPO)}"


def test_the_commands_test_reads_every_page_short_path_first() -> None:
    """tests/docs/test_docs_commands.py runs the commands of every page here, docs/design/ included."""
    scanned = docs_files(REPO)
    assert set(doc_pages(REPO)) | {REPO / "README.md"} == set(scanned)
    assert scanned[: len(SHORT_PATH)] == [REPO / page for page in SHORT_PATH]


def test_every_relative_link_and_anchor_resolves() -> None:
    assert sum(len(links(p)) for p in doc_pages(REPO)) > 100, "the link extraction lost the docs' links"
    broken = broken_links(REPO)
    assert not broken, "broken links:\n" + "\n".join(broken)


# ---- the checks themselves, on a crafted tree (numbers and anchors worked out by hand)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "docs" / "design").mkdir(parents=True)
    (tmp_path / "README.md").write_text(
        "# Title\n\nSee [a](docs/a.md#the-errata-csvs-b) and [x](https://example.org/none.md).\n\n"
        "| page | what |\n|---|---|\n| [notes](docs/design/README.md) | why |\n"
    )
    (tmp_path / "docs" / "a.md").write_text(
        "# A\n\n## The errata: `CSV`'s (b)\n\n## The errata: `CSV`'s (b)\n\n[again](#the-errata-csvs-b-1)\n"
        "```bash\n# not a heading\n```\n"
    )
    (tmp_path / "docs" / "design" / "README.md").write_text("# Notes\n\n[back](../../README.md#title)\n")
    return tmp_path


def test_a_crafted_tree_passes_and_its_words_are_counted(tree: Path) -> None:
    assert broken_links(tree) == [] and orphans(tree) == []
    assert anchors(tree / "docs" / "a.md") == {"a", "the-errata-csvs-b", "the-errata-csvs-b-1"}
    # README: "# Title" 2, the sentence 6, the table 3 + 1 + 5 = 17 words
    assert words(tree, ("README.md",)) == {"README.md": 17}


def test_a_broken_file_or_anchor_and_an_orphan_are_reported(tree: Path) -> None:
    (tree / "docs" / "a.md").write_text("# A\n\n[gone](b.md) [nowhere](#not-here) [code](#not-a-heading)\n"
                                        "```bash\n# not a heading\n```\n")  # fmt: skip
    (tree / "docs" / "design" / "lost.md").write_text("# Lost\n\n[up](../a.md)\n")
    assert broken_links(tree) == [
        "README.md:3: docs/a.md#the-errata-csvs-b: no heading with this anchor in a.md",
        "docs/a.md:3: b.md: no such file",
        "docs/a.md:3: #not-here: no heading with this anchor in a.md",
        "docs/a.md:3: #not-a-heading: no heading with this anchor in a.md",
    ]
    assert orphans(tree) == ["docs/design/lost.md"]
