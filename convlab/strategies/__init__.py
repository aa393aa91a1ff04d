"""Built-in algorithms (strategies). Importing this package registers them, in this order."""
from convlab.strategies import reference, direct, im2col, winograd, fft  # noqa: F401  # isort: skip
