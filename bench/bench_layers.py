"""Time convlab's algorithms against PyTorch and ONNX Runtime on real network layers.

    python bench/bench_layers.py --suite resnet_50 --threads 2 --mb 1 --repeats 7

The same as ``python -m convlab bench``, run against the checkout this file lives in
(an in-place build, or the installed kernels through convlab's path extension). See
:mod:`convlab.cli.benchmark` for what is timed and how.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from convlab.cli.benchmark import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
