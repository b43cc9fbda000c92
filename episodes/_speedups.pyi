from collections.abc import Callable
from typing import Any

import numpy as np

class BoxCheck:
    def __init__(
        self,
        format: str,
        shape: tuple[int, ...],
        low: tuple[float, ...],
        high: tuple[float, ...],
        fallback: Callable[[Any], bool],
    ) -> None: ...
    def __call__(self, item: Any) -> bool: ...

def bind(
    *,
    episode_type: type,
    buffer_type: type,
    columns_type: type,
    slow: Callable[..., None],
    clock: Callable[[], float],
    integers: frozenset[type],
    max_pending: int,
    doc: str,
) -> Callable[..., None]: ...
def join_rows(items: list[Any], out: np.ndarray) -> bool: ...
