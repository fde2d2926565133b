/*
 * This file contains the spec: the name tables of its enumerated fields, the text and JSON
 * readers, the validity rules, the canonical form (arch=native and backend=auto are resolved by the caller).
 *
 * Both readers only collect "key -> raw value" pairs; one builder interprets them, applies
 * the defaults and the validity rules, so the two forms cannot drift apart. The canonical
 * text (every field, fixed order, floats as exact hex) is what identifies a kernel; it is
 * computed once at creation, since a spec is immutable.
 *
 * Validity here means "a meaningful spec" (dtype matches quant, shapes are multiples of 8);
 * whether a backend can build it is the capability matrix's question (matrix.c).
 */
#include "core/spec.h"

#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/status.h"
#include "core/strbuf.h"

const char *const mj_backend_names[MJ_BACKEND_COUNT] = {"simt", "mma", "wgmma"};
const char *const mj_quant_names[MJ_QUANT_COUNT] = {"bf16",      "fp16",  "fp8_tensor",
                                                    "fp8_block", "w4a16", "mxfp4"};
const char *const mj_dtype_names[MJ_DTYPE_COUNT] = {"bf16", "fp16", "fp32"};
const char *const mj_arch_names[MJ_ARCH_COUNT] = {"sm_80",  "sm_86",   "sm_89",
                                                  "sm_90a", "sm_100a", "sm_120a"};
const char *const mj_routing_names[MJ_ROUTING_COUNT] = {"softmax_topk",   "renormalize", "sigmoid_topk",
                                                        "sigmoid_renorm", "deepseek_v3", "llama4",
                                                        "precomputed"};
const char *const mj_w1_layout_names[MJ_W1_LAYOUT_COUNT] = {"up_gate", "gate_up", "interleaved"};
const char *const mj_bias_names[MJ_BIAS_COUNT] = {"none", "b1", "b2", "both"};
const char *const mj_act_overrides_names[MJ_OVERRIDES_COUNT] = {"none", "per_expert"};
const char *const mj_fp8_act_names[MJ_FP8_ACT_COUNT] = {"tensor", "token", "static"};

/* Compute capability of each arch, in mj_arch order. */
static const int arch_cc[MJ_ARCH_COUNT][2] = {{8, 0}, {8, 6}, {8, 9}, {9, 0}, {10, 0}, {12, 0}};

/* Contract limits (docs/SEMANTICS.md §1): production kernels route at most 32 of 512. */
#define MAX_EXPERTS 512
#define MAX_TOPK 32

const char *mj_arch_target(mj_arch arch)
{
    /* NOTE: moejit's arch names are NVRTC's spellings (the "a" suffix enables wgmma/tcgen05). */
    return (unsigned)arch < MJ_ARCH_COUNT ? mj_arch_names[arch] : NULL;
}

moejit_status mj_arch_from_cc(int major, int minor, mj_arch *out)
{
    for (int a = 0; a < MJ_ARCH_COUNT; a++) {
        if (arch_cc[a][0] == major && arch_cc[a][1] == minor) {
            *out = (mj_arch)a;
            return MOEJIT_OK;
        }
    }
    mj_buf b = MJ_BUF_INIT;
    for (int a = 0; a < MJ_ARCH_COUNT; a++)
        mj_buf_printf(&b, "%s%d.%d (%s)", a ? ", " : "", arch_cc[a][0], arch_cc[a][1], mj_arch_names[a]);
    moejit_status st = mj_fail(MOEJIT_ERR_UNSUPPORTED,
                               "arch: compute capability %d.%d has no moejit arch; supported: %s", major,
                               minor, b.data ? b.data : "");
    mj_buf_free(&b);
    return st;
}

/* ---- fields ---------------------------------------------------------------------------- */

/* Every key, in canonical order (also the order of the "allowed:" list). */
enum field {
    F_BACKEND,
    F_QUANT,
    F_GROUP,
    F_ZERO_POINT,
    F_DTYPE,
    F_ACT,
    F_FP8_ACT,
    F_ARCH,
    F_ROUTING,
    F_N_GROUP,
    F_TOPK_GROUP,
    F_ROUTED_SCALING,
    F_LOGITS,
    F_W1_LAYOUT,
    F_BIAS,
    F_ACT_OVERRIDES,
    F_HIDDEN,
    F_INTER,
    F_EXPERTS,
    F_TOPK,
    F_TILE,
    F_COUNT
};
static const char *const field_names[F_COUNT] = {
    "backend", "quant",   "group",      "zero_point",     "dtype",  "act",       "fp8_act", "arch",
    "routing", "n_group", "topk_group", "routed_scaling", "logits", "w1_layout", "bias",
    "act_overrides", "hidden",  "inter",   "experts",    "topk",           "tile"};

/* A field's value as one reader found it, not yet interpreted. */
typedef struct raw {
    int set;
    const char *s; /* text value (trimmed), or NULL */
    size_t n;
    int is_num; /* a JSON number */
    double num;
    const cJSON *obj; /* act given as a JSON object */
    const char *type; /* JSON type name when the value is of no accepted type */
} raw;

static void trim(const char **s, size_t *len)
{
    while (*len && isspace((unsigned char)**s)) (*s)++, (*len)--;
    while (*len && isspace((unsigned char)(*s)[*len - 1])) (*len)--;
}

static int token_eq(const char *name, const char *s, size_t len)
{
    return strlen(name) == len && strncasecmp(name, s, len) == 0;
}

static void name_list(mj_buf *b, const char *const *names, int count)
{
    for (int i = 0; i < count; i++) mj_buf_printf(b, "%s%s", i ? ", " : "", names[i]);
}

static moejit_status fail_list(moejit_status st, const char *const *names, int count,
                               const char *fmt_prefix, const char *field, const char *s, size_t n)
{
    mj_buf b = MJ_BUF_INIT;
    name_list(&b, names, count);
    st = mj_fail(st, fmt_prefix, field, (int)(n > 64 ? 64 : n), s ? s : "", b.data ? b.data : "");
    mj_buf_free(&b);
    return st;
}

static int field_of(const char *s, size_t n)
{
    for (int f = 0; f < F_COUNT; f++)
        if (token_eq(field_names[f], s, n)) return f;
    return -1;
}

/* Records key=value; the readers share this so duplicates and unknown keys read the same. */
static moejit_status put_field(raw *fields, const char *key, size_t klen, raw value)
{
    int f = field_of(key, klen);
    if (f < 0)
        return fail_list(MOEJIT_ERR_INVALID_ARGUMENT, field_names, F_COUNT,
                         "spec%s: unknown field '%.*s'; allowed: %s", "", key, klen);
    if (fields[f].set)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "spec: duplicate field '%s'", field_names[f]);
    value.set = 1;
    fields[f] = value;
    return MOEJIT_OK;
}

/* ---- value readers ---------------------------------------------------------------------- */

static moejit_status type_error(const raw *r, const char *field, const char *expected)
{
    const char *got = r->type ? r->type : r->is_num ? "a number" : r->obj ? "an object" : "a string";
    return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: expected %s, got %s", field, expected, got);
}

static moejit_status read_enum(const raw *r, int field, const char *const *names, int count, int *out)
{
    if (!r->s) {
        mj_buf b = MJ_BUF_INIT;
        mj_buf_puts(&b, "a string (one of ");
        name_list(&b, names, count);
        mj_buf_puts(&b, ")");
        moejit_status st = type_error(r, field_names[field], b.data ? b.data : "a string");
        mj_buf_free(&b);
        return st;
    }
    for (int i = 0; i < count; i++) {
        if (token_eq(names[i], r->s, r->n)) {
            *out = i;
            return MOEJIT_OK;
        }
    }
    return fail_list(MOEJIT_ERR_INVALID_ARGUMENT, names, count, "%s: unknown value '%.*s'; allowed: %s",
                     field_names[field], r->s, r->n);
}

static moejit_status read_int(const raw *r, int field, int *out)
{
    const char *name = field_names[field];
    if (r->is_num) {
        if (!isfinite(r->num) || r->num != floor(r->num) || r->num < INT_MIN || r->num > INT_MAX)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: expected an integer, got %g", name, r->num);
        *out = (int)r->num;
        return MOEJIT_OK;
    }
    if (!r->s) return type_error(r, name, "an integer");
    char tmp[32];
    if (r->n == 0 || r->n >= sizeof tmp)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: expected an integer, got '%.*s'", name,
                       (int)(r->n > 64 ? 64 : r->n), r->s);
    memcpy(tmp, r->s, r->n);
    tmp[r->n] = '\0';
    char *end = NULL;
    errno = 0;
    long v = strtol(tmp, &end, 10);
    if (end != tmp + r->n || errno == ERANGE || v < INT_MIN || v > INT_MAX)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: expected an integer, got '%s'", name, tmp);
    *out = (int)v;
    return MOEJIT_OK;
}

/* A float from text (bit-exact through strtof) or from a JSON number. NOTE: a JSON number
 * has already been rounded to double by cJSON, so it is rounded twice (decimal -> double ->
 * float); where bit-exactness matters, give the value as a string ("0x1.b3b646p+0"). */
static moejit_status read_float(const raw *r, const char *name, float *out)
{
    mj_float_read fr;
    if (r->is_num) {
        fr = mj_float_from_double(r->num, out);
        if (fr != MJ_FLOAT_OK)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: %g is %s", name, r->num, mj_float_read_name(fr));
        return MOEJIT_OK;
    }
    if (!r->s) return type_error(r, name, "a float");
    fr = mj_parse_float(r->s, r->n, out);
    if (fr == MJ_FLOAT_SYNTAX)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "%s: '%.*s' is not a number; expected a decimal or hex float", name,
                       (int)(r->n > 64 ? 64 : r->n), r->s);
    if (fr != MJ_FLOAT_OK)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: '%.*s' is %s", name, (int)(r->n > 64 ? 64 : r->n),
                       r->s, mj_float_read_name(fr));
    return MOEJIT_OK;
}

/* act as a JSON object: {"kind":"swiglu","alpha":1.702,"limit":"7"}; null or "none" for an
 * optional parameter. */
static moejit_status act_from_json(const cJSON *obj, moejit_activation *act)
{
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(obj, "kind");
    const mj_act_desc *d = NULL;
    if (cJSON_IsString(kind)) d = mj_act_desc_by_name(kind->valuestring, strlen(kind->valuestring));
    if (!d) {
        mj_buf b = MJ_BUF_INIT;
        for (size_t i = 0; i < mj_act_table_len; i++)
            mj_buf_printf(&b, "%s%s", i ? ", " : "", mj_act_table[i].name);
        moejit_status st =
            cJSON_IsString(kind)
                ? mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "act.kind: unknown kind '%s'; allowed: %s",
                          kind->valuestring, b.data ? b.data : "")
                : mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "act.kind: missing or not a string; allowed: %s",
                          b.data ? b.data : "");
        mj_buf_free(&b);
        return st;
    }
    memset(act, 0, sizeof *act);
    act->kind = d->kind;
    for (int i = 0; i < d->n_params; i++) {
        act->present[i] = (uint8_t)d->params[i].default_present;
        act->value[i] = d->params[i].default_present ? d->params[i].default_value : 0.0f;
    }
    int seen[MJ_ACT_MAX_PARAMS] = {0};
    int kinds = 0;
    for (const cJSON *it = obj->child; it; it = it->next) {
        if (strcmp(it->string, "kind") == 0) {
            if (kinds++)
                return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation %s: duplicate parameter 'kind'", d->name);
            continue;
        }
        int idx = -1;
        for (int i = 0; i < d->n_params; i++)
            if (strcmp(d->params[i].name, it->string) == 0) idx = i;
        if (idx < 0) {
            mj_buf b = MJ_BUF_INIT;
            for (int i = 0; i < d->n_params; i++)
                mj_buf_printf(&b, "%s%s", i ? ", " : "", d->params[i].name);
            moejit_status st =
                d->n_params ? mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                                      "activation %s: unknown parameter '%s'; allowed: %s, kind",
                                      d->name, it->string, b.data ? b.data : "")
                            : mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                                      "activation %s: unknown parameter '%s'; %s takes no parameters",
                                      d->name, it->string, d->name);
            mj_buf_free(&b);
            return st;
        }
        const mj_param_desc *p = &d->params[idx];
        if (seen[idx])
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation %s: duplicate parameter '%s'",
                           d->name, p->name);
        seen[idx] = 1;
        if (cJSON_IsNull(it) || (cJSON_IsString(it) && strcasecmp(it->valuestring, "none") == 0)) {
            if (!p->optional)
                return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                               "activation.%s: none is not allowed; expected a float", p->name);
            act->present[idx] = 0;
            act->value[idx] = 0.0f;
            continue;
        }
        raw r = {0};
        char field[64];
        snprintf(field, sizeof field, "activation.%s", p->name);
        if (cJSON_IsNumber(it)) {
            r.is_num = 1;
            r.num = it->valuedouble;
        } else if (cJSON_IsString(it)) {
            r.s = it->valuestring;
            r.n = strlen(r.s);
            trim(&r.s, &r.n);
        } else {
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "%s: expected a number or a string%s", field,
                           p->optional ? ", or null" : "");
        }
        moejit_status st = read_float(&r, field, &act->value[idx]);
        if (st != MOEJIT_OK) return st;
        act->present[idx] = 1;
    }
    return mj_activation_validate(act);
}

/* ---- the builder -------------------------------------------------------------------------- */

static moejit_status check_shape(int v, const char *name)
{
    if (v < 0 || v % 8 != 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "%s: must be a multiple of 8 and >= 0 (0 = given at run time), got %d", name, v);
    return MOEJIT_OK;
}

#define TRY(expr)                         \
    do {                                  \
        moejit_status st_ = (expr);       \
        if (st_ != MOEJIT_OK) return st_; \
    } while (0)

#define READ_ENUM(f, names, count, dst)                                      \
    do {                                                                     \
        int v_ = (int)(dst);                                                 \
        if (fields[f].set) TRY(read_enum(&fields[f], f, names, count, &v_)); \
        (dst) = v_;                                                          \
    } while (0)

/* quant, its w4a16 group and zero points, and the dtype it implies. */
static moejit_status build_format(const raw *fields, moejit_spec *s)
{
    READ_ENUM(F_QUANT, mj_quant_names, MJ_QUANT_COUNT, s->quant);

    if (s->quant == MJ_QUANT_W4A16) {
        s->group_size = 128;
        if (fields[F_GROUP].set) TRY(read_int(&fields[F_GROUP], F_GROUP, &s->group_size));
        if (s->group_size != 32 && s->group_size != 64 && s->group_size != 128)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "group: must be 32, 64 or 128, got %d",
                           s->group_size);
        if (fields[F_ZERO_POINT].set) TRY(read_int(&fields[F_ZERO_POINT], F_ZERO_POINT, &s->zero_point));
        if (s->zero_point != 0 && s->zero_point != 1)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "zero_point: must be 0 or 1, got %d",
                           s->zero_point);
    } else {
        for (int f = F_GROUP; f <= F_ZERO_POINT; f++)
            if (fields[f].set)
                return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                               "%s: only valid with quant=w4a16 (quant is %s)", field_names[f],
                               mj_quant_names[s->quant]);
    }

    s->dtype = s->quant == MJ_QUANT_FP16 ? MJ_DTYPE_FP16 : MJ_DTYPE_BF16;
    READ_ENUM(F_DTYPE, mj_dtype_names, MJ_DTYPE_COUNT, s->dtype);
    if (s->quant == MJ_QUANT_BF16 && s->dtype != MJ_DTYPE_BF16)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "dtype: quant=bf16 needs dtype=bf16, got %s",
                       mj_dtype_names[s->dtype]);
    if (s->quant == MJ_QUANT_FP16 && s->dtype != MJ_DTYPE_FP16)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "dtype: quant=fp16 needs dtype=fp16, got %s",
                       mj_dtype_names[s->dtype]);
    if (s->dtype == MJ_DTYPE_FP32)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "dtype: quant=%s needs dtype bf16 or fp16, got fp32",
                       mj_quant_names[s->quant]);
    return MOEJIT_OK;
}

/* act, and fp8_act where the format quantizes activations. */
static moejit_status build_activation(const raw *fields, moejit_spec *s)
{
    const raw *act = &fields[F_ACT];
    if (!act->set) {
        TRY(mj_activation_parse_n("swiglu", 6, &s->act));
    } else if (act->obj) {
        TRY(act_from_json(act->obj, &s->act));
    } else if (act->s) {
        TRY(mj_activation_parse_n(act->s, act->n, &s->act));
    } else {
        return type_error(act, "act", "a string such as \"swiglu(alpha=1.702)\" or an object");
    }

    if (s->quant == MJ_QUANT_FP8_TENSOR) {
        READ_ENUM(F_FP8_ACT, mj_fp8_act_names, MJ_FP8_ACT_COUNT, s->fp8_act);
    } else if (fields[F_FP8_ACT].set) {
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "fp8_act: only valid with quant=fp8_tensor (quant is %s)", mj_quant_names[s->quant]);
    }
    return MOEJIT_OK;
}

/* routing with deepseek_v3's parameters, the logits dtype, the W1 layout and the biases. */
static moejit_status build_routing(const raw *fields, moejit_spec *s)
{
    s->routing = MJ_ROUTING_RENORMALIZE;
    READ_ENUM(F_ROUTING, mj_routing_names, MJ_ROUTING_COUNT, s->routing);
    s->routed_scaling = 1.0f;
    if (s->routing == MJ_ROUTING_DEEPSEEK_V3) {
        s->n_group = s->topk_group = 1;
        if (fields[F_N_GROUP].set) TRY(read_int(&fields[F_N_GROUP], F_N_GROUP, &s->n_group));
        if (fields[F_TOPK_GROUP].set) TRY(read_int(&fields[F_TOPK_GROUP], F_TOPK_GROUP, &s->topk_group));
        if (fields[F_ROUTED_SCALING].set)
            TRY(read_float(&fields[F_ROUTED_SCALING], "routed_scaling", &s->routed_scaling));
        if (s->n_group < 1 || s->n_group > MAX_EXPERTS)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "n_group: must be 1..%d, got %d", MAX_EXPERTS,
                           s->n_group);
        if (s->topk_group < 1 || s->topk_group > s->n_group)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "topk_group: must be 1..n_group (%d), got %d",
                           s->n_group, s->topk_group);
        if (!isfinite(s->routed_scaling) || !(s->routed_scaling > 0.0f))
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "routed_scaling: must be finite and > 0, got %g",
                           (double)s->routed_scaling);
    } else {
        for (int f = F_N_GROUP; f <= F_ROUTED_SCALING; f++)
            if (fields[f].set)
                return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                               "%s: only valid with routing=deepseek_v3 (routing is %s)", field_names[f],
                               mj_routing_names[s->routing]);
    }

    s->logits_dtype = MJ_DTYPE_FP32;
    READ_ENUM(F_LOGITS, mj_dtype_names, MJ_DTYPE_COUNT, s->logits_dtype);
    if (s->logits_dtype == MJ_DTYPE_FP16)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "logits: must be fp32 or bf16, got fp16");
    READ_ENUM(F_W1_LAYOUT, mj_w1_layout_names, MJ_W1_LAYOUT_COUNT, s->w1_layout);
    READ_ENUM(F_BIAS, mj_bias_names, MJ_BIAS_COUNT, s->bias);
    READ_ENUM(F_ACT_OVERRIDES, mj_act_overrides_names, MJ_OVERRIDES_COUNT, s->act_overrides);
    return MOEJIT_OK;
}

/* The pinned shape and the tile. */
static moejit_status build_shape(const raw *fields, moejit_spec *s)
{
    if (fields[F_HIDDEN].set) TRY(read_int(&fields[F_HIDDEN], F_HIDDEN, &s->hidden));
    if (fields[F_INTER].set) TRY(read_int(&fields[F_INTER], F_INTER, &s->inter));
    if (fields[F_EXPERTS].set) TRY(read_int(&fields[F_EXPERTS], F_EXPERTS, &s->experts));
    if (fields[F_TOPK].set) TRY(read_int(&fields[F_TOPK], F_TOPK, &s->topk));
    TRY(check_shape(s->hidden, "hidden"));
    TRY(check_shape(s->inter, "inter"));
    if (s->experts < 0 || s->experts > MAX_EXPERTS)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "experts: must be 0..%d (0 = given at run time), got %d", MAX_EXPERTS,
                       s->experts);
    if (s->topk < 0 || s->topk > MAX_TOPK)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "topk: must be 0..%d (0 = given at run time), got %d", MAX_TOPK, s->topk);
    if (s->topk > 0 && s->experts > 0 && s->topk > s->experts)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "topk: must be <= experts (%d), got %d", s->experts,
                       s->topk);
    if (s->routing == MJ_ROUTING_DEEPSEEK_V3 && s->experts > 0 && s->experts % s->n_group != 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "n_group: must divide experts (%d), got %d",
                       s->experts, s->n_group);

    strcpy(s->tile, "auto");
    const raw *tile = &fields[F_TILE];
    if (tile->set) {
        if (!tile->s) return type_error(tile, "tile", "a string (auto or a tile name)");
        int ok = tile->n >= 1 && tile->n < sizeof s->tile;
        for (size_t i = 0; ok && i < tile->n; i++)
            ok = islower((unsigned char)tile->s[i]) || isdigit((unsigned char)tile->s[i]) ||
                 tile->s[i] == '_';
        if (!ok)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "tile: must be auto or a name of [a-z0-9_] up to %zu characters, got '%.*s'",
                           sizeof s->tile - 1, (int)(tile->n > 64 ? 64 : tile->n), tile->s);
        memcpy(s->tile, tile->s, tile->n);
        s->tile[tile->n] = '\0';
    }
    return MOEJIT_OK;
}

/* arch, then backend=auto, which depends on it and on every other field. */
static moejit_status build_target(const raw *fields, const mj_spec_resolvers *resolve, moejit_spec *s)
{
    /* Last, so that a GPU-less machine reports the spec's own mistakes first. */
    const raw *arch = &fields[F_ARCH];
    if (arch->set && arch->s && !token_eq("native", arch->s, arch->n)) {
        READ_ENUM(F_ARCH, mj_arch_names, MJ_ARCH_COUNT, s->arch);
    } else if (arch->set && !arch->s) {
        return type_error(arch, "arch", "a string (native or an arch name)");
    } else if (!resolve || !resolve->native) {
        mj_buf b = MJ_BUF_INIT;
        name_list(&b, mj_arch_names, MJ_ARCH_COUNT);
        moejit_status st = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "arch: native is not available here; give one of %s",
                                   b.data ? b.data : "");
        mj_buf_free(&b);
        return st;
    } else {
        TRY(resolve->native(&s->arch));
    }
    /* After the arch: which backend is fastest depends on it. */
    if (s->backend_auto) {
        if (!resolve || !resolve->auto_backend)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "backend: auto is not available here; give one of simt, mma, wgmma");
        TRY(resolve->auto_backend(s));
    }
    return MOEJIT_OK;
}

/* Interprets the collected fields into s (defaults, validity rules; no allocation). */
static moejit_status build(const raw *fields, const mj_spec_resolvers *resolve, moejit_spec *s)
{
    memset(s, 0, sizeof *s);
    s->backend = MJ_BACKEND_SIMT;
    s->quant = MJ_QUANT_BF16;
    const raw *backend = &fields[F_BACKEND];
    if (backend->set && backend->s && token_eq("auto", backend->s, backend->n))
        s->backend_auto = 1;
    else
        READ_ENUM(F_BACKEND, mj_backend_names, MJ_BACKEND_COUNT, s->backend);
    TRY(build_format(fields, s));
    TRY(build_activation(fields, s));
    TRY(build_routing(fields, s));
    TRY(build_shape(fields, s));
    return build_target(fields, resolve, s);
}

static const char *name_of(const char *const *names, int count, int v)
{
    return v >= 0 && v < count ? names[v] : "invalid";
}

void mj_spec_format(const moejit_spec *s, mj_buf *b)
{
    mj_buf_printf(b, "backend=%s,quant=%s", name_of(mj_backend_names, MJ_BACKEND_COUNT, s->backend),
                  name_of(mj_quant_names, MJ_QUANT_COUNT, s->quant));
    if (s->quant == MJ_QUANT_W4A16)
        mj_buf_printf(b, ",group=%d,zero_point=%d", s->group_size, s->zero_point);
    mj_buf_printf(b, ",dtype=%s,act=", name_of(mj_dtype_names, MJ_DTYPE_COUNT, s->dtype));
    mj_activation_format(&s->act, b);
    if (s->quant == MJ_QUANT_FP8_TENSOR)
        mj_buf_printf(b, ",fp8_act=%s", name_of(mj_fp8_act_names, MJ_FP8_ACT_COUNT, s->fp8_act));
    mj_buf_printf(b, ",arch=%s,routing=%s", name_of(mj_arch_names, MJ_ARCH_COUNT, s->arch),
                  name_of(mj_routing_names, MJ_ROUTING_COUNT, s->routing));
    if (s->routing == MJ_ROUTING_DEEPSEEK_V3) {
        mj_buf_printf(b, ",n_group=%d,topk_group=%d,routed_scaling=", s->n_group, s->topk_group);
        mj_buf_hexfloat(b, s->routed_scaling);
    }
    mj_buf_printf(b, ",logits=%s,w1_layout=%s,bias=%s", name_of(mj_dtype_names, MJ_DTYPE_COUNT, s->logits_dtype),
                  name_of(mj_w1_layout_names, MJ_W1_LAYOUT_COUNT, s->w1_layout),
                  name_of(mj_bias_names, MJ_BIAS_COUNT, s->bias));
    /* only where set, as group and fp8_act: a spec without overrides keeps the text it had */
    if (s->act_overrides != MJ_OVERRIDES_NONE)
        mj_buf_printf(b, ",act_overrides=%s", name_of(mj_act_overrides_names, MJ_OVERRIDES_COUNT, s->act_overrides));
    mj_buf_printf(b, ",hidden=%d,inter=%d,experts=%d,topk=%d,tile=%s", s->hidden, s->inter, s->experts, s->topk,
                  s->tile);
}

static uint64_t fnv1a_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Builds the spec and caches its canonical text and hash. */
static moejit_status finish(const raw *fields, const mj_spec_resolvers *resolve, moejit_spec **out)
{
    moejit_spec tmp;
    TRY(build(fields, resolve, &tmp));
    mj_buf b = MJ_BUF_INIT;
    mj_spec_format(&tmp, &b);
    tmp.canonical = mj_buf_take(&b);
    moejit_spec *s = tmp.canonical ? malloc(sizeof *s) : NULL;
    if (!s) {
        free(tmp.canonical);
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "spec: out of memory");
    }
    tmp.hash = fnv1a_str(tmp.canonical);
    *s = tmp;
    *out = s;
    return MOEJIT_OK;
}

/* ---- readers ----------------------------------------------------------------------------- */

moejit_status mj_spec_parse(const char *text, const mj_spec_resolvers *resolve, moejit_spec **out)
{
    if (!out) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "spec: out is NULL");
    *out = NULL;
    if (!text) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "spec: text is NULL");
    raw fields[F_COUNT] = {{0}};
    const char *p = text;
    size_t total = strlen(text);
    const char *all = text;
    size_t all_n = total;
    trim(&all, &all_n);
    while (all_n > 0) {
        /* Split only at top-level commas: act's value has its own. */
        int depth = 0;
        size_t i = 0;
        for (; p + i < text + total; i++) {
            if (p[i] == '(') depth++;
            if (p[i] == ')' && --depth < 0) break;
            if (p[i] == ',' && depth == 0) break;
        }
        if (depth != 0)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "spec: unbalanced parentheses in '%s'", text);
        const char *item = p;
        size_t n = i;
        trim(&item, &n);
        if (n == 0)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "spec: empty field at offset %zu; expected key=value separated by commas",
                           (size_t)(p - text));
        const char *eq = memchr(item, '=', n);
        if (!eq)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "spec: field '%.*s' has no value; expected key=value", (int)n, item);
        const char *key = item;
        size_t klen = (size_t)(eq - item);
        trim(&key, &klen);
        raw v = {0};
        v.s = eq + 1;
        v.n = n - (size_t)(v.s - item);
        trim(&v.s, &v.n);
        TRY(put_field(fields, key, klen, v));
        if (p + i >= text + total) break;
        p += i + 1; /* past the comma; a trailing one leaves an empty field, reported above */
    }
    return finish(fields, resolve, out);
}

long mj_json_nul_escape(const char *json)
{
    int in_string = 0;
    for (const char *p = json; *p; p++) {
        if (*p == '"') {
            in_string = !in_string;
        } else if (in_string && *p == '\\') {
            if (p[1] == 'u' && p[2] == '0' && p[3] == '0' && p[4] == '0' && p[5] == '0') return (long)(p - json);
            if (p[1]) p++; /* the escaped character, which may be a quote */
        }
    }
    return -1;
}

static const char *json_type(const cJSON *v)
{
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "an unsupported JSON value";
}

moejit_status mj_spec_parse_json(const char *json, const mj_spec_resolvers *resolve, moejit_spec **out)
{
    if (!out) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "spec: out is NULL");
    *out = NULL;
    if (!json) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "spec json: text is NULL");
    long nul = mj_json_nul_escape(json);
    if (nul >= 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "spec json: a string holds \\u0000 at offset %ld; no field allows a NUL character", nul);
    const char *end = NULL;
    /* NOTE: the error position comes from return_parse_end, not cJSON's global error pointer. */
    cJSON *root = cJSON_ParseWithOpts(json, &end, 1);
    if (!root) {
        size_t at = end && end >= json ? (size_t)(end - json) : 0;
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "spec json: invalid JSON at offset %zu near '%.20s'",
                       at, json + (at <= strlen(json) ? at : 0));
    }
    moejit_status st = MOEJIT_OK;
    raw fields[F_COUNT] = {{0}};
    if (!cJSON_IsObject(root)) {
        st = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "spec json: expected an object, got %s",
                     json_type(root));
        goto done;
    }
    for (const cJSON *it = root->child; it && st == MOEJIT_OK; it = it->next) {
        raw v = {0};
        if (cJSON_IsString(it)) {
            v.s = it->valuestring;
            v.n = strlen(v.s);
            trim(&v.s, &v.n);
        } else if (cJSON_IsNumber(it)) {
            v.is_num = 1;
            v.num = it->valuedouble;
        } else if (cJSON_IsObject(it) && strcmp(it->string, "act") == 0) {
            v.obj = it;
        } else {
            v.type = json_type(it);
        }
        st = put_field(fields, it->string, strlen(it->string), v);
    }
    if (st == MOEJIT_OK) st = finish(fields, resolve, out);
done:
    cJSON_Delete(root);
    return st;
}

/* ---- output and accessors ------------------------------------------------------------------- */

static moejit_status copy_out(const char *s, char *buf, size_t cap, size_t *len)
{
    size_t n = strlen(s);
    if (len) *len = n;
    if (!buf || n >= cap)
        return mj_fail(MOEJIT_ERR_BUFFER_TOO_SMALL, "buf: %zu bytes is too small; need %zu", cap, n + 1);
    memcpy(buf, s, n + 1);
    return MOEJIT_OK;
}

moejit_status moejit_spec_to_json(const moejit_spec *s, char *buf, size_t cap, size_t *len)
{
    if (!s) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "spec: spec is NULL");
    mj_buf act = MJ_BUF_INIT, rs = MJ_BUF_INIT;
    mj_activation_format(&s->act, &act);
    mj_buf_hexfloat(&rs, s->routed_scaling);
    cJSON *o = cJSON_CreateObject();
    int ok = o && mj_buf_ok(&act) && mj_buf_ok(&rs);
    /* Same order as the canonical text; floats as exact hex strings. */
    ok = ok && cJSON_AddStringToObject(o, "backend", mj_backend_names[s->backend]);
    ok = ok && cJSON_AddStringToObject(o, "quant", mj_quant_names[s->quant]);
    if (s->quant == MJ_QUANT_W4A16) {
        ok = ok && cJSON_AddNumberToObject(o, "group", s->group_size);
        ok = ok && cJSON_AddNumberToObject(o, "zero_point", s->zero_point);
    }
    ok = ok && cJSON_AddStringToObject(o, "dtype", mj_dtype_names[s->dtype]);
    ok = ok && cJSON_AddStringToObject(o, "act", act.data);
    if (s->quant == MJ_QUANT_FP8_TENSOR)
        ok = ok && cJSON_AddStringToObject(o, "fp8_act", mj_fp8_act_names[s->fp8_act]);
    ok = ok && cJSON_AddStringToObject(o, "arch", mj_arch_names[s->arch]);
    ok = ok && cJSON_AddStringToObject(o, "routing", mj_routing_names[s->routing]);
    if (s->routing == MJ_ROUTING_DEEPSEEK_V3) {
        ok = ok && cJSON_AddNumberToObject(o, "n_group", s->n_group);
        ok = ok && cJSON_AddNumberToObject(o, "topk_group", s->topk_group);
        ok = ok && cJSON_AddStringToObject(o, "routed_scaling", rs.data);
    }
    ok = ok && cJSON_AddStringToObject(o, "logits", mj_dtype_names[s->logits_dtype]);
    ok = ok && cJSON_AddStringToObject(o, "w1_layout", mj_w1_layout_names[s->w1_layout]);
    ok = ok && cJSON_AddStringToObject(o, "bias", mj_bias_names[s->bias]);
    if (s->act_overrides != MJ_OVERRIDES_NONE)
        ok = ok && cJSON_AddStringToObject(o, "act_overrides", mj_act_overrides_names[s->act_overrides]);
    ok = ok && cJSON_AddNumberToObject(o, "hidden", s->hidden);
    ok = ok && cJSON_AddNumberToObject(o, "inter", s->inter);
    ok = ok && cJSON_AddNumberToObject(o, "experts", s->experts);
    ok = ok && cJSON_AddNumberToObject(o, "topk", s->topk);
    ok = ok && cJSON_AddStringToObject(o, "tile", s->tile);
    char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    mj_buf_free(&act);
    mj_buf_free(&rs);
    if (!text) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "spec json: out of memory");
    moejit_status st = copy_out(text, buf, cap, len);
    cJSON_free(text);
    return st;
}

moejit_status mj_spec_clone(const moejit_spec *spec, moejit_spec **out)
{
    moejit_spec *c = malloc(sizeof *c);
    char *canon = spec->canonical ? strdup(spec->canonical) : NULL;
    if (!c || !canon) {
        free(c);
        free(canon);
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "spec: out of memory");
    }
    *c = *spec;
    c->canonical = canon;
    *out = c;
    return MOEJIT_OK;
}

void moejit_spec_destroy(moejit_spec *spec)
{
    if (!spec) return;
    free(spec->canonical);
    free(spec);
}

const char *moejit_spec_canonical(const moejit_spec *spec) { return spec ? spec->canonical : ""; }

const moejit_activation *moejit_spec_activation(const moejit_spec *spec)
{
    return spec ? &spec->act : NULL;
}

int moejit_spec_equal(const moejit_spec *a, const moejit_spec *b)
{
    if (a == b) return 1;
    if (!a || !b) return 0;
    return strcmp(a->canonical, b->canonical) == 0;
}
