# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, embedsignature=True
"""The PPDB 2.0 export's hot loops: reading the pair table into arrays, and formatting lines.

``Table``
    Reads query results straight into numpy arrays through the SQLite C library, one step per
    row with no Python object per value. Python's sqlite3 module creates an object for every
    value of every row (about 1 microsecond a row on the bio database, 5 s for General's 3.7M
    pairs: already slower than the whole export's budget); a C scan of the same rows takes
    about 0.4 s. The library is the one Python's sqlite3 module loaded (its functions are
    looked up in ``_sqlite3``'s dependencies), so the extension needs no SQLite headers or
    library at build time and reads the file with the same SQLite as the rest of pivot.

``scan_pair_file``
    The pair table's rows that an export without a cut writes, read from the database file's
    pages (the b-tree of the WITHOUT ROWID table, by the documented file format) while a read
    transaction keeps writers out: SQLite's virtual machine decodes every record of the table
    column by column (1.4 s of CPU on bio's 4.48M rows), this reads only the columns it needs,
    and those of a hidden row only up to its form (0.35 s).

``format_ppdb``
    One PPDB 2.0 line per row into one bytes buffer:
    ``LHS ||| e1 ||| e2 ||| features ||| alignment ||| relation``. Doubles are written as
    printf's ``%.6g`` (std::to_chars with precision 6, which the C++ standard defines as that
    printf conversion; a fast path rounds six digits itself where that is exact: tests compare
    every value class and 230k chosen values with Python's ``format(x, ".6g")``),
    -logp values as -ln p (natural logarithm, as PPDB), relation probabilities from their
    stored per-mille integers as exact 3-decimal fractions. Equal rows give equal bytes.
"""
from libc.math cimport isnan, log, NAN
from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_Resize
from libc.string cimport memchr, memcpy, strlen
from libcpp.vector cimport vector
from posix.dlfcn cimport RTLD_LAZY, dlerror, dlopen, dlsym

import numpy as np

cdef extern from * nogil:
    """
    #include <charconv>
    #include <cmath>
    /* Powers of ten that doubles hold exactly (10^22 < 2^53 * 2^22: 5^22 < 2^53). */
    static const double PIVOT_P10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
                                         1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    static inline double pivot_scale10(double a, int k) {   /* a * 10^k, one rounding (|k| <= 22) */
        return k >= 0 ? a * PIVOT_P10[k] : a / PIVOT_P10[-k];
    }
    /* printf("%.6g", v): std::to_chars (C++17: "as if by printf" with that conversion), with a
       fast path for 1e-16 <= |v| < 1e16. There v's six significant digits are m = round(s) of
       s = |v| * 10^(5 - e) (e its decimal exponent), computed with one rounding (exact powers
       of ten), so s is within 0.5 ulp(1e6) < 1.2e-10 of the exact product: m is the correctly
       rounded digit string unless s's fraction is within 1e-6 of one half, where to_chars
       decides (as it does for every other value). Then %g's layout: fixed for -4 <= e < 6,
       else d.ddddde+XX; trailing zeros dropped. */
    static inline char* pivot_g6(char* p, char* end, double v) {
        double a = v < 0 ? -v : v;
        if (!(a >= 1e-16 && a < 1e16))   /* zero, NaN, inf, and the rest */
            return std::to_chars(p, end, v, std::chars_format::general, 6).ptr;
        int e2;
        std::frexp(a, &e2);              /* a in [2^(e2-1), 2^e2): e is this floor or one more */
        int e = (int)std::floor((e2 - 1) * 0.30102999566398120);
        double sc = pivot_scale10(a, 5 - e);
        if (sc >= 1e6) {
            e += 1;
            sc = pivot_scale10(a, 5 - e);
        }
        if (sc < 1e5 || sc >= 1e6)
            return std::to_chars(p, end, v, std::chars_format::general, 6).ptr;
        long long m = (long long)sc;     /* floor: sc > 0 */
        double frac = sc - (double)m;
        if (std::fabs(frac - 0.5) < 1e-6)
            return std::to_chars(p, end, v, std::chars_format::general, 6).ptr;
        if (frac > 0.5 && ++m == 1000000) {
            m = 100000;
            e += 1;
        }
        char d[6];
        for (int i = 5; i >= 0; --i) {
            d[i] = (char)('0' + m % 10);
            m /= 10;
        }
        int nd = 6;
        while (nd > 1 && d[nd - 1] == '0') --nd;
        if (v < 0) *p++ = '-';
        if (e >= 6 || e < -4) {
            *p++ = d[0];
            if (nd > 1) {
                *p++ = '.';
                for (int i = 1; i < nd; ++i) *p++ = d[i];
            }
            *p++ = 'e';
            *p++ = e < 0 ? '-' : '+';
            int x = e < 0 ? -e : e;      /* at most 16: two digits */
            *p++ = (char)('0' + x / 10);
            *p++ = (char)('0' + x % 10);
        } else if (e >= 0) {
            for (int i = 0; i <= e; ++i) *p++ = d[i];   /* e <= 5: within the six digits */
            if (nd > e + 1) {
                *p++ = '.';
                for (int i = e + 1; i < nd; ++i) *p++ = d[i];
            }
        } else {
            *p++ = '0';
            *p++ = '.';
            for (int i = 0; i < -e - 1; ++i) *p++ = '0';
            for (int i = 0; i < nd; ++i) *p++ = d[i];
        }
        return p;
    }
    static inline char* pivot_i64(char* p, char* end, long long v) {
        return std::to_chars(p, end, v).ptr;
    }
    #include <algorithm>
    #include <cstdint>
    /* out = 0..n-1, then each run of equal e1 stably sorted by s descending: rows that came in
       (e1, e2) order leave in (e1, -s, e2) order. */
    static void pivot_order_runs(const int64_t* e1, const double* s, int64_t n, int64_t* out) {
        for (int64_t i = 0; i < n; ++i) out[i] = i;
        int64_t a = 0;
        while (a < n) {
            int64_t b = a + 1;
            while (b < n && e1[b] == e1[a]) ++b;
            std::stable_sort(out + a, out + b, [s](int64_t x, int64_t y) { return s[x] > s[y]; });
            a = b;
        }
    }
    """
    char* pivot_g6(char* p, char* end, double v)
    char* pivot_i64(char* p, char* end, long long v)
    void pivot_order_runs(const int64_t* e1, const double* s, int64_t n, int64_t* out)
    void __builtin_prefetch(const void* p)
    uint64_t __builtin_bswap64(uint64_t x)

# ----------------------------------------------------------------------------- SQLite by dlsym

cdef extern from * nogil:
    """
    typedef struct sqlite3 sqlite3;
    typedef struct sqlite3_stmt sqlite3_stmt;
    """
    ctypedef struct sqlite3:
        pass
    ctypedef struct sqlite3_stmt:
        pass

# The stable C API (https://sqlite.org/c3ref/): constants and prototypes are fixed by SQLite's
# compatibility promise, so they are declared here instead of read from sqlite3.h.
cdef enum:
    SQLITE_OK = 0
    SQLITE_ROW = 100
    SQLITE_DONE = 101
    SQLITE_NULL = 5
    SQLITE_OPEN_READONLY = 0x1
    SQLITE_OPEN_URI = 0x40
    SQLITE_OPEN_NOMUTEX = 0x8000

ctypedef int (*open_v2_f)(const char*, sqlite3**, int, const char*) noexcept nogil
ctypedef int (*close_v2_f)(sqlite3*) noexcept nogil
ctypedef const char* (*errmsg_f)(sqlite3*) noexcept nogil
ctypedef int (*prepare_v2_f)(sqlite3*, const char*, int, sqlite3_stmt**, const char**) noexcept nogil
ctypedef int (*bind_int64_f)(sqlite3_stmt*, int, long long) noexcept nogil
ctypedef int (*bind_double_f)(sqlite3_stmt*, int, double) noexcept nogil
ctypedef int (*step_f)(sqlite3_stmt*) noexcept nogil
ctypedef int (*finalize_f)(sqlite3_stmt*) noexcept nogil
ctypedef int (*column_count_f)(sqlite3_stmt*) noexcept nogil
ctypedef int (*column_type_f)(sqlite3_stmt*, int) noexcept nogil
ctypedef long long (*column_int64_f)(sqlite3_stmt*, int) noexcept nogil
ctypedef double (*column_double_f)(sqlite3_stmt*, int) noexcept nogil
ctypedef const unsigned char* (*column_text_f)(sqlite3_stmt*, int) noexcept nogil
ctypedef int (*column_bytes_f)(sqlite3_stmt*, int) noexcept nogil

cdef struct Api:
    open_v2_f open_v2
    close_v2_f close_v2
    errmsg_f errmsg
    prepare_v2_f prepare_v2
    bind_int64_f bind_int64
    bind_double_f bind_double
    step_f step
    finalize_f finalize
    column_count_f column_count
    column_type_f column_type
    column_int64_f column_int64
    column_double_f column_double
    column_text_f column_text
    column_bytes_f column_bytes

cdef Api _api
cdef bint _api_ready = False


cdef void* _symbol(void* handle, const char* name, str where) except NULL:
    cdef void* f = dlsym(handle, name)
    if f == NULL:
        raise ImportError(f"the SQLite library of Python's sqlite3 module ({where}) exports no "
                          f"{name.decode()}: pivot export reads the database through it")
    return f


cdef int _load_api() except -1:
    """Find the C API in the SQLite library that Python's sqlite3 module runs on."""
    global _api_ready
    if _api_ready:
        return 0
    import _sqlite3
    where = getattr(_sqlite3, "__file__", None)
    # dlopen of a loaded file returns its handle; dlsym on it searches the module and then its
    # dependencies (libsqlite3), breadth first. A module built into the interpreter: the
    # program's own global symbols (NULL).
    cdef bytes path = where.encode() if where else None
    cdef void* handle = dlopen(<const char*>path if path is not None else NULL, RTLD_LAZY)
    if handle == NULL:
        raise ImportError(f"cannot open {where}: {dlerror().decode(errors='replace')}")
    where = where or "the interpreter"
    _api.open_v2 = <open_v2_f>_symbol(handle, b"sqlite3_open_v2", where)
    _api.close_v2 = <close_v2_f>_symbol(handle, b"sqlite3_close_v2", where)
    _api.errmsg = <errmsg_f>_symbol(handle, b"sqlite3_errmsg", where)
    _api.prepare_v2 = <prepare_v2_f>_symbol(handle, b"sqlite3_prepare_v2", where)
    _api.bind_int64 = <bind_int64_f>_symbol(handle, b"sqlite3_bind_int64", where)
    _api.bind_double = <bind_double_f>_symbol(handle, b"sqlite3_bind_double", where)
    _api.step = <step_f>_symbol(handle, b"sqlite3_step", where)
    _api.finalize = <finalize_f>_symbol(handle, b"sqlite3_finalize", where)
    _api.column_count = <column_count_f>_symbol(handle, b"sqlite3_column_count", where)
    _api.column_type = <column_type_f>_symbol(handle, b"sqlite3_column_type", where)
    _api.column_int64 = <column_int64_f>_symbol(handle, b"sqlite3_column_int64", where)
    _api.column_double = <column_double_f>_symbol(handle, b"sqlite3_column_double", where)
    _api.column_text = <column_text_f>_symbol(handle, b"sqlite3_column_text", where)
    _api.column_bytes = <column_bytes_f>_symbol(handle, b"sqlite3_column_bytes", where)
    _api_ready = True
    return 0


# Column kinds by code: i=0 int64, d=1 float64 (NULL: NaN), t=2 text, I=3 and D=4 NOT NULL ones.
KINDS = "idtID"


cdef class Table:
    """A read-only connection that returns query results as numpy arrays.

    >>> t = Table(Path("bio.db").resolve().as_uri() + "?mode=ro")       # doctest: +SKIP
    >>> e1, e2, p = t.scan("SELECT e1, e2, p_0 FROM pair WHERE e1 < ?", (10,), "iid")   # doctest: +SKIP

    ``kinds`` gives one letter per result column: ``i`` int64 (a NULL is an error), ``d``
    float64 (NULL becomes NaN), ``t`` text (returned as (utf-8 bytes, int64 offsets), row r
    being bytes[offsets[r]:offsets[r + 1]]; a NULL is an error), and ``I``, ``D``: int64 and
    float64 of a column the schema declares NOT NULL, read without asking each value's type
    (a column read costs about 20 ns; 4.5M rows of 10 such columns: 1 s less). Parameters
    bind as int64 (Python int) or float64 (float), by position.
    """

    cdef sqlite3* db
    cdef object uri

    def __cinit__(self, str uri):
        self.db = NULL
        _load_api()
        self.uri = uri
        cdef bytes b = uri.encode()
        # NOMUTEX: this connection is never shared between threads, so SQLite need not lock it
        # around every column read (serialized mode's cost, about half the scan's time).
        cdef int rc = _api.open_v2(b, &self.db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL)
        if rc != SQLITE_OK:
            msg = _api.errmsg(self.db).decode(errors="replace") if self.db != NULL else f"code {rc}"
            if self.db != NULL:
                _api.close_v2(self.db)
                self.db = NULL
            raise OSError(f"cannot open {uri}: {msg}")

    def __dealloc__(self):
        if self.db != NULL:
            _api.close_v2(self.db)
            self.db = NULL

    def close(self):
        if self.db != NULL:
            _api.close_v2(self.db)
            self.db = NULL

    def scan(self, str sql, tuple params, str kinds):
        """The rows of `sql` as one array per column (see the class docstring)."""
        if self.db == NULL:
            raise ValueError("the table is closed")
        cdef sqlite3_stmt* stmt = NULL
        cdef bytes q = sql.encode()
        cdef int rc = _api.prepare_v2(self.db, q, -1, &stmt, NULL)
        if rc != SQLITE_OK:
            raise ValueError(f"{_api.errmsg(self.db).decode(errors='replace')} in {sql!r}")
        cdef int ncol = len(kinds)
        cdef int j, k
        cdef int64_t n = 0
        cdef vector[vector[int64_t]] ints
        cdef vector[vector[double]] dbls
        cdef vector[vector[char]] texts
        cdef vector[vector[int64_t]] offs
        cdef vector[int] slot, kind
        cdef const unsigned char* s
        cdef int nbytes
        cdef int bad_col = -1
        cdef int code
        try:
            if _api.column_count(stmt) != ncol:
                raise ValueError(f"{sql!r} returns {_api.column_count(stmt)} columns, kinds {kinds!r} gives {ncol}")
            for j in range(ncol):
                # (a plain int variable: Cython 3.3 passes a conditional expression to the
                # const reference of push_back through a dangling temporary)
                code = KINDS.find(kinds[j])
                if code < 0:
                    raise ValueError(f"unknown column kind {kinds[j]!r} (i, d, t, I or D)")
                kind.push_back(code)
                if code == 0 or code == 3:
                    slot.push_back(ints.size())
                    ints.push_back(vector[int64_t]())
                elif code == 1 or code == 4:
                    slot.push_back(dbls.size())
                    dbls.push_back(vector[double]())
                else:
                    slot.push_back(texts.size())
                    texts.push_back(vector[char]())
                    offs.push_back(vector[int64_t](1, 0))
            for j, v in enumerate(params, 1):
                rc = (_api.bind_double(stmt, j, v) if isinstance(v, float) else _api.bind_int64(stmt, j, v))
                if rc != SQLITE_OK:
                    raise ValueError(f"cannot bind parameter {j} of {sql!r}: {_api.errmsg(self.db).decode()}")
            with nogil:
                while True:
                    rc = _api.step(stmt)
                    if rc != SQLITE_ROW:
                        break
                    for j in range(ncol):
                        k = slot[j]
                        if kind[j] == 3:
                            ints[k].push_back(_api.column_int64(stmt, j))
                        elif kind[j] == 4:
                            dbls[k].push_back(_api.column_double(stmt, j))
                        elif kind[j] == 1:
                            if _api.column_type(stmt, j) == SQLITE_NULL:
                                dbls[k].push_back(NAN)
                            else:
                                dbls[k].push_back(_api.column_double(stmt, j))
                        elif _api.column_type(stmt, j) == SQLITE_NULL:
                            bad_col = j
                            break
                        elif kind[j] == 0:
                            ints[k].push_back(_api.column_int64(stmt, j))
                        else:
                            s = _api.column_text(stmt, j)
                            nbytes = _api.column_bytes(stmt, j)
                            texts[k].insert(texts[k].end(), <const char*>s, <const char*>s + nbytes)
                            offs[k].push_back(texts[k].size())
                    if bad_col >= 0:
                        break
                    n += 1
            if bad_col >= 0:
                raise ValueError(f"column {bad_col} of {sql!r} is NULL in row {n}, where kind {kinds[bad_col]!r} "
                                 "allows none")
            if rc != SQLITE_DONE:
                raise OSError(f"reading {self.uri}: {_api.errmsg(self.db).decode(errors='replace')}")
        finally:
            _api.finalize(stmt)
        out = []
        cdef int64_t[::1] iv
        cdef double[::1] dv
        for j in range(ncol):
            k = slot[j]
            if kind[j] == 0 or kind[j] == 3:
                a = np.empty(n, dtype=np.int64)
                if n:
                    iv = a
                    memcpy(&iv[0], ints[k].data(), n * sizeof(int64_t))
                out.append(a)
            elif kind[j] == 1 or kind[j] == 4:
                a = np.empty(n, dtype=np.float64)
                if n:
                    dv = a
                    memcpy(&dv[0], dbls[k].data(), n * sizeof(double))
                out.append(a)
            else:
                a = np.empty(n + 1, dtype=np.int64)
                iv = a
                memcpy(&iv[0], offs[k].data(), (n + 1) * sizeof(int64_t))
                out.append((texts[k].data()[:texts[k].size()] if texts[k].size() else b"", a))
        return out


# ----------------------------------------------------------------------------- the pair b-tree, read from the file

# The SQLite file format (https://sqlite.org/fileformat2.html, stable since 2004: "SQLite
# version 3.0.0 and later can read and write any database created by any prior version"). The
# pair table is WITHOUT ROWID, so it is an index b-tree: interior pages (type 2) hold records
# between their children, leaf pages (type 10) only records, and a record's columns are the
# table's in the order of its primary-key index (PRAGMA index_xinfo).

cdef enum:
    PAGE_INDEX_INTERIOR = 2
    PAGE_INDEX_LEAF = 10
    # SQLite refuses a deeper b-tree (BTCURSOR_MAX_DEPTH): deeper is a damaged file.
    MAX_DEPTH = 20
    # Record columns the scan reads: e1, e2, p, ppdb2, n_pivots, form, relation, rel x 6, other.
    N_SCAN_COLS = 14


cdef inline int _varint(const unsigned char* p, const unsigned char* end, uint64_t* v) noexcept nogil:
    """A SQLite varint (1..9 bytes, big-endian, 7 bits a byte, the ninth byte whole) at p into v;
    the bytes it takes, or 0 if it runs past end."""
    cdef uint64_t x = 0
    cdef int i
    for i in range(8):
        if p + i >= end:
            return 0
        x = (x << 7) | (p[i] & 0x7F)
        if p[i] < 0x80:
            v[0] = x
            return i + 1
    if p + 8 >= end:
        return 0
    v[0] = (x << 8) | p[8]
    return 9


cdef inline int64_t _serial_size(uint64_t t) noexcept nogil:
    """The body bytes of a value of serial type t; -1 for the reserved types 10 and 11."""
    if t <= 4:
        return t
    if t == 5:
        return 6
    if t == 6 or t == 7:
        return 8
    if t <= 9:
        return 0
    if t <= 11:
        return -1
    return (t - 12) >> 1


cdef inline bint _int_of(const unsigned char* b, uint64_t t, int64_t* v) noexcept nogil:
    """The integer of serial type t (1..6: big-endian two's complement of 1, 2, 3, 4, 6, 8 bytes;
    8, 9: the constants 0, 1) at b into v; False for any other type."""
    cdef uint64_t x
    if t == 1:
        v[0] = <signed char>b[0]
    elif t == 2:
        v[0] = <int16_t>((<uint16_t>b[0] << 8) | b[1])
    elif t == 3:
        v[0] = ((<int64_t><signed char>b[0]) << 16) | (<int64_t>b[1] << 8) | b[2]
    elif t == 4:
        v[0] = <int32_t>((<uint32_t>b[0] << 24) | (<uint32_t>b[1] << 16) | (<uint32_t>b[2] << 8) | b[3])
    elif t == 5:
        v[0] = ((<int64_t><signed char>b[0]) << 40) | (<int64_t>b[1] << 32) | (<int64_t>b[2] << 24) \
            | (<int64_t>b[3] << 16) | (<int64_t>b[4] << 8) | b[5]
    elif t == 6:
        memcpy(&x, b, 8)
        v[0] = <int64_t>__builtin_bswap64(x)
    elif t == 8 or t == 9:
        v[0] = <int64_t>(t - 8)
    else:
        return False
    return True


cdef inline bint _real_of(const unsigned char* b, uint64_t t, double* v) noexcept nogil:
    """The value of a REAL column: type 7 is a big-endian IEEE 754 double; an integer type is a
    whole number SQLite stored as an integer (it does so for REAL columns: sqlite3VdbeMemRealify
    gives it back as a double, and so does this); NULL (0) is NaN. False for text or blob."""
    cdef uint64_t x
    cdef int64_t i64
    if t == 7:
        memcpy(&x, b, 8)
        x = __builtin_bswap64(x)
        memcpy(v, &x, 8)
        return True
    if t == 0:
        v[0] = NAN
        return True
    if _int_of(b, t, &i64):
        v[0] = <double>i64
        return True
    return False


cdef struct PairScan:
    # the file: its bytes, page size, usable bytes a page (page size - reserved), pages
    const unsigned char* file
    int64_t page_size
    int64_t usable
    int64_t n_pages
    # record positions of e1, e2, p, ppdb2, n_pivots, form, relation, rel x 6, other (-1: none)
    int64_t col[N_SCAN_COLS]
    int64_t n_cols            # 1 + the largest record position read
    int64_t n_filter          # 1 + the largest record position the filters read
    # filters: p not NULL (p_required), (form & hidden_mask) == 0, e1 in [e1_lo, e1_hi)
    bint p_required
    int64_t hidden_mask
    int64_t e1_lo
    int64_t e1_hi
    int64_t prev_key          # the last record's e1 << 32 | e2 (records come in key order)
    int64_t n_records
    # a record that spills to overflow pages, put back together
    vector[unsigned char]* spill
    # the output columns, room for `capacity` rows (the b-tree's cells, counted first), n_out filled
    int64_t* keys
    double* ps
    double* ppdb2s
    int64_t* miscs
    int64_t* packs
    double* others
    int64_t capacity
    int64_t n_out
    # counting (the first walk): cells are counted, no record is read
    bint counting
    int64_t n_cells
    # the first problem met (a static message; the page where)
    const char* problem
    int64_t problem_page


cdef inline const unsigned char* _page(PairScan* s, int64_t page) noexcept nogil:
    if page < 1 or page > s.n_pages:
        return NULL
    return s.file + (page - 1) * s.page_size


cdef int _fail(PairScan* s, const char* what, int64_t page) noexcept nogil:
    if s.problem == NULL:
        s.problem, s.problem_page = what, page
    return -1


cdef const char* COLUMN_PROBLEMS[4]
COLUMN_PROBLEMS[:] = [b"", b"a pair record has fewer columns than the table", b"a record header is damaged",
                      b"a record's values run past it"]


cdef inline int _columns(const unsigned char** h, const unsigned char* hend, const unsigned char** body,
                         const unsigned char* end, uint64_t* types, const unsigned char** at,
                         int64_t j0, int64_t j1) noexcept nogil:
    """The serial types and value addresses of a record's columns j0..j1-1 (the header is read
    on at *h, the values at *body): 0, or the COLUMN_PROBLEMS index of what is wrong."""
    cdef int64_t j, size
    cdef uint64_t t
    cdef int k
    for j in range(j0, j1):
        if h[0] >= hend:
            return 1
        if h[0][0] < 0x80:   # a one-byte serial type: every type but long text and blobs
            t = h[0][0]
            h[0] += 1
        else:
            k = _varint(h[0], hend, &t)
            if k == 0:
                return 2
            h[0] += k
        size = _serial_size(t)
        if size < 0 or body[0] + size > end:
            return 3
        types[j], at[j] = t, body[0]
        body[0] += size
    return 0


cdef int _record(PairScan* s, const unsigned char* cell, const unsigned char* page_end, int64_t page) noexcept nogil:
    """One cell's record (cell: its payload size varint): read, filtered, appended."""
    cdef uint64_t payload, hs, t
    cdef int k = _varint(cell, page_end, &payload)
    if k == 0:
        return _fail(s, "a cell runs past its page", page)
    cdef const unsigned char* rec = cell + k
    cdef int64_t P = <int64_t>payload, U = s.usable
    cdef int64_t X = (U - 12) * 64 // 255 - 23, M, K, local, left, take
    cdef uint64_t nxt
    cdef const unsigned char* ov
    if P > X:
        # The payload spills: `local` bytes here, then a chain of overflow pages, each a 4-byte
        # next-page number and U - 4 bytes of payload (fileformat2 section 1.6, index b-trees).
        M = (U - 12) * 32 // 255 - 23
        K = M + (P - M) % (U - 4)
        local = K if K <= X else M
        if rec + local + 4 > page_end:
            return _fail(s, "a cell runs past its page", page)
        s.spill.assign(rec, rec + local)
        nxt = (<uint64_t>rec[local] << 24) | (<uint64_t>rec[local + 1] << 16) | (<uint64_t>rec[local + 2] << 8) | rec[local + 3]
        left = P - local
        while left > 0:
            ov = _page(s, <int64_t>nxt)
            if ov == NULL:
                return _fail(s, "an overflow page number is outside the file", page)
            take = left if left < U - 4 else U - 4
            s.spill.insert(s.spill.end(), ov + 4, ov + 4 + take)
            left -= take
            nxt = (<uint64_t>ov[0] << 24) | (<uint64_t>ov[1] << 16) | (<uint64_t>ov[2] << 8) | ov[3]
        rec = s.spill.data()
        page_end = rec + P
    elif rec + P > page_end:
        return _fail(s, "a cell runs past its page", page)
    cdef const unsigned char* end = rec + P
    k = _varint(rec, end, &hs)
    if k == 0 or <int64_t>hs > P or <int64_t>hs < k:
        return _fail(s, "a record header is damaged", page)
    cdef const unsigned char* h = rec + k
    cdef const unsigned char* hend = rec + hs
    cdef const unsigned char* body = rec + hs
    cdef uint64_t types[64]
    cdef const unsigned char* at[64]
    cdef int j
    # The columns the filters need first: most of bio's rows are hidden, and their other
    # columns' serial types need not be read.
    k = _columns(&h, hend, &body, end, types, at, 0, s.n_filter)
    if k:
        return _fail(s, COLUMN_PROBLEMS[k], page)
    cdef int64_t e1, e2, form, n_piv, relation, key, rel, v
    cdef double p, ppdb2, other
    cdef int64_t* c = s.col
    if not _int_of(at[c[0]], types[c[0]], &e1) or not _int_of(at[c[1]], types[c[1]], &e2):
        return _fail(s, "a pair's e1 or e2 is not an integer", page)
    if e1 < 0 or e2 < 0 or e1 >= (<int64_t>1 << 31) or e2 >= (<int64_t>1 << 31):
        return _fail(s, "a pair's e1 or e2 is outside 0..2^31-1", page)
    key = (e1 << 32) | e2
    if s.n_records and key <= s.prev_key:
        return _fail(s, "the pair b-tree's records are out of key order", page)
    s.prev_key = key
    s.n_records += 1
    if e1 < s.e1_lo or e1 >= s.e1_hi:
        return 0
    if not _int_of(at[c[5]], types[c[5]], &form):
        return _fail(s, "a pair's form is not an integer", page)
    if form & s.hidden_mask:
        return 0
    if s.p_required:
        if not _real_of(at[c[2]], types[c[2]], &p):
            return _fail(s, "a pair's probability is text or a blob", page)
        if isnan(p):
            return 0
    k = _columns(&h, hend, &body, end, types, at, s.n_filter, s.n_cols)
    if k:
        return _fail(s, COLUMN_PROBLEMS[k], page)
    if not _real_of(at[c[2]], types[c[2]], &p):
        return _fail(s, "a pair's probability is text or a blob", page)
    if not _real_of(at[c[3]], types[c[3]], &ppdb2) or types[c[3]] == 0:
        return _fail(s, "a pair's ppdb2 is NULL, text or a blob", page)
    if not _int_of(at[c[4]], types[c[4]], &n_piv) or not _int_of(at[c[6]], types[c[6]], &relation):
        return _fail(s, "a pair's n_pivots or relation is not an integer", page)
    # The packings of _Plan.columns, as SQLite's << and | compute them (64-bit two's complement).
    cdef uint64_t packed = 0
    for j in range(6):
        if not _int_of(at[c[7 + j]], types[c[7 + j]], &rel):
            return _fail(s, "a pair's relation probability is not an integer", page)
        packed |= <uint64_t>rel << (10 * j)
    cdef int64_t r = s.n_out
    if r >= s.capacity:
        return _fail(s, "the pair b-tree holds more records than cells", page)
    s.keys[r] = key
    s.ps[r] = p
    s.ppdb2s[r] = ppdb2
    s.miscs[r] = <int64_t>(<uint64_t>n_piv | (<uint64_t>form << 40) | (<uint64_t>relation << 56))
    s.packs[r] = <int64_t>packed
    if c[13] >= 0:
        if not _real_of(at[c[13]], types[c[13]], &other):
            return _fail(s, "a pair's probability is text or a blob", page)
        s.others[r] = other
    s.n_out = r + 1
    return 0


cdef int _walk(PairScan* s, int64_t root) noexcept nogil:
    """Every record of the index b-tree at `root`, in key order: an interior page's cell i is
    its left child's records, then the cell's own; the right-most child comes last."""
    cdef int64_t pages[MAX_DEPTH + 1]
    cdef int64_t next_cell[MAX_DEPTH + 1]
    cdef int depth = 0
    cdef const unsigned char* pg
    cdef const unsigned char* hdr
    cdef const unsigned char* page_end
    cdef const unsigned char* cell
    cdef int64_t page, n_cells, i, off, child, line
    cdef const unsigned char* ahead
    pages[0], next_cell[0] = root, 0
    while depth >= 0:
        page = pages[depth]
        pg = _page(s, page)
        if pg == NULL:
            return _fail(s, "a child page number is outside the file", page)
        hdr = pg + 100 if page == 1 else pg
        page_end = pg + s.usable
        n_cells = (<int64_t>hdr[3] << 8) | hdr[4]
        if hdr[0] == PAGE_INDEX_LEAF:
            if 8 + 2 * n_cells > page_end - hdr:
                return _fail(s, "a page's cell count is larger than the page", page)
            if s.counting:
                s.n_cells += n_cells
                depth -= 1
                continue
            for i in range(n_cells):
                off = (<int64_t>hdr[8 + 2 * i] << 8) | hdr[9 + 2 * i]
                if off >= s.usable:
                    return _fail(s, "a cell pointer is outside its page", page)
                if _record(s, pg + off, page_end, page) < 0:
                    return -1
            depth -= 1
            continue
        if hdr[0] != PAGE_INDEX_INTERIOR:
            return _fail(s, "a page of the pair b-tree is not an index b-tree page", page)
        if 12 + 2 * n_cells > page_end - hdr:
            return _fail(s, "a page's cell count is larger than the page", page)
        i = next_cell[depth]
        if i == 0 and s.counting:
            s.n_cells += n_cells
        if 0 < i <= n_cells and not s.counting:
            # Back from child i - 1 (not the right-most): cell i - 1's own record comes next.
            off = (<int64_t>hdr[12 + 2 * (i - 1)] << 8) | hdr[13 + 2 * (i - 1)]
            if off + 4 > s.usable:
                return _fail(s, "a cell pointer is outside its page", page)
            if _record(s, pg + off + 4, page_end, page) < 0:
                return -1
        if i > n_cells:
            depth -= 1
            continue
        if i < n_cells:
            off = (<int64_t>hdr[12 + 2 * i] << 8) | hdr[13 + 2 * i]
            if off + 4 > s.usable:
                return _fail(s, "a cell pointer is outside its page", page)
            cell = pg + off
        else:
            cell = hdr + 8   # the right-most child
        child = (<int64_t>cell[0] << 24) | (<int64_t>cell[1] << 16) | (<int64_t>cell[2] << 8) | cell[3]
        next_cell[depth] = i + 1
        if i < n_cells:
            # The next child's page into the cache while this one is read (its records are
            # laid out at random in it: a miss on each, else).
            off = (<int64_t>hdr[12 + 2 * (i + 1)] << 8) | hdr[13 + 2 * (i + 1)] if i + 1 < n_cells else -1
            ahead = _page(s, (<int64_t>pg[off] << 24 | <int64_t>pg[off + 1] << 16 | <int64_t>pg[off + 2] << 8
                              | pg[off + 3]) if off >= 0 and off + 4 <= s.usable else
                             (<int64_t>hdr[8] << 24 | <int64_t>hdr[9] << 16 | <int64_t>hdr[10] << 8 | hdr[11]))
            if ahead != NULL and not s.counting:
                for line in range(0, s.page_size, 64):
                    __builtin_prefetch(ahead + line)
        if depth == MAX_DEPTH:
            return _fail(s, "the pair b-tree is deeper than SQLite allows (a loop?)", page)
        depth += 1
        pages[depth], next_cell[depth] = child, 0
    return 0


def scan_pair_file(const unsigned char[::1] file, int64_t page_size, int64_t reserved, int64_t root,
                   cols, bint p_required, int64_t hidden_mask, int64_t e1_lo, int64_t e1_hi):
    """The export's pair columns, read from the database file's bytes (`file`: the whole file,
    e.g. a read-only mmap, while a read transaction on it keeps writers out) instead of through
    SQLite's virtual machine, which spends 1.3 s of CPU on bio's 4.48M pair rows where this
    takes a fraction. Returns the arrays of ``_Plan.columns`` (``e1 << 32 | e2``, p, ppdb2,
    ``n_pivots | form << 40 | relation << 56``, the six per-mille values 10 bits each, and
    the other model's p when cols[13] >= 0), for the rows with e1 in [e1_lo, e1_hi), form &
    hidden_mask == 0 and, with p_required, p not NULL: the rows, values and order of that
    SELECT on the table (tests/test_export.py compares the two).

    root: the pair table's root page (sqlite_master.rootpage); cols: the record positions
    (PRAGMA index_xinfo of its primary key) of e1, e2, p, ppdb2, n_pivots, form, relation, the
    six relation columns and the other p (-1: none). A damaged file (a page number outside it,
    a cell past its page, records out of key order, a value of the wrong type ...) is a
    ValueError naming the page."""
    if page_size < 512 or page_size > 65536 or page_size & (page_size - 1):
        raise ValueError(f"scan_pair_file: page size {page_size} is not a power of two in 512..65536")
    if reserved < 0 or page_size - reserved < 480:
        raise ValueError(f"scan_pair_file: {reserved} reserved bytes a page leave too little (SQLite needs 480)")
    if len(cols) != N_SCAN_COLS:
        raise ValueError(f"scan_pair_file: cols names {len(cols)} record positions, not {N_SCAN_COLS}")
    cdef PairScan s
    cdef vector[unsigned char] spill
    cdef int j
    s.file = &file[0] if file.shape[0] else NULL
    s.page_size, s.usable, s.n_pages = page_size, page_size - reserved, file.shape[0] // page_size
    s.n_cols = 0
    for j in range(N_SCAN_COLS):
        s.col[j] = cols[j]
        if s.col[j] >= 64 or (s.col[j] < 0 and j < 13):
            raise ValueError(f"scan_pair_file: record position {cols[j]} outside 0..63")
        s.n_cols = max(s.n_cols, s.col[j] + 1)
    s.p_required, s.hidden_mask, s.e1_lo, s.e1_hi = p_required, hidden_mask, e1_lo, e1_hi
    s.n_filter = max(s.col[0], s.col[1], s.col[5], s.col[2] if p_required else 0) + 1
    s.prev_key, s.n_records, s.n_out, s.n_cells = 0, 0, 0, 0
    s.spill = &spill
    s.problem = <const char*>NULL
    s.problem_page = 0
    cdef int rc
    # Two walks: the cells counted (interior pages and the leaves' headers: 1 in 50 of the
    # file's bytes), then the records read straight into arrays of that many rows: no growing
    # of buffers, no copy after (a row is 40 bytes, the arrays' untouched tail costs no memory).
    s.counting = True
    with nogil:
        rc = _walk(&s, root)
    if rc < 0:
        raise ValueError(f"{s.problem.decode()} (page {s.problem_page} of the pair table's b-tree)")
    out = [np.empty(s.n_cells, np.int64), np.empty(s.n_cells, np.float64), np.empty(s.n_cells, np.float64),
           np.empty(s.n_cells, np.int64), np.empty(s.n_cells, np.int64)]
    if s.col[13] >= 0:
        out.append(np.empty(s.n_cells, np.float64))
    cdef int64_t[::1] keys = out[0], miscs = out[3], packs = out[4]
    cdef double[::1] ps = out[1], ppdb2s = out[2], others = out[5] if s.col[13] >= 0 else out[1]
    if s.n_cells:
        s.keys, s.ps, s.ppdb2s, s.miscs, s.packs, s.others = &keys[0], &ps[0], &ppdb2s[0], &miscs[0], &packs[0], &others[0]
    s.capacity, s.counting = s.n_cells, False
    with nogil:
        rc = _walk(&s, root)
    if rc < 0:
        raise ValueError(f"{s.problem.decode()} (page {s.problem_page} of the pair table's b-tree)")
    return [a[:s.n_out] for a in out]


# ----------------------------------------------------------------------------- pair order

def row_pointer(const int64_t[::1] e1, int64_t n_ids):
    """ptr (n_ids + 1) with ptr[e] = the first row whose e1 >= e, for rows sorted by e1 (checked)."""
    cdef int64_t n = e1.shape[0], r, a
    for r in range(n):
        if e1[r] < 0 or e1[r] >= n_ids or (r and e1[r] < e1[r - 1]):
            raise ValueError(f"row_pointer: e1 not sorted within 0..{n_ids - 1} at row {r}")
    ptr_a = np.zeros(n_ids + 1, dtype=np.int64)
    cdef int64_t[::1] ptr = ptr_a
    with nogil:
        for r in range(n):
            ptr[e1[r] + 1] += 1
        for a in range(n_ids):
            ptr[a + 1] += ptr[a]
    return ptr_a


def find_rows(const int64_t[::1] ptr, const int64_t[::1] e2, const int64_t[::1] q1, const int64_t[::1] q2):
    """The row of each pair (q1[i], q2[i]) in a table sorted by (e1, e2) whose row pointer over
    e1 is ptr (row_pointer), -1 where absent: a binary search in q1's run of rows (a few
    dozen). A pair's reverse is find_rows(ptr, e2, e2_rows, e1_rows). O(log run) a query and
    cache-friendly: numpy's searchsorted over the whole key array takes 4.7 s for General's
    3.7M pairs, this about 0.5 s."""
    cdef int64_t n = q1.shape[0], n_ids = ptr.shape[0] - 1, i, lo, hi, mid, a, b
    if q2.shape[0] != n:
        raise ValueError("find_rows: q1 and q2 differ in length")
    if n_ids < 0 or ptr[0] != 0 or ptr[n_ids] != e2.shape[0]:
        raise ValueError("find_rows: ptr does not cover e2")
    for i in range(n_ids):
        if ptr[i + 1] < ptr[i]:
            raise ValueError(f"find_rows: ptr decreases at {i}")
    out_a = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] out = out_a
    with nogil:
        for i in range(n):
            # The queries are independent: fetch later ones' row pointers and runs ahead, so
            # that their cache misses overlap this one's search.
            if i + 16 < n and 0 <= q1[i + 16] < n_ids:
                __builtin_prefetch(&ptr[q1[i + 16]])
            if i + 8 < n and 0 <= q1[i + 8] < n_ids:
                __builtin_prefetch(&e2[ptr[q1[i + 8]]])
            a, b = q1[i], q2[i]
            if a < 0 or a >= n_ids:
                out[i] = -1
                continue
            lo, hi = ptr[a], ptr[a + 1]
            while lo < hi:
                mid = (lo + hi) >> 1
                if e2[mid] < b:
                    lo = mid + 1
                else:
                    hi = mid
            out[i] = lo if lo < ptr[a + 1] and e2[lo] == b else -1
    return out_a


def order_runs(const int64_t[::1] e1, const double[::1] score):
    """The permutation that sorts each run of equal e1 by score, highest first, keeping the
    given order among equal scores (rows in (e1, e2) order: ties by e2, as lookups rank)."""
    cdef int64_t n = e1.shape[0]
    if score.shape[0] != n:
        raise ValueError("order_runs: e1 and score differ in length")
    out_a = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] out = out_a
    if n:
        with nogil:
            pivot_order_runs(&e1[0], &score[0], n, &out[0])
    return out_a


# ----------------------------------------------------------------------------- PPDB lines

# Relation names in the stored order (pivot.store.write.RELATIONS), the feature of each as
# " Name=" and the well-formedness flag names by bit (pivot.store.write.FORM_NAMES).
cdef const char* REL_NAMES[6]
REL_NAMES[:] = [b"Equivalence", b"ForwardEntailment", b"ReverseEntailment", b"Exclusion", b"OtherRelated",
                b"Independent"]
cdef const char* FORM_FLAG_NAMES[5]
FORM_FLAG_NAMES[:] = [b"edge-punct", b"function-only", b"dangling", b"inflection", b"containment"]
cdef int N_FORM_FLAGS = 5
cdef size_t REL_NAME_LEN[6]
cdef size_t FORM_FLAG_LEN[5]
for _j in range(6):
    REL_NAME_LEN[_j] = strlen(REL_NAMES[_j])
for _j in range(5):
    FORM_FLAG_LEN[_j] = strlen(FORM_FLAG_NAMES[_j])
# The most a line's fixed parts and numbers take besides its three texts: separators and
# feature names (about 230 bytes), at most 4 doubles of 24 characters and an int64 of 20, every
# form flag, the longest relation name (368 in all).
cdef int64_t LINE_FIXED_MAX = 512
cdef const char* EMPTY = b""


cdef inline char* _put(char* p, const char* s, size_t n) noexcept nogil:
    memcpy(p, s, n)
    return p + n


cdef inline char* _permille(char* p, int64_t v) noexcept nogil:
    """v / 1000 with three decimals ("0.712", "1.000"): the stored per-mille value, exactly."""
    p[0] = <char>(48 + v // 1000)
    p[1] = b"."
    p[2] = <char>(48 + (v // 100) % 10)
    p[3] = <char>(48 + (v // 10) % 10)
    p[4] = <char>(48 + v % 10)
    return p + 5


def format_ppdb(bytearray out, int64_t start,
                const int64_t[::1] e1, const int64_t[::1] e2,
                const unsigned char[::1] texts, const int64_t[::1] text_off,
                const unsigned char[::1] lhs, const int64_t[::1] lhs_off,
                const double[::1] ppdb2, const double[::1] p, const double[::1] p_rev,
                const int64_t[:, ::1] rel, const int64_t[::1] relation, const int64_t[::1] n_pivots,
                const int64_t[::1] form, const double[::1] model_score, const int64_t[::1] order,
                bint lhs_x=False, bint with_score=True, bint with_relations=True):
    """Fill `out` with the PPDB 2.0 lines of rows start, start + 1, ... while they fit; returns
    (the next row, the number of bytes written). Each line ends in "\\n". A caller writes the
    bytes and calls again from the next row (the same buffer, reused: its pages stay mapped);
    when not even one line fits, it grows the buffer. Line r is of row order[r] of the arrays
    (order empty: row r), so that the caller need not gather ten arrays into the line order.

    Row r: phrase ids e1[r], e2[r], whose texts are texts[text_off[id]:text_off[id + 1]] and
    LHS labels lhs[lhs_off[id]:lhs_off[id + 1]] (of e1; lhs_x: "[X]" instead). Features, in
    order: PPDB2.0Score=ppdb2 (with_score), -logp(e2|e1)=-ln p and -logp(e1|e2)=-ln p_rev (each
    left out where NaN: the probability model does not give the pair), the six relation
    probabilities rel[r, :] / 1000 by name (with_relations), NumPivots, Form (the names of
    form's flags joined by ",", or "none"), and ModelScore=model_score[r] when model_score is
    not empty (a combined model's ranking score). Alignment "0-0" when both phrases are one
    word, else empty; the last field is the relation named by relation[r]. Every index is
    checked before its line is written (a row that fails raises ValueError, and the lines of
    this call are not returned).
    """
    cdef int64_t n = e1.shape[0], r, a, b, x
    cdef int j, first
    cdef int64_t f
    cdef bint has_score = model_score.shape[0] > 0
    cdef bint has_order = order.shape[0] > 0
    cdef int64_t n_ids = text_off.shape[0] - 1, i
    if (e2.shape[0] != n or ppdb2.shape[0] != n or p.shape[0] != n or p_rev.shape[0] != n
            or rel.shape[0] != n or rel.shape[1] != 6 or relation.shape[0] != n or n_pivots.shape[0] != n
            or form.shape[0] != n or (has_score and model_score.shape[0] != n)
            or (has_order and order.shape[0] != n)):
        raise ValueError("format_ppdb: every row array must have n rows (rel: n x 6)")
    if start < 0 or start > n:
        raise ValueError(f"format_ppdb: start {start} outside 0..{n}")
    if n_ids < 0 or (not lhs_x and lhs_off.shape[0] != n_ids + 1):
        raise ValueError("format_ppdb: the text and LHS offset tables must both have one entry per id, plus one")
    # The tables: offsets from 0, non-decreasing, within their buffers (one pass over the ids,
    # sequential); then each row needs only its ids in range.
    for x in range(n_ids):
        if text_off[x + 1] < text_off[x] or (not lhs_x and lhs_off[x + 1] < lhs_off[x]):
            raise ValueError(f"format_ppdb: offsets decrease at id {x}")
    if n_ids >= 0 and (text_off[0] < 0 or text_off[n_ids] > texts.shape[0]
                       or (not lhs_x and (lhs_off[0] < 0 or lhs_off[n_ids] > lhs.shape[0]))):
        raise ValueError("format_ppdb: offsets outside the text buffers")
    cdef char* buf = PyByteArray_AS_STRING(out)
    cdef char* q = buf
    cdef char* end = buf + len(out)
    cdef const char* t1
    cdef const char* t2
    cdef const char* lh
    cdef int64_t n1, n2, nl, nxt = n, bad = -1, ahead
    # Base pointers (an empty buffer has no element 0: every length taken from it is 0).
    cdef const char* tbase = <const char*>&texts[0] if texts.shape[0] else EMPTY
    cdef const char* lbase = <const char*>&lhs[0] if lhs.shape[0] else EMPTY
    with nogil:
        for r in range(start, n):
            # Each row is checked as it comes (once: a check of every remaining row at each
            # call would cost a pass over the rest of the chunk per buffer filled).
            i = order[r] if has_order else r
            if i < 0 or i >= n:
                bad = r
                break
            a, b = e1[i], e2[i]
            if (a < 0 or a >= n_ids or b < 0 or b >= n_ids or relation[i] < 0 or relation[i] > 5
                    or form[i] < 0 or form[i] >> N_FORM_FLAGS
                    or rel[i, 0] < 0 or rel[i, 0] > 1000 or rel[i, 1] < 0 or rel[i, 1] > 1000
                    or rel[i, 2] < 0 or rel[i, 2] > 1000 or rel[i, 3] < 0 or rel[i, 3] > 1000
                    or rel[i, 4] < 0 or rel[i, 4] > 1000 or rel[i, 5] < 0 or rel[i, 5] > 1000):
                bad = r
                break
            # e2 jumps around the phrase table: fetch a later line's offsets and text ahead
            # (only through indices in range: that row is checked when its turn comes).
            if r + 16 < n:
                ahead = order[r + 16] if has_order else r + 16
                if 0 <= ahead < n and 0 <= e2[ahead] < n_ids:
                    __builtin_prefetch(&text_off[e2[ahead]])
            if r + 8 < n:
                ahead = order[r + 8] if has_order else r + 8
                if 0 <= ahead < n and 0 <= e2[ahead] < n_ids:
                    __builtin_prefetch(tbase + text_off[e2[ahead]])
            t1 = tbase + text_off[a]
            n1 = text_off[a + 1] - text_off[a]
            t2 = tbase + text_off[b]
            n2 = text_off[b + 1] - text_off[b]
            if lhs_x:
                lh, nl = b"[X]", 3
            else:
                lh, nl = lbase + lhs_off[a], lhs_off[a + 1] - lhs_off[a]
            if end - q < LINE_FIXED_MAX + n1 + n2 + nl:
                nxt = r
                break
            q = _put(q, lh, nl)
            q = _put(q, b" ||| ", 5)
            q = _put(q, t1, n1)
            q = _put(q, b" ||| ", 5)
            q = _put(q, t2, n2)
            q = _put(q, b" ||| ", 5)
            if with_score:
                q = _put(q, b"PPDB2.0Score=", 13)
                q = pivot_g6(q, end, ppdb2[i])
                q[0] = b" "
                q += 1
            if not isnan(p[i]):
                q = _put(q, b"-logp(e2|e1)=", 13)
                q = pivot_g6(q, end, -log(p[i]))
                q[0] = b" "
                q += 1
            if not isnan(p_rev[i]):
                q = _put(q, b"-logp(e1|e2)=", 13)
                q = pivot_g6(q, end, -log(p_rev[i]))
                q[0] = b" "
                q += 1
            if with_relations:
                # The six relations, unrolled so that each name is a constant-size copy.
                q = _permille(_put(q, b"Equivalence=", 12), rel[i, 0])
                q = _permille(_put(q, b" ForwardEntailment=", 19), rel[i, 1])
                q = _permille(_put(q, b" ReverseEntailment=", 19), rel[i, 2])
                q = _permille(_put(q, b" Exclusion=", 11), rel[i, 3])
                q = _permille(_put(q, b" OtherRelated=", 14), rel[i, 4])
                q = _permille(_put(q, b" Independent=", 13), rel[i, 5])
                q[0] = b" "
                q += 1
            q = _put(q, b"NumPivots=", 10)
            q = pivot_i64(q, end, n_pivots[i])
            q = _put(q, b" Form=", 6)
            f = form[i]
            if f == 0:
                q = _put(q, b"none", 4)
            else:
                first = 1
                for j in range(N_FORM_FLAGS):
                    if f & (1 << j):
                        if not first:
                            q[0] = b","
                            q += 1
                        q = _put(q, FORM_FLAG_NAMES[j], FORM_FLAG_LEN[j])
                        first = 0
            if has_score:
                q = _put(q, b" ModelScore=", 12)
                q = pivot_g6(q, end, model_score[i])
            # Pivoting aligns no words inside phrases: only a one-word pair has a known link.
            if memchr(t1, 32, n1) == NULL and memchr(t2, 32, n2) == NULL:
                q = _put(q, b" ||| 0-0 ||| ", 13)
            else:
                q = _put(q, b" |||  ||| ", 10)
            q = _put(q, REL_NAMES[relation[i]], REL_NAME_LEN[relation[i]])
            q[0] = b"\n"
            q += 1
    if bad >= 0:
        raise ValueError(_row_problem(bad, order, e1, e2, relation, form, rel, n_ids))
    return nxt, q - buf


def _row_problem(int64_t r, const int64_t[::1] order, const int64_t[::1] e1, const int64_t[::1] e2,
                 const int64_t[::1] relation, const int64_t[::1] form, const int64_t[:, ::1] rel, int64_t n_ids):
    """What is wrong with line r's row (format_ppdb refused it)."""
    cdef int64_t n = e1.shape[0]
    i = order[r] if order.shape[0] else r
    if i < 0 or i >= n:
        return f"format_ppdb: order[{r}] = {i}, outside 0..{n - 1}"
    if not (0 <= e1[i] < n_ids and 0 <= e2[i] < n_ids):
        return f"format_ppdb: row {i} names phrase {e1[i]} or {e2[i]}, outside the tables"
    if not 0 <= relation[i] <= 5:
        return f"format_ppdb: row {i} has relation {relation[i]} (0..5)"
    if form[i] < 0 or form[i] >> N_FORM_FLAGS:
        return f"format_ppdb: row {i} has form {form[i]}, beyond the {N_FORM_FLAGS} known flags"
    return f"format_ppdb: row {i} has a relation probability of {max(rel[i, j] for j in range(6) if not 0 <= rel[i, j] <= 1000)} per mille"
