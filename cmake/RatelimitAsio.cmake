# ratelimit::asio: Asio completion tokens for the Redis limiter's async API (<ratelimit/asio.hpp>).
# Standalone header-only Asio (Debian: libasio-dev), found by its header; defined only together with
# ratelimit::redis, and off when Asio is missing, so nothing else ever depends on it.
find_path(RATELIMIT_ASIO_INCLUDE_DIR asio.hpp)
find_package(Threads)
if(TARGET ratelimit_redis AND RATELIMIT_ASIO_INCLUDE_DIR AND Threads_FOUND)
  add_library(ratelimit_asio INTERFACE)
  add_library(ratelimit::asio ALIAS ratelimit_asio)
  set_target_properties(ratelimit_asio PROPERTIES EXPORT_NAME asio)
  target_include_directories(ratelimit_asio SYSTEM INTERFACE $<BUILD_INTERFACE:${RATELIMIT_ASIO_INCLUDE_DIR}>)
  target_link_libraries(ratelimit_asio INTERFACE ratelimit::redis Threads::Threads)
  set(RATELIMIT_HAVE_ASIO ON)
  if(RATELIMIT_INSTALL)
    # Own export set: the package config loads it (and looks for asio.hpp) only for COMPONENTS asio.
    install(TARGETS ratelimit_asio EXPORT ratelimitAsioTargets)
    install(EXPORT ratelimitAsioTargets NAMESPACE ratelimit:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ratelimit)
  endif()
else()
  message(STATUS "ratelimit: standalone Asio (asio.hpp) or ratelimit::redis not found, ratelimit::asio is not "
                 "defined (apt-get install libasio-dev)")
  set(RATELIMIT_HAVE_ASIO OFF)
endif()
