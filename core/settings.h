/*
 * settings.h — every run-time knob of moejit in one table: its key, environment variable, type,
 * default, allowed values, scope and the reason it exists, and the resolver that turns the
 * table, moejit_options and the environment into one value per knob with its origin.
 *
 * Resolution order per setting: a value given on the command line (the CLI's own flags), else
 * the moejit_options field (where the setting has one), else the environment variable (an empty
 * variable counts as unset), else the default. A bad value is an error naming the setting or
 * variable and the allowed values, never a silent default.
 *
 * Scope: "context" settings are resolved once by moejit_context_create into the context and
 * read from there (the launch code gets decode and pdl from the kernel it launches); "cache"
 * settings the same, through the cache's configuration; "process" settings (the driver library
 * and the tuning table) name one thing per process by nature: they are read through this table
 * once per process, under pthread_once, and a context only reports them.
 */
#ifndef MJ_SETTINGS_H
#define MJ_SETTINGS_H

#include <stdint.h>

#include "moejit.h"
#include "core/strbuf.h"

/* Row numbers of the table; the order is the listing order. The cache's seven come first
 * (cache/config.h names them MJ_SET_DIR .. MJ_SET_SHARED). */
typedef enum mj_setting_id {
    MJ_SETTING_CACHE_DIR = 0,
    MJ_SETTING_CACHE_MODE,
    MJ_SETTING_CACHE_MAX_BYTES,
    MJ_SETTING_CACHE_MAX_AGE,
    MJ_SETTING_LOCK_DIR,
    MJ_SETTING_LOCK_TIMEOUT,
    MJ_SETTING_CACHE_SHARED,
    MJ_SETTING_COMPILE_TIMEOUT,
    MJ_SETTING_COMPILE_WORKER,
    MJ_SETTING_DECODE,
    MJ_SETTING_PDL,
    MJ_SETTING_ALLOW_UNVALIDATED,
    MJ_SETTING_TUNE_FILE,
    MJ_SETTING_LIBCUDA,
    MJ_SETTING_REMOTE,
    MJ_SETTING_REMOTE_PASSWORD_FILE,
    MJ_SETTING_REMOTE_TLS,
    MJ_SETTING_REMOTE_PREFIX,
    MJ_SETTING_REMOTE_CONNECT_TIMEOUT,
    MJ_SETTING_REMOTE_TIMEOUT,
    MJ_SETTING_REMOTE_MODE,
    MJ_SETTING_REMOTE_KEY_FILE,
    MJ_SETTING_REMOTE_TRUST,
    MJ_SETTING_COUNT
} mj_setting_id;

#define MJ_SETTING_CACHE_COUNT (MJ_SETTING_CACHE_SHARED + 1)

typedef struct mj_setting_info {
    const char *key;          /* "compile_timeout" */
    const char *env;          /* "MOEJIT_COMPILE_TIMEOUT" */
    const char *type;         /* "path", "mode", "size", "seconds", "bool", "enum" */
    const char *default_text; /* the default as a user reads it */
    const char *allowed;      /* the allowed values, quoted in error messages */
    const char *why;          /* one sentence */
    const char *option;       /* the moejit_options field, or NULL */
    const char *scope;        /* "context", "cache" or "process" (see above) */
} mj_setting_info;

extern const mj_setting_info mj_settings_table[MJ_SETTING_COUNT];

typedef enum mj_setting_origin {
    MJ_ORIGIN_DEFAULT = 0,
    MJ_ORIGIN_ENV,
    MJ_ORIGIN_OPTION,      /* a moejit_options field or an explicit API value */
    MJ_ORIGIN_COMMAND_LINE /* a flag of the moejit CLI */
} mj_setting_origin;

/* "default", "environment", "option", "command line". */
const char *mj_setting_origin_name(mj_setting_origin o);

/* Values of the enumerated settings. */
enum { MJ_CACHE_MODE_READ_WRITE = 0, MJ_CACHE_MODE_READ_ONLY, MJ_CACHE_MODE_OFFLINE, MJ_CACHE_MODE_OFF };

/* Which decode layer runs at T <= MJ_MMA_PERSISTENT_MAX_TOKENS (runtime/gemm_plan.h): the rule
 * (auto), always / never the persistent one (persistent, chain), or always the persistent one
 * in its 2 x 9-stage or 3 x 6-stage blocks per SM (persistent_deep, persistent_shallow). */
enum {
    MJ_DECODE_AUTO = 0,
    MJ_DECODE_PERSISTENT,
    MJ_DECODE_CHAIN,
    MJ_DECODE_PERSISTENT_DEEP,
    MJ_DECODE_PERSISTENT_SHALLOW
};

/* Which of a tensor-core forward's kernels are programmatic dependent launches on sm_90+
 * (launch_common.h says what each means): "0", "inner", "1". */
enum { MJ_PDL_OFF = 0, MJ_PDL_INNER = 1, MJ_PDL_ALL = 2 };

/* The remote cache tier (cache/remote.h): whether it is written, and whether unsigned entries
 * are accepted from it. */
enum { MJ_REMOTE_MODE_READ_WRITE = 0, MJ_REMOTE_MODE_READ_ONLY = 1 };
enum { MJ_REMOTE_TRUST_SIGNED = 0, MJ_REMOTE_TRUST_UNSIGNED = 1 };

#define MJ_SETTINGS_PATH_MAX 4096
#define MJ_SETTINGS_DEFAULT_MAX_BYTES (4LL << 30)
#define MJ_SETTINGS_DEFAULT_LOCK_TIMEOUT_S 120.0
#define MJ_SETTINGS_DEFAULT_COMPILE_TIMEOUT_S 300.0
#define MJ_SETTINGS_DEFAULT_LIBCUDA "libcuda.so.1"
#define MJ_SETTINGS_DEFAULT_REMOTE_PREFIX "moejit:"
#define MJ_SETTINGS_DEFAULT_REMOTE_CONNECT_TIMEOUT_S 1.0
#define MJ_SETTINGS_DEFAULT_REMOTE_TIMEOUT_S 2.0
#define MJ_SETTINGS_REMOTE_PREFIX_MAX 200

/* Every setting resolved, with where each value came from. */
typedef struct mj_settings {
    char cache_dir[MJ_SETTINGS_PATH_MAX];
    int cache_mode;            /* MJ_CACHE_MODE_* */
    int64_t cache_max_bytes;   /* > 0 */
    int64_t cache_max_age_s;   /* 0: no age limit */
    char lock_dir[MJ_SETTINGS_PATH_MAX];
    double lock_timeout_s;     /* >= 0 */
    int cache_shared;          /* 0 or 1 */
    double compile_timeout_s;  /* > 0 */
    char compile_worker[MJ_SETTINGS_PATH_MAX]; /* "": the one beside the library */
    int decode;                /* MJ_DECODE_* */
    int pdl;                   /* MJ_PDL_* */
    int allow_unvalidated;     /* 0 or 1 */
    char tune_file[MJ_SETTINGS_PATH_MAX];      /* "": no tuning table */
    char libcuda[MJ_SETTINGS_PATH_MAX];        /* the driver library dlopen'ed */
    char remote[MJ_SETTINGS_PATH_MAX];         /* "": no remote tier */
    char remote_password_file[MJ_SETTINGS_PATH_MAX]; /* "": no AUTH */
    int remote_tls;                            /* 0 or 1 */
    char remote_prefix[MJ_SETTINGS_REMOTE_PREFIX_MAX + 1];
    double remote_connect_timeout_s;           /* > 0 */
    double remote_timeout_s;                   /* > 0 */
    int remote_mode;                           /* MJ_REMOTE_MODE_* */
    char remote_key_file[MJ_SETTINGS_PATH_MAX]; /* "": no fleet key */
    int remote_trust;                          /* MJ_REMOTE_TRUST_* */
    mj_setting_origin origin[MJ_SETTING_COUNT];
} mj_settings;

/* Texts given on the command line, indexed by mj_setting_id; NULL entries (or a NULL array)
 * give none. They are parsed as the environment's texts are. */
typedef const char *mj_settings_cli[MJ_SETTING_COUNT];

/* Resolves every setting; opts and cli may be NULL. On failure *out is partly filled. */
moejit_status mj_settings_resolve(const moejit_options *opts, const char *const *cli, mj_settings *out);
/* Resolves setting id alone into its field of out (and out->origin[id]); the other fields are
 * left as they are. */
moejit_status mj_settings_resolve_one(mj_setting_id id, const moejit_options *opts, const char *const *cli,
                                      mj_settings *out);
/* Appends the resolved value of one setting as text (what a listing prints). */
void mj_settings_format(const mj_settings *s, mj_setting_id id, mj_buf *out);

/* Parsers shared with the cache and the CLI; `setting` names the setting in the message. */
const char *mj_settings_cache_mode_name(int mode);
moejit_status mj_settings_parse_cache_mode(const char *setting, const char *text, int *out);
/* "4G", "512M", "100000": a positive byte count, K/M/G/T = powers of 1024. */
moejit_status mj_settings_parse_size(const char *setting, const char *text, int64_t *out);
/* "30d", "12h", "90m", "45s", "3600": seconds >= 0 (0 = no limit). */
moejit_status mj_settings_parse_age(const char *setting, const char *text, int64_t *out);
const char *mj_settings_decode_name(int decode);
const char *mj_settings_pdl_name(int pdl);
const char *mj_settings_remote_mode_name(int mode);   /* "read-write", "read-only" */
const char *mj_settings_remote_trust_name(int trust); /* "signed", "unsigned" */

#endif
