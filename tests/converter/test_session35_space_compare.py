"""Equal but distinct space objects are compared once per object, with the same outcomes.

Chunks unpickled one by one, or the samples of several workers, carry equal copies of one
space. The converter compared them with ``==`` once per chunk (and per call site), each
``==`` of a Dict of Boxes an ``np.allclose`` per leaf; now each ordered pair of objects is
compared once per call (:class:`episodes.converter.alike.SpaceMatch`). The refusals and the
results must not change: the table below gives the same messages whether the chunks share
one space object or each holds its own copy.
"""

from __future__ import annotations

import copy
import pickle
import re

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_batch, episodes_to_rollout
from episodes.converter.alike import SpaceMatch, agreed_space, same_space

GAMMA = 0.9
BOX2 = gym.spaces.Box(-10, 10, (2,), np.float32)
OTHER_BOX2 = gym.spaces.Box(-5, 5, (2,), np.float32)
BOX1 = gym.spaces.Box(-1, 1, (1,), np.float32)
INTS = [[0, 1], [1, 1], [2, 1], [3, 1]]
FLOATS = [[0.5, 1.5], [1.5, 1.5], [2.5, 1.5], [3.5, 1.5]]


def chunk(id_, obs, actions=(0, 1, 0), *, t0=0, done=False, **kw):
    n = len(actions)
    return SingleAgentEpisode(
        id_,
        observations=list(obs[: n + 1]),
        actions=list(actions),
        rewards=[1.0] * n,
        extra_model_outputs={"vf_preds": [0.0] * n, "action_logp": [0.0] * n},
        terminated=done,
        t_started=t0,
        len_lookback_buffer=0,
        **kw,
    )


def zeros(o):
    while isinstance(o, (dict, tuple, list)):
        o = next(iter(o.values())) if isinstance(o, dict) else o[0]
    return np.zeros(len(o))


def own_spaces(groups):
    """The same chunks, each pickled alone: each holds its own (equal) copy of its spaces."""
    out = [[pickle.loads(pickle.dumps(c)) for c in g] for g in groups]
    chunks = [c for g in out for c in g]
    spaces = [c.observation_space for c in chunks if c.observation_space is not None]
    assert len({id(s) for s in spaces}) == len(spaces)
    return out


# name -> (groups builder, layout, message pattern): one chunk or env unlike the rest
REFUSED = {
    "env 4's actions Discrete, the others Box": (
        lambda: [
            *[[chunk(f"e{k}", FLOATS, [[0.0], [1.0], [0.5]], action_space=BOX1)] for k in range(4)],
            [chunk("odd", FLOATS, [0, 1, 0], action_space=gym.spaces.Discrete(2))],
        ],
        "per_env",
        r"actions: env 0 \(episode 'e0'\) .* env 4 \(episode 'odd'\) .*declared spaces differ",
    ),
    "env 3's observations of another Box": (
        lambda: [
            *[[chunk(f"e{k}", INTS, observation_space=BOX2)] for k in range(3)],
            [chunk("odd", FLOATS, observation_space=OTHER_BOX2)],
        ],
        "per_env",
        r"observations: env 0 \(episode 'e0'\) .* env 3 \(episode 'odd'\) .*spaces differ",
    ),
    "an env's 4th chunk of another Box": (
        lambda: [
            [
                *[chunk(f"c{k}", INTS, t0=0, done=True, observation_space=BOX2) for k in range(3)],
                chunk("odd", FLOATS, observation_space=OTHER_BOX2),
            ],
            [
                *[chunk(f"d{k}", INTS, done=True, observation_space=BOX2) for k in range(3)],
                chunk("d3", INTS, observation_space=BOX2),
            ],
        ],
        "per_env",
        r"observations: env 0's chunk of episode 'c0' \(t=0\) .*its chunk of episode 'odd' "
        r"\(t=0\) .*declared spaces differ",
    ),
    "per_chunk: the 5th chunk's observations of another Box": (
        lambda: [
            *[[chunk(f"e{k}", INTS, observation_space=BOX2)] for k in range(4)],
            [chunk("odd", FLOATS, observation_space=OTHER_BOX2)],
        ],
        "per_chunk",
        r"observations: column 0 \(episode 'e0'\) .* column 4 \(episode 'odd'\) .*spaces differ",
    ),
    "spaceless 3rd env among envs of one Box": (
        lambda: [
            *[[chunk(f"e{k}", INTS, observation_space=BOX2)] for k in range(2)],
            [chunk("odd", [np.array(o) for o in FLOATS])],
        ],
        "per_env",
        r"observations: env 0 \(episode 'e0'\) .* env 2 \(episode 'odd'\) .*dtypes/kinds differ",
    ),
}


def _refusal(groups, layout):
    if layout == "per_chunk":
        groups = [c for g in groups for c in g]
    with pytest.raises(ValueError) as info:
        episodes_to_rollout(groups, gamma=GAMMA, value_fn=zeros, layout=layout)
    return str(info.value)


@pytest.mark.parametrize("case", REFUSED)
def test_refusals_are_the_same_with_distinct_equal_space_objects(case):
    make, layout, pattern = REFUSED[case]
    shared = _refusal(make(), layout)
    assert re.search(pattern, shared), shared
    assert _refusal(own_spaces(make()), layout) == shared


# name -> (groups builder, field): ints and floats under equal spaces join as numpy promotes
JOINED = {
    "obs of 4 envs": (
        lambda: [
            [chunk(f"e{k}", INTS if k % 2 else FLOATS, observation_space=BOX2)] for k in range(4)
        ],
        "observations",
    ),
    "obs of an env's 3 chunks": (
        lambda: [
            [
                chunk("a", INTS, done=True, observation_space=BOX2),
                chunk("b", FLOATS, done=True, observation_space=BOX2),
                chunk("c", INTS, observation_space=BOX2),
            ]
        ],
        "observations",
    ),
    "Box actions of 3 envs": (
        lambda: [
            [
                chunk(
                    f"e{k}",
                    [np.array(o) for o in FLOATS],
                    [[0], [1], [0]] if k else [[0.5], [1.5], [0.0]],
                    action_space=BOX1,
                )
            ]
            for k in range(3)
        ],
        "actions",
    ),
}


@pytest.mark.parametrize("layout", ["per_env", "per_chunk"])
@pytest.mark.parametrize("case", JOINED)
def test_equal_copies_still_join_ints_and_floats(case, layout):
    make, field = JOINED[case]
    results = []
    for groups in (make(), own_spaces(make())):
        if layout == "per_chunk":
            groups = [c for g in groups for c in g]
        tensor = getattr(
            episodes_to_rollout(groups, gamma=GAMMA, value_fn=zeros, layout=layout).storage, field
        )
        assert tensor.dtype == torch.float64  # kinds not compared: one equal space
        results.append(tensor)
    torch.testing.assert_close(results[0], results[1], rtol=0, atol=0)


TUPLE = gym.spaces.Tuple((gym.spaces.Discrete(3), BOX1))


def tuple_chunk(id_, done=False):
    obs = [[k % 3, [0.5 * k]] for k in range(4)]  # recorded as lists: nested as the space says
    return chunk(id_, obs, done=done, observation_space=TUPLE)


def test_columns_nest_as_the_agreed_space_with_copies():
    chunks = [tuple_chunk("a"), tuple_chunk("b")]
    copies = own_spaces([chunks])[0]
    batch, batch2 = episodes_to_batch(chunks), episodes_to_batch(copies)
    assert isinstance(batch["obs"], tuple) and isinstance(batch2["obs"], tuple)
    for x, y in zip(batch["obs"], batch2["obs"]):
        np.testing.assert_array_equal(x, y)
    seen = []

    def obs_fn(o):
        seen.append(type(o))
        return o[1]

    for given in (chunks, copies):
        episodes_to_rollout([[c] for c in given], gamma=GAMMA, value_fn=zeros, obs_fn=obs_fn)
    assert seen == [tuple, tuple] * 2  # the columns and the bootstrap batch, nested alike


# Ordered pairs: np.allclose measures against its second argument, so == is not symmetric.
NEAR_A = gym.spaces.Box(100000.0, 200000.0, (1,), np.float64)
NEAR_B = gym.spaces.Box(100001.000005, 200000.0, (1,), np.float64)
PAIRS = [
    (BOX2, BOX2),
    (BOX2, copy.deepcopy(BOX2)),
    (BOX2, OTHER_BOX2),
    (NEAR_A, NEAR_B),
    (NEAR_B, NEAR_A),
    (None, None),
    (None, BOX2),
    (BOX2, None),
    (gym.spaces.Discrete(2), BOX1),
]


def test_space_match_is_plain_equality_in_the_order_given():
    assert (NEAR_A == NEAR_B) != (NEAR_B == NEAR_A)  # the case the order matters for
    match = SpaceMatch()
    for _ in range(2):  # the second round answers from the memo
        for a, b in PAIRS:
            assert match(a, b) == (a is b or bool(a == b)), (a, b)
            assert same_space(a, b, match) == same_space(a, b), (a, b)
    assert agreed_space([NEAR_A, NEAR_B]) is None  # NEAR_B == NEAR_A is asked, as before
    assert agreed_space([NEAR_B, NEAR_A]) is NEAR_B


def _dict_space(k):
    return gym.spaces.Dict({f"k{i:02d}": gym.spaces.Box(-1, 1, (2,), np.float32) for i in range(k)})


def _close_copy(space, j):
    """A copy equal to ``space`` by ``==`` (``allclose``), not bit for bit: copies equal bit
    for bit are matched by their exact keys without ``==`` (test_session36_exact_keys)."""
    space = copy.deepcopy(space)
    for part in space.spaces.values():
        for _ in range(j):
            part.low[...] = np.nextafter(part.low, np.float32(0))
    return space


@pytest.fixture
def counted(monkeypatch):
    """Counts of gymnasium's Dict and Box ``__eq__`` calls."""
    counts = {"Dict": 0, "Box": 0}
    for cls in (gym.spaces.Dict, gym.spaces.Box):
        original = cls.__eq__

        def counting(self, other, _original=original, _name=cls.__name__):
            counts[_name] += 1
            return _original(self, other)

        monkeypatch.setattr(cls, "__eq__", counting)
    return counts


def test_space_comparisons_grow_with_distinct_objects_not_chunks(counted):
    k, envs, workers = 8, 8, 4
    # Chunk j of every env comes from worker j, which holds its own copy of the space (as
    # unpickled samples do): 4 objects among 32 chunks.
    spaces = [_close_copy(_dict_space(k), j) for j in range(workers)]
    rng = np.random.default_rng(0)

    def obs():
        return [
            {f"k{i:02d}": rng.uniform(-1, 1, 2).astype(np.float32) for i in range(k)}
            for _ in range(4)
        ]

    groups = [
        [
            chunk(f"e{e}w{j}", obs(), done=j < workers - 1, observation_space=spaces[j])
            for j in range(workers)
        ]
        for e in range(envs)
    ]
    r = episodes_to_rollout(groups, gamma=GAMMA, value_fn=zeros)
    assert r.storage.observations["k00"].shape[:2] == (3 * workers, envs)
    # Worker 0's copy against each other once: 3 here, where every chunk was compared before
    # (at least envs * (workers - 1) = 24, a Box compare per leaf each).
    assert counted == {"Dict": workers - 1, "Box": (workers - 1) * k}, counted
    counted["Dict"] = counted["Box"] = 0
    batch = episodes_to_batch([c for g in groups for c in g])
    assert len(batch["obs"]["k00"]) == 3 * workers * envs
    assert counted == {"Dict": workers - 1, "Box": (workers - 1) * k}, counted
