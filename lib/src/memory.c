/*
 * memory.c - buffers that are cheap to fault in, faulting in memory that a copy is
 * about to fill, and reading a mapped file without dying of SIGBUS.
 *
 * On a virtual machine a first touch of a 4 KiB page costs about 2 to 3 us, more when
 * the host has taken back memory the guest freed: the page faults of a large buffer,
 * not the copy into it, are most of the time it takes to fill. 256 MB of fresh memory
 * took 0.21 to 0.23 s to memcpy into alone, against 0.03 s once mapped; four processes
 * doing it at once on two cores took 0.46 to 0.52 s each. Huge pages fault once per
 * 2 MiB, and faulting a range with one madvise(MADV_POPULATE_WRITE) saves the trap per
 * page: with both, the four took 0.13 to 0.21 s each (bench/recovery's machine).
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

#define HUGE_PAGE ((size_t)2 << 20)
#define SMALL_PAGE ((size_t)4096)
/* Linux's madvise advice, hidden by <sys/mman.h> under _POSIX_C_SOURCE or missing from
 * older headers; the values are ABI. A kernel without one answers EINVAL. */
#ifndef MADV_HUGEPAGE
#define MADV_HUGEPAGE 14
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
int madvise(void *addr, size_t len, int advice);

void *buf_alloc(size_t size)
{
    if (size < HUGE_PAGE)
        return malloc(size);
    void *p;
    if (posix_memalign(&p, HUGE_PAGE, size) != 0)
        return NULL;
    /* A hint: without huge pages the buffer works as well, only slower to fault. */
    (void)madvise(p, size & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);
    return p;
}

/* The whole `page`-aligned pages inside [p, p + len): their start, and their length
 * (0 when there is none). */
static size_t inner_pages(void *p, size_t len, size_t page, void **start)
{
    uintptr_t lo = ((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t hi = ((uintptr_t)p + len) & ~(uintptr_t)(page - 1);
    *start = (void *)lo;
    return lo >= (uintptr_t)p && lo < hi ? (size_t)(hi - lo) : 0;
}

/* Faults the whole pages of [p, p + len) in for writing with one call (Linux 5.14;
 * nothing before). */
static void populate_write(void *p, size_t len)
{
    void *start;
    size_t n = inner_pages(p, len, SMALL_PAGE, &start);
    if (n > 0)
        (void)madvise(start, n, MADV_POPULATE_WRITE);
}

void mem_prefault(void *p, size_t len)
{
    if (len < 2 * HUGE_PAGE)
        return; /* a few faults: not worth two system calls */
    void *start;
    size_t n = inner_pages(p, len, HUGE_PAGE, &start);
    if (n > 0)
        (void)madvise(start, n, MADV_HUGEPAGE);
    populate_write(p, len);
}

void mem_touch(void *p, size_t len)
{
    if (len == 0)
        return;
    /* From buf_alloc: already advised for huge pages where it is large. */
    if (len >= 2 * HUGE_PAGE)
        populate_write(p, len);
    /* Written through a volatile pointer, since a compiler may turn malloc+memset(0)
     * into a lazy calloc; cheap where the pages are already in. */
    volatile unsigned char *touch = p;
    for (size_t off = 0; off < len; off += SMALL_PAGE)
        touch[off] = 0;
    touch[len - 1] = 0;
}

void *mem_map_read(int fd, size_t len, int *err)
{
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        *err = EINVAL;
        return NULL;
    }
    if (madvise(m, len, MADV_POPULATE_READ) != 0) {
        *err = errno;
        munmap(m, len);
        return NULL;
    }
    return m;
}

/* The guard of the calling thread: where to jump when an access to [lo, hi) raises
 * SIGBUS. Only a rank's main thread guards, one range at a time. */
static __thread sigjmp_buf *guard_jump;
static __thread uintptr_t guard_lo, guard_hi;
static struct sigaction guard_previous;

static void on_sigbus(int sig, siginfo_t *info, void *context)
{
    (void)context;
    uintptr_t at = (uintptr_t)info->si_addr;
    if (guard_jump != NULL && at >= guard_lo && at < guard_hi)
        siglongjmp(*guard_jump, 1);
    /* Not the guarded range: put back what the program had, and let the access fault
     * again into it, as if the guard had never been there. */
    sigaction(sig, &guard_previous, NULL);
}

int mem_guarded(int (*fn)(void *arg), void *arg, const void *p, size_t len, int *result)
{
    struct sigaction guard;
    memset(&guard, 0, sizeof guard);
    guard.sa_sigaction = on_sigbus;
    guard.sa_flags = SA_SIGINFO;
    sigemptyset(&guard.sa_mask);
    if (sigaction(SIGBUS, &guard, &guard_previous) != 0) {
        *result = fn(arg); /* unguarded: a fault ends the process, as without mapping */
        return 0;
    }
    sigjmp_buf jump;
    volatile int faulted = 0;
    if (sigsetjmp(jump, 1) == 0) {
        guard_lo = (uintptr_t)p;
        guard_hi = (uintptr_t)p + len;
        guard_jump = &jump;
        *result = fn(arg);
    } else {
        faulted = 1;
    }
    guard_jump = NULL;
    sigaction(SIGBUS, &guard_previous, NULL);
    return faulted ? -1 : 0;
}
