/*
 * This file fuzzes the manifest reader of `moejit warm --manifest` (tools/plan.c): the input
 * is written to a file and read into a plan; every item it yields must have a canonical spec
 * that parses again.
 */
#include <unistd.h>

#include "fuzz/fuzz_util.h"
#include "tools/plan.h"

static char g_path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    if (!g_path[0]) {
        snprintf(g_path, sizeof g_path, "/tmp/mjfuzz-manifest-%ld.json", (long)getpid());
    }
    FILE *f = fopen(g_path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) abort();
    cli_plan plan;
    memset(&plan, 0, sizeof plan);
    static const char *const archs[] = {"sm_90a"};
    if (cli_plan_add_manifest(&plan, "fuzz", g_path, archs, (int)(n & 1)) == 0) {
        for (int i = 0; i < plan.n; i++) {
            moejit_spec *s = NULL;
            MJ_FUZZ_REQUIRE(moejit_spec_parse(plan.items[i].canonical, &s) == MOEJIT_OK, "item '%s': %s",
                            plan.items[i].canonical, moejit_last_error());
            moejit_spec_destroy(s);
        }
    }
    cli_plan_free(&plan);
    return 0;
}
