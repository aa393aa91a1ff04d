"""A one-shot call's exact argument signature (see :mod:`convlab.ops._decided`).

Compiled because every repeated ``convolve`` call computes one before anything else: on
a layer of a few kflop the interpreted type checks took about a tenth of the call.
"""
import numpy as np

cdef type ndarray = np.ndarray


cdef inline bint _plain(object value):
    """None, an exact str or int, or a tuple of exact ints."""
    cdef type kind = type(value)
    if value is None or kind is int or kind is str:
        return True
    if kind is not tuple:
        return False
    for item in <tuple>value:
        if type(item) is not int:
            return False
    return True


def signature(src, weights, bias, tuple attributes, algorithm, threads, precision):
    """The call's exact signature, or None when some argument is not plain enough to
    stand for itself in one (the call then decides everything as usual).

    Only exact builtin types enter: ``True == 1`` and ``2.0 == 2`` hash alike, yet a
    bool or float attribute must still reach the validation that refuses it."""
    if type(src) is not ndarray or type(weights) is not ndarray:
        return None
    if bias is None:
        bias_key = None
    elif type(bias) is ndarray:
        bias_key = (bias.shape, bias.dtype)
    else:
        return None
    for value in attributes:
        if not _plain(value):
            return None
    if type(algorithm) is not str or type(precision) is not str:
        return None
    return (src.shape, src.dtype, weights.shape, weights.dtype, bias_key, attributes,
            algorithm, threads, precision)
