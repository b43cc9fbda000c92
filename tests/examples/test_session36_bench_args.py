"""The benchmarks' bad flags are usage errors (exit 2) naming the flag, found before the run.

A device this machine lacks, a window or width the runner refuses, a ``--dir`` that is no
directory, a ``--json`` file that cannot be written once the run is over: each stops in
argparse, so these run in process and take milliseconds. The reference libraries a
benchmark compares against (rsl_rl, ray) are stubbed, installed or not (the project's own
environment lacks them): argparse is reached before anything of theirs is used.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gymnasium")

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
#: The libraries the benchmarks compare against, absent from the project's own environment.
REFERENCES = ("rsl_rl", "tensordict", "ray")


class _Stubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports any module under ``roots`` as an empty package whose every name is a class."""

    def __init__(self, roots: set[str]) -> None:
        self.roots = roots

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name.split(".")[0] not in self.roots:
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: Any) -> ModuleType:
        module = ModuleType(spec.name)
        module.__path__ = []  # a package: its submodules import too
        module.__getattr__ = lambda attr: type(attr, (), {})  # type: ignore[method-assign]
        return module

    def exec_module(self, module: ModuleType) -> None:
        pass


@pytest.fixture
def load(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Loads ``benchmarks/<name>.py``; whatever its import or main changes is put back."""
    for name in list(sys.modules):  # the real ones, if imported, come back after the test
        if name.split(".")[0] in REFERENCES:
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_Stubs(set(REFERENCES)), *sys.meta_path])
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # restored as it was after the test
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    threads, before = torch.get_num_threads(), set(sys.modules)

    def load_benchmark(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(f"_bench36_{name}", BENCHMARKS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look it up there
        spec.loader.exec_module(module)
        return module

    yield load_benchmark
    torch.set_num_threads(threads)
    for name in set(sys.modules) - before:
        if name.split(".")[0] in REFERENCES:
            del sys.modules[name]


def usage_error(
    module: ModuleType,
    argv: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> str:
    """Runs the benchmark's ``main`` on ``argv``, expects exit 2; returns argparse's line."""
    monkeypatch.setattr(sys, "argv", ["benchmark", *argv])
    with pytest.raises(SystemExit) as info:
        module.main()
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


def _devices() -> list[str]:
    bad = ["foo", "cuda:99", "meta"]
    if not torch.cuda.is_available():
        bad += ["cuda", "cuda:0"]
    if not torch.backends.mps.is_available():
        bad.append("mps")
    return bad


@pytest.mark.parametrize("device", _devices())
def test_gpu_collect_refuses_a_device_it_cannot_use(
    device: str, load: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--device", device, "--sizes", "8", "--repeats", "1"]
    line = usage_error(load("gpu_collect"), argv, monkeypatch, capsys)
    assert "argument --device" in line and device in line


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--growth", "--window", "foo"], "--window"),
        (["--growth", "--window", "Transitions"], "--window"),
        (["--quick", "--hidden", "-1"], "--hidden"),
        (["--growth", "--hidden", "-32"], "--hidden"),
        (["--quick", "--hidden", "wide"], "--hidden"),
    ],
)
def test_bench_collect_refuses_a_bad_window_or_width(
    argv: list[str],
    flag: str,
    load: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    line = usage_error(load("bench_collect"), argv, monkeypatch, capsys)
    assert f"argument {flag}" in line


@pytest.mark.parametrize(
    "argv", [["--repeats", "0"], ["--quick", "--repeats", "-2"], ["--repeats", "x"]]
)
def test_bench_runner_refuses_a_bad_repeat_count(
    argv: list[str], load: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load("bench_runner")
    monkeypatch.setattr(module, "interleaved", lambda *a, **k: pytest.fail("the benchmark ran"))
    line = usage_error(module, argv, monkeypatch, capsys)
    assert "argument --repeats" in line


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("missing", "does not exist"),
        ("a_file", "is not a directory"),
        ("a_file/below", "does not exist"),
    ],
)
def test_bench_io_refuses_a_dir_that_is_none(
    where: str,
    said: str,
    tmp_path: Path,
    load: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "a_file").write_text("x")
    argv = ["--steps", "100", "--dir", str(tmp_path / where)]
    line = usage_error(load("bench_io"), argv, monkeypatch, capsys)
    assert "argument --dir" in line and said in line
    assert sorted(os.listdir(tmp_path)) == ["a_file"]  # no temp dir was made anywhere


@pytest.mark.parametrize("script", ["bench_episode", "bench_connectors"])
@pytest.mark.parametrize(
    ("where", "said"),
    [
        (".", "is a directory"),
        ("sub", "is a directory"),
        ("missing/out.json", "does not exist"),
        ("a_file/out.json", "is not a directory"),
    ],
)
def test_json_path_is_checked_before_the_run(
    script: str,
    where: str,
    said: str,
    tmp_path: Path,
    load: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a_file").write_text("x")
    module = load(script)
    # The run itself would take minutes: reaching it fails the test at once instead.
    monkeypatch.setattr(module, "timed", lambda *a, **k: pytest.fail("the benchmark ran"))
    argv = ["--quick", "--json", str(tmp_path / where)]
    line = usage_error(module, argv, monkeypatch, capsys)
    assert "argument --json" in line and said in line


@pytest.mark.parametrize("where", ["new.json", "a_file"])
def test_a_json_path_that_can_be_written_passes(where: str, tmp_path: Path, load: Any) -> None:
    (tmp_path / "a_file").write_text("x")
    timing = load("_timing")
    path = str(tmp_path / where)
    assert timing.json_path(path) == path
    assert timing.json_path("") == ""  # no --json file, as before
    assert timing.writable_dir(str(tmp_path)) == str(tmp_path)


@pytest.mark.parametrize("device", ["cpu", "cuda" if torch.cuda.is_available() else "cpu:0"])
def test_a_device_this_machine_has_passes(device: str, load: Any) -> None:
    assert load("_timing").device_name(device) == str(torch.device(device))
