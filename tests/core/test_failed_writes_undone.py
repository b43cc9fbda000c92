"""A step or a join that fails part way is taken back whatever the error (contract §8.1).

``add_env_step`` on a numpy'd episode writes column by column, and ``concat_episode`` joins
column by column; a value that fails to convert after other columns took theirs used to be
taken back only for ``ValueError``/``TypeError``. Any other error (a tensor that needs grad, a
user ``__array__`` raising, an interrupt) left the episode half-written and invalid.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode


class Boom(Exception):
    """An error of the user's own, raised while a value converts."""


class Raising:
    """A value whose conversion to an array raises ``error``."""

    def __init__(self, error: BaseException):
        self.error = error

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise self.error


def needs_grad() -> Any:
    return torch.tensor(0.3, requires_grad=True)  # .numpy() refuses it: RuntimeError


BAD_VALUES: dict[str, tuple[Callable[[], Any], type[BaseException]]] = {
    "tensor that needs grad": (needs_grad, RuntimeError),
    "__array__ raising a user error": (lambda: Raising(Boom("no")), Boom),
    "__array__ interrupted": (lambda: Raising(KeyboardInterrupt()), KeyboardInterrupt),
    "__array__ out of memory": (lambda: Raising(MemoryError()), MemoryError),
}


def numpy_episode() -> SingleAgentEpisode:
    ep = SingleAgentEpisode("x", len_lookback_buffer=0)
    ep.add_env_reset(np.zeros(2, np.float32))
    extras = {"vf_preds": np.float32(0.5), "action_logp": np.float32(-0.7)}
    ep.add_env_step(np.ones(2, np.float32), 0, 1.0, extra_model_outputs=extras)
    ep.to_numpy()
    return ep


@pytest.mark.parametrize("case", list(BAD_VALUES))
def test_add_env_step_takes_the_step_back(case: str) -> None:
    make, error = BAD_VALUES[case]
    ep = numpy_episode()
    before = copy.deepcopy(ep)
    # The second extra output fails after the observation, action, reward and first extra
    # output were written.
    extras = {"vf_preds": np.float32(0.4), "action_logp": make()}
    with pytest.raises(error):
        ep.add_env_step(np.full(2, 2, np.float32), 1, 2.0, extra_model_outputs=extras)
    ep.validate()
    assert ep == before
    ep.add_env_step(
        np.full(2, 3, np.float32),
        1,
        3.0,
        extra_model_outputs={"vf_preds": np.float32(0.3), "action_logp": np.float32(-0.1)},
    )
    assert ep.get_observations().tolist() == [[0, 0], [1, 1], [3, 3]]
    assert ep.get_extra_model_outputs("action_logp").tolist() == pytest.approx([-0.7, -0.1])


@pytest.mark.parametrize("case", list(BAD_VALUES))
def test_concat_episode_leaves_self_unchanged(case: str) -> None:
    make, error = BAD_VALUES[case]
    ep = SingleAgentEpisode("x", len_lookback_buffer=0)
    ep.add_env_reset(np.zeros(2, np.float32))
    ep.add_env_step(np.ones(2, np.float32), 0, 1.0, extra_model_outputs={"vf_preds": 0.5})
    successor = ep.cut()
    ep.to_numpy()
    successor.add_env_step(np.full(2, 2, np.float32), 1, 1.0, extra_model_outputs={"vf_preds": 0.4})
    successor.add_env_step(
        np.full(2, 3, np.float32), 1, 1.0, extra_model_outputs={"vf_preds": make()}
    )
    before = copy.deepcopy(ep)
    with pytest.raises(error):
        ep.concat_episode(successor)
    ep.validate()
    assert ep == before


def test_refused_values_still_name_the_column() -> None:
    ep = numpy_episode()
    before = copy.deepcopy(ep)
    extras = {"vf_preds": np.float32(0.4), "action_logp": np.zeros(3)}  # wrong shape
    with pytest.raises(ValueError, match=r"extra_model_outputs\['action_logp'\]"):
        ep.add_env_step(np.full(2, 2, np.float32), 1, 2.0, extra_model_outputs=extras)
    assert ep == before
