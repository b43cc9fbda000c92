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
