"""The op set: one table defining every unidev op (inputs, outputs, attributes, dtypes, tier).

Conventions every kernel may rely on (unidev.core.shapes.infer and the adapters normalize):
axes attributes are non-negative, sorted and unique (0-d inputs accept axis 0 / -1 and reduce
nothing); pooling strides are filled from kernel_size; stride/padding/dilation have 2 values.
Ops without inputs (fill, zero, arange) take their output shape from the output descriptor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .dtypes import ALL, BOOL, FLOAT, INT, NUMERIC

__all__ = ["Attr", "Input", "Output", "OpSchema", "OPS", "SCALAR_RULES", "get", "by_tier",
           "TIERS", "ACTIVATIONS", "PROGRAM_OPS", "PROGRAM_SOURCES", "PROGRAM_LIMITS",
           "REDUCTIONS"]

# tier 3 holds the transformer-era elementwise ops so far (embedding, layer norm and attention
# come later); tier 4 holds the fused ops
TIERS = (0, 1, 2, 3, 4)


# what a float attribute that stands for a number of the op's dtype must be for integer dtypes
# (Attr.scalar); unidev.ops checks it before any kernel runs, the reference and torch agree
SCALAR_RULES = {
    "value": "a finite number in [{lo}, {hi}] (converted toward zero)",
    "integral": "an integer in [{lo}, {hi}]",
}


@dataclass(frozen=True)
class Attr:
    """An attribute: `type` is one of int, float, bool, str, ints.

    `scalar` marks a float attribute that is a number of the op's tensor dtype (a fill value, an
    integer op's alpha): one of SCALAR_RULES, or "" for a plain attribute.
    """

    name: str
    type: str
    default: Any = None
    choices: tuple = ()
    scalar: str = ""

    def __post_init__(self) -> None:
        assert self.type in ("int", "float", "bool", "str", "ints"), self.type
        assert not self.scalar or (self.scalar in SCALAR_RULES and self.type == "float"), self


@dataclass(frozen=True)
class Input:
    name: str
    optional: bool = False
    variadic: bool = False
    # "same": the op's dtype; otherwise a fixed dtype group (e.g. INT for indices)
    dtypes: tuple | str = "same"
    mutated: bool = False  # updated in place by the kernel (batch_norm's running stats)


@dataclass(frozen=True)
class Output:
    name: str
    # "same": the op's dtype; a dtype name: fixed; "attr:NAME": from a str attribute
    dtype: str = "same"
    # the caller's outputs expand it (elementwise_program's `ys`: as many as the program writes)
    variadic: bool = False


@dataclass(frozen=True)
class OpSchema:
    """One op. `dtypes` are the dtypes of its first input (first output for no-input ops).

    `shape` names the shape rule in unidev.core.shapes that gives output shapes from inputs and
    attributes. `broadcast` marks elementwise ops whose kernels receive inputs pre-broadcast to
    the output shape (stride 0 on broadcast dimensions).
    """

    name: str
    tier: int
    inputs: tuple[Input, ...]
    outputs: tuple[Output, ...]
    attrs: tuple[Attr, ...] = ()
    dtypes: tuple[str, ...] = FLOAT
    shape: str = "same"
    broadcast: bool = False
    doc: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def attr_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attrs)

    def attr(self, name: str) -> Attr:
        for a in self.attrs:
            if a.name == name:
                return a
        raise KeyError(name)


_X = (Input("x"),)
_Y = (Output("y"),)
_XY = (Input("x"), Input("y"))
_BOOL_OUT = (Output("out", "bool"),)
_CONV_ATTRS = (
    Attr("stride", "ints", (1, 1)),
    Attr("padding", "ints", (0, 0)),
    Attr("dilation", "ints", (1, 1)),
    Attr("groups", "int", 1),
    Attr("algorithm", "str", "auto"),
)
_POOL_ATTRS = (
    Attr("kernel_size", "ints", (2, 2)),
    Attr("stride", "ints", ()),  # empty: same as kernel_size
    Attr("padding", "ints", (0, 0)),
)
_AVG_ATTRS = _POOL_ATTRS + (
    Attr("ceil_mode", "bool", False),
    Attr("count_include_pad", "bool", True),
)
_MAX_ATTRS = _POOL_ATTRS + (Attr("dilation", "ints", (1, 1)), Attr("ceil_mode", "bool", False))
_REDUCE_ATTRS = (Attr("axes", "ints", ()), Attr("keepdims", "bool", False))
_REDUCTION = Attr("reduction", "str", "mean", ("none", "mean", "sum"))
_GELU_APPROX = Attr("approximate", "str", "none", ("none", "tanh"))

# tier 4: the activations of the fused conv/gemm epilogues (each also a PROGRAM_OPS token)
ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh", "sigmoid", "tanh", "silu")
_ACTIVATION = Attr("activation", "str", "none", ACTIVATIONS)
REDUCTIONS = ("none", "sum", "mean", "max", "min")

# elementwise_program's operators: token -> arity. Each is an op-set elementwise op with its
# default attributes (PROGRAM_SOURCES says which; the graph layer fuses those calls into a
# program), except silu (x * sigmoid(x)). Compare ops give 1 or 0 in the op's dtype (nan
# compares false except ne); `where` pops cond last: `a b cond where` is (cond != 0 ? a : b).
PROGRAM_OPS: dict[str, int] = {
    "neg": 1, "abs": 1, "exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "reciprocal": 1, "sin": 1,
    "cos": 1, "tanh": 1, "sigmoid": 1, "relu": 1, "gelu": 1, "gelu_tanh": 1, "silu": 1,
    "erf": 1, "floor": 1, "ceil": 1, "round": 1, "sign": 1, "square": 1,
    "add": 2, "sub": 2, "mul": 2, "div": 2, "pow": 2, "maximum": 2, "minimum": 2,
    "eq": 2, "ne": 2, "lt": 2, "le": 2, "gt": 2, "ge": 2,
    "where": 3,
}
# token -> (op-set op, attributes) it stands for; silu has none (x * sigmoid(x))
PROGRAM_SOURCES: dict[str, tuple[str, dict] | None] = {
    **{t: (t, {}) for t in PROGRAM_OPS if t not in ("gelu_tanh", "silu")},
    "gelu_tanh": ("gelu", {"approximate": "tanh"}),
    "silu": None,
}
# what a program may use: the C parser (plugin_kit.h) and the Python one share these
PROGRAM_LIMITS = {
    "max_tokens": 1024,   # tokens in one program
    "max_stack": 64,      # values on the stack at once
    "max_registers": 16,  # s<k> / r<k>: k < 16
    "max_inputs": 64,     # xs
    "max_outputs": 16,    # ys
}


def _unary(name: str, tier: int, dtypes: tuple, doc: str, attrs: tuple = ()) -> OpSchema:
    return OpSchema(name, tier, _X, _Y, attrs, dtypes, "same", True, doc)


def _binary(name: str, dtypes: tuple, doc: str, out=_Y, attrs: tuple = ()) -> OpSchema:
    return OpSchema(name, 1, _XY, out, attrs, dtypes, "broadcast", True, doc)


def _reduce(name: str, dtypes: tuple, doc: str, out=_Y) -> OpSchema:
    return OpSchema(name, 1, _X, out, _REDUCE_ATTRS, dtypes, "reduce", False, doc)


_TABLE: list[OpSchema] = [
    # ---- tier 0: memory ------------------------------------------------------------------
    OpSchema("copy", 0, _X, _Y, (), ALL, "same", True,
             "y = x, from any strides to any strides (y's strides define the layout)."),
    OpSchema("fill", 0, (), (Output("y"),), (Attr("value", "float", 0.0, scalar="value"),), ALL,
             "none", False,
             "Every element of y = value (converted to y's dtype)."),
    OpSchema("zero", 0, (), (Output("y"),), (), ALL, "none", False, "Every element of y = 0."),
    OpSchema("cast", 0, _X, (Output("y", "attr:dtype"),), (Attr("dtype", "str", "float32"),),
             ALL, "same", True,
             "y = x converted to `dtype` (C casts; float to int truncates; to bool is x != 0)."),
    OpSchema("arange", 0, (), (Output("y", "attr:dtype"),),
             (Attr("start", "float", 0.0), Attr("stop", "float", 0.0), Attr("step", "float", 1.0),
              Attr("dtype", "str", "float32")), NUMERIC, "arange", False,
             "y[i] = start + i * step for i < ceil((stop - start) / step)."),
    # ---- tier 1: unary -------------------------------------------------------------------
    _unary("neg", 1, NUMERIC, "y = -x"),
    _unary("abs", 1, NUMERIC, "y = |x|"),
    _unary("exp", 1, FLOAT, "y = e^x"),
    _unary("log", 1, FLOAT, "y = ln x (nan for x < 0, -inf for 0)"),
    _unary("sqrt", 1, FLOAT, "y = sqrt(x)"),
    _unary("rsqrt", 1, FLOAT, "y = 1 / sqrt(x)"),
    _unary("reciprocal", 1, FLOAT, "y = 1 / x"),
    _unary("sin", 1, FLOAT, "y = sin x"),
    _unary("cos", 1, FLOAT, "y = cos x"),
    _unary("tanh", 1, FLOAT, "y = tanh x"),
    _unary("sigmoid", 1, FLOAT, "y = 1 / (1 + e^-x)"),
    _unary("relu", 1, NUMERIC, "y = max(x, 0)"),
    _unary("gelu", 1, FLOAT, "y = x * Phi(x); approximate='tanh' uses the tanh formula",
           (_GELU_APPROX,)),
    _unary("erf", 1, FLOAT, "y = erf x"),
    _unary("floor", 1, FLOAT, "y = floor x"),
    _unary("ceil", 1, FLOAT, "y = ceil x"),
    _unary("round", 1, FLOAT, "y = x rounded half to even"),
    _unary("sign", 1, NUMERIC, "y = -1, 0 or 1 (0 for nan)"),
    _unary("square", 1, NUMERIC, "y = x * x"),
    OpSchema("logical_not", 1, _X, _BOOL_OUT, (), ALL, "same", True, "out = (x == 0)"),
    # ---- tier 1: binary, inputs pre-broadcast ----------------------------------------------
    _binary("add", NUMERIC, "out = x + alpha * y (alpha integral for integer dtypes)",
            (Output("out"),),
            (Attr("alpha", "float", 1.0, scalar="integral"),)),
    _binary("sub", NUMERIC, "out = x - alpha * y (alpha integral for integer dtypes)",
            (Output("out"),),
            (Attr("alpha", "float", 1.0, scalar="integral"),)),
    _binary("mul", NUMERIC + BOOL, "out = x * y", (Output("out"),)),
    _binary("div", FLOAT, "out = x / y (true division)", (Output("out"),)),
    _binary("pow", FLOAT, "out = x ** y", (Output("out"),)),
    _binary("maximum", NUMERIC, "out = max(x, y), nan if either is nan", (Output("out"),)),
    _binary("minimum", NUMERIC, "out = min(x, y), nan if either is nan", (Output("out"),)),
    _binary("eq", ALL, "out = x == y", _BOOL_OUT),
    _binary("ne", ALL, "out = x != y", _BOOL_OUT),
    _binary("lt", NUMERIC, "out = x < y", _BOOL_OUT),
    _binary("le", NUMERIC, "out = x <= y", _BOOL_OUT),
    _binary("gt", NUMERIC, "out = x > y", _BOOL_OUT),
    _binary("ge", NUMERIC, "out = x >= y", _BOOL_OUT),
    _binary("logical_and", ALL, "out = (x != 0) and (y != 0)", _BOOL_OUT),
    _binary("logical_or", ALL, "out = (x != 0) or (y != 0)", _BOOL_OUT),
    OpSchema("where", 1, (Input("x"), Input("y"), Input("cond", dtypes=BOOL)), (Output("out"),),
             (), ALL, "broadcast", True,
             "out = x where cond else y (cond last so the op's dtype is its first input's)"),
    OpSchema("addcmul", 1, (Input("x"), Input("a"), Input("b")), (Output("out"),),
             (Attr("value", "float", 1.0),), FLOAT, "broadcast", True, "out = x + value * a * b"),
    OpSchema("addcdiv", 1, (Input("x"), Input("a"), Input("b")), (Output("out"),),
             (Attr("value", "float", 1.0),), FLOAT, "broadcast", True, "out = x + value * a / b"),
    OpSchema("lerp", 1, (Input("x"), Input("end")), (Output("out"),),
             (Attr("weight", "float", 0.5),), FLOAT, "broadcast", True,
             "out = x + weight * (end - x)"),
    # ---- tier 1: elementwise backward ------------------------------------------------------
    OpSchema("threshold_backward", 1, (Input("grad"), Input("x")), (Output("grad_x"),),
             (Attr("threshold", "float", 0.0),), NUMERIC, "broadcast", True,
             "grad_x = 0 where x <= threshold, else grad (relu's backward; nan x passes grad)"),
    OpSchema("sigmoid_backward", 1, (Input("grad"), Input("y")), (Output("grad_x"),), (),
             FLOAT, "broadcast", True, "grad_x = grad * y * (1 - y), y = sigmoid(x)"),
    OpSchema("tanh_backward", 1, (Input("grad"), Input("y")), (Output("grad_x"),), (),
             FLOAT, "broadcast", True, "grad_x = grad * (1 - y^2), y = tanh(x)"),
    OpSchema("gelu_backward", 1, (Input("grad"), Input("x")), (Output("grad_x"),),
             (_GELU_APPROX,), FLOAT, "broadcast", True, "grad_x = grad * d gelu(x) / dx"),
    # ---- tier 1: reductions ----------------------------------------------------------------
    _reduce("sum", NUMERIC, "sum over `axes` (empty: all); same dtype as x"),
    _reduce("mean", FLOAT, "mean over `axes` (empty: all)"),
    _reduce("max", NUMERIC, "max over `axes` (empty: all); nan propagates; empty axis is an error"),
    _reduce("min", NUMERIC, "min over `axes` (empty: all); nan propagates; empty axis is an error"),
    _reduce("prod", NUMERIC, "product over `axes` (empty: all)"),
    OpSchema("argmax", 1, _X, (Output("index", "int64"),),
             (Attr("axes", "ints", ()), Attr("keepdims", "bool", False)), NUMERIC, "reduce", False,
             "index of the first maximum along the single axis in `axes` (empty: flattened)"),
    OpSchema("argmin", 1, _X, (Output("index", "int64"),),
             (Attr("axes", "ints", ()), Attr("keepdims", "bool", False)), NUMERIC, "reduce", False,
             "index of the first minimum along the single axis in `axes` (empty: flattened)"),
    # ---- tier 1: matrix products -----------------------------------------------------------
    OpSchema("matmul", 1, (Input("a"), Input("b")), (Output("out"),), (), FLOAT, "matmul", False,
             "out[..., m, n] = sum_k a[..., m, k] * b[..., k, n]. All three have the same "
             "ndim >= 2 "
             "and equal batch dims (broadcast batch dims come as stride 0); transposes come as "
             "strides."),
    OpSchema("gemm", 1, (Input("a"), Input("b"), Input("c", optional=True)), (Output("out"),),
             (Attr("alpha", "float", 1.0), Attr("beta", "float", 1.0)), FLOAT, "gemm", False,
             "out = beta * c + alpha * (a @ b); a [M, K], b [K, N], c broadcast to [M, N] with "
             "stride 0 (addmm)."),
    # ---- tier 2: convolution ---------------------------------------------------------------
    OpSchema("conv2d", 2, (Input("x"), Input("weight"), Input("bias", optional=True)),
             (Output("y"),), _CONV_ATTRS, FLOAT, "conv2d", False,
             "NCHW cross-correlation: x [N, C, H, W], weight [K, C/groups, R, S], bias [K]. "
             "`algorithm` picks the kernel's method; 'auto' lets the plugin choose; a plugin "
             "rejects a name it does not know with UD_ERR_INVALID_ARGUMENT."),
    OpSchema("conv2d_backward_input", 2, (Input("grad_y"), Input("weight")), (Output("grad_x"),),
             (Attr("input_shape", "ints", ()),) + _CONV_ATTRS, FLOAT, "conv2d_backward_input",
             False, "grad_x of conv2d; input_shape is x's shape [N, C, H, W]"),
    OpSchema("conv2d_backward_weight", 2, (Input("grad_y"), Input("x")), (Output("grad_w"),),
             (Attr("weight_shape", "ints", ()),) + _CONV_ATTRS, FLOAT, "conv2d_backward_weight",
             False, "grad_weight of conv2d; weight_shape is [K, C/groups, R, S]"),
    # ---- tier 2: pooling -------------------------------------------------------------------
    OpSchema("max_pool2d", 2, _X, (Output("y"), Output("indices", "int64")), _MAX_ATTRS, FLOAT,
             "pool2d", False,
             "NCHW max pooling over in-bounds positions only (padding never wins); indices are "
             "flat positions h * W + w in each input plane; ties and all -inf windows give the "
             "first in-bounds position in row-major window order; nan wins."),
    OpSchema("max_pool2d_backward", 2,
             (Input("grad_y"), Input("x"), Input("indices", dtypes=("int64",))),
             (Output("grad_x"),), _MAX_ATTRS, FLOAT, "like_input1", False,
             "grad_x[n, c, indices] += grad_y"),
    OpSchema("avg_pool2d", 2, _X, _Y, _AVG_ATTRS, FLOAT, "pool2d", False,
             "NCHW average pooling. count_include_pad: divide by the window clipped to the padded "
             "input (H + 2*pad; ceil_mode overhang never counts); else by in-bounds elements."),
    OpSchema("avg_pool2d_backward", 2, (Input("grad_y"), Input("x")), (Output("grad_x"),),
             _AVG_ATTRS, FLOAT, "like_input1", False, "grad_x of avg_pool2d"),
    OpSchema("adaptive_avg_pool2d", 2, _X, _Y, (Attr("output_size", "ints", (1, 1)),), FLOAT,
             "adaptive_pool2d", False,
             "NCHW; output cell i covers [floor(i*H/oh), ceil((i+1)*H/oh)) like torch"),
    OpSchema("adaptive_avg_pool2d_backward", 2, (Input("grad_y"), Input("x")),
             (Output("grad_x"),), (Attr("output_size", "ints", (1, 1)),), FLOAT, "like_input1",
             False, "grad_x of adaptive_avg_pool2d"),
    # ---- tier 2: normalization -------------------------------------------------------------
    OpSchema("batch_norm", 2,
             (Input("x"), Input("weight", optional=True), Input("bias", optional=True),
              Input("running_mean", optional=True, mutated=True),
              Input("running_var", optional=True, mutated=True)),
             (Output("y"), Output("save_mean"), Output("save_invstd")),
             (Attr("training", "bool", True), Attr("momentum", "float", 0.1),
              Attr("eps", "float", 1e-5)), FLOAT, "batch_norm", False,
             "x [N, C, ...], per-channel. training: normalize with batch stats, save_mean/"
             "save_invstd = batch mean and 1/sqrt(biased var + eps), and update running stats in "
             "place (running = (1-momentum)*running + momentum*stat, unbiased var). Inference: "
             "use running stats; save_* = running_mean and 1/sqrt(running_var + eps)."),
    OpSchema("batch_norm_backward", 2,
             (Input("grad_y"), Input("x"), Input("weight", optional=True), Input("save_mean"),
              Input("save_invstd")),
             (Output("grad_x"), Output("grad_weight"), Output("grad_bias")),
             (Attr("training", "bool", True),), FLOAT, "batch_norm_backward", False,
             "gradients of batch_norm from its saved statistics; training=False treats mean and "
             "invstd as constants"),
    # ---- tier 2: softmax and losses --------------------------------------------------------
    OpSchema("softmax", 2, _X, _Y, (Attr("axis", "int", -1),), FLOAT, "same", False,
             "y = exp(x - max) / sum along axis"),
    OpSchema("log_softmax", 2, _X, _Y, (Attr("axis", "int", -1),), FLOAT, "same", False,
             "y = x - max - log(sum(exp(x - max))) along axis"),
    OpSchema("softmax_backward", 2, (Input("grad_y"), Input("y")), (Output("grad_x"),),
             (Attr("axis", "int", -1),), FLOAT, "same", False,
             "grad_x = y * (grad_y - sum(grad_y * y, axis))"),
    OpSchema("log_softmax_backward", 2, (Input("grad_y"), Input("y")), (Output("grad_x"),),
             (Attr("axis", "int", -1),), FLOAT, "same", False,
             "grad_x = grad_y - exp(y) * sum(grad_y, axis)"),
    OpSchema("nll_loss", 2,
             (Input("logp"), Input("target", dtypes=INT), Input("weight", optional=True)),
             (Output("loss"), Output("total_weight")),
             (_REDUCTION, Attr("ignore_index", "int", -100)), FLOAT, "nll_loss", False,
             "logp [N, C] or [C], target [N] or []: loss_i = -weight[t_i] * logp[i, t_i] "
             "(0 where t_i == ignore_index); total_weight = sum of the weights of non-ignored "
             "targets (for every reduction); mean divides by it (all ignored: nan). A target "
             "outside [0, C) other than ignore_index is an error."),
    OpSchema("nll_loss_backward", 2,
             (Input("grad_loss"), Input("logp"), Input("target", dtypes=INT),
              Input("weight", optional=True), Input("total_weight")),
             (Output("grad_logp"),), (_REDUCTION, Attr("ignore_index", "int", -100)), FLOAT,
             "like_input1", False, "gradient of nll_loss with respect to logp"),
    OpSchema("mse_loss", 2, (Input("x"), Input("target")), (Output("loss"),), (_REDUCTION,),
             FLOAT, "loss", True, "(x - target)^2, reduced; target pre-broadcast to x"),
    OpSchema("mse_loss_backward", 2, (Input("grad_loss"), Input("x"), Input("target")),
             (Output("grad_x"),), (_REDUCTION,), FLOAT, "like_input1", False,
             "grad_x = 2 (x - target) grad_loss (/ numel for mean); grad_loss is 0-d unless "
             "reduction is none"),
    # ---- tier 2: shape ops -----------------------------------------------------------------
    OpSchema("concat", 2, (Input("tensors", variadic=True),), (Output("out"),),
             (Attr("axis", "int", 0),), ALL, "concat", False,
             "join along axis; every other dim equal"),
    OpSchema("pad_constant", 2, _X, _Y,
             (Attr("pads", "ints", ()), Attr("value", "float", 0.0, scalar="value")), ALL, "pad",
             False,
             "pads = (before_0, after_0, before_1, after_1, ...), 2 * ndim values, each >= 0"),
    # ---- tier 2: optimizer steps (every tensor updated in place; no outputs) ---------------
    OpSchema("sgd_update", 2,
             (Input("param", mutated=True), Input("grad", mutated=True),
              Input("momentum_buffer", optional=True, mutated=True),
              Input("grad_scale", optional=True, dtypes=FLOAT),
              Input("found_inf", optional=True, dtypes=FLOAT)),
             (), (Attr("lr", "float", 0.001), Attr("momentum", "float", 0.0),
                  Attr("dampening", "float", 0.0), Attr("weight_decay", "float", 0.0),
                  Attr("nesterov", "bool", False), Attr("maximize", "bool", False),
                  Attr("first_step", "bool", False), Attr("lr_in_momentum", "bool", False)),
             FLOAT, "optimizer", False,
             "One SGD step, elementwise (torch's fused SGD): found_inf == 1 skips it; g = grad "
             "/ grad_scale (written back to grad); g = -g if maximize; g += weight_decay * param; "
             "momentum != 0 (needs momentum_buffer): buf = g if first_step else momentum * buf + "
             "(1 - dampening) * g, g = g + momentum * buf if nesterov else buf; param -= lr * g. "
             "lr_in_momentum (TF's ApplyKerasMomentum): the gradient enters as -lr * g and the "
             "step is param += g. grad_scale and found_inf hold one element. All tensors have "
             "param's shape and any strides."),
    OpSchema("adam_update", 2,
             (Input("param", mutated=True), Input("grad", mutated=True),
              Input("exp_avg", mutated=True), Input("exp_avg_sq", mutated=True),
              Input("max_exp_avg_sq", optional=True, mutated=True),
              Input("state_step", optional=True, dtypes=FLOAT),
              Input("grad_scale", optional=True, dtypes=FLOAT),
              Input("found_inf", optional=True, dtypes=FLOAT)),
             (), (Attr("lr", "float", 0.001), Attr("beta1", "float", 0.9),
                  Attr("beta2", "float", 0.999), Attr("eps", "float", 1e-8),
                  Attr("weight_decay", "float", 0.0), Attr("decoupled", "bool", False),
                  Attr("maximize", "bool", False), Attr("step", "float", 1.0),
                  Attr("bias_correction", "bool", True), Attr("nesterov", "bool", False)),
             FLOAT, "optimizer", False,
             "One Adam/AdamW step, elementwise (torch's fused Adam): found_inf == 1 skips it; g "
             "= grad / grad_scale (written back to grad); g = -g if maximize; weight decay: "
             "param *= 1 - lr * weight_decay if decoupled (AdamW) else g += weight_decay * "
             "param; exp_avg += (1 - beta1) * (g - exp_avg); exp_avg_sq = beta2 * exp_avg_sq + "
             "(1 - beta2) * g * g; max_exp_avg_sq present (AMSGrad): max_exp_avg_sq = "
             "max(max_exp_avg_sq, exp_avg_sq), used for v below, else v = exp_avg_sq; t = "
             "state_step's value (one element, on the device) if present, else the `step` "
             "attribute; bc1 = 1 - beta1^t, bc2 = 1 - beta2^t (both 1 without bias_correction: "
             "TF's ApplyAdam with lr folded); m = beta1 * exp_avg + (1 - beta1) * g if nesterov "
             "(TF's use_nesterov) else exp_avg; param -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) "
             "+ eps). All tensors have param's shape and any strides."),
]


_TABLE += [
    # ---- tier 4: fused ops (the graph layer's targets; a plugin without them gets the unfused
    # sequence, so none is required below tier 4) -------------------------------------------
    OpSchema("conv2d_bias_act", 4,
             (Input("x"), Input("weight"), Input("bias", optional=True),
              Input("residual", optional=True)),
             (Output("y"),), _CONV_ATTRS + (_ACTIVATION,), FLOAT, "conv2d_bias_act", False,
             "y = act(conv2d(x, weight) + bias[None, :, None, None] + residual): conv2d's "
             "inputs and attributes, bias [K], residual [N, K, OH, OW] (any strides) added "
             "before the activation (ResNet's relu(bn(conv) + identity)); `activation` as in "
             "opset.ACTIVATIONS. Accumulates like conv2d; the epilogue may run on the "
             "accumulator or on the result rounded to the dtype."),
    OpSchema("gemm_bias_act", 4,
             (Input("a"), Input("b"), Input("bias", optional=True),
              Input("residual", optional=True)),
             (Output("out"),), (Attr("alpha", "float", 1.0), _ACTIVATION), FLOAT,
             "gemm_bias_act", False,
             "out = act(alpha * (a @ b) + bias[None, :] + residual): a [M, K], b [K, N] "
             "(transposes come as strides), bias [N], residual [M, N] (any strides); "
             "`activation` as in opset.ACTIVATIONS (a Linear layer with its activation)."),
    OpSchema("elementwise_program", 4, (Input("xs", variadic=True),),
             (Output("ys", variadic=True),),
             (Attr("program", "str", ""),
              Attr("reduce", "str", "none", REDUCTIONS),
              Attr("reduce_axes", "ints", ())), FLOAT, "program", False,
             "Evaluates `program` per element of the common shape S of `xs` (pre-broadcast, "
             "stride 0, all of the op's dtype) and writes `ys` (as many as the program writes; "
             "any strides). program: space-separated postfix tokens on a value stack: i<k> push "
             "input k; c<num> push a constant (decimal like 2.5, -1e-3, or inf, -inf, nan); "
             "s<k> pop into register k, r<k> push register k (k < 16, written before read); "
             "o<k> pop and write output k (each output exactly once, outputs 0..n-1); <op> an "
             "op of opset.PROGRAM_OPS applied to its operands (the first pushed is the left "
             "one: `i0 i1 sub` is xs[0] - xs[1]; `a b c where` is c != 0 ? a : b). Values are "
             "the op's dtype (or wider: float32 may compute in float64). reduce (sum, mean, "
             "max, min; none: elementwise) reduces every output over reduce_axes, which must "
             "be the trailing axes of S (>= 1; outputs drop them), accumulating in at least "
             "float32 (max/min propagate nan; an empty axis is an error for them). A "
             "malformed program is refused with UD_ERR_INVALID_ARGUMENT naming the token."),
]


def _act3(name: str, doc: str, attrs: tuple = (), dtypes: tuple = FLOAT, out=_Y) -> OpSchema:
    return OpSchema(name, 3, _X, out, attrs, dtypes, "same", True, doc)


def _grad3(name: str, doc: str, attrs: tuple = ()) -> OpSchema:
    return OpSchema(name, 3, (Input("grad"), Input("x")), (Output("grad_x"),), attrs, FLOAT,
                    "broadcast", True, doc)


_BETA_THRESHOLD = (Attr("beta", "float", 1.0), Attr("threshold", "float", 20.0))
_ELU = (Attr("alpha", "float", 1.0), Attr("scale", "float", 1.0),
        Attr("input_scale", "float", 1.0))
_SLOPE = (Attr("negative_slope", "float", 0.01),)

# appended after tier 4 so that the op ids of ops.h stay stable
_TABLE += [
    # ---- tier 3: elementwise (formulas, nan and comparison order as torch CPU's kernels) ------
    _act3("log1p", "y = ln(1 + x), accurate for small x"),
    _act3("expm1", "y = e^x - 1, accurate for small x"),
    _act3("silu", "y = x / (1 + e^-x)"),
    _act3("softplus", "y = x where beta * x > threshold, else ln(1 + e^(beta x)) / beta",
          _BETA_THRESHOLD),
    _act3("elu", "y = scale * x for x > 0, else alpha * scale * (e^(input_scale x) - 1) "
          "(torch's elu; selu is alpha 1.6732632423543772, scale 1.0507009873554805)", _ELU),
    _act3("leaky_relu", "y = x for x > 0, else negative_slope * x", _SLOPE),
    _act3("hardswish", "y = x * min(max(x + 3, 0), 6) / 6"),
    _act3("hardsigmoid", "y = min(max(x + 3, 0), 6) / 6 (nan stays nan)"),
    _act3("mish", "y = x * tanh(ln(1 + e^x))"),
    _act3("log_sigmoid", "y = min(x, 0) - ln(1 + e^-|x|)"),
    _act3("clamp", "y = min(max(x, min), max): nan stays nan, a nan bound gives nan; min > max "
          "gives max (torch's clamp with scalar bounds; a missing bound is -inf / inf)",
          (Attr("min", "float", -math.inf), Attr("max", "float", math.inf))),
    _act3("isnan", "out = x is nan (false for integers and bools)", (), ALL, _BOOL_OUT),
    _act3("isinf", "out = x is +inf or -inf (false for integers and bools)", (), ALL, _BOOL_OUT),
    OpSchema("floor_divide", 3, _XY, (Output("out"),), (), FLOAT, "broadcast", True,
             "out = floor(x / y) computed as torch does (from fmod, so exact for representable "
             "quotients); y == 0 gives x / y"),
    OpSchema("remainder", 3, _XY, (Output("out"),), (), FLOAT, "broadcast", True,
             "out = x - floor(x / y) * y with the sign of the divisor y (Python's %, torch's "
             "remainder, TF's FloorMod; C's fmod has the sign of x): fmod(x, y) + y where "
             "that is nonzero and its sign differs from y's"),
    OpSchema("xlogy", 3, _XY, (Output("out"),), (), FLOAT, "broadcast", True,
             "out = x * ln(y); 0 where x == 0 unless y is nan (nan)"),
    _grad3("silu_backward", "grad_x = grad * s * (1 + x * (1 - s)), s = sigmoid(x)"),
    _grad3("hardswish_backward", "grad_x = 0 for x < -3, grad * (x / 3 + 0.5) for x <= 3, "
           "else grad (nan x passes grad, as torch)"),
    _grad3("hardsigmoid_backward", "grad_x = grad / 6 for -3 < x < 3, else 0"),
    _grad3("mish_backward", "grad_x = grad * (t + x * sigmoid(x) * (1 - t^2)), "
           "t = tanh(ln(1 + e^x))"),
    _grad3("log_sigmoid_backward", "grad_x = grad * (m - s * z / (1 + z)), z = e^-|x|, "
           "m = 1 and s = 1 for x < 0, else m = 0 and s = -1"),
    _grad3("leaky_relu_backward", "grad_x = grad for x > 0, else grad * negative_slope",
           _SLOPE),
    _grad3("softplus_backward", "grad_x = grad where beta * x > threshold, else "
           "grad * z / (z + 1), z = e^(beta x)", _BETA_THRESHOLD),
    _grad3("elu_backward", "is_result (x is elu's output y): grad * input_scale * (y + alpha "
           "* scale) for y <= 0; else grad * input_scale * alpha * scale * e^(input_scale x) "
           "for x <= 0; grad * scale elsewhere",
           _ELU + (Attr("is_result", "bool", False),)),
]


OPS: dict[str, OpSchema] = {op.name: op for op in _TABLE}
assert len(OPS) == len(_TABLE), "duplicate op name"
# every first-input dtype rule must reference known dtypes
assert all(set(op.dtypes) <= set(ALL) for op in _TABLE)


def get(name: str) -> OpSchema:
    """The schema of op `name`; KeyError naming the known ops' count if unknown."""
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r} (the op set has {len(OPS)} ops; see "
                       f"unidev.contract.opset.OPS)") from None


def by_tier(tier: int) -> list[OpSchema]:
    """Ops of exactly this tier."""
    return [op for op in _TABLE if op.tier == tier]


def markdown() -> str:
    """The op set as a Markdown reference (docs/ops.md is generated from this)."""
    lines = ["# The unidev op set", "",
             "Generated from `unidev/contract/opset.py` (`opset.markdown()`, see "
             "tests/test_opset.py); do not edit.",
             "Inputs marked `?` are optional (absent: ndim -1), `*` variadic, `!` updated in "
             "place; outputs marked `*` are variadic (as many as the caller passes).",
             "Attributes reach kernels positionally, in this order, defaults filled. An attribute "
             "marked *value of the dtype* must be a finite number in an integer dtype's range "
             "(converted toward zero), *integral of the dtype* an integer in it; unidev.ops "
             "refuses others before any kernel runs.", ""]
    for tier in TIERS:
        lines += [f"## Tier {tier}", "",
                  "| op | inputs | outputs | attributes | dtypes | semantics |",
                  "|---|---|---|---|---|---|"]
        for op in by_tier(tier):
            ins = ", ".join(i.name + ("?" if i.optional else "") + ("*" if i.variadic else "")
                            + ("!" if i.mutated else "")
                            + (f" ({'/'.join(i.dtypes)})" if i.dtypes != "same" else "")
                            for i in op.inputs) or "—"
            outs = ", ".join(o.name + ("*" if o.variadic else "")
                             + ("" if o.dtype == "same" else f" ({o.dtype})")
                             for o in op.outputs) or "— (updates inputs `!`)"
            attrs = ", ".join(f"{a.name}: {a.type} = {a.default!r}"
                              + (f" ({a.scalar} of the dtype)" if a.scalar else "")
                              for a in op.attrs) or "—"
            doc = op.doc.replace("|", "\\|")
            lines.append(f"| `{op.name}` | {ins} | {outs} | {attrs} | {', '.join(op.dtypes)} | "
                         f"{doc} |")
        lines.append("")
    lines += ["### elementwise_program operators", "",
              "Token, arity, and the op-set op (default attributes unless given) it computes. "
              f"Limits: {', '.join(f'{k} {v}' for k, v in PROGRAM_LIMITS.items())}.", "",
              "| token | arity | computes |", "|---|---|---|"]
    for tok, arity in PROGRAM_OPS.items():
        src = PROGRAM_SOURCES[tok]
        what = ("x * sigmoid(x)" if src is None else f"`{src[0]}`"
                + "".join(f" {k}={v!r}" for k, v in src[1].items()))
        lines.append(f"| `{tok}` | {arity} | {what} |")
    lines.append("")
    return "\n".join(lines)
