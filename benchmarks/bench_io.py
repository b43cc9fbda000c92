"""Disk format throughput and streaming memory, format v1 (chunks) and v2 (shards).

Writes a dataset of ``--steps`` env steps (84x84x3 uint8 observations, int64 actions, float32
rewards; episodes of ``--episode-len`` steps) with ``EpisodeWriter`` and reads it back with
``read_episodes``, against raw ``np.save``/``np.load`` of the same arrays (with and without
fsync) and against pickling ``get_state()``. Then streams the whole dataset and a 10% prefix,
reporting peak traced Python/numpy allocations and peak RSS, to show memory does not grow with
the dataset. Data lives under a temp dir in /tmp and is deleted.

The v2 part writes the same frames with ``DatasetWriter`` (Arrow shards, CRC-32 over every
byte, fsync) against raw ``np.save``, reads them back sequentially against ``np.load`` (also
with ``verify=True``), reads
10k random steps with ``Dataset.steps``, counts files and shards for CartPole-sized data and
runs a shuffled 2-worker ``DataLoader`` pass (batch 256) over CartPole-sized transitions,
reporting peak RSS of the main process and of the workers. The tiny part writes 5,000
CartPole-sized episodes of 2 and of 20 steps with ``write_many`` against pickling their
``get_state()`` into one file and one pyarrow IPC table of the same columns (CPU time).

    .venv/bin/python benchmarks/bench_io.py            # 100k steps (~2.1 GB), 1M CartPole
    .venv/bin/python benchmarks/bench_io.py --quick    # 10k steps, 100k CartPole
    .venv/bin/python benchmarks/bench_io.py --quick --only v2
    .venv/bin/python benchmarks/bench_io.py --only tiny   # per-episode cost, short episodes
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from _timing import interleaved, positive_int, writable_dir  # noqa: E402

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.io import Dataset, DatasetWriter, EpisodeWriter, read_episodes  # noqa: E402

OBS_SHAPE = (84, 84, 3)


def make_frames(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, *OBS_SHAPE), dtype=np.uint8)


def episodes(total: int, ep_len: int, frames: np.ndarray):
    rng = np.random.default_rng(1)
    done = 0
    i = 0
    while done < total:
        n = min(ep_len, total - done)
        start = (i * 97) % (len(frames) - n - 1)
        ep = SingleAgentEpisode(
            f"ep{i}",
            observations=frames[start : start + n + 1],
            actions=list(rng.integers(0, 6, n)),
            rewards=list(rng.normal(size=n).astype(np.float32)),
            len_lookback_buffer=0,
        )
        yield ep.to_numpy()
        done += n
        i += 1


def nbytes(ep: SingleAgentEpisode) -> int:
    return sum(np.asarray(c.data).nbytes for c in (ep.observations, ep.actions, ep.rewards))


def touch(a: np.ndarray) -> int:
    """Reads one byte per 4 KiB page so lazily mapped data is actually brought in."""
    flat = (
        a.reshape(-1).view(np.uint8)
        if a.flags.c_contiguous
        else np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    )
    return int(flat[::4096].sum())


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def bench(total: int, ep_len: int, tmp: Path, repeats: int) -> None:
    frames = make_frames(min(total, 3 * ep_len) + 2)
    eps = list(episodes(total, ep_len, frames))  # frames are shared, so this is cheap
    mb = sum(nbytes(e) for e in eps) / 1e6
    print(f"dataset: {total} steps, {len(eps)} episodes, {mb:.0f} MB of arrays")
    results = {}

    ds = tmp / "ours"

    def write_ours(dest: Path, sync: bool = True, checksums: bool = True) -> None:
        with EpisodeWriter(dest, sync=sync, checksums=checksums) as w:
            for ep in eps:
                w.write(ep)

    def write_raw(dest: Path, sync: bool) -> None:
        dest.mkdir()
        for i, ep in enumerate(eps):
            for name, col in (("o", ep.observations), ("a", ep.actions), ("r", ep.rewards)):
                p = dest / f"{i}{name}.npy"
                np.save(p, col.data)
                if sync:
                    fsync_file(p)

    def write_pickle(dest: Path) -> None:
        dest.mkdir()
        for i, ep in enumerate(eps):
            with open(dest / f"{i}.pkl", "wb") as f:
                pickle.dump(ep.get_state(), f, protocol=5)

    writers = {
        "episodes.io write (fsync)": write_ours,
        "episodes.io write (sync=False)": lambda d: write_ours(d, False),
        "episodes.io write (sync=False, checksums=False)": lambda d: write_ours(d, False, False),
        "raw np.save": lambda d: write_raw(d, False),
        "raw np.save + fsync": lambda d: write_raw(d, True),
        "pickle get_state() write": write_pickle,
    }
    samples: dict[str, list[float]] = {k: [] for k in writers}
    for rep in range(repeats):  # interleaved; every run writes a fresh directory
        for name, fn in writers.items():
            dest = tmp / f"w{rep}-{len(samples[name])}-{abs(hash(name))}"
            # Flush what earlier runs left dirty, so no contender pays another's writeback.
            os.sync()
            t0 = time.perf_counter()
            fn(dest)
            samples[name].append(time.perf_counter() - t0)
            if rep == repeats - 1 and name == "episodes.io write (fsync)":
                dest.rename(ds)
            elif rep == repeats - 1 and name in ("raw np.save", "pickle get_state() write"):
                dest.rename(tmp / ("raw" if name == "raw np.save" else "pickle"))
            else:
                shutil.rmtree(dest)
    results = {k: statistics.median(v) for k, v in samples.items()}
    raw, pk = tmp / "raw", tmp / "pickle"

    def read_ours() -> None:
        for ep in read_episodes(ds):
            touch(ep.observations.data)
            touch(ep.actions.data)
            touch(ep.rewards.data)

    def read_verify() -> None:
        for _ep in read_episodes(ds, verify=True):
            pass

    def read_raw(mmap: bool) -> None:
        for i in range(len(eps)):
            for name in "oar":
                touch(np.load(raw / f"{i}{name}.npy", mmap_mode="r" if mmap else None))

    def read_pickle() -> None:
        for i in range(len(eps)):
            with open(pk / f"{i}.pkl", "rb") as f:
                SingleAgentEpisode.from_state(pickle.load(f))  # noqa: S301 - our own file

    results.update(
        interleaved(
            {
                "episodes.io read (mmap, touch pages)": read_ours,
                "episodes.io read + CRC verify": read_verify,
                "raw np.load": lambda: read_raw(False),
                "raw np.load mmap (touch pages)": lambda: read_raw(True),
                "pickle read + from_state": read_pickle,
            },
            repeats=repeats,
        )
    )
    shutil.rmtree(raw)
    shutil.rmtree(pk)

    print(f"{'':40s} {'seconds':>8s} {'MB/s':>8s}")
    for name, sec in results.items():
        print(f"{name:40s} {sec:8.2f} {mb / sec:8.0f}")
    w_ratio = results["raw np.save"] / results["episodes.io write (fsync)"]
    ws_ratio = results["raw np.save + fsync"] / results["episodes.io write (fsync)"]
    r_ratio = results["raw np.load"] / results["episodes.io read (mmap, touch pages)"]
    nos_ratio = results["raw np.save"] / results["episodes.io write (sync=False)"]
    print(
        f"write (default: fsync + CRC-32) vs raw np.save: {w_ratio:.2f}x  (target >= 0.7x; "
        f"vs np.save+fsync: {ws_ratio:.2f}x)"
    )
    print(f"write without fsync vs raw np.save: {nos_ratio:.2f}x")
    fast = results["raw np.save"] / results["episodes.io write (sync=False, checksums=False)"]
    print(f"write without fsync or checksums vs raw np.save: {fast:.2f}x")
    print(f"read vs raw np.load:  {r_ratio:.2f}x  (target >= 0.7x)")

    # --- streaming memory: a 10% prefix vs the whole dataset
    n = len(eps)
    for label, stop in (("10% of the dataset", max(1, n // 10)), ("the whole dataset", n)):
        base_rss = rss_mb()
        peak_rss = base_rss
        tracemalloc.start()
        steps = 0
        for ep in read_episodes(ds, stop=stop):
            touch(ep.observations.data)
            steps += len(ep)
            peak_rss = max(peak_rss, rss_mb())
            del ep
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(
            f"streaming {label:18s} ({steps:6d} steps): peak traced {peak / 1e6:7.1f} MB, "
            f"peak RSS growth {peak_rss - base_rss:7.1f} MB"
        )


def bench_v2_frames(eps: list[SingleAgentEpisode], tmp: Path, repeats: int) -> None:
    mb = sum(nbytes(e) for e in eps) / 1e6
    total = sum(len(e) for e in eps)
    print(f"\n== format v2: {total} steps of 84x84x3 frames, {len(eps)} episodes, {mb:.0f} MB")

    def write_v2(dest: Path) -> None:
        with DatasetWriter(dest) as w:
            w.write_many(eps)

    def write_raw(dest: Path) -> None:
        dest.mkdir()
        for i, ep in enumerate(eps):
            for name, col in (("o", ep.observations), ("a", ep.actions), ("r", ep.rewards)):
                np.save(dest / f"{i}{name}.npy", col.data)

    def write_raw_sync(dest: Path) -> None:
        write_raw(dest)
        for p in dest.iterdir():
            fsync_file(p)

    def write_v2_nosync(dest: Path) -> None:
        with DatasetWriter(dest, sync=False) as w:
            w.write_many(eps)

    fns = {
        "v2 write (fsync, CRC)": write_v2,
        "raw np.save": write_raw,
        "v2 write (sync=False, CRC)": write_v2_nosync,
        "raw np.save + fsync": write_raw_sync,
    }
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for rep in range(repeats):
        for name, fn in fns.items():
            dest = tmp / f"v2w-{rep}-{len(samples[name])}-{name[:2]}"
            os.sync()
            t0 = time.perf_counter()
            fn(dest)
            samples[name].append(time.perf_counter() - t0)
            keep = {"v2 write (fsync, CRC)": "v2", "raw np.save": "v2raw"}.get(name)
            if rep < repeats - 1 or keep is None:
                shutil.rmtree(dest)
            else:
                dest.rename(tmp / keep)
    res = {k: statistics.median(v) for k, v in samples.items()}
    ds_path, raw = tmp / "v2", tmp / "v2raw"

    def touch_columns(ep: SingleAgentEpisode) -> None:
        # The same three columns the raw contenders load: observations, actions, rewards.
        for column in (ep.observations, ep.actions, ep.rewards):
            touch(np.asarray(column.data))

    def read_v2() -> None:
        for ep in Dataset(ds_path, max_open_shards=1):
            touch_columns(ep)

    def read_v2_verify() -> None:
        for ep in Dataset(ds_path, max_open_shards=1, verify=True):
            touch_columns(ep)

    def read_raw(mmap: bool = False) -> None:
        # np.load copies every byte; with mmap_mode it maps them as the v2 reader does, a
        # like-for-like baseline for a read that touches pages.
        for i in range(len(eps)):
            for name in "oar":
                touch(np.load(raw / f"{i}{name}.npy", mmap_mode="r" if mmap else None))

    res.update(
        interleaved(
            {
                "v2 sequential read": read_v2,
                "raw np.load": read_raw,
                "raw np.load mmap": lambda: read_raw(True),
                "v2 sequential read, verify=True": read_v2_verify,
            },
            repeats,
        )
    )
    ds = Dataset(ds_path)
    rng = np.random.default_rng(0)
    picks = [(int(i), int(rng.integers(len(eps[i])))) for i in rng.integers(len(ds), size=10_000)]

    def random_steps() -> None:
        for i, t in picks:
            touch(ds.steps(i, t, t + 1)["observations"])

    res.update(interleaved({"v2 10k random steps": random_steps}, repeats))
    for name, sec in res.items():
        print(f"{name:40s} {sec:8.3f} s")
    print(
        f"v2 write vs raw np.save: {res['raw np.save'] / res['v2 write (fsync, CRC)']:.2f}x "
        f"(target >= 0.7x; vs np.save+fsync: "
        f"{res['raw np.save + fsync'] / res['v2 write (fsync, CRC)']:.2f}x; without fsync "
        f"vs np.save: {res['raw np.save'] / res['v2 write (sync=False, CRC)']:.2f}x)"
    )
    print(
        f"v2 sequential read vs raw np.load: {res['raw np.load'] / res['v2 sequential read']:.2f}x "
        "(target >= 1.0x; with verify=True, every byte's CRC-32 checked: "
        f"{res['raw np.load'] / res['v2 sequential read, verify=True']:.2f}x; vs np.load with "
        f"mmap_mode='r', the same pages touched: "
        f"{res['raw np.load mmap'] / res['v2 sequential read']:.2f}x)"
    )
    print(
        f"v2 random access: {10_000 / res['v2 10k random steps']:,.0f} steps/s "
        "(target >= 50k steps/s)"
    )
    files = [p for p in ds_path.rglob("*") if p.is_file()]
    print(f"v2 files: {len(files)} for {len(ds.shards)} shards")
    shutil.rmtree(raw)


def cartpole_episodes(total: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    done, i = 0, 0
    while done < total:
        n = min(int(rng.integers(10, 200)), total - done)
        ep = SingleAgentEpisode(
            f"cp{i}",
            observations=rng.normal(size=(n + 1, 4)).astype(np.float32),
            actions=rng.integers(0, 2, n),
            rewards=np.ones(n, np.float32),
            terminated=True,
            len_lookback_buffer=0,
        )
        yield ep.to_numpy()
        done += n
        i += 1


def bench_v2_cartpole(total: int, tmp: Path) -> None:
    import resource

    from torch.utils.data import DataLoader

    from episodes.io.torch_data import TransitionDataset

    print(f"\n== format v2: {total} CartPole-sized steps")
    path = tmp / "cartpole"
    t0 = time.perf_counter()
    with DatasetWriter(path) as w:
        w.write_many(cartpole_episodes(total))
    write_s = time.perf_counter() - t0
    files = [p for p in path.rglob("*") if p.is_file()]
    ds = Dataset(path)
    print(
        f"write {write_s:.1f} s; {len(ds)} episodes in {len(ds.shards)} shards, "
        f"{len(files)} files, {sum(p.stat().st_size for p in files) / 1e6:.1f} MB on disk"
    )
    data = TransitionDataset(path)
    base = rss_mb()
    loader = DataLoader(data, batch_size=256, shuffle=True, num_workers=2)
    t0 = time.perf_counter()
    seen, peak = 0, base
    for batch in loader:
        seen += len(batch["rewards"])
        peak = max(peak, rss_mb())
    sec = time.perf_counter() - t0
    child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(
        f"shuffled DataLoader pass (2 workers, batch 256): {seen} transitions in {sec:.1f} s "
        f"({seen / sec:,.0f}/s); main RSS {base:.0f} -> peak {peak:.0f} MB, "
        f"largest worker peak RSS {child_kb / 1e3:.0f} MB"
    )


def tiny_episodes(count: int, steps: int) -> list[SingleAgentEpisode]:
    """``count`` CartPole-sized episodes of ``steps`` steps (what a runner hands out)."""
    rng = np.random.default_rng(steps)
    return [
        SingleAgentEpisode(
            f"t{i}",
            observations=rng.normal(size=(steps + 1, 4)).astype(np.float32),
            actions=rng.integers(0, 2, steps),
            rewards=np.ones(steps, np.float32),
            terminated=True,
            len_lookback_buffer=0,
        ).to_numpy()
        for i in range(count)
    ]


def bench_v2_tiny(count: int, tmp: Path, repeats: int) -> None:
    """Per-episode fixed cost: many short episodes, CPU seconds (the disk left out: no fsync)."""
    import pyarrow as pa

    for steps in (2, 20):
        eps = tiny_episodes(count, steps)
        print(f"\n== format v2: {count} CartPole-sized episodes of {steps} steps (CPU time)")
        runs = iter(range(1 << 30))

        def write_v2(eps: list[SingleAgentEpisode] = eps, runs=runs) -> None:
            with DatasetWriter(tmp / f"tiny{next(runs)}", sync=False) as w:
                w.write_many(eps)

        def write_pickle(eps: list[SingleAgentEpisode] = eps, runs=runs) -> None:
            with open(tmp / f"tiny{next(runs)}.pkl", "wb") as f:
                for ep in eps:
                    pickle.dump(ep.get_state(), f, protocol=pickle.HIGHEST_PROTOCOL)

        def write_ipc(eps: list[SingleAgentEpisode] = eps, runs=runs, steps: int = steps) -> None:
            # The same columns as one Arrow table, built and written at once: Arrow's own floor.
            # Each episode's rows are its observations; actions and rewards end in a null row.
            obs = np.concatenate([ep.get_observations() for ep in eps])
            last = np.zeros((len(eps), steps + 1), bool)
            last[:, -1] = True

            def padded(values: list[np.ndarray]) -> pa.Array:
                out = np.zeros((len(eps), steps + 1), values[0].dtype)
                out[:, :-1] = np.stack(values)
                return pa.array(out.reshape(-1), mask=last.reshape(-1))

            table = pa.table(
                {
                    "episode_id": pa.array(np.repeat([ep.id_ for ep in eps], steps + 1)),
                    "observations": pa.FixedSizeListArray.from_arrays(obs.reshape(-1), 4),
                    "actions": padded([ep.get_actions() for ep in eps]),
                    "rewards": padded([ep.get_rewards() for ep in eps]),
                }
            )
            with pa.ipc.new_file(str(tmp / f"tiny{next(runs)}.arrow"), table.schema) as f:
                f.write_table(table)

        fns = {
            "v2 write_many": write_v2,
            "pickle get_state": write_pickle,
            "pyarrow ipc": write_ipc,
        }
        samples: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(repeats):
            for name, fn in fns.items():  # interleaved: the machine's noise spread evenly
                t0 = time.process_time()
                fn()
                samples[name].append(time.process_time() - t0)
        res = {k: statistics.median(v) for k, v in samples.items()}
        base = res["v2 write_many"]
        for name, sec in res.items():
            print(
                f"{name:18s} {sec * 1e6 / count:7.0f} us/episode  (v2 is {base / sec:5.1f}x this)"
            )
        for p in tmp.glob("tiny*"):
            shutil.rmtree(p) if p.is_dir() else p.unlink()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--steps",
        type=positive_int,
        default=None,
        help="steps written (default 100k; 10k with --quick)",
    )
    parser.add_argument("--quick", action="store_true", help="10k steps (unless --steps)")
    parser.add_argument("--episode-len", type=positive_int, default=1000)
    parser.add_argument("--repeats", type=positive_int, default=3, help="timed runs per contender")
    parser.add_argument(
        "--only",
        choices=["v1", "v2", "cartpole", "tiny"],
        default=None,
        help="one part only (cartpole: the v2 DataLoader pass alone, for a clean RSS figure; "
        "tiny: 5,000 short episodes, the per-episode cost of DatasetWriter.write_many)",
    )
    parser.add_argument(
        "--dir",
        type=writable_dir,
        default="/tmp",
        help="where to write; a tmpfs such as /dev/shm takes the disk out of the comparison",
    )
    args = parser.parse_args(argv)
    total = args.steps or (10_000 if args.quick else 100_000)
    tmp = Path(tempfile.mkdtemp(prefix="episodes-bench-", dir=args.dir))
    try:
        if args.only in (None, "v1"):
            bench(total, args.episode_len, tmp, args.repeats)
        if args.only in (None, "v2"):
            frames = make_frames(min(total, 3 * args.episode_len) + 2)
            eps = list(episodes(total, args.episode_len, frames))
            bench_v2_frames(eps, tmp, args.repeats)
            del eps
        if args.only in (None, "v2", "cartpole"):
            bench_v2_cartpole(10 * total, tmp)
        if args.only in (None, "tiny"):
            bench_v2_tiny(5_000, tmp, args.repeats)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
