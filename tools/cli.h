/*
 * cli.h — what the moejit subcommands share: exit codes, error printing, option helpers,
 * spec and arch helpers, and the command table's function type.
 *
 * Exit codes (documented in `moejit --help`): 0 success, 1 the operation failed (a compile
 * error, a failed kernel, a corrupt pack), 2 bad usage or invalid input (unknown option,
 * bad spec, bad value).
 */
#ifndef MJ_CLI_H
#define MJ_CLI_H

#include <stdio.h>

#include "cache/cache.h"
#include "core/settings.h"
#include "core/strbuf.h"
#include "moejit.h"

enum { MJ_EXIT_OK = 0, MJ_EXIT_FAIL = 1, MJ_EXIT_USAGE = 2 };

/* The layer `moejit demo` and `moejit bench jit` use by default: Qwen3-30B-A3B's expert
 * shape, bf16, SwiGLU, renormalize routing (docs/PERFORMANCE.md, "Model shapes"). No arch: callers add one. */
extern const char cli_default_spec[];

/* Prints "moejit: <message>" on stderr (one line). */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints the library's last error after a prefix; returns the exit code for status
 * (2 for invalid input, 1 otherwise). */
int cli_fail(moejit_status status, const char *what);
/* 1 when stdout is a terminal (progress bars, colours). */
int cli_is_tty(FILE *f);
/* Parses a non-negative integer option value; prints the error and returns -1 if bad. */
long long cli_parse_count(const char *option, const char *value, long long max);

/* The one line for a getopt_long failure (c is what it returned: '?' or ':'); returns
 * MJ_EXIT_USAGE. Option strings must start with ":" so that a missing value is ':'. */
int cli_bad_option(const char *cmd, int c, char **argv);
/* --cache-dir DIR: sets MOEJIT_CACHE_DIR for this process and every process it starts, so
 * that the library, its compile workers and spawned children resolve the same cache. */
void cli_set_cache_dir(const char *dir);
/* Settings given by this command line's flags (text as the environment's; it must outlive the
 * command: argv's strings do), and all of them as the resolver takes them. */
void cli_set_setting(mj_setting_id id, const char *text);
const char *const *cli_settings(void);
/* Resolves every setting (command line, environment, defaults): MJ_EXIT_OK, or the exit code
 * after an error that names the bad value and its variable, prefixed with cmd. */
int cli_resolve_settings(const char *cmd, mj_settings *out);
/* Opens the cache the configuration (environment) names; prints the error and returns the
 * exit code on failure, MJ_EXIT_OK otherwise. */
int cli_open_cache(mj_cache **out);

/* Monotonic seconds. */
double cli_now(void);

/* Splits a comma-separated list of arch names ("sm_90a,sm_80") into archs (static names
 * from mj_arch_names); prints the error naming option and returns -1 on a bad name, else
 * the count. max: capacity of archs. */
int cli_parse_archs(const char *option, const char *value, const char **archs, int max);

/* The spec text (key=value list or JSON object) with the given fields replaced (added when
 * absent); values NULL remove the field. Returns a malloc'd string, NULL when out of memory
 * or when a JSON text does not parse. */
char *cli_spec_with(const char *text, const char *const *names, const char *const *values, int n);
/* Parses text as JSON when it starts with '{', else as the key=value form. */
moejit_status cli_spec_parse(const char *text, moejit_spec **out);

/* A growing array of strings (owned copies). */
typedef struct cli_strv {
    char **v;
    int n, cap;
} cli_strv;
int cli_strv_push(cli_strv *s, const char *str); /* 0 when out of memory */
void cli_strv_free(cli_strv *s);

typedef int (*cli_command_fn)(int argc, char **argv);

int cmd_demo(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_matrix(int argc, char **argv);
int cmd_warm(int argc, char **argv);
int cmd_cache(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_config(int argc, char **argv);
/* The settings table as markdown (`moejit config --markdown`, the README's copy). */
void cli_settings_markdown(mj_buf *b);

#endif
