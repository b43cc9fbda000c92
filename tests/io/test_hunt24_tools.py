"""Dataset tools hunt, round 24.

- ``validate_dataset`` compared each join in the space of the piece before it, where
  ``load_episode`` (``concat_episode``) compares in the joined episode's, its first piece's:
  a dataset validate called OK could fail to load, and the reverse.
- ``migrate`` and ``merge`` took a falsy ``metadata`` (``{}``) as not given; ``merge`` then
  skipped its env-id check.
- ``export_minari`` with a ``dataset_id`` that is no str raised ``re``'s bare ``TypeError``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, load_episode, merge, migrate, validate_dataset

BOX32 = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
BOX64 = gym.spaces.Box(-1.0, 1.0, (1,), np.float64)


def _piece(observations, space, t, numpy=False):
    steps = len(observations) - 1
    piece = SingleAgentEpisode(
        "e",
        observations=observations,
        actions=[0] * steps,
        rewards=[1.0] * steps,
        observation_space=space,
        t_started=t,
        len_lookback_buffer=0,
    )
    return piece.to_numpy() if numpy else piece


def f32(x):
    return np.array([x], np.float32)


def f64(x):
    return np.array([x], np.float64)


LAYOUTS = {
    # Spaces None, Box32, None: the joined episode has none, so the last join compares a
    # float32 array with a list exactly, and load_episode refuses it.
    "space-of-a-later-piece": [
        ([[0.5], [0.1]], None, False),
        ([f32(0.1), f32(0.1)], BOX32, False),
        ([[0.1], [0.2]], None, False),
    ],
    # Box32, None, None: every join compares in float32, and load_episode joins them.
    "space-of-the-first-piece": [
        ([f32(0.5), f32(0.1)], BOX32, False),
        ([f32(0.1), f32(0.1)], None, False),
        ([[0.1], [0.2]], None, False),
    ],
    # A piece without steps appends nothing: the episode ends with its own observation.
    "stepless-middle-piece": [
        ([f32(0.25), f32(1 / 3)], BOX32, True),
        ([f64(1 / 3)], BOX64, True),
        ([f32(1 / 3), f32(0.1)], None, True),
    ],
    # Layouts alike, then another: the trial join compares in the episode's space.
    "trial-in-the-episodes-space": [
        ([f64(0.25), f64(1 / 3)], BOX32, True),
        ([f64(1 / 3), f64(1 / 3)], BOX64, True),
        ([f32(1 / 3), f32(1 / 3)], None, True),
    ],
}

D2, D5 = gym.spaces.Discrete(2), gym.spaces.Discrete(5)
# (actions, action space, numpy'd): a list piece's actions are checked in the joined
# episode's action space (its first piece's), not in the piece before it's.
ACTION_LAYOUTS = {
    "later-piece-wider": [([1], D2, True), ([1], D5, True), ([3], None, False)],
    "first-piece-wider": [([1], D5, True), ([1], D2, True), ([4], None, False)],
}


@pytest.mark.parametrize("layout", list(ACTION_LAYOUTS), ids=list(ACTION_LAYOUTS))
def test_validate_checks_actions_in_the_joined_episodes_space(tmp_path, layout) -> None:
    pieces = []
    for t, (actions, space, numpy) in enumerate(ACTION_LAYOUTS[layout]):
        piece = SingleAgentEpisode(
            "e",
            observations=[[0.0], [0.0]],
            actions=actions,
            rewards=[1.0],
            action_space=space,
            t_started=t,
            len_lookback_buffer=0,
        )
        pieces.append(piece.to_numpy() if numpy else piece)
    _assert_validate_agrees_with_load(tmp_path / "d", pieces)


@pytest.mark.parametrize("layout", list(LAYOUTS), ids=list(LAYOUTS))
def test_validate_says_ok_exactly_where_load_episode_loads(tmp_path, layout) -> None:
    pieces, t = [], 0
    for observations, space, numpy in LAYOUTS[layout]:
        pieces.append(_piece(observations, space, t, numpy))
        t += len(observations) - 1
    _assert_validate_agrees_with_load(tmp_path / "d", pieces)


def _assert_validate_agrees_with_load(path, pieces) -> None:
    with DatasetWriter(path) as w:
        w.write_many(pieces)
    try:
        load_episode(path, "e")
        loads = True
    except Exception:  # noqa: BLE001 - any refusal: validate must report it
        loads = False
    report = validate_dataset(path)
    assert report.ok is loads, report.problems


@pytest.mark.parametrize("metadata", [{}, [], ""], ids=["dict", "list", "str"])
def test_tools_refuse_metadata_that_is_no_dataset_metadata(tmp_path, metadata) -> None:
    for name in "ab":
        with DatasetWriter(tmp_path / name) as w:
            w.write(_piece([[0.0], [1.0]], None, 0))
    with pytest.raises(TypeError, match="DatasetMetadata"):
        migrate(tmp_path / "a", tmp_path / "m", metadata=metadata)
    with pytest.raises(TypeError, match="DatasetMetadata"):
        merge([tmp_path / "a", tmp_path / "b"], tmp_path / "ab", metadata=metadata)
    assert not (tmp_path / "m").exists() and not (tmp_path / "ab").exists()


@pytest.mark.parametrize("dataset_id", [None, 3], ids=["none", "int"])
def test_export_minari_names_a_dataset_id_that_is_no_str(tmp_path, dataset_id) -> None:
    pytest.importorskip("minari")
    from episodes.io import export_minari

    with DatasetWriter(tmp_path / "d") as w:
        w.write(_piece([[0.0], [1.0]], None, 0))
    with pytest.raises(TypeError, match="dataset_id must be a str"):
        export_minari(tmp_path / "d", dataset_id, root=tmp_path / "minari")
    assert not (tmp_path / "minari").exists()
