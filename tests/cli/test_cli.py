from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def run(*args, check_rc=None):
    proc = subprocess.run(
        [sys.executable, "-m", "episodes", *args], capture_output=True, text=True, timeout=300
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    if check_rc is not None:
        assert proc.returncode == check_rc, (proc.stdout, proc.stderr)
    return proc


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "ds"
    proc = run(
        "record",
        "CartPole-v1",
        "--steps",
        "300",
        "--out",
        str(out),
        "--num-envs",
        "3",
        "--seed",
        "1",
        check_rc=0,
    )
    assert "recorded 300 steps" in proc.stdout
    return out


def test_help_everywhere():
    for args in ([], ["record"], ["info"], ["validate"], ["plot"]):
        proc = run(*args, "--help", check_rc=0)
        assert "usage: episodes" in proc.stdout


def test_no_command_is_a_usage_error():
    proc = run(check_rc=2)
    assert "usage" in proc.stderr


def test_record_and_info(recorded):
    proc = run("info", str(recorded), check_rc=0)
    assert "steps:    300" in proc.stdout
    assert "Discrete(2)" in proc.stdout and "return:" in proc.stdout
    data = json.loads(run("info", str(recorded), "--json", check_rc=0).stdout)
    assert data["steps"] == 300 and sum(data["lengths"]) == 300
    assert data["episodes"] == data["chunks"] >= 3


def test_record_is_deterministic_with_a_seed(recorded, tmp_path):
    out = tmp_path / "again"
    run(
        "record",
        "CartPole-v1",
        "--steps",
        "300",
        "--out",
        str(out),
        "--num-envs",
        "3",
        "--seed",
        "1",
        check_rc=0,
    )
    a = json.loads(run("info", str(recorded), "--json").stdout)
    b = json.loads(run("info", str(out), "--json").stdout)
    assert a["returns"] == b["returns"] and a["lengths"] == b["lengths"]


def test_record_appends(recorded, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(recorded, copy)
    run("record", "CartPole-v1", "--steps", "50", "--out", str(copy), check_rc=0)
    assert json.loads(run("info", str(copy), "--json").stdout)["steps"] == 350


@pytest.fixture(scope="module")
def recorded_v1(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "ds1"
    run(
        "record",
        "CartPole-v1",
        "--steps",
        "300",
        "--out",
        str(out),
        "--num-envs",
        "3",
        "--seed",
        "1",
        "--format",
        "1",
        check_rc=0,
    )
    return out


def test_validate_ok_and_bad(recorded_v1, tmp_path):
    import shutil

    assert "ok:" in run("validate", str(recorded_v1), check_rc=0).stdout
    bad = tmp_path / "bad"
    shutil.copytree(recorded_v1, bad)
    chunks = sorted((bad / "chunks").iterdir())
    (chunks[0] / "obs.0.npy").write_bytes(b"\x93NUMPY garbage")
    npy = chunks[1] / "rew.0.npy"
    data = bytearray(npy.read_bytes())
    data[-1] ^= 0x55
    npy.write_bytes(bytes(data))
    proc = run("validate", str(bad), check_rc=1)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("BAD ")]
    assert len(lines) == 2
    assert chunks[0].name in lines[0] and "obs.0.npy" in lines[0]
    assert chunks[1].name in lines[1] and "CRC-32" in lines[1]


def test_plot(recorded, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "plot.png"
    run("plot", str(recorded), "--out", str(out), check_rc=0)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib(recorded, tmp_path):
    blocker = tmp_path / "block"
    blocker.mkdir()
    python_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    (blocker / "matplotlib.py").write_text("raise ImportError('blocked for the test')\n")
    proc = subprocess.run(
        [sys.executable, "-m", "episodes", "plot", str(recorded), "--out", str(tmp_path / "x.png")],
        capture_output=True,
        text=True,
        # The blocker first, then whatever the suite's own PYTHONPATH holds.
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), *python_path])},
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "episodes: error: plotting needs matplotlib: pip install 'episodes[plot]' (or pip "
        "install matplotlib) (blocked for the test)"
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        (["info", "/nonexistent/ds"], "does not exist"),
        (["validate", "/nonexistent/ds"], "does not exist"),
        (["plot", "/nonexistent/ds", "--out", "/tmp/x.png"], "does not exist"),
        (["record", "NoSuchEnv-v0", "--steps", "5", "--out", "/tmp/never"], "cannot create env"),
        (["record", "CartPole-v1", "--steps", "0", "--out", "/tmp/never"], "must be >= 1"),
    ],
)
def test_errors_are_one_line(args, message):
    if args[0] == "plot":
        pytest.importorskip("matplotlib")  # without it, plot says so first
    proc = run(*args, check_rc=1)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("episodes: error:") and message in lines[0]


def test_info_on_a_foreign_or_broken_dir(tmp_path):
    (tmp_path / "format.json").write_text('{"format": "episodes-dataset", "version": 3}')
    proc = run("info", str(tmp_path), check_rc=1)
    assert "version 3 is not supported" in proc.stderr
    (tmp_path / "format.json").write_text("{oops")
    proc = run("validate", str(tmp_path), check_rc=1)
    assert "not valid JSON" in proc.stderr


def test_unknown_flag_is_usage_error():
    proc = run("info", "--bogus", check_rc=2)
    assert "unrecognized arguments" in proc.stderr or "required" in proc.stderr


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["info", "missing"], 1),
        (["info"], 2),
        (["info", "--bogus", "x"], 2),
        (["no-such-command"], 2),
        (["info", "--help"], 0),
    ],
    ids=["error", "missing argument", "unknown flag", "unknown command", "help"],
)
def test_main_returns_the_exit_code(tmp_path, capsys, args, code):
    # `episodes` is declared as episodes.cli:main; main returns the code, usage errors included.
    from episodes.cli import main

    args = [str(tmp_path / a) if a == "missing" else a for a in args]
    assert main(args) == code


def test_validate_counts_problems_and_pieces(tmp_path):
    from episodes import SingleAgentEpisode
    from episodes.io import DatasetWriter

    ep = SingleAgentEpisode(
        "x", observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )
    with DatasetWriter(tmp_path / "ds") as writer:
        writer.write_many([ep, ep])  # one episode, its step stored twice
    proc = run("validate", str(tmp_path / "ds"), check_rc=1)
    assert proc.stderr.splitlines()[-1] == "1 problem in 2 episode pieces"


def test_record_writes_v2_with_metadata(recorded):
    files = sorted(p.name.rsplit(".", 1)[-1] for p in recorded.rglob("*") if p.is_file())
    assert files == ["arrow", "json", "jsonl"]
    out = run("info", str(recorded), check_rc=0).stdout
    assert "format version 2" in out and "env_id:   CartPole-v1" in out
    assert "policy:   random" in out and "seeds:    [1]" in out
    data = json.loads(run("info", str(recorded), "--json", check_rc=0).stdout)
    assert data["metadata"]["env_spec"]["id"] == "CartPole-v1" and data["shards"] == 1


def test_validate_v2_ok_and_bad(recorded, tmp_path):
    import shutil

    assert "ok:" in run("validate", str(recorded), check_rc=0).stdout
    bad = tmp_path / "bad"
    shutil.copytree(recorded, bad)
    (data,) = (bad / "shards").glob("*.arrow")
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    data.write_bytes(bytes(raw))
    proc = run("validate", str(bad), check_rc=1)
    assert "CRC-32 mismatch" in proc.stderr


def test_migrate_merge_split_filter(recorded, recorded_v1, tmp_path):
    v2 = tmp_path / "v2"
    run("migrate", str(recorded_v1), str(v2), check_rc=0)
    a = json.loads(run("info", str(recorded_v1), "--json", check_rc=0).stdout)
    b = json.loads(run("info", str(v2), "--json", check_rc=0).stdout)
    assert (b["version"], b["steps"], b["returns"]) == (2, a["steps"], a["returns"])
    both = tmp_path / "both"
    run("merge", str(recorded), str(v2), "--out", str(both), check_rc=0)
    assert json.loads(run("info", str(both), "--json").stdout)["steps"] == 600
    run(
        "split",
        str(both),
        "--train",
        str(tmp_path / "tr"),
        "--val",
        str(tmp_path / "va"),
        "--fraction",
        "0.3",
        check_rc=0,
    )
    tr = json.loads(run("info", str(tmp_path / "tr"), "--json").stdout)
    va = json.loads(run("info", str(tmp_path / "va"), "--json").stdout)
    assert tr["steps"] + va["steps"] == 600 and va["episodes"] > 0 and tr["episodes"] > 0
    run("filter", str(both), "--out", str(tmp_path / "long"), "--min-length", "20", check_rc=0)
    long = json.loads(run("info", str(tmp_path / "long"), "--json").stdout)
    assert long["lengths"] and min(long["lengths"]) >= 20
    run("filter", str(both), "--out", str(tmp_path / "env0"), "--custom", "env_index=0", check_rc=0)
    env0 = json.loads(run("info", str(tmp_path / "env0"), "--json").stdout)
    assert 0 < env0["steps"] < 600 and env0["steps"] % 100 == 0  # one env's 100 steps per source
    proc = run("filter", str(both), "--out", str(tmp_path / "x"), "--custom", "oops", check_rc=1)
    assert "KEY=VALUE" in proc.stderr
    proc = run("merge", str(recorded), "--out", str(both), check_rc=1)
    assert "not empty" in proc.stderr


def _main(*args):
    from episodes.cli import main

    return main(list(args))


_RECORD = "record CartPole-v1 --steps 5 --out {tmp}/a"
BAD_ARGUMENTS = {
    # Each a user error: exit code 1 and one "episodes: error:" line, no traceback.
    "shard_mb_nan": f"{_RECORD} --shard-mb nan",
    "shard_mb_inf": f"{_RECORD} --shard-mb inf",
    "shard_mb_below_a_byte": f"{_RECORD} --shard-mb 1e-9",
    "negative_seed": f"{_RECORD} --seed -1",
    "migrate_shard_mb_nan": "migrate {ds} {tmp}/m --shard-mb nan",
    "split_into_one_directory": "split {ds} --train {tmp}/x --val {tmp}/x",
    "filter_min_return_nan": "filter {ds} --out {tmp}/f --min-return nan",
    "record_another_env_into_a_dataset": "record Pendulum-v1 --steps 5 --out {ds_copy}",
    # v1 datasets have no env id: their spaces were not compared, Pendulum went in.
    "record_another_env_into_a_v1_dataset": (
        "record Pendulum-v1 --steps 5 --out {v1_copy} --format 1"
    ),
    # The train split was renamed into place before the validation split failed.
    "split_one_inside_the_other": "split {ds} --train {tmp}/n/t --val {tmp}/n",
    "split_the_other_inside_one": "split {ds} --train {tmp}/n --val {tmp}/n/v",
    # It wrote a new dataset into the source's folder.
    "merge_into_its_source": "merge {ds_copy} --out {ds_copy}/sub",
    "migrate_into_its_source": "migrate {ds_copy} {ds_copy}/sub",
    "split_into_its_source": "split {ds_copy} --train {ds_copy}/train --val {tmp}/val",
    "split_around_its_source": "split {ds_copy} --train {tmp}/t --val {tmp}",
    # matplotlib wrote NAME.png and the command said it wrote NAME.
    "plot_without_an_extension": "plot {ds} --out {tmp}/figure",
    # minari's own parser raised a TypeError (a traceback) after making folders.
    "export_an_id_without_a_version": (
        "export {ds} --to minari --dataset-id t/cartpole --root {tmp}/m"
    ),
    # Minari refused these only after every episode was read and converted.
    "export_an_id_with_a_one_letter_namespace": (
        "export {ds} --to minari --dataset-id t/x-v0 --root {tmp}/m"
    ),
    "export_an_id_with_a_dot": "export {ds} --to minari --dataset-id a.b-v0 --root {tmp}/m",
    "export_an_id_leaving_the_root": (
        "export {ds} --to minari --dataset-id ../../out-v0 --root {tmp}/m"
    ),
    # OverflowError: 1e308 MB is a finite number whose byte count is not.
    "shard_mb_overflowing": f"{_RECORD} --shard-mb 1e308",
    "shard_mb_above_a_tebibyte": f"{_RECORD} --shard-mb 1048577",
    "migrate_shard_mb_overflowing": "migrate {ds} {tmp}/m --shard-mb 1e308",
    # Envs that would take no step (and, far above, envs by the billion) were built.
    "num_envs_above_steps": "record CartPole-v1 --steps 5 --num-envs 6 --out {tmp}/a",
    # A migrated v1 dataset has no env id: Pendulum steps went into CartPole's dataset.
    "record_another_env_into_a_v2_dataset_without_env_id": (
        "record Pendulum-v1 --steps 5 --out {migrated_copy}"
    ),
    # The runner failed with a TypeError traceback (Graph: after making the dataset).
    **{
        f"record_{kind}_{where}": f"record EpisodesCli{kind}{where.title()}-v0 --steps 5 "
        "--out {tmp}/new/a"
        for kind, where in [
            ("Text", "observation"),
            ("Sequence", "observation"),
            ("Graph", "observation"),
            ("OneOf", "observation"),
            ("Text", "nested"),
            ("Text", "action"),
        ]
    },
    # merge wrote CartPole and Pendulum episodes under CartPole's metadata.
    "merge_two_envs": "merge {ds} {pendulum} --out {tmp}/m",
    "merge_another_env_into_a_dataset_without_env_id": "merge {v1_copy} {pendulum} --out {tmp}/m",
    "merge_a_dataset_without_env_id_into_another_env": "merge {pendulum} {v1_copy} --out {tmp}/m",
    # NaN equals nothing: the filter kept no episode, silently.
    **{
        f"filter_custom_{name}": f"filter {{ds}} --out {{tmp}}/f --custom env_index={value}"
        for name, value in [
            ("nan", "NaN"),
            ("nested_nan", "[0,NaN]"),
        ]
    },
    # matplotlib's pgf backend raised a RuntimeError traceback without TeX.
    "plot_pgf_without_tex": "plot {ds} --out {tmp}/figure.pgf",
}


@pytest.fixture(scope="module")
def recorded_pendulum(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "pendulum"
    run("record", "Pendulum-v1", "--steps", "20", "--out", str(out), check_rc=0)
    return out


@pytest.fixture(scope="module")
def migrated(recorded_v1, tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "migrated"
    run("migrate", str(recorded_v1), str(out), check_rc=0)
    assert json.loads(run("info", str(out), "--json").stdout)["metadata"]["env_id"] is None
    return out


@pytest.mark.parametrize("args", BAD_ARGUMENTS.values(), ids=BAD_ARGUMENTS.keys())
def test_bad_arguments_are_one_error_line(
    recorded, recorded_v1, recorded_pendulum, migrated, space_envs, tmp_path, capsys, args
):
    import shutil

    if "plot" in args:
        pytest.importorskip("matplotlib")
        if args.endswith(".pgf") and shutil.which("xelatex"):
            pytest.skip("TeX is installed: the pgf figure is written")
    if "minari" in args:
        pytest.importorskip("minari")
    shutil.copytree(recorded, tmp_path / "copy")
    shutil.copytree(recorded_v1, tmp_path / "v1")
    shutil.copytree(migrated, tmp_path / "migrated")
    where = {
        "tmp": tmp_path,
        "ds": recorded,
        "ds_copy": tmp_path / "copy",
        "v1_copy": tmp_path / "v1",
        "migrated_copy": tmp_path / "migrated",
        "pendulum": recorded_pendulum,
    }
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert _main(*(a.format(**where) for a in args.split())) == 1
    err = capsys.readouterr().err
    assert err.startswith("episodes: error:") and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing made or changed


def test_copies_of_a_damaged_dataset_are_refused(recorded, tmp_path):
    # They read without checksums and wrote the damaged value with fresh ones: validate then
    # called the copies OK.
    import shutil

    import numpy as np

    from episodes.io import read_episodes

    src = tmp_path / "src"
    shutil.copytree(recorded, src)
    episode = next(iter(read_episodes(src, numpy=True)))
    needle = np.ascontiguousarray(episode.get_observations()[3], np.float32).tobytes()
    (shard,) = sorted((src / "shards").glob("*.arrow"))[:1]
    data = bytearray(shard.read_bytes())
    data[data.find(needle) + 2] ^= 0x40
    shard.write_bytes(bytes(data))
    run("validate", str(src), check_rc=1)
    for args in (
        ["filter", str(src), "--out", str(tmp_path / "f")],
        ["migrate", str(src), str(tmp_path / "m")],
        ["merge", str(src), "--out", str(tmp_path / "g")],
        ["split", str(src), "--train", str(tmp_path / "t"), "--val", str(tmp_path / "v")],
    ):
        proc = run(*args)
        assert proc.returncode == 1 and "CRC" in proc.stderr, (args, proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_record_stores_the_single_env_spec(recorded):
    import gymnasium as gym

    from episodes.io import dataset_info

    spec = gym.envs.registration.EnvSpec.from_json(
        json.dumps(dataset_info(recorded).metadata["env_spec"])
    )
    assert spec.kwargs == {}
    gym.make(spec).close()  # the stored spec rebuilds one env


# --------------------------------------------------------------- envs registered for the tests
def _toy_env(observation_space, action_space=None, fail=None):
    import gymnasium as gym
    from gymnasium import spaces

    class Toy(gym.Env):
        def __init__(self):
            self.observation_space = observation_space
            self.action_space = action_space or spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return self.observation_space.sample(), {}

        def step(self, action):
            if fail is not None and fail["now"]:
                raise ValueError("the env broke down")
            return self.observation_space.sample(), 1.0, False, False, {}

    return Toy


FAILING = {"now": True}  # EpisodesCliFailing-v0 raises in step() while this says so


@pytest.fixture(scope="module")
def space_envs():
    import gymnasium as gym
    from gymnasium import spaces

    box = spaces.Box(0.0, 1.0, (2,))
    envs = {
        "EpisodesCliTextObservation-v0": _toy_env(spaces.Text(5)),
        "EpisodesCliSequenceObservation-v0": _toy_env(spaces.Sequence(spaces.Discrete(3))),
        "EpisodesCliGraphObservation-v0": _toy_env(spaces.Graph(box, spaces.Discrete(2))),
        "EpisodesCliOneOfObservation-v0": _toy_env(spaces.OneOf([spaces.Discrete(2), box])),
        "EpisodesCliTextNested-v0": _toy_env(spaces.Dict(a=box, b=spaces.Tuple([spaces.Text(3)]))),
        "EpisodesCliTextAction-v0": _toy_env(box, spaces.Text(3)),
        "EpisodesCliFailing-v0": _toy_env(box, fail=FAILING),
    }
    for env_id, entry_point in envs.items():
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=entry_point, max_episode_steps=4)
    return envs


# ------------------------------------------------------------------ record: refusals, cleanup
@pytest.mark.parametrize(
    ("steps", "num_envs"),
    [("5", "6"), ("100000", "65537"), ("2000000000", "1000000000")],
    ids=["more_envs_than_steps", "above_the_cap", "a_billion"],
)
def test_num_envs_is_refused_before_any_env_is_made(tmp_path, steps, num_envs):
    # A billion envs were built one by one until the memory ran out ("cannot create env").
    import resource

    def limit():  # the old code must fail here, not take the machine down
        resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))

    args = ["record", "CartPole-v1", "--steps", steps, "--num-envs", num_envs]
    proc = subprocess.run(
        [sys.executable, "-m", "episodes", *args, "--out", str(tmp_path / "a")],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines() == [
        "episodes: error: --num-envs must be <= --steps (every env steps) and <= 65536"
    ]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ["--out", "{tmp}/new/ds"],
        ["--out", "{tmp}/new/ds", "--format", "1"],
        ["--out", "{tmp}/empty"],
        ["--out", "{tmp}/empty", "--format", "1"],
    ],
    ids=["v2_new", "v1_new", "v2_empty_dir", "v1_empty_dir"],
)
def test_a_record_failing_before_any_episode_leaves_nothing(
    space_envs, tmp_path, capsys, monkeypatch, args
):
    # The failed record left a manifest naming its env: the directory was "not empty" for the
    # copies, and `record OTHER_ENV` was refused for a dataset holding no episode.
    monkeypatch.setitem(FAILING, "now", True)
    (tmp_path / "empty").mkdir()
    args = [a.format(tmp=tmp_path) for a in args]
    assert _main("record", "EpisodesCliFailing-v0", "--steps", "5", *args) == 1
    assert capsys.readouterr().err == (
        "episodes: error: EpisodesCliFailing-v0 failed after 0 recorded steps (ValueError: the "
        "env broke down); this record is taken back\n"
    )
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["empty"]
    assert _main("record", "CartPole-v1", "--steps", "5", *args) == 0


@pytest.mark.parametrize("fmt", ["2", "1"])
def test_a_record_failing_while_appending_leaves_the_dataset(
    space_envs, tmp_path, capsys, monkeypatch, fmt
):
    out = str(tmp_path / "ds")
    monkeypatch.setitem(FAILING, "now", False)
    assert (
        _main("record", "EpisodesCliFailing-v0", "--steps", "8", "--out", out, "--format", fmt) == 0
    )
    before = json.loads(run("info", out, "--json", check_rc=0).stdout)
    monkeypatch.setitem(FAILING, "now", True)
    assert (
        _main("record", "EpisodesCliFailing-v0", "--steps", "5", "--out", out, "--format", fmt) == 1
    )
    assert json.loads(run("info", out, "--json", check_rc=0).stdout) == before


APPENDS = {
    # The metadata stores the registered id; the raw "module:Env-v0" argument was compared.
    "module_prefixed_id": ("gymnasium.envs.classic_control:CartPole-v1", "ds_copy", 300),
    # Datasets of no episodes took no other env.
    "v2_of_no_episodes": ("CartPole-v1", "empty_v2", 0),
    "v1_of_no_episodes": ("CartPole-v1", "empty_v1", 0),
    # A v2 dataset without an env id takes the env of its spaces.
    "v2_without_env_id_same_spaces": ("CartPole-v1", "migrated_copy", 300),
}


@pytest.mark.parametrize(("env_id", "into", "steps"), APPENDS.values(), ids=APPENDS.keys())
def test_record_appends_where_it_may(recorded, migrated, tmp_path, env_id, into, steps):
    import shutil

    from episodes.io import DatasetMetadata, DatasetWriter, EpisodeWriter

    shutil.copytree(recorded, tmp_path / "ds_copy")
    shutil.copytree(migrated, tmp_path / "migrated_copy")
    DatasetWriter(tmp_path / "empty_v2", metadata=DatasetMetadata(env_id="CartPole-v1")).close()
    EpisodeWriter(tmp_path / "empty_v1").close()
    fmt = "1" if into == "empty_v1" else "2"
    out = str(tmp_path / into)
    run("record", env_id, "--steps", "10", "--out", out, "--format", fmt, check_rc=0)
    assert json.loads(run("info", out, "--json", check_rc=0).stdout)["steps"] == steps + 10


# ------------------------------------------------------------------------------ copies
@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002], ids=oct)
@pytest.mark.parametrize("tool", ["migrate", "merge", "split", "filter"])
def test_copies_get_the_mode_of_a_new_directory(recorded, tmp_path, umask, tool):
    # They were tempfile.mkdtemp's 0o700, renamed into place: unreadable to the group.
    import os
    import stat

    args = {
        "migrate": ["migrate", str(recorded), "{tmp}/out"],
        "merge": ["merge", str(recorded), "--out", "{tmp}/out"],
        "split": ["split", str(recorded), "--train", "{tmp}/out", "--val", "{tmp}/val"],
        "filter": ["filter", str(recorded), "--out", "{tmp}/out"],
    }[tool]
    old = os.umask(umask)
    try:
        assert _main(*(a.format(tmp=tmp_path) for a in args)) == 0
    finally:
        os.umask(old)
    made = sorted(p for p in tmp_path.iterdir())
    assert made and all(stat.S_IMODE(p.stat().st_mode) == 0o777 & ~umask for p in made)


CUSTOM = {
    # JSON values: true is no number, "0" no number; 0 and 0.0 the same number.
    "int": ("env_index=0", [0]),
    "float": ("env_index=1.0", [1]),
    "true": ("env_index=true", []),
    "false": ("env_index=false", []),
    "string": ('env_index="0"', []),
    "text": ("env_index=zero", []),
    "list": ("env_index=[0]", []),
    # Infinity is a value custom_data holds (and equals): refused once, for a false reason.
    "infinity": ("env_index=Infinity", []),
    "minus_infinity": ("env_index=-Infinity", []),
    "overflowing": ("env_index=1e999", []),
}


@pytest.mark.parametrize(("custom", "kept"), CUSTOM.values(), ids=CUSTOM.keys())
def test_filter_custom_compares_json_values(recorded, tmp_path, custom, kept):
    # --custom env_index=true kept env 1's episodes (True == 1), false env 0's.
    from episodes.io import read_episodes

    out = tmp_path / "out"
    run("filter", str(recorded), "--out", str(out), "--custom", custom, check_rc=0)
    assert sorted({e.custom_data["env_index"] for e in read_episodes(out)}) == kept


FILTER_VALUES = {
    "bool_is_no_int": ({"v": 1}, {"v": True}, 0),
    "int_is_no_bool": ({"v": True}, {"v": 1}, 0),
    "bool": ({"v": True}, {"v": True}, 1),
    "int_equals_float": ({"v": 2}, {"v": 2.0}, 1),
    "nested_bool": ({"v": [1, {"w": 0}]}, {"v": [1, {"w": False}]}, 0),
    "nested": ({"v": [1, {"w": 0}]}, {"v": [1.0, {"w": 0}]}, 1),
    "tuple_as_list": ({"v": (1, "a")}, {"v": [1, "a"]}, 1),
    "none": ({"v": None}, {"v": 0}, 0),
    "infinity": ({"v": float("inf")}, {"v": float("inf")}, 1),
}


@pytest.mark.parametrize(("stored", "wanted", "kept"), FILTER_VALUES.values(), ids=FILTER_VALUES)
def test_filter_dataset_custom_data_compares_json_values(tmp_path, stored, wanted, kept):
    from episodes import SingleAgentEpisode
    from episodes.io import DatasetWriter, filter_dataset

    episode = SingleAgentEpisode("x", observations=[0])
    episode.custom_data.update(stored)
    with DatasetWriter(tmp_path / "src") as writer:
        writer.write(episode)
    assert filter_dataset(tmp_path / "src", tmp_path / "out", custom_data=wanted) == kept


def test_filter_dataset_refuses_a_nan_custom_value(tmp_path):
    from episodes import SingleAgentEpisode
    from episodes.io import DatasetWriter, filter_dataset

    with DatasetWriter(tmp_path / "src") as writer:
        writer.write(SingleAgentEpisode("x", observations=[0]))
    with pytest.raises(ValueError, match="NaN"):
        filter_dataset(tmp_path / "src", tmp_path / "out", custom_data={"v": [float("nan")]})
    assert not (tmp_path / "out").exists()


def test_merge_compares_env_ids_only_for_its_own_metadata(tmp_path):
    # Given metadata describes the result: env ids may differ (the spaces may not).
    from episodes import SingleAgentEpisode
    from episodes.io import DatasetError, DatasetMetadata, DatasetWriter, merge

    for name in ("a", "b"):
        meta = DatasetMetadata(env_id=f"Env{name.upper()}-v0")
        with DatasetWriter(tmp_path / name, metadata=meta) as writer:
            writer.write(SingleAgentEpisode(name, observations=[0]))
    sources = [tmp_path / "a", tmp_path / "b"]
    with pytest.raises(DatasetError, match="env ids EnvA-v0 and EnvB-v0"):
        merge(sources, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert merge(sources, tmp_path / "out", metadata=DatasetMetadata(env_id="Both-v0")) == 2
