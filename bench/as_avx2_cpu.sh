#!/usr/bin/env bash
# Run a command as on an AVX2 CPU of this machine's model: every library in the process
# (convlab, PyTorch, ONNX Runtime, OpenBLAS, NumPy) sees CPUID without AVX-512, AMX and
# AVX-VNNI and dispatches accordingly (bench/cpu_without_avx512.c, built on first use).
#   bench/as_avx2_cpu.sh python -m convlab bench --suite resnet_50 --threads 2 --mb 1
# Linux on x86-64 with CPUID faulting ("cpuid_fault" in /proc/cpuinfo) only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if ! grep -qw cpuid_fault /proc/cpuinfo 2>/dev/null; then
  echo "as_avx2_cpu.sh: this CPU offers no CPUID faulting (no cpuid_fault in /proc/cpuinfo)" >&2
  exit 2
fi
lib=${TMPDIR:-/tmp}/convlab-cpu-without-avx512-$(id -u).so
if [ ! -e "$lib" ] || [ "$here/cpu_without_avx512.c" -nt "$lib" ]; then
  "${CC:-cc}" -O2 -shared -fPIC -o "$lib.$$" "$here/cpu_without_avx512.c"
  mv "$lib.$$" "$lib"
fi
LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$lib" exec "$@"
