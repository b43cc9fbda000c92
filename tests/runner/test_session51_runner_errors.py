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


class _RaisesAtStep(gym.Wrapper):
    """A user's bug: the env raises at its fifth step."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.steps = 0

    def step(self, action):  # type: ignore[no-untyped-def]
        self.steps += 1
        if self.steps == 5:
            raise RuntimeError("a bug in the env's step")
        return self.env.step(action)


@pytest.mark.filterwarnings("ignore::UserWarning")  # gymnasium's report of the worker's error
def test_an_async_worker_shut_down_is_named_instead_of_advising_reset() -> None:
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="async", wrappers=[_RaisesAtStep])
    try:
        runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
        with pytest.raises(RuntimeError, match="a bug in the env's step"):
            runner.sample(10)
        for _ in range(2):  # before reset() (which the failure's message advised) and after
            with pytest.raises(RuntimeError, match=r"workers of sub-envs \[0, 1\] were shut down"):
                runner.sample(3)
            runner.reset()
    finally:
        env.close()


@pytest.mark.parametrize(
    ("pipes", "said"),
    [
        (["pipe", "pipe"], None),
        ([None, "pipe"], "the vector env's worker of sub-env 0 was shut down"),
        (["pipe", None, None], r"workers of sub-envs \[1, 2\] were shut down"),
    ],
    ids=["all alive", "one dead", "two dead"],
)
def test_dead_workers_are_read_from_the_pipes(pipes: list[object], said: str | None) -> None:
    from types import SimpleNamespace

    from episodes.runner.dead_workers import dead_workers, refuse_dead_workers

    env = SimpleNamespace(unwrapped=SimpleNamespace(parent_pipes=pipes))
    assert dead_workers(env) == [i for i, pipe in enumerate(pipes) if pipe is None]
    if said is None:
        refuse_dead_workers(env)
    else:
        with pytest.raises(RuntimeError, match=said):
            refuse_dead_workers(env)
