/*
 * This file contains the moejit command-line tool's entry point: the command table, the
 * grouped usage text and --version.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] =
    "usage: moejit <command> [options]\n"
    "\n"
    "Generate, JIT-compile, cache and inspect fused Mixture-of-Experts GPU kernels.\n"
    "\n"
    "Commands:\n"
    "  demo [--spec SPEC] [--tokens N]   compile the default layer (Qwen3-30B-A3B, bf16, SwiGLU);\n"
    "                                    with a GPU also run it against the CPU reference\n"
    "  inspect SPEC [--source]           canonical spec, key, support verdict, compile result,\n"
    "                                    kernel resources; --source prints the generated CUDA\n"
    "  matrix [--format text|markdown|json]\n"
    "                                    the support matrix, from the backends' declarations\n"
    "\n"
    "Options:\n"
    "  -h, --help      this text (and `moejit <command> --help` for a command's own)\n"
    "  --version       moejit's, NVRTC's and (when present) the CUDA driver's versions\n"
    "\n"
    "A SPEC is comma-separated key=value fields, e.g.\n"
    "  backend=simt,quant=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),arch=sm_90a\n"
    "\n"
    "Examples:\n"
    "  moejit demo\n"
    "  moejit inspect 'quant=fp16,act=relu2,arch=sm_80' --source\n"
    "  moejit matrix --format markdown\n"
    "\n"
    "Exit status: 0 success, 1 the operation failed, 2 bad usage or invalid input.\n";

static const struct {
    const char *name;
    cli_command_fn fn;
} commands[] = {
    {"demo", cmd_demo},
    {"inspect", cmd_inspect},
    {"matrix", cmd_matrix},
};

static int print_version(void)
{
    int major = 0, minor = 0, driver = 0;
    printf("moejit %s\n", moejit_version());
    if (moejit_nvrtc_version(&major, &minor) == MOEJIT_OK) printf("NVRTC %d.%d\n", major, minor);
    else printf("NVRTC unavailable: %s\n", moejit_last_error());
    if (moejit_driver_version(&driver) == MOEJIT_OK)
        printf("CUDA driver %d.%d\n", driver / 1000, (driver % 1000) / 10);
    else printf("CUDA driver: none (%s)\n", moejit_last_error());
    return MJ_EXIT_OK;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return MJ_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(usage_text, stdout);
        return MJ_EXIT_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) return print_version();
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    cli_error("unknown command '%s'; commands: demo, inspect, matrix (see moejit --help)", cmd);
    return MJ_EXIT_USAGE;
}
