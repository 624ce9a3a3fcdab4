"""`unidev conformance` and `unidev new-plugin`: subcommands registered by unidev.cli."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from . import report

__all__ = ["COMMANDS", "run_conformance"]


class _Progress:
    """A pytest plugin that replaces pytest's dots with one progress line per group."""

    def __init__(self, stream=sys.stdout) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.total = 0
        self.done = 0
        self.failed = 0
        self.group = ""
        self.started = time.time()

    def pytest_collection_finish(self, session) -> None:
        self.total = len(session.items)
        self.stream.write(f"collected {self.total} checks\n")

    def pytest_runtest_logreport(self, report) -> None:
        if report.when != "teardown":
            if report.failed:
                self.failed += 1
            return
        self.done += 1
        meta = dict(report.user_properties).get("unidev", {})
        group = meta.get("group", "?")
        what = meta.get("op") or meta.get("case") or ""
        changed = group != self.group
        self.group = group
        line = (f"[{self.done:>5}/{self.total}] {group:<10} {what[:28]:<28} "
                f"failed {self.failed:<4} {time.time() - self.started:6.1f} s")
        if self.tty:
            self.stream.write("\r" + line)
        elif changed or self.done % 500 == 0 or self.done == self.total:
            self.stream.write(line + "\n")
        self.stream.flush()

    def pytest_sessionfinish(self, session) -> None:
        if self.tty:
            self.stream.write("\n")


def run_conformance(device: str, tier: int | None = None, report_dir: str | None = None,
                    ops: str | None = None, groups: str | None = None,
                    extra: list[str] | None = None, quiet: bool = False) -> tuple[int, dict]:
    """Run the suite in this process; returns (pytest exit code, report data)."""
    import pytest

    from . import plugin as conf_plugin

    out_dir = report_dir or tempfile.mkdtemp(prefix="unidev-conformance-")
    with tempfile.TemporaryDirectory() as tmp:
        ini = Path(tmp) / "pytest.ini"
        ini.write_text("[pytest]\n")  # keep the caller's project configuration out of the run
        args = ["-c", str(ini), "--rootdir", tmp, "-p", "no:cacheprovider",
                "--pyargs", "unidev.conformance", "--unidev-device", device,
                "--unidev-report", out_dir]
        if tier is not None:
            args += ["--unidev-tier", str(tier)]
        if ops:
            args += ["--unidev-ops", ops]
        if groups:
            args += ["--unidev-groups", groups]
        args += list(extra or [])
        holder: dict = {}

        class _Grab:
            @staticmethod
            def pytest_unconfigure(config) -> None:
                holder["data"] = config.stash.get(conf_plugin.RESULT_KEY, None)

        plugins: list = [_Grab()]
        if not quiet:
            plugins.append(_Progress())
        args += ["-q"] if quiet else ["-p", "no:terminal"]
        cwd = os.getcwd()
        try:
            os.chdir(tmp)
            code = int(pytest.main(args, plugins=plugins))
        finally:
            os.chdir(cwd)
    return code, holder.get("data") or {}


def _summary(data: dict) -> str:
    lines = [f"\n{data['plugin']} ({data['device']}): claims tier "
             f"{data['settings']['claimed_tier']}, tested up to tier "
             f"{data['settings']['tested_tier']}"]
    w = max(len(g) for g in data["groups"])
    lines.append(f"  {'group':<{w}}  passed  failed  skipped  seconds")
    for g, c in data["groups"].items():
        lines.append(f"  {g:<{w}}  {c['passed']:>6}  {c['failed']:>6}  {c['skipped']:>7}  "
                     f"{c['seconds']:>7.2f}")
    for tier, res in data["tiers"].items():
        note = f" — {'; '.join(res['notes'])}" if res["notes"] else ""
        lines.append(f"  tier {tier}: {res['status']}{note}")
    for f in data["failures"][:15]:
        lines.append(f"  ✗ {f['message'][:220]}")
    if len(data["failures"]) > 15:
        lines.append(f"  … {len(data['failures']) - 15} more failures in the report")
    return "\n".join(lines)


def cmd_conformance(args: argparse.Namespace) -> int:
    if args.compare:
        try:
            reports = [report.load(p) for p in args.compare]
        except (OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        text = report.compare(reports)
        print(text)
        if args.report:
            Path(args.report).mkdir(parents=True, exist_ok=True)
            (Path(args.report) / "compare.md").write_text(text)
        return 0
    if not args.name:
        print("error: give a plugin name (unidev conformance NAME) or --compare DIR DIR ...",
              file=sys.stderr)
        return 2
    from ..core import discovery

    try:
        rec = discovery.get(args.name.partition(":")[0])
    except Exception as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if rec.status != discovery.OK:
        print(f"error: plugin {rec.name!r} is {rec.status}: {rec.error}", file=sys.stderr)
        return 3
    if not args.report:
        args.report = tempfile.mkdtemp(prefix="unidev-conformance-")
    code, data = run_conformance(args.name, args.tier, args.report, args.ops, args.groups,
                                 quiet=args.quiet)
    if not data:
        print(f"error: the conformance run did not complete (pytest exit code {code})",
              file=sys.stderr)
        return 4 if code not in (0, 1) else code
    print(_summary(data))
    print(f"\nreport: {args.report}/report.md, report.json")
    # 0: every tested tier passed; 1: something failed
    return 0 if code == 0 and data["totals"]["failed"] == 0 else 1


def _configure_conformance(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="plugin name (or name:index), e.g. aurora")
    p.add_argument("--tier", type=int, default=None, help="highest tier to test (default: claimed)")
    p.add_argument("--report", default=None, metavar="DIR", help="write report.md/report.json")
    p.add_argument("--ops", default=None, help="comma-separated ops to limit the kernel group to")
    p.add_argument("--groups", default=None,
                   help="comma-separated groups: contract,memory,streams,kernels,bad_inputs,"
                        "framework")
    p.add_argument("--compare", nargs="+", metavar="REPORT",
                   help="show several reports (folders or report.json) side by side")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")


def cmd_new_plugin(args: argparse.Namespace) -> int:
    from ..kit import scaffold

    try:
        root = scaffold.write(args.name, Path(args.dir), force=args.force)
    except (ValueError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {root}")
    print("next:\n"
          f"  pip install --no-build-isolation {root}\n"
          f"  unidev conformance {args.name} --tier 0")
    return 0


def _configure_new_plugin(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="plugin name: lowercase letters, digits, underscores")
    p.add_argument("--dir", default=".", help="folder to create unidev-NAME in (default: .)")
    p.add_argument("--force", action="store_true", help="overwrite an existing folder")


COMMANDS = {
    "conformance": (cmd_conformance, "prove a plugin: contract, memory, streams, kernels, bad "
                    "inputs, frameworks; report and exit code", _configure_conformance),
    "new-plugin": (cmd_new_plugin, "write a plugin package that passes tier 0 at once",
                   _configure_new_plugin),
}
