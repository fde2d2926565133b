/*
 * args_check.h — the rules a forward's arguments must meet on every backend: sizes,
 * expert-parallel ranges, the weight format's scale groups, the routing method's rules on E
 * and k, the dimensions a spec pins, and which format inputs (scales, zero points, biases,
 * overrides) the spec needs.
 */
#ifndef MJ_ARGS_CHECK_H
#define MJ_ARGS_CHECK_H

#include <stddef.h>

#include "core/spec.h"
#include "moejit.h"

/* Whether a spec uses a tensor argument. */
enum { MJ_ARG_REFUSED = 0, MJ_ARG_REQUIRED = 1, MJ_ARG_OPTIONAL = 2, MJ_ARG_IGNORED = 3 };

/* One tensor argument: its need, its alignment, and the sentence that explains a refusal or
 * a requirement. */
typedef struct mj_ptr_rule {
    const void *p;
    const char *name;
    int need;
    size_t align;
    const char *why;
} mj_ptr_rule;

/* The first rule a pointer breaks (given where refused, NULL where required, misaligned),
 * as MOEJIT_ERR_INVALID_ARGUMENT naming args.NAME. */
moejit_status mj_check_ptr_rules(const mj_ptr_rule *r, size_t n);

moejit_status mj_launch_check_shape(const moejit_spec *spec, const moejit_moe_args *args);

/* Scales, zero points, biases, the selection bias, the static x scale and the activation
 * overrides: each required exactly when the spec uses it, refused otherwise (an input the
 * layer would silently ignore is an error), each with its alignment. */
moejit_status mj_launch_check_format_inputs(const moejit_spec *spec, const moejit_moe_args *args);

/* The shape a 4-bit layer (w4a16, mxfp4) needs on the tensor-core backends: rows of packed
 * weights that keep their 16-byte chunks aligned (H and I multiples of 32); its scales and zero
 * points are mj_launch_check_format_inputs'. Errors name the field. OK for any other quant. */
moejit_status mj_launch_check_w4_shape(const moejit_spec *spec, const moejit_moe_args *args);

#endif
