"""Differential pins of session 31: custom_data no deep copy can make, and flags set by hand.

Each test names its docs/deviations.md tag and asserts both sides. Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_session31_custom_data.py
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

pytest.importorskip("ray.rllib")

from tests.differential._rllib_ops import OSAE, RSAE  # noqa: E402

pytestmark = pytest.mark.differential


def _episode(episode_cls: Any) -> Any:
    return episode_cls(
        "x", observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=0
    )


def test_cut_shares_what_no_deep_copy_can_make() -> None:  # "cut-custom-uncopyable"
    lock = threading.Lock()
    theirs = _episode(RSAE)
    theirs.custom_data["state"] = {"lock": lock, "rows": [1]}
    with pytest.raises(TypeError, match="lock"):
        theirs.cut()
    ours = _episode(OSAE)
    ours.custom_data["state"] = {"lock": lock, "rows": [1]}
    state = ours.cut().custom_data["state"]
    assert state["lock"] is lock and state["rows"] == [1]
    assert state["rows"] is not ours.custom_data["state"]["rows"]


@pytest.mark.parametrize("value", ["no", 1, None])
def test_a_flag_set_by_hand_must_be_a_bool(value: Any) -> None:  # "flag-attribute"
    theirs = _episode(RSAE)
    theirs.is_truncated = value
    assert theirs.is_done is value and RSAE.from_state(theirs.get_state()).is_truncated is value
    ours = _episode(OSAE)
    with pytest.raises(TypeError, match="is_truncated must be a bool"):
        ours.is_truncated = value
    assert ours.is_truncated is False and not ours.is_done
