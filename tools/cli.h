/*
 * cli.h — what the moejit subcommands share: exit codes, error printing and the command
 * table's function type.
 *
 * Exit codes (documented in `moejit --help`): 0 success, 1 the operation failed (a compile
 * error, a failed kernel, a corrupt pack), 2 bad usage or invalid input (unknown option,
 * bad spec, bad value).
 */
#ifndef MJ_CLI_H
#define MJ_CLI_H

#include <stdio.h>

#include "moejit.h"

enum { MJ_EXIT_OK = 0, MJ_EXIT_FAIL = 1, MJ_EXIT_USAGE = 2 };

/* Prints "moejit: <message>" on stderr (one line). */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints the library's last error after a prefix; returns the exit code for status
 * (2 for invalid input, 1 otherwise). */
int cli_fail(moejit_status status, const char *what);
/* 1 when stdout is a terminal (progress bars, colours). */
int cli_is_tty(FILE *f);
/* Parses a non-negative integer option value; prints the error and returns -1 if bad. */
long long cli_parse_count(const char *option, const char *value, long long max);
/* Writes s as a JSON string literal (quotes and escapes included). */
void cli_json_string(FILE *f, const char *s);

typedef int (*cli_command_fn)(int argc, char **argv);

int cmd_demo(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_matrix(int argc, char **argv);

#endif
