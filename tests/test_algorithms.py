"""unidev.algorithms without a framework: plugin listings, selectors, autotune, composites, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import unidev
import unidev.algorithms as ua
from unidev import ops
from unidev.core import reference

CONV = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)


def _layer(plugin, **kw) -> ua.Layer:
    base = dict(name="conv", index=0, in_channels=8, out_channels=8, kernel=(3, 3),
                padding=(1, 1), device=plugin, input_shape=(2, 8, 7, 7))
    base.update(kw)
    return ua.Layer(**base)


def _inputs(op, plugin, rng, dtype="float32"):
    x = rng.standard_normal((2, 8, 7, 7)).astype(dtype)
    w = rng.standard_normal((8, 8, 3, 3)).astype(dtype)
    gy = rng.standard_normal((2, 8, 7, 7)).astype(dtype)
    host = {"conv2d": [x, w], "conv2d_backward_input": [gy, w],
            "conv2d_backward_weight": [gy, x]}[op]
    extra = {"conv2d": {}, "conv2d_backward_input": {"input_shape": x.shape},
             "conv2d_backward_weight": {"weight_shape": w.shape}}[op]
    return host, [unidev.DeviceArray.from_numpy(h, plugin) for h in host], {**CONV, **extra}


def test_every_plugin_lists_its_conv_algorithms():
    want = {"x86": {"onednn", "direct", "im2col", "winograd"}, "aurora": {"im2col", "direct"},
            "arm64": {"direct", "im2col", "winograd"}, "cuda": {"cudnn", "direct", "im2col"}}
    for name, names in want.items():
        try:
            table = ua.algorithms(name)
        except unidev.PluginLoadError:
            continue  # not installed here
        assert set(table) == set(ua.CONV_OPS), name
        for op in ua.CONV_OPS:
            assert {s.name for s in table[op]} == names, (name, op)
            assert all(s.plugin == name and s.description for s in table[op])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ua.DIRECTIONS)
def test_each_listed_algorithm_runs_and_matches_the_reference(plugin, op, dtype):
    rng = np.random.default_rng(0)
    host, dev_in, attrs = _inputs(op, plugin, rng, dtype)
    want = reference.run(op, [h.astype(np.float64) for h in host], attrs)[0]
    layer = _layer(plugin, dtype=dtype)
    for spec in ua.algorithms(plugin, op)[op]:
        reason = ua.why_not(spec, layer)
        if reason is not None:  # onednn on float64: the kernel must refuse it too
            with pytest.raises((unidev.UnsupportedError, unidev.InvalidArgumentError)):
                ops.call(op, *dev_in, algorithm=spec.name, **attrs)
            continue
        got = ops.call(op, *dev_in, algorithm=spec.name, **attrs).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=spec.name)


def test_declared_rules_match_what_the_kernel_refuses(plugin):
    """Winograd's rule (3x3, stride 1, dilation 1) is the x86 kernel's: a 5x5 stride-2 layer is
    refused at selection time and, called anyway, by the kernel."""
    if "winograd" not in {s.name for s in ua.algorithms(plugin, "conv2d")["conv2d"]}:
        pytest.skip(f"{plugin} has no winograd")
    layer = _layer(plugin, kernel=(5, 5), stride=(2, 2), name="features.3", index=3)
    with pytest.raises(ua.AlgorithmError, match=r"layer 3 'features.3' .*kernel 5x5, stride "
                       r"2x2.*'winograd' of conv2d on plugin 'x86'.*needs kernel 3x3, got 5x5"):
        ua.resolve("winograd", [layer], "conv2d", plugin)
    x = unidev.DeviceArray.from_numpy(np.ones((1, 8, 9, 9), np.float32), plugin)
    w = unidev.DeviceArray.from_numpy(np.ones((8, 8, 5, 5), np.float32), plugin)
    with pytest.raises(unidev.InvalidArgumentError, match="winograd"):
        ops.conv2d(x, w, stride=(2, 2), algorithm="winograd")


def test_selectors_resolve_and_bad_ones_name_the_layer(plugin):
    layers = [_layer(plugin, name=f"c{i}", index=i) for i in range(3)]
    names = [s.name for s in ua.algorithms(plugin, "conv2d")["conv2d"]]
    assert ua.resolve(names[0], layers, "conv2d", plugin) == [names[0]] * 3
    assert ua.resolve(["auto", "autotune", names[-1]], layers, "conv2d", plugin) == \
        ["auto", "autotune", names[-1]]
    assert ua.resolve(lambda layer: names[layer.index % len(names)], layers, "conv2d",
                      plugin) == [names[i % len(names)] for i in range(3)]
    with pytest.raises(ua.AlgorithmError, match=r"list of 2 names but the model has 3"):
        ua.resolve(["auto", "auto"], layers, "conv2d", plugin)
    with pytest.raises(ua.AlgorithmError, match=r"layer 1 'c1'.*gave None \(NoneType\)"):
        ua.resolve(lambda layer: "auto" if layer.index != 1 else None, layers, "conv2d", plugin)
    with pytest.raises(ua.AlgorithmError, match=r"layer 0 'c0'.*raised ZeroDivisionError"):
        ua.resolve(lambda layer: str(1 / 0), layers, "conv2d", plugin)
    with pytest.raises(ua.AlgorithmError, match=r"layer 2 'c2'.*unknown algorithm 'fast' for "
                       r"conv2d on plugin .*known: auto, autotune, "):
        ua.resolve(["auto", "auto", "fast"], layers, "conv2d", plugin)
    with pytest.raises(ua.AlgorithmError, match="selector is a int"):
        ua.resolve(3, layers, "conv2d", plugin)
    assert ua.directions("im2col") == dict.fromkeys(ua.DIRECTIONS, "im2col")
    assert ua.directions({"conv2d": "direct", "conv2d_backward_weight": "auto"}) == {
        "conv2d": "direct", "conv2d_backward_input": "direct", "conv2d_backward_weight": "auto"}


def test_a_plugin_without_the_hook_offers_only_auto(testdev):
    assert ua.algorithms(testdev) == {}
    layer = _layer(testdev)
    assert ua.resolve("auto", [layer], "conv2d", testdev) == ["auto"]
    with pytest.raises(ua.AlgorithmError, match="known: auto, autotune$"):
        ua.resolve("im2col", [layer], "conv2d", testdev)


def test_autotune_times_verifies_and_persists(plugin, tmp_path, monkeypatch):
    monkeypatch.setenv("UNIDEV_CACHE_DIR", str(tmp_path))
    ua.tune._memo.clear()
    layer = _layer(plugin, input_shape=(2, 8, 10, 10))
    chosen = {op: ua.autotune(layer, op, reps=3) for op in ua.DIRECTIONS}
    data = json.loads((tmp_path / "autotune" / "decisions.json").read_text())
    assert len(data) == 3
    for rec in data.values():
        assert rec["best"] == chosen[rec["op"]] == min(rec["ms"], key=rec["ms"].get)
        assert set(rec["ms"]) | set(rec["refused"]) == set(ua.candidates(layer, rec["op"])[0])
        assert rec["plugin"] == plugin and rec["input_shape"] == [2, 8, 10, 10]
        assert rec["auto_ms"] > 0
    ua.tune._memo.clear()  # as a new process would: only the file remembers
    monkeypatch.setattr(ua.tune, "_time", lambda *a: pytest.fail("re-timed a cached decision"))
    assert {op: ua.autotune(layer, op) for op in ua.DIRECTIONS} == chosen
    other = _layer(plugin, input_shape=(1, 8, 10, 10))  # another shape: another key
    with pytest.raises(pytest.fail.Exception, match="re-timed"):
        ua.autotune(other, "conv2d")
    with pytest.raises(ua.AlgorithmError, match="needs the layer's input shape"):
        ua.autotune(_layer(plugin, input_shape=None), "conv2d")


def test_autotune_refuses_a_wrong_algorithm(plugin, tmp_path, monkeypatch):
    monkeypatch.setenv("UNIDEV_CACHE_DIR", str(tmp_path))

    def wrong(x, weight, bias=None, **attrs):
        """fast but wrong: twice the convolution"""
        y = ops.conv2d(x, weight, bias, **attrs)
        return ops.add(y, y)

    ua.register("conv2d", "wrong", wrong)
    ua.tune._memo.clear()
    try:
        layer = _layer(plugin, input_shape=(2, 8, 10, 10))
        assert ua.autotune(layer, "conv2d", use_cache=False) != "wrong"
        rec = next(iter(ua.tune._memo.values()))
        assert "wrong" in rec["refused"] and "reference" in rec["refused"]["wrong"]
    finally:
        ua.unregister("conv2d", "wrong")
        ua.tune._memo.clear()


def test_register_checks_its_arguments(plugin):
    ua.algorithms(plugin)  # the plugin's names are known
    with pytest.raises(ua.AlgorithmError, match="op 'matmul' has no algorithm choice"):
        ua.register("matmul", "x", lambda *a: None)
    with pytest.raises(ua.AlgorithmError, match="fn is a str"):
        ua.register("conv2d", "x", "not callable")
    with pytest.raises(ua.AlgorithmError, match="already has an algorithm of that name"):
        ua.register("conv2d", "direct", lambda *a: None)
    with pytest.raises(ua.AlgorithmError, match="other than 'auto'"):
        ua.register("conv2d", "auto", lambda *a: None)
    with pytest.raises(ua.AlgorithmError, match="unknown rule"):
        ua.AlgorithmSpec("x", "y", requires={"shape": 1})


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "unidev", *args], capture_output=True,
                          text=True, timeout=120, env=env)


def test_cli_info_algorithms_and_autotune_report(plugin, tmp_path):
    out = _cli("info", plugin, "--algorithms")
    assert out.returncode == 0, out.stderr
    assert "conv2d, conv2d_backward_input, conv2d_backward_weight, conv2d_bias_act:" in out.stdout
    assert "im2col" in out.stdout and "direct" in out.stdout
    if plugin == "x86":
        assert "kernel 3x3, stride 1x1, dilation 1x1" in out.stdout and "float32" in out.stdout
    env = dict(os.environ, UNIDEV_CACHE_DIR=str(tmp_path))
    empty = _cli("autotune", "report", env=env)
    assert empty.returncode == 0 and ": 0" in empty.stdout, empty.stderr
    code = ("import unidev.algorithms as ua, sys; L = ua.Layer('l', 0, 4, 4, (3, 3), "
            f"device='{plugin}', input_shape=(1, 4, 6, 6)); print(ua.autotune(L, 'conv2d'));"
            "print('torch' in sys.modules)")
    tuned = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120)
    assert tuned.returncode == 0 and tuned.stdout.split()[1] == "False", tuned.stderr
    png = tmp_path / "chart.png"
    report = _cli("autotune", "report", "--png", str(png), env=env)
    assert report.returncode == 0, report.stderr
    assert "1x4x6x6" in report.stdout and tuned.stdout.split()[0] in report.stdout
    assert png.stat().st_size > 1000
    cleared = _cli("autotune", "clear", env=env)
    assert "forgot 1" in cleared.stdout
