# The Python wheel's layout, when scikit-build-core builds the whole project (`pip install .` or
# `pip wheel .` at the repository root; pyproject.toml). Instead of the install tree:
#   aicf/_runtime.*.so             the pybind11 binding (python/src/runtime_module.cpp)
#   aicf/lib/libaicf_runtime.so.*  the runtime, and every shared library the tools, the runtime
#                                  and the binding need beyond the C/C++ runtimes (protobuf, onnx,
#                                  yaml-cpp, libgomp, zlib), copied in as manylinux wheels bundle
#                                  theirs
#   aicf/bin/aicfc, aicf-run       the tools (console entry points aicfc / aicf-run run them)
# Everything finds the bundled libraries through an RPATH relative to itself; DT_RPATH rather
# than DT_RUNPATH (--disable-new-dtags), because only DT_RPATH is also searched for the
# dependencies of the libraries loaded (libonnx's libprotobuf). The Python files come from
# python/aicf (pyproject.toml's wheel.packages). Compiling a model still needs a host C++
# compiler (g++), as aicfc does anywhere.
find_package(Python COMPONENTS Interpreter Development.Module REQUIRED)
find_package(pybind11 CONFIG REQUIRED)

pybind11_add_module(_runtime ${CMAKE_SOURCE_DIR}/python/src/runtime_module.cpp)
target_compile_features(_runtime PRIVATE cxx_std_17)
target_include_directories(_runtime PRIVATE ${CMAKE_SOURCE_DIR}/runtime) # <aicf_runtime.h>
target_link_libraries(_runtime PRIVATE aicf_runtime yaml-cpp)

set_target_properties(_runtime PROPERTIES INSTALL_RPATH "$ORIGIN/lib")
set_target_properties(aicf_runtime PROPERTIES INSTALL_RPATH "$ORIGIN")
set_target_properties(aicfc aicf-run PROPERTIES INSTALL_RPATH "$ORIGIN/../lib")
foreach(t _runtime aicf_runtime aicfc aicf-run)
  target_link_options(${t} PRIVATE "LINKER:--disable-new-dtags")
endforeach()

# One file per library, named by its SONAME: a wheel (a zip) would store a symlink chain's links
# as copies.
set_property(TARGET aicf_runtime PROPERTY VERSION)
install(TARGETS _runtime LIBRARY DESTINATION aicf)
install(TARGETS aicf_runtime LIBRARY DESTINATION aicf/lib NAMELINK_SKIP)
install(TARGETS aicfc aicf-run RUNTIME DESTINATION aicf/bin)

# The bundled libraries: the resolved dependencies of the four, less the C and C++ runtimes
# every Linux system has (the manylinux policy's list) and the runtime itself.
install(CODE [[
  file(GET_RUNTIME_DEPENDENCIES
       EXECUTABLES $<TARGET_FILE:aicfc> $<TARGET_FILE:aicf-run>
       LIBRARIES $<TARGET_FILE:_runtime> $<TARGET_FILE:aicf_runtime>
       RESOLVED_DEPENDENCIES_VAR deps
       UNRESOLVED_DEPENDENCIES_VAR missing
       PRE_EXCLUDE_REGEXES "^ld-linux" "^linux-vdso" "^libc\\.so" "^libm\\.so" "^libdl\\.so"
                           "^librt\\.so" "^libpthread\\.so" "^libstdc\\+\\+\\.so"
                           "^libgcc_s\\.so" "^libaicf_runtime\\.so" "^libpython")
  if(missing)
    message(FATAL_ERROR "aicf wheel: unresolved shared libraries: ${missing}")
  endif()
  foreach(dep IN LISTS deps)  # each found by its SONAME: copied under that name
    get_filename_component(name "${dep}" NAME)
    file(REAL_PATH "${dep}" real)
    message(STATUS "Bundling: ${real} as aicf/lib/${name}")
    file(COPY_FILE "${real}" "${CMAKE_INSTALL_PREFIX}/aicf/lib/${name}" ONLY_IF_DIFFERENT)
  endforeach()
]])
