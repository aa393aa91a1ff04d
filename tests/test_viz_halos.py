"""convlab.viz.halos reads what each task of a convlab.dask graph receives; its figures
draw it and its exercise checkers grade answers against it."""
from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")

import convlab.dask  # noqa: E402
from convlab.viz import halos  # noqa: E402

# the tutorial's example: strided, dilated, asymmetric pads, uneven chunks
K, S, D, P_B = (3, 3), (2, 1), (2, 3), (2, 3)
ATTRIBUTES = dict(strides=S, dilations=D, pads_begin=P_B, pads_end=(1, 3))


@pytest.fixture(scope="module")
def halo_map():
    src = da.zeros((1, 24, 20, 1), chunks=(1, (7, 9, 8), (6, 8, 6), 1))
    dst = convlab.dask.convolve(src, np.ones((*K, 1, 1)), **ATTRIBUTES)
    return halos.chunk_fields(src, dst)


def test_each_chunk_receives_its_windows_clipped_to_the_array(halo_map):
    assert halo_map.output_chunks == ((4, 4, 4), (6, 8, 6))
    assert halo_map.tasks["convolution"] == 9
    for index, field in halo_map.fields.items():
        for axis, extent in enumerate((24, 20)):
            o0, o1 = field.outputs[axis]
            start = o0 * S[axis] - P_B[axis]
            stop = (o1 - 1) * S[axis] + (K[axis] - 1) * D[axis] + 1 - P_B[axis]
            assert field.span(axis) == (max(0, start), min(extent, stop)), (index, axis)
            assert field.rows(axis) == list(range(*field.span(axis)))


def test_halos_per_axis_and_side(halo_map):
    assert [halo_map.halo((b, 0), 0) for b in range(3)] == [(0, 2), (1, 1), (2, 0)]
    assert [halo_map.halo((0, b), 1) for b in range(3)] == [(0, 3), (3, 3), (3, 0)]
    assert halo_map.fields[(1, 1)].blocks() == {(r, c) for r in range(3) for c in range(3)}


def test_neighbours_arrive_in_slabs_never_whole(halo_map):
    for index, field in halo_map.fields.items():
        for piece in field.pieces:
            if piece.block == index:
                continue
            assert piece.slab is not None, (index, piece)
            thin = [a for a in range(2) if piece.slab[a] != (0, halo_map.input_chunks[a]
                                                              [piece.block[a]])]
            assert len(thin) == 1, piece.slab


def test_rows_checker(halo_map):
    right = halos.check_rows(halo_map, (2, 1), 0, 10)
    assert right.right and str(right).startswith("right:") and "14..15" in right.reason
    off_by_one = halos.check_rows(halo_map, (2, 1), 0, 11)
    assert not off_by_one.right and "Off by one" in off_by_one.reason
    outputs = halos.check_rows(halo_map, (2, 1), 0, 4)
    assert not outputs.right and "number of outputs" in outputs.reason
    assert not halos.check_rows(halo_map, (2, 1), 0, "ten").right
    unanswered = halos.check_rows(halo_map, (2, 1), 0, ...)
    assert not unanswered.right and unanswered.label == "no answer yet"


def test_halo_checker(halo_map):
    assert halos.check_halo(halo_map, (1, 2), 1, (3, 0)).right
    swapped = halos.check_halo(halo_map, (1, 2), 1, (0, 3))
    assert not swapped.right and "swapped" in swapped.reason
    symmetric = halos.check_halo(halo_map, (1, 2), 1, (3, 3))
    assert not symmetric.right and "not symmetric" in symmetric.reason
    assert not halos.check_halo(halo_map, (1, 2), 1, 3).right
    assert halos.check_halo(halo_map, (1, 1), 0, [1, 1]).right


def test_blocks_checker(halo_map):
    expected = {(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)}
    assert halos.check_blocks(halo_map, (0, 1), expected).right
    missing = halos.check_blocks(halo_map, (0, 1), {(0, 1), (1, 1)})
    assert not missing.right and "also reads (0, 0)" in missing.reason
    extra = halos.check_blocks(halo_map, (0, 1), expected | {(2, 1)})
    assert not extra.right and "does not read (2, 1)" in extra.reason
    assert not halos.check_blocks(halo_map, (0, 1), 5).right


def test_a_circular_chunk_reads_the_far_end():
    src = da.zeros((1, 24, 20, 1), chunks=(1, (7, 9, 8), (6, 8, 6), 1))
    dst = convlab.dask.convolve(src, np.ones((*K, 1, 1)), padding_mode="circular",
                                **ATTRIBUTES)
    corner = halos.chunk_fields(src, dst).fields[(0, 0)]
    assert (2, 2) in corner.blocks()
    assert (22, 24) in {piece.intervals[0] for piece in corner.pieces}


def test_figures(halo_map):
    pytest.importorskip("matplotlib")
    figure = halos.plot_chunk_fields(halo_map, [(1, 1), (0, 0)])
    assert len(figure.axes) == 2
    assert len(halos.plot_axis_halos(halo_map, 0).axes) == 1
    with pytest.raises(ValueError, match="2-D"):
        src = da.zeros((1, 8, 8, 8, 1), chunks=4)
        dst = convlab.dask.convolve(src, np.ones((3, 3, 3, 1, 1)))
        halos.plot_chunk_fields(halos.chunk_fields(src, dst), [(0, 0, 0)])
