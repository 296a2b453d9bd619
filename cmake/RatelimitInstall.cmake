# Install rules and the package config, so that find_package(ratelimit) works on an installed tree.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS ratelimit EXPORT ratelimitTargets)
install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ratelimitTargets
  NAMESPACE ratelimit::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ratelimit)

configure_package_config_file(cmake/ratelimitConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/ratelimitConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ratelimit)
# Header-only: any architecture may use the package.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ratelimitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/ratelimitConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/ratelimitConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ratelimit)
