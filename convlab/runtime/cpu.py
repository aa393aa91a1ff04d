"""Facts about the CPU the kernels run on: its model, cache sizes and instruction-set levels,
and the cap on those levels.

Selection, calibration, ``explain`` and the bench all read the machine through this module,
so that nothing assumes the CPU the cost constants were first fitted on.

The kernels run the widest instruction-set level the CPU supports, at most a cap, as
oneDNN's ``ONEDNN_MAX_CPU_ISA``: the environment variable ``CONVLAB_MAX_CPU_ISA``
(``baseline``, ``avx2`` or ``avx512``, any case), read once when convlab is imported, or
:func:`set_max_isa` / :func:`max_isa` at run time. Every compiled kernel module keeps its
own copy of the level in effect (its C statics); each registers here as it is imported
(:func:`follow_cap`) and every change of the cap reaches all of them.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import os
import platform
import re
import threading
import warnings
from collections.abc import Iterator
from typing import Any, Callable

# Instruction-set levels, narrowest first. "baseline" is what the build targets everywhere
# (SSE2 on x86-64, plain C elsewhere); the wider ones are chosen at run time: "avx2" is
# x86-64-v3 (AVX2, FMA, BMI2, ...), "avx512" x86-64-v4 (AVX-512 F, BW, CD, DQ, VL).
ISA_LEVELS = ("baseline", "avx2", "avx512")

# The environment variable of the cap, read once by ``import convlab``.
ENVIRONMENT = "CONVLAB_MAX_CPU_ISA"


def _cpuinfo_fields() -> dict[str, str]:
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor is enough
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def os_flags() -> frozenset[str]:
    """The feature flags the OS lists for the first processor (/proc/cpuinfo's "flags";
    empty where there is none). They say what the CPU has, whatever CPUID shows this
    process (bench/as_avx2_cpu.sh hides AVX-512 from it)."""
    return frozenset(_cpuinfo_fields().get("flags", "").split())


# The /proc/cpuinfo fields that tell one CPU design from another beside its name: x86's
# family, model and stepping, and Arm's implementer, part, variant and revision (Linux on
# AArch64 lists no name at all, so these are what sets two Arm CPUs' calibrations apart).
_CPU_ID_FIELDS = ("cpu family", "model", "stepping", "CPU implementer", "CPU part",
                  "CPU variant", "CPU revision")


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's marketing name, with family/model/stepping where the name alone is vague
    (virtual machines often report just "AMD EPYC"); on Arm, where Linux gives no name,
    the architecture with the implementer and part numbers."""
    fields = _cpuinfo_fields()
    name = fields.get("model name") or platform.processor() or platform.machine()
    ids = [f"{key} {fields[key]}" for key in _CPU_ID_FIELDS if key in fields]
    return f"{name} ({', '.join(ids)})" if ids else name


def cpu_slug(length: int = 40) -> str:
    """:func:`cpu_model` as a file-name part: lower case, runs of other characters as one
    ``-``, at most ``length`` characters (result files are named by CPU)."""
    return re.sub(r"[^a-z0-9]+", "-", cpu_model().lower()).strip("-")[:length]


def _parse_size(text: str) -> int | None:
    text = text.strip().upper()
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    try:
        if text and text[-1] in units:
            return int(text[:-1]) * units[text[-1]]
        return int(text)
    except ValueError:
        return None


@functools.lru_cache(maxsize=1)
def cache_sizes() -> dict[str, int]:
    """Bytes of each data cache level as one core sees it (``L1d``, ``L2``, ``L3``), read
    from sysfs; levels the OS does not report are missing from the dict."""
    sizes: dict[str, int] = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        entries = []
    for entry in entries:
        if not entry.startswith("index"):
            continue
        try:
            with open(os.path.join(base, entry, "level")) as f:
                level = f.read().strip()
            with open(os.path.join(base, entry, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(base, entry, "size")) as f:
                size = _parse_size(f.read())
        except OSError:
            continue
        if size is None or kind == "Instruction":
            continue
        sizes["L1d" if level == "1" else f"L{level}"] = size
    return sizes


@functools.lru_cache(maxsize=1)
def supported_levels() -> tuple[str, ...]:
    """The levels this CPU (and its OS) can run with this build, narrowest first; the cap
    does not change them."""
    from convlab.strategies.kernels import _runtime

    return tuple(ISA_LEVELS[level] for level in _runtime.supported_isa_levels())


def detected_isa() -> str:
    """The widest level this CPU (and its OS) can run."""
    return supported_levels()[-1]


def effective_isa() -> str:
    """The widest level the kernels use now: the detected one, at most the cap."""
    if _cap is None:
        return detected_isa()
    return ISA_LEVELS[min(ISA_LEVELS.index(detected_isa()), ISA_LEVELS.index(_cap))]


# --------------------------------------------------------------------------- the cap

_lock = threading.RLock()
_cap: str | None = None         # the level asked for; None: no cap
_cap_source: str | None = None  # ENVIRONMENT or "set_max_isa" while a cap is in force
# kernel module name -> its _set_isa_cap(level index), for every module imported so far
_followers: dict[str, Callable[[int], int]] = {}


def _level_index(cap: str | None) -> int:
    return len(ISA_LEVELS) - 1 if cap is None else ISA_LEVELS.index(cap)


def follow_cap(module_name: str, set_cap: Callable[[int], int]) -> None:
    """Called by each compiled kernel module as it is imported: its level follows the cap
    from now on."""
    with _lock:
        _followers[module_name] = set_cap
        set_cap(_level_index(_cap))


def _apply(cap: str | None, source: str | None) -> None:
    global _cap, _cap_source
    with _lock:
        _cap, _cap_source = cap, (None if cap is None else source)
        for set_cap in _followers.values():
            set_cap(_level_index(cap))


def _parse(value, what: str) -> str | None:
    """A level name in any case (None stays None) -> its ISA_LEVELS spelling."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str (one of {', '.join(ISA_LEVELS)}) or None; "
                        f"got {type(value).__name__}")
    name = value.strip().lower()
    if name not in ISA_LEVELS:
        also = "or unset" if what == ENVIRONMENT else f"or None, as for {ENVIRONMENT}"
        raise ValueError(f"{what}={value!r} is not an instruction-set level; expected one of "
                         f"{', '.join(ISA_LEVELS)} (any case), {also}")
    return name


def _warn_if_above_cpu(cap: str | None, what: str, stacklevel: int) -> None:
    detected = detected_isa()
    if cap is not None and ISA_LEVELS.index(cap) > ISA_LEVELS.index(detected):
        warnings.warn(f"{what}={cap!r} is above what this CPU runs; the kernels use "
                      f"{detected!r}", RuntimeWarning, stacklevel=stacklevel + 1)


def set_max_isa(level: str | None) -> str | None:
    """Cap every kernel's instruction-set level at ``level`` ("baseline", "avx2" or
    "avx512", any case; None removes the cap), as ``CONVLAB_MAX_CPU_ISA`` does at import.
    Returns the previous cap (None for none), so ``set_max_isa(previous)`` restores it.

    A cap above what the CPU runs leaves the CPU's widest level in effect, with a
    RuntimeWarning. Set it between convolutions: a call running in another thread may mix
    levels (each computes correctly). Winograd weights prepared for a wider GEMM level are
    transformed again for the new one by their next run, and fft's compiled spectra where
    the new level runs another lane count (the spectra of both are kept).
    """
    cap = _parse(level, "level")
    _warn_if_above_cpu(cap, "level", stacklevel=2)
    with _lock:
        previous = _cap
        _apply(cap, "set_max_isa")
    return previous


@contextlib.contextmanager
def max_isa(level: str | None) -> Iterator[str]:
    """Run the block with the kernels capped at ``level`` (see :func:`set_max_isa`), then
    restore the cap before it; yields the level in effect."""
    cap = _parse(level, "level")
    _warn_if_above_cpu(cap, "level", stacklevel=3)  # through contextlib's __enter__
    with _lock:
        before = (_cap, _cap_source)
        _apply(cap, "set_max_isa")
    try:
        yield effective_isa()
    finally:
        _apply(*before)


def max_isa_cap() -> tuple[str | None, str | None]:
    """(the cap in force or None, where it came from: "CONVLAB_MAX_CPU_ISA",
    "set_max_isa" or None)."""
    with _lock:
        return _cap, _cap_source


def read_environment() -> None:
    """Apply ``CONVLAB_MAX_CPU_ISA`` (``import convlab`` calls this once); an unknown value
    raises ValueError."""
    raw = os.environ.get(ENVIRONMENT, "")
    if os.environ.get("CONVLAB_DIRECT_ISA", "").strip():
        warnings.warn(f"CONVLAB_DIRECT_ISA is no longer read; {ENVIRONMENT} "
                      f"({', '.join(ISA_LEVELS)}) caps every kernel", RuntimeWarning,
                      stacklevel=2)
    if not raw.strip():
        return
    cap = _parse(raw, ENVIRONMENT)
    _warn_if_above_cpu(cap, ENVIRONMENT, stacklevel=2)
    _apply(cap, ENVIRONMENT)


def kernel_isa_levels() -> dict[str, dict[str, object]]:
    """Per part of each compiled kernel module ("direct", "winograd_transforms",
    "im2col_unfold", "<module>_epilogue", ...): the level it runs at now and the levels it
    has code for, e.g. ``{"now": "avx2", "built": ("baseline", "avx2", "avx512")}``. The
    im2col unfold has no AVX2 copy, so it runs "baseline" there. Imports every kernel
    module, so that each has registered (:func:`follow_cap`)."""
    import pkgutil

    import convlab.strategies.kernels

    kernels = convlab.strategies.kernels
    for found in pkgutil.iter_modules(kernels.__path__, kernels.__name__ + "."):
        importlib.import_module(found.name)
    parts: dict[str, dict[str, object]] = {}
    with _lock:
        names = list(_followers)
    for name in names:
        module = importlib.import_module(name)
        built = module.BUILT_ISA_LEVELS
        for part, level in module.isa_levels().items():
            parts[part] = {"now": ISA_LEVELS[level],
                           "built": tuple(ISA_LEVELS[i] for i in built[part])}
    return parts


# --------------------------------------------------------------------------- summaries

def cache_bytes(level: str, fallback: int) -> int:
    """Bytes of cache ``level`` ("L1d", "L2", "L3") per core, or ``fallback`` where the OS
    does not say."""
    size = cache_sizes().get(level)
    return size if size and size > 0 else fallback


def cpu_info() -> dict[str, Any]:
    """Model, architecture, cache sizes, the detected and effective ISA levels, and the
    cap in force (None for none) with where it came from (``CONVLAB_MAX_CPU_ISA`` or
    ``set_max_isa``)."""
    cap, source = max_isa_cap()
    return {"model": cpu_model(), "machine": platform.machine(), "caches": cache_sizes(),
            "isa_detected": detected_isa(), "isa_effective": effective_isa(),
            "isa_cap": cap, "isa_cap_source": source}


def _format_bytes(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def summary(info: dict[str, Any] | None = None) -> str:
    """One line: model, caches, and the ISA level in effect (with the detected one and the
    cap, when a cap lowers it)."""
    info = cpu_info() if info is None else info
    caches = ", ".join(f"{level} {_format_bytes(size)}"
                       for level, size in info["caches"].items()) or "caches unknown"
    isa = f"isa {info['isa_effective']}"
    if info["isa_cap"] is not None:
        isa += (f" (detected {info['isa_detected']}, capped at {info['isa_cap']} by "
                f"{info['isa_cap_source']})")
    else:
        isa += f" (detected {info['isa_detected']})"
    return f"{info['model']}; {caches}; {isa}"
