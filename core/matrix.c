/*
 * This file contains the capability matrix: one row of bit masks per backend, the support
 * check every spec passes before code generation, and the printers behind `moejit matrix`
 * and the README's support table.
 *
 * Everything below the table is generic over the masks (the field table `cap_fields`), so a
 * later backend or format is one new row or one new bit, never new checking code.
 */
#include "core/matrix.h"

#include <stddef.h>
#include <string.h>

#include "core/status.h"

#define ALL_ACTS                                                                                    \
    (MJ_BIT(MOEJIT_ACT_GELU) | MJ_BIT(MOEJIT_ACT_RELU) | MJ_BIT(MOEJIT_ACT_SILU) |                  \
     MJ_BIT(MOEJIT_ACT_SWIGLU) | MJ_BIT(MOEJIT_ACT_GEGLU) | MJ_BIT(MOEJIT_ACT_RELU2) |              \
     MJ_BIT(MOEJIT_ACT_SWIGLU_STEP) | MJ_BIT(MOEJIT_ACT_GEGLU_TANH) | MJ_BIT(MOEJIT_ACT_IDENTITY) | \
     MJ_BIT(MOEJIT_ACT_SITU))
#define ALL_ARCHS (MJ_BIT(MJ_ARCH_COUNT) - 1u)

const mj_backend_caps mj_backend_table[] = {
    {
        .backend = MJ_BACKEND_SIMT,
        .summary = "portable CUDA cores, sm_80+",
        .quants = MJ_BIT(MJ_QUANT_BF16) | MJ_BIT(MJ_QUANT_FP16) | MJ_BIT(MJ_QUANT_FP8_TENSOR) |
                  MJ_BIT(MJ_QUANT_FP8_BLOCK) | MJ_BIT(MJ_QUANT_W4A16) | MJ_BIT(MJ_QUANT_MXFP4),
        .dtypes = MJ_BIT(MJ_DTYPE_BF16) | MJ_BIT(MJ_DTYPE_FP16),
        .acts = ALL_ACTS,
        .archs = ALL_ARCHS,
        .routings = MJ_BIT(MJ_ROUTING_SOFTMAX_TOPK) | MJ_BIT(MJ_ROUTING_RENORMALIZE) |
                    MJ_BIT(MJ_ROUTING_SIGMOID_TOPK) | MJ_BIT(MJ_ROUTING_SIGMOID_RENORM) |
                    MJ_BIT(MJ_ROUTING_DEEPSEEK_V3) | MJ_BIT(MJ_ROUTING_LLAMA4) |
                    MJ_BIT(MJ_ROUTING_PRECOMPUTED),
        .w1_layouts = MJ_BIT(MJ_W1_UP_GATE) | MJ_BIT(MJ_W1_GATE_UP) | MJ_BIT(MJ_W1_INTERLEAVED),
        .biases = MJ_BIT(MJ_BIAS_NONE) | MJ_BIT(MJ_BIAS_B1) | MJ_BIT(MJ_BIAS_B2) | MJ_BIT(MJ_BIAS_BOTH),
        .logits_dtypes = MJ_BIT(MJ_DTYPE_FP32) | MJ_BIT(MJ_DTYPE_BF16),
    },
    {
        .backend = MJ_BACKEND_MMA,
        .summary = "warp-level tensor cores (mma.sync, ldmatrix, cp.async), sm_80+",
        .quants = MJ_BIT(MJ_QUANT_BF16) | MJ_BIT(MJ_QUANT_FP16),
        .dtypes = MJ_BIT(MJ_DTYPE_BF16) | MJ_BIT(MJ_DTYPE_FP16),
        .acts = ALL_ACTS,
        .archs = ALL_ARCHS,
        .routings = MJ_BIT(MJ_ROUTING_SOFTMAX_TOPK) | MJ_BIT(MJ_ROUTING_RENORMALIZE) |
                    MJ_BIT(MJ_ROUTING_PRECOMPUTED),
        .w1_layouts = MJ_BIT(MJ_W1_UP_GATE),
        .biases = MJ_BIT(MJ_BIAS_NONE),
        .logits_dtypes = MJ_BIT(MJ_DTYPE_FP32),
    },
    {
        /* Registered after its first device check (H200, every activation against the float64
         * reference, four model shapes against simt, bit-identical reruns). */
        .backend = MJ_BACKEND_WGMMA,
        .summary = "warpgroup MMA (wgmma, TMA and cp.async on mbarriers, warp-specialized, "
                   "persistent) for prefill, mma's kernels for decode; sm_90a only",
        .quants = MJ_BIT(MJ_QUANT_BF16) | MJ_BIT(MJ_QUANT_FP16),
        .dtypes = MJ_BIT(MJ_DTYPE_BF16) | MJ_BIT(MJ_DTYPE_FP16),
        .acts = ALL_ACTS,
        .archs = MJ_BIT(MJ_ARCH_SM90A),
        .routings = MJ_BIT(MJ_ROUTING_SOFTMAX_TOPK) | MJ_BIT(MJ_ROUTING_RENORMALIZE) |
                    MJ_BIT(MJ_ROUTING_PRECOMPUTED),
        .w1_layouts = MJ_BIT(MJ_W1_UP_GATE),
        .biases = MJ_BIT(MJ_BIAS_NONE),
        .logits_dtypes = MJ_BIT(MJ_DTYPE_FP32),
    },
};
const size_t mj_backend_table_len = sizeof mj_backend_table / sizeof mj_backend_table[0];

const mj_backend_caps *mj_backend_caps_of(mj_backend backend)
{
    for (size_t i = 0; i < mj_backend_table_len; i++)
        if (mj_backend_table[i].backend == backend) return &mj_backend_table[i];
    return NULL;
}

/* ---- the fields, generically ---------------------------------------------------------------- */

static const char *quant_name(int i) { return i < MJ_QUANT_COUNT ? mj_quant_names[i] : NULL; }
static const char *dtype_name(int i) { return i < MJ_DTYPE_COUNT ? mj_dtype_names[i] : NULL; }
static const char *arch_name(int i) { return i < MJ_ARCH_COUNT ? mj_arch_names[i] : NULL; }
static const char *routing_name(int i) { return i < MJ_ROUTING_COUNT ? mj_routing_names[i] : NULL; }
static const char *w1_name(int i) { return i < MJ_W1_LAYOUT_COUNT ? mj_w1_layout_names[i] : NULL; }
static const char *bias_name(int i) { return i < MJ_BIAS_COUNT ? mj_bias_names[i] : NULL; }
static const char *act_name(int i)
{
    const mj_act_desc *d = mj_act_desc_of((moejit_act_kind)i);
    return d ? d->name : NULL;
}

static int quant_of(const moejit_spec *s) { return (int)s->quant; }
static int dtype_of(const moejit_spec *s) { return (int)s->dtype; }
static int act_of(const moejit_spec *s) { return (int)s->act.kind; }
static int arch_of(const moejit_spec *s) { return (int)s->arch; }
static int routing_of(const moejit_spec *s) { return (int)s->routing; }
static int logits_of(const moejit_spec *s) { return (int)s->logits_dtype; }
static int w1_of(const moejit_spec *s) { return (int)s->w1_layout; }
static int bias_of(const moejit_spec *s) { return (int)s->bias; }

typedef struct cap_field {
    const char *key;                   /* the spec field ("quant") */
    const char *plural;                /* in messages: "supported quants: ..." */
    const char *column;                /* table column header ("quantizations"); NULL: not in markdown */
    const char *json;                  /* key in the JSON matrix */
    size_t offset;                     /* of the mask in mj_backend_caps */
    const char *(*name)(int bit);      /* NULL for a bit that names nothing */
    int (*value)(const moejit_spec *); /* the spec's value, a bit index */
} cap_field;

/* In check order: the first unsupported field is the one reported. */
static const cap_field cap_fields[] = {
    {"quant", "quants", "quantizations", "quants", offsetof(mj_backend_caps, quants), quant_name,
     quant_of},
    {"dtype", "dtypes", "dtypes", "dtypes", offsetof(mj_backend_caps, dtypes), dtype_name, dtype_of},
    {"act", "activations", "activations", "acts", offsetof(mj_backend_caps, acts), act_name, act_of},
    {"arch", "archs", "archs", "archs", offsetof(mj_backend_caps, archs), arch_name, arch_of},
    {"routing", "routings", "routing", "routings", offsetof(mj_backend_caps, routings), routing_name,
     routing_of},
    {"logits", "logits dtypes", NULL, "logits_dtypes", offsetof(mj_backend_caps, logits_dtypes),
     dtype_name, logits_of},
    {"w1_layout", "W1 layouts", "W1 layouts", "w1_layouts", offsetof(mj_backend_caps, w1_layouts),
     w1_name, w1_of},
    {"bias", "biases", "biases", "biases", offsetof(mj_backend_caps, biases), bias_name, bias_of},
};
#define N_FIELDS (sizeof cap_fields / sizeof cap_fields[0])

static uint32_t mask_of(const mj_backend_caps *c, const cap_field *f)
{
    uint32_t m;
    memcpy(&m, (const char *)c + f->offset, sizeof m);
    return m;
}

/* The names of the set bits of mask, in enum order, joined by sep. */
static void mask_names(mj_buf *b, const cap_field *f, uint32_t mask, const char *sep)
{
    int first = 1;
    for (int i = 0; i < 32; i++) {
        const char *n = (mask & MJ_BIT(i)) ? f->name(i) : NULL;
        if (!n) continue;
        mj_buf_printf(b, "%s%s", first ? "" : sep, n);
        first = 0;
    }
}

/* ---- the check ----------------------------------------------------------------------------------- */

moejit_status mj_check_support(const moejit_spec *spec)
{
    if (!spec) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "spec: spec is NULL");
    const char *backend =
        (unsigned)spec->backend < MJ_BACKEND_COUNT ? mj_backend_names[spec->backend] : "?";
    const mj_backend_caps *c = mj_backend_caps_of(spec->backend);
    if (!c) {
        mj_buf b = MJ_BUF_INIT;
        for (size_t i = 0; i < mj_backend_table_len; i++)
            mj_buf_printf(&b, "%s%s", i ? ", " : "", mj_backend_names[mj_backend_table[i].backend]);
        moejit_status st =
            mj_fail(MOEJIT_ERR_UNSUPPORTED, "backend %s: not available; available backends: %s", backend,
                    b.data ? b.data : "");
        mj_buf_free(&b);
        return st;
    }
    const char *arch = mj_arch_target(spec->arch);
    for (size_t i = 0; i < N_FIELDS; i++) {
        const cap_field *f = &cap_fields[i];
        int v = f->value(spec);
        if (v >= 0 && v < 32 && (mask_of(c, f) & MJ_BIT(v))) continue;
        const char *name = v >= 0 && v < 32 ? f->name(v) : NULL;
        mj_buf b = MJ_BUF_INIT;
        mask_names(&b, f, mask_of(c, f), ", ");
        moejit_status st;
        if (f->value == arch_of)
            st = mj_fail(MOEJIT_ERR_UNSUPPORTED,
                         "backend %s does not support arch %s; supported archs: %s", backend,
                         name ? name : "?", b.data ? b.data : "");
        else
            st = mj_fail(MOEJIT_ERR_UNSUPPORTED,
                         "backend %s does not support %s %s on %s; supported %s: %s", backend, f->key,
                         name ? name : "?", arch ? arch : "?", f->plural, b.data ? b.data : "");
        mj_buf_free(&b);
        return st;
    }
    return MOEJIT_OK;
}

moejit_status moejit_check_support(const moejit_spec *spec) { return mj_check_support(spec); }

/* ---- printers -------------------------------------------------------------------------------- */

/* Cell (row r, column col) of the human and markdown tables; col 0 is the backend. */
static void cell(mj_buf *b, size_t r, size_t col)
{
    const mj_backend_caps *c = &mj_backend_table[r];
    if (col == 0) {
        mj_buf_puts(b, mj_backend_names[c->backend]);
        return;
    }
    mask_names(b, &cap_fields[col - 1], mask_of(c, &cap_fields[col - 1]), ", ");
}

static const char *header(size_t col)
{
    if (col == 0) return "backend";
    const cap_field *f = &cap_fields[col - 1];
    return f->column ? f->column : f->key;
}

static void format_markdown(mj_buf *b)
{
    mj_buf_puts(b, "|");
    for (size_t col = 0; col <= N_FIELDS; col++)
        if (col == 0 || cap_fields[col - 1].column) mj_buf_printf(b, " %s |", header(col));
    mj_buf_puts(b, "\n|");
    for (size_t col = 0; col <= N_FIELDS; col++)
        if (col == 0 || cap_fields[col - 1].column) mj_buf_puts(b, "---|");
    mj_buf_puts(b, "\n");
    for (size_t r = 0; r < mj_backend_table_len; r++) {
        mj_buf_puts(b, "|");
        for (size_t col = 0; col <= N_FIELDS; col++) {
            if (col != 0 && !cap_fields[col - 1].column) continue;
            mj_buf_puts(b, " ");
            cell(b, r, col);
            mj_buf_puts(b, " |");
        }
        mj_buf_puts(b, "\n");
    }
}

/* Every column (logits too), padded to its widest cell; then one line per backend summary. */
static void format_text(mj_buf *b)
{
    size_t width[N_FIELDS + 1];
    mj_buf tmp = MJ_BUF_INIT;
    for (size_t col = 0; col <= N_FIELDS; col++) {
        width[col] = strlen(header(col));
        for (size_t r = 0; r < mj_backend_table_len; r++) {
            mj_buf_reset(&tmp);
            cell(&tmp, r, col);
            if (tmp.len > width[col]) width[col] = tmp.len;
        }
    }
    for (size_t r = 0; r <= mj_backend_table_len + 1; r++) {
        for (size_t col = 0; col <= N_FIELDS; col++) {
            mj_buf_reset(&tmp);
            if (r == 0)
                mj_buf_puts(&tmp, header(col));
            else if (r == 1)
                for (size_t i = 0; i < width[col]; i++) mj_buf_puts(&tmp, "-");
            else
                cell(&tmp, r - 2, col);
            int last = col == N_FIELDS;
            mj_buf_printf(b, "%s%-*s", col ? "  " : "", last ? 0 : (int)width[col],
                          tmp.data ? tmp.data : "");
        }
        mj_buf_puts(b, "\n");
    }
    if (!mj_buf_ok(&tmp)) b->failed = 1;
    mj_buf_free(&tmp);
    mj_buf_puts(b, "\n");
    for (size_t r = 0; r < mj_backend_table_len; r++)
        mj_buf_printf(b, "%s: %s\n", mj_backend_names[mj_backend_table[r].backend],
                      mj_backend_table[r].summary);
}

static void format_json(mj_buf *b)
{
    /* Every name is [a-z0-9_], so no escaping is needed. */
    mj_buf_puts(b, "{\"backends\":[");
    for (size_t r = 0; r < mj_backend_table_len; r++) {
        const mj_backend_caps *c = &mj_backend_table[r];
        mj_buf_printf(b, "%s{\"name\":\"%s\",\"summary\":\"%s\"", r ? "," : "",
                      mj_backend_names[c->backend], c->summary);
        for (size_t i = 0; i < N_FIELDS; i++) {
            const cap_field *f = &cap_fields[i];
            mj_buf_printf(b, ",\"%s\":[", f->json);
            mj_buf tmp = MJ_BUF_INIT;
            mask_names(&tmp, f, mask_of(c, f), "\",\"");
            if (tmp.len) mj_buf_printf(b, "\"%s\"", tmp.data);
            if (!mj_buf_ok(&tmp)) b->failed = 1;
            mj_buf_free(&tmp);
            mj_buf_puts(b, "]");
        }
        mj_buf_puts(b, "}");
    }
    mj_buf_puts(b, "]}\n");
}

moejit_status mj_matrix_format(const char *format, mj_buf *b)
{
    if (!format || strcmp(format, "text") == 0)
        format_text(b);
    else if (strcmp(format, "markdown") == 0)
        format_markdown(b);
    else if (strcmp(format, "json") == 0)
        format_json(b);
    else
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "format: unknown value '%s'; allowed: text, markdown, json", format);
    if (!mj_buf_ok(b)) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "matrix: out of memory");
    return MOEJIT_OK;
}
