"""Rendering what an agent sees: pure functions from the transcript to text and chat messages.

The environment, not the policy, decides what each agent sees; these functions are the single
place where that view is turned into text, so ``observe()["prompt"]``, ``messages()`` and
``render()`` always agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _block(entry: Mapping[str, Any]) -> str:
    return f"[{entry['agent']}]\n{entry['action']}"


def user_text(
    *,
    agent: str,
    role: str,
    problem: str,
    round_index: int,
    horizon: int,
    history: Sequence[Mapping[str, Any]],
    feedbacks: Sequence[str],
    predecessors: Sequence[Mapping[str, Any]],
) -> str:
    """The user-turn text for one agent: problem, earlier rounds, this round's visible actions."""
    parts: list[str] = []
    if problem:
        parts.append(f"## Problem\n{problem}")
    for r in range(round_index):
        lines = [_block(e) for e in history if e["round"] == r]
        if r < len(feedbacks) and feedbacks[r]:
            lines.append(feedbacks[r])
        parts.append(f"## Round {r + 1} of {horizon}\n" + "\n\n".join(lines))
    if predecessors:
        parts.append("## Teammates this round\n" + "\n\n".join(_block(p) for p in predecessors))
    parts.append(f"## Your turn\nYou are {agent} ({role}). Write your response.")
    return "\n\n".join(parts)


def chat_messages(
    instructions: str, user: str, examples: Sequence[tuple[str, str]] = ()
) -> list[dict[str, str]]:
    """System + user messages, ready for a tokenizer's chat template; each worked example
    ``(user text, reply)`` comes before the real user turn as a user and an assistant turn."""
    shown = [
        {"role": speaker, "content": text}
        for example in examples
        for speaker, text in zip(("user", "assistant"), example, strict=True)
    ]
    return [
        {"role": "system", "content": instructions},
        *shown,
        {"role": "user", "content": user},
    ]


def prompt_text(instructions: str, user: str, examples: Sequence[tuple[str, str]] = ()) -> str:
    """The single-string form of :func:`chat_messages`."""
    shown = "".join(f"## Example\n{u}\n\n## Example reply\n{a}\n\n" for u, a in examples)
    return f"{instructions}\n\n{shown}{user}"


def transcript_text(
    problem: str,
    history: Sequence[Mapping[str, Any]],
    feedbacks: Sequence[str],
    verdicts: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The whole episode so far as readable text (``state()`` and ``render()``)."""
    parts = [f"## Problem\n{problem}"]
    rounds = sorted({e["round"] for e in history})
    for r in rounds:
        lines = [_block(e) for e in history if e["round"] == r]
        if r < len(verdicts):
            v = verdicts[r]
            lines.append(
                f"Verdict: {'CORRECT' if v['correct'] else 'WRONG'} (answer={v['answer']!r}, "
                f"reason={v['reason']}, score={v['score']:.3g})"
            )
        if r < len(feedbacks) and feedbacks[r]:
            lines.append(feedbacks[r])
        parts.append(f"## Round {r + 1}\n" + "\n\n".join(lines))
    return "\n\n".join(parts)
