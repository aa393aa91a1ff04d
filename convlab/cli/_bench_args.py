"""The bench's command line: ``python -m convlab bench`` options, and the layers and
algorithms they select (:mod:`convlab.cli.benchmark`)."""
from __future__ import annotations

import argparse

import convlab
from convlab.cli._args import refuse_empty_values
from convlab.cli._bench_results import FORCED_PLAN, PSEUDO_ALGORITHMS
from convlab.cli._bench_tables import display_names
from convlab.problem import shapes
from convlab.runtime.threads import effective_threads

DESCRIPTION = ("Time convlab's algorithms against PyTorch and ONNX Runtime on real network "
               "layers.")


def check_algorithm_names(names) -> None:
    """``--algorithms``: registered names, "auto", "plan" or "plan:<registered name>"."""
    known = convlab.algorithms()
    unknown = [a for a in names if a not in PSEUDO_ALGORITHMS and a not in known
               and not (a.startswith(FORCED_PLAN) and a[len(FORCED_PLAN):] in known)]
    if unknown:
        raise SystemExit(f"--algorithms: {unknown} not registered; expected "
                         f"{list(PSEUDO_ALGORITHMS)}, names from {known}, or "
                         f"'{FORCED_PLAN}<name>' for a plan forced to one of them")


def parse_args(argv=None, prog=None):
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    parser.add_argument("--suite", default="resnet_50",
                        help=f"benchdnn shape suite, one of {shapes.suites()}")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads per call for every contender (default: convlab's "
                             "effective thread count)")
    parser.add_argument("--mb", type=int, default=1,
                        help="minibatch for every layer (0: the file's own mb)")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per contender")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs per contender")
    parser.add_argument("--rounds", type=int, default=3,
                        help="mixed and blocks schedules: split each contender's runs into "
                             "this many blocks, contenders alternating between blocks")
    parser.add_argument("--min-block-time", type=float, default=0.1,
                        help="mixed and blocks schedules: seconds each block runs at least "
                             "(more runs on small layers)")
    parser.add_argument("--recheck-rounds", type=int, default=5,
                        help="mixed and blocks schedules: after the rounds, time 'auto' "
                             "with the fastest algorithms, and 'plan' with the fastest "
                             "forced plans ('plan:<name>'), again in this many rounds, for "
                             "the 'rechecked' regrets (0: no recheck)")
    parser.add_argument("--algorithms", default=None,
                        help="comma-separated convlab algorithms ('auto' and 'plan' allowed); "
                             "default: every registered one except 'reference', and 'auto'")
    parser.add_argument("--layers", default=None,
                        help="comma-separated layer names, with or without the "
                             "'network:' prefix; default: all")
    parser.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    parser.add_argument("--no-onnxruntime", action="store_true",
                        help="leave ONNX Runtime out")
    parser.add_argument("--schedule", choices=("mixed", "blocks", "interleaved"),
                        default="mixed",
                        help="mixed: convlab's one-shot contenders one call each in turn "
                             "inside shared blocks, plan and each peer library in blocks of "
                             "their own; blocks: each contender's runs back to back, after a "
                             "pause (as in production: one library at a time); interleaved: "
                             "one run each per round, rotating")
    parser.add_argument("--gemm", action="store_true",
                        help="add 'matmul': NumPy's matmul on each layer's same-sized GEMM, "
                             "and im2col's share of its rate")
    parser.add_argument("--csv", default=None,
                        help="also write one row per layer and contender to this path")
    args = parser.parse_args(argv)
    refuse_empty_values(parser, args)
    if args.repeats < 1 or args.warmup < 0 or args.mb < 0 or args.rounds < 1 \
            or args.min_block_time < 0 or args.recheck_rounds < 0:
        parser.error("--repeats and --rounds must be >= 1, --warmup, --mb, "
                     "--min-block-time and --recheck-rounds >= 0")
    return args


def select_layers(layers, spec):
    if not spec:
        return layers
    wanted = {w.strip() for w in spec.split(",") if w.strip()}
    names = display_names(layers)
    chosen = [layer for layer, shown in zip(layers, names)
              if wanted & {layer.name, layer.short_name, shown}]
    found = {n for layer, shown in zip(layers, names)
             for n in (layer.name, layer.short_name, shown)}
    missing = sorted(wanted - found)
    if missing:
        raise SystemExit(f"--layers: {missing} not in this suite; expected names from "
                         f"{names}")
    return chosen


def layer_script_parser(description: str, rounds: int = 6,
                        layers_required: bool = False) -> argparse.ArgumentParser:
    """The options the side-by-side scripts in ``bench/`` share: a suite, some of its
    layers (all by default, unless ``layers_required``), the thread count and the rounds
    of interleaved blocks."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--suite", default="resnet_50")
    parser.add_argument("--layers", default="", required=layers_required,
                        help="comma-separated names" + ("" if layers_required
                                                        else " (default: all)"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=rounds)
    return parser


def configure(args):
    """``(threads, layers, algorithms)`` the parsed arguments ask for; a bad name exits with
    a message."""
    threads = effective_threads(args.threads)
    layers = select_layers(shapes.load_suite(args.suite, mb=args.mb or None), args.layers)
    if args.algorithms:
        algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
        check_algorithm_names(algorithms)
    else:
        algorithms = [a for a in convlab.algorithms() if a != "reference"] + ["auto"]
    return threads, layers, algorithms
