# Cross-compiling unidev-arm64 on an x86-64 host: Debian's gcc-aarch64-linux-gnu, and ISPC's own
# aarch64 back end (ISPC needs no cross build of itself: one binary targets every ISA).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
# Programs (ispc, python) come from the host; libraries and headers only from the target side,
# except where a path is given explicitly (OpenBLAS from the aarch64 wheel).
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
