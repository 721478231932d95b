"""TRL's GRPOTrainer trains one seat of a team through the bridge (tiny random model, CPU)."""

import pytest

pytest.importorskip("trl")
pytest.importorskip("openenv")

import torch
from trl import GRPOConfig, GRPOTrainer

import marft_envs
from baselines.core.models import build_char_tokenizer, build_tiny_model
from marft_envs.serve.testing import running_server
from marft_envs.trl_bridge import (
    TOOL_CAPABLE_CHATML,
    SeatEnvironment,
    completion_text,
    seat_dataset,
    seat_environment_factory,
    seat_reward,
)
from marft_envs.wrappers import SingleSeat

# Seeds of arith-3agent whose answer is one digit: a one-token completion from a digits-only
# vocabulary is then right about a tenth of the time, so GRPO groups have rewards to compare.
ONE_DIGIT_SEEDS = [1, 2, 9, 10]


def tiny():
    tokenizer = build_char_tokenizer(alphabet="0123456789", drop_unknown=True)
    tokenizer.chat_template = TOOL_CAPABLE_CHATML  # TRL wants tool-call rendering
    tokenizer.padding_side = "left"
    return build_tiny_model(tokenizer), tokenizer


def grpo_args(tmp_path):
    return GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=16,
        num_generations=16,
        max_completion_length=1,
        learning_rate=1e-2,
        use_cpu=True,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        bf16=False,
        seed=0,
    )


def replayed_reward(seed, text):
    """The reward of ``text`` as verifier_2's action, played in this process from scratch."""
    env = SingleSeat("arith-3agent", seat="verifier_2", others="oracle")
    env.reset(seed=seed)
    return env.step(text)[1]


@pytest.mark.parametrize("where", ["in-process", "server"])
def test_grpo_trains_one_seat_for_two_steps(tmp_path, where):
    model, tokenizer = tiny()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rows = seat_dataset("arith-3agent", "verifier_2", n=len(ONE_DIGIT_SEEDS))
    rows = rows.map(lambda row, i: {"seed": ONE_DIGIT_SEEDS[i]}, with_indices=True)
    played = []

    def seat_reward_recorded(completions, environments, seed, **kwargs):
        rewards = seat_reward(completions, environments)
        played.extend(zip(seed, map(completion_text, completions), rewards))
        return rewards

    def train(url=None):
        factory = seat_environment_factory("arith-3agent", "verifier_2", others="oracle", url=url)
        made = []

        def recording_factory():
            made.append(factory())
            return made[-1]

        trainer = GRPOTrainer(
            model=model,
            args=grpo_args(tmp_path),
            reward_funcs=seat_reward_recorded,
            train_dataset=rows,
            processing_class=tokenizer,
            environment_factory=recording_factory,
        )
        trainer.train()
        for env in made:  # close the server sessions before the server
            env.episode.close()
        return trainer

    if where == "in-process":
        trainer = train()
    else:
        with running_server("arith-3agent", max_sessions=40) as url:
            trainer = train(url)
    assert trainer.state.global_step == 2 and len(played) == 32
    # Every reward GRPO saw is the environment's verdict on that very completion.
    assert all(reward == replayed_reward(seed, text) for seed, text, reward in played)
    assert {r for _, _, r in played} == {0.0, 1.0}
    # Rewards that differ within a group give a non-zero advantage, hence an update.
    assert any(not torch.equal(p.detach(), before[n]) for n, p in model.named_parameters())


def test_seat_environment_prompt_and_reward_match_the_team():
    env = SeatEnvironment("arith-3agent", "actor_1", others="echo")
    user = env.reset(seed=3)
    aec = marft_envs.make("arith-3agent")
    aec.reset(seed=3)
    aec.step("I am reasoner_0; I have no predecessor to build on.")
    messages = env.episode.messages
    assert messages == aec.unwrapped.messages("actor_1") and user == messages[-1]["content"]
    answer = aec.unwrapped.task.answer
    assert seat_reward([[{"role": "assistant", "content": f"\\boxed{{{answer}}}"}]], [env]) == [1.0]
    env.reset(seed=3)
    assert seat_reward(["\\boxed{nope}"], [env]) == [0.0]
    with pytest.raises(
        marft_envs.EnvOrderError,
        match=r"^the episode has ended: call reset\(\) before act\(\) \(the seat already acted\)$",
    ):
        env.episode.act("twice")
    with pytest.raises(ValueError, match="horizon 2"):
        SeatEnvironment("arith-3agent", "actor_1", others="echo", horizon=2)
    with pytest.raises(ValueError, match="seat 'judge_3' is not an agent"):
        seat_dataset("arith-3agent", "judge_3", n=2)


def test_the_example_defaults_give_the_seat_a_reward_its_action_decides():
    """GRPO learns only from rewards that differ within a group: the documented recipe must let
    the trained seat's completion decide its reward (an oracle answerer after it would not)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo_seat.py"
    module_spec = importlib.util.spec_from_file_location("trl_grpo_seat_example", path)
    example = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(example)
    args = example.build_parser().parse_args([])
    for seed in range(3):
        team = marft_envs.make(args.env)
        team.reset(seed=seed)
        answer = team.unwrapped.task.answer
        env = SeatEnvironment(args.env, args.seat, args.others)
        env.reset(seed=seed)
        right = seat_reward([f"\\boxed{{{answer}}}"], [env])
        env.reset(seed=seed)
        wrong = seat_reward(["\\boxed{not a number}"], [env])
        assert (right, wrong) == ([1.0], [0.0]), (seed, args.others)
