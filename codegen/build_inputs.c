/*
 * This file contains mj_build_inputs_make: source, options, NVRTC identity and cache key of
 * one spec, computed the same way for the registry and for the CLI.
 */
#include "build_inputs.h"

#include <string.h>

#include "nvrtc_compile.h"
#include "status.h"

void mj_build_inputs_free(mj_build_inputs *in)
{
    mj_source_free(&in->source);
    mj_buf_free(&in->option_text);
    mj_buf_free(&in->preimage);
    memset(in, 0, sizeof *in);
}

moejit_status mj_build_inputs_make(const moejit_spec *spec, mj_build_inputs *in)
{
    memset(in, 0, sizeof *in);
    in->arch = mj_arch_target(spec->arch);
    int major = 0, minor = 0;
    char build_id[41] = "unknown";
    moejit_status st = mj_emit(spec, &in->source);
    if (st == MOEJIT_OK) {
        mj_nvrtc_options(in->arch, &in->option_text, in->options, MJ_MAX_OPTIONS, &in->n_options);
        if (!mj_buf_ok(&in->option_text))
            st = mj_fail(MOEJIT_ERR_OUT_OF_MEMORY, "build inputs: out of memory");
    }
    if (st == MOEJIT_OK) st = mj_nvrtc_identity(&major, &minor, build_id);
    if (st == MOEJIT_OK) {
        mj_key_inputs k = {
            .generator_version = MJ_GENERATOR_VERSION,
            .canonical_spec = spec->canonical,
            .source = in->source.text,
            .source_len = in->source.len,
            .headers = mj_embedded_headers,
            .n_headers = mj_embedded_headers_len,
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
