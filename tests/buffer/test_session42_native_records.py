"""Records with big-endian subarray fields count as non-native in ``plain_arrays``.

numpy's ``dtype.isnative`` says True for ``[("a", ">f4", (2,))]`` (a subarray field), so
``native_dtype`` and ``native_array`` handed such records on unchanged, which torch refuses
(``torch.from_numpy``: byte order different from the native byte order), while a big-endian
field without a shape was converted. The episode test pins that a numpy'd column of them
stays native (its stacking made it so before too).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.buffer.plain_arrays import is_native, native_array, native_dtype

CASES = [
    ("big-endian subarray field", [("a", ">f4", (2,))], False),
    ("big-endian scalar field", [("a", ">f4")], False),
    ("native subarray field", [("a", "<f4", (2,))], True),
    ("big-endian field one level down", [("o", [("a", ">i8", (3,))]), ("b", "<f4")], False),
    ("native fields at every depth", [("o", [("a", "<i8", (3,))]), ("b", "<f4")], True),
    ("single-byte subarray field", [("a", "u1", (4,))], True),
]


@pytest.mark.parametrize("name, fields, native", CASES, ids=[c[0] for c in CASES])
def test_is_native_looks_into_fields(name, fields, native):
    dtype = np.dtype(fields)
    assert is_native(dtype) is native, name
    assert is_native(native_dtype(dtype)), name


@pytest.mark.parametrize("name, fields, native", CASES, ids=[c[0] for c in CASES])
def test_native_array_keeps_the_values(name, fields, native):
    rows = np.zeros(3, np.dtype(fields))
    for field in rows.dtype.names:
        sub = rows[field]
        if sub.dtype.names is None:
            sub[...] = np.arange(sub.size).reshape(sub.shape)
        else:
            for inner in sub.dtype.names:
                sub[inner] = np.arange(sub[inner].size).reshape(sub[inner].shape)
    out = native_array(rows)
    assert is_native(out.dtype) and (out is rows) is native, name
    assert out.astype(rows.dtype).tobytes() == rows.tobytes(), name  # the values unchanged


def test_a_numpyd_column_of_big_endian_records_reaches_torch():
    dtype = np.dtype([("a", ">f4", (2,))])
    items = [np.array(([1.5, -2.0],), dtype), np.array(([3.0, 4.0],), dtype)]
    episode = SingleAgentEpisode(
        observations=items, actions=[0], rewards=[1.0], len_lookback_buffer=0
    ).to_numpy()
    column = episode.get_observations(slice(None))
    assert is_native(column.dtype)
    assert torch.from_numpy(np.ascontiguousarray(column["a"])).tolist() == [[1.5, -2.0], [3.0, 4.0]]
