"""Where "auto" picks fft, over every shipped suite (estimates only, nothing is timed).

    python bench/fft_auto_picks.py       # writes bench/results/fft_auto_picks_<date>.txt

For each suite, batch 1 and 8, 1 and 2 threads, one-shot calls and plans (prepared
weights): the layers auto runs fft on, with their kernel.
"""
from __future__ import annotations

import datetime
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from convlab.dispatch import cost_model, select  # noqa: E402
from convlab.problem import shapes  # noqa: E402


def main():
    date = datetime.date.today().isoformat()
    lines = [f"# layers auto runs fft on ({date}; constants: {cost_model.describe_constants(2)})",
             ""]
    for suite in shapes.suites():
        picked = []
        for mb in (1, 8):
            for layer in shapes.load_suite(suite, mb=mb):
                problem = layer.problem()
                for threads in (1, 2):
                    for prepared in (False, True):
                        if select.choose(problem, threads, prepared=prepared) == "fft":
                            picked.append(f"  mb{mb} t{threads} {'plan' if prepared else 'call'} "
                                          f"{layer.name} (kernel "
                                          f"{'x'.join(map(str, problem.kernel_shape))})")
        lines.append(f"{suite}: {len(picked)} picks")
        lines += picked
    out = HERE / "results" / f"fft_auto_picks_{date}.txt"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
