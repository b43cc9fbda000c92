"""Calls append to the blocks while there is room: no per-call copy, nothing shared is written.

Next-step envs that reset less often than others keep recording while the unluckiest catch up;
those leftover rows grow like the square root of the number of calls. Copying them every call
made each call cost more than the last; once they outgrow a call's rows they are copied only
when the blocks run out of room, into blocks with room for them again.
"""

from __future__ import annotations

import copy
import pickle

import pytest
import torch

from episodes.converter import episodes_to_rollout
from episodes.runner import EnvRunner
from episodes.runner.blocks import Blocks
from tests.runner._random_env import EnvSpec, Policy, make_vec, value_fn
from tests.runner.test_batched_equals_per_step import KEYS


def make_runner(mode: str, num_envs: int = 16, lookback: int = 2) -> EnvRunner:
    env = make_vec(EnvSpec("box", "discrete", 0.05, 0.05, 0.3), num_envs, mode)
    return EnvRunner(
        env, Policy(env.single_action_space, False), len_lookback_buffer=lookback, seed=1
    )


def test_carried_rows_are_copied_about_once_per_call_at_most(monkeypatch):
    copied: list[int] = []
    successor = Blocks.successor

    def spy(self, first, stop, rows, *rest):
        copied.append(stop - first)
        return successor(self, first, stop, rows, *rest)

    monkeypatch.setattr(Blocks, "successor", spy)
    runner = make_runner("NextStep", num_envs=64, lookback=1)
    calls, num_steps = 300, 4
    for _ in range(calls):
        runner.sample(num_steps)
    room = num_steps + 2  # the next-step slack of a 4-step call
    carried = max(copied[-5:])
    # The leftover rows grew far past a call's rows (copying them every call, as before, would
    # copy that many rows per call), yet on average a call copied at most about a call's rows.
    assert carried > 5 * room, carried
    assert sum(copied) <= calls * room, (sum(copied), len(copied))


@pytest.mark.parametrize("mode", ["SameStep", "Disabled"])
def test_same_step_and_disabled_calls_carry_only_the_lookback(mode):
    runner = make_runner(mode, lookback=2)
    for _ in range(20):
        runner.sample(8)
        assert runner._recorder.row <= 2  # noqa: SLF001 - the rows the next call starts with


@pytest.mark.parametrize("warm_up", [0, 250])  # 250 calls: later calls append in place
def test_later_calls_never_change_earlier_chunks(warm_up):
    runner = make_runner("NextStep", num_envs=64, lookback=1)
    for _ in range(warm_up):
        runner.sample(4)
    kept, appended = [], 0
    for size in [3, 4, 1, 4, 4, 4, 2, 4, 4, 4, 4, 4]:
        chunks = runner.sample(size)
        if (
            kept
            and chunks.recording.blocks.rewards.base is kept[-1][0].recording.blocks.rewards.base
        ):
            appended += 1
        # Writes into the newest chunks (their lookback included) stay in those chunks.
        for chunk in chunks:
            if chunk.rewards.lookback:
                chunk.rewards.set(1e6, at_indices=-1, neg_index_as_lookback=True)
        kept.append((chunks, [copy.deepcopy(c) for c in chunks]))
    for chunks, snapshot in kept:
        assert list(chunks) == snapshot
    assert appended > 0 or not warm_up


def test_a_pickled_sample_carries_only_its_own_rows():
    runner = make_runner("NextStep", num_envs=64, lookback=1)
    for _ in range(400):  # until a call records into blocks that hold earlier calls' rows
        chunks = runner.sample(4)
        if chunks.recording.compact().blocks.step_rows < chunks.recording.blocks.step_rows:
            break
    else:
        pytest.fail("no call appended to earlier rows")
    data = pickle.dumps(chunks, protocol=5)
    back = pickle.loads(data)
    assert back.recording.blocks.step_rows < chunks.recording.blocks.step_rows
    kwargs = dict(gamma=0.9, value_fn=value_fn, keys=KEYS)
    want = episodes_to_rollout(chunks, **kwargs)
    got = episodes_to_rollout(back, **kwargs)
    assert back.built() == []
    for name, tensor in want.storage.tensors.items():
        assert torch.equal(got.storage.tensors[name], tensor), name
    assert list(back) == list(chunks)
    sent = len(pickle.dumps(back.recording.blocks, protocol=5))
    assert sent < len(pickle.dumps(chunks.recording.blocks, protocol=5))
