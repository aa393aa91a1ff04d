"""Arguments to one frozen ``ConvProblem``, and the canonical layouts.

The documented import path of :mod:`convlab.problem.params`, which it re-exports."""
from convlab.problem.params import *  # noqa: F403  (all of it, as listed in its __all__)
from convlab.problem.params import __all__  # noqa: F401
