# Catch2 3.x (the H200 machine) or 2.x (Debian bookworm here): tests include tests/catch.hpp, a shim.
enable_testing()
find_package(Catch2 REQUIRED)
set(SWAPJIT_CATCH_LIBS Catch2::Catch2)
set(SWAPJIT_CATCH_MAIN "")
if(Catch2_VERSION VERSION_GREATER_EQUAL 3)
  set(SWAPJIT_CATCH_LIBS Catch2::Catch2WithMain)
else()
  set(SWAPJIT_CATCH_MAIN ${CMAKE_SOURCE_DIR}/tests/catch_main_v2.cpp)
endif()

# The GPU tests share the harness of `swapjit check` (tools/gpu_harness*.cpp); the CPU tests run the same
# harness over a host-memory fake driver (tests/host_fake_driver.cpp).
file(GLOB SWAPJIT_GPU_HARNESS_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tools/gpu_harness*.cpp)

# CPU tests: run in CI, no GPU needed.
file(GLOB SWAPJIT_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/test_*.cpp)
add_executable(swapjit_tests ${SWAPJIT_TEST_SOURCES} ${SWAPJIT_GPU_HARNESS_SOURCES}
               ${CMAKE_SOURCE_DIR}/tests/host_fake_driver.cpp
               ${CMAKE_SOURCE_DIR}/tests/host_fake_launch.cpp ${SWAPJIT_CATCH_MAIN})
target_link_libraries(swapjit_tests PRIVATE swapjit swapjit_reference ${SWAPJIT_CATCH_LIBS} fmt::fmt
                      OpenSSL::Crypto CUDA::nvrtc Threads::Threads)
target_compile_definitions(swapjit_tests PRIVATE
  SWAPJIT_CLI_PATH="$<TARGET_FILE:swapjit_cli>" SWAPJIT_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
  SWAPJIT_TEST_BINARY_DIR="${CMAKE_BINARY_DIR}")
add_dependencies(swapjit_tests swapjit_cli)
add_test(NAME cpu_tests COMMAND swapjit_tests --reporter console --durations yes)

# GPU tests: skip (and say so) without a driver.
file(GLOB SWAPJIT_GPU_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/gpu/*.cpp)
if(SWAPJIT_GPU_TEST_SOURCES)
  add_executable(swapjit_gpu_tests ${SWAPJIT_GPU_TEST_SOURCES} ${SWAPJIT_GPU_HARNESS_SOURCES} ${SWAPJIT_CATCH_MAIN})
  target_link_libraries(swapjit_gpu_tests PRIVATE swapjit swapjit_reference ${SWAPJIT_CATCH_LIBS} fmt::fmt
                        Threads::Threads)
  add_test(NAME gpu_tests COMMAND swapjit_gpu_tests)
  # Without a driver every GPU test prints this line and returns: ctest reports the test as skipped.
  set_tests_properties(gpu_tests PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED: no GPU driver")
endif()

# Python binding and pure-CPU Python tests (standard library unittest; torch-dependent tests skip without
# torch or a GPU). Loads the library just built.
add_test(NAME python_binding
         COMMAND python3 -m unittest discover -s ${CMAKE_SOURCE_DIR}/python/tests -t ${CMAKE_SOURCE_DIR}/python/tests -p "test_*.py" -v
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(python_binding PROPERTIES
  ENVIRONMENT "SWAPJIT_LIBRARY=$<TARGET_FILE:swapjit>;PYTHONPATH=${CMAKE_SOURCE_DIR}/python"
  TIMEOUT 300)

# The hardware probes of tools/probes/ (standalone CUDA programs the device script runs) must keep compiling
# for sm_90a, so a later session can re-ask their questions: nvcc to a cubin, nothing is run.
file(GLOB SWAPJIT_PROBE_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tools/probes/*.cu)
foreach(probe ${SWAPJIT_PROBE_SOURCES})
  get_filename_component(probe_name ${probe} NAME_WE)
  add_test(NAME probe_compiles_${probe_name}
           COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} -std=c++20 -arch=sm_90a -O3 -cubin -o
                   ${CMAKE_BINARY_DIR}/${probe_name}.cubin ${probe})
endforeach()
