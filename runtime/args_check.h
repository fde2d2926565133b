/*
 * args_check.h — the shape rules a forward's arguments must meet on every backend: sizes,
 * expert-parallel ranges, the weight format's scale groups, the routing method's rules on E
 * and k, and the dimensions a spec pins.
 */
#ifndef MJ_ARGS_CHECK_H
#define MJ_ARGS_CHECK_H

#include "core/spec.h"
#include "moejit.h"

moejit_status mj_launch_check_shape(const moejit_spec *spec, const moejit_moe_args *args);

/* The scales and zero points of a 4-bit layer (w4a16, mxfp4) on the tensor-core backends:
 * given exactly where the format has them, each aligned to its element, and rows of packed
 * weights that keep their 16-byte chunks aligned (H and I multiples of 32). Errors name the
 * field. OK for any other quant. */
moejit_status mj_launch_check_w4_inputs(const moejit_spec *spec, const moejit_moe_args *args);

#endif
