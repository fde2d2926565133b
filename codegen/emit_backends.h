/*
 * emit_backends.h — code generators of the backends other than simt (emit.c keeps simt and
 * the dispatch on spec->backend).
 *
 * Each generator has mj_emit's contract (emit.h): deterministic bytes for a spec that passed
 * mj_check_support, the canonical spec in the opening comment, constants as exact literals,
 * the kernel names in the order of the backend's launch table.
 */
#ifndef MJ_EMIT_BACKENDS_H
#define MJ_EMIT_BACKENDS_H

#include "codegen/emit.h"

/* backend=mma: the instantiation of templates/mma_layer.cuh (kernel table of
 * templates/common/mma_params.h: MJ_MMA_NUM_KERNELS entries). Refuses, naming the field,
 * anything the mma templates cannot build: quant other than bf16/fp16, routing other than
 * softmax_topk/renormalize/precomputed, w1_layout other than up_gate, bias other than none,
 * logits other than fp32/bf16/fp16, a tile other than auto/large/small. */
moejit_status mj_emit_mma(const moejit_spec *spec, mj_source *out);

/* backend=wgmma: the instantiation of templates/wgmma_layer.cuh (mma's kernel table, with
 * the large-batch GEMMs on warpgroup MMA). Refuses what mj_emit_mma refuses, and any arch
 * other than sm_90a, naming the field. */
moejit_status mj_emit_wgmma(const moejit_spec *spec, mj_source *out);

/* What sets one mma-family source apart from another: the wgmma layer reads mma's constants,
 * so emit_mma.c writes both from one of these. */
typedef struct mj_mma_flavour {
    mj_backend backend;       /* MJ_BACKEND_MMA or MJ_BACKEND_WGMMA: named in messages and header */
    int sm90a_only;           /* refuse every arch but sm_90a (wgmma.mma_async, setmaxnreg) */
    const char *tile_note;    /* the comment after "// tile=<tile>: " */
    const char *layer_header; /* the template included last, e.g. "mma_layer.cuh" */
    const char *const *kernel_names; /* the layer's kernels, in launch-table order */
    int n_kernels;
    int has_tall_and_pair;    /* the tile=tall and tile=pair paths exist (wgmma) */
    int has_fp8;              /* quant=fp8_tensor and fp8_block build (wgmma: templates/wgmma_fp8.cuh) */
    const char *w4_layer_header; /* the template included last for 4-bit weights (w4a16, mxfp4) */
} mj_mma_flavour;

/* mj_emit_mma's contract and refusals for the flavour's backend (and arch, if sm90a_only). */
moejit_status mj_emit_mma_flavour(const moejit_spec *spec, const mj_mma_flavour *f, mj_source *out);

#endif
