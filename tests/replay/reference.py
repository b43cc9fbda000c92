"""A plain-Python model of the replay buffers: lists of steps, RLlib's eviction rule, loops."""

from __future__ import annotations

import copy
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class RefEpisode:
    id_: str
    t_begin: int
    obs: list[Any] = field(default_factory=list)  # n + 1 observations
    actions: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    infos: list[Any] = field(default_factory=list)  # n + 1 infos
    uids: list[int] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False

    def __len__(self) -> int:
        return len(self.rewards)


class RefBuffer:
    """Stores chunks as Python lists; ``uid`` counts added steps like the real buffer."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.episodes: OrderedDict[str, RefEpisode] = OrderedDict()
        self.evicted: list[str] = []
        self.next_uid = 0
        self.added = 0  # steps added, those dropped with an episode evicted in their add too

    @property
    def num_timesteps(self) -> int:
        return sum(len(ep) for ep in self.episodes.values())

    def add(self, chunks: list[Any]) -> None:
        """All or nothing, like the real buffer: ``ValueError`` and no change."""
        trial = copy.deepcopy(self)
        trial._add(chunks)
        self.__dict__.update(trial.__dict__)

    def _add(self, chunks: list[Any]) -> None:
        evicted_before = set(self.evicted)
        for chunk in chunks:
            n = len(chunk)
            if n == 0:
                continue
            if chunk.id_ in evicted_before:
                raise ValueError(f"{chunk.id_} was evicted")
            self.added += n
            if chunk.id_ in self.evicted:  # by an earlier chunk of this add: goes with it
                continue
            ep = self.episodes.get(chunk.id_)
            if ep is None:
                ep = self.episodes[chunk.id_] = RefEpisode(chunk.id_, chunk.t_started)
                ep.obs.append(chunk.get_observations(0))
                ep.infos.append(chunk.get_infos(0))
            for i in range(n):
                ep.obs.append(chunk.get_observations(i + 1))
                ep.infos.append(chunk.get_infos(i + 1))
                ep.actions.append(chunk.get_actions(i))
                ep.rewards.append(float(chunk.get_rewards(i)))
                ep.uids.append(self.next_uid)
                self.next_uid += 1
            ep.terminated, ep.truncated = chunk.is_terminated, chunk.is_truncated
            while self.num_timesteps > self.capacity and len(self.episodes) > 1:
                id_, _ = self.episodes.popitem(last=False)
                self.evicted.append(id_)

    def where(self, uid: int) -> tuple[RefEpisode, int]:
        for ep in self.episodes.values():
            if uid in ep.uids:
                return ep, ep.uids.index(uid)
        raise KeyError(uid)

    def transition(self, uid: int, n: int, gamma: float) -> dict[str, Any]:
        """The n-step transition of one stored step, by loops."""
        ep, k = self.where(uid)
        m = min(n, len(ep) - k)
        ret = 0.0
        for j in range(m):
            ret += gamma**j * ep.rewards[k + j]
        at_end = k + m == len(ep)
        return {
            "obs": ep.obs[k],
            "actions": ep.actions[k],
            "rewards": ret,
            "next_obs": ep.obs[k + m],
            "infos": ep.infos[k + m],
            "n_step": m,
            "terminateds": at_end and ep.terminated,
            "truncateds": at_end and ep.truncated,
            "discounts": gamma**m,
        }


def check_transition_batch(
    ref: RefBuffer, batch: dict[str, Any], n_lo: int, n_hi: int, gamma: float
) -> None:
    """Every row of ``batch`` equals the reference for a horizon in ``[n_lo, n_hi]``."""
    for i, uid in enumerate(batch["indices"].tolist()):
        m = int(batch["n_step"][i])
        ep, k = ref.where(uid)
        rem = len(ep) - k
        assert min(n_lo, rem) <= m <= min(n_hi, rem), (uid, m, n_lo, n_hi, rem)
        want = ref.transition(uid, m, gamma)
        for key in ("obs", "actions", "next_obs"):
            np.testing.assert_array_equal(batch[key][i], want[key], err_msg=key)
        np.testing.assert_allclose(batch["rewards"][i], want["rewards"], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(batch["discounts"][i], want["discounts"], rtol=1e-6)
        assert bool(batch["terminateds"][i]) == want["terminateds"]
        assert bool(batch["truncateds"][i]) == want["truncateds"]
        if "infos" in batch:
            assert batch["infos"][i] == want["infos"]


def assert_states_equal(a: Any, b: Any, path: str = "state") -> None:
    """Deep equality of two ``get_state`` results (arrays compared exactly, dtypes too)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), path
        for key in a:
            assert_states_equal(a[key], b[key], f"{path}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_states_equal(x, y, f"{path}[{i}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, path
        np.testing.assert_array_equal(a, b, err_msg=path)
    else:
        assert a == b, path
