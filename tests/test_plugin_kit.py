"""plugin_kit.h's signature and dtype checks, through a small C harness of good and bad calls."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from unidev.contract import dtypes, gen, opset

INCLUDE = Path(gen.__file__).resolve().parent / "include"

# Each case prints one JSON line {"case", "code", "msg"}; `calls` counts malloc and vsnprintf
# (linker-wrapped) so the success path is shown to format and allocate nothing.
HARNESS = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unidev/plugin_kit.h>

static int calls;
void* __real_malloc(size_t n);
void* __wrap_malloc(size_t n) { calls++; return __real_malloc(n); }
int __real_vsnprintf(char* s, size_t n, const char* fmt, va_list ap);
int __wrap_vsnprintf(char* s, size_t n, const char* fmt, va_list ap) {
  calls++;
  return __real_vsnprintf(s, n, fmt, ap);
}

static const int64_t shape[2] = {2, 3}, strides[2] = {3, 1}, bad_shape[2] = {2, -1};

typedef struct Call {
  UD_KernelArgs a;
  UD_Tensor in[8], out[4];
  UD_Attr attrs[8];
} Call;

/* a valid call of `op`: every tensor [2, 3] float32, every attribute its default */
static void good(Call* c, int op, int num_inputs) {
  const UD_OpInfo* o = ud_op_info(op);
  memset(c, 0, sizeof *c);
  UD_Tensor t = {64, {1, 0}, 2, {UD_DTYPE_FLOAT, 32, 1}, shape, strides, 0};
  for (int i = 0; i < num_inputs; i++) c->in[i] = t;
  for (int i = 0; i < o->num_outputs; i++) c->out[i] = t;
  for (int k = 0; k < o->num_attrs; k++) {
    const UD_AttrInfo* w = &o->attrs[k];
    c->attrs[k].name = w->name;
    c->attrs[k].type = w->type;
    switch (w->type) {
      case UD_ATTR_INT: c->attrs[k].value.i = w->i; break;
      case UD_ATTR_FLOAT: c->attrs[k].value.f = w->f; break;
      case UD_ATTR_BOOL: c->attrs[k].value.b = w->b; break;
      case UD_ATTR_STRING: c->attrs[k].value.s = w->s; break;
      case UD_ATTR_INTS:
        c->attrs[k].value.ints.data = w->ints;
        c->attrs[k].value.ints.len = w->ints_len;
        break;
    }
  }
  c->a.struct_size = sizeof(UD_KernelArgs);
  c->a.inputs = c->in;
  c->a.num_inputs = num_inputs;
  c->a.outputs = c->out;
  c->a.num_outputs = o->num_outputs;
  c->a.attrs = c->attrs;
  c->a.num_attrs = o->num_attrs;
}

static void report(const char* name, UD_Error* e) {
  printf("{\"case\":\"%s\",\"code\":%d,\"msg\":\"%s\"}\n", name, (int)ud_kit_error_code(e),
         e ? ud_kit_error_message(e) : "");
  ud_kit_error_destroy(e);
}

/* success-path cases: report only a failure, so the malloc/vsnprintf count stays clean */
static void report_if(const char* name, UD_Error* e) {
  if (e) report(name, e);
}

static void run(const char* name, int op, const Call* c) {
  report(name, ud_kit_check_signature(op, &c->a));
}

/* the kit's choice and scalar checks of the call in `c` */
#define CHOICE(OP, ATTR, INDEX) ud_kit_check_choice(UD_OP_##OP, &c.a, UD_ATTR_##OP##_##ATTR, INDEX)
#define SCALARS(OP, DT) ud_kit_check_scalars(UD_OP_##OP, &c.a, ud_dtype_of(UD_DT_##DT))

static UD_Error* uses_macros(const UD_KernelArgs* a, int flag) {
  UD_KIT_TRY(ud_kit_check_signature(UD_OP_ADD, a));
  UD_KIT_REQUIRE(flag, UD_ERR_UNSUPPORTED, "add: flag = %d, expected 1", flag);
  return NULL;
}

int main(void) {
  Call c;
  int before = calls;
  for (int op = 0; op < UD_OP_COUNT; op++) {
    const UD_OpInfo* o = ud_op_info(op);
    good(&c, op, o->num_inputs + (o->variadic_input >= 0 ? 2 : 0));
    UD_Error* e = ud_kit_check_signature(op, &c.a);
    if (e) report(o->name, e);
    for (int k = 0; k < o->num_attrs; k++) c.attrs[k].name = NULL;
    e = ud_kit_check_signature(op, &c.a);
    if (e) report(o->name, e);
    /* defaults: each string's index among its choices (-1: any string), scalars fit the dtype */
    for (int k = 0; k < o->num_attrs; k++) {
      const UD_AttrInfo* w = &o->attrs[k];
      if (w->type != UD_ATTR_STRING) continue;
      int want = -1, got = -2;
      for (int j = 0; j < w->num_choices; j++)
        if (strcmp(w->choices[j], w->s) == 0) want = j;
      e = ud_kit_check_choice(op, &c.a, k, &got);
      if (e) report(o->name, e);
      if (got != want)
        printf("{\"case\":\"%s\",\"code\":-1,\"msg\":\"choice %d\"}\n", o->name, got);
    }
    for (int d = 0; d < UD_DT_COUNT; d++)
      if ((e = ud_kit_check_scalars(op, &c.a, ud_dtype_of(d)))) report(o->name, e);
  }
  int picks[4] = {-2, -2, -2, -2};
  good(&c, UD_OP_GELU, 1);
  c.attrs[UD_ATTR_GELU_APPROXIMATE].value.s = "tanh";
  report_if("ok_gelu_tanh", CHOICE(GELU, APPROXIMATE, &picks[0]));
  good(&c, UD_OP_MSE_LOSS, 2);
  c.attrs[UD_ATTR_MSE_LOSS_REDUCTION].value.s = "sum";
  report_if("ok_mse_sum", CHOICE(MSE_LOSS, REDUCTION, &picks[1]));
  report_if("ok_mse_sum_no_index", CHOICE(MSE_LOSS, REDUCTION, NULL));
  good(&c, UD_OP_CONV2D, 3);
  c.attrs[UD_ATTR_CONV2D_ALGORITHM].value.s = "anything";
  report_if("ok_conv_any", CHOICE(CONV2D, ALGORITHM, &picks[2]));
  good(&c, UD_OP_ADD, 2);
  c.attrs[UD_ATTR_ADD_ALPHA].value.f = -3.0;
  report_if("ok_add_int_alpha", SCALARS(ADD, INT32));
  c.attrs[UD_ATTR_ADD_ALPHA].value.f = 0.5;
  report_if("ok_add_float_alpha", SCALARS(ADD, FLOAT32));
  good(&c, UD_OP_FILL, 0);
  c.attrs[UD_ATTR_FILL_VALUE].value.f = 1e300;
  report_if("ok_fill_huge_float", SCALARS(FILL, FLOAT32));
  report_if("ok_fill_huge_bool", SCALARS(FILL, BOOL));
  good(&c, UD_OP_GEMM, 3);
  c.in[UD_IN_GEMM_C].ndim = -1;
  report("gemm_absent_c", ud_kit_check_signature(UD_OP_GEMM, &c.a));
  good(&c, UD_OP_BATCH_NORM, 5);
  for (int i = 1; i < 5; i++) c.in[i].ndim = -1;
  report("batch_norm_absent_optionals", ud_kit_check_signature(UD_OP_BATCH_NORM, &c.a));
  int id = -1;
  report("dtype_in_ok", ud_kit_check_dtype_in("add", "x", &c.in[0], UD_DTM_FLOAT_GROUP, &id));
  printf("{\"case\":\"success_calls\",\"code\":%d,\"msg\":\"%d\"}\n", calls - before, id);
  printf("{\"case\":\"choice_indices\",\"code\":0,\"msg\":\"%d %d %d\"}\n", picks[0], picks[1],
         picks[2]);

  good(&c, UD_OP_GELU, 1);
  c.attrs[UD_ATTR_GELU_APPROXIMATE].value.s = "fast";
  picks[3] = 7;
  report("choice_bad", CHOICE(GELU, APPROXIMATE, &picks[3]));
  printf("{\"case\":\"choice_bad_index\",\"code\":0,\"msg\":\"%d\"}\n", picks[3]);
  good(&c, UD_OP_NLL_LOSS, 2);
  c.attrs[UD_ATTR_NLL_LOSS_REDUCTION].value.s = "avg";
  report("choice_bad3", CHOICE(NLL_LOSS, REDUCTION, NULL));
  c.attrs[UD_ATTR_NLL_LOSS_REDUCTION].value.s = "Mean";
  report("choice_case", CHOICE(NLL_LOSS, REDUCTION, NULL));
  c.attrs[UD_ATTR_NLL_LOSS_REDUCTION].value.s = "";
  report("choice_empty", CHOICE(NLL_LOSS, REDUCTION, NULL));
  good(&c, UD_OP_GELU, 1);
  report("choice_bad_op", ud_kit_check_choice(UD_OP_COUNT, &c.a, 0, NULL));
  report("choice_bad_attr", ud_kit_check_choice(UD_OP_GELU, &c.a, 1, NULL));
  report("choice_negative_attr", ud_kit_check_choice(UD_OP_GELU, &c.a, -1, NULL));
  good(&c, UD_OP_ADD, 2);
  report("choice_not_string", CHOICE(ADD, ALPHA, NULL));
  report("choice_null_args", ud_kit_check_choice(UD_OP_GELU, NULL, 0, NULL));
  good(&c, UD_OP_GELU, 1);
  c.attrs[UD_ATTR_GELU_APPROXIMATE].value.s = NULL;
  report("choice_null_string", CHOICE(GELU, APPROXIMATE, NULL));
  good(&c, UD_OP_GELU, 1);
  c.attrs[UD_ATTR_GELU_APPROXIMATE].type = UD_ATTR_INT;
  report("choice_wrong_type", CHOICE(GELU, APPROXIMATE, NULL));
  good(&c, UD_OP_GELU, 1);
  c.a.num_attrs = 0;
  report("choice_no_attrs", CHOICE(GELU, APPROXIMATE, NULL));

  good(&c, UD_OP_ADD, 2);
  c.attrs[UD_ATTR_ADD_ALPHA].value.f = 1.5;
  report("scalars_integral", SCALARS(ADD, INT32));
  good(&c, UD_OP_SUB, 2);
  c.attrs[UD_ATTR_SUB_ALPHA].value.f = 1e19;
  report("scalars_sub_range", SCALARS(SUB, INT64));
  good(&c, UD_OP_FILL, 0);
  c.attrs[UD_ATTR_FILL_VALUE].value.f = 1e20;
  report("scalars_fill_range", SCALARS(FILL, INT32));
  c.attrs[UD_ATTR_FILL_VALUE].value.f = 2.5;
  report("scalars_fill_fraction_ok", SCALARS(FILL, INT32));
  good(&c, UD_OP_PAD_CONSTANT, 1);
  c.attrs[UD_ATTR_PAD_CONSTANT_VALUE].value.f = NAN;
  report("scalars_pad_nan", SCALARS(PAD_CONSTANT, INT64));
  report("scalars_pad_nan_float", SCALARS(PAD_CONSTANT, FLOAT64));
  report("scalars_bad_op", ud_kit_check_scalars(-1, &c.a, ud_dtype_of(UD_DT_INT64)));
  good(&c, UD_OP_ADD, 2);
  report("scalars_null_args", ud_kit_check_scalars(UD_OP_ADD, NULL, ud_dtype_of(UD_DT_INT32)));
  c.a.num_attrs = 0;
  report("scalars_attr_count", SCALARS(ADD, INT32));
  good(&c, UD_OP_ADD, 2);
  c.attrs[UD_ATTR_ADD_ALPHA].type = UD_ATTR_INT;
  report("scalars_wrong_type", SCALARS(ADD, INT32));
  good(&c, UD_OP_COPY, 1);
  report("scalars_none", SCALARS(COPY, INT32));

  report("null_args", ud_kit_check_signature(UD_OP_ADD, NULL));
  report("bad_op_id", ud_kit_check_signature(UD_OP_COUNT, &c.a));
  good(&c, UD_OP_ADD, 2); c.a.struct_size = 8; run("struct_size", UD_OP_ADD, &c);
  good(&c, UD_OP_ADD, 1); run("too_few_inputs", UD_OP_ADD, &c);
  good(&c, UD_OP_ADD, 3); run("too_many_inputs", UD_OP_ADD, &c);
  good(&c, UD_OP_ADD, 2); c.a.num_outputs = 2; run("outputs", UD_OP_ADD, &c);
  good(&c, UD_OP_ADD, 2); c.a.num_attrs = 0; run("attr_count", UD_OP_ADD, &c);
  good(&c, UD_OP_ADD, 2); c.a.inputs = NULL; run("null_inputs", UD_OP_ADD, &c);
  good(&c, UD_OP_ADD, 2); c.a.outputs = NULL; run("null_outputs", UD_OP_ADD, &c);
  good(&c, UD_OP_ADD, 2); c.a.attrs = NULL; run("null_attrs", UD_OP_ADD, &c);
  good(&c, UD_OP_ADD, 2); c.attrs[0].type = UD_ATTR_INT; run("attr_type", UD_OP_ADD, &c);
  good(&c, UD_OP_ADD, 2); c.attrs[0].name = "beta"; run("attr_name", UD_OP_ADD, &c);
  good(&c, UD_OP_CONV2D, 3);
  UD_Attr tmp = c.attrs[0]; c.attrs[0] = c.attrs[1]; c.attrs[1] = tmp;
  run("attr_order", UD_OP_CONV2D, &c);
  good(&c, UD_OP_CONV2D, 3); c.attrs[UD_ATTR_CONV2D_ALGORITHM].value.s = NULL;
  run("null_string", UD_OP_CONV2D, &c);
  good(&c, UD_OP_CONV2D, 3); c.attrs[UD_ATTR_CONV2D_STRIDE].value.ints.len = -1;
  run("negative_ints_len", UD_OP_CONV2D, &c);
  good(&c, UD_OP_CONV2D, 3); c.attrs[UD_ATTR_CONV2D_STRIDE].value.ints.data = NULL;
  run("null_ints_data", UD_OP_CONV2D, &c);
  good(&c, UD_OP_CONV2D, 3); c.attrs[UD_ATTR_CONV2D_STRIDE].value.ints.data = NULL;
  c.attrs[UD_ATTR_CONV2D_STRIDE].value.ints.len = 0; run("empty_ints_null_data", UD_OP_CONV2D, &c);
  good(&c, UD_OP_CONV2D, 3); c.in[UD_IN_CONV2D_WEIGHT].shape = bad_shape;
  run("bad_shape", UD_OP_CONV2D, &c);
  good(&c, UD_OP_CONV2D, 3); c.in[UD_IN_CONV2D_BIAS].strides = NULL;
  run("null_strides", UD_OP_CONV2D, &c);
  good(&c, UD_OP_CONV2D, 3); c.in[UD_IN_CONV2D_X].ndim = 17; run("ndim", UD_OP_CONV2D, &c);
  good(&c, UD_OP_CONV2D, 3); c.in[UD_IN_CONV2D_X].ndim = -2; run("ndim_minus_2", UD_OP_CONV2D, &c);
  good(&c, UD_OP_CONV2D, 3); c.in[UD_IN_CONV2D_X].handle = 0; run("null_handle", UD_OP_CONV2D, &c);
  good(&c, UD_OP_CONV2D, 3); c.in[UD_IN_CONV2D_WEIGHT].ndim = -1;
  run("absent_required", UD_OP_CONV2D, &c);
  good(&c, UD_OP_CONV2D, 3); c.out[0].ndim = -1; run("absent_output", UD_OP_CONV2D, &c);
  good(&c, UD_OP_MAX_POOL2D, 1); c.out[UD_OUT_MAX_POOL2D_INDICES].shape = bad_shape;
  run("bad_output", UD_OP_MAX_POOL2D, &c);
  good(&c, UD_OP_CONCAT, 0); run("concat_none", UD_OP_CONCAT, &c);
  good(&c, UD_OP_CONCAT, 1); run("concat_one", UD_OP_CONCAT, &c);
  good(&c, UD_OP_CONCAT, 4); c.in[2].shape = bad_shape; run("concat_bad_element", UD_OP_CONCAT, &c);
  good(&c, UD_OP_CONCAT, 4); c.in[3].ndim = -1; run("concat_absent_element", UD_OP_CONCAT, &c);
  good(&c, UD_OP_FILL, 0); run("fill_no_inputs", UD_OP_FILL, &c);
  good(&c, UD_OP_FILL, 1); run("fill_one_input", UD_OP_FILL, &c);
  good(&c, UD_OP_COPY, 1); c.a.num_attrs = 2; run("copy_attrs", UD_OP_COPY, &c);
  good(&c, UD_OP_CONV2D, 3); c.a.num_attrs = 4; run("conv2d_attrs", UD_OP_CONV2D, &c);
  good(&c, UD_OP_FILL, 0); c.a.inputs = NULL; run("fill_null_inputs_ok", UD_OP_FILL, &c);

  good(&c, UD_OP_ADD, 2);
  c.in[0].dtype.code = UD_DTYPE_INT;
  report("dtype_in_bad", ud_kit_check_dtype_in("add", "x", &c.in[0], UD_DTM_FLOAT_GROUP, NULL));
  c.in[0].dtype.lanes = 4;
  report("dtype_in_vector", ud_kit_check_dtype_in("mul", "y", &c.in[0], UD_DTM_ALL, NULL));
  good(&c, UD_OP_ADD, 2);
  report("try_ok_require_fails", uses_macros(&c.a, 0));
  report("try_ok_require_ok", uses_macros(&c.a, 1));
  c.a.num_inputs = 5;
  report("try_returns", uses_macros(&c.a, 1));
  return 0;
}
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, tuple[int, str]]:
    if not shutil.which("cc"):
        pytest.skip("no C compiler")
    tmp = tmp_path_factory.mktemp("kit")
    (tmp / "harness.c").write_text(HARNESS)
    cmd = ["cc", "-std=c17", "-O1", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{INCLUDE}",
           str(tmp / "harness.c"), "-o", str(tmp / "harness"),
           "-Wl,--wrap=malloc,--wrap=vsnprintf"]
    build = subprocess.run(cmd, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(tmp / "harness")], capture_output=True, text=True, check=True).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    return {r["case"]: (r["code"], r["msg"]) for r in rows}


INVALID, UNSUPPORTED, INTERNAL = 1, 5, 8


def test_every_op_accepts_a_well_formed_call(results):
    bad = {k: v for k, v in results.items() if k in opset.OPS}
    assert not bad, f"well-formed calls refused: {bad}"
    assert results["gemm_absent_c"] == (0, "")
    assert results["batch_norm_absent_optionals"] == (0, "")
    assert results["concat_one"] == (0, "")
    assert results["fill_no_inputs"] == (0, "")
    assert results["fill_null_inputs_ok"] == (0, "")
    assert results["empty_ints_null_data"] == (0, "")


def test_success_formats_and_allocates_nothing(results):
    assert results["success_calls"] == (0, str(list(dtypes.DTYPES).index("float32")))
    assert not {k: v for k, v in results.items() if k.startswith("ok_")}, "refused"


def test_choice_gives_the_op_set_index(results):
    gelu, mse = opset.OPS["gelu"].attrs, opset.OPS["mse_loss"].attrs
    want = [gelu[0].choices.index("tanh"), mse[-1].choices.index("sum"), -1]
    assert results["choice_indices"] == (0, " ".join(map(str, want)))
    assert results["choice_bad_index"] == (0, "-1")


@pytest.mark.parametrize("case, code, msg", [
    ("null_args", INVALID, "add: kernel arguments are NULL"),
    ("bad_op_id", INTERNAL,
     f"ud_kit_check_signature: op id {len(opset.OPS)}, expected 0..{len(opset.OPS) - 1}"),
    ("struct_size", INVALID, "add: UD_KernelArgs.struct_size = 8, expected >= "),
    ("too_few_inputs", INVALID, "add: 1 inputs, expected 2 (x, y)"),
    ("too_many_inputs", INVALID, "add: 3 inputs, expected 2 (x, y)"),
    ("outputs", INVALID, "add: 2 outputs, expected 1 (out)"),
    ("attr_count", INVALID, "add: 0 attributes, expected 1 (alpha)"),
    ("null_inputs", INVALID, "add: NULL inputs array, expected 2 entries"),
    ("null_outputs", INVALID, "add: NULL outputs array, expected 1 entries"),
    ("null_attrs", INVALID, "add: NULL attrs array, expected 1 entries"),
    ("fill_one_input", INVALID, "fill: 1 inputs, expected 0$"),
    ("copy_attrs", INVALID, "copy: 2 attributes, expected 0$"),
    ("conv2d_attrs", INVALID,
     "conv2d: 4 attributes, expected 5 (stride, padding, dilation, groups, algorithm)"),
    ("attr_type", INVALID, "add: attribute 'alpha' has type int, expected float"),
    ("attr_name", INVALID, "add: attribute 0 is 'beta', expected 'alpha'"),
    ("attr_order", INVALID, "conv2d: attribute 0 is 'padding', expected 'stride'"),
    ("null_string", INVALID, "conv2d: attribute 'algorithm' is a NULL string"),
    ("negative_ints_len", INVALID, "conv2d: attribute 'stride' has len -1"),
    ("null_ints_data", INVALID, "conv2d: attribute 'stride' has len 2 and NULL data"),
    ("bad_shape", INVALID, "conv2d: 'weight' shape[1] = -1, expected >= 0"),
    ("null_strides", INVALID, "conv2d: 'bias' has NULL shape or strides"),
    ("ndim", INVALID, "conv2d: 'x' has ndim 17, expected 0..16"),
    ("ndim_minus_2", INVALID, "conv2d: 'x' has ndim -2, expected 0..16"),
    ("null_handle", INVALID, "conv2d: 'x' has a null handle"),
    ("absent_required", INVALID, "conv2d: input 'weight' is absent (ndim -1), expected a tensor"),
    ("absent_output", INVALID, "conv2d: output 'y' is absent (ndim -1), expected a tensor"),
    ("bad_output", INVALID, "max_pool2d: 'indices' shape[1] = -1"),
    ("concat_none", INVALID, "concat: 0 inputs, expected at least 1 (tensors)"),
    ("concat_bad_element", INVALID, "concat: 'tensors[2]' shape[1] = -1"),
    ("concat_absent_element", INVALID, "concat: input 'tensors[3]' is absent"),
    ("dtype_in_bad", INVALID, "add: 'x' has dtype int32, expected one of float32, float64"),
    ("dtype_in_vector", INVALID,
     "mul: 'y' has dtype unknown, expected one of float32, float64, int32, int64, bool"),
    ("choice_bad", INVALID, "gelu: attribute 'approximate' is 'fast', expected 'none' or 'tanh'$"),
    ("choice_bad3", INVALID,
     "nll_loss: attribute 'reduction' is 'avg', expected 'none', 'mean' or 'sum'$"),
    ("choice_case", INVALID, "nll_loss: attribute 'reduction' is 'Mean', expected 'none', "),
    ("choice_empty", INVALID, "nll_loss: attribute 'reduction' is '', expected 'none', "),
    ("choice_bad_op", INTERNAL,
     f"ud_kit_check_choice: op id {len(opset.OPS)}, expected 0..{len(opset.OPS) - 1}$"),
    ("choice_bad_attr", INTERNAL,
     "ud_kit_check_choice: gelu has no string attribute at position 1$"),
    ("choice_negative_attr", INTERNAL, "ud_kit_check_choice: gelu has no string attribute at "),
    ("choice_not_string", INTERNAL, "ud_kit_check_choice: add has no string attribute at "),
    ("choice_null_args", INVALID, "gelu: kernel arguments are NULL$"),
    ("choice_null_string", INVALID, "gelu: attribute 'approximate' is a NULL string"),
    ("choice_wrong_type", INVALID, "gelu: attribute 'approximate' has type int, expected str$"),
    ("choice_no_attrs", INVALID, "gelu: 0 attributes, expected 1 (approximate)$"),
    ("scalars_integral", INVALID,
     "add: attribute 'alpha' = 1.5 must be integral for int32 inputs$"),
    ("scalars_sub_range", INVALID, "sub: attribute 'alpha' = 1e+19 cannot be converted to int64"),
    ("scalars_fill_range", INVALID, "fill: attribute 'value' = 1e+20 cannot be converted to int32"),
    ("scalars_fill_fraction_ok", 0, ""),
    ("scalars_pad_nan", INVALID, "pad_constant: attribute 'value' = nan cannot be converted to "),
    ("scalars_pad_nan_float", 0, ""),
    ("scalars_bad_op", INTERNAL, "ud_kit_check_scalars: op id -1, expected 0.."),
    ("scalars_null_args", INVALID, "add: kernel arguments are NULL$"),
    ("scalars_attr_count", INVALID, "add: 0 attributes, expected 1 (alpha)$"),
    ("scalars_wrong_type", INVALID, "add: attribute 'alpha' has type int, expected float$"),
    ("scalars_none", 0, ""),
    ("try_ok_require_fails", UNSUPPORTED, "add: flag = 0, expected 1"),
    ("try_ok_require_ok", 0, ""),
    ("try_returns", INVALID, "add: 5 inputs, expected 2 (x, y)"),
])
def test_bad_calls_name_op_and_argument(results, case, code, msg):
    got_code, got_msg = results[case]
    assert got_code == code, (case, got_msg)
    if msg.endswith("$") or not msg:  # the whole message
        assert got_msg == msg.rstrip("$"), (case, got_msg)
    else:
        assert got_msg.startswith(msg), (case, got_msg)
