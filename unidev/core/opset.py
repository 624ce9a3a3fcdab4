"""Old home of unidev.contract.opset, importable for one release (the same module)."""

import sys

from ..contract import opset as _module

sys.modules[__name__] = _module
