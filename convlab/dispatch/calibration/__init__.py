"""Fitting the selector's cost constants to the machine convlab runs on.

* :mod:`convlab.dispatch.calibration.fit`: the fit itself (NNLS on relative error per algorithm,
  selection margins by in-sample regret), shared by :func:`convlab.calibrate` and
  ``bench/fit_cost_model.py``.
* :mod:`convlab.dispatch.calibration.design`: the problems a calibration times, chosen so that
  every term of every algorithm's cost hook carries weight in some of them.
* :mod:`convlab.dispatch.calibration.store`: the files constants live in (shipped per ISA level,
  calibrated per machine in the user's cache directory) and the checks a file must pass.
* :mod:`convlab.dispatch.calibration.run`: :func:`convlab.calibrate`, which times the design
  within a wall-time budget, fits and stores the result.

This package imports nothing heavy at import time: :mod:`convlab.dispatch.cost_model` reads the
store while the strategies register themselves.
"""
