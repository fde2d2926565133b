/*
 * entry.h — one cache entry: the self-checking file that holds one compiled layer.
 *
 * File name: <cache>/<k0k1>/<k2k3>/<key>.v2.mjk, where k0..k3 are the first four hex digits of
 * the key (two levels of sharding keep directories small) and "v2" is the format version, so
 * two moejit versions with different formats can share a cache without quarantining each
 * other's entries.
 *
 * Format version 2 (all integers little-endian; str = u32 length, then that many bytes, no
 * NUL; nothing is aligned):
 *
 *   entry      = magic version key meta cubin log checksum
 *   magic      = "MJKENTRY"                       8 bytes
 *   version    = u32 2                            MJ_ENTRY_VERSION
 *   key        = str (64 lowercase hex digits)    must equal the file name's key
 *   meta       = spec preimage arch nvrtc compile_us created kernels
 *   spec       = str                              canonical spec, compared on every load
 *   preimage   = str                              the key's preimage (key.h)
 *   arch       = str                              "sm_90a"
 *   nvrtc      = u32 major, u32 minor
 *   compile_us = u64                              NVRTC wall time in microseconds
 *   created    = i64                              unix seconds when the entry was written
 *   kernels    = u32 n (<= MJ_MAX_KERNELS), n x kernel
 *   kernel     = str name, i32 registers, i32 shared_bytes, i32 stack_bytes,
 *                i32 spill_store_bytes, i32 spill_load_bytes
 *   cubin      = str                              the ELF NVRTC produced
 *   log        = str                              NVRTC's log (with ptxas' report)
 *   checksum   = 8 bytes                          XXH3-64 of every byte before it, little-endian
 *
 * Version 1 is the same but for its checksum, 32 bytes of SHA-256: still decoded (packs and
 * remote entries written before version 2), never written; its files (.v1.mjk) are not looked
 * up, so a cache of version 1 recompiles into version 2 and gc ages the old files out. The
 * checksum detects corruption only (XXH3 runs at memory speed, SHA-256 took most of a disk
 * load); packs and the remote tier carry an HMAC against tampering.
 * Any change to this grammar bumps MJ_ENTRY_VERSION (and so the file name); a golden test
 * (tests/check_cache_entry.c) pins version 2's bytes.
 */
#ifndef MJ_CACHE_ENTRY_H
#define MJ_CACHE_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "moejit.h"
#include "core/program.h"
#include "core/strbuf.h"

#define MJ_ENTRY_MAGIC "MJKENTRY"
#define MJ_ENTRY_VERSION 2u
#define MJ_ENTRY_SUFFIX ".v2.mjk"
/* Largest entry accepted on read: bigger is not ours (cubins of one layer are < 16 MiB). */
#define MJ_ENTRY_MAX_BYTES (256u << 20)

typedef struct mj_entry {
    char key[65];
    char *canonical_spec;  /* owned */
    char *preimage;        /* owned */
    char *arch;            /* owned */
    int nvrtc_major, nvrtc_minor;
    double compile_seconds;
    int64_t created_unix;
    int n_kernels;
    mj_kernel_info kernels[MJ_MAX_KERNELS];
    uint8_t *cubin;        /* owned */
    size_t cubin_len;
    char *log;             /* owned */
} mj_entry;

/* Why a file is not a valid entry; each one quarantines it. Explicit numbers: logged. */
typedef enum mj_entry_fault {
    MJ_ENTRY_OK = 0,
    MJ_ENTRY_TRUNCATED = 1,     /* shorter than its fields say, or than the smallest entry */
    MJ_ENTRY_FOREIGN = 2,       /* wrong magic: not a moejit entry */
    MJ_ENTRY_BAD_VERSION = 3,   /* magic right, version neither MJ_ENTRY_VERSION nor 1 */
    MJ_ENTRY_BAD_CHECKSUM = 4,  /* trailer does not match the bytes */
    MJ_ENTRY_MALFORMED = 5,     /* checksum right but a field is impossible (a bug) */
    MJ_ENTRY_KEY_MISMATCH = 6,  /* stored key is not the file's key */
    MJ_ENTRY_SPEC_MISMATCH = 7, /* stored spec is not the requested spec */
    MJ_ENTRY_UNSAFE = 8,        /* owned by another user or writable by others */
    MJ_ENTRY_PREIMAGE_KEY = 9,  /* stored key is not the SHA-256 of the stored preimage */
    MJ_ENTRY_PREIMAGE_SPEC = 10,/* stored spec is not the spec line of the stored preimage */
    MJ_ENTRY_NOT_REGULAR = 11   /* a directory, FIFO, socket or device in place of the file */
} mj_entry_fault;

const char *mj_entry_fault_name(mj_entry_fault f); /* "bad checksum" etc. */

/* Serialises e (checksum included) into out, replacing its contents. */
moejit_status mj_entry_encode(const mj_entry *e, mj_buf *out);
/* Parses and checks data. On MJ_ENTRY_OK fills *out (caller frees with mj_entry_free); on any
 * other fault *out is left empty. Only MOEJIT_ERR_OUT_OF_MEMORY is returned as an error: a bad
 * file is a fault, not a failure. */
moejit_status mj_entry_decode(const void *data, size_t n, mj_entry *out, mj_entry_fault *fault);
/* The same, taking data (malloc'ed, n bytes): a good entry's cubin is data itself (its cubin
 * moved to the start), so a load copies no cubin; otherwise data is freed. */
moejit_status mj_entry_decode_owned(uint8_t *data, size_t n, mj_entry *out, mj_entry_fault *fault);
void mj_entry_free(mj_entry *e);

/* Builds an entry from a compiled program (deep copies; created = now). nvrtc version and
 * compile time are taken from the preimage and the program. */
moejit_status mj_entry_from_program(const mj_program *p, const char *key_hex, const char *preimage,
                                    mj_entry *out);
/* Fills a program from an entry (deep copies; compile_seconds = 0, as for every cache load). */
moejit_status mj_entry_to_program(const mj_entry *e, mj_program *out);
/* The same without copying: the buffers move from e (left empty) to out. The load path uses
 * it because a cubin copy is a large part of a disk hit. */
void mj_entry_move_to_program(mj_entry *e, mj_program *out);

#endif
