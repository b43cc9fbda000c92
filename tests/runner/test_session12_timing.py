"""Runner chunks carry the timing their steps recorded one by one would have (contract §5.3).

``EnvRunner.sample()`` reads the clock once per vector step; each chunk gets ``start_time`` (its
reset observation's time when it starts its episode, else its first step's, as after ``cut``)
and ``last_step_time`` (its last step's). With a clock that counts the env's vector steps, the
times are exact and compared with the per-step reference runner (``PerStepRunner``, which
records through ``add_env_reset``/``add_env_step``, as RLlib's runner does).
"""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import episodes.episode.recording as episode_recording
import episodes.runner.device_recorder as device_recorder
import episodes.runner.recorder as recorder
from episodes.runner import EnvRunner
from tests.runner._random_env import EnvSpec, Policy, make_vec
from tests.runner._tensor_env import TensorPolicy, TensorVectorEnv
from tests.runner.per_step_runner import PerStepRunner

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
# (env kind, autoreset mode, window): torch envs are recorded in next-step and same-step modes.
CASES = [
    (kind, mode, window)
    for kind in ("numpy", "torch")
    for mode in ("NextStep", "SameStep", "Disabled")
    for window in ("transitions", "vector_steps")
    if not (kind == "torch" and mode == "Disabled")
] + [pytest.param("cuda", mode, "transitions", marks=CUDA) for mode in ("NextStep", "SameStep")]
ENV_SPEC = EnvSpec("box", "discrete", 0.15, 0.1, 0.3)
SIZES = [5, 2, 7, 3, 12, 2]


class StepClock:
    """A clock reading the number of vector steps the env took so far (exact times)."""

    def __init__(self) -> None:
        self.steps = 0

    def __call__(self) -> float:
        return float(self.steps)

    def counting(self, env: Any) -> Any:
        step = env.step

        def counted(actions: Any) -> Any:
            self.steps += 1
            return step(actions)

        env.step = counted
        return env


def make_runner(kind: str, mode: str, window: str, clock: StepClock | None = None) -> EnvRunner:
    env = make_vec(ENV_SPEC, 3, mode)
    if clock is not None:
        clock.counting(env)
    policy = Policy(env.single_action_space, recurrent=False)
    if kind != "numpy":
        device = "cpu" if kind == "torch" else kind
        env, policy = TensorVectorEnv(env, device), TensorPolicy(policy, device)
    return EnvRunner(env, policy, seed=3, len_lookback_buffer=2, window=window)


def sampled(runner: Any) -> list[list[Any]]:
    return [list(runner.sample(size)) for size in SIZES]


@pytest.fixture
def step_clocks(monkeypatch) -> tuple[StepClock, StepClock]:
    """(the batched runner's clock, the per-step runner's), patched in where they are read."""
    batched, per_step = StepClock(), StepClock()
    monkeypatch.setattr(recorder, "now", batched, raising=False)
    monkeypatch.setattr(device_recorder, "now", batched, raising=False)
    monkeypatch.setattr(episode_recording, "_now", per_step)
    return batched, per_step


@pytest.mark.parametrize(("kind", "mode", "window"), CASES)
def test_chunks_of_two_steps_or_more_have_a_duration(kind, mode, window):
    calls = sampled(make_runner(kind, mode, window))
    chunks = [chunk for call in calls for chunk in call]
    assert any(len(chunk) >= 2 for chunk in chunks)
    for chunk in chunks:
        state = chunk.get_state()
        assert state["start_time"] is not None and state["last_step_time"] is not None
        assert state["start_time"] <= state["last_step_time"]
        if len(chunk) >= 2:
            assert chunk.get_duration_s() > 0, chunk


@pytest.mark.parametrize(("kind", "mode", "window"), CASES)
def test_times_follow_the_per_step_rules(kind, mode, window, step_clocks):
    clock, _ = step_clocks
    runner = make_runner(kind, mode, window, clock)
    by_id: dict[str, list[Any]] = {}
    for call in sampled(runner):
        for chunk in call:
            # Vector step k is read as k: a chunk starting its episode spans its reset (the
            # step before its first) to its last step, a continuing one its own steps.
            starts = chunk.t_started == 0
            assert chunk.get_duration_s() == len(chunk) - 1 + starts, chunk
            by_id.setdefault(chunk.id_, []).append(chunk)
    for pieces in by_id.values():
        for before, after in zip(pieces, pieces[1:]):
            # Consecutive chunks of one episode: the next starts at the step after the last.
            assert after.t_started == before.t
            assert after.get_state()["start_time"] == before.get_state()["last_step_time"] + 1
        joined = copy.deepcopy(pieces[0])
        for piece in pieces[1:]:
            joined.concat_episode(piece)
        # concat_episode keeps the first chunk's start and takes the last one's end.
        assert joined.get_state()["start_time"] == pieces[0].get_state()["start_time"]
        assert joined.get_state()["last_step_time"] == pieces[-1].get_state()["last_step_time"]


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
def test_times_equal_the_per_step_runners(mode, step_clocks):
    clock, reference_clock = step_clocks
    batched = make_runner("numpy", mode, "transitions", clock)
    env = reference_clock.counting(make_vec(ENV_SPEC, 3, mode))
    reference = PerStepRunner(
        env, Policy(env.single_action_space, recurrent=False), seed=3, len_lookback_buffer=2
    )
    compared = 0
    for size in SIZES:
        expected, got = reference.sample(size), batched.sample(size)
        assert [len(c) for c in expected] == [len(c) for c in got]
        for want, have in zip(expected, got):
            want_state, have_state = want.get_state(), have.get_state()
            if want_state["last_step_time"] is None:
                # The reference split a next-step chunk with slice(), which drops the clocks;
                # the batched chunk keeps its steps' times (test_times_follow_the_per_step_rules).
                assert mode == "NextStep"
                continue
            assert have_state["last_step_time"] == want_state["last_step_time"], (want, have)
            starts = want.t_started == 0
            if want.get_duration_s() != len(want) - 1 + starts:
                # Its carried part was a slice (no clock): its first step added after that
                # restarted it. Next-step mode only.
                assert mode == "NextStep"
                continue
            assert have_state["start_time"] == want_state["start_time"], (want, have)
            compared += 1
    assert compared > len(SIZES) * 3 // 2


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_times_survive_pickling(kind):
    runner = make_runner(kind, "NextStep", "transitions")
    runner.sample(6)
    chunks = runner.sample(6)  # appended to the first call's blocks: compacted when pickled
    copied = pickle.loads(pickle.dumps(chunks))
    for mine, theirs in zip(chunks, copied):
        assert theirs.get_state()["start_time"] == mine.get_state()["start_time"] is not None
        assert theirs.get_duration_s() == mine.get_duration_s()


def test_a_dataset_of_runner_chunks_has_wall_times(tmp_path):
    pytest.importorskip("pyarrow")
    from episodes.io import DatasetWriter

    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    runner = EnvRunner(env, lambda obs: (np.zeros(len(obs), np.int64), {}), seed=0)
    with DatasetWriter(tmp_path / "ds") as writer:
        for _ in range(2):
            writer.write_many(runner.sample(8))
    entries = [
        entry
        for index in sorted((tmp_path / "ds" / "shards").glob("*.json"))
        for entry in json.loads(index.read_text())["episodes"]
    ]
    assert entries
    for entry in entries:
        assert entry["wall_start"] is not None and entry["wall_end"] is not None
        assert entry["wall_start"] > 1e9 and entry["wall_end"] > entry["wall_start"]
