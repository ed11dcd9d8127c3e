"""ckpt-cost-prog.py - bench/ckpt-cost for a Python program: how long shoal.checkpoint()
blocks with a NumPy array protected (zero-copy), against numpy.copyto of the same bytes
in the same run. The C program's rules: the slowest rank of each round for both, median
of the rounds, each checkpoint with the previous one written. Needs SHOAL_DIR, SHOAL_JOB
and SHOAL_EPOCH_BASE=1.

Usage: python ckpt-cost-prog.py REPS MB...
"""
import os
import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

import shoal


def spin(seconds):
    """Busy-waits, as the C program does: an idle vCPU comes back slow."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def wait_written(epoch, rank):
    path = os.path.join(os.environ["SHOAL_DIR"], os.environ["SHOAL_JOB"],
                        f"e{epoch:08d}", f"r{rank:06d}.shard")
    for _ in range(60000):
        if os.path.exists(path):
            break
        spin(0.001)
    spin(0.15)
    MPI.COMM_WORLD.Barrier()


def main():
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    reps = int(sys.argv[1])
    shoal.init(comm)
    if rank == 0:
        print(f"{comm.Get_size()} ranks; per round the slowest rank, median of {reps} rounds")
        print(f"{'MB/rank':>8} {'checkpoint_s':>14} {'copyto_s':>14} {'ratio':>8}")
    epoch, ok = 0, True
    for mb in map(int, sys.argv[2:]):
        n = (mb << 20) // 8
        state = np.arange(n, dtype=np.float64) + rank
        dst = np.ones(n)  # faulted in, like the program's own memory
        shoal.protect(1, state)
        ckpt, copy = [], []
        for r in range(reps):
            np.copyto(dst, state)  # an unmeasured copy first
            comm.Barrier()
            t0 = time.perf_counter()
            np.copyto(dst, state)
            c = time.perf_counter() - t0
            state[r] += 1
            comm.Barrier()
            t0 = time.perf_counter()
            shoal.checkpoint()
            k = time.perf_counter() - t0
            epoch += 1
            wait_written(epoch, rank)
            ckpt.append(comm.allreduce(k, op=MPI.MAX))
            copy.append(comm.allreduce(c, op=MPI.MAX))
        if rank == 0:
            ratio = statistics.median(ckpt) / statistics.median(copy)
            print(f"{mb:8d} {statistics.median(ckpt):14.6f} {statistics.median(copy):14.6f} {ratio:8.2f}", flush=True)
            ok = ok and ratio <= 1.5
        shoal.unprotect(1)
        del state, dst
    shoal.finalize()
    if rank == 0:
        print("target ratio <= 1.5:", "met" if ok else "NOT met")


main()
