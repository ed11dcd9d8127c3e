"""heat - examples/heat.c in Python (mpi4py and NumPy), checkpointed with shoal.

    heat.py [--size N] [--steps S] [--pace US]

It computes the same values in the same order as the C program, so it prints the same
`checksum:` line for the same size and steps (the row sums are added left to right, as
in C, not pairwise as numpy.sum would). Run it under Shoal with the virtual environment
make build sets up:

    bin/shoal run -n 4 -- build/venv/bin/python examples/python/heat.py --size 800

Shoal: the step counter is protected as replicated and the grid's interior rows as this
rank's block of the global grid (region ids 1 and 2, as in the C program, so the shards
are alike), and shoal.snapshot() is called at the start of every step. After a restart,
on any number of ranks, that first call restores both in place, and the loop goes on
from the saved step.
"""

import argparse
import sys
import time

import numpy as np
from mpi4py import MPI

import shoal

ID_STEP, ID_GRID = 1, 2


def say(line):
    """Prints one line in one write: mpirun --tag-output tags what arrives, and a line
    that reached it in two pieces would come out with a tag in its middle."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def parse_options(argv):
    p = argparse.ArgumentParser(prog="heat.py")
    p.add_argument("--size", type=int, default=2048, help="interior points per side")
    p.add_argument("--steps", type=int, default=5000, help="Jacobi sweeps")
    p.add_argument("--pace", type=int, default=0, help="minimum microseconds per step")
    return p.parse_args(argv)


def make_block(n, rank, nranks):
    """(first global row 1..N, owned rows) of rank."""
    base, extra = divmod(n, nranks)
    rows = base + (rank < extra)
    first = 1 + rank * base + min(rank, extra)
    return first, rows


def init_grid(n, first, rows):
    """This rank's rows plus a ghost row above and below, edges at their fixed values."""
    g = np.zeros((rows + 2, n + 2))
    gi = np.arange(first - 1, first + rows + 1)
    g[:, 0] = 100.0 * (1.0 - gi.astype(np.float64) / float(n + 1))
    g[:, n + 1] = 0.0
    g[gi == 0, :] = 100.0
    g[gi == n + 1, :] = 0.0
    return g


def main(argv):
    comm = MPI.COMM_WORLD
    rank, nranks = comm.Get_rank(), comm.Get_size()
    opt = parse_options(argv)
    if opt.size < max(nranks, 1):
        if rank == 0:
            sys.stderr.write("heat.py: --size must be at least the number of ranks\n")
        return 2
    shoal.init(comm)
    restarted = shoal.status() != shoal.FRESH

    n = opt.size
    first, rows = make_block(n, rank, nranks)
    up = rank - 1 if rank > 0 else MPI.PROC_NULL
    down = rank + 1 if rank < nranks - 1 else MPI.PROC_NULL
    grid, nxt = init_grid(n, first, rows), init_grid(n, first, rows)
    if rank == 0:
        say(f"heat: {n} x {n} points, {opt.steps} steps, {nranks} ranks")

    step = shoal.protect_scalar(ID_STEP, 0, dtype=np.int32, replicated=True)
    start = MPI.Wtime()
    report_every = opt.steps // 10 if opt.steps >= 10 else 1
    while step.value < opt.steps:
        step_start = MPI.Wtime()
        # The buffers swap roles every step: point the grid region at the current one, its
        # interior rows, global rows first .. first + rows - 1 of the plate's n.
        shoal.protect_block(ID_GRID, grid[1:rows + 1], n * (n + 2), (first - 1) * (n + 2))
        shoal.snapshot()
        if restarted and rank == 0:
            say(f"heat: resumed at step {step.value}")
        restarted = False

        comm.Sendrecv(grid[1], dest=up, sendtag=0, recvbuf=grid[rows + 1], source=down, recvtag=0)
        comm.Sendrecv(grid[rows], dest=down, sendtag=1, recvbuf=grid[0], source=up, recvtag=1)
        # The C program's order of additions, so that the values are bit for bit equal.
        nxt[1:-1, 1:-1] = 0.25 * (((grid[:-2, 1:-1] + grid[2:, 1:-1]) + grid[1:-1, :-2]) + grid[1:-1, 2:])
        grid, nxt = nxt, grid

        step.value += 1
        shoal.progress(step.value / opt.steps)
        if rank == 0 and step.value % report_every == 0:
            say(f"step {step.value} of {opt.steps}")
        left = step_start + opt.pace * 1e-6 - MPI.Wtime()
        if left > 0:
            time.sleep(left)
    seconds = MPI.Wtime() - start

    # Each rank sums its rows left to right (cumsum adds in order); rank 0 adds the row
    # sums in global row order.
    row_sums = np.cumsum(grid[1:-1, 1:-1], axis=1)[:, -1].copy() if rows else np.zeros(0)
    blocks = [make_block(n, r, nranks) for r in range(nranks)]
    all_sums = np.empty(n) if rank == 0 else None
    comm.Gatherv(row_sums, [all_sums, [b[1] for b in blocks], [b[0] - 1 for b in blocks], MPI.DOUBLE]
                 if rank == 0 else None, root=0)
    shoal.finalize()
    if rank == 0:
        total = np.cumsum(all_sums)[-1]
        say(f"time: {seconds:.2f} s")
        say(f"checksum: {total:.15e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
