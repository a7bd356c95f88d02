"""The docs test's fence parser follows CommonMark: inline triple backticks in prose open no block, ~~~ and
longer fences hold shorter ones, indented fences (up to 3 spaces) count and lose that indentation.
Oracle: markdown-it-py's CommonMark parser, on crafted Markdown and on every page the docs test reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from tests.docs.commands import blocks_in, docs_files, fences

REPO = Path(__file__).resolve().parents[2]

CRAFTED = """\
- the text, else the first fenced
  ```` ```json ```` / ```` ``` ```` block, else the prose
```bash
echo one
```
~~~text
```
a backtick fence does not close a tilde one
~~~~
```sh
echo two
```
````markdown
```
``` text after it: not a close
`````
   ```bash
   echo three
     echo four
  ```
    ```bash
    echo indented code, not a fence
    ```
``` a`b
echo not a fence: backtick in a backtick fence's info
~~~ bash `tilde info may hold backticks`
echo five
~~~
```python
print("not shell")
```
```sh
echo six, never closed
"""


def commonmark_fences(text: str) -> list[tuple[int, str, str]]:
    tokens = MarkdownIt("commonmark").parse(text)
    return [(t.map[0] + 1, t.info.strip(), t.content.rstrip("\n")) for t in tokens if t.type == "fence"]


def test_shell_blocks_of_crafted_markdown(tmp_path: Path) -> None:
    (tmp_path / "page.md").write_text(CRAFTED)
    got = [(b.line, [c.text for c in b.commands]) for b in blocks_in(tmp_path / "page.md", tmp_path)]
    assert got == [
        (3, ["echo one"]),
        (10, ["echo two"]),
        (17, ["echo three", "echo four"]),
        (26, ["echo five"]),
        (32, ["echo six, never closed"]),
    ]


def test_fences_match_commonmark_on_crafted_markdown() -> None:
    ours = [(f.line, f.info, "\n".join(f.lines)) for f in fences(CRAFTED)]
    assert ours == commonmark_fences(CRAFTED)
    assert [f.lines for f in fences(CRAFTED) if f.line == 17] == [("echo three", "  echo four")]


@pytest.mark.parametrize("page", docs_files(REPO), ids=lambda p: p.relative_to(REPO).as_posix())
def test_fences_match_commonmark_on_every_docs_page(page: Path) -> None:
    """A fence our top-level parser misses (e.g. one in a list item or a quote) fails here, not silently."""
    text = page.read_text(encoding="utf-8")
    assert [(f.line, f.info, "\n".join(f.lines)) for f in fences(text)] == commonmark_fences(text)
