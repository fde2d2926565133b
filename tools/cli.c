/*
 * This file contains the helpers every moejit subcommand shares.
 */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("moejit: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_fail(moejit_status status, const char *what)
{
    cli_error("%s: %s", what, moejit_last_error());
    return status == MOEJIT_ERR_INVALID_ARGUMENT || status == MOEJIT_ERR_UNSUPPORTED
               ? MJ_EXIT_USAGE
               : MJ_EXIT_FAIL;
}

int cli_is_tty(FILE *f) { return isatty(fileno(f)); }

long long cli_parse_count(const char *option, const char *value, long long max)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (errno || !end || *end || end == value || v < 0 || v > max) {
        cli_error("%s: expected an integer in 0..%lld, got '%s'", option, max, value);
        return -1;
    }
    return v;
}

void cli_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}
