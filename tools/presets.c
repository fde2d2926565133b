/*
 * This file contains the warm presets' table (presets.h): one row per model of
 * docs/PERFORMANCE.md ("Model shapes"), with the expert shape pinned (hidden, inter, experts, topk) and the
 * layer variants the model is served with, each on backend=auto (what a serving process that
 * asks for the fastest backend runs). Routing parameters are the models' published configs
 * (n_group, topk_group, routed_scaling_factor).
 *
 * Models routed with deepseek_v3 also get routing=precomputed variants: serving stacks often
 * run the grouped top-k themselves and hand the layer ids and weights.
 */
#include "tools/presets.h"

#include <string.h>
#include <strings.h>

#include "core/strbuf.h"

#define DSV3_ROUTING "routing=deepseek_v3,n_group=8,topk_group=4,routed_scaling=2.5"
#define KIMI_ROUTING "routing=deepseek_v3,n_group=1,topk_group=1,routed_scaling=2.827"
#define NEMOTRON_ROUTING "routing=deepseek_v3,n_group=1,topk_group=1,routed_scaling=2.5"
#define GPT_OSS_LAYER "routing=renormalize,w1_layout=interleaved,bias=both"

const cli_preset cli_presets[] = {
    {"mixtral-8x7b", "Mixtral-8x7B", "hidden=4096,inter=14336,experts=8,topk=2", "swiglu",
     {"quant=bf16,routing=renormalize", "quant=fp16,routing=renormalize"}},
    {"qwen3-30b-a3b", "Qwen3-30B-A3B", "hidden=2048,inter=768,experts=128,topk=8", "swiglu",
     {"quant=bf16,routing=renormalize", "quant=fp16,routing=renormalize",
      "quant=fp8_block,routing=renormalize"}},
    {"qwen3-235b-a22b", "Qwen3-235B-A22B", "hidden=4096,inter=1536,experts=128,topk=8", "swiglu",
     {"quant=bf16,routing=renormalize", "quant=fp16,routing=renormalize",
      "quant=fp8_block,routing=renormalize"}},
    {"deepseek-v3", "DeepSeek-V3", "hidden=7168,inter=2048,experts=256,topk=8", "swiglu",
     {"quant=fp8_block," DSV3_ROUTING, "quant=bf16," DSV3_ROUTING, "quant=fp8_block,routing=precomputed",
      "quant=bf16,routing=precomputed", "quant=fp16,routing=precomputed"}},
    {"kimi-k2", "Kimi-K2", "hidden=7168,inter=2048,experts=384,topk=8", "swiglu",
     {"quant=fp8_block," KIMI_ROUTING, "quant=w4a16,group=32," KIMI_ROUTING,
      "quant=bf16," KIMI_ROUTING, "quant=fp8_block,routing=precomputed",
      "quant=w4a16,group=32,routing=precomputed", "quant=bf16,routing=precomputed",
      "quant=fp16,routing=precomputed"}},
    {"gpt-oss-120b", "gpt-oss-120b", "hidden=2880,inter=2880,experts=128,topk=4",
     "swiglu(alpha=1.702,beta=1,limit=7)",
     {"quant=mxfp4," GPT_OSS_LAYER, "quant=bf16," GPT_OSS_LAYER, "quant=fp16," GPT_OSS_LAYER}},
    {"nemotron-3-nano", "Nemotron-3-Nano", "hidden=2688,inter=1856,experts=128,topk=6", "relu2",
     {"quant=bf16," NEMOTRON_ROUTING, "quant=bf16,routing=precomputed", "quant=fp16,routing=precomputed"}},
};
const int cli_presets_len = (int)(sizeof cli_presets / sizeof cli_presets[0]);

const cli_preset *cli_preset_find(const char *name)
{
    for (int i = 0; i < cli_presets_len; i++)
        if (strcasecmp(cli_presets[i].name, name) == 0) return &cli_presets[i];
    return NULL;
}

void cli_preset_names(mj_buf *out)
{
    for (int i = 0; i < cli_presets_len; i++) mj_buf_printf(out, "%s%s", i ? ", " : "", cli_presets[i].name);
}

char *cli_preset_spec(const cli_preset *p, int i)
{
    if (i < 0 || i >= CLI_PRESET_MAX_VARIANTS || !p->variants[i]) return NULL;
    mj_buf b = MJ_BUF_INIT;
    mj_buf_printf(&b, "backend=auto,%s,act=%s,%s", p->variants[i], p->act, p->shape);
    return mj_buf_take(&b);
}
