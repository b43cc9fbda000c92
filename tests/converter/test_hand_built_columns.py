"""episodes_to_rollout and episodes_to_batch on hand-built chunks: the cases a bug hunt found.

A not-done chunk followed by another episode in its env's column, a hidden state shared by
actor and critic, a given storage of the wrong size, the ``chunk`` numbering with empty
episodes.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.converter import ColumnKeys, episodes_to_batch, episodes_to_rollout
from episodes.rollout import RolloutStorage


def chunk(id_, obs, t0=0, **flags):
    n = len(obs) - 1
    return SingleAgentEpisode(
        id_,
        observations=[np.float32([o]) for o in obs],
        actions=[0] * n,
        rewards=[1.0] * n,
        extra_model_outputs={"vf_preds": [float(o) for o in obs[:-1]], "action_logp": [0.0] * n},
        t_started=t0,
        len_lookback_buffer=0,
        **flags,
    )


def value_fn(obs):
    return np.asarray(obs, np.float64)[..., 0]


def returns_of(rollout, gamma):
    storage = rollout.storage
    storage.compute_returns(rollout.last_values, gamma=gamma, lam=1.0, normalize_advantage=False)
    return storage.returns[:, 0, 0].tolist(), storage.dones[:, 0, 0].tolist()


@pytest.mark.parametrize(
    ("name", "column", "returns", "dones"),
    [
        # r + 0.5 * V(o_2) = 1 + 0.5 * 2 at a's last step: a is cut, not finished.
        ("not done, then another episode", ["a", "b"], [2.0, 2.0, 1.75, 1.5], [0, 1, 0, 0]),
        ("terminated, then another episode", ["a_done", "b"], [1.5, 1.0, 1.75, 1.5], [0, 1, 0, 0]),
        (
            "not done, then its own continuation",
            ["a", "a_next"],
            [2.125, 2.25, 2.5, 3.0],
            [0, 0, 0, 0],
        ),
    ],
)
def test_a_column_of_chunks_closes_each_episode_it_leaves(name, column, returns, dones):
    pieces = {
        "a": chunk("a", [0.0, 1.0, 2.0]),
        "a_done": chunk("a", [0.0, 1.0, 2.0], terminated=True),
        "a_next": chunk("a", [2.0, 3.0, 4.0], t0=2),
        "b": chunk("b", [50.0, 51.0, 1.0]),
    }
    rollout = episodes_to_rollout([[pieces[k] for k in column]], gamma=0.5, value_fn=value_fn)
    got_returns, got_dones = returns_of(rollout, 0.5)
    assert got_dones == [bool(d) for d in dones]
    np.testing.assert_allclose(got_returns, returns)


def test_chunks_of_one_episode_out_of_time_order_are_refused():
    later, earlier = chunk("a", [2.0, 3.0, 4.0], t0=2), chunk("a", [0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="time order"):
        episodes_to_rollout([[later, earlier]], gamma=0.5, value_fn=value_fn)


def test_actor_and_critic_may_share_one_hidden_state():
    n = 3
    ep = SingleAgentEpisode(
        observations=[np.zeros(2, np.float32)] * (n + 1),
        actions=[0] * n,
        rewards=[1.0] * n,
        terminated=True,
        len_lookback_buffer=0,
        extra_model_outputs={
            "vf_preds": [0.0] * n,
            "action_logp": [0.0] * n,
            "h": [np.full((1, 4), t, np.float32) for t in range(n)],
        },
    )
    keys = ColumnKeys(actor_hidden=("h",), critic_hidden=("h",))
    storage = episodes_to_rollout([ep], gamma=0.9, keys=keys).storage
    actor, critic = storage.saved_hidden_states_actor, storage.saved_hidden_states_critic
    assert [tuple(t.shape) for t in critic] == [(n, 1, 1, 4)]
    assert actor[0][:, 0, 0, 0].tolist() == critic[0][:, 0, 0, 0].tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize(("t", "n"), [(5, 2), (3, 3), (2, 2)], ids=["longer", "wider", "shorter"])
def test_a_given_storage_of_another_size_is_refused(t, n):
    column = [chunk("a", [0.0, 1.0, 2.0, 3.0])]
    storage = RolloutStorage("rl", n, t, [1], [1])
    with pytest.raises(ValueError, match=f"T={t} x N={n}"):
        episodes_to_rollout([column, column], gamma=0.5, value_fn=value_fn, storage=storage)


def test_batch_chunk_column_numbers_every_given_episode():
    just_reset = SingleAgentEpisode("r", observations=[np.float32([0])], len_lookback_buffer=0)
    batch = episodes_to_batch([just_reset, chunk("a", [0.0, 1.0, 2.0]), just_reset])
    assert batch["chunk"].tolist() == [1, 1]
