"""``EnvRunner(window="vector_steps")``: T vector steps per call, reset steps masked.

A runner recording vector steps and one recording transitions (the default) drive their own
copy of the same random vector env with the same seed and a deterministic policy, so they see
the same vector steps; only where the calls cut them differs. So every episode must come out
the same, and a vector-step window must hold exactly the call's steps: each sub-env's chunks
plus its reset steps fill the ``T`` rows. The converter must lay the window out as recorded,
reset steps masked, and give each chunk the advantages a chunk-per-column layout of the same
chunks gives.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_rollout
from episodes.runner import EnvRunner, RandomPolicy, SampledChunks
from tests.runner._random_env import EnvSpec, Policy, make_vec, obs_fn_for, value_fn
from tests.runner._runner_env import RewardOnResetEnv
from tests.runner._tensor_env import TensorPolicy, TensorVectorEnv, to_arrays
from tests.runner.test_batched_equals_per_step import (
    CASE_FIELDS,
    KEYS,
    assert_same_chunks,
    assert_same_storage,
)

cases = st.fixed_dictionaries(
    CASE_FIELDS | {"sizes": st.lists(st.integers(2, 9), min_size=1, max_size=4)}
)
GAMMA, LAM = 0.9, 0.8
SMALL_CASE = dict(
    obs="box",
    action="discrete",
    p_terminate=0.3,
    p_truncate=0.0,
    p_info=0.0,
    num_envs=2,
    mode="NextStep",
    lookback=1,
    recurrent=False,
    seed=3,
)


def make_runner(case: dict, window: str, on_device: bool = False) -> EnvRunner:
    spec = EnvSpec(
        case["obs"], case["action"], case["p_terminate"], case["p_truncate"], case["p_info"]
    )
    env = make_vec(spec, case["num_envs"], case["mode"])
    policy = Policy(env.single_action_space, case["recurrent"])
    return EnvRunner(
        TensorVectorEnv(env) if on_device else env,
        TensorPolicy(policy) if on_device else policy,
        len_lookback_buffer=case["lookback"],
        seed=case["seed"],
        numpy_episodes=case.get("numpy_episodes", True),
        window=window,
    )


def whole_episodes(calls: list[SampledChunks]) -> dict[str, SingleAgentEpisode]:
    """Every episode seen, its chunks concatenated, keyed by its number (the id's suffix)."""
    out: dict[str, SingleAgentEpisode] = {}
    for chunks in calls:
        for chunk in chunks:
            copy = SingleAgentEpisode.from_state(chunk.get_state())
            number = chunk.id_[-8:]
            if number in out:
                out[number].concat_episode(copy)
            else:
                out[number] = copy
    return out


def assert_same_prefix(a: SingleAgentEpisode, b: SingleAgentEpisode) -> None:
    length = min(len(a), len(b))
    assert a.t_started == b.t_started == 0
    for name in ("observations", "actions", "rewards"):
        for t in range(length):
            left = getattr(a, f"get_{name}")(t)
            right = getattr(b, f"get_{name}")(t)
            np.testing.assert_equal(to_arrays(left), to_arrays(right), err_msg=name)
    for key in a.extra_model_outputs:
        np.testing.assert_equal(
            a.get_extra_model_outputs(key)[:length], b.get_extra_model_outputs(key)[:length]
        )
    if len(a) == len(b) and a.is_done and b.is_done:
        assert (a.is_terminated, a.is_truncated) == (b.is_terminated, b.is_truncated)
        np.testing.assert_equal(
            to_arrays(a.get_observations(-1)), to_arrays(b.get_observations(-1))
        )


def check_window(chunks: SampledChunks, size: int) -> None:
    """Every sub-env's chunks and reset steps fill the call's ``size`` rows, in order."""
    recording = chunks.recording
    assert recording.aligned_start is not None
    dead = recording.dead_cells()
    dead = np.zeros((size, chunks.num_envs), bool) if dead is None else dead
    table = recording.table
    first = recording.aligned_start
    for env in range(chunks.num_envs):
        mine = np.flatnonzero(table.env == env)
        assert len(mine), "every sub-env holds a transition in a window of >= 2 steps"
        covered = np.zeros(size, int)
        for k in mine:
            covered[table.first[k] - first : table.stop[k] - first] += 1
        np.testing.assert_array_equal(covered, ~dead[:, env])


def assert_chunks_match_columns(chunks: SampledChunks, rollout) -> None:
    """Each chunk's steps are its env's valid cells, in order, with its advantages."""
    storage, mask = rollout.storage, rollout.mask
    assert storage.valid is mask
    first = chunks.recording.aligned_start
    reference = episodes_to_rollout(
        [SingleAgentEpisode.from_state(c.get_state()) for c in chunks],
        gamma=GAMMA,
        value_fn=value_fn,
        keys=KEYS,
        obs_fn=None,
        layout="per_chunk",
    )
    storage.compute_returns(rollout.last_values, GAMMA, LAM, normalize_advantage=False)
    reference.storage.compute_returns(reference.last_values, GAMMA, LAM, normalize_advantage=False)
    table = chunks.recording.table
    for k in range(len(chunks)):
        env, rows = int(table.env[k]), slice(table.first[k] - first, table.stop[k] - first)
        length = rows.stop - rows.start
        if mask is not None:
            assert bool(mask[rows, env].all())
        for name in ("actions", "values", "actions_log_prob"):
            got = getattr(storage, name)[rows, env]
            want = getattr(reference.storage, name)[:length, k]
            assert torch.equal(got, want), name
        for name in ("advantages", "returns"):
            got = getattr(storage, name)[rows, env]
            want = getattr(reference.storage, name)[:length, k]
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=name)
    if mask is not None:
        assert bool(storage.dones[~mask].all()) and float(storage.rewards[~mask].abs().sum()) == 0


@settings(deadline=None)
@given(case=cases)
def test_vector_steps_record_the_same_episodes_in_windows_of_the_call(case):
    default, vector = make_runner(case, "transitions"), make_runner(case, "vector_steps")
    default_calls, vector_calls = [], []
    for size in case["sizes"]:
        default_calls.append(default.sample(size))
        chunks = vector.sample(size)
        vector_calls.append(chunks)
        check_window(chunks, size)
        if case["mode"] != "NextStep":
            assert chunks.recording.dead_cells() is None
        obs_fn = obs_fn_for(case["obs"])
        rollout = episodes_to_rollout(
            chunks, gamma=GAMMA, value_fn=value_fn, keys=KEYS, obs_fn=obs_fn
        )
        assert chunks.built() == []
        if obs_fn is None:
            assert_chunks_match_columns(chunks, rollout)
    want, got = whole_episodes(default_calls), whole_episodes(vector_calls)
    shared = sorted(set(want) & set(got))
    assert shared and shared == sorted(want)[: len(shared)] == sorted(got)[: len(shared)]
    for number in shared:
        assert_same_prefix(want[number], got[number])


@settings(deadline=None)
@given(
    case=st.fixed_dictionaries(
        {k: v for k, v in CASE_FIELDS.items() if k != "numpy_episodes"}
        | {
            "mode": st.sampled_from(["NextStep", "SameStep"]),
            "sizes": st.lists(st.integers(2, 9), min_size=1, max_size=3),
        }
    )
)
def test_device_blocks_record_vector_steps_as_numpy_blocks_do(case):
    host, device = make_runner(case, "vector_steps"), make_runner(case, "vector_steps", True)
    obs_fn = obs_fn_for(case["obs"])
    tensor_obs_fn = None if obs_fn is None else lambda o: torch.from_numpy(obs_fn(to_arrays(o)))

    def tensor_value_fn(obs):
        return torch.from_numpy(value_fn(to_arrays(obs)))

    ids: dict[str, str] = {}
    for size in case["sizes"]:
        want_chunks, got_chunks = host.sample(size), device.sample(size)
        kwargs = dict(gamma=GAMMA, keys=KEYS)
        want = episodes_to_rollout(want_chunks, value_fn=value_fn, obs_fn=obs_fn, **kwargs)
        got = episodes_to_rollout(
            got_chunks, value_fn=tensor_value_fn, obs_fn=tensor_obs_fn, **kwargs
        )
        assert got_chunks.built() == []
        assert_same_storage(got, want)
        assert (want.mask is None) == (got.mask is None) or not bool((~got.mask).any())
        if want.mask is not None:
            assert torch.equal(got.mask, want.mask)
        assert_same_chunks(want_chunks, got_chunks, ids)


def test_a_changed_window_with_reset_steps_is_refused_not_misplaced():
    case = dict(SMALL_CASE)
    runner = make_runner(case, "vector_steps")
    chunks = runner.sample(12)
    assert chunks.recording.dead_cells() is not None
    chunks[0].set_rewards(new_data=5.0, at_indices=0)  # copies the column: the blocks miss it
    with pytest.raises(ValueError, match="vector steps"):
        episodes_to_rollout(chunks, gamma=0.9, value_fn=value_fn, keys=KEYS)
    rollout = episodes_to_rollout(
        chunks, gamma=0.9, value_fn=value_fn, keys=KEYS, layout="per_chunk"
    )
    assert float(rollout.storage.rewards[0, 0, 0]) == 5.0


def test_vector_steps_need_two_steps_in_next_step_mode():
    case = dict(SMALL_CASE)
    with pytest.raises(ValueError, match=">= 2"):
        make_runner(case, "vector_steps").sample(1)
    with pytest.raises(ValueError, match="window must be one of"):
        make_runner(case, "vector")
    same_step = make_runner(case | {"mode": "SameStep"}, "vector_steps")
    assert sum(len(c) for c in same_step.sample(1)) == 2


def test_a_pickled_vector_window_lays_out_the_same_even_ending_in_reset_steps():
    import pickle

    case = SMALL_CASE | dict(
        p_terminate=0.5, p_truncate=0.2, p_info=0.3, num_envs=3, lookback=2, seed=0
    )
    runner = make_runner(case, "vector_steps")
    endings = 0
    for _ in range(30):
        chunks = runner.sample(4)
        dead = chunks.recording.dead_cells()
        endings += int(dead is not None and dead[-1].any())
        again = pickle.loads(pickle.dumps(chunks))
        kwargs = dict(gamma=GAMMA, value_fn=value_fn, keys=KEYS)
        want, got = episodes_to_rollout(chunks, **kwargs), episodes_to_rollout(again, **kwargs)
        assert_same_storage(got, want)
        assert (want.mask is None and got.mask is None) or torch.equal(got.mask, want.mask)
    assert endings  # some window ended in a reset step


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_a_device_call_of_vector_steps_never_waits_for_the_device(mode):
    from episodes.envs.torch_cartpole import TorchCartPole
    from tests.runner.test_device_recording import SyncCounter

    env = TorchCartPole(64, autoreset_mode=mode, max_episode_steps=7)
    runner = EnvRunner(env, lambda obs: ((obs[:, 2] > 0).long(), {}), seed=0, window="vector_steps")
    runner.sample(5)  # first call: allocation and reset infos
    counter = SyncCounter()
    with counter:
        recorder = runner._recorder  # noqa: SLF001 - the test watches the recorder's steps
        recorder.begin(16, runner._obs)  # noqa: SLF001
        while not recorder.full():  # the call's end is known without asking the device
            runner._step()  # noqa: SLF001
    assert counter.calls == []
    assert recorder.row - recorder._begin_row == 16  # noqa: SLF001


def test_side_by_side_windows_join_their_masks():
    class Gathered(list):
        def __init__(self, parts):
            super().__init__(c for part in parts for c in part)
            self.parts = parts

        def side_by_side(self):
            return self.parts

    runners = [make_runner(SMALL_CASE | {"seed": seed}, "vector_steps") for seed in (1, 2)]
    masked = 0
    for _ in range(3):
        parts = [runner.sample(8) for runner in runners]
        kwargs = dict(gamma=GAMMA, value_fn=value_fn, keys=KEYS)
        joined = episodes_to_rollout(Gathered(parts), **kwargs)
        alone = [episodes_to_rollout(part, **kwargs) for part in parts]
        masks = [torch.ones(8, 2, dtype=torch.bool) if r.mask is None else r.mask for r in alone]
        want = torch.cat(masks, dim=1)
        if joined.mask is None:
            assert bool(want.all())
        else:
            masked += 1
            assert torch.equal(joined.mask, want) and joined.storage.valid is joined.mask
        for name in ("observations", "rewards", "dones", "values"):
            together = torch.cat([getattr(r.storage, name) for r in alone], dim=1)
            assert torch.equal(getattr(joined.storage, name), together), name
    assert masked  # some window held reset steps, and took the joined fast path


def test_reset_steps_hold_reward_zero_whatever_the_env_paid():
    """A vector env may pay a reward on a next-step reset step (gymnasium's pay 0): the cell
    holds no transition, so the storage has reward 0 and ``dones`` there."""

    def policy(obs):
        n = len(obs)
        extras = {"vf_preds": np.zeros(n, np.float32), "action_logp": np.zeros(n, np.float32)}
        return np.zeros(n, np.int64), extras

    env = RewardOnResetEnv(3)
    runner = EnvRunner(env, policy, seed=0, window="vector_steps")
    for _ in range(2):
        rollout = episodes_to_rollout(runner.sample(10), gamma=0.9, value_fn=lambda o: o[..., 0])
        dead = ~rollout.mask
        assert dead.any()
        rewards = rollout.storage.rewards[..., 0]
        assert (rewards[dead] == 0).all() and (rewards[~dead] == 1).all()
        assert rollout.storage.dones[..., 0][dead].all()


def test_a_missing_extra_output_is_named_for_a_window_with_reset_steps():
    """Such a window is laid out only from the blocks; when the policy did not record what the
    keys ask for, the error names the output, as it does for any chunks."""
    env = RewardOnResetEnv(2)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0, window="vector_steps")
    chunks = runner.sample(10)
    with pytest.raises(KeyError, match="no extra output 'vf_preds'"):
        episodes_to_rollout(chunks, gamma=0.9, value_fn=lambda o: o[..., 0])
