"""The checkpoint API over libshoal, in one process (MPI singleton): NumPy arrays and
scalars restored in place, errors as exceptions with libshoal's codes, and the shared
test vectors (testdata/shards) met by libshoal through this binding.

A restart within one process: shoal.finalize() marks the run finished; removing that
mark and calling shoal.init() again resumes from the newest complete epoch, as a new
run of the program would."""

import json
import os
import shutil

import numpy as np
import pytest

mpi = pytest.importorskip("mpi4py.MPI")
import shoal  # noqa: E402

VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata", "shards")


@pytest.fixture
def ckpt(tmp_path, monkeypatch):
    """A fresh checkpoint directory and job for one test; nothing left initialised."""
    monkeypatch.setenv("SHOAL_DIR", str(tmp_path))
    monkeypatch.setenv("SHOAL_JOB", "pytest")
    monkeypatch.setenv("SHOAL_CKPT_INTERVAL", "0")
    for var in ("SHOAL_RESTART_EPOCH", "SHOAL_EPOCH_BASE"):
        monkeypatch.delenv(var, raising=False)
    yield tmp_path
    if _initialised():
        shoal.finalize()


def _initialised():
    try:
        shoal.status()
        return True
    except shoal.StateError:
        return False


def restart(ckpt):
    shoal.finalize()
    os.remove(os.path.join(ckpt, "pytest", "finished"))
    shoal.init()


def arrays():
    return {
        "f64": np.arange(12, dtype=np.float64).reshape(3, 4) / 7,
        "f32-fortran": np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3) * 1.5),
        "i32": np.array([1, -2, 2**31 - 1], dtype=np.int32),
        "i64": np.array([2**62, -5], dtype=np.int64),
        "c128": np.array([1 + 2j, -3.5j]),
        "bool": np.array([True, False, True]),
        "u8": np.frombuffer(b"shoal", dtype=np.uint8).copy(),
        "record": np.zeros(2, dtype=[("x", "<f8"), ("n", "<i4"), ("pad", "V4")]),
        "empty": np.zeros(0),
    }


def test_round_trip_in_place(ckpt):
    shoal.init(mpi.COMM_WORLD)
    assert shoal.status() == 0
    want = arrays()
    live = {k: v.copy(order="A") for k, v in want.items()}
    live["record"]["x"] = [0.5, 1.5]
    want["record"]["x"] = [0.5, 1.5]
    for name, a in live.items():
        shoal.protect(name, a)
    step = shoal.protect_scalar("step", 41, dtype=np.int32)
    step.value += 1
    shoal.checkpoint()
    for a in live.values():
        a[...] = 0 if a.dtype.names is None else np.zeros(1, a.dtype)
    step.value = 0

    restart(ckpt)
    assert shoal.status() == 1
    assert shoal.stored_count("f64") == 12
    assert shoal.stored_count("empty") == 0
    for name, a in live.items():
        shoal.protect(name, a)
    shoal.protect("step", step)
    before = {k: v.ctypes.data for k, v in live.items()}
    shoal.snapshot()  # the first call after a restart recovers
    assert step.value == 42
    for name, a in live.items():
        assert a.ctypes.data == before[name], f"{name} moved"
        np.testing.assert_array_equal(a, want[name], err_msg=name)


def test_ids_and_names_are_one_space(ckpt):
    shoal.init()
    a = np.ones(3)
    shoal.protect(7, a)
    shoal.checkpoint()
    restart(ckpt)
    assert shoal.stored_count(7) == 3
    assert shoal.region_id("grid") == shoal.region_id("grid")
    assert 2**30 <= shoal.region_id("grid") < 2**31
    with pytest.raises(shoal.RegionNotFound) as e:
        shoal.stored_count("grid")
    assert e.value.code == shoal.ERR_NOTFOUND == -12


@pytest.mark.parametrize("bad, error", [
    (np.arange(10.0)[::2], shoal.InvalidArgument),
    (np.frombuffer(b"read-only", dtype=np.uint8), shoal.InvalidArgument),
    (np.array([object()]), shoal.InvalidArgument),
    ([1.0, 2.0], TypeError),
])
def test_protect_refuses(ckpt, bad, error):
    shoal.init()
    with pytest.raises(error):
        shoal.protect("x", bad)


def test_errors_carry_codes(ckpt):
    with pytest.raises(shoal.StateError) as e:
        shoal.snapshot()
    assert e.value.code == -2 and isinstance(e.value, shoal.ShoalError)
    shoal.init()
    with pytest.raises(shoal.StateError):
        shoal.init()
    with pytest.raises(shoal.RegionNotFound):
        shoal.unprotect("never")
    with pytest.raises(shoal.NoCheckpoint):
        shoal.recover()
    with pytest.raises(shoal.InvalidArgument):
        shoal.progress(1.5)
    a = np.zeros(4)
    shoal.protect("a", a)
    shoal.checkpoint()
    restart(ckpt)
    shoal.protect("a", np.zeros(5))
    with pytest.raises(shoal.SizeMismatch) as e:
        shoal.recover()
    assert "recover" in str(e.value)
    assert shoal.strerror(-6).startswith("corrupt shard")
    assert shoal.version_number() >= 100


def load_vectors():
    with open(os.path.join(VECTORS, "vectors.json")) as f:
        return json.load(f)


# What libshoal's shoal_init gives for each vector put in place as rank 0 of a 1-rank
# job "empty-job" restarting from epoch 1: only valid-empty.shard is that shard; the
# other valid ones belong to another job or rank.
KIND_ERRORS = {"unsupported version": shoal.UnsupportedVersion}


@pytest.mark.parametrize("vector", load_vectors(), ids=lambda v: v["file"])
def test_vectors_through_libshoal(tmp_path, monkeypatch, vector):
    monkeypatch.setenv("SHOAL_DIR", str(tmp_path))
    monkeypatch.setenv("SHOAL_JOB", "empty-job")
    monkeypatch.setenv("SHOAL_RESTART_EPOCH", "1")
    monkeypatch.setenv("SHOAL_EPOCH_BASE", "2")
    epoch = tmp_path / "empty-job" / "e00000001"
    epoch.mkdir(parents=True)
    shutil.copy(os.path.join(VECTORS, vector["file"]), epoch / "r000000.shard")
    if vector["ok"] and vector["file"] == "valid-empty.shard":
        shoal.init()
        assert shoal.status() == 1
        shoal.recover()
        shoal.finalize()
        return
    error = shoal.ShardMismatch if vector["ok"] else KIND_ERRORS.get(vector["error"], shoal.CorruptShard)
    with pytest.raises(error):
        shoal.init()
