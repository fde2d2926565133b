/*
 * launch_common.h — what the launchers of every backend (launch.c for simt, launch_mma.c,
 * launch_wgmma.c) do alike: the workspace regions they share and their 256-byte alignment,
 * the checks of the workspace a caller hands over, and one kernel launch with an error that
 * names the kernel.
 */
#ifndef MJ_LAUNCH_COMMON_H
#define MJ_LAUNCH_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "templates/common/params.h"
#include "runtime/driver.h"
#include "runtime/loader.h"
#include "core/settings.h"
#include "core/spec.h"

/* Every workspace region starts on this boundary (and the workspace itself must). */
#define MJ_WS_ALIGN 256

/* Byte offsets of the workspace regions (P = T·k; see launch.c and launch_mma.c for their
 * element types). The fp8 regions are simt's and stay 0 where a layout has none. */
typedef struct mj_ws_layout {
    size_t ids, weights, counters, offsets, tile_offsets, tiles, rows, inter, y;
    size_t xq, xscale, interq, interscale; /* fp8 only (0 otherwise) */
    size_t total;
} mj_ws_layout;

size_t mj_launch_align_up(size_t v);

/* E_local: num_local_experts, where 0 means every expert (moejit.h). */
int64_t mj_launch_local_experts(const moejit_moe_args *a);

/* int32 words of the route and scatter counters: MJ_ROUTE_COUNT_COPIES copies of the rows
 * per local expert (common/params.h), then the scatter cursors; zeroed before each forward
 * that routes through them. */
size_t mj_launch_counter_words(int64_t e_local);

/* The regions every layer has, in order: ids, weights, counters (mj_launch_counter_words
 * int32 plus extra_counters words zeroed with them), offsets, tile_offsets, tiles (the
 * row-tile table: 16 bytes per row tile of the smallest BLOCK_M), rows, inter, y (y_copies
 * copies of [P, H] of y_elem bytes each: simt's fp32 y is 1 x 4, the tensor-core layers' y in
 * the dtype 1 x 2, a split decode GEMM2's fp32 partial sums splits x 4); total is the end of
 * y. All zero for T = 0. The shape must have passed mj_launch_check_shape (so every product
 * fits in 64 bits: P < 2^31, H, I <= 2^20, y_copies <= MJ_MMA_SPLIT_MAX). */
void mj_launch_layout(const moejit_spec *spec, const moejit_moe_args *a, size_t extra_counters, int y_copies,
                      size_t y_elem, mj_ws_layout *w);

/* workspace_bytes against total, then, where T > 0, the workspace pointer (non-NULL and
 * aligned). OK with T = 0 means there is nothing to launch. */
moejit_status mj_launch_check_workspace(size_t total, const moejit_moe_args *a, const void *workspace,
                                        size_t workspace_bytes);

/* Fills p from scratch: every tensor of args, the regions of w inside workspace (those a
 * layout has; ws_amax is simt's to set), and the shape, with max_tiles row tiles. */
void mj_launch_fill_params(const moejit_moe_args *args, const mj_ws_layout *w, void *workspace, int64_t max_tiles,
                           mj_layer_params *p);

/* Which of a tensor-core forward's kernels are programmatic dependent launches on sm_90+
 * (mj_launch_knobs.pdl, which a context takes from $MOEJIT_PDL; MJ_PDL_* of core/settings.h):
 *   MJ_PDL_ALL    "1" or unset: every kernel, the forward's first too, so that its blocks are
 *                 resident and waiting when whatever ran before it on the stream completes
 *                 (the launch latency of the layer's first kernel is hidden when the kernel
 *                 before it triggers early, as every moejit kernel does; against one that
 *                 does not, the launch behaves as a plain one)
 *   MJ_PDL_INNER  "inner": every kernel but the forward's first (the A/B switch of the
 *                 benchmarks for the above)
 *   MJ_PDL_OFF    "0": none (an escape hatch for a driver or tool that mishandles PDL)
 * Every kernel executes griddepcontrol.wait before it touches the workspace or an input that
 * the kernels before it may still be writing (templates/common/grid_dep.cuh says what little
 * comes before), so the three are the same computation. */

/* Launch of kernel `index` of m on a (gx, gy) grid of 1-D blocks; a failure names the
 * kernel. programmatic != 0: cuLaunchKernelEx with programmatic stream serialization
 * (programmatic dependent launch, sm_90+): the kernel may start while the previous kernel
 * in the stream still runs, once every block of that kernel has executed
 * griddepcontrol.launch_dependents, and must execute griddepcontrol.wait before it touches
 * anything the earlier kernels write or read (templates/common/grid_dep.cuh). Stream capture
 * keeps the relation as a programmatic graph edge. */
moejit_status mj_launch_kernel(const mj_driver *d, const mj_module *m, int index, const char *name, unsigned gx,
                               unsigned gy, unsigned block, unsigned smem, CUstream stream, void **params,
                               int programmatic);

#endif
