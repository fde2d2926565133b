/*
 * This file contains the size checks of the public structs (abi.h) and their initializers.
 */
#include "runtime/abi.h"

#include <string.h>

#include "core/status.h"

/* The first layout of moejit_options: what MOEJIT_OPTIONS_SIZE_V1 must keep meaning. */
typedef struct options_v1 {
    size_t struct_size;
    const char *cache_dir;
    const char *cache_mode;
    int64_t cache_max_bytes;
    double compile_timeout_s;
    int device;
} options_v1;

/* A field appended inside the first layout's tail padding would be garbage from an old caller. */
_Static_assert(MOEJIT_OPTIONS_SIZE_V1 == sizeof(options_v1), "moejit_options: append after the v1 padding");
_Static_assert(MOEJIT_MOE_ARGS_SIZE_V1 <= sizeof(moejit_moe_args), "moejit_moe_args: the v1 layout is a prefix");
_Static_assert(offsetof(moejit_options, struct_size) == 0 && offsetof(moejit_moe_args, struct_size) == 0,
               "struct_size comes first");

moejit_status mj_abi_copy(const char *name, const void *src, size_t min, size_t cur, void *dst)
{
    size_t size;
    memcpy(&size, src, sizeof size);
    if (size < min || size > cur)
        return mj_fail(MOEJIT_ERR_INVALID_ARGUMENT,
                       "%s.struct_size: must be the sizeof(%s) the caller was built with, from %zu (the oldest "
                       "layout) to %zu (this library's); set it with the struct's _INIT macro or _init "
                       "function; got %zu",
                       name, name, min, cur, size);
    memset(dst, 0, cur);
    memcpy(dst, src, size);
    memcpy(dst, &cur, sizeof cur);
    return MOEJIT_OK;
}

moejit_status mj_abi_moe_args(const moejit_moe_args *args, moejit_moe_args *copy, const moejit_moe_args **out)
{
    if (args->struct_size == sizeof *args) {
        *out = args;
        return MOEJIT_OK;
    }
    moejit_status st = mj_abi_copy("moejit_moe_args", args, MOEJIT_MOE_ARGS_SIZE_V1, sizeof *args, copy);
    *out = copy;
    return st;
}

void moejit_options_init(moejit_options *opts)
{
    if (!opts) return;
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
}

void moejit_moe_args_init(moejit_moe_args *args)
{
    if (!args) return;
    memset(args, 0, sizeof *args);
    args->struct_size = sizeof *args;
}
