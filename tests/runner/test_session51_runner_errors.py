"""``sample``'s refusal of too few steps says why where the window is the reason."""

from __future__ import annotations

import gymnasium as gym
import pytest

from episodes.runner import EnvRunner, RandomPolicy


def _runner(window: str, mode: gym.vector.AutoresetMode) -> EnvRunner:
    env = gym.make_vec(
        "CartPole-v1", 2, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}
    )
    return EnvRunner(env, RandomPolicy(env.action_space, seed=0), window=window, seed=0)


NEXT, SAME = gym.vector.AutoresetMode.NEXT_STEP, gym.vector.AutoresetMode.SAME_STEP
CASES = {
    # name: (window, autoreset mode, num_steps, words the error has, words it lacks)
    "vector steps of a next-step env, 1": ("vector_steps", NEXT, 1, "window='vector_steps'", None),
    "vector steps of a next-step env, 0": ("vector_steps", NEXT, 0, "int >= 2, got 0", None),
    "default window, 0": ("transitions", NEXT, 0, "int >= 1, got 0", "vector_steps"),
    "vector steps of a same-step env, 0": ("vector_steps", SAME, 0, "int >= 1", "vector_steps"),
}


@pytest.mark.parametrize(("window", "mode", "steps", "said", "unsaid"), CASES.values(), ids=CASES)
def test_too_few_steps_are_refused_with_the_reason(
    window: str, mode: gym.vector.AutoresetMode, steps: int, said: str, unsaid: str | None
) -> None:
    runner = _runner(window, mode)
    with pytest.raises(ValueError, match="num_steps must be an int") as caught:
        runner.sample(steps)
    assert said in str(caught.value)
    assert unsaid is None or unsaid not in str(caught.value)
    assert sum(len(c) for c in runner.sample(2)) > 0  # the refusal left the runner usable


def test_one_vector_step_of_a_same_step_env_is_taken() -> None:
    chunks = _runner("vector_steps", SAME).sample(1)
    assert sum(len(c) for c in chunks) == 2  # same-step mode records a transition every step
