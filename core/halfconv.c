/*
 * halfconv.c — host bf16/fp16 <-> float conversions for the tests (round-to-nearest-even,
 * NaN-preserving), and rounding a double straight to a storage type.
 *
 * This file contains bit-level conversions written from the IEEE 754 formats: bf16 is the
 * top half of a binary32 (8-bit exponent, 7 stored mantissa bits); fp16 is binary16 (5-bit
 * exponent bias 15, 10 stored bits, subnormals down to 2^-24, largest finite 65504).
 */
#include "core/halfconv.h"

#include <math.h>
#include <string.h>

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t mj_half_bf16_from_float(float f)
{
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: truncating could leave an inf; force quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    /* Adding 0x7fff plus the lowest kept bit rounds half to even; a carry out of the
     * mantissa correctly bumps the exponent, up to inf for the largest finite floats. */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float mj_half_bf16_to_float(uint16_t h)
{
    return bits_float((uint32_t)h << 16);
}

uint16_t mj_half_fp16_from_float(float f)
{
    uint32_t u = float_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: keep the top payload bits, set the quiet bit */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    /* 65520 is the tie between 65504 (odd mantissa) and 2^16: even rounds it to inf. */
    if (a >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {
        /* Below 2^-14 the result is subnormal: its mantissa is |f| / 2^-24 rounded. The
         * scaling by a power of two is exact in float and rintf rounds half to even (the
         * default rounding mode); 1024 comes out as the smallest normal, as it should. */
        float m = rintf(fabsf(f) * 16777216.0f);
        return (uint16_t)(sign | (uint16_t)m);
    }
    uint32_t exp = (a >> 23) - 127u + 15u;
    uint32_t mant = a & 0x7fffffu;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++; /* may carry into the exponent: still the right encoding */
    return (uint16_t)(sign | h);
}

float mj_half_fp16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1fu) /* inf or NaN: keep the payload */
        return bits_float(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) { /* zero or subnormal: mant * 2^-24, exact in float */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_float(sign | ((exp - 15u + 127u) << 23) | (mant << 13));
}

size_t mj_half_dtype_size(mj_dtype dt)
{
    return dt == MJ_DTYPE_FP32 ? 4 : 2;
}

float mj_half_snap(float f, mj_dtype dt)
{
    switch (dt) {
    case MJ_DTYPE_BF16: return mj_half_bf16_to_float(mj_half_bf16_from_float(f));
    case MJ_DTYPE_FP16: return mj_half_fp16_to_float(mj_half_fp16_from_float(f));
    default: return f;
    }
}

double mj_half_round_double(double x, mj_dtype dt)
{
    if (dt == MJ_DTYPE_FP32)
        return (double)(float)x; /* the C conversion rounds to nearest-even */
    if (isnan(x) || isinf(x) || x == 0.0)
        return x;
    /* precision in bits (implicit bit included), smallest normal exponent, largest finite */
    int prec = dt == MJ_DTYPE_BF16 ? 8 : 11;
    int emin = dt == MJ_DTYPE_BF16 ? -126 : -14;
    double maxv = dt == MJ_DTYPE_BF16 ? 0x1.fep+127 : 65504.0;
    int e;
    frexp(x, &e); /* |x| = m * 2^e, m in [0.5, 1): the leading bit has weight 2^(e-1) */
    int lead = e - 1 < emin ? emin : e - 1; /* subnormals share the smallest normal's ulp */
    double ulp = ldexp(1.0, lead - (prec - 1));
    double r = nearbyint(x / ulp) * ulp; /* x / ulp is exact: a power-of-two scaling */
    if (fabs(r) > maxv)
        return x > 0 ? INFINITY : -INFINITY;
    return r;
}

void mj_half_pack(const float *src, size_t n, mj_dtype dt, void *dst)
{
    if (dt == MJ_DTYPE_FP32) {
        if (n)
            memcpy(dst, src, n * sizeof(float));
        return;
    }
    uint16_t *d = dst;
    for (size_t i = 0; i < n; i++)
        d[i] = dt == MJ_DTYPE_BF16 ? mj_half_bf16_from_float(src[i]) : mj_half_fp16_from_float(src[i]);
}

void mj_half_unpack(const void *src, size_t n, mj_dtype dt, float *dst)
{
    if (dt == MJ_DTYPE_FP32) {
        if (n)
            memcpy(dst, src, n * sizeof(float));
        return;
    }
    const uint16_t *s = src;
    for (size_t i = 0; i < n; i++)
        dst[i] = dt == MJ_DTYPE_BF16 ? mj_half_bf16_to_float(s[i]) : mj_half_fp16_to_float(s[i]);
}

/* ---- e4m3fn ------------------------------------------------------------------------------- */

/* 2^p for a normal double exponent p, built from its bits (ldexp is slow in a hot loop). */
static double pow2(int p)
{
    uint64_t u = (uint64_t)(p + 1023) << 52;
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

uint8_t mj_half_e4m3_from_double(double x)
{
    uint8_t sign = signbit(x) ? 0x80u : 0x00u;
    if (isnan(x))
        return (uint8_t)(sign | 0x7fu);
    double a = fabs(x);
    if (a >= MJ_E4M3_MAX) /* also inf: fn formats have none, the contract saturates */
        return (uint8_t)(sign | 0x7eu);
    if (a <= 0x1p-10) /* at most half the smallest subnormal 2^-9: zero (a tie goes to even) */
        return sign;
    /* the quantum: 3 stored bits below the leading one; subnormals share 2^-6's ulp 2^-9 */
    uint64_t u;
    memcpy(&u, &a, sizeof u);
    int lead = (int)((u >> 52) & 0x7ffu) - 1023; /* a is a normal double here */
    if (lead < -6)
        lead = -6;
    double ulp = pow2(lead - 3);
    double m = nearbyint(a / ulp); /* exact scaling; nearbyint ties to even */
    /* below 448 the largest result is 14·32 = 448 itself, so no saturation is needed here */
    if (m == 0.0)
        return sign;
    if (m >= 16.0) { /* carried into the next binade: 16·ulp = 8·(2·ulp) */
        lead++;
        m = 8.0;
    }
    if (m < 8.0) /* below 2^-6: subnormal, m·2^-9 with m in 1..7 */
        return (uint8_t)(sign | (uint8_t)m);
    return (uint8_t)(sign | (uint8_t)((lead + 7) << 3) | (uint8_t)(m - 8.0));
}

float mj_half_e4m3_to_float(uint8_t b)
{
    unsigned exp = (b >> 3) & 0xfu, m = b & 7u;
    float v;
    if (exp == 0xfu && m == 7u)
        v = NAN;
    else if (exp == 0)
        v = (float)m * 0x1p-9f;
    else
        v = (float)((double)(8u + m) * pow2((int)exp - 10)); /* 1.m·2^(exp-7), exact */
    return (b & 0x80u) ? -v : v;
}

double mj_half_e4m3_round(double x)
{
    return (double)mj_half_e4m3_to_float(mj_half_e4m3_from_double(x));
}
