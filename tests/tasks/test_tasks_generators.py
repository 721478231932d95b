import re
from fractions import Fraction

import pytest

import tasks
from tasks.generators import LEVELS, MIXED_LEVELS, SUM_OPERANDS, arith_task, families_for


def _eval(expr: str) -> Fraction:
    """Independent check of an arith prompt: Python arithmetic over Fractions."""
    assert re.fullmatch(r"[\d\s+\-*/()X.]*", expr), expr
    return eval(re.sub(r"\d+", lambda m: f"Fraction({m.group()})", expr), {"Fraction": Fraction})


def _check_answer(task) -> None:
    answer = Fraction(task.answer)
    assert str(answer) == task.answer  # canonical: "7", "-3/4"
    prompt = task.prompt.split(" Give the exact answer")[0]
    if task.metadata["family"] == "linear":
        lhs, rhs = re.fullmatch(r"Solve for x: (.+) = (.+)\.", prompt).groups()

        def at(side: str, x: Fraction) -> Fraction:
            side = re.sub(r"(?<=[\d)])x", "*X", side).replace("x", "X")
            return eval(
                re.sub(r"\d+", lambda m: f"Fraction({m.group()})", side),
                {"Fraction": Fraction, "X": x},
            )

        assert at(lhs, answer) == at(rhs, answer)
        assert at(lhs, answer + 1) != at(rhs, answer + 1)  # a unique solution
    else:
        assert _eval(re.fullmatch(r"Compute (.+)\.", prompt).group(1)) == answer


@pytest.mark.parametrize("level", [*LEVELS, None])
def test_answers_are_exact(level):
    for split in ("train", "test"):
        ds = tasks.load("arith", split, size=150, seed=7, level=level)
        for t in ds:
            _check_answer(t)
            assert t.metadata["level"] == (level or t.metadata["level"]) and t.metadata[
                "family"
            ] in families_for(t.metadata["level"])


def test_every_family_and_level_appears():
    ds = tasks.load("arith", "test", size=400, seed=1)
    seen = {(t.metadata["level"], t.metadata["family"]) for t in ds}
    assert seen == {(lvl, f) for lvl in MIXED_LEVELS for f in families_for(lvl)}


def test_determinism_and_per_item_independence():
    ds = tasks.load("arith", "train", size=60, seed=5, level=3)
    again = tasks.load("arith", "train", size=60, seed=5, level=3, cache=False)
    assert ds.tasks == again.tasks and ds.hash == again.hash
    # Item i alone equals item i of any dataset that contains it.
    assert arith_task("train", 5, 41, 3) == ds[41]
    bigger = tasks.load("arith", "train", size=100, seed=5, level=3)
    assert bigger.tasks[:60] == ds.tasks
    assert ds[41].id == "arith/train/s5/L3/000041"
    assert tasks.load("arith", "test", size=3).ids == (
        "arith/test/s0/mix/000000",
        "arith/test/s0/mix/000001",
        "arith/test/s0/mix/000002",
    )


def test_seeds_and_splits_differ():
    a = tasks.load("arith", "test", size=200, seed=0)
    b = tasks.load("arith", "test", size=200, seed=1)
    assert a.hash != b.hash
    assert (
        sum(x.prompt == y.prompt for x, y in zip(a, b)) < 40
    )  # only tiny level-1 spaces may repeat


def test_train_and_test_never_share_a_problem():
    train = {t.prompt for t in tasks.load("arith", "train", size=3000, seed=0, level=1)}
    for seed in (0, 1):
        test = {t.prompt for t in tasks.load("arith", "test", size=1000, seed=seed, level=1)}
        assert not train & test


def test_defaults_and_bad_arguments():
    ds = tasks.load("arith")
    assert (ds.split, len(ds), ds.kind) == ("test", 1000, "math")
    assert ds.source == "generated:arith?seed=0&level=mix&size=1000"
    assert len(tasks.load("arith", "test", size=0)) == 0
    with pytest.raises(ValueError, match="level must be one of"):
        tasks.load("arith", level=6)
    with pytest.raises(ValueError, match="size must be an int >= 0"):
        tasks.load("arith", size=-1)
    with pytest.raises(ValueError, match="split must be one of"):
        arith_task("dev", 0, 0)
    with pytest.raises(ValueError, match="index an int >= 0"):
        arith_task("test", 0, -1)


def test_level_0_sums_are_distinct_per_split_and_disjoint():
    train, test = (tasks.load("arith", s, seed=3, level=0) for s in ("train", "test"))
    every = {f"Compute {a} + {b}." for a in SUM_OPERANDS for b in SUM_OPERANDS}
    train_p, test_p = {t.prompt for t in train}, {t.prompt for t in test}
    assert train_p | test_p == every and not train_p & test_p
    n = len(test_p)
    assert len({t.prompt for t in test.tasks[:n]}) == n  # the first n items are n distinct sums
    assert test[n].prompt == test[0].prompt  # then the order cycles
    assert arith_task("test", 3, 17, 0) == test[17] and test[17].id == "arith/test/s3/L0/000017"
    other = tasks.load("arith", "test", seed=4, level=0)
    assert [t.prompt for t in other.tasks[:20]] != [t.prompt for t in test.tasks[:20]]
    assert all(t.metadata["family"] == "sum" for t in test)
