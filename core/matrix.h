/*
 * matrix.h — what each backend supports, declared as static data.
 *
 * Each backend is one row of mj_backend_caps: bit masks over the spec enums (and over
 * activation ABI numbers). Nothing has to be constructed to read it, so the CLI's
 * `moejit matrix`, the README's support table and moejit_check_support() all read the same
 * declaration, and a test fails when the README drifts from it.
 *
 * Each field has two masks: the values the backend builds (code generation, templates and
 * launcher handle them), and of those the values validated on hardware (run against the
 * float64 reference on a GPU). A spec is validated when every field's value is; the runtime
 * refuses an unvalidated one unless allowed (mj_check_validated).
 */
#ifndef MJ_MATRIX_H
#define MJ_MATRIX_H

#include <stdint.h>

#include "core/spec.h"

#define MJ_BIT(x) (1u << (unsigned)(x))

/* One mask per spec field. */
typedef struct mj_cap_masks {
    uint32_t quants;           /* MJ_BIT(mj_quant) */
    uint32_t dtypes;           /* MJ_BIT(mj_dtype) for x/out */
    uint32_t acts;             /* MJ_BIT(moejit_act_kind) */
    uint32_t archs;            /* MJ_BIT(mj_arch) */
    uint32_t routings;         /* MJ_BIT(mj_routing) */
    uint32_t w1_layouts;       /* MJ_BIT(mj_w1_layout) */
    uint32_t biases;           /* MJ_BIT(mj_bias) */
    uint32_t logits_dtypes;    /* MJ_BIT(mj_dtype) */
    uint32_t act_overrides;    /* MJ_BIT(mj_act_overrides) */
} mj_cap_masks;

typedef struct mj_backend_caps {
    mj_backend backend;
    const char *summary;       /* one line for the matrix: what the backend is */
    mj_cap_masks built;        /* what the backend builds */
    mj_cap_masks validated;    /* of those, what has run against the reference on hardware */
} mj_backend_caps;

extern const mj_backend_caps mj_backend_table[];
extern const size_t mj_backend_table_len;

/* A table of rows: the backends' own (mj_caps), or another one the checks and printers are
 * tested on (a value built but not yet validated exists only between a build and its GPU run). */
typedef struct mj_caps_table {
    const mj_backend_caps *rows;
    size_t n;
} mj_caps_table;
extern const mj_caps_table mj_caps;

const mj_backend_caps *mj_backend_caps_of(mj_backend backend);

/* Checks every field of spec against its backend's row (and cross-field rules such as
 * dtype == quant for bf16/fp16). On failure: MOEJIT_ERR_UNSUPPORTED and a message naming
 * the field and listing the supported values. */
moejit_status mj_check_support(const moejit_spec *spec);

/* The rules the per-field masks cannot express (mj_check_support applies them last): the
 * wgmma backend's fp8 layers take w1_layout=up_gate, bias=none, act_overrides=none (the 4-bit
 * layers take them all). MOEJIT_ERR_UNSUPPORTED naming the field and its value. */
moejit_status mj_check_combinations(const moejit_spec *spec);

/* Refuses (MOEJIT_ERR_UNSUPPORTED) a spec that needs a value its backend builds but has not
 * validated on hardware, naming the backend, the field, the value and the setting that allows
 * it, unless allow_unvalidated. Values the backend does not build are mj_check_support's to
 * refuse: this check passes them. */
moejit_status mj_check_validated(const moejit_spec *spec, int allow_unvalidated);
moejit_status mj_check_validated_in(const mj_caps_table *t, const moejit_spec *spec, int allow_unvalidated);

/* Appends the support matrix: format "text", "markdown" or "json". A value built but not
 * validated is marked: a trailing '*' in text and markdown (with a legend line), and in
 * JSON listed again under the backend's "unvalidated" object. */
moejit_status mj_matrix_format(const char *format, mj_buf *b);
moejit_status mj_matrix_format_in(const mj_caps_table *t, const char *format, mj_buf *b);

#endif
