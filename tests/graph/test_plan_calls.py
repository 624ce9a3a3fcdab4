"""The plan runtime's calls into a plugin, counted with a recording fake UD_Api (plan_calls.c)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import unidev.graph

sys.path.insert(0, str(Path(__file__).parent))
from plan_helpers import Builder  # noqa: E402

NATIVE = Path(unidev.graph.__file__).parent / "native"
INCLUDE = Path(unidev.graph.__file__).parent.parent / "contract" / "include"
CC = shutil.which("gcc") or shutil.which("cc")


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_lookup_once_compile_preferred_no_work_per_run(tmp_path):
    exe = tmp_path / "plan_calls"
    subprocess.run([CC, "-std=c17", "-O1", "-Wall", "-Werror", f"-I{INCLUDE}", f"-I{NATIVE}",
                    str(Path(__file__).parent / "plan_calls.c"), str(NATIVE / "ud_plan.c"), "-o",
                    str(exe)], check=True)
    b = Builder("calls", plugin="fake")
    x = b.input((2, 3))
    c = b.const(np.full((2, 3), 0.5, np.float32))
    t = b.temp((2, 3))
    y = b.output((2, 3))
    b.step("add", [x, x], [t], "twice")
    b.step("mul", [t, c], [y], "half")
    unidev.graph.plan.save(b.plan(), tmp_path / "p.udplan")
    out = subprocess.run([str(exe), str(tmp_path / "p.udplan")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = {ln.split()[0]: ln.split()[1:] for ln in out.stdout.splitlines()}
    counts = {k: {kv.split("=")[0]: int(kv.split("=")[1]) for kv in v}
              for k, v in lines.items() if k.startswith("after")}
    made = counts["after_create"]
    # one kernel_compile per step (mul specialized), kernel_lookup only for the rest; the arena
    # and the constants: two allocations, one upload, one stream, one event
    assert (made["kernel_compile"], made["kernel_lookup"]) == (2, 1)
    assert (made["mem_alloc"], made["memcpy_h2d"], made["stream_create"],
            made["event_create"]) == (2, 1, 1, 1)
    ran = counts["after_runs"]
    assert (ran["add_calls"], ran["mul_calls"]) == (4, 4)
    # per run: one event record and nothing else; one wait when the stream changes (a -> b)
    per_run = {k: ran[k] - made[k] for k in made if k not in ("add_calls", "mul_calls")}
    assert per_run == dict.fromkeys(per_run, 0) | {"event_record": 4, "stream_wait_event": 1}
    assert [float(v) for v in lines["y"]] == [1, 2, 3, 4, 5, 6]  # (x + x) * 0.5
    gone = counts["after_destroy"]
    assert (gone["mem_free"], gone["stream_destroy"], gone["event_destroy"]) == (2, 1, 1)
    assert gone["stream_wait_event"] == ran["stream_wait_event"] + 1  # frees wait for the run
