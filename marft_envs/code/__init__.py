"""Code environments: program extraction, sandboxes, the trusted test harness and `check`.

    from marft_envs.code import check, get_sandbox
    report = check(llm_response, task)              # sandbox chosen automatically
    report = check(llm_response, task, sandbox=get_sandbox("bwrap"), reward="all")
    report.outcome, report.passed, report.total, report.to_verdict()

Docker is imported only when a docker sandbox is created, so importing this package needs
no daemon. See docs/code_envs.md and docs/sandbox.md.
"""

from .check import (
    OUTCOMES,
    TestReport,
    build_program,
    check,
    default_sandbox,
    outputs_match,
    shared_sandbox,
)
from .extract import extract_program
from .harness import UnitResult, run_python_tests
from .sandbox import ExecResult, ExecStatus, Sandbox, SandboxLimits, available_backends, get_sandbox
from .verifier import CodeVerifier

__all__ = [
    "OUTCOMES",
    "CodeVerifier",
    "ExecResult",
    "ExecStatus",
    "Sandbox",
    "SandboxLimits",
    "TestReport",
    "UnitResult",
    "available_backends",
    "build_program",
    "check",
    "default_sandbox",
    "extract_program",
    "get_sandbox",
    "outputs_match",
    "run_python_tests",
    "shared_sandbox",
]
