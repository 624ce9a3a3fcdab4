"""Conformance reports: build from test records, write Markdown + JSON, compare several plugins."""

from __future__ import annotations

import json
import platform
import sys
import time
from importlib import metadata
from pathlib import Path

from ..contract import opset
from .target import GROUPS, Target

__all__ = ["build", "write", "load", "render_markdown", "compare", "SYMBOLS"]

SYMBOLS = {"pass": "✓", "fail": "✗", "unsupported": "–", "excluded": "excl", "fell back": "↺",
           "not run": "·"}
_BASE_GROUPS = ("contract", "memory", "streams", "bad_inputs")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _versions(t: Target) -> dict:
    lib = t.library
    spec = t.record.spec
    return {
        "unidev": _version("unidev"),
        "plugin": spec.version if spec else None,
        "plugin_library": lib.version if lib is not None else None,
        "abi": list(lib.abi) if lib is not None else None,
        "python": sys.version.split()[0],
        "numpy": _version("numpy"),
        "torch": _version("torch"),
        "tensorflow": _version("tensorflow-cpu") or _version("tensorflow"),
        "platform": f"{platform.system()} {platform.machine()}",
    }


def _matrix(t: Target, records: list[dict], fallbacks: dict) -> dict:
    by_pair: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        if r.get("group") == "kernels" and r.get("op"):
            by_pair.setdefault((r["op"], r["dtype"]), []).append(r)
    fell = {op for fw in fallbacks.values() for op in fw.get("unidev_ops", {})}
    matrix: dict[str, dict] = {}
    for op in t.ops():
        row = {}
        for dtype in op.dtypes:
            recs = by_pair.get((op.name, dtype), [])
            kinds = {r.get("kind") for r in recs}
            failed = [r for r in recs if r["outcome"] == "failed"]
            ran = [r for r in recs if r.get("kind") == "run" and r["outcome"] != "skipped"]
            cell = {"cases": len(ran), "failed": len(failed),
                    "seconds": round(sum(r["seconds"] for r in recs), 4)}
            if "excluded" in kinds:
                cell["status"] = "excluded"
                cell["reason"] = t.exclusion(op.name, dtype)
            elif failed:
                cell["status"] = "fail"
                cell["message"] = failed[0]["message"]
            elif "unsupported" in kinds:
                cell["status"] = "fell back" if op.name in fell else "unsupported"
            elif ran:
                cell["status"] = "pass"
            else:
                cell["status"] = "not run"
            diffs = [r["max_diff"] for r in ran if isinstance(r.get("max_diff"), float | int)]
            if diffs:
                cell["max_diff"] = max(diffs)
            row[dtype] = cell
        matrix[op.name] = {"tier": op.tier, "dtypes": row}
    return matrix


def _groups(records: list[dict]) -> dict:
    out = {g: {"passed": 0, "failed": 0, "skipped": 0, "seconds": 0.0} for g in GROUPS}
    for r in records:
        g = out.setdefault(r["group"], {"passed": 0, "failed": 0, "skipped": 0, "seconds": 0.0})
        g[r["outcome"]] += 1
        g["seconds"] += r["seconds"]
    for g in out.values():
        g["seconds"] = round(g["seconds"], 3)
    return out


def _tiers(t: Target, records: list[dict], matrix: dict, groups: dict) -> dict:
    result = {}
    for tier in opset.TIERS:
        if tier > t.tier:
            claimed = t.conformance.tier
            notes = [f"not claimed (the plugin claims tier {claimed})"] if tier > claimed else []
            result[str(tier)] = {"status": "not tested", "notes": notes}
            continue
        notes, failed, unchecked = [], False, False
        for g in _BASE_GROUPS:
            if g not in t.groups:
                unchecked = True
                notes.append(f"group {g} not run")
            elif not any(groups[g][k] for k in ("passed", "failed", "skipped")):
                unchecked = True
                notes.append(f"group {g} has no results")
            elif groups[g]["failed"]:
                failed = True
                notes.append(f"group {g}: {groups[g]['failed']} failure(s)")
        if "kernels" not in t.groups:
            unchecked = True
            notes.append("kernels not run")
        else:
            ops = [op for op in opset.OPS.values() if op.tier <= tier]
            missing = [op.name for op in ops if op.name not in matrix]
            if missing:
                unchecked = True
                notes.append(f"{len(missing)} op(s) of tier ≤ {tier} not run")
            bad = [f"{op}[{d}]" for op, row in matrix.items() if row["tier"] <= tier
                   for d, c in row["dtypes"].items() if c["status"] == "fail"]
            if bad:
                failed = True
                notes.append(f"failing: {', '.join(bad[:12])}" + (" …" if len(bad) > 12 else ""))
            excl = [f"{op}[{d}]" for op, row in matrix.items() if row["tier"] <= tier
                    for d, c in row["dtypes"].items() if c["status"] == "excluded"]
            if excl:
                notes.append(f"excluded by the plugin: {', '.join(excl)}")
        fw = [r for r in records if r["group"] == "framework" and r.get("tier", 0) <= tier]
        fw_failed = [r for r in fw if r["outcome"] == "failed"]
        if fw_failed:
            failed = True
            notes.append("framework: " + ", ".join(f"{r['framework']} {r['case']}"
                                                   for r in fw_failed[:8]))
        for name in ("torch", "tensorflow"):
            mine = [r for r in fw if r.get("framework") == name]
            if mine and all(r["outcome"] == "skipped" for r in mine):
                notes.append(f"framework level skipped for {name}: {mine[0]['message'][:160]}")
        if failed:
            status = "failed"
        elif unchecked:
            status = "not checked"
        elif any(n.startswith("excluded") for n in notes):
            status = "passed with exclusions"
        else:
            status = "passed"
        result[str(tier)] = {"status": status, "notes": notes}
    return result


def _fallbacks(records: list[dict]) -> dict:
    out: dict[str, dict] = {}
    for r in records:
        fb = r.get("fallbacks")
        if r["group"] != "framework" or not fb:
            continue
        fw = out.setdefault(r["framework"], {"framework_ops": {}, "unidev_ops": {}})
        for key, val in fb.get("framework_ops", {}).items():
            fw["framework_ops"][key] = fw["framework_ops"].get(key, 0) + val
        for key, val in fb.get("unidev_ops", {}).items():
            fw["unidev_ops"][key] = fw["unidev_ops"].get(key, 0) + val
    return out


def build(t: Target, records: list[dict], seconds: float) -> dict:
    """The report of one run as a JSON-ready dict."""
    spec = t.record.spec
    fallbacks = _fallbacks(records)
    matrix = _matrix(t, records, fallbacks) if "kernels" in t.groups else {}
    groups = _groups(records)
    props = None
    if t.usable:
        try:
            props = t.library.device_properties(t.index)
        except Exception as exc:  # reported, the contract group says why
            props = {"error": str(exc)}
    failures = [{"group": r["group"], "test": r.get("case") or "", "op": r.get("op"),
                 "dtype": r.get("dtype"), "message": r["message"]}
                for r in records if r["outcome"] == "failed"]
    conf = t.conformance
    data = {
        "schema": 1,
        "plugin": t.name,
        "device": t.device,
        "status": t.record.status,
        "error": t.record.error,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "seconds": round(seconds, 2),
        "versions": _versions(t),
        "device_properties": props,
        "settings": {
            "claimed_tier": conf.tier, "tested_tier": t.tier,
            "ops": sorted(t.only_ops) if t.only_ops else "all",
            "groups": list(t.groups),
            "exclusions": dict(conf.exclusions),
            "tolerances": t.tolerance_table(),
            "torch_name": spec.torch_name if spec else None,
            "tf_type": spec.tf_type if spec else None,
        },
        "groups": groups,
        "tiers": _tiers(t, records, matrix, groups),
        "tiers_passed": [],
        "matrix": matrix,
        "fallbacks": fallbacks,
        "framework": [{k: r.get(k) for k in ("framework", "case", "outcome", "message",
                                               "seconds", "detail")}
                      for r in records if r["group"] == "framework"],
        "failures": failures,
        "totals": {k: sum(g[k] for g in groups.values()) for k in ("passed", "failed",
                                                                    "skipped")},
    }
    data["tiers_passed"] = tiers_passed(data)
    return data


def tiers_passed(data: dict) -> list[int]:
    return [int(k) for k, v in data["tiers"].items() if v["status"].startswith("passed")]


def write(data: dict, out: Path) -> tuple[Path, Path]:
    """Write report.md and report.json into `out`; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / "report.md", out / "report.json"
    js.write_text(json.dumps(data, indent=1, default=str) + "\n")
    md.write_text(render_markdown(data))
    return md, js


def load(path: str | Path) -> dict:
    """A report from its folder or its report.json."""
    p = Path(path)
    if p.is_dir():
        p = p / "report.json"
    if not p.exists():
        raise FileNotFoundError(f"no conformance report at {p} (run `unidev conformance NAME "
                                "--report DIR` first)")
    return json.loads(p.read_text())


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def render_markdown(data: dict) -> str:
    v, s = data["versions"], data["settings"]
    passed = tiers_passed(data)
    lines = [f"# unidev conformance: {data['plugin']}", "",
             f"Device `{data['device']}` — plugin status **{data['status']}**"
             + (f" ({data['error']})" if data.get("error") else "") + ".",
             f"Claims tier {s['claimed_tier']}; tested up to tier {s['tested_tier']}. "
             f"**Tiers passed: {', '.join(map(str, passed)) if passed else 'none'}.**",
             f"Totals: {data['totals']['passed']} passed, {data['totals']['failed']} failed, "
             f"{data['totals']['skipped']} skipped in {data['seconds']} s.", "",
             "## Tiers", ""]
    lines += _table(["tier", "status", "notes"],
                    [[k, t["status"], "; ".join(t["notes"]) or ""]
                     for k, t in data["tiers"].items()])
    lines += ["", "## Groups", ""]
    lines += _table(["group", "passed", "failed", "skipped", "seconds"],
                    [[g, c["passed"], c["failed"], c["skipped"], c["seconds"]]
                     for g, c in data["groups"].items()])
    if data["matrix"]:
        all_dtypes = ["float32", "float64", "int32", "int64", "bool"]
        lines += ["", "## Op × dtype", "",
                  "✓ pass · ✗ fail · – unsupported (no kernel) · ↺ fell back to the framework's "
                  "CPU kernel · excl excluded by the plugin · blank: not in the op's dtypes", ""]
        rows = []
        for op, row in data["matrix"].items():
            cells = [SYMBOLS.get(row["dtypes"][d]["status"], "?") if d in row["dtypes"] else ""
                     for d in all_dtypes]
            diffs = [c.get("max_diff") for c in row["dtypes"].values()
                     if c.get("max_diff") is not None]
            secs = sum(c["seconds"] for c in row["dtypes"].values())
            rows.append([op, row["tier"], *cells, f"{max(diffs):.2g}" if diffs else "",
                         f"{secs:.3f}"])
        lines += _table(["op", "tier", *all_dtypes, "max diff", "seconds"], rows)
    if data["fallbacks"]:
        lines += ["", "## Framework fallbacks", ""]
        for fw, fb in data["fallbacks"].items():
            ops = ", ".join(f"{k} ×{n}" for k, n in sorted(fb["framework_ops"].items()))
            lines.append(f"- {fw}: {ops or 'none'}")
    if data["framework"]:
        lines += ["", "## Framework level", ""]
        lines += _table(["framework", "check", "outcome", "seconds", "note"],
                        [[r["framework"], r["case"], r["outcome"], f"{r['seconds']:.2f}",
                          (r["message"] or "")[:120]] for r in data["framework"]])
    lines += ["", "## Plugin conformance settings", ""]
    if s["exclusions"]:
        lines += [f"- excluded `{k}`: {why}" for k, why in s["exclusions"].items()]
    else:
        lines.append("- no exclusions")
    def fmt(pair) -> str:
        return f"rtol {pair[0]:g} atol {pair[1]:g}" if pair else ""

    rows = []
    for cls, per in s["tolerances"].items():
        for dt, tol in per.items():
            rows.append([cls, dt, fmt(tol["cap"]), fmt(tol["plugin"]), fmt(tol["used"]),
                         tol["note"]])
    lines += ["", *_table(["op class", "dtype", "suite cap", "plugin", "used", "note"], rows)]
    if data["failures"]:
        lines += ["", f"## Failures ({len(data['failures'])})", ""]
        for f in data["failures"][:200]:
            lines.append(f"- [{f['group']}] {f['message']}")
    lines += ["", "## Versions", ""]
    lines += [f"- {k}: {val}" for k, val in v.items() if val is not None]
    props = data.get("device_properties") or {}
    if props:
        lines += [f"- device: {props}"]
    return "\n".join(lines) + "\n"


def _compact(row: dict) -> str:
    order = ["float32", "float64", "int32", "int64", "bool"]
    short = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64", "bool": "b"}
    return " ".join(f"{short[d]}{SYMBOLS.get(row['dtypes'][d]['status'], '?')}"
                    for d in order if d in row["dtypes"])


def compare(reports: list[dict]) -> str:
    """Several plugins side by side (Markdown)."""
    names = [r["plugin"] for r in reports]
    lines = ["# unidev conformance comparison", ""]
    rows = [["tiers passed", *[", ".join(map(str, tiers_passed(r))) or "none" for r in reports]],
            ["claimed tier", *[str(r["settings"]["claimed_tier"]) for r in reports]],
            ["passed / failed / skipped",
             *[f"{r['totals']['passed']} / {r['totals']['failed']} / {r['totals']['skipped']}"
               for r in reports]],
            ["seconds", *[str(r["seconds"]) for r in reports]],
            ["plugin version", *[str(r["versions"].get("plugin")) for r in reports]]]
    for g in GROUPS:
        rows.append([f"group {g}", *[
            f"{r['groups'].get(g, {}).get('passed', 0)}✓ {r['groups'].get(g, {}).get('failed', 0)}✗"
            for r in reports]])
    for fw in ("torch", "tensorflow"):
        rows.append([f"{fw} fallbacks", *[
            str(sum(r["fallbacks"].get(fw, {}).get("framework_ops", {}).values()))
            if fw in r["fallbacks"] else "-" for r in reports]])
    lines += _table(["", *names], rows)
    ops = []
    for r in reports:
        ops += [op for op in r["matrix"] if op not in ops]
    if ops:
        lines += ["", "## Op × dtype", ""]
        lines += _table(["op", *names], [[op, *[_compact(r["matrix"][op]) if op in r["matrix"]
                                                else "not run" for r in reports]]
                                         for op in ops])
    return "\n".join(lines) + "\n"
