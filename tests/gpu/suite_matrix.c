/*
 * This file contains what the GPU suite runs: the activation matrix (every activation × {bf16,
 * fp16} × {softmax_topk, renormalize, precomputed} on six shapes, unchanged), the format
 * matrix (every quantization family × {swiglu, gpt-oss swiglu, situ, relu2, geglu_tanh} ×
 * every routing method, with the other axes rotating), the seeded fuzz configurations, and
 * each part's negative controls.
 *
 * Rotation in the format matrix (35 entries per quantization family, j = act · 7 + routing):
 * bias = j mod 4; logits bf16 on odd j (not for precomputed); W1 layout cycles over the
 * gated entries; deepseek_v3's (n_group, topk_group, routed_scaling) cycles with the act;
 * w4a16's (group, zero_point) and fp8_tensor's fp8_act cycle with act + routing, so that each
 * act sees every variant. So every value of every axis appears for every family, without the
 * cross product. Each entry runs three shapes (one an EP shard, replayed through a CUDA
 * graph; the largest with per-expert overrides on half the parameterised entries), plus
 * T = 0 on every seventh.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "suite.h"

/* ---- activations, shapes and expert parallelism ------------------------------------------------------------------------------------- */

static const char *const k_acts2[] = {
    "gelu", "relu", "silu", "swiglu", "swiglu(alpha=1.702,beta=1,limit=7)", "geglu", "relu2",
    "swiglu_step", "geglu_tanh", "identity", "situ",
    "situ(gate_scale=4,linear_scale=none,clamp_limit=5)",
};
#define N_ACTS2 (sizeof k_acts2 / sizeof k_acts2[0])
static const char *const k_quants2[] = {"bf16", "fp16"};
static const char *const k_routings2[] = {"softmax_topk", "renormalize", "precomputed"};

/* Together every value of every axis; not the cross product. The big case keeps H·I small
 * enough that the float64 reference stays well under a second per spec. */
static const shape k_shapes2[] = {
    {0, 264, 136, 8, 2, 0, 0},
    {1, 264, 136, 64, 8, 0, 0},
    {3, 1000, 72, 8, 1, 0, 0},
    {17, 264, 136, 64, 2, 16, 24}, /* EP shard: experts [16, 40) of 64; graph replay */
    {129, 1000, 72, 8, 8, 0, 0},   /* the controls' case */
    {1000, 264, 136, 64, 8, 0, 0},
};
#define N_SHAPES2 (sizeof k_shapes2 / sizeof k_shapes2[0])

static int add(entry *es, int n, int cap, const char *filter, const entry *proto)
{
    if (n >= cap || !strstr(proto->text, filter))
        return n;
    es[n] = *proto;
    return n + 1;
}

int suite_tensor_cores(const suite *S)
{
    return strcmp(S->backend, "simt") != 0;
}

int build_activation_cases(entry *es, int n, int cap, const suite *S, const char *filter)
{
    for (size_t q = 0; q < 2; q++)
        for (size_t a = 0; a < N_ACTS2; a++)
            for (size_t r = 0; r < 3; r++) {
                entry e;
                memset(&e, 0, sizeof e);
                e.part = PART_ACTIVATIONS;
                snprintf(e.text, sizeof e.text, "backend=%s,quant=%s,act=%s,arch=%s,routing=%s", S->backend,
                         k_quants2[q], k_acts2[a], S->arch, k_routings2[r]);
                snprintf(e.label, sizeof e.label, "%s %s %s", k_quants2[q], k_acts2[a], k_routings2[r]);
                for (size_t si = 0; si < N_SHAPES2; si++)
                    e.cases[e.ncases++] = (gcase){.s = k_shapes2[si], .graph = si == 3};
                n = add(es, n, cap, filter, &e);
            }
    return n;
}

/* ---- formats, layouts, biases and routing ------------------------------------------------------------------------------------- */

static const char *const k_families[] = {"bf16", "fp16", "fp8_tensor", "fp8_block", "w4a16", "mxfp4"};
#define N_FAMILIES 6
static const char *const k_w4[] = {"group=32,zero_point=0", "group=32,zero_point=1",
                                   "group=64,zero_point=0", "group=64,zero_point=1",
                                   "group=128,zero_point=0", "group=128,zero_point=1"};
static const char *const k_fp8_act[] = {"tensor", "token", "static"};
static const char *const k_acts5[] = {"swiglu", "swiglu(alpha=1.702,beta=1,limit=7)", "situ", "relu2",
                                      "geglu_tanh"};
#define N_ACTS5 5
static const char *const k_routings5[] = {"softmax_topk", "renormalize", "sigmoid_topk", "sigmoid_renorm",
                                          "deepseek_v3", "llama4", "precomputed"};
#define N_ROUTINGS5 7
static const char *const k_layouts[] = {"up_gate", "gate_up", "interleaved"};
static const char *const k_biases[] = {"none", "b1", "b2", "both"};
static const struct {
    int ng, kg;
    const char *rs;
} k_deepseek[] = {{4, 2, "2.5"}, {8, 4, "2.827"}, {2, 1, "1.5"}, {1, 1, "1"}};

/* Whether family f (quant_text's numbering) holds e4m3 weights: fp8_tensor or fp8_block. */
static int fp8_family(int f) { return f == 2 || f == 3; }

/* The quant part of a spec text ("quant=w4a16,group=64,zero_point=1") and its granule
 * (the multiple H and I must be of; spec_granule's rule, known before parsing; fp8_tensor on
 * the tensor cores: 16, its 1-byte weight rows' TMA unit). */
static int64_t quant_text(int family, int variant, int tc, char *buf, size_t cap)
{
    switch (family) {
    case 2:
        snprintf(buf, cap, "quant=fp8_tensor,fp8_act=%s", k_fp8_act[variant % 3]);
        return tc ? 16 : 8;
    case 3: snprintf(buf, cap, "quant=fp8_block"); return 128;
    case 4: {
        int v = variant % 6, g = v / 2 == 0 ? 32 : v / 2 == 1 ? 64 : 128;
        snprintf(buf, cap, "quant=w4a16,%s", k_w4[v]);
        return v % 2 ? 2 * g : g;
    }
    case 5: snprintf(buf, cap, "quant=mxfp4"); return 32;
    default: snprintf(buf, cap, "quant=%s", k_families[family]); return 8;
    }
}

/* Two (H, I) pairs per granule: small, not powers of two where the granule allows. */
static void dims(int64_t gran, int v, int64_t *H, int64_t *I)
{
    static const struct {
        int64_t gran, H[2], I[2];
    } t[] = {
        {8, {264, 200}, {136, 88}},   {16, {272, 208}, {144, 96}},  {32, {288, 224}, {160, 96}},
        {64, {320, 192}, {192, 128}},
        {128, {384, 256}, {128, 256}}, {256, {512, 256}, {256, 256}},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i].gran == gran) {
            *H = t[i].H[v];
            *I = t[i].I[v];
            return;
        }
    *H = 4 * gran;
    *I = 2 * gran;
}

/* The spec text of one configuration. */
static void spec_text(char *buf, size_t cap, const suite *S, const char *quant, const char *act, int routing,
                      int ds, int logits_bf16, int layout, int bias)
{
    int n = snprintf(buf, cap, "backend=%s,%s,act=%s,arch=%s,routing=%s", S->backend, quant, act, S->arch,
                     k_routings5[routing]);
    if (routing == 4)
        n += snprintf(buf + n, cap - (size_t)n, ",n_group=%d,topk_group=%d,routed_scaling=%s",
                      k_deepseek[ds].ng, k_deepseek[ds].kg, k_deepseek[ds].rs);
    if (logits_bf16)
        n += snprintf(buf + n, cap - (size_t)n, ",logits=bf16");
    if (layout > 0)
        n += snprintf(buf + n, cap - (size_t)n, ",w1_layout=%s", k_layouts[layout]);
    if (bias > 0)
        snprintf(buf + n, cap - (size_t)n, ",bias=%s", k_biases[bias]);
}

/* "fp8_block situ deepseek_v3 ..." from the text: without the fixed fields. */
static void label_of(const char *text, char *buf, size_t cap)
{
    char tmp[384];
    snprintf(tmp, sizeof tmp, "%s", text);
    const char *drop[] = {"backend=simt,", "backend=mma,", "backend=wgmma,", ",arch=native", ",arch=sm_90a",
                          "quant=", "act=", "routing="};
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++) {
        char *p;
        while ((p = strstr(tmp, drop[i])))
            memmove(p, p + strlen(drop[i]), strlen(p + strlen(drop[i])) + 1);
    }
    for (char *p = tmp; *p; p++)
        if (*p == ',')
            *p = ' ';
    size_t len = strlen(tmp) < cap - 1 ? strlen(tmp) : cap - 1; /* long labels are cut */
    memcpy(buf, tmp, len);
    buf[len] = '\0';
}

int build_format_cases(entry *es, int n, int cap, const suite *S, const char *filter)
{
    const int tc = suite_tensor_cores(S);
    for (int f = 0; f < N_FAMILIES; f++) {
        int gated_index = 0;
        for (int a = 0; a < N_ACTS5; a++)
            for (int r = 0; r < N_ROUTINGS5; r++) {
                int j = a * N_ROUTINGS5 + r;
                int gated = a != 3; /* relu2 */
                char quant[96];
                int64_t gran = quant_text(f, a + r, tc, quant, sizeof quant);
                entry e;
                memset(&e, 0, sizeof e);
                e.part = PART_FORMATS;
                /* the tensor cores take fp8 weights in up_gate, without biases or overrides:
                 * those families' entries are plain there (4-bit ones take every option) */
                const int plain = tc && fp8_family(f);
                const int layout = gated ? gated_index++ % 3 : 0;
                int overrides = (a == 1 || a == 2) && r % 2 == 0 && !plain;
                spec_text(e.text, sizeof e.text, S, quant, k_acts5[a], r, a % 4, j % 2 == 1 && r != 6,
                          plain ? 0 : layout, plain ? 0 : j % 4);
                if (tc && overrides) /* a tensor-core layer reads act_param only where built to */
                    strncat(e.text, ",act_overrides=per_expert", sizeof e.text - strlen(e.text) - 1);
                label_of(e.text, e.label, sizeof e.label);
                int64_t H0, I0, H1, I1;
                dims(gran, 0, &H0, &I0);
                dims(gran, 1, &H1, &I1);
                if (j % 7 == 0)
                    e.cases[e.ncases++] = (gcase){.s = {0, H1, I1, 8, 2, 0, 0}};
                e.cases[e.ncases++] = (gcase){.s = {1, H0, I0, 8, 2, 0, 0}};
                e.cases[e.ncases++] = (gcase){.s = {17, H1, I1, 24, 3, 8 * (j % 3), 8}, .routing_bias = 1,
                                              .graph = 1};
                e.cases[e.ncases++] = (gcase){.s = {61, H0, I0, 16, 4, 0, 0}, .routing_bias = 1,
                                              .overrides = overrides};
                /* the tensor cores' prefill GEMMs (large, pair, tall tiles) take over from here */
                if (tc)
                    e.cases[e.ncases++] = (gcase){.s = {300 + 97 * (j % 5), H1, I1, 16, 4, 0, 0}, .routing_bias = 1};
                n = add(es, n, cap, filter, &e);
            }
    }
    return n;
}

/* ---- fuzz ----------------------------------------------------------------------------------------- */

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int64_t pick(uint64_t *s, int64_t n)
{
    return n > 0 ? (int64_t)(next(s) % (uint64_t)n) : 0;
}

/* Activations with parameters the suite overrides (suite_case.c, A4). */
static int has_overrides(const char *act)
{
    return !strncmp(act, "swiglu", 6) || !strncmp(act, "situ", 4);
}

/* A tile field for a tensor-core fuzz spec: auto on half the draws, else a path the backend
 * has for the format (wgmma's tall and pair paths: every format; the small path: not fp8). */
static const char *fuzz_tile(const suite *S, int family, uint64_t *s)
{
    static const char *const tiles[] = {"large", "small", "tall", "pair"};
    if (!suite_tensor_cores(S) || pick(s, 2) == 0)
        return NULL;
    const int fp8 = fp8_family(family);
    const int n = !strcmp(S->backend, "wgmma") ? 4 : 2;
    const char *t = tiles[pick(s, n)];
    return fp8 && !strcmp(t, "small") ? "large" : t;
}

/* Whether the backend supports the spec text (a parse and moejit_check_support). */
static int supported(const char *text)
{
    moejit_spec *sp = NULL;
    int ok = moejit_spec_parse(text, &sp) == MOEJIT_OK && moejit_check_support(sp) == MOEJIT_OK;
    moejit_spec_destroy(sp);
    return ok;
}

int build_fuzz(entry *es, int n, int cap, const suite *S, const char *filter, int count)
{
    uint64_t s = S->seed ^ 0x6a09e667f3bcc909ull;
    const int tc = suite_tensor_cores(S);
    for (int i = 0; i < count; i++) {
        entry e;
        memset(&e, 0, sizeof e);
        e.part = PART_FUZZ;
        int f, gated;
        int64_t gran;
        const char *act;
        int r, ds, ovr = 0;
        /* a tensor-core backend takes fp8 weights only in up_gate without biases (and mma no
         * fp8): such draws are drawn again, at most 64 times */
        for (int attempt = 0; attempt < 64; attempt++) {
            f = (int)pick(&s, N_FAMILIES);
            char quant[96];
            gran = quant_text(f, (int)pick(&s, 6), tc, quant, sizeof quant);
            act = k_acts2[pick(&s, N_ACTS2)];
            gated = !strncmp(act, "swiglu", 6) || !strncmp(act, "geglu", 5) || !strncmp(act, "situ", 4);
            r = (int)pick(&s, N_ROUTINGS5);
            ds = (int)pick(&s, 4);
            spec_text(e.text, sizeof e.text, S, quant, act, r, ds, r != 6 && pick(&s, 2),
                      gated ? (int)pick(&s, 3) : 0, (int)pick(&s, 4));
            const char *tile = fuzz_tile(S, f, &s);
            if (tile) {
                size_t len = strlen(e.text);
                snprintf(e.text + len, sizeof e.text - len, ",tile=%s", tile);
            }
            /* a tensor-core layer reads act_param only where built to: the field with the draw */
            ovr = tc && has_overrides(act) && pick(&s, 3) == 0;
            if (ovr)
                strncat(e.text, ",act_overrides=per_expert", sizeof e.text - strlen(e.text) - 1);
            if (!tc || supported(e.text))
                break;
        }
        char label[256];
        label_of(e.text, label, sizeof label);
        snprintf(e.label, sizeof e.label, "fuzz #%d %.200s", i, label);
        gcase c = {0};
        c.s.H = gran * (1 + pick(&s, gran >= 512 ? 1 : 512 / gran));
        c.s.I = gran * (1 + pick(&s, gran >= 320 ? 1 : 320 / gran));
        /* fp8 against the unquantized ideal carries the intermediate's ~3% e4m3 noise: with a
         * handful of outputs per token the token's max is a poor yardstick for it (H = 8 can
         * exceed the contract's bar for an exact kernel), and with a handful of intermediate
         * values one e4m3 rounding flip weighs on a whole token; fp8 layers have H and I in
         * the thousands */
        if (fp8_family(f) && c.s.H < 128)
            c.s.H = 128;
        if (fp8_family(f) && c.s.I < 128)
            c.s.I = 128;
        c.s.E = 1 + pick(&s, 64);
        if (r == 4)
            c.s.E = k_deepseek[ds].ng * (1 + pick(&s, 64 / k_deepseek[ds].ng));
        c.s.k = 1 + pick(&s, c.s.E < 8 ? c.s.E : 8);
        c.s.T = pick(&s, 3) == 0 ? pick(&s, 200) : pick(&s, 24);
        /* the tensor cores' prefill paths: a sixth of the draws at 256..1279 tokens */
        if (tc && pick(&s, 6) == 0)
            c.s.T = 256 + pick(&s, 1024);
        if (pick(&s, 3) == 0 && c.s.E > 1) {
            c.s.local = 1 + pick(&s, c.s.E);
            c.s.offset = pick(&s, c.s.E - c.s.local + 1);
        }
        /* keep the weights (and so the reference) small: at most ~3M elements */
        int64_t per_expert = (gated ? 3 : 2) * c.s.H * c.s.I;
        int64_t local = c.s.local ? c.s.local : c.s.E;
        if (local * per_expert > 3000000) {
            local = 3000000 / per_expert > 0 ? 3000000 / per_expert : 1;
            c.s.local = local < c.s.E ? local : 0;
            c.s.offset = c.s.local ? pick(&s, c.s.E - c.s.local + 1) : 0;
        }
        c.overrides = tc ? ovr : has_overrides(act) && pick(&s, 3) == 0;
        c.routing_bias = r == 4 && pick(&s, 2);
        c.graph = pick(&s, 8) == 0;
        e.cases[0] = c;
        e.ncases = 1;
        n = add(es, n, cap, filter, &e);
    }
    return n;
}

/* ---- controls ------------------------------------------------------------------------------------- */

static entry *find_text(entry *es, int n, const char *text)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(es[i].text, text))
            return &es[i];
    return NULL;
}

/* The first entry of the part whose spec satisfies all given substrings. */
static entry *find_with(entry *es, int n, part p, const char *a, const char *b)
{
    for (int i = 0; i < n; i++)
        if (es[i].part == p && es[i].spec && strstr(es[i].text, a) && (!b || strstr(es[i].text, b)))
            return &es[i];
    return NULL;
}

/* The case of e with the most tokens (the strongest evidence). */
static const gcase *largest(const entry *e)
{
    const gcase *best = NULL;
    for (int i = 0; e && i < e->ncases; i++)
        if (!best || e->cases[i].s.T > best->s.T)
            best = &e->cases[i];
    return best;
}

void controls_activations(const suite *S, entry *es, int n, tally *t)
{
    moejit_activation *relu2 = NULL, *unclamped = NULL;
    if (moejit_activation_create(MOEJIT_ACT_RELU2, &relu2) ||
        moejit_activation_swiglu(1.702f, 1.0f, 3.4028234663852886e38f, &unclamped)) {
        printf("FAIL  control: setup: %s\n", moejit_last_error());
        t->failed++;
        return;
    }
    char text[384];
    const gcase *c = &(gcase){.s = k_shapes2[4]};
    mutation m = mutation_none();
    snprintf(text, sizeof text, "backend=%s,quant=bf16,act=relu,arch=%s,routing=softmax_topk", S->backend, S->arch);
    entry *e = find_text(es, n, text);
    m.act = relu2;
    run_control(S, e, c, &m, "relu kernel vs relu2 reference", t);
    m = mutation_none();
    m.zero_out = 1;
    run_control(S, e, c, &m, "all-zero output", t);
    snprintf(text, sizeof text, "backend=%s,quant=bf16,act=swiglu,arch=%s,routing=softmax_topk", S->backend,
             S->arch);
    m = mutation_none();
    m.layout = MJ_W1_GATE_UP;
    run_control(S, find_text(es, n, text), c, &m, "swiglu kernel vs reference with swapped u/g halves", t);
    snprintf(text, sizeof text,
             "backend=%s,quant=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),arch=%s,routing=renormalize", S->backend,
             S->arch);
    m = mutation_none();
    m.act = unclamped;
    run_control(S, find_text(es, n, text), c, &m,
                "gpt-oss swiglu kernel vs unclamped reference (the clamp is exercised)", t);
    /* the checker itself: a never-written (poisoned, NaN) output is rejected */
    const float nan_out[4] = {NAN, NAN, NAN, NAN};
    const double ref[4] = {1, 2, 3, 4};
    int ok = !(suite_max_error(nan_out, ref, 1, 4) <= 0.05);
    printf("%s  control: poisoned (NaN) output\n", ok ? "PASS" : "FAIL");
    if (ok)
        t->passed++;
    else
        t->failed++;
    moejit_activation_destroy(relu2);
    moejit_activation_destroy(unclamped);
}

void controls_formats(const suite *S, entry *es, int n, tally *t)
{
    entry *e;
    mutation m;
    e = find_with(es, n, PART_FORMATS, "quant=mxfp4", NULL);
    m = mutation_none();
    m.swap_nibbles = 1;
    run_control(S, e, largest(e), &m, "mxfp4 kernel vs reference reading each byte's nibbles swapped", t);
    e = find_with(es, n, PART_FORMATS, "zero_point=1", NULL);
    m = mutation_none();
    m.zero_points_ignored = 1;
    run_control(S, e, largest(e), &m, "w4a16 zero_point=1 kernel vs reference with zero point 8", t);
    e = find_with(es, n, PART_FORMATS, "n_group=4,topk_group=2", NULL);
    m = mutation_none();
    m.no_group_masking = 1;
    run_control(S, e, largest(e), &m, "deepseek_v3 kernel vs reference without group masking", t);
    e = find_with(es, n, PART_FORMATS, "w1_layout=interleaved", NULL);
    m = mutation_none();
    m.layout = MJ_W1_UP_GATE;
    run_control(S, e, largest(e), &m, "interleaved-W1 kernel vs reference reading up_gate halves", t);
    /* the tensor cores take no bias with fp8: b2 is dropped from a bf16 layer there */
    e = find_with(es, n, PART_FORMATS, suite_tensor_cores(S) ? "quant=bf16" : "quant=fp8_block", "bias=b2");
    m = mutation_none();
    m.drop_b2 = 1;
    run_control(S, e, largest(e), &m,
                suite_tensor_cores(S) ? "bf16 kernel with b2 vs reference without b2"
                                      : "fp8_block kernel with b2 vs reference without b2",
                t);
    if (!strcmp(S->backend, "mma"))
        return; /* no fp8 there */
    e = find_with(es, n, PART_FORMATS, "quant=fp8_block", NULL);
    m = mutation_none();
    m.act_quant = MJ_REF_AQ_FP8_TOKEN;
    /* rows of several 128-wide blocks in x and in the intermediate, or the two groupings agree */
    gcase wide = e ? *largest(e) : (gcase){0};
    wide.s.H = 512, wide.s.I = 384;
    run_control(S, e, &wide, &m, "fp8_block kernel vs replay quantizing per token instead of per 1 x 128", t);
    e = find_with(es, n, PART_FORMATS, "fp8_act=tensor", NULL);
    m = mutation_none();
    m.act_quant = MJ_REF_AQ_FP8_TOKEN;
    run_control(S, e, largest(e), &m,
                "fp8_tensor (fp8_act=tensor) kernel vs replay quantizing per token (the replay sees the grouping)", t);
    e = find_with(es, n, PART_FORMATS, "quant=fp8_tensor", NULL);
    m = mutation_none();
    m.zero_out = 1;
    run_control(S, e, largest(e), &m, "fp8_tensor: all-zero output", t);
}
