"""The benchmarks' own logic: ranges, process alternation, README table replacement (no timing)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import _timing  # noqa: E402
import readme_tables  # noqa: E402


def test_fmt_range():
    assert _timing.fmt_range([1.234, 0.95, 1.1], unit="×") == "0.95–1.23×"
    assert _timing.fmt_range([1.001, 1.004], unit="×") == "1.00×"  # agree at the precision
    assert _timing.fmt_range([None, 2.0, float("nan")], "{:.3g}", " ms") == "2 ms"
    assert _timing.fmt_range([]) == "—"


def test_pair_ratios_skip_failed_pairs():
    assert _timing.pair_ratios([2.0, None, 3.0], [1.0, 1.0, 1.5]) == [2.0, 2.0]


def test_rotation_each_label_once_per_round_never_fixed_order():
    order = _timing.rotation(["cpu", "x86", "aurora"], 4)
    assert order == [["cpu", "x86", "aurora"], ["x86", "aurora", "cpu"],
                     ["aurora", "cpu", "x86"], ["cpu", "x86", "aurora"]]


def test_alternate_collects_json_per_round_and_failures(tmp_path):
    log = tmp_path / "order"
    script = ("import json, os, sys; open(sys.argv[1], 'a').write(os.environ['L'] + ' ');"
              "sys.exit(3) if os.environ['L'] == 'bad' else print('noise'),"
              " print(json.dumps({'l': os.environ['L']}))")
    runs = [(name, [sys.executable, "-c", script, str(log)], {"L": name})
            for name in ("a", "b", "bad")]
    messages: list[str] = []
    out = _timing.alternate(runs, 2, lock=str(tmp_path / "lock"), log=messages.append)
    assert out["a"] == [{"l": "a"}] * 2 and out["b"] == [{"l": "b"}] * 2
    assert out["bad"] == [None, None]
    assert log.read_text().split() == ["a", "b", "bad", "b", "bad", "a"]
    assert sum("FAILED, rc 3" in m for m in messages) == 2


def test_mapped_unidev_libraries_is_a_list_of_paths():
    libs = _timing.mapped_unidev_libraries()
    assert isinstance(libs, list) and all(isinstance(p, str) for p in libs)


README = """intro
<!-- bench:x86 -->
| old | table |
<!-- /bench:x86 -->
middle
<!-- bench:torch -->
old torch
<!-- /bench:torch -->
end
"""


def test_replace_blocks_replaces_only_named_blocks_and_is_idempotent():
    new = readme_tables.replace_blocks(README, {"x86": "| new | table |\n"})
    assert "| new | table |" in new and "| old | table |" not in new
    assert "old torch" in new and new.startswith("intro\n") and new.endswith("end\n")
    assert "<!-- bench:x86 -->\n\n| new | table |\n\n<!-- /bench:x86 -->" in new
    assert readme_tables.replace_blocks(new, {"x86": "| new | table |"}) == new


@pytest.mark.parametrize("text", [
    "<!-- bench:x86 -->\nno end\n",
    "<!-- bench:x86 -->\n<!-- /bench:x86 -->\n<!-- bench:x86 -->\n<!-- /bench:x86 -->\n",
    "<!-- bench:x86 -->\n<!-- bench:tf -->\n<!-- /bench:x86 -->\n<!-- /bench:tf -->\n",
])
def test_replace_blocks_refuses_bad_markers(text):
    with pytest.raises(ValueError, match="marker"):
        readme_tables.replace_blocks(text, {"x86": "t", "tf": "t"})


def test_readme_tables_check_and_write(tmp_path, monkeypatch, capsys):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "torch_adapter.md").write_text("| torch | new |\n")
    readme = tmp_path / "README.md"
    readme.write_text(README)
    argv = ["readme_tables.py", "--readme", str(readme), "--results", str(tmp_path / "results")]
    monkeypatch.setattr(sys, "argv", [*argv, "--check"])
    assert readme_tables.main() == 1 and readme.read_text() == README
    monkeypatch.setattr(sys, "argv", argv)
    assert readme_tables.main() == 0
    assert "| torch | new |" in readme.read_text() and "| old | table |" in readme.read_text()
    monkeypatch.setattr(sys, "argv", [*argv, "--check"])
    assert readme_tables.main() == 0
    assert "x86 block stays" in capsys.readouterr().err


def _run(device: str, rows: dict[str, float], **extra) -> dict:
    return {"device": device, "rows": {k: {"title": k.upper(), "best_s": v, **extra}
                                       for k, v in rows.items()}}


def test_torch_table_ranges_pair_by_pair():
    import torch_adapter

    runs = {"cpu": [_run("cpu", {"mlp": 0.020}), _run("cpu", {"mlp": 0.030}), None],
            "x86": [_run("avx", {"mlp": 0.010}, fallbacks={"_fused_sgd_": 1}),
                    _run("avx", {"mlp": 0.020}, fallbacks={}), _run("avx", {"mlp": 0.001})]}
    lines = torch_adapter.table(runs, ["x86"], ["mlp"])
    assert lines[0] == "| case | torch CPU (ms) | x86 `avx` (ms) | x86 speed-up |"
    # pairs: 20/10 = 2.0, 30/20 = 1.5; the third pair has no CPU run
    assert lines[2] == "| MLP | 20–30 | 1–20 | 1.50–2.00× |"
    assert torch_adapter.fallback_lines(runs, ["x86"], ["mlp"]) == [
        "- CPU fallbacks per step on x86: mlp: _fused_sgd_ ×1"]


def test_tf_table_device_over_cpu():
    import tf_adapter

    runs = {"cpu": [_run("/device:CPU:0", {"add": 20e-6}), _run("/device:CPU:0", {"add": 25e-6})],
            "x86": [_run("/device:AVX:0", {"add": 30e-6}), _run("/device:AVX:0", {"add": 25e-6})]}
    lines = tf_adapter.table(runs, ["x86"], ["add"])
    assert lines[0] == "| case | TF CPU | AVX (x86) | AVX / TF CPU |"
    assert lines[2] == "| ADD | 20–25 µs | 25–30 µs | 1.00–1.50× |"
    json.dumps(runs)  # the results file is JSON


def test_shown_args_drop_out_and_lock():
    argv = ["--quick", "--out", "/tmp/x", "--lock=/tmp/l", "--rows", "mlp", "--lock", "f"]
    assert _timing.shown_args(argv) == "--quick --rows mlp"


def test_sig3_never_an_exponent():
    assert [_timing.sig3(v) for v in (1.2345, 45.67, 789.4, 3364.0)] == ["1.23", "45.7", "789",
                                                                        "3364"]
    assert _timing.fmt_range([440.2, 3364.0], _timing.sig3) == "440–3364"
