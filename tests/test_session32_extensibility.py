"""Users extending the library: subclasses of buffers and spaces, connectors of their own.

- ``load`` called on a replay buffer subclass builds that class (of the saved kind only);
- a connector returning None is refused by the pipeline, naming it;
- ``items(space)`` of a space overriding ``contains`` draws only values it takes;
- a Box subclass that keeps ``contains`` takes NaN where the Box itself does (``set``);
- a zero-step list-mode chunk's ``(0,)`` rows join the other episodes' rows;
- an env without ``metadata`` (or with None) is next-step, as unset.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from hypothesis import given, settings

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.buffer.space_checks import takes_nan, unbounded_scalar
from episodes.connectors.base import ConnectorPipeline, EpisodeConnector, concat_rows
from episodes.connectors.joining import join_leaves
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.runner import autoreset_mode_of
from episodes.testing import check_connector
from episodes.testing.strategies import items


def _episode(id_: str = "a") -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[0.0, 1.0, 2.0],
        actions=[0, 1],
        rewards=[1.0, 2.0],
        len_lookback_buffer=0,
    )


# ------------------------------------------------------------------ load of a subclass
class MyBuffer(EpisodeReplayBuffer):
    def __init__(
        self, capacity: int = 10_000, *, batch_size_B: int = 16, seed: Any = None, tag: str = "mine"
    ):
        super().__init__(capacity, batch_size_B=batch_size_B, seed=seed)
        self.tag = tag


class MyPrioritized(PrioritizedEpisodeReplayBuffer):
    pass


class NoSettings(EpisodeReplayBuffer):
    def __init__(self, capacity: int):
        super().__init__(capacity)


@pytest.fixture()
def saves(tmp_path: Path) -> dict[str, Path]:
    uniform, prioritized = MyBuffer(100, batch_size_B=4, seed=0), MyPrioritized(50, alpha=0.5)
    for buf, name in ((uniform, "uniform"), (prioritized, "prioritized")):
        buf.add(_episode())
        buf.save(tmp_path / name)
    return {"uniform": tmp_path / "uniform", "prioritized": tmp_path / "prioritized"}


LOADS = [  # (class load is called on, save, class built)
    (MyBuffer, "uniform", MyBuffer),
    (MyPrioritized, "prioritized", MyPrioritized),
    (EpisodeReplayBuffer, "uniform", EpisodeReplayBuffer),  # the base classes: the saved kind
    (EpisodeReplayBuffer, "prioritized", PrioritizedEpisodeReplayBuffer),
    (PrioritizedEpisodeReplayBuffer, "uniform", EpisodeReplayBuffer),
    (PrioritizedEpisodeReplayBuffer, "prioritized", PrioritizedEpisodeReplayBuffer),
]


@pytest.mark.parametrize(("cls", "save", "built"), LOADS)
def test_load_builds_the_class_it_is_called_on_or_the_saved_kind(
    saves: dict[str, Path], cls: Any, save: str, built: type
) -> None:
    back = cls.load(saves[save])
    assert type(back) is built
    assert back.get_episode_ids() == ["a"] and back.get_num_timesteps() == 2
    assert back.capacity == (100 if save == "uniform" else 50)
    if save == "prioritized":
        assert back.alpha == 0.5
    else:
        assert back.batch_size_B == 4
    if built is MyBuffer:
        assert back.tag == "mine"  # its own arguments keep their defaults


def test_load_on_an_instance_builds_its_class(saves: dict[str, Path]) -> None:
    assert type(MyBuffer(5).load(saves["uniform"])) is MyBuffer


@pytest.mark.parametrize(
    ("cls", "save", "words"),
    [
        (MyBuffer, "prioritized", "MyBuffer is not a PrioritizedEpisodeReplayBuffer"),
        (MyPrioritized, "uniform", "MyPrioritized is a PrioritizedEpisodeReplayBuffer"),
    ],
)
def test_load_of_the_other_kind_by_a_subclass_is_refused(
    saves: dict[str, Path], cls: Any, save: str, words: str
) -> None:
    with pytest.raises(ValueError, match=words):
        cls.load(saves[save])


def test_load_by_a_subclass_whose_constructor_refuses_the_settings(
    saves: dict[str, Path],
) -> None:
    with pytest.raises(TypeError, match=r"NoSettings.load calls NoSettings\(capacity, "):
        NoSettings.load(saves["uniform"])


# ------------------------------------------------------------ connectors returning None
def add_in_place(episodes: list[SingleAgentEpisode], batch: dict[str, Any]) -> None:
    batch["x"] = np.zeros(sum(len(ep) for ep in episodes))


class InPlace(EpisodeConnector):
    def __call__(self, episodes: Any, batch: dict[str, Any]) -> Any:
        batch["y"] = 1


@pytest.mark.parametrize(
    ("connectors", "name", "position"),
    [
        ([add_in_place], "add_in_place", 0),  # the last one: the pipeline returned None
        ([add_in_place, lambda eps, b: {**b, "z": 1}], "add_in_place", 0),
        ([lambda eps, b: b, InPlace()], "InPlace(inference=False)", 1),
    ],
)
def test_a_connector_returning_none_is_refused_naming_it(
    connectors: list[Any], name: str, position: int
) -> None:
    batch = {"given": 1}
    with pytest.raises(TypeError) as info:
        ConnectorPipeline(connectors)([_episode()], batch)
    message = str(info.value)
    assert f"connector {position} ({name}) returned None" in message
    assert "return the batch" in message
    assert batch == {"given": 1}  # put back, as for any connector refusing


def test_connectors_returning_the_batch_still_run() -> None:
    def in_place(eps: Any, batch: dict[str, Any]) -> dict[str, Any]:
        batch["x"] = 1
        return batch

    assert ConnectorPipeline([in_place, lambda e, b: {**b, "y": 2}])([]) == {"x": 1, "y": 2}


# -------------------------------------------------- items of spaces overriding contains
class UnitBall(gym.spaces.Box):
    def contains(self, x: Any) -> bool:
        return bool(super().contains(x)) and float(np.linalg.norm(x)) <= 1.0


class PlainBox(gym.spaces.Box):  # overrides nothing: drawn as Box, unfiltered
    pass


BALL = UnitBall(-1.0, 1.0, (2,), np.float32)


@pytest.mark.parametrize(
    "space",
    [BALL, gym.spaces.Dict({"a": BALL, "b": gym.spaces.Discrete(2)}), gym.spaces.Tuple((BALL,))],
    ids=["ball", "in a dict", "in a tuple"],
)
def test_items_of_a_space_overriding_contains_satisfy_it(space: gym.Space[Any]) -> None:
    @settings(max_examples=150, database=None)
    @given(items(space))
    def check(value: Any) -> None:
        assert space.contains(value)

    check()


def test_items_of_a_subclass_keeping_contains_are_drawn_as_its_base() -> None:
    space, drawn = PlainBox(-1.0, 1.0, (2,), np.float32), []

    @settings(max_examples=200, database=None)
    @given(items(space))
    def check(value: Any) -> None:
        assert space.contains(value)
        drawn.append(float(np.linalg.norm(value)))

    check()
    assert max(drawn) > 1.0  # the corners of the box, unfiltered


# ------------------------------------------------------- NaN in a Box subclass's column
UNBOUNDED_ARGS = (float("-inf"), float("inf"), (), np.float32)


class StrictBox(gym.spaces.Box):
    def contains(self, x: Any) -> bool:
        return bool(super().contains(x))


@pytest.mark.filterwarnings("ignore:.*Casting input x")  # gymnasium's, for a Python float
@pytest.mark.parametrize(
    ("space", "takes"),
    [
        (gym.spaces.Box(*UNBOUNDED_ARGS), True),
        (PlainBox(*UNBOUNDED_ARGS), True),  # overrides nothing: the Box's rule
        (StrictBox(*UNBOUNDED_ARGS), False),  # judges its items itself
        (PlainBox(-1.0, 1.0, (), np.float32), False),
        (PlainBox(float("-inf"), float("inf"), (2,), np.float32), False),
    ],
)
def test_nan_rule_follows_box_subclasses_that_keep_contains(
    space: gym.spaces.Box, takes: bool
) -> None:
    assert unbounded_scalar(space) is takes and takes_nan(space) is takes
    buf = InfiniteLookbackBuffer([0.0, 1.0, 2.0], space=space)
    buf.finalize()
    if takes:
        buf.set(np.array([np.nan, 5.0, np.nan]))
        buf.set(float("nan"), at_indices=1)
        assert np.isnan(buf.get()).tolist() == [True, True, True]
    else:
        with pytest.raises(ValueError, match="not in the buffer's space"):
            buf.set(float("nan"), at_indices=1)
        assert buf.get().tolist() == [0.0, 1.0, 2.0]


# ---------------------------------------------------------- joining rows of no steps
class Obs(EpisodeConnector):  # the EpisodeConnector docstring's example
    def __call__(self, episodes: Any, batch: dict[str, Any]) -> Any:
        rows = [np.asarray(ep.get_observations(slice(*self.rows(ep)))) for ep in episodes]
        return {**batch, "obs": concat_rows(rows)} if rows else batch


JOINS = {  # leaves -> (joined shape, dtype)
    "empty first": ([np.asarray([]), np.ones((2, 2), np.float32)], ((2, 2), np.float32)),
    "empty last": ([np.ones((2, 2), np.int64), np.asarray([])], ((2, 2), np.int64)),
    "empty between": ([np.ones((1, 3)), np.asarray([]), np.zeros((2, 3))], ((3, 3), np.float64)),
    "empty list": ([np.ones((1, 2)), []], ((1, 2), np.float64)),
    # Joined as they are, as before: the empty one's dtype counts there.
    "all flat": ([np.asarray([]), np.arange(2)], ((2,), np.float64)),
    "all empty": ([np.asarray([]), np.asarray([])], ((0,), np.float64)),
    "(0, 2) rows": ([np.zeros((0, 2), np.float32), np.ones((1, 2), np.int8)], ((1, 2), np.float32)),
}


@pytest.mark.parametrize("case", JOINS, ids=list(JOINS))
def test_join_leaves_leaves_out_rows_of_no_shape_only_where_needed(case: str) -> None:
    leaves, (shape, dtype) = JOINS[case]
    joined = join_leaves(leaves)
    assert joined.shape == shape and joined.dtype == dtype
    kept = [np.asarray(leaf) for leaf in leaves if np.shape(leaf) != (0,) or len(leaves) < 2]
    if case.startswith("empty"):
        assert joined.tolist() == np.concatenate(kept).tolist()


@pytest.mark.parametrize(
    "leaves",
    [
        [np.zeros((1, 2)), np.zeros((1, 3))],  # rows that do not join: numpy's error, as before
        [np.zeros((1, 2)), np.asarray([]), np.zeros((1, 3))],
        [np.zeros((1, 2)), np.zeros((0, 3))],  # an empty leaf with a row shape is kept
    ],
)
def test_rows_that_do_not_join_are_still_refused(leaves: list[Any]) -> None:
    with pytest.raises(ValueError, match="dimension"):
        join_leaves(leaves)


def test_connector_of_the_docstring_passes_check_connector_on_a_box() -> None:
    check_connector(Obs(), observation_space=gym.spaces.Box(-1, 1, (2,), np.float32))


def test_concat_rows_joins_a_zero_step_list_mode_episode() -> None:
    empty = SingleAgentEpisode("e", observations=[np.zeros(2, np.float32)], len_lookback_buffer=0)
    full = SingleAgentEpisode(
        "f",
        observations=[np.ones(2, np.float32)] * 3,
        actions=[0, 0],
        rewards=[0.0, 0.0],
        len_lookback_buffer=0,
    )
    obs = Obs()([empty, full], {})["obs"]
    assert obs.shape == (2, 2) and obs.dtype == np.float32


# ----------------------------------------------------------- env without metadata
@pytest.mark.parametrize(
    ("env", "mode"),
    [
        (SimpleNamespace(), AutoresetMode.NEXT_STEP),
        (SimpleNamespace(metadata=None), AutoresetMode.NEXT_STEP),
        (SimpleNamespace(metadata={}), AutoresetMode.NEXT_STEP),
        (SimpleNamespace(metadata={"autoreset_mode": "SameStep"}), AutoresetMode.SAME_STEP),
        (
            SimpleNamespace(metadata={"autoreset_mode": AutoresetMode.DISABLED}),
            AutoresetMode.DISABLED,
        ),
    ],
)
def test_autoreset_mode_of_an_env_without_metadata_is_next_step(env: Any, mode: Any) -> None:
    assert autoreset_mode_of(env) is mode


def test_check_connector_refuses_a_connector_that_returns_none():
    from episodes.testing import ConnectorContractError

    def add_flag(eps, batch):  # updates in place and forgets to return the batch
        batch["flag"] = np.ones(sum(len(e) for e in eps))

    with pytest.raises(ConnectorContractError, match="returned None"):
        check_connector(add_flag, observation_space=gym.spaces.Box(-1, 1, (2,), np.float32))
