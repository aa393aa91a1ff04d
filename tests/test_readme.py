"""The README's Python examples run as written, one after another, as a reader would
paste them (each block may use names from the blocks before it)."""
from __future__ import annotations

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 5, "README lost its examples"
    if any("ml_dtypes" in block for block in blocks):
        pytest.importorskip("ml_dtypes")
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    namespace: dict = {}
    for index, block in enumerate(blocks):
        try:
            exec(compile(block, f"README.md python block {index}", "exec"), namespace)
        except Exception as exc:  # name the block, not just the line
            raise AssertionError(f"README python block {index} failed:\n{block}") from exc
