"""`python -m unidev.kit --cmake-dir | --include-dir`: where a plugin build finds the contract."""

import sys

from . import cmake_dir, include_dir

_FLAGS = {"--cmake-dir": cmake_dir, "--include-dir": include_dir}

if len(sys.argv) != 2 or sys.argv[1] not in _FLAGS:
    sys.exit(f"usage: python -m unidev.kit {{{' | '.join(_FLAGS)}}}")
print(_FLAGS[sys.argv[1]]())
