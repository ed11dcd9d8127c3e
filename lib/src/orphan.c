/*
 * orphan.c - a rank whose launcher is gone writes no more epochs.
 *
 * A rank's parent is what started it: mpirun or its daemon on the node (orted, prted,
 * Hydra's proxy), srun's slurmstepd, or shoal's rank wrapper. When that parent dies
 * without stopping its ranks (mpirun killed with SIGKILL), the ranks are reparented and
 * MPI goes on between those that share a node: they would compute on and write epochs
 * that nobody launched and nobody will collect, and that a later run of the same
 * command would resume from. So shoal_init records the parent, and before each step
 * that makes an epoch visible (the checkpoint's copy, the epoch directory, the rename
 * of the shard, the rename of the manifest, the `finished` mark) the rank compares
 * getppid() with it: a reparented rank prints one line and exits there, writing
 * nothing. The writer thread also looks once a second while idle, so that an orphan
 * between checkpoints, or waiting in a collective for a rank that already left, does
 * not linger.
 *
 * Only a process a launcher started is watched (its environment names a process
 * manager): a program run alone (an MPI singleton) belongs to nobody but its user,
 * and a shell that exits under `nohup ./prog &` must not stop it.
 *
 * PR_SET_PDEATHSIG is not used: the signal comes when the *thread* that forked the
 * rank ends, not its process, and launchers are multithreaded (Open MPI's daemons,
 * slurmstepd): which of their threads forks is theirs to change, and a rank killed
 * because a launcher's thread ended would be a live job lost.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"

/* The parent recorded at shoal_init; 0: not watched. Written before the writer thread
 * starts, read-only afterwards. */
static pid_t launcher;

/* The variables a process manager gives every process it starts: PMIx (Open MPI,
 * Slurm's --mpi=pmix), PMI (MPICH's Hydra, Slurm's pmi2) and Open MPI's own. */
static const char *const launcher_vars[] = {"PMIX_RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK",
                                            NULL};

int orphan_launched(const char *(*lookup)(const char *name))
{
    for (int i = 0; launcher_vars[i] != NULL; i++) {
        const char *v = lookup(launcher_vars[i]);
        if (v != NULL && v[0] != 0)
            return 1;
    }
    return 0;
}

static const char *env_lookup(const char *name)
{
    return getenv(name);
}

void orphan_watch(void)
{
    launcher = orphan_launched(env_lookup) ? getppid() : 0;
}

int orphan_gone(pid_t recorded, pid_t parent)
{
    return recorded != 0 && parent != recorded;
}

void orphan_check(int rank, long long epoch)
{
    if (!orphan_gone(launcher, getppid()))
        return;
    char line[160];
    int n;
    if (epoch > 0)
        n = snprintf(line, sizeof line,
                     "shoal: rank %d: its launcher (pid %ld) is gone; epoch %lld not written; "
                     "exiting\n",
                     rank, (long)launcher, epoch);
    else
        n = snprintf(line, sizeof line,
                     "shoal: rank %d: its launcher (pid %ld) is gone; exiting\n", rank,
                     (long)launcher);
    /* stderr was most likely a pipe to the launcher: the line must not cost a SIGPIPE,
     * and the exit must not wait for stdio locks or MPI's exit handlers, which another
     * thread may hold or block in. */
    signal(SIGPIPE, SIG_IGN);
    if (n > 0 && write(STDERR_FILENO, line, (size_t)n) < 0)
        _exit(1);
    _exit(1);
}
