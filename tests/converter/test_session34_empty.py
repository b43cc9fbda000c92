"""Converting nothing: no chunk, or only chunks without steps, is named as such.

It was "every env needs the same, non-zero number of steps; got []. Pass one chunk per env
column with layout='per_chunk'", whose hint the per-chunk layout then refused as well.
"""

from __future__ import annotations

import pytest

from episodes.converter import episodes_to_rollout
from tests.converter.test_session15_converter import steps_chunk, zeros

NOTHING = {
    "no-chunks": [],
    "empty-env-lists": [[], []],
    "stepless-chunk": lambda: [steps_chunk("A").cut()],
    "stepless-per-env": lambda: [[steps_chunk("A").cut()], [steps_chunk("B").cut()]],
}


@pytest.mark.parametrize("given", NOTHING.values(), ids=NOTHING.keys())
@pytest.mark.parametrize("layout", [None, "per_chunk"])
def test_nothing_to_convert_says_so(given, layout):
    chunks = given() if callable(given) else given
    kwargs = {} if layout is None else {"layout": layout}
    with pytest.raises(ValueError, match="no chunk holds a step: there is nothing to convert"):
        episodes_to_rollout(chunks, gamma=0.9, value_fn=zeros, **kwargs)


def test_an_env_without_steps_beside_others_gets_no_per_chunk_hint():
    a, b = steps_chunk("A"), steps_chunk("B")
    with pytest.raises(ValueError, match="non-zero number of steps; got") as refused:
        episodes_to_rollout([[a], [b], [steps_chunk("C").cut()]], gamma=0.9, value_fn=zeros)
    assert "per_chunk" not in str(refused.value)
    with pytest.raises(ValueError, match="layout='per_chunk' for uneven chunks"):
        episodes_to_rollout([[a, b], [steps_chunk("C")]], gamma=0.9, value_fn=zeros)
