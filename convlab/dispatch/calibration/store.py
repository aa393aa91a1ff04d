"""Where cost constants are stored, and the checks a stored set passes before selection uses it.

Two kinds of sets, both shaped like ``{"source": {...}, "constants": {algorithm:
{threads: {term: seconds per unit}}}, "selection_margins": {algorithm: fraction}}``:

* *shipped* sets, one per instruction-set level, in
  ``convlab/dispatch/cost_constants/<level>.json``, each naming the CPU, level, date
  and command of the run that fitted it;
* *calibrated* sets, written by :func:`convlab.calibrate` to the user's cache directory
  (``platformdirs.user_cache_dir("convlab")``, or ``$CONVLAB_CACHE_DIR``), one file per
  *key*: CPU model, effective ISA level, thread count, what chooses im2col's GEMM kernels
  (:func:`convlab.runtime.blas.kernel_source`) and convlab version. The file holds that key
  and the provenance of the run besides the set.

:func:`load_calibration` reads a calibrated file and accepts it only when its key is the
expected one and every constant is a finite, non-negative number for exactly the terms the
cost hooks count; anything else raises :class:`InvalidCalibration` saying why, whatever
the bytes in the file.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import pathlib
import re
import tempfile
from collections.abc import Iterable, Mapping
from importlib import resources

from convlab.runtime.cpu import ISA_LEVELS

# Bumped when the layout of a calibration file changes; files of another format are stale.
# Format 2 added the GEMM kernels' source to the key.
FORMAT = 2
CACHE_DIR_ENV = "CONVLAB_CACHE_DIR"
SHIPPED_DIR = "cost_constants"
KEY_FIELDS = ("cpu_model", "isa", "threads", "gemm", "convlab_version")
# A calibration file is a few kilobytes; anything much larger is not one, and is not read
# into memory whole.
MAX_FILE_BYTES = 1 << 20
# No unit of work of a convolution takes a second: a larger constant is not a timing.
MAX_SECONDS_PER_UNIT = 1.0


class InvalidCalibration(ValueError):
    """A stored constant set that selection must not use; the message says why."""


# --------------------------------------------------------------------------- keys, paths

def current_key(threads: int) -> dict[str, object]:
    """The key a calibration for ``threads`` threads on this machine is stored under."""
    from convlab._version import VERSION
    from convlab.runtime import blas, cpu

    return {"cpu_model": cpu.cpu_model(), "isa": cpu.effective_isa(), "threads": int(threads),
            "gemm": blas.kernel_source(), "convlab_version": VERSION}


def cache_dir() -> pathlib.Path:
    """``$CONVLAB_CACHE_DIR`` when set (and not empty), else the platform's user cache
    directory for convlab."""
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return pathlib.Path(override).expanduser()
    import platformdirs

    return pathlib.Path(platformdirs.user_cache_dir("convlab"))


def _slot(key: Mapping[str, object]) -> str:
    """The file name without the version: one CPU model, GEMM kernels' source, level and
    thread count."""
    model = str(key["cpu_model"])
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")[:48].strip("-") or "cpu"
    # the slug drops characters and length, and leaves the GEMM kernels' source out; the
    # digest keeps two models, or two sources on one model, apart anyway
    identity = f"{model}\n{key['gemm']}"
    digest = hashlib.sha256(identity.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    isa = re.sub(r"[^a-z0-9]+", "-", str(key["isa"]).lower())
    return f"{slug}-{digest}-{isa}-{int(key['threads'])}t"


def file_name(key: Mapping[str, object]) -> str:
    """``<cpu model>-<digest>-<isa>-<threads>t-v<version>.json``: one file per key (the
    digest is of the CPU model and the GEMM kernels' source)."""
    version = re.sub(r"[^A-Za-z0-9.+-]+", "_", str(key["convlab_version"]))
    return f"{_slot(key)}-v{version}.json"


def calibration_path(key: Mapping[str, object]) -> pathlib.Path:
    return cache_dir() / file_name(key)


def other_versions(key: Mapping[str, object]) -> list[pathlib.Path]:
    """Calibrations of the same CPU model, level and thread count by other convlab
    versions (stale once convlab changes: the cost hooks may count differently)."""
    own = file_name(key)
    try:
        found = sorted(cache_dir().glob(f"{_slot(key)}-v*.json"))
    except OSError:
        return []
    return [path for path in found if path.name != own]


# --------------------------------------------------------------------------- shipped sets

def shipped_levels() -> list[str]:
    """The ISA levels with a shipped set, narrowest first."""
    folder = resources.files("convlab.dispatch").joinpath(SHIPPED_DIR)
    names = {entry.name for entry in folder.iterdir()}
    return [level for level in ISA_LEVELS if f"{level}.json" in names]


def shipped_level_for(isa: str) -> str:
    """The shipped set to use at ``isa``: its own, else the widest narrower one, else the
    narrowest wider one."""
    available = shipped_levels()
    if not available:
        raise FileNotFoundError(f"no shipped cost constants in convlab/{SHIPPED_DIR}/")
    if isa in available:
        return isa
    rank = ISA_LEVELS.index(isa) if isa in ISA_LEVELS else len(ISA_LEVELS)
    narrower = [level for level in available if ISA_LEVELS.index(level) < rank]
    return narrower[-1] if narrower else available[0]


@functools.cache
def _shipped_text(level: str) -> str:
    return resources.files("convlab.dispatch").joinpath(SHIPPED_DIR, f"{level}.json").read_text(
        encoding="utf-8")


def shipped(level: str) -> dict:
    """The shipped set of ``level`` (a fresh copy: callers may change it)."""
    return json.loads(_shipped_text(level))


def constants_at(by_threads: Mapping[str, Mapping[str, float]], threads: int):
    """The constants fitted at the largest thread count not above ``threads`` (else the
    smallest fitted): parallel efficiency differs between algorithms, so each thread count
    a fit saw has its own set, and the per-thread terms carry it to larger counts."""
    if not by_threads:
        return {}
    counts = sorted(int(t) for t in by_threads)
    return by_threads[str(max((t for t in counts if t <= threads), default=counts[0]))]


def expected_terms(constant_set: Mapping) -> dict[str, set[str]]:
    """The term names of each algorithm in a set (that of its first thread count)."""
    return {name: set(next(iter(by_threads.values())))
            for name, by_threads in constant_set["constants"].items()}


# --------------------------------------------------------------------------- reading

def load_calibration(path, expected_key: Mapping[str, object],
                     terms: Mapping[str, Iterable[str]] | None = None) -> dict:
    """The calibrated set stored at ``path``, checked: raises :class:`InvalidCalibration`
    (and nothing else) when it cannot be read, is not a calibration file, was made for
    another key (CPU model, ISA level, thread count, GEMM kernels: foreign; convlab version
    or file format: stale) or holds constants selection cannot use (missing or extra terms or
    algorithms, values that are not finite non-negative numbers, margins outside [0, 1)).

    ``terms``: the term names each algorithm must have (default: those of the shipped set
    for the key's level)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise InvalidCalibration(f"cannot be read ({exc.strerror or exc})") from None
    return parse_calibration(data, expected_key, terms)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a number")


def parse_calibration(data: bytes, expected_key: Mapping[str, object],
                      terms: Mapping[str, Iterable[str]] | None = None) -> dict:
    """:func:`load_calibration` on the bytes of a file."""
    if len(data) > MAX_FILE_BYTES:
        raise InvalidCalibration(f"is larger than {MAX_FILE_BYTES} bytes: not a calibration")
    try:
        text = bytes(data).decode("utf-8")
        stored = json.loads(text, parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise InvalidCalibration("is not UTF-8 text") from None
    except (ValueError, RecursionError) as exc:
        raise InvalidCalibration(f"is not valid JSON ({_first_line(exc)})") from None
    if not isinstance(stored, dict):
        raise InvalidCalibration(f"holds a JSON {type(stored).__name__}, expected an object")
    if type(stored.get("format")) is not int or stored["format"] != FORMAT:
        raise InvalidCalibration(f"is stale: file format {_shown(stored.get('format'))}, "
                                 f"this convlab reads format {FORMAT}")
    _check_key(stored.get("key"), expected_key)
    if terms is None:
        terms = expected_terms(shipped(shipped_level_for(str(expected_key["isa"]))))
    _check_constants(stored.get("constants"), terms, str(int(expected_key["threads"])))
    _check_margins(stored.get("selection_margins"), terms)
    measure_margin = stored.get("measure_margin")  # absent: the level's shipped margin
    if measure_margin is not None and (not _is_number(measure_margin)
                                       or not 0 <= measure_margin <= MAX_MEASURE_MARGIN):
        raise InvalidCalibration(f"has an unusable measure margin {_shown(measure_margin)} "
                                 f"(expected a fraction in [0, {MAX_MEASURE_MARGIN}])")
    for section in ("source", "provenance"):
        if not isinstance(stored.get(section), dict):
            raise InvalidCalibration(f"has no {section!r} object")
    return stored


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_key(key, expected: Mapping[str, object]) -> None:
    if not isinstance(key, dict):
        raise InvalidCalibration("has no 'key' object")
    for field in KEY_FIELDS:
        theirs, ours = key.get(field), expected[field]
        if field == "threads":
            same = (isinstance(theirs, int) and not isinstance(theirs, bool)
                    and theirs == int(ours))
        else:
            same = isinstance(theirs, str) and theirs == str(ours)
        if not same:
            kind = "stale" if field == "convlab_version" else "foreign"
            raise InvalidCalibration(f"is {kind}: calibrated for {field} {_shown(theirs)}, "
                                     f"this is {_shown(ours)}")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_constants(constants, terms: Mapping[str, Iterable[str]], threads: str) -> None:
    if not isinstance(constants, dict):
        raise InvalidCalibration("has no 'constants' object")
    unknown = sorted(set(map(str, constants)) - set(terms))
    if unknown:
        raise InvalidCalibration(f"is stale: constants for algorithms this convlab does not "
                                 f"price: {_shown(unknown)}")
    for name, wanted in terms.items():
        wanted = set(wanted)
        by_threads = constants.get(name)
        if not isinstance(by_threads, dict) or not isinstance(by_threads.get(threads), dict):
            raise InvalidCalibration(f"has no {threads}-thread constants for {name!r}")
        values = by_threads[threads]
        if set(values) != wanted:
            missing, extra = sorted(wanted - set(values)), sorted(set(values) - wanted)
            raise InvalidCalibration(
                f"is stale: {name!r} terms differ from this convlab's cost model (missing "
                f"{_shown(missing)}, unknown {_shown(extra)})")
        for term, value in values.items():
            if not _is_number(value) or not 0 <= value <= MAX_SECONDS_PER_UNIT \
                    or not math.isfinite(value):
                raise InvalidCalibration(
                    f"has an unusable constant {name}.{term} = {_shown(value)} (expected "
                    f"seconds per unit, finite, 0 to {MAX_SECONDS_PER_UNIT})")
        if not any(value > 0 for value in values.values()):
            raise InvalidCalibration(f"prices every term of {name!r} at zero")


# The widest measure margin a calibration may set: plans then time contenders estimated
# up to 5x the lowest (still at most measure.MAX_CONTENDERS of them).
MAX_MEASURE_MARGIN = 4.0


def _check_margins(margins, terms: Mapping[str, Iterable[str]]) -> None:
    if not isinstance(margins, dict):
        raise InvalidCalibration("has no 'selection_margins' object")
    for name, margin in margins.items():
        if name not in terms:
            raise InvalidCalibration(f"has a selection margin for unknown algorithm "
                                     f"{_shown(name)}")
        if not _is_number(margin) or not 0 <= margin < 1:
            raise InvalidCalibration(f"has an unusable selection margin {name} = "
                                     f"{_shown(margin)} (expected a fraction in [0, 1))")


# --------------------------------------------------------------------------- writing

def write_calibration(stored: Mapping, key: Mapping[str, object]) -> pathlib.Path:
    """Write a calibrated set under ``key`` (atomically: readers see the old file or the
    new one, never half of one); returns its path."""
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / file_name(key)
    # closed by the ``with`` below; its name outlives it, for the rename or the clean-up
    handle = tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=directory,  # noqa: SIM115
                                         prefix=".calibration-", suffix=".tmp", delete=False)
    try:
        with handle:
            json.dump(stored, handle, indent=1, allow_nan=False)
            handle.write("\n")
        os.replace(handle.name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(handle.name)
        raise
    return path
