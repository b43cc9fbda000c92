"""Behaviour that hand-made mutants of ``episodes.replay.transitions``, ``episodes.replay.adding``
and ``episodes.replay.ingest`` showed no test pinned (session 45, second batch).

Each test fails with one mutant (named beside it) applied, and passes on the code as it is.
Transition batches are read with ``get_transitions`` over every stored index and compared item
by item against a plain-Python reference built from the added episodes; adds are checked
through ``add``, ``get_episodes``, ``get_episode_ids``, ``get_evicted_ids`` and the counters.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import (
    EpisodeReplayBuffer,
    EvictedEpisodeError,
    PrioritizedEpisodeReplayBuffer,
)

BUFFERS = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]


def _episode(
    id_: Any,
    obs: list[Any],
    *,
    t0: int = 0,
    end: str = "",
    actions: list[Any] | None = None,
    rewards: list[float] | None = None,
    infos: list[Any] | None = None,
    extras: dict[str, list[Any]] | None = None,
    **kwargs: Any,
) -> SingleAgentEpisode:
    steps = len(obs) - 1
    return SingleAgentEpisode(
        id_,
        observations=obs,
        actions=[0] * steps if actions is None else actions,
        rewards=[1.0] * steps if rewards is None else rewards,
        infos=infos,
        extra_model_outputs=extras,
        terminated=end == "terminated",
        truncated=end == "truncated",
        t_started=t0,
        len_lookback_buffer=0,
        **kwargs,
    )


def _expected(full: dict[str, Any], t: int, n: int, gamma: float) -> dict[str, Any]:
    """The n-step transition from step ``t`` of a whole stored episode, in plain Python."""
    rewards = full["rewards"]
    m = min(n, len(rewards) - t)
    at_end = t + m == len(rewards)
    infos = full.get("infos") or [{}] * (len(rewards) + 1)
    return {
        "obs": full["obs"][t],
        "actions": full["actions"][t],
        "rewards": sum(gamma**k * float(np.float32(rewards[t + k])) for k in range(m)),
        "next_obs": full["obs"][t + m],
        "n_step": m,
        "discounts": gamma**m,
        "terminateds": at_end and full["end"] == "terminated",
        "truncateds": at_end and full["end"] == "truncated",
        "infos": infos[t + m] or {},
        **{key: values[t] for key, values in full.get("extras", {}).items()},
    }


def _check_transitions(buf: Any, stored: dict[Any, dict[str, Any]], gamma: float = 0.5) -> None:
    """Every stored item's transition, for n of 1 to 3, against the reference episodes."""
    assert buf.get_episode_ids() == list(stored)
    extras = any("extras" in full for full in stored.values())
    for id_, full in stored.items():
        indices = buf.get_episode_indices(id_)
        assert len(indices) == len(full["rewards"])
        for n in (1, 2, 3):
            batch = buf.get_transitions(
                indices,
                n_step=n,
                gamma=gamma,
                include_infos=True,
                include_extra_model_outputs=extras,
            )
            assert batch["rewards"].dtype == np.float32 and batch["discounts"].dtype == np.float32
            assert batch["indices"].tolist() == indices.tolist()
            for t in range(len(indices)):  # row t of the batch: step t
                want = _expected(full, t, n, gamma)
                for key, value in want.items():
                    got = batch[key][t]
                    if key in ("rewards", "discounts"):
                        assert got == np.float32(value), (id_, t, n, key)
                    else:
                        assert np.array_equal(got, value), (id_, t, n, key, got, value)


# ------------------------------------------------------------------ replay.transitions


@pytest.mark.parametrize("cls", BUFFERS)
def test_discounts_are_float32_powers_of_gamma(cls):
    # Mutant: ``discounts`` left as numpy's float64 powers (no ``astype(np.float32)``).
    buf = cls(100)
    buf.add(_episode("a", [0.0, 1.0, 2.0, 3.0], end="terminated", rewards=[1.0, 2.0, 4.0]))
    buf.add(_episode("b", [5.0, 6.0, 7.0], end="truncated", rewards=[0.5, 0.25]))
    _check_transitions(
        buf,
        {
            "a": {
                "obs": [0, 1, 2, 3],
                "actions": [0] * 3,
                "rewards": [1, 2, 4],
                "end": "terminated",
            },
            "b": {"obs": [5, 6, 7], "actions": [0] * 2, "rewards": [0.5, 0.25], "end": "truncated"},
        },
        gamma=0.1,  # float64 and float32 powers of 0.1 differ
    )
    batch = buf.sample(8, n_step=2, gamma=0.1)
    assert batch["discounts"].dtype == np.float32


# ------------------------------------------------------------------ replay.ingest / adding


def _stored(buf: Any) -> dict[Any, tuple[Any, ...]]:
    """Each stored episode as ``(t_started, observations, rewards, terminated, truncated)``."""
    return {
        ep.id_: (
            ep.t_started,
            np.asarray(ep.get_observations()).tolist(),
            np.asarray(ep.get_rewards()).tolist(),
            ep.is_terminated,
            ep.is_truncated,
        )
        for ep in buf.get_episodes()
    }


def _a(obs: list[float], t0: int = 0, end: str = "") -> SingleAgentEpisode:
    return _episode("a", obs, t0=t0, end=end)


def _b(obs: list[float], t0: int = 0, end: str = "") -> SingleAgentEpisode:
    return _episode("b", obs, t0=t0, end=end)


# (name, capacity, [(chunks, on_evicted), ...], stored episodes, evicted ids); one add per item.
ENDING_CASES = [
    (
        # Mutant: only a terminated chunk without steps counts as an episode's end.
        "a truncating end of a stored episode",
        10,
        [([_a([0, 1, 2])], "raise"), ([_a([2], t0=2, end="truncated")], "raise")],
        {"a": (0, [0, 1, 2], [1, 1], False, True)},
        [],
    ),
    (
        # Mutant: an end is kept only for an id stored or evicted before the add.
        "an end of an episode begun in the same add",
        10,
        [([_a([0, 1, 2]), _a([2], t0=2, end="terminated")], "raise")],
        {"a": (0, [0, 1, 2], [1, 1], True, False)},
        [],
    ),
    (
        # Mutant: an end is kept only for an id begun in the add or evicted.
        "an end of an episode stored by an earlier add",
        10,
        [
            ([_a([0, 1, 2])], "raise"),
            ([_b([5, 6])], "raise"),
            ([_a([2], t0=2, end="terminated")], "raise"),
        ],
        {"a": (0, [0, 1, 2], [1, 1], True, False), "b": (0, [5, 6], [1], False, False)},
        [],
    ),
    (
        # Mutant (ingest.plan_add): a chunk without steps of an id in ``evicted`` is dropped
        # even where an earlier chunk of the same add restarted the episode under that id.
        "an end of an episode restarted in the same add",
        2,
        [
            ([_a([0, 1, 2])], "raise"),
            ([_b([0, 1, 2])], "raise"),  # 4 steps > 2: a goes
            ([_a([2, 3], t0=2), _a([3], t0=3, end="terminated")], "restart"),  # 3 > 2: b goes
        ],
        {"a": (2, [2, 3], [1], True, False)},
        ["b"],
    ),
]


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize(
    "name, capacity, adds, stored, evicted", ENDING_CASES, ids=[c[0] for c in ENDING_CASES]
)
def test_chunks_without_steps_end_their_episode(cls, name, capacity, adds, stored, evicted):
    buf = cls(capacity)
    for chunks, on_evicted in adds:
        buf.add(chunks, on_evicted=on_evicted)
    assert _stored(buf) == stored
    assert buf.get_evicted_ids() == evicted


@pytest.mark.parametrize("cls", BUFFERS)
def test_an_end_of_an_evicted_episode_is_refused_by_default(cls):
    # Mutant: a chunk without steps is kept only for an id begun or stored, so the end of an
    # evicted episode was skipped silently instead of refused.
    buf = cls(2)
    buf.add(_a([0, 1, 2]))
    buf.add(_b([0, 1, 2]))  # 4 steps > 2: a goes
    with pytest.raises(EvictedEpisodeError, match="'a'"):
        buf.add(_a([2], t0=2, end="terminated"))
    assert _stored(buf) == {"b": (0, [0, 1, 2], [1, 1], False, False)}


def _full(length: int, base: float, end: str) -> dict[str, Any]:
    """A whole episode's reference lists: observations, infos and an extra that differ per t."""
    return {
        "obs": [np.float32(base + t) for t in range(length + 1)],
        "actions": [t % 3 for t in range(length)],
        "rewards": [base / 8 + t for t in range(length)],
        "infos": [{"t": int(base) + t} if t % 2 else {} for t in range(length + 1)],
        "extras": {"logp": [np.float32(-base - t) for t in range(length)]},
        "end": end,
    }


def _cut(id_: Any, full: dict[str, Any], a: int, b: int) -> SingleAgentEpisode:
    """Steps ``[a, b)`` of a reference episode as a chunk; the last one carries the end."""
    last = b == len(full["rewards"])
    return _episode(
        id_,
        full["obs"][a : b + 1],
        t0=a,
        end=full["end"] if last else "",
        actions=full["actions"][a:b],
        rewards=full["rewards"][a:b],
        infos=full["infos"][a : b + 1],
        extras={key: values[a:b] for key, values in full["extras"].items()},
    )


# (name, {id: (length, end)}, cuts per id): chunks of all episodes added in turn, so that
# the episodes' steps interleave in the store.
INTERLEAVED_CASES = [
    ("two terminated", {"a": (5, "terminated"), "b": (4, "terminated")}, [2, 3]),
    (
        "truncated and ongoing",
        {"a": (6, "truncated"), "b": (3, ""), "c": (4, "terminated")},
        [1, 4],
    ),
    ("one step chunks", {"a": (4, ""), "b": (4, "truncated")}, [1, 2, 3]),
]


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize(
    "name, episodes, cuts", INTERLEAVED_CASES, ids=[c[0] for c in INTERLEAVED_CASES]
)
def test_interleaved_transitions_match_the_reference(cls, name, episodes, cuts):
    # Mutants: extra model outputs (or infos) read at the window's last step instead of o_t
    # (or of the next observation).
    stored = {
        id_: _full(length, 10.0 * (i + 1), end)
        for i, (id_, (length, end)) in enumerate(episodes.items())
    }
    buf = cls(1000)
    for a, b in zip([0, *cuts], [*cuts, 99]):
        buf.add(
            [
                _cut(id_, full, a, min(b, len(full["rewards"])))
                for id_, full in stored.items()
                if a < len(full["rewards"])
            ]
        )
    _check_transitions(buf, stored)


@pytest.mark.parametrize("cls", BUFFERS)
def test_nested_extras_of_flat_observations_and_actions_come_back_nested(cls):
    # Mutant: the batch is unpacked only for record observations or actions (``nested and
    # any(...)``), so an LSTM's ``(h, c)`` extra of a flat episode came back as records.
    state = [(np.full(2, t, np.float32), np.full(3, -t, np.float32)) for t in range(3)]
    buf = cls(100)
    buf.add(_episode("a", [0.0, 1.0, 2.0, 3.0], extras={"state": state}, end="terminated"))
    batch = buf.get_transitions(
        buf.get_episode_indices("a"), n_step=2, include_extra_model_outputs=True
    )
    h, c = batch["state"]
    assert h.tolist() == [[0, 0], [1, 1], [2, 2]] and c.tolist() == [[0] * 3, [-1] * 3, [-2] * 3]
    h, c = buf.sample(4, include_extra_model_outputs=True)["state"]
    assert h.shape == (4, 2) and c.shape == (4, 3)


@pytest.mark.parametrize("cls", BUFFERS)
def test_an_extra_named_weights_is_refused_when_sampled(cls):
    # Mutant: ``weights`` not reserved, so the extra was silently replaced by the weights.
    buf = cls(100)
    buf.add(_episode("a", [0.0, 1.0, 2.0], extras={"weights": [5.0, 6.0]}))
    with pytest.raises(ValueError, match="'weights' has the name of a batch column"):
        buf.get_transitions([0, 1], include_extra_model_outputs=True)
    with pytest.raises(ValueError, match="'weights' has the name of a batch column"):
        buf.sample(2, include_extra_model_outputs=True)
    assert buf.get_transitions([0, 1])["weights"].tolist() == [1.0, 1.0]  # without extras: fine


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("gamma", [1e-200, 1e-30, 5e-324])
def test_discounts_below_float_range_are_quiet_zeros(cls, gamma):
    # Mutant: underflow not ignored (``np.errstate(under="raise")``): gamma ** n past the
    # smallest float is a FloatingPointError instead of a discount of 0.
    buf = cls(100)
    buf.add(_episode("a", [0.0, 1.0, 2.0, 3.0], rewards=[1.0, 2.0, 4.0], end="terminated"))
    batch = buf.get_transitions(buf.get_episode_indices("a"), n_step=3, gamma=gamma)
    assert batch["discounts"].dtype == np.float32
    assert batch["discounts"].tolist() == [np.float32(gamma**m) for m in (3, 2, 1)]
    assert batch["rewards"].tolist() == [
        np.float32(sum(gamma**k * r for k, r in enumerate([1.0, 2.0, 4.0][t:]))) for t in range(3)
    ]


BOX1, BOX2 = gym.spaces.Box(0, 1, (), np.float32), gym.spaces.Box(0, 2, (), np.float32)
TWO, THREE = gym.spaces.Discrete(2), gym.spaces.Discrete(3)

# (name, [[(id, t0, obs, observation_space, action_space, end), ...] per add], spaces wanted)
SPACE_CASES = [
    (
        # Mutant: the search stops once either space is found (``or``), so the action space
        # of a later chunk was never taken.
        "each space from the first chunk that has it",
        [[("a", 0, [0.0, 1.0], BOX1, None, ""), ("b", 0, [0.5, 0.5], BOX2, THREE, "")]],
        (BOX1, THREE),
    ),
    (
        # Mutant: the observation space of every chunk looked at replaced the one found.
        "the first observation space stays",
        [[("a", 0, [0.0, 1.0], BOX1, None, ""), ("b", 0, [0.5, 0.5], None, THREE, "")]],
        (BOX1, THREE),
    ),
    (
        "the first action space stays",
        [[("a", 0, [0.0, 1.0], None, TWO, ""), ("b", 0, [0.5, 0.5], BOX2, THREE, "")]],
        (BOX2, TWO),
    ),
    (
        "spaces of later adds fill what earlier ones lacked",
        [[("a", 0, [0.0, 1.0], None, TWO, "")], [("b", 0, [0.5, 0.5], BOX2, THREE, "")]],
        (BOX2, TWO),
    ),
    (
        # Mutant: a chunk without steps that ends its episode brought no spaces.
        "an episode's end brings the spaces the buffer lacked",
        [[("a", 0, [0.0, 1.0], None, None, "")], [("a", 1, [1.0], BOX1, TWO, "terminated")]],
        (BOX1, TWO),
    ),
]


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("name, adds, spaces", SPACE_CASES, ids=[c[0] for c in SPACE_CASES])
def test_sampled_episodes_carry_the_adopted_spaces(cls, name, adds, spaces):
    buf = cls(100)
    for chunks in adds:
        buf.add(
            [
                _episode(id_, obs, t0=t0, end=end, observation_space=o, action_space=a)
                for id_, t0, obs, o, a, end in chunks
            ]
        )
    for ep in buf.get_episodes():
        assert (ep.observation_space, ep.action_space) == spaces


@pytest.mark.parametrize("cls", BUFFERS)
def test_a_users_space_changed_after_add_leaves_the_buffer_unchanged(cls):
    # Mutant: a newly adopted space kept as the user's object (copied only when already kept).
    box = gym.spaces.Box(np.zeros(2, np.float32), np.ones(2, np.float32))
    buf = cls(100)
    buf.add(_episode("a", [np.zeros(2, np.float32)] * 3, observation_space=box))
    box.high[:] = 7.0  # the user's object, changed in place
    buf.add(_episode("b", [np.zeros(2, np.float32)] * 2, observation_space=box))
    for ep in buf.get_episodes():
        assert ep.observation_space.high.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize(
    "bad",
    [np.array("drop"), np.array("raise"), ["drop"], b"drop"],
    ids=["0-d array", "0-d raise", "list", "bytes"],
)
def test_on_evicted_takes_only_its_strings(cls, bad):
    # Mutant: ``value in ON_EVICTED`` without the str check took a 0-d array equal to a name.
    buf = cls(2)
    buf.add(_a([0, 1, 2]))
    with pytest.raises(ValueError, match="on_evicted must be"):
        buf.add(_b([0, 1, 2]), on_evicted=bad)
    assert _stored(buf) == {"a": (0, [0, 1, 2], [1, 1], False, False)}


class _Refusal(ValueError):
    """A user's ValueError subclass with an attribute its constructor needs."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class _RefusingEpisode(SingleAgentEpisode):
    """An episode whose infos getter refuses with the user's own error class."""

    def get_infos(self, *args: Any, **kwargs: Any) -> Any:
        raise _Refusal("infos are private", 7)


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("position", [0, 1])
def test_a_refusal_of_an_error_subclass_comes_through_as_it_is(cls, position):
    # Mutant: ``not isinstance(error, (TypeError, ValueError))``: a subclass was rebuilt from
    # its words as a plain message (here: its constructor's TypeError, the code lost).
    buf = cls(100)
    buf.add(_a([0, 1, 2]))
    bad = _RefusingEpisode(
        "b", observations=[0.0, 1.0], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )
    chunks = [_episode("c", [5.0, 6.0]), bad] if position else [bad, _episode("c", [5.0, 6.0])]
    with pytest.raises(_Refusal) as info:
        buf.add(chunks)
    assert str(info.value) == "infos are private" and info.value.code == 7
    assert _stored(buf) == {"a": (0, [0, 1, 2], [1, 1], False, False)}


def _steps(id_: Any, t0: int, n: int, end: str = "") -> SingleAgentEpisode:
    """``n`` steps of episode ``id_`` from ``t0``: observation ``t`` at time ``t``."""
    return _episode(id_, [float(t) for t in range(t0, t0 + n + 1)], t0=t0, end=end)


def _model(
    capacity: int, adds: list[list[tuple[Any, int, int]]]
) -> tuple[list[Any], list[Any], int]:
    """RLlib's rule in plain Python: after each chunk, evict the oldest while over capacity,
    keeping one; a chunk of an episode its own add evicted goes with it. Returns the stored
    ids, the evicted ids and the stored steps."""
    lengths: dict[Any, int] = {}
    evicted: list[Any] = []
    for chunks in adds:
        gone: set[Any] = set()
        for id_, _, n in chunks:
            if id_ in gone:
                continue
            lengths[id_] = lengths.get(id_, 0) + n
            while sum(lengths.values()) > capacity and len(lengths) > 1:
                victim = next(iter(lengths))
                del lengths[victim]
                gone.add(victim)
                evicted.append(victim)
    return list(lengths), evicted, sum(lengths.values())


# (name, capacity, adds of (id, t0, steps) chunks)
EVICTION_CASES = [
    # Mutant: a stored episode continued in the add, then evicted, counted with its stored
    # length only (not its state in the add): too many steps, one eviction too many.
    (
        "a continued stored episode evicted",
        5,
        [[("a", 0, 2), ("b", 0, 1)], [("a", 2, 3), ("c", 0, 3)]],
    ),
    # Mutant: an episode new in the add counted with no steps when evicted.
    ("new episodes evicted in their add", 5, [[("x", 0, 3), ("y", 0, 2), ("z", 0, 2)]]),
    ("old and new evicted in one add", 4, [[("a", 0, 2)], [("b", 0, 2), ("c", 0, 3), ("b", 2, 1)]]),
    ("exactly at capacity keeps all", 6, [[("a", 0, 2), ("b", 0, 2)], [("c", 0, 2)]]),
    ("one over capacity evicts the oldest", 5, [[("a", 0, 2), ("b", 0, 2)], [("c", 0, 2)]]),
    ("one episode over capacity stays", 2, [[("a", 0, 3)], [("a", 3, 2)]]),
    # Mutant: the stored episodes left not counted down, so once every stored one was gone
    # the one new episode left was evicted too.
    ("a new episode over capacity alone stays", 2, [[("a", 0, 1)], [("b", 0, 3)]]),
    ("two stored, then one new over capacity", 3, [[("a", 0, 1), ("b", 0, 1)], [("c", 0, 4)]]),
    ("the stored go before the new", 6, [[("a", 0, 1), ("b", 0, 1)], [("c", 0, 3), ("d", 0, 3)]]),
    (
        "a victim's later chunks go with it",
        3,
        [[("a", 0, 2)], [("b", 0, 2), ("a", 2, 1), ("c", 0, 1), ("a", 3, 2)]],
    ),
]


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("name, capacity, adds", EVICTION_CASES, ids=[c[0] for c in EVICTION_CASES])
def test_evictions_match_the_model(cls, name, capacity, adds):
    buf = cls(capacity)
    for chunks in adds:
        buf.add([_steps(id_, t0, n) for id_, t0, n in chunks])
    ids, evicted, steps = _model(capacity, adds)
    assert buf.get_episode_ids() == ids
    assert buf.get_evicted_ids() == evicted
    assert buf.get_num_timesteps() == steps
    assert buf.get_added_timesteps() == sum(n for chunks in adds for _, _, n in chunks)
    stored = _stored(buf)
    for id_ in ids:
        t_started, obs, _, _, _ = stored[id_]
        assert obs == [float(t) for t in range(t_started, t_started + len(obs))]


# (name, capacity, chunks added first, (chunks, on_evicted) refused with ValueError, words)
REFUSED_CASES = [
    (
        # Mutant: a stored episode continued in the add recorded as done only when
        # terminated: a chunk after its truncated continuation was appended.
        "a chunk after a truncated continuation in the same add",
        10,
        [[_steps("a", 0, 2)]],
        ([_steps("a", 2, 1, "truncated"), _steps("a", 3, 1)], "raise"),
        "already done",
    ),
    (
        # Mutant: only a chunk starting after the stored end counted as a gap: one that
        # overlaps the stored steps was appended.
        "a chunk overlapping the stored steps",
        10,
        [[_steps("a", 0, 2)]],
        ([_steps("a", 1, 2)], "raise"),
        "starts at t=1, but the buffer holds it up to t=2",
    ),
    (
        "a chunk after a gap",
        10,
        [[_steps("a", 0, 2)]],
        ([_steps("a", 3, 1)], "raise"),
        "starts at t=3, but the buffer holds it up to t=2",
    ),
    (
        # Mutant: an episode new in the add recorded as done only when terminated.
        "a chunk after a truncated new episode's end",
        10,
        [],
        ([_steps("a", 0, 2, "truncated"), _steps("a", 2, 1)], "raise"),
        "already done",
    ),
    (
        # Mutant: a chunk of an evicted episode checked afresh (joining itself) even where an
        # earlier chunk of the add dropped the same episode: a gap between them went through.
        "a gap between two dropped chunks of an evicted episode",
        2,
        [[_steps("a", 0, 2)], [_steps("b", 0, 2)]],
        ([_steps("a", 2, 1), _steps("a", 4, 1)], "drop"),
        "starts at t=4",
    ),
    (
        # Mutant: chunks going with an episode their add evicted were not checked at all.
        "a gap after the add evicted the episode",
        3,
        [[_steps("a", 0, 2)]],
        ([_steps("b", 0, 2), _steps("a", 3, 1)], "raise"),
        "starts at t=3",
    ),
    (
        "another border after the add evicted the episode",
        3,
        [[_steps("a", 0, 2)]],
        ([_steps("b", 0, 2), _episode("a", [9.0, 3.0], t0=2)], "raise"),
        "differs",
    ),
    (
        # Mutant: a restarted chunk without steps skipped rather than ending the dropped
        # episode, so a later chunk of it started the episode anew.
        "a chunk after a restarted evicted episode's end",
        2,
        [[_steps("a", 0, 2)], [_steps("b", 0, 2)]],
        ([_steps("a", 2, 0, "terminated"), _steps("a", 2, 1)], "restart"),
        "already done",
    ),
]


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize(
    "name, capacity, before, refused, words", REFUSED_CASES, ids=[c[0] for c in REFUSED_CASES]
)
def test_refused_adds_change_nothing(cls, name, capacity, before, refused, words):
    buf = cls(capacity)
    for chunks in before:
        buf.add(chunks)
    stored, evicted, added = _stored(buf), buf.get_evicted_ids(), buf.get_added_timesteps()
    chunks, on_evicted = refused
    with pytest.raises(ValueError, match=words):
        buf.add(chunks, on_evicted=on_evicted)
    assert _stored(buf) == stored and buf.get_evicted_ids() == evicted
    assert buf.get_added_timesteps() == added


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("end", ["", "terminated"])
def test_chunks_without_steps_that_end_nothing_are_ignored(cls, end):
    # Mutant: chunks without steps read as chunks: one of a stored episode at another time
    # (or with another observation) was refused instead of skipped.
    buf = cls(10)
    buf.add(_steps("a", 0, 2))
    before = _stored(buf)
    buf.add([_episode("a", [7.0], t0=5), _episode("z", [1.0], t0=0, end=end)])
    buf.add(_episode("a", [7.0], t0=0))
    assert _stored(buf) == before and buf.get_added_timesteps() == 2


@pytest.mark.parametrize("cls", BUFFERS)
def test_an_end_without_an_observation_is_a_value_error(cls):
    # Mutant: the end's observation not checked: the refusal was the rows' TypeError.
    buf = cls(10)
    buf.add(_steps("a", 0, 1))
    end = SingleAgentEpisode("a", t_started=1, terminated=True, len_lookback_buffer=0)
    with pytest.raises(ValueError, match="holds no observation"):
        buf.add([_steps("b", 0, 1), end])
    assert _stored(buf) == {"a": (0, [0.0, 1.0], [1.0], False, False)}


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# (name, t_started, steps): the chunk's times t_started .. t_started + steps fit int64.
INT64_EDGES = [
    # Mutant: ``_INT64_MIN < t0``: the smallest time refused.
    ("starts at the smallest time", INT64_MIN, 2),
    # Mutant: ``t0 + n < _INT64_MAX``: an episode ending at the largest time refused.
    ("ends at the largest time", INT64_MAX - 2, 2),
    ("one step at the largest time", INT64_MAX - 1, 1),
]


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("name, t0, steps", INT64_EDGES, ids=[c[0] for c in INT64_EDGES])
def test_times_at_the_int64_edges_are_stored(cls, name, t0, steps):
    buf = cls(10)
    buf.add(_episode("a", [float(k) for k in range(steps + 1)], t0=t0))
    (ep,) = buf.get_episodes()
    assert ep.t_started == t0 and len(ep) == steps
    assert buf.locate("a", [t0, t0 + steps - 1]).tolist() == [0, steps - 1]


# (name, t_started, steps): a time past int64.
INT64_PAST = [
    ("starts below the smallest time", INT64_MIN - 1, 1),
    ("ends past the largest time", INT64_MAX - 1, 2),
    # Mutant: times checked as ``t_started .. t_started`` (the steps left out).
    ("starts at the largest time", INT64_MAX, 1),
]


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("name, t0, steps", INT64_PAST, ids=[c[0] for c in INT64_PAST])
def test_times_past_int64_are_refused(cls, name, t0, steps):
    buf = cls(10)
    buf.add(_steps("b", 0, 1))
    with pytest.raises(ValueError, match="leave int64"):
        buf.add(_episode("a", [float(k) for k in range(steps + 1)], t0=t0))
    assert buf.get_episode_ids() == ["b"]


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("same_add", [False, True], ids=["later add", "same add"])
def test_an_episodes_end_joins_its_custom_data(cls, same_add):
    # Mutant: a chunk without steps that ends its episode brought no metadata, so its
    # custom_data keys were lost (``concat_episode`` merges them, a later chunk's winning).
    head, end = _steps("a", 0, 2), _steps("a", 2, 0, "terminated")
    head.custom_data.update(seed=1, k="head")
    end.custom_data.update(k="end", done_by="env")
    buf = cls(10)
    if same_add:
        buf.add([head, end])
    else:
        buf.add(head)
        buf.add(end)
    (ep,) = buf.get_episodes()
    assert ep.is_terminated
    assert ep.custom_data == {"seed": 1, "k": "end", "done_by": "env"}
    assert head.custom_data == {"seed": 1, "k": "head"}  # the chunks' own are left alone


@pytest.mark.parametrize("cls", BUFFERS)
def test_falsy_infos_that_are_not_empty_dicts_come_back_as_recorded(cls):
    # Mutant: every falsy info (``not info``) stored as "empty", read back as a new ``{}``.
    from collections import OrderedDict

    infos = [{}, 0, [], "", OrderedDict(), None]
    buf = cls(10)
    buf.add(_episode("a", [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], infos=infos))
    batch = buf.get_transitions(buf.get_episode_indices("a"), include_infos=True)
    got = list(batch["infos"])  # the info of each step's next observation
    assert got == [0, [], "", OrderedDict(), {}]
    assert [type(info) for info in got] == [int, list, str, OrderedDict, dict]
    (ep,) = buf.get_episodes()
    assert list(ep.get_infos()) == [{}, 0, [], "", OrderedDict(), {}]


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("key", [0, ("a",), b"logp"], ids=["int", "tuple", "bytes"])
def test_extra_model_output_keys_must_be_strings(cls, key):
    # Mutant: the key check dropped: ``0`` was stored as the column "0" (one with "0").
    buf = cls(10)
    buf.add(_steps("b", 0, 1))
    with pytest.raises(TypeError, match="must be a str"):
        buf.add(_episode("a", [0.0, 1.0, 2.0], extras={key: [1.0, 2.0]}))
    assert buf.get_episode_ids() == ["b"]


@pytest.mark.parametrize("cls", BUFFERS)
def test_empty_infos_are_kept_as_none_in_the_state(cls):
    # Mutant: only None counted as empty: a ``{}`` was kept as a dict (docs/replay.md: an info
    # that is None or ``{}`` is kept as None, read back as a new ``{}``).
    buf = cls(10)
    buf.add(_episode("a", [0.0, 1.0, 2.0, 3.0], infos=[{}, {"k": 1}, None, {}]))
    state = buf.get_state()
    assert list(state["steps"]["infos"]) == [None, {"k": 1}, None]
    assert list(state["episodes"]["final_info"]) == [None]
    again = cls(10)
    again.set_state(state)
    (ep,) = again.get_episodes()
    assert list(ep.get_infos()) == [{}, {"k": 1}, {}, {}]


def _edited(column: str, edit: str) -> SingleAgentEpisode:
    """A two-step chunk with one of its columns changed in place afterwards (one item more or
    less than its steps ask)."""
    ep = _episode("a", [0.0, 1.0, 2.0], extras={"v": [0.5, 0.25]})
    buffer = ep.actions if column == "actions" else ep.extra_model_outputs["v"]
    if edit == "append":
        buffer.append(buffer.get(-1))
    else:
        buffer.pop()
    return ep


# (name, column, edit, rows found)
MISCOUNTED = [
    # Mutant: ``len(rows) > count`` only: a column one row short was stored.
    ("an action short", "actions", "pop", 1),
    # Mutant: ``len(rows) < count`` only: a column one row long was stored.
    ("an action too many", "actions", "append", 3),
    ("an extra short", "extras", "pop", 1),
    ("an extra too many", "extras", "append", 3),
]


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("name, column, edit, rows", MISCOUNTED, ids=[c[0] for c in MISCOUNTED])
def test_columns_of_another_length_than_the_steps_are_refused(cls, name, column, edit, rows):
    buf = cls(10)
    buf.add(_steps("b", 0, 1))
    with pytest.raises(TypeError, match=f"{rows} rows, expected 2"):
        buf.add(_edited(column, edit))
    assert _stored(buf) == {"b": (0, [0.0, 1.0], [1.0], False, False)}


def _rewarded(rewards: list[Any], extra: Any = None) -> SingleAgentEpisode:
    """A two-step chunk with the given rewards (one more appended in place when ``extra``)."""
    ep = _episode("a", [0.0, 1.0, 2.0], rewards=rewards)
    if extra is not None:
        ep.rewards.append(extra)
    return ep


# (name, chunk, words of the TypeError)
REFUSED_REWARDS = [
    # Mutant: array items not set apart from scalars: the words blamed the array's type.
    (
        "a 0-d array beside an int past int64",
        lambda: _rewarded([np.array(1.0), 2**70]),
        "numeric arrays only",
    ),
    # Mutant: the scalars' count not checked: three rewards were taken for two steps.
    ("ints past int64, one too many", lambda: _rewarded([1, 2**70], 2**70), "numeric arrays only"),
    ("a string beside an int past int64", lambda: _rewarded(["1", 2**70]), "real numbers"),
]


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("name, make, words", REFUSED_REWARDS, ids=[c[0] for c in REFUSED_REWARDS])
def test_rewards_that_are_no_scalars_per_step_are_refused(cls, name, make, words):
    buf = cls(10)
    buf.add(_steps("b", 0, 1))
    with pytest.raises(TypeError, match=words):
        buf.add(make())
    assert _stored(buf) == {"b": (0, [0.0, 1.0], [1.0], False, False)}
    assert buf.get_added_timesteps() == 1


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("head, tail", [(np.float64, np.float32), (np.float32, np.float64)])
def test_a_nested_border_joins_in_the_spaces_dtypes(cls, head, tail):
    # Mutant: a nested border compared leaf by leaf in the column's dtypes only (the space's
    # comparison dropped): a float32 tail of a float64 head in a float32 Box was refused.
    space = gym.spaces.Dict({"x": gym.spaces.Box(-1, 1, (), np.float32)})

    def chunk(values: list[float], dtype: Any, t0: int) -> SingleAgentEpisode:
        obs = [{"x": np.asarray(v, dtype)} for v in values]
        return _episode("a", obs, t0=t0, observation_space=space)

    buf = cls(100)
    buf.add(chunk([0.5, 0.1], head, 0))
    buf.add(chunk([0.1, 0.2], tail, 1))
    assert buf.get_episode_ids() == ["a"] and buf.get_num_timesteps() == 2
    with pytest.raises(ValueError, match="differs from the one the buffer holds"):
        buf.add(chunk([0.3, 0.4], tail, 2))


NAN = float("nan")

# (name, head observations, tail observations): the tail starts with the head's last one.
JOINED_BORDERS = [
    # Mutant: a nested border joined only where a space was declared too (``and``).
    ("a nested border without a space", [{"x": 0.5}, {"x": 0.25}], [{"x": 0.25}, {"x": 1.0}]),
    # Mutant: float borders compared with np.array_equal: a NaN border was refused.
    ("a NaN border", [0.5, NAN], [NAN, 1.0]),
    # Mutant: only real floats compared NaN-equal: a complex NaN border was refused.
    ("a complex NaN border", [0.5 + 1j, complex(NAN, 1.0)], [complex(NAN, 1.0), 2j]),
    ("a nested NaN border", [{"x": 0.5}, {"x": NAN}], [{"x": NAN}, {"x": 1.0}]),
]


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("name, head, tail", JOINED_BORDERS, ids=[c[0] for c in JOINED_BORDERS])
def test_equal_borders_join(cls, name, head, tail):
    buf = cls(100)
    buf.add(_episode("a", head))
    buf.add(_episode("a", tail, t0=1))
    assert buf.get_episode_ids() == ["a"] and buf.get_num_timesteps() == 2
    (ep,) = buf.get_episodes()
    assert len(ep) == 2 and ep.t_started == 0


@pytest.mark.parametrize("cls", BUFFERS)
def test_an_end_past_int64_is_refused_for_its_time(cls):
    # Mutant: an end's time not checked against int64: refused only as a gap, in other words.
    buf = cls(10)
    buf.add(_steps("a", 0, 2))
    with pytest.raises(ValueError, match="leave int64"):
        buf.add(_episode("a", [2.0], t0=INT64_MAX + 1, end="terminated"))
    assert _stored(buf) == {"a": (0, [0.0, 1.0, 2.0], [1.0, 1.0], False, False)}
