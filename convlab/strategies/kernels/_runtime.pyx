"""What the compiled kernels were built with, and what the CPU and their OpenMP runtime
allow now."""
from convlab.strategies.kernels.isa_level cimport CL_ISA_COUNT, cl_isa_supported
from convlab.strategies.kernels.omp_shim cimport CONVLAB_HAVE_OPENMP, omp_get_max_threads


def openmp_enabled():
    """True when the kernels were compiled with OpenMP (else prange runs serially)."""
    return bool(CONVLAB_HAVE_OPENMP)


def openmp_max_threads():
    """omp_get_max_threads(): honours OMP_NUM_THREADS and threadpoolctl's limits."""
    return omp_get_max_threads()


cdef extern from "runtime_probe.h" nogil:
    double cl_core_round_trip(long rounds)


def core_round_trip(long rounds=20000, int tries=5):
    """Seconds for a cache line to pass from one OpenMP thread to another and back: the
    median of ``tries`` timings of ``rounds`` round trips, or None when two threads could
    not run at once (no OpenMP, a single core). Far-apart cores (no shared cache) take
    several times as long; the bench prints it, since convlab's parallel algorithms slow
    down in step (runtime_probe.h)."""
    if rounds < 1 or tries < 1:
        raise ValueError(f"rounds={rounds} and tries={tries} must be >= 1")
    cdef double seconds
    times = []
    for _ in range(tries):
        with nogil:
            seconds = cl_core_round_trip(rounds)
        if seconds < 0:
            return None
        times.append(seconds)
    return sorted(times)[len(times) // 2]


def supported_isa_levels():
    """The instruction-set levels this CPU (and its OS) can run with this build, as
    0 (baseline), 1 (AVX2: x86-64-v3), 2 (AVX-512: x86-64-v4), narrowest first
    (isa_level.h)."""
    return [level for level in range(CL_ISA_COUNT) if cl_isa_supported(level)]
