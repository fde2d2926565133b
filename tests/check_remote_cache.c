/*
 * This file contains the tests of the remote cache tier (cache/remote.h) against a real
 * redis-server the suite starts itself (127.0.0.1 on a free port, no persistence, a temp
 * directory; killed and reaped by the fixture's teardown, and by the kernel if the test process
 * dies first): hit, miss, backfill, push, read-only mode, 16 processes on two nodes compiling
 * once, forged, foreign, unsigned and garbage entries refused and counted, the server killed,
 * stopped and restarted, eviction under maxmemory and OOM under noeviction, AUTH, no SIGPIPE
 * death, and the configuration's refusals. Every loop is bounded in count and time.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/fault.h"
#include "cache/remote.h"
#include "lib/cache_test_util.h"
#include "lib/check_main.h"

#define N_PROCS 16

static const char *SPEC = "backend=simt,act=silu";
static const char *SPEC2 = "backend=simt,act=relu2";

/* ---- the server --------------------------------------------------------------------------- */

static char ROOT[256];      /* made by the unchecked fixture: survives a failed test's process */
static int NO_REDIS;        /* redis-server is not installed: every test skips */
static pid_t REDIS = -1;
static int PORT;
static char KEY[320], KEY2[320], COUNT[320];
static mj_test_cache A, B;  /* two nodes: two cache and lock directories */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static redisContext *admin(void)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", PORT, tv);
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    if (c) redisSetTimeout(c, tv);
    return c;
}

/* Runs one command on the server; the reply (caller frees) or NULL. */
static redisReply *cmd(const char *fmt, ...)
{
    redisContext *c = admin();
    if (!c) return NULL;
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return r;
}

static void cmd_ok(const char *fmt, const char *a, const char *b)
{
    redisReply *r = cmd(fmt, a, b);
    ck_assert_msg(r && r->type != REDIS_REPLY_ERROR, "%s: %s", fmt, r && r->str ? r->str : "no reply");
    freeReplyObject(r);
}

static void redis_start(void)
{
    char dir[300], pidfile[300];
    snprintf(dir, sizeof dir, "%s/redis", ROOT);
    mkdir(dir, 0700);
    snprintf(pidfile, sizeof pidfile, "%s/redis.pid", ROOT);
    pid_t parent = getpid();
    REDIS = fork();
    ck_assert_int_ge(REDIS, 0);
    if (REDIS == 0) {
        /* Dies with the test process, even one that a failed assertion ended. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        char port[16];
        snprintf(port, sizeof port, "%d", PORT);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) {
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
        execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", dir, "--daemonize", "no", "--loglevel", "warning", (char *)NULL);
        _exit(127);
    }
    FILE *f = fopen(pidfile, "w");
    if (f) {
        fprintf(f, "%d\n", (int)REDIS);
        fclose(f);
    }
    /* Ready when it answers PING: at most 10 s. */
    for (int i = 0; i < 200; i++) {
        redisReply *r = cmd("PING");
        int ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        if (ok) return;
        int st;
        ck_assert_msg(waitpid(REDIS, &st, WNOHANG) == 0, "redis-server exited at start");
        sleep_s(0.05);
    }
    ck_abort_msg("redis-server did not answer PING within 10 s");
}

static void redis_stop(void)
{
    if (REDIS <= 0) return;
    kill(REDIS, SIGCONT);
    kill(REDIS, SIGKILL);
    waitpid(REDIS, NULL, 0);
    REDIS = -1;
}

static void write_key(const char *path, unsigned seed)
{
    unsigned char k[32];
    for (int i = 0; i < 32; i++) k[i] = (unsigned char)(seed * 131 + i * 7 + 1);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, k, sizeof k), (ssize_t)sizeof k);
    close(fd);
}

/* Unchecked: in the runner's process, so that the root and a server left by a test that died
 * are removed whatever happened. */
static void suite_setup(void)
{
    NO_REDIS = system("command -v redis-server >/dev/null 2>&1") != 0;
    if (NO_REDIS)
        fprintf(stderr, "check_remote_cache: SKIP: redis-server is not installed (make installs it with "
                "DEB_PACKAGES; apt-get install redis-server)\n");
    const char *tmp = getenv("TMPDIR");
    snprintf(ROOT, sizeof ROOT, "%s/mjremote-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(ROOT));
}

static void suite_teardown(void)
{
    char path[300], cmdline[400];
    snprintf(path, sizeof path, "%s/redis.pid", ROOT);
    FILE *f = fopen(path, "r");
    int pid = 0;
    if (f) {
        if (fscanf(f, "%d", &pid) != 1) pid = 0;
        fclose(f);
    }
    if (pid > 0 && kill(pid, 0) == 0) {
        kill(pid, SIGCONT);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, WNOHANG);
    }
    snprintf(cmdline, sizeof cmdline, "rm -rf '%s'", ROOT);
    if (system(cmdline) != 0) { /* best effort */ }
}

static void setup(void)
{
    if (NO_REDIS) return;
    PORT = free_port();
    redis_start();
    mj_test_cache_init(&A);
    mj_test_cache_init(&B);
    snprintf(KEY, sizeof KEY, "%s/fleet.key", A.root);
    snprintf(KEY2, sizeof KEY2, "%s/other.key", A.root);
    snprintf(COUNT, sizeof COUNT, "%s/builds", A.root);
    write_key(KEY, 1);
    write_key(KEY2, 2);
    mj_cache_fault_clear_all();
    mj_cache_fault_reset_warnings();
}

static void teardown(void)
{
    if (NO_REDIS) return;
    redis_stop();
    mj_test_cache_cleanup(&A);
    mj_test_cache_cleanup(&B);
}

#define SKIP_WITHOUT_REDIS()                                                        \
    do {                                                                            \
        if (NO_REDIS) {                                                             \
            fprintf(stderr, "SKIP %s: redis-server is not installed\n", __func__);  \
            return;                                                                 \
        }                                                                           \
    } while (0)

/* A preimage in core/key.c's grammar (its spec on the third line), so that an entry's key is the
 * SHA-256 of its stored preimage as the remote's checks demand. */
static const char *pre_of(const char *spec)
{
    static char pre[4][512];
    static int next;
    char *p = pre[next++ % 4];
    snprintf(p, 512, "moejit-key 1\ngenerator_version 1\nspec %zu:%s\nsource test\nnvrtc_version 13.0\n",
             strlen(spec), spec);
    return p;
}

static mj_key key_of(const char *spec)
{
    const char *p = pre_of(spec);
    return mj_test_key(p);
}

/* ---- nodes ---------------------------------------------------------------------------------- */

static mj_remote_config remote_cfg(void)
{
    mj_remote_config rc;
    memset(&rc, 0, sizeof rc);
    snprintf(rc.url, sizeof rc.url, "redis://127.0.0.1:%d", PORT);
    snprintf(rc.prefix, sizeof rc.prefix, "moejit:");
    snprintf(rc.key_file, sizeof rc.key_file, "%s", KEY);
    rc.connect_timeout_s = 0.5;
    rc.timeout_s = 0.5;
    rc.mode = MJ_REMOTE_MODE_READ_WRITE;
    rc.trust = MJ_REMOTE_TRUST_SIGNED;
    rc.backoff_s = 0.2;
    rc.backoff_max_s = 1.0;
    rc.lock_ttl_ms = 5000;
    rc.wait_s = 20;
    return rc;
}

static mj_cache *open_node_cfg(mj_test_cache *t, const mj_remote_config *rc)
{
    mj_cache *c = mj_test_cache_open(t);
    mj_remote *r = NULL;
    char why[512];
    moejit_status st = mj_remote_open(rc, &r, why, sizeof why);
    ck_assert_msg(st == MOEJIT_OK && r, "remote open: %s %s", moejit_last_error(), why);
    mj_cache_set_remote(c, r);
    return c;
}

static mj_cache *open_node(mj_test_cache *t)
{
    mj_remote_config rc = remote_cfg();
    return open_node_cfg(t, &rc);
}

static mj_cache_stats stats_of(mj_test_cache *t)
{
    mj_cache *c = mj_test_cache_open(t);
    mj_cache_stats s;
    ck_assert_int_eq(mj_cache_stats_get(c, &s), MOEJIT_OK);
    mj_cache_close(c);
    return s;
}

/* One get-or-build of spec with the fake build; returns the cubin's first bytes in *first. */
static int get(mj_cache *c, const char *spec, unsigned seed, size_t size, int *hit, mj_program *p)
{
    mj_test_build b = {.spec = spec, .seed = seed, .size = size, .count_file = COUNT};
    mj_key k = key_of(spec);
    mj_program local;
    mj_program *out = p ? p : &local;
    moejit_status st = mj_cache_get_or_build(c, &k, pre_of(spec), spec, mj_test_build_fn, &b, out, hit);
    ck_assert_msg(st == MOEJIT_OK, "get_or_build: %s", moejit_last_error());
    if (!p) mj_program_free(&local);
    return b.calls;
}

/* The remote value stored for spec (caller frees), or NULL. */
static char *remote_value(const char *spec, size_t *n)
{
    mj_key k = key_of(spec);
    redisReply *r = cmd("GET moejit:entry:v2:%s", k.hex);
    char *v = NULL;
    *n = 0;
    if (r && r->type == REDIS_REPLY_STRING) {
        v = malloc(r->len);
        memcpy(v, r->str, r->len);
        *n = r->len;
    }
    if (r) freeReplyObject(r);
    return v;
}

static void set_remote_value(const char *spec, const void *v, size_t n)
{
    mj_key k = key_of(spec);
    redisReply *r = cmd("SET moejit:entry:v2:%s %b", k.hex, v, n);
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "SET failed");
    freeReplyObject(r);
}

/* ---- hit, miss, backfill, push ------------------------------------------------------------ */

START_TEST(a_miss_compiles_and_pushes_and_another_node_hits_and_backfills)
{
    SKIP_WITHOUT_REDIS();
    mj_cache *a = open_node(&A);
    int hit = -1;
    mj_program pa, pb;
    ck_assert_int_eq(get(a, SPEC, 7, 50000, &hit, &pa), 1);
    ck_assert_int_eq(hit, 0);
    mj_cache_close(a);
    mj_cache_stats s = stats_of(&A);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_MISSES], 1);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_PUSHES], 1);
    ck_assert_int_eq(s.v[MJ_STAT_COMPILES], 1);
    size_t n = 0;
    char *v = remote_value(SPEC, &n);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_gt(n, 50000);
    free(v);
    /* The fleet lock was released by its owner. */
    redisReply *r = cmd("KEYS moejit:lock:*");
    ck_assert_int_eq(r->elements, 0);
    freeReplyObject(r);

    mj_cache *b = open_node(&B);
    ck_assert_int_eq(get(b, SPEC, 99, 50000, &hit, &pb), 0); /* no build: the remote had it */
    ck_assert_int_eq(hit, 1);
    ck_assert_int_eq(pa.cubin_len, pb.cubin_len);
    ck_assert(memcmp(pa.cubin, pb.cubin, pa.cubin_len) == 0);
    mj_program_free(&pb);
    /* Backfilled: the next lookup is a disk hit, with the remote down or not. */
    redis_stop();
    ck_assert_int_eq(get(b, SPEC, 99, 50000, &hit, &pb), 0);
    ck_assert_int_eq(hit, 1);
    ck_assert(memcmp(pa.cubin, pb.cubin, pa.cubin_len) == 0);
    mj_cache_close(b);
    s = stats_of(&B);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_HITS], 1);
    ck_assert_int_eq(s.v[MJ_STAT_HITS], 1);
    ck_assert_int_eq(s.v[MJ_STAT_COMPILES], 0);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_ERRORS] + s.v[MJ_STAT_REMOTE_TIMEOUTS], 0);
    ck_assert_int_eq(mj_test_count_file(COUNT), 1);
    mj_program_free(&pa);
    mj_program_free(&pb);
}
END_TEST

START_TEST(a_read_only_remote_is_read_but_never_written)
{
    SKIP_WITHOUT_REDIS();
    mj_remote_config rc = remote_cfg();
    rc.mode = MJ_REMOTE_MODE_READ_ONLY;
    mj_cache *a = open_node_cfg(&A, &rc);
    int hit;
    ck_assert_int_eq(get(a, SPEC, 1, 0, &hit, NULL), 1);
    redisReply *r = cmd("DBSIZE");
    ck_assert_int_eq(r->integer, 0); /* neither the entry nor a lock */
    freeReplyObject(r);
    /* An explicit push is refused, naming the setting. */
    uint8_t bytes[64] = {0};
    mj_cache_stats d = {{0}};
    ck_assert_int_eq(mj_remote_push(mj_cache_get_remote(a), mj_test_key("x").hex, bytes, sizeof bytes, &d),
                     MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "MOEJIT_REMOTE_MODE"));
    mj_cache_close(a);
    /* It still reads what a read-write node pushed. */
    mj_cache *w = open_node(&B);
    ck_assert_int_eq(get(w, SPEC2, 2, 0, &hit, NULL), 1);
    mj_cache_close(w);
    mj_test_cache C;
    mj_test_cache_init(&C);
    mj_cache *ro = open_node_cfg(&C, &rc);
    ck_assert_int_eq(get(ro, SPEC2, 3, 0, &hit, NULL), 0);
    ck_assert_int_eq(hit, 1);
    mj_cache_close(ro);
    mj_cache_stats s = stats_of(&C);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_HITS], 1);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_PUSHES], 0);
    mj_test_cache_cleanup(&C);
}
END_TEST

/* ---- fleet-wide single flight ------------------------------------------------------------- */

static void node_child(int i)
{
    mj_test_cache *t = i % 2 ? &B : &A;
    mj_cache *c = open_node(t);
    mj_test_build b = {.spec = SPEC, .seed = 11, .size = 200000, .count_file = COUNT, .sleep_s = 0.3};
    mj_key k = key_of(SPEC);
    mj_program p;
    int hit;
    if (mj_cache_get_or_build(c, &k, pre_of(SPEC), SPEC, mj_test_build_fn, &b, &p, &hit) != MOEJIT_OK) _exit(1);
    char out[400];
    snprintf(out, sizeof out, "%s/cubin.%d", A.root, i);
    FILE *f = fopen(out, "wb");
    if (!f || fwrite(p.cubin, 1, p.cubin_len, f) != p.cubin_len) _exit(3);
    fclose(f);
    mj_program_free(&p);
    mj_cache_close(c);
}

START_TEST(sixteen_processes_on_two_nodes_compile_once_fleet_wide)
{
    SKIP_WITHOUT_REDIS();
    int gate[2];
    ck_assert_int_eq(pipe(gate), 0);
    pid_t pids[N_PROCS];
    for (int i = 0; i < N_PROCS; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0) {
            close(gate[1]);
            char ch;
            if (read(gate[0], &ch, 1) != 0) _exit(4);
            alarm(60); /* a child that hangs dies instead of hanging the suite */
            node_child(i);
            _exit(0);
        }
    }
    close(gate[0]);
    close(gate[1]);
    int ok = 0;
    for (int i = 0; i < N_PROCS; i++) {
        int st;
        waitpid(pids[i], &st, 0);
        ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    ck_assert_int_eq(ok, N_PROCS);
    ck_assert_int_eq(mj_test_count_file(COUNT), 1);
    char a[400], b[400], cmp[900];
    snprintf(a, sizeof a, "%s/cubin.0", A.root);
    for (int i = 1; i < N_PROCS; i++) {
        snprintf(b, sizeof b, "%s/cubin.%d", A.root, i);
        snprintf(cmp, sizeof cmp, "cmp -s '%s' '%s'", a, b);
        ck_assert_msg(system(cmp) == 0, "cubin of process %d differs", i);
    }
    mj_cache_stats sa = stats_of(&A), sb = stats_of(&B);
    ck_assert_int_eq(sa.v[MJ_STAT_COMPILES] + sb.v[MJ_STAT_COMPILES], 1);
    ck_assert_int_eq(sa.v[MJ_STAT_REMOTE_PUSHES] + sb.v[MJ_STAT_REMOTE_PUSHES], 1);
    /* The other node got the entry from the remote, once (its other processes from its disk). */
    ck_assert_int_eq(sa.v[MJ_STAT_REMOTE_HITS] + sb.v[MJ_STAT_REMOTE_HITS], 1);
    ck_assert_int_eq(sa.v[MJ_STAT_REMOTE_WAITS] + sb.v[MJ_STAT_REMOTE_WAITS], 1);
    ck_assert_int_eq(sa.v[MJ_STAT_HITS] + sb.v[MJ_STAT_HITS] + sa.v[MJ_STAT_MISSES] + sb.v[MJ_STAT_MISSES], N_PROCS);
}
END_TEST

START_TEST(a_dead_holders_lock_expires_and_the_waiter_compiles)
{
    SKIP_WITHOUT_REDIS();
    mj_key k = key_of(SPEC);
    cmd_ok("SET moejit:lock:%s dead-holder PX 700", k.hex, NULL);
    mj_cache *a = open_node(&A);
    int hit;
    double t0 = now_s();
    ck_assert_int_eq(get(a, SPEC, 1, 0, &hit, NULL), 1);
    double took = now_s() - t0;
    ck_assert_msg(took > 0.4 && took < 5, "waited %.3f s", took);
    mj_cache_close(a);
    mj_cache_stats s = stats_of(&A);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_PUSHES], 1);
    ck_assert_int_eq(s.v[MJ_STAT_LOCK_TIMEOUTS], 0);
}
END_TEST

/* ---- authenticity ---------------------------------------------------------------------------- */

/* Pushes a genuine entry for spec from node A; returns its remote value. */
static char *genuine(const char *spec, size_t *n)
{
    mj_cache *a = open_node(&A);
    int hit;
    get(a, spec, 5, 30000, &hit, NULL);
    mj_cache_close(a);
    char *v = remote_value(spec, n);
    ck_assert_ptr_nonnull(v);
    return v;
}

/* Asks node B for spec: it must compile (the remote's entry refused) and store its own. */
static mj_cache_stats refused_on_b(const char *spec)
{
    mj_cache *b = open_node(&B);
    int hit;
    mj_program p;
    long before = mj_test_count_file(COUNT);
    get(b, spec, 77, 30000, &hit, &p);
    ck_assert_int_eq(hit, 0);
    ck_assert_int_eq(mj_test_count_file(COUNT), before + 1);
    /* What the disk holds is B's own compile, not the refused bytes. */
    mj_program again;
    int found = 0;
    ck_assert_int_eq(mj_cache_lookup(b, key_of(spec).hex, spec, &again, &found), MOEJIT_OK);
    ck_assert_int_eq(found, 1);
    ck_assert(again.cubin_len == p.cubin_len && memcmp(again.cubin, p.cubin, p.cubin_len) == 0);
    mj_program_free(&again);
    mj_program_free(&p);
    mj_cache_close(b);
    mj_cache_stats s = stats_of(&B);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_HITS], 0);
    return s;
}

START_TEST(a_forged_entry_with_a_valid_checksum_is_refused)
{
    SKIP_WITHOUT_REDIS();
    size_t n;
    char *v = genuine(SPEC, &n);
    size_t elen = n - MJ_REMOTE_TRAILER_BYTES;
    mj_entry e;
    mj_entry_fault fault;
    ck_assert_int_eq(mj_entry_decode(v, elen, &e, &fault), MOEJIT_OK);
    ck_assert_int_eq(fault, MJ_ENTRY_OK);
    e.cubin[100] ^= 0x5a; /* another kernel under the genuine key, preimage and spec */
    mj_buf forged = MJ_BUF_INIT;
    ck_assert_int_eq(mj_entry_encode(&e, &forged), MOEJIT_OK); /* a valid checksum */
    mj_buf_append(&forged, v + elen, MJ_REMOTE_TRAILER_BYTES); /* the genuine signature */
    set_remote_value(SPEC, forged.data, forged.len);
    mj_cache_fault_reset_warnings();
    mj_test_stderr_begin();
    mj_cache_stats s = refused_on_b(SPEC);
    const char *err = mj_test_stderr_end();
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_REFUSED_SIGNATURE], 1);
    ck_assert_msg(strstr(err, "bad signature"), "%s", err);
    /* B's compile replaced the forged value with a genuine one. */
    size_t m;
    char *now = remote_value(SPEC, &m);
    ck_assert(m != forged.len || memcmp(now, forged.data, m) != 0);
    free(now);
    mj_buf_free(&forged);
    mj_entry_free(&e);
    free(v);
}
END_TEST

START_TEST(entries_signed_under_another_key_unsigned_or_inconsistent_are_refused)
{
    SKIP_WITHOUT_REDIS();
    size_t n;
    char *v = genuine(SPEC, &n);
    size_t elen = n - MJ_REMOTE_TRAILER_BYTES;
    mj_key k = key_of(SPEC);
    /* Signed under another key. */
    mj_sign_key other;
    ck_assert_int_eq(mj_sign_key_load("test", KEY2, &other), MOEJIT_OK);
    mj_buf val = MJ_BUF_INIT;
    ck_assert_int_eq(mj_remote_encode_value(&other, k.hex, (uint8_t *)v, elen, &val), MOEJIT_OK);
    set_remote_value(SPEC, val.data, val.len);
    mj_cache_stats s = refused_on_b(SPEC);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_REFUSED_OTHER_KEY], 1);
    /* Unsigned, with remote_trust=signed. */
    mj_test_cache_cleanup(&B);
    mj_test_cache_init(&B);
    ck_assert_int_eq(mj_remote_encode_value(NULL, k.hex, (uint8_t *)v, elen, &val), MOEJIT_OK);
    set_remote_value(SPEC, val.data, val.len);
    s = refused_on_b(SPEC);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_REFUSED_UNSIGNED], 1);
    /* Signed under the fleet key, but stored under another key: its stored key does not match. */
    mj_sign_key fleet;
    ck_assert_int_eq(mj_sign_key_load("test", KEY, &fleet), MOEJIT_OK);
    mj_key k2 = key_of(SPEC2);
    ck_assert_int_eq(mj_remote_encode_value(&fleet, k2.hex, (uint8_t *)v, elen, &val), MOEJIT_OK);
    set_remote_value(SPEC2, val.data, val.len);
    mj_test_cache_cleanup(&B);
    mj_test_cache_init(&B);
    s = refused_on_b(SPEC2);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_REFUSED_KEY], 1);
    /* The right key and a genuine signature, but an entry whose spec is not the one asked for. */
    mj_entry e;
    mj_entry_fault fault;
    ck_assert_int_eq(mj_entry_decode(v, elen, &e, &fault), MOEJIT_OK);
    free(e.canonical_spec);
    e.canonical_spec = strdup(SPEC2);
    mj_buf other_spec = MJ_BUF_INIT;
    ck_assert_int_eq(mj_entry_encode(&e, &other_spec), MOEJIT_OK);
    ck_assert_int_eq(mj_remote_encode_value(&fleet, k.hex, (uint8_t *)other_spec.data, other_spec.len, &val),
                     MOEJIT_OK);
    set_remote_value(SPEC, val.data, val.len);
    mj_test_cache_cleanup(&B);
    mj_test_cache_init(&B);
    s = refused_on_b(SPEC);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_REFUSED_SPEC], 1);
    mj_entry_free(&e);
    mj_buf_free(&other_spec);
    mj_buf_free(&val);
    mj_sign_key_wipe(&other);
    mj_sign_key_wipe(&fleet);
    free(v);
}
END_TEST

START_TEST(garbage_values_are_refused_and_the_kernel_is_compiled)
{
    SKIP_WITHOUT_REDIS();
    static const char *const texts[] = {"hello", "MJKENTRY", ""};
    uint8_t noise[3000];
    for (size_t i = 0; i < sizeof noise; i++) noise[i] = (uint8_t)(i * 37 + 11);
    memcpy(noise + sizeof noise - MJ_REMOTE_TRAILER_BYTES, MJ_REMOTE_SIG_MAGIC, 8); /* a plausible trailer */
    int corrupt_expected = 0;
    for (int round = 0; round < 4; round++) {
        mj_test_cache_cleanup(&B);
        mj_test_cache_init(&B);
        if (round < 3) set_remote_value(SPEC, texts[round], strlen(texts[round]));
        else set_remote_value(SPEC, noise, sizeof noise);
        corrupt_expected += round != 2; /* an empty value reads as absent */
        mj_cache_stats s = refused_on_b(SPEC);
        ck_assert_int_eq(s.v[MJ_STAT_REMOTE_REFUSED_CORRUPT] + s.v[MJ_STAT_REMOTE_MISSES], 1);
    }
    ck_assert_int_eq(corrupt_expected, 3);
    /* A value of another type: the server answers WRONGTYPE, counted as an error. */
    mj_key k = key_of(SPEC2);
    cmd_ok("RPUSH moejit:entry:v2:%s %s", k.hex, "x");
    mj_cache *b = open_node(&B);
    int hit;
    ck_assert_int_eq(get(b, SPEC2, 1, 0, &hit, NULL), 1);
    mj_cache_close(b);
    mj_cache_stats s = stats_of(&B);
    ck_assert_int_ge(s.v[MJ_STAT_REMOTE_ERRORS], 1);
}
END_TEST

/* ---- failures ---------------------------------------------------------------------------------- */

START_TEST(a_killed_remote_costs_one_failure_then_a_backoff_and_is_used_again_after_a_restart)
{
    SKIP_WITHOUT_REDIS();
    mj_cache *a = open_node(&A);
    int hit;
    get(a, "backend=simt,act=gelu", 1, 0, &hit, NULL); /* connected */
    redis_stop();
    mj_test_stderr_begin();
    double t0 = now_s();
    ck_assert_int_eq(get(a, SPEC, 2, 0, &hit, NULL), 1);
    ck_assert_int_eq(get(a, SPEC2, 3, 0, &hit, NULL), 1); /* within the back-off: skipped */
    double took = now_s() - t0;
    const char *err = mj_test_stderr_end();
    ck_assert_msg(took < 1.5, "%.3f s", took);
    const char *first = strstr(err, "remote cache");
    ck_assert_msg(first && !strstr(first + 1, "remote cache"), "one warning expected:\n%s", err);
    mj_cache_flush_stats(a);
    mj_cache_stats s = stats_of(&A);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_ERRORS], 1);
    ck_assert_int_ge(s.v[MJ_STAT_REMOTE_SKIPPED], 1);
    /* Restarted, and the back-off over: the remote is used again. */
    redis_start();
    sleep_s(0.5);
    ck_assert_int_eq(get(a, "backend=simt,act=relu", 4, 0, &hit, NULL), 1);
    mj_cache_close(a);
    s = stats_of(&A);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_PUSHES], 2);
    ck_assert_int_eq(s.v[MJ_STAT_COMPILES], 4);
}
END_TEST

START_TEST(a_stopped_remote_times_out_within_bounds)
{
    SKIP_WITHOUT_REDIS();
    mj_cache *a = open_node(&A);
    int hit;
    get(a, "backend=simt,act=gelu", 1, 0, &hit, NULL);
    kill(REDIS, SIGSTOP);
    double t0 = now_s();
    ck_assert_int_eq(get(a, SPEC, 2, 0, &hit, NULL), 1);
    double took = now_s() - t0;
    ck_assert_msg(took >= 0.4 && took < 2.0, "%.3f s", took);
    /* A fresh process meets the stopped server at connect (the kernel accepts) or at its first
     * request: bounded either way. */
    mj_cache *b = open_node(&B);
    t0 = now_s();
    ck_assert_int_eq(get(b, SPEC, 3, 0, &hit, NULL), 1);
    took = now_s() - t0;
    ck_assert_msg(took < 2.0, "%.3f s", took);
    kill(REDIS, SIGCONT);
    mj_cache_close(a);
    mj_cache_close(b);
    mj_cache_stats s = stats_of(&A);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_TIMEOUTS], 1);
    s = stats_of(&B);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_TIMEOUTS], 1);
}
END_TEST

static void killer(pid_t victim, double after)
{
    pid_t k = fork();
    ck_assert_int_ge(k, 0);
    if (k == 0) {
        sleep_s(after);
        kill(victim, SIGKILL);
        _exit(0);
    }
}

START_TEST(a_remote_killed_mid_request_never_kills_the_host_with_sigpipe)
{
    SKIP_WITHOUT_REDIS();
    struct sigaction sa;
    sigaction(SIGPIPE, NULL, &sa);
    ck_assert_ptr_eq(sa.sa_handler, SIG_DFL); /* the default: SIGPIPE would end the process */
    mj_cache *a = open_node(&A);
    int hit;
    get(a, "backend=simt,act=gelu", 1, 0, &hit, NULL); /* connected */
    /* Stopped, then killed while our request waits: the connection dies under it. */
    kill(REDIS, SIGSTOP);
    killer(REDIS, 0.15);
    ck_assert_int_eq(get(a, SPEC, 2, 4 << 20, &hit, NULL), 1);
    waitpid(REDIS, NULL, 0);
    REDIS = -1;
    wait(NULL);
    /* Restarted; the connection is re-made after the back-off; then killed again with a 4 MiB
     * push on the wire, whose writes meet a closed socket. */
    redis_start();
    sleep_s(0.5);
    get(a, "backend=simt,act=relu", 3, 0, &hit, NULL);
    kill(REDIS, SIGKILL);
    waitpid(REDIS, NULL, 0);
    REDIS = -1;
    sleep_s(1.2);
    ck_assert_int_eq(get(a, SPEC2, 4, 4 << 20, &hit, NULL), 1);
    sigaction(SIGPIPE, NULL, &sa);
    ck_assert_ptr_eq(sa.sa_handler, SIG_DFL); /* the disposition was never changed */
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, NULL, &mask);
    ck_assert(!sigismember(&mask, SIGPIPE)); /* nor left blocked */
    mj_cache_close(a);
    mj_cache_stats s = stats_of(&A);
    ck_assert_int_ge(s.v[MJ_STAT_REMOTE_ERRORS] + s.v[MJ_STAT_REMOTE_TIMEOUTS], 2);
    ck_assert_int_eq(s.v[MJ_STAT_COMPILES], 4);
}
END_TEST

static long long used_memory(void)
{
    redisReply *r = cmd("INFO memory");
    ck_assert_ptr_nonnull(r);
    const char *p = strstr(r->str, "used_memory:");
    long long v = p ? atoll(p + 12) : 0;
    freeReplyObject(r);
    return v;
}

START_TEST(an_entry_evicted_under_maxmemory_is_a_miss_that_recompiles)
{
    SKIP_WITHOUT_REDIS();
    char limit[32];
    snprintf(limit, sizeof limit, "%lld", used_memory() + (3LL << 20));
    cmd_ok("CONFIG SET maxmemory %s", limit, NULL);
    cmd_ok("CONFIG SET maxmemory-policy %s", "allkeys-lru", NULL);
    mj_cache *a = open_node(&A);
    int hit;
    get(a, SPEC, 1, 1 << 20, &hit, NULL);
    char spec[64];
    for (int i = 0; i < 6; i++) {
        snprintf(spec, sizeof spec, "backend=simt,act=silu,i=%d", i);
        get(a, spec, 10 + (unsigned)i, 1 << 20, &hit, NULL);
    }
    mj_cache_close(a);
    size_t n;
    char *v = remote_value(SPEC, &n);
    ck_assert_msg(v == NULL, "the first entry was not evicted");
    mj_cache *b = open_node(&B);
    ck_assert_int_eq(get(b, SPEC, 1, 1 << 20, &hit, NULL), 1);
    ck_assert_int_eq(hit, 0);
    mj_cache_close(b);
    mj_cache_stats s = stats_of(&B);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_MISSES], 1);
    ck_assert_int_eq(s.v[MJ_STAT_COMPILES], 1);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_PUSHES], 1);

    /* noeviction: a full remote answers OOM to a push; the kernel is served and the remote is
     * still read (no back-off for an answer). */
    cmd_ok("CONFIG SET maxmemory-policy %s", "noeviction", NULL);
    snprintf(limit, sizeof limit, "%lld", used_memory() + (256 << 10));
    cmd_ok("CONFIG SET maxmemory %s", limit, NULL);
    mj_test_cache C;
    mj_test_cache_init(&C);
    mj_cache *c = open_node(&C);
    ck_assert_int_eq(get(c, "backend=simt,act=relu2,big=1", 3, 1 << 20, &hit, NULL), 1);
    ck_assert_int_eq(get(c, SPEC, 1, 1 << 20, &hit, NULL), 0); /* B's push, read from the full remote */
    ck_assert_int_eq(hit, 1);
    mj_cache_close(c);
    s = stats_of(&C);
    ck_assert_int_ge(s.v[MJ_STAT_REMOTE_ERRORS], 1);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_HITS], 1);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_PUSHES], 0);
    mj_test_cache_cleanup(&C);
}
END_TEST

/* ---- configuration --------------------------------------------------------------------------- */

static void write_file(const char *path, const char *text, int mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    fchmod(fd, (mode_t)mode);
    close(fd);
}

START_TEST(auth_with_a_password_file_and_an_acl_user)
{
    SKIP_WITHOUT_REDIS();
    char pw[320], acl[320], bad[320];
    snprintf(pw, sizeof pw, "%s/pw", A.root);
    snprintf(acl, sizeof acl, "%s/acl", A.root);
    snprintf(bad, sizeof bad, "%s/bad", A.root);
    write_file(pw, "s3cret\n", 0600);
    write_file(acl, "builder:b-pass\n", 0600);
    write_file(bad, "wrong\n", 0600);
    cmd_ok("ACL SETUSER %s on >b-pass ~* &* +@all", "builder", NULL);
    cmd_ok("CONFIG SET requirepass %s", "s3cret", NULL);
    mj_remote_config rc = remote_cfg();
    snprintf(rc.password_file, sizeof rc.password_file, "%s", pw);
    mj_cache *a = open_node_cfg(&A, &rc);
    int hit;
    get(a, SPEC, 1, 0, &hit, NULL);
    mj_cache_close(a);
    ck_assert_int_eq(stats_of(&A).v[MJ_STAT_REMOTE_PUSHES], 1);
    snprintf(rc.password_file, sizeof rc.password_file, "%s", acl);
    mj_cache *b = open_node_cfg(&B, &rc);
    ck_assert_int_eq(get(b, SPEC, 1, 0, &hit, NULL), 0);
    mj_cache_close(b);
    ck_assert_int_eq(stats_of(&B).v[MJ_STAT_REMOTE_HITS], 1);
    /* A wrong password is a failure like a server that is down: backed off, kernel compiled. */
    snprintf(rc.password_file, sizeof rc.password_file, "%s", bad);
    mj_test_cache C;
    mj_test_cache_init(&C);
    mj_cache *c = open_node_cfg(&C, &rc);
    ck_assert_int_eq(get(c, SPEC, 1, 0, &hit, NULL), 1);
    ck_assert_int_eq(get(c, SPEC2, 1, 0, &hit, NULL), 1);
    mj_cache_close(c);
    mj_cache_stats s = stats_of(&C);
    ck_assert_int_eq(s.v[MJ_STAT_REMOTE_ERRORS], 1);
    ck_assert_int_ge(s.v[MJ_STAT_REMOTE_SKIPPED], 1);
    mj_test_cache_cleanup(&C);
    cmd_ok("AUTH %s", "s3cret", NULL); /* harmless: each cmd connects anew */
}
END_TEST

START_TEST(the_configuration_refuses_what_would_leak_or_mislead)
{
    SKIP_WITHOUT_REDIS();
    mj_remote_config rc = remote_cfg();
    mj_remote *r = NULL;
    char why[512];
    /* No key and trust=signed: off, saying why. */
    rc.key_file[0] = '\0';
    ck_assert_int_eq(mj_remote_open(&rc, &r, why, sizeof why), MOEJIT_OK);
    ck_assert_ptr_null(r);
    ck_assert_ptr_nonnull(strstr(why, "MOEJIT_REMOTE_KEY_FILE"));
    mj_buf d = MJ_BUF_INIT;
    mj_remote_describe(&rc, &d);
    ck_assert_ptr_nonnull(strstr(d.data, "off"));
    mj_buf_reset(&d);
    /* trust=unsigned without a key: on, pushing and accepting unsigned entries. */
    rc.trust = MJ_REMOTE_TRUST_UNSIGNED;
    mj_cache *a = open_node_cfg(&A, &rc);
    int hit;
    get(a, SPEC, 1, 0, &hit, NULL);
    mj_cache_close(a);
    mj_cache *b = open_node_cfg(&B, &rc);
    ck_assert_int_eq(get(b, SPEC, 1, 0, &hit, NULL), 0);
    mj_cache_close(b);
    /* ... which a node holding the fleet key with trust=signed refuses. */
    mj_test_cache C;
    mj_test_cache_init(&C);
    mj_cache *c = open_node(&C);
    ck_assert_int_eq(get(c, SPEC, 1, 0, &hit, NULL), 1);
    mj_cache_close(c);
    ck_assert_int_eq(stats_of(&C).v[MJ_STAT_REMOTE_REFUSED_UNSIGNED], 1);
    mj_test_cache_cleanup(&C);
    rc = remote_cfg();
    /* A key or password file others can read. */
    char loose[320];
    snprintf(loose, sizeof loose, "%s/loose", A.root);
    write_file(loose, "0123456789abcdef0123456789abcdef", 0644);
    snprintf(rc.key_file, sizeof rc.key_file, "%s", loose);
    ck_assert_int_eq(mj_remote_open(&rc, &r, why, sizeof why), MOEJIT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "MOEJIT_REMOTE_KEY_FILE"));
    rc = remote_cfg();
    snprintf(rc.password_file, sizeof rc.password_file, "%s", loose);
    ck_assert_int_eq(mj_remote_open(&rc, &r, why, sizeof why), MOEJIT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "MOEJIT_REMOTE_PASSWORD_FILE"));
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "chmod 600"));
    /* TLS without hiredis_ssl, credentials in the URL, a bad URL. */
    rc = remote_cfg();
    rc.tls = 1;
    moejit_status st = mj_remote_open(&rc, &r, why, sizeof why);
#ifndef MJ_HAVE_HIREDIS_SSL
    ck_assert_int_eq(st, MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "hiredis_ssl"));
#else
    if (st == MOEJIT_OK) mj_remote_close(r);
#endif
    rc = remote_cfg();
    snprintf(rc.url, sizeof rc.url, "redis://:pw@127.0.0.1:%d", PORT);
    ck_assert_int_eq(mj_remote_open(&rc, &r, why, sizeof why), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "MOEJIT_REMOTE_PASSWORD_FILE"));
    snprintf(rc.url, sizeof rc.url, "redis://127.0.0.1:99999");
    ck_assert_int_eq(mj_remote_open(&rc, &r, why, sizeof why), MOEJIT_ERR_INVALID_ARGUMENT);
    /* The settings table: a bad mode or trust is refused naming the variable. */
    setenv("MOEJIT_REMOTE_MODE", "sometimes", 1);
    ck_assert_int_eq(mj_remote_config_resolve(NULL, NULL, &rc), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "MOEJIT_REMOTE_MODE"));
    unsetenv("MOEJIT_REMOTE_MODE");
    setenv("MOEJIT_REMOTE", "http://example", 1);
    ck_assert_int_eq(mj_remote_config_resolve(NULL, NULL, &rc), MOEJIT_ERR_INVALID_ARGUMENT);
    unsetenv("MOEJIT_REMOTE");
    mj_buf_free(&d);
}
END_TEST

static Suite *remote_cache_suite(void)
{
    Suite *s = suite_create("remote_cache");
    TCase *tc = tcase_create("remote_cache");
    tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_miss_compiles_and_pushes_and_another_node_hits_and_backfills);
    tcase_add_test(tc, a_read_only_remote_is_read_but_never_written);
    tcase_add_test(tc, sixteen_processes_on_two_nodes_compile_once_fleet_wide);
    tcase_add_test(tc, a_dead_holders_lock_expires_and_the_waiter_compiles);
    tcase_add_test(tc, a_forged_entry_with_a_valid_checksum_is_refused);
    tcase_add_test(tc, entries_signed_under_another_key_unsigned_or_inconsistent_are_refused);
    tcase_add_test(tc, garbage_values_are_refused_and_the_kernel_is_compiled);
    tcase_add_test(tc, a_killed_remote_costs_one_failure_then_a_backoff_and_is_used_again_after_a_restart);
    tcase_add_test(tc, a_stopped_remote_times_out_within_bounds);
    tcase_add_test(tc, a_remote_killed_mid_request_never_kills_the_host_with_sigpipe);
    tcase_add_test(tc, an_entry_evicted_under_maxmemory_is_a_miss_that_recompiles);
    tcase_add_test(tc, auth_with_a_password_file_and_an_acl_user);
    tcase_add_test(tc, the_configuration_refuses_what_would_leak_or_mislead);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(remote_cache_suite)
