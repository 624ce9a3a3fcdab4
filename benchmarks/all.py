"""Every benchmark in order (kernels, both adapters, graph layer), then README's tables.

    .venv/bin/python benchmarks/all.py [--quick] [--lock /tmp/unidev-bench.lock] [--no-readme]

Full: about 9 minutes on a quiet 2-core machine, writing benchmarks/results/{x86,x86_summary,
torch_adapter,tf_adapter,graph}.md (+ .json) and then README.md's tables (readme_tables.py). Quick
(< 2 minutes quiet): one process pair each, small problems, *_quick files, README untouched.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = ("run.py", "torch_adapter.py", "tf_adapter.py", "graph.py")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--lock", default="", help="flock file held during each round of each script")
    p.add_argument("--no-readme", action="store_true", help="leave README.md alone")
    args = p.parse_args()
    extra = (["--quick"] if args.quick else []) + (["--lock", args.lock] if args.lock else [])
    t0, failed = time.perf_counter(), []
    for script in SCRIPTS:
        t = time.perf_counter()
        rc = subprocess.run([sys.executable, str(HERE / script), *extra]).returncode
        print(f"== {script}: rc {rc}, {time.perf_counter() - t:.0f} s", flush=True)
        if rc:
            failed.append(script)
    if not args.quick and not args.no_readme:
        subprocess.run([sys.executable, str(HERE / "readme_tables.py")], check=False)
    print(f"== all: {time.perf_counter() - t0:.0f} s" + (f", FAILED: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
