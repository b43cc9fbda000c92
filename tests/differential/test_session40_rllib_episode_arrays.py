"""Differential pin of session 40: numpy and episodes, against RLlib 2.60's.

RLlib's episode has ``len`` and ``[...]`` without ``__array__``, so numpy takes it for a
sequence of steps and fails asking for item 0; ours is one object to numpy
(deviations.md, "episode-as-array"). Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_session40_rllib_episode_arrays.py
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import numpy as np  # noqa: E402
from ray.rllib.env.single_agent_episode import SingleAgentEpisode as REpisode  # noqa: E402

from episodes import SingleAgentEpisode  # noqa: E402

pytestmark = pytest.mark.differential

USES: dict[str, Callable[[list[Any]], Any]] = {
    "choice": lambda eps: np.random.default_rng(0).choice(eps, 2, replace=False),
    "permutation": lambda eps: np.random.default_rng(0).permutation(eps),
    "object array": lambda eps: np.array(eps, dtype=object),
    "one episode": lambda eps: np.asarray(eps[0]),
}


def _episodes(cls: Any) -> list[Any]:
    return [
        cls(
            id_=i,
            observations=[0.0, 1.0, 2.0],
            actions=[0, 1],
            rewards=[1.0, 1.0],
            len_lookback_buffer=0,
        )
        for i in "abc"
    ]


@pytest.mark.parametrize("use", USES)
def test_numpy_holds_our_episodes_and_fails_on_rllibs(use: str) -> None:  # "episode-as-array"
    with pytest.raises(NotImplementedError, match="getting item"):
        USES[use](_episodes(REpisode))
    ours = _episodes(SingleAgentEpisode)
    out = USES[use](ours)
    assert out.dtype == object
    assert all(any(ep is mine for mine in ours) for ep in np.atleast_1d(out))
