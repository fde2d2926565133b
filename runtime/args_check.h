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

#endif
