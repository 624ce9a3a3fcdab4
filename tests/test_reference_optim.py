"""The optimizer steps' numpy reference against torch CPU's fused kernels."""

from __future__ import annotations

import numpy as np
import pytest

from unidev.core import reference
from unidev.core.errors import InvalidArgumentError

torch = pytest.importorskip("torch")

SIZES = [(), (1,), (7,), (37,), (3, 67)]  # below, at and past a vector and a cache line
SGD = [dict(momentum=0.0), dict(momentum=0.9), dict(momentum=0.9, nesterov=True),
       dict(momentum=0.5, dampening=0.3, weight_decay=0.01), dict(momentum=0.9, maximize=True),
       dict(momentum=0.0, weight_decay=0.1, maximize=True)]
ADAM = [dict(), dict(amsgrad=True), dict(weight_decay=0.1), dict(weight_decay=0.1, amsgrad=True),
        dict(maximize=True, beta1=0.5, beta2=0.9, eps=1e-3), dict(beta1=0.2, amsgrad=True)]
# float64 agrees to the last bits; float32 within a few ulps (torch's vector kernels fuse
# multiply-adds, numpy rounds every step)
TOL = {"float32": dict(rtol=1e-5, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-14)}


def _arrays(shape, dtype, n, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for _ in range(n)]


def _close(ours, theirs, dtype):
    for a, t in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, t.numpy(), **TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SIZES, ids=str)
@pytest.mark.parametrize("cfg", SGD, ids=str)
@pytest.mark.parametrize("amp", [False, True])
def test_sgd_update_matches_torch_fused(dtype, shape, cfg, amp):
    p, b = _arrays(shape, dtype, 2, 0)
    tp, tb = torch.from_numpy(p.copy()), torch.from_numpy(b.copy())
    scale = torch.tensor(0.5) if amp else None
    for step in range(3):
        (g,) = _arrays(shape, dtype, 1, step + 1)
        tg = torch.from_numpy(g.copy())
        mom = cfg["momentum"] != 0
        first = mom and step == 0
        attrs = dict(cfg, lr=0.1, first_step=first)
        reference.run("sgd_update", [p, g, b if mom else None,
                                     None if scale is None else scale.numpy(),
                                     np.zeros(1, "float32") if amp else None], attrs)
        torch._fused_sgd_([tp], [tg], [tb] if mom else [],
                          weight_decay=cfg.get("weight_decay", 0.0), momentum=cfg["momentum"],
                          lr=0.1, dampening=cfg.get("dampening", 0.0),
                          nesterov=cfg.get("nesterov", False), maximize=cfg.get("maximize", False),
                          is_first_step=first, grad_scale=scale,
                          found_inf=torch.zeros(()) if amp else None)
        _close([p, g] + ([b] if mom else []), [tp, tg] + ([tb] if mom else []), dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SIZES, ids=str)
@pytest.mark.parametrize("cfg", ADAM, ids=str)
@pytest.mark.parametrize("adamw", [False, True])
def test_adam_update_matches_torch_fused(dtype, shape, cfg, adamw):
    p, = _arrays(shape, dtype, 1, 0)
    m, v, vmax = (np.zeros(shape, dtype) for _ in range(3))
    tp, tm, tv, tvmax = (torch.from_numpy(a.copy()) for a in (p, m, v, vmax))
    amsgrad = cfg.get("amsgrad", False)
    ours = {k: cfg[k] for k in ("beta1", "beta2", "eps", "weight_decay", "maximize") if k in cfg}
    fn = torch._fused_adamw_ if adamw else torch._fused_adam_
    tstep = torch.zeros(())
    for step in range(1, 4):
        (g,) = _arrays(shape, dtype, 1, step)
        tg = torch.from_numpy(g.copy())
        tstep += 1
        reference.run("adam_update", [p, g, m, v, vmax if amsgrad else None,
                                      tstep.numpy().reshape(1)],
                      dict(ours, lr=0.01, decoupled=adamw))
        fn([tp], [tg], [tm], [tv], [tvmax] if amsgrad else [], [tstep], lr=0.01,
           beta1=cfg.get("beta1", 0.9), beta2=cfg.get("beta2", 0.999),
           weight_decay=cfg.get("weight_decay", 0.0), eps=cfg.get("eps", 1e-8), amsgrad=amsgrad,
           maximize=cfg.get("maximize", False))
        _close([p, m, v] + ([vmax] if amsgrad else []), [tp, tm, tv] + ([tvmax] if amsgrad else []),
               dtype)


def test_found_inf_skips_the_step_and_step_attribute_stands_for_state_step():
    p, g, m, v = _arrays((5,), "float32", 4, 3)
    v = np.abs(v)
    before = [a.copy() for a in (p, g, m, v)]
    reference.run("adam_update", [p, g, m, v, None, None, np.ones(1, "float32") * 2,
                                  np.ones(1, "float32")], {})
    for a, b in zip((p, g, m, v), before, strict=True):
        np.testing.assert_array_equal(a, b)
    one = [a.copy() for a in before]
    reference.run("adam_update", one + [None, np.full(1, 5.0)], {"weight_decay": 0.1})
    two = [a.copy() for a in before]
    reference.run("adam_update", two, {"weight_decay": 0.1, "step": 5.0})
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a, b)


def test_tf_forms():
    """ApplyKerasMomentum (lr_in_momentum) and ApplyAdam (no bias correction, lr folded)."""
    p, g, acc = _arrays((9,), "float64", 3, 4)
    want_acc = acc * 0.9 - g * 0.1
    want_p = p + want_acc * 0.9 - g * 0.1  # nesterov
    reference.run("sgd_update", [p, g, acc], dict(lr=0.1, momentum=0.9, nesterov=True,
                                                  lr_in_momentum=True))
    np.testing.assert_allclose(acc, want_acc, rtol=1e-14)
    np.testing.assert_allclose(p, want_p, rtol=1e-14)
    p, g, m = _arrays((9,), "float64", 3, 5)
    v = np.abs(m)
    b1p, b2p, lr = 0.9 ** 3, 0.999 ** 3, 0.01
    lr_t = lr * np.sqrt(1 - b2p) / (1 - b1p)
    m2 = m + (g - m) * 0.1
    v2 = v + (g * g - v) * 0.001
    want = p - lr_t * m2 / (np.sqrt(v2) + 1e-7)
    reference.run("adam_update", [p, g, m, v], dict(lr=lr_t, eps=1e-7, bias_correction=False))
    np.testing.assert_allclose(p, want, rtol=1e-13)


def test_bad_inputs_name_the_op_and_argument():
    p, g = _arrays((4,), "float32", 2, 0)
    with pytest.raises(InvalidArgumentError, match="sgd_update.*momentum_buffer"):
        reference.run("sgd_update", [p, g], {"momentum": 0.9})
    with pytest.raises(InvalidArgumentError, match="adam_update.*'grad'.*float64"):
        reference.run("adam_update", [p, g.astype("float64"), p.copy(), p.copy()], {})
