"""A piece whose index lists one extra-output key twice is refused, not read from either column."""

from __future__ import annotations

import copy

import numpy as np
import pyarrow as pa
import pytest

from episodes.io import CorruptDatasetError
from episodes.io.shard_codec import decode_rows, encode_rows
from tests.test_session49_mutants import _piece, _spare_logp


@pytest.mark.parametrize("numpy", [True, False, None])
def test_an_extra_listed_twice_is_corrupt(numpy):
    enc = encode_rows(_piece(3, extra_dtype=np.float64))
    entry = copy.deepcopy(enc.entry)
    table = _spare_logp(entry["meta"], entry["leaves"], pa.table(enc.columns))
    with pytest.raises(CorruptDatasetError, match="lists 'logp' twice"):
        decode_rows(entry, table, 0, spaces=enc.spaces, where="x", numpy=numpy)


def test_the_untouched_piece_still_reads():
    enc = encode_rows(_piece(3, extra_dtype=np.float64))
    episode = decode_rows(enc.entry, pa.table(enc.columns), 0, spaces=enc.spaces, where="x")
    assert len(episode.get_extra_model_outputs("logp")) == len(episode)
