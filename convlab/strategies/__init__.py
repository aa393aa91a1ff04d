"""Built-in algorithms (strategies) and their compiled kernels (``kernels/``). Importing
this package registers the algorithms, in this order."""
from pkgutil import extend_path

# From a source checkout, lets ``convlab.strategies.kernels`` reach the installed copy's
# compiled modules (see convlab/__init__.py).
__path__ = extend_path(__path__, __name__)

from convlab.strategies import reference, direct, im2col, winograd, fft  # noqa: F401  # isort: skip
# the 8-bit registry's algorithms
from convlab.strategies import int8  # noqa: F401  # isort: skip
