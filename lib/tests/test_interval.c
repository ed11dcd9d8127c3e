/*
 * test_interval.c - the automatic interval without MPI: Daly's optimum on plain numbers
 * and its bounds, the mean cost, the `interval` file's line, and SHOAL_CKPT_INTERVAL=auto
 * and SHOAL_MTBF read from the environment. test_api.c runs it end to end.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"

/* got within a relative tol of want; says both otherwise. */
static int check_near(double got, double want, double tol, const char *what, int line)
{
    int ok = fabs(got - want) <= tol * fabs(want);
    check_true(ok, what, __FILE__, line);
    if (!ok)
        fprintf(stderr, "  got %.17g, want %.17g\n", got, want);
    return ok;
}
#define CHECK_NEAR(got, want, tol) check_near((got), (want), (tol), #got, __LINE__)

static void test_daly(void)
{
    static const struct {
        double cost, mtbf, want;
    } cases[] = {
        /* sqrt(2CM) (1 + r/3 + r^2/9) - C, r = sqrt(C/2M) */
        {0.1, 1e5, 141.35469742738488},
        {0.01, 3600, 8.478616017028905},
        {0.5, 3600, 59.667129629629635},
        {1, 100, 13.48332569907747},
        {30, 100, 58.75066137288414},
        /* C >= 2M: the MTBF itself, within the bounds */
        {10, 5, 5},
        {1000, 400, 400},
        {3, 0.5, 1},
        {2000, 1000, 600},
        /* the bounds */
        {0.001, 10, 1},  /* sqrt(2CM) is 0.14 s */
        {10, 1e6, 600},  /* 4472 s */
        {1e-9, 1e-9, 1}, /* C = M: below the floor */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!CHECK_NEAR(interval_auto(cases[i].cost, cases[i].mtbf), cases[i].want, 1e-12))
            fprintf(stderr, "  cost %g s, mtbf %g s\n", cases[i].cost, cases[i].mtbf);

    /* C much below M: Young's sqrt(2CM). */
    CHECK_NEAR(interval_auto(1e-4, 1e6), sqrt(2 * 1e-4 * 1e6), 1e-3);
    CHECK_NEAR(interval_auto(0.2, 50000), sqrt(2 * 0.2 * 50000), 1e-3);
    /* Not measured yet: the guess of 10 ms. */
    CHECK_NEAR(interval_auto(0, 3600), 8.478616017028905, 1e-12);
    CHECK_NEAR(interval_auto(0, 1e5), interval_auto(0.01, 1e5), 1e-12);
    CHECK_NEAR(interval_auto(0, 2), 1, 1e-12);
    /* Failing more often, or checkpointing more cheaply, means checkpointing more often. */
    CHECK(interval_auto(0.05, 1000) < interval_auto(0.05, 4000));
    CHECK(interval_auto(0.01, 4000) < interval_auto(0.05, 4000));
}

static void test_cost_mean(void)
{
    CHECK_NEAR(interval_cost_mean(0, 0.5), 0.5, 1e-12); /* the first checkpoint */
    CHECK_NEAR(interval_cost_mean(1, 2), 1.3, 1e-12);   /* 0.3 to the newest */
    CHECK_NEAR(interval_cost_mean(2, 1), 1.7, 1e-12);
    /* A state that grows from 10 ms to 1 s a checkpoint is followed within a few. */
    double mean = interval_cost_mean(0, 0.01);
    for (int i = 0; i < 10; i++)
        mean = interval_cost_mean(mean, 1);
    CHECK(mean > 0.97 && mean < 1);
}

/* A run whose calls take 10 ms each, agreeing every 20 calls (0.2 s). */
#define PACE 0.01
#define K 20

/* Agreements from t to end at the run's pace times slow, and what closed. */
static double agree_until(struct slowdown *s, double *t, double end, double slow)
{
    double cost = -1;
    while (*t < end - 1e-9) {
        *t += K * PACE * slow;
        double got = slowdown_agreement(s, *t, K, K * PACE * slow);
        if (got >= 0)
            cost = got;
    }
    return cost;
}

static void test_slowdown(void)
{
    CHECK_NEAR(slowdown_settle(10), 2, 1e-12);
    CHECK_NEAR(slowdown_settle(1), 0.5, 1e-12);
    CHECK_NEAR(slowdown_settle(0), 2, 1e-12); /* the program's own checkpoints */

    /* Before the pace is known, a checkpoint costs what it blocks. */
    struct slowdown s = {0};
    double t = 0;
    CHECK(slowdown_checkpoint(&s, t, 0.005, 2) == -1);
    CHECK_NEAR(agree_until(&s, &t, 2.000001, 1.5), 0.005, 1e-9);

    /* Calls 1.5 times as slow for the 2 s after a checkpoint: 2 s / 1.5 of calls lost
     * a third of their time each, about 0.67 s, plus the 5 ms it blocked. */
    s = (struct slowdown){0};
    t = 0;
    CHECK(agree_until(&s, &t, 5, 1) == -1);
    CHECK_NEAR(s.base, PACE, 1e-9);
    slowdown_checkpoint(&s, t, 0.005, 2);
    double cost = agree_until(&s, &t, t + 2.000001, 1.5);
    CHECK_NEAR(cost, 0.005 + 2.1 - 2.1 / 1.5, 1e-9); /* 7 agreements of 0.3 s close it */
    CHECK(s.until == 0);
    /* The pace is learned away from checkpoints only, so it stays. */
    CHECK_NEAR(s.base, PACE, 1e-9);

    /* An undisturbed run costs what the checkpoint blocks; one that ran faster after
     * it gains nothing (noise, not a saving). */
    slowdown_checkpoint(&s, t, 0.005, 2);
    CHECK_NEAR(agree_until(&s, &t, t + 2.000001, 1), 0.005, 1e-9);
    slowdown_checkpoint(&s, t, 0.005, 2);
    CHECK_NEAR(agree_until(&s, &t, t + 2.000001, 0.8), 0.005, 1e-9);

    /* A checkpoint taken before the last one's window closed closes it. */
    slowdown_checkpoint(&s, t, 0.005, 2);
    agree_until(&s, &t, t + 1, 2);
    CHECK_NEAR(slowdown_checkpoint(&s, t, 0.007, 2), 0.005 + 3 * 0.2, 1e-9); /* 3 agreements of 0.4 s */
    CHECK_NEAR(s.blocked, 0.007, 1e-12);

    /* Nonsense from the clock is ignored. */
    CHECK(slowdown_agreement(&s, t, 0, 1) == -1);
    CHECK(slowdown_agreement(&s, t, K, NAN) == -1);
}

static void test_line(void)
{
    struct shoal_config cfg;
    char line[128];
    memset(&cfg, 0, sizeof cfg);
    cfg.interval_s = interval_auto(0, 3600);
    cfg.interval_auto = 1;
    cfg.mtbf_s = 3600;
    interval_line(line, sizeof line, &cfg, 0);
    CHECK_STR(line, "interval 8.47862 auto 1 cost 0 mtbf 3600\n");
    cfg.mtbf_s = 5400;
    cfg.interval_s = interval_auto(0.0123456789, cfg.mtbf_s);
    interval_line(line, sizeof line, &cfg, 0.0123456789);
    CHECK_STR(line, "interval 11.5388 auto 1 cost 0.0123457 mtbf 5400\n");
    /* A fixed interval says no MTBF: none is used. */
    cfg.interval_auto = 0;
    cfg.interval_s = 30;
    interval_line(line, sizeof line, &cfg, 0);
    CHECK_STR(line, "interval 30 auto 0 cost 0 mtbf 0\n");
    cfg.interval_s = 0;
    interval_line(line, sizeof line, &cfg, 0.25);
    CHECK_STR(line, "interval 0 auto 0 cost 0.25 mtbf 0\n");
}

/* Clears the variables config_from_env reads, then sets interval and mtbf (NULL: unset). */
static void set_env(const char *interval, const char *mtbf)
{
    for (const char *const *v = config_env_vars; *v != NULL; v++)
        unsetenv(*v);
    if (interval != NULL)
        setenv("SHOAL_CKPT_INTERVAL", interval, 1);
    if (mtbf != NULL)
        setenv("SHOAL_MTBF", mtbf, 1);
}

static void test_env(void)
{
    static const struct {
        const char *interval, *mtbf;
        int is_auto;
        double interval_s, mtbf_s;
    } good[] = {
        {NULL, NULL, 0, 30, 3600},                  /* SHOAL_MTBF is only used with auto */
        {"10", "2s", 0, 10, 2},                     /* ... but read */
        {"0", NULL, 0, 0, 3600},                    /* no interval checkpoints */
        {"auto", NULL, 1, 8.478616017028905, 3600}, /* an MTBF of an hour, a cost of 10 ms */
        {"auto", "", 1, 8.478616017028905, 3600},   /* empty counts as unset */
        {"auto", "2s", 1, 1, 2},
        {"auto", "0.5", 1, 1, 0.5},
        {"auto", "90m", 1, 10.385639247913762, 5400},
        {"auto", "1h30m", 1, 10.385639247913762, 5400},
        {"auto", "100000", 1, 44.714693131781125, 1e5},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        struct shoal_config cfg;
        char msg[256] = "";
        set_env(good[i].interval, good[i].mtbf);
        int ok = CHECK_EQ(config_from_env(&cfg, msg, sizeof msg), SHOAL_SUCCESS);
        ok &= CHECK_EQ(cfg.interval_auto, good[i].is_auto);
        ok &= CHECK_NEAR(cfg.interval_s, good[i].interval_s, 1e-12);
        ok &= CHECK_NEAR(cfg.mtbf_s, good[i].mtbf_s, 1e-12);
        if (!ok)
            fprintf(stderr, "  SHOAL_CKPT_INTERVAL=%s SHOAL_MTBF=%s: %s\n",
                    good[i].interval ? good[i].interval : "(unset)",
                    good[i].mtbf ? good[i].mtbf : "(unset)", msg);
    }

    static const struct {
        const char *interval, *mtbf, *msg;
    } bad[] = {
        {"auto", "0",
         "invalid SHOAL_MTBF \"0\": want seconds above 0 (3600, 0.5) or a duration (90m, 1h, "
         "2h30m)"},
        {"auto", "0s",
         "invalid SHOAL_MTBF \"0s\": want seconds above 0 (3600, 0.5) or a duration (90m, "
         "1h, 2h30m)"},
        {"auto", "-5",
         "invalid SHOAL_MTBF \"-5\": want seconds above 0 (3600, 0.5) or a duration (90m, "
         "1h, 2h30m)"},
        {"auto", "1e3",
         "invalid SHOAL_MTBF \"1e3\": want seconds above 0 (3600, 0.5) or a duration (90m, "
         "1h, 2h30m)"},
        {"auto", "an hour",
         "invalid SHOAL_MTBF \"an hour\": want seconds above 0 (3600, 0.5) or a duration "
         "(90m, 1h, 2h30m)"},
        /* a bad value is an error even where it is not used */
        {"30", "10x",
         "invalid SHOAL_MTBF \"10x\": want seconds above 0 (3600, 0.5) or a duration (90m, "
         "1h, 2h30m)"},
        {"Auto", NULL,
         "invalid SHOAL_CKPT_INTERVAL \"Auto\": want seconds (30, 0.5), a duration (500ms, "
         "30s, 2m, 1h) or auto"},
        {"auto ", NULL,
         "invalid SHOAL_CKPT_INTERVAL \"auto \": want seconds (30, 0.5), a duration (500ms, "
         "30s, 2m, 1h) or auto"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct shoal_config cfg;
        char msg[256] = "";
        set_env(bad[i].interval, bad[i].mtbf);
        CHECK_EQ(config_from_env(&cfg, msg, sizeof msg), SHOAL_ERR_ARG);
        CHECK_STR(msg, bad[i].msg);
    }
    set_env(NULL, NULL);
}

int main(void)
{
    test_daly();
    test_cost_mean();
    test_slowdown();
    test_line();
    test_env();
    return check_summary(check_passed, check_failed);
}
