# ratelimit::http: service integration. The headers in include/ratelimit/http/ are dependency-free
# except problem.hpp (RFC 9457 bodies), which needs nlohmann/json (Debian: nlohmann-json3-dev). The
# target exists only when nlohmann/json is found, so ratelimit::ratelimit never depends on it.
find_package(nlohmann_json 3 CONFIG QUIET)
if(nlohmann_json_FOUND)
  add_library(ratelimit_http INTERFACE)
  add_library(ratelimit::http ALIAS ratelimit_http)
  set_target_properties(ratelimit_http PROPERTIES EXPORT_NAME http)
  target_link_libraries(ratelimit_http INTERFACE ratelimit::ratelimit nlohmann_json::nlohmann_json)
  set(RATELIMIT_HAVE_HTTP ON)
  if(RATELIMIT_INSTALL)
    # Own export set, as for redis: the package config loads it (and looks for nlohmann_json) only for
    # COMPONENTS http, so core users never need nlohmann_json. The headers are installed with the core's.
    install(TARGETS ratelimit_http EXPORT ratelimitHttpTargets)
    install(EXPORT ratelimitHttpTargets NAMESPACE ratelimit:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ratelimit)
  endif()
else()
  message(STATUS "ratelimit: nlohmann_json not found, ratelimit::http is not defined (apt-get install nlohmann-json3-dev)")
  set(RATELIMIT_HAVE_HTTP OFF)
endif()
