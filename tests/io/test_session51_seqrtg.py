"""SequenceDataset(returns_to_go=gamma): each step's return to its run's end and env time.

Every item of a small dataset (episodes in several pieces, terminated, truncated and running
ones, one whose pieces leave steps out, a short one) is checked against a plain-Python sum
over the rewards as written, with and without padding, for gamma 1.0 and 0.9; the other
columns are those of the dataset without the keyword.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter
from episodes.io.torch_data import SequenceDataset

K = 3
# (code, pieces): each piece (t_started, steps, terminated, truncated). Code 4's pieces leave
# steps [3, 5) out: two runs, each with returns to its own end. Code 3 is shorter than K.
EPISODES = [
    (0, [(0, 4, False, False), (4, 3, False, False), (7, 3, True, False)]),
    (1, [(5, 3, False, False), (8, 4, False, True)]),
    (2, [(100, 6, False, False)]),  # running: returns so far
    (3, [(0, 2, True, False)]),
    (4, [(0, 3, False, False), (5, 4, True, False)]),
]
BASE_KEYS = {"obs", "actions", "rewards", "terminated", "truncated", "extra_model_outputs"}


def reward(code: int, t: int) -> float:
    """Integers and halves, both signs: their sums are exact in float64."""
    return float((code * 7 + t * 3) % 11 - 5) + 0.5 * (t % 2)


def runs() -> dict[tuple[int, int], int]:
    """(code, t) of every written step -> the env time its run ends at (exclusive)."""
    end_of = {}
    for code, pieces in EPISODES:
        start, stop = pieces[0][0], pieces[0][0]
        groups = []
        for t0, n, _, _ in pieces:
            if t0 != stop:
                groups.append((start, stop))
                start = t0
            stop = t0 + n
        groups.append((start, stop))
        for a, b in groups:
            end_of.update({(code, t): b for t in range(a, b)})
    return end_of


def reference(code: int, t: int, end: int, gamma: float) -> float:
    total, weight = 0.0, 1.0
    for j in range(t, end):
        total += weight * reward(code, j)
        weight *= gamma
    return total


def write(path, **kwargs) -> None:
    order = [(code, k) for k in range(3) for code, pieces in EPISODES if k < len(pieces)]
    with DatasetWriter(path, **kwargs) as w:  # pieces interleaved, as a runner writes them
        for code, k in order:
            t0, n, term, trunc = dict(EPISODES)[code][k]
            w.write(
                SingleAgentEpisode(
                    f"ep{code}",
                    observations=[np.array([code, t], np.float32) for t in range(t0, t0 + n + 1)],
                    actions=[code] * n,
                    rewards=[reward(code, t) for t in range(t0, t0 + n)],
                    extra_model_outputs={"logp": [np.float32(-t) for t in range(t0, t0 + n)]},
                    t_started=t0,
                    terminated=term,
                    truncated=trunc,
                    len_lookback_buffer=0,
                ).to_numpy()
            )


@pytest.fixture(scope="module", params=["one_shard", "small_zstd_shards"])
def dataset(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("rtg") / "data"
    kwargs = {} if request.param == "one_shard" else {"shard_bytes": 1, "compression": "zstd"}
    write(path, **kwargs)
    return path


def same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("pad", [False, True], ids=["no_pad", "pad"])
@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_every_item_against_plain_sums(dataset, pad, gamma):
    data = SequenceDataset(dataset, length=K, pad=pad, returns_to_go=gamma)
    plain = SequenceDataset(dataset, length=K, pad=pad)
    end_of = runs()
    assert len(data) == len(plain) == (sum(end_of[s] - s[1] >= K for s in end_of), len(end_of))[pad]
    starts = set()
    for i in range(len(data)):
        item, base = data[i], plain[i]
        rtg, timesteps = item.pop("returns_to_go"), item.pop("timesteps")
        assert same(item, base)  # the other columns as without the keyword
        assert rtg.dtype == np.float64 and timesteps.dtype == np.int64
        assert rtg.shape == timesteps.shape == (K,)
        real = int(item["mask"].sum()) if pad else K
        codes, ts = item["obs"][:real, 0].astype(int), item["obs"][:real, 1].astype(int)
        assert timesteps[:real].tolist() == ts.tolist()  # absolute env times
        assert not rtg[real:].any() and not timesteps[real:].any()  # 0 where padded
        for j, (code, t) in enumerate(zip(codes.tolist(), ts.tolist())):
            want = reference(code, t, end_of[(code, t)], gamma)
            if gamma == 1.0:
                assert rtg[j] == want, (i, j)
            else:
                assert math.isclose(rtg[j], want, rel_tol=1e-12, abs_tol=1e-12), (i, j)
        _, t0 = data.episode_steps(i)
        assert timesteps[0] == t0[0]
        starts.add((int(codes[0]), int(ts[0])))
    # Every step starts a window with pad; without it, those K steps before their run's end.
    assert starts == {s for s in end_of if pad or end_of[s] - s[1] >= K}


def test_returns_cross_pieces_but_not_gaps(dataset):
    data = SequenceDataset(dataset, length=2, returns_to_go=1.0)
    by_start = {}
    for i in range(len(data)):
        item = data[i]
        by_start[tuple(item["obs"][0].astype(int).tolist())] = item
    # Episode 0: pieces [0, 4), [4, 7), [7, 10) joined: step 2's return runs to step 10.
    assert by_start[(0, 2)]["returns_to_go"][0] == sum(reward(0, t) for t in range(2, 10))
    # Episode 4 leaves [3, 5) out: step 1's return stops at 3, step 5's counts from 5.
    assert by_start[(4, 1)]["returns_to_go"].tolist() == [
        reward(4, 1) + reward(4, 2),
        reward(4, 2),
    ]
    assert by_start[(4, 5)]["timesteps"].tolist() == [5, 6]
    assert by_start[(2, 103)]["timesteps"].tolist() == [103, 104]


def test_none_leaves_items_as_they_were(dataset):
    for pad in (False, True):
        data = SequenceDataset(dataset, length=K, pad=pad, returns_to_go=None)
        plain = SequenceDataset(dataset, length=K, pad=pad)
        keys = BASE_KEYS | ({"mask"} if pad else set())
        for i in range(len(data)):
            assert set(data[i]) == keys and same(data[i], plain[i])


def test_dataloader_workers_and_pickles(dataset):
    data = SequenceDataset(dataset, length=K, pad=True, returns_to_go=0.9)
    want = [data[i] for i in range(len(data))]  # the table is made in this process now
    copy = pickle.loads(pickle.dumps(data))
    for i in range(len(data)):
        assert same(copy[i], want[i])
    fresh = SequenceDataset(dataset, length=K, pad=True, returns_to_go=0.9)  # no table yet
    (batch,) = list(DataLoader(fresh, batch_size=len(data), num_workers=2))  # each makes one
    for key in ("returns_to_go", "timesteps", "mask"):
        stacked = torch.as_tensor(np.stack([w[key] for w in want]))
        assert batch[key].dtype == stacked.dtype and torch.equal(batch[key], stacked)


def test_pickle_carries_no_table(tmp_path):
    with DatasetWriter(tmp_path / "d") as w:
        w.write(
            SingleAgentEpisode(
                observations=list(range(20_001)),
                actions=[0] * 20_000,
                rewards=[1.0] * 20_000,
                len_lookback_buffer=0,
            ).to_numpy()
        )
    data = SequenceDataset(tmp_path / "d", length=4, returns_to_go=1.0)
    first = data[0]["returns_to_go"]
    assert first.tolist() == [20_000.0, 19_999.0, 19_998.0, 19_997.0]
    first[:] = 0.0  # an item's column is its own: the table stays
    assert data[0]["returns_to_go"].tolist() == [20_000.0, 19_999.0, 19_998.0, 19_997.0]
    assert len(pickle.dumps(data)) < 20_000  # 8 bytes a step would be 160,000
    copy = pickle.loads(pickle.dumps(data))
    assert copy[-1]["returns_to_go"].tolist() == [4.0, 3.0, 2.0, 1.0]


@pytest.mark.parametrize(
    "gamma",
    [-0.1, 1.5, float("nan"), True, "0.9", [0.9], np.array([0.5, 0.5])],
    ids=["negative", "above_one", "nan", "bool", "str", "list", "array"],
)
def test_bad_gamma_is_refused(dataset, gamma):
    with pytest.raises(ValueError, match=r"returns_to_go must be None or a discount gamma"):
        SequenceDataset(dataset, length=K, returns_to_go=gamma)


@pytest.mark.parametrize(
    ("rewards", "error", "match"),
    [
        ([np.array([1.0, 2.0])] * 3, ValueError, r"returns_to_go .* of shape \(2,\)"),
        ([1 + 1j] * 3, TypeError, r"returns_to_go needs real rewards"),
    ],
    ids=["vector", "complex"],
)
def test_rewards_not_one_real_number_are_refused(tmp_path, rewards, error, match):
    with DatasetWriter(tmp_path / "d") as w:
        w.write(
            SingleAgentEpisode(
                observations=[0, 1, 2, 3], actions=[0] * 3, rewards=rewards, len_lookback_buffer=0
            ).to_numpy()
        )
    assert len(SequenceDataset(tmp_path / "d", length=2)) == 2  # fine without the keyword
    with pytest.raises(error, match=match):
        SequenceDataset(tmp_path / "d", length=2, returns_to_go=0.9)


def test_gamma_zero_keeps_each_reward_and_no_nan(tmp_path):
    with DatasetWriter(tmp_path / "d") as w:
        w.write(
            SingleAgentEpisode(
                observations=[0, 1, 2, 3],
                actions=[0] * 3,
                rewards=[1.0, float("inf"), -float("inf")],
                len_lookback_buffer=0,
            ).to_numpy()
        )
    item = SequenceDataset(tmp_path / "d", length=3, returns_to_go=0.0)[0]
    assert item["returns_to_go"].tolist() == [1.0, float("inf"), -float("inf")]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(-50, 50), min_size=1, max_size=40),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from([0.0, 0.5, 1.0, 0.9, 0.37]),
)
def test_suffix_returns_match_sequential_sums(runs_, gamma):
    from episodes.io.returns_to_go import suffix_returns  # the module the keyword added

    rewards = np.array([r for run in runs_ for r in run], np.float64)
    left = np.array([len(run) - j for run in runs_ for j in range(len(run))], np.int64)
    got = suffix_returns(rewards.copy(), left, gamma)
    want = []
    for run in runs_:
        for j in range(len(run)):
            total, weight = 0.0, 1.0
            for r in run[j:]:
                total += weight * r
                weight *= gamma
            want.append(total)
    if gamma in (0.0, 0.5, 1.0):  # powers of two: every sum exact
        assert got.tolist() == want
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
