"""Coverage-guided fuzzing of one target with atheris (``pip install -e .[fuzz]`` or
``pip install atheris``), from the checkout's root::

    python fuzz/run.py descriptor -max_total_time=600
    python fuzz/run.py --list

The target's seed corpus (tests/data/fuzz/<target>/) is read; new inputs go to
fuzz/corpus/<target>/ (not committed). Other arguments are libFuzzer's. A crash writes
``crash-<hash>`` with the input: add it to the seed corpus once fixed.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fuzz_targets  # noqa: E402


def main(argv) -> None:
    if len(argv) < 2 or argv[1] in ("-h", "--help", "--list"):
        print(__doc__)
        print("targets:", ", ".join(sorted(fuzz_targets.TARGETS)))
        raise SystemExit(0 if len(argv) >= 2 else 2)
    name, libfuzzer_args = argv[1], argv[2:]
    if name not in fuzz_targets.TARGETS:
        raise SystemExit(f"fuzz target {name!r} is not known; expected one of "
                         f"{sorted(fuzz_targets.TARGETS)}")
    import atheris

    with atheris.instrument_imports(include=["convlab", fuzz_targets.TARGETS[name]]):
        one_input = fuzz_targets.load(name)
    corpus = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", name)
    os.makedirs(corpus, exist_ok=True)
    folders = [] if any(not a.startswith("-") for a in libfuzzer_args) else \
        [corpus, fuzz_targets.corpus_dir(name)]
    atheris.Setup([argv[0], *libfuzzer_args, *folders], one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
