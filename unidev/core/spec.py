"""Old home of unidev.contract.spec, importable for one release (the same module)."""

import sys

from ..contract import spec as _module

sys.modules[__name__] = _module
