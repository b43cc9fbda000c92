"""The add_transition fast path after review: fallbacks cost no views, forward AD, long T."""

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as fwAD

from episodes.rollout import RolloutStorage, fast_rows

Transition = RolloutStorage.Transition


def _kept_views(storage):
    rows = fast_rows._VIEWS.get(storage, {})
    return sum(len(r.full) + len(r.flat) for r in rows.values())


def _steps(storage, transition, count):
    for _ in range(count):
        storage.add_transition(transition)


def test_a_recurrent_step_the_fast_path_does_not_take_makes_no_views():
    storage = RolloutStorage("rl", 2, 8, (3,), (1,), actor_hidden_state=torch.zeros(1, 2, 4))
    step = Transition(  # a list pair: the general path's (a tuple pair takes the fast path)
        observations=torch.zeros(2, 3),
        rewards=torch.ones(2),
        hidden_states=[torch.zeros(1, 2, 4), None],
    )
    _steps(storage, step, 8)
    assert _kept_views(storage) == 0
    assert storage.rewards.sum().item() == 16


def test_a_numpy_backed_source_is_copied_at_once_unless_it_lies_in_the_storage():
    storage = RolloutStorage("rl", 2, 4, (3,), (1,))
    given = np.arange(6, dtype=np.float32).reshape(2, 3)
    storage.add_transition(Transition(observations=torch.from_numpy(given)))
    assert _kept_views(storage) == 1  # the fast path took it
    np.testing.assert_array_equal(storage.observations[0].numpy(), given)
    # A numpy view of the storage's own row: _write's rules (read before anything is written).
    inside = torch.from_numpy(storage.observations[0].numpy())
    reference = RolloutStorage("rl", 2, 4, (3,), (1,))
    reference.add_transition(Transition(observations=torch.from_numpy(given)))
    reference._write(1, reference._fields_of(Transition(observations=reference.observations[0])))
    storage.add_transition(Transition(observations=inside))
    assert torch.equal(storage.observations, reference.observations)


def test_forward_mode_dual_sources_store_no_tangent():
    fast, slow = RolloutStorage("rl", 3, 4, (2,), (1,)), RolloutStorage("rl", 3, 4, (2,), (1,))
    with fwAD.dual_level():
        dual = fwAD.make_dual(torch.ones(3), torch.ones(3))
        fast.add_transition(Transition(rewards=dual))
        slow._write(0, slow._fields_of(Transition(rewards=dual)))
        assert fwAD.unpack_dual(fast.rewards).tangent is None
        assert fwAD.unpack_dual(slow.rewards).tangent is None
    assert torch.equal(fast.rewards, slow.rewards)


@pytest.mark.parametrize(("steps", "kept"), [(16, 16 * 2), (300, 0)], ids=["short", "long"])
def test_row_views_are_kept_for_short_rollouts_only(steps, kept):
    storage = RolloutStorage("rl", 1, steps, (4,), (2,))
    step = Transition(observations=torch.ones(1, 4), rewards=torch.ones(1))
    _steps(storage, step, steps)
    assert _kept_views(storage) == kept
    assert storage.rewards.sum().item() == steps
