"""Readable text dump and DOT drawing of a graph (fused nodes colored)."""

from __future__ import annotations

import shutil
import subprocess

from ..contract import opset
from .canonical import attr_items, const_hash
from .ir import VIEW_OPS, Graph, Node, Value, type_str

__all__ = ["text", "dot", "draw"]

_COLORS = {"conv2d_bias_act": "#f4a582", "gemm_bias_act": "#92c5de",
           "elementwise_program": "#b8e186"}


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, tuple):
        return "(" + ", ".join(_fmt(e) for e in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v) if isinstance(v, str) else str(v)


def _node_line(n: Node, name) -> str:
    outs = ", ".join(f"%{name(o)}" for o in n.outputs) or "()"
    ins = list(n.inputs)
    while ins and ins[-1] is None:  # absent trailing optional inputs
        ins.pop()
    args = ", ".join(f"%{name(v)}" if v is not None else "_" for v in ins)
    attrs = "".join(f" {k}={_fmt(v)}" for k, v in attr_items(n))
    types = ", ".join(type_str(o) for o in n.outputs)
    upd = [f"%{name(o.updates)}" for o in n.outputs if o.updates is not None]
    note = f"  # updates {', '.join(upd)} in place" if upd else ""
    return f"  {outs} = {n.op}({args}){attrs} : {types}{note}"


def text(g: Graph, names: dict[Value, str] | None = None, order: list[Node] | None = None,
         header: bool = True) -> str:
    """The graph as text, one line per node in topological order."""
    def name(v: Value) -> str:
        return names[v] if names is not None else v.name
    order = g.order() if order is None else order
    ins = ", ".join(f"%{name(v)}: {type_str(v)}" for v in g.inputs)
    lines = [f"graph {g.name if header else ''}({ins}) {{"]
    for v, data in sorted(g.consts.items(), key=lambda kv: name(kv[0])):
        lines.append(f"  %{name(v)} = const {type_str(v)} #{const_hash(data)}")
    lines += [_node_line(n, name) for n in order]
    lines.append("  return " + ", ".join(f"%{name(v)}" for v in g.outputs))
    lines.append("}")
    return "\n".join(lines)


def _label(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def dot(g: Graph) -> str:
    """Graphviz DOT: values flow along edges, fused nodes filled by kind, views dashed."""
    lines = [f'digraph "{_label(g.name)}" {{', "  rankdir=TB;",
             '  node [shape=box, style="rounded,filled", fillcolor=white, fontname=monospace];']
    src: dict[Value, str] = {}
    for k, v in enumerate(g.inputs):
        src[v] = f"in{k}"
        lines.append(f'  in{k} [label="{_label(v.name)}\\n{type_str(v)}", shape=oval, '
                     'fillcolor="#eeeeee"];')
    for k, v in enumerate(g.consts):
        src[v] = f"c{k}"
        lines.append(f'  c{k} [label="const {type_str(v)}", shape=note, fillcolor="#f7f7f7"];')
    for k, n in enumerate(g.order()):
        for o in n.outputs:
            src[o] = f"n{k}"
        extra = ""
        if n.op == "elementwise_program":
            extra = "\\n" + _label(str(n.attrs.get("program", "")))[:60]
        elif "activation" in n.attrs:
            extra = f"\\n{n.attrs['activation']}"
        schema = n.schema
        fused = schema is not None and schema.tier == max(opset.TIERS) and n.op in _COLORS
        style = ', style="dashed,rounded,filled"' if n.op in VIEW_OPS else ""
        color = _COLORS.get(n.op, "white") if fused or n.op in _COLORS else "white"
        lines.append(f'  n{k} [label="{_label(n.name)}: {n.op}{extra}\\n'
                     f'{", ".join(type_str(o) for o in n.outputs)}", fillcolor="{color}"{style}];')
        for v in n.inputs:
            if v is not None:
                lines.append(f"  {src[v]} -> n{k};")
    for k, v in enumerate(g.outputs):
        lines.append(f'  out{k} [label="output {k}", shape=oval, fillcolor="#eeeeee"];')
        lines.append(f"  {src[v]} -> out{k};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def draw(g: Graph, path: str) -> str:
    """Write the drawing: `path` ending in .png (needs Graphviz's `dot`) or anything else for
    the DOT text. Returns the path written."""
    source = dot(g)
    if path.endswith((".png", ".svg", ".pdf")):
        exe = shutil.which("dot")
        if exe is None:
            raise FileNotFoundError(f"draw('{path}'): Graphviz's 'dot' is not on PATH; write a "
                                    ".dot file instead (or install graphviz)")
        subprocess.run([exe, f"-T{path.rsplit('.', 1)[1]}", "-o", path], input=source.encode(),
                       check=True)
        return path
    with open(path, "w") as f:
        f.write(source)
    return path
