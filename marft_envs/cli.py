"""The ``marft-envs`` command: list, show, play, check and serve environments."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console

from . import make, pprint_registry, spec
from .policies import POLICIES, get_policy, play_episode

console = Console()


def _overrides(pairs: list[str]) -> dict[str, Any]:
    """``key=value`` pairs; values parsed as JSON when possible (numbers, booleans), else
    strings."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"error: override {pair!r} is not of the form key=value")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def cmd_list(args: argparse.Namespace) -> int:
    pprint_registry(console=console)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    s = spec(args.id)
    env = make(args.id, **_overrides(args.set))
    u = env.unwrapped
    console.print(f"[bold]{s.id}[/bold]  {s.description}")
    console.print(json.dumps(json.loads(s.to_json()), indent=2))
    console.print(
        f"dataset: {u.dataset.name}/{u.dataset.split}  tasks={len(u.dataset)}  "
        f"hash={u.dataset.hash}"
    )
    console.print(
        f"workflow: {u.workflow.name}  dependency matrix: {[list(r) for r in u.workflow.matrix]}"
    )
    for agent, role in zip(u.possible_agents, u.workflow.roles, strict=True):
        console.print(
            f"\n[bold]{agent}[/bold] (sees problem: {role.sees_problem})\n{role.instructions}"
        )
    env.close()
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    env = make(args.id, render_mode="ansi", **_overrides(args.set))
    options = {"task_id": args.task_id} if args.task_id else None
    episode = play_episode(env, get_policy(args.policy), seed=args.seed, options=options)
    console.print(
        f"[bold]{args.id}[/bold]  task {episode.task_id}  (policy: {args.policy})\n",
        highlight=False,
    )
    console.print(env.render(), markup=False, highlight=False)
    verdict = episode.verdicts[-1] if episode.verdicts else {}
    console.print(
        f"\n[bold]verdict[/bold]: correct={episode.correct} score={episode.score:.3g} "
        f"answer={verdict.get('answer')!r} reason={verdict.get('reason')} "
        f"reference={env.unwrapped.task.answer!r}",
        highlight=False,
    )
    console.print(f"returns: {episode.returns}", highlight=False)
    env.close()
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from .testing import check_env

    ids = args.ids
    failed = 0
    for env_id in ids:
        try:
            console.print(
                str(check_env(env_id, verbose=False, **_overrides(args.set))), highlight=False
            )
        except AssertionError as e:
            failed += 1
            console.print(f"[red]FAILED[/red] {e}", highlight=False)
    return 1 if failed else 0


def cmd_serve(args: argparse.Namespace) -> int:
    spec(args.id)  # an unknown id fails here, before the server's heavy imports
    try:
        from .serve import serve
    except ImportError as e:
        raise ValueError(str(e)) from None
    serve(
        args.id,
        host=args.host,
        port=args.port,
        max_sessions=args.max_sessions,
        session_timeout_s=args.session_timeout,
        **_overrides(args.set),
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="marft-envs", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the registry as a table").set_defaults(fn=cmd_list)
    for name, fn, help_ in (
        ("show", cmd_show, "an id's spec, roles and prompts"),
        ("play", cmd_play, "play an episode in the terminal"),
    ):
        sp = sub.add_parser(name, help=help_)
        sp.add_argument("id")
        sp.add_argument(
            "--set", nargs="*", default=[], metavar="KEY=VALUE", help="make() overrides"
        )
        sp.set_defaults(fn=fn)
        if name == "play":
            sp.add_argument(
                "--policy",
                default="human",
                choices=sorted(POLICIES),
                help="who plays every agent: you (human) or a scripted policy",
            )
            sp.add_argument("--seed", type=int, default=0)
            sp.add_argument("--task-id", default=None, help="pin a task by id")
    sp = sub.add_parser("check", help="run the conformance suite on one or more ids")
    sp.add_argument("ids", nargs="+")
    sp.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="make() overrides")
    sp.set_defaults(fn=cmd_check)
    sp = sub.add_parser(
        "serve", help="serve an id as an OpenEnv environment (needs the serve extra)"
    )
    sp.add_argument("id")
    sp.add_argument("--host", default="127.0.0.1", help="use 0.0.0.0 to accept other machines")
    sp.add_argument("--port", type=int, default=8000)
    sp.add_argument("--max-sessions", type=int, default=64, help="concurrent WebSocket sessions")
    sp.add_argument(
        "--session-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="close sessions idle this long (default: never)",
    )
    sp.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="make() overrides")
    sp.set_defaults(fn=cmd_serve)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except (KeyError, ValueError, TypeError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        console.print(f"[red]error:[/red] {msg}", highlight=False)
        return 2


if __name__ == "__main__":
    sys.exit(main())
