/*
 * activation.h — the typed activation value and its descriptor table.
 *
 * A moejit_activation is a plain value (kind + up to three float fields), immutable once a
 * validating constructor has produced it. The descriptor table below is the single source of
 * truth for names, ABI numbers, gating, parameter names, defaults and constraints; the
 * parser, the canonical printer, the code generator and the README all read it.
 */
#ifndef MJ_ACTIVATION_H
#define MJ_ACTIVATION_H

#include <stdint.h>
#include <stddef.h>

#include "moejit.h"
#include "core/strbuf.h"

#define MJ_ACT_MAX_PARAMS 3

/* How a parameter is validated. */
typedef enum mj_param_rule {
    MJ_PARAM_FINITE = 0,   /* any finite float (alpha, beta) */
    MJ_PARAM_POSITIVE = 1  /* finite and > 0 (limits, scales) */
} mj_param_rule;

typedef struct mj_param_desc {
    const char *name;      /* "alpha" */
    float default_value;
    int default_present;   /* 0: the default is "none" (SiTU optional fields) */
    int optional;          /* 1: "none" is an allowed value */
    mj_param_rule rule;
} mj_param_desc;

typedef struct mj_act_desc {
    moejit_act_kind kind;  /* also the ABI integer */
    const char *name;      /* canonical lowercase name: "swiglu", "swiglu_step", ... */
    int gated;             /* 1: consumes the (up, gate) halves of fc1 */
    int n_params;
    mj_param_desc params[MJ_ACT_MAX_PARAMS];
    const char *formula;   /* one line, fp32 math, for docs and generated comments */
} mj_act_desc;

struct moejit_activation {
    moejit_act_kind kind;
    float value[MJ_ACT_MAX_PARAMS]; /* in the descriptor's parameter order; unused = 0 */
    uint8_t present[MJ_ACT_MAX_PARAMS]; /* 0 = "none" (value is then 0) */
};

/* Every user-visible activation, in ABI order. */
extern const mj_act_desc mj_act_table[];
extern const size_t mj_act_table_len;

/* The descriptor of kind, or NULL for a kind that is no user value (5, out of range). */
const mj_act_desc *mj_act_desc_of(moejit_act_kind kind);
const mj_act_desc *mj_act_desc_by_name(const char *name, size_t len);

/* Parses text[0..len) (human or canonical form) into *out without allocating. Errors name
 * the field ("activation.limit: ...") and the allowed values. */
moejit_status mj_activation_parse_n(const char *text, size_t len, moejit_activation *out);
/* Validates every field of a filled value (constructors and the JSON reader use this). */
moejit_status mj_activation_validate(const moejit_activation *act);
/* Appends the canonical text form. */
void mj_activation_format(const moejit_activation *act, mj_buf *b);

/* How a float was read: the value exactly as strtof rounds it, or why it was refused. A value
 * beyond float's range and a nonzero value that rounds to zero are refused, never read as
 * inf or 0, so that a spec is read exactly or not at all. */
typedef enum mj_float_read { MJ_FLOAT_OK = 0, MJ_FLOAT_SYNTAX, MJ_FLOAT_OVERFLOW, MJ_FLOAT_UNDERFLOW } mj_float_read;
/* Reads the whole token [s, s+len) in the C locale (a host may have set a decimal comma). */
mj_float_read mj_parse_float(const char *s, size_t len, float *out);
/* A JSON number (already a double) as a float, with the same refusals; NaN and inf pass
 * through for the caller's own range check. */
mj_float_read mj_float_from_double(double d, float *out);
/* "beyond float range", "underflows to zero", ... */
const char *mj_float_read_name(mj_float_read r);

#endif
