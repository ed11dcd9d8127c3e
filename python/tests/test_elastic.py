"""Distributed and replicated regions from Python: protect_block, protect_subarray and
protect_replicated restored in place (one process, as test_api.py restarts), what
SHOAL_ELASTIC=1 refuses, and the Python heat stopped on N ranks and resumed with mpirun
on M printing the uninterrupted checksum (lib/tests/resize_heat.sh, the script the C and
Fortran heat are held to as well)."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

mpi = pytest.importorskip("mpi4py.MPI")
import shoal  # noqa: E402
from shoal.shard import read_shard_file  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


@pytest.fixture
def ckpt(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOAL_DIR", str(tmp_path))
    monkeypatch.setenv("SHOAL_JOB", "elastic")
    monkeypatch.setenv("SHOAL_CKPT_INTERVAL", "0")
    for var in ("SHOAL_RESTART_EPOCH", "SHOAL_EPOCH_BASE", "SHOAL_ELASTIC", "SHOAL_RESTART_NRANKS"):
        monkeypatch.delenv(var, raising=False)
    yield tmp_path
    try:
        shoal.status()
    except shoal.StateError:
        return
    shoal.finalize()


def restart(ckpt):
    shoal.finalize()
    os.remove(os.path.join(ckpt, "elastic", "finished"))
    shoal.init()


def test_kinds_restored_in_place(ckpt):
    shoal.init()
    assert shoal.status() == shoal.FRESH
    with pytest.raises(shoal.NoCheckpoint):
        shoal.restart_nranks()
    block = np.arange(6, dtype=np.float64) / 3
    box_c = np.arange(12, dtype=np.int32).reshape(3, 4)
    box_f = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    step = shoal.protect_scalar("step", 41, dtype=np.int32, replicated=True)
    shoal.protect_block("block", block, 10, 4)
    shoal.protect_subarray("box-c", box_c, [5, 4], [2, 0])
    shoal.protect_subarray("box-f", box_f, [2, 7], [0, 1])
    shoal.protect_replicated("params", np.array([0.5, 2.0]))
    shoal.checkpoint()
    want = {"block": block.copy(), "box-c": box_c.copy(), "box-f": box_f.copy()}
    for a in (block, box_c, box_f):
        a[...] = 0
    step.value = 0

    restart(ckpt)
    assert shoal.status() == shoal.RESTARTED
    assert shoal.restart_nranks() == 1
    assert shoal.stored_count("block") == 10  # a distributed region's global count
    assert shoal.stored_count("box-c") == 20
    assert shoal.old_bytes(0, "block") == 48
    for name, a in (("block", block), ("box-c", box_c), ("box-f", box_f)):
        kind = {"block": shoal.protect_block, "box-c": shoal.protect_subarray,
                "box-f": shoal.protect_subarray}[name]
        args = {"block": (10, 4), "box-c": ([5, 4], [2, 0]), "box-f": ([2, 7], [0, 1])}[name]
        kind(name, a, *args)
    shoal.protect_replicated("step", step)
    shoal.protect_replicated("params", np.zeros(2))
    shoal.snapshot()
    assert step.value == 41
    for name, a in (("block", block), ("box-c", box_c), ("box-f", box_f)):
        np.testing.assert_array_equal(a, want[name], err_msg=name)
    got = np.zeros(2)
    shoal.read_old(0, "block", got, offset=8)
    np.testing.assert_array_equal(got, want["block"][1:3])
    assert shoal.read_old(None, "block") is None

    # The shard says what each region is, its datatype that of the C type.
    shoal.checkpoint()
    shoal.finalize()
    epochs = sorted(os.listdir(os.path.join(ckpt, "elastic")))
    shard = read_shard_file(os.path.join(ckpt, "elastic", [e for e in epochs if e.startswith("e")][-1],
                                         "r000000.shard"))
    kinds = {r.id: (r.kind, r.datatype) for r in shard.regions}
    assert kinds[shoal.region_id("block")] == ("block", 14)
    assert kinds[shoal.region_id("box-c")] == ("subarray", 7)
    assert kinds[shoal.region_id("step")] == ("replicated", 7)
    assert shard.per_rank() == []
    by_id = {r.id: r for r in shard.regions}
    f = by_id[shoal.region_id("box-f")]
    assert (f.order, f.sizes, f.subsizes, f.starts) == ("Fortran", (2, 7), (2, 3), (0, 1))


def test_refusals(ckpt, monkeypatch):
    monkeypatch.setenv("SHOAL_ELASTIC", "1")
    shoal.init()
    with pytest.raises(shoal.PerRankRegion) as e:
        shoal.protect("grid", np.zeros(3))
    assert e.value.code == shoal.ERR_PERRANK == -13
    shoal.protect_replicated("grid", np.zeros(3))
    with pytest.raises(shoal.InvalidArgument):
        shoal.protect_block("b", np.zeros(3), 2, 0)  # beyond its array
    with pytest.raises(shoal.InvalidArgument):
        shoal.protect_subarray("s", np.zeros((2, 2)), [4], [0])  # a size per dimension
    with pytest.raises(shoal.InvalidArgument):
        shoal.read_old(0, "b", np.zeros(6)[::2])


@pytest.mark.skipif(shutil.which("mpirun.openmpi") is None, reason="Open MPI's mpirun is not installed")
def test_heat_resumes_on_other_counts():
    script = os.path.join(ROOT, "lib", "tests", "resize_heat.sh")
    heat = os.path.join(ROOT, "examples", "python", "heat.py")
    env = dict(os.environ, MPIRUN="mpirun.openmpi")
    for var in list(env):
        if var.startswith("SHOAL_"):
            del env[var]
    p = subprocess.run([script, "4:2", "4:3", "3:4", "2:4", "--", sys.executable, heat],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "4 passed, 0 failed" in p.stdout
