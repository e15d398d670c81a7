# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, embedsignature=True
"""ARPA text formatting kernel for the language-model stage (pivot/lm.py).

The estimator itself is vectorised numpy over integer n-gram ids; what numpy
cannot do fast is turn ~10^7 (log10 p, n-gram, log10 backoff) rows into text.
A Python loop spends ~1 us a row on string formatting alone, so the rows are
written here into one C buffer per chunk, with snprintf for the numbers.
"""
from libc.stdio cimport snprintf
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
from libc.math cimport llround
from cpython.bytes cimport PyBytes_FromStringAndSize

# Longest text "%.7f" can give for a log10 value the estimator writes:
# probabilities and backoffs lie in [-99, +99], so "-99.0000000" is 11 chars;
# 32 leaves room for anything finite.
cdef enum:
    NUMBER_ROOM = 32


cdef inline Py_ssize_t _put_number(char *out, double value) noexcept nogil:
    """Write value as fixed-point with 7 decimals; return the bytes written.

    Seven decimals keep the ARPA within 5e-8 of the double-precision estimate,
    well inside the 1e-6 the tests hold the estimator to. The digits come from
    round(value * 1e7) as an integer: snprintf("%.7f") gives the same text but
    costs ~10x more, and two numbers a row for 10^7 rows made it the
    estimator's largest cost. Non-finite or huge values go through snprintf.
    """
    cdef char digits[24]
    cdef long long scaled, integer, fraction
    cdef Py_ssize_t n = 0, k = 0, pos = 0
    if not (-1e11 < value < 1e11):
        return snprintf(out, NUMBER_ROOM, b"%.7f", value)
    scaled = llround(value * 1e7)
    if scaled < 0:
        out[pos] = b'-'
        pos += 1
        scaled = -scaled
    integer = scaled // 10000000
    fraction = scaled % 10000000
    # Integer part, least significant digit first, then reversed into out.
    while True:
        digits[n] = <char> (48 + integer % 10)
        n += 1
        integer //= 10
        if integer == 0:
            break
    while n > 0:
        n -= 1
        out[pos] = digits[n]
        pos += 1
    out[pos] = b'.'
    pos += 1
    for k in range(6, -1, -1):
        out[pos + k] = <char> (48 + fraction % 10)
        fraction //= 10
    return pos + 7


def format_arpa_rows(const int[:, ::1] words, const double[::1] log_prob,
                     const double[::1] log_backoff, const unsigned char[::1] blob,
                     const long long[::1] offsets):
    """Return the ARPA lines ``log10 p<TAB>w1 .. wn[<TAB>log10 backoff]\\n`` as bytes.

    words[i, :] are vocabulary ids of row i; the text of id v is
    blob[offsets[v]:offsets[v + 1]] (UTF-8). log_backoff may be empty (highest
    order: no backoff column) or hold one value per row.
    """
    cdef Py_ssize_t n_rows = words.shape[0]
    cdef Py_ssize_t order = words.shape[1]
    cdef bint with_backoff = log_backoff.shape[0] > 0
    cdef Py_ssize_t i, k, size, pos
    cdef long long v
    cdef char *buf
    if with_backoff and log_backoff.shape[0] != n_rows:
        raise ValueError("log_backoff must be empty or have one value per row")
    if log_prob.shape[0] != n_rows:
        raise ValueError("log_prob must have one value per row")
    # Exact upper bound of the text: per row two numbers, the word bytes, and
    # one separator per word (spaces between words, tab before, tab/newline after).
    size = 0
    with nogil:
        for i in range(n_rows):
            size += 2 * NUMBER_ROOM + order + 2
            for k in range(order):
                v = words[i, k]
                size += offsets[v + 1] - offsets[v]
    buf = <char *> malloc(size + 1)
    if buf == NULL:
        raise MemoryError()
    try:
        pos = 0
        with nogil:
            for i in range(n_rows):
                pos += _put_number(buf + pos, log_prob[i])
                for k in range(order):
                    buf[pos] = b'\t' if k == 0 else b' '
                    pos += 1
                    v = words[i, k]
                    memcpy(buf + pos, &blob[offsets[v]], offsets[v + 1] - offsets[v])
                    pos += offsets[v + 1] - offsets[v]
                if with_backoff:
                    buf[pos] = b'\t'
                    pos += 1
                    pos += _put_number(buf + pos, log_backoff[i])
                buf[pos] = b'\n'
                pos += 1
        return PyBytes_FromStringAndSize(buf, pos)
    finally:
        free(buf)
