"""The command line and the benchmark harness.

* :mod:`convlab.cli.main`: ``python -m convlab <command>`` (``demo``, ``explain``, ``bench``,
  ``calibrate``);
* :mod:`convlab.cli.benchmark`: ``python -m convlab bench``, the per-layer timings against
  PyTorch and ONNX Runtime (docs/benchmarks.md);
* :mod:`convlab.cli.demo`: ``python -m convlab demo``.
"""
