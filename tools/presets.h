/*
 * presets.h — built-in warm presets: the MoE layers of the models in docs/PERFORMANCE.md, as a
 * table of model shapes and the layer variants each model is served with.
 *
 * A preset expands to spec texts with backend=auto and without an arch (the caller adds
 * --arch or native), so it warms what a serving process asking for the fastest backend runs:
 * the tensor-core backends where they support a variant, simt for the formats only it has.
 */
#ifndef MJ_CLI_PRESETS_H
#define MJ_CLI_PRESETS_H

#include "core/strbuf.h"

#define CLI_PRESET_MAX_VARIANTS 8

typedef struct cli_preset {
    const char *name;     /* "qwen3-30b-a3b" */
    const char *model;    /* "Qwen3-30B-A3B" */
    const char *shape;    /* "hidden=2048,inter=768,experts=128,topk=8" */
    const char *act;      /* "swiglu" */
    /* quant / routing / layout / bias fields of each served variant */
    const char *variants[CLI_PRESET_MAX_VARIANTS];
} cli_preset;

extern const cli_preset cli_presets[];
extern const int cli_presets_len;

/* The preset called name (case-insensitive), or NULL. */
const cli_preset *cli_preset_find(const char *name);
/* Appends "mixtral-8x7b, qwen3-30b-a3b, ..." (error messages, --help). */
void cli_preset_names(mj_buf *out);
/* Spec text of variant i (backend=auto, no arch), malloc'd; NULL when i is past the last variant. */
char *cli_preset_spec(const cli_preset *p, int i);

#endif
