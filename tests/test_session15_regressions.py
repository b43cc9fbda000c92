"""Regressions the session-15 regression hunt found in that session's own fixes.

Named cases, each of which failed on the code before its fix:
* ``episodes_to_batch`` refused extra-output keys that are not str (they worked before);
* the replay buffer refused ``np.str_`` extra-output keys (a ``str`` subclass);
* the dataset writers refused masked arrays with nothing masked (no value is lost);
* the device fast path refused a reversed numpy ``value_fn`` output the host paths take;
* v2 datasets failed with Arrow's own error at exactly 64 nesting levels;
* ``ConnectorContract``/``check_connector`` were no longer importable from
  ``episodes.testing.contracts``.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode


@pytest.mark.parametrize("key", [0, ("head", 1)], ids=["int", "tuple"])
def test_batch_takes_extra_keys_that_are_not_str(key) -> None:
    from episodes.converter import episodes_to_batch

    ep = SingleAgentEpisode(
        "e",
        observations=[0.0, 1.0, 2.0],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        extra_model_outputs={key: [0.1, 0.2]},
        len_lookback_buffer=0,
    )
    batch = episodes_to_batch([ep])
    assert np.asarray(batch[key]).tolist() == [0.1, 0.2]


def test_replay_takes_numpy_str_extra_keys() -> None:
    from episodes.replay import EpisodeReplayBuffer

    ep = SingleAgentEpisode(
        "e",
        observations=[0.0, 1.0, 2.0],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        extra_model_outputs={np.str_("vf_preds"): [0.1, 0.2]},
        len_lookback_buffer=0,
    )
    buf = EpisodeReplayBuffer(capacity=10, seed=0)
    buf.add([ep])
    batch = buf.sample(2, include_extra_model_outputs=True)
    assert type(next(k for k in batch if k == "vf_preds")) is str


@pytest.mark.parametrize("writer", ["EpisodeWriter", "DatasetWriter"])
def test_masked_arrays_with_nothing_masked_are_stored(tmp_path, writer) -> None:
    import episodes.io as eio

    value = np.ma.masked_array([1.0, 2.0], mask=[False, False])
    ep = SingleAgentEpisode(
        "e",
        observations=[0, 1],
        actions=[0],
        rewards=[0.0],
        infos=[{"m": value}, {}],
        len_lookback_buffer=0,
    )
    with getattr(eio, writer)(tmp_path / "ds") as w:
        w.write(ep)
    (back,) = list(eio.read_episodes(tmp_path / "ds"))
    assert back.get_infos(0)["m"].tolist() == [1.0, 2.0]


def test_masked_arrays_with_masked_entries_stay_refused(tmp_path) -> None:
    from episodes.io import DatasetWriter, UnstorableValueError

    ep = SingleAgentEpisode(
        "e",
        observations=[0, 1],
        actions=[0],
        rewards=[0.0],
        infos=[{"m": np.ma.masked_array([1.0, 2.0], mask=[False, True])}, {}],
        len_lookback_buffer=0,
    )
    with DatasetWriter(tmp_path / "ds") as w, pytest.raises(UnstorableValueError):
        w.write(ep)


def test_device_path_takes_a_reversed_numpy_value_output() -> None:
    from episodes.converter.inputs import real_value_tensor

    values = np.arange(3.0)[::-1]
    assert real_value_tensor(values, 3, "value_fn returned", "cpu").tolist() == [2.0, 1.0, 0.0]


def _nest(depth: int) -> object:
    item: object = 1
    for _ in range(depth):
        item = {"k": item}
    return item


def test_v2_refuses_a_column_arrow_cannot_nest_by_name_and_stays_usable(tmp_path) -> None:
    from episodes.io import DatasetWriter, UnstorableValueError, read_episodes

    deep = SingleAgentEpisode(
        "deep",
        observations=[_nest(64), _nest(64)],
        actions=[0],
        rewards=[0.0],
        len_lookback_buffer=0,
    )
    ok = SingleAgentEpisode(
        "ok",
        observations=[_nest(63), _nest(63)],
        actions=[0],
        rewards=[0.0],
        len_lookback_buffer=0,
    )
    with DatasetWriter(tmp_path / "ds") as w:
        with pytest.raises(UnstorableValueError, match="nested too deeply for an Arrow column"):
            w.write(deep)
        w.write(ok)
    assert [ep.id_ for ep in read_episodes(tmp_path / "ds")] == ["ok"]


def test_contract_suite_names_still_import_from_contracts() -> None:
    from episodes.testing import contracts, suite

    assert contracts.ConnectorContract is suite.ConnectorContract
    assert contracts.check_connector is suite.check_connector
    with pytest.raises(AttributeError):
        contracts.no_such_name  # noqa: B018
