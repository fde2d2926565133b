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

#include "common/wgmma_params.h"
#include "emit_backends.h"

moejit_status mj_emit_wgmma(const moejit_spec *spec, mj_source *out)
{
    char note[160];
    snprintf(note, sizeof note,
             "the wgmma GEMMs (%dx%dx%d, %d stages) and mma's decode path are both compiled; the "
             "launcher picks per forward",
             MJ_WGMMA_BM, MJ_WGMMA_BN, MJ_WGMMA_BK, MJ_WGMMA_STAGES);
    const mj_mma_flavour wgmma = {MJ_BACKEND_WGMMA, 1, note, "wgmma_layer.cuh"};
    return mj_emit_mma_flavour(spec, &wgmma, out);
}
