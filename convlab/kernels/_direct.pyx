# cython: language_level=3
"""Direct convolution on canonical layouts (placeholder: simple loops, to be tuned)."""
cimport cython
from cython.parallel cimport prange

ctypedef fused real:
    float
    double


def conv_direct(const real[:, :, :, :, ::1] src, const real[:, :, :, :, :, ::1] weights,
                const real[::1] bias, real[:, :, :, :, ::1] dst,
                strides, dilations, pads_begin, int threads):
    """src (N, ID, IH, IW, IC), weights (G, KD, KH, KW, ICg, OCg), dst (N, OD, OH, OW, OC)."""
    cdef Py_ssize_t N = dst.shape[0], OD = dst.shape[1], OH = dst.shape[2], OW = dst.shape[3]
    cdef Py_ssize_t ID = src.shape[1], IH = src.shape[2], IW = src.shape[3]
    cdef Py_ssize_t G = weights.shape[0], KD = weights.shape[1], KH = weights.shape[2]
    cdef Py_ssize_t KW = weights.shape[3], ICg = weights.shape[4], OCg = weights.shape[5]
    cdef Py_ssize_t sd = strides[0], sh = strides[1], sw = strides[2]
    cdef Py_ssize_t dd = dilations[0], dh = dilations[1], dw = dilations[2]
    cdef Py_ssize_t pd = pads_begin[0], ph = pads_begin[1], pw = pads_begin[2]
    cdef bint has_bias = bias is not None
    cdef Py_ssize_t row, n, od, oh, ow, g, kd, kh, kw, ic, oc, id_, ih, iw
    cdef real v
    for row in prange(N * OD * OH, nogil=True, num_threads=threads, schedule="static"):
        n = row // (OD * OH)
        od = (row // OH) % OD
        oh = row % OH
        for ow in range(OW):
            for g in range(G):
                for oc in range(OCg):
                    dst[n, od, oh, ow, g * OCg + oc] = bias[g * OCg + oc] if has_bias else 0
                for kd in range(KD):
                    id_ = od * sd + kd * dd - pd
                    if id_ < 0 or id_ >= ID:
                        continue
                    for kh in range(KH):
                        ih = oh * sh + kh * dh - ph
                        if ih < 0 or ih >= IH:
                            continue
                        for kw in range(KW):
                            iw = ow * sw + kw * dw - pw
                            if iw < 0 or iw >= IW:
                                continue
                            for ic in range(ICg):
                                v = src[n, id_, ih, iw, g * ICg + ic]
                                for oc in range(OCg):
                                    dst[n, od, oh, ow, g * OCg + oc] += v * weights[g, kd, kh, kw, ic, oc]
