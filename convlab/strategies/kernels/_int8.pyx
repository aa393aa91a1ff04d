# cython: language_level=3
"""Direct 8-bit integer convolution with int32 accumulation (docs/specification.md §3.4), three
spatial axes.

Callers (``convlab.ops._quantized``) pass src and weights with their zero points already
subtracted, as int16 (u8 - zero point spans -255..255, which int8 cannot hold), in the
canonical layouts lifted to three spatial axes:

* src (N, ID, IH, IW, IC), weights (G, KD, KH, KW, ICg, OCg), dst (N, OD, OH, OW, OC).

Reads outside the input are zero: after the subtraction, that is padding with the src zero
point, as ONNX ``ConvInteger`` does. The accumulator is unsigned 32-bit: it wraps modulo
2**32 where a signed int would be undefined behaviour in C, and since wrapping addition is
associative, the int32 result equals the exact sum reduced modulo 2**32 in any summation
order (the GEMM path, which sums exactly in float64 and then wraps, agrees bit for bit).
"""
cimport cython
from cython.parallel cimport parallel, prange
from libc.stdint cimport int16_t, int32_t, uint32_t
from libc.stdlib cimport free, malloc


@cython.boundscheck(False)
@cython.wraparound(False)
cdef void _row(const int16_t[:, :, :, :, ::1] src, const int16_t[:, :, :, :, :, ::1] w,
               const int32_t *bias, int32_t[:, :, :, :, ::1] dst, Py_ssize_t item,
               Py_ssize_t sd, Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t dd, Py_ssize_t dh,
               Py_ssize_t dw, Py_ssize_t pd, Py_ssize_t ph, Py_ssize_t pw,
               uint32_t *acc) noexcept nogil:
    cdef Py_ssize_t OD = dst.shape[1], OH = dst.shape[2], OW = dst.shape[3]
    cdef Py_ssize_t ID = src.shape[1], IH = src.shape[2], IW = src.shape[3]
    cdef Py_ssize_t G = w.shape[0], KD = w.shape[1], KH = w.shape[2], KW = w.shape[3]
    cdef Py_ssize_t ICg = w.shape[4], OCg = w.shape[5]
    cdef Py_ssize_t n = item // (OD * OH)
    cdef Py_ssize_t od = (item // OH) % OD
    cdef Py_ssize_t oh = item % OH
    cdef Py_ssize_t ow, g, kd, kh, kw, i_d, i_h, i_w, ic, oc
    cdef const int16_t *sp
    cdef const int16_t *wp
    cdef int s
    for ow in range(OW):
        for g in range(G):
            for oc in range(OCg):
                acc[oc] = 0
            for kd in range(KD):
                i_d = od * sd + kd * dd - pd
                if i_d < 0 or i_d >= ID:
                    continue
                for kh in range(KH):
                    i_h = oh * sh + kh * dh - ph
                    if i_h < 0 or i_h >= IH:
                        continue
                    for kw in range(KW):
                        i_w = ow * sw + kw * dw - pw
                        if i_w < 0 or i_w >= IW:
                            continue
                        sp = &src[n, i_d, i_h, i_w, g * ICg]
                        wp = &w[g, kd, kh, kw, 0, 0]
                        for ic in range(ICg):
                            s = sp[ic]
                            if s == 0:
                                continue  # data dilation and zero-point padding are zeros
                            for oc in range(OCg):
                                acc[oc] += <uint32_t>(s * <int>wp[ic * OCg + oc])
            for oc in range(OCg):
                if bias != NULL:
                    acc[oc] += <uint32_t>bias[g * OCg + oc]
                dst[n, od, oh, ow, g * OCg + oc] = <int32_t>acc[oc]


def conv_int8_direct(const int16_t[:, :, :, :, ::1] src, const int16_t[:, :, :, :, :, ::1] w,
                     bias, int32_t[:, :, :, :, ::1] dst, strides, dilations, pads,
                     int threads):
    """dst[n, o, g*OCg + oc] = bias + sum src[n, o*S + k*D - P_b, g*ICg + ic] * w[g, k, ic, oc]
    over in-bounds taps, accumulated modulo 2**32 and read as int32."""
    cdef const int32_t[::1] bias_view
    cdef const int32_t *bias_ptr = NULL
    if bias is not None:
        bias_view = bias
        bias_ptr = &bias_view[0]
    cdef Py_ssize_t sd = strides[0], sh = strides[1], sw = strides[2]
    cdef Py_ssize_t dd = dilations[0], dh = dilations[1], dw = dilations[2]
    cdef Py_ssize_t pd = pads[0], ph = pads[1], pw = pads[2]
    cdef Py_ssize_t items = dst.shape[0] * dst.shape[1] * dst.shape[2]
    cdef Py_ssize_t ocg = w.shape[5]
    cdef Py_ssize_t item
    cdef uint32_t *acc
    cdef int nthreads = max(1, min(threads, items))
    with nogil, parallel(num_threads=nthreads):
        acc = <uint32_t *>malloc(ocg * sizeof(uint32_t))
        if acc != NULL:
            for item in prange(items, schedule="static"):
                _row(src, w, bias_ptr, dst, item, sd, sh, sw, dd, dh, dw, pd, ph, pw, acc)
            free(acc)
    return None
