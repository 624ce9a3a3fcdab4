"""The generated ops.h: current with the op set, C17/C++17 clean, its tables equal to Python's."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from unidev.contract import dtypes, errors, gen, opset

INCLUDE = Path(gen.__file__).resolve().parent / "include"

# dumps every table of ops.h as JSON so the comparison below is against Python, not the generator
DUMP = r"""
#include <stdio.h>
#include <unidev/ops.h>
#include <unidev/plugin_kit.h>

static void str(const char* s) {
  if (s) printf("\"%s\"", s); else printf("null");
}

static void strs(const char* const* v, int n) {
  printf("[");
  for (int i = 0; i < n; i++) { if (i) printf(","); str(v[i]); }
  printf("]");
}

/* kernels serving several ops compare, select and mix positions of different ops (and ints):
 * this must compile warning-free in C and C++ (one enum type per op would warn in C++) */
#ifdef __cplusplus
#define STATIC_ASSERT static_assert
#else
#define STATIC_ASSERT _Static_assert
#endif
STATIC_ASSERT(UD_ATTR_MAX_POOL2D_STRIDE == UD_ATTR_AVG_POOL2D_STRIDE, "pool positions differ");
STATIC_ASSERT(UD_IN_SOFTMAX_BACKWARD_Y != UD_ATTR_SOFTMAX_AXIS, "softmax positions");
static int pool_stride(int is_max) {
  return is_max ? UD_ATTR_MAX_POOL2D_STRIDE : UD_ATTR_AVG_POOL2D_STRIDE;
}
static int bias_or_none(int has_bias) { return has_bias ? UD_IN_CONV2D_BIAS : -1; }
static int same_x(int i) { return i == UD_IN_ADD_X && UD_IN_ADD_X == UD_IN_CONV2D_X; }

int main(void) {
  printf("{\"mixed\":[%d,%d,%d,%d],", pool_stride(1), pool_stride(0), bias_or_none(0),
         same_x(0));
  printf("\"dtypes\":[");
  for (int i = 0; i < UD_DT_COUNT; i++) {
    UD_DType d = ud_dtype_of(i);
    printf("%s[\"%s\",%d,%d,%d,%d,\"%s\"]", i ? "," : "", ud_dtype_name(d), d.code, d.bits,
           ud_dtype_id(d), ud_dtype_from_name(ud_dtype_name(d)), ud_kit_dtype_name(d));
  }
  UD_DType vec = {UD_DTYPE_FLOAT, 32, 4}, odd = {UD_DTYPE_FLOAT, 8, 1};
  printf("],\"bad_dtype\":[%d,%d,\"%s\",%d,%d,%d],", ud_dtype_id(vec), ud_dtype_id(odd),
         ud_dtype_name(odd), ud_dtype_from_name("float"), ud_dtype_from_name(NULL),
         ud_dtype_of(UD_DT_COUNT).bits);
  printf("\"masks\":{\"FLOAT\":%u,\"INT\":%u,\"NUMERIC\":%u,\"ALL\":%u,\"BOOL\":%u},",
         UD_DTM_FLOAT_GROUP, UD_DTM_INT_GROUP, UD_DTM_NUMERIC, UD_DTM_ALL, UD_DTM_BOOL);
  printf("\"ops\":[");
  for (int op = 0; op < UD_OP_COUNT; op++) {
    const UD_OpInfo* o = ud_op_info(op);
    printf("%s{\"name\":\"%s\",\"id\":%d,\"tier\":%d,\"variadic\":%d,\"optional\":%u,",
           op ? "," : "", o->name, ud_op_id(o->name), o->tier, o->variadic_input,
           o->optional_inputs);
    printf("\"inputs\":"); strs(o->input_names, o->num_inputs);
    printf(",\"outputs\":"); strs(o->output_names, o->num_outputs);
    printf(",\"dtypes\":%u,\"broadcast\":%d,\"attrs\":[", o->dtypes, o->broadcast);
    for (int k = 0; k < o->num_attrs; k++) {
      const UD_AttrInfo* a = &o->attrs[k];
      printf("%s{\"name\":\"%s\",\"type\":%d,\"scalar\":%d,\"default\":", k ? "," : "", a->name,
             (int)a->type, (int)a->scalar);
      switch (a->type) {
        case UD_ATTR_INT: printf("%lld", (long long)a->i); break;
        case UD_ATTR_FLOAT:  /* clamp's open bounds: JSON's Infinity, as Python's json reads it */
          if (a->f - a->f != 0) printf("%sInfinity", a->f < 0 ? "-" : "");
          else printf("%.17g", a->f);
          break;
        case UD_ATTR_BOOL: printf("%s", a->b ? "true" : "false"); break;
        case UD_ATTR_STRING: str(a->s); break;
        case UD_ATTR_INTS:
          printf("[");
          for (int j = 0; j < a->ints_len; j++)
            printf("%s%lld", j ? "," : "", (long long)a->ints[j]);
          printf("]");
          break;
      }
      printf(",\"choices\":"); strs(a->choices, a->num_choices);
      printf("}");
    }
    printf("]}");
  }
  printf("],\"bad_op\":[%d,%d,%d,%d],", ud_op_id("nope"), ud_op_id(NULL),
         ud_op_info(-1) == NULL, ud_op_info(UD_OP_COUNT) == NULL);
  printf("\"positions\":[%d,%d,%d,%d,%d,%d,%d],", UD_IN_ADD_Y, UD_OUT_ADD_OUT, UD_ATTR_ADD_ALPHA,
         UD_IN_BATCH_NORM_RUNNING_VAR, UD_ATTR_CONV2D_ALGORITHM, UD_OUT_MAX_POOL2D_INDICES,
         UD_ATTR_NLL_LOSS_IGNORE_INDEX);
  printf("\"kinds\":[");
  for (int c = 0; c <= 9; c++) printf("%s%d", c ? "," : "", ud_error_kind((UD_ErrorCode)c));
  printf("]}\n");
  return 0;
}
"""

_TYPES = {"int": 0, "float": 1, "bool": 2, "str": 3, "ints": 4}
_SCALAR = {"": 0, "value": 1, "integral": 2}


def _mask(names) -> int:
    order = list(dtypes.DTYPES)
    return sum(1 << order.index(n) for n in names)


def test_committed_header_is_current():
    assert gen.HEADER_PATH.read_text() == gen.header(), (
        "unidev/contract/include/unidev/ops.h is stale: run `python -m unidev.contract.gen`")
    assert gen.main(["--check"]) == 0


def _compile_and_run(tmp_path: Path, compiler: str, std: str, suffix: str) -> dict:
    if not shutil.which(compiler):
        pytest.skip(f"{compiler} not found")
    src = tmp_path / f"dump{suffix}"
    src.write_text(DUMP)
    exe = tmp_path / f"dump_{std}"
    subprocess.run([compiler, f"-std={std}", "-Wall", "-Wextra", "-Werror", "-pedantic",
                    f"-I{INCLUDE}", str(src), "-o", str(exe)], check=True, capture_output=True,
                   text=True)
    return json.loads(subprocess.run([str(exe)], check=True, capture_output=True,
                                     text=True).stdout)


@pytest.fixture(scope="module", params=[("cc", "c17", ".c"), ("c++", "c++17", ".cpp")],
                ids=["c17", "c++17"])
def dump(request, tmp_path_factory) -> dict:
    try:
        return _compile_and_run(tmp_path_factory.mktemp("gen"), *request.param)
    except subprocess.CalledProcessError as e:
        pytest.fail(f"ops.h + plugin_kit.h do not compile as {request.param[1]}:\n{e.stderr}")


def test_dtype_table_matches_python(dump):
    names = list(dtypes.DTYPES)
    assert [row[0] for row in dump["dtypes"]] == names
    for i, (name, code, bits, id_, from_name, kit_name) in enumerate(dump["dtypes"]):
        assert (code, bits) == dtypes.DTYPES[name]
        assert id_ == i and from_name == i and kit_name == name
    assert dump["bad_dtype"] == [-1, -1, "unknown", -1, -1, 0]
    assert dump["masks"] == {"FLOAT": _mask(dtypes.FLOAT), "INT": _mask(dtypes.INT),
                             "NUMERIC": _mask(dtypes.NUMERIC), "ALL": _mask(dtypes.ALL),
                             "BOOL": _mask(dtypes.BOOL)}


def test_op_table_matches_python(dump):
    ops = list(opset.OPS.values())
    assert [o["name"] for o in dump["ops"]] == [op.name for op in ops]
    for i, (row, op) in enumerate(zip(dump["ops"], ops, strict=True)):
        assert row["id"] == i, op.name
        assert row["tier"] == op.tier, op.name
        assert row["inputs"] == [x.name for x in op.inputs], op.name
        assert row["outputs"] == [x.name for x in op.outputs], op.name
        variadic = [k for k, x in enumerate(op.inputs) if x.variadic]
        assert row["variadic"] == (variadic[0] if variadic else -1), op.name
        assert row["optional"] == sum(1 << k for k, x in enumerate(op.inputs) if x.optional)
        assert row["dtypes"] == _mask(op.dtypes), op.name
        assert row["broadcast"] == int(op.broadcast), op.name
        assert [a["name"] for a in row["attrs"]] == list(op.attr_names), op.name
        for got, a in zip(row["attrs"], op.attrs, strict=True):
            assert got["type"] == _TYPES[a.type], (op.name, a.name)
            assert got["scalar"] == _SCALAR[a.scalar], (op.name, a.name)
            want = list(a.default) if a.type == "ints" else a.default
            assert got["default"] == want, (op.name, a.name)
            assert got["choices"] == list(a.choices), (op.name, a.name)
    assert dump["bad_op"] == [-1, -1, 1, 1]


def test_positions_follow_op_set_order(dump):
    want = [opset.OPS["add"].inputs.index(opset.Input("y")), 0,
            opset.OPS["add"].attr_names.index("alpha"),
            [x.name for x in opset.OPS["batch_norm"].inputs].index("running_var"),
            opset.OPS["conv2d"].attr_names.index("algorithm"),
            [x.name for x in opset.OPS["max_pool2d"].outputs].index("indices"),
            opset.OPS["nll_loss"].attr_names.index("ignore_index")]
    assert dump["positions"] == want
    max_pool, avg_pool = opset.OPS["max_pool2d"].attr_names, opset.OPS["avg_pool2d"].attr_names
    assert dump["mixed"] == [max_pool.index("stride"), avg_pool.index("stride"), -1, 1]


def test_error_kinds_match_the_table(dump):
    codes = {e.code: e.kind for e in errors.ERRORS}
    assert sorted(codes) == list(range(1, 9)), "every UD_ERR_* code needs an exception kind"
    want = [codes.get(c, "RUNTIME") for c in range(10)]
    assert dump["kinds"] == [[k.name for k in errors.KIND_TABLE].index(k) for k in want]
