/*
 * spec_resolve.c — the public spec parsers, which resolve arch=native from the current device
 * and backend=auto from the capability matrix.
 *
 * The spec grammar lives in core/spec.c and knows neither the driver nor the backends' support:
 * both are answered here and handed in, so the canonical form is always explicit.
 */
#include "runtime/spec_resolve.h"

#include <stdio.h>

#include "core/matrix.h"
#include "core/status.h"
#include "core/strbuf.h"
#include "runtime/driver.h"

static void arch_list(mj_buf *b)
{
    for (int a = 0; a < MJ_ARCH_COUNT; a++) mj_buf_printf(b, "%s%s", a ? ", " : "", mj_arch_names[a]);
}

static moejit_status resolve_native(mj_arch *arch)
{
    int major = 0, minor = 0;
    moejit_status st = mj_driver_device_cc(0, &major, &minor);
    mj_buf b = MJ_BUF_INIT;
    arch_list(&b);
    if (st == MOEJIT_OK) {
        if (mj_arch_from_cc(major, minor, arch) == MOEJIT_OK) {
            mj_buf_free(&b);
            return MOEJIT_OK;
        }
        st = mj_fail(MOEJIT_ERR_UNSUPPORTED,
                     "arch: native device 0 has compute capability %d.%d, which moejit does not "
                     "target; give one of %s",
                     major, minor, b.data ? b.data : "");
    } else {
        char why[512];
        snprintf(why, sizeof why, "%s", moejit_last_error());
        st = mj_fail(st, "arch: native needs a CUDA device (%s); give one of %s", why, b.data ? b.data : "");
    }
    mj_buf_free(&b);
    return st;
}

/* Fastest first: Hopper's warpgroup MMA, then warp-level tensor cores, then CUDA cores. */
static const mj_backend auto_order[] = {MJ_BACKEND_WGMMA, MJ_BACKEND_MMA, MJ_BACKEND_SIMT};

/* auto takes only what a backend supports and has validated on hardware: a spec must not
 * start failing (or be refused) because a faster backend built it before it was checked. */
static int auto_accepts(const moejit_spec *s)
{
    return mj_check_support(s) == MOEJIT_OK && mj_check_validated(s, 0) == MOEJIT_OK;
}

moejit_status mj_backend_auto_explain(const moejit_spec *spec, mj_buf *why)
{
    moejit_spec s = *spec;
    for (size_t i = 0; i < sizeof auto_order / sizeof auto_order[0]; i++) {
        s.backend = auto_order[i];
        if (auto_accepts(&s)) {
            if (why) mj_buf_printf(why, "%s%s: the fastest backend that supports and has validated the spec on %s", why->len ? "; " : "",
                                   mj_backend_names[s.backend], mj_arch_names[s.arch]);
            return MOEJIT_OK;
        }
        if (why) mj_buf_printf(why, "%snot %s (%s)", why->len ? "; " : "", mj_backend_names[s.backend], moejit_last_error());
    }
    return mj_fail(MOEJIT_ERR_UNSUPPORTED, "backend: auto found no backend that supports the spec: %s",
                   why && why->data ? why->data : "");
}

static moejit_status resolve_auto(moejit_spec *spec)
{
    moejit_spec s = *spec;
    for (size_t i = 0; i < sizeof auto_order / sizeof auto_order[0]; i++) {
        s.backend = auto_order[i];
        if (auto_accepts(&s)) {
            spec->backend = s.backend;
            return MOEJIT_OK;
        }
    }
    mj_buf why = MJ_BUF_INIT;
    moejit_status st = mj_backend_auto_explain(spec, &why);
    mj_buf_free(&why);
    return st;
}

static const mj_spec_resolvers runtime_resolvers = {resolve_native, resolve_auto};

moejit_status moejit_spec_parse(const char *text, moejit_spec **out)
{
    return mj_spec_parse(text, &runtime_resolvers, out);
}

moejit_status moejit_spec_from_json(const char *json, moejit_spec **out)
{
    return mj_spec_parse_json(json, &runtime_resolvers, out);
}
