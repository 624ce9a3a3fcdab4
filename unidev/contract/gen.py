"""Writes include/unidev/ops.h (op ids, signatures, dtypes, program ops, errors) from the op set."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from . import dtypes, errors, opset

__all__ = ["header", "HEADER_PATH", "KINDS", "error_kinds", "main"]

HEADER_PATH = Path(__file__).resolve().parent / "include" / "unidev" / "ops.h"

KINDS = tuple(k.name for k in errors.KIND_TABLE)

_CODES = {0: "UD_DTYPE_INT", 1: "UD_DTYPE_UINT", 2: "UD_DTYPE_FLOAT", 4: "UD_DTYPE_BFLOAT",
          6: "UD_DTYPE_BOOL"}
_ATTR_TYPES = {"int": "UD_ATTR_INT", "float": "UD_ATTR_FLOAT", "bool": "UD_ATTR_BOOL",
               "str": "UD_ATTR_STRING", "ints": "UD_ATTR_INTS"}
_SCALARS = {"": "UD_SCALAR_NONE", "value": "UD_SCALAR_VALUE", "integral": "UD_SCALAR_INTEGRAL"}
_GROUPS = (("FLOAT_GROUP", dtypes.FLOAT), ("INT_GROUP", dtypes.INT), ("NUMERIC", dtypes.NUMERIC),
           ("ALL", dtypes.ALL))


def error_kinds() -> dict[str, str]:
    """UD_ERR_* suffix -> exception kind, from unidev/contract/errors.py."""
    return {e.name: e.kind for e in errors.ERRORS}


def _id(name: str) -> str:
    return name.upper()


def _c_str(s: str) -> str:
    assert all(32 <= ord(c) < 127 and c not in '"\\' for c in s), s
    return f'"{s}"'


def _c_float(v: float) -> str:
    r = repr(float(v))
    assert r != "nan", v
    # an open bound (clamp's min and max): GCC, Clang and nvcc fold the builtin in initializers
    return {"inf": "__builtin_inf()", "-inf": "-__builtin_inf()"}.get(r, r)


def _mask(names) -> str:
    return " | ".join(f"UD_DTM_{_id(n)}" for n in names) or "0u"


def _op_mask(names) -> str:
    """A group's name when `names` is exactly that group (keeps the rows short)."""
    for g, members in reversed(_GROUPS):
        if set(names) == set(members):
            return f"UD_DTM_{g}"
    return _mask(names)


def _wrap(head: str, items: list[str], tail: str, indent: str) -> list[str]:
    """`head` + comma-separated `items` + `tail`, broken into lines of at most 100 columns."""
    lines, cur = [], head
    for k, item in enumerate(items):
        piece = item + ("," if k < len(items) - 1 else tail)
        if len(cur) + 1 + len(piece) > 100 and cur.strip():
            lines.append(cur.rstrip())
            cur = indent
        cur += ("" if cur in (head, indent) else " ") + piece
    return lines + [cur]


def _dtype_section() -> list[str]:
    rows = [f'  X({_id(n)}, "{n}", {_CODES[code]}, {bits})'
            for n, (code, bits) in dtypes.DTYPES.items()]
    out = ["/* ---- dtypes: the one canonical table " + "-" * 54,
           " * X(ID, \"name\", UD_DTypeCode, bits) in unidev.contract.dtypes.DTYPES order. */",
           "#define UD_DTYPES(X) \\", " \\\n".join(rows), "",
           "typedef enum UD_DTypeId {"]
    out += [f"  UD_DT_{_id(n)}," for n in dtypes.DTYPES]
    out += ["  UD_DT_COUNT", "} UD_DTypeId;", ""]
    out += [f"#define UD_DTM_{_id(n)} (1u << UD_DT_{_id(n)})" for n in dtypes.DTYPES]
    out += ["/* the op set's dtype groups (unidev.contract.dtypes; ALL is the op set's ALL, not "
            "every row) */"]
    out += [f"#define UD_DTM_{g} ({_mask(names)})" for g, names in _GROUPS]
    out += ["",
            "/* index into UD_DTYPES, or -1 when `d` is not a unidev dtype (lanes must be 1) */",
            "static inline int ud_dtype_id(UD_DType d) {",
            "  if (d.lanes != 1) return -1;",
            "#define UD_X_(ID, NAME, CODE, BITS) \\",
            "  if (d.code == (CODE) && d.bits == (BITS)) return UD_DT_##ID;",
            "  UD_DTYPES(UD_X_)",
            "#undef UD_X_",
            "  return -1;",
            "}",
            "",
            "/* the dtype of id `id` ({0, 0, 0} when out of range) */",
            "static inline UD_DType ud_dtype_of(int id) {",
            "  static const UD_DType table[] = {",
            "#define UD_X_(ID, NAME, CODE, BITS) {(uint8_t)(CODE), (uint8_t)(BITS), 1},",
            "      UD_DTYPES(UD_X_)",
            "#undef UD_X_",
            "  };",
            "  if (id < 0 || id >= UD_DT_COUNT) {",
            "    UD_DType none = {0, 0, 0};",
            "    return none;",
            "  }",
            "  return table[id];",
            "}",
            "",
            "static inline const char* ud_dtype_id_name(int id) {",
            "  static const char* const names[] = {",
            "#define UD_X_(ID, NAME, CODE, BITS) NAME,",
            "      UD_DTYPES(UD_X_)",
            "#undef UD_X_",
            "  };",
            "  return id >= 0 && id < UD_DT_COUNT ? names[id] : \"unknown\";",
            "}",
            "",
            "/* \"float32\", ...; \"unknown\" for anything else */",
            "static inline const char* ud_dtype_name(UD_DType d) { return ud_dtype_id_name"
            "(ud_dtype_id(d)); }",
            "",
            "/* id of dtype `name`, -1 if unknown (or NULL) */",
            "static inline int ud_dtype_from_name(const char* name) {",
            "  if (!name) return -1;",
            "  for (int i = 0; i < UD_DT_COUNT; i++)",
            "    if (strcmp(name, ud_dtype_id_name(i)) == 0) return i;",
            "  return -1;",
            "}",
            ""]
    return out


def _positions(op: opset.OpSchema) -> list[tuple[str, int]]:
    names = []
    for prefix, items in (("IN", op.inputs), ("OUT", op.outputs), ("ATTR", op.attrs)):
        names += [(f"UD_{prefix}_{_id(op.name)}_{_id(x.name)}", i) for i, x in enumerate(items)]
    return names


def _position_section(ops: list[opset.OpSchema]) -> list[str]:
    """Plain int macros, one block per op: enum constants would give each op its own C++ type,
    so comparing or selecting positions of two ops (or a position and an int) would warn."""
    # every UD_ name unidev.h defines (UD_ATTR_INT, ...): a position macro must not replace one
    seen = set(re.findall(r"\bUD_[A-Z0-9_]+\b", (HEADER_PATH.parent / "unidev.h").read_text()))
    out = []
    for op in ops:
        rows = _positions(op)
        clash = {n for n, _ in rows} & seen
        assert not clash, f"{op.name}: position names {sorted(clash)} are already defined"
        seen |= {n for n, _ in rows}
        if rows:
            width = max(len(n) for n, _ in rows)
            out += [f"#define {n:<{width}} {i}" for n, i in rows] + [""]
    return out


def _op_tables(op: opset.OpSchema) -> list[str]:
    p = f"ud_op_{op.name}_"
    out = []
    if op.inputs:
        out += _wrap(f"  static const char* const {p}in[] = {{",
                     [_c_str(i.name) for i in op.inputs], "};", "      ")
    if op.outputs:  # optimizer steps have none: they update inputs in place
        out += _wrap(f"  static const char* const {p}out[] = {{",
                     [_c_str(o.name) for o in op.outputs], "};", "      ")
    for a in op.attrs:
        if a.choices:
            out.append(f"  static const char* const {p}{a.name}_choices[] = {{"
                       + ", ".join(_c_str(c) for c in a.choices) + "};")
        if a.type == "ints" and a.default:
            out.append(f"  static const int64_t {p}{a.name}_default[] = {{"
                       + ", ".join(str(int(v)) for v in a.default) + "};")
    if op.attrs:
        rows = []
        for a in op.attrs:
            d = a.default
            i = str(int(d)) if a.type == "int" else "0"
            f = _c_float(d) if a.type == "float" else "0.0"
            b = ("1" if d else "0") if a.type == "bool" else "0"
            s = _c_str(d) if a.type == "str" else "NULL"
            ints = f"{p}{a.name}_default" if a.type == "ints" and d else "NULL"
            n = str(len(d)) if a.type == "ints" else "0"
            ch = f"{p}{a.name}_choices" if a.choices else "NULL"
            rows += _wrap("      {", [_c_str(a.name), _ATTR_TYPES[a.type], _SCALARS[a.scalar], i,
                                          f, b, s, ints, n, ch, str(len(a.choices))], "},",
                          "       ")
        out += [f"  static const UD_AttrInfo {p}attrs[] = {{"] + rows + ["  };"]
    return out


def _op_row(op: opset.OpSchema) -> list[str]:
    p = f"ud_op_{op.name}_"
    var = [i for i, x in enumerate(op.inputs) if x.variadic]
    assert len(var) <= 1, op.name
    opt = sum(1 << i for i, x in enumerate(op.inputs) if x.optional)
    mut = sum(1 << i for i, x in enumerate(op.inputs) if x.mutated)
    var_out = [i for i, x in enumerate(op.outputs) if x.variadic]
    assert not var_out or var_out == [len(op.outputs) - 1], op.name  # only the last may be
    return _wrap("      {", [_c_str(op.name), str(op.tier), str(len(op.inputs)),
                             str(var[0] if var else -1), f"0x{opt:x}u",
                             p + "in" if op.inputs else "NULL", str(len(op.outputs)),
                             p + "out" if op.outputs else "NULL",
                             str(len(op.attrs)), p + "attrs" if op.attrs else "NULL",
                             _op_mask(op.dtypes), str(int(op.broadcast)), f"0x{mut:x}u",
                             str(var_out[0] if var_out else -1)], "},",
                 "       ")


def _op_section() -> list[str]:
    ops = list(opset.OPS.values())
    out = ["/* ---- ops " + "-" * 81,
           " * X(ID, \"name\", tier) in op-set order. */",
           "#define UD_OPS(X) \\",
           " \\\n".join(f'  X({_id(op.name)}, "{op.name}", {op.tier})' for op in ops), "",
           "typedef enum UD_OpId {"]
    out += [f"  UD_OP_{_id(op.name)}," for op in ops]
    out += ["  UD_OP_COUNT", "} UD_OpId;", "",
            "/* positions: UD_IN_<OP>_<INPUT>, UD_OUT_<OP>_<OUTPUT>, UD_ATTR_<OP>_<ATTR> (an input"
            " after a",
            " * variadic one would shift by its extra tensors; none does today). Plain ints, so",
            " * positions of different ops compare and mix in C++ without warnings. */"]
    out += _position_section(ops)
    out += [
            "typedef enum UD_ScalarRule {",
            "  UD_SCALAR_NONE = 0,     /* a plain float attribute */",
            "  UD_SCALAR_VALUE = 1,    /* a value of the op's dtype (ud_kit_check_scalar, "
            "integral 0) */",
            "  UD_SCALAR_INTEGRAL = 2, /* the same, integral for integer dtypes */",
            "} UD_ScalarRule;",
            "",
            "/* One attribute of an op: its name, type and default (the field its type names). */",
            "typedef struct UD_AttrInfo {",
            "  const char* name;",
            "  UD_AttrType type;",
            "  UD_ScalarRule scalar;",
            "  int64_t i;             /* UD_ATTR_INT */",
            "  double f;              /* UD_ATTR_FLOAT */",
            "  int32_t b;             /* UD_ATTR_BOOL */",
            "  const char* s;         /* UD_ATTR_STRING */",
            "  const int64_t* ints;   /* UD_ATTR_INTS: ints_len values (NULL when 0) */",
            "  int32_t ints_len;",
            "  const char* const* choices; /* allowed strings, NULL when any */",
            "  int32_t num_choices;",
            "} UD_AttrInfo;",
            "",
            "/* One op's signature. A variadic input counts once in num_inputs. */",
            "typedef struct UD_OpInfo {",
            "  const char* name;",
            "  int32_t tier;",
            "  int32_t num_inputs;",
            "  int32_t variadic_input;    /* index of the variadic input, -1 if none */",
            "  uint32_t optional_inputs;  /* bit i: input i may be absent (ndim -1) */",
            "  const char* const* input_names;",
            "  int32_t num_outputs;",
            "  const char* const* output_names;",
            "  int32_t num_attrs;",
            "  const UD_AttrInfo* attrs;  /* in op-set order, as kernels receive them */",
            "  uint32_t dtypes;           /* UD_DTM_* of the op's dtypes (first input's) */",
            "  int32_t broadcast;         /* inputs arrive pre-broadcast to the output shape */",
            "  uint32_t mutated_inputs;   /* bit i: the kernel updates input i in place */",
            "  int32_t variadic_output;   /* index of the variadic (last) output, -1 if none: "
            "calls",
            "                              * pass num_outputs >= num_outputs (ABI 1.2's tier 4)"
            " */",
            "} UD_OpInfo;",
            "",
            "/* the signature of op `op` (a UD_OpId), NULL when out of range */",
            "static inline const UD_OpInfo* ud_op_info(int op) {"]
    for op in ops:
        out += _op_tables(op)
    out += ["  static const UD_OpInfo table[UD_OP_COUNT] = {"]
    for op in ops:
        out += _op_row(op)
    out += ["  };",
            "  return op >= 0 && op < UD_OP_COUNT ? &table[op] : NULL;",
            "}",
            "",
            "/* the UD_OpId of op `name`, -1 if unknown (or NULL) */",
            "static inline int ud_op_id(const char* name) {",
            "  if (!name) return -1;",
            "  for (int i = 0; i < UD_OP_COUNT; i++)",
            "    if (strcmp(name, ud_op_info(i)->name) == 0) return i;",
            "  return -1;",
            "}",
            "",
            "/* an attribute holding its op-set default, as a kernel receives it when the caller",
            " * sets nothing (both adapters start every call from these) */",
            "static inline UD_Attr ud_attr_default(const UD_AttrInfo* info) {",
            "  UD_Attr a;",
            "  memset(&a, 0, sizeof a);",
            "  a.name = info->name;",
            "  a.type = info->type;",
            "  switch (info->type) {",
            "    case UD_ATTR_INT: a.value.i = info->i; break;",
            "    case UD_ATTR_FLOAT: a.value.f = info->f; break;",
            "    case UD_ATTR_BOOL: a.value.b = info->b; break;",
            "    case UD_ATTR_STRING: a.value.s = info->s; break;",
            "    case UD_ATTR_INTS:",
            "      a.value.ints.data = info->ints;",
            "      a.value.ints.len = info->ints_len;",
            "      break;",
            "  }",
            "  return a;",
            "}",
            ""]
    return out


def _names_enum(title: str, macro: str, prefix: str, typename: str, fn: str,
                names: tuple[str, ...], doc: str) -> list[str]:
    """X-macro, enum and name -> id lookup for one table of strings (activations, ...)."""
    out = [f"/* ---- {title} " + "-" * max(4, 86 - len(title)), f" * {doc} */",
           f"#define {macro}(X) \\",
           " \\\n".join(f'  X({_id(n)}, "{n}")' for n in names), "",
           f"typedef enum {typename} {{"]
    out += [f"  {prefix}{_id(n)}," for n in names]
    out += [f"  {prefix}COUNT", f"}} {typename};", "",
            "/* the id of `name`, -1 if unknown (or NULL) */",
            f"static inline int {fn}(const char* name) {{",
            "  static const char* const names[] = {" + ", ".join(_c_str(n) for n in names) + "};",
            "  if (!name) return -1;",
            f"  for (int i = 0; i < {prefix}COUNT; i++)",
            "    if (strcmp(name, names[i]) == 0) return i;",
            "  return -1;",
            "}", ""]
    return out


def _program_section() -> list[str]:
    ops = opset.PROGRAM_OPS
    out = _names_enum("tier 4: activations", "UD_ACTIVATIONS", "UD_ACT_", "UD_ActivationId",
                      "ud_activation_id", opset.ACTIVATIONS,
                      "conv2d_bias_act's and gemm_bias_act's `activation` values, in op-set "
                      "order.")
    out += _names_enum("tier 4: reductions", "UD_REDUCTIONS", "UD_RED_", "UD_ReductionId",
                       "ud_reduction_id", opset.REDUCTIONS,
                       "elementwise_program's `reduce` values, in op-set order.")
    out += ["/* ---- tier 4: elementwise_program operators " + "-" * 48,
            " * X(ID, \"token\", arity) in unidev.contract.opset.PROGRAM_OPS order; the "
            "program grammar",
            " * and its limits: opset.py's elementwise_program and plugin_kit.h's "
            "ud_kit_program_parse. */",
            "#define UD_PROGRAM_OPS(X) \\",
            " \\\n".join(f'  X({_id(t)}, "{t}", {a})' for t, a in ops.items()), "",
            "typedef enum UD_ProgramOpId {"]
    out += [f"  UD_PROG_{_id(t)}," for t in ops]
    out += ["  UD_PROG_COUNT", "} UD_ProgramOpId;", ""]
    out += [f"#define UD_PROGRAM_{k.upper()} {v}" for k, v in opset.PROGRAM_LIMITS.items()]
    out += ["",
            "/* the UD_ProgramOpId of the `len` characters at `token`, -1 if none */",
            "static inline int ud_program_op_id(const char* token, size_t len) {",
            "  static const char* const names[] = {",
            "#define UD_X_(ID, NAME, ARITY) NAME,",
            "      UD_PROGRAM_OPS(UD_X_)",
            "#undef UD_X_",
            "  };",
            "  for (int i = 0; i < UD_PROG_COUNT; i++)",
            "    if (strlen(names[i]) == len && memcmp(names[i], token, len) == 0) return i;",
            "  return -1;",
            "}",
            "",
            "static inline const char* ud_program_op_name(int op) {",
            "  static const char* const names[] = {",
            "#define UD_X_(ID, NAME, ARITY) NAME,",
            "      UD_PROGRAM_OPS(UD_X_)",
            "#undef UD_X_",
            "  };",
            "  return op >= 0 && op < UD_PROG_COUNT ? names[op] : \"unknown\";",
            "}",
            "",
            "/* operands the operator pops (it pushes one result); 0 when out of range */",
            "static inline int ud_program_op_arity(int op) {",
            "  static const int arity[] = {",
            "#define UD_X_(ID, NAME, ARITY) ARITY,",
            "      UD_PROGRAM_OPS(UD_X_)",
            "#undef UD_X_",
            "  };",
            "  return op >= 0 && op < UD_PROG_COUNT ? arity[op] : 0;",
            "}",
            ""]
    return out


def _error_section() -> list[str]:
    kinds = error_kinds()
    bad = {k for k in kinds.values() if k not in KINDS}
    assert not bad, f"unknown exception kinds {bad}; expected {KINDS}"
    out = ["/* ---- error codes -> Python exception kinds (unidev/contract/errors.py) " + "-" * 20,
           " * VALUE: ValueError, INDEX: IndexError, NOT_IMPLEMENTED: NotImplementedError,",
           " * MEMORY: MemoryError (torch.OutOfMemoryError), RUNTIME: RuntimeError. */",
           "#define UD_ERROR_KINDS(X) \\",
           " \\\n".join(f"  X(UD_ERR_{c}, {k})" for c, k in kinds.items()), "",
           "typedef enum UD_ErrorKind {"]
    out += [f"  UD_KIND_{k}," for k in KINDS]
    out += ["} UD_ErrorKind;", "",
            "/* the exception kind of `code`; UD_KIND_RUNTIME for a code the table lacks */",
            "static inline int ud_error_kind(UD_ErrorCode code) {",
            "  switch ((int)code) {",
            "#define UD_X_(CODE, KIND) \\",
            "  case CODE:                  \\",
            "    return UD_KIND_##KIND;",
            "    UD_ERROR_KINDS(UD_X_)",
            "#undef UD_X_",
            "    default:",
            "      return UD_KIND_RUNTIME;",
            "  }",
            "}",
            ""]
    return out


def header() -> str:
    """The text of ops.h."""
    lines = ["/* ops.h — the op set, dtypes and error kinds as C tables (generated; do not edit).",
             " *",
             " * Generated from unidev/contract/{opset,dtypes,errors}.py by `python -m "
             "unidev.contract.gen`;",
             " * tests/test_contract_gen.py checks it is current. Header-only, C17 and C++17: "
             "every table",
             " * is a static const inside a static inline function, nothing allocates. */",
             "#ifndef UNIDEV_OPS_H_",
             "#define UNIDEV_OPS_H_",
             "",
             "#include <stdint.h>",
             "#include <string.h>",
             "",
             '#include "unidev.h"',
             "",
             "#ifdef __cplusplus",
             'extern "C" {',
             "#endif",
             ""]
    lines += _dtype_section() + _op_section() + _program_section() + _error_section()
    lines += ["#ifdef __cplusplus", '} /* extern "C" */', "#endif", "",
              "#endif /* UNIDEV_OPS_H_ */", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Rewrite ops.h (`--check`: exit 1 if it is stale instead)."""
    argv = sys.argv[1:] if argv is None else argv
    text = header()
    if "--check" in argv:
        current = HEADER_PATH.read_text() if HEADER_PATH.exists() else ""
        if current != text:
            print(f"{HEADER_PATH} is stale: run `python -m unidev.contract.gen`", file=sys.stderr)
            return 1
        return 0
    HEADER_PATH.write_text(text)
    print(f"wrote {HEADER_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
