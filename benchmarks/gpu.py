"""Rollout storage on a CUDA device: samples/s and achieved GB/s vs measured copy bandwidth.

    .venv/bin/python benchmarks/gpu.py [--repeats 10]

Runs the passes of bench_rollout.py (flat 4x5, recurrent GRU 1x256 4x5, GAE, 24 x
add_transition) at N=4096 and N=65536 (T=24, obs 48, act 12), then collection from a
torch-tensor vector env on the device (``gpu_collect.py``: runner -> converter -> GAE against
rsl_rl's per-step pattern, N=4096..65536, host syncs per sample). Exits cleanly without CUDA.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import positive_int  # noqa: E402

from episodes.rollout import RolloutStorage, Transition  # noqa: E402

T, OBS, ACT, HIDDEN = 24, 48, 12, 256


def timed(fn: Callable[[], object], repeats: int) -> float:
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def copy_bandwidth(dev: torch.device) -> float:
    """Device-to-device copy bandwidth in GB/s (read + write bytes)."""
    src = torch.empty(1 << 28, dtype=torch.uint8, device=dev)  # 256 MiB
    dst = torch.empty_like(src)
    sec = timed(lambda: dst.copy_(src), 20)
    return 2 * src.numel() / sec / 1e9


def build(n: int, dev: torch.device, hidden: bool) -> tuple[RolloutStorage, list[Transition]]:
    g = torch.Generator(device=dev).manual_seed(0)

    def r(*s: int) -> torch.Tensor:
        return torch.randn(*s, device=dev, generator=g)

    st = RolloutStorage("rl", n, T, (OBS,), (ACT,), device=dev)
    trs = []
    for _ in range(T):
        hs = (r(1, n, HIDDEN), r(1, n, HIDDEN)) if hidden else (None, None)
        trs.append(
            Transition(
                observations=r(n, OBS),
                actions=r(n, ACT),
                rewards=r(n),
                dones=(torch.rand(n, device=dev, generator=g) < 0.02).float(),
                values=r(n, 1),
                actions_log_prob=r(n),
                distribution_params=(r(n, ACT), r(n, ACT)),
                hidden_states=hs,
            )
        )
    for tr in trs:
        st.add_transition(tr)
    st.compute_returns(r(n, 1), 0.99, 0.95)
    return st, trs


def consume(gen) -> torch.Tensor:
    acc = torch.zeros((), device="cuda")
    for b in gen:
        acc += b.observations.sum()
    return acc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=positive_int, default=10)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("benchmarks/gpu.py: no CUDA device available; nothing to measure.")
        return
    dev = torch.device("cuda")
    bw = copy_bandwidth(dev)
    print(
        f"device: {torch.cuda.get_device_name(dev)}, torch {torch.__version__}, "
        f"measured D2D copy bandwidth {bw:.0f} GB/s"
    )
    per_sample = (OBS + 3 * ACT + 4) * 4  # bytes gathered per flat sample (float32)
    print(f"{'pass':<30} {'N':>6} {'ms':>9} {'Msamples/s':>11} {'GB/s':>8} {'% copy bw':>9}")
    for n in (4096, 65536):
        for hidden in (False, True):
            st, trs = build(n, dev, hidden)
            rows = []
            if not hidden:
                # flat: read + write the gathered bytes, 20 mini-batches = 5 epochs of T*N samples
                sec = timed(lambda st=st: consume(st.mini_batch_generator(4, 5)), args.repeats)
                moved = 2 * 5 * T * n * per_sample
                rows.append(("mini_batch_generator 4x5", sec, 5 * T * n, moved))
                last = torch.randn(n, 1, device=dev)
                sec = timed(
                    lambda st=st, last=last: st.compute_returns(last, 0.99, 0.95), args.repeats
                )
                rows.append(("GAE + normalise", sec, T * n, 6 * T * n * 4))

                def add(st=st, trs=trs) -> None:
                    st.clear()
                    for tr in trs:
                        st.add_transition(tr)

                sec = timed(add, args.repeats)
                rows.append(
                    (f"{T} x add_transition", sec, T * n, 2 * T * n * (OBS + 3 * ACT + 4) * 4)
                )
            else:
                sec = timed(
                    lambda st=st: consume(st.recurrent_mini_batch_generator(4, 5)), args.repeats
                )
                # split/pad obs (read+write) + hidden gather; slices afterwards are views
                moved = 2 * T * n * OBS * 4 + 2 * 2 * n * HIDDEN * 4
                rows.append(("recurrent 4x5 GRU(1x256)", sec, 5 * T * n, moved))
            for name, sec, samples, nbytes in rows:
                gbs = nbytes / sec / 1e9
                print(
                    f"{name:<30} {n:>6} {sec * 1e3:9.3f} {samples / sec / 1e6:11.1f} "
                    f"{gbs:8.1f} {100 * gbs / bw:8.1f}%"
                )
            del st, trs
            torch.cuda.empty_cache()
    print()
    import gpu_collect

    gpu_collect.main(["--device", "cuda", "--repeats", str(args.repeats)])


if __name__ == "__main__":
    main()
