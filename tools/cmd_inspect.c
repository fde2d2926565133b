/*
 * This file contains `moejit inspect`: what moejit makes of a spec — canonical form, key,
 * support verdict, compile result and per-kernel resources — and the generated source.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "emit.h"
#include "spec.h"

static const char inspect_usage[] =
    "usage: moejit inspect SPEC [--source] [--json]\n"
    "\n"
    "Shows the canonical spec, its cache key, whether its backend supports it, the compile\n"
    "result (compiling it if needed) and each kernel's registers, shared memory, stack and\n"
    "spills.\n"
    "\n"
    "Options:\n"
    "  --source   print the generated CUDA source instead (no compile)\n"
    "  --json     the same report as one JSON object\n"
    "\n"
    "Examples:\n"
    "  moejit inspect 'backend=simt,quant=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),arch=sm_90a'\n"
    "  moejit inspect 'quant=fp16,act=relu2,arch=sm_80' --source\n";

static int print_source(const moejit_spec *spec)
{
    moejit_status st = moejit_check_support(spec);
    if (st != MOEJIT_OK) return cli_fail(st, "inspect");
    mj_source src = {0};
    st = mj_emit(spec, &src);
    if (st != MOEJIT_OK) return cli_fail(st, "inspect");
    fwrite(src.text, 1, src.len, stdout);
    mj_source_free(&src);
    return MJ_EXIT_OK;
}

static void print_resources_text(const moejit_kernel *k)
{
    printf("kernels:\n  %-22s %5s %10s %7s %12s\n", "name", "regs", "smem(B)", "stack",
           "spills(S/L)");
    for (int i = 0; i < moejit_kernel_count(k); i++) {
        moejit_kernel_resources r;
        if (moejit_kernel_resources_get(k, i, &r) != MOEJIT_OK) continue;
        printf("  %-22s %5d %10d %7d %6d/%-5d\n", r.name, r.registers, r.shared_bytes,
               r.stack_bytes, r.spill_store_bytes, r.spill_load_bytes);
    }
}

static void print_resources_json(const moejit_kernel *k)
{
    printf(",\"kernels\":[");
    for (int i = 0; i < moejit_kernel_count(k); i++) {
        moejit_kernel_resources r;
        if (moejit_kernel_resources_get(k, i, &r) != MOEJIT_OK) continue;
        printf("%s{\"name\":", i ? "," : "");
        cli_json_string(stdout, r.name);
        printf(",\"registers\":%d,\"shared_bytes\":%d,\"stack_bytes\":%d,"
               "\"spill_store_bytes\":%d,\"spill_load_bytes\":%d}",
               r.registers, r.shared_bytes, r.stack_bytes, r.spill_store_bytes,
               r.spill_load_bytes);
    }
    printf("]");
}

static int report(const moejit_spec *spec, int json)
{
    moejit_status support = moejit_check_support(spec);
    char why[1024];
    snprintf(why, sizeof why, "%s", support == MOEJIT_OK ? "" : moejit_last_error());
    if (json) {
        printf("{\"spec\":");
        cli_json_string(stdout, moejit_spec_canonical(spec));
        printf(",\"supported\":%s", support == MOEJIT_OK ? "true" : "false");
        if (support != MOEJIT_OK) {
            printf(",\"unsupported_reason\":");
            cli_json_string(stdout, why);
            printf("}\n");
            return MJ_EXIT_USAGE;
        }
    } else {
        printf("spec:     %s\n", moejit_spec_canonical(spec));
        if (support != MOEJIT_OK) {
            printf("support:  unsupported: %s\n", why);
            return MJ_EXIT_USAGE;
        }
        printf("support:  supported\n");
    }

    moejit_context *ctx = NULL;
    moejit_status st = moejit_context_create(NULL, &ctx);
    if (st != MOEJIT_OK) return cli_fail(st, "inspect");
    moejit_kernel *k = NULL;
    st = moejit_kernel_get(ctx, spec, &k);
    int rc = MJ_EXIT_OK;
    if (st != MOEJIT_OK) {
        if (json) {
            printf(",\"compiled\":false,\"error\":");
            cli_json_string(stdout, moejit_last_error());
            printf("}\n");
        } else {
            printf("compile:  failed\n%s\n", moejit_last_error());
        }
        rc = MJ_EXIT_FAIL;
    } else if (json) {
        printf(",\"key\":\"%s\",\"compiled\":true,\"compile_seconds\":%.3f,\"loaded\":%s",
               moejit_kernel_key(k), moejit_kernel_compile_seconds(k),
               moejit_kernel_is_loaded(k) ? "true" : "false");
        print_resources_json(k);
        printf("}\n");
    } else {
        printf("key:      %s\n", moejit_kernel_key(k));
        printf("compile:  ok (%.3f s%s)\n", moejit_kernel_compile_seconds(k),
               moejit_kernel_compile_seconds(k) == 0 ? ", from the disk cache" : "");
        printf("loaded:   %s\n", moejit_kernel_is_loaded(k) ? "yes" : "no (no CUDA device)");
        print_resources_text(k);
    }
    moejit_context_destroy(ctx);
    return rc;
}

int cmd_inspect(int argc, char **argv)
{
    static const struct option long_options[] = {{"source", no_argument, NULL, 's'},
                                                 {"json", no_argument, NULL, 'j'},
                                                 {"help", no_argument, NULL, 'h'},
                                                 {NULL, 0, NULL, 0}};
    int source = 0, json = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
        switch (c) {
        case 's': source = 1; break;
        case 'j': json = 1; break;
        case 'h': fputs(inspect_usage, stdout); return MJ_EXIT_OK;
        default:
            cli_error("inspect: unknown option '%s' (see moejit inspect --help)", argv[optind - 1]);
            return MJ_EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        cli_error("inspect: expected one SPEC argument (see moejit inspect --help)");
        return MJ_EXIT_USAGE;
    }
    moejit_spec *spec = NULL;
    moejit_status st = moejit_spec_parse(argv[optind], &spec);
    if (st != MOEJIT_OK) {
        cli_error("inspect: %s", moejit_last_error());
        return MJ_EXIT_USAGE;
    }
    int rc = source ? print_source(spec) : report(spec, json);
    moejit_spec_destroy(spec);
    return rc;
}
