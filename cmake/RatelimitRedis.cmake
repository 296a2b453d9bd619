# The Redis backend: INTERFACE target ratelimit::redis = ratelimit::ratelimit + hiredis + the Lua scripts of
# lua/ embedded in a header generated at configure time. lua/*.lua stay the only copy of every script.
include(RatelimitFindHiredis)
option(RATELIMIT_REDIS "Build the Redis backend (needs hiredis)" ${RATELIMIT_HIREDIS_FOUND})
if(NOT RATELIMIT_REDIS)
  return()
endif()
if(NOT RATELIMIT_HIREDIS_FOUND)
  message(FATAL_ERROR "RATELIMIT_REDIS is ON but hiredis was found neither by CMake config nor by pkg-config "
                      "(Debian: apt-get install libhiredis-dev)")
endif()

# One raw string per script. The delimiter must not occur in a script; the SHA1 is the one Redis computes
# for SCRIPT LOAD / EVALSHA, so the header knows it without a round trip.
set(_rl_kinds fixed_window sliding_window_log sliding_window_counter token_bucket gcra)
set(_rl_gen_dir "${PROJECT_BINARY_DIR}/generated/include")
set(_rl_header "${_rl_gen_dir}/ratelimit/redis/detail/lua_scripts.hpp")
set(_rl_text "#pragma once\n\n/// @file\n/// GENERATED at configure time by cmake/RatelimitRedis.cmake from lua/*.lua; do not edit.\n\n")
string(APPEND _rl_text "#include <string_view>\n\nnamespace ratelimit::redis::detail {\n\n")
string(APPEND _rl_text "/// One Lua script of lua/, byte for byte, with its SHA1 (the EVALSHA name).\n")
string(APPEND _rl_text "struct EmbeddedScript {\n  std::string_view kind;\n  std::string_view file;\n")
string(APPEND _rl_text "  std::string_view sha1;\n  std::string_view body;\n};\n\n")
string(APPEND _rl_text "/// Every policy's script, keyed by `Policy::kind`.\ninline constexpr EmbeddedScript kEmbeddedScripts[] = {\n")
foreach(_rl_kind IN LISTS _rl_kinds)
  set(_rl_file "${PROJECT_SOURCE_DIR}/lua/${_rl_kind}.lua")
  set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_rl_file}")
  file(READ "${_rl_file}" _rl_body)
  file(SHA1 "${_rl_file}" _rl_sha)
  string(FIND "${_rl_body}" ")ratelimit_lua\"" _rl_pos)
  if(NOT _rl_pos EQUAL -1)
    message(FATAL_ERROR "lua/${_rl_kind}.lua contains the raw string delimiter )ratelimit_lua\"")
  endif()
  string(APPEND _rl_text "    {\"${_rl_kind}\", \"${_rl_kind}.lua\", \"${_rl_sha}\",\n     R\"ratelimit_lua(${_rl_body})ratelimit_lua\"},\n")
endforeach()
string(APPEND _rl_text "};\n\n}  // namespace ratelimit::redis::detail\n")
# Rewrite only on change, so an unchanged configure rebuilds nothing.
file(WRITE "${_rl_header}.tmp" "${_rl_text}")
configure_file("${_rl_header}.tmp" "${_rl_header}" COPYONLY)

add_library(ratelimit_redis INTERFACE)
add_library(ratelimit::redis ALIAS ratelimit_redis)
set_target_properties(ratelimit_redis PROPERTIES EXPORT_NAME redis)
target_include_directories(ratelimit_redis INTERFACE $<BUILD_INTERFACE:${_rl_gen_dir}>)
target_link_libraries(ratelimit_redis INTERFACE ratelimit::ratelimit ratelimit::hiredis)

if(RATELIMIT_INSTALL)
  # Own export set: the package config loads it (and looks for hiredis) only for COMPONENTS redis.
  install(TARGETS ratelimit_redis EXPORT ratelimitRedisTargets)
  install(FILES "${_rl_header}" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ratelimit/redis/detail)
  install(EXPORT ratelimitRedisTargets NAMESPACE ratelimit:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ratelimit)
  install(FILES "${PROJECT_SOURCE_DIR}/cmake/RatelimitFindHiredis.cmake"
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ratelimit)
endif()
