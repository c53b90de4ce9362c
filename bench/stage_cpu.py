"""CPU seconds (user + system, this process and its children: vLLM's engine core and workers)
and wall seconds per stage of one `harness run`, printed as a table and written as JSON.

A shared machine inflates wall time but not CPU time, so compare runs by CPU; the wall column
is the manifest's. Usage (under /work/bin/heavy on a shared machine):

    python bench/stage_cpu.py configs/quickstart.yaml --out /tmp/qs --json /tmp/qs-cpu.json
"""

import argparse
import contextlib
import json
import resource
import time
from contextlib import contextmanager
from pathlib import Path

import psutil
from _limit import cpu_description

from harness.pipeline import run_pipeline
from harness.stages.context import StageContext


def cpu_seconds() -> float:
    """User + system CPU of this process, its live descendants and its reaped children."""
    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):  # exited between listing and reading
            total += sum(child.cpu_times()[:2])
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return total + reaped.ru_utime + reaped.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cpu: dict[str, float] = {}

    @contextmanager
    def timed(self, name: str):
        start, started = cpu_seconds(), time.perf_counter()
        try:
            yield
        finally:
            cpu[name] = round(cpu.get(name, 0) + cpu_seconds() - start, 1)
            wall = self.timings.get(name, 0) + time.perf_counter() - started
            self.timings[name] = round(wall, 2)
            # as each stage ends: a run cut short still leaves its finished stages' figures
            print(f"stage {name}: {cpu[name]:.1f} s CPU, {wall:.1f} s wall", flush=True)

    StageContext.timed = timed  # type: ignore[method-assign]
    out = run_pipeline(args.config, args.out, fresh=True, show_progress=False)
    wall = json.loads((out / "manifest.json").read_text()).get("timings", {})
    print(cpu_description())
    print(f"{'stage':<14}{'cpu s':>9}{'wall s':>9}")
    for name, seconds in cpu.items():
        print(f"{name:<14}{seconds:>9.1f}{wall.get(name, float('nan')):>9.1f}")
    print(f"{'total':<14}{sum(cpu.values()):>9.1f}{sum(wall.values()):>9.1f}")
    if args.json:
        args.json.write_text(json.dumps({"cpu": cpu, "wall": wall}, indent=1))


if __name__ == "__main__":
    main()
