/*
 * inspect.h — the pieces of `moejit inspect` that live in their own files: explaining a
 * miss (inspect_why.c) and turning a kernel into PTX or SASS (inspect_code.c).
 */
#ifndef MJ_CLI_INSPECT_H
#define MJ_CLI_INSPECT_H

#include "codegen/build_inputs.h"
#include "cache/cache.h"
#include "moejit.h"
#include "core/strbuf.h"

/* `inspect --why SPEC`: the spec's key and preimage against the nearest cache entries. */
int inspect_why(const char *spec_text, int json);

/* PTX of the build inputs, compiled in this process with NVRTC for compute_XX. On failure
 * the error names NVRTC's result and holds its log. */
moejit_status inspect_ptx(const mj_build_inputs *in, mj_buf *ptx);

/* Runs cuobjdump --dump-sass (or nvdisasm -c) on cubin; *tool receives the tool's path
 * (static storage). MOEJIT_ERR_IO with a message naming where it looked when neither
 * exists. */
moejit_status inspect_sass(const void *cubin, size_t len, mj_buf *sass, const char **tool);

#endif
