/*
 * spec_resolve.h — how backend=auto chooses, for `moejit inspect` to say what it chose and why.
 */
#ifndef MJ_SPEC_RESOLVE_H
#define MJ_SPEC_RESOLVE_H

#include "core/spec.h"
#include "core/strbuf.h"

/* Appends to why, for each backend in auto's order of preference, why it was passed over and
 * which one was chosen. MOEJIT_ERR_UNSUPPORTED when no backend supports the spec. */
moejit_status mj_backend_auto_explain(const moejit_spec *spec, mj_buf *why);

#endif
