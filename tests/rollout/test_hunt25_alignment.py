"""Rows moved as one wide element need memory aligned to that element (round 25).

A tensor over a numpy array at an odd address (a memmap after a header, a buffer sliced by one
element) is contiguous and starts at a whole row of its own storage, yet reading its 16-byte
rows as complex128 killed the process. Each case runs in a child process, so a regression
fails the test instead of stopping the suite.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_SCRIPT = textwrap.dedent(
    """
    import numpy as np, torch
    from episodes.rollout import RolloutStorage, select_rows

    T, N, WIDTH = 2048, 4, {width}  # 8192 rows: enough for the wide-element path
    raw = np.zeros(T * N * WIDTH + 1, np.float32)
    obs = torch.from_numpy(raw[1:].reshape(T, N, WIDTH))
    assert obs.data_ptr() % 16 and obs.is_contiguous() and obs.storage_offset() == 0
    obs.copy_(torch.arange(obs.numel(), dtype=torch.float32).view(T, N, WIDTH))
    index = torch.randperm(T * N, generator=torch.Generator().manual_seed(0))
    rows = obs.view(-1, WIDTH)
    expected = rows.index_select(0, index)
    assert torch.equal(select_rows(rows, index), expected)
    out = torch.from_numpy(np.zeros(T * N * WIDTH + 1, np.float32)[1:].reshape(-1, WIDTH))
    select_rows(rows, index, out=out)
    assert torch.equal(out, expected)
    storage = RolloutStorage("rl", N, T, (WIDTH,), (1,))
    storage.write_block(0, share=True, observations=obs)
    batch = next(storage.mini_batch_generator(1, 1))
    assert sorted(batch.observations[:, 0].tolist()) == rows[:, 0].tolist()
    print("ok")
    """
)


@pytest.mark.parametrize("width", [2, 4], ids=["8-byte rows", "16-byte rows"])
def test_rows_at_an_unaligned_address_select_as_index_select(width: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(width=width)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "ok"


def test_an_aligned_view_starting_mid_element_selects_as_index_select() -> None:
    # Its address is aligned to complex128, its storage offset (one float64) is not: torch
    # refuses the dtype view there, so the rows take index_select (a regression of round 25).
    import numpy as np
    import torch

    from episodes.rollout import select_rows

    rows = 10_000
    raw = np.zeros(2 * rows + 4, np.float64)
    skip = ((8 - raw.ctypes.data % 16) % 16) // 8  # the storage starts at 8 mod 16
    base = torch.from_numpy(raw[skip:])
    source = base[1 : 1 + 2 * rows].view(rows, 2)
    source.copy_(torch.arange(2.0 * rows).view(rows, 2))
    assert source.data_ptr() % 16 == 0 and source.storage_offset() == 1
    index = torch.arange(rows - 1, -1, -1)
    assert torch.equal(select_rows(source, index), source.index_select(0, index))
