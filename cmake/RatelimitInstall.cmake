# Install rules and the package files, so that find_package(ratelimit) works on an installed tree.
#
# Installed layout (relative to the prefix):
#   include/ratelimit/...                  the headers
#   lib/cmake/ratelimit/                   ratelimitConfig.cmake, ratelimitConfigVersion.cmake,
#                                          ratelimitTargets.cmake; the redis and http components
#                                          add their own export sets there, loaded only for
#                                          COMPONENTS redis / http
#   share/doc/ratelimit/LICENSE
#   share/pkgconfig/ratelimit.pc, ratelimit-redis.pc   for pkg-config (cmake/RatelimitPkgConfig.cmake)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(RATELIMIT_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/ratelimit")

install(TARGETS ratelimit EXPORT ratelimitTargets)
# The folder READMEs document the source tree (their links lead into it); the headers document themselves.
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" PATTERN "*.md" EXCLUDE)
install(EXPORT ratelimitTargets
  NAMESPACE ratelimit::
  DESTINATION "${RATELIMIT_INSTALL_CMAKEDIR}")

configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/ratelimitConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/ratelimitConfig.cmake"
  INSTALL_DESTINATION "${RATELIMIT_INSTALL_CMAKEDIR}")
# 0.x releases may break the API between minor versions, so only the same major.minor is compatible.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/ratelimitConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES
  "${PROJECT_BINARY_DIR}/ratelimitConfig.cmake"
  "${PROJECT_BINARY_DIR}/ratelimitConfigVersion.cmake"
  DESTINATION "${RATELIMIT_INSTALL_CMAKEDIR}")
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" DESTINATION "${CMAKE_INSTALL_DOCDIR}")

include(RatelimitPkgConfig)
