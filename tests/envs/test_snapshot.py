"""Branching: ``env.snapshot()`` / ``env.restore()`` determinism and isolation, vector branches."""

import pytest

import marft_envs
from marft_envs import EnvSnapshot, make_vec


def _play_round(env, actions):
    """Step one action per agent; return what each step left: observation of the next agent,
    rewards, infos, terminations (copied, so later steps cannot change the record)."""
    out = []
    for action in actions:
        env.step(action)
        nxt = env.agent_selection
        out.append(
            (
                nxt,
                env.observe(nxt) if env.agents else None,
                dict(env.rewards),
                {a: dict(i) for a, i in env.infos.items()},
                dict(env.terminations),
                env.state(),
            )
        )
    return out


def test_same_snapshot_same_actions_give_same_observations_rewards_infos():
    env = marft_envs.make("arith-3agent", horizon=2, feedback="verdict")
    env.reset(seed=3)
    env.step("I think it is 5")  # mid-round snapshot: a predecessor's message is in the state
    snap = env.snapshot()
    actions = ["\\boxed{1}", "\\boxed{2}", "a", "b", "\\boxed{3}"]
    first = _play_round(env, actions)
    env.restore(snap)
    second = _play_round(env, actions)
    assert first == second
    # another instance of the same id restored from the snapshot plays the same
    other = marft_envs.make("arith-3agent", horizon=2, feedback="verdict")
    other.reset(seed=99)
    other.restore(snap)
    assert _play_round(other, actions) == first
    assert other.episode().turns == env.episode().turns


def test_branches_never_share_mutable_state():
    env = marft_envs.make("arith-2agent")
    env.reset(seed=0)
    env.step("hello")
    snap = env.snapshot()
    answer = env.task.answer
    env.step(f"\\boxed{{{answer}}}")  # branch A: right
    right = env.episode()
    env.restore(snap)
    assert env.episode().turns[-1].action == "hello" and len(env.episode().turns) == 1
    assert env.agent_selection == env.possible_agents[1]
    env.step("\\boxed{not a number}")  # branch B: wrong
    wrong = env.episode()
    assert right.correct and right.turns[-1].reward == 1.0
    assert not wrong.correct and wrong.turns[-1].reward == 0.0
    assert right.turns[0].reward == 1.0  # branch B's grading did not touch branch A's turns
    # the snapshot itself is unchanged by both branches: restoring it again starts afresh
    env.restore(snap)
    assert len(env.episode().turns) == 1 and env.episode().verdicts == []
    assert env.rewards == dict.fromkeys(env.possible_agents, 0.0)


def test_restore_refuses_other_envs_and_other_objects():
    env = marft_envs.make("arith-2agent")
    with pytest.raises(RuntimeError, match="before reset"):
        env.snapshot()
    env.reset(seed=0)
    snap = env.snapshot()
    assert isinstance(snap, EnvSnapshot)
    other = marft_envs.make("arith-3agent")
    other.reset(seed=0)
    with pytest.raises(ValueError, match="arith-2agent"):
        other.restore(snap)
    with pytest.raises(TypeError, match="EnvSnapshot"):
        env.restore({"round": 0})


def test_code_branches_do_not_leak_verdicts():
    """A code env's branches are graded independently: one branch's passing program does not
    make a sibling's failing one pass (no verdict cached in the env or the verifier)."""
    from tasks.code_tasks import REFERENCE_SOLUTIONS

    env = marft_envs.make("code-2agent", sandbox="subprocess")
    env.reset(seed=0, options={"task_id": "code/add"})
    env.step("plan: add them")
    snap = env.snapshot()
    good = f"```python\n{REFERENCE_SOLUTIONS['code/add']}```"
    bad = "```python\ndef add(a, b):\n    return 0\n```"
    verdicts = []
    for program in (good, bad, good):
        env.restore(snap)
        env.step(program)
        verdicts.append(env.episode().verdicts[-1])
    assert [v["correct"] for v in verdicts] == [True, False, True]
    assert verdicts[0]["score"] == verdicts[2]["score"] == 1.0 and verdicts[1]["score"] < 1.0
    env.close()


def test_vector_env_plays_k_branches_of_one_problem_in_one_batch():
    venv = make_vec("arith-2agent", num_envs=3, seed=0)
    venv.reset(seed=0)
    venv.step(venv.next_batch(), ["x", "y", "z"])
    snap = venv.snapshot(0)
    for i in range(3):
        venv.restore(i, snap)
    batch = venv.next_batch()
    assert batch.env_indices == [0, 1, 2]
    assert batch.messages[0] == batch.messages[1] == batch.messages[2]  # identical prompts
    task = venv.envs[0].task
    finished = venv.step(batch, [f"\\boxed{{{task.answer}}}", "no", "\\boxed{-123456789}"])
    assert [e.correct for e in finished] == [True, False, False]
    assert [e.task_id for e in finished] == [task.id] * 3
    assert all(e.turns[0].action == "x" for e in finished)
