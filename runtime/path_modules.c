/*
 * This file contains the map from a forward's plan to the modules of a tensor-core layer its
 * launches come from (path_modules.h), kept next to the launch sequence it mirrors
 * (launch_mma.c: mj_launch_mma_enqueue) so that the two launch and load the same kernels.
 */
#include "runtime/path_modules.h"

#include <stdio.h>
#include <string.h>

#include "codegen/layer_modules.h"
#include "templates/common/mma_params.h"
#include "templates/common/tc_modules.h"

unsigned mj_path_modules_of_plan(const moejit_spec *spec, const mj_gemm_plan *p)
{
    if (p->persistent_splits) /* the reset kernel is in both persistent modules */
        return p->persistent_shallow ? MJ_TC_BIT_PERSISTENT_SHALLOW : MJ_TC_BIT_PERSISTENT;
    const unsigned gemms = mj_layer_kernel_modules(spec, p->k_gemm1) | mj_layer_kernel_modules(spec, p->k_gemm2);
    unsigned mask = gemms;
    if (!p->routed_gemm1 && p->fused_route) {
        mask |= MJ_TC_BIT_FUSED;
    } else if (!p->routed_gemm1) { /* route and scatter, and the offsets from a module the GEMMs need anyway */
        const unsigned offsets = mj_layer_kernel_modules(spec, p->k_offsets);
        mask |= MJ_TC_BIT_ROUTE | (offsets & gemms ? offsets & gemms : offsets);
    }
    if (!p->t1_fused) mask |= MJ_TC_BIT_FINALIZE;
    return mask;
}

unsigned mj_path_modules_needed(const moejit_spec *spec, const moejit_moe_args *args, int sms, int decode)
{
    if (args->num_tokens <= 0) return 0;
    mj_gemm_plan plan;
    mj_gemm_plan_make(spec, args, sms, decode, &plan);
    return mj_path_modules_of_plan(spec, &plan);
}

void mj_path_modules_describe(unsigned mask, char *buf, size_t cap)
{
    size_t at = 0;
    if (cap) buf[0] = '\0';
    for (int m = 0; m < MJ_TC_MOD_COUNT && at < cap; m++)
        if (mask & (1u << m)) {
            int n = snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", mj_layer_module_name(m));
            at += n > 0 ? (size_t)n : 0;
        }
}
