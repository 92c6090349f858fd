# Finds NCCL for the CUDA fabric. Sets TIDE_NCCL_FOUND, TIDE_NCCL_INCLUDE_DIR,
# TIDE_NCCL_LIBRARY and TIDE_NCCL_HEADER_VERSION (e.g. 22809).
#
# Headers (a directory with both nccl.h and nccl_device.h) and the library are
# searched separately, each in this order: NCCL_INCLUDE_DIR / NCCL_LIB_DIR
# (cache or environment), NCCL_HOME, the nvidia-nccl-cu13 (or -cu12) wheel of
# the Python found (PyTorch's NCCL), then the system. The library is linked by
# its full path, so a process that also loads PyTorch shares its libnccl.so.2.

foreach(_var NCCL_INCLUDE_DIR NCCL_LIB_DIR NCCL_HOME)
  if(NOT DEFINED ${_var} AND DEFINED ENV{${_var}})
    set(${_var} "$ENV{${_var}}")
  endif()
endforeach()

set(_tide_inc_candidates)
set(_tide_lib_candidates)
if(NCCL_INCLUDE_DIR)
  list(APPEND _tide_inc_candidates "${NCCL_INCLUDE_DIR}")
endif()
if(NCCL_LIB_DIR)
  list(APPEND _tide_lib_candidates "${NCCL_LIB_DIR}")
endif()
if(NCCL_HOME)
  list(APPEND _tide_inc_candidates "${NCCL_HOME}/include")
  list(APPEND _tide_lib_candidates "${NCCL_HOME}/lib" "${NCCL_HOME}/lib64")
endif()

find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  execute_process(
    COMMAND "${Python3_EXECUTABLE}" -c "import nvidia.nccl as m; print(list(m.__path__)[0])"
    OUTPUT_VARIABLE _tide_nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET RESULT_VARIABLE _tide_nccl_rc)
  if(_tide_nccl_rc EQUAL 0 AND _tide_nccl_wheel)
    list(APPEND _tide_inc_candidates "${_tide_nccl_wheel}/include")
    list(APPEND _tide_lib_candidates "${_tide_nccl_wheel}/lib")
  endif()
endif()
list(APPEND _tide_inc_candidates /usr/include /usr/local/include /usr/local/cuda/include)
list(APPEND _tide_lib_candidates /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/lib /usr/local/cuda/lib64)

set(TIDE_NCCL_INCLUDE_DIR "")
foreach(_dir IN LISTS _tide_inc_candidates)
  if(EXISTS "${_dir}/nccl.h" AND EXISTS "${_dir}/nccl_device.h")
    set(TIDE_NCCL_INCLUDE_DIR "${_dir}")
    break()
  endif()
endforeach()
set(TIDE_NCCL_LIBRARY "")
foreach(_dir IN LISTS _tide_lib_candidates)
  foreach(_name libnccl.so.2 libnccl.so)
    if(EXISTS "${_dir}/${_name}")
      set(TIDE_NCCL_LIBRARY "${_dir}/${_name}")
      break()
    endif()
  endforeach()
  if(TIDE_NCCL_LIBRARY)
    break()
  endif()
endforeach()

set(TIDE_NCCL_FOUND FALSE)
set(TIDE_NCCL_HEADER_VERSION 0)
if(TIDE_NCCL_INCLUDE_DIR AND TIDE_NCCL_LIBRARY)
  file(STRINGS "${TIDE_NCCL_INCLUDE_DIR}/nccl.h" _tide_nccl_code REGEX "#define NCCL_VERSION_CODE")
  string(REGEX MATCH "[0-9]+" TIDE_NCCL_HEADER_VERSION "${_tide_nccl_code}")
  if(TIDE_NCCL_HEADER_VERSION LESS 22800)
    message(STATUS "TIDE CUDA fabric: NCCL headers ${TIDE_NCCL_HEADER_VERSION} are older than 2.28")
  else()
    set(TIDE_NCCL_FOUND TRUE)
  endif()
endif()
