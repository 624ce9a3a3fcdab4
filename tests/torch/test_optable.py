"""The aten → unidev table agrees with the op set, torch's schemas and what C++ registered."""

from __future__ import annotations

import torch

import unidev.torch as ut
from unidev.adapters.torch import _optable, build
from unidev.contract import opset


def _schema(aten: str):
    base, _, overload = aten.partition(".")
    return torch._C._get_schema(f"aten::{base}", overload)


def test_every_unidev_op_is_in_the_op_set():
    for aten, op, _ in _optable.TABLE:
        assert op in opset.OPS, f"{aten} maps to unknown unidev op {op!r}"
    assert set(_optable.INTERNAL) <= set(opset.OPS)


def test_every_aten_overload_exists_in_torch():
    for aten, _, _ in _optable.TABLE:
        _schema(aten)


def test_rows_are_unique_and_kinds_consistent():
    names = [a for a, _, _ in _optable.TABLE]
    assert len(names) == len(set(names))
    arity = {}
    for aten, _, kind in _optable.TABLE:  # one C++ template per kind: same argument count
        n = len(_schema(aten).arguments)
        assert arity.setdefault(kind, n) == n, f"{aten}: kind {kind} has {arity[kind]} args"


def test_generated_header_holds_only_the_rows():
    # ids, attributes and dtypes come from the contract's ops.h; the adapter's header maps rows
    header = build.generate_header()
    assert "#include <unidev/ops.h>" in header
    for aten, op, _ in _optable.TABLE:
        assert f'{{"{aten}", UD_OP_{op.upper()}}},' in header
    assert "AttrDef" not in header and "kDTypeNames" not in header


def test_every_kind_is_registered_by_exactly_one_file():
    files = [k for kinds in _optable.FILES.values() for k in kinds]
    assert len(files) == len(set(files))
    assert set(files) == {kind for _, _, kind in _optable.TABLE}
    for file in _optable.FILES:
        source = (build.CSRC / "aten" / f"{file}.cpp").read_text()
        assert f"UD_TORCH_REGISTER(UD_TORCH_ROWS_{file.upper()})" in source, file
        for kind in _optable.FILES[file]:
            assert f" k_{kind}(" in source, (file, kind)


def test_every_source_file_is_compiled_once():
    compiled = [f for files in build.UNITS.values() for f in files]
    on_disk = sorted(p.relative_to(build.CSRC).as_posix() for p in build.CSRC.rglob("*.cpp"))
    assert sorted(compiled) == on_disk


def test_cpp_registered_exactly_the_table(dev):
    registered = set(ut.registered_ops())
    assert {a for a, _, _ in _optable.TABLE} <= registered


def test_optimizer_foreach_ops_need_no_kernel(dev):
    # torch serves _foreach_ ops on any device with its per-tensor loops (CompositeExplicit-
    # Autograd), which call the mapped ops; the training tests check that none falls back
    for name in ("_foreach_add_.List", "_foreach_mul_.Scalar", "_foreach_addcdiv_.ScalarList",
                 "_foreach_lerp_.Scalar", "_foreach_sqrt", "_foreach_zero_", "_foreach_copy_"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}",
                                                              "CompositeExplicitAutograd"), name
    ut.reset_fallbacks()
    xs = [torch.ones(3, device=dev) for _ in range(2)]
    torch._foreach_addcdiv_(xs, xs, xs, [0.5, 0.5])
    torch._foreach_lerp_(xs, torch._foreach_sqrt(xs), 0.25)
    assert torch.allclose(xs[0].cpu(), torch.full((3,), 1.5 + 0.25 * (1.5 ** 0.5 - 1.5)))
    assert ut.fallback_report() == {}


def test_build_cache_is_keyed_by_source_hash(dev, tmp_path, monkeypatch):
    assert build.cached() is not None  # the library this process loaded
    edited = tmp_path / "loader.cpp"
    edited.write_text(build.SOURCES[1].read_text() + "\n// an edit\n")
    monkeypatch.setattr(build, "SOURCES", [build.SOURCES[0], edited, *build.SOURCES[2:]])
    assert build.cached() is None  # a changed source is never served from the cache
