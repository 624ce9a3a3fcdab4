"""Builds unidev's native binding, unidev._C (pybind11); everything else is in pyproject.toml."""

from pybind11.setup_helpers import Pybind11Extension
from setuptools import setup

setup(
    ext_modules=[
        Pybind11Extension(
            "unidev._C",
            ["unidev/csrc/binding.cpp", "unidev/csrc/ud_plan_runtime.cpp"],
            depends=["unidev/csrc/plan.cpp", "unidev/graph/native/ud_plan.c",
                     "unidev/graph/native/ud_plan.h"],
            include_dirs=["unidev/contract/include"],
            cxx_std=17,
            libraries=["dl"],
            extra_compile_args=["-O2", "-fvisibility=hidden"],
        )
    ],
)
