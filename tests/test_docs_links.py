"""Every page of the documentation points only at files the project has: each relative link of
README.md, CONTRIBUTING.md and docs/ resolves (anchors aside), and so does each Markdown file
named in their text (``docs/alembic.md``, ``DESIGN.md``), against the page's folder or the
project's root. A page may not send a newcomer to a document that is not there."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import ROOT

PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md")])
#: [text](target): the target, without a title
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
#: a Markdown file named in the text, with or without a folder
NAMED = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b")
#: files named in the text that a command writes, not the project: (page, name) -> what writes it
WRITTEN = {("docs/performance.md", "bench/results/quick.md"): "python -m bench --quick writes it"}


def _resolves(page: Path, target: str) -> bool:
    path = target.split("#", 1)[0]
    if not path:
        return True  # an anchor on the same page
    return (page.parent / path).exists() or (ROOT / path).exists()


def _external(target: str) -> bool:
    return bool(re.match(r"[a-z][a-z0-9+.-]*:", target))  # https:, mailto:, ...


def test_the_pages_are_found() -> None:
    names = {page.relative_to(ROOT).as_posix() for page in PAGES}
    assert {"README.md", "CONTRIBUTING.md", "docs/testing.md", "docs/operations.md"} <= names


def test_every_relative_link_resolves() -> None:
    broken = [
        f"{page.relative_to(ROOT)}:{number}: {target}"
        for page in PAGES
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        for target in LINK.findall(line)
        if not _external(target) and not _resolves(page, target)
    ]
    assert broken == []


def test_every_markdown_file_named_in_the_text_exists() -> None:
    missing = []
    for page in PAGES:
        name = page.relative_to(ROOT).as_posix()
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for target in NAMED.findall(line):
                if (name, target) in WRITTEN or _resolves(page, target):
                    continue
                missing.append(f"{name}:{number}: {target}")
    assert missing == []


def test_the_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("see [the guide](guide.md#setup) and docs/alembic.md, [site](https://x.org)\n")
    (tmp_path / "guide.md").write_text("# guide\n")
    assert LINK.findall(page.read_text()) == ["guide.md#setup", "https://x.org"]
    assert _resolves(page, "guide.md#setup") and not _resolves(page, "gone.md")
    assert NAMED.findall(page.read_text()) == ["guide.md", "docs/alembic.md"]
    assert _external("https://x.org") and not _external("guide.md")
