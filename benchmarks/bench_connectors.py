"""Connectors: ours vs RLlib 2.60's ConnectorV2 pieces, interleaved per repeat, medians.

Run with the reference venv (needs both libraries):

    .venv-ref/bin/python benchmarks/bench_connectors.py [--quick] [--only TEXT] [--profile]
        [--json PATH]

Both libraries get the same episodes: 20-step chunks with a 4-step lookback (Box(4) float32
observations, Discrete(3) actions), built from one set of pre-drawn data, in list mode and
numpy'd (``to_numpy``), N = 1, 64 and 1000 of them. RLlib's env-to-module pieces act on each
episode's last time step, so they are compared with ours in ``inference=True`` mode; its
learner-side pieces (whole episodes) with ours in the default mode.

Each RLlib row has two figures: the piece alone (``piece``), and the piece followed by the
RLlib pieces that turn its output into what ours returns, one batched array per column
(``RLlib``: ``AddObservationsFromEpisodesToBatch`` where the piece writes into the episodes,
then ``BatchIndividualItems``). The env-to-module ``FlattenObservations`` and
``PrevActionsPrevRewards`` rewrite each episode's last observation; that is undone after every
call, outside the timed region, so each call sees the episodes as built.

RLlib's ``FrameStacking`` stacks ``[H, W, 1]`` frames along the last axis (its space must be
such a Box), so the frame-stacking rows use the same 4 numbers a step as a ``(4, 1, 1)`` Box;
ours gives ``[rows, n, 4, 1, 1]`` where RLlib gives ``[rows, 4, 1, n]``, compared after moving
our frame axis last. Outputs are checked before timing: same values per episode, in order.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import copy  # noqa: E402
import cProfile  # noqa: E402
import json  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import json_path, positive_int  # noqa: E402

from episodes import SingleAgentEpisode as Ours  # noqa: E402
from episodes.connectors import (  # noqa: E402
    FlattenObservations,
    FrameStack,
    MeanStdFilter,
    PrevActionsPrevRewards,
)

try:
    from ray.rllib.connectors.common import (
        AddObservationsFromEpisodesToBatch,
        BatchIndividualItems,
    )
    from ray.rllib.connectors.common.flatten_observations import (
        FlattenObservations as RLlibFlattenObservations,
    )
    from ray.rllib.connectors.env_to_module import (
        FlattenObservations as RLlibFlattenObservationsEnvToModule,
    )
    from ray.rllib.connectors.env_to_module import (
        PrevActionsPrevRewards as RLlibPrevActionsPrevRewards,
    )
    from ray.rllib.connectors.env_to_module.frame_stacking import FrameStackingEnvToModule
    from ray.rllib.connectors.env_to_module.mean_std_filter import (
        MeanStdFilter as RLlibMeanStdFilter,
    )
    from ray.rllib.connectors.learner.frame_stacking import FrameStackingLearner
    from ray.rllib.core.columns import Columns
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode as Theirs
except ImportError:  # pragma: no cover
    sys.exit("ray[rllib] is not installed: run with .venv-ref/bin/python")

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
# RLlib's FrameStacking asserts a Box whose last axis is 1 and concatenates frames on axis 2.
FRAME_SPACE = gym.spaces.Box(-1.0, 1.0, (4, 1, 1), np.float32)
ACT_SPACE = gym.spaces.Discrete(3)
STEPS, LOOKBACK = 20, 4
FRAMES, N_PREV = 4, 2
SIZES = (1, 64, 1000)
MODES = ("list", "numpy")
PROFILE_N = 1000
_PREV_KEYS = ("prev_n_actions", "prev_n_rewards")

RNG = np.random.default_rng(0)
MAX_N = max(SIZES)
OBS = RNG.uniform(-1, 1, (MAX_N, LOOKBACK + STEPS + 1, 4)).astype(np.float32)
ACTS = RNG.integers(0, ACT_SPACE.n, (MAX_N, LOOKBACK + STEPS))
REWS = RNG.normal(size=(MAX_N, LOOKBACK + STEPS))

Batch = dict[str, Any]
Outputs = dict[str, np.ndarray]


# ------------------------------------------------------------------------------ episodes
_EPISODES: dict[tuple[type, int, str, int], list[Any]] = {}


def episodes(cls: type, n: int, mode: str, space: gym.spaces.Box) -> list[Any]:
    """``n`` 20-step chunks with a 4-step lookback, from the shared pre-drawn data (cached).

    Ids hold a ``_``: RLlib's learner-side ``AddObservationsFromEpisodesToBatch`` appends
    ``_<index>`` to ids without one, which would change the episodes between calls.
    """
    key = (cls, n, mode, id(space))
    if key not in _EPISODES:
        built = []
        for i in range(n):
            ep = cls(
                id_=f"ep_{i}",
                observations=[row.reshape(space.shape).copy() for row in OBS[i]],
                actions=[int(a) for a in ACTS[i]],
                rewards=[float(r) for r in REWS[i]],
                observation_space=space,
                action_space=ACT_SPACE,
                len_lookback_buffer=LOOKBACK,
            )
            assert len(ep) == STEPS
            built.append(ep.to_numpy() if mode == "numpy" else ep)
        _EPISODES[key] = built
    return _EPISODES[key]


# ----------------------------------------------------------------------------- contenders
def rllib_piece(cls: Callable[..., Any], space: gym.spaces.Box, **kwargs: Any) -> Any:
    """An RLlib piece with its input spaces set after construction.

    RLlib 2.60's ``PrevActionsPrevRewards`` and ``FrameStacking`` read ``self._multi_agent``
    while ``ConnectorV2.__init__`` sets the spaces, before they assign it: given spaces in the
    constructor they raise ``AttributeError``. Setting them afterwards computes the same
    output spaces.
    """
    piece = cls(**kwargs)
    piece.input_action_space = ACT_SPACE
    piece.input_observation_space = space
    return piece


def run_pieces(pieces: list[Any], eps: list[Any]) -> Batch:
    batch: Batch = {}
    shared: dict[str, Any] = {}
    for piece in pieces:
        batch = piece(rl_module=None, batch=batch, episodes=eps, explore=False, shared_data=shared)
    return batch


@dataclass
class RLlibSide:
    """How one RLlib contender runs, and how its output reads as ours (``Outputs``)."""

    pieces: list[Any]
    read: Callable[[Batch, list[Any]], Outputs]
    writes_last_obs: bool = False  # an env-to-module piece that rewrites the last observation


@dataclass
class Case:
    """One operation: our connector and RLlib's counterpart (piece, piece + batching)."""

    name: str
    kind: str  # "inference" or "learner"
    space: gym.spaces.Box
    ours: Callable[[], Callable[[list[Any], Batch], Batch]]
    read_ours: Callable[[Batch], Outputs]
    piece: Callable[[], RLlibSide] | None = None
    full: Callable[[], RLlibSide] | None = None
    note: str = ""


def stack_last_obs(keys: tuple[str, ...] | None) -> Callable[[Batch, list[Any]], Outputs]:
    """Reads what an env-to-module piece wrote into each episode's last observation."""

    def read(batch: Batch, eps: list[Any]) -> Outputs:
        last = [ep.get_observations(-1) for ep in eps]
        if keys is None:
            return {"obs": np.stack(last)}
        return {k: np.stack([item[k] for item in last]) for k in keys}

    return read


def concat_frames(batch: Batch, eps: list[Any]) -> Outputs:
    """Joins RLlib's per-episode ``batch[OBS][(id,)] = [frames, ...]`` in episode order.

    An env-to-module item is one row ``[4, 1, n]``; a learner one ``[len(ep), 4, 1, n]``.
    """
    column = batch[Columns.OBS]
    rows = [np.asarray(item) for ep in eps for item in column[(ep.id_,)]]
    return {"obs": np.concatenate([r[None] if r.ndim == 3 else r for r in rows])}


def batched(keys: tuple[str, ...] | None) -> Callable[[Batch, list[Any]], Outputs]:
    def read(batch: Batch, eps: list[Any]) -> Outputs:
        obs = batch[Columns.OBS]
        if keys is None:
            return {"obs": np.asarray(obs)}
        return {k: np.asarray(obs[k]) for k in keys}

    return read


def frames_last(batch: Batch) -> Outputs:
    """Ours ``[rows, n, 4, 1, 1]`` as RLlib lays frames out: ``[rows, 4, 1, n]``."""
    obs = np.moveaxis(batch["obs"], 1, -1)
    return {"obs": obs.reshape(obs.shape[:2] + (1, FRAMES))}


def make_cases() -> list[Case]:
    add_e2m = AddObservationsFromEpisodesToBatch
    flatten_learner_note = (
        "RLlib's FlattenObservations(as_learner_connector=True) raises on these episodes "
        "(below); for a Box(4) float32 observation flattening is the identity, so the "
        "learner row times RLlib's AddObservationsFromEpisodesToBatch(as_learner_connector="
        "True), which gathers the same [rows, 4] float32 column"
    )
    return [
        Case(
            "FlattenObservations",
            "inference",
            OBS_SPACE,
            lambda: FlattenObservations(inference=True),
            lambda b: {"obs": b["obs"]},
            piece=lambda: RLlibSide(
                [RLlibFlattenObservationsEnvToModule(OBS_SPACE, ACT_SPACE)],
                stack_last_obs(None),
                writes_last_obs=True,
            ),
            full=lambda: RLlibSide(
                [
                    RLlibFlattenObservationsEnvToModule(OBS_SPACE, ACT_SPACE),
                    add_e2m(),
                    BatchIndividualItems(),
                ],
                batched(None),
                writes_last_obs=True,
            ),
        ),
        Case(
            "FlattenObservations",
            "learner",
            OBS_SPACE,
            lambda: FlattenObservations(),
            lambda b: {"obs": b["obs"]},
            piece=lambda: RLlibSide(
                [add_e2m(as_learner_connector=True)],
                lambda b, eps: {
                    # numpy'd: one [len(ep), 4] item an episode; list mode: len(ep) rows.
                    "obs": np.concatenate(
                        [np.asarray(b[Columns.OBS][(ep.id_,)]).reshape(len(ep), -1) for ep in eps]
                    )
                },
            ),
            full=lambda: RLlibSide(
                [add_e2m(as_learner_connector=True), BatchIndividualItems()], batched(None)
            ),
            note=flatten_learner_note,
        ),
        frame_case("inference", FrameStackingEnvToModule),
        frame_case("learner", FrameStackingLearner),
        Case(
            f"PrevActionsPrevRewards({N_PREV}, {N_PREV})",
            "inference",
            OBS_SPACE,
            lambda: PrevActionsPrevRewards(N_PREV, N_PREV, inference=True),
            lambda b: {k: b[k] for k in _PREV_KEYS},
            piece=lambda: RLlibSide(
                [prev_piece()], stack_last_obs(_PREV_KEYS), writes_last_obs=True
            ),
            full=lambda: RLlibSide(
                [prev_piece(), add_e2m(), BatchIndividualItems()],
                batched(_PREV_KEYS),
                writes_last_obs=True,
            ),
        ),
        Case(
            f"PrevActionsPrevRewards({N_PREV}, {N_PREV})",
            "learner",
            OBS_SPACE,
            lambda: PrevActionsPrevRewards(N_PREV, N_PREV),
            lambda b: {k: b[k] for k in _PREV_KEYS},
            note="RLlib has no learner-side PrevActionsPrevRewards (its env-to-module piece "
            "writes the columns into the episodes' observations as they are sampled)",
        ),
    ]


def frame_case(mode: str, rllib_cls: type) -> Case:
    """FrameStack against RLlib's frame stacking piece of ``mode`` (env-to-module or learner)."""
    inference = mode == "inference"
    return Case(
        f"FrameStack({FRAMES})",
        mode,
        FRAME_SPACE,
        lambda: FrameStack(FRAMES, inference=inference),
        frames_last,
        piece=lambda: RLlibSide(
            [rllib_piece(rllib_cls, FRAME_SPACE, num_frames=FRAMES)], concat_frames
        ),
        full=lambda: RLlibSide(
            [rllib_piece(rllib_cls, FRAME_SPACE, num_frames=FRAMES), BatchIndividualItems()],
            batched(None),
        ),
    )


def prev_piece() -> Any:
    return rllib_piece(
        RLlibPrevActionsPrevRewards, OBS_SPACE, n_prev_actions=N_PREV, n_prev_rewards=N_PREV
    )


# ------------------------------------------------------------------------------- running
def ours_runner(conn: Callable[[list[Any], Batch], Batch], eps: list[Any]) -> Callable[[], float]:
    def run() -> float:
        t0 = time.perf_counter()
        conn(eps, {})
        return time.perf_counter() - t0

    return run


def rllib_runner(side: RLlibSide, eps: list[Any], space: gym.spaces.Box) -> Callable[[], float]:
    """One timed call; the episodes' rewritten last observations are put back after it."""
    saved = [copy.deepcopy(ep.observations.data[-1]) for ep in eps]

    def restore() -> None:
        for ep, obs in zip(eps, saved):
            ep.observations.data[-1] = copy.deepcopy(obs)
            ep.observation_space = space

    def run() -> float:
        t0 = time.perf_counter()
        try:
            run_pieces(side.pieces, eps)
            return time.perf_counter() - t0
        finally:
            if side.writes_last_obs:
                restore()

    run.restore = restore  # type: ignore[attr-defined]
    return run


def rllib_output(side: RLlibSide, eps: list[Any], space: gym.spaces.Box) -> Outputs:
    run = rllib_runner(side, eps, space)
    try:
        batch = run_pieces(side.pieces, eps)
        return side.read(batch, eps)
    finally:
        if side.writes_last_obs:
            run.restore()  # type: ignore[attr-defined]


def compare(ours: Outputs, theirs: Outputs) -> str:
    """Returns "equal" (noting dtype differences), or exactly how the outputs differ."""
    notes, diffs = [], []
    for key, mine in ours.items():
        other = theirs[key]
        if mine.shape != other.shape:
            diffs.append(f"{key}: shape ours {mine.shape} vs RLlib {other.shape}")
            continue
        if mine.dtype != other.dtype:
            notes.append(f"{key} dtype ours {mine.dtype}, RLlib {other.dtype}")
        cast = other.astype(mine.dtype)
        if not np.array_equal(mine, cast):
            bad = np.argwhere(mine != cast)
            row = int(bad[0][0])
            diffs.append(
                f"{key}: {len(bad)} values differ (max |diff| "
                f"{np.max(np.abs(mine.astype(np.float64) - other.astype(np.float64))):.3g}); "
                f"first at row {row}: ours {mine[row].ravel()[:8]} RLlib {other[row].ravel()[:8]}"
            )
    if diffs:
        return "DIFFER: " + "; ".join(diffs)
    return "equal" + (f" ({'; '.join(notes)})" if notes else "")


def timed(fns: dict[str, Callable[[], float]], repeats: int, number: int) -> dict[str, float]:
    """Median seconds per call; each callable times itself (leaving out any restoring).

    Like ``_timing.interleaved``: one warm-up call each, then ``repeats`` rounds that call
    every contender in turn, each sample averaging ``number`` calls.
    """
    for fn in fns.values():
        fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            samples[name].append(sum(fn() for _ in range(number)) / number)
    return {name: statistics.median(s) for name, s in samples.items()}


def check_side(
    label: str, make: Callable[[], RLlibSide] | None, case: Case, n: int, mode: str, ours: Outputs
) -> tuple[RLlibSide | None, str]:
    """RLlib's side for this row if it runs, and its agreement (or why it does not run)."""
    if make is None:
        return None, "n/a: no RLlib counterpart"
    side = make()
    try:
        theirs = rllib_output(side, episodes(Theirs, n, mode, case.space), case.space)
    except Exception as err:  # noqa: BLE001 - reported, not hidden
        # An assert has no message: name the line that failed instead.
        why = str(err) or traceback.extract_tb(err.__traceback__)[-1].line
        return None, f"n/a: RLlib {label} raises {type(err).__name__}: {str(why)[:70]}"
    return side, compare(ours, theirs)


def fmt_ms(seconds: float | None) -> str:
    return f"{seconds * 1e3:9.3f}" if seconds is not None else f"{'n/a':>9s}"


def fmt_ratio(ours: float, theirs: float | None) -> str:
    return f"{ours / theirs:6.2f}x" if theirs else f"{'-':>7s}"


# ------------------------------------------------------------------------- MeanStdFilter
MSF_STEPS = 200  # an env runner's episode length: new episodes (new ids) start after it
# (episodes per call, observation size): how the cost grows with each
MSF_GRID = ((1, 48), (8, 48), (64, 48), (512, 48), (64, 4), (64, 512))
MSF_LEARNER_SIZES = (8, 64, 512)
MSF_D = 48
MSF_OPS = (
    "MeanStdFilter inference",
    "MeanStdFilter learner, counting",
    "MeanStdFilter learner, counted",
)
_MSF_OBS: dict[tuple[int, int], np.ndarray] = {}


def msf_obs(n: int, d: int) -> np.ndarray:
    """Pre-drawn float32 observations ``[n, MSF_STEPS + 1, d]``, far from standardized."""
    if (n, d) not in _MSF_OBS:
        rng = np.random.default_rng(1)
        _MSF_OBS[n, d] = rng.normal(3.0, 2.0, (n, MSF_STEPS + 1, d)).astype(np.float32)
    return _MSF_OBS[n, d]


def msf_space(d: int) -> gym.spaces.Box:
    return gym.spaces.Box(-np.inf, np.inf, (d,), np.float32)


class Stepper:
    """An env runner's ``n`` episodes: one new step each before every call, as sampling does.

    The first call after a reset sees the reset observations alone; after ``MSF_STEPS``
    steps the episodes end and new ones (new ids) start. Both libraries' steppers walk the
    same pre-drawn observations; RLlib's filter rewrites each latest observation in place,
    which the next step leaves behind, as in its env runners.
    """

    def __init__(self, cls: type, n: int, d: int):
        self.cls, self.obs, self.space = cls, msf_obs(n, d), msf_space(d)
        self.generation, self.t, self.started = 0, 0, False
        self.eps = self.new_episodes()

    def new_episodes(self) -> list[Any]:
        return [
            self.cls(
                id_=f"ep_{self.generation}_{i}",
                observations=[self.obs[i, 0].copy()],
                observation_space=self.space,
                action_space=ACT_SPACE,
                len_lookback_buffer=0,
            )
            for i in range(len(self.obs))
        ]

    def advance(self) -> None:
        if self.t == MSF_STEPS:
            self.generation, self.t = self.generation + 1, 0
            self.eps = self.new_episodes()
        elif self.started:
            self.t += 1
            for i, ep in enumerate(self.eps):
                ep.add_env_step(self.obs[i, self.t].copy(), 0, 0.0)
        self.started = True


def msf_piece(d: int) -> Any:
    return rllib_piece(RLlibMeanStdFilter, msf_space(d))


def msf_stepping(call: Callable[[list[Any]], Any], stepper: Stepper) -> Callable[[], float]:
    """One step of every episode (not timed), then one timed call."""

    def run() -> float:
        stepper.advance()
        t0 = time.perf_counter()
        call(stepper.eps)
        return time.perf_counter() - t0

    return run


def msf_agreement(n: int, d: int) -> str:
    """Ours and RLlib's filter on the same steps: their statistics, and how the rows differ.

    Not ``compare``: the libraries do not give equal rows. RLlib counts and normalizes each
    episode's latest observation in turn (an episode's row leaves out the episodes after it
    in the call); ours counts a call's new observations in one merge, then normalizes every
    row with them. RLlib's std is also taken from a float32 variance. So the statistics are
    compared after one episode length and a step (each observation counted once by both),
    and the rows' largest difference is shown: small with N = 1 only.
    """
    ours, piece = MeanStdFilter(inference=True), msf_piece(d)
    mine_s, theirs_s = Stepper(Ours, n, d), Stepper(Theirs, n, d)
    worst = last = 0.0
    for _ in range(MSF_STEPS + 2):
        mine_s.advance()
        theirs_s.advance()
        mine = ours(mine_s.eps, {})["obs"]
        run_pieces([piece], theirs_s.eps)
        other = np.stack([ep.get_observations(-1) for ep in theirs_s.eps])
        last = float(np.abs(mine.astype(np.float64) - other).max())
        worst = max(worst, last)
    stats = piece._filters[None].running_stats
    if stats.n != ours.count:
        return f"DIFFER: counted ours {ours.count}, RLlib {stats.n}"

    def rel(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))

    rows = f"rows max|diff| {worst:.1g}" if n == 1 else f"rows differ by design ({last:.1g})"
    return (
        f"stats agree (n {ours.count}, rel mean {rel(ours.mean, stats.mean):.0e}, "
        f"var {rel(ours.var, stats.var.astype(np.float64)):.0e}); {rows}"
    )


def msf_learner_episodes(cls: type, n: int) -> list[Any]:
    """``n`` whole ``MSF_STEPS``-step episodes, numpy'd, as a learner receives them."""
    obs = msf_obs(n, MSF_D)
    return [
        cls(
            id_=f"ep_{i}",
            observations=list(obs[i]),
            actions=[0] * MSF_STEPS,
            rewards=[0.0] * MSF_STEPS,
            observation_space=msf_space(MSF_D),
            action_space=ACT_SPACE,
            len_lookback_buffer=0,
        ).to_numpy()
        for i in range(n)
    ]


def msf_learner(op: str, n: int) -> tuple[dict[str, Callable[[], float]], str]:
    """Ours over whole episodes, counting them (a fresh filter) or counted already (shared
    with the env-to-module filter); RLlib has no learner-side filter: its learner gathers
    the observations its env-to-module filter normalized in place, timed as ``RLlib``.
    """
    conn = MeanStdFilter()
    eps = msf_learner_episodes(Ours, n)
    obs = msf_obs(n, MSF_D)[:, :, :].reshape(-1, MSF_D).astype(np.float64)
    conn(eps, {})
    rel = np.abs(conn.var - obs.var(0, ddof=1)).max() / obs.var(0, ddof=1).max()
    counting = op.endswith("counting")

    def ours() -> float:
        if counting:
            conn.reset()
        t0 = time.perf_counter()
        conn(eps, {})
        return time.perf_counter() - t0

    gather = RLlibSide(
        [AddObservationsFromEpisodesToBatch(as_learner_connector=True)], batched(None)
    )
    gather.pieces.append(BatchIndividualItems())
    fns = {
        "ours": ours,
        "rllib": rllib_runner(gather, msf_learner_episodes(Theirs, n), msf_space(MSF_D)),
    }
    return fns, f"RLlib: gather only (no learner filter); ours' var = numpy's (rel {rel:.0e})"


def msf_rows(ops: list[str], repeats: int) -> list[dict[str, Any]]:
    header = (
        f"{'operation':32s} {'N':>4s} {'D':>4s} {'ours ms':>9s} {'RLlib ms':>9s} {'ratio':>7s} "
        f"{'piece ms':>9s} {'ratio':>7s}  outputs"
    )
    print(
        "\nMeanStdFilter vs RLlib's MeanStdFilter connector. inference: an env runner's call, "
        "one new step per episode (N episodes, Box(D) float32); RLlib: its filter, then "
        "AddObservationsFromEpisodesToBatch and BatchIndividualItems; piece: its filter alone. "
        f"learner: N whole {MSF_STEPS}-step episodes, Box({MSF_D})\n"
    )
    print(header)
    print("-" * len(header))
    rows = []
    for op in ops:
        grid = MSF_GRID if op == MSF_OPS[0] else [(n, MSF_D) for n in MSF_LEARNER_SIZES]
        for n, d in grid:
            if op == MSF_OPS[0]:
                agree = msf_agreement(n, d)
                conn, full, piece = MeanStdFilter(inference=True), msf_piece(d), msf_piece(d)
                pieces = [full, AddObservationsFromEpisodesToBatch(), BatchIndividualItems()]
                fns = {
                    "ours": msf_stepping(lambda eps, c=conn: c(eps, {}), Stepper(Ours, n, d)),
                    "rllib": msf_stepping(
                        lambda eps, p=pieces: run_pieces(p, eps), Stepper(Theirs, n, d)
                    ),
                    "piece": msf_stepping(
                        lambda eps, p=piece: run_pieces([p], eps), Stepper(Theirs, n, d)
                    ),
                }
                number = 20 if n <= 8 else 5 if n <= 64 else 1
            else:
                fns, agree = msf_learner(op, n)
                number = 3 if n <= 64 else 1
            res = timed(fns, repeats, number)
            print(
                f"{op:32s} {n:4d} {d:4d} {fmt_ms(res['ours'])} {fmt_ms(res.get('rllib'))} "
                f"{fmt_ratio(res['ours'], res.get('rllib'))} {fmt_ms(res.get('piece'))} "
                f"{fmt_ratio(res['ours'], res.get('piece'))}  {agree}"
            )
            rows.append(
                dict(
                    operation=op,
                    n=n,
                    obs_size=d,
                    ours_s=res["ours"],
                    rllib_s=res.get("rllib"),
                    rllib_piece_s=res.get("piece"),
                    outputs=agree,
                )
            )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (7 instead of 31)")
    parser.add_argument(
        "--repeats", type=positive_int, help="timed repeats (default 31; 7 with --quick)"
    )
    parser.add_argument(
        "--only", metavar="TEXT", help="run only the operations whose name contains TEXT"
    )
    parser.add_argument(
        "--profile", action="store_true", help=f"also cProfile ours at N={PROFILE_N}"
    )
    parser.add_argument(
        "--json", metavar="PATH", type=json_path, help="also write the results as JSON"
    )
    args = parser.parse_args(argv)
    repeats = args.repeats or (7 if args.quick else 31)

    cases = make_cases()
    msf_ops = list(MSF_OPS)
    if args.only:
        names = sorted({f"{c.name} {c.kind}" for c in cases} | set(MSF_OPS))
        cases = [c for c in cases if args.only in f"{c.name} {c.kind}"]
        msf_ops = [op for op in MSF_OPS if args.only in op]
        if not cases and not msf_ops:
            parser.error(
                f"--only {args.only!r} matches no operation; the operations are:\n  "
                + "\n  ".join(names)
            )

    results = []
    header = (
        f"{'operation':40s} {'N':>5s} {'mode':5s} {'ours ms':>9s} {'RLlib ms':>9s} "
        f"{'ratio':>7s} {'piece ms':>9s} {'ratio':>7s}  outputs"
    )
    print(
        f"repeats={repeats}, medians; ratio = ours / RLlib (< 1: ours faster). RLlib: the piece "
        "then AddObservationsFromEpisodesToBatch / BatchIndividualItems, to the batched arrays "
        "ours returns; piece: the RLlib piece alone\n"
    )
    if cases:
        print(header)
        print("-" * len(header))
    for case in cases:
        for mode in MODES:
            for n in SIZES:
                conn = case.ours()
                ours_eps = episodes(Ours, n, mode, case.space)
                ours_out = case.read_ours(conn(ours_eps, {}))
                full, full_agree = check_side("+batch", case.full, case, n, mode, ours_out)
                piece, piece_agree = check_side("piece", case.piece, case, n, mode, ours_out)
                fns = {"ours": ours_runner(conn, ours_eps)}
                theirs_eps = episodes(Theirs, n, mode, case.space)
                if full is not None:
                    fns["rllib"] = rllib_runner(full, theirs_eps, case.space)
                if piece is not None:
                    fns["piece"] = rllib_runner(piece, theirs_eps, case.space)
                number = 50 if n == 1 else 3 if n <= 64 else 1
                res = timed(fns, repeats, number)
                agree = full_agree if full is not None else piece_agree
                if full is not None and piece is not None and piece_agree != full_agree:
                    agree = f"+batch: {full_agree}; piece: {piece_agree}"
                elif full is None and piece is not None and full_agree.startswith("n/a"):
                    agree = f"{piece_agree} (piece; +batch {full_agree})"
                op = f"{case.name} {case.kind}"
                print(
                    f"{op:40s} {n:5d} {mode:5s} {fmt_ms(res['ours'])} "
                    f"{fmt_ms(res.get('rllib'))} {fmt_ratio(res['ours'], res.get('rllib'))} "
                    f"{fmt_ms(res.get('piece'))} {fmt_ratio(res['ours'], res.get('piece'))}  "
                    f"{agree}"
                )
                results.append(
                    dict(
                        operation=op,
                        n=n,
                        mode=mode,
                        ours_s=res["ours"],
                        rllib_s=res.get("rllib"),
                        rllib_piece_s=res.get("piece"),
                        outputs=agree,
                    )
                )
    if msf_ops:
        results += msf_rows(msf_ops, repeats)
    notes = [f"{c.name} {c.kind}: {c.note}" for c in cases if c.note]
    if any(c.name == "FlattenObservations" and c.kind == "learner" for c in cases):
        notes.append(flatten_learner_failure())
    if notes:
        print("\nnotes:\n  " + "\n  ".join(notes))

    profiles = profile_ours(cases) if args.profile else []
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"cases": results, "notes": notes, "profiles": profiles, "repeats": repeats},
                f,
                indent=2,
            )


def flatten_learner_failure() -> str:
    """What RLlib's learner-side FlattenObservations does with these episodes."""
    out = []
    for mode in MODES:
        eps = episodes(Theirs, 2, mode, OBS_SPACE)
        piece = RLlibFlattenObservations(OBS_SPACE, ACT_SPACE, as_learner_connector=True)
        try:
            run_pieces([piece], eps)
            out.append(f"{mode}: runs")
        except Exception as err:  # noqa: BLE001 - reported
            out.append(f"{mode}: {type(err).__name__}: {err}")
    return (
        "RLlib FlattenObservations(as_learner_connector=True) on 20-step Box(4) episodes: "
        + "; ".join(out)
        + " (it zips the list of an episode's observations with one space, so only the first "
        "observation is flattened, then reshapes that to [len(ep), -1])"
    )


def profile_ours(cases: list[Case], calls: int = 3) -> list[dict[str, Any]]:
    """cProfile of ours at N=PROFILE_N: top 5 functions by tottime and calls per episode."""
    print(f"\ncProfile of ours, N={PROFILE_N}, {calls} calls each (after one warm-up)")
    out = []
    for case in cases:
        for mode in MODES:
            conn = case.ours()
            eps = episodes(Ours, PROFILE_N, mode, case.space)
            conn(eps, {})
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(calls):
                conn(eps, {})
            prof.disable()
            stats = pstats.Stats(prof)
            entries = stats.stats  # type: ignore[attr-defined]
            per_ep = PROFILE_N * calls
            all_calls = sum(v[1] for v in entries.values())
            py_calls = sum(v[1] for k, v in entries.items() if k[0] != "~")
            total = sum(v[2] for v in entries.values())
            top = sorted(entries.items(), key=lambda kv: kv[1][2], reverse=True)[:5]
            print(
                f"\n{case.name} {case.kind}, {mode}: {all_calls / per_ep:.1f} calls/episode "
                f"({py_calls / per_ep:.1f} Python functions), "
                f"{total / calls * 1e3:.2f} ms tottime/call"
            )
            rows = []
            for (file, line, func), (_, ncalls, tottime, *_rest) in top:
                where = "built-in" if file == "~" else f"{os.path.basename(file)}:{line}"
                print(
                    f"  {tottime / calls * 1e3:8.3f} ms/call  {ncalls:6d} calls "
                    f"({ncalls / per_ep:5.2f}/ep)  {func} ({where})"
                )
                rows.append(dict(func=func, where=where, tottime_s=tottime / calls, ncalls=ncalls))
            out.append(
                dict(
                    operation=f"{case.name} {case.kind}",
                    mode=mode,
                    calls_per_episode=all_calls / per_ep,
                    python_calls_per_episode=py_calls / per_ep,
                    top=rows,
                )
            )
    return out


if __name__ == "__main__":
    main()
