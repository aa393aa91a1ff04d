"""How often a plan's first call keeps an algorithm that blocks timed right after say is
more than 10% slower, and how often those blocks disagree among themselves.

    python bench/plan_pick_stability.py --suite resnet_50 \\
        --layers res2a_branch1,res2a_branch2a --repeats 12

For each repeat and layer: a new plan (``convlab.Convolution``, ``choose="measure"``)
makes its first call and keeps the contender its timings favour; then the forced plans
of the contenders it timed run in alternating blocks of their own (``--rounds`` rounds,
each block at least ``--min-block-time`` seconds, the order reversed every other round),
as ``python -m convlab bench`` times them. Printed per repeat: the first call's timings
and pick, the blocks' medians, and the pick's forced plan over the fastest. A *flip* is a
round whose fastest block belongs to another contender than the fastest over all rounds:
on a machine whose state moves the contenders apart, no first call can keep the
fastest every time.

The same first call's turns are also scored by a second rule, *settled median*: each
contender's median run without the first run of each of its turns (the one that inherits
the previous contender's caches), against the plans' rule, each contender's fastest run. A
contender whose calls spread wide has a fast best run and a slow typical one, and the
blocks, like a program's calls, read the typical one.
"""
from __future__ import annotations

import statistics

import convlab
from convlab.cli._bench_args import layer_script_parser, select_layers
from convlab.problem import shapes
from convlab.runtime import cpu, timing

BOUND = 1.10  # a pick this much slower than the fastest forced plan misses


def settled_median_pick(turns) -> str | None:
    """The contender with the lowest median run over its turns' runs after each turn's
    first (all its runs where no turn had a second); None with fewer than two contenders."""
    names = list(dict.fromkeys(name for name, _ in turns))
    if len(names) < 2:
        return None

    def score(name):
        runs = [t for n, turn in turns if n == name for t in turn]
        later = [t for n, turn in turns if n == name for t in turn[1:]]
        return statistics.median(later or runs)

    return min(names, key=score)


def one_repeat(layer, threads: int, rounds: int, min_seconds: float, seed: int):
    """(the plan's measurement, {contender: per-round block medians}) on one layer."""
    src, weights, _ = layer.arrays(seed=seed)
    kwargs = layer.convolve_kwargs()
    plan = convlab.Convolution(weights, threads=threads, **kwargs)
    plan(src)
    measurement = plan.explain(src).measurement
    timed = sorted(measurement.seconds) if measurement is not None else []
    forced = {name: convlab.Convolution(weights, threads=threads, algorithm=name, **kwargs)
              for name in timed}
    blocks: dict[str, list[float]] = {name: [] for name in timed}
    for round_index in range(rounds):
        for name in timed if round_index % 2 == 0 else timed[::-1]:
            # at least five calls, as many as fill min_seconds; no idle pause first, as
            # the blocks follow each other back to back
            times = timing.time_block(lambda: forced[name](src), 5, pause=0.0,
                                      min_seconds=min_seconds, quiet=False)
            blocks[name].append(statistics.median(times))
    return measurement, blocks


def flips(blocks: dict[str, list[float]]) -> int:
    """Rounds whose fastest block is not the contender fastest over all rounds."""
    overall = min(blocks, key=lambda name: statistics.median(blocks[name]))
    rounds = len(next(iter(blocks.values())))
    return sum(min(blocks, key=lambda name: blocks[name][index]) != overall
               for index in range(rounds))


def main(argv=None) -> None:
    parser = layer_script_parser(__doc__.splitlines()[0], rounds=5, layers_required=True)
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--min-block-time", type=float, default=0.1)
    args = parser.parse_args(argv)
    layers = select_layers(shapes.load_suite(args.suite, mb=1), args.layers)
    print(f"cpu: {cpu.summary()}; {args.threads} threads")
    regrets: dict[str, list[float]] = {layer.name: [] for layer in layers}
    settled: dict[str, list[float]] = {layer.name: [] for layer in layers}
    flipped: dict[str, list[int]] = {layer.name: [] for layer in layers}
    for repeat in range(args.repeats):
        for index, layer in enumerate(layers):
            measurement, blocks = one_repeat(layer, args.threads, args.rounds,
                                             args.min_block_time, seed=index + repeat)
            if measurement is None or len(blocks) < 2:
                print(f"{layer.name}: one contender, nothing timed")
                continue
            medians = {name: statistics.median(times) for name, times in blocks.items()}
            regret = medians[measurement.choice] / min(medians.values())
            regrets[layer.name].append(regret)
            other = settled_median_pick(measurement.turns) or measurement.choice
            settled[layer.name].append(medians[other] / min(medians.values()))
            flipped[layer.name].append(flips(blocks))
            first = " ".join(f"{name} {seconds * 1e6:.0f}"
                             for name, seconds in sorted(measurement.seconds.items()))
            later = " ".join(f"{name} {seconds * 1e6:.0f}"
                             for name, seconds in sorted(medians.items()))
            print(f"{layer.name}: first call (us) {first} -> {measurement.choice} | blocks "
                  f"(us) {later} | pick / fastest {regret:.2f} | rounds flipped "
                  f"{flipped[layer.name][-1]}/{args.rounds} | settled median -> {other} "
                  f"{settled[layer.name][-1]:.2f}", flush=True)
    for name, values in regrets.items():
        if values:
            print(f"{name}: pick / fastest mean {statistics.fmean(values):.3f}, worst "
                  f"{max(values):.2f}, beyond {BOUND - 1:.0%} {sum(v > BOUND for v in values)}"
                  f"/{len(values)}; repeats with a flipped round "
                  f"{sum(f > 0 for f in flipped[name])}/{len(values)}")
            other = settled[name]
            print(f"{name}: settled median's pick / fastest mean {statistics.fmean(other):.3f}, "
                  f"worst {max(other):.2f}, beyond {BOUND - 1:.0%} "
                  f"{sum(v > BOUND for v in other)}/{len(other)}")


if __name__ == "__main__":
    main()
