"""Session 52 review: dict columns with per-key lists, MeanStdFilter in place, refused weights.

- A dict column's list is structure (a numpy'd column lays out list-holding items so): such a
  column rebuilds the same episode, a setter reads it as the constructor does, and masked
  rows in it are refused as one masked array is.
- ``MeanStdFilter`` normalizes in place: the rows match ``(x - mean) / (std + eps)`` computed
  apart, for integer, uint8 and bool observations and without a clip.
- A runner whose policy refuses broadcast weights keeps its actor: the refused round's samples
  come with the error, and the chunks handed out next continue them.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import MeanStdFilter


def _episode(observations: Any, steps: int = 2, **kwargs: Any) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        observations=observations,
        actions=[0] * steps,
        rewards=[1.0] * steps,
        len_lookback_buffer=0,
        **kwargs,
    )


def _same(a: Any, b: Any) -> bool:
    """Equal items: same nesting and types, leaves of the same dtype and values."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    kind = np.asarray(a).dtype.kind
    return (
        type(a) is type(b)
        and np.asarray(a).dtype == np.asarray(b).dtype
        and np.array_equal(a, b, equal_nan=kind in "fc")
    )


def _items(ep: SingleAgentEpisode) -> list[Any]:
    return [ep.get_observations(i) for i in range(len(ep) + 1)]


# ------------------------------------------------------------------ dict columns with lists
@pytest.mark.parametrize("steps", [1, 2], ids=["two_items", "three_items"])
def test_a_numpy_column_holding_lists_rebuilds_the_same_episode(steps: int) -> None:
    observations = [{"pos": [float(2 * i), float(2 * i + 1)]} for i in range(steps + 1)]
    ep = _episode(observations, steps)
    ep.to_numpy()
    batched = ep.get_observations()
    assert isinstance(batched["pos"], list)  # the numpy'd form keeps the list's structure
    again = _episode(batched, steps)
    assert all(_same(a, b) for a, b in zip(_items(ep), _items(again), strict=True))


def test_a_setter_reads_a_dict_of_lists_as_the_constructor_does() -> None:
    new = {"g": [np.full(2, 1.0), np.full(2, 2.0)]}
    ep = _episode([{"g": np.zeros(2)} for _ in range(3)])
    ep.set_observations(new_data=new, at_indices=slice(0, 2))
    built = _episode(new, steps=1)
    assert all(_same(a, b) for a, b in zip(_items(built), _items(ep)[:2], strict=True))


def test_a_list_of_masked_rows_under_a_key_is_refused_as_one_masked_array_is() -> None:
    rows = [np.ma.masked_array([1.0, 2.0], [False, True])] + [np.ma.masked_array([3.0, 4.0])] * 2
    with pytest.raises(TypeError, match="masked"):
        _episode({"g": np.ma.stack(rows)})
    with pytest.raises(TypeError, match="masked"):
        _episode({"g": rows})


# ------------------------------------------------------------------ MeanStdFilter in place
@pytest.mark.parametrize(
    ("dtype", "clip"),
    [(np.uint8, None), (np.int32, 0.5), (np.bool_, None), (np.float32, 10.0), (np.float64, None)],
    ids=["uint8_no_clip", "int32_clip", "bool_no_clip", "float32_clip", "float64_no_clip"],
)
def test_mean_std_rows_match_the_formula_computed_apart(dtype: Any, clip: float | None) -> None:
    rng = np.random.default_rng(3)
    values = rng.integers(0, 2 if dtype is np.bool_ else 200, (5, 3)).astype(dtype)
    space = gym.spaces.Box(0, 1 if dtype is np.bool_ else 255, (3,), dtype)
    ep = _episode(list(values), steps=4, observation_space=space)
    filt = MeanStdFilter(clip=clip)
    out = filt([ep], {})["obs"]
    x = values.astype(np.float64)
    want = (x[:4] - x.mean(axis=0)) / (x.std(axis=0, ddof=1) + filt.eps)
    if clip is not None:
        want = np.clip(want, -clip, clip)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, want.astype(np.float32))


def test_a_fresh_filter_refusing_a_json_tuple_state_says_why() -> None:
    space = gym.spaces.Tuple((gym.spaces.Box(-9, 9, (2,)), gym.spaces.Box(-9, 9, (2,))))
    space.seed(0)
    ep = _episode([space.sample() for _ in range(3)], observation_space=space)
    learner = MeanStdFilter()
    learner([ep], {})
    state = learner.get_state()
    as_json = {
        "count": state["count"],
        "mean": [leaf.tolist() for leaf in state["mean"]],
        "m2": [leaf.tolist() for leaf in state["m2"]],
    }
    runner = MeanStdFilter(update=False)
    runner.set_state(as_json)
    with pytest.raises(ValueError, match="tuple"):
        runner([ep], {})


# ------------------------------------------------------------------ refused weights (Ray)
class _PickyPolicy:
    """Loads ``{}``; runner 1 refuses ``{"bad": True}``; ``{"interrupt": True}`` interrupts."""

    def __init__(self, num_envs: int, index: int):
        self.num_envs, self.index = num_envs, index

    def set_weights(self, weights: dict[str, Any]) -> None:
        if weights.get("interrupt"):
            raise KeyboardInterrupt
        if weights.get("bad") and self.index == 1:
            raise KeyError("weights of another model")

    def __call__(self, obs: np.ndarray) -> Any:
        return np.zeros(self.num_envs, np.int64), {}


def _one_cartpole(ctx: Any) -> gym.vector.VectorEnv:
    return gym.make_vec("CartPole-v1", 1, vectorization_mode="sync")


def _picky(env: gym.vector.VectorEnv, ctx: Any) -> _PickyPolicy:
    return _PickyPolicy(env.num_envs, ctx.index)


@pytest.fixture(scope="module")
def picky_group() -> Any:
    ray = pytest.importorskip("ray")
    from episodes.distributed import RunnerGroup

    started = not ray.is_initialized()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        ignore_reinit_error=True,
    )
    with RunnerGroup(
        _one_cartpole, _picky, num_runners=2, seed=0, num_cpus_per_runner=0.5,
        runner_kwargs={"window": "vector_steps"},
    ) as group:  # fmt: skip
        yield group
    if started:
        ray.shutdown()


def test_a_partial_refusal_leaves_no_gap_in_the_chunks_handed_out(picky_group) -> None:
    pytest.importorskip("ray")
    from episodes.replay import EpisodeReplayBuffer

    # Two steps per sample: CartPole pushed one way lasts ~8 steps, so no episode ends here.
    first = picky_group.sample(2, weights={})
    with pytest.raises(ValueError, match="runner 1 .* refused weights") as raised:
        picky_group.sample(2, weights={"bad": True})
    refused_round = raised.value.sample  # both runners' samples, the refusing one's too
    assert len(refused_round.samples) == 2 and not refused_round.lost
    after = picky_group.sample(2, weights={})
    for earlier, later in ((first, refused_round), (refused_round, after)):
        ends = {chunk.id_: chunk.t for chunk in earlier}
        assert {chunk.id_: chunk.t_started for chunk in later} == ends
    buffer = EpisodeReplayBuffer(capacity=100)
    for part in (first, refused_round, after):
        buffer.add(list(part))  # chunks continuing the stored ones


def test_an_interrupt_in_set_weights_is_named_as_such(picky_group) -> None:
    pytest.importorskip("ray")
    with pytest.raises(BaseException) as raised:
        picky_group.sample(2, weights={"interrupt": True})
    picky_group.set_weights({})  # what the next test (or the fixture's stop) expects
    assert "KeyboardInterrupt" in f"{type(raised.value).__name__}: {raised.value}"
