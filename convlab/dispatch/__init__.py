"""Choosing an algorithm for a problem.

Every operation (forward, transposed and 8-bit convolution) has a registry of
:class:`~convlab.dispatch.registry.Algorithm` objects (:mod:`convlab.dispatch.registry`);
:mod:`convlab.dispatch.select` picks the lowest estimate (:mod:`convlab.dispatch.cost_model`,
constants in ``cost_constants/``, fitted by :mod:`convlab.dispatch.calibration`) and explains
the pick; ``"tune"`` times the contenders instead, and a plan may time the close ones
(:mod:`convlab.dispatch.measure`).
"""
