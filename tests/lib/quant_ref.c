/*
 * quant_ref.c — host quantizers, packers and dequantizers of the weight formats (see
 * quant_ref.h for every device layout).
 *
 * This file contains the element codes (e2m1, e8m0; e4m3fn lives with the other float
 * conversions in halfconv.c), nibble packing, the per-format quantizers that produce device
 * bytes plus exact dequantized floats, an independent decoder of those bytes, and the
 * snapping of fp8 activation inputs onto a lossless grid.
 */
#include "quant_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/halfconv.h"
#include "core/status.h"

#define FP8_BLOCK 128 /* weight block edge of fp8_block (both N and K) */
#define MX_BLOCK 32   /* elements per e8m0 scale of mxfp4 */

mj_qref_format mj_qref_format_of(const moejit_spec *spec)
{
    return (mj_qref_format){spec->quant, spec->dtype, spec->group_size, spec->zero_point};
}

/* ---- elements ---------------------------------------------------------------------------------- */

static const double e2m1_values[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

unsigned mj_qref_e2m1_from_double(double x)
{
    if (isnan(x))
        return 0;
    unsigned sign = signbit(x) ? 8u : 0u;
    double a = fabs(x);
    unsigned best = 0;
    for (unsigned c = 1; c < 8; c++) {
        double d = fabs(e2m1_values[c] - a), db = fabs(e2m1_values[best] - a);
        /* a tie goes to the even code (the one whose mantissa bit is 0) */
        if (d < db || (d == db && (c & 1u) == 0))
            best = c;
    }
    return sign | best;
}

double mj_qref_e2m1_to_double(unsigned code)
{
    double v = e2m1_values[code & 7u];
    return (code & 8u) ? -v : v;
}

double mj_qref_e8m0_to_double(uint8_t s)
{
    return s == 255 ? NAN : ldexp(1.0, (int)s - 127);
}

/* ---- 4-bit packing ------------------------------------------------------------------------------- */

size_t mj_qref_nibble_row_bytes(int64_t n)
{
    return (size_t)((n + 1) / 2);
}

void mj_qref_pack_nibbles(const uint8_t *codes, int64_t rows, int64_t n, uint8_t *dst)
{
    size_t rb = mj_qref_nibble_row_bytes(n);
    memset(dst, 0, rb * (size_t)rows);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++) {
            uint8_t c = codes[r * n + i] & 0xfu;
            dst[(size_t)r * rb + (size_t)(i / 2)] |= (uint8_t)(i % 2 ? c << 4 : c);
        }
}

unsigned mj_qref_nibble(const uint8_t *packed, int64_t n, int64_t row, int64_t i)
{
    uint8_t b = packed[(size_t)row * mj_qref_nibble_row_bytes(n) + (size_t)(i / 2)];
    return i % 2 ? b >> 4 : b & 0xfu;
}

/* ---- shapes ------------------------------------------------------------------------------------- */

moejit_status mj_qref_check_shape(const mj_qref_format *f, int64_t N, int64_t K, const char *what)
{
    switch (f->quant) {
    case MJ_QUANT_FP8_BLOCK:
        if (N % FP8_BLOCK || K % FP8_BLOCK)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "%s: fp8_block needs rows and K multiples of 128, got %lld x %lld", what,
                           (long long)N, (long long)K);
        return MOEJIT_OK;
    case MJ_QUANT_W4A16:
        if (f->group != 32 && f->group != 64 && f->group != 128)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: w4a16 group must be 32, 64 or 128, got %d",
                           what, f->group);
        if (K % f->group)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: w4a16 needs K a multiple of group %d, got %lld",
                           what, f->group, (long long)K);
        return MOEJIT_OK;
    case MJ_QUANT_MXFP4:
        if (K % MX_BLOCK)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: mxfp4 needs K a multiple of 32, got %lld",
                           what, (long long)K);
        return MOEJIT_OK;
    case MJ_QUANT_BF16:
    case MJ_QUANT_FP16:
    case MJ_QUANT_FP8_TENSOR:
        return MOEJIT_OK;
    default:
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: unknown quant %d", what, (int)f->quant);
    }
}

int64_t mj_qref_granule(const mj_qref_format *f)
{
    switch (f->quant) {
    case MJ_QUANT_FP8_BLOCK: return FP8_BLOCK;
    case MJ_QUANT_W4A16: return f->group;
    case MJ_QUANT_MXFP4: return MX_BLOCK;
    default: return 1;
    }
}

/* ---- scales --------------------------------------------------------------------------------------- */

/* x > 0 rounded UP to 16 significant bits: an e4m3 value (4 bits) times it is exact in fp32,
 * and rounding up keeps amax / scale <= 448 (no clipping of the largest element). */
static float fp32_scale_up(double x)
{
    if (!(x > 0.0))
        return 1.0f;
    int e;
    double m = frexp(x, &e);
    return (float)ldexp(ceil(m * 65536.0) / 65536.0, e);
}

static uint16_t half_from(double x, mj_dtype dt)
{
    return dt == MJ_DTYPE_FP16 ? mj_half_fp16_from_float((float)x) : mj_half_bf16_from_float((float)x);
}

static double half_to(uint16_t h, mj_dtype dt)
{
    return dt == MJ_DTYPE_FP16 ? mj_half_fp16_to_float(h) : mj_half_bf16_to_float(h);
}

/* x > 0 rounded UP to the 16-bit dtype (so |w| / scale stays within the code range). */
static uint16_t half_scale_up(double x, mj_dtype dt)
{
    if (!(x > 0.0))
        return half_from(1.0, dt);
    uint16_t b = half_from(x, dt);
    if (half_to(b, dt) < x)
        b++; /* positive: the next encoding is the next larger value */
    return b;
}

static double amax_of(const float *v, int64_t rows, int64_t cols, int64_t stride)
{
    double m = 0.0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            m = fmax(m, fabs((double)v[r * stride + c]));
    return m;
}

static uint8_t clamp_code(double q)
{
    return (uint8_t)(q < 0.0 ? 0.0 : q > 15.0 ? 15.0 : q);
}

/* ---- quantizers ------------------------------------------------------------------------------------ */

static void quantize_fp8_tensor(const float *src, int64_t E, int64_t N, int64_t K, mj_qref_weights *w)
{
    float *scale = (float *)w->scale;
    for (int64_t e = 0; e < E; e++) {
        const float *s = src + e * N * K;
        scale[e] = fp32_scale_up(amax_of(s, N, K, K) / MJ_E4M3_MAX);
        for (int64_t i = 0; i < N * K; i++) {
            uint8_t q = mj_half_e4m3_from_double((double)s[i] / scale[e]);
            w->data[e * N * K + i] = q;
            w->deq[e * N * K + i] = (float)((double)mj_half_e4m3_to_float(q) * scale[e]);
        }
    }
}

static void quantize_fp8_block(const float *src, int64_t E, int64_t N, int64_t K, mj_qref_weights *w)
{
    float *scale = (float *)w->scale;
    int64_t nb = N / FP8_BLOCK, kb = K / FP8_BLOCK;
    for (int64_t e = 0; e < E; e++)
        for (int64_t bn = 0; bn < nb; bn++)
            for (int64_t bk = 0; bk < kb; bk++) {
                size_t base = (size_t)(e * N * K + bn * FP8_BLOCK * K + bk * FP8_BLOCK);
                float s = fp32_scale_up(amax_of(src + base, FP8_BLOCK, FP8_BLOCK, K) / MJ_E4M3_MAX);
                scale[(e * nb + bn) * kb + bk] = s;
                for (int64_t r = 0; r < FP8_BLOCK; r++)
                    for (int64_t c = 0; c < FP8_BLOCK; c++) {
                        size_t i = base + (size_t)(r * K + c);
                        uint8_t q = mj_half_e4m3_from_double((double)src[i] / s);
                        w->data[i] = q;
                        w->deq[i] = (float)((double)mj_half_e4m3_to_float(q) * s);
                    }
            }
}

/* codes [E·N, K] and zero codes [E·N, K/g] are packed at the end */
static void quantize_w4a16(const mj_qref_format *f, const float *src, int64_t E, int64_t N, int64_t K,
                           mj_qref_weights *w, uint8_t *codes, uint8_t *zcodes)
{
    int64_t g = f->group, ng = K / g;
    mj_dtype dt = f->dtype == MJ_DTYPE_FP16 ? MJ_DTYPE_FP16 : MJ_DTYPE_BF16;
    uint16_t *scale = (uint16_t *)w->scale;
    for (int64_t r = 0; r < E * N; r++)
        for (int64_t j = 0; j < ng; j++) {
            const float *s = src + r * K + j * g;
            double lo = 0.0, hi = 0.0;
            for (int64_t c = 0; c < g; c++) {
                lo = fmin(lo, (double)s[c]);
                hi = fmax(hi, (double)s[c]);
            }
            uint16_t sb;
            int zp = 8;
            if (f->zero_point) {
                /* asymmetric: [lo, hi] onto [0, 15], the zero point where 0.0 lands */
                sb = half_scale_up((hi - lo) / 15.0, dt);
                zp = (int)clamp_code(nearbyint(-lo / half_to(sb, dt)));
                zcodes[r * ng + j] = (uint8_t)zp;
            } else {
                sb = half_scale_up(fmax(hi, -lo) / 7.0, dt); /* symmetric around 8: q - 8 in [-7, 7] */
            }
            scale[r * ng + j] = sb;
            double sc = half_to(sb, dt);
            for (int64_t c = 0; c < g; c++) {
                uint8_t q = clamp_code(nearbyint((double)s[c] / sc) + zp);
                codes[r * K + j * g + c] = q;
                w->deq[r * K + j * g + c] = (float)(((double)q - zp) * sc);
            }
        }
}

static void quantize_mxfp4(const float *src, int64_t E, int64_t N, int64_t K, mj_qref_weights *w,
                           uint8_t *codes)
{
    int64_t nb = K / MX_BLOCK;
    for (int64_t r = 0; r < E * N; r++)
        for (int64_t j = 0; j < nb; j++) {
            const float *s = src + r * K + j * MX_BLOCK;
            double amax = amax_of(s, 1, MX_BLOCK, MX_BLOCK);
            /* the smallest power of two 2^x with amax / 2^x <= 6 */
            int x = amax > 0.0 ? (int)ceil(log2(amax / 6.0)) : -127;
            /* log2 may round across an integer: settle on the exact smallest fitting x */
            while (amax > 0.0 && amax / ldexp(1.0, x) > 6.0)
                x++;
            while (amax > 0.0 && amax / ldexp(1.0, x - 1) <= 6.0)
                x--;
            x = x < -127 ? -127 : x > 127 ? 127 : x;
            w->scale[r * nb + j] = (uint8_t)(x + 127);
            for (int64_t c = 0; c < MX_BLOCK; c++) {
                unsigned q = mj_qref_e2m1_from_double((double)s[c] / ldexp(1.0, x));
                codes[r * K + j * MX_BLOCK + c] = (uint8_t)q;
                w->deq[r * K + j * MX_BLOCK + c] = (float)ldexp(mj_qref_e2m1_to_double(q), x);
            }
        }
}

moejit_status mj_qref_quantize(const mj_qref_format *f, const float *src, int64_t E, int64_t N,
                               int64_t K, mj_qref_weights *out)
{
    memset(out, 0, sizeof *out);
    moejit_status st = mj_qref_check_shape(f, N, K, "quant_ref");
    if (st)
        return st;
    out->experts = E;
    out->rows = N;
    out->cols = K;
    size_t n = (size_t)(E * N * K);
    int four_bit = f->quant == MJ_QUANT_W4A16 || f->quant == MJ_QUANT_MXFP4;
    switch (f->quant) {
    case MJ_QUANT_BF16:
    case MJ_QUANT_FP16: out->data_bytes = n * 2; break;
    case MJ_QUANT_FP8_TENSOR: out->data_bytes = n; out->scale_bytes = sizeof(float) * (size_t)E; break;
    case MJ_QUANT_FP8_BLOCK:
        out->data_bytes = n;
        out->scale_bytes = sizeof(float) * (size_t)(E * (N / FP8_BLOCK) * (K / FP8_BLOCK));
        break;
    case MJ_QUANT_W4A16:
        out->data_bytes = (size_t)(E * N) * mj_qref_nibble_row_bytes(K);
        out->scale_bytes = 2 * (size_t)(E * N * (K / f->group));
        if (f->zero_point)
            out->zero_bytes = (size_t)(E * N) * mj_qref_nibble_row_bytes(K / f->group);
        break;
    default: /* mxfp4 */
        out->data_bytes = (size_t)(E * N) * mj_qref_nibble_row_bytes(K);
        out->scale_bytes = (size_t)(E * N * (K / MX_BLOCK));
        break;
    }
    out->deq = malloc(sizeof(float) * (n ? n : 1));
    out->data = malloc(out->data_bytes ? out->data_bytes : 1);
    out->scale = out->scale_bytes ? malloc(out->scale_bytes) : NULL;
    out->zero = out->zero_bytes ? malloc(out->zero_bytes) : NULL;
    uint8_t *codes = four_bit ? malloc(n ? n : 1) : NULL;
    uint8_t *zcodes = f->quant == MJ_QUANT_W4A16 && f->zero_point ? malloc((size_t)(E * N * (K / f->group)) + 1) : NULL;
    if (!out->deq || !out->data || (out->scale_bytes && !out->scale) || (out->zero_bytes && !out->zero) ||
        (four_bit && !codes) || (f->quant == MJ_QUANT_W4A16 && f->zero_point && !zcodes)) {
        free(codes);
        free(zcodes);
        mj_qref_weights_free(out);
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "quant_ref: out of host memory");
    }
    switch (f->quant) {
    case MJ_QUANT_BF16:
    case MJ_QUANT_FP16: {
        mj_dtype dt = f->quant == MJ_QUANT_FP16 ? MJ_DTYPE_FP16 : MJ_DTYPE_BF16;
        mj_half_pack(src, n, dt, out->data);
        mj_half_unpack(out->data, n, dt, out->deq);
        break;
    }
    case MJ_QUANT_FP8_TENSOR: quantize_fp8_tensor(src, E, N, K, out); break;
    case MJ_QUANT_FP8_BLOCK: quantize_fp8_block(src, E, N, K, out); break;
    case MJ_QUANT_W4A16:
        quantize_w4a16(f, src, E, N, K, out, codes, zcodes);
        mj_qref_pack_nibbles(codes, E * N, K, out->data);
        if (f->zero_point)
            mj_qref_pack_nibbles(zcodes, E * N, K / f->group, out->zero);
        break;
    default:
        quantize_mxfp4(src, E, N, K, out, codes);
        mj_qref_pack_nibbles(codes, E * N, K, out->data);
        break;
    }
    free(codes);
    free(zcodes);
    return MOEJIT_OK;
}

/* ---- the independent decoder --------------------------------------------------------------------- */

static float f32_at(const unsigned char *p, size_t i)
{
    float v;
    memcpy(&v, p + 4 * i, sizeof v);
    return v;
}

static uint16_t u16_at(const unsigned char *p, size_t i)
{
    uint16_t v;
    memcpy(&v, p + 2 * i, sizeof v);
    return v;
}

moejit_status mj_qref_decode(const mj_qref_format *f, const mj_qref_weights *w, float *out)
{
    int64_t E = w->experts, N = w->rows, K = w->cols;
    moejit_status st = mj_qref_check_shape(f, N, K, "quant_ref.decode");
    if (st)
        return st;
    for (int64_t e = 0; e < E; e++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < K; k++) {
                size_t i = (size_t)((e * N + n) * K + k);
                double v;
                switch (f->quant) {
                case MJ_QUANT_BF16: v = mj_half_bf16_to_float(u16_at(w->data, i)); break;
                case MJ_QUANT_FP16: v = mj_half_fp16_to_float(u16_at(w->data, i)); break;
                case MJ_QUANT_FP8_TENSOR:
                    v = (double)mj_half_e4m3_to_float(w->data[i]) * f32_at(w->scale, (size_t)e);
                    break;
                case MJ_QUANT_FP8_BLOCK: {
                    size_t si = (size_t)((e * (N / FP8_BLOCK) + n / FP8_BLOCK) * (K / FP8_BLOCK) + k / FP8_BLOCK);
                    v = (double)mj_half_e4m3_to_float(w->data[i]) * f32_at(w->scale, si);
                    break;
                }
                case MJ_QUANT_W4A16: {
                    int64_t ng = K / f->group, row = e * N + n;
                    unsigned q = mj_qref_nibble(w->data, K, row, k);
                    unsigned zp = f->zero_point ? mj_qref_nibble(w->zero, ng, row, k / f->group) : 8u;
                    uint16_t sh = u16_at(w->scale, (size_t)(row * ng + k / f->group));
                    double sc = f->dtype == MJ_DTYPE_FP16 ? mj_half_fp16_to_float(sh) : mj_half_bf16_to_float(sh);
                    v = ((double)q - (double)zp) * sc;
                    break;
                }
                case MJ_QUANT_MXFP4: {
                    int64_t row = e * N + n;
                    v = mj_qref_e2m1_to_double(mj_qref_nibble(w->data, K, row, k)) *
                        mj_qref_e8m0_to_double(w->scale[row * (K / MX_BLOCK) + k / MX_BLOCK]);
                    break;
                }
                default:
                    return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "quant_ref.decode: unknown quant %d", (int)f->quant);
                }
                out[i] = (float)v;
            }
    return MOEJIT_OK;
}

void mj_qref_weights_free(mj_qref_weights *w)
{
    free(w->deq);
    free(w->data);
    free(w->scale);
    free(w->zero);
    memset(w, 0, sizeof *w);
}

/* ---- fp8 activations ------------------------------------------------------------------------------- */

/* One group of n values at stride 1: power-of-two scale, values on its e4m3 grid, the
 * largest exactly ±448 · scale. */
static void snap_group(float *v, int64_t n)
{
    int64_t imax = 0;
    double amax = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (fabs((double)v[i]) > amax) {
            amax = fabs((double)v[i]);
            imax = i;
        }
    if (amax == 0.0)
        return;
    double s = ldexp(1.0, (int)ceil(log2(amax / MJ_E4M3_MAX)));
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(mj_half_e4m3_round((double)v[i] / s) * s);
    v[imax] = (float)(copysign(MJ_E4M3_MAX, (double)v[imax]) * s);
}

void mj_qref_fp8_snap_input(float *x, int64_t T, int64_t H, mj_ref_act_quant mode)
{
    switch (mode) {
    case MJ_REF_AQ_FP8_TENSOR: snap_group(x, T * H); break;
    case MJ_REF_AQ_FP8_TOKEN:
        for (int64_t t = 0; t < T; t++)
            snap_group(x + t * H, H);
        break;
    case MJ_REF_AQ_FP8_BLOCK:
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h += MJ_REF_FP8_BLOCK)
                snap_group(x + t * H + h, H - h < MJ_REF_FP8_BLOCK ? H - h : MJ_REF_FP8_BLOCK);
        break;
    default: break;
    }
}

void mj_qref_fp8_encode(const float *x, size_t n, double scale, uint8_t *q)
{
    for (size_t i = 0; i < n; i++)
        q[i] = mj_half_e4m3_from_double((double)x[i] / scale);
}
