#!/usr/bin/env bash
# Build convlab's kernels with AddressSanitizer and UndefinedBehaviorSanitizer in a temporary
# copy of this checkout, then run the correctness tests and the fuzz tests against that build.
# The checkout itself (and its in-place build) is left untouched.
#
#   tools/sanitize.sh            every correctness test, fuzz tests with the "long" profile
#   tools/sanitize.sh --smoke    a few correctness tests, fuzz tests with the "ci" profile
#                                (for CI: under 10 minutes with the build, on 2 cores)
#   --add FILE                   copy FILE into the build's tests/ (e.g. a test from another
#                                branch, and its helpers); a test_*.py runs with the others.
#                                May be repeated
#   --portable                   build the portable C level only (CONVLAB_NO_ISA_DISPATCH:
#                                no AVX2 or AVX-512 code, no non-temporal stores), the code
#                                an AArch64 machine runs
#   --keep                       keep the temporary tree (its path is printed)
#
# Exits non-zero on a failing test, a crash, or any sanitizer report. PYTHON picks the
# interpreter (default: python), which must have the test dependencies installed.
set -euo pipefail

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }

smoke=0
keep=0
portable=0
extra_files=()
while [ $# -gt 0 ]; do
    case "$1" in
        --smoke) smoke=1 ;;
        --keep) keep=1 ;;
        --portable) portable=1 ;;
        --add) shift; extra_files+=("$(realpath "${1:?--add needs a file}")") ;;
        -h|--help) usage; exit 0 ;;
        *) echo "sanitize.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

python=${PYTHON:-python}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/convlab-sanitize.XXXXXX")
if [ "$keep" = 1 ]; then
    echo "sanitize.sh: temporary tree kept in $work"
else
    trap 'rm -rf "$work"' EXIT
fi
log="$work/sanitize.log"
started=$SECONDS

# Correctness tests that drive the kernels. Left out: notebooks, plots and the bench (no
# kernel code of their own, slow under the sanitizers) and the ONNX model tests (their
# kernels are the same ones, reached through onnxruntime's model loading).
if [ "$smoke" = 1 ]; then
    tests=(tests/test_edge_cases.py tests/test_bad_inputs.py tests/test_properties.py
           tests/test_padding_modes.py tests/test_int8.py tests/test_fft_compiled.py)
    profile=ci
else
    tests=(tests/test_grid.py tests/test_edge_cases.py tests/test_properties.py
           tests/test_winograd.py tests/test_im2col.py tests/test_int8.py
           tests/test_transpose.py tests/test_backward.py tests/test_post_ops.py
           tests/test_padding_modes.py tests/test_bad_inputs.py tests/test_inputs.py
           tests/test_half.py tests/test_plan.py tests/test_dispatch.py tests/test_buffers.py
           tests/test_threads.py tests/test_tune.py tests/test_shapes.py
           tests/test_cost_model.py tests/test_fuzz_corpus.py tests/test_fft_compiled.py)
    profile=long
fi

echo "== copying the checkout to $work/src"
mkdir -p "$work/src"
(cd "$root" && git ls-files -z --cached --others --exclude-standard \
    | while IFS= read -r -d '' file; do [ -f "$file" ] && printf '%s\0' "$file"; done \
    | tar --null -T - -cf -) | tar -xf - -C "$work/src"
for file in ${extra_files[@]+"${extra_files[@]}"}; do
    cp "$file" "$work/src/tests/"
    name=$(basename "$file")
    case "$name" in
        test_fuzz_entry_points.py) ;;  # run below, with the fuzz profile
        test_*.py) tests+=("tests/$name") ;;
    esac
done
cd "$work/src"
present=()
for file in "${tests[@]}"; do
    if [ -f "$file" ]; then present+=("$file"); else echo "   (no $file here: left out)"; fi
done
tests=("${present[@]}")

export CONVLAB_SANITIZE=1
if [ "$portable" = 1 ]; then
    echo "== sanitizer build, portable level only"
    export CFLAGS="${CFLAGS:+$CFLAGS }-DCONVLAB_NO_ISA_DISPATCH"
else
    echo "== sanitizer build"
fi
# pip builds a wheel with the build requirements of pyproject.toml, as for any install;
# its compiled modules go into the copy.
"$python" -m pip wheel -v --no-deps --wheel-dir "$work/wheel" . >"$work/build.log" 2>&1 \
    || { tail -50 "$work/build.log"; exit 1; }
"$python" -m zipfile -e "$work"/wheel/convlab-*.whl "$work/wheel/unpacked"
(cd "$work/wheel/unpacked" && find convlab -name '*.so' -exec cp {} "$OLDPWD/{}" \;)
echo "   built in $((SECONDS - started)) s"

# The interpreter is not instrumented, so the ASan runtime must be loaded first. Python
# keeps memory until exit by design: leak reports would be noise. A huge allocation that a
# test expects to fail must return NULL (MemoryError) rather than abort. Aborting (rather
# than exiting 1, as failed tests do) lets faulthandler name the test.
libasan=$(gcc -print-file-name=libasan.so)
libubsan=$(gcc -print-file-name=libubsan.so)
for lib in "$libasan" "$libubsan"; do
    [ -e "$lib" ] || { echo "sanitize.sh: $lib not found (gcc's sanitizer runtime)" >&2; exit 1; }
done
export LD_PRELOAD="$libasan $libubsan"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1
export PYTHONFAULTHANDLER=1
if [ "$portable" = 1 ]; then
    levels=$("$python" -c "from convlab.strategies.kernels import _direct
print(' '.join(_direct.supported_isas()))")
    [ "$levels" = baseline ] \
        || { echo "sanitize.sh: the portable build runs levels '$levels'" >&2; exit 1; }
fi

# A Cython bounds or division check failing inside a nogil kernel cannot propagate: it is
# reported as an unraisable exception, which must fail the run too. Nothing is captured
# (-s): a sanitizer report written while pytest holds a test's output would be lost with
# it when the process aborts (the sanitizers' log_path does not take UBSan's reports).
pytest_args=(-q -s -rfE -p no:cacheprovider -W error::pytest.PytestUnraisableExceptionWarning)
status=0
echo "== correctness tests: ${tests[*]}"
"$python" -m pytest "${pytest_args[@]}" "${tests[@]}" >>"$log" 2>&1 || status=$?
tail -3 "$log"
if [ -f tests/test_fuzz_entry_points.py ]; then
    echo "== fuzz tests, Hypothesis profile '$profile'"
    # the statistics give the number of examples each test ran
    HYPOTHESIS_PROFILE=$profile "$python" -m pytest "${pytest_args[@]}" \
        --hypothesis-show-statistics tests/test_fuzz_entry_points.py >>"$log" 2>&1 \
        || status=$?
    grep -oE "[0-9]+ passing," "$log" \
        | awk '{n += $1; t += 1} END {print "   " n " passing examples over " t " tests"}' || true
    tail -3 "$log"
else
    echo "== no tests/test_fuzz_entry_points.py: fuzz tests skipped"
fi

# Sanitizer reports and crashes, wherever the exit status came from
pattern="ERROR: AddressSanitizer|runtime error:|Fatal Python error"
found=$(grep -c -E "$pattern" "$log" || true)
echo "== $((SECONDS - started)) s in all; exit status $status; $found sanitizer report(s) or crash(es); log $log"
if [ "$found" != 0 ] || [ "$status" != 0 ]; then
    grep -n -A 30 -E "$pattern" "$log" | head -120 || true
    grep -E "^(FAILED|ERROR) " "$log" | head -40 || true
    [ "$keep" = 1 ] || cp "$log" "${TMPDIR:-/tmp}/convlab-sanitize-last.log"
    [ "$status" != 0 ] && exit "$status"
    exit 1
fi
