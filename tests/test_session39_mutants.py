"""Behaviour a mutation test of round 39 found unpinned: each case fails for the mutant cited."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_rollout
from episodes.episode.sample_batch import SampleBatch
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.runner import EnvRunner
from tests.runner._runner_env import action_policy, make_vec


def _steps(id_="a", t0=0, n=2, **kwargs) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[float(t0 + j) for j in range(n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        t_started=t0,
        len_lookback_buffer=0,
        **kwargs,
    )


def _buffer(kind: type[EpisodeReplayBuffer]) -> EpisodeReplayBuffer:
    buf = kind(100, seed=0)
    buf.add([_steps(id_) for id_ in "ab"])
    return buf


def _saved(tmp_path: Path, kind: type[EpisodeReplayBuffer]) -> Path:
    path = tmp_path / "buf"
    _buffer(kind).save(path)
    return path


# ---------------------------------------------------------------------------- runner


def _runner_with_output(outputs: list, *, num_envs: int = 1) -> EnvRunner:
    """A runner whose policy gives extra output ``x``: ``outputs[k]`` at its ``k``-th call."""
    calls = []

    def policy(obs):
        value = outputs[min(len(calls), len(outputs) - 1)]
        calls.append(None)
        return np.zeros(len(obs), np.int64), {"x": value}

    env = make_vec([[(5, "term")]] * num_envs, AutoresetMode.NEXT_STEP)
    return EnvRunner(env, policy)


@pytest.mark.parametrize(
    "output",
    [
        [[np.ma.masked_array([1.0], mask=[1])]],
        [(np.ma.masked_array([1.0], mask=[1]),)],
        ([np.ma.masked_array([1.0], mask=[1])],),
    ],
    ids=["list in a list", "tuple in a list", "list in a tuple"],
)
def test_a_masked_array_nested_in_a_policy_output_is_refused(output):
    # Mutant HV04: only a bare masked array suspected, the nested one recorded as data (1.0).
    runner = _runner_with_output([output])
    with pytest.raises(ValueError, match="masked entries"):
        runner.sample(2)


def test_a_policy_output_going_from_complex64_to_complex128_widens_the_column():
    # Mutant WI01: complex64 -> complex128 refused as a column that cannot hold the values.
    runner = _runner_with_output(
        [np.array([1 + 1j], np.complex64), np.array([1e200 + 1j], np.complex128)]
    )
    (chunk,) = runner.sample(3)
    column = chunk.get_extra_model_outputs("x")
    assert column.dtype == np.complex128
    assert column.tolist() == [1 + 1j, 1e200 + 1j, 1e200 + 1j]


def test_a_vector_env_whose_metadata_is_none_runs_in_next_step_mode():
    # Mutant MO01: metadata None read as a dict (AttributeError), not as next-step mode.
    got = []
    for metadata in ("kept", None):
        env = make_vec([[(2, "term")]], AutoresetMode.NEXT_STEP)
        if metadata is None:
            env.metadata = None
        runner = EnvRunner(env, action_policy)
        assert runner.autoreset_mode is AutoresetMode.NEXT_STEP
        got.append([(c.get_observations().tolist(), c.is_terminated) for c in runner.sample(3)])
    assert got[0] == got[1]
    assert [terminated for _, terminated in got[1]] == [True, False]


def test_the_backlog_warning_names_the_callers_sample_line():
    # Mutant BL04: the warning attributed to the runner's own module, not to this file.
    runner = EnvRunner(make_vec([[(1, "term")], [(10**6, "trunc")]], "NextStep"), action_policy)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(30):
            runner.sample(32)
    (warning,) = [w for w in seen if "earlier calls" in str(w.message)]
    assert Path(warning.filename).resolve() == Path(__file__).resolve()


# ---------------------------------------------------------------------------- buffers


class _RefusesBigBox(gym.spaces.Box):
    def contains(self, x) -> bool:
        return bool(np.all(np.asarray(x) < 100))


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Box(0.0, np.inf, (), np.float32),  # SC02: bounded below only
        gym.spaces.Box(-np.inf, 0.0, (), np.float32),  # bounded above only
        _RefusesBigBox(-np.inf, np.inf, (), np.float32),  # SC03: its own contains()
    ],
    ids=["bounded below", "bounded above", "subclass with its own contains"],
)
def test_nan_set_into_a_numpy_observation_column_is_refused_unless_the_space_is_unbounded(space):
    # Mutants SC02/SC03: the unbounded-scalar fast path taken for these spaces, NaN stored.
    ep = SingleAgentEpisode(
        "a",
        observations=[0.0, 0.0],
        actions=[0],
        rewards=[1.0],
        observation_space=space,
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=0,
    ).to_numpy()
    with pytest.raises(ValueError, match="is not in the buffer's space"):
        ep.set_observations(new_data=np.float32("nan"), at_indices=0)
    assert ep.get_observations(0) == 0.0


def test_a_padded_one_hot_read_of_a_tuple_action_column_gives_float32_one_hots():
    # Mutant CF06: a Tuple's Discrete part not known as encoded, its one-hot leaf float64.
    space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (), np.float32)))
    ep = SingleAgentEpisode(
        "b",
        observations=[0.0, 1.0, 0.5],
        actions=[(np.int32(1), np.float32(0.5)), (np.int32(2), np.float32(0.25))],
        rewards=[1.0, 1.0],
        action_space=space,
        len_lookback_buffer=0,
    ).to_numpy()
    one_hot, box = ep.get_actions(slice(-1, 3), fill=0, one_hot_discrete=True)
    assert one_hot.dtype == np.float32 and box.dtype == np.float32
    assert one_hot.tolist() == [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    assert box.tolist() == [0.25, 0.0]


COUNTS = {
    # name: (columns, count); mutants SB01 (an empty seq_lens summed to 0) and SB02 (rewards
    # before t). The docstring: t, then rewards, then the other columns (RLlib counts by the
    # first column in order: 2 for "t and rewards disagree").
    "empty seq_lens array": ({"seq_lens": np.zeros(0, np.int32), "obs": np.zeros(3)}, 3),
    "t and rewards disagree": ({"rewards": np.zeros(2), "t": np.zeros(5)}, 5),
    "t after rewards and obs": ({"obs": np.zeros(4), "rewards": np.zeros(2), "t": np.zeros(5)}, 5),
}


@pytest.mark.parametrize("name", list(COUNTS))
def test_count_prefers_t_to_rewards_and_ignores_an_empty_seq_lens(name):
    columns, rows = COUNTS[name]
    assert SampleBatch(columns).count == len(SampleBatch(columns)) == rows


# ---------------------------------------------------------------------------- converter


def test_a_stepless_end_filed_before_its_own_steps_is_out_of_time_order():
    # Mutant SE05: the end moved after its steps in the same env's list and accepted.
    outs = {"vf_preds": [0.0, 0.0], "action_logp": [0.0, 0.0]}
    end = SingleAgentEpisode(
        "a", observations=[2.0], t_started=2, terminated=True, len_lookback_buffer=0
    )
    steps_a = _steps("a", extra_model_outputs=outs)
    steps_b = _steps("b", extra_model_outputs=outs, terminated=True)
    with pytest.raises(ValueError, match="an env's chunks go in"):
        episodes_to_rollout([[end, steps_a], [steps_b]], gamma=0.9)


# ---------------------------------------------------------------------------- replay


@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_sampled_episodes_count_one_item_each(kind):
    # Mutant BU12: one call with sample_episodes=True counted as 1 item, not as the episodes.
    buf = _buffer(kind)
    buf.sample(3, sample_episodes=True)
    assert buf.get_sampled_timesteps() == 3
    buf.sample(2)
    assert buf.get_sampled_timesteps() == 5


class _Uniform(EpisodeReplayBuffer):
    pass


class _Prioritized(PrioritizedEpisodeReplayBuffer):
    pass


@pytest.mark.parametrize(
    "saved_kind, loader, hint",
    [
        (PrioritizedEpisodeReplayBuffer, _Uniform, "_Uniform is not a Prioritized"),
        (EpisodeReplayBuffer, _Prioritized, "_Prioritized is a Prioritized"),
    ],
    ids=["uniform subclass, prioritized save", "prioritized subclass, uniform save"],
)
def test_a_subclass_loading_the_other_kind_of_save_is_told_why(tmp_path, saved_kind, loader, hint):
    # Mutant PE11: no kind check for subclasses (TypeError about alpha, KeyError max_priority).
    path = _saved(tmp_path, saved_kind)
    with pytest.raises(ValueError, match=hint):
        loader.load(path)


def test_saving_to_a_dangling_symlink_is_a_file_exists_error(tmp_path):
    # Mutant PE01: Path.exists() follows the link (NotADirectoryError from the rename).
    link = tmp_path / "buf"
    os.symlink(tmp_path / "nowhere", link)
    with pytest.raises(FileExistsError, match="save a buffer to a new directory"):
        _buffer(EpisodeReplayBuffer).save(link)
    assert sorted(os.listdir(tmp_path)) == ["buf"] and os.path.islink(link)


@pytest.mark.parametrize("crc", [-1, 1 << 32, 1 << 40])
def test_a_crc32_field_out_of_range_is_no_crc32(tmp_path, crc):
    # Mutant PE05: 2**32 taken as a CRC-32 and reported as disagreeing with its checksum.
    path = _saved(tmp_path, EpisodeReplayBuffer)
    meta = json.loads((path / "replay.json").read_text())
    meta["crc32"] = crc
    (path / "replay.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=rf"crc32: {crc} is no CRC-32"):
        EpisodeReplayBuffer.load(path)
