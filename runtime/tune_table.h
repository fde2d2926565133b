/*
 * tune_table.h — recorded GEMM-path choices of the mma-family backends (`moejit tune`), read
 * by the launch plan (gemm_plan.h) when a spec says tile=auto.
 *
 * File format (JSON, written by `moejit tune`, loaded from $MOEJIT_TUNE_FILE):
 *
 *   {"version": 1, "entries": [
 *     {"backend": "wgmma", "arch": "sm_90a", "hidden": 2048, "inter": 768, "experts": 128,
 *      "topk": 8, "gated": true, "dtype": "bf16", "max_tokens": 512, "path": "small"}, ...]}
 *
 * An entry applies to a forward whose (backend, arch, hidden, inter, experts, topk, gated,
 * dtype) equal its own and whose token count T <= max_tokens. "experts" is the number of
 * experts the layer computes (num_local_experts when expert-parallel), because that, not the
 * model's total, sets the rows per expert the paths are chosen by. Of the entries that apply,
 * the one with the smallest max_tokens wins (the first in file order on a tie); T above every
 * bucket falls through to the built-in rule (runtime/gemm_plan.h).
 *
 * Every field is required and no other field is allowed, so a misspelt key is an error rather
 * than a silently different match.
 *
 * The entries are measurements of layers with 16-bit weights (`moejit tune` times bf16
 * layers), so they apply to those only: a layer of fp8 or 4-bit weights, whose paths cost
 * differently (4-bit keeps the small path far longer, fp8 has none), takes the built-in rule.
 */
#ifndef MJ_TUNE_TABLE_H
#define MJ_TUNE_TABLE_H

#include <stdint.h>
#include <stdio.h>

#include "core/spec.h"

/* The environment variable naming the process's table file (unset or empty: no table). */
#define MJ_TUNE_FILE_ENV "MOEJIT_TUNE_FILE"
#define MJ_TUNE_VERSION 1

/* What an entry is matched on. */
typedef struct mj_tune_key {
    mj_backend backend; /* MJ_BACKEND_MMA or MJ_BACKEND_WGMMA */
    mj_arch arch;
    int64_t hidden, inter, experts, topk;
    int gated;
    mj_dtype dtype;
} mj_tune_key;

typedef struct mj_tune_entry {
    mj_tune_key key;
    int64_t max_tokens; /* applies to T <= max_tokens */
    int path;           /* MJ_MMA_PATH_LARGE or MJ_MMA_PATH_SMALL */
} mj_tune_entry;

typedef struct mj_tune_table {
    mj_tune_entry *entries;
    int n, cap;
} mj_tune_table;

/* Parses and validates a table's JSON text; errors name the field, e.g.
 * "entries[2].path: ... allowed: large, small". On failure *out is empty. */
moejit_status mj_tune_table_parse(const char *text, mj_tune_table *out);
/* Reads and parses a file; errors are prefixed with the path. */
moejit_status mj_tune_table_load(const char *path, mj_tune_table *out);
/* Appends one entry (copying it). */
moejit_status mj_tune_table_add(mj_tune_table *t, const mj_tune_entry *e);
void mj_tune_table_free(mj_tune_table *t);

/* 1 when two keys are the same shape/backend/arch/dtype. */
int mj_tune_key_equal(const mj_tune_key *a, const mj_tune_key *b);
/* The recorded path for key at T tokens, or MJ_MMA_PATH_AUTO when no entry applies. */
int mj_tune_table_lookup(const mj_tune_table *t, const mj_tune_key *key, int64_t tokens);
/* Writes t in the file format, one entry per line. */
int mj_tune_table_write(FILE *f, const mj_tune_table *t);

/* The process table's choice for a forward of spec (backend mma/wgmma) on args, or
 * MJ_MMA_PATH_AUTO (always for weights other than bf16 and fp16). The first call loads
 * $MOEJIT_TUNE_FILE once (pthread_once); a file that cannot be read or does not validate is
 * reported ONCE on stderr ("moejit: warning: ...", naming the file and the field) and then
 * ignored as a whole: the built-in heuristic is used, because a half-applied or guessed table
 * would be a silent, hard-to-find slowdown while a warning costs nothing. Thread-safe. */
int mj_tune_path(const moejit_spec *spec, const moejit_moe_args *args);

/* Test hook: replaces the process table with the one in text (NULL: no table), after the
 * once-only environment load has run so that it cannot override the replacement. Returns the
 * parse error (the table is then empty). Not for library users. */
moejit_status mj_tune_table_install(const char *text);

#endif
