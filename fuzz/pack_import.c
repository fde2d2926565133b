/*
 * This file fuzzes pack import: the input is written to a file and imported, as unsigned
 * packs are with --trust-unsigned, into a private temp cache that is emptied after each run.
 */
#include <unistd.h>

#include "cache/cache.h"
#include "fuzz/fuzz_util.h"

static mj_cache *g_cache;
static char g_pack[300];

static void init(void)
{
    static char root[] = "/tmp/mjfuzz-pack-XXXXXX";
    if (!mkdtemp(root)) abort();
    mj_cache_config cfg;
    if (mj_cache_config_resolve(NULL, &cfg) != MOEJIT_OK) abort();
    snprintf(cfg.dir, sizeof cfg.dir, "%s/cache", root);
    snprintf(cfg.lock_dir, sizeof cfg.lock_dir, "%s/locks", root);
    cfg.mode = MJ_CACHE_READ_WRITE;
    cfg.shared = 0;
    if (mj_cache_open_config(&cfg, &g_cache) != MOEJIT_OK) abort();
    snprintf(g_pack, sizeof g_pack, "%s/input.mjkpack", root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    if (!g_cache) init();
    FILE *f = fopen(g_pack, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) abort();
    mj_pack_opts opts = {NULL, 1};
    int64_t added = 0, present = 0;
    moejit_status st = mj_cache_import(g_cache, g_pack, &opts, &added, &present);
    MJ_FUZZ_REQUIRE(st == MOEJIT_OK || added == 0, "a refused pack added %lld entries", (long long)added);
    if (added) mj_cache_clear(g_cache, NULL);
    return 0;
}
