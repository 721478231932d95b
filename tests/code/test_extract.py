"""Program extraction from LLM responses."""

import pytest

from marft_envs.code.extract import defines, extract_program


def test_last_python_block_wins():
    text = "Plan:\n```python\ndef f():\n    return 1\n```\nFixed:\n```python\ndef f():\n    return 2\n```\nDone."
    assert extract_program(text) == "def f():\n    return 2\n"


def test_python_block_preferred_over_later_untagged_block():
    text = "```python\nx = 1\n```\nOutput:\n```\n1\n```"
    assert extract_program(text) == "x = 1\n"


@pytest.mark.parametrize("tag", ["py", "Python", "python3"])
def test_python_tag_variants(tag):
    assert extract_program(f"```{tag}\nprint(1)\n```") == "print(1)\n"


def test_untagged_block_fallback():
    assert extract_program("Here:\n```\ndef g(x):\n    return x\n```") == "def g(x):\n    return x\n"


def test_unterminated_block_is_taken_to_the_end():
    assert extract_program("```python\ndef f():\n    return 3") == "def f():\n    return 3"


def test_tilde_fences_and_indented_fences():
    assert extract_program("~~~python\na = 1\n~~~") == "a = 1\n"
    assert extract_program("1. code:\n   ```python\n   def f():\n       return 1\n   ```") == "def f():\n    return 1\n"


def test_bare_def_after_prose():
    text = "Sure! Here is the solution.\ndef f(x):\n    return x * 2\n"
    assert extract_program(text) == "def f(x):\n    return x * 2\n"


def test_bare_import_after_prose():
    assert extract_program("Use this:\nimport math\nprint(math.pi)") == "import math\nprint(math.pi)"


def test_whole_text_when_nothing_else():
    assert extract_program("x = 1\nprint(x)") == "x = 1\nprint(x)"


@pytest.mark.parametrize("junk", [None, 42, b"bytes", "", "\x00\ud800", ["list"]])
def test_never_raises(junk):
    assert isinstance(extract_program(junk), str)


def test_defines():
    assert defines("import os\ndef f(x):\n    return x", "f")
    assert defines("class f: pass", "f")
    assert defines("f = lambda x: x", "f")
    assert defines("from math import sqrt as f", "f")
    assert not defines("    return x + 1\n", "f")  # a body continuation
    assert not defines("def g():\n    def f(): pass", "f")  # nested, not top level
    assert defines("def f(:\n  broken", "f")  # syntax error: text search
    assert not defines("anything", None)
