"""The op set table: consistency, and the generated docs/ops.md kept in step with it."""

from __future__ import annotations

from pathlib import Path

from unidev.contract import dtypes, opset
from unidev.core import shapes

ROOT = Path(__file__).resolve().parent.parent


def test_docs_are_generated_from_the_table():
    assert (ROOT / "docs" / "ops.md").read_text().strip() == opset.markdown().strip(), (
        "docs/ops.md is stale: run `python -c 'from unidev.contract import opset; "
        "print(opset.markdown())' > docs/ops.md`")


def test_tiers_hold_what_the_design_promises():
    names = set(opset.OPS)
    assert {"copy", "fill", "cast", "arange", "zero"} <= {op.name for op in opset.by_tier(0)}
    assert {"matmul", "gemm", "sum", "argmax", "where", "threshold_backward"} <= names
    assert {"conv2d", "conv2d_backward_input", "conv2d_backward_weight", "max_pool2d",
            "batch_norm_backward", "nll_loss_backward", "concat", "pad_constant"} <= names


def test_every_op_is_well_formed():
    for op in opset.OPS.values():
        assert op.shape in shapes.RULES, op.name
        assert op.dtypes and set(op.dtypes) <= set(dtypes.ALL), op.name
        assert op.doc, f"{op.name} has no doc"
        assert len(set(op.attr_names)) == len(op.attrs), op.name
        for out in op.outputs:
            if out.dtype.startswith("attr:"):
                assert out.dtype[5:] in op.attr_names, op.name
            elif out.dtype != "same":
                dtypes.check(out.dtype)
        if op.inputs:
            assert op.inputs[0].dtypes == "same", f"{op.name}: kernels are looked up by input 0"
        for a in op.attrs:
            if a.choices:
                assert a.default in a.choices, (op.name, a.name)


def test_old_import_paths_still_work_for_one_release() -> None:
    """unidev.core.{opset,...} are the contract's modules; unidev.plugins warns and re-exports."""
    import importlib
    import sys
    import warnings

    import unidev.contract.opset
    import unidev.core.opset
    import unidev.kit

    assert unidev.core.opset is unidev.contract.opset
    sys.modules.pop("unidev.plugins", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = importlib.import_module("unidev.plugins")
    assert any(issubclass(w.category, DeprecationWarning) and "unidev.kit" in str(w.message)
               for w in caught)
    assert old.hookimpl is unidev.kit.hookimpl and old.include_dir() == unidev.kit.include_dir()
    assert old.scaffold is importlib.import_module("unidev.kit.scaffold")
