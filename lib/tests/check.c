/* check.c - see check.h. */
#include <stdio.h>
#include <string.h>

#include "check.h"

int check_passed, check_failed;
char check_prefix[32];

int check_true(int ok, const char *expr, const char *file, int line)
{
    if (ok) {
        check_passed++;
        return 1;
    }
    check_failed++;
    fprintf(stderr, "%sFAIL %s:%d: %s\n", check_prefix, file, line, expr);
    return 0;
}

int check_ll(long long got, long long want, const char *expr, const char *file, int line)
{
    if (got == want) {
        check_passed++;
        return 1;
    }
    check_failed++;
    fprintf(stderr, "%sFAIL %s:%d: %s = %lld, want %lld\n", check_prefix, file, line, expr, got,
            want);
    return 0;
}

int check_str(const char *got, const char *want, const char *expr, const char *file, int line)
{
    if (got != NULL && want != NULL && strcmp(got, want) == 0) {
        check_passed++;
        return 1;
    }
    check_failed++;
    fprintf(stderr, "%sFAIL %s:%d: %s = \"%s\", want \"%s\"\n", check_prefix, file, line, expr,
            got ? got : "(null)", want ? want : "(null)");
    return 0;
}

int check_summary(int passed, int failed)
{
    printf("%d passed, %d failed\n", passed, failed);
    fflush(stdout);
    return failed == 0 && passed > 0 ? 0 : 1;
}
