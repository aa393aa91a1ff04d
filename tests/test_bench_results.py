"""bench/results keeps only the files that the code, the docs or the shipped cost constants
cite, and every path into bench/results that they cite names a file that is there.

The citing text is README.md, docs/, convlab/ (with the cost constants' JSON files), tests/,
tutorials/, tools/, fuzz/, bench/README.md and the scripts in bench/. A result file is
cited

- by its path: ``bench/results/`` and the file's name, or a glob (``*``, ``{a,b}``) that
  matches it, or a folder in bench/results that holds it (a folder cited as a whole, as a
  calibration folder with its README.txt is);
- by its bare file name, where no other file in the repository has that name.

A path with a ``<placeholder>`` is a template, and a path after ``--csv`` or ``--out`` is
where a script writes: neither cites a file nor has to exist. Files are the ones git tracks
(all files on disk outside a git checkout), so a bench run's fresh output fails here only
once it is committed without a citation.
"""
from __future__ import annotations

import fnmatch
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = "bench/results/"
TEXT_SUFFIXES = {".py", ".pyx", ".pxd", ".h", ".json", ".md", ".txt", ".sh", ".ipynb"}
CITING_TREES = ("README.md", "docs/", "convlab/", "tests/", "tutorials/", "tools/", "fuzz/")
THIS_FILE = Path(__file__).resolve().relative_to(ROOT).as_posix()

# bench/results/ and what follows it: names, globs, {a,b} alternatives, <placeholders>.
PATH_REFERENCE = re.compile(r"bench/results/((?:[\w.*/-]|\{[\w.,-]*\}|<[^<>\s]*>)*)")
OUTPUT_OPTION = re.compile(r"(?:^|\s)--(?:csv|out)(?:=|\s+)$")
# A file name standing alone (not the tail of a path, a glob or a template).
BARE_NAME = re.compile(r"(?<![\w./*<>{}$-])([\w-][\w.-]*\.(?:txt|csv|json|png))(?![\w*{}<>/-])")
GLOB_CHARS = set("*?[")


def repository_files(root: Path = ROOT) -> list:
    """Repository-relative posix paths of the files git tracks (every file on disk when
    the tree is not a git checkout)."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"],
                                capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                      if p.is_file() and ".git" not in p.relative_to(root).parts)
    return sorted(name for name in listed.decode().split("\0") if name)


def is_citing_file(path: str) -> bool:
    if path == THIS_FILE or path.startswith("tests/data/"):
        return False
    if path.startswith("bench/") and "/" not in path[len("bench/"):]:
        return path == "bench/README.md" or Path(path).suffix in {".py", ".sh"}
    return (path.startswith(CITING_TREES) and Path(path).suffix in TEXT_SUFFIXES
            and not path.startswith(RESULTS))


def alternatives(pattern: str) -> list:
    """``a{1,2}b`` -> [``a1b``, ``a2b``] (nested or repeated braces too)."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    return [expanded for choice in match.group(1).split(",")
            for expanded in alternatives(pattern[:match.start()] + choice
                                         + pattern[match.end():])]


def path_references(text: str):
    """(line number, the reference after bench/results/) of every path into bench/results
    that cites: not a template, not a script's output, not the folder itself."""
    for match in PATH_REFERENCE.finditer(text):
        reference = match.group(1).rstrip(".")
        preceding = text[max(0, match.start() - 40):match.start()]
        if not reference or "<" in reference or OUTPUT_OPTION.search(preceding):
            continue
        yield text.count("\n", 0, match.start()) + 1, reference


def resolve(reference: str, results: list) -> list:
    """The result files (relative to bench/results) that a path reference cites."""
    cited = []
    for pattern in alternatives(reference):
        if GLOB_CHARS & set(pattern):
            cited += [name for name in results if fnmatch.fnmatchcase(name, pattern)]
        else:
            folder = pattern.rstrip("/") + "/"
            cited += [name for name in results if name == pattern or name.startswith(folder)]
    return cited


def bare_names(text: str):
    for match in BARE_NAME.finditer(text):
        yield match.group(1)


def citations(files: list):
    """(cited result files, [(citing file, line, reference) that names no result file])."""
    results = [name[len(RESULTS):] for name in files if name.startswith(RESULTS)]
    owners: dict = {}
    for name in files:
        owners.setdefault(name.rsplit("/", 1)[-1], []).append(name)
    cited, missing = set(), []
    for path in filter(is_citing_file, files):
        try:
            text = (ROOT / path).read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:  # deleted but not yet staged
            continue
        for line, reference in path_references(text):
            found = resolve(reference, results)
            cited.update(found)
            if not found:
                missing.append((path, line, RESULTS + reference))
        for name in bare_names(text):
            holders = owners.get(name, [])
            if len(holders) == 1 and holders[0].startswith(RESULTS):
                cited.add(holders[0][len(RESULTS):])
    return cited, missing


@pytest.fixture(scope="module")
def repository():
    files = repository_files()
    if not any(name.startswith(RESULTS) for name in files):
        pytest.skip("no bench/results in this tree (an installed package)")
    return files


def test_every_result_file_is_cited(repository):
    results = [name[len(RESULTS):] for name in repository if name.startswith(RESULTS)]
    cited, _ = citations(repository)
    uncited = sorted(set(results) - cited)
    assert not uncited, (
        f"{len(uncited)} of {len(results)} files in bench/results are cited by no code, doc "
        f"or cost constants (cite them by path, or git rm them): {uncited}")


def test_every_cited_result_path_exists(repository):
    _, missing = citations(repository)
    assert not missing, "paths into bench/results that name no file there: " + "; ".join(
        f"{path}:{line}: {reference}" for path, line, reference in missing)


RESULTS_FIXTURE = ["a_2026-01-01_epyc_run1.csv", "a_2026-01-01_epyc_run2.csv",
                   "fit.txt", "cal/README.txt", "cal/run.txt"]


@pytest.mark.parametrize("text, cited", [
    ("see bench/results/fit.txt.", ["fit.txt"]),
    ("(bench/results/a_2026-01-01_epyc_run*.csv)", RESULTS_FIXTURE[:2]),
    ("bench/results/a_2026-01-01_epyc_run{2,3}.csv", RESULTS_FIXTURE[1:2]),
    ("bench/results/cal/ and its README.txt", ["cal/README.txt", "cal/run.txt"]),
    ("bench/results/cal", ["cal/README.txt", "cal/run.txt"]),
    ("writes bench/results/<name>.txt", []),
    ("fit.py --csv bench/results/fit.txt --write", []),
    ("fit.py --out=bench/results/fit.txt", []),
    ("fit.py --from-csv bench/results/fit.txt", ["fit.txt"]),
    ("out=bench/results", []),
])
def test_path_references_resolve_as_documented(text, cited):
    found = [name for _, reference in path_references(text)
             for name in resolve(reference, RESULTS_FIXTURE)]
    assert sorted(found) == sorted(cited)


def test_a_path_to_no_file_resolves_to_nothing():
    (line, reference), = path_references("one\nbench/results/gone_run*.csv")
    assert line == 2 and resolve(reference, RESULTS_FIXTURE) == []


@pytest.mark.parametrize("text, names", [
    ("fused_weights.txt, and fit.csv.", ["fused_weights.txt", "fit.csv"]),
    ("$out/overhead.txt bench/results/x.txt", []),
    ("shapes_*.txt and run{1,2}.csv and <name>.txt", []),
])
def test_bare_names_are_whole_literal_file_names(text, names):
    assert list(bare_names(text)) == names
