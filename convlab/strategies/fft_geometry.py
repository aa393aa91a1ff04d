"""The geometry of fft's overlap-save tiles that both of its pipelines share."""
from __future__ import annotations

import numpy as np


def stretched_kernel(problem) -> tuple[int, ...]:
    """Ke per axis: the dilated kernel's extent, (K - 1) * D + 1."""
    return tuple((k - 1) * d + 1 for k, d in zip(problem.kernel_shape, problem.dilations))


def whole_axis_length(problem, axis: int) -> int:
    """The shortest transform length that holds every output of ``axis`` in one tile.

    The tile reads padded positions [0, (O - 1) * S + Ke), of which only [A, B) hold src
    (A = max(P_b, 0), B = min(P_b + I, (O - 1) * S + Ke)). The circular correlation of
    length L is exact at the kept positions q * S < L as long as no src position aliases
    onto another tap's: L >= max(B, (O - 1) * S + Ke - A). So the padding saves length: a
    14x14 image under a 27x27 kernel with 'same' pads needs 27, not 40.
    """
    extent = stretched_kernel(problem)[axis]
    span = (problem.output_shape[axis] - 1) * problem.strides[axis] + extent
    begin = max(problem.pads_begin[axis], 0)
    end = min(problem.pads_begin[axis] + problem.input_shape[axis], span)
    # the kept positions themselves must fit in the tile
    return max(end, span - begin, (problem.output_shape[axis] - 1) * problem.strides[axis] + 1)


def candidate_grid(axes: list[list[tuple[int, int]]]) -> tuple[np.ndarray, np.ndarray]:
    """Every combination of the axes' (transform length, outputs per tile) candidates, in
    ``itertools.product`` order: the lengths and the outputs, one row per combination."""
    grids = np.meshgrid(*[np.arange(len(c)) for c in axes], indexing="ij")
    picks = [grid.ravel() for grid in grids]
    columns = [np.array(c, dtype=np.int64)[pick] for c, pick in zip(axes, picks)]
    return (np.stack([c[:, 0] for c in columns], axis=1),
            np.stack([c[:, 1] for c in columns], axis=1))
