"""convlab on Dask arrays: convolutions larger than one machine's time or memory.

``convlab.dask.convolve(src, weights, bias=None, **kwargs)`` takes the arguments of
:func:`convlab.convolve` with a ``dask.array.Array`` src and returns a lazy
``dask.array.Array``; docs/dask.md has the design, the thread recipe and a zarr example.
Needs the optional extra: ``pip install "convlab[dask]"``. Importing ``convlab`` alone
never imports Dask.
"""
from __future__ import annotations

from convlab.dask._graph import convolve

__all__ = ["convolve"]
