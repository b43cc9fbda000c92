"""Behaviour pinned by the session-43 mutation round (b): rollout trajectories, GAE, the
previous-actions/rewards connector and the buffer's view store."""

from __future__ import annotations

import copy
import warnings
from types import MappingProxyType
from unittest import mock

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.buffer.array_store import ArrayStore
from episodes.buffer.view_store import ViewStore
from episodes.connectors import PrevActionsPrevRewards
from episodes.connectors.lookback_reach import ShortLookbackWarning
from episodes.rollout import (
    bootstrap_time_outs,
    compute_gae,
    split_and_pad_trajectories,
    unpad_trajectories,
)
from episodes.rollout.trajectories import pad_with_layout, trajectory_layout
from episodes.runner import EnvRunner, RandomPolicy

# ------------------------------------------------------------------ rollout/trajectories.py

DONES = torch.tensor([[0, 0], [1, 0], [0, 0]])


# name -> (the other side made from a layout, equal?)
LAYOUT_EQUALITY = {
    "a changed int field, the same tensors": (lambda lay: lay._replace(num_steps=99), False),
    "a changed int in a plain tuple": (lambda lay: (lay[0] + 1, *lay[1:]), False),
    "a tensor field given as an int": (lambda lay: lay._replace(masks=0), False),
    "an int field given as a one-value tensor": (
        lambda lay: lay._replace(num_traj=torch.tensor(lay.num_traj)),
        False,
    ),
    "an object equal to anything": (lambda lay: mock.ANY, True),
}


@pytest.mark.parametrize("case", list(LAYOUT_EQUALITY))
def test_layout_equality_compares_ints_by_value_and_defers_to_other_objects(case):
    """Ints compare by value, a tensor never equals a non-tensor (and asks no bool of it), and
    a non-tuple is left to its own ``__eq__``."""
    make, equal = LAYOUT_EQUALITY[case]
    lay = trajectory_layout(DONES)
    other = make(lay)
    assert (lay == other) is equal
    assert (lay != other) is (not equal)


@pytest.mark.parametrize(
    "shape", [(3,), (), (3, 2, 2), (3, 2, 1, 1)], ids=["1-D", "0-D", "3-D not unit", "4-D"]
)
def test_trajectory_layout_names_a_dones_shape_it_cannot_take(shape):
    with pytest.raises(ValueError, match=r"dones must be \[T, N\] or \[T, N, 1\]"):
        trajectory_layout(torch.zeros(shape))


@pytest.mark.parametrize("flag", [-1, -0.5, float("nan"), float("-inf")])
def test_any_nonzero_done_flag_ends_a_trajectory(flag):
    dones = torch.tensor([[0.0, 0.0], [flag, 0.0], [0.0, 0.0]])
    lay = trajectory_layout(dones)
    assert lay.num_traj == 3
    assert lay.start_time.tolist() == [0, 2, 0]
    assert lay.start_env.tolist() == [0, 0, 1]


def test_pad_and_unpad_take_any_mapping():
    """Read-only mappings (nested too) are walked like dicts, not refused as non-tensors."""
    x = torch.arange(6.0).view(3, 2)
    data = MappingProxyType({"x": x, "inner": MappingProxyType({"y": 2 * x})})
    padded, masks = split_and_pad_trajectories(data, DONES)
    assert torch.equal(padded["x"], split_and_pad_trajectories(x, DONES)[0])
    assert torch.equal(
        pad_with_layout(data, trajectory_layout(DONES))["inner"]["y"], 2 * padded["x"]
    )
    frozen = MappingProxyType({"x": padded["x"], "inner": MappingProxyType(dict(padded["inner"]))})
    back = unpad_trajectories(frozen, masks)
    assert torch.equal(back["x"], x)
    assert torch.equal(back["inner"]["y"], 2 * x)


@pytest.mark.parametrize(
    "mask_shape",
    [(3, 2), (3, 4), (2, 3), (3, 3, 1)],
    ids=["too few trajectories", "too many trajectories", "too few steps", "an extra dim"],
)
def test_unpad_refuses_masks_not_shaped_like_the_trajectories(mask_shape):
    x = torch.arange(6.0).view(3, 2)
    padded, _ = split_and_pad_trajectories(x, DONES)  # [3, 3]
    with pytest.raises(ValueError, match="do not match trajectories"):
        unpad_trajectories(padded, torch.ones(mask_shape, dtype=torch.bool))


# ------------------------------------------------------------------ rollout/gae.py

# [T, N] of each scan: many envs over few steps take the per-step loop, few envs over many
# steps the log-step scan.
SCAN_SHAPES = {"step loop": (3, 4096), "log-step scan": (40, 2)}


def _gae_inputs(shape: tuple[int, int], seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    t, n = shape
    return {
        "rewards": torch.randn(t, n, generator=gen),
        "values": torch.randn(t, n, generator=gen),
        "dones": (torch.rand(t, n, generator=gen) < 0.2).float(),
        "last_values": torch.randn(n, generator=gen),
    }


@pytest.mark.parametrize("needs_grad", ["rewards", "values", "last_values"])
@pytest.mark.parametrize("scan", list(SCAN_SHAPES))
def test_compute_gae_reads_every_input_detached(scan, needs_grad):
    """An input that requires grad neither fails the in-place scans nor drags its graph in."""
    data = _gae_inputs(SCAN_SHAPES[scan])
    expected = compute_gae(**data, gamma=0.9, lam=0.8)
    data[needs_grad] = data[needs_grad].clone().requires_grad_()
    advantages = compute_gae(**data, gamma=0.9, lam=0.8)
    assert not advantages.requires_grad
    assert torch.equal(advantages, expected)


def test_compute_gae_gives_contiguous_advantages_for_strided_rewards():
    data = _gae_inputs((4, 3))
    rewards = data.pop("rewards").t().contiguous().t()  # same values, env-major strides
    advantages = compute_gae(rewards, **data, gamma=0.9, lam=0.8)
    assert advantages.is_contiguous()
    assert torch.equal(advantages, compute_gae(rewards.contiguous(), **data, gamma=0.9, lam=0.8))


# name -> (dones, valid): every cell valid, so each must give the bool-flag result.
NONZERO_FLAGS = {
    "negative dones": (lambda d: -d, lambda d: torch.ones_like(d, dtype=torch.bool)),
    "fractional dones": (lambda d: 0.5 * d, lambda d: torch.ones_like(d, dtype=torch.bool)),
    "an integer valid of 2": (lambda d: d, lambda d: torch.full_like(d, 2, dtype=torch.long)),
    "a float valid of 0.5": (lambda d: d, lambda d: torch.full_like(d, 0.5)),
}


@pytest.mark.parametrize("case", list(NONZERO_FLAGS))
@pytest.mark.parametrize("scan", list(SCAN_SHAPES))
def test_compute_gae_with_valid_takes_any_nonzero_flag_as_set(scan, case):
    make_dones, make_valid = NONZERO_FLAGS[case]
    data = _gae_inputs(SCAN_SHAPES[scan])
    expected = compute_gae(**data, gamma=0.9, lam=0.8)
    dones = data.pop("dones")
    advantages = compute_gae(
        dones=make_dones(dones), valid=make_valid(dones), **data, gamma=0.9, lam=0.8
    )
    torch.testing.assert_close(advantages, expected)


# name -> (rewards, values, result dtype, result)
INTEGER_REWARD_BOOTSTRAPS = {
    "float64 values": (
        torch.tensor([1, 2]),
        torch.tensor([0.1, 0.1], dtype=torch.float64),
        torch.float64,
        [1.05, 2.0],
    ),
    "integer values": (torch.tensor([1, 2]), torch.tensor([3, 4]), torch.float32, [2.5, 2.0]),
    "float16 values": (
        torch.tensor([1, 2]),
        torch.tensor([0.5, 0.5], dtype=torch.float16),
        torch.float32,
        [1.25, 2.0],
    ),
}


@pytest.mark.parametrize("case", list(INTEGER_REWARD_BOOTSTRAPS))
def test_bootstrap_of_integer_rewards_takes_the_wider_of_default_and_values_dtype(case):
    rewards, values, dtype, expected = INTEGER_REWARD_BOOTSTRAPS[case]
    out = bootstrap_time_outs(rewards, values, torch.tensor([True, False]), 0.5)
    assert out.dtype == dtype
    assert out.tolist() == pytest.approx(expected)


# ------------------------------------------------------------------ connectors/prev.py


def _chunk(
    length: int, lookback: int, t_started: int, space: gym.Space | None = None
) -> SingleAgentEpisode:
    """A chunk of ``length`` steps keeping ``lookback`` of them, its episode ``t_started`` in."""
    steps = length + lookback
    space = gym.spaces.Discrete(2) if space is None else space
    space.seed(0)
    return SingleAgentEpisode(
        observations=[float(i) for i in range(steps + 1)],
        actions=[space.sample() for _ in range(steps)],
        rewards=[float(i) for i in range(steps)],
        t_started=t_started,
        len_lookback_buffer=lookback,
        action_space=space,
    )


def _warned(connector: PrevActionsPrevRewards, episodes: list) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        connector(episodes, {})
    return [str(w.message) for w in caught if issubclass(w.category, ShortLookbackWarning)]


# name -> (connector, chunk (length, lookback, t_started), warns about)
SHORT_LOOKBACK_CASES = {
    "an empty chunk has no training row to fill": (
        lambda: PrevActionsPrevRewards(2, 2),
        (0, 0, 5),
        None,
    ),
    "the inference row reads one item past a 1-step lookback": (
        lambda: PrevActionsPrevRewards(3, 0, inference=True),
        (1, 1, 5),
        "actions",
    ),
    "the inference row reads just the lookback": (
        lambda: PrevActionsPrevRewards(2, 0, inference=True),
        (1, 1, 5),
        None,
    ),
    "the longer of the two reaches decides in inference": (
        lambda: PrevActionsPrevRewards(1, 3, inference=True),
        (1, 1, 5),
        "rewards",
    ),
}


@pytest.mark.parametrize("case", list(SHORT_LOOKBACK_CASES))
def test_prev_warns_exactly_where_a_row_reads_past_the_lookback(case):
    make, (length, lookback, t_started), column = SHORT_LOOKBACK_CASES[case]
    messages = _warned(make(), [_chunk(length, lookback, t_started)])
    if column is None:
        assert messages == []
    else:
        assert len(messages) == 1
        assert f"of {column} lookback" in messages[0]


BOX_F32 = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
BOX_I64 = gym.spaces.Box(0, 5, (2,), np.int64)

# name -> (action space, (n_actions, n_rewards), fill)
REFUSED_FILLS = {
    "discrete actions, a string": (gym.spaces.Discrete(2), (1, 0), "x"),
    "discrete actions, a fraction": (gym.spaces.Discrete(2), (1, 0), 0.5),
    "float box actions, a string": (BOX_F32, (1, 0), "x"),
    "float box actions, beyond float32": (BOX_F32, (1, 0), 1e300),
    "float box actions, a wrong shape": (BOX_F32, (1, 0), [1.0, 2.0, 3.0]),
    "int box actions, a fraction": (BOX_I64, (1, 0), 0.5),
    "rewards, a string": (gym.spaces.Discrete(2), (0, 1), "x"),
    "rewards, beyond float32": (gym.spaces.Discrete(2), (0, 1), 1e300),
}


@pytest.mark.parametrize("case", list(REFUSED_FILLS))
@pytest.mark.parametrize("inference", [True, False], ids=["inference", "training"])
def test_prev_refuses_a_fill_its_column_cannot_hold_even_without_padding(case, inference):
    """No row of these chunks needs the fill (their lookback covers it); it is refused anyway,
    by the inference fast paths too."""
    space, counts, fill = REFUSED_FILLS[case]
    one_hot = not isinstance(space, gym.spaces.Discrete)  # raw discrete actions hold the fill
    connector = PrevActionsPrevRewards(
        *counts, fill=fill, one_hot_discrete=one_hot, inference=inference
    )
    batch = {"kept": 1}
    with pytest.raises(ValueError, match="cannot fill a leaf"):
        connector([_chunk(2, 1, 1, space), _chunk(3, 1, 1, space)], batch)
    assert batch == {"kept": 1}


@pytest.mark.parametrize("counts", [(1, 1), (0, 2), (2, 0), (0, 0)])
@pytest.mark.parametrize("inference", [True, False], ids=["inference", "training"])
def test_prev_adds_nothing_for_no_episodes(counts, inference):
    assert PrevActionsPrevRewards(*counts, inference=inference)([], {"kept": 1}) == {"kept": 1}


@pytest.mark.parametrize("counts", [(1, 1), (0, 1), (1, 0)])
def test_prev_inference_refuses_an_episode_without_observations_beside_others(counts):
    fresh = SingleAgentEpisode(action_space=gym.spaces.Discrete(2))
    batch = {"kept": 1}
    with pytest.raises(ValueError, match="holds no observation yet"):
        PrevActionsPrevRewards(*counts, inference=True)([_chunk(2, 0, 0), fresh], batch)
    assert batch == {"kept": 1}


# name -> (rewards, the error's message)
REFUSED_REWARDS = {
    "a ragged reward after a vector one: the reader's error": (
        [[1.0, 2.0], [1.0, [2.0, 3.0]], 2.0],
        "the rows read do not stack",
    ),
    "vectors of two sizes: the smaller is named": (
        [[1.0, 2.0, 3.0], [1.0, 2.0], 2.0],
        r"one number per step .* shape \(2,\) in episode 'e'",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED_REWARDS))
@pytest.mark.parametrize("inference", [True, False], ids=["inference", "training"])
def test_prev_names_what_is_wrong_with_rewards_that_are_not_numbers(case, inference):
    rewards, message = REFUSED_REWARDS[case]
    ep = SingleAgentEpisode(
        "e",
        observations=[0] * (len(rewards) + 1),
        actions=[0] * len(rewards),
        rewards=rewards,
        len_lookback_buffer=0,
    )
    connector = PrevActionsPrevRewards(0, 2, one_hot_discrete=False, inference=inference)
    with pytest.raises(ValueError, match=message):
        connector([ep], {})


# ------------------------------------------------------------------ buffer/view_store.py


@pytest.mark.parametrize("typed", [None, True, False])
@pytest.mark.parametrize("store_class", [ArrayStore, ViewStore])
def test_an_empty_batch_store_is_typed_only_when_told(store_class, typed):
    """Untyped, an empty column takes its dtype from its first item; typed, it keeps float64."""
    block = np.zeros((4, 2))
    store = store_class.from_batch(block[:0, 0], typed=typed)
    assert store.typed is bool(typed)
    store.append(np.int32(7))
    assert store.data.dtype == (np.float64 if typed else np.int32)
    assert store.data.tolist() == [7]


def test_chunks_ending_episodes_read_unchanged_until_written():
    """A chunk whose final observation is kept apart (same-step autoreset) still views the
    blocks: ``unchanged()`` holds until something is written."""
    env = gym.make_vec(
        "CartPole-v1",
        2,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
    )
    chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(40)
    built = list(chunks)
    assert any(chunk.is_done for chunk in built)
    assert chunks.unchanged()
    built[0].set_rewards(new_data=5.0, at_indices=0)
    assert not chunks.unchanged()
    env.close()


def _view_store() -> tuple[np.ndarray, ViewStore]:
    block = np.arange(6.0).reshape(3, 2)
    return block, ViewStore.from_batch(block[:, 0])


# name -> a refused change of a store that already copied the leaves
REFUSED_CHANGES = {
    "set": lambda store: store.set([1], ["x"]),
    "append": lambda store: store.append("x"),
    "extend_batch": lambda store: store.extend_batch(np.array(["x", "y"])),
}


@pytest.mark.parametrize("case", list(REFUSED_CHANGES))
def test_a_refused_change_leaves_a_detached_view_store_detached(case):
    block, store = _view_store()
    store.set([0], [40.0])
    with pytest.raises(ValueError):
        REFUSED_CHANGES[case](store)
    assert store.detached
    assert store.data.tolist() == [40.0, 2.0, 4.0]
    assert not np.shares_memory(store.data, block)
    assert block[:, 0].tolist() == [0.0, 2.0, 4.0]


def test_a_shallow_copy_of_a_view_store_keeps_written_but_not_the_way_back_to_the_views():
    block, store = _view_store()
    store.set([0], [40.0])
    assert copy.copy(store).written
    block, store = _view_store()
    store.append(9.0)  # copies the leaves; popping it would view the block again
    clone = copy.copy(store)
    assert not clone.written
    assert clone.pop(3) == 9.0
    assert clone.detached  # the copy owns its leaves from here on
    assert store.pop(3) == 9.0
    assert not store.detached and np.shares_memory(store.data, block)


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda store: store.set([7], [1.0]), IndexError),
        (lambda store: store.append("x"), ValueError),
    ],
    ids=["set out of range", "append of a string"],
)
def test_a_refused_first_change_leaves_a_view_store_viewing_the_block(change, error):
    block, store = _view_store()
    with pytest.raises(error):
        change(store)
    assert not store.detached
    assert np.shares_memory(store.data, block)
    assert store.data.tolist() == [0.0, 2.0, 4.0]


# name -> (changes after the append that copied the leaves, the store's items after them,
# whether it views the block again): only taking back that one item returns to the views.
AFTER_THE_COPYING_APPEND = {
    "another item deleted, then a no-op truncate": (
        lambda store: (store.delete(0), store.truncate(3)),
        [2.0, 4.0, 9.0],
        False,
    ),
    "another item popped, then a no-op truncate": (
        lambda store: (store.pop(1), store.truncate(3)),
        [0.0, 4.0, 9.0],
        False,
    ),
    "an item set, then the appended item popped": (
        lambda store: (store.set([0], [40.0]), store.pop(3)),
        [40.0, 2.0, 4.0],
        False,
    ),
    "a row set, then the appended item popped": (
        lambda store: (store.set_rows(range(0, 1), [np.array([40.0])]), store.pop(3)),
        [40.0, 2.0, 4.0],
        False,
    ),
    "grown further, then truncated back": (
        lambda store: (store.extend_batch(np.array([7.0])), store.truncate(3)),
        [0.0, 2.0, 4.0],
        False,
    ),
    "the appended item popped": (lambda store: store.pop(3), [0.0, 2.0, 4.0], True),
    "the appended item truncated away": (lambda store: store.truncate(3), [0.0, 2.0, 4.0], True),
}


@pytest.mark.parametrize("case", list(AFTER_THE_COPYING_APPEND))
def test_only_taking_back_the_copying_append_views_the_block_again(case):
    change, items, views = AFTER_THE_COPYING_APPEND[case]
    block, store = _view_store()
    store.append(9.0)
    change(store)
    assert store.data.tolist() == items
    assert store.detached is not views
    assert np.shares_memory(store.data, block) is views
    assert block[:, 0].tolist() == [0.0, 2.0, 4.0]
