"""The TensorFlow adapter with the real TensorFlow: devices, ops, Keras training, failures."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from unidev.adapters.tensorflow import build, ops
from unidev.core import discovery, opset

HERE = Path(__file__).resolve().parent
KERNELS = Path(build.__file__).resolve().parent / "csrc" / "kernels.cc"


def test_op_table_matches_the_op_set():
    assert ops.check() == []
    text = ops.generate()
    for op in ops.TF_OPS:
        assert f'"{op.tf}"' in text
    assert len({op.tf for op in ops.TF_OPS}) == len(ops.TF_OPS)


def test_attributes_set_in_kernels_exist_in_the_op_set():
    src = KERNELS.read_text()
    chains = re.findall(r"Attrs\(OP_(\w+)\)((?:\s*\.\w+\(\"\w+\"[^;]*?\))+)", src)
    assert len(chains) > 5
    for op, chain in chains:
        for name in re.findall(r"\.(?:i|f|b|s|ints)\(\"(\w+)\"", chain):
            assert name in opset.get(op).attr_names, (op, name)
    for op in ("conv2d", "conv2d_backward_input", "conv2d_backward_weight"):
        assert {"stride", "padding", "dilation", "groups"} <= set(opset.get(op).attr_names)
    for op in ("max_pool2d", "max_pool2d_backward", "avg_pool2d", "avg_pool2d_backward"):
        assert {"kernel_size", "stride", "padding", "ceil_mode"} <= set(opset.get(op).attr_names)


def test_adapter_modules_do_not_import_tensorflow():
    code = ("import sys, unidev, unidev.adapters.tensorflow.build, "
            "unidev.adapters.tensorflow.status, unidev.demos.tf_demo; "
            "unidev.adapters.tensorflow.status.summary(); "
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.fixture(scope="session")
def installed() -> dict[str, str]:
    """Build and install the adapters (as `unidev build tensorflow` does); tf_type -> plugin."""
    if build.tf_install() is None:
        pytest.skip("tensorflow is not installed")
    msgs = build.build()
    assert not [m for m in msgs if "failed" in m or "not built" in m], msgs
    types = {r.spec.tf_type: r.name for r in discovery.discover() if r.usable}
    if not types:
        pytest.skip("no usable unidev plugin")
    return types


def env_for(tf_type: str, log_level: str = "2") -> dict:
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL=log_level, VESIM_DEVICES="2")


def scenario(*args: str, env: dict, timeout: int = 600) -> dict:
    res = subprocess.run([sys.executable, str(HERE / "scenario.py"), *args], env=env,
                         capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    assert res.returncode == 0 and lines, res.stderr[-3000:]
    return json.loads(lines[-1][7:])


TYPES = [r.spec.tf_type for r in discovery.discover() if r.usable and r.spec]


@pytest.mark.parametrize("tf_type", TYPES)
def test_ops_errors_oom_and_devices(installed, tf_type):
    res = scenario("ops", tf_type, env=env_for(tf_type))
    bad = {}
    for name, case in res["cases"].items():
        tol = 1e-3 if name.startswith(("conv", "tf_function")) else 1e-5
        if "error" in case or case["diff"] > tol or f"device:{tf_type}:0" not in case["device"]:
            bad[name] = case
    assert not bad, bad
    for name, want in [("broadcast", "AddV2 on"), ("matmul", "MatMul on"),
                       ("label", "label value of 7"), ("label64", "label value of -3")]:
        assert res["errors"][name].startswith("InvalidArgumentError") and want in \
            res["errors"][name], res["errors"][name]
    # tf.constant on the device: the adapter's kernel takes the host value and copies it itself
    # (TF's default kernel would copy through its EventMgr, ~10x slower); float32 at least
    assert [1, ["input"]] in res["eager_const"], res["eager_const"]
    assert res["addv2_priorities"] == [0, 1], res["addv2_priorities"]
    assert res["cast_from_int32"] and all(h == ["x"] for h in res["cast_from_int32"])
    assert res["oom"].startswith("ResourceExhaustedError"), res["oom"]
    assert res["after_oom"] == 1000.0
    assert res["memory"]["peak"] > 0
    assert res["keras_jit"] is False and len(res["keras_default_fit"]) == 1
    assert res["variables"]["v"] == pytest.approx([i + 0.4 for i in range(6)])
    assert res["variables"]["step"] == 5 and tf_type in res["variables"]["device"]
    if res["devices"] > 1:
        assert res["second_device"]["value"] == [4.0, 7.0]
        assert res["second_device"]["device"].endswith(f"{tf_type}:1")


TRAIN_OPS = {"mlp": {"MatMul", "BiasAdd", "BiasAddGrad", "ReluGrad", "Softmax",
                     "SparseSoftmaxCrossEntropyWithLogits"},
             "cnn": {"Conv2D", "Conv2DBackpropFilter", "MaxPool", "MaxPoolGrad", "AvgPool",
                     "AvgPoolGrad", "Mean", "SquaredDifference", "Rsqrt"}}


def check_training(result: dict, device: str, variant: str) -> None:
    kind, opt = variant.split("-")
    loss_tol, weight_tol = (1e-4, 1e-4) if opt == "sgd" else (1e-3, 3e-3)
    cpu, dev = result["cpu"], result[device]
    assert dev["losses"] == pytest.approx(cpu, rel=loss_tol), (cpu, dev["losses"])
    assert dev["max_weight_diff"] < weight_tol
    place = dev["placement"]
    assert place["fallback"] == [], place
    assert TRAIN_OPS[kind] | {"AssignAddVariableOp"} <= set(place["device_ops"]), place


def run_training(tf_type: str, variants: str) -> None:
    # the placement log is TF's INFO output
    res = scenario("train", tf_type, variants, env=env_for(tf_type, log_level="0"))
    for variant, result in res.items():
        check_training(result, f"/device:{tf_type}:0", variant)


@pytest.mark.parametrize("tf_type", TYPES)
def test_keras_training_matches_cpu(installed, tf_type):
    run_training(tf_type, "mlp-sgd,cnn-adam")


@pytest.mark.slow
@pytest.mark.parametrize("tf_type", TYPES)
def test_keras_training_other_optimizers(installed, tf_type):
    run_training(tf_type, "mlp-adam,cnn-sgd")


def test_broken_and_duplicate_adapters_never_abort(installed, tmp_path):
    """A plugin whose library vanished after the build, and a second copy of an installed
    adapter: TF imports, warns, and registers neither."""
    from unidev.core.spec import PluginSpec

    tf = build.tf_install()
    ghost = discovery.PluginRecord(name="ghost", source="test", status="ok", spec=PluginSpec(
        name="ghost", library=str(tmp_path / "gone" / "libghost.so"), tf_type="GHOST"))
    folder = tmp_path / "plugins"
    folder.mkdir()
    lib = build.build_plugin(tf, ghost, tmp_path / "none.so")
    (folder / "libghost.so").write_bytes(lib.read_bytes())
    name = next(iter(installed.values()))
    (folder / "dup.so").write_bytes((build.plugin_dir(tf) / build.library_name(name)).read_bytes())
    code = ("import tensorflow as tf; "
            "print([d.device_type for d in tf.config.list_physical_devices()])")
    env = dict(os.environ, TF_PLUGGABLE_DEVICE_LIBRARY_PATH=str(folder), TF_CPP_MIN_LOG_LEVEL="2")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "GHOST" not in res.stdout
    assert "TensorFlow device GHOST is disabled: cannot load" in res.stderr
    assert "ignoring a second TensorFlow adapter" in res.stderr


def test_status_lines_after_build(installed):
    from unidev.adapters.tensorflow import status

    lines = status.summary()
    for tf_type, name in installed.items():
        assert any(f"{tf_type}:0 ({name}): installed, current" in ln for ln in lines), lines


@pytest.mark.slow
def test_demo_trains_on_every_device(installed):
    res = subprocess.run([sys.executable, "-c",
                          "from unidev.demos import tf_demo as demo; demo.run(None)"],
                         env=env_for("", log_level="0"), capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "fallbacks of compute ops: none" in res.stdout, res.stdout
