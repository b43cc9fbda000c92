"""``add_rollouts`` given a record (structured) array: a refusal naming what is valid.

Records reached the check the buffer makes of its own nested rows, whose words ("nested values
must be a 1-d array of records") read as if a 1-d record array were what to give. Each
refusal now names the argument, says what it takes and what was given, and stores nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.structs import data_equal

B, H = 2, 2
RECORD = np.dtype([("x", np.float32), ("y", np.float32)])


def _arrays() -> dict[str, Any]:
    return {
        "observations": np.zeros((B, H + 1, 1), np.float32),
        "actions": np.zeros((B, H), np.int64),
        "rewards": np.ones((B, H), np.float32),
    }


# (name, the arguments changed, the argument named, words of what is valid)
CASES = [
    ("2-d record observations", {"observations": np.zeros((B, H + 1), RECORD)}, "observations",
     "a numeric array, or a dict or tuple"),
    ("3-d record observations", {"observations": np.zeros((B, H + 1, 1), RECORD)},
     "observations", "a numeric array, or a dict or tuple"),
    ("1-d record observations", {"observations": np.zeros(B, RECORD)}, "observations",
     "a numeric array, or a dict or tuple"),
    ("record actions", {"actions": np.zeros((B, H), RECORD)}, "actions",
     "a numeric array, or a dict or tuple"),
    ("record leaf of dict actions", {"actions": {"a": np.zeros((B, H), RECORD)}}, "actions",
     "a numeric array, or a dict or tuple"),
    ("record rewards", {"rewards": np.zeros((B, H), RECORD)}, "rewards",
     r"a numeric \[B, H\] array"),
    ("record extra", {"extra_model_outputs": {"vf": np.zeros((B, H), RECORD)}},
     r"extra_model_outputs\['vf'\]", "a numeric array, or a dict or tuple"),
]  # fmt: skip


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("filled", [False, True], ids=["empty", "filled"])
@pytest.mark.parametrize(("name", "changed", "what", "valid"), CASES, ids=[c[0] for c in CASES])
def test_a_record_array_is_refused_naming_the_argument_and_what_is_valid(
    cls: type, filled: bool, name: str, changed: dict[str, Any], what: str, valid: str
) -> None:
    buf = cls(100)
    if filled:
        buf.add_rollouts(**_arrays(), ids=["kept", "also kept"])
    before = buf.get_state()
    with pytest.raises(TypeError, match=rf"^{what}: expected {valid}.*got a record array of shape"):
        buf.add_rollouts(**{**_arrays(), **changed})
    assert data_equal(buf.get_state(), before)


def test_the_refusal_shows_the_records_shape_and_dtype_and_how_to_give_its_fields() -> None:
    buf = EpisodeReplayBuffer(100)
    with pytest.raises(TypeError) as info:
        buf.add_rollouts(np.zeros((B, H + 1), RECORD), *list(_arrays().values())[1:])
    message = str(info.value)
    assert f"shape {(B, H + 1)}" in message and str(RECORD) in message
    assert "{name: values[name] for name in values.dtype.names}" in message
    assert buf.get_num_timesteps() == 0 and buf.get_num_episodes() == 0


def test_the_fields_given_as_a_dict_are_stored() -> None:
    """What the message says to do works: the record's fields as a Dict observation."""
    records = np.zeros((B, H + 1), RECORD)
    records["x"] = np.arange(B * (H + 1)).reshape(B, H + 1)
    buf = EpisodeReplayBuffer(100)
    arrays = _arrays()
    arrays["observations"] = {name: records[name] for name in records.dtype.names}
    ids = buf.add_rollouts(**arrays, ids=[0, 1])
    assert ids == [0, 1] and buf.get_num_timesteps() == B * H
