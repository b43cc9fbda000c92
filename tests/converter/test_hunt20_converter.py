"""Extra outputs recorded as Python lists, episodes_to_batch's refusals, CircularBuffer sizes.

- ``episodes_to_rollout`` takes a step recorded as a Python list as one array, as the runner
  takes it (api.md, ``episodes_to_rollout``): ``[0.1, 0.9]`` a step stores as
  ``np.array([0.1, 0.9])`` a step does, in list-mode and numpy'd chunks; it was laid out
  transposed (``[W, T]`` read as ``[T, W]``).
- ``episodes_to_batch`` names the column and two chunks when flat rows do not join, and
  refuses an iterator, which its check would use up.
- ``CircularBuffer.mini_batch_generator`` sizes are ints >= 1 (contract §9.5): 0 batches too.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.converter import ColumnKeys, episodes_to_batch, episodes_to_rollout
from episodes.rollout import CircularBuffer


def _episode(extras: dict[str, Any], steps: int = 2, numpy: bool = False):
    ep = SingleAgentEpisode(
        observations=[np.zeros(2, np.float32)] * (steps + 1),
        actions=[0] * steps,
        rewards=[1.0] * steps,
        terminated=True,
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.0] * steps, "action_logp": [0.0] * steps, **extras},
    )
    return ep.to_numpy() if numpy else ep


LOGITS = [[0.1, 0.9], [0.2, 0.8]]  # two steps, two numbers a step

# (name, the recorded per-step items, the ColumnKeys, the storage field read, the [T, ...] steps)
LIST_CASES = [
    ("logits", LOGITS, ColumnKeys(distribution=("l",)), "dist", LOGITS),
    ("square logits", [[1.0, 2.0], [3.0, 4.0]], ColumnKeys(distribution=("l",)), "dist", None),
    ("hidden state", [[[0.1, 0.2]], [[0.3, 0.4]]], ColumnKeys(actor_hidden=("l",)), "hidden", None),
    (
        "list of arrays",
        [[np.zeros(2), np.ones(2)]] * 2,
        ColumnKeys(distribution=("l",)),
        "dist",
        None,
    ),
]


def _stored(rollout: Any, field: str) -> np.ndarray:
    storage = rollout.storage
    if field == "dist":
        return storage.distribution_params[0][:, 0].numpy()
    if field == "hidden":  # [T, num_layers, N, hidden] -> env 0's [T, num_layers, hidden]
        return storage.saved_hidden_states_actor[0][:, :, 0].numpy()
    return storage.privileged_actions[:, 0].numpy()


@pytest.mark.parametrize("numpy", [False, True], ids=["list-mode", "numpy'd"])
@pytest.mark.parametrize(
    ("items", "keys", "field", "want"), [c[1:] for c in LIST_CASES], ids=[c[0] for c in LIST_CASES]
)
def test_a_list_per_step_is_one_array_per_step(items, keys, field, want, numpy):
    from_lists = episodes_to_rollout([_episode({"l": items}, numpy=numpy)], gamma=0.9, keys=keys)
    arrays = [np.asarray(item, dtype=np.float64) for item in items]
    from_arrays = episodes_to_rollout([_episode({"l": arrays}, numpy=numpy)], gamma=0.9, keys=keys)
    expected = np.asarray(items if want is None else want, dtype=np.float32)
    np.testing.assert_allclose(_stored(from_lists, field), expected, rtol=1e-6)
    np.testing.assert_array_equal(_stored(from_lists, field), _stored(from_arrays, field))


def test_teacher_actions_recorded_as_lists_keep_their_steps():
    ep = SingleAgentEpisode(
        observations=[np.zeros(2, np.float32)] * 3,
        actions=[np.array([0.1, 0.9]), np.array([0.2, 0.8])],
        rewards=[0.0, 0.0],
        len_lookback_buffer=0,
        extra_model_outputs={"teacher": [[1.0, 2.0], [3.0, 4.0]]},
    )
    rollout = episodes_to_rollout(
        [ep], gamma=0.9, keys=ColumnKeys(privileged_actions="teacher"), training_type="distillation"
    )
    assert rollout.storage.privileged_actions[:, 0].tolist() == [[1.0, 2.0], [3.0, 4.0]]


# (name, the recorded extras, the keys, what the message must say)
LIST_REFUSALS = [
    (
        "values two numbers a step, T=3",
        {"vf_preds": [[0.0, 1.0]] * 3},
        ColumnKeys(),
        r"'vf_preds' has steps of shape \(2,\)",
    ),
    (
        "entries of other shapes",
        {"l": [[1.0, [2.0]]] * 3},
        ColumnKeys(distribution=("l",)),
        r"extra output 'l' holds lists whose entries are of different shapes",
    ),
    (
        "a dict in a list",
        {"l": [[{"a": 1.0}]] * 3},
        ColumnKeys(distribution=("l",)),
        r"'l' holds a dict",
    ),
    (
        "strings in a list",
        {"l": [["a", "b"]] * 3},
        ColumnKeys(distribution=("l",)),
        r"'l' holds strings",
    ),
    (
        "a [hidden] state as a list",
        {"l": [[0.1, 0.2]] * 3},
        ColumnKeys(actor_hidden=("l",)),
        r"hidden-state column 'l' holds items of shape \(2,\)",
    ),
]


@pytest.mark.parametrize(
    ("extras", "keys", "message"), [c[1:] for c in LIST_REFUSALS], ids=[c[0] for c in LIST_REFUSALS]
)
def test_list_extras_that_are_no_array_are_refused_naming_the_key(extras, keys, message):
    ep = SingleAgentEpisode(
        observations=[np.zeros(2, np.float32)] * 4,
        actions=[0, 1, 0],
        rewards=[1.0] * 3,
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.0] * 3, "action_logp": [0.0] * 3, **extras},
    )
    with pytest.raises(ValueError, match=message):
        episodes_to_rollout([ep], gamma=0.9, keys=keys, value_fn=lambda o: np.zeros(len(o)))


def test_steps_of_other_lengths_are_refused_naming_the_key():
    ep = _episode({"l": [[1.0, 2.0], [1.0]]})
    with pytest.raises(ValueError, match=r"extra output 'l' of episode .*do not form one array"):
        episodes_to_rollout([ep], gamma=0.9, keys=ColumnKeys(distribution=("l",)))


def _chunk(i: int, obs: Any, act: Any = 0, extras: dict[str, Any] | None = None):
    return SingleAgentEpisode(
        id_=f"e{i}",
        observations=[obs] * 3,
        actions=[act] * 2,
        rewards=[1.0, 2.0],
        len_lookback_buffer=0,
        extra_model_outputs=extras,
    )


JOIN_CASES = {
    "obs (2,) vs (3,)": (
        [_chunk(0, np.zeros(2)), _chunk(1, np.zeros(3))],
        "obs",
        r"\(2,\).*\(3,\)",
    ),
    "actions (2,) vs (3,)": (
        [_chunk(0, 0, np.zeros(2)), _chunk(1, 0, np.zeros(3))],
        "actions",
        r"\(2,\).*\(3,\)",
    ),
    "extra (2,) vs (3,)": (
        [_chunk(0, 0, 0, {"v": [np.zeros(2)] * 2}), _chunk(1, 0, 0, {"v": [np.zeros(3)] * 2})],
        "v",
        r"\(2,\).*\(3,\)",
    ),
    "obs flat vs dict": ([_chunk(0, 0), _chunk(1, {"a": 0})], "obs", r"\(\).*\{'a': \(\)\}"),
    "obs dict vs flat": ([_chunk(0, {"a": 0}), _chunk(1, 0)], "obs", r"\{'a': \(\)\}.*\(\)"),
}


@pytest.mark.parametrize(("chunks", "column", "shapes"), JOIN_CASES.values(), ids=JOIN_CASES.keys())
def test_to_batch_names_the_column_and_chunks_whose_rows_do_not_join(chunks, column, shapes):
    with pytest.raises(ValueError) as info:
        episodes_to_batch(chunks)
    message = str(info.value)
    assert message.startswith(f"the chunks' {column!r} rows do not join: ")
    assert "chunk 0 (episode 'e0')" in message and "chunk 1 (episode 'e1')" in message
    assert re.search(shapes, message)


@pytest.mark.parametrize(
    "make",
    [lambda ep: iter([ep]), lambda ep: (e for e in [ep]), lambda ep: ep],
    ids=["iterator", "generator", "one episode"],
)
def test_to_batch_refuses_what_is_no_sequence(make):
    ep = SingleAgentEpisode(
        observations=[0, 1, 2], actions=[1, 0], rewards=[1.0, 2.0], len_lookback_buffer=0
    )
    with pytest.raises(TypeError, match="episodes_to_batch takes a flat sequence"):
        episodes_to_batch(make(ep))
    assert len(episodes_to_batch([ep])["obs"]) == 2  # a list is read as before
    assert len(episodes_to_batch((ep,))["obs"]) == 2


@pytest.mark.parametrize("num_batches", [0, -1, 1.5, 2.0])
def test_circular_buffer_refuses_num_batches_below_one(num_batches):
    buf = CircularBuffer(4, 2)
    for i in range(4):
        buf.append(torch.full((2, 1), float(i)))
    with pytest.raises(ValueError, match="num_batches must be ints >= 1"):
        buf.mini_batch_generator(2, 1, num_batches)
    assert len(list(buf.mini_batch_generator(2, 1, 1))) == 1


@pytest.mark.parametrize(
    "number_obs, text_obs",
    [
        pytest.param([0, 1], ["a", "bb"], id="flat"),
        pytest.param([{"x": 0}, {"x": 1}], [{"x": "a"}, {"x": "b"}], id="dict-leaf"),
    ],
)
def test_to_batch_refuses_numbers_beside_strings_naming_both_chunks(
    number_obs: list[Any], text_obs: list[Any]
) -> None:
    ints = SingleAgentEpisode(
        "ints", observations=number_obs, actions=[0], rewards=[1.0], len_lookback_buffer=0
    )
    text = SingleAgentEpisode(
        "text", observations=text_obs, actions=[0], rewards=[1.0], len_lookback_buffer=0
    )
    with pytest.raises(ValueError, match=r"'obs' rows do not join: chunk 1 \(episode 'text'\)"):
        episodes_to_batch([ints, text])
    joined = episodes_to_batch([ints, ints])["obs"]  # numbers alone still join
    assert np.asarray(joined if not isinstance(joined, dict) else joined["x"]).dtype.kind == "i"
