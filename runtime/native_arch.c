/*
 * native_arch.c — the public spec parsers, which resolve arch=native from the current device.
 *
 * The spec grammar lives in core/spec.c and knows nothing of the driver; resolving "native"
 * is a question for the device, so the runtime answers it and hands the answer in.
 */
#include <stdio.h>

#include "core/spec.h"
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

moejit_status moejit_spec_parse(const char *text, moejit_spec **out)
{
    return mj_spec_parse(text, resolve_native, out);
}

moejit_status moejit_spec_from_json(const char *json, moejit_spec **out)
{
    return mj_spec_parse_json(json, resolve_native, out);
}
