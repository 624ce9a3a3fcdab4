# ispc.cmake — ISPC for unidev-x86 and unidev-arm64: CMAKE_ISPC_COMPILER, else ispc.py's.
if(NOT CMAKE_ISPC_COMPILER)
  execute_process(COMMAND "${Python_EXECUTABLE}" "${CMAKE_CURRENT_LIST_DIR}/ispc.py"
                  OUTPUT_VARIABLE _ispc RESULT_VARIABLE _rc ERROR_VARIABLE _err
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${PROJECT_NAME} needs ISPC and could not provision it:\n${_err}")
  endif()
  set(CMAKE_ISPC_COMPILER "${_ispc}" CACHE FILEPATH "ISPC compiler")
endif()
enable_language(ISPC)
