# ratelimit::http: service integration. The headers in include/ratelimit/http/ are dependency-free
# except problem.hpp (RFC 9457 bodies), which needs nlohmann/json (Debian: nlohmann-json3-dev). The
# target exists only when nlohmann/json is found, so ratelimit::ratelimit never depends on it.
find_package(nlohmann_json 3 CONFIG QUIET)
if(nlohmann_json_FOUND)
  add_library(ratelimit_http INTERFACE)
  add_library(ratelimit::http ALIAS ratelimit_http)
  target_link_libraries(ratelimit_http INTERFACE ratelimit::ratelimit nlohmann_json::nlohmann_json)
  set(RATELIMIT_HAVE_HTTP ON)
else()
  message(STATUS "ratelimit: nlohmann_json not found, ratelimit::http is not defined (apt-get install nlohmann-json3-dev)")
  set(RATELIMIT_HAVE_HTTP OFF)
endif()
