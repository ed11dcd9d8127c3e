/*
 * check.h - the tests' one assertion style: CHECK records a failure and goes on, so a
 * run reports every broken expectation; check_summary prints "N passed, M failed".
 */
#ifndef SHOAL_TEST_CHECK_H
#define SHOAL_TEST_CHECK_H

extern int check_passed, check_failed;
/* Prefix of failure lines, e.g. "rank 1: " in MPI tests. */
extern char check_prefix[32];

int check_true(int ok, const char *expr, const char *file, int line);
int check_ll(long long got, long long want, const char *expr, const char *file, int line);
int check_str(const char *got, const char *want, const char *expr, const char *file, int line);

#define CHECK(cond) check_true(!!(cond), #cond, __FILE__, __LINE__)
#define CHECK_EQ(got, want)                                                                    \
    check_ll((long long)(got), (long long)(want), #got, __FILE__, __LINE__)
#define CHECK_STR(got, want) check_str((got), (want), #got, __FILE__, __LINE__)

/* Prints the closing line for these counts; returns the process exit status. */
int check_summary(int passed, int failed);

#endif
