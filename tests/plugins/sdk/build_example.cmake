# Installs the specd SDK (component "sdk" only) into a fresh prefix and builds the out-of-tree
# example plugin against it with clang++ — a different compiler than the engine's g++.
# Inputs: BUILD_DIR, PREFIX, EXAMPLE_SRC, EXAMPLE_BUILD.
file(REMOVE_RECURSE ${PREFIX} ${EXAMPLE_BUILD})
find_program(CLANGXX NAMES clang++ clang++-14 clang++-15 clang++-16 REQUIRED)

function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${step} failed (${rc}):\n${out}\n${err}")
  endif()
endfunction()

run("install SDK" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX} --component sdk)
if(EXISTS ${PREFIX}/include/specd/engine.hpp OR EXISTS ${PREFIX}/bin/specd)
  message(FATAL_ERROR "the sdk component installed more than the SDK")
endif()
run("configure example" ${CMAKE_COMMAND} -S ${EXAMPLE_SRC} -B ${EXAMPLE_BUILD} -G Ninja
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CLANGXX} -DCMAKE_PREFIX_PATH=${PREFIX})
file(STRINGS ${EXAMPLE_BUILD}/CMakeCache.txt compiler_id REGEX "^CMAKE_CXX_COMPILER_ID:")
run("build example" ${CMAKE_COMMAND} --build ${EXAMPLE_BUILD})
file(READ ${EXAMPLE_BUILD}/CMakeFiles/${CMAKE_VERSION}/CMakeCXXCompiler.cmake cc)
string(REGEX MATCH "set\\(CMAKE_CXX_COMPILER_ID \"([A-Za-z]+)\"\\)" _ "${cc}")
if(NOT CMAKE_MATCH_1 STREQUAL "Clang")
  message(FATAL_ERROR "example was not built with clang++ (compiler id '${CMAKE_MATCH_1}')")
endif()
if(NOT EXISTS ${EXAMPLE_BUILD}/onegram.so)
  message(FATAL_ERROR "example build produced no onegram.so")
endif()
message(STATUS "built ${EXAMPLE_BUILD}/onegram.so with ${CLANGXX}")
