"""``python -m convlab bench`` with direct's per-pass weight copy set to another copy group
and prefetch distance (``_direct.set_copy_group``), for an A/B in the bench's own harness:

    python bench/bench_copy_group.py 0 0 --threads 2 --suite resnet_50 --mb 1 \\
        --algorithms direct,im2col --layers res5a_branch2b,res5a_branch1
"""
from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from convlab.cli.main import main  # noqa: E402
from convlab.strategies.kernels import _direct  # noqa: E402

if __name__ == "__main__":
    _direct.set_copy_group(int(sys.argv[1]), int(sys.argv[2]))
    sys.exit(main(["bench", *sys.argv[3:]]))
