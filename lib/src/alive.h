/*
 * alive.h - alive.c's part of the library's internal interface, included by internal.h:
 * the rank's alive file, its last snapshot call for the node's agent.
 */
#ifndef SHOAL_ALIVE_H
#define SHOAL_ALIVE_H

/* What a rank is doing, as its alive file says (docs/shard-format.md, "Files on
 * disk"): running and calling shoal_snapshot, holding after a checkpoint on purpose,
 * or done (shoal_finalize). */
enum alive_state { ALIVE_RUN, ALIVE_HOLD, ALIVE_DONE };
struct alive_record {
    enum alive_state state;
    long long calls;    /* shoal_snapshot calls so far */
    long long at_ns;    /* CLOCK_MONOTONIC of the record: the rank was in libshoal */
    long long gap_ns;   /* since the record before; 0: the first */
    long long every_ns; /* per call over that gap; 0: the first */
    long long pid;
    long long cpu_ns; /* the process's CPU time (CLOCK_PROCESS_CPUTIME_ID) at at_ns */
};
/* The file's one line, padded to ALIVE_LINE bytes with its newline, so that a pwrite
 * at offset 0 always replaces the whole of the last one. Its length, or -1. */
#define ALIVE_LINE 160
int alive_line(char *out, size_t len, const struct alive_record *r);
/* Opens the rank's alive file afresh (a killed run's record is removed). */
void alive_open(struct shoal_ctx *c);
/* Records a snapshot call at now (shoal_now()): a hold or done at once, a run at most
 * every ALIVE_EVERY_S unless force. */
void alive_note(struct shoal_ctx *c, double now, enum alive_state state, int force);
void alive_close(struct shoal_ctx *c);

#endif /* SHOAL_ALIVE_H */
