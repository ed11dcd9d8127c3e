/*
 * interval.c - the automatic interval between checkpoints (SHOAL_CKPT_INTERVAL=auto):
 * Young/Daly's optimum from the cost of a checkpoint and the job's mean time between
 * failures, and the line of the job directory's `interval` file. No I/O: rank 0 feeds
 * these its measures and writes the file (shoal.c).
 */
#include <math.h>
#include <stdio.h>

#include "internal.h"

/* Each checkpoint also sends a copy of every shard over the network to another node,
 * which a cost measured on the ranks does not see: a job that is cheap to copy and
 * fails often must still leave the network time between checkpoints. */
#define AUTO_MIN_S 1.0
/* The failure record may be too optimistic (a young cluster, a node about to go): a
 * checkpoint at least this often bounds the work one loss can throw away. */
#define AUTO_MAX_S 600.0
/* Until this run has taken a checkpoint: the copy of a few MB of state. */
#define AUTO_COST_GUESS_S 0.01
/* Weight of the newest cost in the mean: a state that grows is followed within a few
 * checkpoints, while one slow checkpoint moves the mean only 0.3 of the way to it. */
#define COST_WEIGHT 0.3

double interval_auto(double cost_s, double mtbf_s)
{
    double c = cost_s > 0 ? cost_s : AUTO_COST_GUESS_S, m = mtbf_s, t;
    if (c >= 2 * m) {
        t = m;
    } else {
        /* Daly's higher-order estimate (2006); its first term is Young's sqrt(2CM). */
        double r = sqrt(c / (2 * m));
        t = sqrt(2 * c * m) * (1 + r / 3 + r * r / 9) - c;
    }
    if (!(t >= AUTO_MIN_S)) /* also NaN */
        return AUTO_MIN_S;
    return t > AUTO_MAX_S ? AUTO_MAX_S : t;
}

double interval_cost_mean(double mean_s, double newest_s)
{
    if (mean_s <= 0)
        return newest_s;
    return COST_WEIGHT * newest_s + (1 - COST_WEIGHT) * mean_s;
}

int interval_line(char *line, size_t len, const struct shoal_config *cfg, double cost_s)
{
    return snprintf(line, len, "interval %.6g auto %d cost %.6g mtbf %.6g\n", cfg->interval_s,
                    cfg->interval_auto, cost_s, cfg->interval_auto ? cfg->mtbf_s : 0.0);
}

/* How long after a checkpoint its cost is looked for: the writer starts at once, but
 * the agent copies the shard and the coordinator verifies it at their next poll, a
 * second or so later. Never more than half the interval, so that the calls between
 * two checkpoints still show the run's own pace. */
#define SETTLE_MAX_S 2.0
/* Weight of the newest pace in the mean seconds per call away from checkpoints. */
#define BASE_WEIGHT 0.2

double slowdown_settle(double interval_s)
{
    return interval_s > 0 && interval_s / 2 < SETTLE_MAX_S ? interval_s / 2 : SETTLE_MAX_S;
}

static double slowdown_close(struct slowdown *s)
{
    /* Calls that ran faster than the mean pace are noise, not a gain. */
    double cost = s->blocked + (s->excess > 0 ? s->excess : 0);
    s->blocked = s->excess = s->until = 0;
    return cost;
}

double slowdown_checkpoint(struct slowdown *s, double now, double blocked_s, double settle_s)
{
    double open = s->until > 0 ? slowdown_close(s) : -1;
    s->blocked = blocked_s;
    s->excess = 0;
    s->until = now + settle_s;
    return open;
}

double slowdown_agreement(struct slowdown *s, double now, int k, double took_s)
{
    if (k < 1 || !(took_s >= 0))
        return -1;
    if (s->until > 0) {
        /* Until the run's pace is known, a checkpoint costs what it blocks. */
        if (s->base > 0)
            s->excess += took_s - k * s->base;
        return now >= s->until ? slowdown_close(s) : -1;
    }
    double per_call = took_s / k;
    s->base = s->base > 0 ? BASE_WEIGHT * per_call + (1 - BASE_WEIGHT) * s->base : per_call;
    return -1;
}
