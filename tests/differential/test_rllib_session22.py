"""Differential pins of session 22: a numpy'd ``eps_id`` keeps an id's trailing NUL.

Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_session22.py
"""

from __future__ import annotations

import pytest

pytest.importorskip("ray.rllib")

from tests.differential._rllib_ops import OSAE, RSAE  # noqa: E402

pytestmark = pytest.mark.differential


@pytest.mark.parametrize("id_", ["a\0", "\0", b"a\0"], ids=["str", "nul-only", "bytes"])
def test_numpy_eps_id_keeps_a_trailing_nul(id_) -> None:  # "tuple-eps-id"
    kw = dict(observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=0)
    ours, theirs = OSAE(id_, **kw), RSAE(id_, **kw)
    assert ours.get_data_dict()["eps_id"] == theirs.get_data_dict()["eps_id"] == [id_] * 2
    ours.to_numpy()
    theirs.to_numpy()
    assert ours.get_data_dict()["eps_id"].tolist() == [id_] * 2
    assert theirs.get_data_dict()["eps_id"].tolist() == [id_[:-1]] * 2  # RLlib: the NUL cut


@pytest.mark.parametrize("clock", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_a_clock_that_is_not_finite(clock) -> None:  # "state-clock-finite"
    kw = dict(observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0)
    for cls in (OSAE, RSAE):
        state = cls("a", **kw).get_state()
        state["_start_time" if cls is RSAE else "start_time"] = clock
        if cls is RSAE:
            restored = cls.from_state(state)  # RLlib: taken as it is
            assert restored._start_time != restored._start_time or restored._start_time == clock
            assert restored._start_time is not None
        else:
            with pytest.raises(ValueError, match="start_time must be a finite number"):
                cls.from_state(state)


@pytest.mark.parametrize("id_", [float("nan"), ("a", float("nan"))], ids=["nan", "tuple"])
def test_a_nan_ids_cut_successor(id_) -> None:  # "nan-id-equal"
    kw = dict(observations=[0.0, 1.0], actions=[0], rewards=[1.0], len_lookback_buffer=0)
    ours, theirs = OSAE(id_, **kw), RSAE(id_, **kw)
    ours_next, theirs_next = ours.cut(), theirs.cut()
    for episode in (ours_next, theirs_next):
        episode.add_env_step(2.0, 0, 1.0)
    ours.concat_episode(ours_next)
    assert len(ours) == 2
    with pytest.raises(AssertionError):
        theirs.concat_episode(theirs_next)  # RLlib: ids compared with ==
