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
#define ALL_ROUTINGS (MJ_BIT(MJ_ROUTING_COUNT) - 1u)
#define ALL_LAYOUTS (MJ_BIT(MJ_W1_UP_GATE) | MJ_BIT(MJ_W1_GATE_UP) | MJ_BIT(MJ_W1_INTERLEAVED))
#define ALL_BIASES (MJ_BIT(MJ_BIAS_NONE) | MJ_BIT(MJ_BIAS_B1) | MJ_BIT(MJ_BIAS_B2) | MJ_BIT(MJ_BIAS_BOTH))
#define ALL_OVERRIDES (MJ_BIT(MJ_OVERRIDES_NONE) | MJ_BIT(MJ_OVERRIDES_PER_EXPERT))
#define TC_QUANTS (MJ_BIT(MJ_QUANT_BF16) | MJ_BIT(MJ_QUANT_FP16))
/* 4-bit weights on the tensor-core backends: built and checked on the CPU (NVRTC, SASS, the
 * dequantization against the contract's decoding), not yet run on a device. */
#define TC_W4_QUANTS (MJ_BIT(MJ_QUANT_W4A16) | MJ_BIT(MJ_QUANT_MXFP4))
#define TC_DTYPES (MJ_BIT(MJ_DTYPE_BF16) | MJ_BIT(MJ_DTYPE_FP16))

/* simt builds every value of the contract, each validated by the GPU suite (tests/gpu). */
#define SIMT_MASKS                                                                                      \
    {                                                                                                   \
        .quants = MJ_BIT(MJ_QUANT_BF16) | MJ_BIT(MJ_QUANT_FP16) | MJ_BIT(MJ_QUANT_FP8_TENSOR) |         \
                  MJ_BIT(MJ_QUANT_FP8_BLOCK) | MJ_BIT(MJ_QUANT_W4A16) | MJ_BIT(MJ_QUANT_MXFP4),         \
        .dtypes = TC_DTYPES, .acts = ALL_ACTS, .archs = ALL_ARCHS, .routings = ALL_ROUTINGS,            \
        .w1_layouts = ALL_LAYOUTS, .biases = ALL_BIASES,                                                \
        .logits_dtypes = MJ_BIT(MJ_DTYPE_FP32) | MJ_BIT(MJ_DTYPE_BF16), .act_overrides = ALL_OVERRIDES,  \
    }

/* The tensor-core backends build every routing method from fp32 or bf16 logits (route.cuh
 * serves all their routing paths); validated are the values their device checks have passed
 * (H200, `bench layer --check --routing all`: the float64 reference on every decode and
 * prefill path, reruns bit-identical; docs/PERFORMANCE.md, "Validation"). */
#define TC_MASKS(quants_, archs_, routings_, logits_, layouts_, biases_, overrides_)                      \
    {                                                                                                   \
        .quants = (quants_), .dtypes = TC_DTYPES, .acts = ALL_ACTS, .archs = (archs_),                  \
        .routings = (routings_), .w1_layouts = (layouts_), .biases = (biases_),                         \
        .logits_dtypes = (logits_), .act_overrides = (overrides_),                                      \
    }
#define TC_BUILT_ROUTINGS ALL_ROUTINGS
#define TC_BUILT_LOGITS (MJ_BIT(MJ_DTYPE_FP32) | MJ_BIT(MJ_DTYPE_BF16))
#define TC_VALIDATED_ROUTINGS TC_BUILT_ROUTINGS
#define TC_VALIDATED_LOGITS TC_BUILT_LOGITS
/* W1 layouts, biases and overrides enter the GEMM epilogues (templates/weight_layout.cuh);
 * validated by `bench layer --check --extras` (H200: every decode and prefill path against the
 * float64 reference, each family's negative control caught; docs/PERFORMANCE.md) */
#define TC_BUILT_LAYOUTS ALL_LAYOUTS
#define TC_BUILT_BIASES ALL_BIASES
#define TC_BUILT_OVERRIDES ALL_OVERRIDES
#define TC_VALIDATED_LAYOUTS TC_BUILT_LAYOUTS
#define TC_VALIDATED_BIASES TC_BUILT_BIASES
#define TC_VALIDATED_OVERRIDES TC_BUILT_OVERRIDES
#define TC_BUILT(quants_, archs_)                                                                       \
    TC_MASKS(quants_, archs_, TC_BUILT_ROUTINGS, TC_BUILT_LOGITS, TC_BUILT_LAYOUTS, TC_BUILT_BIASES,     \
             TC_BUILT_OVERRIDES)
#define TC_VALIDATED(quants_, archs_)                                                                   \
    TC_MASKS(quants_, archs_, TC_VALIDATED_ROUTINGS, TC_VALIDATED_LOGITS, TC_VALIDATED_LAYOUTS,         \
             TC_VALIDATED_BIASES, TC_VALIDATED_OVERRIDES)
/* wgmma's fp8 GEMMs (templates/wgmma_fp8.cuh). They take up_gate without biases or overrides
 * (fp8_rules below). */
#define WGMMA_BUILT_QUANTS (TC_QUANTS | MJ_BIT(MJ_QUANT_FP8_TENSOR) | MJ_BIT(MJ_QUANT_FP8_BLOCK))
/* Validated on the H200 (`bench layer --check --quant`, every path against the float64
 * reference, docs/PERFORMANCE.md): w4a16 and mxfp4 on both backends, with every W1 layout,
 * bias and override too (the GPU suite's fuzz and gpt-oss's exact layer), fp8_tensor (every
 * fp8_act) and fp8_block on wgmma. */
#define TC_VALIDATED_W4 TC_W4_QUANTS
#define WGMMA_VALIDATED_QUANTS (WGMMA_BUILT_QUANTS | TC_VALIDATED_W4)

const mj_backend_caps mj_backend_table[] = {
    {
        .backend = MJ_BACKEND_SIMT,
        .summary = "portable CUDA cores, sm_80+",
        .built = SIMT_MASKS,
        .validated = SIMT_MASKS,
    },
    {
        .backend = MJ_BACKEND_MMA,
        .summary = "warp-level tensor cores (mma.sync, ldmatrix, cp.async), sm_80+",
        .built = TC_BUILT(TC_QUANTS | TC_W4_QUANTS, ALL_ARCHS),
        .validated = TC_VALIDATED(TC_QUANTS | TC_VALIDATED_W4, ALL_ARCHS),
    },
    {
        /* Registered after its first device check (H200, every activation against the float64
         * reference, four model shapes against simt, bit-identical reruns). */
        .backend = MJ_BACKEND_WGMMA,
        .summary = "warpgroup MMA (wgmma, TMA and cp.async on mbarriers, warp-specialized, "
                   "persistent) for prefill, mma's kernels for decode; sm_90a only",
        .built = TC_BUILT(WGMMA_BUILT_QUANTS | TC_W4_QUANTS, MJ_BIT(MJ_ARCH_SM90A)),
        .validated = TC_VALIDATED(WGMMA_VALIDATED_QUANTS, MJ_BIT(MJ_ARCH_SM90A)),
    },
};
const size_t mj_backend_table_len = sizeof mj_backend_table / sizeof mj_backend_table[0];
const mj_caps_table mj_caps = {mj_backend_table, sizeof mj_backend_table / sizeof mj_backend_table[0]};

static const mj_backend_caps *row_of(const mj_caps_table *t, mj_backend backend)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->rows[i].backend == backend) return &t->rows[i];
    return NULL;
}

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
static const char *overrides_name(int i) { return i < MJ_OVERRIDES_COUNT ? mj_act_overrides_names[i] : NULL; }
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
static int overrides_of(const moejit_spec *s) { return (int)s->act_overrides; }

typedef struct cap_field {
    const char *key;                   /* the spec field ("quant") */
    const char *plural;                /* in messages: "supported quants: ..." */
    const char *column;                /* table column header ("quantizations"); NULL: not in markdown */
    const char *json;                  /* key in the JSON matrix */
    size_t offset;                     /* of the mask in mj_cap_masks */
    const char *(*name)(int bit);      /* NULL for a bit that names nothing */
    int (*value)(const moejit_spec *); /* the spec's value, a bit index */
} cap_field;

/* In check order: the first unsupported field is the one reported. */
static const cap_field cap_fields[] = {
    {"quant", "quants", "quantizations", "quants", offsetof(mj_cap_masks, quants), quant_name,
     quant_of},
    {"dtype", "dtypes", "dtypes", "dtypes", offsetof(mj_cap_masks, dtypes), dtype_name, dtype_of},
    {"act", "activations", "activations", "acts", offsetof(mj_cap_masks, acts), act_name, act_of},
    {"arch", "archs", "archs", "archs", offsetof(mj_cap_masks, archs), arch_name, arch_of},
    {"routing", "routings", "routing", "routings", offsetof(mj_cap_masks, routings), routing_name,
     routing_of},
    {"logits", "logits dtypes", "logits", "logits_dtypes", offsetof(mj_cap_masks, logits_dtypes),
     dtype_name, logits_of},
    {"w1_layout", "W1 layouts", "W1 layouts", "w1_layouts", offsetof(mj_cap_masks, w1_layouts),
     w1_name, w1_of},
    {"bias", "biases", "biases", "biases", offsetof(mj_cap_masks, biases), bias_name, bias_of},
    {"act_overrides", "act overrides", "act overrides", "act_overrides", offsetof(mj_cap_masks, act_overrides),
     overrides_name, overrides_of},
};
#define N_FIELDS (sizeof cap_fields / sizeof cap_fields[0])

static uint32_t mask_of(const mj_cap_masks *m, const cap_field *f)
{
    uint32_t v;
    memcpy(&v, (const char *)m + f->offset, sizeof v);
    return v;
}

/* The names of the set bits of mask, in enum order, joined by sep; each bit outside `marked`
 * (all bits: pass mask) is followed by mark. */
static void mask_names(mj_buf *b, const cap_field *f, uint32_t mask, uint32_t marked, const char *mark,
                       const char *sep)
{
    int first = 1;
    for (int i = 0; i < 32; i++) {
        const char *n = (mask & MJ_BIT(i)) ? f->name(i) : NULL;
        if (!n) continue;
        mj_buf_printf(b, "%s%s%s", first ? "" : sep, n, (marked & MJ_BIT(i)) ? "" : mark);
        first = 0;
    }
}

/* Whether some backend builds a value it has not validated. */
static int any_unvalidated(const mj_caps_table *t)
{
    for (size_t r = 0; r < t->n; r++)
        for (size_t i = 0; i < N_FIELDS; i++)
            if (mask_of(&t->rows[r].built, &cap_fields[i]) & ~mask_of(&t->rows[r].validated, &cap_fields[i]))
                return 1;
    return 0;
}

#define LEGEND "built, not yet validated on hardware"

/* ---- the check ----------------------------------------------------------------------------------- */

/* Products the per-field masks cannot express: wgmma's fp8 layers take W1 in up_gate without
 * biases or overrides (their epilogues, templates/wgmma_fp8.cuh, know none of them); the 4-bit
 * layers store through the 16-bit GEMMs' epilogues (templates/mma_w4_gemm.cuh) and take them
 * all. */
moejit_status mj_check_combinations(const moejit_spec *s)
{
    const int fp8 = s->quant == MJ_QUANT_FP8_TENSOR || s->quant == MJ_QUANT_FP8_BLOCK;
    if (s->backend == MJ_BACKEND_SIMT || !fp8) return MOEJIT_OK;
    const char *field = s->w1_layout != MJ_W1_UP_GATE       ? "w1_layout"
                        : s->bias != MJ_BIAS_NONE            ? "bias"
                        : s->act_overrides != MJ_OVERRIDES_NONE ? "act_overrides"
                                                             : NULL;
    if (!field) return MOEJIT_OK;
    const char *value = s->w1_layout != MJ_W1_UP_GATE ? w1_name((int)s->w1_layout)
                        : s->bias != MJ_BIAS_NONE      ? bias_name((int)s->bias)
                                                       : overrides_name((int)s->act_overrides);
    return mj_fail(MOEJIT_ERR_UNSUPPORTED,
                   "backend %s does not support %s %s with quant %s; its fp8 layers take w1_layout=up_gate, "
                   "bias=none, act_overrides=none",
                   mj_backend_names[s->backend], field, value ? value : "?", mj_quant_names[s->quant]);
}

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
        const uint32_t built = mask_of(&c->built, f);
        if (v >= 0 && v < 32 && (built & MJ_BIT(v))) continue;
        const char *name = v >= 0 && v < 32 ? f->name(v) : NULL;
        mj_buf b = MJ_BUF_INIT;
        mask_names(&b, f, built, built, "", ", ");
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
    return mj_check_combinations(spec);
}

moejit_status moejit_check_support(const moejit_spec *spec) { return mj_check_support(spec); }

moejit_status mj_check_validated(const moejit_spec *spec, int allow_unvalidated)
{
    return mj_check_validated_in(&mj_caps, spec, allow_unvalidated);
}

moejit_status mj_check_validated_in(const mj_caps_table *t, const moejit_spec *spec, int allow_unvalidated)
{
    if (!spec) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "spec: spec is NULL");
    const mj_backend_caps *c = row_of(t, spec->backend);
    if (allow_unvalidated || !c) return MOEJIT_OK;
    for (size_t i = 0; i < N_FIELDS; i++) {
        const cap_field *f = &cap_fields[i];
        const int v = f->value(spec);
        if (v < 0 || v >= 32) continue;
        if (!(mask_of(&c->built, f) & MJ_BIT(v)) || (mask_of(&c->validated, f) & MJ_BIT(v))) continue;
        const char *name = f->name(v);
        return mj_fail(MOEJIT_ERR_UNSUPPORTED,
                       "backend %s: %s %s is built, not yet validated on hardware; set "
                       "MOEJIT_ALLOW_UNVALIDATED=1 (or moejit_options.allow_unvalidated) to use it",
                       mj_backend_names[c->backend], f->key, name ? name : "?");
    }
    return MOEJIT_OK;
}

/* ---- printers -------------------------------------------------------------------------------- */

/* Cell (row r, column col) of the human and markdown tables; col 0 is the backend. Values
 * built but not validated carry mark. */
static void cell(mj_buf *b, const mj_backend_caps *c, size_t col, const char *mark)
{
    if (col == 0) {
        mj_buf_puts(b, mj_backend_names[c->backend]);
        return;
    }
    const cap_field *f = &cap_fields[col - 1];
    mask_names(b, f, mask_of(&c->built, f), mask_of(&c->validated, f), mark, ", ");
}

static const char *header(size_t col)
{
    if (col == 0) return "backend";
    const cap_field *f = &cap_fields[col - 1];
    return f->column ? f->column : f->key;
}

static void format_markdown(const mj_caps_table *t, mj_buf *b)
{
    mj_buf_puts(b, "|");
    for (size_t col = 0; col <= N_FIELDS; col++)
        if (col == 0 || cap_fields[col - 1].column) mj_buf_printf(b, " %s |", header(col));
    mj_buf_puts(b, "\n|");
    for (size_t col = 0; col <= N_FIELDS; col++)
        if (col == 0 || cap_fields[col - 1].column) mj_buf_puts(b, "---|");
    mj_buf_puts(b, "\n");
    for (size_t r = 0; r < t->n; r++) {
        mj_buf_puts(b, "|");
        for (size_t col = 0; col <= N_FIELDS; col++) {
            if (col != 0 && !cap_fields[col - 1].column) continue;
            mj_buf_puts(b, " ");
            cell(b, &t->rows[r], col, "\\*"); /* escaped: a bare '*' may open emphasis */
            mj_buf_puts(b, " |");
        }
        mj_buf_puts(b, "\n");
    }
    if (any_unvalidated(t)) mj_buf_puts(b, "\n\\* " LEGEND "\n");
}

/* Every column (logits too), padded to its widest cell; then one line per backend summary. */
static void format_text(const mj_caps_table *t, mj_buf *b)
{
    size_t width[N_FIELDS + 1];
    mj_buf tmp = MJ_BUF_INIT;
    for (size_t col = 0; col <= N_FIELDS; col++) {
        width[col] = strlen(header(col));
        for (size_t r = 0; r < t->n; r++) {
            mj_buf_reset(&tmp);
            cell(&tmp, &t->rows[r], col, "*");
            if (tmp.len > width[col]) width[col] = tmp.len;
        }
    }
    for (size_t r = 0; r <= t->n + 1; r++) {
        for (size_t col = 0; col <= N_FIELDS; col++) {
            mj_buf_reset(&tmp);
            if (r == 0)
                mj_buf_puts(&tmp, header(col));
            else if (r == 1)
                for (size_t i = 0; i < width[col]; i++) mj_buf_puts(&tmp, "-");
            else
                cell(&tmp, &t->rows[r - 2], col, "*");
            int last = col == N_FIELDS;
            mj_buf_printf(b, "%s%-*s", col ? "  " : "", last ? 0 : (int)width[col],
                          tmp.data ? tmp.data : "");
        }
        mj_buf_puts(b, "\n");
    }
    if (!mj_buf_ok(&tmp)) b->failed = 1;
    mj_buf_free(&tmp);
    mj_buf_puts(b, "\n");
    for (size_t r = 0; r < t->n; r++)
        mj_buf_printf(b, "%s: %s\n", mj_backend_names[t->rows[r].backend], t->rows[r].summary);
    if (any_unvalidated(t)) mj_buf_puts(b, "\n* " LEGEND "\n");
}

/* ,"KEY":["name",...] of the set bits of mask. */
static void json_list(mj_buf *b, const cap_field *f, uint32_t mask, int first)
{
    mj_buf_printf(b, "%s\"%s\":[", first ? "" : ",", f->json);
    mj_buf tmp = MJ_BUF_INIT;
    mask_names(&tmp, f, mask, mask, "", "\",\"");
    if (tmp.len) mj_buf_printf(b, "\"%s\"", tmp.data);
    if (!mj_buf_ok(&tmp)) b->failed = 1;
    mj_buf_free(&tmp);
    mj_buf_puts(b, "]");
}

/* Each field lists what the backend builds; "unvalidated" lists, per field, those of them not
 * yet validated on hardware. */
static void format_json(const mj_caps_table *t, mj_buf *b)
{
    /* Every name is [a-z0-9_], so no escaping is needed. */
    mj_buf_puts(b, "{\"backends\":[");
    for (size_t r = 0; r < t->n; r++) {
        const mj_backend_caps *c = &t->rows[r];
        mj_buf_printf(b, "%s{\"name\":\"%s\",\"summary\":\"%s\",", r ? "," : "",
                      mj_backend_names[c->backend], c->summary);
        for (size_t i = 0; i < N_FIELDS; i++) json_list(b, &cap_fields[i], mask_of(&c->built, &cap_fields[i]), i == 0);
        mj_buf_puts(b, ",\"unvalidated\":{");
        for (size_t i = 0; i < N_FIELDS; i++)
            json_list(b, &cap_fields[i],
                      mask_of(&c->built, &cap_fields[i]) & ~mask_of(&c->validated, &cap_fields[i]), i == 0);
        mj_buf_puts(b, "}}");
    }
    mj_buf_puts(b, "],\"legend\":{\"unvalidated\":\"" LEGEND "\"}}\n");
}

moejit_status mj_matrix_format(const char *format, mj_buf *b) { return mj_matrix_format_in(&mj_caps, format, b); }

moejit_status mj_matrix_format_in(const mj_caps_table *t, const char *format, mj_buf *b)
{
    if (!format || strcmp(format, "text") == 0)
        format_text(t, b);
    else if (strcmp(format, "markdown") == 0)
        format_markdown(t, b);
    else if (strcmp(format, "json") == 0)
        format_json(t, b);
    else
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "format: unknown value '%s'; allowed: text, markdown, json", format);
    if (!mj_buf_ok(b)) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "matrix: out of memory");
    return MOEJIT_OK;
}
