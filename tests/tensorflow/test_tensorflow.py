"""The TensorFlow adapter with the real TensorFlow: devices, ops, Keras training, failures."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from unidev.adapters.tensorflow import build, ops
from unidev.contract import opset
from unidev.core import discovery

HERE = Path(__file__).resolve().parent
CSRC = Path(build.__file__).resolve().parent / "csrc"


def test_op_table_matches_the_op_set():
    assert ops.check() == []
    text = ops.generate()
    for op in ops.TF_OPS:
        assert f'"{op.tf}"' in text
    assert len({op.tf for op in ops.TF_OPS}) == len(ops.TF_OPS)


def test_every_handler_is_registered_by_one_family():
    src = "".join(p.read_text() for p in sorted(CSRC.glob("*.cc")))
    registered = re.findall(r'handler\("(\w+)"', src)
    assert sorted(registered) == sorted(set(registered)), "a handler registered twice"
    assert {op.handler for op in ops.TF_OPS} <= set(registered)
    for path in CSRC.iterdir():  # split by concept: no file over ~500 lines
        assert len(path.read_text().splitlines()) <= 520, path.name


def test_attributes_set_in_kernels_exist_in_the_op_set():
    src = "".join(p.read_text() for p in sorted(CSRC.glob("*.cc")))
    chains = re.findall(r"Attrs\(UD_OP_(\w+)\)((?:\s*\.\w+\(\"\w+\"[^;]*?\))+)", src)
    assert len(chains) > 5
    for op, chain in chains:
        for name in re.findall(r"\.(?:i|f|b|s|ints)\(\"(\w+)\"", chain):
            assert name in opset.get(op.lower()).attr_names, (op, name)
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


def run_json(script: str, *args: str, env: dict, timeout: int = 600) -> dict:
    res = subprocess.run([sys.executable, str(HERE / script), *args], env=env,
                         capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    assert res.returncode == 0 and lines, res.stderr[-3000:]
    return json.loads(lines[-1][7:])


@pytest.fixture(scope="session")
def cpu_results(installed) -> dict:
    """every_op.py on /CPU:0 with the adapters loaded, on TF's own (Eigen) CPU kernels: with
    oneDNN on, on machines with AVX-512, TF CPU aborts the process in its oneDNN
    Conv2DBackpropInput on a negative input size instead of refusing it (conv_bi_negative)."""
    return run_json("every_op.py", "/CPU:0", env=dict(env_for(""), TF_ENABLE_ONEDNN_OPTS="0"))


def error_of(case) -> str | None:
    return case["error"] if isinstance(case, dict) else None


def assert_same(want: dict, got: dict, known=lambda name, case: False, tol: float = 1e-5) -> None:
    """Same values (within `tol`, relative to the magnitude) or the same error class."""
    bad = {}
    for name, w in want.items():
        g = got[name]
        if error_of(w) or error_of(g):
            if error_of(w) != error_of(g) and not known(name, g):
                bad[name] = (w, g)
            continue
        for a, b in zip(w, g, strict=True):
            a, b = np.asarray(a), np.asarray(b)
            if a.shape != b.shape or np.max(np.abs(a - b), initial=0) > tol * (
                    1 + np.max(np.abs(a), initial=0)):
                bad[name] = (w, g)
    assert not bad, bad


def test_every_registered_op_runs_on_cpu_with_the_adapter(installed, cpu_results):
    """Registering a device kernel must never break the op elsewhere (LogicalAnd's kernel
    constrained an attribute the op does not have: the op failed on every device, CPU too)."""
    assert cpu_results["registrations"] == []
    assert set(installed) <= set(cpu_results["types"])
    base = run_json("every_op.py", "/CPU:0", env=dict(env_for(""), TF_ENABLE_ONEDNN_OPTS="0",
                                                      UNIDEV_DISABLE_PLUGIN_AUTOLOAD="1"))
    assert base["types"] == [] and base["registrations"] == []
    for section in ("ops", "bad", "windows"):
        assert_same(base[section], cpu_results[section], tol=0)
    for name in ("LogicalAnd:bool", "LogicalOr:bool", "LogicalNot:bool"):
        assert not error_of(cpu_results["ops"][name]), cpu_results["ops"][name]


def asymmetric_pooling(name: str, case) -> bool:
    # the device refuses pooling whose asymmetric SAME padding its ceil_mode cannot express
    return error_of(case) == "UnimplementedError" and "asymmetric SAME" in case["message"]


@pytest.mark.parametrize("tf_type", TYPES)
def test_every_registered_op_and_bad_input_matches_cpu(installed, cpu_results, tf_type):
    """Every op of the table on the device against TF CPU; wrong variable-update shapes (the
    message once read device memory: AURORA segfaulted), negative or overflowing shapes (TF
    aborted in its shape check) and conv/pool window attributes (batch and depth strides were
    ignored) raise TF CPU's error class, naming the op."""
    dev = run_json("every_op.py", f"/device:{tf_type}:0", env=env_for(tf_type))
    assert dev["registrations"] == []
    assert_same(cpu_results["ops"], dev["ops"], tol=1e-5)
    assert_same(cpu_results["bad"], dev["bad"])
    assert_same(cpu_results["windows"], dev["windows"], known=asymmetric_pooling, tol=1e-4)
    for case in {**dev["bad"], **dev["windows"]}.values():
        if error_of(case):
            op = case["message"].split("__wrapped__")[1].split("_device_")[0]
            assert f"{op} on {tf_type}" in case["message"] or f"{op}: " in case["message"], case
    windows = dev["windows"]
    assert error_of(windows["Conv2D[1, 1, 1, 2][1, 1, 1, 1]valid"]) == "UnimplementedError"
    assert error_of(windows["MaxPool[2, 2, 2, 1][1, 1, 1, 1]VALID"]) == "UnimplementedError"


def assert_copied(res: dict) -> None:
    for name, case in res["cases"].items():
        assert "error" not in case, (name, case)
        assert case["there"] == case["cpu"] and case["back"] == case["cpu"], (name, case)
        assert [d.rsplit(":", 1)[1] for d in case["devices"]] == ["0", "1", "0"], case


@pytest.mark.parametrize("tf_type", TYPES)
def test_copies_between_two_devices_match_cpu(installed, tf_type):
    """TF copies between two devices of one plugin with memcpy_dtod; a plugin that cannot copy
    across devices is asked which device owns each buffer (mem_device) and the copy goes through
    the host (aurora: VESIM_DEVICES=2)."""
    res = run_json("two_devices.py", tf_type, env=env_for(tf_type))
    if res["devices"] < 2:
        pytest.skip(f"{tf_type} has {res['devices']} device (no switch for more)")
    assert_copied(res)


@pytest.fixture(scope="module")
def shim(installed, tmp_path_factory) -> tuple[dict, list[str]]:
    """abi10_shim.c around a plugin with two devices (else any): ABI 1.0, faults on demand; its
    adapter on TF's path. Returns the environment and two_devices/error_codes arguments."""
    from unidev.kit import include_dir

    multi = [(t, n) for t, n in installed.items()
             if run_json("two_devices.py", t, env=env_for(t))["devices"] > 1]
    name = (multi or [(None, next(iter(installed.values())))])[0][1]
    tmp = tmp_path_factory.mktemp("shim")
    lib = tmp / "libshim.so"
    subprocess.run(["gcc", "-shared", "-fPIC", f'-DUD_SHIM_TARGET="{usable_libraries()[name]}"',
                    f"-I{include_dir()}", str(HERE / "abi10_shim.c"), "-ldl", "-o", str(lib)],
                   check=True, timeout=120)
    folder = adapter_for(tmp, "shim", "SHIM", str(lib))
    env = dict(env_for(""), TF_PLUGGABLE_DEVICE_LIBRARY_PATH=str(folder),
               UNIDEV_PLUGINS="shim", UNIDEV_CACHE_DIR=str(tmp / "cache"))
    return env, ["shim", "SHIM", str(lib)]


def test_abi_1_0_plugin_refusing_a_cross_device_copy_says_why(shim):
    """A 1.0 plugin (no mem_device) loads and computes; a copy between two of its devices that
    it refuses fails as InvalidArgument naming mem_device and ABI 1.1, trying no other stream."""
    env, (name, tf_type, lib) = shim
    res = run_json("two_devices.py", tf_type, name, lib, env=env)
    if res["devices"] < 2:
        pytest.skip("no plugin with two devices")
    copies = {k: v for k, v in res["cases"].items() if not k.endswith("[0]")}  # no bytes: no copy
    for case in copies.values():
        assert case.get("error") == "InvalidArgumentError", case
        assert "mem_device" in case["message"] and "ABI 1.1" in case["message"], case


def tf_class(tf_code: str) -> str:
    return "".join(w.capitalize() for w in tf_code.split("_")) + "Error"


def test_every_plugin_error_code_raises_its_tf_error(shim):
    """A kernel failing with each UD_ErrorCode (the shim's float32 Neg, and AddV2 through the
    variable-op library's same-shape kernel) raises the TF error of errors.py's tf_code: out of
    bounds OutOfRange, an unknown handle InvalidArgument, never Internal for either."""
    from unidev.contract import errors

    env, args = shim
    res = run_json("error_codes.py", f"/device:{args[1]}:0", *args, env=env)
    for e in errors.ERRORS:
        for op in ("Neg", "AddV2"):
            case = res["codes"][f"{op}:{e.code}"]
            assert case.get("error") == tf_class(e.tf_code), (op, e, case)
            assert f"error code {e.code}" in case["message"] and "'x'" in case["message"], case
    assert tf_class(errors.BY_NAME["OUT_OF_BOUNDS"].tf_code) == "OutOfRangeError"


BAD_KINDS = {"broadcast": "InvalidArgumentError", "label": "InvalidArgumentError",
             "huge": "ResourceExhaustedError", "conv_batch_stride": "UnimplementedError"}


@pytest.mark.parametrize("tf_type", TYPES)
def test_bad_inputs_raise_the_tf_error_of_their_kind_as_on_cpu(installed, tf_type):
    """One bad input of each kind reachable through TF's ops (invalid, out of memory,
    unsupported) raises the matching tf.errors class on the device, the one TF CPU raises."""
    dev = run_json("error_codes.py", f"/device:{tf_type}:0", env=env_for(tf_type))["bad"]
    cpu = run_json("error_codes.py", "/CPU:0", env=env_for(tf_type))["bad"]
    for name, want in BAD_KINDS.items():
        assert dev[name].get("error") == want, (name, dev[name])
        assert tf_type in dev[name]["message"] or name == "huge", dev[name]
        if name in cpu:
            assert cpu[name].get("error") == want, (name, cpu[name])


def adapter_for(tmp_path: Path, name: str, tf_type: str, build_time_library: str) -> Path:
    """A folder for TF_PLUGGABLE_DEVICE_LIBRARY_PATH with the adapter of plugin `name`, built
    while discovery said its library was `build_time_library`."""
    from unidev.contract.spec import PluginSpec

    rec = discovery.PluginRecord(name=name, source="test", status="ok", spec=PluginSpec(
        name=name, library=build_time_library, tf_type=tf_type))
    folder = tmp_path / "plugins"
    folder.mkdir(exist_ok=True)
    lib = build.build_plugin(build.tf_install(), rec)
    (folder / f"lib{name}.so").write_bytes(lib.read_bytes())
    return folder


def load_check(env: dict, *plugin: str) -> tuple[dict, str]:
    res = subprocess.run([sys.executable, str(HERE / "load_check.py"), *plugin], env=env,
                         capture_output=True, text=True, timeout=300)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    assert res.returncode == 0 and lines, res.stderr[-3000:]
    return json.loads(lines[-1][7:]), res.stderr


def usable_libraries() -> dict[str, str]:
    return {r.name: os.path.realpath(r.spec.library) for r in discovery.discover()
            if r.usable and r.spec}


def test_plugin_library_is_resolved_through_discovery_at_load(installed, tmp_path):
    """The adapter asks discovery for its plugin's library when TF loads it: one built while
    the plugin lived elsewhere (here: nowhere) serves the library discovery names now."""
    real = usable_libraries()[next(iter(installed.values()))]
    folder = adapter_for(tmp_path, "relocated", "RELOCATED", str(tmp_path / "old" / "lib.so"))
    env = dict(env_for(""), TF_PLUGGABLE_DEVICE_LIBRARY_PATH=str(folder),
               UNIDEV_PLUGINS="relocated")
    res, err = load_check(env, "relocated", "RELOCATED", real)
    assert res["sums"]["RELOCATED"][0] == [4.0, 6.0], (res["sums"], err[-2000:])
    assert res["discovered"] == {"relocated": real}
    assert real in res["maps"]
    # UNIDEV_PLUGINS left only `relocated`: the installed adapters stand down silently
    assert set(res["types"]) == {"CPU", "RELOCATED"}, res["types"]
    assert "is disabled" not in err


def test_autoload_switch_and_allowlist_stop_tensorflow(installed):
    """UNIDEV_DISABLE_PLUGIN_AUTOLOAD=1 leaves TF with no unidev device and no plugin library
    mapped; UNIDEV_PLUGINS keeps only the plugins it names (libraries included)."""
    libs = usable_libraries()
    res, err = load_check(dict(env_for(""), UNIDEV_DISABLE_PLUGIN_AUTOLOAD="1"))
    assert res["types"] == ["CPU"]
    assert not set(libs.values()) & set(res["maps"])
    assert "is disabled" not in err
    tf_type, name = next(iter(installed.items()))
    res, err = load_check(dict(env_for(""), UNIDEV_PLUGINS=name))
    assert res["types"] == ["CPU", tf_type] and res["sums"][tf_type][0] == [4.0, 6.0]
    assert set(libs.values()) & set(res["maps"]) == {libs[name]}
    assert "is disabled" not in err


def test_memory_growth_on_one_device_keeps_the_others(installed):
    """TF keeps one growth setting for all PluggableDevices ("Memory growth cannot differ"):
    set on one unidev device, it must not break the others (the installed startup hook)."""
    if len(installed) < 2:
        pytest.skip("needs two unidev device types")
    code = ("import tensorflow as tf\n"
            "devs = [d for d in tf.config.list_physical_devices() if d.device_type != 'CPU']\n"
            "tf.config.experimental.set_memory_growth(devs[-1], True)\n"
            "print([tf.config.experimental.get_memory_growth(d) for d in devs])\n"
            "for d in devs:\n"
            "    with tf.device(f'/device:{d.device_type}:0'):\n"
            "        print(d.device_type, float(tf.reduce_sum(tf.ones(3) * 2)))\n")
    res = subprocess.run([sys.executable, "-c", code], env=env_for(""), capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = res.stdout.splitlines()
    assert lines[0] == str([True] * len(lines[1:])), res.stdout
    assert all(ln.endswith(" 6.0") for ln in lines[1:]), res.stdout


@pytest.mark.parametrize("tf_type", TYPES)
def test_dropped_models_leave_no_device_memory(installed, tf_type):
    """Variables, traced steps and eager optimizer updates made and dropped again free all their
    device memory. (Keras' compiled train step leaks a little on every device, not ours: TF's
    graph-mode custom_gradient in ReplicaContext.all_reduce keeps each traced FuncGraph alive,
    on TF CPU without unidev too.)"""
    in_use = run_json("memory_check.py", f"/device:{tf_type}:0", env=env_for(tf_type))
    assert in_use[-1] == in_use[1], in_use


def test_crashing_plugins_never_abort_tensorflow(installed, tmp_path, tmp_path_factory,
                                                subprocess_env):
    """Plugins whose native code crashes (in dlopen, device_count, a kernel lookup) or hangs,
    each with an adapter on TF's path: discovery probes them in a child, TF imports, their
    devices are disabled with the probe's verdict, and the installed devices still compute."""
    from wrongplugin import NATIVE_FAULTS, crash_site

    folder = tmp_path / "plugins"
    for name in NATIVE_FAULTS:
        adapter_for(tmp_path, name, name.upper(), str(tmp_path / "unused.so"))
    env = dict(env_for(""), TF_PLUGGABLE_DEVICE_LIBRARY_PATH=str(folder),
               UNIDEV_CACHE_DIR=str(tmp_path / "cache"), UNIDEV_PROBE_TIMEOUT="2")
    env["PYTHONPATH"] = os.pathsep.join([str(crash_site(tmp_path_factory)),
                                         subprocess_env["PYTHONPATH"]])
    res, err = load_check(env)
    assert set(installed) <= set(res["types"]), (res["types"], err[-2000:])
    for tf_type in installed:
        assert res["sums"][tf_type][0] == [4.0, 6.0]
    for name in NATIVE_FAULTS:
        assert name.upper() not in res["types"]
        assert f"TensorFlow device {name.upper()} is disabled: plugin {name} is broken" in err, \
            err[-3000:]


def test_broken_and_duplicate_adapters_never_abort(installed, tmp_path):
    """A plugin whose library is missing, one that is not installed at all, and a second copy
    of an installed adapter: TF imports, warns, and registers none of them."""
    tf = build.tf_install()
    folder = adapter_for(tmp_path, "ghost", "GHOST", str(tmp_path / "gone" / "libghost.so"))
    adapter_for(tmp_path, "absent", "ABSENT", str(tmp_path / "gone" / "libabsent.so"))
    name = next(iter(installed.values()))
    (folder / "dup.so").write_bytes((build.plugin_dir(tf) / build.library_name(name)).read_bytes())
    env = dict(env_for(""), TF_PLUGGABLE_DEVICE_LIBRARY_PATH=str(folder))
    res, err = load_check(env, "ghost", "GHOST", str(tmp_path / "gone" / "libghost.so"))
    assert "GHOST" not in res["types"] and "ABSENT" not in res["types"]
    assert "TensorFlow device GHOST is disabled: plugin ghost is broken: native library not " \
           "found" in err, err[-2000:]
    assert "TensorFlow device ABSENT is disabled: no unidev plugin named 'absent'" in err
    assert "ignoring a second TensorFlow adapter" in err


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


@pytest.mark.parametrize("tf_type", TYPES)
def test_int32_shape_math_and_host_copies_match_cpu(installed, tf_type):
    """int32 shape arithmetic runs on the device (TF's CPU kernels in host memory, so a Keras
    step stays one partition) and copies to and from the device (done on the calling thread,
    not through TF's EventMgr) give what TF CPU gives."""
    want = run_json("host_paths.py", "/CPU:0", env=dict(env_for(""),
                                                         UNIDEV_DISABLE_PLUGIN_AUTOLOAD="1"))
    got = run_json("host_paths.py", f"/device:{tf_type}:0", env=env_for(tf_type))
    for section in ("eager", "function", "copies"):
        for name, w in want[section].items():
            g = got[section][name]
            assert {k: v for k, v in g.items() if k != "device"} == \
                {k: v for k, v in w.items() if k != "device"}, (section, name, w, g)
            if "device" in g and section == "function":  # eager pins small int ops to CPU
                assert g["device"].endswith(f"{tf_type}:0"), (section, name, g)
    assert want["eager"]["bad_gather"]["error"] == "InvalidArgumentError"
    assert all(c["device"].endswith(f"{tf_type}:0") for c in got["copies"].values())


KERAS_STEP_PLACEMENT = """
import json, sys
import numpy as np, tensorflow as tf, keras
from tensorflow.python.eager import context
dev, out = sys.argv[1], {}
for ldt in ("int32", "int64"):
    with tf.device(dev):
        keras.utils.set_random_seed(0)
        m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        m.compile(keras.optimizers.SGD(0.1), jit_compile=False,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        x = tf.constant(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))
        y = tf.constant(np.array([1, 0], ldt))
        ctx = context.context()
        ctx.enable_run_metadata()
        losses = [float(m.train_on_batch(x, y)) for _ in range(3)]
        md = ctx.export_run_metadata()
        ctx.disable_run_metadata()
    step = [g.post_optimization_graph for g in md.function_graphs if any(
        n.op == "SparseSoftmaxCrossEntropyWithLogits" for n in g.post_optimization_graph.node)]
    out[ldt] = {"losses": losses, "graphs": len(step), "off_device": sorted(
        {n.op for g in step for n in g.node if not n.device.endswith(dev.split(":", 1)[1])})}
print("RESULT " + json.dumps(out))
"""


@pytest.mark.parametrize("tf_type", TYPES)
def test_keras_step_is_one_device_partition(installed, tf_type):
    """The fixed cost of a Keras step (issue 16): with int64 labels every node of the traced step
    is on the device (one partition, as on TF CPU); int32 labels add only TF's own host-memory
    `_Arg` on the CPU (a second partition: 50-150 µs a step on 2 cores, which no kernel can
    avoid). Losses equal TF CPU's."""
    def run(dev: str, env: dict) -> dict:
        res = subprocess.run([sys.executable, "-c", KERAS_STEP_PLACEMENT, dev], env=env,
                             capture_output=True, text=True, timeout=600)
        lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
        assert res.returncode == 0 and lines, res.stderr[-3000:]
        return json.loads(lines[-1][7:])
    want = run("/device:CPU:0", dict(env_for(""), UNIDEV_DISABLE_PLUGIN_AUTOLOAD="1"))
    got = run(f"/device:{tf_type}:0", env_for(tf_type))
    for ldt in ("int32", "int64"):
        assert want[ldt]["off_device"] == [] and got[ldt]["graphs"] == 1, (want, got)
        np.testing.assert_allclose(got[ldt]["losses"], want[ldt]["losses"], rtol=1e-5)
    assert got["int64"]["off_device"] == [], got
    assert got["int32"]["off_device"] == ["_Arg"], got
