"""Hypothesis profiles of the fuzz tests (tests/test_fuzz_entry_points.py).

The environment variable ``HYPOTHESIS_PROFILE`` picks one (default "ci"):

* ``ci``: ``CI_EXAMPLES`` examples per test, derandomized (every run draws the same
  examples, so a CI failure reproduces with the same command) and without an example
  database; the whole file runs in a few minutes on 2 cores;
* ``long``: ``LONG_EXAMPLES`` examples per test (above 20,000 over the file's tests),
  randomized, failures saved in the local example database; the sanitizer build
  (tools/sanitize.sh) runs it.

Only the tests that apply :func:`fuzz_settings` use these profiles; the rest of the suite
keeps Hypothesis' own defaults.
"""
from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE_VARIABLE = "HYPOTHESIS_PROFILE"
DEFAULT_PROFILE = "ci"
CI_EXAMPLES = 200
LONG_EXAMPLES = 2000

_COMMON = dict(
    # a sanitizer build runs far slower than a release one; the per-example watchdog of
    # the fuzz tests catches a hang instead
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.data_too_large],
)

settings.register_profile("ci", max_examples=CI_EXAMPLES, derandomize=True, database=None,
                          print_blob=True, **_COMMON)
settings.register_profile("long", max_examples=LONG_EXAMPLES, print_blob=True, **_COMMON)


def active_profile() -> str:
    return os.environ.get(PROFILE_VARIABLE, DEFAULT_PROFILE) or DEFAULT_PROFILE


def fuzz_settings() -> settings:
    """The settings of the profile ``HYPOTHESIS_PROFILE`` names, as a test decorator."""
    return settings(settings.get_profile(active_profile()))
