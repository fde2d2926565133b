/*
 * This file contains the moejit command-line tool's entry point: the command table, the
 * grouped usage text and --version.
 */
#include <stdio.h>
#include <string.h>

#include "tools/cli.h"

static const char usage_text[] =
    "usage: moejit <command> [options]\n"
    "\n"
    "Generate, JIT-compile, cache and inspect fused Mixture-of-Experts GPU kernels.\n"
    "\n"
    "Running:\n"
    "  demo [--spec SPEC] [--tokens N]   compile the default layer (Qwen3-30B-A3B, bf16, SwiGLU);\n"
    "                                    with a GPU also run it against the CPU reference\n"
    "  bench jit [--arch A] [--append]   cold compile, disk-cache load in a fresh process and\n"
    "                                    in-process hit times of the default spec\n"
    "  bench layer [--shapes LIST] ...   whole-layer timings of the model shapes on the GPU\n"
    "                                    (see moejit bench layer --help)\n"
    "  tune [--shapes LIST] [--out FILE] ...\n"
    "                                    time both GEMM paths of mma/wgmma per shape and batch on\n"
    "                                    the GPU and record the faster in a tuning table\n"
    "                                    (MOEJIT_TUNE_FILE; see moejit tune --help)\n"
    "\n"
    "Ahead of time:\n"
    "  warm [SPEC...] [--preset NAMES] [--manifest FILE] [--arch A,B] [--jobs N] [--dry-run]\n"
    "                                    compile into the disk cache, N at a time and without\n"
    "                                    a GPU, skipping what is cached\n"
    "\n"
    "Inspecting:\n"
    "  inspect SPEC|KEY [--source|--ptx|--sass|--log|--preimage] [--why SPEC]\n"
    "                                    canonical spec, key and preimage, support verdict, cached\n"
    "                                    or not, kernels, registers, shared memory, spills\n"
    "  matrix [--format text|markdown|json]\n"
    "                                    the support matrix, from the backends' declarations\n"
    "\n"
    "Cache management:\n"
    "  cache ls|stats|verify|gc|clear|export|import|config\n"
    "                                    list, count, check, trim, empty, pack and unpack the\n"
    "                                    disk cache, and show its settings\n"
    "\n"
    "Settings:\n"
    "  config [--json] [--cache-dir DIR]  every setting: its value, where it came from (default,\n"
    "                                    environment, command line), its variable and why\n"
    "\n"
    "Options:\n"
    "  -h, --help      this text (and `moejit <command> --help` for a command's own)\n"
    "  --version       moejit's, NVRTC's and (when present) the CUDA driver's versions\n"
    "  --json          on every command but demo: one JSON document on stdout\n"
    "\n"
    "A SPEC is comma-separated key=value fields, e.g.\n"
    "  backend=simt,quant=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),arch=sm_90a\n"
    "or the same as a JSON object. A KEY is a cache key: 64 hex digits.\n"
    "\n"
    "Environment: MOEJIT_CACHE_DIR, MOEJIT_CACHE_MODE, MOEJIT_COMPILE_TIMEOUT, MOEJIT_DECODE\n"
    "and the other settings `moejit config` lists; MOEJIT_TUNE_FILE (a `moejit tune` table).\n"
    "\n"
    "Examples:\n"
    "  moejit demo\n"
    "  moejit warm --preset qwen3-30b-a3b --arch sm_90a,sm_80 --jobs 8\n"
    "  moejit inspect 'quant=fp16,act=relu2,arch=sm_80' --source\n"
    "  moejit inspect --why 'quant=bf16,act=swiglu(alpha=1.702),arch=sm_90a'\n"
    "  moejit cache export --arch sm_90a qwen.mjkpack && moejit cache import qwen.mjkpack\n"
    "  moejit matrix --format markdown\n"
    "\n"
    "Exit status: 0 success, 1 the operation failed, 2 bad usage or invalid input.\n";

static const struct {
    const char *name;
    cli_command_fn fn;
} commands[] = {
    {"demo", cmd_demo}, {"warm", cmd_warm},   {"inspect", cmd_inspect},
    {"cache", cmd_cache}, {"matrix", cmd_matrix}, {"bench", cmd_bench}, {"tune", cmd_tune},
    {"config", cmd_config},
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
    if (cmd[0] == '-')
        cli_error("unknown option '%s'; options: --help, --version (see moejit --help)", cmd);
    else
        cli_error("unknown command '%s'; commands: demo, warm, inspect, cache, matrix, bench, tune, config "
                  "(see moejit --help)", cmd);
    return MJ_EXIT_USAGE;
}
