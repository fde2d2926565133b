/*
 * bench_remote.h — `moejit bench remote`: the remote cache tier's costs (a remote hit into an
 * empty disk cache in a fresh process; what a remote that is down adds to a disk hit).
 */
#ifndef MJ_TOOLS_BENCH_REMOTE_H
#define MJ_TOOLS_BENCH_REMOTE_H

int cmd_bench_remote(int argc, char **argv);

#endif
