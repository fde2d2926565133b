/*
 * abi.h — the size checks of the public structs a caller fills (moejit.h: moejit_options and
 * moejit_moe_args start with struct_size): any size from the oldest layout to this library's,
 * the fields past it taken as their (zero) defaults.
 */
#ifndef MJ_ABI_H
#define MJ_ABI_H

#include <stddef.h>

#include "moejit.h"

/* Copies the caller's struct of struct_size bytes (its first field) into dst (`cur` bytes,
 * zeroed first, struct_size set to cur); a size outside min..cur is MOEJIT_ERR_INVALID_ARGUMENT
 * naming "<name>.struct_size". */
moejit_status mj_abi_copy(const char *name, const void *src, size_t min, size_t cur, void *dst);

/* moejit_moe_args as this library reads them: args itself when built against this header,
 * else its fields copied into *copy. */
moejit_status mj_abi_moe_args(const moejit_moe_args *args, moejit_moe_args *copy, const moejit_moe_args **out);

#endif
