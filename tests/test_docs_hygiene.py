"""The docs and the product code say what is, not how it came to be: no issue or work-step
numbers, commit hashes or dates in the README, docs/*.md or the sources' comments and
docstrings (a figure lives in docs/performance.md, history in git). And every relative
link between the docs, and every bench/results file they name, leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
SOURCES = sorted(
    path
    for package in ("server", "client_sim", "shared", "launch", "bench")
    for path in (ROOT / package).rglob("*.py")
)

HISTORY = {
    # "#52", not an upstream "aiohttp#13681" and not a CSS colour ("color: #222").
    "issue reference": re.compile(r"(?<![\w/&])(?<!color: )#\d{2,}\b"),
    "issue number": re.compile(r"\bissues? #?\d+\b", re.IGNORECASE),
    "work-step number": re.compile(r"\b(?:stop|step) \d+\b", re.IGNORECASE),
    # Lower-case hex of 7 to 40 digits with a letter and a digit in it; not part of a
    # longer word, a UUID or a hyphenated token.
    "commit hash": re.compile(
        r"(?<![\w-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w-])"
    ),
    "date": re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"),
}

# docs/protocol.md's worked examples give a frame's bytes as hex (generated from
# shared/protocol/doc.py): a table row whose second cell is the frame in backticks.
FRAME_EXAMPLE = re.compile(r"^\| [^|]+ \| `[0-9a-f]+` \|")
HEX_ALPHABET = "0123456789abcdef"


def history_found(path: Path) -> list[str]:
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for name, pattern in HISTORY.items():
            if name == "commit hash" and path.name == "protocol.md" and FRAME_EXAMPLE.match(line):
                continue
            for match in pattern.finditer(line):
                if match.group() != HEX_ALPHABET:
                    found.append(f"{path.name}:{number}: {name} {match.group()!r}")
    return found


@pytest.mark.parametrize("path", DOCS + SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_history_in_docs_or_code(path: Path) -> None:
    assert history_found(path) == []


@pytest.mark.parametrize(
    "text",
    ["see #52", "issue 17's target", "the code of stop 45", "against ec77864",
     "measured 2026-12-05", "Issue 3"],
)  # fmt: skip
def test_each_kind_of_history_is_caught(tmp_path: Path, text: str) -> None:
    path = tmp_path / "doc.md"
    path.write_text(f"A line: {text}.\n")
    assert history_found(path)


@pytest.mark.parametrize(
    "text",
    ["aiohttp#13681 upstream", "color: #222;", "0123456789", "deadbeef-1234-5678",
     "258EAFA5-E914-47DA", "1048576 bytes", "a 3 s stall"],
)  # fmt: skip
def test_what_only_looks_like_history_is_not(tmp_path: Path, text: str) -> None:
    path = tmp_path / "doc.md"
    path.write_text(f"A line: {text}.\n")
    assert history_found(path) == []


LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes, a
    repeated heading numbered."""
    seen: dict[str, int] = {}
    found = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        slug = "".join(ch for ch in title if ch.isalnum() or ch in " -_").replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_somewhere(path: Path) -> None:
    broken = []
    for target in LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("path", DOCS + SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_results_file_named_exists(path: Path) -> None:
    named = set(re.findall(r"bench/results/(\w+\.json)", path.read_text(encoding="utf-8")))
    assert sorted(name for name in named if not (ROOT / "bench/results" / name).exists()) == []


def test_the_readme_is_a_guide_of_at_most_200_lines() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    for section in ("## Quick start", "## Commands", "## Where to read next"):
        assert section in readme
    assert "make demo" in readme and "make test" in readme
