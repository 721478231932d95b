"""The hard time limit: pathological sympy input gives reason="timeout", from any thread."""

import os
import threading
import time

import pytest

from marft_envs.math import verify, verify_many, warmup

TOWER = "2^{2^{2^{2^{2^{100}}}}}"
# In-process size bounds settle TOWER vs 3 and TOWER vs TOWER+1; this pair needs sympy, which hangs.
TOWER_REF = "4^{2^{2^{2^{2^{99}}}}}"
LIMIT = 1.0
SLACK = 2.0  # generous: the bound is on the verdict arriving, not a speed measurement


@pytest.fixture(autouse=True)
def warm_pool():
    warmup()  # so a cold worker start (imports) is not part of what we bound


def _zombie_children() -> list[int]:
    """Zombie processes whose parent is this process or one of its children."""
    stats = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                stats[int(pid)] = (fields[0], int(fields[1]))
            except OSError:
                continue
    mine = {os.getpid()} | {p for p, (_, ppid) in stats.items() if ppid == os.getpid()}
    return [p for p, (state, ppid) in stats.items() if state == "Z" and ppid in mine]


def test_timeout_from_main_thread():
    start = time.monotonic()
    v = verify(TOWER, TOWER_REF, timeout=LIMIT)
    assert time.monotonic() - start < LIMIT + SLACK
    assert v.reason == "timeout" and not v.correct and v.score == 0.0 and not v.infra_error


def test_timeout_from_a_thread():
    out = []
    thread = threading.Thread(target=lambda: out.append(verify(TOWER, TOWER_REF, timeout=LIMIT)))
    thread.start()
    thread.join(LIMIT + SLACK)
    assert not thread.is_alive()
    assert out[0].reason == "timeout"


def test_huge_factorial_times_out():
    # Equal in truth, but only sympy could tell, and it would need (10^8+1)! first.
    v = verify("\\boxed{(10^{8})!}", "\\frac{(10^{8}+1)!}{10^{8}+1}", timeout=LIMIT)
    assert v.reason == "timeout"


@pytest.mark.parametrize("pred, ref", [(TOWER, "3"), ("(10^{10^{10}})!", "5"), (TOWER, "0"),
                                       ("9^{9^{9^{9}}} - 9^{9^{9^{9}}} + 1", "42"), (TOWER, TOWER + "+1"),
                                       ("2^{2^{100}}", "2\\cdot 2^{2^{100}}"), ("(10^{8})!", "(10^{8})!+1")])
def test_huge_constants_are_settled_without_sympy(pred, ref):
    # Sizes (or cancelling huge parts) decide these in-process: no worker, no timeout.
    assert verify(pred, ref, timeout=LIMIT).reason == "mismatch"


def test_cancelling_huge_parts_can_be_equal():
    assert verify("9^{9^{9^{9}}} - 9^{9^{9^{9}}} + 1", "1", timeout=LIMIT).correct


def test_pool_recovers_and_leaves_no_zombies():
    for _ in range(3):
        assert verify(TOWER, TOWER_REF, timeout=LIMIT).reason == "timeout"
    v = verify("2^{100001}/2", "2^{100000}", timeout=30)
    assert v.correct and v.reason == "symbolic"
    time.sleep(0.2)
    assert _zombie_children() == []


def test_timeouts_in_verify_many_from_threads():
    pairs = [(TOWER, TOWER_REF), ("\\boxed{4}", "4"), (TOWER, TOWER_REF), ("(x+1)^2", "x^2+2x+1")]
    results = []
    threads = [threading.Thread(target=lambda: results.append(verify_many(pairs, timeout=LIMIT)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(4 * (LIMIT + SLACK))
    assert len(results) == 2
    for r in results:
        assert [v.reason for v in r] == ["timeout", "exact", "timeout", "symbolic"]


def _grade_in_daemon(_):
    v = verify("2^{100001}/2", "2^{100000}", timeout=LIMIT)
    return v.reason, v.infra_error


def test_no_worker_possible_is_an_infrastructure_error():
    # A multiprocessing.Pool worker is daemonic and may not start processes of its own.
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.map(_grade_in_daemon, [0]) == [("error", True)]


def test_math_verify_stage_has_its_share_of_the_limit():
    # A \sum identity only math-verify reads, and that takes it seconds: it gets
    # MATH_VERIFY_SHARE of the limit (its own signal limits in the worker), then "timeout".
    from marft_envs.math.verify import MATH_VERIFY_SHARE

    limit = 3.0
    start = time.monotonic()
    v = verify("$F_n = \\sum_{k=0}^{n-2} F_k F_{n-k-2}$", "$F_n = \\sum_{k=0}^{n-1} F_k F_{n-k-1}$",
               timeout=limit)
    assert not v.correct and v.reason in {"timeout", "mismatch"}
    assert time.monotonic() - start < limit + SLACK
    # A timeout must be math-verify's share running out (the worker answers "timeout"),
    # not the worker being killed at the whole limit (a verdict without a method).
    assert v.reason == "mismatch" or v.details.get("method") == "timeout", v
    assert 0 < MATH_VERIFY_SHARE < 1
