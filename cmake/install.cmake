# `cmake --install` puts the library, the public headers (and the internal headers they include) and a
# CMake package config in place, so a serving process does find_package(swapjit) and links swapjit::swapjit.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS swapjit EXPORT swapjitTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS swapjit_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The ctypes module: PYTHONPATH=<prefix>/lib/python; it finds <prefix>/lib/libswapjit.so by itself.
install(DIRECTORY python/swapjit DESTINATION ${CMAKE_INSTALL_LIBDIR}/python
        PATTERN "__pycache__" EXCLUDE PATTERN "*.pyc" EXCLUDE)
install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The public headers include these by their repo-relative paths.
install(FILES jit/compile_key.hpp jit/error.hpp jit/nvrtc_compiler.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/swapjit_internal/jit)
install(FILES runtime/cubin_store.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/swapjit_internal/runtime)
install(FILES kernels_src/key_shape.cuh kernels_src/kernel_params.cuh
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/swapjit_internal/kernels_src)
install(EXPORT swapjitTargets NAMESPACE swapjit:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/swapjit)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/swapjitConfig.cmake.in
  ${CMAKE_BINARY_DIR}/swapjitConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/swapjit)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/swapjitConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/swapjitConfig.cmake ${CMAKE_BINARY_DIR}/swapjitConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/swapjit)
