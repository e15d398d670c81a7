# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, embedsignature=True
"""The hot loops of pivot: phrase-pair extraction with weighted counts, and the pivot product.

Two stages live here, each a Python-callable entry point over typed memoryviews (no numpy
headers at build time; the callers in ``pivot/pipeline/extract.py`` and
``pivot/pipeline/pivoting.py`` validate shapes and dtypes first):

``extract_phrase_table``
    Consistent phrase pairs (phrase-based MT's standard rule, as Moses' ``phrase-extract``) from a
    word-aligned bitext. Each instance adds ``weights[s, k]`` to ``count_k(e, f)`` for every
    model k and 1 to the integer support. Phrases are packed into two 64-bit words (21 bits a
    token, most significant first, token id + 1 so 0 is padding) and the instances are sorted
    once, so equal keys are adjacent, ids come out in lexicographic order of the token tuple,
    and every weighted sum is accumulated in sentence order (deterministic to the bit).

``bucket_by``
    Stable counting sort of pairs by foreign phrase: the CSC layouts of the pruned structure
    (the pruning rules themselves are pivot.pipeline.pruning).

``pair_overlaps``
    What two phrases of a stored pair share (the string features of pivot.pipeline.ppdb2): the
    token positions of each found in the other, and the size of the intersection of their
    character-trigram sets (a merge of two ascending id lists).

``standardised_sums``
    The linear predictors (pivot.pipeline.ppdb2.standardised_matrix) of pivot.pipeline.ppdb2's fits applied to every pair: per pair i and
    model k, b_k + sum_j c_kj (x_ij - mean_j) / sd_j, every operation rounded as numpy's
    elementwise ufuncs round it and in the same order (the Python reference's bytes).

``log_floor``
    log x where x > 0, a floor elsewhere: pivot.portable.log's operations (its fast path,
    fdlibm's form) for normal positive finite x, in C: the same bits, with the coefficients
    that pivot.portable passes in.

``normalise_kept`` and ``pivot_product``
    p_k(f|e) = c_k(e,f) / sum_f' c_k(e,f'),  p_k(e|f) = c_k(e,f) / sum_e' c_k(e',f)
    P_k(e1,e2) = sum_f p_k(e2|f) p_k(f|e1)   (e2 != e1), for all K models in one pass:
    threads over e1 rows, one sparse accumulator per thread (a small hash table over the
    row's e2) that keeps the K sums of a touched e2 contiguous, top-N per row, and the top-3
    pivots under model 0. Every sum has a fixed order, so results are the same to the bit
    for any number of threads (and, as it happens, equal to scipy's R_k @ K_k^T).
"""
from cython.parallel cimport parallel, prange, threadid
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset
from cython.view cimport array as cvarray
from libcpp.vector cimport vector

import numpy as np

cdef extern from * nogil:
    """
    #include <algorithm>
    #include <cstdint>
    #include <vector>

    /* One extracted phrase-pair instance: packed English key, packed foreign key, sentence. */
    struct PivotPhraseInst { uint64_t e_hi, e_lo, f_hi, f_lo; int64_t sent; };

    /* A unique pair's foreign key, remembered with the pair's index to assign foreign ids. */
    struct PivotFKeyRef { uint64_t hi, lo; int64_t pair; };

    /* (e key, f key, sentence) ascending: keys give lexicographic token order, the sentence
       makes the summation order of every weighted count independent of the sort algorithm. */
    static void pivot_sort_insts(std::vector<PivotPhraseInst>& v) {
        std::sort(v.begin(), v.end(), [](const PivotPhraseInst& a, const PivotPhraseInst& b) {
            if (a.e_hi != b.e_hi) return a.e_hi < b.e_hi;
            if (a.e_lo != b.e_lo) return a.e_lo < b.e_lo;
            if (a.f_hi != b.f_hi) return a.f_hi < b.f_hi;
            if (a.f_lo != b.f_lo) return a.f_lo < b.f_lo;
            return a.sent < b.sent;
        });
    }

    static void pivot_sort_fkeys(std::vector<PivotFKeyRef>& v) {
        std::sort(v.begin(), v.end(), [](const PivotFKeyRef& a, const PivotFKeyRef& b) {
            if (a.hi != b.hi) return a.hi < b.hi;
            if (a.lo != b.lo) return a.lo < b.lo;
            return a.pair < b.pair;
        });
    }

    /* Ask for transparent huge pages on a large block: first-touching the output on 4 KiB
       pages costs more than computing it on some machines (VMs especially). */
    #if defined(__linux__)
    #include <sys/mman.h>
    #endif
    static inline void pivot_advise_huge(void* p, size_t n) {
    #if defined(__linux__) && defined(MADV_HUGEPAGE)
        if (n < ((size_t)4 << 20)) return;
        uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
        uintptr_t b = ((uintptr_t)p + n) & ~(uintptr_t)4095;
        if (b > a) madvise((void*)a, b - a, MADV_HUGEPAGE);
    #endif
    }

    static inline void pivot_prefetch(const void* p) {
    #if defined(__GNUC__)
        __builtin_prefetch(p, 0, 3);
    #endif
    }

    /* a[0:n] is a concatenation of ascending runs starting at run[0..n_runs): merge them
       pairwise (bottom-up, through tmp), O(n log n_runs). run is overwritten. */
    static void pivot_merge_runs(int64_t* a, int64_t* tmp, int64_t* run, int64_t n_runs, int64_t n) {
        int64_t* src = a;
        int64_t* dst = tmp;
        while (n_runs > 1) {
            int64_t out_runs = 0;
            for (int64_t r = 0; r < n_runs; r += 2) {
                int64_t lo = run[r];
                int64_t mid = r + 1 < n_runs ? run[r + 1] : n;
                int64_t hi = r + 2 < n_runs ? run[r + 2] : n;
                if (r + 1 < n_runs) std::merge(src + lo, src + mid, src + mid, src + hi, dst + lo);
                else std::copy(src + lo, src + n, dst + lo);
                run[out_runs++] = lo;
            }
            n_runs = out_runs;
            std::swap(src, dst);
        }
        if (src != a) std::copy(src, src + n, a);
    }

    static inline void pivot_sort_int64(int64_t* a, int64_t n) { std::sort(a, a + n); }

    /* Rule (c) for one row: keep[slot] = 1 when the slot ranks < top_n among the nonzero sums
       of some model (value descending, then e2 ascending). acc[slot*K + k] are the sums.
       Per model, tau = the top_n-th largest nonzero value (nth_element on a copy): values
       above tau are in, and of those equal to tau the smallest e2 fill the last places.
       Scratch: vals (K * n_t doubles), ties (K * n_t keys), cnt/n_gt/n_eq (K each). */
    static void pivot_top_n(const double* acc, const int32_t* touched, int64_t n_t, int K,
                            int64_t top_n, double* vals, int64_t* ties, double* tau,
                            int64_t* cnt, int64_t* n_gt, int64_t* n_eq, char* keep) {
        for (int k = 0; k < K; k++) { cnt[k] = 0; n_gt[k] = 0; n_eq[k] = 0; }
        for (int64_t slot = 0; slot < n_t; slot++) {
            const double* s = acc + slot * K;
            for (int k = 0; k < K; k++)
                if (s[k] != 0.0) vals[(int64_t)k * n_t + cnt[k]++] = s[k];
        }
        for (int k = 0; k < K; k++) {
            if (cnt[k] <= top_n) { tau[k] = 0.0; continue; }   /* all nonzero values are in */
            double* v = vals + (int64_t)k * n_t;
            std::nth_element(v, v + (cnt[k] - top_n), v + cnt[k]);
            tau[k] = v[cnt[k] - top_n];
        }
        for (int64_t slot = 0; slot < n_t; slot++) {
            const double* s = acc + slot * K;
            char in = 0;
            for (int k = 0; k < K; k++) {
                if (s[k] > tau[k]) { in = 1; n_gt[k]++; }
                else if (s[k] == tau[k] && s[k] != 0.0)
                    ties[(int64_t)k * n_t + n_eq[k]++] = ((int64_t)touched[slot] << 32) | slot;
            }
            keep[slot] = in;
        }
        for (int k = 0; k < K; k++) {
            int64_t* t = ties + (int64_t)k * n_t;
            int64_t room = top_n - n_gt[k], n = n_eq[k];
            if (n > room) { std::sort(t, t + n); n = room; }   /* ties: smaller e2 first */
            for (int64_t i = 0; i < n; i++) keep[t[i] & 0xFFFFFFFF] = 1;
        }
    }

    """
    cppclass PivotPhraseInst:
        uint64_t e_hi, e_lo, f_hi, f_lo
        int64_t sent

    cppclass PivotFKeyRef:
        uint64_t hi, lo
        int64_t pair

    void pivot_sort_insts(vector[PivotPhraseInst]& v) except +
    void pivot_sort_fkeys(vector[PivotFKeyRef]& v) except +
    void pivot_sort_int64(int64_t* a, int64_t n)
    void pivot_merge_runs(int64_t* a, int64_t* tmp, int64_t* run, int64_t n_runs, int64_t n)
    void pivot_advise_huge(void* p, size_t n)
    void pivot_prefetch(const void* p)
    void pivot_top_n(const double* acc, const int32_t* touched, int64_t n_t, int K,
                     int64_t top_n, double* vals, int64_t* ties, double* tau,
                     int64_t* cnt, int64_t* n_gt, int64_t* n_eq, char* keep)


# Token packing: 21 bits a token (id + 1; 0 is padding), three tokens a 64-bit word, so two
# words hold MAX_PHRASE_LEN tokens and comparing (hi, lo) compares the token tuples.
cdef enum:
    TOKEN_BITS = 21
cdef uint64_t TOKEN_MASK = (1 << TOKEN_BITS) - 1
MAX_TOKEN_ID = (1 << TOKEN_BITS) - 2
MAX_PHRASE_LEN = 6
cdef int32_t NO_POS = 2147483647
cdef enum:
    WAVE_SHIFT = 17
cdef int64_t LOW32 = 0xFFFFFFFF    # the slot half of an (e2 << 32 | slot) key


cdef inline uint64_t _shift(int pos) noexcept nogil:
    """Bit offset of the token at position pos (0..5) inside its 64-bit word, MSB first."""
    return 42 - TOKEN_BITS * (pos % 3)


cdef inline void _pack(const int32_t* tok, int64_t start, int64_t stop,
                       uint64_t* hi, uint64_t* lo) noexcept nogil:
    """Pack tok[start:stop] (at most 6 tokens) into the two key words."""
    cdef int64_t i
    cdef int pos
    hi[0] = 0
    lo[0] = 0
    for i in range(start, stop):
        pos = <int>(i - start)
        if pos < 3:
            hi[0] |= (<uint64_t>(tok[i] + 1)) << _shift(pos)
        else:
            lo[0] |= (<uint64_t>(tok[i] + 1)) << _shift(pos)


cdef void _unpack(uint64_t hi, uint64_t lo, int32_t* row, int max_len) noexcept nogil:
    """Write the tokens of a key into row[0:max_len], -1 where the phrase has ended."""
    cdef int pos
    cdef uint64_t word
    for pos in range(max_len):
        word = hi if pos < 3 else lo
        row[pos] = <int32_t>((word >> _shift(pos)) & TOKEN_MASK) - 1


cdef int64_t _extract_sentence(
        const int32_t* e_tok, int64_t le, const int32_t* f_tok, int64_t lf,
        const int32_t* link_e, const int32_t* link_f, int64_t n_links, int64_t sent, int max_len,
        int32_t* e_fmin, int32_t* e_fmax, int32_t* f_emin, int32_t* f_emax, int32_t* f_nlinks,
        vector[PivotPhraseInst]* out) noexcept nogil:
    """Append the consistent phrase pairs of one sentence to out (only count them when out is
    NULL); returns their number, or -1 - (index of the link) on a link outside the sentence.

    For every English span [e1, e2] (length <= max_len) the minimal foreign span [fmin, fmax]
    covering its links is consistent when no foreign word inside it links outside [e1, e2];
    it is emitted together with every extension over unaligned foreign words at either edge.
    """
    cdef int64_t i, e1, e2, j, fs, fe, fmin, fmax, n_out = 0
    cdef bint ok
    cdef uint64_t e_hi, e_lo
    cdef PivotPhraseInst inst
    for i in range(le):
        e_fmin[i] = NO_POS
        e_fmax[i] = -1
    for i in range(lf):
        f_emin[i] = NO_POS
        f_emax[i] = -1
        f_nlinks[i] = 0
    for i in range(n_links):
        e1 = link_e[i]
        j = link_f[i]
        if e1 < 0 or e1 >= le or j < 0 or j >= lf:
            return -1 - i
        if j < e_fmin[e1]:
            e_fmin[e1] = <int32_t>j
        if j > e_fmax[e1]:
            e_fmax[e1] = <int32_t>j
        if e1 < f_emin[j]:
            f_emin[j] = <int32_t>e1
        if e1 > f_emax[j]:
            f_emax[j] = <int32_t>e1
        f_nlinks[j] += 1
    inst.sent = sent
    for e1 in range(le):
        fmin = NO_POS
        fmax = -1
        e_hi = 0
        e_lo = 0
        for e2 in range(e1, min(e1 + max_len, le)):
            # Grow the English key by one token.
            if e2 - e1 < 3:
                e_hi |= (<uint64_t>(e_tok[e2] + 1)) << _shift(<int>(e2 - e1))
            else:
                e_lo |= (<uint64_t>(e_tok[e2] + 1)) << _shift(<int>(e2 - e1))
            if e_fmax[e2] >= 0:
                fmin = min(fmin, <int64_t>e_fmin[e2])
                fmax = max(fmax, <int64_t>e_fmax[e2])
            if fmax < 0:
                continue                      # no alignment point in [e1, e2] yet
            if fmax - fmin + 1 > max_len:
                break                         # the foreign span only widens as e2 grows
            # Consistency: every foreign word in [fmin, fmax] links only into [e1, e2].
            ok = True
            for j in range(fmin, fmax + 1):
                if f_nlinks[j] > 0 and (f_emin[j] < e1 or f_emax[j] > e2):
                    ok = False
                    break
            if not ok:
                continue
            inst.e_hi = e_hi
            inst.e_lo = e_lo
            # Extensions over unaligned foreign edge words, left and right independently.
            fs = fmin
            while True:
                fe = fmax
                while True:
                    if out != NULL:
                        _pack(f_tok, fs, fe + 1, &inst.f_hi, &inst.f_lo)
                        out.push_back(inst)
                    n_out += 1
                    fe += 1
                    if fe >= lf or f_nlinks[fe] > 0 or fe - fs + 1 > max_len:
                        break
                fs -= 1
                if fs < 0 or f_nlinks[fs] > 0 or fmax - fs + 1 > max_len:
                    break
    return n_out


def extract_phrase_table(const int32_t[::1] e_tokens, const int64_t[::1] e_offsets,
                         const int32_t[::1] f_tokens, const int64_t[::1] f_offsets,
                         const int32_t[::1] link_e, const int32_t[::1] link_f,
                         const int64_t[::1] link_offsets, const double[:, ::1] weights,
                         int max_len):
    """Extract consistent phrase pairs and count them under every weight column.

    Returns (e_phrases, f_phrases, e_id, f_id, counts, support, e_count) as numpy arrays;
    see :class:`pivot.pipeline.extract.PhraseTable`. Offsets must already be validated (monotone,
    in range); links are checked here and a bad one raises ValueError naming its sentence.
    """
    cdef Py_ssize_t n = e_offsets.shape[0] - 1
    cdef Py_ssize_t K = weights.shape[1]
    cdef int64_t s, i, k, max_le = 0, max_lf = 0, bad_sent = -1, bad_link = -1, rc
    cdef int32_t tmin = 0, tmax = 0
    if max_len < 1 or max_len > MAX_PHRASE_LEN:
        raise ValueError(f"max_len must be in 1..{MAX_PHRASE_LEN}, got {max_len}")
    if weights.shape[0] != n:
        raise ValueError(f"weights has {weights.shape[0]} rows for {n} sentence pairs")
    # Token ids must fit the 21-bit packing.
    with nogil:
        for i in range(e_tokens.shape[0]):
            tmin = min(tmin, e_tokens[i])
            tmax = max(tmax, e_tokens[i])
        for i in range(f_tokens.shape[0]):
            tmin = min(tmin, f_tokens[i])
            tmax = max(tmax, f_tokens[i])
        for s in range(n):
            max_le = max(max_le, e_offsets[s + 1] - e_offsets[s])
            max_lf = max(max_lf, f_offsets[s + 1] - f_offsets[s])
    if tmin < 0 or tmax > MAX_TOKEN_ID:
        raise ValueError(f"token ids must be in 0..{MAX_TOKEN_ID} (21-bit phrase packing); "
                         f"found ids in {tmin}..{tmax}")

    cdef vector[int32_t] e_fmin, e_fmax, f_emin, f_emax, f_nlinks
    e_fmin.resize(max_le + 1)
    e_fmax.resize(max_le + 1)
    f_emin.resize(max_lf + 1)
    f_emax.resize(max_lf + 1)
    f_nlinks.resize(max_lf + 1)
    cdef vector[PivotPhraseInst] insts
    cdef const int32_t* e_tok_p = &e_tokens[0] if e_tokens.shape[0] else NULL
    cdef const int32_t* f_tok_p = &f_tokens[0] if f_tokens.shape[0] else NULL
    cdef const int32_t* le_p = &link_e[0] if link_e.shape[0] else NULL
    cdef const int32_t* lf_p = &link_f[0] if link_f.shape[0] else NULL
    cdef int64_t n_inst = 0
    cdef vector[PivotPhraseInst]* sink = NULL
    cdef int extract_pass
    # Pass 0 counts the instances (and checks every link), pass 1 stores them into a vector
    # reserved to the exact size: 40 bytes an instance, no reallocation.
    with nogil:
        for extract_pass in range(2):
            if extract_pass == 1:
                insts.reserve(<size_t>n_inst)
                sink = &insts
            for s in range(n):
                rc = _extract_sentence(
                    e_tok_p + e_offsets[s], e_offsets[s + 1] - e_offsets[s],
                    f_tok_p + f_offsets[s], f_offsets[s + 1] - f_offsets[s],
                    le_p + link_offsets[s], lf_p + link_offsets[s],
                    link_offsets[s + 1] - link_offsets[s], s, max_len,
                    e_fmin.data(), e_fmax.data(), f_emin.data(), f_emax.data(), f_nlinks.data(),
                    sink)
                if rc < 0:
                    bad_sent = s
                    bad_link = link_offsets[s] + (-1 - rc)
                    break
                n_inst += rc
            if bad_sent >= 0:
                break
    if bad_sent >= 0:
        raise ValueError(
            f"sentence {bad_sent}: alignment link {link_e[bad_link]}-{link_f[bad_link]} is out of "
            f"range (English length {e_offsets[bad_sent + 1] - e_offsets[bad_sent]}, "
            f"foreign length {f_offsets[bad_sent + 1] - f_offsets[bad_sent]})")

    pivot_sort_insts(insts)

    # How many distinct English phrases and distinct pairs.
    n_inst = insts.size()
    cdef int64_t n_e = 0, n_pairs = 0
    cdef PivotPhraseInst* a = insts.data()
    with nogil:
        for i in range(n_inst):
            if i == 0 or a[i].e_hi != a[i - 1].e_hi or a[i].e_lo != a[i - 1].e_lo:
                n_e += 1
                n_pairs += 1
            elif a[i].f_hi != a[i - 1].f_hi or a[i].f_lo != a[i - 1].f_lo:
                n_pairs += 1

    e_phrases_np = np.empty((n_e, max_len), dtype=np.int32)
    e_id_np = np.empty(n_pairs, dtype=np.int32)
    f_id_np = np.empty(n_pairs, dtype=np.int32)
    counts_np = np.zeros((n_pairs, K), dtype=np.float64)
    support_np = np.zeros(n_pairs, dtype=np.int64)
    e_count_np = np.zeros(n_e, dtype=np.int64)
    cdef int32_t[:, ::1] e_phrases = e_phrases_np
    cdef int32_t[::1] e_id = e_id_np
    cdef int32_t[::1] f_id = f_id_np
    cdef double[:, ::1] counts = counts_np
    cdef int64_t[::1] support = support_np
    cdef int64_t[::1] e_count = e_count_np
    cdef vector[PivotFKeyRef] fkeys
    fkeys.resize(n_pairs)
    cdef PivotFKeyRef* fk = fkeys.data()
    cdef int64_t ei = -1, p = -1, sent
    # Ids, support and weighted counts (segment sums over the sorted instances).
    with nogil:
        for i in range(n_inst):
            if i == 0 or a[i].e_hi != a[i - 1].e_hi or a[i].e_lo != a[i - 1].e_lo:
                ei += 1
                _unpack(a[i].e_hi, a[i].e_lo, &e_phrases[ei, 0], max_len)
                p += 1
                e_id[p] = <int32_t>ei
                fk[p].hi = a[i].f_hi
                fk[p].lo = a[i].f_lo
                fk[p].pair = p
            elif a[i].f_hi != a[i - 1].f_hi or a[i].f_lo != a[i - 1].f_lo:
                p += 1
                e_id[p] = <int32_t>ei
                fk[p].hi = a[i].f_hi
                fk[p].lo = a[i].f_lo
                fk[p].pair = p
            support[p] += 1
            e_count[ei] += 1
            sent = a[i].sent
            for k in range(K):
                counts[p, k] += weights[sent, k]
    # The instances are no longer needed: give their memory back before the foreign sort.
    insts.clear()
    insts.shrink_to_fit()

    # Foreign ids in lexicographic order of the foreign token tuple.
    pivot_sort_fkeys(fkeys)
    cdef int64_t n_f = 0
    with nogil:
        for i in range(n_pairs):
            if i == 0 or fk[i].hi != fk[i - 1].hi or fk[i].lo != fk[i - 1].lo:
                n_f += 1
    f_phrases_np = np.empty((n_f, max_len), dtype=np.int32)
    cdef int32_t[:, ::1] f_phrases = f_phrases_np
    cdef int64_t fi = -1
    with nogil:
        for i in range(n_pairs):
            if i == 0 or fk[i].hi != fk[i - 1].hi or fk[i].lo != fk[i - 1].lo:
                fi += 1
                _unpack(fk[i].hi, fk[i].lo, &f_phrases[fi, 0], max_len)
            f_id[fk[i].pair] = <int32_t>fi
    return e_phrases_np, f_phrases_np, e_id_np, f_id_np, counts_np, support_np, e_count_np


# ------------------------------------------------------------------------------ the pivot


def bucket_by(const int32_t[::1] keys, int64_t n_buckets):
    """Stable counting sort: (ptr, order) with keys[order] ascending, ties in input order.

    ptr[b]:ptr[b+1] is the range of order holding the positions of key b. O(n + n_buckets).
    """
    cdef int64_t n = keys.shape[0], i, b, bad = -1
    ptr_np = np.zeros(n_buckets + 1, dtype=np.int64)
    order_np = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] ptr = ptr_np
    cdef int64_t[::1] order = order_np
    cdef int64_t[::1] nxt
    with nogil:
        for i in range(n):
            b = keys[i]
            if b < 0 or b >= n_buckets:
                bad = i
                break
            ptr[b + 1] += 1
    if bad >= 0:
        raise ValueError(f"key {keys[bad]} outside 0..{n_buckets - 1}")
    nxt_np = np.empty(n_buckets + 1, dtype=np.int64)
    nxt = nxt_np
    with nogil:
        for b in range(n_buckets):
            ptr[b + 1] += ptr[b]
            nxt[b] = ptr[b]
        for i in range(n):
            b = keys[i]
            order[nxt[b]] = i
            nxt[b] += 1
    return ptr_np, order_np


cdef bint _valid_ptr(const int64_t* ptr, int64_t n_rows) noexcept nogil:
    """ptr[0] == 0 and ptr non-decreasing over n_rows + 1 entries."""
    cdef int64_t i
    if ptr[0] != 0:
        return False
    for i in range(n_rows):
        if ptr[i + 1] < ptr[i]:
            return False
    return True


cdef bint _valid_idx(const int64_t* idx, int64_t n, int64_t bound) noexcept nogil:
    """0 <= idx[i] < bound for every i < n."""
    cdef int64_t i
    for i in range(n):
        if idx[i] < 0 or idx[i] >= bound:
            return False
    return True


def normalise_kept(const double[:, ::1] counts, const int64_t[::1] full_row_ptr,
                   const int64_t[::1] full_col_ptr, const int64_t[::1] full_csc_pair,
                   const int64_t[::1] row_ptr, const int64_t[::1] kept,
                   const int64_t[::1] col_ptr, const int64_t[::1] csc_pair, int n_threads):
    """Translation probabilities of the kept entries, normalised over the full table.

    p_fe[j, k] = p_k(f|e) = c_k(e,f) / sum_f' c_k(e,f') for the kept pairs kept[j] (CSR order,
    rows row_ptr); p_ef[m, k] = p_k(e|f) = c_k(e,f) / sum_e' c_k(e',f) for the kept pairs
    csc_pair[m] (CSC order, columns col_ptr); 0/0 gives 0. The sums run over every pair of the
    row (full_row_ptr: pairs are sorted by e) or column (full_col_ptr/full_csc_pair: all pairs
    stably sorted by f), pruned or not, always in pair order: the same bits for any n_threads.
    """
    cdef Py_ssize_t K = counts.shape[1]
    cdef int64_t n_e = row_ptr.shape[0] - 1, n_f = col_ptr.shape[0] - 1
    cdef int64_t n_kept = kept.shape[0]
    if n_threads < 1:
        raise ValueError("n_threads must be >= 1")
    if n_e < 0 or n_f < 0 or full_row_ptr.shape[0] != n_e + 1 or full_col_ptr.shape[0] != n_f + 1 \
            or csc_pair.shape[0] != n_kept or full_csc_pair.shape[0] != counts.shape[0] \
            or full_row_ptr[n_e] != counts.shape[0] or row_ptr[n_e] != n_kept \
            or col_ptr[n_f] != n_kept or full_col_ptr[n_f] != counts.shape[0]:
        raise ValueError("inconsistent table layouts")
    cdef int64_t n_pairs = counts.shape[0]
    if not (_valid_ptr(&full_row_ptr[0], n_e) and _valid_ptr(&full_col_ptr[0], n_f)
            and _valid_ptr(&row_ptr[0], n_e) and _valid_ptr(&col_ptr[0], n_f)
            and _valid_idx(&full_csc_pair[0] if n_pairs else NULL, n_pairs, n_pairs)
            and _valid_idx(&kept[0] if n_kept else NULL, n_kept, n_pairs)
            and _valid_idx(&csc_pair[0] if n_kept else NULL, n_kept, n_pairs)):
        raise ValueError("invalid table layout (pointers not monotone, or pair indices out of range)")
    p_fe_np = np.empty((n_kept, K), dtype=np.float64)
    p_ef_np = np.empty((n_kept, K), dtype=np.float64)
    cdef double[:, ::1] p_fe = p_fe_np
    cdef double[:, ::1] p_ef = p_ef_np
    cdef int64_t e, f, q, j
    cdef Py_ssize_t k
    cdef double total
    if n_kept == 0:
        return p_fe_np, p_ef_np
    with nogil, parallel(num_threads=n_threads):
        for e in prange(n_e, schedule="dynamic", chunksize=256):
            if row_ptr[e] == row_ptr[e + 1]:
                continue
            for k in range(K):
                total = 0.0
                for q in range(full_row_ptr[e], full_row_ptr[e + 1]):
                    total = total + counts[q, k]
                for j in range(row_ptr[e], row_ptr[e + 1]):
                    p_fe[j, k] = counts[kept[j], k] / total if total != 0.0 else 0.0
        for f in prange(n_f, schedule="dynamic", chunksize=256):
            if col_ptr[f] == col_ptr[f + 1]:
                continue
            for k in range(K):
                total = 0.0
                for q in range(full_col_ptr[f], full_col_ptr[f + 1]):
                    total = total + counts[full_csc_pair[q], k]
                for j in range(col_ptr[f], col_ptr[f + 1]):
                    p_ef[j, k] = counts[csc_pair[j], k] / total if total != 0.0 else 0.0
    return p_fe_np, p_ef_np


cdef struct RowScratch:
    # Sparse accumulator of one thread: an open-addressing hash table e2 -> slot, sized per
    # row to twice the row's bound on distinct e2 (it stays in L1/L2, where a dense marker
    # over all n_e phrases would miss the cache on nearly every access).
    int32_t* h_key       # hash position -> e2, -1 when free
    int32_t* h_slot      # hash position -> slot
    int32_t* touched     # slot -> e2, in first-touch order
    int64_t* h_pos       # slot -> its hash position (to clear the table after the row)
    double* acc          # slot*K + k: the K running sums of a slot, contiguous
    int32_t* n_shared    # slot -> number of shared pivots
    double* top_c        # slot*3 + r: the 3 best model-0 contributions, best first
    int32_t* top_f       # slot*3 + r: their foreign ids
    int64_t* order       # (e2 << 32 | slot) of the kept e2, sorted
    int64_t* order_tmp   # merge buffer
    int64_t* run         # slot where each column's new e2 start (an ascending run of e2)
    double* vals         # rule (c): each model's nonzero sums (K blocks of cap)
    int64_t* ties        # rule (c): each model's (e2 << 32 | slot) tied at its threshold
    double* tau          # rule (c): each model's threshold
    int64_t* cnt         # rule (c): 3 * K counters
    char* keep           # slot kept (by rule (c) of some model, or nonzero when no cut)
    # Output of the rows this thread ran in the current wave, in the order it ran them.
    int32_t* out_e2
    int32_t* out_n
    int32_t* out_piv
    double* out_p
    int64_t out_size
    int64_t out_cap
    int failed
    char pad[64]         # keep two threads' out_size off one cache line


cdef int _grow(RowScratch* st, int64_t need, int K) noexcept nogil:
    """Make room for need more output entries; 0 on success, -1 when memory runs out."""
    cdef int64_t cap = st.out_cap
    if st.out_size + need <= cap:
        return 0
    while cap < st.out_size + need:
        cap = cap * 2 if cap > 0 else 4096
    cdef void* p1 = realloc(st.out_e2, cap * sizeof(int32_t))
    if p1 == NULL:
        return -1
    st.out_e2 = <int32_t*>p1
    p1 = realloc(st.out_n, cap * sizeof(int32_t))
    if p1 == NULL:
        return -1
    st.out_n = <int32_t*>p1
    p1 = realloc(st.out_piv, cap * 3 * sizeof(int32_t))
    if p1 == NULL:
        return -1
    st.out_piv = <int32_t*>p1
    p1 = realloc(st.out_p, cap * K * sizeof(double))
    if p1 == NULL:
        return -1
    st.out_p = <double*>p1
    st.out_cap = cap
    pivot_advise_huge(st.out_p, cap * K * sizeof(double))
    return 0


cdef inline int64_t _table_size(int64_t bound) noexcept nogil:
    """Power of two >= 2 * bound (load factor <= 1/2), at least 16."""
    cdef int64_t size = 16
    while size < 2 * bound:
        size *= 2
    return size


cdef void _pivot_row(RowScratch* st, int32_t e1, int64_t base, int64_t n_rows, int K, int64_t top_n, double min_p,
                     int64_t bound, const int64_t* row_ptr, const int32_t* row_f, const double* p_fe,
                     const int64_t* col_ptr, const int32_t* col_e, const double* p_ef,
                     int32_t tid, int32_t* row_tid, int64_t* row_start,
                     int64_t* row_len) noexcept nogil:
    """P_k(e1, e2) = sum_f p_k(e2|f) p_k(f|e1) for one row e1, every model k at once.

    row_ptr, row_tid, row_start and row_len hold the n_rows rows from English id ``base`` on:
    row e1's entries are row_ptr[e1 - base] .. row_ptr[e1 - base + 1].

    Sums run over f ascending (the row's CSR order), then e2 ascending within f (CSC order),
    whichever thread runs the row, so every value is the same to the bit for any thread count.
    bound: an upper bound on the row's distinct e2 (sizes its hash table). min_p: the
    probability floor, applied per model: a sum P_k < min_p becomes 0 in column k (so
    model k keeps exactly its own pairs above the floor, whatever the other models hold).
    """
    cdef int32_t* h_key = st.h_key
    cdef int32_t* h_slot = st.h_slot
    cdef double* acc = st.acc
    cdef uint64_t mask = <uint64_t>(_table_size(bound) - 1)
    cdef int shift = 0
    cdef int64_t j, m, i, r, n_t = 0, n_keep
    cdef uint64_t h
    cdef int32_t f, e2, slot, k
    cdef const double* a
    cdef const double* b
    cdef double* s
    cdef double c
    cdef int64_t row = e1 - base
    cdef int64_t row_end = row_ptr[row + 1], m_next, n_runs = 0, n_kept_runs, first, run_end
    while (<uint64_t>1 << shift) <= mask:
        shift += 1
    # The columns of a row lie anywhere in memory: fetch the next column's start while this
    # one is summed, and the column pointer of the one after (two-step software pipeline).
    if row_ptr[row] + 1 < row_end:
        pivot_prefetch(&col_ptr[row_f[row_ptr[row] + 1]])
    for j in range(row_ptr[row], row_end):
        f = row_f[j]
        a = p_fe + j * K                       # p_k(f|e1), k = 0..K-1
        if j + 2 < row_end:
            pivot_prefetch(&col_ptr[row_f[j + 2]])
        if j + 1 < row_end:
            m_next = col_ptr[row_f[j + 1]]
            pivot_prefetch(col_e + m_next)
            pivot_prefetch(p_ef + m_next * K)
        # The e2 first seen in this column arrive in ascending order (CSC order): one run.
        first = n_t
        for m in range(col_ptr[f], col_ptr[f + 1]):
            e2 = col_e[m]
            if e2 == e1:
                continue
            b = p_ef + m * K                   # p_k(e2|f)
            # Fibonacci hashing: the top bits of e2 * 2^32/phi, linear probing.
            h = ((<uint64_t><uint32_t>e2 * <uint64_t>2654435769u) >> (32 - shift)) & mask
            while h_key[h] != e2 and h_key[h] >= 0:
                h = (h + 1) & mask
            if h_key[h] < 0:
                slot = <int32_t>n_t
                n_t += 1
                h_key[h] = e2
                h_slot[h] = slot
                st.touched[slot] = e2
                st.h_pos[slot] = <int64_t>h
                s = acc + <int64_t>slot * K
                # 0.0 + x == x for the non-negative products, so the first term is assigned.
                for k in range(K):
                    s[k] = b[k] * a[k]
                st.n_shared[slot] = 1
                r = <int64_t>slot * 3
                st.top_c[r] = b[0] * a[0]
                st.top_f[r] = f
                st.top_c[r + 1] = -1.0
                st.top_f[r + 1] = -1
                st.top_c[r + 2] = -1.0
                st.top_f[r + 2] = -1
                continue
            slot = h_slot[h]
            s = acc + <int64_t>slot * K
            for k in range(K):
                s[k] += b[k] * a[k]
            st.n_shared[slot] += 1
            # Provenance: keep the 3 largest model-0 contributions; f ascends, so a strict >
            # leaves an equal earlier (smaller) f ahead.
            c = b[0] * a[0]
            r = <int64_t>slot * 3
            if c > st.top_c[r + 2]:
                if c > st.top_c[r + 1]:
                    st.top_c[r + 2] = st.top_c[r + 1]
                    st.top_f[r + 2] = st.top_f[r + 1]
                    if c > st.top_c[r]:
                        st.top_c[r + 1] = st.top_c[r]
                        st.top_f[r + 1] = st.top_f[r]
                        st.top_c[r] = c
                        st.top_f[r] = f
                    else:
                        st.top_c[r + 1] = c
                        st.top_f[r + 1] = f
                else:
                    st.top_c[r + 2] = c
                    st.top_f[r + 2] = f
        if n_t > first:
            st.run[n_runs] = first
            n_runs += 1

    # The next row is most likely this thread's next: start fetching its first column.
    if row + 1 < n_rows and row_end < row_ptr[row + 2]:
        m_next = col_ptr[row_f[row_end]]
        pivot_prefetch(col_e + m_next)
        pivot_prefetch(p_ef + m_next * K)
        if row_end + 1 < row_ptr[row + 2]:
            pivot_prefetch(&col_ptr[row_f[row_end + 1]])

    for i in range(n_t):
        h_key[st.h_pos[i]] = -1                # clear the hash table for the next row
    # Choose the kept slots (keep[slot]), then write them in e2 order as (e2 << 32 | slot) keys:
    # slots are in first-touch order, a run of ascending e2 per column, so a merge of the
    # runs sorts them (free for the many rows with one or two kept f).
    if min_p > 0.0:
        # The floor first: rule (c) then ranks only what survives it, model by model.
        for slot in range(n_t):
            s = acc + <int64_t>slot * K
            for k in range(K):
                if s[k] < min_p:
                    s[k] = 0.0
    if top_n == 0 or n_t <= top_n:
        # Every nonzero value ranks < top_n: keep the pairs with any nonzero P_k.
        for slot in range(n_t):
            s = acc + <int64_t>slot * K
            st.keep[slot] = 0
            for k in range(K):
                if s[k] != 0.0:
                    st.keep[slot] = 1
                    break
    else:
        pivot_top_n(acc, st.touched, n_t, K, top_n, st.vals, st.ties, st.tau, st.cnt,
                    st.cnt + K, st.cnt + 2 * K, st.keep)
    n_keep = 0
    n_kept_runs = 0
    for r in range(n_runs):
        run_end = st.run[r + 1] if r + 1 < n_runs else n_t   # read before run[] is reused
        first = n_keep
        for slot in range(st.run[r], run_end):
            if st.keep[slot]:
                st.order[n_keep] = (<int64_t>st.touched[slot] << 32) | slot
                n_keep += 1
        if n_keep > first:
            st.run[n_kept_runs] = first
            n_kept_runs += 1
    pivot_merge_runs(st.order, st.order_tmp, st.run, n_kept_runs, n_keep)

    row_tid[row] = tid
    row_len[row] = n_keep
    row_start[row] = st.out_size
    if n_keep > 0:
        if _grow(st, n_keep, K) != 0:
            st.failed = 1
            row_len[row] = 0
        else:
            r = st.out_size
            for i in range(n_keep):
                slot = <int32_t>(st.order[i] & LOW32)
                st.out_e2[r] = <int32_t>(st.order[i] >> 32)
                st.out_n[r] = st.n_shared[slot]
                memcpy(st.out_p + r * K, acc + <int64_t>slot * K, K * sizeof(double))
                st.out_piv[r * 3] = st.top_f[slot * 3]
                st.out_piv[r * 3 + 1] = st.top_f[slot * 3 + 1]
                st.out_piv[r * 3 + 2] = st.top_f[slot * 3 + 2]
                r += 1
            st.out_size = r


cdef void _free_scratch(RowScratch* st) noexcept nogil:
    free(st.h_key)
    free(st.h_slot)
    free(st.touched)
    free(st.h_pos)
    free(st.acc)
    free(st.n_shared)
    free(st.top_c)
    free(st.top_f)
    free(st.order)
    free(st.order_tmp)
    free(st.run)
    free(st.vals)
    free(st.ties)
    free(st.tau)
    free(st.cnt)
    free(st.keep)
    free(st.out_e2)
    free(st.out_n)
    free(st.out_piv)
    free(st.out_p)


cdef int _alloc_scratch(RowScratch* st, int64_t cap, int64_t max_row, int K,
                        int64_t top_n) noexcept nogil:
    """Allocate one thread's accumulator for rows touching at most cap English phrases
    through at most max_row foreign phrases."""
    cdef int64_t i, size
    memset(st, 0, sizeof(RowScratch))
    cap = max(cap, <int64_t>1)
    size = _table_size(cap)
    st.h_key = <int32_t*>malloc(size * sizeof(int32_t))
    st.h_slot = <int32_t*>malloc(size * sizeof(int32_t))
    st.touched = <int32_t*>malloc(cap * sizeof(int32_t))
    st.h_pos = <int64_t*>malloc(cap * sizeof(int64_t))
    st.acc = <double*>malloc(cap * K * sizeof(double))
    st.n_shared = <int32_t*>malloc(cap * sizeof(int32_t))
    st.top_c = <double*>malloc(cap * 3 * sizeof(double))
    st.top_f = <int32_t*>malloc(cap * 3 * sizeof(int32_t))
    st.order = <int64_t*>malloc(cap * sizeof(int64_t))
    st.order_tmp = <int64_t*>malloc(cap * sizeof(int64_t))
    st.run = <int64_t*>malloc((max_row + 1) * sizeof(int64_t))
    # The rule (c) buffers are only needed when top_n cuts anything.
    st.vals = <double*>malloc((cap * K if top_n > 0 else 1) * sizeof(double))
    st.ties = <int64_t*>malloc((cap * K if top_n > 0 else 1) * sizeof(int64_t))
    st.tau = <double*>malloc(K * sizeof(double))
    st.cnt = <int64_t*>malloc(3 * K * sizeof(int64_t))
    st.keep = <char*>malloc(cap)
    if (st.h_key == NULL or st.h_slot == NULL or st.touched == NULL or st.h_pos == NULL
            or st.acc == NULL or st.n_shared == NULL or st.top_c == NULL or st.top_f == NULL
            or st.order == NULL or st.order_tmp == NULL or st.run == NULL or st.vals == NULL
            or st.ties == NULL or st.tau == NULL or st.cnt == NULL or st.keep == NULL):
        return -1
    for i in range(size):
        st.h_key[i] = -1
    return 0


cdef struct OutBuf:
    # The collected pairs, grown by realloc (large blocks are mremap-ed, not copied).
    int32_t* e1
    int32_t* e2
    int32_t* n
    int32_t* piv
    double* p
    int64_t size
    int64_t cap


cdef int _out_reserve(OutBuf* o, int64_t need, int K) noexcept nogil:
    """Room for need entries in total; 0 on success, -1 when memory runs out."""
    cdef int64_t cap = o.cap
    cdef void* q
    if need <= cap:
        return 0
    # The first call reserves exactly what is asked (the caller's bound on the output);
    # later calls (only when that bound could not be had) double.
    if cap == 0:
        cap = need
    while cap < need:
        cap *= 2
    q = realloc(o.e1, cap * sizeof(int32_t))
    if q == NULL:
        return -1
    o.e1 = <int32_t*>q
    q = realloc(o.e2, cap * sizeof(int32_t))
    if q == NULL:
        return -1
    o.e2 = <int32_t*>q
    q = realloc(o.n, cap * sizeof(int32_t))
    if q == NULL:
        return -1
    o.n = <int32_t*>q
    q = realloc(o.piv, cap * 3 * sizeof(int32_t))
    if q == NULL:
        return -1
    o.piv = <int32_t*>q
    q = realloc(o.p, cap * K * sizeof(double))
    if q == NULL:
        return -1
    o.p = <double*>q
    o.cap = cap
    pivot_advise_huge(o.e1, cap * sizeof(int32_t))
    pivot_advise_huge(o.e2, cap * sizeof(int32_t))
    pivot_advise_huge(o.n, cap * sizeof(int32_t))
    pivot_advise_huge(o.piv, cap * 3 * sizeof(int32_t))
    pivot_advise_huge(o.p, cap * K * sizeof(double))
    return 0


cdef void _out_free(OutBuf* o) noexcept nogil:
    free(o.e1)
    free(o.e2)
    free(o.n)
    free(o.piv)
    free(o.p)
    memset(o, 0, sizeof(OutBuf))


cdef void* _shrink(void* data, size_t size) noexcept nogil:
    """realloc down to size; keeps the old block if the allocator refuses."""
    cdef void* q = realloc(data, size)
    return q if q != NULL else data


cdef object _adopt(void* data, tuple shape, int itemsize, str fmt):
    """A numpy array that owns (and will free) a malloc-ed block, without copying it."""
    cdef cvarray arr = cvarray(shape=shape, itemsize=itemsize, format=fmt, mode="c",
                               allocate_buffer=False)
    arr.data = <char*>data
    arr.callback_free_data = free
    return np.asarray(arr)


cdef bint _valid_layout(const int64_t* ptr, int64_t n_rows, const int32_t* idx, int64_t n_idx,
                        int64_t n_cols) noexcept nogil:
    """ptr[0] == 0, ptr non-decreasing up to ptr[n_rows] == n_idx, and 0 <= idx < n_cols."""
    cdef int64_t i
    if ptr[0] != 0 or ptr[n_rows] != n_idx:
        return False
    for i in range(n_rows):
        if ptr[i + 1] < ptr[i]:
            return False
    for i in range(n_idx):
        if idx[i] < 0 or idx[i] >= n_cols:
            return False
    return True


def pivot_product(const int64_t[::1] row_ptr, const int32_t[::1] row_f, const double[:, ::1] p_fe,
                  const int64_t[::1] col_ptr, const int32_t[::1] col_e, const double[:, ::1] p_ef,
                  int64_t top_n, int n_threads, int64_t wave_work=0, int64_t row_lo=0, int64_t row_hi=-1,
                  double min_p=0.0, int64_t row_base=0, int64_t n_e=-1):
    """P_k(e1,e2) = sum_f p_k(e2|f) p_k(f|e1), e2 != e1, all K models in one pass, top-N per e1.

    row_ptr/row_f/p_fe: the kept entries by English phrase (CSR, f ascending in a row),
    p_fe[j, k] = p_k(f|e). col_ptr/col_e/p_ef: the same entries by foreign phrase (CSC, e
    ascending in a column), p_ef[m, k] = p_k(e|f). A pair is kept when it ranks < top_n among
    the row's nonzero P_k under some model k (value descending, smaller e2 first); top_n = 0
    keeps every pair with a nonzero P_k. min_p (>= 0) is a floor on P_k applied per model
    before that ranking: a value below it is stored as 0 in its column, and a pair with no
    value left is dropped (the recall setting: every pair above the floor, no top-N). Returns (e1, e2, p, n_pivots, pivots) sorted by
    (e1, e2); pivots holds the top-3 f by p_0(e2|f) p_0(f|e1) (ties: smaller f), -1 padded.

    Rows run in waves of about equal work (sum over the row's f of deg(f)): threads take rows
    of a wave dynamically into their own reused buffers, then the wave is copied in row order
    to the output. Memory is the output once plus one wave, and no result depends on which
    thread ran a row. wave_work overrides the work per wave (0: 2^17 per thread; tests use
    small values to run many waves). Scratch per thread: a hash table, the K sums and the
    rule-(c) buffers for the largest row's distinct e2 (at most the row's work), a few MB.

    row_lo/row_hi restrict the work to the rows row_lo <= e1 < row_hi (-1: every row): a
    sharded build gives each task a range; a row's result does not depend on the range.
    The CSC view need not hold the CSR's entries one for one: it may hold only the columns
    the rows reach (a task's own gathered columns, pivot.pipeline.pivoting.pivot_rows), as
    long as every f of row_f is one of its columns and col_e holds the rows' English ids.

    row_base/n_e: row_ptr may hold only the rows row_base .. row_base + len(row_ptr) - 2
    (row e's entries are row_ptr[e - row_base] .. row_ptr[e - row_base + 1], the first 0), of
    n_e English ids (-1: the last row's, row_base + len(row_ptr) - 1): a task's row_ptr is its
    range's, not n_e + 1 long. The per-row buffers below are the rows row_ptr holds.
    """
    cdef int64_t n_rows = row_ptr.shape[0] - 1
    if n_e < 0:
        n_e = row_base + n_rows
    cdef int64_t n_f = col_ptr.shape[0] - 1
    cdef int K = <int>p_fe.shape[1]
    cdef int64_t n_kept = row_f.shape[0]
    cdef int64_t n_csc = col_e.shape[0]
    if n_threads < 1:
        raise ValueError("n_threads must be >= 1")
    if top_n < 0:
        raise ValueError("top_n must be >= 0")
    if not min_p >= 0.0:
        raise ValueError("min_p must be >= 0")
    if n_rows < 0 or row_base < 0 or row_base + n_rows > n_e:
        raise ValueError(f"row_ptr's rows {row_base}..{row_base + n_rows} outside the {n_e} English ids")
    if n_f < 0 or p_fe.shape[0] != n_kept or p_ef.shape[0] != n_csc \
            or p_ef.shape[1] != K or K < 1:
        raise ValueError("CSR and CSC views must hold one probability row per entry, K columns each")
    # The loops below trust every index: check the layouts once (O(n_rows + n_f + n_kept + n_csc)).
    if not (_valid_layout(&row_ptr[0], n_rows, &row_f[0] if n_kept else NULL, n_kept, n_f)
            and _valid_layout(&col_ptr[0], n_f, &col_e[0] if n_csc else NULL, n_csc, n_e)):
        raise ValueError("invalid CSR/CSC layout (pointers not monotone, or ids out of range)")
    if row_hi < 0:
        row_hi = row_base + n_rows
    if not row_base <= row_lo <= row_hi <= row_base + n_rows:
        raise ValueError(f"row range {row_lo}..{row_hi} outside {row_base}..{row_base + n_rows}")
    if n_kept == 0 or n_csc == 0 or n_e == 0 or row_lo == row_hi:
        return (np.empty(0, np.int32), np.empty(0, np.int32), np.empty((0, K), np.float64),
                np.empty(0, np.int32), np.empty((0, 3), np.int32))

    # Work of each row, the bound on its distinct e2, and the wave boundaries.
    wave_ptr_np = np.empty(n_rows + 1, dtype=np.int64)
    row_work_np = np.zeros(n_rows, dtype=np.int64)
    cdef int64_t[::1] wave_ptr = wave_ptr_np
    cdef int64_t[::1] row_work_v = row_work_np
    cdef int64_t e, j, work, max_touched = 0, in_wave = 0, n_waves = 0, out_bound = 0, max_row = 0
    # About 128K work units a thread per wave: its buffer (<= 72 bytes a unit) stays in cache
    # for the copy, and the barrier at the end of a wave costs little against the work.
    cdef int64_t wave_target = wave_work if wave_work > 0 else (<int64_t>1 << WAVE_SHIFT) * n_threads
    with nogil:
        # The column lookups are random accesses: spread them over the threads.
        for e in prange(row_lo, row_hi, num_threads=n_threads, schedule="static"):
            work = 0
            for j in range(row_ptr[e - row_base], row_ptr[e - row_base + 1]):
                work = work + col_ptr[row_f[j] + 1] - col_ptr[row_f[j]]
            row_work_v[e - row_base] = min(work, n_e)
        wave_ptr[0] = row_lo
        for e in range(row_lo, row_hi):
            work = row_work_v[e - row_base]
            max_row = max(max_row, row_ptr[e - row_base + 1] - row_ptr[e - row_base])
            out_bound += min(work, K * top_n) if top_n > 0 else work
            max_touched = max(max_touched, work)
            in_wave += work
            if in_wave >= wave_target:
                n_waves += 1
                wave_ptr[n_waves] = e + 1
                in_wave = 0
        if wave_ptr[n_waves] != row_hi:
            n_waves += 1
            wave_ptr[n_waves] = row_hi
    max_touched = min(max_touched, n_e)

    cdef RowScratch* states = <RowScratch*>malloc(n_threads * sizeof(RowScratch))
    if states == NULL:
        raise MemoryError()
    cdef int t, failed = 0
    for t in range(n_threads):
        if _alloc_scratch(&states[t], max_touched, max_row, K, top_n) != 0:
            failed = 1
    cdef OutBuf out
    memset(&out, 0, sizeof(OutBuf))
    # Reserve the bound on the output at once: untouched pages cost nothing, and growing by
    # realloc would move (and split the huge pages of) a block that is already written.
    if not failed and _out_reserve(&out, max(out_bound, <int64_t>1), K) != 0:
        _out_free(&out)

    row_tid_np = np.empty(n_rows, dtype=np.int32)
    row_start_np = np.empty(n_rows, dtype=np.int64)
    row_len_np = np.zeros(n_rows + 1, dtype=np.int64)
    cdef int32_t* row_tid
    cdef int32_t[::1] row_tid_v = row_tid_np
    cdef int64_t[::1] row_start_v = row_start_np
    cdef int64_t[::1] row_len_v = row_len_np
    row_tid = &row_tid_v[0]
    cdef int64_t* row_start = &row_start_v[0]
    cdef int64_t* row_len = &row_len_v[0]
    cdef const int64_t* row_work = &row_work_v[0]
    cdef const int64_t* rp = &row_ptr[0]
    cdef const int32_t* rf = &row_f[0]
    cdef const double* pfe = &p_fe[0, 0]
    cdef const int64_t* cp = &col_ptr[0]
    cdef const int32_t* ce = &col_e[0]
    cdef const double* pef = &p_ef[0, 0]
    cdef int64_t w, r0, r1, dst, src, ln, i, wave_out
    cdef int32_t e1, tid
    cdef RowScratch* st
    if not failed:
        with nogil:
            for w in range(n_waves):
                r0 = wave_ptr[w]
                r1 = wave_ptr[w + 1]
                for t in range(n_threads):
                    states[t].out_size = 0
                with parallel(num_threads=n_threads):
                    for e1 in prange(<int32_t>r0, <int32_t>r1, schedule="dynamic", chunksize=16):
                        tid = threadid()
                        _pivot_row(&states[tid], e1, row_base, n_rows, K, top_n, min_p, row_work[e1 - row_base],
                                   rp, rf, pfe, cp, ce, pef, tid, row_tid, row_start, row_len)
                for t in range(n_threads):
                    if states[t].failed:
                        failed = 1
                if failed:
                    break
                # Exclusive prefix sum of the wave's row lengths, reused as output offsets.
                wave_out = 0
                for e in range(r0 - row_base, r1 - row_base):
                    ln = row_len[e]
                    row_len[e] = out.size + wave_out
                    wave_out += ln
                row_len[r1 - row_base] = out.size + wave_out
                if _out_reserve(&out, out.size + wave_out, K) != 0:
                    failed = 1
                    break
                with parallel(num_threads=n_threads):
                    for e1 in prange(<int32_t>r0, <int32_t>r1, schedule="static"):
                        dst = row_len[e1 - row_base]
                        ln = row_len[e1 - row_base + 1] - dst
                        if ln == 0:
                            continue
                        st = &states[row_tid[e1 - row_base]]
                        src = row_start[e1 - row_base]
                        for i in range(ln):
                            out.e1[dst + i] = e1
                        memcpy(out.e2 + dst, st.out_e2 + src, ln * sizeof(int32_t))
                        memcpy(out.n + dst, st.out_n + src, ln * sizeof(int32_t))
                        memcpy(out.piv + dst * 3, st.out_piv + src * 3, ln * 3 * sizeof(int32_t))
                        memcpy(out.p + dst * K, st.out_p + src * K, ln * K * sizeof(double))
                out.size += wave_out
    for t in range(n_threads):
        _free_scratch(&states[t])
    free(states)
    if failed:
        _out_free(&out)
        raise MemoryError("out of memory in the pivot product")
    cdef int64_t n_out = out.size
    if n_out == 0:
        _out_free(&out)
        return (np.empty(0, np.int32), np.empty(0, np.int32), np.empty((0, K), np.float64),
                np.empty(0, np.int32), np.empty((0, 3), np.int32))
    # Give back the unused tail (mremap shrinks in place), then hand the blocks to numpy.
    out.e1 = <int32_t*>_shrink(out.e1, n_out * sizeof(int32_t))
    out.e2 = <int32_t*>_shrink(out.e2, n_out * sizeof(int32_t))
    out.n = <int32_t*>_shrink(out.n, n_out * sizeof(int32_t))
    out.piv = <int32_t*>_shrink(out.piv, n_out * 3 * sizeof(int32_t))
    out.p = <double*>_shrink(out.p, n_out * K * sizeof(double))
    return (_adopt(out.e1, (n_out,), 4, "i"), _adopt(out.e2, (n_out,), 4, "i"),
            _adopt(out.p, (n_out, K), 8, "d"), _adopt(out.n, (n_out,), 4, "i"),
            _adopt(out.piv, (n_out, 3), 4, "i"))



# ------------------------------------------------------------------------------ pair overlaps


ctypedef fused trigram_code:
    uint32_t
    int64_t


def pair_overlaps(const int32_t[:, ::1] tokens, const int64_t[::1] tri_ptr, const trigram_code[::1] tri,
                  const int64_t[::1] e1, const int64_t[::1] e2):
    """(a_in_b, b_in_a, shared), int32 per pair i of phrases a = e1[i], b = e2[i]:

    a_in_b = #{positions p of a: tokens[a, p] >= 0 and tokens[a, p] in tokens[b, :]}, b_in_a
    the same the other way, shared = |T(a) & T(b)| with T(x) = tri[tri_ptr[x]:tri_ptr[x + 1]]
    (ascending, distinct codes; a linear merge). The codes are uint32 or int64
    (pivot.pipeline.ppdb2.char_trigrams: uint32 when the texts' alphabet is small enough).
    The caller checks that every id is a row of ``tokens`` and of ``tri_ptr``
    (pivot.pipeline.ppdb2.string_overlaps).
    """
    cdef Py_ssize_t n = e1.shape[0], width = tokens.shape[1]
    cdef Py_ssize_t i, p, q
    cdef int64_t a, b, ia, ib, ea, eb
    cdef int32_t ta, tb, count_a, count_b, count_s
    a_in_b = np.zeros(n, dtype=np.int32)
    b_in_a = np.zeros(n, dtype=np.int32)
    shared = np.zeros(n, dtype=np.int32)
    cdef int32_t[::1] out_a = a_in_b, out_b = b_in_a, out_s = shared
    with nogil:
        for i in range(n):
            a = e1[i]
            b = e2[i]
            count_a = 0
            count_b = 0
            for p in range(width):
                ta = tokens[a, p]
                if ta < 0:
                    continue
                for q in range(width):
                    if tokens[b, q] == ta:
                        count_a += 1
                        break
            for q in range(width):
                tb = tokens[b, q]
                if tb < 0:
                    continue
                for p in range(width):
                    if tokens[a, p] == tb:
                        count_b += 1
                        break
            count_s = 0
            ia = tri_ptr[a]
            ea = tri_ptr[a + 1]
            ib = tri_ptr[b]
            eb = tri_ptr[b + 1]
            while ia < ea and ib < eb:
                if tri[ia] == tri[ib]:
                    count_s += 1
                    ia += 1
                    ib += 1
                elif tri[ia] < tri[ib]:
                    ia += 1
                else:
                    ib += 1
            out_a[i] = count_a
            out_b[i] = count_b
            out_s[i] = count_s
    return a_in_b, b_in_a, shared



# ------------------------------------------------------------------------------ linear predictors


cdef extern from * nogil:
    """
    /* The sums of pivot.pipeline.ppdb2.standardised_matrix: a block of rows at a time, so the
       block's K sums and its standardised column z stay in the L1 cache. Per element, the
       operations of the numpy reference in its order: z = x - mean; z = z / sd; t = c z;
       s = s + t (j ascending), each rounded to double. No contraction of c z + s into a fused
       multiply-add (one rounding instead of two): off for this function, so that a target
       whose baseline has FMA (aarch64; x86-64's has none) still gives the reference's bytes. */
    #if defined(__GNUC__) && !defined(__clang__)
    __attribute__((optimize("fp-contract=off")))
    #endif
    static void pivot_standardised_sums(const double* const* cols, int64_t J, int64_t n,
                                        const double* mean, const double* sd, const double* coef,
                                        const int64_t* n_terms, const double* intercept, int64_t K,
                                        double* out, double* acc, double* z, int64_t block) {
    #if defined(__clang__)
    #pragma clang fp contract(off)
    #endif
        for (int64_t r0 = 0; r0 < n; r0 += block) {
            const int64_t m = n - r0 < block ? n - r0 : block;
            for (int64_t k = 0; k < K; k++) {
                double* a = acc + k * block;
                for (int64_t i = 0; i < m; i++) a[i] = intercept[k];
            }
            for (int64_t j = 0; j < J; j++) {
                const double* x = cols[j] + r0;
                const double mu = mean[j], s = sd[j];
                for (int64_t i = 0; i < m; i++) {
                    const double d = x[i] - mu;
                    z[i] = d / s;
                }
                for (int64_t k = 0; k < K; k++) {
                    if (j >= n_terms[k]) continue;
                    const double c = coef[k * J + j];
                    double* a = acc + k * block;
                    for (int64_t i = 0; i < m; i++) {
                        const double t = c * z[i];
                        a[i] = a[i] + t;
                    }
                }
            }
            for (int64_t i = 0; i < m; i++)
                for (int64_t k = 0; k < K; k++) out[(r0 + i) * K + k] = acc[k * block + i];
        }
    }
    """
    void pivot_standardised_sums(const double* const* cols, int64_t J, int64_t n, const double* mean,
                                 const double* sd, const double* coef, const int64_t* n_terms,
                                 const double* intercept, int64_t K, double* out, double* acc, double* z,
                                 int64_t block)


#: Rows standardised_sums sums at a time: K sums and one z of SUM_BLOCK doubles (14 KB for K = 6).
cdef int64_t SUM_BLOCK = 256


def standardised_sums(list cols, int64_t n, const double[::1] mean, const double[::1] sd,
                      const double[:, ::1] coef, const int64_t[::1] n_terms, const double[::1] intercept):
    """(n, K) float64: out[i, k] = intercept[k] + sum_{j < n_terms[k]} coef[k, j] z_ij, z_ij =
    (cols[j][i] - mean[j]) / sd[j], summed j ascending from the intercept, each product and sum
    rounded to double (numpy's ``np.subtract``, ``np.divide``, ``np.multiply``, ``+=`` one
    column after another give these bytes). ``cols``: J C-contiguous float64 arrays of n rows;
    coef (K, J) (coef[k, j] for j >= n_terms[k] is not read). The caller checks dtypes and
    lengths (pivot.pipeline.ppdb2.standardised_matrix)."""
    cdef Py_ssize_t J = len(cols), K = intercept.shape[0], j
    if mean.shape[0] != J or sd.shape[0] != J or coef.shape[0] != K or coef.shape[1] != J or n_terms.shape[0] != K:
        raise ValueError("standardised_sums: mean, sd (J), coef (K, J), n_terms and intercept (K) disagree")
    out = np.empty((n, K), dtype=np.float64)
    if n == 0 or K == 0:
        return out
    cdef double[:, ::1] o = out
    cdef vector[double*] ptr
    cdef const double[::1] v
    for j in range(J):
        v = cols[j]
        if v.shape[0] != n:
            raise ValueError(f"standardised_sums: column {j} has {v.shape[0]} rows, not {n}")
        ptr.push_back(<double*>&v[0])      # the list holds the arrays: the pointers stay valid
    cdef vector[double] acc = vector[double](K * SUM_BLOCK)
    cdef vector[double] z = vector[double](SUM_BLOCK)
    with nogil:
        pivot_standardised_sums(<const double* const*>ptr.data(), J, n, &mean[0] if J else NULL,
                                &sd[0] if J else NULL, &coef[0, 0] if J else NULL, &n_terms[0], &intercept[0],
                                K, &o[0, 0], acc.data(), z.data(), SUM_BLOCK)
    return out



cdef extern from * nogil:
    """
    #include <cfloat>
    #include <cmath>
    /* log x by pivot.portable._log_fast's operations in its order, each rounded to double
       (frexp is exact): for normal positive finite x (only) the bits of pivot.portable.log. R: its
       Horner coefficients R[0..nR-1]. No FMA contraction (as pivot_standardised_sums). */
    #if defined(__GNUC__) && !defined(__clang__)
    __attribute__((optimize("fp-contract=off")))
    #endif
    static inline double pivot_log_normal(double x, const double* R, int64_t nR, double ln2_hi, double ln2_lo,
                                          double sqrt_half) {
    #if defined(__clang__)
    #pragma clang fp contract(off)
    #endif
        int e;
        double m = std::frexp(x, &e);
        double k = (double)e;
        if (m < sqrt_half) {
            m = m * 2.0;
            k = k - 1.0;
        }
        const double f = m - 1.0;
        double s = f + 2.0;
        s = f / s;
        const double z = s * s;
        double r = z * R[nR - 1];
        for (int64_t c = nR - 2; c >= 0; c--) {
            r = r + R[c];
            r = r * z;
        }
        double hf = f * 0.5;
        hf = hf * f;
        r = r + hf;
        r = r * s;
        const double lo = k * ln2_lo;
        r = r + lo;
        r = hf - r;
        r = r - f;
        const double hi = k * ln2_hi;
        return hi - r;
    }

    /* out = log x where x > 0, floor elsewhere (NaN too); the positive x that are not normal
       finite (subnormal, inf) get NaN and are counted: the caller's to compute. */
    #if defined(__GNUC__) && !defined(__clang__)
    __attribute__((optimize("fp-contract=off")))
    #endif
    static int64_t pivot_log_floor(const double* x, double* out, int64_t n, double floor, const double* R,
                                   int64_t nR, double ln2_hi, double ln2_lo, double sqrt_half) {
    #if defined(__clang__)
    #pragma clang fp contract(off)
    #endif
        int64_t odd = 0;
        for (int64_t i = 0; i < n; i++) {
            const double v = x[i];
            if (!(v > 0.0)) {
                out[i] = floor;
            } else if (v >= DBL_MIN && v <= DBL_MAX) {
                out[i] = pivot_log_normal(v, R, nR, ln2_hi, ln2_lo, sqrt_half);
            } else {
                out[i] = NAN;
                odd++;
            }
        }
        return odd;
    }
    """
    int64_t pivot_log_floor(const double* x, double* out, int64_t n, double floor, const double* R, int64_t nR,
                            double ln2_hi, double ln2_lo, double sqrt_half)


def log_floor(const double[::1] x, double floor, const double[::1] coefficients, double ln2_hi, double ln2_lo,
              double sqrt_half):
    """(out, odd): out = log x where x > 0 by pivot.portable's fast path (pivot.portable._log_fast:
    x = m 2^k, f = m - 1, s = f / (2 + f), log x = k ln2_hi - ((hf - (s (hf + R) + k ln2_lo)) - f)),
    the same operations in its order, so its bits for normal positive finite x; ``floor`` where
    x <= 0 or NaN; NaN for the ``odd`` other positive x (subnormal, inf), the caller's to
    replace (pivot.pipeline.ppdb2._log_floor). ``coefficients``: portable's R'(z) Horner
    coefficients (_LOG_R)."""
    cdef Py_ssize_t n = x.shape[0], nR = coefficients.shape[0]
    cdef int64_t odd = 0
    if nR < 1:
        raise ValueError("log_floor: no coefficients")
    out = np.empty(n, dtype=np.float64)
    if n == 0:
        return out, 0
    cdef double[::1] o = out
    with nogil:
        odd = pivot_log_floor(&x[0], &o[0], n, floor, &coefficients[0], nR, ln2_hi, ln2_lo, sqrt_half)
    return out, int(odd)
