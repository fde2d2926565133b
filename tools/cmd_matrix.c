/*
 * This file contains `moejit matrix`: the support matrix printed from the backends' own
 * declarations (core/matrix.c). The README's table is this command's markdown output,
 * and a test fails when the two drift.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "tools/cli.h"
#include "core/matrix.h"

static const char matrix_usage[] =
    "usage: moejit matrix [--format text|markdown|json]\n"
    "\n"
    "Prints what each backend supports (quantizations, dtypes, activations, archs, routing,\n"
    "W1 layouts, biases), read from the backends' static declarations.\n"
    "\n"
    "Examples:\n"
    "  moejit matrix\n"
    "  moejit matrix --format markdown > table.md\n";

int cmd_matrix(int argc, char **argv)
{
    static const struct option long_options[] = {
        {"format", required_argument, NULL, 'f'}, {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    const char *format = "text";
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+h", long_options, NULL)) != -1) {
        switch (c) {
        case 'f': format = optarg; break;
        case 'j': format = "json"; break;
        case 'h': fputs(matrix_usage, stdout); return MJ_EXIT_OK;
        default:
            cli_error("matrix: unknown or incomplete option '%s' (see moejit matrix --help)",
                      argv[optind - 1]);
            return MJ_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        cli_error("matrix: unexpected argument '%s'", argv[optind]);
        return MJ_EXIT_USAGE;
    }
    mj_buf b = MJ_BUF_INIT;
    moejit_status st = mj_matrix_format(format, &b);
    if (st != MOEJIT_OK) {
        mj_buf_free(&b);
        return cli_fail(st, "matrix");
    }
    fwrite(b.data, 1, b.len, stdout);
    mj_buf_free(&b);
    return MJ_EXIT_OK;
}
