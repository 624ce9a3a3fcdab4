"""Device work must not slow torch's own CPU path afterwards (issue 16): counted, one timed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

# Shared by both scripts: per-thread counters from /proc, torch's CPU ops, device conv-net steps.
COMMON = """
    import json, os, threading, time
    import torch, torch.nn.functional as F
    import unidev.torch as ut

    def threads():
        out = {}
        for tid in os.listdir("/proc/self/task"):
            try:
                status = open(f"/proc/self/task/{tid}/status").read()
                stat = open(f"/proc/self/task/{tid}/stat").read()
            except FileNotFoundError:  # the thread ended meanwhile
                continue
            f = stat[stat.rindex(")") + 2:].split()
            vol = int(status.split("\\nvoluntary_ctxt_switches:")[1].split()[0])
            out[tid] = (vol, (int(f[11]) + int(f[12])) * 1e3 / os.sysconf("SC_CLK_TCK"))
        return out

    def delta(fn):
        a = threads(); fn(); b = threads()
        return {t: (b[t][0] - a.get(t, (0, 0))[0], b[t][1] - a.get(t, (0, 0))[1]) for t in b}

    dev = ut.device_name()
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10))
    x, y = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))

    def train(device, steps):
        m = net.to(device)
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        for _ in range(steps):
            loss = F.cross_entropy(m(x.to(device)), y.to(device))
            opt.zero_grad(); loss.backward(); opt.step()
        if device != "cpu":
            getattr(torch, device).synchronize()

    mlp = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))

    def device_work():
        # backward runs on torch's autograd thread for the device (its convs and its GEMMs: an
        # MLP's mm backward); a second Python thread calls convs too (as TF's executor threads do)
        train(dev, 2)
        m = mlp.to(dev)
        F.cross_entropy(m(torch.randn(64, 256, device=dev)), y.repeat(8).to(dev)).backward()
        w = torch.randn(8, 3, 3, 3, device=dev)
        th = threading.Thread(target=lambda: F.conv2d(x.to(dev), w, padding=1).cpu())
        th.start(); th.join()
        time.sleep(0.2)  # settle: the plugin's threads go idle
"""

MECHANISM = COMMON + """
    big = torch.zeros(1 << 20)
    K = 200

    def cpu_ops():  # K separate parallel regions of torch's OpenMP team
        for _ in range(K):
            big.add_(1.0)

    def sleeps():  # voluntary context switches of the whole process over cpu_ops, least of 3
        return min(sum(v for v, _ in delta(cpu_ops).values()) for _ in range(3))

    cpu_ops()
    before, old = sleeps(), set(threads())
    device_work()
    after = sleeps()
    d = delta(lambda: (cpu_ops(), time.sleep(0.2)))
    new_ms = sum(c for t, (_, c) in d.items() if t not in old)
    print(json.dumps({"before": before, "after": after, "ops": K, "new_threads_ms": new_ms,
                      "all_ms": sum(c for _, c in d.values()),
                      "torch_threads": torch.get_num_threads(), "dev": dev}))
"""


def run(script: str, plugin: str, timeout: int = 300) -> dict:
    env = dict(os.environ, UNIDEV_TORCH_DEVICE=plugin)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                       text=True, timeout=timeout, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def torch_plugins() -> list[str]:
    from unidev.core import discovery

    usable = {r.name for r in discovery.discover() if r.usable}
    return [p for p in ("x86", "aurora") if p in usable]


@pytest.mark.parametrize("plugin", torch_plugins())
def test_torch_openmp_team_keeps_spinning_after_device_work(plugin):
    """libgomp makes every team (torch's too) sleep between parallel regions once it manages
    more threads than cores; a plugin whose OpenMP kernels gave torch's autograd thread a team
    made each of torch's later parallel regions pay a futex wake-up (a voluntary context
    switch): 45-65 % on a CPU training step. Counted, not timed."""
    r = run(MECHANISM, plugin)
    if r["torch_threads"] < 2 or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("torch runs single-threaded here: no OpenMP team to slow down")
    assert r["after"] <= r["before"] + r["ops"] // 4, r
    # nothing the device work started keeps running while torch computes or idles
    assert r["new_threads_ms"] <= 20 + 0.05 * r["all_ms"], r


RATIO = COMMON + """
    import statistics
    from unidev.demos import torch_models as models
    big = models.resnet(width=32)  # the issue's net: many parallel regions per step
    opt = torch.optim.SGD(big.parameters(), lr=0.01, momentum=0.9)
    bx, by = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))

    def cpu_steps():
        t0 = time.perf_counter()
        for _ in range(3):
            loss = F.cross_entropy(big(bx), by); opt.zero_grad(); loss.backward(); opt.step()
        return time.perf_counter() - t0

    cpu_steps()
    # before any device work (the slowdown lasted for the rest of the process), then after each
    base = statistics.median(cpu_steps() for _ in range(5))
    after = []
    for _ in range(5):
        device_work()
        after.append(cpu_steps())
    print(json.dumps({"base": base, "after": statistics.median(after)}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("plugin", torch_plugins())
def test_torch_cpu_step_time_after_device_work(plugin):
    """Timed (so not in the default run): median of 3 CPU steps after device work vs before, in
    the same process, 5 times each; the bug made it 1.45-1.65x on a quiet machine. Only there:
    on a loaded one torch's spinning team is slower before (2.1-2.4 s vs 0.3-1.7 s after, load
    3), so the mechanism test above is the one that catches the bug everywhere."""
    r = run(RATIO, plugin)
    assert r["after"] <= 1.3 * r["base"], r
