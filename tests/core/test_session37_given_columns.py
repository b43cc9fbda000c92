"""Constructor columns given as array-likes whose iteration gives no rows (a DataFrame's labels)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.episode.given_columns import column_items

ROWS = np.array([[0.0, 1.0, 5.0], [1.0, 2.0, 6.0], [2.0, 3.0, 7.0]])


class Table:
    """A stand-in for a DataFrame: numpy reads its rows, iterating it gives its labels."""

    def __init__(self, rows: np.ndarray, labels: list[str], with_shape: bool = False):
        self.rows, self.labels = rows, labels
        if with_shape:
            self.shape = rows.shape

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.rows, dtype=dtype)

    def __iter__(self) -> Any:
        return iter(self.labels)

    def __len__(self) -> int:
        return len(self.rows)


class Unreadable:
    """Iterates labels, has a 2-D shape, but numpy cannot read it."""

    shape = (2, 2)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError("no numpy for me")

    def __iter__(self) -> Any:
        return iter(["x", "y"])


def _tables() -> list[Any]:
    tables: list[Any] = [Table(ROWS, ["x", "y", "z"]), Table(ROWS, ["x", "y", "z"], True)]
    if _has_pandas():  # the real thing where installed; the stand-ins stand for it otherwise
        import pandas as pd

        tables.append(pd.DataFrame({"x": ROWS[:, 0], "y": ROWS[:, 1], "z": ROWS[:, 2]}))
    return tables


def _has_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


def _rows(values: Any) -> list[list[float]]:
    return [np.asarray(value).tolist() for value in values]


@pytest.mark.parametrize("table", _tables(), ids=lambda t: type(t).__name__)
@pytest.mark.parametrize("lookback", [0, 1])
def test_constructor_reads_rows_as_buffer_and_setter_do(table: Any, lookback: int) -> None:
    ep = SingleAgentEpisode(
        observations=table,
        infos=table,
        actions=[0, 1],
        rewards=[1.0, 1.0],
        extra_model_outputs={"logits": Table(ROWS[:2], ["a", "b", "c"])},
        len_lookback_buffer=lookback,
    )
    ep.validate()
    want = ROWS.tolist()[lookback:]
    assert _rows(ep.get_observations()) == want
    assert _rows(ep.get_infos()) == want
    assert _rows(ep.get_extra_model_outputs("logits")) == ROWS.tolist()[lookback:2]
    assert _rows(InfiniteLookbackBuffer(table, lookback=lookback).get()) == want
    other = SingleAgentEpisode(
        observations=[np.zeros(3)] * 3, actions=[0, 1], rewards=[1.0, 1.0], len_lookback_buffer=0
    )
    other.set_observations(new_data=table)
    assert _rows(other.get_observations()) == ROWS.tolist()


@pytest.mark.skipif(not _has_pandas(), reason="pandas not installed")
def test_dataframe_rows_mixed_and_empty() -> None:
    import pandas as pd

    assert column_items(pd.DataFrame({"a": [], "b": []})) == []
    mixed = column_items(pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}))
    assert [row.tolist() for row in mixed] == [[1, "x"], [2, "y"]]
    series = pd.Series([1.5, 2.5])  # iterates its values: its rows, kept as they were
    assert column_items(series) == [1.5, 2.5]


def test_unreadable_table_is_refused_naming_the_column() -> None:
    with pytest.raises(TypeError, match=r"observations given as a Unreadable iterates no rows"):
        SingleAgentEpisode(observations=Unreadable(), actions=[0], rewards=[1.0])


def test_row_iterating_columns_are_unchanged() -> None:
    tensor = torch.arange(6.0).reshape(3, 2)
    items = column_items(tensor)
    assert all(type(item) is torch.Tensor for item in items)
    assert [item.tolist() for item in items] == tensor.tolist()
    param = torch.nn.Parameter(torch.ones(2, 2))  # iterates plain tensors: still its rows
    assert [type(item) for item in column_items(param)] == [torch.Tensor, torch.Tensor]
    given = [np.zeros(2), np.ones(2)]
    assert column_items(given) is given
    array = np.eye(2)
    rows = column_items(array)
    assert all(np.shares_memory(row, array) for row in rows)
    assert column_items((1, 2)) == [1, 2] and column_items(range(2)) == [0, 1]
    assert column_items(np.arange(2.0)) == [0.0, 1.0]


class ColumnFrame:
    """A stand-in for a polars frame: numpy reads its rows, iterating it gives its columns."""

    def __init__(self, rows: np.ndarray):
        self.rows, self.shape = rows, rows.shape

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.rows, dtype=dtype)

    def __iter__(self) -> Any:
        return iter(list(self.rows.T.copy()))  # columns, each of a row's shape when square

    def __len__(self) -> int:
        return len(self.rows)


class RowTable(ColumnFrame):
    """A stand-in for an h5py table: iterating it gives numpy rows."""

    def __iter__(self) -> Any:
        return iter(list(self.rows.copy()))


SQUARE = np.array([[0.0, 1.0], [2.0, 3.0]])


def _square_tables() -> dict[str, Any]:
    tables: dict[str, Any] = {"columns": ColumnFrame(SQUARE), "rows": RowTable(SQUARE)}
    if _has_pandas():  # a 2 x 2 frame's MultiIndex labels are pairs: a row's shape
        import pandas as pd

        columns = pd.MultiIndex.from_tuples([("a", "x"), ("a", "y")])
        tables["multiindex"] = pd.DataFrame(SQUARE, columns=columns)
    return tables


@pytest.mark.parametrize("name", list(_square_tables()))
def test_square_tables_are_read_by_rows_not_transposed(name: str) -> None:
    table = _square_tables()[name]
    assert _rows(column_items(table)) == SQUARE.tolist()
    ep = SingleAgentEpisode(observations=table, actions=[0], rewards=[1.0], len_lookback_buffer=0)
    assert _rows(ep.get_observations()) == SQUARE.tolist()
