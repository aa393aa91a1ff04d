"""Describing a convolution: the arguments turned into one frozen :class:`ConvProblem`
(:mod:`convlab.problem.params`) and the oneDNN benchdnn layer shapes
(:mod:`convlab.problem.shapes`)."""
