"""The ``code`` dataset: 20 hand-written Python tasks that need no data (tests and demos).

15 function tasks (``assert`` tests; the first two are public) and 5 stdin/stdout tasks (the
first test is public). ``REFERENCE_SOLUTIONS`` holds a correct program per task id, used by
the test suite to prove every task is solvable; it is not part of the task records.
"""

from __future__ import annotations

from pathlib import Path

from tasks.dataset import Loaded, register_dataset
from tasks.record import IOTest, Task

__all__ = ["CODE_TASKS", "REFERENCE_SOLUTIONS", "code_task_set"]

# (id, signature + description, tests, reference solution)
_FUNCTIONS: list[tuple[str, str, list[str], str]] = [
    (
        "add",
        "def add(a: int, b: int) -> int:\n    Return the sum of a and b.",
        [
            "assert add(2, 3) == 5",
            "assert add(-1, 1) == 0",
            "assert add(0, 0) == 0",
            "assert add(10**20, 1) == 10**20 + 1",
        ],
        "def add(a, b):\n    return a + b\n",
    ),
    (
        "reverse_words",
        (
            "def reverse_words(s: str) -> str:\n"
            "    Return the words of s in reverse order, joined by single spaces."
        ),
        [
            "assert reverse_words('hello world') == 'world hello'",
            "assert reverse_words('a') == 'a'",
            "assert reverse_words('  one   two  three ') == 'three two one'",
            "assert reverse_words('') == ''",
        ],
        "def reverse_words(s):\n    return ' '.join(reversed(s.split()))\n",
    ),
    (
        "is_palindrome",
        (
            "def is_palindrome(s: str) -> bool:\n"
            "    True if s reads the same backwards, ignoring case and non-alphanumeric "
            "characters."
        ),
        [
            "assert is_palindrome('A man, a plan, a canal: Panama') is True",
            "assert is_palindrome('abc') is False",
            "assert is_palindrome('') is True",
            "assert is_palindrome('No lemon, no melon') is True",
            "assert is_palindrome('ab') is False",
        ],
        (
            "def is_palindrome(s):\n"
            "    t = [c.lower() for c in s if c.isalnum()]\n"
            "    return t == t[::-1]\n"
        ),
    ),
    (
        "fizzbuzz",
        (
            "def fizzbuzz(n: int) -> list[str]:\n"
            "    The FizzBuzz sequence from 1 to n: 'Fizz' for multiples of 3, 'Buzz' for "
            "multiples of 5, 'FizzBuzz' for both, else the number as a string."
        ),
        [
            "assert fizzbuzz(5) == ['1', '2', 'Fizz', '4', 'Buzz']",
            "assert fizzbuzz(0) == []",
            "assert fizzbuzz(15)[-1] == 'FizzBuzz'",
            "assert len(fizzbuzz(100)) == 100",
            "assert fizzbuzz(3) == ['1', '2', 'Fizz']",
        ],
        (
            "def fizzbuzz(n):\n"
            "    out = []\n"
            "    for i in range(1, n + 1):\n"
            "        s = ('Fizz' if i % 3 == 0 else '') + ('Buzz' if i % 5 == 0 else '')\n"
            "        out.append(s or str(i))\n"
            "    return out\n"
        ),
    ),
    (
        "gcd",
        (
            "def gcd(a: int, b: int) -> int:\n"
            "    The greatest common divisor of two non-negative integers (gcd(0, 0) == 0)."
        ),
        [
            "assert gcd(12, 18) == 6",
            "assert gcd(7, 13) == 1",
            "assert gcd(0, 5) == 5",
            "assert gcd(0, 0) == 0",
            "assert gcd(2**40, 2**35 * 3) == 2**35",
        ],
        "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a\n",
    ),
    (
        "flatten",
        (
            "def flatten(xs: list) -> list:\n"
            "    Flatten arbitrarily nested lists into one flat list, keeping order."
        ),
        [
            "assert flatten([1, [2, [3, 4]], 5]) == [1, 2, 3, 4, 5]",
            "assert flatten([]) == []",
            "assert flatten([[[]]]) == []",
            "assert flatten([[1], [2], [[3]]]) == [1, 2, 3]",
        ],
        (
            "def flatten(xs):\n"
            "    out = []\n"
            "    for x in xs:\n"
            "        out.extend(flatten(x) if isinstance(x, list) else [x])\n"
            "    return out\n"
        ),
    ),
    (
        "word_count",
        (
            "def word_count(text: str) -> dict[str, int]:\n"
            "    Count the words of text (split on whitespace, lowercased)."
        ),
        [
            "assert word_count('a b a') == {'a': 2, 'b': 1}",
            "assert word_count('') == {}",
            "assert word_count('The the THE') == {'the': 3}",
            "assert word_count('x\\ny\\tx') == {'x': 2, 'y': 1}",
        ],
        (
            "def word_count(text):\n"
            "    d = {}\n"
            "    for w in text.lower().split():\n"
            "        d[w] = d.get(w, 0) + 1\n"
            "    return d\n"
        ),
    ),
    (
        "primes_up_to",
        "def primes_up_to(n: int) -> list[int]:\n    All primes p <= n in increasing order.",
        [
            "assert primes_up_to(10) == [2, 3, 5, 7]",
            "assert primes_up_to(1) == []",
            "assert primes_up_to(2) == [2]",
            "assert len(primes_up_to(1000)) == 168",
            "assert primes_up_to(30)[-1] == 29",
        ],
        (
            "def primes_up_to(n):\n"
            "    return [p for p in range(2, n + 1) if all(p % d for d in range(2, int(p ** 0.5) "
            "+ 1))]\n"
        ),
    ),
    (
        "two_sum",
        (
            "def two_sum(nums: list[int], target: int) -> tuple[int, int]:\n"
            "    Indices (i, j), i < j, of the two numbers that add up to target (exactly one "
            "pair does)."
        ),
        [
            "assert two_sum([2, 7, 11, 15], 9) == (0, 1)",
            "assert two_sum([3, 2, 4], 6) == (1, 2)",
            "assert two_sum([3, 3], 6) == (0, 1)",
            "assert two_sum([1, 5, 9, -2], 7) == (2, 3)",
        ],
        (
            "def two_sum(nums, target):\n"
            "    seen = {}\n"
            "    for j, x in enumerate(nums):\n"
            "        if target - x in seen:\n"
            "            return (seen[target - x], j)\n"
            "        seen[x] = j\n"
        ),
    ),
    (
        "mean",
        (
            "def mean(xs: list[float]) -> float:\n"
            "    The arithmetic mean of a non-empty list of numbers."
        ),
        [
            "assert abs(mean([1, 2, 3, 4]) - 2.5) < 1e-9",
            "assert mean([5]) == 5",
            "assert abs(mean([0.1, 0.2, 0.3]) - 0.2) < 1e-9",
            "assert abs(mean([-1, 1]) - 0.0) < 1e-9",
        ],
        "def mean(xs):\n    return sum(xs) / len(xs)\n",
    ),
    (
        "rle",
        (
            "def rle(s: str) -> list[tuple[str, int]]:\n"
            "    Run-length encoding: consecutive equal characters as (character, count) pairs."
        ),
        [
            "assert rle('aaabcc') == [('a', 3), ('b', 1), ('c', 2)]",
            "assert rle('') == []",
            "assert rle('z') == [('z', 1)]",
            "assert rle('abab') == [('a', 1), ('b', 1), ('a', 1), ('b', 1)]",
        ],
        (
            "def rle(s):\n"
            "    out = []\n"
            "    for c in s:\n"
            "        if out and out[-1][0] == c:\n"
            "            out[-1] = (c, out[-1][1] + 1)\n"
            "        else:\n"
            "            out.append((c, 1))\n"
            "    return out\n"
        ),
    ),
    (
        "unique_sorted",
        (
            "def unique_sorted(xs: list[int]) -> list[int]:\n"
            "    The distinct values of xs in increasing order."
        ),
        [
            "assert unique_sorted([3, 1, 3, 2]) == [1, 2, 3]",
            "assert unique_sorted([]) == []",
            "assert unique_sorted([5, 5, 5]) == [5]",
            "assert unique_sorted([-1, 10, -1, 0]) == [-1, 0, 10]",
        ],
        "def unique_sorted(xs):\n    return sorted(set(xs))\n",
    ),
    (
        "sort_in_place",
        (
            "def sort_in_place(xs: list[int]) -> None:\n"
            "    Sort the list xs in place in increasing order and return None."
        ),
        [
            "xs = [3, 1, 2]\nassert sort_in_place(xs) is None and xs == [1, 2, 3]",
            "ys = []\nsort_in_place(ys)\nassert ys == []",
            "zs = [5, -1, 5, 0]\nsort_in_place(zs)\nassert zs == [-1, 0, 5, 5]",
        ],
        "def sort_in_place(xs):\n    xs.sort()\n",
    ),
    (
        "collatz_steps",
        (
            "def collatz_steps(n: int) -> int:\n"
            "    The number of Collatz steps (n -> n/2 if even, 3n+1 if odd) to reach 1 from n "
            ">= 1."
        ),
        [
            "assert collatz_steps(1) == 0",
            "assert collatz_steps(6) == 8",
            "assert collatz_steps(27) == 111",
            "assert [collatz_steps(k) for k in range(1, 6)] == [0, 1, 7, 2, 5]",
        ],
        (
            "def collatz_steps(n):\n"
            "    k = 0\n"
            "    while n != 1:\n"
            "        n = n // 2 if n % 2 == 0 else 3 * n + 1\n"
            "        k += 1\n"
            "    return k\n"
        ),
    ),
    (
        "safe_div",
        "def safe_div(a: float, b: float) -> float:\n    a / b; raise ValueError when b is 0.",
        [
            "assert safe_div(6, 3) == 2",
            "assert safe_div(1, 4) == 0.25",
            (
                "try:\n"
                "    safe_div(1, 0)\n"
                "except ValueError:\n"
                "    pass\n"
                "else:\n"
                "    assert False, 'expected ValueError'"
            ),
        ],
        (
            "def safe_div(a, b):\n"
            "    if b == 0:\n"
            "        raise ValueError('division by zero')\n"
            "    return a / b\n"
        ),
    ),
]

# (id, statement, [(stdin, stdout)], reference solution)
_STDIO: list[tuple[str, str, list[tuple[str, str]], str]] = [
    (
        "sum_two",
        "Read two integers a and b from one line of standard input and print a + b.",
        [("1 2\n", "3\n"), ("-5 5\n", "0\n"), ("1000000000000 1\n", "1000000000001\n")],
        "a, b = map(int, input().split())\nprint(a + b)\n",
    ),
    (
        "max_of_list",
        "The first line holds n; the second line holds n integers. Print the largest.",
        [("3\n1 9 4\n", "9\n"), ("1\n-7\n", "-7\n"), ("5\n5 4 3 2 1\n", "5\n")],
        "input()\nprint(max(map(int, input().split())))\n",
    ),
    (
        "count_vowels",
        "Read one line of text and print how many vowels (a, e, i, o, u, either case) it contains.",
        [("hello world\n", "3\n"), ("xyz\n", "0\n"), ("AEIOU aeiou\n", "10\n")],
        "print(sum(c in 'aeiouAEIOU' for c in input()))\n",
    ),
    (
        "sort_numbers",
        (
            "The first line holds n; the next n lines hold one integer each. Print them sorted "
            "increasingly, space-separated, on one line."
        ),
        [("3\n3\n1\n2\n", "1 2 3\n"), ("1\n42\n", "42\n"), ("4\n0\n-1\n10\n-1\n", "-1 -1 0 10\n")],
        "import sys\nd = sys.stdin.read().split()\nprint(*sorted(map(int, d[1:1 + int(d[0])])))\n",
    ),
    (
        "triangle",
        "Read n and print a right triangle of n rows of '*': row i (1-based) has i stars.",
        [("3\n", "*\n**\n***\n"), ("1\n", "*\n"), ("4\n", "*\n**\n***\n****\n")],
        "n = int(input())\nfor i in range(1, n + 1):\n    print('*' * i)\n",
    ),
]


def _function_task(task_id: str, spec: str, tests: list[str]) -> Task:
    name = spec.split("(", 1)[0].removeprefix("def ").strip()
    prompt = (
        f"Write a Python function `{name}`.\n\n{spec}\n\nFor example, this must hold:\n{tests[0]}"
    )
    return Task(
        id=f"code/{task_id}",
        kind="code",
        prompt=prompt,
        entry_point=name,
        tests=tuple(tests),
        public_tests=tuple(tests[:2]),
        metadata={"source": "code", "split": "test"},
    )


def _stdio_task(task_id: str, statement: str, pairs: list[tuple[str, str]]) -> Task:
    example = pairs[0]
    prompt = (
        "Write a Python program that reads standard input and writes standard output.\n\n"
        f"{statement}\n\nExample input:\n{example[0]}\nExample output:\n{example[1]}"
    )
    return Task(
        id=f"code/{task_id}",
        kind="code",
        prompt=prompt,
        entry_point=None,
        io_tests=tuple(IOTest(i, o) for i, o in pairs),
        metadata={"source": "code", "split": "test", "public_io_tests": 1},
    )


#: The 20 tasks of the ``code`` dataset.
CODE_TASKS: tuple[Task, ...] = tuple(
    [_function_task(i, s, t) for i, s, t, _ in _FUNCTIONS]
    + [_stdio_task(i, s, p) for i, s, p, _ in _STDIO]
)
#: task id -> a correct program.
REFERENCE_SOLUTIONS: dict[str, str] = {f"code/{i}": sol for i, *_, sol in _FUNCTIONS + _STDIO}


def code_task_set(split: str, data_dir: Path | None = None) -> Loaded:
    """The ``code`` dataset loader (one split, ``test``)."""
    return Loaded(CODE_TASKS, "generated:code")


register_dataset(
    "code",
    code_task_set,
    splits=("test",),
    kind="code",
    needs_data=False,
    description="20 hand-written Python tasks (15 functions, 5 stdin/stdout); no data needed",
)
