/*
 * This file fuzzes the cache entry decoder (cache/entry.h): any bytes either are a fault or
 * decode to an entry whose fields are within their documented bounds and which encodes again.
 */
#include "cache/entry.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    mj_entry e;
    mj_entry_fault fault;
    if (mj_entry_decode(data, n, &e, &fault) != MOEJIT_OK) return 0;
    if (fault == MJ_ENTRY_OK) {
        MJ_FUZZ_REQUIRE(e.n_kernels >= 0 && e.n_kernels <= MJ_MAX_KERNELS, "n_kernels %d", e.n_kernels);
        MJ_FUZZ_REQUIRE(strlen(e.key) == 64, "key length %zu", strlen(e.key));
        mj_buf b = MJ_BUF_INIT;
        MJ_FUZZ_REQUIRE(mj_entry_encode(&e, &b) == MOEJIT_OK, "a decoded entry does not encode");
        mj_buf_free(&b);
        mj_entry_free(&e);
    }
    return 0;
}
