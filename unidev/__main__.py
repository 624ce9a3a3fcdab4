"""``python -m unidev``: the same as the ``unidev`` command."""

import sys

from .cli import main

sys.exit(main())
