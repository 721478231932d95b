"""Sandboxes that run untrusted Python programs: docker, bwrap, subprocess (see docs/sandbox.md)."""

from .base import ExecResult, ExecStatus, Sandbox, SandboxLimits
from .select import available_backends, get_sandbox

__all__ = [
    "ExecResult",
    "ExecStatus",
    "Sandbox",
    "SandboxLimits",
    "available_backends",
    "get_sandbox",
]
