/*
 * progress_bar.h — a progress bar with elapsed time and ETA on stderr (`moejit warm` on a
 * terminal), redrawn by its own thread every 200 ms so the clock moves between steps.
 *
 * Steps finish on other threads, which also print lines: a caller holds the bar (taking its
 * lock and erasing it), prints, then releases it with the steps done (redrawing it), so lines
 * and bar never mix. Every function accepts NULL (no bar: not a terminal, or nothing to show).
 */
#ifndef MJ_CLI_PROGRESS_BAR_H
#define MJ_CLI_PROGRESS_BAR_H

typedef struct cli_progress_bar cli_progress_bar;

/* Draws a bar of total steps and starts its redraw thread; NULL when total is 0 or no memory or
 * thread is to be had (the command then runs without a bar). */
cli_progress_bar *cli_progress_bar_start(int total);
/* Takes the bar's lock and erases the bar. */
void cli_progress_bar_hold(cli_progress_bar *bar);
/* Records done steps, redraws the bar and releases the lock. */
void cli_progress_bar_release(cli_progress_bar *bar, int done);
/* Stops the redraw thread, erases the bar and frees it. */
void cli_progress_bar_stop(cli_progress_bar *bar);

#endif
