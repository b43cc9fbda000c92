"""RunnerContext.create refuses a list ``config`` as RunnerGroup does (it read pairs as a dict)."""

from __future__ import annotations

import pytest

from episodes.distributed.context import RunnerContext


def test_a_runner_context_refuses_a_list_config_as_the_group_does() -> None:
    with pytest.raises(TypeError, match="config must be a mapping"):
        RunnerContext.create(seed=0, index=0, config=[("a", 1)])  # type: ignore[arg-type]
    assert RunnerContext.create(seed=0, index=0, config={"a": 1}).config == {"a": 1}
    assert RunnerContext.create(seed=0, index=0).config == {}
