"""The one table from TensorFlow ops to unidev ops, and the C include generated from it."""

from __future__ import annotations

from dataclasses import dataclass

from ...contract import dtypes, errors, opset

__all__ = ["TfOp", "TF_OPS", "DTYPES", "generate", "check"]

F = ("float32", "float64")
F64 = F + ("int64",)
NUM = F + ("int64",)
ALL = NUM + ("bool",)
# Shape and axis arguments are declared host memory and read on the host; labels too, so a bad
# label fails its own op rather than a later synchronization. The dtypes a TF kernel may serve:
# those csrc/call.cc maps to a TF dtype (ids, masks and names come from ops.h).
DTYPES = tuple(dtypes.DTYPES)
# What a type attribute of a TF op is constrained to, per registered kernel: "T" the kernel's
# dtype, "dst" each dtype Cast converts to, "index" int32 and int64 (host values the handler
# reads either way), or one fixed dtype. TF_InitKernel checks each against the op's real OpDef.
TYPE_KINDS = {"T": -1, "dst": -2, "index": -3}
T = (("T", "T"),)


@dataclass(frozen=True)
class TfOp:
    """One TF op served on the device.

    `handler` names the C++ routine that maps it (registered by its family's file in csrc/);
    `ud` is the unidev op it calls (its attribute defaults come from the op set); `needs` lists
    every unidev op the handler calls, so the TF kernel is registered only when the plugin has
    all of them. `types` must name every type attribute of the TF op (see TYPE_KINDS), none
    that it lacks. `host_int32`: an argument the int32 kernel declares host memory.
    """

    tf: str
    handler: str
    ud: str
    dtypes: tuple[str, ...] = F
    needs: tuple[str, ...] = ()
    types: tuple[tuple[str, str], ...] = T  # (type attribute, what it is constrained to)
    host: tuple[str, ...] = ()
    host_int32: str = ""

    @property
    def all_needs(self) -> tuple[str, ...]:
        return (self.ud,) + tuple(n for n in self.needs if n != self.ud)


def _u(tf: str, ud: str, dtypes: tuple = F, types: tuple = T) -> TfOp:
    return TfOp(tf, "unary", ud, dtypes, types=types)


def _b(tf: str, ud: str, dtypes: tuple = F, types: tuple = T) -> TfOp:
    return TfOp(tf, "binary", ud, dtypes, types=types)


def _index(attr: str) -> tuple[tuple[str, str], ...]:
    return T + ((attr, "index"),)


_RED = ("reduction_indices",)
_BOOL = ("bool",)
_ARG = _index("Tidx") + (("output_type", "int64"),)
TF_OPS: tuple[TfOp, ...] = (
    _u("Neg", "neg", NUM), _u("Abs", "abs", NUM), _u("Exp", "exp"), _u("Log", "log"),
    _u("Sqrt", "sqrt"), _u("Rsqrt", "rsqrt"), _u("Reciprocal", "reciprocal"),
    _u("Inv", "reciprocal"), _u("Sin", "sin"), _u("Cos", "cos"), _u("Tanh", "tanh"),
    _u("Sigmoid", "sigmoid"), _u("Relu", "relu", NUM), _u("Square", "square", NUM),
    _u("Sign", "sign", NUM), _u("Floor", "floor"), _u("Ceil", "ceil"), _u("Round", "round"),
    _u("Erf", "erf"), _u("LogicalNot", "logical_not", _BOOL, ()),
    _u("Softmax", "softmax"), _u("LogSoftmax", "log_softmax"),
    # eager tf.constant: the host value copied by the adapter (TF's own kernel copies it through
    # its EventMgr, several thread switches per constant)
    TfOp("_EagerConst", "eager_const", "copy", ALL, host=("input",)),
    TfOp("StopGradient", "forward", "copy", ALL), TfOp("Snapshot", "forward", "copy", ALL),
    TfOp("ZerosLike", "zeros_like", "zero", ALL),
    TfOp("OnesLike", "ones_like", "fill", ALL),
    _b("AddV2", "add", NUM), _b("Add", "add", NUM), _b("Sub", "sub", NUM), _b("Mul", "mul", NUM),
    _b("RealDiv", "div"), _b("Div", "div"), _b("Maximum", "maximum", NUM),
    _b("Minimum", "minimum", NUM), _b("Pow", "pow"),
    _b("Equal", "eq", ALL), _b("NotEqual", "ne", ALL), _b("Less", "lt", NUM),
    _b("LessEqual", "le", NUM), _b("Greater", "gt", NUM), _b("GreaterEqual", "ge", NUM),
    _b("LogicalAnd", "logical_and", _BOOL, ()), _b("LogicalOr", "logical_or", _BOOL, ()),
    _b("ReluGrad", "threshold_backward", NUM),
    # tier 3 (LeakyRelu(Grad)'s alpha needs kernel.cc to read it; SeluGrad: csrc/elementwise.cc)
    TfOp("EluGrad", "elu", "elu_backward"), TfOp("Selu", "selu", "elu"),
    _u("Log1p", "log1p"), _u("Expm1", "expm1"), _u("Softplus", "softplus"), _u("Elu", "elu"),
    _u("IsNan", "isnan"), _u("IsInf", "isinf"), _b("SoftplusGrad", "softplus_backward"),
    _b("FloorDiv", "floor_divide"), _b("FloorMod", "remainder"), _b("Xlogy", "xlogy"),
    TfOp("SigmoidGrad", "binary_rev", "sigmoid_backward"),
    TfOp("TanhGrad", "binary_rev", "tanh_backward"),
    TfOp("SquaredDifference", "squared_difference", "sub", NUM, ("square",)),
    TfOp("RsqrtGrad", "rsqrt_grad", "mul", F, ("fill",)),
    TfOp("SqrtGrad", "sqrt_grad", "div", F, ("fill", "mul")),
    TfOp("DivNoNan", "div_no_nan", "div", F, ("fill", "eq", "where")),
    TfOp("SelectV2", "select", "where", ALL),
    TfOp("Select", "select", "where", ALL),
    TfOp("AddN", "add_n", "add", NUM, ("copy",)),
    # int32 is host memory (TF's rule): the kernel stages it rather than TF's EventMgr copy
    TfOp("Cast", "cast", "cast", ALL + ("int32",), types=(("SrcT", "T"), ("DstT", "dst")),
         host_int32="x"),
    TfOp("Sum", "reduce", "sum", NUM, types=_index("Tidx"), host=_RED),
    TfOp("Mean", "reduce", "mean", F, types=_index("Tidx"), host=_RED),
    TfOp("Max", "reduce", "max", NUM, types=_index("Tidx"), host=_RED),
    TfOp("Min", "reduce", "min", NUM, types=_index("Tidx"), host=_RED),
    TfOp("Prod", "reduce", "prod", NUM, types=_index("Tidx"), host=_RED),
    TfOp("ArgMax", "argmax", "argmax", F, types=_ARG, host=("dimension",)),
    TfOp("ArgMin", "argmax", "argmin", F, types=_ARG, host=("dimension",)),
    TfOp("BiasAdd", "bias_add", "add", F),
    TfOp("BiasAddGrad", "bias_add_grad", "sum", F),
    TfOp("MatMul", "matmul", "matmul", F),
    TfOp("BatchMatMulV2", "matmul", "matmul", F),
    TfOp("BatchMatMulV3", "matmul", "matmul", F,
         types=(("Ta", "T"), ("Tb", "T"), ("Tout", "T"))),
    TfOp("BroadcastTo", "broadcast_to", "copy", ALL, types=_index("Tidx"), host=("shape",)),
    TfOp("Tile", "tile", "copy", ALL, types=_index("Tmultiples"), host=("multiples",)),
    TfOp("Fill", "fill", "copy", ALL, types=_index("index_type"), host=("dims",)),
    TfOp("Transpose", "transpose", "copy", ALL, types=_index("Tperm"), host=("perm",)),
    TfOp("SparseSoftmaxCrossEntropyWithLogits", "sparse_xent", "log_softmax", F,
         ("nll_loss", "nll_loss_backward", "exp", "add", "fill"), _index("Tlabels")),
    TfOp("Conv2D", "conv2d", "conv2d", F, ("pad_constant",)),
    TfOp("Conv2DBackpropInput", "conv2d_bi", "conv2d_backward_input", F, ("copy",),
         host=("input_sizes",)),
    TfOp("Conv2DBackpropFilter", "conv2d_bf", "conv2d_backward_weight", F, ("pad_constant",),
         host=("filter_sizes",)),
    # DepthwiseConv2dNative: conv2d with groups = input channels, filter [R,S,C,M] as [C*M,1,R,S]
    TfOp("DepthwiseConv2dNative", "dwconv2d", "conv2d", F, ("pad_constant",)),
    TfOp("DepthwiseConv2dNativeBackpropInput", "dwconv2d_bi", "conv2d_backward_input", F,
         ("copy",), host=("input_sizes",)),
    TfOp("DepthwiseConv2dNativeBackpropFilter", "dwconv2d_bf", "conv2d_backward_weight", F,
         ("pad_constant",), host=("filter_sizes",)),
    # reserve_space_1/2: batch mean and variance, as on TF's CPU
    TfOp("FusedBatchNormV3", "batch_norm", "batch_norm", ("float32",),
         ("copy", "fill", "mul", "reciprocal", "sub"), types=T + (("U", "float32"),)),
    TfOp("FusedBatchNormGradV3", "batch_norm_grad", "batch_norm_backward", ("float32",),
         ("fill", "add", "rsqrt"), types=T + (("U", "float32"),)),
    TfOp("Pad", "pad", "pad_constant", ALL, types=_index("Tpaddings"), host=("paddings",)),
    TfOp("Slice", "slice", "copy", ALL, types=_index("Index"), host=("begin", "size")),
    TfOp("Relu6", "relu6", "relu", F, ("minimum", "fill")),
    TfOp("Relu6Grad", "relu6_grad", "threshold_backward", F, ("neg",)),
    TfOp("MaxPool", "pool", "max_pool2d", F),
    TfOp("MaxPoolGrad", "max_pool_grad", "max_pool2d_backward", F, ("max_pool2d",)),
    TfOp("AvgPool", "pool", "avg_pool2d", F),
    TfOp("AvgPoolGrad", "avg_pool_grad", "avg_pool2d_backward", F,
         host=("orig_input_shape",)),
)

def check() -> list[str]:
    """Problems of the table against the op set (empty when consistent)."""
    problems = []
    seen = set()
    for op in TF_OPS:
        if op.tf in seen:
            problems.append(f"{op.tf}: listed twice")
        seen.add(op.tf)
        for name in op.all_needs:
            if name not in opset.OPS:
                problems.append(f"{op.tf}: unidev op {name!r} is not in the op set")
        for dt in op.dtypes:
            if dt not in DTYPES:
                problems.append(f"{op.tf}: dtype {dt!r} unknown")
        if len(op.types) > 3 or len(op.host) > 2 or len(op.all_needs) > 8:
            problems.append(f"{op.tf}: csrc/call.h holds 3 type attributes, 2 host arguments "
                            "and 8 needs")
        for attr, kind in op.types:
            if kind not in TYPE_KINDS and kind not in DTYPES:
                problems.append(f"{op.tf}: attribute {attr} constrained to unknown {kind!r}")
    return problems


def _id(name: str) -> str:
    return name.upper()


def _kind(kind: str) -> str:
    return str(TYPE_KINDS[kind]) if kind in TYPE_KINDS else f"UD_DT_{_id(kind)}"


def generate() -> str:
    """C++ include: the TF op table, naming ops.h's op ids (UD_OP_*) and dtypes (UD_DTM_*), and
    the error-code table (from the contract's errors.py)."""
    problems = check()
    if problems:
        raise ValueError("TF op table is inconsistent with the op set: " + "; ".join(problems))
    used = sorted({n for op in TF_OPS for n in op.all_needs})
    assert all(len(opset.OPS[n].attrs) <= 12 for n in used), "csrc/call.h holds 12 attributes"
    lines = ["// Generated by unidev/adapters/tensorflow/ops.py (TF_OPS); ops.h holds the op set.",
             "// Do not edit: change the table and rebuild.",
             "const TfOpInfo kTfOps[] = {"]
    for op in TF_OPS:
        mask = " | ".join(f"UD_DTM_{_id(d)}" for d in op.dtypes)
        needs = ", ".join(f"UD_OP_{_id(n)}" for n in op.all_needs)
        host = ", ".join(f'"{h}"' for h in op.host)
        attrs = ", ".join(f'"{a}"' for a, _ in op.types)
        kinds = ", ".join(_kind(k) for _, k in op.types)
        h32 = f'"{op.host_int32}"' if op.host_int32 else "nullptr"
        lines.append(f'  {{"{op.tf}", "{op.handler}", UD_OP_{_id(op.ud)}, {mask}, {len(op.types)}, '
                     f"{{{attrs or 'nullptr'}}}, {{{kinds or '0'}}}, {{{host or 'nullptr'}}}, "
                     f"{h32}, {len(op.all_needs)}, {{{needs}}}}},")
    lines.append("};")
    lines.append(f"const int kNumTfOps = {len(TF_OPS)};")
    lines.append("// The TF_Code of each plugin error code: unidev/contract/errors.py's tf_code.")
    lines.append("TF_Code tf_code(UD_ErrorCode code) {\n  switch (code) {")
    lines += [f"    case UD_ERR_{e.name}: return TF_{e.tf_code};" for e in errors.ERRORS]
    lines.append("    default: return TF_INTERNAL;\n  }\n}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(generate())
