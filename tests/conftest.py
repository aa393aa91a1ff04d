"""The fixtures of the convlab test suite; the shared helpers are in ``tests/helpers.py``."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import convlab
from tests.helpers import TEST_ISA_LEVELS

# --------------------------------------------------------------------------- ISA levels

@pytest.fixture(params=TEST_ISA_LEVELS)
def isa_level(request):
    """The test runs once per level of TEST_ISA_LEVELS, with every kernel capped at it."""
    with convlab.runtime.cpu.max_isa(request.param) as level:
        assert level == request.param
        yield level


# --------------------------------------------------------------------------- data

@pytest.fixture
def rng(request):
    """A generator seeded from the test id, so every test's data is reproducible."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


# --------------------------------------------------------------------------- cost constants

@pytest.fixture(autouse=True, scope="session")
def _empty_calibration_cache(tmp_path_factory):
    """Selection in the tests uses the shipped cost constants, never a calibration that
    happens to sit in the user's cache directory (subprocesses inherit the setting)."""
    from convlab.dispatch import cost_model

    patch = pytest.MonkeyPatch()
    patch.setenv("CONVLAB_CACHE_DIR", str(tmp_path_factory.mktemp("convlab-cache")))
    cost_model.reload()
    yield
    patch.undo()
    cost_model.reload()
