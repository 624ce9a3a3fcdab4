"""elementwise_program's postfix programs: the one Python parser, validator and evaluator."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from ..contract.opset import PROGRAM_LIMITS, PROGRAM_OPS
from .errors import InvalidArgumentError

__all__ = ["Instr", "Program", "parse_program", "format_constant", "evaluate", "run",
           "OP_FUNCTIONS"]

V = TypeVar("V")

# the c<num> grammar (plugin_kit.h's ud_kit_program_parse accepts exactly this): a decimal
# with optional fraction and exponent, or inf / -inf / nan; no hex, no underscores, no '+inf'
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_INDEX = re.compile(r"(?:0|[1-9][0-9]{0,5})\Z")  # no sign, no leading zeros
_SPACE = " \t\n\r\v\f"  # C's isspace in the "C" locale (str.split would take more)
_TOKEN = re.compile(r"[^ \t\n\r\v\f]+")


@dataclass(frozen=True)
class Instr:
    """One token: kind is input, const, store, load, output or op; `arg` the index or op name."""

    kind: str
    arg: int | str
    value: float = 0.0  # const
    token: str = ""


@dataclass(frozen=True)
class Program:
    """A validated program: instructions, how many inputs/outputs it uses, its deepest stack."""

    text: str
    instrs: tuple[Instr, ...]
    num_inputs: int
    num_outputs: int
    max_stack: int


def _bad(op: str, pos: int, token: str, why: str) -> InvalidArgumentError:
    # quoted like the C parser's messages: at most 64 characters, in single quotes
    return InvalidArgumentError(f"{op}: attribute 'program': token {pos} '{token[:64]}': {why}")


def format_constant(value: float) -> str:
    """The c<num> token for `value` (repr round-trips every double; inf/nan spelled as allowed)."""
    if math.isnan(value):
        return "cnan"
    if math.isinf(value):
        return "cinf" if value > 0 else "c-inf"
    return "c" + repr(float(value))


def parse_program(text: str, n_inputs: int, n_outputs: int | None = None,
                  op: str = "elementwise_program") -> Program:
    """Parse and validate `text` for `n_inputs` inputs (and exactly `n_outputs` outputs, or as
    many as it writes when None). InvalidArgumentError names the token and what was expected."""
    if not isinstance(text, str):
        raise InvalidArgumentError(f"{op}: attribute 'program' is a {type(text).__name__}, "
                                   "expected a str")
    lim = PROGRAM_LIMITS
    if not 1 <= n_inputs <= lim["max_inputs"]:
        raise InvalidArgumentError(f"{op}: input 'xs' has {n_inputs} tensors, expected 1 to "
                                   f"{lim['max_inputs']}")
    if n_outputs is not None and not 1 <= n_outputs <= lim["max_outputs"]:
        raise InvalidArgumentError(f"{op}: output 'ys' has {n_outputs} tensors, expected 1 to "
                                   f"{lim['max_outputs']}")
    bad = next((c for c in text if not (" " <= c < "\x7f" or c in _SPACE)), None)
    if bad is not None:
        raise InvalidArgumentError(f"{op}: attribute 'program' has a character outside "
                                   "printable ASCII and the separators space, tab, newline")
    tokens = _TOKEN.findall(text)
    if not tokens:
        raise InvalidArgumentError(f"{op}: attribute 'program' is empty; expected postfix "
                                   "tokens that write at least output o0")
    if len(tokens) > lim["max_tokens"]:
        raise InvalidArgumentError(f"{op}: attribute 'program' has {len(tokens)} tokens, at most "
                                   f"{lim['max_tokens']}")
    instrs: list[Instr] = []
    depth = deepest = 0
    written: set[int] = set()
    registers: set[int] = set()
    max_out = lim["max_outputs"] if n_outputs is None else n_outputs
    for pos, tok in enumerate(tokens):
        head, rest = tok[0], tok[1:]
        if tok in PROGRAM_OPS:
            arity = PROGRAM_OPS[tok]
            if depth < arity:
                raise _bad(op, pos, tok, f"needs {arity} operand(s), the stack holds {depth}")
            depth -= arity - 1
            instrs.append(Instr("op", tok, token=tok))
        elif head == "c" and rest:
            if rest in ("inf", "-inf", "nan"):
                value = float(rest)
            elif len(rest) < 64 and _NUMBER.match(rest):  # C's parser copies <= 63
                value = float(rest)
            else:
                raise _bad(op, pos, tok, "is not a constant; expected c followed by a decimal "
                           "number (c2.5, c-1e-3) or cinf, c-inf, cnan")
            depth += 1
            instrs.append(Instr("const", 0, value, tok))
        elif head in "isro" and rest and _INDEX.match(rest):
            k = int(rest)
            if head == "i":
                if k >= n_inputs:
                    raise _bad(op, pos, tok, f"reads input {k}, but there are {n_inputs} "
                               f"input(s) (i0..i{n_inputs - 1})")
                depth += 1
                instrs.append(Instr("input", k, token=tok))
            elif head in "sr":
                if k >= lim["max_registers"]:
                    raise _bad(op, pos, tok, f"register {k} is out of range, expected < "
                               f"{lim['max_registers']}")
                if head == "s":
                    if depth < 1:
                        raise _bad(op, pos, tok, "stores from an empty stack")
                    depth -= 1
                    registers.add(k)
                    instrs.append(Instr("store", k, token=tok))
                else:
                    if k not in registers:
                        raise _bad(op, pos, tok, f"reads register {k} before any s{k}")
                    depth += 1
                    instrs.append(Instr("load", k, token=tok))
            else:
                if k >= max_out:
                    raise _bad(op, pos, tok, f"writes output {k}, but there are {max_out} "
                               f"output(s) (o0..o{max_out - 1})")
                if k in written:
                    raise _bad(op, pos, tok, f"writes output {k} a second time; expected each "
                               "output written exactly once")
                if depth < 1:
                    raise _bad(op, pos, tok, "writes an output from an empty stack")
                depth -= 1
                written.add(k)
                instrs.append(Instr("output", k, token=tok))
        else:
            raise _bad(op, pos, tok, "unknown token; expected i<k>, c<num>, s<k>, r<k>, o<k> or "
                       "an operator of unidev.contract.opset.PROGRAM_OPS")
        if depth > lim["max_stack"]:
            raise _bad(op, pos, tok, f"the stack grows past {lim['max_stack']} values")
        deepest = max(deepest, depth)
    if depth:
        raise InvalidArgumentError(f"{op}: attribute 'program': {depth} value(s) left on the "
                                   f"stack after the last token '{tokens[-1][:64]}'; expected "
                                   "every value consumed (write it with o<k> or drop it)")
    count = (max(written) + 1) if n_outputs is None and written else (n_outputs or 0)
    missing = sorted(set(range(count)) - written)
    if not written or missing:
        raise InvalidArgumentError(f"{op}: attribute 'program': output(s) "
                                   f"o{(missing or [0])[0]} never "
                                   f"written; expected each of o0..o{max(count, 1) - 1} exactly "
                                   "once")
    return Program(text, tuple(instrs), n_inputs, count, deepest)


# ---- evaluation (the reference; numpy arrays or scalars, float64) ----------------------------

def _f(x):
    return np.asarray(x, dtype=np.float64)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _erf(x):
    from .reference import _erf as erf  # math.erf per element: exact to double precision
    return erf(np.asarray(x, dtype=np.float64))


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_tanh(x):
    k = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + np.tanh(k * (x + 0.044715 * x ** 3)))


def _cmp(fn):
    return lambda a, b: fn(a, b).astype(np.float64)


OP_FUNCTIONS: dict[str, Callable] = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "reciprocal": lambda x: 1.0 / x, "sin": np.sin,
    "cos": np.cos, "tanh": np.tanh, "sigmoid": _sigmoid,
    "relu": lambda x: np.where(x < 0, 0.0, x), "gelu": _gelu, "gelu_tanh": _gelu_tanh,
    "silu": lambda x: x * _sigmoid(x), "erf": _erf, "floor": np.floor, "ceil": np.ceil,
    "round": np.round, "sign": lambda x: (x > 0).astype(np.float64) - (x < 0),
    "square": lambda x: x * x,
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum,
    "eq": _cmp(np.equal), "ne": _cmp(np.not_equal), "lt": _cmp(np.less),
    "le": _cmp(np.less_equal), "gt": _cmp(np.greater), "ge": _cmp(np.greater_equal),
    "where": lambda a, b, c: np.where(c != 0, a, b),
}
assert set(OP_FUNCTIONS) == set(PROGRAM_OPS)


def run(prog: Program, inputs: Sequence[V], const: Callable[[float], V],
        apply: Callable[[str, list[V]], V]) -> list[V]:
    """The program's outputs as a stack machine over any values: `const` makes a c<num>, `apply`
    an operator (name, operands) — numpy arrays for evaluate, graph values for the unfuse pass."""
    stack: list[V] = []
    regs: dict[int, V] = {}
    outs: dict[int, V] = {}
    for ins in prog.instrs:
        if ins.kind == "input":
            stack.append(inputs[ins.arg])
        elif ins.kind == "const":
            stack.append(const(ins.value))
        elif ins.kind == "store":
            regs[ins.arg] = stack.pop()
        elif ins.kind == "load":
            stack.append(regs[ins.arg])
        elif ins.kind == "output":
            outs[ins.arg] = stack.pop()
        else:
            n = PROGRAM_OPS[ins.arg]
            args = stack[len(stack) - n:]
            del stack[len(stack) - n:]
            stack.append(apply(ins.arg, args))
    return [outs[k] for k in range(prog.num_outputs)]


def evaluate(prog: Program, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The program's outputs in float64, elementwise over the (already broadcast) inputs."""
    xs = [_f(x) for x in inputs]
    shape = np.broadcast_shapes(*(x.shape for x in xs))
    with np.errstate(all="ignore"):
        outs = run(prog, xs, np.float64, lambda op, args: _f(OP_FUNCTIONS[op](*args)))
    return [np.broadcast_to(_f(o), shape) for o in outs]
