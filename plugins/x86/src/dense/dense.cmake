# dense.cmake — the dense kernels (matmul, gemm, conv2d) for plugins/x86/CMakeLists.txt, which
# include()s this file and then uses:
#   UD_X86_DENSE_SOURCES   C++ sources to add to the plugin library
#   UD_X86_DENSE_INCLUDES  include directories (this folder, OpenBLAS, oneDNN)
#   UD_X86_DENSE_LIBS      libraries to link (OpenBLAS, oneDNN, OpenMP)
#   UD_X86_DENSE_DEFINES   compile definitions (UD_DENSE_ONEDNN)
#   UD_X86_DENSE_RPATH     run paths that find OpenBLAS and oneDNN inside the installed wheels;
#                          the relative entries assume the library sits one folder below
#                          site-packages (site-packages/<package>/lib*.so)
# OpenBLAS comes from the scipy-openblas32 wheel, oneDNN from onednn-cpu-gomp +
# onednn-devel-cpu-gomp (headers and libdnnl in the environment's prefix), both found through
# the Python interpreter that runs the build (Python_EXECUTABLE).
set(_ud_dense_dir ${CMAKE_CURRENT_LIST_DIR})
if(NOT Python_EXECUTABLE)
  find_package(Python 3.11 REQUIRED COMPONENTS Interpreter)
endif()

# Fails when scipy_openblas32 is missing: pip install scipy-openblas32
execute_process(
  COMMAND ${Python_EXECUTABLE} -c
    "import sys, scipy_openblas32 as s; print(s.get_include_dir()); print(s.get_lib_dir()); print(sys.prefix)"
  OUTPUT_VARIABLE _ud_py OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
string(REPLACE "\n" ";" _ud_py "${_ud_py}")
list(GET _ud_py 0 _ud_blas_inc)
list(GET _ud_py 1 _ud_blas_lib_dir)
list(GET _ud_py 2 _ud_prefix)
find_library(UD_OPENBLAS_LIBRARY NAMES scipy_openblas PATHS ${_ud_blas_lib_dir} NO_DEFAULT_PATH
             REQUIRED)
# From onednn-cpu-gomp and onednn-devel-cpu-gomp 2023.2.0 (pip), in the environment's prefix.
find_path(UD_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp PATHS ${_ud_prefix}/include NO_DEFAULT_PATH
          REQUIRED)
find_library(UD_DNNL_LIBRARY NAMES dnnl PATHS ${_ud_prefix}/lib NO_DEFAULT_PATH REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)

file(GLOB UD_X86_DENSE_SOURCES CONFIGURE_DEPENDS "${_ud_dense_dir}/*.cpp")
# The portable algorithms' inner loops are written for the auto-vectorizer, which needs -O3.
set_source_files_properties(${_ud_dense_dir}/conv_direct.cpp ${_ud_dense_dir}/conv_im2col.cpp
  ${_ud_dense_dir}/conv_winograd.cpp PROPERTIES COMPILE_OPTIONS "-O3")
list(APPEND UD_X86_DENSE_INCLUDES ${_ud_dense_dir} ${_ud_blas_inc} ${UD_DNNL_INCLUDE_DIR})
list(APPEND UD_X86_DENSE_LIBS ${UD_OPENBLAS_LIBRARY} ${UD_DNNL_LIBRARY} OpenMP::OpenMP_CXX)
list(APPEND UD_X86_DENSE_DEFINES UD_DENSE_ONEDNN)
list(APPEND UD_X86_DENSE_RPATH
  "\$ORIGIN/../scipy_openblas32/lib" "\$ORIGIN/../../.." ${_ud_blas_lib_dir} ${_ud_prefix}/lib)
