"""Old home of unidev.contract.dtypes, importable for one release (the same module)."""

import sys

from ..contract import dtypes as _module

sys.modules[__name__] = _module
