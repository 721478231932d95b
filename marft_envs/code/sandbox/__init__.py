"""Sandboxes that run untrusted Python programs: docker, bwrap, subprocess (see docs/sandbox.md)."""

from .base import ExecResult, ExecStatus, Sandbox, SandboxLike, SandboxLimits
from .select import BACKEND_NAMES, available_backends, get_sandbox, register_backend

__all__ = [
    "BACKEND_NAMES",
    "ExecResult",
    "ExecStatus",
    "Sandbox",
    "SandboxLike",
    "SandboxLimits",
    "available_backends",
    "get_sandbox",
    "register_backend",
]
