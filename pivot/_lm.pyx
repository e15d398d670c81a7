# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, embedsignature=True
"""Kernels of the language-model stage (pivot/pipeline/lm.py).

The estimator itself is vectorised numpy over integer n-gram ids. Two steps
numpy does slowly are done here:

* grouping the n-gram occurrences of an order into sorted types
  (:func:`count_ngrams`): two counting sorts over int32 ids instead of an
  argsort of int64 keys (np.unique), ~10x faster and with a third of the scratch;
* turning ~10^7 (log10 p, n-gram, log10 backoff) rows into text
  (:func:`format_arpa_rows`): a Python loop spends ~1 us a row on string
  formatting alone, so the rows are written into one C buffer per chunk.
"""
from libc.stdio cimport snprintf
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
from libc.math cimport llround
from cpython.bytes cimport PyBytes_FromStringAndSize

import numpy as np

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


def count_ngrams(const int[::1] prefix_at, const int[::1] last_at, const int[::1] suffix_at,
                 Py_ssize_t n_prefix, Py_ssize_t vocab_size):
    """Group the n-gram occurrences of one order into types sorted by (prefix id, last word).

    Occurrence i is the n-gram whose first n-1 words are the (n-1)-gram type
    prefix_at[i] (in [0, n_prefix)), whose last word is last_at[i] (in
    [0, vocab_size)) and whose last n-1 words are the (n-1)-gram type
    suffix_at[i]. Returns int32 arrays (prefix, last, suffix, raw, inverse):
    per type, sorted by (prefix, last) ascending (the order of the key
    prefix * vocab_size + last), its prefix, last word, suffix and number of
    occurrences; per occurrence, its type. This is what ``np.unique(key,
    return_inverse=True, return_counts=True)`` gives, by two stable counting
    sorts (by last word, then by prefix) instead of a comparison sort of int64
    keys: O(occurrences + n_prefix + vocab_size) time and int32 scratch only.
    """
    cdef Py_ssize_t n = prefix_at.shape[0]
    cdef Py_ssize_t i, j, v, n_types = 0
    cdef int p, prev_p = -1, prev_l = -1
    cdef bint bad = False
    if last_at.shape[0] != n or suffix_at.shape[0] != n:
        raise ValueError("prefix_at, last_at and suffix_at must have the same length")
    if n >= 2147483647 or n_prefix >= 2147483647 or vocab_size >= 2147483647:
        raise ValueError("more than 2^31 - 1 n-gram occurrences, contexts or words")
    by_last_arr = np.empty(n, dtype=np.int32)
    start_arr = np.zeros(max(vocab_size, n_prefix) + 1, dtype=np.int32)
    cdef int[::1] by_last = by_last_arr
    cdef int[::1] start = start_arr
    with nogil:
        # Stable counting sort of the occurrences by last word.
        for i in range(n):
            if last_at[i] < 0 or last_at[i] >= vocab_size or prefix_at[i] < 0 or prefix_at[i] >= n_prefix:
                bad = True
                break
            start[last_at[i] + 1] += 1
    if bad:
        raise ValueError("an n-gram id is out of range")
    with nogil:
        for v in range(vocab_size):
            start[v + 1] += start[v]
        for i in range(n):
            v = last_at[i]
            by_last[start[v]] = <int> i
            start[v] += 1
        # ... then stable by prefix: sorted by (prefix, last).
        for v in range(n_prefix + 1):
            start[v] = 0
        for i in range(n):
            start[prefix_at[i] + 1] += 1
        for v in range(n_prefix):
            start[v + 1] += start[v]
    sorted_arr = np.empty(n, dtype=np.int32)
    cdef int[::1] ordered = sorted_arr
    with nogil:
        for j in range(n):
            i = by_last[j]
            p = prefix_at[i]
            ordered[start[p]] = <int> i
            start[p] += 1
    del by_last_arr, start_arr
    by_last = None
    start = None
    inverse_arr = np.empty(n, dtype=np.int32)
    cdef int[::1] inverse = inverse_arr
    with nogil:
        for j in range(n):
            i = ordered[j]
            if prefix_at[i] != prev_p or last_at[i] != prev_l:
                prev_p = prefix_at[i]
                prev_l = last_at[i]
                n_types += 1
            inverse[i] = <int> (n_types - 1)
    prefix_arr = np.empty(n_types, dtype=np.int32)
    last_arr = np.empty(n_types, dtype=np.int32)
    suffix_arr = np.empty(n_types, dtype=np.int32)
    raw_arr = np.zeros(n_types, dtype=np.int32)
    cdef int[::1] t_prefix = prefix_arr, t_last = last_arr, t_suffix = suffix_arr, raw = raw_arr
    cdef int t
    with nogil:
        for j in range(n):
            i = ordered[j]
            t = inverse[i]
            if raw[t] == 0:
                t_prefix[t] = prefix_at[i]
                t_last[t] = last_at[i]
                t_suffix[t] = suffix_at[i]
            raw[t] += 1
    return prefix_arr, last_arr, suffix_arr, raw_arr, inverse_arr
