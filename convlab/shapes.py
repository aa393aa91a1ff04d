"""oneDNN benchdnn layer shapes: :mod:`convlab.problem.shapes`, under the name the
documentation uses."""
from convlab.problem.shapes import Layer, load_suite, parse_descriptor, parse_lines, suites

__all__ = ["Layer", "load_suite", "parse_descriptor", "parse_lines", "suites"]
