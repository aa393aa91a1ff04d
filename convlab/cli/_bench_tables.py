"""The bench's report: the header on the machine and the run, one table row per layer, and
the summaries after it (:mod:`convlab.cli.benchmark`)."""
from __future__ import annotations

import csv
import os
import shlex
import sys
from dataclasses import dataclass

from convlab.cli._bench_results import (
    FORCED_PLAN,
    GEMM_BOUND_MIN_FLOPS,
    Contender,
    auto_choice_regret,
    best_family_ratio,
    fastest,
    fastest_seconds,
    first_call_ratio,
    geo_mean,
    im2col_over_matmul,
    is_algorithm,
    network_seconds,
    ort_over_plan,
    plan_choice_regret,
    plan_regret,
    plan_twin_ratio,
    pooled_median,
    rechecked_regret,
    regret,
    round_ratio_range,
)
from convlab.dispatch import cost_model, measure
from convlab.runtime import blas, cpu
from convlab.strategies import fft_transforms


def fmt_rate(value, width=9, mark=""):
    """GFLOP/s with as many decimals as a tiny depthwise layer needs."""
    if value is None:
        return f"{'-':>{width}}"
    digits = 0 if value >= 100 else 1 if value >= 10 else 2
    return f"{value:>{width - len(mark)}.{digits}f}{mark}"


def fmt_ratio(value, width=9):
    return f"{'-':>{width}}" if value is None else f"{value:>{width - 1}.2f}x"


def display_names(layers) -> list[str]:
    """Names without the network prefix when every layer shares it (``resnet_50:``)."""
    prefixes = {layer.name.split(":", 1)[0] for layer in layers if ":" in layer.name}
    if len(prefixes) == 1 and all(":" in layer.name for layer in layers):
        return [layer.name.split(":", 1)[1] for layer in layers]
    return [layer.name or "(unnamed)" for layer in layers]


def cpu_model() -> str:
    return cpu.cpu_model()


def machine_lines() -> list[str]:
    """The CPU the run measured and where the selector's constants came from."""
    info = cpu.cpu_info()
    caches = ", ".join(f"{level} {_size_text(size)}" for level, size in info["caches"].items())
    describe = getattr(cost_model, "describe_constants", cost_model.source)
    return [f"cpu: {info['model']}, {info['machine']}; caches {caches or 'not reported'}; "
            f"ISA level detected {info['isa_detected']}, effective {info['isa_effective']}"
            + _hidden_isa_text(info),
            f"cost constants: {describe()}",
            f"plans: first call times the two lowest estimates and the contenders "
            f"within {cost_model.measure_margin():.0%} of the lowest (at most "
            f"{measure.MAX_CONTENDERS}, none started after {measure.TIME_LIMIT_SECONDS:g} s)",
            f"fft transforms: {fft_transforms.BACKEND}; compiled (one input channel per "
            f"group, float32, stride 1): convlab's own",
            f"im2col GEMM: {_gemm_library_text()}"]


def _hidden_isa_text(info) -> str:
    """A note when the OS lists AVX-512 but CPUID in this process does not show it (as
    under bench/as_avx2_cpu.sh, where every library dispatches as on an AVX2 CPU)."""
    if info["isa_detected"] == "avx512" or "avx512f" not in cpu.os_flags():
        return ""
    return " (the OS lists AVX-512; CPUID hides it from this process and its libraries)"


def _gemm_library_text() -> str:
    from convlab.strategies import im2col

    library = im2col.blas_library()
    core = f", OpenBLAS core {library['core']}" if library.get("core") else ""
    version = " ".join(library["version"].split()[:2])
    return f"{library['name']} ({version}{core})" + _openblas_environment_text()


def _openblas_environment_text() -> str:
    """The OpenBLAS variables set in the environment, which choose its kernels and their
    blocking in place of the CPU's own (some machines set them for old OpenBLAS builds)."""
    settings = blas.kernel_settings()
    return f"; set in the environment: {', '.join(settings)}" if settings else ""


def _size_text(size: int) -> str:
    for unit, scale in (("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def load_average() -> str:
    try:
        return "/".join(f"{v:.2f}" for v in os.getloadavg()) + " (1/5/15 min)"
    except (AttributeError, OSError):
        return "unknown"


def core_round_trip_text() -> str:
    """The time a cache line takes between two of the kernels' threads and back: where the
    two cores share no cache it is several times as long, and every algorithm that passes
    data between its threads runs slower (Winograd's shared blocks, im2col's shared
    panels), so a run's figures depend on it."""
    from convlab.strategies.kernels._runtime import core_round_trip

    seconds = core_round_trip()
    if seconds is None:
        return "core-to-core round trip: not measured (two threads could not run at once)"
    return f"core-to-core round trip {seconds * 1e6:.3f} us"


def command_line() -> str:
    argv = getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv]
    return " ".join(shlex.quote(a) for a in argv)


def extra_columns(contenders) -> str:
    text = ""
    value = regret(contenders)
    if value is not None:
        text += f" | regret {value:5.2f} (best {fastest(contenders)})"
    value = rechecked_regret(contenders, "auto")
    if value is not None:
        text += f" | rechecked {value:5.2f}"
    value = plan_regret(contenders)
    if value is not None:
        text += f" | plan/best {value[0]:5.2f} (best {value[1]}; plan runs {value[2]})"
    value = rechecked_regret(contenders, "plan")
    if value is not None:
        text += f" | rechecked {value:5.2f}"
    value = first_call_ratio(contenders)
    if value is not None:
        text += f" | first call {value:5.1f}x"
    value = ort_over_plan(contenders)
    if value is not None:
        text += f" | ort/plan {value:5.2f}x"
    value = im2col_over_matmul(contenders)
    if value is not None:
        text += f" | im2col/matmul {value:4.0%}"
    return text


def _regret_lines(results, names, admissible_only: bool) -> list[str]:
    """The suite's auto regret and plan regret lines."""
    lines = []
    regrets = [(regret(cs, admissible_only), name) for name, (_, cs) in zip(names, results)]
    regrets = [(r, name) for r, name in regrets if r is not None]
    if regrets:
        worst, where = max(regrets)
        right = sum(1 for r, _ in regrets if r <= 1.05)
        lines.append(f"auto regret (auto time / fastest algorithm's time): geo-mean "
                     f"{geo_mean([r for r, _ in regrets]):.3f}, worst {worst:.2f} ({where}); "
                     f"within 5% of the fastest on {right}/{len(regrets)} layers")
    lines += _rechecked_line(results, names, "auto", admissible_only, 1.05,
                             "auto and the fastest algorithms timed again after the "
                             "rounds, sharing blocks; medians of the rounds and the "
                             "recheck together")
    lines += _per_layer_line(
        results, names, lambda cs: auto_choice_regret(cs, admissible_only), 1.05,
        "auto choice (the algorithm auto runs, timed one-shot on its own / the fastest "
        "algorithm's time)")
    plans = [(plan_regret(cs, admissible_only), name) for name, (_, cs) in zip(names, results)]
    plans = [(r, name) for r, name in plans if r is not None]
    if plans:
        worst, where = max(plans, key=lambda item: item[0][0])
        against = ("the fastest forced plan's (plan:<name>)"
                   if any(r[1].startswith(FORCED_PLAN) for r, _ in plans)
                   else "the fastest one-shot algorithm's")
        lines.append(f"plan regret (plan time after its first call / {against} time): "
                     f"geo-mean {geo_mean([r[0] for r, _ in plans]):.3f}, worst "
                     f"{worst[0]:.2f} ({where}, best {worst[1]}, plan runs {worst[2]}); "
                     f"within 10% on {sum(r[0] <= 1.10 for r, _ in plans)}/{len(plans)} "
                     f"layers")
    lines += _rechecked_line(results, names, "plan", admissible_only, 1.10,
                             "the plan and the fastest forced plans timed again after the "
                             "rounds, in blocks taking turns; medians of the rounds and "
                             "the recheck together")
    lines += _per_layer_line(
        results, names, lambda cs: plan_choice_regret(cs, admissible_only), 1.10,
        "plan choice (the forced plan of the algorithm the plan runs / the fastest forced "
        "plan's time)")
    return lines


def _rechecked_line(results, names, pseudo: str, admissible_only: bool, bound: float,
                    how: str) -> list[str]:
    """The suite's rechecked regret of ``pseudo`` ("auto" or "plan"), or no line."""
    return _per_layer_line(results, names,
                           lambda cs: rechecked_regret(cs, pseudo, admissible_only), bound,
                           f"{pseudo} regret rechecked ({how})")


def _per_layer_line(results, names, ratio, bound: float, title: str) -> list[str]:
    """``title``, then the geo-mean and worst of ``ratio(contenders)`` over the layers
    where it has a value, and on how many it is at most ``bound``; no line where none has."""
    found = [(ratio(cs), name) for name, (_, cs) in zip(names, results)]
    found = [(r, name) for r, name in found if r is not None]
    if not found:
        return []
    worst, where = max(found)
    return [f"{title}: geo-mean {geo_mean([r for r, _ in found]):.3f}, worst {worst:.2f} "
            f"({where}); within {bound - 1:.0%} on {sum(r <= bound for r, _ in found)}/"
            f"{len(found)} layers"]


def selection_summary(results, names) -> list[str]:
    """How good auto's choice was over the suite, and plan against ONNX Runtime."""
    lines = _regret_lines(results, names, admissible_only=False)
    excluded = sorted({c.label for _, cs in results for c in cs
                       if not c.admissible and c.median is not None})
    if excluded:
        lines.append(f"against only the algorithms auto may choose on each layer at "
                     f"precision='default' (not: {', '.join(excluded)} where excluded):")
        lines += ["  " + line for line in _regret_lines(results, names, admissible_only=True)]
    twins = [(plan_twin_ratio(cs), name) for name, (_, cs) in zip(names, results)]
    twins = [(r, name) for r, name in twins if r is not None]
    if twins:
        (low, low_at), (high, high_at) = min(twins), max(twins)
        apart = sum(max(r, 1 / r) > 1.10 for r, _ in twins)
        lines.append(f"plan / its twin (plan:<the algorithm it runs>: the same code in other "
                     f"blocks, so the spread is this run's noise): geo-mean "
                     f"{geo_mean([r for r, _ in twins]):.3f}, from {low:.2f} ({low_at}) to "
                     f"{high:.2f} ({high_at}); more than 10% apart on {apart}/{len(twins)} "
                     f"layers")
    firsts = [(first_call_ratio(cs), name, layer,
               next((c for c in cs if c.label == "plan"), None))
              for name, (layer, cs) in zip(names, results)]
    firsts = [f for f in firsts if f[0] is not None]
    if firsts:
        highest = max(firsts, key=lambda f: f[0])
        first_total = sum(p.first_call * layer.multiplicity for _, _, layer, p in firsts)
        later_total = sum(p.median * layer.multiplicity for _, _, layer, p in firsts)
        lines.append(f"plan first call / later call: geo-mean "
                     f"{geo_mean([f[0] for f in firsts]):.1f}x, "
                     f"highest {highest[0]:.1f}x ({highest[1]}); over the network (one plan "
                     f"per occurrence) first calls {first_total * 1e3:.1f} ms against "
                     f"{later_total * 1e3:.1f} ms a later pass")
    ratios = [ort_over_plan(cs) for _, cs in results]
    ratios = [r for r in ratios if r is not None]
    if ratios:
        lines.append(f"plan vs ONNX Runtime session (onnxrt time / plan time): geo-mean "
                     f"{geo_mean(ratios):.2f}x, lowest {min(ratios):.2f}x")
    best = [(best_family_ratio(cs, "winograd"), name) for name, (_, cs) in zip(names, results)]
    best = [(ratio, name) for ratio, name in best if ratio is not None]
    if best:
        lowest, where = min(best)
        lines.append(f"best Winograd tile against torch (torch time / best winograd* time): "
                     f"geo-mean {geo_mean([r for r, _ in best]):.2f}x, lowest {lowest:.2f}x "
                     f"({where}), over {len(best)} layers")
    shares = [(im2col_over_matmul(cs), name, layer.flops() >= GEMM_BOUND_MIN_FLOPS)
              for name, (layer, cs) in zip(names, results)]
    shares = [share for share in shares if share[0] is not None]
    if shares:
        lines.append("im2col rate / NumPy matmul rate on the same-sized GEMM: "
                     + gemm_share_summary(shares))
    return lines


def gemm_share_summary(shares) -> str:
    """``shares``: (im2col rate / matmul rate, layer, GEMM-bound?) per layer; the geo-mean
    and lowest over all of them, then over the GEMM-bound ones only."""
    def over(subset):
        lowest, where, _ = min(subset)
        return (f"geo-mean {geo_mean([s for s, _, _ in subset]):.0%}, lowest {lowest:.0%} "
                f"({where}), below 70% on {sum(s < 0.7 for s, _, _ in subset)}")
    bound = [share for share in shares if share[2]]
    text = f"{over(shares)} of {len(shares)} layers"
    if bound:
        text += (f"; GEMM-bound layers (at least {GEMM_BOUND_MIN_FLOPS / 1e6:g} MFLOP): "
                 f"{over(bound)} of {len(bound)}")
    return text


def torch_ratio(torch_contender: Contender | None, contender: Contender) -> float | None:
    if torch_contender is None or torch_contender.median is None or contender.median is None:
        return None
    return torch_contender.median / contender.median


@dataclass
class Layout:
    name: int  # width of the layer-name column
    rates: list[int]  # width of each GFLOP/s column
    ratios: list[int]  # width of each torch-ratio column


def row(name, count, work, layout, rates, ratios, marks=None) -> str:
    marks = marks or [""] * len(rates)
    text = f"{name:<{layout.name}} {count:>3} {work:>8} | " + " ".join(
        fmt_rate(rate, w, mark) for rate, w, mark in zip(rates, layout.rates, marks))
    if ratios:
        text += " | " + " ".join(fmt_ratio(r, w) for r, w in zip(ratios, layout.ratios))
    return text


def summary_rows(results, labels, ratio_labels, layout) -> list[str]:
    """Geo-means over layers, and network totals that count each layer ``multiplicity``
    times (only when a contender ran every layer, else the total would not compare)."""
    def contender(cs, label):
        return next(c for c in cs if c.label == label)

    geo, totals = [], []
    for label in labels:
        runs = [(layer, contender(cs, label).median) for layer, cs in results]
        geo.append(geo_mean([layer.flops() / t / 1e9 for layer, t in runs if t]))
        if all(t for _, t in runs):
            work = sum(layer.flops() * layer.multiplicity for layer, _ in runs)
            totals.append(work / sum(t * layer.multiplicity for layer, t in runs) / 1e9)
        else:
            totals.append(None)
    geo_ratio, total_ratio = [], []
    for label in ratio_labels:
        runs = [(layer, contender(cs, "torch").median, contender(cs, label).median)
                for layer, cs in results]
        geo_ratio.append(geo_mean([tt / tc for _, tt, tc in runs if tt and tc]))
        complete = all(tt and tc for _, tt, tc in runs)
        total_ratio.append(sum(tt * layer.multiplicity for layer, tt, _ in runs)
                           / sum(tc * layer.multiplicity for layer, _, tc in runs)
                           if complete else None)
    occurrences = sum(layer.multiplicity for layer, _ in results)
    work = sum(layer.flops() * layer.multiplicity for layer, _ in results) / 1e9
    seconds = network_seconds(results)
    return [row("geo-mean over layers", "", "", layout, geo, geo_ratio),
            row("network total (xN)", f"{occurrences}", f"{work:.3g}", layout, totals,
                total_ratio),
            row("network time, ms (xN)", f"{occurrences}", "", layout,
                [None if seconds.get(label) is None else seconds[label] * 1e3
                 for label in labels], [])]


def network_summary(results) -> list[str]:
    """Network times (each layer's median x its multiplicity, summed) per contender, the
    fastest algorithm per layer's, and the torch/convlab and onnxrt/plan ratios of them,
    each with its range over the rounds of blocks (round_ratio_range)."""
    seconds = network_seconds(results)
    complete = {label: t for label, t in seconds.items() if t is not None}
    parts = [f"{label} {t * 1e3:.2f} ms" for label, t in complete.items()]
    best = fastest_seconds(results, is_algorithm)
    if best is not None:
        parts.append(f"fastest algorithm per layer {best * 1e3:.2f} ms")
    best_plan = fastest_seconds(results, lambda c: c.label.startswith(FORCED_PLAN))
    if best_plan is not None:
        parts.append(f"fastest forced plan per layer {best_plan * 1e3:.2f} ms")
    missing = [label for label, t in seconds.items() if t is None]
    lines = ["network time (each layer's median x its multiplicity, summed): "
             + ", ".join(parts) + (f"; no total for {', '.join(missing)} (not run on every "
                                   f"layer)" if missing else "")]
    ratios = []
    for peer, mine in [("torch", label) for label in complete if label not in
                       ("torch", "onnxrt", "matmul")] + [("onnxrt", "plan")]:
        if peer in complete and mine in complete and complete[mine] > 0:
            spread = round_ratio_range(results, peer, mine)
            ratios.append(f"{peer}/{mine} {complete[peer] / complete[mine]:.2f}x"
                          + ("" if spread is None else
                             f" ({spread[0]:.2f}-{spread[1]:.2f})"))
    if ratios:
        lines.append("network time ratios (above 1: convlab faster; in parentheses the "
                     "range over rounds, each round's medians alone): " + ", ".join(ratios))
    return lines


def write_csv(path, args, threads, results) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["suite", "layer", "multiplicity", "mb", "rank", "descriptor",
                         "gflop", "threads", "contender", "median_ms", "min_ms", "gflops",
                         "torch_time_over_this", "check_error", "check_ok", "not_run_reason",
                         "first_call_ms", "runs", "auto_may_choose",
                         "median_with_auto_recheck_ms", "median_with_plan_recheck_ms",
                         "first_call_timed_ms"])
        for layer, contenders in results:
            torch_run = next((c for c in contenders if c.label == "torch"), None)
            for c in contenders:
                t = c.median
                ratio = torch_ratio(torch_run, c)
                writer.writerow([
                    args.suite, layer.name, layer.multiplicity, layer.mb, layer.rank,
                    layer.canonical(), f"{layer.flops() / 1e9:.6f}", threads, c.label,
                    "" if t is None else f"{t * 1e3:.4f}",
                    "" if not c.times else f"{min(c.times) * 1e3:.4f}",
                    "" if t is None else f"{layer.flops() / t / 1e9:.3f}",
                    "" if ratio is None else f"{ratio:.4f}",
                    "" if c.error is None else f"{c.error:.3e}", c.ok, c.why_not,
                    "" if c.first_call is None else f"{c.first_call * 1e3:.4f}", c.runs,
                    c.admissible if c.kind == "convlab" and c.label != "auto"
                    and c.label != "plan" else "",
                    *(_ms(pooled_median(c, pseudo)) for pseudo in ("auto", "plan")),
                    _first_call_timed(c)])


def _first_call_timed(contender) -> str:
    """A plan's first-call timings, "name=ms" (each contender's fastest run) joined by
    ";", fastest first: what its choice rested on."""
    m = contender.measurement
    if m is None or not m.seconds:
        return ""
    return ";".join(f"{name}={seconds * 1e3:.4f}"
                    for name, seconds in sorted(m.seconds.items(), key=lambda i: i[1]))


def _ms(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds * 1e3:.4f}"
