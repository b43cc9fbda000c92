"""A numpy or JAX user's install: everything but the torch paths works where torch is missing.

Each case runs a short script in a subprocess whose import system refuses torch (and, where
named, pyarrow and ray) as an uninstalled package would: ``ModuleNotFoundError`` with the
module's name. Array-likes stand for JAX arrays: ``__array__``, ``shape``, ``dtype`` and the
scalar conversions, no numpy class.
"""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests._torch_blocker import run_refusing

ROOT = Path(__file__).resolve().parents[1]

ARRAY_LIKE = '''
import numpy as np
class ArrayLike:
    """What a jax.Array offers numpy: no ndarray, no hash."""
    __hash__ = None
    def __init__(self, a): self._a = np.asarray(a)
    shape = property(lambda s: s._a.shape)
    dtype = property(lambda s: s._a.dtype)
    ndim = property(lambda s: s._a.ndim)
    size = property(lambda s: s._a.size)
    def __array__(self, dtype=None, copy=None):
        a = self._a if dtype is None else self._a.astype(dtype)
        return a.copy() if copy else a
    def __len__(self): return len(self._a)
    def __getitem__(self, i): return ArrayLike(self._a[i])
    def __iter__(self): return (ArrayLike(x) for x in self._a)
    def __int__(self): return int(self._a)
    def __float__(self): return float(self._a)
    def __index__(self): return self._a.__index__()
    def __bool__(self): return bool(self._a)
'''


def run_without(code: str, missing: tuple[str, ...] = ("torch",), cwd: Path | None = None):
    """Runs ``code`` where ``missing`` cannot be imported; returns the completed process.

    ``code`` starting with ``ARRAY_LIKE`` has the stand-in class defined before it.
    """
    prelude = ""
    if code.startswith(ARRAY_LIKE):
        prelude, code = ARRAY_LIKE, code[len(ARRAY_LIKE) :]
    return run_refusing(prelude + textwrap.dedent(code), missing, cwd)


def ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_torch_free_packages_import_without_torch():
    out = ok(
        run_without("""
        import importlib, sys
        for name in ["episodes", "episodes.replay", "episodes.io", "episodes.runner",
                     "episodes.testing", "episodes.testing.strategies",
                     "episodes.connectors", "episodes.converter", "episodes.cli"]:
            importlib.import_module(name)
        from episodes.converter import (ColumnKeys, bootstrap_truncated_rewards,
                                        episodes_to_batch, group_by_env, time_major)
        print("torch" in sys.modules)
        """)
    )
    assert out.split() == ["False"]


@pytest.mark.parametrize(
    ("statement", "names"),
    [
        pytest.param("import episodes.rollout", "episodes.rollout", id="rollout"),
        pytest.param(
            "from episodes.io.torch_data import TransitionDataset",
            "episodes.io.torch_data",
            id="torch_data",
        ),
        pytest.param(
            "from episodes.converter import episodes_to_rollout",
            "episodes.converter.episodes_to_rollout",
            id="episodes_to_rollout",
        ),
        pytest.param(
            "import episodes.converter as c; c.Rollout", "episodes.converter.Rollout", id="Rollout"
        ),
    ],
)
def test_torch_paths_say_they_need_torch(statement, names):
    done = run_without(statement)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1
    assert last.startswith("ImportError: ") and f"{names} needs torch" in last, last
    assert "pip install torch" in last


def test_runner_replay_and_flat_batch_give_numpy_without_torch():
    out = ok(
        run_without("""
        import sys
        import gymnasium as gym
        import numpy as np
        from episodes.converter import episodes_to_batch
        from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
        from episodes.runner import EnvRunner

        env = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
        policy = lambda o: (np.zeros(len(o), np.int64), {"vf_preds": np.ones(len(o))})
        chunks = EnvRunner(env, policy, seed=0).sample(30)
        kinds = set()
        for cls in (EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer):
            buf = cls(capacity=1000, seed=0)
            buf.add(list(chunks))
            for kwargs in ({}, {"n_step": 3}, {"batch_length_T": 4}):
                kinds |= {type(v).__name__ for v in buf.sample(4, **kwargs).values()}
            counters = buf.get_counters()
            try:
                buf.sample(4, device="cpu")
            except ImportError as error:
                assert error.name == "torch" and "device=" in str(error), error
            assert buf.get_counters() == counters
        flat = episodes_to_batch(chunks, extra_model_outputs=True)
        kinds |= {type(v).__name__ for v in flat.values()}
        print(sorted(kinds), flat["obs"].shape, "torch" in sys.modules)
        """)
    )
    assert out.split("\n")[0] == "['ndarray'] (60, 4) False"


def test_array_like_outputs_and_env_values_are_recorded_as_numpy():
    out = ok(
        run_without(
            ARRAY_LIKE
            + """
        import gymnasium as gym
        from episodes.replay import EpisodeReplayBuffer
        from episodes.runner import EnvRunner

        class ArrayEnv(gym.vector.VectorEnv):
            # A JAX-style vector env: observations, rewards and flags are array-likes.
            def __init__(self):
                self.num_envs = 2
                self.single_observation_space = gym.spaces.Box(-9, 9, (2,), np.float32)
                self.single_action_space = gym.spaces.Discrete(2)
                self.observation_space = gym.vector.utils.batch_space(
                    self.single_observation_space, 2)
                self.action_space = gym.vector.utils.batch_space(self.single_action_space, 2)
                self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}
            def reset(self, *, seed=None, options=None):
                self.t, self.done = np.zeros(2, np.int64), np.zeros(2, bool)
                return ArrayLike(np.zeros((2, 2), np.float32)), {}
            def step(self, actions):
                a = np.asarray(actions)
                self.t = np.where(self.done, 0, self.t + 1)
                obs = np.stack([self.t, a], 1).astype(np.float32)
                self.done = self.t >= 3
                return (ArrayLike(obs), ArrayLike((self.t * 0.5 + a).astype(np.float32)),
                        ArrayLike(self.done), ArrayLike(np.zeros(2, bool)), {})

        def policy(obs):
            o = np.asarray(obs)
            return ArrayLike(o[:, 0].astype(np.int64) % 2), {"vf": ArrayLike(o[:, 0] / 10)}

        chunk = list(EnvRunner(ArrayEnv(), policy, seed=0).sample(4))[0]
        buf = EpisodeReplayBuffer(capacity=100, seed=0)
        buf.add(chunk)
        batch = buf.sample(8)
        print(type(chunk.get_observations()).__name__, chunk.get_observations().tolist(),
              chunk.get_actions().tolist(), chunk.get_rewards().tolist(),
              chunk.get_extra_model_outputs("vf").tolist() == (np.float32([0, 1, 2]) / 10).tolist(),
              chunk.is_terminated,
              type(batch["rewards"]).__name__)
        """
        )
    )
    assert out.strip() == (
        "ndarray [[0.0, 0.0], [1.0, 0.0], [2.0, 1.0], [3.0, 0.0]] [0, 1, 0] "
        "[0.5, 2.0, 1.5] True True ndarray"
    )


def test_array_like_values_recorded_by_hand_numpy_as_np_asarray():
    out = ok(
        run_without(
            ARRAY_LIKE
            + """
        import gymnasium as gym
        from episodes import SingleAgentEpisode
        from episodes.replay import EpisodeReplayBuffer

        ep = SingleAgentEpisode(observation_space=gym.spaces.Box(-1, 1, (2,), np.float32),
                                action_space=gym.spaces.Discrete(2))
        ep.add_env_reset(ArrayLike(np.zeros(2, np.float32)))
        for t in range(2):
            ep.add_env_step(ArrayLike(np.full(2, 0.5, np.float32)), ArrayLike(np.int64(t)),
                            ArrayLike(np.float32(t + 0.25)), terminated=t == 1,
                            extra_model_outputs={"vf": ArrayLike(np.float32(t))})
        buf = EpisodeReplayBuffer(capacity=10, seed=0)
        buf.add(ep)  # not numpy'd: the buffer reads the array-likes
        ep.to_numpy()
        print(ep.get_actions().tolist(), ep.get_rewards().tolist(), ep.get_return(),
              sorted(buf.get_transitions([0, 1])["rewards"].tolist()))
        """
        )
    )
    assert out.strip() == "[0, 1] [0.25, 1.25] 1.5 [0.25, 1.25]"


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """A v1 and a v2 dataset of two short episodes, written where every dependency is."""
    from episodes import SingleAgentEpisode
    from episodes.io import DatasetWriter, EpisodeWriter

    root = tmp_path_factory.mktemp("notorch")
    for writer, name in ((EpisodeWriter, "v1"), (DatasetWriter, "v2")):
        with writer(root / name) as w:
            for i in range(2):
                w.write(
                    SingleAgentEpisode(
                        f"e{i}",
                        observations=[np.float32([t]) for t in range(4)],
                        actions=[0, 1, 0],
                        rewards=[1.0, 1.0, 1.0],
                        terminated=True,
                        len_lookback_buffer=0,
                    )
                )
    return root


def test_cli_without_torch(datasets):
    out = ok(
        run_without(
            """
        from episodes.cli import main
        codes = [main(["info", "v2"]), main(["validate", "v2"]), main(["info", "v1"]),
                 main(["export", "v2", "--to", "npz", "--out", "x.npz"])]
        import numpy as np, sys
        print("codes", codes, np.load("x.npz")["actions"].tolist(), "torch" in sys.modules)
        """,
            cwd=datasets,
        )
    )
    assert out.strip().splitlines()[-1] == "codes [0, 0, 0, 0] [0, 1, 0, 0, 1, 0] False"


def test_cli_without_pyarrow_names_it_in_one_line(datasets):
    done = run_without(
        """
        from episodes.cli import main
        print("codes", main(["info", "v1"]), main(["info", "v2"]), main(["validate", "v2"]))
        """,
        missing=("torch", "pyarrow", "ray"),
        cwd=datasets,
    )
    assert done.stdout.strip().splitlines()[-1] == "codes 0 1 1", done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert lines == ["episodes: error: this command needs pyarrow: pip install pyarrow"] * 2


def test_cli_help_without_pyarrow():
    done = run_without(
        "import runpy; import sys; sys.argv = ['episodes', '--help'];"
        " runpy.run_module('episodes', run_name='__main__')",
        missing=("torch", "pyarrow", "ray"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "record" in done.stdout and done.stderr == ""


def test_cli_records_format_1_without_pyarrow(tmp_path):
    out = ok(
        run_without(
            """
        import os, sys
        from episodes.cli import main
        args = ["record", "CartPole-v1", "--steps", "6", "--seed", "0", "--format", "1"]
        codes = [main(args + ["--out", "v1"]), main(args + ["--out", "v1"]),  # appended
                 main(["info", "v1"]), main(args[:-2] + ["--out", "v2"])]  # v2: pyarrow
        print("codes", codes, os.path.exists("v2"), "pyarrow" in sys.modules)
        """,
            missing=("torch", "pyarrow", "ray"),
            cwd=tmp_path,
        )
    )
    assert out.strip().splitlines()[-1] == "codes [0, 0, 0, 1] False False"
    assert "\nsteps:    12\n" in out  # both records of 6 steps are in the dataset


def test_minari_export_without_pyarrow_names_pyarrow(datasets):
    pytest.importorskip("minari")
    done = run_without(
        """
        from episodes.cli import main
        print("code", main(["export", "v1", "--to", "minari", "--dataset-id", "me/x-v0",
                            "--root", "minari_root"]))
        """,
        missing=("torch", "pyarrow", "ray"),
        cwd=datasets,
    )
    assert done.stdout.strip().splitlines()[-1] == "code 1", done.stderr[-3000:]
    assert done.stderr.strip().splitlines() == [
        "episodes: error: this command needs pyarrow: pip install pyarrow"
    ]


def _quickstart_block(heading: str) -> str:
    text = (ROOT / "docs" / "quickstart.md").read_text()
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)[0]


def test_quickstart_without_torch_example_runs_without_torch(tmp_path):
    code = _quickstart_block("Without torch (numpy or JAX learners)")
    ok(run_without(code + "\nimport sys\nassert 'torch' not in sys.modules\n", cwd=tmp_path))


def test_array_like_actions_reach_a_numpy_env_as_numpy():
    ok(
        run_without(
            ARRAY_LIKE
            + """
        import gymnasium as gym
        from episodes.runner import EnvRunner
        env = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
        EnvRunner(env, lambda o: (ArrayLike(np.zeros(len(o), np.int64)), {}), seed=0).sample(4)
        """
        )
    )


def test_writer_takes_array_likes_as_replay_does(tmp_path):
    ok(
        run_without(
            ARRAY_LIKE
            + """
        from episodes import SingleAgentEpisode
        from episodes.io import DatasetWriter, load_episode
        ep = SingleAgentEpisode("a")
        ep.add_env_reset(ArrayLike(np.zeros(2, np.float32)))
        ep.add_env_step(ArrayLike(np.ones(2, np.float32)), ArrayLike(np.int64(1)),
                        ArrayLike(np.float32(0.5)), terminated=True)
        with DatasetWriter("d") as w:
            w.write(ep)
        assert load_episode("d", "a", numpy=True).get_actions().tolist() == [1]
        """,
            cwd=tmp_path,
        ),
    )


# (name, the policy's actions for the observations ``o`` of 2 CartPole sub-envs)
ARRAY_LIKE_ACTIONS = [
    ("one array-like", "ArrayLike((o[:, 2] > 0).astype(np.int64))"),
    ("a list of array-like scalars", "[ArrayLike(np.int64(x > 0)) for x in o[:, 2]]"),
]


@pytest.mark.parametrize(
    "actions", [c[1] for c in ARRAY_LIKE_ACTIONS], ids=[c[0] for c in ARRAY_LIKE_ACTIONS]
)
def test_a_numpy_env_is_handed_the_recorded_np_asarray_of_array_like_actions(actions):
    out = ok(
        run_without(
            ARRAY_LIKE
            + f"""
        import gymnasium as gym
        from episodes.runner import EnvRunner

        class Spy(gym.vector.SyncVectorEnv):
            def step(self, actions):
                handed.append(actions)
                return super().step(actions)

        handed, given = [], []
        def policy(o):
            o = np.asarray(o)
            given.append({actions})
            return given[-1], {{}}

        env = Spy([lambda: gym.make("CartPole-v1")] * 2)
        chunks = EnvRunner(env, policy, seed=0, window="vector_steps").sample(5)
        assert {{type(a) for a in handed}} == {{np.ndarray}}, handed
        assert np.stack(handed).tolist() == np.stack([np.asarray(a) for a in given]).tolist()
        for chunk in chunks:
            column = [row[chunk.custom_data["env_index"]] for row in handed]
            assert np.asarray(chunk.get_actions()).tolist() == np.stack(column).tolist()
        print(len(handed))
        """
        )
    )
    assert out.split() == ["5"]


@pytest.mark.parametrize("writer", ["EpisodeWriter", "DatasetWriter"])
def test_writers_store_np_asarray_of_array_likes_and_refuse_object_arrays(writer, tmp_path):
    out = ok(
        run_without(
            ARRAY_LIKE
            + f"""
        from episodes import SingleAgentEpisode
        from episodes.io import UnstorableValueError, load_episode, {writer} as Writer

        ep = SingleAgentEpisode("a", len_lookback_buffer=0,
            observations=[ArrayLike(np.full(2, t, np.float32)) for t in range(3)],
            actions=[ArrayLike(np.int64(t)) for t in range(2)],
            rewards=[ArrayLike(np.float32(t + 0.5)) for t in range(2)],
            extra_model_outputs={{"d": [{{"vf": ArrayLike(np.float64(t)), "n": 1}}
                                       for t in range(2)]}})
        with Writer("d") as w:
            w.write(ep)
        back = load_episode("d", "a", numpy=True)
        numpyd = SingleAgentEpisode.from_state(ep.get_state()).to_numpy()
        for name in ("observations", "actions", "rewards"):
            a, b = getattr(back, "get_" + name)(), getattr(numpyd, "get_" + name)()
            assert a.dtype == b.dtype and a.tolist() == b.tolist(), (name, a, b)
        assert back.get_extra_model_outputs("d")["vf"].tolist() == [0.0, 1.0]
        assert type(ep.get_actions()[0]).__name__ == "ArrayLike"  # the episode is unchanged
        bad = SingleAgentEpisode("b", observations=[ArrayLike([None])] * 2, actions=[0],
                                 rewards=[0.0])
        try:
            with Writer("e") as w:
                w.write(bad)
        except UnstorableValueError as error:
            print(error)
        """,
            cwd=tmp_path,
        )
    )
    assert out.startswith("observations[0]: numpy dtype object cannot be stored"), out


def test_sample_on_a_device_without_torch_names_device():
    done = run_without("""
        from episodes import SingleAgentEpisode
        from episodes.replay import EpisodeReplayBuffer
        buf = EpisodeReplayBuffer(capacity=10)
        buf.add(SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0],
                                   len_lookback_buffer=0))
        buf.sample(1, device="cpu")
        """)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError") and "device" in last and "pip install torch" in last
