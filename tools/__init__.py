"""Developer tools run from the checkout (not installed): ``tools/render_notebooks.py``
renders the tutorials in headless Chromium; ``tools/sanitize.sh`` runs the tests on a
sanitizer build. A regular package, so that ``from tools import ...`` in the tests finds
this directory before any other ``tools`` on ``sys.path``."""
