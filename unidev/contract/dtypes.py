"""unidev dtypes: names, numpy equivalents, DLPack codes, and the groups the op set uses."""

from __future__ import annotations

import numpy as np

__all__ = ["DTYPES", "FLOAT", "INT", "NUMERIC", "BOOL", "ALL", "to_numpy", "from_numpy",
           "dlpack_code", "from_dlpack_code", "itemsize"]

FLOAT = ("float32", "float64")
INT = ("int32", "int64")
BOOL = ("bool",)
NUMERIC = FLOAT + INT
ALL = NUMERIC + BOOL

# name -> (DLPack type code, bits); codes are UD_DTypeCode in unidev.h
DTYPES: dict[str, tuple[int, int]] = {
    "float32": (2, 32),
    "float64": (2, 64),
    "float16": (2, 16),
    "bfloat16": (4, 16),
    "int32": (0, 32),
    "int64": (0, 64),
    "uint8": (1, 8),
    "bool": (6, 8),
}
_BY_CODE = {v: k for k, v in DTYPES.items()}


def check(name: str, what: str = "dtype") -> str:
    """Return `name` if it is a unidev dtype, else raise a TypeError listing the valid ones."""
    if not isinstance(name, str) or name not in DTYPES:
        raise TypeError(f"{what}: unknown dtype {name!r}; expected one of {sorted(DTYPES)}")
    return name


def to_numpy(name: str) -> np.dtype:
    check(name)
    if name == "bfloat16":
        raise TypeError("bfloat16 has no numpy equivalent")
    return np.dtype(name)


def from_numpy(dtype: np.dtype | type | str) -> str:
    name = np.dtype(dtype).name
    if name not in DTYPES:
        raise TypeError(f"numpy dtype {name!r} has no unidev equivalent; expected one of "
                        f"{sorted(k for k in DTYPES if k != 'bfloat16')}")
    return name


def dlpack_code(name: str) -> tuple[int, int]:
    return DTYPES[check(name)]


def from_dlpack_code(code: int, bits: int) -> str:
    try:
        return _BY_CODE[(code, bits)]
    except KeyError:
        raise TypeError(f"DLPack dtype code={code} bits={bits} is not a unidev dtype") from None


def itemsize(name: str) -> int:
    return DTYPES[check(name)][1] // 8
