"""Floating-point math whose bits do not depend on the CPU: exp, exp2, log, sums, dot products
and small linear solves from IEEE basic operations only.

Why: numpy picks the loop of a transcendental ufunc by the CPU it runs on (``np.exp``,
``np.exp2``, ``np.log`` have an AVX-512 loop on X86_V4 CPUs and another one elsewhere) and the
loops round differently in the last bit; OpenBLAS picks a kernel per CPU (Haswell, SkylakeX, ...)
whose summation order differs, and so do ``@``/``np.dot`` and LAPACK's solve and inverse. A
value computed with them depends on the machine (and on a cluster, on the node) that computed
it, and the project promises the same export bytes from the same inputs.

What is used instead, and why it is portable:

* ``+ - * /``, ``np.rint``, ``np.ldexp``, ``np.frexp``, comparisons, ``np.where``: IEEE 754
  requires each to be correctly rounded (rint, ldexp, frexp are exact on normal numbers), so
  every SIMD width and every CPU gives the same bits. Each numpy call is one operation: numpy
  never fuses a multiply and an add from two calls into an FMA, and CPython's float arithmetic
  does not contract either.
* Polynomials are evaluated by Horner's rule with fixed coefficients (float64 literals computed
  here from 50-digit :mod:`decimal` arithmetic, which is software and exact to its precision).
* Sums of a vector: :func:`math.fsum`, the correctly rounded sum (Shewchuk), independent of the
  order and the CPU; used where vectors are short (a fit's score and Hessian over its tuning
  pairs). A dot product of a design row with a coefficient vector: the columns in order,
  ``((x0*b0 + x1*b1) + x2*b2) + ...``, every step a rounded IEEE operation.
* Solving a linear system (a Newton step, a ridge regression's normal equations) and inverting
  a matrix: Gaussian elimination with partial pivoting in one fixed order of elementwise
  operations.

Accuracy (the bounds are derived next to each function; tests/test_portable.py checks them
against 40-digit :mod:`decimal` references): :func:`exp`, :func:`exp2` and :func:`log` are within
0.8 ulp, and about 98.5% (exp, exp2) and 99.5% (log) of random arguments come out correctly
rounded. Not always correctly rounded (no libm's is either): the point is the same bits
everywhere, at the accuracy of a good libm.
"""
from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np


def _coefficients(values) -> tuple[float, ...]:
    """float64 (correctly rounded from 50 digits) of each Decimal expression in ``values``."""
    return tuple(float(v) for v in values)


with localcontext() as _ctx:
    _ctx.prec = 50
    _LN2 = Decimal(2).ln()
    _LOG2E = 1 / _LN2
    # 2^f = sum_k (f ln2)^k / k!  and  e^r = sum_k r^k / k!; the tails from k = 2 (k = 0 and 1
    # are summed separately, see exp2 and exp) up to degree 15, whose truncation error for
    # |f| <= 1/2 (|r| <= ln2/2 = 0.347) is below 0.347^16 / 16! = 2e-20 = 0.0002 ulp of 1.
    _EXP2_TAIL = _coefficients(_LN2 ** k / math.factorial(k) for k in range(2, 16))
    _EXP_TAIL = _coefficients(Decimal(1) / math.factorial(k) for k in range(2, 16))
    # log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)), s = f / (2 + f), R(z) = sum_{k>=1} 2 z^k / (2k+1)
    # (the atanh series of fdlibm's log with Taylor's coefficients instead of its minimax ones);
    # |s| <= 0.1716, z <= 0.0295: 12 terms leave 2/25 z^12 < 1e-19 of R.
    _LOG_R = _coefficients(Decimal(2) / (2 * k + 1) for k in range(1, 13))
    _LN2_F = float(_LN2)
    _INV_LN10 = float(1 / Decimal(10).ln())
    _LN2_F_LO = float(_LN2 - Decimal(_LN2_F))   # ln2 - float(ln2), about 2.3e-17
    _LOG2E_F = float(_LOG2E)

# ln2 split so that n * _LN2_HI is exact for |n| < 2^21 (the high part has 32 significant bits;
# fdlibm's constants) and _LN2_HI + _LN2_LO = ln2 to 2^-85.
_LN2_HI = float.fromhex("0x1.62e42feep-1")
with localcontext() as _ctx:
    _ctx.prec = 50
    _LN2_LO = float(_LN2 - Decimal(_LN2_HI))
_SQRT_HALF = float.fromhex("0x1.6a09e667f3bcdp-1")   # sqrt(1/2) rounded (the cut between ranges)


def _horner(x, coefficients):
    """c[0] + x (c[1] + x (c[2] + ...)), one rounded multiply and one rounded add a step."""
    acc = np.full_like(x, coefficients[-1])
    for c in coefficients[-2::-1]:
        acc = acc * x + c
    return acc


def _scale(p, n):
    """p * 2^n for float64 p and integer-valued float64 n: ldexp is exact while the result is
    normal and correctly rounded (one rounding) below; n is clipped so that the integer
    conversion is defined (beyond +-2100 the result is inf or 0 for any p in [0.5, 2])."""
    return np.ldexp(p, np.clip(np.nan_to_num(n), -2100, 2100).astype(np.int64))


def _split(a):
    """Veltkamp's split a = hi + lo, each half with at most 26 significant bits (exact)."""
    c = 134217729.0 * a                                     # 2^27 + 1
    hi = c - (c - a)
    return hi, a - hi


def _two_sum(a, b):
    """(s, e) with s = fl(a + b) and s + e = a + b exactly (Knuth's TwoSum, any magnitudes)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _one_plus(a, b):
    """1 + a + b, |a| <= 1/2, |b| << |a|: s = fl(1 + a) and its error (1 - s) + a (exact, Fast2Sum
    since |a| < 1) added to b before the one final rounding of s + (error + b)."""
    s = 1.0 + a
    return s + (((1.0 - s) + a) + b)


_LN2_SPLIT = _split(_LN2_F)


def _exp2_general(x):
    """2^x (float64 array), the same bits on every CPU.

    n = rint(x) and f = x - n in [-1/2, 1/2] (both exact), 2^x = 2^n 2^f with 2^n by ldexp
    (exact) and 2^f = 1 + f ln2 + f^2 P(f), P the degree-13 Taylor tail (Horner):
    f * float(ln2) exactly as ph + pl (Dekker's product on Veltkamp halves), plus f times ln2's
    remainder, plus f^2 P(f), then 1 + ph + (pl + ...) with the error of 1 + ph kept (Fast2Sum).
    Error of a result in [0.707, 1.414) (its ulp 2^-53 below 1, 2^-52 above): f^2 P(f) <= 0.09
    with 4-5 roundings of relative 2^-53 each, <= 0.25 ulp below 1 and 0.1 above; the final
    rounding 0.5 ulp: <= 0.8 ulp (measured in the tests: <= 0.65).
    inf -> inf, -inf -> 0, NaN -> NaN; overflow to inf and underflow (gradually) to 0 as ldexp.
    """
    x = np.asarray(x, dtype=np.float64)
    big = np.abs(x) > 2100                                   # 2^x is inf or 0 there
    xs = np.where(big | np.isnan(x), 0.0, x)
    n = np.rint(xs)
    f = xs - n
    fh, fl = _split(f)
    ch, cl = _LN2_SPLIT
    ph = f * _LN2_F
    pl = ((fh * ch - ph) + fh * cl + fl * ch) + fl * cl      # ph + pl = f * float(ln2) exactly
    out = _scale(_one_plus(ph, pl + (f * _LN2_F_LO + (f * f) * _horner(f, _EXP2_TAIL))), n)
    out = np.where(big, np.where(x > 0, np.inf, 0.0), out)
    return np.where(np.isnan(x), np.nan, out)


def _exp_general(x):
    """e^x (float64 array), the same bits on every CPU.

    n = rint(x / ln2) (any rounding here only picks n), r = x - n ln2 by Cody-Waite:
    x - n ln2_hi is exact, and r_hi + r_lo = (x - n ln2_hi) - n ln2_lo exactly (TwoSum; n ln2_lo,
    below 2.1e-7, rounds by < 2.4e-23); |r| <= 0.347. e^r = 1 + r + r^2 P(r), P the degree-11
    Taylor tail (Horner), summed as 1 + r_hi + (r_lo + r_hi^2 P(r_hi)) with the error of
    1 + r_hi kept (Fast2Sum); 2^n by ldexp (exact). Error: r^2 P(r) <= 0.07 with 4-5 roundings
    (<= 0.2 ulp), the final rounding 0.5 ulp: <= 0.75 ulp (measured in the tests: <= 0.65). inf -> inf, -inf -> 0, NaN -> NaN.
    """
    x = np.asarray(x, dtype=np.float64)
    big = np.abs(x) > 1500                                   # e^x is inf or 0 there
    xs = np.where(big | np.isnan(x), 0.0, x)
    n = np.rint(xs * _LOG2E_F)
    r, r_lo = _two_sum(xs - n * _LN2_HI, -(n * _LN2_LO))
    out = _scale(_one_plus(r, r_lo + (r * r) * _horner(r, _EXP_TAIL)), n)
    out = np.where(big, np.where(x > 0, np.inf, 0.0), out)
    return np.where(np.isnan(x), np.nan, out)


def _log_general(x):
    """Natural log (float64 array), the same bits on every CPU.

    x = m 2^e with m in [sqrt(1/2), sqrt(2)) (frexp, exact), f = m - 1 (exact: Sterbenz),
    s = f / (2 + f), hf = f^2 / 2, and fdlibm's form of log(1 + f) = 2 atanh(s):
        log x = e ln2_hi - ((hf - (s (hf + R) + e ln2_lo)) - f),   R = z R'(z), z = s^2
    where f - hf is nearly exact and the rounding errors sit in s (hf + R), which is below
    |f|/3: fdlibm's bound for this form is < 1 ulp. x = 0 -> -inf, x < 0 or NaN -> NaN,
    inf -> inf; subnormal x are scaled by 2^54 first.
    """
    x = np.asarray(x, dtype=np.float64)
    bad = ~(x > 0) | np.isinf(x)                             # 0, negatives, NaN, inf
    xs = np.where(bad, 1.0, x)
    tiny = xs < 2.2250738585072014e-308
    xs = xs * np.where(tiny, 18014398509481984.0, 1.0)       # * 2^54: normal, exact
    m, e = np.frexp(xs)                                      # xs = m 2^e, m in [1/2, 1)
    low = m < _SQRT_HALF
    m = np.where(low, m * 2.0, m)
    k = e.astype(np.float64) - np.where(low, 1.0, 0.0) - np.where(tiny, 54.0, 0.0)
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    hf = 0.5 * f * f
    big_r = z * _horner(z, _LOG_R)
    out = k * _LN2_HI - ((hf - (s * (hf + big_r) + k * _LN2_LO)) - f)
    out = np.where(x == 0, -np.inf, out)
    out = np.where(np.isposinf(x), np.inf, out)
    return np.where(~(x >= 0), np.nan, out)


#: Elements a fast path works on at a time: its dozen float64 buffers (128 KB each) stay in the
#: cache, where whole-array temporaries of millions of elements would go to memory and back at
#: every one of the ~40 operations.
_CHUNK = 1 << 14
_TINY = 2.2250738585072014e-308                              # the smallest normal double


def _chunked(x, fast, general, in_range):
    """``fast`` on the chunks whose elements are all ``in_range(min, max)`` (the usual case: a
    probability's log, a weight's exponent), ``general`` (special values handled) elsewhere.
    Both perform the same operations on an ordinary element, so the result is the same bits
    whichever path a chunk takes; ``fast`` only works in place on cached buffers."""
    x = np.asarray(x, dtype=np.float64)
    flat = x.ravel()
    out = np.empty_like(flat)
    for a in range(0, len(flat), _CHUNK):
        c, o = flat[a:a + _CHUNK], out[a:a + _CHUNK]
        lo, hi = c.min(), c.max()                            # NaN -> False below: the general path
        if in_range(lo, hi):
            fast(c, o)
        else:
            o[:] = general(c)
    return out.reshape(x.shape)


def _log_fast(x, out):
    """_log_general's operations, in its order, for normal positive finite x."""
    m, e = np.frexp(x)
    low = m < _SQRT_HALF
    np.multiply(m, 2.0, out=m, where=low)
    k = e.astype(np.float64)
    np.subtract(k, 1.0, out=k, where=low)
    f = np.subtract(m, 1.0, out=m)
    s = np.add(f, 2.0)
    np.divide(f, s, out=s)                                   # s = f / (2 + f)
    z = s * s
    r = z * _LOG_R[-1]                                       # R = z R'(z) by Horner, as _horner
    for c in _LOG_R[-2::-1]:
        r += c
        r *= z
    hf = f * 0.5
    hf *= f                                                  # (0.5 f) f
    r += hf                                                  # hf + R
    r *= s
    r += np.multiply(k, _LN2_LO)                             # s (hf + R) + k ln2_lo
    np.subtract(hf, r, out=r)
    r -= f
    np.multiply(k, _LN2_HI, out=out)
    out -= r


def _exp_fast(x, out):
    """_exp_general's operations, in its order, for |x| <= 1500."""
    n = x * _LOG2E_F
    np.rint(n, out=n)
    a = n * _LN2_HI
    np.subtract(x, a, out=a)                                 # x - n ln2_hi (exact)
    b = n * _LN2_LO
    np.negative(b, out=b)
    _finish(a, b, n, _EXP_TAIL, out)


def _exp2_fast(x, out):
    """_exp2_general's operations, in its order, for |x| <= 2100."""
    n = np.rint(x)
    f = x - n
    fh, fl = _split(f)
    ch, cl = _LN2_SPLIT
    ph = f * _LN2_F
    pl = fh * ch
    pl -= ph
    pl += fh * cl
    pl += fl * ch
    pl += fl * cl                                            # ph + pl = f float(ln2) exactly
    t = f * _LN2_F_LO
    t += _tail(f, _EXP2_TAIL)
    pl += t
    _one_plus_scaled(ph, pl, n, out)


def _tail(r, coefficients):
    """(r r) P(r), P by Horner (as _horner)."""
    h = r * coefficients[-1]
    h += coefficients[-2]
    for c in coefficients[-3::-1]:
        h *= r
        h += c
    h *= r * r
    return h


def _finish(a, b, n, coefficients, out):
    """exp's end: r, r_lo = TwoSum(a, b), then 2^n (1 + r + (r_lo + r^2 P(r)))."""
    r = a + b
    bb = r - a
    e = r - bb
    np.subtract(a, e, out=e)
    np.subtract(b, bb, out=bb)
    e += bb                                                  # r_lo
    e += _tail(r, coefficients)
    _one_plus_scaled(r, e, n, out)


def _one_plus_scaled(a, b, n, out):
    """2^n (1 + a + b) as _scale(_one_plus(a, b), n)."""
    s = a + 1.0
    t = 1.0 - s
    t += a
    t += b
    s += t
    np.ldexp(s, n.astype(np.int64), out=out)


def exp2(x):
    """2^x (float64 array), the same bits on every CPU: see _exp2_general for the method and
    its error bound (<= 0.8 ulp); computed in cached chunks (_chunked)."""
    return _chunked(x, _exp2_fast, _exp2_general, lambda lo, hi: lo >= -2100 and hi <= 2100)


def exp(x):
    """e^x (float64 array), the same bits on every CPU: see _exp_general for the method and its
    error bound (<= 0.75 ulp); computed in cached chunks (_chunked)."""
    return _chunked(x, _exp_fast, _exp_general, lambda lo, hi: lo >= -1500 and hi <= 1500)


def log(x):
    """Natural log (float64 array), the same bits on every CPU: see _log_general for the method
    and its error bound (< 1 ulp; <= 0.75 measured); computed in cached chunks (_chunked)."""
    return _chunked(x, _log_fast, _log_general, lambda lo, hi: lo >= _TINY and hi <= 1.7976931348623157e308)


def log10(x):
    """log10 x = log x * (1 / ln 10) (float64 array), the same bits on every CPU (numpy's log10
    loop differs between X86_V4 and other CPUs). Relative error <= (0.75 + 0.5 + 0.5) 2^-52:
    :func:`log`'s, the constant's and the product's roundings, up to 3.5 ulp of the result
    (measured <= 1.75 ulp, 77% correctly rounded: coarser than log, fine for the LM's ARPA,
    which keeps 7 decimals). 0 at 1, -inf at 0."""
    return log(x) * _INV_LN10


def logistic(eta):
    """1 / (1 + e^-eta), the logistic cdf, on :func:`exp`."""
    return 1.0 / (1.0 + exp(-np.asarray(eta, dtype=np.float64)))


def dot(X, beta):
    """X @ beta for an (n, k) design and k coefficients, by columns in order:
    ((X[:,0] b0 + X[:,1] b1) + X[:,2] b2) + ..., each step one rounded IEEE operation (numpy's
    matmul goes through BLAS, whose kernel and summation order depend on the CPU)."""
    X = np.asarray(X, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    if X.ndim == 1:
        X = X[None, :]
    acc = X[:, 0] * beta[0]
    for j in range(1, X.shape[1]):
        acc = acc + X[:, j] * beta[j]
    return acc


def fsum(v) -> float:
    """The correctly rounded sum of a vector (math.fsum): the same whatever the order or CPU."""
    return math.fsum(np.asarray(v, dtype=np.float64).ravel().tolist())


def solve(A, b):
    """x with A x = b for a square A (up to a few hundred rows): Gaussian elimination with
    partial pivoting (the largest |a_ic| of the column, the first on ties), then back
    substitution, in one fixed order of elementwise numpy operations (each element of each step
    one rounded multiply and one rounded subtract: no BLAS, no LAPACK). ``b`` a vector or a
    matrix of right-hand sides. Raises numpy.linalg.LinAlgError for a zero or non-finite pivot,
    as numpy's solve does for a singular matrix."""
    A = np.array(A, dtype=np.float64)                       # copies: the inputs stay as they are
    B = np.array(b, dtype=np.float64)
    n = A.shape[0]
    if A.ndim != 2 or A.shape[1] != n or B.shape[:1] != (n,):
        raise ValueError(f"solve needs a square A and a b of as many rows, got {A.shape} and {B.shape}")
    vector = B.ndim == 1
    B = B.reshape(n, -1)
    for c in range(n):
        p = c + int(np.argmax(np.abs(A[c:, c])))            # argmax: the first of equal maxima
        if not (np.isfinite(A[p, c]) and A[p, c] != 0.0):
            raise np.linalg.LinAlgError("Singular matrix")
        if p != c:
            A[[c, p]] = A[[p, c]]
            B[[c, p]] = B[[p, c]]
        f = A[c + 1:, c] / A[c, c]
        A[c + 1:, c:] -= f[:, None] * A[c, c:]
        B[c + 1:] -= f[:, None] * B[c]
    X = np.empty_like(B)
    for i in range(n - 1, -1, -1):                          # x_i = (b_i - sum_{j>i} a_ij x_j) / a_ii,
        X[i] = B[i] / A[i, i]                               # the terms subtracted j = n-1 first
        B[:i] -= A[:i, i:i + 1] * X[i]
    return X[:, 0] if vector else X


def inv(A):
    """The inverse of a small square matrix by :func:`solve` against the identity."""
    return solve(A, np.eye(len(np.asarray(A))))
