/*
 * This file contains the code generator of the `wgmma` backend: a spec becomes a short
 * instantiation of templates/wgmma_layer.cuh — a comment with the canonical spec and the
 * kernel list, the constants of namespace mj::cfg (the names mma_layer.cuh reads, so act.cuh,
 * route.cuh and mma's decode path serve unchanged), then one include.
 *
 * The wgmma layer is sm_90a only (wgmma.mma_async and setmaxnreg exist on no other target),
 * so any other arch is refused (naming it) before NVRTC would fail on the PTX. The
 * kernel table is mma's (common/mma_params.h); the spec's tile field (auto, large, small) has
 * mma's meaning: the launcher picks the path per forward. The bytes depend only on the spec
 * and the versions in the header comment.
 *
 * The source is mma's but for that arch rule, the tile comment and the layer header, so
 * emit_mma.c writes it, checks included, from the mj_mma_flavour defined here.
 */
#include <stdio.h>

#include "templates/common/mma_params.h"
#include "templates/common/wgmma_params.h"
#include "core/program.h"
#include "codegen/emit_backends.h"

/* mma's kernel table, then the tall, pair and short kernels */
static const char *const kernel_names[MJ_WGMMA_NUM_KERNELS] = {MJ_MMA_KERNEL_NAME_LIST,
                                                               MJ_WGMMA_TALL_KERNEL_NAME_LIST};
_Static_assert((int)MJ_WGMMA_K_EXPERT_OFFSETS_TALL == (int)MJ_MMA_NUM_KERNELS, "the tall kernels follow the mma table");
_Static_assert(MJ_WGMMA_NUM_KERNELS <= MJ_MAX_KERNELS, "the wgmma layer must fit in mj_program.kernels");

moejit_status mj_emit_wgmma(const moejit_spec *spec, mj_source *out)
{
    char note[240];
    snprintf(note, sizeof note,
             "the wgmma GEMMs (large %dx%dx%d, tall %dx%dx%d, pair: large in clusters of %d, %d stages; "
             "short %dx%dx%d, %d stages) and mma's decode path are all compiled; the launcher picks per forward",
             MJ_WGMMA_BM, MJ_WGMMA_BN, MJ_WGMMA_BK, MJ_WGMMA_TALL_BM, MJ_WGMMA_TALL_BN, MJ_WGMMA_BK,
             MJ_WGMMA_PAIR_CTAS, MJ_WGMMA_STAGES, MJ_WGMMA_SHORT_BM, MJ_WGMMA_SHORT_BN, MJ_WGMMA_BK,
             MJ_WGMMA_SHORT_STAGES);
    const mj_mma_flavour wgmma = {MJ_BACKEND_WGMMA, 1, note, "wgmma_layer.cuh", kernel_names, MJ_WGMMA_NUM_KERNELS, 1, 1,
                                  "wgmma_w4_layer.cuh"};
    return mj_emit_mma_flavour(spec, &wgmma, out);
}
