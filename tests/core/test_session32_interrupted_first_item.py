"""An interrupt or MemoryError in a numpy column's first write leaves it untyped, as before."""

import numpy as np
import pytest

import episodes.buffer.array_store as array_store_module
from episodes import InfiniteLookbackBuffer, SingleAgentEpisode


class _FlakyArray:
    """Converts once, then raises ``error`` (an interrupt while a value converts)."""

    def __init__(self, error: BaseException) -> None:
        self.error, self.calls = error, 0

    def __array__(self, dtype=None, copy=None):
        self.calls += 1
        if self.calls > 1:
            raise self.error
        return np.zeros(3, np.float32)


@pytest.mark.parametrize("error", [KeyboardInterrupt(), MemoryError("no memory")])
def test_an_interrupted_first_action_leaves_the_column_untyped(error):
    ep = SingleAgentEpisode("x").to_numpy()
    ep.add_env_reset(np.zeros(2))
    before = ep.get_state()
    with pytest.raises(type(error)):
        ep.add_env_step(np.ones(2), _FlakyArray(error), 1.0)
    assert ep.get_state()["actions"]["typed"] is before["actions"]["typed"] is False
    ep.add_env_step(np.ones(2), np.zeros(4), 1.0)  # another layout: the first item's choice
    assert ep.get_actions(0).shape == (4,)


@pytest.mark.parametrize("error", [KeyboardInterrupt(), MemoryError("no memory")])
def test_an_interrupted_first_extend_leaves_the_column_untyped(monkeypatch, error):
    buf = InfiniteLookbackBuffer([])
    buf.finalize()
    before = buf.get_state()

    def fail(self, size):
        raise error

    monkeypatch.setattr(array_store_module.ArrayStore, "_reserve", fail)
    with pytest.raises(type(error)):
        buf.extend(np.zeros((30, 2), np.float32))
    monkeypatch.undo()
    assert buf.get_state()["typed"] is before["typed"] is False and len(buf) == 0
    buf.extend(np.zeros((3, 5), np.int64))  # a layout of its own, as for a fresh column
    assert buf.get().shape == (3, 5) and buf.get().dtype == np.int64
