"""Build the Cython kernels, with OpenMP when the compiler has it.

Flags stay portable (no host-specific -march): wide-vector code paths are chosen at run
time inside the C microkernels (GCC target attributes), so one wheel runs on any
x86-64 machine.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

OPENMP_PROBE = r"""
#include <omp.h>
int main(void) {
    int n = 0;
    #pragma omp parallel reduction(+:n)
    n += 1;
    return n > 0 ? 0 : 1;
}
"""


def compiler_supports_openmp():
    """Compile and link a tiny OpenMP program; any failure means a serial build."""
    if os.environ.get("CONVLAB_NO_OPENMP"):
        return False
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc.split()[0]) is None:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "probe.c")
        with open(source, "w") as f:
            f.write(OPENMP_PROBE)
        cmd = cc.split() + ["-fopenmp", source, "-o", os.path.join(tmp, "probe")]
        try:
            result = subprocess.run(cmd, capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return False
        return result.returncode == 0


use_openmp = compiler_supports_openmp()
print(f"convlab: building {'with' if use_openmp else 'without'} OpenMP", file=sys.stderr)

sanitize = os.environ.get("CONVLAB_SANITIZE", "") not in ("", "0")
compile_args = ["-O3", "-fno-math-errno", "-Wno-unused-function", "-Wno-unreachable-code"]
link_args = []
directives = {
    "language_level": "3",
    "boundscheck": False,
    "wraparound": False,
    "cdivision": True,
    "initializedcheck": False,
}
if sanitize:
    # -O0 (overriding -O3): instrumented, the kernels' SIMD code takes minutes per module
    # to optimize even at -O1 (_direct.c: 27 s of CPU at -O0, over 5 min at -O1), too long
    # for CI. -g1 gives reports file and line. Every report aborts, so none scrolls by.
    sanitizer_flags = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                       "-fno-omit-frame-pointer"]
    compile_args += ["-O0", "-g1"] + sanitizer_flags
    link_args += sanitizer_flags
    directives.update(boundscheck=True, cdivision=False)
    print("convlab: sanitizer build (ASan + UBSan, Cython bounds and division checks)",
          file=sys.stderr)
if use_openmp:
    compile_args.append("-fopenmp")
    link_args.append("-fopenmp")

kernel_names = ["_epilogue", "_direct", "_runtime", "_winograd", "_im2col", "_int8", "_fft",
                "_layout"]
extensions = [
    Extension(
        f"convlab.strategies.kernels.{name}",
        [f"convlab/strategies/kernels/{name}.pyx"],
        include_dirs=[numpy.get_include(), "convlab/strategies/kernels"],
        # headers included from other headers, which Cython's own tracking does not see
        depends=sorted(glob.glob("convlab/strategies/kernels/*.h")),
        extra_compile_args=compile_args,
        extra_link_args=link_args,
        # the post-op epilogues (epilogue.h) call libm's exp, tanh, erf, ...
        libraries=[] if sys.platform == "win32" else ["m"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_9_API_VERSION")],
    )
    for name in kernel_names
] + [
    # the signature a repeated one-shot call is recognised by
    Extension("convlab.ops._signature", ["convlab/ops/_signature.pyx"],
              extra_compile_args=compile_args, extra_link_args=link_args),
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives=directives,
        # The checked C goes to its own folder, so it never stands in for the normal build's.
        **(dict(build_dir="build/sanitize", force=True) if sanitize else {}),
    ),
    # Instrumented modules compile several times slower: build them side by side, also
    # under pip, which has no -j.
    **(dict(options={"build_ext": {"parallel": os.cpu_count() or 1}}) if sanitize else {}),
)
