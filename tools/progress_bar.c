/*
 * This file contains the terminal progress bar (progress_bar.h): drawing it with elapsed time
 * and ETA, erasing it for a caller's lines, and the thread that redraws it while no step ends.
 */
#include "tools/progress_bar.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tools/cli.h"

#define REDRAW_NS 200000000L
#define WIDTH 30

struct cli_progress_bar {
    pthread_mutex_t mu;   /* guards everything below and stderr's last line */
    pthread_cond_t wake;  /* signalled by stop */
    pthread_t thread;
    int total, done, shown, stopping;
    double t_start;
};

static void erase(cli_progress_bar *b)
{
    if (!b->shown) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    b->shown = 0;
}

/* Caller holds b->mu. */
static void draw(cli_progress_bar *b)
{
    const double el = cli_now() - b->t_start;
    char bar[WIDTH + 1], eta[32] = "--:--";
    const int filled = b->done * WIDTH / b->total;
    for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '#' : '.';
    bar[WIDTH] = '\0';
    if (b->done > 0 && b->done < b->total) {
        const double left = el / b->done * (b->total - b->done);
        snprintf(eta, sizeof eta, "%d:%02d", (int)left / 60, (int)left % 60);
    } else if (b->done >= b->total) {
        snprintf(eta, sizeof eta, "0:00");
    }
    fprintf(stderr, "\r\033[K[%s] %d/%d  %d:%02d elapsed  ETA %s", bar, b->done, b->total, (int)el / 60,
            (int)el % 60, eta);
    fflush(stderr);
    b->shown = 1;
}

static void *redraw(void *arg)
{
    cli_progress_bar *b = arg;
    pthread_mutex_lock(&b->mu);
    while (!b->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += REDRAW_NS;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        if (pthread_cond_timedwait(&b->wake, &b->mu, &until) == ETIMEDOUT && !b->stopping) draw(b);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

cli_progress_bar *cli_progress_bar_start(int total)
{
    if (total <= 0) return NULL;
    cli_progress_bar *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->total = total;
    b->t_start = cli_now();
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->wake, NULL);
    if (pthread_create(&b->thread, NULL, redraw, b) != 0) {
        pthread_cond_destroy(&b->wake);
        pthread_mutex_destroy(&b->mu);
        free(b);
        return NULL;
    }
    pthread_mutex_lock(&b->mu);
    draw(b);
    pthread_mutex_unlock(&b->mu);
    return b;
}

void cli_progress_bar_hold(cli_progress_bar *b)
{
    if (!b) return;
    pthread_mutex_lock(&b->mu);
    erase(b);
}

void cli_progress_bar_release(cli_progress_bar *b, int done)
{
    if (!b) return;
    b->done = done;
    draw(b);
    pthread_mutex_unlock(&b->mu);
}

void cli_progress_bar_stop(cli_progress_bar *b)
{
    if (!b) return;
    pthread_mutex_lock(&b->mu);
    b->stopping = 1;
    pthread_cond_signal(&b->wake);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thread, NULL);
    erase(b);
    pthread_cond_destroy(&b->wake);
    pthread_mutex_destroy(&b->mu);
    free(b);
}
