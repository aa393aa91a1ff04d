"""Replay a plan's first-call turns under another rule, against the forced plans' medians.

    python bench/plan_rule_replay.py --suite resnet_50 \\
        --layers res2a_branch1,res2a_branch2b,res5a_branch2b --repeats 4

A plan's first call (``convlab.dispatch.measure``) times its close contenders in rounds of
turns and keeps the contender with the fastest run. This script runs each layer as
``python -m convlab bench`` does (``bench_layer``: mixed schedule, PyTorch and ONNX Runtime
loaded and timed when installed, every forced plan ``plan:<name>`` in blocks of its own),
records the fastest run of every turn the plan's first call took, and prints which
contender two rules keep on those same turns:

* fastest run: the contender whose fastest run is the lowest (the rule plans use);
* paired rounds: the lowest median over rounds of (the contender's turn / the round's
  fastest turn), a rule a slow spell spanning several runs should disturb less;
* turn median: the lowest median over the contender's turns of each turn's fastest run,
  a rule one lucky turn cannot decide (on an AMD EPYC of family 26, ResNet-50
  res5a_branch2b's winograd4 plan ran 0.59-1.9 ms within one first call);

each as the forced plan of its pick over the fastest forced plan (1.00: the pick was the
fastest), and their means over the layers and repeats.
"""
from __future__ import annotations

import math
import statistics

from convlab.cli import benchmark
from convlab.cli._bench_args import layer_script_parser, select_layers
from convlab.problem import shapes

PLANS = ("direct", "im2col", "winograd2", "winograd4", "winograd6")


def rule_picks(turns: list[tuple[str, float]]) -> tuple[str, str, str] | None:
    """(fastest-run pick, paired-rounds pick, turn-median pick) from the (contender, turn's
    fastest run) list in the order the turns ran; None with fewer than two contenders."""
    names = list(dict.fromkeys(name for name, _ in turns))
    if len(names) < 2:
        return None
    fastest = {name: min(t for n, t in turns if n == name) for name in names}
    count = len(names)
    rounds = [dict(turns[i:i + count]) for i in range(0, len(turns) - count + 1, count)]
    score = {name: statistics.median(r[name] / min(r.values()) for r in rounds if name in r)
             for name in names}
    turn_median = {name: statistics.median(t for n, t in turns if n == name)
                   for name in names}
    return (min(fastest, key=fastest.__getitem__),
            min(score, key=lambda name: (score[name], fastest[name])),
            min(turn_median, key=lambda name: (turn_median[name], fastest[name])))


def main(argv=None) -> None:
    parser = layer_script_parser(__doc__.splitlines()[0], rounds=7, layers_required=True)
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args(argv)
    layers = select_layers(shapes.load_suite(args.suite, mb=1), args.layers)
    torch = benchmark._try_import("torch")
    onnx, ort = benchmark._try_import("onnx"), benchmark._try_import("onnxruntime")
    algorithms = ["direct", "im2col", "auto", "plan"] + [
        f"plan:{name}" for name in PLANS]
    ratios: dict[str, list[float]] = {"fastest run": [], "paired rounds": [],
                                      "turn median": []}
    for repeat in range(args.repeats):
        for index, layer in enumerate(layers):
            # repeats equal to rounds: one block per contender and round, as the bench
            # commands in docs/benchmarks.md run it
            contenders = benchmark.bench_layer(
                layer, algorithms, args.threads, args.rounds, 1, torch, onnx, ort,
                seed=index + repeat, schedule="mixed", rounds=args.rounds,
                min_block_seconds=0.1)
            forced = {c.label[len("plan:"):]: c.median for c in contenders
                      if c.label.startswith("plan:") and c.median}
            measurement = next((c.measurement for c in contenders if c.label == "plan"),
                               None)
            turns = [] if measurement is None else [(name, min(runs)) for name, runs
                                                    in measurement.turns]
            picks = rule_picks(turns)
            if picks is None or not forced:
                continue
            best = min(forced.values())
            cells = []
            for rule, pick in zip(ratios, picks):
                ratio = forced.get(pick, math.inf) / best
                ratios[rule].append(ratio)
                cells.append(f"{rule} {pick} {ratio:.2f}")
            medians = " ".join(f"{name} {seconds * 1e6:.0f}" for name, seconds
                               in sorted(forced.items(), key=lambda item: item[1]))
            print(f"{layer.name}: {' | '.join(cells)} | forced plans (us) {medians}",
                  flush=True)
    for rule, values in ratios.items():
        if values:
            kept = sum(value <= 1.0 for value in values)
            print(f"{rule}: mean {statistics.fmean(values):.3f}, worst {max(values):.2f}, "
                  f"the fastest forced plan's algorithm kept {kept}/{len(values)}")


if __name__ == "__main__":
    main()
