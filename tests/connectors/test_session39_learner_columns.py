"""AddLearnerColumns' column-by-column path gives exactly what the general path (each
episode's get_data_dict, as before) gives: the same columns in the same order (dtype, shape,
bytes) or the same error, with the batch left as it was on a refusal; and it reads only the
columns asked for."""

from __future__ import annotations

import copy
from typing import Any
from unittest import mock

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.connectors import AddLearnerColumns, learner

Box, Discrete = gym.spaces.Box, gym.spaces.Discrete

OBS_SPACES = [
    Box(-1, 1, (3,), np.float32),
    Box(-5, 5, (2,), np.int64),
    Discrete(4, start=-1),
    gym.spaces.Dict({"b": Discrete(5), "a": Box(-1, 1, (2,), np.float32)}),
    gym.spaces.Tuple((Box(-1, 1, (2,), np.float32), Discrete(3))),
    gym.spaces.MultiDiscrete([3, 4]),
    gym.spaces.Tuple((Discrete(3), gym.spaces.Text(4))),
    gym.spaces.Sequence(Discrete(3)),
    gym.spaces.Dict({0: Discrete(2), "a": Discrete(2)}),  # keys that do not sort
]
ACTION_SPACES = [Discrete(3), Box(-1, 1, (2,), np.float32), None]
REWARDS = [
    lambda r, i: float(r.normal()),
    lambda r, i: int(r.integers(-3, 3)),
    lambda r, i: np.float32(r.normal()),
    lambda r, i: float("nan"),
    lambda r, i: 1e300,  # float32 cannot hold it
    lambda r, i: 2**70,  # beyond int64
    lambda r, i: bool(i % 2),
    lambda r, i: np.float16(0.5),
    lambda r, i: 1 + 2j,  # not a real number
]
IDS = ["a", 3, ("run", 1), True, "a\0", 3.0, ["l"]]
INFOS = [{}, {"x": float("nan")}, {"s": "text", "n": None}, {"big": 2**70, "arr": np.arange(2)}]


@st.composite
def learner_episodes(draw: Any) -> list[SingleAgentEpisode]:
    space = draw(st.sampled_from(OBS_SPACES))
    act_space = draw(st.sampled_from(ACTION_SPACES))
    seed = draw(st.integers(0, 100))
    space.seed(seed)
    if act_space is not None:
        act_space.seed(seed)
    rng = np.random.default_rng(seed)
    episodes = []
    for i in range(draw(st.integers(0, 4))):
        steps, lookback = draw(st.integers(0, 5)), draw(st.integers(0, 3))
        count = steps + lookback
        obs = [space.sample() for _ in range(count + 1)]
        if draw(st.integers(0, 5)) == 0 and isinstance(space, Box):  # another shape
            obs = [np.asarray(o)[:-1] for o in obs]
        reward = draw(st.sampled_from(REWARDS[:4] * 3 + REWARDS))
        odd_reward = draw(st.sampled_from([None, None, None, *REWARDS]))
        rewards = [reward(rng, j) for j in range(count)]
        if odd_reward is not None and rewards:
            rewards[-1] = odd_reward(rng, 1)
        if act_space is None or isinstance(act_space, Discrete):
            actions: list[Any] = [int(a) for a in rng.integers(0, 3, count)]
        else:
            actions = [act_space.sample() for _ in range(count)]
        extras = {}
        for key, kind in (
            ("vf_preds", draw(st.sampled_from(["all", "all", "none", "half"]))),
            ("logits", draw(st.sampled_from(["none", "all", "half"]))),
            ("t", draw(st.sampled_from(["none"] * 8 + ["all"]))),
        ):
            if kind == "all" or (kind == "half" and i % 2):
                shape = (2,) if key == "logits" else ()
                extras[key] = [rng.normal(size=shape) for _ in range(count)]
                if key == "vf_preds" and draw(st.booleans()):
                    extras[key] = [np.float32(v) for v in extras[key]]
        id_ = draw(st.sampled_from(IDS)) if draw(st.integers(0, 3)) == 0 else f"e{i}"
        t_started = draw(st.sampled_from([0, 0, 0, 7, 2**63 - 3, -2]))
        done = draw(st.sampled_from(["", "", "terminated", "truncated"]))
        kwargs: dict[str, Any] = dict(
            id_=id_,
            observations=obs,
            actions=actions,
            rewards=rewards,
            infos=[copy.deepcopy(draw(st.sampled_from(INFOS))) for _ in obs],
            extra_model_outputs=extras,
            t_started=t_started,
            len_lookback_buffer=lookback,
            observation_space=draw(st.sampled_from([space, space, None, copy.deepcopy(space)])),
            action_space=act_space,
        )
        if done:
            kwargs[done] = True
        try:
            episode = SingleAgentEpisode(**kwargs)
        except Exception:  # noqa: BLE001 - refused at recording: left out
            continue
        if draw(st.integers(0, 2)):
            try:
                episode.to_numpy()
            except Exception:  # noqa: BLE001 - items that do not stack stay list-mode
                pass
        episodes.append(episode)
        end = draw(st.sampled_from(["", "", "", "terminated", "truncated", "other"]))
        if end and not episode.is_done and episode.observations.len_incl_lookback():
            last = episode.observations.get(-1) if end != "other" else space.sample()
            stepless = SingleAgentEpisode(
                id_=id_,
                observations=[last],
                t_started=episode.t,
                observation_space=episode.observation_space,
                len_lookback_buffer=0,
                **{"terminated" if end == "other" else end: True},
            )
            at = draw(st.integers(0, len(episodes)))
            episodes.insert(at, stepless)
            if draw(st.integers(0, 4)) == 0:
                episodes.append(stepless)  # two chunks end it
    return episodes


COLUMNS = [
    "obs",
    "actions",
    "rewards",
    "terminateds",
    "truncateds",
    "t",
    "eps_id",
    "infos",
    "vf_preds",
    "logits",
    "t",
]


def _form(value: Any) -> Any:
    """What must match: the type, and an array's dtype, shape and bytes (objects by repr)."""
    if isinstance(value, np.ndarray):
        data = repr(value.tolist()) if value.dtype == object else value.tobytes()
        return ("array", value.dtype, value.shape, data, value.flags.writeable)
    if isinstance(value, dict):
        return ("dict", [(k, _form(v)) for k, v in value.items()])
    if isinstance(value, tuple):
        return ("tuple", [_form(v) for v in value])
    return (type(value).__name__, repr(value))


def _outcome(conn: AddLearnerColumns, episodes: Any, held: dict[str, Any]) -> Any:
    batch = dict(held)
    try:
        out = conn(episodes, batch)
    except Exception as err:  # noqa: BLE001 - compared as type and message
        assert list(batch) == list(held) and all(batch[k] is held[k] for k in held)
        return ("error", type(err), str(err))
    assert out is batch
    return [(k, _form(v)) for k, v in out.items()]


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    learner_episodes(),
    st.one_of(st.none(), st.lists(st.sampled_from(COLUMNS), max_size=6)),
    st.booleans(),
    st.sampled_from([{}, {}, {"obs": "kept"}, {"rewards": np.zeros(1)}]),
)
def test_column_path_equals_general_path(
    episodes: Any, columns: Any, extra: bool, held: dict[str, Any]
) -> None:
    conn = (
        AddLearnerColumns(extra_model_outputs=extra)
        if columns is None
        else AddLearnerColumns(columns, extra_model_outputs=extra)
    )
    quick = _outcome(conn, episodes, held)
    with mock.patch.object(learner, "_quick_columns", lambda *a, **k: None):
        general = _outcome(conn, episodes, held)
    assert quick == general


def _numpy_episodes(space: Any, count: int = 3) -> list[SingleAgentEpisode]:
    space.seed(0)
    episodes = []
    for i in range(count):
        episode = SingleAgentEpisode(
            id_=f"e{i}",
            observations=[space.sample() for _ in range(4)],
            actions=[0, 1, 2],
            rewards=[1.0, 2.0, 3.0],
            infos=[{"i": i}] * 4,
            terminated=i == 0,
            extra_model_outputs={"vf_preds": [0.5] * 3},
            observation_space=space,
            action_space=Discrete(3),
            len_lookback_buffer=1,
        )
        episodes.append(episode.to_numpy() if i else episode)  # list mode beside numpy'd
    return episodes


@pytest.mark.parametrize("space", OBS_SPACES[:6], ids=repr)
def test_reads_columns_without_get_data_dict(space: Any) -> None:
    # The requested columns come straight from the getters: get_data_dict (which builds every
    # column, infos included) is not called, and the column path is taken, not the general.
    episodes = _numpy_episodes(space)
    expected = AddLearnerColumns()(episodes, {})
    with mock.patch.object(
        SingleAgentEpisode, "get_data_dict", side_effect=AssertionError("read every column")
    ):
        out = AddLearnerColumns()(episodes, {})
    assert [_form(v) for v in out.values()] == [_form(v) for v in expected.values()]
    assert list(out) == [
        "obs",
        "actions",
        "rewards",
        "terminateds",
        "truncateds",
        "t",
        "eps_id",
        "vf_preds",
    ]
    assert out["rewards"].dtype == np.float32 and out["terminateds"].tolist()[:2] == [False, True]


def test_infos_not_read_unless_asked() -> None:
    episodes = _numpy_episodes(OBS_SPACES[0])
    buffer_type = type(episodes[0].infos)
    read = buffer_type.get

    def get(self: Any, *args: Any, **kwargs: Any) -> Any:
        assert all(self is not episode.infos for episode in episodes), "infos read"
        return read(self, *args, **kwargs)

    with mock.patch.object(buffer_type, "get", get):
        out = AddLearnerColumns(["obs", "rewards"])(episodes, {})
    assert list(out) == ["obs", "rewards", "vf_preds"]
    assert AddLearnerColumns(["infos"])(episodes, {})["infos"][:2] == [{"i": 0}, {"i": 0}]
