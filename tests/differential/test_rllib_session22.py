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
