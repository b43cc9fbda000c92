"""Mutation-testing pins for the modules added in session 51.

Each test fails on a hand-made mutant of its module that the earlier tests let through
(named in the test's comment) and passes on the real code.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter
from episodes.io.returns_to_go import suffix_returns
from episodes.replay import EpisodeReplayBuffer
from episodes.replay.returns_to_go import sequence_returns_to_go


def _buffer() -> EpisodeReplayBuffer:
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[0, 1, 2, 3],
            actions=[0] * 3,
            rewards=[1.0, 2.0, 4.0],
            terminated=True,
            t_started=10,
            len_lookback_buffer=0,
        )
    )
    return buf


def _episode(id_, t0, rewards, terminated=False) -> SingleAgentEpisode:
    n = len(rewards)
    return SingleAgentEpisode(
        id_,
        observations=[np.float32(t0 + i) for i in range(n + 1)],
        actions=[0] * n,
        rewards=rewards,
        t_started=t0,
        terminated=terminated,
        len_lookback_buffer=0,
    )


# ------------------------------------------------------------- replay sequence_returns_to_go


def test_sequence_returns_to_go_reads_rewards_that_track_gradients():
    # Mutant: torch columns passed to np.asarray without detach (a tensor that requires
    # grad cannot become a numpy array that way).
    torch = pytest.importorskip("torch")
    buf = _buffer()
    batch = buf.sample(8, batch_length_T=2, pad=True)
    want = sequence_returns_to_go(buf, batch)
    rewards = torch.as_tensor(np.asarray(batch["rewards"])).clone().requires_grad_(True)
    got = sequence_returns_to_go(
        buf, {"indices": torch.as_tensor(batch["indices"]), "rewards": rewards}
    )
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def _bad_batch(kind: str) -> dict:
    indices = np.array([[0, 1, 2]])
    rewards = np.array([[1.0, 2.0, 4.0]], np.float32)
    if kind == "no_rewards":
        return {"indices": indices}
    if kind == "three_dims":
        return {"indices": indices[..., None], "rewards": rewards[..., None]}
    return {"indices": indices, "rewards": np.stack([rewards, rewards], axis=-1)}


@pytest.mark.parametrize(
    ("kind", "match"),
    [
        # Mutant: only "indices" required (a KeyError instead).
        ("no_rewards", r"needs 'indices' and 'rewards'"),
        # Mutant: only fewer than two dims refused.
        ("three_dims", r"not \[B, K\] sequences"),
        # Mutant: only the first two dims of the rewards compared.
        ("multi_objective", r"multi-objective"),
    ],
)
def test_sequence_returns_to_go_refuses_batches_that_are_no_scalar_sequences(kind, match):
    with pytest.raises(ValueError, match=match):
        sequence_returns_to_go(_buffer(), _bad_batch(kind))


@pytest.mark.parametrize(
    "shape", [(2, 0), (0, 3), (2, 3)], ids=["no_steps", "no_rows", "all_padded"]
)
def test_sequence_returns_to_go_of_no_real_cell_is_zeros(shape):
    # Mutant: no early return when no row holds a real step (argmax of an empty row).
    batch = {
        "indices": np.full(shape, -1, np.int64),
        "rewards": np.zeros(shape, np.float32),
    }
    rtg, steps = sequence_returns_to_go(_buffer(), batch)
    assert rtg.shape == steps.shape == shape
    assert rtg.dtype == np.float64 and steps.dtype == np.int64
    assert not rtg.any() and not steps.any()


# ----------------------------------------------------------------- SequenceDataset returns


def _dataset(path, episodes):
    with DatasetWriter(path) as w:
        for episode in episodes:
            w.write(episode)
    return path


def test_nested_rewards_are_refused_when_the_dataset_is_made(tmp_path):
    # Mutant: only a scalar leaf's shape checked, nested rewards let through.
    from episodes.io.torch_data import SequenceDataset

    path = _dataset(tmp_path / "d", [_episode("a", 0, [{"x": 1.0, "y": 2.0}] * 3)])
    assert len(SequenceDataset(path, length=2)) == 2  # fine without the keyword
    with pytest.raises(ValueError, match=r"rewards of piece 0 are nested"):
        SequenceDataset(path, length=2, returns_to_go=1.0)


def test_rewards_that_are_no_numbers_name_the_episode(tmp_path):
    # Mutant: summable_rewards' error re-raised without where it happened.
    from episodes.io.torch_data import SequenceDataset

    path = _dataset(tmp_path / "d", [_episode("a", 0, ["p", "q", "r"])])
    data = SequenceDataset(path, length=2, returns_to_go=1.0)
    with pytest.raises(TypeError, match=r"returns_to_go of shard \w+ episode 0: .*<U1"):
        data[0]


def test_a_run_without_items_does_not_overwrite_the_next_runs_returns(tmp_path):
    # Mutant: every run's pieces read into the table, those giving no items too (a run of
    # no table rows writes over the next run's).
    from episodes.io.torch_data import SequenceDataset

    episodes = [
        _episode("y", 0, [1.0, 2.0, 4.0]),
        _episode("x", 0, [100.0]),  # two steps in all: shorter than a window
        _episode("z", 0, [8.0, 16.0, 32.0]),
        _episode("x", 1, [200.0], terminated=True),
        _episode("y", 3, [64.0], terminated=True),
    ]
    data = SequenceDataset(_dataset(tmp_path / "d", episodes), length=3, returns_to_go=1.0)
    got = sorted((data[i]["returns_to_go"].tolist() for i in range(len(data))), reverse=True)
    assert got == [[71.0, 70.0, 68.0], [70.0, 68.0, 64.0], [56.0, 48.0, 32.0]]


def test_suffix_returns_past_float_range_warn_nothing():
    # Mutant: the sums run without np.errstate (RuntimeWarnings for inf - inf, overflow).
    rewards = np.array([np.inf, -np.inf, 1e308, 1e308])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = suffix_returns(rewards, np.array([2, 1, 2, 1]), 1.0)
    assert np.isnan(got[0]) and got[1:].tolist() == [-np.inf, np.inf, 1e308]


# ------------------------------------------------------------------ ConnectorPipeline state


class _Value:
    """A stateful connector; ``refuse``: its first set_state raises that error after setting."""

    def __init__(self, value=0, refuse=None):
        self.value, self.refuse, self.restores = value, refuse, 0

    def __call__(self, episodes, batch):
        return batch

    def get_state(self):
        return {"value": self.value}

    def set_state(self, state):
        self.value = state["value"]
        if self.refuse is not None:
            error, self.refuse = self.refuse, None
            raise error


class _FailsToRestore(_Value):
    """Takes its first state, then refuses every later one (a restore too)."""

    def set_state(self, state):
        self.restores += 1
        if self.restores > 1:
            raise RuntimeError("cannot restore")
        self.value = state["value"]


def _pipe(*connectors):
    from episodes.connectors import ConnectorPipeline

    return ConnectorPipeline(list(connectors))


def test_set_state_takes_any_mapping():
    # Mutant: only a dict taken.
    import types

    pipe = _pipe(_Value())
    pipe.set_state(types.MappingProxyType({"0:_Value": {"value": 4}}))
    assert pipe[0].value == 4


def test_a_state_with_extra_keys_only_names_no_missing_ones():
    # Mutant: "it lacks []" said where nothing is missing.
    pipe = _pipe(_Value())
    with pytest.raises(ValueError) as info:
        pipe.set_state({"0:_Value": {"value": 1}, "1:_Value": {"value": 2}})
    assert "lacks" not in str(info.value) and "it holds ['1:_Value']" in str(info.value)
    assert pipe[0].value == 0


def test_attributes_that_are_no_methods_count_as_missing():
    # Mutants: get_state / set_state found by hasattr, not by being callable.
    no_get, no_set = _Value(1), _Value(2)
    no_get.get_state = None
    no_set.set_state = None
    pipe = _pipe(no_get, no_set)
    assert pipe.get_state() == {"1:_Value": {"value": 2}}
    with pytest.raises(ValueError, match=r"connector 1:_Value has get_state but no set_state"):
        pipe.set_state({"1:_Value": {"value": 3}})
    assert no_set.value == 2


def test_an_interrupt_inside_set_state_puts_the_states_back():
    # Mutant: only Exception (not KeyboardInterrupt) rolls back.
    pipe = _pipe(_Value(1), _Value(2, refuse=KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        pipe.set_state({"0:_Value": {"value": 10}, "1:_Value": {"value": 20}})
    assert [pipe[0].value, pipe[1].value] == [1, 2]


def test_a_failing_restore_does_not_stop_the_others_nor_hide_the_first_error():
    # Mutants: a failing restore stops the loop (break), or its error escapes.
    first, flaky = _Value(1), _FailsToRestore(2)
    pipe = _pipe(first, flaky, _Value(3, refuse=ValueError("third refuses")))
    with pytest.raises(ValueError, match="^third refuses$"):
        pipe.set_state(
            {
                "0:_Value": {"value": 10},
                "1:_FailsToRestore": {"value": 20},
                "2:_Value": {"value": 30},
            }
        )
    assert first.value == 1 and flaky.value == 20  # flaky could not go back; first did


@pytest.mark.parametrize(
    ("nested", "error", "message"),
    [
        # Mutant: every ValueError prefixed, not only a nested pipeline's.
        (False, ValueError("plain refusal"), "plain refusal"),
        # Mutant: a nested pipeline's other errors turned into ValueErrors.
        (True, TypeError("inner type"), "inner type"),
        (
            True,
            ValueError("inner value"),
            "in connector 0:ConnectorPipeline: inner value",
        ),
    ],
    ids=["plain_value_error", "nested_type_error", "nested_value_error"],
)
def test_a_refusal_is_prefixed_only_for_a_nested_pipeline(nested, error, message):
    refusing = _Value(refuse=error)
    inner = _pipe(refusing) if nested else refusing
    pipe = _pipe(inner)
    entry = {"0:_Value": {"value": 1}} if nested else {"value": 1}
    with pytest.raises(type(error)) as info:
        pipe.set_state({f"0:{type(inner).__name__}": entry})
    assert str(info.value) == message
    # Mutant: the nested error not chained as the cause.
    assert info.value is error or info.value.__cause__ is error


def test_state_keys_use_the_plain_class_name_of_a_local_class():
    # Mutant: the qualified name ("...<locals>.Local") in the key.
    class Local(_Value):
        pass

    assert list(_pipe(Local()).get_state()) == ["0:Local"]


def test_get_state_hands_out_the_connectors_own_values():
    # Mutant: get_state deep-copies (the docs say the values are not copied).
    values = {"value": np.zeros(2)}

    class Holder(_Value):
        def get_state(self):
            return values

    assert _pipe(Holder()).get_state()["0:Holder"] is values


# ------------------------------------------------------------------- MeanStdFilter states


@pytest.mark.parametrize(
    ("state", "match"),
    [
        # Mutant: a None mean with an m2 (or the reverse) taken at count 0.
        ({"count": 0, "mean": None, "m2": [1.0]}, r"None only together"),
        ({"count": 0, "mean": [1.0], "m2": None}, r"None only together"),
        # Mutant: only NaN refused, not inf.
        ({"count": 2, "mean": [np.inf], "m2": [0.0]}, r"'mean' holds a NaN or inf"),
        ({"count": 2, "mean": [0.0], "m2": [np.inf]}, r"'m2' holds a NaN or inf"),
    ],
    ids=["mean_none_alone", "m2_none_alone", "inf_mean", "inf_m2"],
)
def test_mean_std_states_refused(state, match):
    from episodes.connectors import MeanStdFilter

    filt = MeanStdFilter()
    filt.set_state({"count": 3, "mean": [1.0], "m2": [2.0]})
    with pytest.raises(ValueError, match=match):
        filt.set_state(state)
    assert (filt.count, filt.mean.tolist(), filt.var.tolist()) == (3, [1.0], [1.0])


def test_a_json_state_of_ragged_tuple_leaves_is_read_as_a_tuple():
    # Mutant: numpy's ValueError for a ragged list escapes instead of reading a tuple.
    from episodes.connectors import MeanStdFilter

    filt = MeanStdFilter()
    filt.set_state(
        {
            "count": 2,
            "mean": [[1.0, 2.0], [3.0, 4.0, 5.0]],
            "m2": [[0.0] * 2, [0.0] * 3],
        }
    )
    mean = filt.mean
    assert isinstance(mean, tuple) and [m.tolist() for m in mean] == [
        [1.0, 2.0],
        [3.0, 4.0, 5.0],
    ]


# --------------------------------------------- distributed deadline and dropped (no Ray used)


class _FakeRay:
    """Ray's get and wait as the deadline and dropped helpers call them, recording timeouts."""

    class exceptions:  # noqa: N801 - the attribute path ray.exceptions.GetTimeoutError
        GetTimeoutError = type("GetTimeoutError", (Exception,), {})

    def __init__(self, outcome=None, ready=()):
        self.outcome, self.ready, self.timeouts = outcome, set(ready), []

    def get(self, ref, timeout=None):
        self.timeouts.append(timeout)
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome

    def wait(self, refs, num_returns, timeout):
        self.timeouts.append(timeout)
        return [r for r in refs if r in self.ready], [r for r in refs if r not in self.ready]


class _Ref:
    def __init__(self):
        self.futures = 0

    def future(self):
        self.futures += 1


class _Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    pytest.importorskip("ray")
    import types

    from episodes.distributed import deadline

    now = _Clock(100.0)
    monkeypatch.setattr(deadline, "time", types.SimpleNamespace(monotonic=now))
    return now


def test_deadline_get_waits_only_what_is_left(clock):
    # Mutant: every wait as long as the whole timeout_s.
    from episodes.distributed.deadline import Deadline

    deadline = Deadline(10.0)
    clock.now = 107.5
    ray = _FakeRay(outcome="done")
    assert deadline.get(ray, object()) == "done" and ray.timeouts == [2.5]


def test_deadline_get_passes_other_errors_through(clock):
    # Mutant: any error of ray.get taken for a timeout.
    from episodes.distributed.deadline import Deadline

    error = ValueError("the task failed")
    with pytest.raises(ValueError) as info:
        Deadline(10.0).get(_FakeRay(outcome=error), object())
    assert info.value is error


def test_deadline_timeout_hides_rays_error(clock):
    # Mutant: Ray's GetTimeoutError chained under ours (its traceback in every report).
    from episodes.distributed.deadline import Deadline

    ray = _FakeRay(outcome=_FakeRay.exceptions.GetTimeoutError("ray's"))
    with pytest.raises(TimeoutError, match=r"timeout_s=10\.0 s: counted as lost") as info:
        Deadline(10.0).get(ray, object())
    assert info.value.__suppress_context__ and info.value.__cause__ is None


def _starting_slots():
    from episodes.distributed.slots import Slot

    slots = [Slot(index=i, generation=1, handle=None, num_envs=1) for i in range(2)]
    for slot in slots:
        slot.started, slot.ref = _Ref(), _Ref()
    return slots


@pytest.mark.parametrize(
    ("start_timeout_s", "timeout_s", "wait", "stuck"),
    [
        # Mutant: the start timeout replaced by what is left of the deadline.
        (5.0, 60.0, 5.0, [1]),
        (None, None, None, [1]),
        # Mutants: no start timeout with a deadline (a None compared), stuck ones counted
        # though the deadline came first, or the started ones' first calls not forgotten.
        (None, 60.0, 60.0, []),
        (300.0, 60.0, 60.0, []),
    ],
    ids=["start_timeout_first", "no_limits", "deadline_only", "deadline_first"],
)
def test_stuck_before_waits_for_the_earlier_limit(clock, start_timeout_s, timeout_s, wait, stuck):
    from episodes.distributed.deadline import Deadline, stuck_before

    slots = _starting_slots()
    ray = _FakeRay(ready=[slots[0].started])
    got = stuck_before(ray, slots, start_timeout_s, Deadline(timeout_s))
    assert ray.timeouts == [wait]
    assert [slot.index for slot in got] == stuck
    assert slots[0].started is None and slots[1].started is not None


def test_drop_reads_the_result_when_it_arrives():
    # Mutant: the reference let go without its future (Ray reports its error unhandled).
    pytest.importorskip("ray")
    from episodes.distributed.dropped import drop

    ref = _Ref()
    drop(ref)
    assert ref.futures == 1


@pytest.mark.parametrize(
    "error", [ValueError("task 0"), KeyboardInterrupt()], ids=["error", "interrupt"]
)
def test_get_all_lets_go_of_every_reference_when_it_raises(error):
    # Mutants: only Exception handled (an interrupt leaves them unread), one ref dropped.
    pytest.importorskip("ray")
    from episodes.distributed.dropped import get_all

    refs = [_Ref() for _ in range(3)]
    with pytest.raises(type(error)):
        get_all(_FakeRay(outcome=error), refs, timeout=4.0)
    assert [ref.futures for ref in refs] == [1, 1, 1]


def test_get_all_passes_its_timeout_and_drops_nothing_on_success():
    # Mutant: the timeout not handed to ray.get.
    pytest.importorskip("ray")
    from episodes.distributed.dropped import get_all

    refs = [_Ref(), _Ref()]
    ray = _FakeRay(outcome=("a", "b"))
    assert get_all(ray, refs, timeout=4.0) == ["a", "b"]
    assert ray.timeouts == [4.0] and [ref.futures for ref in refs] == [0, 0]


def test_a_numpy_count_is_stored_as_a_python_int():
    # Mutant: the count kept as given (np.int64: get_state then is not JSON-serializable).
    import json

    from episodes.connectors import MeanStdFilter

    filt = MeanStdFilter()
    filt.set_state({"count": np.int64(3), "mean": [1.0], "m2": [2.0]})
    assert type(filt.count) is int
    assert json.loads(json.dumps({"count": filt.get_state()["count"]})) == {"count": 3}


# ------------------------------------------------------------------------- RLlib keywords


def _wrapped(init):
    from episodes.connectors.rllib_keywords import explains_rllib_keywords

    return type("Piece", (), {"__init__": explains_rllib_keywords(init)})


def _takes_everything(self, n=1, **kwargs):
    self.kwargs = kwargs


def _spread(self, *spaces):
    self.kwargs = {"spaces": spaces}


def _named_space(self, observation_space, n=1):
    self.kwargs = {"space": observation_space}


@pytest.mark.parametrize(
    ("init", "args", "kwargs"),
    [
        # Mutant: an init taking **kwargs checked too (its own num_frames refused).
        (_takes_everything, (), {"num_frames": 4}),
        # Mutant: an init taking *args refused a space given by position.
        (_spread, ("SPACE",), {}),
        # Mutant: only a parameter named exactly "space" takes one.
        (_named_space, ("SPACE",), {}),
    ],
    ids=["var_keyword", "var_positional", "observation_space"],
)
def test_calls_the_init_takes_go_through(init, args, kwargs):
    import gymnasium as gym

    space = gym.spaces.Box(-1.0, 1.0, (2,))
    args = tuple(space if a == "SPACE" else a for a in args)
    piece = _wrapped(init)(*args, **kwargs)
    assert piece.kwargs in (kwargs, {"spaces": args}, {"space": space})


def _by_position(self, num_frames, /):
    pass


def _stack(self, n, *, inference=False):
    pass


@pytest.mark.parametrize(
    ("init", "args", "kwargs", "match"),
    [
        # Mutant: a positional-only parameter's name counted as a keyword the init takes.
        (
            _by_position,
            (),
            {"num_frames": 4},
            r"Piece takes no num_frames= \(an RLlib 2\.60",
        ),
        # Mutant: a keyword RLlib does not have beside one it has (a KeyError).
        (_stack, (4,), {"frames": 2, "num_frames": 4}, r"^Piece takes no num_frames="),
        # Mutant: only a Box by position taken for an input space.
        (_stack, ("DISCRETE",), {}, r"gymnasium space as positional argument 1"),
    ],
    ids=["positional_only", "mixed_keywords", "discrete_space"],
)
def test_rllib_calls_are_explained(init, args, kwargs, match):
    import gymnasium as gym

    args = tuple(gym.spaces.Discrete(3) if a == "DISCRETE" else a for a in args)
    with pytest.raises(TypeError, match=match) as info:
        _wrapped(init)(*args, **kwargs)
    assert "frames=" not in str(info.value).replace("num_frames=", "")


# --------------------------------------------------------------------------- dead workers


@pytest.mark.parametrize(
    "env",
    [
        # Mutant: only the env itself read, not the env a wrapper holds.
        "wrapped",
        # Mutant: only a list of pipes read, not a tuple.
        "tuple",
    ],
)
def test_dead_workers_behind_a_wrapper_or_in_a_tuple(env):
    from types import SimpleNamespace

    from episodes.runner.dead_workers import dead_workers, refuse_dead_workers

    pipes = ["pipe", None, "pipe"]
    vec = SimpleNamespace(parent_pipes=tuple(pipes) if env == "tuple" else pipes)
    env = SimpleNamespace(unwrapped=vec) if env == "wrapped" else vec
    assert dead_workers(env) == [1]
    with pytest.raises(RuntimeError, match=r"worker of sub-env 1 was shut down"):
        refuse_dead_workers(env)
