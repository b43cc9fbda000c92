"""merge: sources holding the same steps of an episode are refused before anything is written.

A merged dataset must still join every episode's pieces (``load_episode``): the same steps
stored twice (a dataset merged with itself, or with a migrated copy) cannot be joined.
Different pieces of one episode in different sources are what merge is for.
"""

from __future__ import annotations

import numpy as np
import pytest
from _gen import moved

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    DatasetError,
    DatasetWriter,
    EpisodeWriter,
    filter_dataset,
    load_episode,
    merge,
    migrate,
)


def episode(id_: str, length: int = 6, *, terminated: bool = True) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.float32([t]) for t in range(length + 1)],
        actions=[t % 2 for t in range(length)],
        rewards=[float(t) for t in range(length)],
        terminated=terminated,
        len_lookback_buffer=0,
    )


def write(path, episodes, *, v1=False):
    if v1:
        with EpisodeWriter(path) as writer:
            writer.write_many(episodes)
    else:
        with DatasetWriter(path) as writer:
            writer.write_many(episodes)
    return path


def test_a_dataset_merged_with_itself_is_refused(tmp_path):
    src = write(tmp_path / "a", [episode("x"), episode("y")])
    with pytest.raises(DatasetError, match=r"episode 'x': steps \[0, 6\)"):
        merge([src, src], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_migrated_copy_overlaps_its_original(tmp_path):
    v1 = write(tmp_path / "v1", [episode("x")], v1=True)
    migrate(v1, tmp_path / "v2")
    with pytest.raises(DatasetError, match="stored twice"):
        merge([tmp_path / "v2", v1], tmp_path / "out")


def test_pieces_of_one_episode_from_two_sources_join(tmp_path):
    whole = episode("x", 8)
    first = whole[0:5]
    second = whole[5:8]
    a = write(tmp_path / "a", [first, episode("y")])
    b = write(tmp_path / "b", [second, SingleAgentEpisode("z", observations=[0.0])])
    assert merge([a, b], tmp_path / "out") == 4
    joined = load_episode(tmp_path / "out", "x")
    assert (joined.t_started, joined.t, joined.is_terminated) == (0, 8, True)
    np.testing.assert_array_equal(joined.get_rewards(), whole.get_rewards())


@pytest.mark.parametrize(
    ("wanted", "kept"),
    [({"k": 2}, 2), ({"k": 1}, 0), ({"first": True}, 2), ({"first": False}, 0)],
    ids=["the later piece's value", "an overwritten value", "a key of one piece", "no match"],
)
def test_filtering_on_custom_data_keeps_or_drops_an_episode_whole(tmp_path, wanted, kept):
    # Decided piece by piece, {"k": 2} kept the second piece alone: an episode starting at t=5.
    whole = episode("x", 8)
    first, second = whole[0:5], whole[5:8]
    first.custom_data.update(k=1, first=True)
    second.custom_data.update(k=2)
    src = write(tmp_path / "src", [first, second])
    assert filter_dataset(src, tmp_path / "out", custom_data=wanted) == kept
    if kept:
        joined = load_episode(tmp_path / "out", "x")
        assert (joined.t_started, joined.t, joined.custom_data) == (0, 8, {"k": 2, "first": True})


def test_pieces_without_steps_overlap_nothing(tmp_path):
    reset_only = SingleAgentEpisode("r", observations=[np.float32([0])])
    a = write(tmp_path / "a", [reset_only])
    b = write(tmp_path / "b", [reset_only, episode("s")])
    assert merge([a, b], tmp_path / "out") == 3


def with_logp(piece: SingleAgentEpisode) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        piece.id_,
        observations=list(piece.get_observations()),
        actions=list(piece.get_actions()),
        rewards=list(piece.get_rewards()),
        extra_model_outputs={"logp": [0.0] * len(piece)},
        terminated=piece.is_terminated,
        t_started=piece.t_started,
        len_lookback_buffer=0,
    )


def with_nan_at(whole: SingleAgentEpisode, t: int) -> SingleAgentEpisode:
    whole.set_observations(new_data=np.float32([np.nan]), at_indices=t)
    return whole


def _rewards_piece(rewards: list, t: int, *, numpy: bool) -> SingleAgentEpisode:
    piece = SingleAgentEpisode(
        "x",
        observations=[float(t + k) for k in range(len(rewards) + 1)],
        actions=[0] * len(rewards),
        rewards=rewards,
        t_started=t,
        len_lookback_buffer=0,
    )
    return piece.to_numpy() if numpy else piece


PIECES = {
    "whole_episodes": (lambda: [episode("x"), episode("y")], []),
    "consecutive_pieces": (lambda: [episode("x", 8)[0:3], episode("x", 8)[3:8]], []),
    "reset_only_piece_twice": (
        lambda: [SingleAgentEpisode("r", observations=[np.float32([0])])] * 2 + [episode("r")],
        [],
    ),
    "reset_only_piece_after_the_whole_episode": (
        lambda: [episode("r"), SingleAgentEpisode("r", observations=[np.float32([0])])],
        [],
    ),
    "reset_only_piece_with_another_observation": (
        lambda: [SingleAgentEpisode("r", observations=[np.float32([7])]), episode("r")],
        ["piece at t=0 does not start with its predecessor's last observation"],
    ),
    "pieces_in_reverse_order": (
        lambda: [episode("x", 8)[5:8], episode("x", 8)[0:5], episode("y")],
        [],
    ),
    "reset_only_piece_after_the_end": (
        lambda: [episode("x", 4), episode("x", 4)[4:4]],
        ["a piece at t=4 follows its end"],
    ),
    "a_gap": (lambda: [episode("x", 8)[0:3], episode("x", 8)[5:8]], ["steps [3, 5) are missing"]),
    "next_piece_starts_with_another_observation": (
        lambda: [episode("x", 8)[0:3], moved(episode("x", 8)[3:8])],
        ["piece at t=3 does not start with its predecessor's last observation"],
    ),
    "the_same_border_problem_read_in_reverse": (
        lambda: [moved(episode("x", 8)[3:8]), episode("x", 8)[0:3]],
        ["piece at t=3 does not start with its predecessor's last observation"],
    ),
    "next_piece_with_other_extra_outputs": (
        lambda: [episode("x", 8)[0:3], with_logp(episode("x", 8)[3:8])],
        ["piece at t=3 has other extra-model-output keys"],
    ),
    "nan_observation_at_the_border": (
        lambda: [with_nan_at(episode("x", 8), 3)[0:3], with_nan_at(episode("x", 8), 3)[3:8]],
        [],
    ),
    "same_piece_twice": (lambda: [episode("x"), episode("x")], ["steps [0, 6) are stored twice"]),
    # A stepless piece passed its predecessor's keys on only when read after it: written
    # first, the logp-less successor was compared with it alone and passed.
    "stepless_piece_written_first_between_other_keys": (
        lambda: [
            episode("x", 8)[3:3],
            with_logp(episode("x", 8)[0:3]),
            episode("x", 8)[3:8],
        ],
        ["piece at t=3 has other extra-model-output keys"],
    ),
    # The joined episode keeps its first piece's int64 rewards; a list-mode piece in between
    # hid the float piece after it, which the int column refuses.
    "int_rewards_then_list_then_float": (
        lambda: [
            _rewards_piece([1], 0, numpy=True),
            _rewards_piece([3], 1, numpy=False),
            _rewards_piece([0.5], 2, numpy=True),
        ],
        ["piece at t=2 does not join its predecessor"],
    ),
    # validate said OK; load_episode's concat refused the actions' other shape.
    "actions_of_another_shape": (
        lambda: [
            SingleAgentEpisode(
                "x",
                observations=[0.0, 1.0],
                actions=[np.zeros(2)],
                rewards=[1.0],
                len_lookback_buffer=0,
            ).to_numpy(),
            SingleAgentEpisode(
                "x",
                observations=[1.0, 2.0],
                actions=[np.zeros(3)],
                rewards=[1.0],
                t_started=1,
                len_lookback_buffer=0,
            ).to_numpy(),
        ],
        ["piece at t=1 does not join its predecessor"],
    ),
    "partly_overlapping": (
        lambda: [episode("x", 8)[0:5], episode("x", 8)[3:8]],
        ["steps [3, 5) are stored twice"],
    ),
    "piece_after_the_end": (
        lambda: [
            episode("x", 4),
            SingleAgentEpisode(
                "x",
                observations=[4.0, 5.0],
                actions=[0],
                rewards=[1.0],
                t_started=4,
                len_lookback_buffer=0,
            ),
        ],
        ["steps from t=4 follow its end"],
    ),
}


@pytest.mark.parametrize("v1", [False, True], ids=["v2", "v1"])
@pytest.mark.parametrize(("pieces", "problems"), PIECES.values(), ids=PIECES.keys())
def test_piece_problems_and_validate(tmp_path, capsys, pieces, problems, v1):
    from episodes.cli import main
    from episodes.io import piece_problems, validate_dataset

    path = write(tmp_path / "ds", pieces(), v1=v1)
    report = validate_dataset(path)
    assert report.ok is not problems and report.pieces == len(pieces())
    assert (report.shards is None) is v1 and len(report.problems) == len(problems)
    manifest_only = [p for p in problems if not p.startswith("piece at")]  # borders need data
    got = piece_problems(path)
    assert len(got) == len(manifest_only)
    for message, fragment in zip(got, manifest_only, strict=True):
        assert fragment in message
    assert main(["validate", str(path)]) == (1 if problems else 0)
    reported = capsys.readouterr().err
    for fragment in problems:
        assert fragment in reported
    # validate's verdict is load_episode's: it calls a dataset OK when every id loads.
    failing = set()
    for id_ in {piece.id_ for piece in pieces()}:
        try:
            load_episode(path, id_)
        except CorruptDatasetError:
            failing.add(id_)
    assert bool(failing) == bool(problems)
