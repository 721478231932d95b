"""The error every view of an environment raises when it is used out of order.

PettingZoo's ``OrderEnforcingWrapper`` and Gymnasium's ``OrderEnforcing`` answer ``step()`` before
``reset()`` with a message saying what to call first; the Flex-MG environment, the vector
environment, the single-seat and Parallel views and the served environment do the same, with one
type and one message per misuse:

    step() called before reset(): call reset(seed=...) first
    the episode has ended: call reset() before step()
"""

from __future__ import annotations

__all__ = ["EnvOrderError", "require_episode"]

_BEFORE_RESET = "() called before reset(): call reset(seed=...) first"
_ENDED = "the episode has ended: call reset() before "


class EnvOrderError(RuntimeError):
    """A method was called out of order: before ``reset()``, or after the episode ended.

    The message is one line naming what to call. A served environment sends that line to its
    client, and :class:`marft_envs.serve.MarftEnvClient` raises this type again with it.
    """

    @staticmethod
    def is_order_message(message: str) -> bool:
        """Whether ``message`` is one :func:`require_episode` writes (how a client recognises the
        line a server sent for this error)."""
        method, sep, rest = message.partition(_BEFORE_RESET)
        if sep:
            return not rest and method.isidentifier()
        return message.startswith(_ENDED)


def require_episode(method: str, *, has_reset: bool, ended: bool = False, hint: str = "") -> None:
    """Raise :class:`EnvOrderError` unless ``method`` may run: ``reset()`` was called and, when
    ``method`` needs a running episode, the episode has not ``ended``. ``hint`` is appended to the
    ended message (e.g. what PettingZoo allows on a finished agent)."""
    if not has_reset:
        raise EnvOrderError(f"{method}{_BEFORE_RESET}")
    if ended:
        raise EnvOrderError(f"{_ENDED}{method}(){hint}")
