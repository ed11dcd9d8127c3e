"""The error codes of the package against lib/include/shoal.h's one list of them
(SHOAL_ERRNO_MAP): every code there is here under its C name with its number and has its
exception class, and the package has no code the header lacks. The classes and their
bases (ValueError, OSError, ...) are written by hand in shoal/_errors.py; this is what
keeps them from drifting from the C library, as lib/fortran/generate.sh does for
Fortran. Needs neither libshoal nor MPI."""

import os
import re
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
HEADER = os.path.join(HERE, "..", "..", "lib", "include", "shoal.h")

import shoal  # noqa: E402
from shoal import _errors  # noqa: E402

XX = re.compile(r'^\s*XX\((\w+),\s*(-?\d+),\s*"((?:[^"\\]|\\.)*)"\)')


def header_codes():
    """[(name, value)] of SHOAL_ERRNO_MAP, in its order."""
    with open(HEADER) as f:
        codes = [(m.group(1), int(m.group(2))) for m in map(XX.match, f) if m]
    assert codes, f"no XX(...) lines in {HEADER}"
    return codes


CODES = header_codes()


@pytest.mark.parametrize("name,value", CODES)
def test_code_has_the_header_number(name, value):
    got = getattr(_errors, name, None)
    assert got == value, f"shoal._errors.{name} = {got}, want {value} (shoal.h)"
    assert getattr(shoal, name, None) == value, f"shoal.{name} is not exported"
    assert name in shoal.__all__, f"{name} is not in shoal.__all__"


@pytest.mark.parametrize("name,value", [(n, v) for n, v in CODES if v != 0])
def test_code_has_its_exception(name, value):
    cls = _errors._BY_CODE.get(value)
    assert cls is not None, f"no exception class for {name} ({value})"
    assert issubclass(cls, _errors.ShoalError)
    assert cls.code == value, f"{cls.__name__}.code = {cls.code}, want {value} ({name})"
    assert getattr(shoal, cls.__name__, None) is cls, f"shoal.{cls.__name__} not exported"
    got = cls("message", value)
    assert got.code == value and str(got) == "message"


def test_no_code_beyond_the_header():
    want = {name for name, _ in CODES}
    got = {n for n in dir(_errors) if n == "SUCCESS" or n.startswith("ERR_")}
    assert got == want, (f"codes only in Python: {sorted(got - want)}, "
                         f"only in shoal.h: {sorted(want - got)}")
    want_values = {v for _, v in CODES if v != 0}
    got_values = set(_errors._BY_CODE)
    assert got_values == want_values, (f"exception classes for codes {sorted(got_values)}, "
                                       f"want {sorted(want_values)}")
