"""The device-collection benchmark runs end to end (on the CPU here, tiny sizes), so that the
script a lent GPU runs cannot rot between leases."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_collect.py"


def test_gpu_collect_benchmark_runs_on_the_cpu(capsys):
    spec = importlib.util.spec_from_file_location("gpu_collect", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--device", "cpu", "--sizes", "8", "--repeats", "1"])
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert [(row[0], row[1]) for row in rows] == [
        ("SameStep", "8"),
        ("NextStep", "8"),
        ("NextStep/v", "8"),
    ]
    assert all(row[5].endswith("x") and float(row[5][:-1]) > 0 for row in rows)
