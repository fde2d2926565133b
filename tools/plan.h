/*
 * plan.h — the list of kernels a `moejit warm` (or a preset selection of `cache export`)
 * is about: specs from the command line, presets and manifests, crossed with archs and
 * shapes, deduplicated by canonical spec, each with its support verdict, key and whether
 * the cache holds it.
 *
 * Manifest format (JSON):
 *   {"kernels": [
 *      {"spec": "quant=bf16,act=swiglu,routing=renormalize",       (text or a JSON object)
 *       "archs": ["sm_90a", "sm_80"],                              (optional)
 *       "shapes": [{"hidden": 2048, "inter": 768, "experts": 128, "topk": 8}]}  (optional)
 *   ]}
 * Each entry expands to spec x archs x shapes. The archs of an entry and --arch add up; with
 * neither, the spec's own arch (default native) is used. A shape sets the fields it names.
 * Unknown keys are errors, so a misspelt "arch" is never silently ignored.
 */
#ifndef MJ_CLI_PLAN_H
#define MJ_CLI_PLAN_H

#include "cache/cache.h"
#include "moejit.h"

typedef enum cli_plan_state {
    CLI_PLAN_UNSUPPORTED = 0, /* the backend cannot build it: skipped */
    CLI_PLAN_MISSING,         /* supported, not in the cache: to compile */
    CLI_PLAN_PRESENT          /* a valid entry exists */
} cli_plan_state;

typedef struct cli_plan_item {
    moejit_spec *spec;             /* a tensor-core layer's item stands for all its modules */
    const char *canonical;     /* the spec's canonical text */
    char *origin;              /* "argument 2", "preset qwen3-30b-a3b", "manifest m.json kernels[1]" */
    int explicit_request;      /* from an argument or a manifest (not a preset) */
    char *unsupported_reason;  /* set when unsupported */
    char key[65];              /* set by cli_plan_resolve for supported items (tensor-core
                                  layers: of the whole layer's source; each module has its own) */
    cli_plan_state state;
} cli_plan_item;

typedef struct cli_plan {
    cli_plan_item *items;
    int n, cap;
    /* --backend: each spec is added once per listed backend (names from the static table);
     * none: each spec keeps its own backend. */
    const char *backends[4];
    int n_backends;
} cli_plan;

/* Parses --backend's comma-separated list (simt, mma, wgmma, auto) into p; MJ_EXIT_OK or the
 * exit code after the one-line error. */
int cli_plan_set_backends(cli_plan *p, const char *cmd, const char *list);

/* Each returns MJ_EXIT_OK or the exit code after printing the one-line error (cmd names the
 * command in it). archs: --arch values (static names), may be empty. */
int cli_plan_add_spec(cli_plan *p, const char *cmd, const char *text, const char *origin,
                      int explicit_request, const char *const *archs, int n_archs);
int cli_plan_add_presets(cli_plan *p, const char *cmd, const char *names,
                         const char *const *archs, int n_archs);
int cli_plan_add_manifest(cli_plan *p, const char *cmd, const char *path,
                          const char *const *archs, int n_archs);

/* Computes key and state of every supported item (emit + key, no compile); cache may be
 * NULL (then every supported item is MISSING). Exit code as above. */
int cli_plan_resolve(cli_plan *p, const char *cmd, mj_cache *cache);

/* The key of one module of it (codegen/layer_modules.h; MJ_LAYER_WHOLE: the whole source). */
moejit_status cli_plan_module_key(const cli_plan_item *it, int module, char key[65]);
/* 1 when the cache holds a valid entry of that module of it. */
int cli_plan_module_present(mj_cache *cache, const cli_plan_item *it, int module);

void cli_plan_free(cli_plan *p);

#endif
