"""Sine and cosine for the LM kernel's forward kinematics, without the C library in float64.

The kernel's iteration loop would call the C library's ``sincos`` once per joint per evaluation;
:func:`sin_cos_function` computes both in the kernel instead: it reduces the angle by multiples of pi / 2 (Cody
and Waite: pi / 2 in three parts) and evaluates Taylor polynomials on [-pi / 4, pi / 4].
"""

# No `from __future__ import annotations`: warp reads the functions' annotations as live types.
import functools
import math
from decimal import Decimal
from fractions import Fraction

import warp as wp

__all__ = ["sin_cos_function"]

_PI = Fraction(Decimal("3.14159265358979323846264338327950288419716939937510582097494459"))
_SERIES_MAX = 1e5  # |x| beyond which sin_cos calls the C library (its reduction needs |x / (pi / 2)| < 2^20)


def _half_pi_parts() -> tuple[float, float, float]:
    """``pi / 2 = c1 + c2 + c3`` to about 150 bits, ``c1`` and ``c2`` with 33-bit significands: ``k c1`` and ``k c2``
    are exact for integers ``|k| < 2^20`` (Cody and Waite's reduction)."""
    rest, parts = _PI / 2, []
    for _ in range(2):
        mantissa, exponent = math.frexp(float(rest))
        part = math.ldexp(math.floor(mantissa * 2**33), exponent - 33)
        parts.append(part)
        rest -= Fraction(part)
    return parts[0], parts[1], float(rest)


@functools.cache
def sin_cos_function(f: type) -> wp.Function:
    """``sin_cos(x) -> (sin x, cos x)`` for warp floats ``f`` (``wp.float32`` or ``wp.float64``).

    In float64: ``x`` less the nearest multiple ``k`` of pi / 2 (in three parts, so the remainder is exact to
    about 1e-30), then Taylor polynomials on [-pi / 4, pi / 4] to ``r^17`` and ``r^16`` (truncated below 1e-17),
    swapped and signed by ``k mod 4``: within 2.3e-16 of the C library's for |x| <= 1e5. Beyond 1e5, and in
    float32, the C library's.
    """
    c1, c2, c3 = _half_pi_parts()
    two_over_pi = float(2 / _PI)
    s1, s2, s3, s4, s5, s6, s7, s8 = ((-1) ** k / math.factorial(2 * k + 1) for k in range(1, 9))
    k1, k2, k3, k4, k5, k6, k7, k8 = ((-1) ** k / math.factorial(2 * k) for k in range(1, 9))
    series = f is wp.float64

    @wp.func
    def sin_cos(x: f):
        if wp.static(not series):
            return wp.sin(x), wp.cos(x)
        if not (wp.abs(x) <= f(_SERIES_MAX)):
            return wp.sin(x), wp.cos(x)
        k = wp.rint(x * f(two_over_pi))
        r = ((x - k * f(c1)) - k * f(c2)) - k * f(c3)
        r2 = r * r
        sin_r = r + r * r2 * (
            f(s1) + r2 * (f(s2) + r2 * (f(s3) + r2 * (f(s4) + r2 * (f(s5) + r2 * (f(s6) + r2 * (f(s7) + r2 * f(s8)))))))
        )
        cos_r = f(1.0) + r2 * (
            f(k1) + r2 * (f(k2) + r2 * (f(k3) + r2 * (f(k4) + r2 * (f(k5) + r2 * (f(k6) + r2 * (f(k7) + r2 * f(k8)))))))
        )
        quadrant = wp.int32(k) & 3
        if quadrant == 0:
            return sin_r, cos_r
        if quadrant == 1:
            return cos_r, -sin_r
        if quadrant == 2:
            return -sin_r, -cos_r
        return -cos_r, sin_r

    return sin_cos
