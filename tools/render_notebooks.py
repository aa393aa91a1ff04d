"""Render the executed tutorials as a reader sees them, in headless Chromium.

Each notebook is executed (nbclient, with a kernel of this very interpreter that sees this
checkout's convlab), exported to HTML (nbconvert), opened in headless Chromium through
Selenium and chromedriver, and screenshotted to a PNG. A page fails if the browser logs
a JavaScript error (an uncaught exception or ``console.error``), if it shows fewer cells
than the notebook has, or if its screenshot is blank.

The browser resolves no host names, so the check is the same with or without a network:
the pages' CDN scripts and styles (MathJax, require.js, fonts) never load, their load
failures are listed as network failures, and only the pages' own scripts are checked.

Usage: ``python tools/render_notebooks.py [NOTEBOOK ...] [--out DIR]``, from the checkout
root (default: every tutorials/*.ipynb; PNGs and HTML go to a temporary directory, which
is printed). Needs the test extra (nbconvert, selenium) and Debian's ``chromium`` and
``chromium-driver`` packages. Exit status 1 if any page fails.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "tutorials"
CELL_TIMEOUT_S = 120
# Page width, and the tallest screenshot taken (longer pages are cut there: the top of a
# page is enough to see that it rendered).
PAGE_WIDTH = 1280
MAX_SCREENSHOT_HEIGHT = 8000
# A screenshot is blank when fewer than this fraction of its pixels differ from the
# background colour (a rendered notebook has text, code and figures on most of its rows).
MIN_INKED_FRACTION = 0.005
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome")
DRIVER_NAMES = ("chromedriver", "chromium-driver")


def browser_paths() -> tuple[str, str] | None:
    """(browser, chromedriver) found on PATH (or /usr/lib/chromium), or None."""
    browser = next((p for p in map(shutil.which, BROWSER_NAMES) if p), None)
    driver = next((p for p in map(shutil.which, DRIVER_NAMES) if p), None)
    if driver is None and Path("/usr/lib/chromium/chromedriver").exists():
        driver = "/usr/lib/chromium/chromedriver"
    return (browser, driver) if browser and driver else None


@contextlib.contextmanager
def kernel_of_this_python(package_parent: Path = ROOT) -> Iterator[str]:
    """A kernelspec for this interpreter, seeing ``package_parent``'s convlab; its name.

    The default "python3" spec could start another Python (the first on PATH), and a
    notebook run from tutorials/ would not find a source checkout's convlab.
    """
    with tempfile.TemporaryDirectory(prefix="convlab-jupyter-") as root:
        spec_dir = Path(root) / "kernels" / "convlab-tests"
        spec_dir.mkdir(parents=True)
        python_path = os.pathsep.join(p for p in (str(package_parent),
                                                  os.environ.get("PYTHONPATH")) if p)
        spec = {
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "convlab tests",
            "language": "python",
            "env": {"PYTHONPATH": python_path,
                    "MPLBACKEND": "module://matplotlib_inline.backend_inline"},
        }
        (spec_dir / "kernel.json").write_text(json.dumps(spec))
        old = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (root, old) if p)
        try:
            yield "convlab-tests"
        finally:
            if old is None:
                del os.environ["JUPYTER_PATH"]
            else:
                os.environ["JUPYTER_PATH"] = old


def execute(path: Path, kernel_name: str):
    """The notebook at ``path``, executed from its own directory (raises on a failing
    cell, with its traceback)."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name=kernel_name,
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    return nb


def to_html(nb) -> str:
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nb)
    return body


@dataclass
class PageReport:
    name: str
    png: Path
    cells_expected: int
    cells_shown: int = 0
    inked_fraction: float = 0.0
    javascript_errors: list[str] = field(default_factory=list)
    network_failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def problems(self) -> list[str]:
        found = [f"JavaScript error: {message}" for message in self.javascript_errors]
        if self.cells_shown < self.cells_expected:
            found.append(f"the page shows {self.cells_shown} cells of "
                         f"{self.cells_expected}")
        if self.inked_fraction < MIN_INKED_FRACTION:
            found.append(f"the screenshot is blank ({self.inked_fraction:.2%} of its pixels "
                         f"differ from the background)")
        return found


def inked_fraction(png: Path) -> float:
    """The fraction of pixels that differ from the most common colour (the background)."""
    import numpy as np
    from PIL import Image

    with Image.open(png) as image:
        # every 4th pixel of every 4th row: text and figures still cover it, 16x faster
        pixels = np.asarray(image.convert("RGB"))[::4, ::4].reshape(-1, 3).astype(np.int32)
    if pixels.size == 0:
        return 0.0
    packed = pixels[:, 0] << 16 | pixels[:, 1] << 8 | pixels[:, 2]
    value = int(np.argmax(np.bincount(packed)))
    background = np.array([value >> 16, (value >> 8) & 255, value & 255])
    return float(np.any(np.abs(pixels - background) > 8, axis=1).mean())


class Browser:
    """One headless Chromium, driven by chromedriver, reused for every page."""

    def __init__(self, browser: str, driver: str):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = browser
        for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", f"--window-size={PAGE_WIDTH},1000",
                         # no network: the same result online and offline (module docstring)
                         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost"):
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(options=options, service=Service(driver))

    def close(self) -> None:
        self.driver.quit()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def render(self, html: Path, png: Path, cells_expected: int) -> PageReport:
        """Open ``html``, screenshot it to ``png``, and report what went wrong."""
        start = time.perf_counter()
        report = PageReport(html.stem, png, cells_expected)
        driver = self.driver
        driver.get_log("browser")                      # drop the previous page's entries
        driver.get(html.resolve().as_uri())
        driver.execute_script("return document.readyState")
        height = int(driver.execute_script(
            "return Math.max(document.body.scrollHeight, 1)"))
        driver.set_window_size(PAGE_WIDTH, min(height, MAX_SCREENSHOT_HEIGHT))
        report.cells_shown = int(driver.execute_script(
            "return document.querySelectorAll('.jp-Cell, div.cell').length"))
        driver.save_screenshot(str(png))
        for entry in driver.get_log("browser"):
            if entry.get("level") != "SEVERE":
                continue
            if entry.get("source") == "network":
                report.network_failures.append(entry["message"])
            else:
                report.javascript_errors.append(entry["message"])
        report.inked_fraction = inked_fraction(png)
        report.seconds = time.perf_counter() - start
        return report


def render_pages(pages: dict[str, tuple[str, int]], out: Path,
                 paths: tuple[str, str] | None = None) -> list[PageReport]:
    """Write each ``{name: (html, cell count)}`` page to ``out`` and render it."""
    paths = paths or browser_paths()
    if paths is None:
        raise RuntimeError("no chromium and chromedriver on PATH: apt-get install chromium "
                           "chromium-driver")
    out.mkdir(parents=True, exist_ok=True)
    reports = []
    with Browser(*paths) as browser:
        for name, (html, cells) in pages.items():
            html_path = out / f"{name}.html"
            html_path.write_text(html, encoding="utf-8")
            reports.append(browser.render(html_path, out / f"{name}.png", cells))
    return reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to render (default: tutorials/*.ipynb)")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for the HTML pages and PNG screenshots "
                             "(default: a new temporary directory)")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sorted(TUTORIALS.glob("*.ipynb"))
    out = args.out or Path(tempfile.mkdtemp(prefix="convlab-render-"))
    start = time.perf_counter()
    pages = {}
    with kernel_of_this_python() as kernel_name:
        for path in notebooks:
            nb = execute(path, kernel_name)
            pages[path.stem] = (to_html(nb), len(nb.cells))
    executed = time.perf_counter() - start
    reports = render_pages(pages, out)
    failed = 0
    for report in reports:
        status = "FAIL" if report.problems else "ok"
        failed += bool(report.problems)
        print(f"{status:4} {report.name}: {report.cells_shown} cells, "
              f"{report.inked_fraction:.0%} inked, {len(report.network_failures)} network "
              f"loads blocked, {report.seconds:.1f} s -> {report.png}")
        for problem in report.problems:
            print(f"     {problem}")
    print(f"executed and exported in {executed:.0f} s, rendered in "
          f"{sum(r.seconds for r in reports):.0f} s; pages in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
