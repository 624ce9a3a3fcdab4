"""Old home of unidev.contract.hookspecs, importable for one release (the same module)."""

import sys

from ..contract import hookspecs as _module

sys.modules[__name__] = _module
