# unidev's CMake package for plugin authors: `find_package(unidev CONFIG REQUIRED)` gives the
# interface target unidev::kit (the contract headers: unidev.h, plugin_kit.h, ops.h, loader.h).
# scikit-build-core finds this file through unidev's `cmake.root` entry point; plain CMake takes
# -Dunidev_DIR=$(python -m unidev.kit --cmake-dir).
get_filename_component(_unidev_include "${CMAKE_CURRENT_LIST_DIR}/../include" ABSOLUTE)
if(NOT TARGET unidev::kit)
  add_library(unidev::kit INTERFACE IMPORTED)
  set_target_properties(unidev::kit PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_unidev_include}")
endif()
set(unidev_INCLUDE_DIR "${_unidev_include}")
unset(_unidev_include)
