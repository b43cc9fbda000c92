"""Behaviour that hand-made mutants of ``episodes.connectors.learner``, ``.observations``,
``.prev`` and ``.last_rows`` showed no test pinned (session 46, third batch).

Each test fails with one mutant (named beside it) applied, and passes on the code as it is.
Connectors run on episodes built with ``SingleAgentEpisode`` (list mode and numpy'd) and on
``EnvRunner`` chunks; every output is compared against a per-episode reference read in plain
Python from the episodes' getters.
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    FlattenObservations,
    FrameStack,
    PrevActionsPrevRewards,
)

Box, Discrete = gym.spaces.Box, gym.spaces.Discrete
OBS = Box(-100, 100, (1,), np.float32)  # the space of _steps_episode's observations


def _steps_episode(
    id_: Any, n: int, *, t0: int = 0, lookback: int = 0, end: str = "", **kw: Any
) -> SingleAgentEpisode:
    """Observation ``[t]`` (float32) at env time ``t``, action ``t % 3``, reward ``t + 0.5``."""
    times = range(t0 - lookback, t0 + n)
    return SingleAgentEpisode(
        id_,
        observations=[np.array([t], np.float32) for t in range(t0 - lookback, t0 + n + 1)],
        actions=[t % 3 for t in times],
        rewards=[t + 0.5 for t in times],
        terminated=end == "terminated",
        truncated=end == "truncated",
        t_started=t0,
        len_lookback_buffer=lookback,
        **kw,
    )


# ------------------------------------------------------------------ AddLearnerColumns

# Column sets: with "infos" the per-episode (get_data_dict) path, without it the column path.
LEARNER_COLUMNS = {
    "flags only": ("terminateds", "truncateds"),
    "flags and infos": ("terminateds", "truncateds", "infos"),
}


@pytest.mark.parametrize("end_obs", [2.0, 9.0], ids=["end joins", "end starts elsewhere"])
@pytest.mark.parametrize("columns", LEARNER_COLUMNS.values(), ids=list(LEARNER_COLUMNS))
def test_a_done_chunk_keeps_its_own_flags_beside_a_stepless_end(
    columns: tuple, end_obs: float
) -> None:
    # Mutants: learner.py:120 / :176 looked a stepless end up for a chunk that is done itself.
    done = _steps_episode("a", 2, end="terminated")
    # A truncated end of the same id at the chunk's t: the done chunk ended the episode
    # itself, so the end changes none of its rows (and is not judged against it).
    odd = SingleAgentEpisode(
        "a",
        observations=[np.array([end_obs], np.float32)],
        t_started=2,
        truncated=True,
        len_lookback_buffer=0,
    )
    out = AddLearnerColumns(columns)([done, odd], {})
    assert out["terminateds"].tolist() == [False, True]
    assert out["truncateds"].tolist() == [False, False]


@pytest.mark.parametrize("columns", [("obs",), ("obs", "infos")], ids=["column", "per episode"])
def test_numpyd_list_structured_observations_give_one_row_per_step(columns: tuple) -> None:
    # Mutant: learner.py:141 read a numpy'd column as list-mode items (batched again).
    ep = SingleAgentEpisode(
        "a",
        observations=[[np.float32(t), np.int64(10 * t)] for t in range(4)],
        actions=[0, 1, 0],
        rewards=[1.0, 2.0, 3.0],
        len_lookback_buffer=0,
    )
    reference = [ep.get_observations(t) for t in range(len(ep))]  # list mode, step by step
    ep.to_numpy()
    out = AddLearnerColumns(columns)([ep], {})["obs"]
    assert isinstance(out, list) and len(out) == 2  # one leaf per position, as recorded
    for leaf, want in zip(out, zip(*reference)):
        assert leaf.dtype == np.asarray(want[0]).dtype  # float32 and int64 kept apart
        assert leaf.tolist() == [v.item() for v in want]


# ------------------------------------------------------------------ lookback reach

# Learner connectors on a chunk without steps: no rows, so nothing read before it (no warning).
STEPLESS_READERS = {
    "FrameStack(3)": lambda: FrameStack(3),
    "PrevActionsPrevRewards(2, 2)": lambda: PrevActionsPrevRewards(2, 2),
    "PrevActionsPrevRewards(0, 3)": lambda: PrevActionsPrevRewards(0, 3),
}


@pytest.mark.parametrize("make", STEPLESS_READERS.values(), ids=list(STEPLESS_READERS))
def test_a_chunk_without_steps_reads_no_lost_lookback(make: Any) -> None:
    # Mutants: observations.py:435 / prev.py:102 gave a stepless chunk its first row's reach.
    late = SingleAgentEpisode(
        "late",
        observations=[np.array([7.0], np.float32)],
        t_started=7,
        observation_space=OBS,
        action_space=Discrete(3),
        len_lookback_buffer=0,
    )
    steps = _steps_episode("s", 3, observation_space=OBS, action_space=Discrete(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ShortLookbackWarning would fail here
        out = make()([late, steps], {})
    alone = make()([steps], {})
    assert out.keys() == alone.keys() and out
    assert all(np.array_equal(out[key], alone[key]) for key in out)


# ------------------------------------------------------------------ FlattenObservations


def _flat_reference(item: Any, space: Any) -> list[float]:
    """One observation flattened in plain Python: dict keys sorted, discrete leaves one-hot."""
    if isinstance(space, gym.spaces.Dict):
        return [v for key in sorted(space.spaces) for v in _flat_reference(item[key], space[key])]
    if isinstance(space, gym.spaces.Tuple):
        return [v for part, sub in zip(item, space.spaces) for v in _flat_reference(part, sub)]
    if isinstance(space, Discrete):
        return [float(int(item) - int(space.start) == i) for i in range(int(space.n))]
    if isinstance(space, gym.spaces.MultiDiscrete):
        out: list[float] = []
        for value, n, start in zip(
            np.ravel(item).tolist(), space.nvec.ravel().tolist(), space.start.ravel().tolist()
        ):
            out += [float(value - start == i) for i in range(n)]
        return out
    return [float(np.float32(v)) for v in np.ravel(item).tolist()]


def _dict_space_in_insertion_order() -> gym.spaces.Dict:
    from collections import OrderedDict

    return gym.spaces.Dict(
        OrderedDict([("z", Discrete(3, start=1)), ("a", Box(-9, 9, (2,), np.float32))])
    )


def _flat_episodes(space: Any, lengths: list[int], seed: int = 0) -> list[SingleAgentEpisode]:
    space.seed(seed)
    return [
        SingleAgentEpisode(
            f"e{i}",
            observations=[space.sample() for _ in range(n + 1)],
            actions=[0] * n,
            rewards=[0.0] * n,
            observation_space=space,
            len_lookback_buffer=0,
        )
        for i, n in enumerate(lengths)
    ]


FLAT_SPACES = {
    "a Dict whose keys are not in sorted order": _dict_space_in_insertion_order,
    "a MultiDiscrete with starts": lambda: gym.spaces.MultiDiscrete(
        [[3, 2], [2, 4]], start=[[-1, 2], [0, 5]]
    ),
    "a Discrete with a start": lambda: Discrete(4, start=-2),
    "a Tuple of MultiBinary and Box": lambda: gym.spaces.Tuple(
        (gym.spaces.MultiBinary(3), Box(-9, 9, (2,), np.int64))
    ),
}


@pytest.mark.parametrize("inference", [False, True], ids=["learner", "inference"])
@pytest.mark.parametrize("make", FLAT_SPACES.values(), ids=list(FLAT_SPACES))
def test_flattened_rows_are_the_plain_flattening_of_each_row(make: Any, inference: bool) -> None:
    # Mutant: last_rows.py:43 kept a Dict's own key order (not dm-tree's sorted one).
    space = make()
    episodes = _flat_episodes(space, [2, 0, 3])
    out = FlattenObservations(inference=inference)(episodes, {})["obs"]
    want = [
        _flat_reference(ep.get_observations(t), space)
        for ep in episodes
        for t in (range(len(ep), len(ep) + 1) if inference else range(len(ep)))
    ]
    assert out.dtype == np.float32
    assert out.tolist() == want


# Connectors that flatten: bytes observations (no space) are strings too, refused by name.
BYTES_FLATTENERS = {
    "FlattenObservations": lambda: FlattenObservations(),
    "FlattenObservations(inference)": lambda: FlattenObservations(inference=True),
    "FrameStack(2, flatten)": lambda: FrameStack(2, fill=b"0", flatten=True),
}


@pytest.mark.parametrize("make", BYTES_FLATTENERS.values(), ids=list(BYTES_FLATTENERS))
def test_bytes_observations_are_refused_not_parsed_as_numbers(make: Any) -> None:
    # Mutant: observations.py:74 refused only str leaves (numpy parses b"1" as 1.0).
    ep = SingleAgentEpisode(
        "b",
        observations=[b"1", b"2", b"3"],
        actions=[0, 0],
        rewards=[0.0, 0.0],
        len_lookback_buffer=0,
    )
    batch = {"kept": 1}
    with pytest.raises(ValueError, match=r"'obs' column: a leaf holds strings \(\|S1\)"):
        make()([ep], batch)
    assert batch == {"kept": 1}


# ------------------------------------------------------------------ PrevActionsPrevRewards


def _prev_reference(ep_t0: int, lookback: int, rows: range, n: int, fill: float) -> list[Any]:
    """Reward windows of a ``_steps_episode`` chunk (reward ``t + 0.5`` at env time ``t``).

    Env times before the chunk's lookback (or before 0) are ``fill``.
    """
    return [
        [t + 0.5 if t >= max(ep_t0 - lookback, 0) else fill for t in range(ts - n, ts)]
        for ts in (ep_t0 + row for row in rows)
    ]


def test_prev_rewards_alone_need_no_action_space() -> None:
    # Mutant: prev.py:110 asked for an action space where no action is read (n_actions=0).
    episodes = [_steps_episode("a", 3, lookback=2, t0=4), _steps_episode("b", 2)]
    out = PrevActionsPrevRewards(0, 2)(episodes, {})
    assert list(out) == ["prev_n_rewards"]
    want = _prev_reference(4, 2, range(3), 2, 0.0) + _prev_reference(0, 0, range(2), 2, 0.0)
    assert out["prev_n_rewards"].dtype == np.float32
    assert out["prev_n_rewards"].tolist() == want


# ------------------------------------------------------------------ runner chunks


def _runner_chunks(lookback: int) -> list[SingleAgentEpisode]:
    """Continuing CartPole chunks (``t_started`` past 0), done ones and fresh ones among them."""
    from episodes.runner import EnvRunner, RandomPolicy

    env = gym.make_vec("CartPole-v1", 3, vectorization_mode="sync")
    runner = EnvRunner(
        env, RandomPolicy(env.action_space, seed=1), seed=1, len_lookback_buffer=lookback
    )
    runner.sample(6)
    return list(runner.sample(9))


def _item(getter: Any, i: int, fill: Any) -> Any:
    """Item ``i`` of a chunk (negative: its lookback), or ``fill`` where the chunk has none."""
    try:
        return getter(i, neg_index_as_lookback=True)
    except IndexError:
        return fill


def _frames_reference(ep: SingleAgentEpisode, rows: range, n: int) -> list[Any]:
    return [
        [
            np.asarray(_item(ep.get_observations, ts - k, np.zeros(4))).tolist()
            for k in range(n - 1, -1, -1)
        ]
        for ts in rows
    ]


def _prev_chunk_reference(ep: SingleAgentEpisode, rows: range, n: int, rewards: bool) -> list:
    if rewards:
        return [[float(_item(ep.get_rewards, ts - k, 0.0)) for k in range(n, 0, -1)] for ts in rows]
    return [
        [
            [float(a == i) for i in range(2)]
            for a in (_item(ep.get_actions, ts - k, -1) for k in range(n, 0, -1))
        ]
        for ts in rows
    ]


@pytest.mark.parametrize("inference", [False, True], ids=["learner", "inference"])
def test_runner_chunks_give_the_per_episode_reference_rows(inference: bool) -> None:
    chunks = _runner_chunks(3)
    rows = {ep.id_: range(len(ep), len(ep) + 1) if inference else range(len(ep)) for ep in chunks}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a lookback of 3 holds every frame and step read
        frames = FrameStack(4, inference=inference)(chunks, {})["obs"]
        flat = FlattenObservations(inference=inference)(chunks, {})["obs"]
        prev = PrevActionsPrevRewards(3, 2, inference=inference)(chunks, {})
    used = [ep for ep in chunks if len(rows[ep.id_])]
    want_frames = [r for ep in used for r in _frames_reference(ep, rows[ep.id_], 4)]
    np.testing.assert_array_equal(frames, np.asarray(want_frames, np.float32))
    assert frames.dtype == np.float32
    want_flat = [ep.get_observations(ts).tolist() for ep in used for ts in rows[ep.id_]]
    np.testing.assert_array_equal(flat, np.asarray(want_flat, np.float32))
    want_actions = [r for ep in used for r in _prev_chunk_reference(ep, rows[ep.id_], 3, False)]
    want_rewards = [r for ep in used for r in _prev_chunk_reference(ep, rows[ep.id_], 2, True)]
    assert prev["prev_n_actions"].tolist() == want_actions
    assert prev["prev_n_rewards"].tolist() == want_rewards


@pytest.mark.parametrize("extra", [(), ("infos",)], ids=["column path", "per-episode path"])
def test_runner_chunks_give_the_per_episode_learner_columns(extra: tuple) -> None:
    chunks = _runner_chunks(1)
    columns = ("obs", "actions", "rewards", "terminateds", "truncateds", "t", "eps_id", *extra)
    out = AddLearnerColumns(columns)(chunks, {})
    used = [ep for ep in chunks if len(ep)]
    want: dict[str, list[Any]] = {key: [] for key in columns}
    for ep in used:
        for i in range(len(ep)):
            last = i == len(ep) - 1
            want["obs"].append(ep.get_observations(i).tolist())
            want["actions"].append(int(ep.get_actions(i)))
            want["rewards"].append(float(np.float32(ep.get_rewards(i))))
            want["terminateds"].append(last and ep.is_terminated)
            want["truncateds"].append(last and ep.is_truncated)
            want["t"].append(ep.t_started + i)
            want["eps_id"].append(ep.id_)
            if extra:
                want["infos"].append(ep.get_infos(i))
    assert {key: np.asarray(out[key]).tolist() for key in columns} == want
    assert out["rewards"].dtype == np.float32


def test_inference_refuses_a_tuple_observation_as_the_learner_read_does() -> None:
    # Mutant: last_rows.py:66 took any sized item for a Tuple space's (a range among them).
    space = gym.spaces.Tuple((Discrete(3), Discrete(3)))
    ep = SingleAgentEpisode(
        "r",
        observations=[range(1, 3), range(0, 2)],
        actions=[0],
        rewards=[0.0],
        observation_space=space,
        len_lookback_buffer=0,
    )
    for inference in (False, True):
        batch: dict[str, Any] = {}
        with pytest.raises(ValueError, match="expects a tuple/list of that length"):
            FlattenObservations(inference=inference)([ep], batch)
        assert batch == {}
    # Without the one-hot the items' values are the row, as recorded.
    assert FlattenObservations(one_hot_discrete=False, inference=True)([ep], {})[
        "obs"
    ].tolist() == [[0.0, 1.0]]


# Rewards whose float32 cast rounds differently through float64 (2**60 + 2**36 + 1 lies just
# past a float32 midpoint that float64 rounds it onto): each episode's rewards are cast alone.
TRICKY_INT = 2**60 + 2**36 + 1
LEARNER_EPISODES = {
    "list mode, late start with lookback": lambda: [
        _steps_episode("a", 3, t0=5, lookback=2),
        _steps_episode("b", 2, t0=1),
    ],
    "numpy'd, late start": lambda: [
        _steps_episode("a", 3, t0=5, lookback=2).to_numpy(),
        _steps_episode("b", 1).to_numpy(),
    ],
    "int rewards beside float ones": lambda: [
        SingleAgentEpisode(
            "i",
            observations=[0, 1, 2],
            actions=[0, 1],
            rewards=[TRICKY_INT, 3],
            len_lookback_buffer=0,
        ),
        SingleAgentEpisode(
            "f",
            observations=[5, 6],
            actions=[1],
            rewards=[0.25],
            t_started=4,
            len_lookback_buffer=0,
        ),
    ],
}


@pytest.mark.parametrize("extra", [(), ("infos",)], ids=["column path", "per-episode path"])
@pytest.mark.parametrize("make", LEARNER_EPISODES.values(), ids=list(LEARNER_EPISODES))
def test_learner_columns_are_each_episodes_own_rows(make: Any, extra: tuple) -> None:
    # Mutants: learner.py:203 (list-mode t shifted) and :215 (one cast of mixed-dtype rewards).
    episodes = make()
    out = AddLearnerColumns(("obs", "actions", "rewards", "t", *extra))(episodes, {})
    want_obs, want_t, want_rewards = [], [], []
    for ep in episodes:
        want_obs += [np.asarray(ep.get_observations(i)).tolist() for i in range(len(ep))]
        want_t += list(range(ep.t_started, ep.t_started + len(ep)))
        want_rewards += (
            np.asarray([ep.get_rewards(i) for i in range(len(ep))]).astype(np.float32).tolist()
        )
    assert out["obs"].tolist() == want_obs
    assert out["t"].tolist() == want_t
    assert out["rewards"].dtype == np.float32
    assert out["rewards"].tolist() == want_rewards


# ------------------------------------------------------------------ inference rows (prev)

ACTION_SPACES = {
    "Box float32": Box(-9, 9, (2,), np.float32),
    "Box int64": Box(-9, 9, (2,), np.int64),
    "Discrete with a start": Discrete(4, start=2),
}
REWARD_KINDS = {
    "floats": lambda t: t + 0.25,
    "ints": lambda t: int(t) * 3 - 5,
    "numpy float32": lambda t: np.float32(t / 4),
    "numpy int16": lambda t: np.int16(t - 3),
}


def _prev_episodes(space: Any, reward: Any) -> list[SingleAgentEpisode]:
    """Chunks of every length 0..4, some starting late (with a lookback of 3), one space."""
    space.seed(3)
    episodes = []
    for i, (n, t0, lookback) in enumerate([(0, 0, 0), (1, 0, 0), (3, 2, 2), (4, 6, 3), (0, 5, 3)]):
        times = range(t0 - lookback, t0 + n)
        episodes.append(
            SingleAgentEpisode(
                f"e{i}",
                observations=[0.0] * (len(times) + 1),
                actions=[space.sample() for _ in times],
                rewards=[reward(t) for t in times],
                action_space=space,
                t_started=t0,
                len_lookback_buffer=lookback,
            )
        )
    return episodes


def _window(getter: Any, last: int, n: int) -> list[Any]:
    return [_item(getter, ts, None) for ts in range(last - n, last)]


# name -> (action space, reward kind, fill)
PREV_CASES = {
    "float32 Box, float rewards, fill 0.0": ("Box float32", "floats", 0.0),
    "float32 Box, int rewards, fill 7": ("Box float32", "ints", 7),
    "int64 Box, float32 rewards, fill 7": ("Box int64", "numpy float32", 7),
    "int64 Box, int16 rewards, fill -2.0": ("Box int64", "numpy int16", -2.0),
    "Discrete, float rewards, fill -1.5": ("Discrete with a start", "floats", -1.5),
    "Discrete, int rewards, fill 0.0": ("Discrete with a start", "ints", 0.0),
}


@pytest.mark.parametrize("case", PREV_CASES.values(), ids=list(PREV_CASES))
def test_inference_prev_rows_are_each_episodes_last_window(case: tuple) -> None:
    space, reward, fill = ACTION_SPACES[case[0]], REWARD_KINDS[case[1]], case[2]
    episodes = _prev_episodes(space, reward)
    n = 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the late chunks' short lookback is not the point
        out = PrevActionsPrevRewards(n, n, fill=fill, inference=True)(episodes, {})
        learner = PrevActionsPrevRewards(n, n, fill=fill)(episodes, {})
    want_actions, want_rewards = [], []
    for ep in episodes:
        actions = _window(ep.get_actions, len(ep), n)
        if isinstance(space, Discrete):
            want_actions.append(
                [
                    [
                        float(a is not None and int(a) - int(space.start) == i)
                        for i in range(int(space.n))
                    ]
                    for a in actions
                ]
            )
        else:
            want_actions.append(
                [[fill] * 2 if a is None else np.asarray(a).tolist() for a in actions]
            )
        rewards = _window(ep.get_rewards, len(ep), n)
        want_rewards.append([float(np.float32(fill if r is None else r)) for r in rewards])
    # The inference rows take the dtype the learner rows of the same episodes take.
    assert out["prev_n_actions"].dtype == learner["prev_n_actions"].dtype
    assert out["prev_n_rewards"].dtype == learner["prev_n_rewards"].dtype == np.float32
    assert out["prev_n_actions"].tolist() == want_actions
    assert out["prev_n_rewards"].tolist() == want_rewards


def _ep(id_: Any, obs: list, actions: list | None = None, **kw: Any) -> SingleAgentEpisode:
    actions = [] if actions is None else actions
    rewards = kw.pop("rewards", [0.0] * len(actions))
    return SingleAgentEpisode(
        id_, observations=obs, actions=actions, rewards=rewards, len_lookback_buffer=0, **kw
    )


D3 = Discrete(3)
# name -> (connector, episodes, error match): refusals the inference read shares with the
# per-episode read, the batch left as it was.
INFERENCE_REFUSALS = {
    # Mutant: prev.py:156 (read the actions of an episode without an observation).
    "no observation yet": (
        lambda: PrevActionsPrevRewards(2, 2, inference=True),
        lambda: [_ep("u", [], action_space=D3)],
        "holds no observation yet",
    ),
    # Mutant: last_rows.py:244 (one-hot by the first episode's space only).
    "action spaces of other sizes": (
        lambda: PrevActionsPrevRewards(1, 0, inference=True),
        lambda: [
            _ep("a", [0, 1], [1], action_space=D3),
            _ep("b", [0, 1], [2], action_space=Discrete(4)),
        ],
        "'prev_n_actions' rows do not join",
    ),
    # Mutant: last_rows.py:112 (a MultiDiscrete value equal to its size: the next part's 0).
    "a MultiDiscrete value out of range": (
        lambda: FlattenObservations(inference=True),
        lambda: [_ep("m", [np.array([2, 0])], observation_space=gym.spaces.MultiDiscrete([2, 3]))],
        "out of range",
    ),
    # Mutant: last_rows.py:120 (a Discrete value below its start: numpy's index -1).
    "a Discrete value below its start": (
        lambda: FlattenObservations(inference=True),
        lambda: [_ep("d", [0], observation_space=Discrete(3, start=1))],
        "out of range",
    ),
    # Mutant: prev.py:203 (the fill checked against float32 rewards).
    "a string fill for the rewards": (
        lambda: PrevActionsPrevRewards(0, 2, fill="x"),
        lambda: [_ep("a", [0, 1], [1])],
        r"fill='x' cannot fill a leaf of dtype float32",
    ),
    # Mutant: prev.py:187 (a string fill for space-less actions).
    "a string fill for space-less actions": (
        lambda: PrevActionsPrevRewards(2, 0, fill="x", one_hot_discrete=False),
        lambda: [_ep("a", [0, 1, 2], [1, 2])],
        r"fill='x' cannot fill",
    ),
}


@pytest.mark.parametrize("case", INFERENCE_REFUSALS.values(), ids=list(INFERENCE_REFUSALS))
def test_connectors_refuse_what_the_per_episode_read_refuses(case: tuple) -> None:
    make, episodes, match = case
    batch = {"kept": 1}
    with pytest.raises(ValueError, match=match):
        make()(episodes(), batch)
    assert batch == {"kept": 1}


def test_raw_discrete_prev_actions_at_inference_are_the_recorded_ints() -> None:
    # Mutant: last_rows.py:245 (one-hot Discrete actions whatever one_hot_discrete says).
    episodes = [_ep("a", [0, 1, 2], [1, 2], action_space=D3), _ep("b", [0], action_space=D3)]
    out = PrevActionsPrevRewards(3, 0, fill=0, one_hot_discrete=False, inference=True)(episodes, {})
    assert out["prev_n_actions"].tolist() == [[0, 1, 2], [0, 0, 0]]
    learner = PrevActionsPrevRewards(3, 0, fill=0, one_hot_discrete=False)(episodes, {})
    assert out["prev_n_actions"].dtype == learner["prev_n_actions"].dtype


def test_prev_actions_take_the_fill_dtype_wherever_the_chunk_was_cut() -> None:
    # Mutant: prev.py:197 (rows kept the items' dtype where no row needed padding).
    ep = SingleAgentEpisode(
        "a",
        observations=[0, 1, 2, 3],
        actions=[1, 2, 0],
        rewards=[0.0, 1.0, 2.0],
        len_lookback_buffer=1,
    )
    for inference in (False, True):
        out = PrevActionsPrevRewards(1, 0, fill=0.0, one_hot_discrete=False, inference=inference)(
            [ep], {}
        )["prev_n_actions"]
        assert out.dtype == np.float64
        assert out.tolist() == ([[1.0], [2.0]] if not inference else [[0.0]])


def test_multidiscrete_inference_rows_count_from_the_space_start() -> None:
    # Mutant: last_rows.py:111 (values one-hot as if the space started at 0).
    space = gym.spaces.MultiDiscrete([3, 4], start=[1, 1])
    items = [np.array([1, 1]), np.array([2, 3])]
    episodes = [_ep(f"m{i}", [item], observation_space=space) for i, item in enumerate(items)]
    out = FlattenObservations(inference=True)(episodes, {})["obs"]
    assert out.tolist() == [_flat_reference(item, space) for item in items]


# Int rewards float32 cannot hold, whose float32 cast through float64 rounds differently: the
# rows of ints are cast as the per-episode read casts them (straight from the ints).
BIG_REWARDS = {
    # Mutant: last_rows.py:208 / :224 (Python ints past 2**53 read through float64).
    "Python ints": lambda: [TRICKY_INT, 1],
    # Mutant: last_rows.py:206 (numpy'd int64 past 2**53 read through float64).
    "numpy'd int64": lambda: np.array([TRICKY_INT, 1], np.int64),
}


@pytest.mark.parametrize("make", BIG_REWARDS.values(), ids=list(BIG_REWARDS))
def test_inference_prev_rewards_round_big_ints_once(make: Any) -> None:
    rewards = make()
    ep = _ep("big", [0, 1, 2], [0, 1], rewards=list(rewards))
    if isinstance(rewards, np.ndarray):
        ep.to_numpy()
    out = PrevActionsPrevRewards(0, 2, inference=True)([ep], {})["prev_n_rewards"]
    assert out.tolist() == [np.asarray([TRICKY_INT, 1], np.int64).astype(np.float32).tolist()]


def test_inference_prev_windows_of_chunks_shorter_than_n() -> None:
    # Mutant: last_rows.py:177 (a window longer than the chunk read from its end, wrapped).
    space = Box(-9, 9, (1,), np.float32)
    episodes = [
        _ep(
            f"s{k}",
            [0.0] * (k + 1),
            [np.full(1, t + 1, np.float32) for t in range(k)],
            rewards=[t + 1.0 for t in range(k)],
            action_space=space,
        )
        for k in range(5)
    ]
    out = PrevActionsPrevRewards(3, 3, fill=-1.0, inference=True)(episodes, {})
    want = [
        [-1.0] * max(0, 3 - k) + [float(t + 1) for t in range(max(0, k - 3), k)] for k in range(5)
    ]
    assert out["prev_n_rewards"].tolist() == want
    assert out["prev_n_actions"][..., 0].tolist() == want


@pytest.mark.parametrize("extra", [(), ("infos",)], ids=["column path", "per-episode path"])
def test_consecutive_chunks_flag_only_the_episodes_last_step(extra: tuple) -> None:
    # Mutant: learner.py:303 (a done chunk with steps taken for a stepless end where it starts).
    first = _steps_episode("e", 2)
    second = first.cut()
    for t in (2, 3):
        second.add_env_step(np.array([t + 1], np.float32), t % 3, t + 0.5, terminated=t == 3)
    out = AddLearnerColumns(("terminateds", "truncateds", "t", *extra))([first, second], {})
    assert out["t"].tolist() == [0, 1, 2, 3]
    assert out["terminateds"].tolist() == [False, False, False, True]
    assert not out["truncateds"].any()


def test_empty_float64_box_observations_flatten_to_no_columns() -> None:
    # Mutant: observations.py:281 (the exactness check asked the min of an empty array).
    space = Box(-1, 1, (0,), np.float64)
    episodes = [
        _ep(f"z{k}", [np.zeros(0)] * (k + 1), [0] * k, observation_space=space) for k in (1, 3)
    ]
    out = FlattenObservations()(episodes, {})["obs"]
    assert out.shape == (4, 0) and out.dtype == np.float32


@pytest.mark.parametrize(
    "make",
    [lambda: FrameStack(True), lambda: PrevActionsPrevRewards(True, 1)],
    ids=["FrameStack(True)", "PrevActionsPrevRewards(True, 1)"],
)
def test_a_bool_count_is_refused(make: Any) -> None:
    # Mutant: observations.py:103 (only numpy bools refused: True read as 1).
    with pytest.raises(TypeError, match="got the bool True"):
        make()


def test_a_join_error_without_one_hot_gives_no_one_hot_hint() -> None:
    # Mutant: observations.py:247 (the hint to pass one_hot_discrete=False, already given).
    spaceless = _ep("raw", [np.zeros(2), np.zeros(2)], [0])
    boxed = _ep("box", [np.zeros(3), np.zeros(3)], [0], observation_space=Box(-1, 1, (3,)))
    with pytest.raises(ValueError, match="rows do not join") as err:
        FlattenObservations(one_hot_discrete=False)([spaceless, boxed], {})
    assert "one_hot_discrete" not in str(err.value)
