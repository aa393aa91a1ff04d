"""The documentation holds together: every citation of a docs/ page names a page and a
section that exist, links between the pages land on real headings, and the README stays a
short front door whose Quick start CI can run (.ci/run takes its second command)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_MAX_LINES = 150

# Where code, tests, benchmarks and notebooks cite the docs.
CITING_DIRS = ("convlab", "tests", "bench", "tutorials", "fuzz", "tools", ".ci/run")
CITING_SUFFIXES = {".py", ".pyx", ".pxd", ".h", ".c", ".md", ".ipynb", ".sh", ".txt"}

# "docs/specification.md §3.4", also lists: "docs/specification.md §2.5, §2.6 and §1.1"
CITATION = re.compile(r"docs/([\w.-]+?\.md)((?:(?:\s*,\s*|\s+and\s+|\s+)§\d+(?:\.\d+)*)*)")
SECTION = re.compile(r"§(\d+(?:\.\d+)*)")
# "docs/selection.md, "Plans"": a section cited by its title
TITLED_CITATION = re.compile(r'docs/([\w.-]+?\.md),\s*"([^"\n]+)"')
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
NUMBERED_HEADING = re.compile(r"^(\d+(?:\.\d+)*)\.?\s")
# [text](target) in Markdown, not images' own syntax or code spans
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def citing_files():
    for name in CITING_DIRS:
        base = ROOT / name
        if base.is_file():
            yield base
            continue
        for path in sorted(base.rglob("*")):
            generated = path.suffix == ".c" and path.with_suffix(".pyx").exists()  # Cython's
            if path.is_file() and path.suffix in CITING_SUFFIXES and not generated \
                    and not {".ipynb_checkpoints", "results"} & set(path.parts):
                yield path
    yield README


def headings(path: Path):
    """The Markdown headings of a page, outside fenced code blocks."""
    found, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            found.append(match.group(2))
    return found


def section_numbers(path: Path) -> set:
    return {m.group(1) for title in headings(path) if (m := NUMBERED_HEADING.match(title))}


def anchors(path: Path) -> set:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, and
    -1, -2 ... on repeats."""
    seen: dict = {}
    result = set()
    for title in headings(path):
        text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", title).strip().lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def test_every_docs_citation_names_a_page_and_section_that_exist():
    problems = []
    cited = 0
    for path in citing_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in CITATION.finditer(text):
            cited += 1
            page = DOCS / match.group(1)
            where = f"{path.relative_to(ROOT)}: docs/{match.group(1)}"
            if not page.is_file():
                problems.append(f"{where}: no such page")
                continue
            numbers = section_numbers(page)
            for section in SECTION.findall(match.group(2)):
                if section not in numbers:
                    problems.append(f"{where} §{section}: no such section "
                                    f"(sections: {sorted(numbers)})")
        for match in TITLED_CITATION.finditer(text):
            page = DOCS / match.group(1)
            if page.is_file() and match.group(2) not in headings(page):
                problems.append(f"{path.relative_to(ROOT)}: docs/{match.group(1)} has no "
                                f"section titled {match.group(2)!r}")
    assert cited >= 50, f"found only {cited} citations of docs/ pages; is the pattern right?"
    assert not problems, "\n".join(problems)


def test_the_specification_is_cited_by_its_public_path_only():
    """The code cites the specification users can read, docs/specification.md, never the
    project's private digest or its bare name."""
    private = re.compile(r"\bSPEC(?:\.md\b|\s*§)")
    this_file = Path(__file__).resolve()
    offenders = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
                 for path in citing_files() if path.resolve() != this_file
                 for number, line in enumerate(
                     path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
                 if private.search(line)]
    assert not offenders, "\n".join(offenders)


def test_section_references_inside_the_specification_resolve():
    page = DOCS / "specification.md"
    numbers = section_numbers(page)
    assert {"1", "1.1", "2.3", "3.4", "5.1", "7.1"} <= numbers
    text = page.read_text(encoding="utf-8")
    missing = sorted({s for s in SECTION.findall(text) if s not in numbers})
    assert not missing, f"specification.md refers to missing sections {missing}"


MARKDOWN_PAGES = sorted(DOCS.glob("*.md")) + [README, ROOT / "tutorials" / "README.md",
                                              ROOT / "bench" / "README.md"]


@pytest.mark.parametrize("page", MARKDOWN_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_land_on_files_and_headings(page):
    problems = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        if not linked.exists():
            problems.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"{target}: no heading with that anchor in {linked.name}")
    assert not problems, "\n".join(problems)


PAGES_WITH_EXAMPLES = [page for page in sorted(DOCS.glob("*.md"))
                       if "```python" in page.read_text(encoding="utf-8")]


@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES, ids=lambda p: p.name)
def test_docs_python_examples_run(page, tmp_path):
    """Each page's ```python blocks, one after another in a fresh interpreter (a block may
    register an algorithm, which must not reach the other tests)."""
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    if any("ml_dtypes" in block for block in blocks):
        pytest.importorskip("ml_dtypes")
    script = "\n".join(f"# block {i}\n{block}" for i, block in enumerate(blocks))
    environment = {**os.environ,
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                               os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=environment,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{page.name} examples failed:\n{result.stderr[-3000:]}"


def quick_start_commands(text: str):
    """The commands of the first fenced block under the Quick start heading, read as
    .ci/run reads them (blank lines and comment lines skipped)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if re.match(r"^#+ .*[Qq]uick ?start", line)), None)
    assert start is not None, "README.md has no Quick start heading"
    commands, inside = [], False
    for line in lines[start + 1:]:
        if line.startswith("```"):
            if inside:
                return commands
            inside = True
            continue
        if inside and line.strip() and not line.startswith("#"):
            commands.append(line)
    raise AssertionError("README.md's Quick start has no closed code block")


def test_readme_is_short():
    count = len(README.read_text(encoding="utf-8").splitlines())
    assert count <= README_MAX_LINES, (f"README.md has {count} lines; at most "
                                       f"{README_MAX_LINES}: move details into docs/")


def test_readme_quick_start_is_two_commands_install_demo_then_test():
    commands = quick_start_commands(README.read_text(encoding="utf-8"))
    assert len(commands) == 2, f"Quick start must be exactly two commands: {commands}"
    assert "python -m convlab demo" in commands[0]
    assert "pytest" in commands[1]  # .ci/run runs this line in a fresh venv


def test_quick_start_reader_finds_a_block_of_three_too_many():
    text = "# x\n\n## Quick start\n\n```bash\na\n# note\nb\nc\n```\n"
    assert quick_start_commands(text) == ["a", "b", "c"]


def test_readme_points_into_the_docs():
    text = README.read_text(encoding="utf-8")
    for page in ("specification.md", "selection.md", "accuracy.md", "benchmarks.md",
                 "tutorials.md"):
        assert f"docs/{page}" in text, f"README.md does not link docs/{page}"
