/*
 * emit.h — turns a spec into the CUDA source of one translation unit.
 *
 * The source is deterministic: the same spec gives the same bytes on every machine (no
 * time, path, locale or pointer value ever enters it). It opens with a comment holding the
 * canonical spec, defines the specialisation constants (floats as exact hex literals) and
 * includes the embedded template headers, which define the layer's extern "C" kernels.
 */
#ifndef MJ_EMIT_H
#define MJ_EMIT_H

#include "moejit.h"
#include "core/header.h"
#include "core/program.h"
#include "core/spec.h"
#include "core/strbuf.h"

/* Bumped whenever generated code changes for an unchanged spec; part of the cache key. */
#define MJ_GENERATOR_VERSION 1

/* The embedded templates (generated into build/gen/templates_embedded.c). */
extern const mj_header mj_embedded_headers[];
extern const size_t mj_embedded_headers_len;

typedef struct mj_source {
    char *text;           /* owned, NUL-terminated */
    size_t len;
    const char *name;     /* program name for NVRTC, e.g. "moejit_layer.cu" */
    int n_kernels;
    const char *kernel_names[MJ_MAX_KERNELS]; /* static strings, in launch order */
} mj_source;

/* Generates the source for spec (the spec must have passed mj_check_support). */
moejit_status mj_emit(const moejit_spec *spec, mj_source *out);
void mj_source_free(mj_source *src);

#endif
