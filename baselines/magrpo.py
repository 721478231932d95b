"""``python -m baselines.magrpo``: MAGRPO: no critic; K joint episodes per problem,
group-relative advantages on the team reward; one LoRA adapter per agent."""

from .cli import method_main

main = method_main("magrpo")

if __name__ == "__main__":
    raise SystemExit(main())
