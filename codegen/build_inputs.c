/*
 * This file contains mj_build_inputs_make: source, options, NVRTC identity and cache key of
 * one spec, computed the same way for the registry and for the CLI.
 */
#include "codegen/build_inputs.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/include_closure.h"
#include "codegen/layer_modules.h"
#include "codegen/nvrtc_compile.h"
#include "core/status.h"

void mj_build_inputs_free(mj_build_inputs *in)
{
    mj_source_free(&in->source);
    free(in->headers);
    free(in->header_sha256);
    mj_buf_free(&in->option_text);
    mj_buf_free(&in->preimage);
    memset(in, 0, sizeof *in);
}

/* The embedded headers are constants of the process, so their digests are computed once:
 * hashing ~160 KB of templates on every key would be most of a disk-cache load's budget. */
static char (*g_header_sha256)[65];
static moejit_status g_header_status = MOEJIT_OK;

static void hash_headers_once(void)
{
    g_header_sha256 = calloc(mj_embedded_headers_len ? mj_embedded_headers_len : 1, sizeof *g_header_sha256);
    if (!g_header_sha256) {
        g_header_status = MOEJIT_ERR_OUT_OF_MEMORY;
        return;
    }
    for (size_t i = 0; i < mj_embedded_headers_len && g_header_status == MOEJIT_OK; i++)
        g_header_status = mj_sha256_hex(mj_embedded_headers[i].data, mj_embedded_headers[i].size,
                                        g_header_sha256[i]);
}

static moejit_status embedded_header_digests(const char (**out)[65])
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, hash_headers_once);
    if (g_header_status != MOEJIT_OK)
        return mj_fail(g_header_status, "build inputs: could not hash the embedded headers");
    *out = (const char (*)[65])g_header_sha256;
    return MOEJIT_OK;
}

moejit_status mj_build_inputs_prewarm(void)
{
    const char (*digests)[65];
    int major, minor;
    char build_id[41];
    moejit_status st = embedded_header_digests(&digests);
    if (st == MOEJIT_OK) st = mj_include_closure_prewarm();
    return st == MOEJIT_OK ? mj_nvrtc_identity(&major, &minor, build_id) : st;
}

/* Fills in->headers with the headers (of h[0..n)) in the include closure of in->source, and
 * *sha256 (owned) with their digests, in the same order; all_sha256 may be NULL (hash here). */
static moejit_status closure_headers(mj_build_inputs *in, const mj_header *h, size_t n,
                                     const char (*all_sha256)[65], char (**sha256)[65])
{
    unsigned char *reached = malloc(n ? n : 1);
    in->headers = calloc(n ? n : 1, sizeof *in->headers);
    *sha256 = calloc(n ? n : 1, sizeof **sha256);
    moejit_status st = reached && in->headers && *sha256
                           ? mj_include_closure(in->source.text, in->source.len, h, n, reached)
                           : mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "build inputs: out of memory");
    in->n_headers = 0;
    for (size_t i = 0; i < n && st == MOEJIT_OK; i++)
        if (reached[i]) {
            if (all_sha256) memcpy((*sha256)[in->n_headers], all_sha256[i], sizeof **sha256);
            else st = mj_sha256_hex(h[i].data, h[i].size, (*sha256)[in->n_headers]);
            in->headers[in->n_headers++] = h[i];
        }
    free(reached);
    return st;
}

moejit_status mj_build_inputs_make(const moejit_spec *spec, mj_build_inputs *in)
{
    return mj_build_inputs_make_module(spec, MJ_LAYER_WHOLE, mj_embedded_headers, mj_embedded_headers_len, in);
}

moejit_status mj_build_inputs_make_with(const moejit_spec *spec, const mj_header *headers,
                                        size_t n_headers, mj_build_inputs *in)
{
    return mj_build_inputs_make_module(spec, MJ_LAYER_WHOLE, headers, n_headers, in);
}

/* Options, NVRTC identity and key of in, whose source and headers (with their digests in
 * in->header_sha256) are set; frees in on failure. */
static moejit_status finish(const moejit_spec *spec, mj_build_inputs *in)
{
    int major = 0, minor = 0;
    char build_id[41] = "unknown";
    mj_nvrtc_options(in->arch, &in->option_text, in->options, MJ_MAX_OPTIONS, &in->n_options);
    moejit_status st = mj_buf_ok(&in->option_text) ? MOEJIT_OK : mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "build inputs: out of memory");
    if (st == MOEJIT_OK) st = mj_nvrtc_identity(&major, &minor, build_id);
    if (st == MOEJIT_OK) {
        mj_key_inputs k = {
            .generator_version = MJ_GENERATOR_VERSION,
            .canonical_spec = spec->canonical,
            .source = in->source.text,
            .source_len = in->source.len,
            .headers = in->headers,
            .n_headers = in->n_headers,
            .header_sha256 = (const char (*)[65])in->header_sha256,
            .options = in->options,
            .n_options = in->n_options,
            .arch = in->arch,
            .nvrtc_major = major,
            .nvrtc_minor = minor,
            .nvrtc_build_id = build_id,
        };
        st = mj_key_compute(&k, &in->key, &in->preimage);
    }
    if (st != MOEJIT_OK) mj_build_inputs_free(in);
    return st;
}

moejit_status mj_build_inputs_make_module(const moejit_spec *spec, int module, const mj_header *headers,
                                          size_t n_headers, mj_build_inputs *in)
{
    memset(in, 0, sizeof *in);
    in->arch = mj_arch_target(spec->arch);
    moejit_status st = mj_emit_module(spec, module, &in->source);
    const char (*all_sha256)[65] = NULL;
    int embedded = headers == mj_embedded_headers && n_headers == mj_embedded_headers_len;
    if (st == MOEJIT_OK && embedded) st = embedded_header_digests(&all_sha256);
    if (st == MOEJIT_OK) st = closure_headers(in, headers, n_headers, all_sha256, &in->header_sha256);
    if (st != MOEJIT_OK) {
        mj_build_inputs_free(in);
        return st;
    }
    return finish(spec, in);
}

moejit_status mj_build_inputs_for_module(const mj_build_inputs *whole, const moejit_spec *spec, int module,
                                         mj_build_inputs *in)
{
    memset(in, 0, sizeof *in);
    in->arch = whole->arch;
    const size_t n = whole->n_headers;
    in->headers = malloc((n ? n : 1) * sizeof *in->headers);
    in->header_sha256 = malloc((n ? n : 1) * sizeof *in->header_sha256);
    moejit_status st = in->headers && in->header_sha256 ? mj_module_source(spec, module, &whole->source, &in->source)
                                                         : mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "build inputs: out of memory");
    if (st != MOEJIT_OK) {
        mj_build_inputs_free(in);
        return st;
    }
    /* the module's mask is a define, not an include: its closure is the layer's */
    if (n) memcpy(in->headers, whole->headers, n * sizeof *in->headers);
    if (n) memcpy(in->header_sha256, whole->header_sha256, n * sizeof *in->header_sha256);
    in->n_headers = n;
    return finish(spec, in);
}

moejit_status mj_build_inputs_compile(const mj_build_inputs *in, const char *canonical, double timeout_s,
                                      const char *worker, mj_program *out)
{
    mj_compile_request req = {
        .source = &in->source,
        .arch = in->arch,
        .headers = mj_embedded_headers,
        .n_headers = mj_embedded_headers_len,
        .timeout_s = timeout_s,
        .worker = worker,
    };
    moejit_status st = mj_nvrtc_compile(&req, out);
    if (st == MOEJIT_OK && !out->canonical_spec && !(out->canonical_spec = strdup(canonical)))
        st = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    return st;
}
