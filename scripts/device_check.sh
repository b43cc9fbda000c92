#!/usr/bin/env bash
# The GPU checks of this project, for a session whose task is lent a device machine.
#
#   bash scripts/device_check.sh prepare   # here: wheels the device image lacks, into .whl/
#   # then, through the device tool: run(command="bash scripts/device_check.sh run",
#   #                                    carry=[".whl"], timeout_s=540)
#
# The device image has python3 with torch, numpy, pyarrow, pytest and hypothesis, but not
# gymnasium or dm-tree: `prepare` downloads those (Python 3.12, manylinux x86-64) into .whl/,
# which git ignores. `run` installs them beside the image's packages, then runs the tests that
# take a CUDA device and benchmarks/gpu.py (rollout storage passes and
# collection from a torch-tensor env at N=4096..65536, host syncs per sample), and leaves the
# logs under $OUT, then the whole suite across the machine's cores (FULL_SUITE=0 skips it).
# Quote the figures in docs/performance.md.
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
    {
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
        python3 -c "import sys, torch, numpy, pyarrow, gymnasium; print(sys.version.split()[0], \
torch.__version__, numpy.__version__, pyarrow.__version__, gymnasium.__version__)"
    } 2>&1 | tee "$out/gpu.txt"
    # A failing test must not cost the benchmark figures of the same (scarce) device run, and
    # each phase has a bound of its own so that the run ends inside the device tool's limit.
    tests_rc=0
    timeout 150 python3 -m pytest -q -p no:cacheprovider -o addopts="" --import-mode=importlib \
        -rs tests/runner/test_device_recording.py tests/runner/test_device_benchmark.py \
        tests/runner/test_session12_timing.py tests/rollout tests/converter/test_hunt_fixes_masked.py \
        tests/test_hunt24_helpers.py tests/core/test_hunt21_raw_errors.py \
        tests/replay/test_hunt24_replay.py 2>&1 | tee "$out/tests.log" | tail -25 || tests_rc=$?
    timeout 240 python3 benchmarks/gpu.py --repeats 10 2>&1 | tee "$out/gpu_bench.log" || true
    # The whole suite on a machine that has CUDA (the reference libraries are not there, so
    # the differential tests skip).
    if [ "${FULL_SUITE:-1}" = 1 ]; then
        timeout 170 python3 -m pytest -q -p no:cacheprovider -o addopts="" \
            --import-mode=importlib -n 14 --timeout 120 -rfs --durations=10 \
            -m "not differential" tests 2>&1 \
            | tee "$out/suite.log" | tail -30 || true
    fi
    exit "$tests_rc"
    ;;
*)
    echo "usage: $0 prepare|run" >&2
    exit 2
    ;;
esac
