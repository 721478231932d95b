"""The in-sandbox runner and the wire format of values (shared by both sides, stdlib only).

This file is sent, as source, into the sandbox as the program to run (``main.py``); the host
imports the same file for :func:`encode` and :func:`decode`, so the wire format has one
implementation. See docs/code_envs.md ("The harness") for the threat model.

The runner reads one request from stdin: a first line holding a per-run random nonce, then
``{"program": str, "setup": str, "calls": [...]}`` written by the host with ``marshal``
(format 4: plain str/int/bool/None/list/dict data; it is host data, and ``marshal`` is built
in, so no ``json`` import and no parser run per execution: ``eval`` of a literal cost ~0.4 ms
in a freshly forked child). Records go back as JSON, written with the C string quoting of
``_json``. It then

1. keeps a private duplicate of stdout as the result channel, and points fds 0/1/2 at
   ``/dev/null`` so that whatever the program prints never reaches the channel;
2. executes the program (then the task's setup code) in a fresh namespace named ``solution``;
3. executes each requested call (``{"id", "fn", "args", "kwargs"}``) or name lookup
   (``{"id", "get"}``) in order, writing one record per call as soon as it finishes:
   ``<nonce>\\t{"id": k, "ok": <value>}`` / ``{"id": k, "raise": [type, message]}`` /
   ``{"id": k, "bad": type}`` (a value of a type the wire format refuses).

The runner never decides pass or fail: it returns values, and the host compares them with
expected values the sandbox never sees.
"""

from __future__ import annotations

import builtins
import sys

try:  # the C accelerator: no import of json/re at start-up (a few ms per run)
    from _json import encode_basestring_ascii as _quote
except ImportError:  # pragma: no cover - CPython always has it
    from json.encoder import py_encode_basestring_ascii as _quote

# Caps on one encoded value: nesting depth and number of nodes.
MAX_DEPTH = 100
MAX_NODES = 1_000_000
MAX_ITER_ITEMS = 100_000
MAX_MESSAGE = 500


class WireError(ValueError):
    """A value that the wire format refuses (wrong type, too deep, malformed)."""


_type = type
_len = len
_repr = repr
_EMPTY_ITERATORS: tuple[object, ...] = (
    (i for i in range(0)),
    map(int, ()),
    filter(None, ()),
    zip(),
    enumerate(()),
    reversed(()),
    iter(()),
    iter([]),
    iter(""),
    iter({}),
    iter(set()),
)
_ITER_TYPES = tuple(_type(x) for x in _EMPTY_ITERATORS)


def encode(value, *, ref=None):
    """Encode a value of an exact builtin type as tagged JSON-ready data.

    Accepts None, bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset and
    range (exact types: subclasses are refused), plus builtin iterators and generators, which
    are materialised (tag ``g``). ``ref(obj)`` may return the tagged form of an object sent
    by reference, or None (host side only). Raises `WireError` for anything else.
    """
    budget = [MAX_NODES]

    def enc(v, depth):
        budget[0] -= 1
        if budget[0] < 0 or depth > MAX_DEPTH:
            raise WireError("value too large or too deeply nested")
        t = _type(v)
        if ref is not None:
            tagged = ref(v)
            if tagged is not None:
                return tagged
        if v is None:
            return ["n"]
        if t is bool:
            return ["b", v]
        if t is int:
            return ["i", hex(v)]
        if t is float:
            return ["f", repr(v)]
        if t is str:
            return ["s", v]
        if t is complex:
            return ["c", repr(v.real), repr(v.imag)]
        if t is bytes:
            return ["y", v.hex()]
        if t is list:
            return ["l", [enc(x, depth + 1) for x in v]]
        if t is tuple:
            return ["t", [enc(x, depth + 1) for x in v]]
        if t is set:
            return ["S", [enc(x, depth + 1) for x in v]]
        if t is frozenset:
            return ["F", [enc(x, depth + 1) for x in v]]
        if t is dict:
            return ["d", [[enc(k, depth + 1), enc(x, depth + 1)] for k, x in v.items()]]
        if t is range:
            return ["R", hex(v.start), hex(v.stop), hex(v.step)]
        if t is type and getattr(builtins, v.__name__, None) is v:
            return ["T", v.__name__]  # a builtin type itself (``int``, ``str``)
        base = _builtin_base(v)
        if base is not None:  # a subclass (Counter, namedtuple, IntEnum...): its base value
            return enc(base, depth)
        if t in _ITER_TYPES:
            items: list = []
            for x in v:
                if _len(items) >= MAX_ITER_ITEMS:
                    raise WireError("iterator too long")
                items.append(enc(x, depth + 1))
            return ["g", items]
        raise WireError(f"cannot send a value of type {t.__name__}")

    return enc(value, 0)


def _builtin_base(v):
    """The plain builtin value inside an instance of a builtin subclass, taken with the base
    type's own C methods (the subclass's overrides, ``__eq__`` included, never matter)."""
    if isinstance(v, bool):
        return None
    for cls, convert in _BASES:
        if isinstance(v, cls):
            return convert(v)
    return None


_BASES = (
    (int, int.__index__),
    (float, float.__float__),
    (str, str.__str__),
    (bytes, bytes.__bytes__),
    (complex, complex.__complex__),
    (list, list.copy),
    (dict, dict.copy),
    (set, set.copy),
    (frozenset, frozenset.copy),
    (tuple, lambda v: tuple.__getitem__(v, slice(None))),
)


def _float(s):
    if _type(s) is not str or _len(s) > 40:
        raise WireError("bad float")
    return float(s)


def _int(s):
    if _type(s) is not str or not s.lstrip("-").startswith("0x"):
        raise WireError("bad int")
    return int(s, 16)


def decode(data, *, resolve=None):
    """Decode tagged data into builtin values, validating every node.

    ``resolve(name)`` turns a reference (tag ``r``) into an object (sandbox side only).
    Raises `WireError` on anything malformed.
    """
    budget = [MAX_NODES]

    def items(x, depth):
        if _type(x) is not list:
            raise WireError("bad sequence")
        return [dec(e, depth + 1) for e in x]

    def dec(d, depth):
        budget[0] -= 1
        if budget[0] < 0 or depth > MAX_DEPTH:
            raise WireError("value too large or too deeply nested")
        if _type(d) is not list or not d or _type(d[0]) is not str:
            raise WireError(f"malformed value {str(d)[:80]!r}")
        tag, n = d[0], _len(d)
        if tag == "n" and n == 1:
            return None
        if tag == "b" and n == 2 and _type(d[1]) is bool:
            return d[1]
        if tag == "i" and n == 2:
            return _int(d[1])
        if tag == "f" and n == 2:
            return _float(d[1])
        if tag == "s" and n == 2 and _type(d[1]) is str:
            return d[1]
        if tag == "c" and n == 3:
            return complex(_float(d[1]), _float(d[2]))
        if tag == "y" and n == 2 and _type(d[1]) is str:
            return bytes.fromhex(d[1])
        if tag == "l" and n == 2:
            return items(d[1], depth)
        if tag == "t" and n == 2:
            return tuple(items(d[1], depth))
        if tag == "S" and n == 2:
            return set(items(d[1], depth))
        if tag == "F" and n == 2:
            return frozenset(items(d[1], depth))
        if tag == "d" and n == 2 and _type(d[1]) is list:
            out = {}
            for kv in d[1]:
                if _type(kv) is not list or _len(kv) != 2:
                    raise WireError("bad dict item")
                out[dec(kv[0], depth + 1)] = dec(kv[1], depth + 1)
            return out
        if (
            tag == "T"
            and n == 2
            and _type(d[1]) is str
            and _type(getattr(builtins, d[1], None)) is type
        ):
            return getattr(builtins, d[1])
        if tag == "R" and n == 4:
            return range(_int(d[1]), _int(d[2]), _int(d[3]))
        if tag == "g" and n == 2:
            return iter(items(d[1], depth))
        if tag == "r" and n == 2 and _type(d[1]) is str and resolve is not None:
            return resolve(d[1])
        if tag == "x" and n == 2 and _type(d[1]) is dict and resolve is not None:
            return resolve(d[1])  # an object the program made: made again by the same call
        raise WireError(f"malformed value with tag {tag!r}")

    try:
        return dec(data, 0)
    except (TypeError, ValueError, OverflowError, RecursionError) as e:
        if isinstance(e, WireError):
            raise
        raise WireError(f"malformed value: {e}") from None


def dumps(obj):
    """JSON text of a record: dicts with str keys, lists, str, bool, int, None only."""
    t = _type(obj)
    if t is str:
        return _quote(obj)
    if t is list or t is tuple:
        return "[" + ",".join([dumps(x) for x in obj]) + "]"
    if t is dict:
        return "{" + ",".join([_quote(k) + ":" + dumps(v) for k, v in obj.items()]) + "}"
    if t is bool:
        return "true" if obj else "false"
    if t is int:
        return _repr(obj)
    if obj is None:
        return "null"
    raise WireError(f"cannot write a record holding {t.__name__}")


def _describe(exc):
    """(type name, message) of an exception raised by untrusted code, never raising itself."""
    try:
        name = _type(exc).__name__
        name = name if _type(name) is str else "Exception"
    except BaseException:
        name = "Exception"
    try:
        msg = str(exc)
        msg = msg[:MAX_MESSAGE] if _type(msg) is str else ""
    except BaseException:
        msg = ""
    return [name, msg]


def main():
    """Entry point inside the sandbox (see the module docstring)."""
    import marshal
    import os

    raw = sys.stdin.buffer.read()
    nonce, _, payload = raw.partition(b"\n")
    request = marshal.loads(payload)  # host data (see the module docstring)
    channel = os.fdopen(os.dup(1), "wb", buffering=0)
    write = channel.write

    def emit(record):
        try:
            line = dumps(record)
        except BaseException as e:  # an unencodable record must still be answered
            line = dumps({"id": record.get("id"), "bad": _describe(e)[0]})
        write(nonce + b"\t" + line.encode("utf-8", "surrogatepass") + b"\n")

    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    # The std streams now write to /dev/null (their fds were replaced; nothing is buffered yet);
    # printing never raises. Reconfigured, not rebuilt: new stream objects cost ~0.1 ms of
    # page faults in a freshly forked child.
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        stream.reconfigure(encoding="utf-8", errors="replace")  # type: ignore[union-attr]  # TextIOWrapper here

    ns = {"__name__": "solution", "__builtins__": builtins}
    try:
        exec(compile(request["program"], "solution.py", "exec"), ns)
        if request.get("setup"):
            exec(compile(request["setup"], "setup.py", "exec"), ns)
    except BaseException as e:
        emit({"program_error": _describe(e)})
        return
    emit({"program": "ok"})

    def resolve(ref):
        if _type(ref) is dict:  # a nested call
            return invoke(ref)[0]
        if ref not in ns:
            raise NameError(f"name {ref!r} is not defined")
        return ns[ref]

    def invoke(call):
        if "get" in call:
            return resolve(call["get"]), []
        fn = resolve(call["fn"])
        args = [decode(a, resolve=resolve) for a in call["args"]]
        kwargs = {k: decode(v, resolve=resolve) for k, v in call["kwargs"]}
        return fn(*args, **kwargs), args

    for call in request["calls"]:
        cid = call["id"]
        try:
            result, args = invoke(call)
        except BaseException as e:
            emit({"id": cid, "raise": _describe(e)})
            continue
        try:
            record = {"id": cid, "ok": encode(result)}
        except BaseException as e:
            record = {
                "id": cid,
                "bad": _type(result).__name__ if isinstance(e, WireError) else _describe(e)[0],
            }
        after = []
        for i, a in enumerate(args):
            if _type(a) in (list, dict, set):  # report in-place mutation of arguments
                try:
                    after.append([i, encode(a)])
                except BaseException:
                    pass
        if after and "ok" in record:
            record["after"] = after
        emit(record)
    emit({"end": _len(request["calls"])})


if __name__ == "__main__":
    main()
    # Leave without running the program's atexit hooks or finalizers: the records are written.
    import os as _os

    _os._exit(0)
