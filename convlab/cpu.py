"""Facts about the CPU the kernels run on: its model, cache sizes and instruction-set levels.

Selection, calibration, ``explain`` and the bench all read the machine through this module,
so that nothing assumes the CPU the cost constants were first fitted on.
"""
from __future__ import annotations

import functools
import os
import platform
from typing import Dict, Optional

# Instruction-set levels, narrowest first. "baseline" is what the build targets everywhere
# (SSE2 on x86-64, plain C elsewhere); the wider ones are chosen at run time.
ISA_LEVELS = ("baseline", "avx2", "avx512")


def _cpuinfo_fields() -> Dict[str, str]:
    fields: Dict[str, str] = {}
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


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's marketing name, with family/model/stepping where the name alone is vague
    (virtual machines often report just "AMD EPYC")."""
    fields = _cpuinfo_fields()
    name = fields.get("model name") or platform.processor() or platform.machine()
    ids = [f"{key} {fields[key]}" for key in ("cpu family", "model", "stepping") if key in fields]
    return f"{name} ({', '.join(ids)})" if ids else name


def _parse_size(text: str) -> Optional[int]:
    text = text.strip().upper()
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    try:
        if text and text[-1] in units:
            return int(text[:-1]) * units[text[-1]]
        return int(text)
    except ValueError:
        return None


@functools.lru_cache(maxsize=1)
def cache_sizes() -> Dict[str, int]:
    """Bytes of each data cache level as one core sees it (``L1d``, ``L2``, ``L3``), read
    from sysfs; levels the OS does not report are missing from the dict."""
    sizes: Dict[str, int] = {}
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


def detected_isa() -> str:
    """The widest level this CPU (and its OS) can run."""
    from convlab.kernels import _direct

    return _to_level(_direct.supported_isas()[-1])


def effective_isa() -> str:
    """The widest level the kernels use now."""
    from convlab.kernels import _direct

    return _to_level(_direct.get_isa())


def _to_level(kernel_name: str) -> str:
    return "baseline" if kernel_name == "default" else kernel_name


def cpu_info() -> Dict[str, object]:
    """Model, architecture, cache sizes, and the detected and effective ISA levels."""
    return {"model": cpu_model(), "machine": platform.machine(), "caches": cache_sizes(),
            "isa_detected": detected_isa(), "isa_effective": effective_isa()}
