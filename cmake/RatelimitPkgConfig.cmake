# pkg-config files, for builds without CMake (Make, Meson, a plain compiler line; README.md "Using it from
# pkg-config"): ratelimit.pc (the core) and, with the Redis backend, ratelimit-redis.pc (hiredis, and OpenSSL
# with -DRATELIMIT_TLS=1 when built with TLS). Installed to <datadir>/pkgconfig (the package is
# architecture-independent: headers only), with paths relative to the file so the tree can be moved.
set(_rl_pc_dir "${CMAKE_INSTALL_DATADIR}/pkgconfig")
if(IS_ABSOLUTE "${_rl_pc_dir}")
  file(RELATIVE_PATH RATELIMIT_PC_TO_PREFIX "${_rl_pc_dir}" "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH RATELIMIT_PC_TO_PREFIX "/prefix/${_rl_pc_dir}" "/prefix")
endif()
string(REGEX REPLACE "/$" "" RATELIMIT_PC_TO_PREFIX "${RATELIMIT_PC_TO_PREFIX}")
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(RATELIMIT_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(RATELIMIT_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()

configure_file("${PROJECT_SOURCE_DIR}/cmake/ratelimit.pc.in" "${PROJECT_BINARY_DIR}/pkgconfig/ratelimit.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/pkgconfig/ratelimit.pc" DESTINATION "${_rl_pc_dir}")

if(TARGET ratelimit_redis)
  set(RATELIMIT_PC_TLS_TEXT "")
  set(RATELIMIT_PC_TLS_REQUIRES "")
  set(RATELIMIT_PC_TLS_CFLAGS "")
  if(RATELIMIT_TLS)
    set(RATELIMIT_PC_TLS_TEXT ", OpenSSL for TLS")
    set(RATELIMIT_PC_TLS_REQUIRES ", libssl, libcrypto")
    set(RATELIMIT_PC_TLS_CFLAGS " -DRATELIMIT_TLS=1")
  endif()
  configure_file("${PROJECT_SOURCE_DIR}/cmake/ratelimit-redis.pc.in" "${PROJECT_BINARY_DIR}/pkgconfig/ratelimit-redis.pc"
                 @ONLY)
  install(FILES "${PROJECT_BINARY_DIR}/pkgconfig/ratelimit-redis.pc" DESTINATION "${_rl_pc_dir}")
endif()
