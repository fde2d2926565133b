/*
 * This file fuzzes the cache entry decoder (cache/entry.h): any bytes either are a fault or
 * decode to an entry whose fields are within their documented bounds and which encodes again;
 * the in-place decode of a disk load agrees with it.
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
    }
    /* the in-place decode a disk load uses gives the same verdict and the same cubin */
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy) return 0;
    if (n) memcpy(copy, data, n);
    mj_entry o;
    mj_entry_fault owned_fault;
    if (mj_entry_decode_owned(copy, n, &o, &owned_fault) == MOEJIT_OK) {
        MJ_FUZZ_REQUIRE(owned_fault == fault, "in-place decode: fault %d, copying decode %d", owned_fault, fault);
        if (owned_fault == MJ_ENTRY_OK)
            MJ_FUZZ_REQUIRE(o.cubin_len == e.cubin_len && (!o.cubin_len || !memcmp(o.cubin, e.cubin, o.cubin_len)),
                            "in-place decode: another cubin");
        mj_entry_free(&o);
    }
    if (fault == MJ_ENTRY_OK) mj_entry_free(&e);
    return 0;
}
