"""The trusted harness: correct programs pass, wrong ones fail, with typed outcomes per test."""

import pytest

from marft_envs.code import check, run_python_tests
from marft_envs.code.runner import WireError, decode, encode
from tasks import IOTest, Task


@pytest.fixture
def sb(sandbox_factory):
    """The subprocess backend: harness logic does not depend on the backend."""
    return sandbox_factory("subprocess")


@pytest.fixture
def any_sb(sandbox):
    """Every backend in turn (conftest.py)."""
    return sandbox


def fn_task(tests, entry="f", public=(), **kw):
    return Task(id="t", kind="code", prompt="p", entry_point=entry, tests=tuple(tests), public_tests=tuple(public), **kw)


SQUARE_TESTS = ["assert f(2) == 4", "assert f(-3) == 9", "assert f(0) == 0"]


def test_correct_program_passes_on_every_backend(any_sb):
    r = check("def f(x):\n    return x * x", fn_task(SQUARE_TESTS), sandbox=any_sb, extract=False)
    assert (r.outcome, r.passed, r.total, r.score) == ("pass", 3, 3, 1.0)
    assert r.backend == any_sb.name


def test_partially_correct_program_scores_fraction(sb):
    r = check("def f(x):\n    return x * 2", fn_task(SQUARE_TESTS), sandbox=sb, extract=False)
    assert (r.outcome, r.passed, r.total) == ("fail", 2, 3)
    assert r.score == pytest.approx(2 / 3)
    assert [d.outcome for d in r.details] == ["pass", "fail", "pass"]
    r_all = check("def f(x):\n    return x * 2", fn_task(SQUARE_TESTS), sandbox=sb, extract=False, reward="all")
    assert r_all.score == 0.0 and r_all.passed == 2


def test_typed_outcomes(sb):
    t = fn_task(SQUARE_TESTS)
    assert check("def f(x):\n    raise ValueError('no')", t, sandbox=sb, extract=False).outcome == "runtime_error"
    assert check("def f(x:\n", t, sandbox=sb, extract=False).outcome == "runtime_error"
    assert check("def f(x):\n    while True: pass", t, sandbox=sb, extract=False, timeout=2).outcome == "timeout"
    mem = check("def f(x):\n    return len(bytearray(10**10))", t, sandbox=sb, extract=False)
    assert mem.outcome == "memory"


def test_timeout_in_one_test_keeps_earlier_results(sb):
    prog = "def f(x):\n    if x < 0:\n        while True: pass\n    return x * x"
    r = check(prog, fn_task(SQUARE_TESTS), sandbox=sb, extract=False, timeout=2)
    assert [d.outcome for d in r.details] == ["pass", "timeout", "timeout"]
    assert r.outcome == "timeout" and r.passed == 1


def test_humaneval_check_function_units_and_trusted_helpers(sb):
    prefix = "def helper(x):\n    return x + 1\n\ndef g(x):\n    \"\"\"g(x) = helper(x) * 2\"\"\"\n"
    tests = ("METADATA = {}\n\ndef check(candidate):\n    assert candidate(1) == 4\n"
             "    assert True, 'not a test'\n    for i in range(5):\n        assert candidate(i) == helper(i) * 2\n",)
    t = Task(id="h", kind="code", prompt=prefix, entry_point="g", tests=tests, metadata={"code_prefix": prefix})
    assert check("    return helper(x) * 2\n", t, sandbox=sb, extract=False).passed == 2  # continuation
    r = check("def g(x):\n    return helper(x) * 2", t, sandbox=sb, extract=False)
    assert (r.outcome, r.total) == ("pass", 2)  # `assert True` is not counted
    # Redefining the helper changes nothing on the host: the tests use the trusted one.
    r = check("def helper(x):\n    return 0\ndef g(x):\n    return 0", t, sandbox=sb, extract=False)
    assert r.passed == 0


def test_dependent_calls_take_several_rounds(sb):
    t = fn_task(["assert f(f(f(1))) == 8", "x = f(3)\ny = f(x)\nassert y == 36"])
    r = check("def f(x):\n    return x * 2 if x < 5 else x * 6", t, sandbox=sb, extract=False)
    assert (r.outcome, r.passed) == ("pass", 2)
    assert r.extra["rounds"] >= 2


def test_random_inputs_in_tests_are_reproducible(sb):
    t = fn_task(["import random\nfor _ in range(50):\n    a = random.randint(0, 99)\n    assert f(a) == a + 1"])
    assert check("def f(x):\n    return x + 1", t, sandbox=sb, extract=False).outcome == "pass"


def test_exceptions_expected_by_tests(sb):
    t = fn_task(["try:\n    f(0)\nexcept ZeroDivisionError:\n    pass\nelse:\n    assert False"])
    assert check("def f(x):\n    return 1 / x", t, sandbox=sb, extract=False).outcome == "pass"
    assert check("def f(x):\n    return 1", t, sandbox=sb, extract=False).outcome == "fail"


def test_in_place_mutation_is_mirrored(sb):
    t = fn_task(["xs = [3, 1, 2]\nf(xs)\nassert xs == [1, 2, 3]"])
    assert check("def f(v):\n    v.sort()", t, sandbox=sb, extract=False).outcome == "pass"
    assert check("def f(v):\n    return sorted(v)", t, sandbox=sb, extract=False).outcome == "fail"


def test_setup_code_objects_pass_by_reference(sb):
    prog = "class Node:\n    def __init__(self, v):\n        self.v = v\n        self.left = None\n\ndef depth(n):\n    return 0 if n is None else 1 + depth(n.left)\n"
    t = fn_task(["assert depth(root) == 2"], entry="depth", setup_code="root = Node(1)\nroot.left = Node(2)\n")
    assert check(prog, t, sandbox=sb, extract=False).outcome == "pass"


def test_builtin_subclasses_compare_as_their_base_values(sb):
    t = fn_task(["assert f('aab') == {'a': 2, 'b': 1}"])
    assert check("from collections import Counter\ndef f(s):\n    return Counter(s)", t, sandbox=sb, extract=False).outcome == "pass"


def test_float_tolerance_and_math_module(sb):
    t = fn_task(["assert math.isclose(f(2), 3.14159 * 4, rel_tol=1e-3)", "assert abs(f(1) - 3.1416) < 1e-3"])
    assert check("import math\ndef f(r):\n    return math.pi * r * r", t, sandbox=sb, extract=False).outcome == "pass"


def test_unsendable_return_value_is_a_runtime_error(sb):
    t = fn_task(["assert f() == 1"])
    r = check("def f():\n    return object()", t, sandbox=sb, extract=False)
    assert r.outcome == "runtime_error" and "object" in r.details[0].message


def test_public_tests_are_separate(sb):
    t = fn_task(SQUARE_TESTS, public=["assert f(2) == 4"])
    r = check("def f(x):\n    return 4", t, sandbox=sb, extract=False, tests="public")
    assert (r.outcome, r.total, r.which) == ("pass", 1, "public")


def test_stdio_outcomes(any_sb):
    t = Task(id="io", kind="code", prompt="p", io_tests=(IOTest("1 2\n", "3\n"), IOTest("5 5", "10")))
    assert check("a, b = map(int, input().split())\nprint(a + b)", t, sandbox=any_sb, extract=False).outcome == "pass"
    assert check("print(3)", t, sandbox=any_sb, extract=False).passed == 1
    assert check("import sys\nsys.exit(3)", t, sandbox=any_sb, extract=False).outcome == "runtime_error"
    assert check("while True: pass", t, sandbox=any_sb, extract=False, timeout=1).outcome == "timeout"
    # whitespace-normalised comparison: tokens only
    assert check("print(' 3 ')\nprint()", Task(id="w", kind="code", prompt="p", io_tests=(IOTest("", "3"),)),
                 sandbox=any_sb, extract=False).outcome == "pass"


def test_stdio_invalid_utf8_and_huge_output(sb):
    t = Task(id="io", kind="code", prompt="p", io_tests=(IOTest("", "x\n"),))
    assert check("import sys\nsys.stdout.buffer.write(b'\\xff\\xfe')", t, sandbox=sb, extract=False).outcome == "fail"
    assert check("while True: print('x' * 10000)", t, sandbox=sb, extract=False).outcome in ("runtime_error", "timeout")


def test_infra_error_when_backend_cannot_run(sb):
    class Broken:
        name = "broken"

        def run(self, program, **kw):
            from marft_envs.code.sandbox.base import infra_error
            return infra_error("daemon is dead", "broken")

    r = check("def f(x):\n    return x * x", fn_task(SQUARE_TESTS), sandbox=Broken(), extract=False)
    assert r.outcome == "infra_error" and r.score == 0.0
    v = r.to_verdict()
    assert v.infra_error and not v.correct


def test_to_verdict(sb):
    v = check("```python\ndef f(x):\n    return x*x\n```", fn_task(SQUARE_TESTS), sandbox=sb).to_verdict()
    assert v.correct and v.score == 1.0 and v.answer.startswith("def f")
    assert v.details["backend"] == "subprocess" and v.details["outcome"] == "pass"


def test_broken_task_tests_raise_clearly(sb):
    with pytest.raises(ValueError, match="tests do not compile"):
        run_python_tests("x = 1", ("assert (",), sandbox=sb)


@pytest.mark.parametrize("value", [
    None, True, 0, -2**200, 1.5, float("inf"), "s\ud800", b"\x00", 1 + 2j, [1, [2]], (1,), {1: {2: 3}},
    {1, 2}, frozenset({3}), range(1, 9, 2),
])
def test_wire_round_trip(value):
    assert decode(encode(value)) == value
    assert type(decode(encode(value))) is type(value)


@pytest.mark.parametrize("data", [["i", "12"], ["x"], "s", ["l", "notalist"], ["d", [[["n"]]]], ["f", "1" * 100], [[]]])
def test_wire_rejects_malformed(data):
    with pytest.raises(WireError):
        decode(data)


def test_wire_rejects_unknown_types_and_deep_nesting():
    with pytest.raises(WireError):
        encode(object())
    deep = []
    for _ in range(200):
        deep = [deep]
    with pytest.raises(WireError):
        encode(deep)


def test_objects_of_program_classes_can_be_passed_back(sb):
    prog = "class Pair:\n    def __init__(self, a, b):\n        self.a, self.b = a, b\n\ndef total(ps):\n    return sum(p.a + p.b for p in ps)\n"
    t = fn_task(["assert total([Pair(1, 2), Pair(3, 4)]) == 10"], entry="total")
    assert check(prog, t, sandbox=sb, extract=False).outcome == "pass"


def test_uncompilable_and_empty_programs_fail_without_a_sandbox_run():
    class NoRun:
        name = "norun"

        def run(self, *a, **k):
            raise AssertionError("must not run")

    t = fn_task(SQUARE_TESTS)
    for junk in ("def f(:", "\x00", "(" * 10000, ""):
        r = check(junk, t, sandbox=NoRun(), extract=False)
        assert (r.outcome, r.passed, r.total) == ("runtime_error", 0, 3)
    io = Task(id="io", kind="code", prompt="p", io_tests=(IOTest("", "1"),))
    assert check("print(", io, sandbox=NoRun(), extract=False).total == 1


def test_interpreter_crash_and_odd_strings(any_sb):
    t = fn_task(SQUARE_TESTS)
    crash = check("import ctypes\ndef f(x):\n    return ctypes.string_at(0)", t, sandbox=any_sb, extract=False)
    assert crash.outcome == "runtime_error" and crash.passed == 0
    # lone surrogates and NUL characters travel as data and simply compare unequal
    odd = check("def f(x):\n    return '\\ud800\\x00'", t, sandbox=any_sb, extract=False)
    assert (odd.outcome, odd.passed) == ("fail", 0)
