/*
 * launch.h — running a loaded layer: the workspace layout and the sequence of launches.
 *
 * The launch sequence belongs with the templates it launches (their kernel order and
 * parameter struct, templates/common/params.h); it allocates nothing, never synchronises and
 * uses only stream-ordered driver calls, so a whole forward can be captured in a CUDA graph.
 */
#ifndef MJ_LAUNCH_H
#define MJ_LAUNCH_H

#include "runtime/driver.h"
#include "runtime/loader.h"
#include "core/settings.h"
#include "core/spec.h"

/* The launch-time settings of a forward (core/settings.h): a kernel carries its context's, so
 * nothing a launch reads is process-wide. */
typedef struct mj_launch_knobs {
    int decode; /* MJ_DECODE_* */
    int pdl;    /* MJ_PDL_* */
} mj_launch_knobs;

/* The defaults, for launches without a context (NULL knobs mean the same). */
#define MJ_LAUNCH_KNOBS_DEFAULT ((mj_launch_knobs){MJ_DECODE_AUTO, MJ_PDL_ALL})

/* Validates args' shape against spec (pinned dims, multiples of 8, E <= 512, k <= 32 ...),
 * naming the field on error. Pointers are not inspected. */

moejit_status mj_launch_workspace_size(const moejit_spec *spec, const moejit_moe_args *args,
                                       size_t *bytes);

/* Checks args (shape and required pointers) and enqueues the layer on stream, with the
 * decode mode and PDL of knobs (NULL: the defaults). */
moejit_status mj_launch_forward(const mj_driver *d, const moejit_spec *spec, const mj_module *m,
                                const moejit_moe_args *args, void *workspace,
                                size_t workspace_bytes, CUstream stream, const mj_launch_knobs *knobs);

#endif
