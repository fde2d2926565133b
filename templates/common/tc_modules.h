/*
 * This file contains the split of a tensor-core layer (mma, wgmma) into modules: groups of its
 * kernels compiled, cached and loaded apart, so that a forward waits only for the kernels of
 * the path it takes (runtime/path_modules.c says which modules a forward needs). Plain C,
 * included by the templates (NVRTC, C++17) and by the host (C11).
 *
 * The generated source of one module defines MJ_TC_MODULES (a mask of MJ_TC_BIT_* bits) before
 * the layer header, and each entry kernel is compiled only where one of its modules' bits is
 * set; a source without the define (moejit inspect --bundle) compiles every kernel.
 *
 *   route               route and scatter (every path past decode)
 *   finalize            finalize (every path but batch 1's GEMM2 + finalize and the persistent layer)
 *   small               the decode chain's offsets, GEMM1 and GEMM2
 *   fused               the fused decode routing (T <= 16)
 *   routed              batch 1's GEMM1 that routes for itself
 *   t1, t1_shallow      batch 1's GEMM2 + finalize (k = 8, k = 6)
 *   persistent(_shallow) the persistent decode layer with its reset kernel, deep or shallow blocks
 *   large               the large path's offsets and GEMMs
 *   tall, pair, short   wgmma's other prefill paths: their offsets and GEMMs (pair: the large
 *                       offsets too, which it takes where its pair order does not pay)
 *
 * One kernel costs 0.1-0.9 CPU-s to compile and a module's fixed cost is ~0.07 s, so modules
 * are as fine as the paths allow; the reset kernel (0.09 s) is in both persistent modules, the
 * large offsets kernel (0.18 s) in the large and the pair modules.
 */
#ifndef MJ_TEMPLATES_COMMON_TC_MODULES_H
#define MJ_TEMPLATES_COMMON_TC_MODULES_H

enum {
    MJ_TC_MOD_ROUTE = 0,
    MJ_TC_MOD_FINALIZE,
    MJ_TC_MOD_SMALL,
    MJ_TC_MOD_FUSED,
    MJ_TC_MOD_ROUTED,
    MJ_TC_MOD_T1,
    MJ_TC_MOD_T1_SHALLOW,
    MJ_TC_MOD_PERSISTENT,
    MJ_TC_MOD_PERSISTENT_SHALLOW,
    MJ_TC_MOD_LARGE,
    MJ_TC_MOD_MMA_COUNT, /* the mma layer's modules are the ones before this */
    MJ_TC_MOD_TALL = MJ_TC_MOD_MMA_COUNT,
    MJ_TC_MOD_PAIR,
    MJ_TC_MOD_SHORT,
    MJ_TC_MOD_COUNT
};
#define MJ_TC_MODULE_NAME_LIST                                                                                  \
    "route", "finalize", "small", "fused", "routed", "t1", "t1_shallow", "persistent", "persistent_shallow", "large", \
        "tall", "pair", "short"

/* Bit m is module m (the enum above), for the preprocessor. */
#define MJ_TC_BIT_ROUTE 0x0001
#define MJ_TC_BIT_FINALIZE 0x0002
#define MJ_TC_BIT_SMALL 0x0004
#define MJ_TC_BIT_FUSED 0x0008
#define MJ_TC_BIT_ROUTED 0x0010
#define MJ_TC_BIT_T1 0x0020
#define MJ_TC_BIT_T1_SHALLOW 0x0040
#define MJ_TC_BIT_PERSISTENT 0x0080
#define MJ_TC_BIT_PERSISTENT_SHALLOW 0x0100
#define MJ_TC_BIT_LARGE 0x0200
#define MJ_TC_BIT_TALL 0x0400
#define MJ_TC_BIT_PAIR 0x0800
#define MJ_TC_BIT_SHORT 0x1000
#define MJ_TC_MODULES_ALL 0x1fff

/* The modules (a mask) of each kernel of the wgmma table (mma's: its first MJ_MMA_NUM_KERNELS
 * entries), in launch-table order (common/mma_params.h, common/wgmma_params.h). */
#define MJ_TC_KERNEL_MODULES_LIST                                                                              \
    MJ_TC_BIT_ROUTE, MJ_TC_BIT_LARGE | MJ_TC_BIT_PAIR, MJ_TC_BIT_ROUTE, MJ_TC_BIT_LARGE, MJ_TC_BIT_LARGE,        \
        MJ_TC_BIT_FINALIZE,                                                                                    \
        MJ_TC_BIT_SMALL, MJ_TC_BIT_SMALL, MJ_TC_BIT_SMALL, MJ_TC_BIT_FUSED, MJ_TC_BIT_ROUTED, MJ_TC_BIT_T1,      \
        MJ_TC_BIT_T1_SHALLOW, MJ_TC_BIT_PERSISTENT | MJ_TC_BIT_PERSISTENT_SHALLOW, MJ_TC_BIT_PERSISTENT,         \
        MJ_TC_BIT_PERSISTENT_SHALLOW, MJ_TC_BIT_TALL, MJ_TC_BIT_TALL, MJ_TC_BIT_TALL, MJ_TC_BIT_PAIR,            \
        MJ_TC_BIT_PAIR, MJ_TC_BIT_PAIR, MJ_TC_BIT_SHORT, MJ_TC_BIT_SHORT, MJ_TC_BIT_SHORT

#ifndef MJ_TC_MODULES
#define MJ_TC_MODULES MJ_TC_MODULES_ALL
#endif
/* Whether this compile builds a kernel of the modules in mask. */
#define MJ_TC_BUILDS(mask) ((MJ_TC_MODULES) & (mask))

#endif
