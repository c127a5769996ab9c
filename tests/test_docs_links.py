"""Every relative link of README.md and docs/**/*.md resolves: the file exists and a ``#anchor`` names a heading of
the target page (GitHub's anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered); and the
manual (README.md, docs/*.md) carries no ISO dates and no "issue N": measured records live in docs/results/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MANUAL = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def _prose(text: str) -> str:
    """The page without its fenced code blocks and inline code spans (links there are not links)."""
    text = _FENCE.sub("", text)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # drops punctuation, keeps letters, digits, _, - and spaces
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in _HEADING.findall(_FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(path: Path) -> list[str]:
    problems = []
    for target in _LINK.findall(_prose(path.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            problems.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{target}: no heading with that anchor in {dest.name}")
    return problems


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(path):
    assert broken_links(path) == []


@pytest.mark.parametrize("path", MANUAL, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_manual_carries_no_dates_or_issue_numbers(path):
    hits = [f"{n}: {line.strip()[:80]}" for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if re.search(r"\b20\d\d-\d\d-\d\d\b|\b[Ii]ssues? \d+", line)]
    assert hits == []


def test_manual_pages_stay_short_and_every_record_is_indexed():
    for path in MANUAL[1:]:
        assert len(path.read_text(encoding="utf-8").splitlines()) <= 450, path.name
    assert len(MANUAL[0].read_text(encoding="utf-8").splitlines()) <= 120
    results = ROOT / "docs" / "results"
    index = (results / "README.md").read_text(encoding="utf-8")
    for record in sorted(results.glob("*.md")):
        if record.name != "README.md":
            assert re.match(r"\d{4}-\d\d-\d\d-[a-z0-9-]+\.md$", record.name), record.name
            assert f"({record.name})" in index, f"{record.name} is not listed in docs/results/README.md"


def test_the_checker_catches_what_it_should(tmp_path):
    assert slug("The loop: `rubric-reward dpo-loop`") == "the-loop-rubric-reward-dpo-loop"
    assert slug("`POST /openrlhf` (also `/get_reward`)") == "post-openrlhf-also-get_reward"
    assert slug("The lean HTTP/1.1 client") == "the-lean-http11-client"
    page = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("# Title\n## Same\n## Same\n", encoding="utf-8")
    page.write_text("[ok](b.md#same-1) [bad](b.md#nope) [gone](c.md) [self](#x)\n```\n[code](d.md)\n```\n# X\n",
                    encoding="utf-8")
    assert broken_links(page) == ["b.md#nope: no heading with that anchor in b.md", "c.md: no such file"]
