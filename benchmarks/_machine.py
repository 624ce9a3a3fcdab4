"""The machine's limits, measured in the benchmark's own run: CPU, FMA peak, copy bandwidth."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Flags that decide which kernels run (ISPC/oneDNN/torch dispatch on them).
FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
         "avx512_bf16", "amx_tile")
COPY_SIZES = {"4 MB (cache)": 4 << 20, "64 MB (DRAM)": 64 << 20}  # bytes per buffer


def cpu() -> tuple[str, list[str]]:
    """The CPU's model name and which of FLAGS it has."""
    model, flags = platform.processor() or "unknown", set()
    try:
        text = Path("/proc/cpuinfo").read_text()
        m = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
        model = m.group(1).strip() if m else model
        f = re.search(r"^flags\s*:\s*(.+)$", text, re.M)
        flags = set(f.group(1).split()) if f else set()
    except OSError:
        pass
    return model, [x for x in FLAGS if x in flags]


def load() -> float:
    """The 1-minute load average (other processes on the cores show up here)."""
    return os.getloadavg()[0]


def _tool(name: str) -> Path | None:
    """benchmarks/<name>.c built with the system C compiler into the user's cache, or None."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        return None
    exe = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "unidev" / name
    src = HERE / f"{name}.c"
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        exe.parent.mkdir(parents=True, exist_ok=True)
        tmp = exe.with_name(f"{name}.{os.getpid()}")  # concurrent runs never see half a file
        subprocess.run([cc, "-O2", "-march=native", "-o", str(tmp), str(src), "-lpthread"],
                       check=True)
        tmp.replace(exe)
    return exe


def _best(exe: Path, args: list[str], tries: int) -> float:
    best = 0.0
    for _ in range(tries):  # best of several: another process may take a core for a while
        out = subprocess.run([str(exe), *args], capture_output=True, text=True, check=True).stdout
        best = max(best, float(re.match(r"([\d.]+) ", out).group(1)))
    return best


def fma_peak(threads: int, tries: int = 3) -> float | None:
    """FP32 FMA throughput on `threads` threads in GFLOP/s (fma_peak.c), None without a compiler."""
    exe = _tool("fma_peak")
    return None if exe is None else _best(exe, [str(threads), "0.3"], tries)


def copy_bandwidth(threads: int, tries: int = 3) -> dict[str, float]:
    """Copy rate (GB/s, bytes read + written) per COPY_SIZES entry (copy_bw.c); {} without cc."""
    exe = _tool("copy_bw")
    if exe is None:
        return {}
    return {k: _best(exe, [str(threads), str(n), "0.2"], tries) for k, n in COPY_SIZES.items()}


@dataclass
class Machine:
    """The machine's figures, measured at the start and the end of a run (the best counts)."""

    threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    model: str = ""
    flags: list[str] = field(default_factory=list)
    peak: float | None = None
    copy: dict[str, float] = field(default_factory=dict)
    loads: list[float] = field(default_factory=list)
    tries: int = 3  # best of: another process may take a core for a while; 1 in quick runs

    def measure(self) -> None:
        """Record the load average, then (re)measure peak and bandwidth, keeping the best."""
        self.loads.append(load())
        if not self.model:
            self.model, self.flags = cpu()
        peak = fma_peak(self.threads, self.tries)
        if peak is not None:
            self.peak = max(self.peak or 0.0, peak)
        for k, v in copy_bandwidth(self.threads, self.tries).items():
            self.copy[k] = max(self.copy.get(k, 0.0), v)

    def lines(self) -> list[str]:
        """Markdown bullet lines describing the machine and the load during the run."""
        loads = " → ".join(f"{x:.2f}" for x in self.loads)
        out = [f"- CPU: {self.model}, {os.cpu_count()} cores, flags: {' '.join(self.flags)}",
               f"- 1-minute load average, start → end: {loads}"]
        cores = os.cpu_count() or 1
        if self.loads and max(self.loads) > cores:
            out[-1] += (f" — **above the {cores} cores: other processes shared them, so these "
                        "figures are not representative** (a parallel region waits for any "
                        "descheduled worker; torch's CPU path has suffered most here)")
        if self.peak is not None:
            out.append(f"- FP32 FMA peak, {self.threads} threads (`benchmarks/fma_peak.c`, same "
                       f"run): {self.peak:.0f} GFLOP/s")
        if self.copy:
            out.append(f"- copy bandwidth, {self.threads} threads (`benchmarks/copy_bw.c`, same "
                       "run): " + ", ".join(f"{v:.0f} GB/s at {k}" for k, v in self.copy.items()))
        return out
