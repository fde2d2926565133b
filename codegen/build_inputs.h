/*
 * build_inputs.h — everything that decides the compiled binary of one spec: the generated
 * source, the NVRTC options, NVRTC's identity, and the cache key with its preimage.
 *
 * The registry builds these on a miss, and the CLI (warm --dry-run, inspect --why) builds
 * them to ask the cache whether a kernel is present without compiling it; one function
 * serves both so the two can never disagree on a key.
 */
#ifndef MJ_BUILD_INPUTS_H
#define MJ_BUILD_INPUTS_H

#include "codegen/emit.h"
#include "core/program.h"
#include "core/key.h"
#include "core/spec.h"
#include "core/strbuf.h"

/* Room for mj_nvrtc_options' output; it writes far fewer. */
#define MJ_MAX_OPTIONS 32

typedef struct mj_build_inputs {
    mj_source source;              /* the generated translation unit */
    mj_header *headers;            /* the headers the source's includes reach (an owned array
                                      of entries; the texts are not copied), in their order: what the compile
                                      reads and the key hashes */
    size_t n_headers;
    char (*header_sha256)[65];     /* owned: the digests of headers[], in their order */
    const char *arch;              /* NVRTC target, static */
    const char *options[MJ_MAX_OPTIONS];
    int n_options;
    mj_buf option_text;            /* storage behind options[] */
    mj_key key;
    mj_buf preimage;               /* the key's preimage text */
} mj_build_inputs;

/* Fills in for spec (which must have passed mj_check_support). On failure nothing needs
 * freeing; on success release with mj_build_inputs_free. */
moejit_status mj_build_inputs_make(const moejit_spec *spec, mj_build_inputs *in);
/* As mj_build_inputs_make, against another header set than the embedded templates (tests
 * simulate an edited template with it); in->headers then point into headers. */
moejit_status mj_build_inputs_make_with(const moejit_spec *spec, const mj_header *headers,
                                        size_t n_headers, mj_build_inputs *in);
/* As mj_build_inputs_make_with, for one module of a tensor-core layer (codegen/layer_modules.h;
 * MJ_LAYER_WHOLE: the whole layer, as mj_build_inputs_make_with). */
moejit_status mj_build_inputs_make_module(const moejit_spec *spec, int module, const mj_header *headers,
                                          size_t n_headers, mj_build_inputs *in);
/* The inputs of one module of whole's layer (whole: the layer's, from the embedded headers):
 * its source derived from whole's, its headers and digests whole's, without emitting or
 * scanning again; the same key as mj_build_inputs_make_module. */
moejit_status mj_build_inputs_for_module(const mj_build_inputs *whole, const moejit_spec *spec, int module,
                                         mj_build_inputs *in);
void mj_build_inputs_free(mj_build_inputs *in);
/* Compiles in's source for its arch against the embedded headers in a worker process
 * (nvrtc_compile.h: timeout_s, worker), and names the program canonical where the compile
 * left its canonical spec unset: the build every cache lookup hands mj_cache_get_or_build. */
moejit_status mj_build_inputs_compile(const mj_build_inputs *in, const char *canonical, double timeout_s,
                                      const char *worker, mj_program *out);
/* Computes the process-wide constants every key needs (the embedded headers' digests and
 * include graph, NVRTC's identity) now, so that a context's first lookup does not pay for them. */
moejit_status mj_build_inputs_prewarm(void);

#endif
