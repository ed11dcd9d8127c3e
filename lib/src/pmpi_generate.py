#!/usr/bin/env python3
"""Writes lib/src/pmpi_wrappers.inc, the MPI calls libshoal defines, on stdout:

    lib/src/pmpi_generate.py > lib/src/pmpi_wrappers.inc

Each call of lib/src/pmpi.list becomes a function that forwards to its PMPI_ name and
counts what the list says (its header explains the kinds). The file is included at the
end of pmpi.c, in the same translation unit as the counting it calls, so that the
compiler inlines enter() and leave() into every wrapper as it did when they were written
by hand. make test-c checks that the committed file is what this writes.

Python 3's standard library only. The list is checked as it is read: a named parameter
that the call does not have, or whose C type is not the one counting reads (a count that
is not an int, a datatype that is not an MPI_Datatype), is an error naming the line,
since MPICH's handles are ints and a compiler would take a swapped column silently.
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LIST = os.path.join(HERE, "pmpi.list")
COLUMNS = 96  # .clang-format's ColumnLimit

# What each kind reads, in order, and the C type each must have ("int" also takes an
# integer literal). A type written `T x[]` is read as `T*`.
KINDS = {
    "send": ("int", "MPI_Datatype", "int", "MPI_Comm"),
    "init": ("MPI_Request*", "int", "MPI_Datatype", "int", "MPI_Comm"),
    "start": ("MPI_Request*", "int"),
    "forget": ("MPI_Request*",),
    "time": (),
}

LINE = re.compile(r"^(MPI_\w+)\s+(time|(\w+)\(([^)]*)\))\s+(\S.*)$")
PARAM = re.compile(r"^(.*?)(\w+)\s*(\[\])?$")


class ListError(Exception):
    pass


def parse_params(text):
    """[(name, type)] of a C parameter list, types without spaces."""
    params = []
    for p in text.split(","):
        m = PARAM.match(p.strip())
        if m is None or not m.group(1).strip():
            raise ListError(f"cannot read parameter {p.strip()!r}")
        ctype = re.sub(r"\s+", "", m.group(1)) + ("*" if m.group(3) else "")
        params.append((m.group(2), ctype))
    return params


def parse(path):
    calls, seen = [], set()
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                m = LINE.match(line)
                if m is None:
                    raise ListError("want: MPI_NAME KIND(ARGS) PARAMETERS")
                name, kind = m.group(1), m.group(3) or "time"
                if name in seen:
                    raise ListError(f"{name} listed twice")
                seen.add(name)
                if kind not in KINDS:
                    raise ListError(f"unknown kind {kind!r}: want one of {', '.join(KINDS)}")
                params = parse_params(m.group(5))
                types = dict(params)
                args = [a.strip() for a in m.group(4).split(",")] if m.group(4) else []
                want = KINDS[kind]
                if len(args) != len(want):
                    raise ListError(f"{kind} takes {len(want)} arguments, not {len(args)}")
                for arg, ctype in zip(args, want):
                    if ctype == "int" and arg.isdigit():
                        continue
                    if arg not in types:
                        raise ListError(f"{name} has no parameter {arg!r}")
                    if types[arg] != ctype:
                        raise ListError(f"{arg} of {name} is {types[arg]}, want {ctype}")
                calls.append((name, kind, args, m.group(5).strip(), [p for p, _ in params]))
            except ListError as e:
                raise ListError(f"{path}:{lineno}: {e}") from None
    return calls


def wrap(head, items, tail):
    """head + items joined by ", " + tail, broken where clang-format breaks it: as many
    items a line as fit, later lines aligned after head."""
    lines, line = [], head
    for i, item in enumerate(items):
        piece = item + (tail if i == len(items) - 1 else ",")
        if line != head and len(line) + 1 + len(piece) > COLUMNS:
            lines.append(line)
            line = " " * len(head) + piece
        else:
            line += ("" if line == head else " ") + piece
    lines.append(line)
    return "\n".join(lines)


def call_line(prefix, func, args):
    """`prefix func(args);` within the column limit: on one line; else broken after
    prefix's `=` when the call then fits on the next; else its arguments aligned."""
    one = f"{prefix}{func}({', '.join(args)});"
    if len(one) <= COLUMNS:
        return one
    if prefix.rstrip().endswith("="):
        indent = " " * (len(prefix) - len(prefix.lstrip()) + 4)
        rest = f"{indent}{func}({', '.join(args)});"
        if len(rest) <= COLUMNS:
            return prefix.rstrip() + "\n" + rest
    return wrap(f"{prefix}{func}(", args, ");")


def wrapper(name, kind, args, params_text, names):
    params = [p.strip() for p in params_text.split(",")]
    out = [wrap(f"SHOAL_EXPORT int {name}(", params, ")"), "{"]
    forward = call_line("    int rc = ", "P" + name, names)
    if kind == "forget":
        out += [
            "    /* The handle is MPI_REQUEST_NULL once freed; a new request may then reuse it. */",
            f"    forget_request(*{args[0]});",
            call_line("    return ", "P" + name, names),
        ]
    elif kind == "init":
        out += [forward, call_line("    ", "remember_request", ["rc"] + args), "    return rc;"]
    else:
        out += ["    struct timed in = enter();", forward, "    leave(in);"]
        if kind == "send":
            out.append(call_line("    ", "count_send", ["rc"] + args))
        elif kind == "start":
            out.append(call_line("    ", "count_start", ["rc"] + args))
        out.append("    return rc;")
    out.append("}")
    return "\n".join(out)


def main():
    try:
        calls = parse(LIST)
    except (ListError, OSError) as e:
        print(f"pmpi_generate.py: {e}", file=sys.stderr)
        return 1
    print("""/*
 * pmpi_wrappers.inc - the MPI calls of lib/src/pmpi.list, each forwarding to its PMPI_
 * name and counting what the list says. Generated by lib/src/pmpi_generate.py; edit the
 * list or the script, not this file. Included at the end of pmpi.c, whose enter, leave,
 * count_send, remember_request, count_start and forget_request it calls.
 */""")
    for call in calls:
        print()
        print(wrapper(*call))
    return 0


if __name__ == "__main__":
    sys.exit(main())
