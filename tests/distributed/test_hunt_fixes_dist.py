"""Hunt fixes of episodes.distributed: seeds and indices checked, not truncated; unknown read
arguments refused; the documented copy of a gathered chunk is a real one; Ray Data missing
gets the install hint; colliding step columns refused; runner totals merged."""

from __future__ import annotations

import copy
import gc
import pickle
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

ray = pytest.importorskip("ray")

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.distributed import (  # noqa: E402
    GroupSample,
    RunnerActor,
    RunnerContext,
    RunnerGroup,
    RunnerSample,
    merge_runner_metrics,
    nstep_columns,
    read_episodes,
    read_steps,
    read_transitions,
    runner_seed,
    step_columns,
    write_episodes,
)
from episodes.distributed import sample as sample_module  # noqa: E402
from episodes.distributed.shared_memory import SlotSegments  # noqa: E402
from episodes.io import DatasetWriter  # noqa: E402
from episodes.runner import EnvRunner  # noqa: E402
from tests.distributed._envs import cartpole, random_policy, weighted_policy  # noqa: E402

DOCS = Path(__file__).resolve().parents[2] / "docs" / "distributed.md"


# ------------------------------------------------------------------- seeds, indices, counts
@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"seed": 1.5, "index": 0}, id="float-seed"),
        pytest.param({"seed": "3", "index": 1}, id="str-seed"),
        pytest.param({"seed": True, "index": 0}, id="bool-seed"),
        pytest.param({"seed": -1, "index": 0}, id="negative-seed"),
        pytest.param({"seed": np.float64(2.0), "index": 0}, id="numpy-float-seed"),
        pytest.param({"seed": 0, "index": 1.7}, id="float-index"),
        pytest.param({"seed": 0, "index": -1}, id="negative-index"),
        pytest.param({"seed": None, "index": "1"}, id="str-index-unseeded"),
        pytest.param({"seed": 0, "index": 0, "generation": -1}, id="negative-generation"),
        pytest.param({"seed": 0, "index": 0, "generation": 0.5}, id="float-generation"),
    ],
)
def test_bad_seeds_and_indices_are_refused_not_truncated(kwargs):
    with pytest.raises(ValueError, match="must be"):
        runner_seed(**kwargs)
    with pytest.raises(ValueError, match="must be"):
        RunnerContext.create(**kwargs)


@pytest.mark.parametrize("num_runners", [0, 1.0, True, "2"])
def test_a_context_refuses_a_group_size_that_is_no_count(num_runners):
    with pytest.raises(ValueError, match="num_runners must be an int >= 1"):
        RunnerContext.create(seed=0, index=0, num_runners=num_runners)


def test_numpy_ints_are_whole_numbers():
    ctx = RunnerContext.create(
        seed=np.int64(3), index=np.int32(1), generation=np.uint8(0), num_runners=np.int64(2)
    )
    assert (ctx.seed, ctx.index, ctx.generation, ctx.num_runners) == (3 + 2**20, 1, 0, 2)
    assert all(type(v) is int for v in (ctx.seed, ctx.index, ctx.generation, ctx.num_runners))
    assert runner_seed(np.int64(3), 1, np.int64(2)) == runner_seed(3, 1, 2)


@pytest.mark.parametrize("seed", [1.5, -2, True, "0"])
def test_a_group_refuses_a_bad_seed_before_any_actor_starts(seed):
    # Checked before Ray is touched: no actor (nor a Ray instance) is started for it.
    with pytest.raises(ValueError, match="seed must be None or an int >= 0"):
        RunnerGroup(cartpole, random_policy, num_runners=1, seed=seed, num_cpus_per_runner=0.5)


# ------------------------------------------------------------------- read arguments
@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("tiny")
    with DatasetWriter(path) as writer:
        writer.write(
            SingleAgentEpisode(
                "a",
                observations=[0.0, 1.0, 2.0, 3.0],
                actions=[0, 1, 0],
                rewards=[1.0, 1.0, 1.0],
                len_lookback_buffer=0,
            )
        )
    return str(path)


@pytest.mark.parametrize(
    ("read", "kwargs", "names"),
    [
        pytest.param(read_steps, {"n_step": 3, "gamma": 0.5}, ["read_transitions"], id="steps"),
        pytest.param(read_steps, {"kind": "episodes"}, ["'kind'"], id="steps-kind"),
        pytest.param(read_transitions, {"n_steps": 3}, ["'n_steps'"], id="transitions-typo"),
        pytest.param(read_episodes, {"shuffle": True}, ["'shuffle'"], id="episodes"),
    ],
)
def test_unknown_read_arguments_are_refused_not_ignored(tiny_path, read, kwargs, names):
    # Refused before Ray Data plans anything: no Ray instance needed.
    with pytest.raises(TypeError, match="unknown arguments") as err:
        read(tiny_path, **kwargs)
    for name in [*names, read.__name__, "override_num_blocks"]:
        assert name in str(err.value)


def test_write_episodes_names_the_dataset_it_needs(tmp_path):
    with pytest.raises(TypeError, match=r"ray\.data\.Dataset.*got list"):
        write_episodes([1, 2], tmp_path / "out")


# ------------------------------------------------------------------- copying a gathered chunk
class InfoEnv(gym.Env):
    """Infos that carry numpy arrays (they travel inside the sample's pickle stream)."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {"arr": np.zeros(2)}

    def step(self, action):
        return np.zeros(2, np.float32), 1.0, False, False, {"arr": np.ones(2)}


def info_env(ctx: RunnerContext) -> gym.vector.VectorEnv:
    return gym.vector.SyncVectorEnv([InfoEnv])


def zero_policy(env: gym.vector.VectorEnv, ctx: RunnerContext):
    return lambda obs: (np.zeros(len(obs), np.int64), {})


def test_the_documented_copy_of_a_shared_memory_chunk_is_writeable_and_frees_the_segment():
    recommended = "copy.deepcopy(chunk)"
    assert recommended in " ".join((sample_module.__doc__ or "").split())
    assert recommended in DOCS.read_text()

    actor = RunnerActor(info_env, zero_policy, RunnerContext.create(seed=0, index=0))
    slot = SlotSegments(hints={"sample": 1 << 16})
    try:
        request, lease = slot.request()
        reply = pickle.loads(pickle.dumps(actor.sample(4, request=0, shared=request)))
        assert reply.stream is not None  # it came through the segment
        sample = slot.receive(reply, lease)
        chunk = sample.episodes[0]
        assert not chunk.get_observations(0).flags.writeable  # a view of the segment
        assert chunk.get_infos(1)["arr"].flags.writeable  # infos are split out as copies
        edited = copy.deepcopy(chunk)
        del chunk, sample, reply
        gc.collect()
        assert not lease.leased  # the copy holds nothing of the segment
        edited.set_rewards(new_data=5.0, at_indices=0)
        edited.get_infos(1)["arr"][0] = 7.0
        edited.get_observations(0)[0] = 3.0
        assert edited.get_rewards()[0] == 5.0 and edited.get_infos(1)["arr"][0] == 7.0
    finally:
        slot.close()


# ------------------------------------------------------------------- Ray Data missing
@pytest.mark.parametrize("blocked", ["pyarrow", "ray.data"])
def test_ray_core_without_ray_data_gets_the_install_hint(blocked):
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "try:\n    import episodes.distributed\nexcept ImportError as err:\n    print(err)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'episodes[ray]'" in proc.stdout


# ------------------------------------------------------------------- column collisions
def colliding(first: str) -> SingleAgentEpisode:
    outputs = {
        "h": [(np.float32(1.0), np.float32(2.0))],  # nested: extra.h.0, extra.h.1
        "h.0": [np.float32(99.0)],  # flat: extra.h.0 as well
    }
    ordered = {key: outputs[key] for key in (first, *(k for k in outputs if k != first))}
    return SingleAgentEpisode(
        "a",
        observations=[0.0, 1.0],
        actions=[0],
        rewards=[1.0],
        extra_model_outputs=ordered,
        len_lookback_buffer=0,
    ).to_numpy()


@pytest.mark.parametrize("first", ["h", "h.0"])
@pytest.mark.parametrize(
    "columns",
    [pytest.param(step_columns, id="steps"), pytest.param(lambda ep: nstep_columns(ep, 2, 0.9))],
)
def test_extra_outputs_that_would_share_a_column_are_refused(first, columns):
    with pytest.raises(ValueError, match=r"'h'.*'h\.0'|'h\.0'.*'h'") as err:
        columns(colliding(first))
    assert "'extra.h.0'" in str(err.value)


# ------------------------------------------------------------------- runner totals
def local_sample(index: int, num_steps: int) -> tuple[RunnerSample, dict]:
    ctx = RunnerContext.create(seed=3, index=index, num_runners=2, config={"num_envs": 2})
    env = cartpole(ctx)
    runner = EnvRunner(env, weighted_policy(env, ctx), seed=ctx.seed)
    runner.sample(num_steps)
    runner.get_metrics()  # resets the per-sample counts, not the lifetime totals
    chunks = runner.sample(num_steps)
    metrics = runner.get_metrics()
    return RunnerSample(index, 0, 0, -1, env.num_envs, chunks, metrics), metrics


def test_merged_metrics_sum_the_runners_lifetime_totals():
    (a, ma), (b, mb) = local_sample(0, 30), local_sample(1, 50)
    for merged in (merge_runner_metrics([ma, mb]), GroupSample([a, b]).metrics):
        assert set(ma) <= set(merged)  # nothing a runner reports is dropped
        assert merged["total_env_steps"] == ma["total_env_steps"] + mb["total_env_steps"]
        assert merged["total_env_steps"] > merged["num_env_steps"]  # two samples each
        assert merged["total_episodes"] == ma["total_episodes"] + mb["total_episodes"]
    assert "total_env_steps" not in merge_runner_metrics([{"num_env_steps": 4}])


def test_a_groups_samples_carry_totals_its_running_metrics_leave_out(ray_local):
    with RunnerGroup(
        cartpole,
        random_policy,
        num_runners=1,
        seed=0,
        num_cpus_per_runner=0.5,
        config={"num_envs": 2},
    ) as group:
        first, second = (group.sample(5).metrics for _ in range(2))
        assert first["total_env_steps"] == first["num_env_steps"] > 0
        # The runner's lifetime count: both samples' steps.
        assert second["total_env_steps"] == first["num_env_steps"] + second["num_env_steps"]
        # Merged over two samples of one runner, lifetime totals would count 10 twice.
        assert "total_env_steps" not in group.get_metrics()
