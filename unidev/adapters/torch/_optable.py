"""The one table from aten operators to unidev ops; build.py turns it into C++ registrations.

Each row is (aten overload, unidev op, kind). `kind` names the C++ kernel template that serves
every row of that shape (unary `.out`, binary `.out` with alpha, ...); FILES says which
csrc/aten/*.cpp defines and registers it. Everything else about an op (its id, attributes and
their defaults, dtypes) comes from the contract's generated ops.h. A test checks every unidev op
named here against unidev.contract.opset, and every row against what the C++ registered.
"""

from __future__ import annotations

_UNARY = ("abs", "neg", "floor", "ceil", "round", "sign")  # out dtype = input dtype
# torch's unary float ops: integer inputs compute in the default float dtype
_UNARY_FLOAT = ("exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh", "sigmoid",
                "erf", "log1p", "expm1")
_ACT3 = ("silu", "hardswish", "hardsigmoid", "mish")  # tier 3 (mish_backward decomposes)
# tier 3's binary rows (floor_divide and hardswish's are not structured: their functional forms)
_BIN3 = (("floor_divide.out", "floor_divide"), ("remainder.Tensor_out", "remainder"),
         ("xlogy.OutTensor", "xlogy"), ("silu_backward.grad_input", "silu_backward"),
         ("hardsigmoid_backward.grad_input", "hardsigmoid_backward"))
_COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
_HOT = (("add", "_alpha"), ("sub", "_alpha"), ("mul", ""), ("div", ""))  # (op, kind infix)

TABLE: list[tuple[str, str, str]] = [
    *[(f"{op}.out", op, "unary") for op in _UNARY],
    *[(f"{op}.out", op, "unary_float") for op in _UNARY_FLOAT],
    ("logical_not.out", "logical_not", "unary"),
    ("relu", "relu", "unary_fn"),
    ("relu_", "relu", "unary_inplace"),
    ("gelu.out", "gelu", "gelu"),
    ("add.out", "add", "binary_alpha"),
    ("sub.out", "sub", "binary_alpha"),
    *[(f"{op}.out", op, "binary") for op in ("mul", "div", "maximum", "minimum")],
    ("clamp_min.Tensor_out", "maximum", "binary"),  # Adam(amsgrad)'s foreach step: nan wins too
    # the hottest ops also get their functional and in-place forms, which skip torch's generic
    # structured-kernel wrapper (shape inference through TensorIterator) on every call
    *[(f"{op}.Tensor", op, f"binary{a}_fn") for op, a in _HOT],
    *[(f"{op}_.Tensor", op, f"binary{a}_inplace") for op, a in _HOT],
    ("pow.Tensor_Tensor_out", "pow", "binary"),
    ("pow.Tensor_Scalar_out", "pow", "binary_scalar"),
    *[(f"{op}.Tensor_out", op, "binary") for op in _COMPARE],
    *[(f"{op}.Scalar_out", op, "binary_scalar") for op in _COMPARE],
    ("logical_and.out", "logical_and", "binary"),
    ("logical_or.out", "logical_or", "binary"),
    ("bitwise_and.Tensor_out", "logical_and", "binary_bool"),
    ("bitwise_or.Tensor_out", "logical_or", "binary_bool"),
    ("where.self", "where", "where_fn"),
    ("addcmul.out", "addcmul", "ternary_value"),
    ("addcdiv.out", "addcdiv", "ternary_value"),
    ("lerp.Scalar_out", "lerp", "lerp"),
    ("threshold_backward.grad_input", "threshold_backward", "threshold_backward"),
    ("sigmoid_backward.grad_input", "sigmoid_backward", "binary"),
    ("tanh_backward.grad_input", "tanh_backward", "binary"),
    ("gelu_backward.grad_input", "gelu_backward", "gelu_backward"),
    *[(f"{op}.out", op, "unary") for op in _ACT3], *[(r, op, "binary") for r, op in _BIN3],
    ("hardswish", "hardswish", "unary_fn"), ("hardswish_", "hardswish", "unary_inplace"),
    ("hardswish_backward", "hardswish_backward", "binary_fn"),
    ("floor_divide", "floor_divide", "binary_fn"),
    ("floor_divide_.Tensor", "floor_divide", "binary_inplace"),
    ("leaky_relu.out", "leaky_relu", "unary_scalar"), ("clamp_min.out", "clamp", "unary_scalar"),
    ("clamp_max.out", "clamp", "unary_scalar"), ("clamp.out", "clamp", "clamp"),
    ("softplus.out", "softplus", "softplus"),  # also in mish's backward (it decomposes)
    ("softplus_backward.grad_input", "softplus_backward", "softplus_backward"),
    ("leaky_relu_backward.grad_input", "leaky_relu_backward", "leaky_relu_backward"),
    ("elu.out", "elu", "elu"), ("elu_backward.grad_input", "elu_backward", "elu_backward"),
    ("isnan", "isnan", "isnan_fn"),
    ("sum.IntList_out", "sum", "reduce_dtype"),
    ("mean.out", "mean", "reduce_dtype"),
    ("amax.out", "max", "reduce"),
    ("amin.out", "min", "reduce"),
    ("max", "max", "reduce_all"),
    ("min", "min", "reduce_all"),
    ("argmax.out", "argmax", "arg_reduce"),
    ("argmin.out", "argmin", "arg_reduce"),
    ("mm.out", "matmul", "mm"),
    ("bmm.out", "matmul", "mm"),
    ("addmm.out", "gemm", "addmm"),
    ("convolution_overrideable", "conv2d", "conv"),
    ("convolution_backward_overrideable", "conv2d_backward_input", "conv_backward"),
    ("max_pool2d_with_indices.out", "max_pool2d", "max_pool"),
    ("max_pool2d_with_indices_backward.grad_input", "max_pool2d_backward", "max_pool_backward"),
    ("avg_pool2d.out", "avg_pool2d", "avg_pool"),
    ("avg_pool2d_backward.grad_input", "avg_pool2d_backward", "avg_pool_backward"),
    ("_adaptive_avg_pool2d", "adaptive_avg_pool2d", "adaptive_pool"),
    ("_adaptive_avg_pool2d_backward", "adaptive_avg_pool2d_backward", "adaptive_pool_backward"),
    ("native_batch_norm", "batch_norm", "batch_norm"),
    ("native_batch_norm_backward", "batch_norm_backward", "batch_norm_backward"),
    ("_softmax.out", "softmax", "softmax"),
    ("_log_softmax.out", "log_softmax", "softmax"),
    ("_softmax_backward_data.out", "softmax_backward", "softmax_backward"),
    ("_log_softmax_backward_data.out", "log_softmax_backward", "softmax_backward"),
    ("nll_loss_forward.output", "nll_loss", "nll_loss"),
    ("nll_loss_backward.grad_input", "nll_loss_backward", "nll_loss_backward"),
    ("mse_loss.out", "mse_loss", "mse_loss"),
    ("mse_loss_backward", "mse_loss_backward", "mse_loss_backward_fn"),
    ("cat.out", "concat", "cat"),
    ("constant_pad_nd", "pad_constant", "pad"),
    ("arange.start_out", "arange", "arange"),
    ("fill_.Scalar", "fill", "fill"),
    ("zero_", "zero", "zero"),
    # torch.optim's fused=True steps (one plugin call per parameter; AdamW by the row's name)
    ("_fused_sgd_", "sgd_update", "fused_sgd"),
    ("_fused_sgd_.tensor_lr", "sgd_update", "fused_sgd_tensor_lr"),
    ("_fused_adam_", "adam_update", "fused_adam"),
    ("_fused_adam_.tensor_lr", "adam_update", "fused_adam_tensor_lr"),
    ("_fused_adamw_", "adam_update", "fused_adam"),
    ("_fused_adamw_.tensor_lr", "adam_update", "fused_adam_tensor_lr"),
]

# csrc/aten/<file>.cpp -> the kinds whose templates it defines and whose rows it registers
FILES: dict[str, tuple[str, ...]] = {
    "elementwise": ("unary", "unary_float", "unary_fn", "unary_inplace", "gelu", "gelu_backward",
                    "binary_alpha", "binary_alpha_fn", "binary_alpha_inplace", "binary",
                    "binary_fn", "binary_inplace", "binary_bool", "binary_scalar", "where_fn",
                    "ternary_value", "lerp", "threshold_backward", "unary_scalar", "clamp",
                    "softplus", "softplus_backward", "leaky_relu_backward", "elu",
                    "elu_backward", "isnan_fn"),
    "reduce": ("reduce_dtype", "reduce", "reduce_all", "arg_reduce"),
    "nn": ("mm", "addmm", "conv", "conv_backward", "max_pool", "max_pool_backward", "avg_pool",
           "avg_pool_backward", "adaptive_pool", "adaptive_pool_backward", "batch_norm",
           "batch_norm_backward", "softmax", "softmax_backward", "nll_loss", "nll_loss_backward",
           "mse_loss", "mse_loss_backward_fn"),
    "copy": ("cat", "pad", "arange", "fill", "zero"),
    "optim": ("fused_sgd", "fused_sgd_tensor_lr", "fused_adam", "fused_adam_tensor_lr"),
}

# unidev ops the adapter calls itself (copies, casts, scalars), not through an aten row
INTERNAL = ("copy", "cast", "fill", "zero", "conv2d_backward_weight", "sum")


def unidev_ops() -> list[str]:
    """Every unidev op the adapter may call, in first-use order."""
    seen: dict[str, None] = {}
    for _, op, _ in TABLE:
        seen[op] = None
    for op in INTERNAL:
        seen[op] = None
    return list(seen)
