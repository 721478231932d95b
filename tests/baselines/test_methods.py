"""Method lookup and the equal-compute sizing shared by the comparison benchmarks."""

import pytest

from baselines.methods import METHODS, equal_compute_overrides, preset_of


def test_preset_of_maps_shared_critic_free_variants_to_their_preset():
    assert preset_of("marft_shared") == "marft_shared"
    assert preset_of("ippo") == "ippo"
    assert preset_of("at_grpo_shared") == "at_grpo"
    assert preset_of("magrpo_shared") == "magrpo"
    with pytest.raises(ValueError, match="valid:"):
        preset_of("grpo")


@pytest.mark.parametrize("method", ["marft", "marft_shared", "ippo"])
def test_ppo_methods_keep_their_episodes(method):
    assert equal_compute_overrides(method, 32, 2) == ["train.episodes_per_iteration=32"]


def test_magrpo_plays_the_same_episodes_as_problems_times_k():
    # 32 episodes of 2 turns = 64 responses = 8 problems x K=4 episodes x 2 turns
    assert equal_compute_overrides("magrpo", 32, 2, 4) == [
        "algo.group_size=4",
        "train.episodes_per_iteration=32",
    ]


@pytest.mark.parametrize(
    ("episodes", "agents", "k", "problems"),
    [
        (32, 2, 4, 5),  # 64 responses; a problem costs K n (n + 1) / 2 = 12: 5 (60)
        (16, 3, 4, 2),  # 48 responses; a problem costs 24: 2 (48)
        (32, 4, 4, 3),  # 128 responses; a problem costs 40: 3 (120)
        (2, 3, 8, 1),  # fewer responses than one problem: at least one
    ],
)
def test_at_grpo_problems_match_the_ppo_responses(episodes, agents, k, problems):
    out = equal_compute_overrides("at_grpo_shared", episodes, agents, k)
    assert out == [f"algo.group_size={k}", f"train.episodes_per_iteration={problems * k}"]


def test_a_team_of_no_agents_is_an_error():
    # PettingZoo's env.num_agents is 0 before reset; passing it must not size silently
    with pytest.raises(ValueError, match="agents must be >= 1"):
        equal_compute_overrides("at_grpo", 32, 0)


def test_every_method_has_a_sizing():
    for name in METHODS:
        assert equal_compute_overrides(name, 32, 2)[-1].startswith("train.episodes_per_iteration=")
