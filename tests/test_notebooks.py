"""Execute every tutorials/*.ipynb headless, as a reader would, and time it.

Notebooks are stored without outputs; their ``assert`` lines make them fail loudly when
the library changes under them. Each must run in under NOTEBOOK_BUDGET_S seconds on the
project's 2-core machine; run times are printed (``pytest -s`` or the terminal summary).
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

import convlab
from tests.helpers import EXECUTED_NOTEBOOKS
from tools import render_notebooks

nbformat = pytest.importorskip("nbformat", reason="install the test extra: pip install "
                                                  "'.[test]'")
nbclient = pytest.importorskip("nbclient", reason="install the test extra")
pytest.importorskip("ipykernel", reason="install the test extra")

TUTORIALS = Path(__file__).resolve().parents[1] / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))
# The budget per notebook on 2 cores. The cell timeout is looser, so that a slow
# run still finishes and reports its time instead of dying inside a cell.
NOTEBOOK_BUDGET_S = 60.0
CELL_TIMEOUT_S = 120

RUN_TIMES: dict = {}


def test_there_are_notebooks():
    names = [p.name for p in NOTEBOOKS]
    for expected in ("01_convolution_by_hand.ipynb", "02_padding.ipynb",
                     "03_stride_and_dilation.ipynb", "04_channels_groups_depthwise.ipynb",
                     "05_im2col_gemm.ipynb", "06_winograd.ipynb",
                     "07_choosing_an_algorithm.ipynb", "08_transposed_convolution.ipynb",
                     "09_convolution_theorem.ipynb",
                     "10_dask_chunks_and_halos.ipynb"):
        assert expected in names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for number, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name} cell {number} has stored outputs"
            assert cell.execution_count is None, f"{path.name} cell {number} was executed"


@pytest.fixture(scope="module")
def kernel_name():
    """A kernelspec for this very interpreter, seeing the same convlab as the tests."""
    with render_notebooks.kernel_of_this_python(Path(convlab.__file__).resolve().parents[1]) \
            as name:
        yield name


@pytest.fixture(scope="module", autouse=True)
def report_run_times(request):
    yield
    if not RUN_TIMES:
        return
    lines = [f"notebook {name}: {seconds:.1f} s (budget {NOTEBOOK_BUDGET_S:.0f} s)"
             for name, seconds in RUN_TIMES.items()]
    # the run times belong in the test log even without -s
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if capture is not None and reporter is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            for line in lines:
                reporter.write_line(line)
    else:
        print("\n".join(lines))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_headless(path, kernel_name, request):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name=kernel_name,
                                     resources={"metadata": {"path": str(TUTORIALS)}})
    start = time.perf_counter()
    client.execute()   # raises CellExecutionError with the failing cell and traceback
    seconds = time.perf_counter() - start
    RUN_TIMES[path.name] = seconds
    EXECUTED_NOTEBOOKS[path.name] = nb      # test_render_notebooks renders these
    request.node.user_properties.append(("seconds", round(seconds, 2)))
    executed = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in executed)
    errors = [o for c in executed for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert seconds < NOTEBOOK_BUDGET_S, (f"{path.name} took {seconds:.1f} s; the budget is "
                                         f"{NOTEBOOK_BUDGET_S:.0f} s on 2 cores")
