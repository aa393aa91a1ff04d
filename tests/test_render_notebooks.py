"""The executed tutorials render in headless Chromium with no JavaScript error and no
blank page (tools/render_notebooks.py).

The notebooks test_notebooks.py executed earlier in the same run are rendered as they are
(tests.helpers.EXECUTED_NOTEBOOKS); a notebook it did not run (this file run alone) is
executed here. Skipped, saying why, without Chromium and chromedriver (Debian:
``apt-get install chromium chromium-driver``; ``.ci/run`` installs them).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import EXECUTED_NOTEBOOKS
from tools import render_notebooks

pytest.importorskip("nbformat", reason="install the test extra: pip install '.[test]'")
pytest.importorskip("nbconvert", reason="install the test extra: pip install '.[test]'")
pytest.importorskip("selenium", reason="install the test extra: pip install '.[test]'")
pytest.importorskip("PIL", reason="install the test extra: pip install '.[test]'")

PATHS = render_notebooks.browser_paths()
pytestmark = pytest.mark.skipif(PATHS is None, reason="no chromium and chromedriver on PATH "
                                                      "(apt-get install chromium "
                                                      "chromium-driver)")
NOTEBOOKS = sorted(render_notebooks.TUTORIALS.glob("*.ipynb"))


@pytest.fixture(scope="module")
def browser():
    assert PATHS is not None
    with render_notebooks.Browser(*PATHS) as opened:
        yield opened


@pytest.fixture(scope="module")
def kernel_name():
    with render_notebooks.kernel_of_this_python() as name:
        yield name


def render_html(browser, directory: Path, name: str, html: str, cells: int):
    path = directory / f"{name}.html"
    path.write_text(html, encoding="utf-8")
    return browser.render(path, directory / f"{name}.png", cells)


PAGE = ("<html><body><div class='cell'><h1>A page</h1><p>{text}</p></div>{script}"
        "</body></html>")


def test_the_check_sees_javascript_errors_and_blank_pages(browser, tmp_path):
    text = "Some text on the page, long enough to ink it. " * 200
    fine = render_html(browser, tmp_path, "fine", PAGE.format(text=text, script=""), 1)
    assert fine.problems == []

    thrown = render_html(browser, tmp_path, "thrown", PAGE.format(
        text=text, script="<script>throw new Error('boom from the page')</script>"), 1)
    assert any("boom from the page" in p for p in thrown.problems), thrown.problems

    logged = render_html(browser, tmp_path, "logged", PAGE.format(
        text=text, script="<script>console.error('logged by the page')</script>"), 1)
    assert any("logged by the page" in p for p in logged.problems), logged.problems

    blank = render_html(browser, tmp_path, "blank", "<html><body></body></html>", 0)
    assert any("blank" in p for p in blank.problems), blank.problems

    missing = render_html(browser, tmp_path, "missing", PAGE.format(text=text, script=""), 3)
    assert any("shows 1 cells of 3" in p for p in missing.problems), missing.problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_renders_without_errors(path, browser, kernel_name, tmp_path):
    nb = EXECUTED_NOTEBOOKS.get(path.name)
    if nb is None:
        nb = render_notebooks.execute(path, kernel_name)
    report = render_html(browser, tmp_path, path.stem, render_notebooks.to_html(nb),
                         len(nb.cells))
    assert report.problems == [], f"{path.name} ({report.png}): {report.problems}"
