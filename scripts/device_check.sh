#!/usr/bin/env bash
# The GPU checks of this project, for a session whose task is lent a device machine.
#
#   bash scripts/device_check.sh prepare   # here: wheels the device image lacks, into .whl/
#   # then, through the device tool: run(command="bash scripts/device_check.sh run",
#   #                                    carry=[".whl"], timeout_s=540)
#
# The device image has python3 with torch, numpy, pyarrow, pytest and hypothesis, but not
# gymnasium or dm-tree: `prepare` downloads those (Python 3.12, manylinux x86-64) into .whl/,
# which git ignores. `run` installs them beside the image's packages, then runs the CUDA tests
# (tests that skip without CUDA run there) and benchmarks/gpu.py (rollout storage passes and
# collection from a torch-tensor env at N=4096..65536, host syncs per sample), and leaves the
# logs under $OUT. Quote the figures in docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
prepare)
    grep -qx '.whl/' .gitignore || echo '.whl/' >> .gitignore
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d .whl \
        gymnasium==1.4.0 farama-notifications==0.0.4 dm-tree==0.1.9 tqdm
    ls -l .whl
    ;;
run)
    out="${OUT:-/tmp/device-out}"
    mkdir -p "$out"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 HYPOTHESIS_PROFILE=ci
    nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$out/gpu.txt"
    # A failing test must not cost the benchmark figures of the same (scarce) device run.
    tests_rc=0
    python3 -m pytest -q -p no:cacheprovider -o addopts="" --import-mode=importlib \
        tests/runner/test_device_recording.py tests/runner/test_device_benchmark.py \
        tests/rollout 2>&1 | tee "$out/tests.log" | tail -20 || tests_rc=$?
    python3 benchmarks/gpu.py --repeats 10 2>&1 | tee "$out/gpu_bench.log"
    exit "$tests_rc"
    ;;
*)
    echo "usage: $0 prepare|run" >&2
    exit 2
    ;;
esac
