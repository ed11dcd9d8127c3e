/*
 * error.c - error messages, logging and clocks.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "internal.h"

const char *error_text(int code)
{
    switch (code) {
#define SHOAL_XX_CASE(name, value, msg)                                                        \
    case SHOAL_##name:                                                                         \
        return msg;
        SHOAL_ERRNO_MAP(SHOAL_XX_CASE)
#undef SHOAL_XX_CASE
    }
    return "unknown error";
}

void shoal_log(const char *fmt, ...)
{
    /* Formatted into one buffer and written at once, so that lines of different ranks
     * sharing a terminal do not interleave. */
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)(sizeof line - 2);
    line[n] = '\n';
    line[n + 1] = 0;
    fprintf(stderr, "shoal: %s", line);
    fflush(stderr);
}

const char *shoal_errno_text(int err, char *buf, size_t len)
{
    /* The XSI strerror_r, as selected by _POSIX_C_SOURCE: thread-safe, unlike
     * strerror, and the writer thread reports errors too. */
    if (strerror_r(err, buf, len) != 0)
        snprintf(buf, len, "error %d", err);
    return buf;
}

double shoal_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t shoal_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
