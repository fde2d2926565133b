/*
 * This file contains the checks of emit_test_util.h: what every compiled mma-family program
 * (mma's and wgmma's, one kernel table) must hold, whatever its arch or activation.
 */
#include "emit_test_util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "templates/common/mma_params.h"
#include "templates/common/wgmma_params.h"
#include "fake_cuda.h"

int mj_test_cubin_contains(const mj_program *p, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i + n <= p->cubin_len; i++)
        if (memcmp(p->cubin + i, name, n) == 0 && (i + n == p->cubin_len || p->cubin[i + n] == '\0')) return 1;
    return 0;
}

const char *mj_test_check_mma_program(const char *text, const mj_program *p, int gemm_max_registers)
{
    /* mma's table; the wgmma layer appends its tall and pair paths' kernels */
    static const char *const names[MJ_WGMMA_NUM_KERNELS] = {MJ_MMA_KERNEL_NAME_LIST, MJ_WGMMA_TALL_KERNEL_NAME_LIST};
    const int wgmma = strstr(text, "backend=wgmma") != NULL;
    const int n = wgmma ? MJ_WGMMA_NUM_KERNELS : MJ_MMA_NUM_KERNELS;
    MJ_EXPECT(p->cubin_len > 4 && memcmp(p->cubin, "\177ELF", 4) == 0, "%s: cubin lacks ELF magic", text);
    MJ_EXPECT(p->n_kernels == n, "%s: %d kernels, the table has %d", text, p->n_kernels, n);
    for (int i = 0; i < n; i++) {
        const mj_kernel_info *k = &p->kernels[i];
        MJ_EXPECT(strcmp(k->name, names[i]) == 0, "%s: kernel %d is %s, the table says %s", text, i, k->name,
                  names[i]);
        MJ_EXPECT(mj_test_cubin_contains(p, names[i]), "%s: %s not in the cubin", text, names[i]);
        MJ_EXPECT(k->registers > 0 && k->spill_store_bytes == 0 && k->spill_load_bytes == 0 && k->stack_bytes == 0,
                  "%s: %s has registers %d, spills %d/%d, stack %d", text, k->name, k->registers,
                  k->spill_store_bytes, k->spill_load_bytes, k->stack_bytes);
        if (i == MJ_MMA_K_GEMM1_ACT || i == MJ_MMA_K_GEMM2 || i == MJ_WGMMA_K_GEMM1_ACT_TALL ||
            i == MJ_WGMMA_K_GEMM2_TALL)
            MJ_EXPECT(k->registers <= gemm_max_registers, "%s: %s uses %d registers, its launch bounds allow %d",
                      text, k->name, k->registers, gemm_max_registers);
    }
    return NULL;
}

int mj_test_sass_scan(const mj_program *p, const char *const *names, int n, int *lines, int *hgmma, int *local)
{
    return mj_test_sass_scan_op(p, names, n, "HGMMA", lines, hgmma, local);
}

int mj_test_sass_scan_op(const mj_program *p, const char *const *names, int n, const char *op, int *lines, int *ops,
                         int *local)
{
    const char *tool = getenv("MOEJIT_NVDISASM");
    if (!tool || !*tool || access(tool, X_OK) != 0) return -1;
    for (int i = 0; i < n; i++) lines[i] = ops[i] = local[i] = 0;
    char path[] = "/tmp/moejit-sass-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return -1;
    const int written = write(fd, p->cubin, p->cubin_len) == (ssize_t)p->cubin_len;
    close(fd);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' -c %s 2>/dev/null", tool, path);
    FILE *f = written ? popen(cmd, "r") : NULL;
    if (!f) {
        unlink(path);
        return -1;
    }
    /* nvdisasm splits the listing per function: ".section .text.NAME," */
    char line[4096];
    int in = -1;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, ".section") && strstr(line, ".text.")) {
            in = -1;
            for (int i = 0; i < n; i++) {
                char want[256];
                snprintf(want, sizeof want, ".text.%s,", names[i]);
                if (strstr(line, want)) in = i;
            }
        }
        if (in < 0) continue;
        lines[in]++;
        if (strstr(line, op)) ops[in]++;
        if (strstr(line, " LDL") || strstr(line, " STL")) local[in]++;
    }
    pclose(f);
    unlink(path);
    return 0;
}

void mj_test_routing_constants(const char *base, char *(*source_of)(const char *text))
{
    static const struct { const char *fields, *routing, *group; } r[] = {
        {"routing=softmax_topk", "softmax_topk", NULL},
        {"routing=renormalize,logits=bf16", "renormalize", NULL},
        {"routing=sigmoid_topk", "sigmoid_topk", NULL},
        {"routing=sigmoid_renorm,logits=bf16", "sigmoid_renorm", NULL},
        {"routing=deepseek_v3,n_group=8,topk_group=4,routed_scaling=2.5", "deepseek_v3",
         "constexpr int kNGroup = 8;\nconstexpr int kTopkGroup = 4;\nconstexpr float kRoutedScaling = 0x1.4p+1f;"},
        {"routing=llama4,topk=1", "llama4", NULL},
        {"routing=precomputed", "precomputed", NULL},
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        char text[256], want[96];
        snprintf(text, sizeof text, "%s,%s", base, r[i].fields);
        char *src = source_of(text);
        snprintf(want, sizeof want, "constexpr Routing kRouting = Routing::%s;", r[i].routing);
        ck_assert_msg(strstr(src, want) != NULL, "%s: lacks %s", text, want);
        ck_assert_ptr_nonnull(strstr(src, r[i].group ? r[i].group
                                                      : "constexpr int kNGroup = 1;\nconstexpr int kTopkGroup = 1;"));
        ck_assert_ptr_nonnull(strstr(src, strstr(text, "logits=bf16") ? "kLogitsDtype = Dtype::bf16;"
                                                                      : "kLogitsDtype = Dtype::fp32;"));
        free(src);
    }
}
