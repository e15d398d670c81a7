# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, embedsignature=True
"""The hot loops of pivot's word aligner (fast_align-style IBM Model 2, EM, no sampling).

The Python API and the full statement of the model live in ``pivot/pipeline/ibm.py``, which validates
shapes, dtypes and id ranges before calling anything here. Notation (one direction):

    source sentence e = e_1..e_n plus the NULL word e_0, target sentence f = f_1..f_m,
    alignment a_i in {0, 1..n} for each target position i,
    p(a_i = j | i, m, n) = p_null                                           j = 0
                         = (1 - p_null) exp(-lambda h(i,j)) / sum_j' exp(-lambda h(i,j'))  j >= 1
    h(i, j) = |i/m - j/n|  (1-based i and j: the diagonal prior),
    p(f, a | e) = prod_i p(a_i | i, m, n) t(f_i | e_{a_i}).

The translation table t is sparse, CSR over source words: row r (source word r; the NULL
word is the last row, ``n_src_vocab``) holds the sorted target ids ``col[row_ptr[r]:
row_ptr[r+1]]`` and their probabilities ``prob[...]``; a lookup is a binary search in the row.

Entry points:

``cooccurrence_csr``   the CSR structure: every (source word or NULL, target word) pair that
                       co-occurs in some sentence pair; ``CooccurrenceBuilder`` builds the
                       same table from the corpus fed chunk by chunk.
``cooccurrence_indexed``  the same table of one corpus at once, with the table index of
                       every lookup the E-step makes (what its first iteration would search).
``e_step``             expected counts c(e, f) = sum over corpus of p(a_i = j | e, f) for
                       e = e_j, f = f_i, as fixed-point int64 (posterior * 2^32, rounded).
                       Threads over sentences add with atomic integer adds: integer addition
                       is associative, so the counts are the same to the bit for any number
                       of threads and any schedule.
``m_step``             t(f | e) = c(e, f) / sum_f' c(e, f'), divided in float64.
``viterbi_argmax``     a_i = argmax_j p(a_i = j) t(f_i | e_j) per target position.
``grow_diag_final_and``  symmetrisation of two directional alignments, the textbook
                       procedure pinned in pivot's align stage (row-major matrix scan).
"""
from cython.parallel cimport parallel, prange
from libc.math cimport exp, fabs, log
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, calloc
from libc.string cimport memcpy
from libcpp.vector cimport vector

import numpy as np

cdef extern from * nogil:
    """
    #include <algorithm>
    #include <cstdint>
    #include <vector>

    /* Relaxed atomic add: only the final sum matters, and integer addition commutes. */
    static inline void pivot_atomic_add_i64(int64_t *p, int64_t v) {
        __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
    }

    /* llround(x) for 0 <= x < 2^53, inline (llround is a call into libm). t = trunc(x) is
       exact there, and so is x - t (x < 1: t = 0; x >= 1: t <= x <= 2t, Sterbenz), so the
       comparison with 1/2 rounds halves away from zero exactly as llround does. */
    static inline int64_t pivot_round_half_up(double x) {
        int64_t t = (int64_t) x;
        return t + (x - (double) t >= 0.5);
    }

    /* Sort a vector and drop repeats (the co-occurrence rows). */
    static const double PIVOT_FIXED_ONE = 4294967296.0;  /* 2^32 */

    static inline void pivot_sort_i32(std::vector<int32_t>& v) {
        std::sort(v.begin(), v.end());
    }

    static inline void pivot_prefetch_read(const void* p) { __builtin_prefetch(p, 0, 3); }
    static inline void pivot_prefetch_write(const void* p) { __builtin_prefetch(p, 1, 3); }

    static inline void pivot_sort_unique(std::vector<int32_t>& v) {
        std::sort(v.begin(), v.end());
        v.erase(std::unique(v.begin(), v.end()), v.end());
    }
    """
    void atomic_add_i64 "pivot_atomic_add_i64"(int64_t *p, int64_t v) noexcept nogil
    int64_t round_half_up "pivot_round_half_up"(double x) noexcept nogil
    void sort_unique "pivot_sort_unique"(vector[int32_t]& v) noexcept nogil
    void prefetch_read "pivot_prefetch_read"(const void* p) noexcept nogil
    void prefetch_write "pivot_prefetch_write"(const void* p) noexcept nogil
    void sort_i32 "pivot_sort_i32"(vector[int32_t]& v) noexcept nogil
    const double FIXED_ONE "PIVOT_FIXED_ONE"

# Fixed-point unit of the expected counts: a posterior p adds llround(p * 2^32). The total of
# all counts is at most (target tokens) * (2^32 + longest sentence), so int64 cannot overflow
# below ~2^31 target tokens (ibm.py checks this).
COUNT_SCALE = FIXED_ONE


cdef inline int64_t _find(const int32_t* col, int64_t lo, int64_t hi, int32_t f) noexcept nogil:
    """Index k in [lo, hi) with col[k] == f (col sorted ascending there), else -1."""
    cdef int64_t end = hi, mid
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if col[mid] < f:
            lo = mid + 1
        else:
            hi = mid
    if lo < end and col[lo] == f:
        return lo
    return -1


cdef inline void _diagonal_prior(double* w, int64_t i, int64_t m, int64_t n,
                                 double p_null, double tension) noexcept nogil:
    """w[j] = p(a_i = j+1) for the n real source words (0-based i, j; 1-based in the math).

    exp(-tension |i/m - j/n|) is geometric in j on each side of the diagonal, with ratio
    r = exp(-tension / n) per step away from it; so each side costs one exp and then one
    multiplication per position (the same sequence of operations on every thread, hence
    deterministic). j_up = floor(i n / m), in integers, is the last 1-based j with j/n <= i/m.
    """
    cdef int64_t j, j_up = ((i + 1) * n) // m
    cdef double fi = <double>(i + 1) / <double>m, r, v, z = 0.0
    if n <= 0:
        return
    r = exp(-tension / <double>n)
    if j_up >= 1:                         # j = j_up down to 1: exp(-tension (i/m - j/n))
        v = exp(-tension * (fi - <double>j_up / <double>n))
        for j in range(j_up - 1, -1, -1):
            w[j] = v
            z += v
            v *= r
    if j_up < n:                          # j = j_up + 1 up to n: exp(-tension (j/n - i/m))
        v = exp(-tension * (<double>(j_up + 1) / <double>n - fi))
        for j in range(j_up, n):
            w[j] = v
            z += v
            v *= r
    z = (1.0 - p_null) / z
    for j in range(n):
        w[j] *= z


cdef double _em_sentence(const int32_t* src, int64_t n, const int32_t* tgt, int64_t m,
                         const int64_t* row_ptr, const int32_t* col, const double* prob,
                         int64_t null_row, int64_t* counts, double p_null, double tension,
                         double* w, int64_t* idx, int32_t* cache, int cache_mode,
                         bint shared) noexcept nogil:
    """Add one sentence pair's posteriors to ``counts``; return its log-likelihood.

    log p(f | e) = sum_i log sum_j p(a_i = j) t(f_i | e_j), and the posterior of a link is
    p(a_i = j | e, f) = p(a_i = j) t(f_i | e_j) / sum_j' p(a_i = j') t(f_i | e_j').
    ``w`` and ``idx`` are per-thread buffers of n + 1 entries (slot n is NULL).
    ``cache`` ((n + 1) * m int32, row-major by target position) remembers the table index
    of every (target position, source slot) so that later iterations skip the binary
    searches: cache_mode 0 = not used, 1 = search and fill (where the table was built without
    them: :func:`cooccurrence_indexed` finds them all at once), 2 = read.
    ``shared``: other threads add into ``counts`` too, so each add is atomic. A locked add
    orders the loads around it, which stalls the gathers of prob and counts on one thread
    as well: a kernel on one thread (every task of a cluster) adds plainly, the same sums.
    """
    cdef int64_t i, j, k, r
    cdef int32_t f
    cdef double z, ll = 0.0, post
    cdef int64_t c
    for i in range(m):
        f = tgt[i]
        _diagonal_prior(w, i, m, n, p_null, tension)
        if cache_mode == 2:
            for j in range(n + 1):
                idx[j] = cache[i * (n + 1) + j]
            if i + 1 < m:
                # the next target word's entries, fetched while this one is computed: the
                # gathers of prob and the adds to counts are at random places of the table
                for j in range((i + 1) * (n + 1), (i + 2) * (n + 1)):
                    k = cache[j]
                    if k >= 0:
                        prefetch_read(&prob[k])
                        prefetch_write(&counts[k])
        else:
            idx[n] = _find(col, row_ptr[null_row], row_ptr[null_row + 1], f)
            for j in range(n):
                r = src[j]
                idx[j] = _find(col, row_ptr[r], row_ptr[r + 1], f)
            if cache_mode == 1:
                for j in range(n + 1):
                    cache[i * (n + 1) + j] = <int32_t> idx[j]
        k = idx[n]
        w[n] = p_null * prob[k] if k >= 0 else 0.0
        z = w[n]
        for j in range(n):
            k = idx[j]
            w[j] = w[j] * prob[k] if k >= 0 else 0.0
            z += w[j]
        if z <= 0.0:
            continue          # every t is 0 (cannot happen on the training corpus): no evidence
        ll += log(z)
        for j in range(n + 1):
            if idx[j] >= 0:
                post = w[j] / z
                c = round_half_up(post * FIXED_ONE)
                if c != 0:
                    if shared:
                        atomic_add_i64(&counts[idx[j]], c)
                    else:
                        counts[idx[j]] += c
    return ll


cdef class CooccurrenceBuilder:
    """The co-occurrence CSR built incrementally: ``add`` sentence pairs chunk by chunk, then
    ``finish``.

    The rows are per source word vectors of target ids, deduplicated (sorted, repeats
    dropped) whenever a row doubles past its last unique size, so the working memory stays
    within a small factor of the final table whatever the number of chunks, and holds no
    token array of any chunk after ``add`` returns. The final rows are sorted and unique, so
    the table is the same for any split of the corpus into chunks.
    """
    cdef vector[vector[int32_t]] rows
    cdef vector[int64_t] last_unique
    cdef uint8_t* seen_null
    cdef int32_t n_src_vocab, n_tgt_vocab
    cdef bint finished

    def __cinit__(self, int32_t n_src_vocab, int32_t n_tgt_vocab):
        if n_src_vocab < 0 or n_tgt_vocab < 0:
            raise ValueError("vocabulary sizes must be >= 0")
        self.n_src_vocab = n_src_vocab
        self.n_tgt_vocab = n_tgt_vocab
        self.finished = False
        self.seen_null = <uint8_t*> calloc(n_tgt_vocab + 1, 1)
        if self.seen_null == NULL:
            raise MemoryError()
        self.rows.resize(n_src_vocab)
        self.last_unique.resize(n_src_vocab, 0)

    def __dealloc__(self):
        free(self.seen_null)

    def add(self, const int32_t[::1] src_tokens, const int64_t[::1] src_offsets,
            const int32_t[::1] tgt_tokens, const int64_t[::1] tgt_offsets):
        """Add the (source, target) pairs of these sentence pairs (ids already validated)."""
        cdef int64_t n_sent = src_offsets.shape[0] - 1
        cdef int64_t s, a, b, c, d, j, i
        cdef int32_t e
        if self.finished:
            raise RuntimeError("CooccurrenceBuilder.add after finish")
        if n_sent <= 0:
            return
        with nogil:
            for s in range(n_sent):
                a, b = src_offsets[s], src_offsets[s + 1]
                c, d = tgt_offsets[s], tgt_offsets[s + 1]
                for i in range(c, d):
                    self.seen_null[tgt_tokens[i]] = 1
                for j in range(a, b):
                    e = src_tokens[j]
                    for i in range(c, d):
                        self.rows[e].push_back(tgt_tokens[i])
                    if <int64_t> self.rows[e].size() > 2 * self.last_unique[e] + 64:
                        sort_unique(self.rows[e])
                        self.last_unique[e] = self.rows[e].size()

    def finish(self):
        """(row_ptr int64 [n_src_vocab + 2], col int32); the builder is empty afterwards."""
        cdef int32_t n_src_vocab = self.n_src_vocab, n_tgt_vocab = self.n_tgt_vocab
        cdef int64_t r, j, k, total = 0
        cdef int32_t f
        if self.finished:
            raise RuntimeError("CooccurrenceBuilder.finish called twice")
        self.finished = True
        with nogil:
            for r in range(n_src_vocab):
                sort_unique(self.rows[r])
                total += self.rows[r].size()
            for f in range(n_tgt_vocab):
                total += self.seen_null[f]
        row_ptr_arr = np.empty(n_src_vocab + 2, dtype=np.int64)
        col_arr = np.empty(total, dtype=np.int32)
        cdef int64_t[::1] row_ptr = row_ptr_arr
        cdef int32_t[::1] col = col_arr
        with nogil:
            k = 0
            for r in range(n_src_vocab):
                row_ptr[r] = k
                for j in range(<int64_t> self.rows[r].size()):
                    col[k] = self.rows[r][j]
                    k += 1
                self.rows[r].clear()
                self.rows[r].shrink_to_fit()
            row_ptr[n_src_vocab] = k
            for f in range(n_tgt_vocab):
                if self.seen_null[f]:
                    col[k] = f
                    k += 1
            row_ptr[n_src_vocab + 1] = k
        self.rows.clear()
        self.rows.shrink_to_fit()
        return row_ptr_arr, col_arr


def cooccurrence_csr(const int32_t[::1] src_tokens, const int64_t[::1] src_offsets,
                     const int32_t[::1] tgt_tokens, const int64_t[::1] tgt_offsets,
                     int32_t n_src_vocab, int32_t n_tgt_vocab):
    """CSR (row_ptr int64 [n_src_vocab + 2], col int32) of co-occurring (source, target) pairs.

    Row r < n_src_vocab lists the target ids seen in a sentence pair together with source
    word r; row n_src_vocab (NULL) lists every target id of the corpus. Rows are sorted and
    unique. Each row is deduplicated whenever it doubles past its last unique size, so the
    working memory stays within a small factor of the final table. (One
    :class:`CooccurrenceBuilder` fed the whole corpus at once.)
    """
    builder = CooccurrenceBuilder(n_src_vocab, n_tgt_vocab)
    builder.add(src_tokens, src_offsets, tgt_tokens, tgt_offsets)
    return builder.finish()


def cooccurrence_indexed(const int32_t[::1] src_tokens, const int64_t[::1] src_offsets,
                         const int32_t[::1] tgt_tokens, const int64_t[::1] tgt_offsets,
                         int32_t n_src_vocab, int32_t n_tgt_vocab):
    """(row_ptr, col, index): :func:`cooccurrence_csr`'s table and the table index of every
    lookup of the E-step, in the layout e_step's cache holds (sentence by sentence, (n + 1) m
    int32 each, row-major by target position, slot n the NULL row): the values its first
    iteration finds by searching (cache_mode 1), found here while the table is built.

    Every link (source word e_j, target word f_i) is one key f << 32 | lookup number, put in
    its row's segment of one array (the rows' sizes counted first). A row's distinct f,
    sorted, are its columns, and each key's lookup gets the entry of its f. The NULL row
    holds every target word of the corpus: a lookup of it is the word's rank among them.
    8 bytes a link, 4 a lookup and 12 a target word of the vocabulary; one sort of each row's
    distinct words, where the builder's rows sort every link, again as they grow, and the
    first E-step searches each lookup.
    """
    cdef int64_t n_sent = src_offsets.shape[0] - 1
    cdef int64_t s, a, b, c, d, i, j, r, k, n, m, base, n_links = 0, n_cells = 0, total
    cdef int32_t f
    cdef uint64_t v
    for s in range(n_sent):
        n = src_offsets[s + 1] - src_offsets[s]
        m = tgt_offsets[s + 1] - tgt_offsets[s]
        n_links += n * m
        n_cells += (n + 1) * m
    if n_cells >= 2 ** 32:
        raise ValueError(f"{n_cells} lookups: more than 2^32 for one table (cut the corpus into shards)")
    start_arr = np.zeros(n_src_vocab + 1, dtype=np.int64)
    row_ptr_arr = np.zeros(n_src_vocab + 2, dtype=np.int64)
    links_arr = np.empty(n_links, dtype=np.uint64)
    index_arr = np.empty(n_cells, dtype=np.int32)
    null_arr = np.full(n_tgt_vocab, -1, dtype=np.int64)
    stamp_arr = np.full(n_tgt_vocab, -1, dtype=np.int32)
    at_arr = np.empty(n_tgt_vocab, dtype=np.int64)
    cdef int64_t[::1] start = start_arr, row_ptr = row_ptr_arr, null_col = null_arr, at = at_arr
    cdef uint64_t[::1] links = links_arr
    cdef int32_t[::1] index = index_arr, stamp = stamp_arr
    cdef vector[int32_t] distinct, cols
    with nogil:
        # each row's segment of links: its size is the target words of its sentences
        for s in range(n_sent):
            m = tgt_offsets[s + 1] - tgt_offsets[s]
            for j in range(src_offsets[s], src_offsets[s + 1]):
                start[src_tokens[j] + 1] += m
        for r in range(n_src_vocab):
            start[r + 1] += start[r]
        for r in range(n_src_vocab):
            row_ptr[r] = start[r]             # used as each row's cursor while filling
        base = 0
        for s in range(n_sent):
            a, b = src_offsets[s], src_offsets[s + 1]
            c, d = tgt_offsets[s], tgt_offsets[s + 1]
            n = b - a
            for j in range(n):
                r = src_tokens[a + j]
                for i in range(d - c):
                    links[row_ptr[r]] = (<uint64_t> tgt_tokens[c + i]) << 32 | <uint64_t> (base + i * (n + 1) + j)
                    row_ptr[r] += 1
            for i in range(d - c):
                null_col[tgt_tokens[c + i]] = 0
            base += (n + 1) * (d - c)
        # Row by row: its distinct target words (a word is new to row r while stamp[f] != r),
        # sorted, are its columns; at[f] is then f's entry, which every link of f in the row
        # gets as its lookup's index. Only the distinct words are sorted, not every link.
        for r in range(n_src_vocab):
            row_ptr[r] = cols.size()
            distinct.clear()
            for k in range(start[r], start[r + 1]):
                f = <int32_t> (links[k] >> 32)
                if stamp[f] != r:
                    stamp[f] = <int32_t> r
                    distinct.push_back(f)
            sort_i32(distinct)
            for k in range(<int64_t> distinct.size()):
                at[distinct[k]] = row_ptr[r] + k
                cols.push_back(distinct[k])
            for k in range(start[r], start[r + 1]):
                v = links[k]
                index[<uint32_t> v] = <int32_t> at[<int32_t> (v >> 32)]
        total = cols.size()
        row_ptr[n_src_vocab] = total
        for f in range(n_tgt_vocab):          # the NULL row: every target word present, in order
            if null_col[f] == 0:
                null_col[f] = total
                cols.push_back(f)
                total += 1
        row_ptr[n_src_vocab + 1] = total
    if total >= 2 ** 31:
        raise ValueError(f"{total} table entries: more than 2^31 (the lookups' indices are int32)")
    col_arr = np.empty(total, dtype=np.int32)
    cdef int32_t[::1] col = col_arr
    with nogil:
        if total:
            memcpy(&col[0], cols.data(), total * sizeof(int32_t))
        cols.clear()
        cols.shrink_to_fit()
        base = 0
        for s in range(n_sent):
            c, d = tgt_offsets[s], tgt_offsets[s + 1]
            n = src_offsets[s + 1] - src_offsets[s]
            for i in range(d - c):
                index[base + i * (n + 1) + n] = <int32_t> null_col[tgt_tokens[c + i]]
            base += (n + 1) * (d - c)
    return row_ptr_arr, col_arr, index_arr


def e_step(const int32_t[::1] src_tokens, const int64_t[::1] src_offsets,
           const int32_t[::1] tgt_tokens, const int64_t[::1] tgt_offsets,
           const int64_t[::1] row_ptr, const int32_t[::1] col, const double[::1] prob,
           int64_t[::1] counts, double[::1] loglik, double p_null, double tension,
           int max_src_len, int n_threads, int32_t[::1] cache=None,
           const int64_t[::1] cache_offsets=None, int cache_mode=0):
    """Add every sentence pair's expected counts to ``counts`` (fixed point, 2^32 = 1).

    ``loglik[s]`` receives log p(f_s | e_s) (summed by the caller in sentence order, so the
    total is deterministic too). ``counts`` must be zeroed by the caller. With cache_mode
    1 (fill) or 2 (read), sentence s uses ``cache[cache_offsets[s]:cache_offsets[s+1]]``,
    of (n_s + 1) m_s table indices (int32, -1 = pair absent).
    """
    cdef int64_t n_sent = src_offsets.shape[0] - 1
    cdef int64_t null_row = row_ptr.shape[0] - 2
    cdef int64_t s
    cdef double* w
    cdef int64_t* idx
    cdef int32_t* cache_ptr = NULL
    cdef const int64_t* cache_off = NULL
    if cache_mode != 0:
        if cache is None or cache_offsets is None or cache_offsets.shape[0] != n_sent + 1:
            raise ValueError("cache_mode needs cache and cache_offsets (n_sent + 1)")
        if cache.shape[0] > 0:
            cache_ptr = &cache[0]
        cache_off = &cache_offsets[0]
    w = NULL              # assigned per thread below; set here so no copy is uninitialised
    idx = NULL
    if n_sent <= 0:
        return
    with nogil, parallel(num_threads=n_threads):
        w = <double*> malloc((max_src_len + 1) * sizeof(double))
        idx = <int64_t*> malloc((max_src_len + 1) * sizeof(int64_t))
        for s in prange(n_sent, schedule="dynamic", chunksize=64):
            loglik[s] = _em_sentence(
                &src_tokens[0] + src_offsets[s], src_offsets[s + 1] - src_offsets[s],
                &tgt_tokens[0] + tgt_offsets[s], tgt_offsets[s + 1] - tgt_offsets[s],
                &row_ptr[0], &col[0], &prob[0], null_row, &counts[0], p_null, tension,
                w, idx, cache_ptr + cache_off[s] if cache_mode != 0 else NULL, cache_mode,
                n_threads > 1)
        free(w)
        free(idx)


def fixed_point(const double[::1] p):
    """round(p * 2^32), halves away from zero, as the E-step adds a posterior p >= 0 to its
    counts (the kernel's own rounding, for tests against exact arithmetic)."""
    out = np.empty(p.shape[0], dtype=np.int64)
    cdef int64_t[::1] o = out
    cdef int64_t k
    for k in range(p.shape[0]):
        o[k] = round_half_up(p[k] * FIXED_ONE)
    return out


def m_step(const int64_t[::1] row_ptr, const int64_t[::1] counts, double[::1] prob,
           int n_threads):
    """t(f | e) = c(e, f) / sum_f' c(e, f') for every row with positive mass.

    The row total is an exact int64 sum, the division float64: the result does not depend on
    the thread count. A row without mass (a source word that never occurs) keeps its values.
    """
    cdef int64_t n_rows = row_ptr.shape[0] - 1
    cdef int64_t r, k, total
    cdef double inv
    with nogil:
        for r in prange(n_rows, schedule="static", num_threads=n_threads):
            total = 0
            for k in range(row_ptr[r], row_ptr[r + 1]):
                total = total + counts[k]
            if total > 0:
                for k in range(row_ptr[r], row_ptr[r + 1]):
                    prob[k] = <double> counts[k] / <double> total


cdef int64_t _merge_unique(const int64_t* a, int64_t na, const int64_t* b, int64_t nb,
                          int64_t* out) noexcept nogil:
    """The size of a ∪ b (both ascending, without repeats); with ``out``, the union written there."""
    cdef int64_t i = 0, j = 0, n = 0, v
    while i < na or j < nb:
        if j == nb or (i < na and a[i] < b[j]):
            v = a[i]
            i += 1
        elif i == na or b[j] < a[i]:
            v = b[j]
            j += 1
        else:                    # a[i] == b[j]: once
            v = a[i]
            i += 1
            j += 1
        if out != NULL:
            out[n] = v
        n += 1
    return n


def union_sorted(const int64_t[::1] a, const int64_t[::1] b):
    """The sorted set a ∪ b of two ascending int64 arrays without repeats, by one merge pass.

    The sharded model's table is the union of its shards' tables (their sorted entry keys);
    a pass counts the union's size, a second fills it: O(|a| + |b|), where concatenating and
    sorting (numpy's stable sort merges the two runs, then a mask drops the repeats) made the
    same array in about four passes and a copy.
    """
    cdef int64_t na = a.shape[0], nb = b.shape[0], n
    cdef const int64_t* pa = &a[0] if na else NULL
    cdef const int64_t* pb = &b[0] if nb else NULL
    with nogil:
        n = _merge_unique(pa, na, pb, nb, NULL)
    out = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] o = out
    if n:
        with nogil:
            _merge_unique(pa, na, pb, nb, &o[0])
    return out


cdef void _viterbi_sentence(const int32_t* src, int64_t n, const int32_t* tgt, int64_t m,
                            const int64_t* row_ptr, const int32_t* col, const double* prob,
                            int64_t n_rows, double p_null, double tension, double floor,
                            double* w, int32_t* out, const int32_t* cache) noexcept nogil:
    """out[i] = argmax_j p(a_i = j) t(f_i | e_j), 0-based source position, -1 for NULL.

    A pair missing from the table (or with t = 0) scores with t = ``floor``. Ties go to NULL,
    then to the leftmost source position (strict > in the scan). ``cache`` (NULL: search) holds
    the table index of every (target position, source slot) as the E-step stored it ((n + 1) m
    int32, row-major by target position, slot n = NULL, -1 = absent): the same indices the
    searches find, read instead.
    """
    cdef int64_t i, j, k, r, null_row = n_rows - 1
    cdef double best, score, t
    cdef int32_t f, arg
    for i in range(m):
        f = tgt[i]
        _diagonal_prior(w, i, m, n, p_null, tension)
        if cache != NULL:
            k = cache[i * (n + 1) + n]
        else:
            k = _find(col, row_ptr[null_row], row_ptr[null_row + 1], f)
        t = prob[k] if k >= 0 else 0.0
        best = p_null * (t if t > floor else floor)
        arg = -1
        for j in range(n):
            if cache != NULL:
                k = cache[i * (n + 1) + j]
            else:
                r = src[j]
                k = -1
                if r < null_row:
                    k = _find(col, row_ptr[r], row_ptr[r + 1], f)
            t = prob[k] if k >= 0 else 0.0
            score = w[j] * (t if t > floor else floor)
            if score > best:
                best = score
                arg = <int32_t> j
        out[i] = arg


def viterbi_argmax(const int32_t[::1] src_tokens, const int64_t[::1] src_offsets,
                   const int32_t[::1] tgt_tokens, const int64_t[::1] tgt_offsets,
                   const int64_t[::1] row_ptr, const int32_t[::1] col, const double[::1] prob,
                   int32_t[::1] out, double p_null, double tension, double floor,
                   int max_src_len, int n_threads, const int32_t[::1] cache=None,
                   const int64_t[::1] cache_offsets=None):
    """out[tgt_offsets[s] + i] = Viterbi source position of target word i of sentence s (-1 NULL).

    With ``cache`` (the table indices an E-step stored, see ``e_step``) sentence s reads its
    lookups from ``cache[cache_offsets[s]:cache_offsets[s+1]]`` instead of searching.
    """
    cdef int64_t n_sent = src_offsets.shape[0] - 1
    cdef int64_t n_rows = row_ptr.shape[0] - 1
    cdef int64_t s
    cdef double* w
    cdef const int32_t* cache_ptr = NULL
    cdef const int64_t* cache_off = NULL
    if cache is not None:
        if cache_offsets is None or cache_offsets.shape[0] != n_sent + 1:
            raise ValueError("cache needs cache_offsets (n_sent + 1)")
        if cache.shape[0] > 0:
            cache_ptr = &cache[0]
        cache_off = &cache_offsets[0]
    w = NULL
    if n_sent <= 0:
        return
    with nogil, parallel(num_threads=n_threads):
        w = <double*> malloc((max_src_len + 1) * sizeof(double))
        for s in prange(n_sent, schedule="dynamic", chunksize=64):
            _viterbi_sentence(
                &src_tokens[0] + src_offsets[s], src_offsets[s + 1] - src_offsets[s],
                &tgt_tokens[0] + tgt_offsets[s], tgt_offsets[s + 1] - tgt_offsets[s],
                &row_ptr[0], &col[0], &prob[0], n_rows, p_null, tension, floor,
                w, &out[0] + tgt_offsets[s], cache_ptr + cache_off[s] if cache_off != NULL else NULL)
        free(w)


# Neighbour order of the grow step: the 4 sides, then the 4 diagonals (as pivot's align stage).
cdef int _DI[8]
cdef int _DJ[8]
_DI[:] = [-1, 0, 1, 0, -1, -1, 1, 1]
_DJ[:] = [0, -1, 0, 1, -1, 1, -1, 1]

# Cell flags of the per-sentence alignment matrix.
cdef enum:
    IN_FWD = 1
    IN_REV = 2
    IN_A = 4


cdef int64_t _gdfa_sentence(const int32_t* fe, const int32_t* ff, int64_t n_fwd,
                            const int32_t* re, const int32_t* rf, int64_t n_rev,
                            int64_t le, int64_t lf, uint8_t* mat, uint8_t* ae, uint8_t* af,
                            int32_t* out_e, int32_t* out_f) noexcept nogil:
    """grow-diag-final-and of one sentence; writes the sorted links, returns their number.

    1. A = F & R.  2. Repeat passes until none adds a link: scan (i, j) row-major; at each
    cell in A at the moment the scan reaches it, for each neighbour in _DI/_DJ order, add it
    if it is in F | R, not in A, and its English or its foreign word is unaligned in A.
    3. For F, then R, in (i, j) order: add (i, j) if both words are unaligned in A.
    """
    cdef int64_t x, i, j, ii, jj, d, n_out = 0
    cdef bint added = True
    for x in range(le * lf):
        mat[x] = 0
    for i in range(le):
        ae[i] = 0
    for j in range(lf):
        af[j] = 0
    for x in range(n_fwd):
        mat[fe[x] * lf + ff[x]] |= IN_FWD
    for x in range(n_rev):
        mat[re[x] * lf + rf[x]] |= IN_REV
    for x in range(le * lf):
        if mat[x] == (IN_FWD | IN_REV):
            mat[x] |= IN_A
            ae[x // lf] = 1
            af[x % lf] = 1
    while added:
        added = False
        for i in range(le):
            for j in range(lf):
                if not (mat[i * lf + j] & IN_A):
                    continue
                for d in range(8):
                    ii = i + _DI[d]
                    jj = j + _DJ[d]
                    if ii < 0 or ii >= le or jj < 0 or jj >= lf:
                        continue
                    x = ii * lf + jj
                    if mat[x] != 0 and not (mat[x] & IN_A) and (not ae[ii] or not af[jj]):
                        mat[x] |= IN_A
                        ae[ii] = 1
                        af[jj] = 1
                        added = True
    # FINAL-AND: each direction's links in (i, j) order (they arrive sorted).
    for x in range(n_fwd):
        i, j = fe[x], ff[x]
        if not ae[i] and not af[j]:
            mat[i * lf + j] |= IN_A
            ae[i] = 1
            af[j] = 1
    for x in range(n_rev):
        i, j = re[x], rf[x]
        if not ae[i] and not af[j]:
            mat[i * lf + j] |= IN_A
            ae[i] = 1
            af[j] = 1
    for i in range(le):
        for j in range(lf):
            if mat[i * lf + j] & IN_A:
                out_e[n_out] = <int32_t> i
                out_f[n_out] = <int32_t> j
                n_out += 1
    return n_out


def grow_diag_final_and(const int32_t[::1] fwd_e, const int32_t[::1] fwd_f,
                        const int64_t[::1] fwd_offsets,
                        const int32_t[::1] rev_e, const int32_t[::1] rev_f,
                        const int64_t[::1] rev_offsets,
                        const int64_t[::1] e_lengths, const int64_t[::1] f_lengths,
                        int32_t[::1] out_e, int32_t[::1] out_f, int64_t[::1] out_count,
                        int64_t max_cells, int64_t max_len, int n_threads):
    """Symmetrise a bitext; sentence s writes its links at fwd_offsets[s] + rev_offsets[s].

    Both inputs are ragged, sorted by (i, j), unique and inside the sentence (the caller
    checks). ``out_count[s]`` receives the number of links of sentence s; the caller compacts.
    """
    cdef int64_t n_sent = fwd_offsets.shape[0] - 1
    cdef int64_t s, base
    cdef uint8_t* mat
    cdef uint8_t* ae
    cdef uint8_t* af
    mat = ae = af = NULL
    if n_sent <= 0:
        return
    with nogil, parallel(num_threads=n_threads):
        mat = <uint8_t*> malloc(max_cells + 1)
        ae = <uint8_t*> malloc(max_len + 1)
        af = <uint8_t*> malloc(max_len + 1)
        for s in prange(n_sent, schedule="dynamic", chunksize=256):
            base = fwd_offsets[s] + rev_offsets[s]
            out_count[s] = _gdfa_sentence(
                &fwd_e[0] + fwd_offsets[s], &fwd_f[0] + fwd_offsets[s],
                fwd_offsets[s + 1] - fwd_offsets[s],
                &rev_e[0] + rev_offsets[s], &rev_f[0] + rev_offsets[s],
                rev_offsets[s + 1] - rev_offsets[s],
                e_lengths[s], f_lengths[s], mat, ae, af,
                &out_e[0] + base, &out_f[0] + base)
        free(mat)
        free(ae)
        free(af)
