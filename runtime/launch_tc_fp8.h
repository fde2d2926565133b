/*
 * launch_tc_fp8.h — what an fp8 layer of the tensor-core family (backend=wgmma: e4m3 weights,
 * templates/wgmma_fp8.cuh) adds to the mma family's launch: its argument checks and its
 * workspace regions.
 */
#ifndef MJ_LAUNCH_TC_FP8_H
#define MJ_LAUNCH_TC_FP8_H

#include "core/spec.h"
#include "runtime/launch_common.h"

/* Whether spec's weights are e4m3 (quant=fp8_tensor or fp8_block). */
int mj_tc_is_fp8(const moejit_spec *spec);

/* The shape an fp8 forward needs on the tensor-core backends: H and I multiples of 16
 * (fp8_tensor: 1-byte rows of the TMA boxes, 16 values per producer lane; fp8_block's 128 is
 * launch_check_shape's); its scales are mj_launch_check_format_inputs'. Each refusal names the
 * field. Nothing to check (MOEJIT_OK) for a 16-bit spec. */
moejit_status mj_tc_fp8_check_shape(const moejit_spec *spec, const moejit_moe_args *args);

/* Whether the forward's scatter kernel quantizes x (fp8_act=tensor, on wgmma): it then runs at
 * every T, on at least mj_tc_fp8_x_blocks blocks. */
int mj_tc_fp8_scatter_quantizes_x(const moejit_spec *spec);
int64_t mj_tc_fp8_x_blocks(int64_t T);

/* Appends the fp8 regions to w (after w->total), templates/tc_fp8_quant.cuh and wgmma_fp8.cuh:
 *   fp8_block      xq e4m3 [T, H], xscale fp32 [T, H/128]; interq e4m3 [T·k, I], interscale
 *                  fp32 [T·k, I/128] (also the tall gated path's, which quantizes in GEMM2)
 *   fp8_act=token  xq e4m3 [T, H], xscale fp32 [T]; interscale u32 amax [T·k]
 *   fp8_act=tensor xq e4m3 [T, H] (the scatter kernel's), xscale u32 amax [T] then x's fp32
 *                  scale [1]; interscale u32 amax [1]
 *   fp8_act=static interscale u32 amax [1]
 * Nothing for a 16-bit spec or T = 0. */
void mj_tc_fp8_layout(const moejit_spec *spec, const moejit_moe_args *args, mj_ws_layout *w);

#endif
