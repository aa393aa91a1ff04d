"""The instruction-set cap (convlab.runtime.cpu, CONVLAB_MAX_CPU_ISA) and every kernel's obedience
to it.

Expectations come from the CPU facts convlab.runtime.cpu reports (the levels it supports, the
levels each kernel has code for), never from one machine's: the same tests hold on an
AVX-512, an AVX2-only and an aarch64 machine (where only "baseline" exists).
"""
from __future__ import annotations

import json
import os
import pathlib
import platform
import subprocess
import sys
import warnings

import numpy as np
import pytest

import convlab
from convlab.ops import postops
from convlab.runtime import blas, cpu
from tests.helpers import (
    ALGORITHMS,
    assert_matches_reference,
    problem_of,
    random_tensors,
    skip_unless_supported,
)

LEVELS = cpu.ISA_LEVELS
DETECTED = LEVELS.index(cpu.detected_isa())
KERNELS = pathlib.Path(convlab.__file__).parent / "strategies" / "kernels"


def _index(level):
    return LEVELS.index(level)


def _expected_now(built, cap):
    """The level a kernel part with code for ``built`` runs at under ``cap``: its widest
    copy within both the cap and the CPU."""
    return max((level for level in built
                if _index(level) <= min(_index(cap), DETECTED)), key=_index)


def _import_in_fresh_process(value, code="print(json.dumps(cpu_info()))", environment=()):
    """Import convlab with CONVLAB_MAX_CPU_ISA=value (None: unset) in a new interpreter;
    ``environment`` sets (or with None unsets) further variables there."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CONVLAB_MAX_CPU_ISA", "CONVLAB_DIRECT_ISA")}
    for name, setting in {"CONVLAB_MAX_CPU_ISA": value, **dict(environment)}.items():
        env.pop(name, None)
        if setting is not None:
            env[name] = setting
    program = ("import json, warnings\nwarnings.simplefilter('always')\nimport convlab\n"
               "from convlab.runtime.cpu import cpu_info, kernel_isa_levels\n" + code)
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env=env, cwd=str(pathlib.Path(convlab.__file__).parents[1]),
                          timeout=120, check=False)


@pytest.fixture
def restore_cap():
    """Whatever a test does to the cap, the next test starts with the one before."""
    before = cpu.max_isa_cap()
    yield
    cpu._apply(*before)


# --------------------------------------------------------------------------- the variable

@pytest.mark.parametrize("spelling", ["baseline", "AVX2", "Avx512"])
def test_environment_variable_caps_every_kernel_at_import(spelling):
    code = ("print(json.dumps({'info': cpu_info(), 'parts': {part: v['now'] for part, v "
            "in kernel_isa_levels().items()}}))")
    result = _import_in_fresh_process(spelling, code)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    cap = spelling.lower()
    info = report["info"]
    assert info["isa_cap"] == cap and info["isa_cap_source"] == "CONVLAB_MAX_CPU_ISA"
    assert info["isa_detected"] == cpu.detected_isa()
    assert info["isa_effective"] == LEVELS[min(_index(cap), DETECTED)]
    assert _index(info["isa_effective"]) <= _index(cap)
    for part, now in report["parts"].items():
        assert _index(now) <= _index(cap), (part, now)
    above = _index(cap) > DETECTED
    assert ("RuntimeWarning" in result.stderr) == above, result.stderr
    if above:
        assert "CONVLAB_MAX_CPU_ISA" in result.stderr


def test_unset_or_empty_variable_sets_no_cap():
    for value in (None, "", "  "):
        result = _import_in_fresh_process(value)
        assert result.returncode == 0, result.stderr
        info = json.loads(result.stdout)
        assert info["isa_cap"] is None and info["isa_cap_source"] is None
        assert info["isa_effective"] == info["isa_detected"] == cpu.detected_isa()


def test_unknown_variable_value_fails_the_import_naming_the_variable():
    result = _import_in_fresh_process("sse4")
    assert result.returncode != 0
    assert "ValueError" in result.stderr
    assert "CONVLAB_MAX_CPU_ISA='sse4'" in result.stderr
    for level in LEVELS:
        assert level in result.stderr


# --------------------------------------------------------------------------- the setter

def test_set_max_isa_returns_the_previous_cap_and_reports_its_source(restore_cap):
    cpu.set_max_isa(None)
    assert cpu.set_max_isa("BASELINE") is None
    info = cpu.cpu_info()
    assert info["isa_cap"] == "baseline" and info["isa_cap_source"] == "set_max_isa"
    assert info["isa_effective"] == "baseline"
    assert cpu.set_max_isa(None) == "baseline"
    assert cpu.cpu_info()["isa_cap"] is None
    assert cpu.effective_isa() == cpu.detected_isa()


@pytest.mark.parametrize("level", LEVELS)
def test_a_cap_above_the_cpu_warns_and_leaves_the_cpu_level(restore_cap, level):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cpu.set_max_isa(level)
    above = _index(level) > DETECTED
    assert [w.category for w in caught] == ([RuntimeWarning] if above else [])
    assert cpu.effective_isa() == LEVELS[min(_index(level), DETECTED)]


@pytest.mark.parametrize("bad", ["sse2", "avx-512", "native", "x86-64-v3"])
def test_unknown_levels_are_a_value_error_naming_the_variable(restore_cap, bad):
    before = cpu.max_isa_cap()
    with pytest.raises(ValueError, match="CONVLAB_MAX_CPU_ISA"):
        cpu.set_max_isa(bad)
    with pytest.raises(ValueError, match="baseline, avx2, avx512"), cpu.max_isa(bad):
        pass
    assert cpu.max_isa_cap() == before


@pytest.mark.parametrize("bad", [2, b"avx2", ["avx2"]])
def test_levels_of_the_wrong_type_are_a_type_error(restore_cap, bad):
    with pytest.raises(TypeError, match="level"):
        cpu.set_max_isa(bad)


def test_max_isa_restores_the_cap_before_it(restore_cap):
    cpu.set_max_isa("baseline")
    with cpu.max_isa(None) as level:
        assert level == cpu.detected_isa()
        assert cpu.max_isa_cap() == (None, None)
    assert cpu.max_isa_cap() == ("baseline", "set_max_isa")
    with pytest.raises(KeyError), cpu.max_isa(cpu.detected_isa()):
        raise KeyError("the block fails")
    assert cpu.max_isa_cap() == ("baseline", "set_max_isa")


def test_supported_levels_run_from_baseline_to_the_detected_one():
    levels = cpu.supported_levels()
    assert levels == LEVELS[:DETECTED + 1]
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686"):
        assert levels == ("baseline",)


# --------------------------------------------------------------------------- the kernels

def test_every_dispatching_kernel_module_follows_the_cap():
    """A module that runs kernels with per-level copies (the epilogues, or isa_level.h
    itself) must register with convlab.runtime.cpu; else the cap would not reach it."""
    cpu.kernel_isa_levels()  # imports every kernel module
    for source in KERNELS.glob("*.pyx"):
        text = source.read_text()
        runs_levels = ("_epilogue cimport" in text or "isa_level cimport" in text)
        if source.stem == "_runtime":  # only reports what the CPU supports
            assert "follow_cap" not in text
            continue
        if runs_levels:
            assert f"convlab.strategies.kernels.{source.stem}" in cpu._followers, source.name


def test_every_kernel_part_runs_at_the_capped_level(isa_level):
    parts = cpu.kernel_isa_levels()
    assert {"direct", "direct_epilogue", "winograd_transforms", "winograd_gemm",
            "winograd_epilogue", "im2col_unfold", "im2col_epilogue"} <= set(parts)
    for part, levels in parts.items():
        assert "baseline" in levels["built"], part
        assert levels["now"] == _expected_now(levels["built"], isa_level), (part, levels)


def test_direct_plans_with_the_capped_level(isa_level):
    """With channels enough to fill any vector, direct's plan takes exactly the level in
    effect, and vectors of its width."""
    from convlab.strategies import direct
    from convlab.strategies.kernels import _direct
    src, weights, bias = random_tensors(
        np.random.default_rng(0), batch=1, in_channels=32, out_channels=64, groups=1,
        input_shape=(9, 9), kernel_shape=(3, 3), dtype="float32", data_format="NXC",
        weights_format="XIO", bias=False)
    problem = problem_of(src, weights, None, dict(pads_begin=1, pads_end=1))
    cut = direct.kernel_cut(problem, 2)
    assert _direct.ISA_NAMES == LEVELS
    assert cut["isa"] == isa_level
    assert _direct.get_isa() == isa_level
    if isa_level != "baseline":
        assert cut["lanes"] * 4 == {"avx2": 32, "avx512": 64}[isa_level]


def test_winograd_gemm_levels_follow_the_cap(isa_level):
    from convlab.strategies import winograd
    from convlab.strategies.kernels import _winograd
    widest = _index(cpu.kernel_isa_levels()["winograd_gemm"]["now"])
    assert _winograd.gemm_levels() == list(range(widest + 1))
    assert winograd.current_gemm_level() == widest
    # U packed for any level this CPU has keeps its layout whatever the cap
    for level in _winograd.BUILT_ISA_LEVELS["winograd_gemm"]:
        if level <= DETECTED:
            _winograd.gemm_layout(level, np.float32)


def test_winograd_refuses_a_gemm_level_above_the_cap(restore_cap):
    from convlab.problem import params
    from convlab.strategies import winograd
    from convlab.strategies.kernels import _winograd
    widest = max(_winograd.gemm_levels())
    if widest == 0:
        pytest.skip("only the baseline GEMM level exists on this machine or build")
    src, weights, _ = random_tensors(
        np.random.default_rng(1), batch=1, in_channels=16, out_channels=32, groups=1,
        input_shape=(8, 8), kernel_shape=(3, 3), dtype="float32", data_format="NXC",
        weights_format="XIO", bias=False)
    problem = problem_of(src, weights, None, dict(pads_begin=1, pads_end=1))
    transform = winograd.wt.TRANSFORMS[4]
    u = winograd.transform_weights(transform, problem,
                                   params.canonical_weights(weights, problem), 1, widest)
    b = winograd.blocking(4, problem, 1, level=widest)
    bts, ats, _ = winograd.lifted_transforms(transform, 2, problem.dtype)
    dst = np.empty((1, 8, 8, 32), np.float32)
    arguments = (winograd._lifted(src, 2), u, None, winograd._lifted(dst, 2), *bts, *ats,
                 (0, 1, 1), b.block, b.channel_chunk, b.threads, b.shared, widest)
    _winograd.conv_winograd(*arguments)  # at the level it was packed for: runs
    cpu.set_max_isa("baseline")
    with pytest.raises(ValueError, match="cap"):
        _winograd.conv_winograd(*arguments)


# --------------------------------------------------------------------------- results

# Channels enough that no level narrows its vectors (direct does for few channels), a
# depthwise layer whose groups fill several vectors, and a strided 7x7 on 3 channels
# (im2col's whole-row unfold, the short runs its AVX-512 copy is for).
WIDE_CASES = {
    "dense-k3": dict(batch=2, in_channels=20, out_channels=40, groups=1, input_shape=(9, 11),
                     kernel_shape=(3, 3), attributes=dict(pads_begin=1, pads_end=1)),
    "depthwise-k3": dict(batch=1, in_channels=40, out_channels=40, groups=40,
                         input_shape=(10, 9), kernel_shape=(3, 3),
                         attributes=dict(pads_begin=1, pads_end=1)),
    "strided-k7": dict(batch=1, in_channels=3, out_channels=24, groups=1,
                       input_shape=(15, 15), kernel_shape=(7, 7),
                       attributes=dict(strides=2, pads_begin=3, pads_end=3)),
    # a plan blocks these weights by the kernel's chunks of output channels (several at
    # every level, 36 KiB or more per group)
    "grouped-many-chunks": dict(batch=1, in_channels=32, out_channels=280, groups=2,
                                input_shape=(7, 6), kernel_shape=(3, 3),
                                attributes=dict(pads_begin=1, pads_end=1)),
    "dense-3d": dict(batch=1, in_channels=17, out_channels=33, groups=1,
                     input_shape=(5, 6, 7), kernel_shape=(3, 3, 3),
                     attributes=dict(pads_begin=1, pads_end=1)),
}


def _wide_case(rng, name, dtype):
    case = dict(WIDE_CASES[name])
    attributes = dict(case.pop("attributes"), groups=case["groups"], data_format="NXC",
                      weights_format="XIO")
    src, weights, bias = random_tensors(rng, dtype=dtype, data_format="NXC",
                                        weights_format="XIO", bias=True, **case)
    return src, weights, bias, attributes


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", list(WIDE_CASES))
@pytest.mark.parametrize("algorithm", [a for a in ALGORITHMS if a != "reference"])
def test_wide_problems_match_reference_at_every_level(rng, isa_level, algorithm, case, dtype):
    src, weights, bias, attributes = _wide_case(rng, case, dtype)
    skip_unless_supported(algorithm, problem_of(src, weights, bias, attributes))
    got = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    assert_matches_reference(got, src, weights, bias, attributes, algorithm,
                             f"(isa {isa_level})")


@pytest.mark.parametrize("algorithm", [a for a in ALGORITHMS if a != "reference"])
def test_fused_post_ops_at_every_level(rng, isa_level, algorithm):
    """The epilogues (each module's copy) at the capped level: fused post-ops match the
    oracle's formulas on the same algorithm's plain result."""
    src, weights, bias, attributes = _wide_case(rng, "dense-k3", "float32")
    skip_unless_supported(algorithm, problem_of(src, weights, bias, attributes))
    residual = rng.standard_normal(40).astype(np.float32)
    ops = ["relu", ("linear", 0.5, -0.25), "tanh", ("add", residual)]
    got = convlab.convolve(src, weights, bias, post_ops=ops, algorithm=algorithm,
                           **attributes)
    plain = convlab.convolve(src, weights, bias, algorithm=algorithm, **attributes)
    parsed = postops.parse(ops, problem_of(src, weights, bias, attributes), None)
    expected = convlab.reference.apply_post_ops(np.moveaxis(plain.astype(np.float64), -1, 1),
                                                parsed, None)
    np.testing.assert_allclose(got, np.moveaxis(expected, 1, -1), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("case", ["dense-k3", "grouped-many-chunks"])
@pytest.mark.parametrize("algorithm", [a for a in ALGORITHMS if a != "reference"])
def test_a_plan_made_before_a_cap_runs_under_it(rng, restore_cap, algorithm, case):
    """Weights prepared at the native level (Winograd's U packed for its GEMM level,
    direct's blocked by that level's chunks) still give the right result, at the capped
    level, once the cap is lowered."""
    src, weights, bias, attributes = _wide_case(rng, case, "float32")
    skip_unless_supported(algorithm, problem_of(src, weights, bias, attributes))
    plan = convlab.Convolution(weights, bias, algorithm=algorithm, **attributes)
    native = plan(src)
    assert_matches_reference(native, src, weights, bias, attributes, algorithm)
    for level in reversed(cpu.supported_levels()):
        with cpu.max_isa(level):
            assert cpu.kernel_isa_levels()["direct"]["now"] == level
            got = plan(src)
        assert_matches_reference(got, src, weights, bias, attributes, algorithm,
                                 f"(isa {level})")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_direct_plans_block_large_weights_by_the_levels_chunks(rng, isa_level, dtype):
    """A direct plan lays weights of several output-channel chunks out chunk by chunk
    (the same values, the level's chunking recorded) and computes the same result."""
    from convlab.problem import params
    from convlab.strategies import direct
    from convlab.strategies.kernels import _direct
    src, weights, bias, attributes = _wide_case(rng, "grouped-many-chunks", dtype)
    problem = problem_of(src, weights, bias, attributes)
    canonical = params.canonical_weights(weights, problem)
    prepared = direct.prepare_weights(problem, canonical)
    packed = direct.prepare_weights(problem, canonical, one_shot=True)
    assert prepared.blocks == _direct.dense_chunks(problem.out_channels_per_group,
                                                   problem.dtype.itemsize)
    assert prepared.blocks[0] == LEVELS.index(isa_level) and len(prepared.blocks[2]) > 1
    assert prepared.array.shape == packed.array.shape
    assert not np.array_equal(prepared.array, packed.array)
    np.testing.assert_array_equal(direct._unblocked(prepared), packed.array)
    plan = convlab.Convolution(weights, bias, algorithm="direct", **attributes)
    assert_matches_reference(plan(src), src, weights, bias, attributes, "direct",
                             f"(isa {isa_level})")


# --------------------------------------------------------------------------- explain

ARM_CPUINFO = {"processor": "0", "BogoMIPS": "243.75", "Features": "fp asimd sve",
               "CPU implementer": "0x41", "CPU architecture": "8", "CPU variant": "0x1",
               "CPU part": "0xd40", "CPU revision": "1"}


@pytest.mark.parametrize("fields, expected", [
    ({"model name": "AMD EPYC 7B13", "cpu family": "25", "model": "1", "stepping": "0"},
     "AMD EPYC 7B13 (cpu family 25, model 1, stepping 0)"),
    # Linux on AArch64 names no model: the implementer and part numbers tell CPUs apart
    (ARM_CPUINFO, "aarch64 (CPU implementer 0x41, CPU part 0xd40, CPU variant 0x1, "
                  "CPU revision 1)"),
    ({}, "aarch64"),
])
def test_the_cpu_model_tells_cpus_apart_on_x86_and_on_arm(monkeypatch, fields, expected):
    """Calibrations are keyed by cpu_model(): two CPU designs must not share one name."""
    monkeypatch.setattr(cpu, "_cpuinfo_fields", lambda: dict(fields))
    monkeypatch.setattr(cpu.platform, "processor", lambda: "")
    monkeypatch.setattr(cpu.platform, "machine", lambda: "aarch64")
    cpu.cpu_model.cache_clear()
    try:
        assert cpu.cpu_model() == expected
    finally:
        cpu.cpu_model.cache_clear()


def test_explain_names_the_cpu_its_caches_and_the_level(restore_cap):
    src = np.zeros((1, 8, 8, 4), np.float32)
    weights = np.zeros((3, 3, 4, 8), np.float32)
    cpu.set_max_isa("baseline")
    explanation = convlab.explain(src, weights, pads_begin=1, pads_end=1)
    line = [text for text in str(explanation).splitlines() if text.startswith("cpu: ")]
    assert len(line) == 1
    assert cpu.cpu_model() in line[0]
    assert "isa baseline" in line[0] and "set_max_isa" in line[0]
    for level in cpu.cache_sizes():
        assert level in line[0]
    info = explanation.to_dict()["cpu"]
    assert info["isa_effective"] == "baseline" and info["isa_cap"] == "baseline"
    assert info["caches"] == cpu.cache_sizes()


def test_the_constants_in_force_follow_the_cap():
    """Estimates use the constants of the level the kernels run at: capping the level
    changes the set (shipped or calibrated) and keys out choices made before."""
    from convlab.dispatch import cost_model

    for level in convlab.runtime.cpu.supported_levels():
        with convlab.runtime.cpu.max_isa(level):
            assert cost_model.in_force(2).isa == level
            assert cost_model.generation()[1] == level


# --------------------------------------------------------------------------- the BLAS

def _blas_core_in_fresh_process(cap, core_variable=None):
    """(the OpenBLAS core im2col's GEMMs run on, OPENBLAS_CORETYPE after loading) in a new
    interpreter with CONVLAB_MAX_CPU_ISA=cap and OPENBLAS_CORETYPE=core_variable."""
    code = ("from convlab.strategies import im2col\nimport os\n"
            "print(json.dumps([im2col.blas_library()['core'], "
            "os.environ.get('OPENBLAS_CORETYPE')]))")
    result = _import_in_fresh_process(cap, code, {"OPENBLAS_CORETYPE": core_variable})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


needs_capped_openblas = pytest.mark.skipif(
    blas.load_openblas() is None or platform.machine().lower() not in ("x86_64", "amd64")
    or blas.requested() != "scipy-openblas32",
    reason="im2col multiplies with scipy-openblas32 on x86-64 only")


@needs_capped_openblas
@pytest.mark.parametrize("level", ["baseline", "avx2"])
def test_the_cap_reaches_the_blas_im2col_multiplies_with(level):
    if _index(level) >= DETECTED:
        pytest.skip(f"this CPU's widest level is {cpu.detected_isa()}: no cap below it")
    # the core OpenBLAS runs when told the level's core itself, without a cap
    expected, _ = _blas_core_in_fresh_process(None, blas.CORE_FOR_LEVEL[level])
    uncapped, _ = _blas_core_in_fresh_process(None)
    core, variable = _blas_core_in_fresh_process(level)
    assert core == expected != uncapped
    assert variable is None  # set for the load only


@needs_capped_openblas
def test_the_blas_keeps_the_cpus_core_without_a_cap_below_it_and_the_users_choice():
    uncapped, _ = _blas_core_in_fresh_process(None)
    assert _blas_core_in_fresh_process(cpu.detected_isa())[0] == uncapped
    chosen, _ = _blas_core_in_fresh_process(None, "Sandybridge")
    assert _blas_core_in_fresh_process("baseline", "Sandybridge") == [chosen, "Sandybridge"]
