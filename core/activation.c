/*
 * This file contains the typed activation value: the descriptor table (names, ABI numbers,
 * parameters, defaults, rules), the validating constructors, the parser of the human and
 * canonical text forms, the canonical printer, bit-exact equality and the hash.
 *
 * Identity is bit-exact on purpose: two values that differ in any bit (-0.0 and +0.0,
 * 1.7f and its neighbour) must never share a compiled kernel, so equality, the hash and the
 * canonical text all look at the raw bits and never at float comparison.
 */
#include "core/activation.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/status.h"

/* A parameter with a value by default, and one whose value may also be none. */
#define PARAM(n, d, r) {.name = (n), .default_value = (d), .default_present = 1, .rule = (r)}
#define OPTIONAL(n, d, present, r)                                                                      \
    {.name = (n), .default_value = (d), .default_present = (present), .optional = 1, .rule = (r)}

const mj_act_desc mj_act_table[] = {
    {MOEJIT_ACT_GELU, "gelu", 0, 0, {{0}}, "0.5*x*(1+erf(x/sqrt(2)))"},
    {MOEJIT_ACT_RELU, "relu", 0, 0, {{0}}, "max(x,0)"},
    {MOEJIT_ACT_SILU, "silu", 0, 0, {{0}}, "x*sigmoid(x)"},
    {MOEJIT_ACT_SWIGLU, "swiglu", 1, 3,
     {PARAM("alpha", 1.0f, MJ_PARAM_FINITE), PARAM("beta", 0.0f, MJ_PARAM_FINITE),
      PARAM("limit", FLT_MAX, MJ_PARAM_POSITIVE)},
     "g'=min(g,limit); u'=clamp(u,-limit,limit); g'*sigmoid(alpha*g')*(u'+beta)"},
    {MOEJIT_ACT_GEGLU, "geglu", 1, 0, {{0}}, "gelu_erf(g)*u"},
    {MOEJIT_ACT_RELU2, "relu2", 0, 0, {{0}}, "relu(x)^2"},
    {MOEJIT_ACT_SWIGLU_STEP, "swiglu_step", 1, 1, {PARAM("limit", 7.0f, MJ_PARAM_POSITIVE)},
     "min(silu(g),limit)*clamp(u,-limit,limit)"},
    {MOEJIT_ACT_GEGLU_TANH, "geglu_tanh", 1, 0, {{0}},
     "0.5*g*(1+tanh(0.7978845608*(g+0.044715*g^3)))*u"},
    {MOEJIT_ACT_IDENTITY, "identity", 0, 0, {{0}}, "x"},
    /* SiTU's optional fields: linear_scale defaults to 25 but may be none (u is not
     * squashed); clamp_limit defaults to none (no clamp). */
    {MOEJIT_ACT_SITU, "situ", 1, 3,
     {PARAM("gate_scale", 4.0f, MJ_PARAM_POSITIVE),
      OPTIONAL("linear_scale", 25.0f, 1, MJ_PARAM_POSITIVE),
      OPTIONAL("clamp_limit", 0.0f, 0, MJ_PARAM_POSITIVE)},
     "if c: u=clamp(u,-c,c), g=min(g,c); lin=(ls ? ls*tanh(u/ls) : u); lin*gs*tanh(g/gs)*sigmoid(g)"},
};
const size_t mj_act_table_len = sizeof mj_act_table / sizeof mj_act_table[0];

/* Longest float token the parser accepts (far beyond any exact decimal of a float that a
 * person would write). */
#define FLOAT_TOKEN_MAX 128

const mj_act_desc *mj_act_desc_of(moejit_act_kind kind)
{
    for (size_t i = 0; i < mj_act_table_len; i++)
        if (mj_act_table[i].kind == kind) return &mj_act_table[i];
    return NULL;
}

static int name_eq(const char *name, const char *s, size_t len)
{
    return strlen(name) == len && strncasecmp(name, s, len) == 0;
}

const mj_act_desc *mj_act_desc_by_name(const char *name, size_t len)
{
    for (size_t i = 0; i < mj_act_table_len; i++)
        if (name_eq(mj_act_table[i].name, name, len)) return &mj_act_table[i];
    return NULL;
}

/* "gelu, relu, ..." for error messages. */
static void kind_list(mj_buf *b)
{
    for (size_t i = 0; i < mj_act_table_len; i++)
        mj_buf_printf(b, "%s%s", i ? ", " : "", mj_act_table[i].name);
}

static moejit_status fail_unknown_kind(const char *s, size_t len)
{
    mj_buf b = MJ_BUF_INIT;
    kind_list(&b);
    moejit_status st =
        mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation: unknown kind '%.*s'; allowed: %s", (int)len, s,
                b.data ? b.data : "");
    mj_buf_free(&b);
    return st;
}

static moejit_status fail_unknown_param(const mj_act_desc *d, const char *s, size_t len)
{
    if (d->n_params == 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "activation %s: unknown parameter '%.*s'; %s takes no parameters", d->name,
                       (int)len, s, d->name);
    mj_buf b = MJ_BUF_INIT;
    for (int i = 0; i < d->n_params; i++) mj_buf_printf(&b, "%s%s", i ? ", " : "", d->params[i].name);
    moejit_status st =
        mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation %s: unknown parameter '%.*s'; allowed: %s",
                d->name, (int)len, s, b.data ? b.data : "");
    mj_buf_free(&b);
    return st;
}

static const char *rule_text(const mj_param_desc *p)
{
    if (p->rule == MJ_PARAM_POSITIVE)
        return p->optional ? "must be finite and > 0, or none" : "must be finite and > 0";
    return p->optional ? "must be finite, or none" : "must be finite";
}

/* The one check behind the constructors, the parser and the JSON reader. */
static moejit_status check_value(const mj_param_desc *p, float v)
{
    int ok = isfinite(v) && (p->rule != MJ_PARAM_POSITIVE || v > 0.0f);
    if (ok) return MOEJIT_OK;
    return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation.%s: %s, got %g", p->name, rule_text(p),
                   (double)v);
}

static void set_defaults(const mj_act_desc *d, moejit_activation *act)
{
    memset(act, 0, sizeof *act); /* padding too, so copies of the value stay byte-identical */
    act->kind = d->kind;
    for (int i = 0; i < d->n_params; i++) {
        act->present[i] = (uint8_t)d->params[i].default_present;
        act->value[i] = d->params[i].default_present ? d->params[i].default_value : 0.0f;
    }
}

moejit_status mj_activation_validate(const moejit_activation *act)
{
    const mj_act_desc *d = mj_act_desc_of(act->kind);
    if (!d) {
        mj_buf b = MJ_BUF_INIT;
        kind_list(&b);
        moejit_status st =
            mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation: unknown kind %d; allowed: %s",
                    (int)act->kind, b.data ? b.data : "");
        mj_buf_free(&b);
        return st;
    }
    for (int i = 0; i < MJ_ACT_MAX_PARAMS; i++) {
        uint32_t bits;
        memcpy(&bits, &act->value[i], sizeof bits);
        if (i >= d->n_params) {
            /* Unused slots must be zero so that the bitwise identity is sound. */
            if (act->present[i] || bits)
                return mj_fail(MOEJIT_ERR_INTERNAL, "activation %s: unused parameter slot %d is set",
                               d->name, i);
            continue;
        }
        const mj_param_desc *p = &d->params[i];
        if (act->present[i] > 1)
            return mj_fail(MOEJIT_ERR_INTERNAL, "activation.%s: present flag is %d", p->name,
                           act->present[i]);
        if (!act->present[i]) {
            if (!p->optional)
                return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation.%s: none is not allowed; %s",
                               p->name, rule_text(p));
            if (bits)
                return mj_fail(MOEJIT_ERR_INTERNAL, "activation.%s: none but the value is set", p->name);
            continue;
        }
        moejit_status st = check_value(p, act->value[i]);
        if (st != MOEJIT_OK) return st;
    }
    return MOEJIT_OK;
}

/* ---- text parsing ------------------------------------------------------------------------ */

static void trim(const char **s, size_t *len)
{
    while (*len && isspace((unsigned char)**s)) (*s)++, (*len)--;
    while (*len && isspace((unsigned char)(*s)[*len - 1])) (*len)--;
}

mj_float_read mj_parse_float(const char *s, size_t len, float *out)
{
    char tmp[FLOAT_TOKEN_MAX + 1];
    if (len == 0 || len > FLOAT_TOKEN_MAX) return MJ_FLOAT_SYNTAX;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    char *end = NULL;
    locale_t c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    errno = 0;
    float v = c ? strtof_l(tmp, &end, c) : strtof(tmp, &end);
    int err = errno;
    if (c) freelocale(c);
    if (end != tmp + len) return MJ_FLOAT_SYNTAX;
    if (err == ERANGE && isinf(v)) return MJ_FLOAT_OVERFLOW;
    if (err == ERANGE && v == 0.0f) return MJ_FLOAT_UNDERFLOW; /* strtof only reports ERANGE at 0 for a nonzero text */
    *out = v;
    return MJ_FLOAT_OK;
}

const char *mj_float_read_name(mj_float_read r)
{
    switch (r) {
    case MJ_FLOAT_OK: return "ok";
    case MJ_FLOAT_SYNTAX: return "not a number";
    case MJ_FLOAT_OVERFLOW: return "beyond float range";
    case MJ_FLOAT_UNDERFLOW: return "a nonzero value that underflows to zero";
    }
    return "invalid";
}

mj_float_read mj_float_from_double(double d, float *out)
{
    if (isnan(d)) {
        *out = NAN;
        return MJ_FLOAT_OK;
    }
    /* Converting a double beyond float's range is undefined behaviour in C, so compare first. */
    if (fabs(d) > FLT_MAX) return isinf(d) ? (*out = (float)d, MJ_FLOAT_OK) : MJ_FLOAT_OVERFLOW;
    float f = (float)d;
    if (f == 0.0f && d != 0.0) return MJ_FLOAT_UNDERFLOW;
    *out = f;
    return MJ_FLOAT_OK;
}

/* One "key=value" item inside the parentheses. */
static moejit_status parse_param(const mj_act_desc *d, const char *s, size_t len, moejit_activation *act,
                                 int *seen)
{
    trim(&s, &len);
    if (len == 0)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation %s: empty parameter; expected key=value",
                       d->name);
    const char *eq = memchr(s, '=', len);
    const char *key = s;
    size_t klen = eq ? (size_t)(eq - s) : len;
    trim(&key, &klen);
    int idx = -1;
    for (int i = 0; i < d->n_params; i++)
        if (name_eq(d->params[i].name, key, klen)) idx = i;
    if (idx < 0) return fail_unknown_param(d, key, klen);
    const mj_param_desc *p = &d->params[idx];
    if (!eq)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation.%s: missing value; expected %s=<float>",
                       p->name, p->name);
    if (seen[idx])
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation %s: duplicate parameter '%s'", d->name,
                       p->name);
    seen[idx] = 1;
    const char *val = eq + 1;
    size_t vlen = len - (size_t)(val - s);
    trim(&val, &vlen);
    if (name_eq("none", val, vlen)) {
        if (!p->optional)
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation.%s: none is not allowed; %s",
                           p->name, rule_text(p));
        act->present[idx] = 0;
        act->value[idx] = 0.0f;
        return MOEJIT_OK;
    }
    float v = 0.0f;
    mj_float_read fr = mj_parse_float(val, vlen, &v);
    if (fr == MJ_FLOAT_SYNTAX)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "activation.%s: '%.*s' is not a number; expected a decimal or hex float%s",
                       p->name, (int)(vlen > 64 ? 64 : vlen), val, p->optional ? " or none" : "");
    if (fr != MJ_FLOAT_OK)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation.%s: %s, got '%.*s' (%s)", p->name,
                       rule_text(p), (int)(vlen > 64 ? 64 : vlen), val, mj_float_read_name(fr));
    moejit_status st = check_value(p, v);
    if (st != MOEJIT_OK) return st;
    act->present[idx] = 1;
    act->value[idx] = v;
    return MOEJIT_OK;
}

moejit_status mj_activation_parse_n(const char *text, size_t len, moejit_activation *out)
{
    if (!text || !out) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation: text is NULL");
    trim(&text, &len);
    size_t n = 0;
    while (n < len && (isalnum((unsigned char)text[n]) || text[n] == '_')) n++;
    if (n == 0) {
        mj_buf b = MJ_BUF_INIT;
        kind_list(&b);
        moejit_status st = mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                                   "activation: expected a kind name at '%.*s'; allowed: %s", (int)len,
                                   text, b.data ? b.data : "");
        mj_buf_free(&b);
        return st;
    }
    const mj_act_desc *d = mj_act_desc_by_name(text, n);
    if (!d) return fail_unknown_kind(text, n);

    moejit_activation act;
    set_defaults(d, &act);
    const char *rest = text + n;
    size_t rlen = len - n;
    trim(&rest, &rlen);
    if (rlen > 0) {
        if (rest[0] != '(' || rest[rlen - 1] != ')')
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                           "activation %s: unexpected '%.*s'; expected %s or %s(key=value,...)", d->name,
                           (int)rlen, rest, d->name, d->name);
        const char *body = rest + 1;
        size_t blen = rlen - 2;
        if (memchr(body, '(', blen) || memchr(body, ')', blen))
            return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation %s: nested parentheses in '%.*s'",
                           d->name, (int)rlen, rest);
        trim(&body, &blen);
        int seen[MJ_ACT_MAX_PARAMS] = {0};
        while (blen > 0) {
            const char *comma = memchr(body, ',', blen);
            size_t item = comma ? (size_t)(comma - body) : blen;
            moejit_status st = parse_param(d, body, item, &act, seen);
            if (st != MOEJIT_OK) return st;
            if (!comma) break;
            body = comma + 1;
            blen -= item + 1;
            /* A trailing comma leaves an empty item, which parse_param reports. */
            if (blen == 0) return parse_param(d, body, 0, &act, seen);
        }
    }
    *out = act;
    return MOEJIT_OK;
}

/* ---- canonical text, identity -------------------------------------------------------------- */

void mj_activation_format(const moejit_activation *act, mj_buf *b)
{
    const mj_act_desc *d = mj_act_desc_of(act->kind);
    if (!d) {
        mj_buf_printf(b, "invalid_kind_%d", (int)act->kind);
        return;
    }
    mj_buf_puts(b, d->name);
    if (d->n_params == 0) return;
    mj_buf_puts(b, "(");
    for (int i = 0; i < d->n_params; i++) {
        mj_buf_printf(b, "%s%s=", i ? "," : "", d->params[i].name);
        if (act->present[i])
            mj_buf_hexfloat(b, act->value[i]);
        else
            mj_buf_puts(b, "none");
    }
    mj_buf_puts(b, ")");
}

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

int moejit_activation_equal(const moejit_activation *a, const moejit_activation *b)
{
    if (a == b) return 1;
    if (!a || !b || a->kind != b->kind) return 0;
    for (int i = 0; i < MJ_ACT_MAX_PARAMS; i++)
        if (a->present[i] != b->present[i] || float_bits(a->value[i]) != float_bits(b->value[i]))
            return 0;
    return 1;
}

static uint64_t fnv1a(uint64_t h, uint32_t v, int nbytes)
{
    /* Little-endian byte order, written out so the hash is the same on every host. */
    for (int i = 0; i < nbytes; i++) {
        h ^= (v >> (8 * i)) & 0xffu;
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t moejit_activation_hash(const moejit_activation *act)
{
    uint64_t h = 0xcbf29ce484222325ull;
    if (!act) return h;
    h = fnv1a(h, (uint32_t)act->kind, 4);
    for (int i = 0; i < MJ_ACT_MAX_PARAMS; i++) {
        h = fnv1a(h, act->present[i], 1);
        h = fnv1a(h, float_bits(act->value[i]), 4);
    }
    return h;
}

/* ---- public API ------------------------------------------------------------------------------ */

static moejit_status finish(const moejit_activation *act, moejit_activation **out)
{
    moejit_status st = mj_activation_validate(act);
    if (st != MOEJIT_OK) return st;
    moejit_activation *p = malloc(sizeof *p);
    if (!p) return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "activation: out of memory");
    *p = *act;
    *out = p;
    return MOEJIT_OK;
}

moejit_status moejit_activation_create(moejit_act_kind kind, moejit_activation **out)
{
    if (!out) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation: out is NULL");
    *out = NULL;
    const mj_act_desc *d = mj_act_desc_of(kind);
    moejit_activation act;
    if (!d) {
        memset(&act, 0, sizeof act);
        act.kind = kind;
        return mj_activation_validate(&act); /* reports the unknown kind */
    }
    set_defaults(d, &act);
    return finish(&act, out);
}

moejit_status moejit_activation_swiglu(float alpha, float beta, float limit, moejit_activation **out)
{
    if (!out) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation: out is NULL");
    *out = NULL;
    moejit_activation act;
    set_defaults(mj_act_desc_of(MOEJIT_ACT_SWIGLU), &act);
    act.value[0] = alpha;
    act.value[1] = beta;
    act.value[2] = limit;
    return finish(&act, out);
}

moejit_status moejit_activation_swiglu_step(float limit, moejit_activation **out)
{
    if (!out) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation: out is NULL");
    *out = NULL;
    moejit_activation act;
    set_defaults(mj_act_desc_of(MOEJIT_ACT_SWIGLU_STEP), &act);
    act.value[0] = limit;
    return finish(&act, out);
}

moejit_status moejit_activation_situ(float gate_scale, const float *linear_scale,
                                     const float *clamp_limit, moejit_activation **out)
{
    if (!out) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation: out is NULL");
    *out = NULL;
    moejit_activation act;
    set_defaults(mj_act_desc_of(MOEJIT_ACT_SITU), &act);
    act.value[0] = gate_scale;
    act.present[1] = linear_scale != NULL;
    act.value[1] = linear_scale ? *linear_scale : 0.0f;
    act.present[2] = clamp_limit != NULL;
    act.value[2] = clamp_limit ? *clamp_limit : 0.0f;
    return finish(&act, out);
}

moejit_status moejit_activation_parse(const char *text, moejit_activation **out)
{
    if (!out) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation: out is NULL");
    *out = NULL;
    if (!text) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation: text is NULL");
    moejit_activation act;
    moejit_status st = mj_activation_parse_n(text, strlen(text), &act);
    if (st != MOEJIT_OK) return st;
    return finish(&act, out);
}

void moejit_activation_destroy(moejit_activation *act) { free(act); }

moejit_act_kind moejit_activation_kind(const moejit_activation *act) { return act->kind; }

int moejit_activation_is_gated(const moejit_activation *act)
{
    const mj_act_desc *d = act ? mj_act_desc_of(act->kind) : NULL;
    return d ? d->gated : 0;
}

moejit_status moejit_activation_param(const moejit_activation *act, const char *name, float *value,
                                      int *present)
{
    if (!act || !name)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation: act and name must not be NULL");
    const mj_act_desc *d = mj_act_desc_of(act->kind);
    if (!d) return mj_activation_validate(act);
    for (int i = 0; i < d->n_params; i++) {
        if (strcmp(d->params[i].name, name) != 0) continue;
        if (value) *value = act->value[i];
        if (present) *present = act->present[i];
        return MOEJIT_OK;
    }
    return fail_unknown_param(d, name, strlen(name));
}

moejit_status moejit_activation_to_string(const moejit_activation *act, char *buf, size_t cap,
                                          size_t *len)
{
    if (!act) return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT, "activation: act is NULL");
    mj_buf b = MJ_BUF_INIT;
    mj_activation_format(act, &b);
    if (!mj_buf_ok(&b)) {
        mj_buf_free(&b);
        return mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "activation: out of memory");
    }
    size_t n = b.len;
    if (len) *len = n;
    moejit_status st = MOEJIT_OK;
    if (buf && n < cap)
        memcpy(buf, b.data, n + 1);
    else
        st = mj_fail(MOEJIT_ERR_BUFFER_TOO_SMALL, "buf: %zu bytes is too small; need %zu", cap, n + 1);
    mj_buf_free(&b);
    return st;
}
