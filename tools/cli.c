/*
 * This file contains the helpers every moejit subcommand shares: error lines, option
 * values, the cache handle, arch lists, and rewriting a spec's fields (--arch, manifest
 * shapes) before it is parsed.
 */
#include "tools/cli.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "core/spec.h"
#include "core/status.h"
#include "core/strbuf.h"

const char cli_default_spec[] =
    "backend=simt,quant=bf16,act=swiglu,routing=renormalize,hidden=2048,inter=768,"
    "experts=128,topk=8";

void cli_error(const char *fmt, ...)
{
    /* Messages quote arguments, paths and file contents: control characters are escaped so
     * that none can forge lines or drive the terminal. */
    char raw[MJ_ERROR_MAX], safe[MJ_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    mj_escape_text(safe, sizeof safe, raw);
    fprintf(stderr, "moejit: %s\n", safe);
}

int cli_fail(moejit_status status, const char *what)
{
    cli_error("%s: %s", what, moejit_last_error());
    return status == MOEJIT_ERR_INVALID_ARGUMENT || status == MOEJIT_ERR_UNSUPPORTED
               ? MJ_EXIT_USAGE
               : MJ_EXIT_FAIL;
}

int cli_is_tty(FILE *f) { return isatty(fileno(f)); }

long long cli_parse_count(const char *option, const char *value, long long max)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (errno || !end || *end || end == value || v < 0 || v > max) {
        cli_error("%s: expected an integer in 0..%lld, got '%s'", option, max, value);
        return -1;
    }
    return v;
}

int cli_bad_option(const char *cmd, int c, char **argv)
{
    const char *opt = argv[optind - 1];
    if (c == ':')
        cli_error("%s: option '%s' needs a value (see moejit %s --help)", cmd, opt, cmd);
    else if (optopt && optopt != '?')
        cli_error("%s: unknown option '-%c' (see moejit %s --help)", cmd, optopt, cmd);
    else
        cli_error("%s: unknown option '%s' (see moejit %s --help)", cmd, opt, cmd);
    return MJ_EXIT_USAGE;
}

/* --cache-dir reaches every cache this process and its children open through the environment,
 * and is remembered as a command-line setting so that listings report where it came from. */
void cli_set_cache_dir(const char *dir)
{
    setenv("MOEJIT_CACHE_DIR", dir, 1);
    cli_set_setting(MJ_SETTING_CACHE_DIR, dir);
}

static mj_settings_cli g_cli_settings;

void cli_set_setting(mj_setting_id id, const char *text)
{
    if ((unsigned)id < MJ_SETTING_COUNT) g_cli_settings[id] = text;
}

const char *const *cli_settings(void) { return g_cli_settings; }

int cli_resolve_settings(const char *cmd, mj_settings *out)
{
    moejit_status st = mj_settings_resolve(NULL, g_cli_settings, out);
    return st == MOEJIT_OK ? MJ_EXIT_OK : cli_fail(st, cmd);
}

int cli_open_cache(mj_cache **out)
{
    moejit_status st = mj_cache_open(NULL, out);
    return st == MOEJIT_OK ? MJ_EXIT_OK : cli_fail(st, "cache");
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cli_parse_archs(const char *option, const char *value, const char **archs, int max)
{
    int n = 0;
    const char *p = value;
    while (1) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int found = -1;
        for (int a = 0; a < MJ_ARCH_COUNT; a++)
            if (strlen(mj_arch_names[a]) == len && strncasecmp(mj_arch_names[a], p, len) == 0) found = a;
        if (found < 0) {
            mj_buf b = MJ_BUF_INIT;
            for (int a = 0; a < MJ_ARCH_COUNT; a++) mj_buf_printf(&b, "%s%s", a ? ", " : "", mj_arch_names[a]);
            cli_error("%s: unknown arch '%.*s'; allowed: %s (comma-separated)", option, (int)len, p,
                      b.data ? b.data : "");
            mj_buf_free(&b);
            return -1;
        }
        int dup = 0;
        for (int i = 0; i < n; i++) dup |= archs[i] == mj_arch_names[found];
        if (!dup) {
            if (n >= max) {
                cli_error("%s: more than %d archs", option, max);
                return -1;
            }
            archs[n++] = mj_arch_names[found];
        }
        if (!comma) break;
        p = comma + 1;
    }
    return n;
}

/* ---- rewriting spec fields ---------------------------------------------------------------- */

static int name_in(const char *key, size_t klen, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == klen && strncasecmp(names[i], key, klen) == 0) return i;
    return -1;
}

/* key=value form: fields split at top-level commas (act=swiglu(alpha=1,beta=2) holds commas
 * inside parentheses). Replaced fields are dropped and appended at the end. */
static char *text_with(const char *text, const char *const *names, const char *const *values, int n)
{
    mj_buf b = MJ_BUF_INIT;
    const char *p = text;
    int first = 1;
    while (*p) {
        const char *start = p;
        int depth = 0;
        while (*p && (depth > 0 || *p != ',')) {
            if (*p == '(') depth++;
            else if (*p == ')' && depth > 0) depth--;
            p++;
        }
        const char *end = p;
        if (*p == ',') p++;
        const char *k = start;
        while (k < end && isspace((unsigned char)*k)) k++;
        const char *eq = memchr(k, '=', (size_t)(end - k));
        size_t klen = (size_t)((eq ? eq : end) - k);
        while (klen && isspace((unsigned char)k[klen - 1])) klen--;
        if (end == k) continue; /* empty field */
        if (name_in(k, klen, names, n) >= 0) continue;
        mj_buf_printf(&b, "%s%.*s", first ? "" : ",", (int)(end - start), start);
        first = 0;
    }
    for (int i = 0; i < n; i++) {
        if (!values[i]) continue;
        mj_buf_printf(&b, "%s%s=%s", first ? "" : ",", names[i], values[i]);
        first = 0;
    }
    mj_buf_puts(&b, "");
    return mj_buf_take(&b);
}

static char *json_with(const char *text, const char *const *names, const char *const *values, int n)
{
    cJSON *o = cJSON_Parse(text);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        cJSON_DeleteItemFromObjectCaseSensitive(o, names[i]);
        if (values[i]) cJSON_AddStringToObject(o, names[i], values[i]);
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

char *cli_spec_with(const char *text, const char *const *names, const char *const *values, int n)
{
    while (isspace((unsigned char)*text)) text++;
    return *text == '{' ? json_with(text, names, values, n) : text_with(text, names, values, n);
}

moejit_status cli_spec_parse(const char *text, moejit_spec **out)
{
    const char *p = text;
    while (isspace((unsigned char)*p)) p++;
    return *p == '{' ? moejit_spec_from_json(text, out) : moejit_spec_parse(text, out);
}

int cli_strv_push(cli_strv *s, const char *str)
{
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 16;
        char **v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v) return 0;
        s->v = v;
        s->cap = cap;
    }
    char *c = strdup(str);
    if (!c) return 0;
    s->v[s->n++] = c;
    return 1;
}

void cli_strv_free(cli_strv *s)
{
    for (int i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}
