# The Redis backend: INTERFACE target ratelimit::redis = ratelimit::ratelimit + hiredis + the Lua scripts of
# lua/ embedded in a header generated at configure time. lua/ holds the only copy of every script's logic.
include(RatelimitFindHiredis)
option(RATELIMIT_REDIS "Build the Redis backend (needs hiredis)" ${RATELIMIT_HIREDIS_FOUND})
if(NOT RATELIMIT_REDIS)
  return()
endif()
if(NOT RATELIMIT_HIREDIS_FOUND)
  message(FATAL_ERROR "RATELIMIT_REDIS is ON but hiredis was found neither by CMake config nor by pkg-config "
                      "(Debian: apt-get install libhiredis-dev)")
endif()

# One raw string per script. A script is assembled by concatenating the parts its main file names on
# its "-- Parts" line (lua/parts/<part>.lua, in that order) and then the main file itself, so the policy
# logic has one copy that the per-policy scripts and the layered script share. The delimiter must not
# occur in a script; the SHA1 (of the assembled body) is the one Redis computes for SCRIPT LOAD /
# EVALSHA, so the header knows it without a round trip. The assembled scripts are also written to
# <build>/generated/lua/ (for redis-cli --eval and the benchmarks).
set(_rl_scripts fixed_window sliding_window_log sliding_window_counter token_bucket gcra layered gcra_lease
                 fixed_window_lease concurrency_acquire concurrency_release concurrency_renew)
set(_rl_gen_dir "${PROJECT_BINARY_DIR}/generated/include")
set(_rl_header "${_rl_gen_dir}/ratelimit/redis/detail/lua_scripts.hpp")
set(_rl_text "#pragma once\n\n/// @file\n/// GENERATED at configure time by cmake/RatelimitRedis.cmake from lua/; do not edit.\n\n")
string(APPEND _rl_text "#include <string_view>\n\n#include \"ratelimit/redis/abi.hpp\"\n\n")
string(APPEND _rl_text "namespace ratelimit::redis {\ninline namespace RATELIMIT_REDIS_ABI_NAMESPACE {\nnamespace detail {\n\n")
string(APPEND _rl_text "/// One Lua script assembled from lua/ (its parts, then its main file), with its SHA1 (the EVALSHA name).\n")
string(APPEND _rl_text "struct EmbeddedScript {\n  /// The policy kind, \"layered\", or a concurrency limit's \"concurrency_acquire\" / \"_release\" / \"_renew\".\n  std::string_view kind;\n")
string(APPEND _rl_text "  /// The main file, relative to lua/.\n  std::string_view file;\n")
string(APPEND _rl_text "  /// The files concatenated into `body`, in order, relative to lua/, separated by spaces.\n  std::string_view parts;\n")
string(APPEND _rl_text "  std::string_view sha1;\n  std::string_view body;\n")
string(APPEND _rl_text "  /// Its name in the Redis Functions library (`FCALL`): `<library>_<kind>`.\n  std::string_view function;\n};\n\n")
string(APPEND _rl_text "/// Every policy's script, keyed by `Policy::kind`, and the layered script (kind \"layered\").\ninline constexpr EmbeddedScript kEmbeddedScripts[] = {\n")
set(_rl_entries "")
set(_rl_all "")
set(_rl_lib "")
foreach(_rl_kind IN LISTS _rl_scripts)
  set(_rl_file "${PROJECT_SOURCE_DIR}/lua/${_rl_kind}.lua")
  file(STRINGS "${_rl_file}" _rl_parts_line REGEX "^-- Parts +[a-z_ ]+$")
  list(LENGTH _rl_parts_line _rl_n)
  if(NOT _rl_n EQUAL 1)
    message(FATAL_ERROR "lua/${_rl_kind}.lua needs exactly one line \"-- Parts <part> ...\" naming its lua/parts/")
  endif()
  string(REGEX REPLACE "^-- Parts +" "" _rl_parts "${_rl_parts_line}")
  string(REGEX REPLACE " +" ";" _rl_parts "${_rl_parts}")
  set(_rl_body "")
  set(_rl_files "")
  foreach(_rl_part IN LISTS _rl_parts)
    list(APPEND _rl_files "parts/${_rl_part}.lua")
  endforeach()
  list(APPEND _rl_files "${_rl_kind}.lua")
  foreach(_rl_rel IN LISTS _rl_files)
    set(_rl_path "${PROJECT_SOURCE_DIR}/lua/${_rl_rel}")
    if(NOT EXISTS "${_rl_path}")
      message(FATAL_ERROR "lua/${_rl_kind}.lua names a part that does not exist: lua/${_rl_rel}")
    endif()
    set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_rl_path}")
    file(READ "${_rl_path}" _rl_piece)
    string(APPEND _rl_body "${_rl_piece}")
  endforeach()
  string(SHA1 _rl_sha "${_rl_body}")
  string(FIND "${_rl_body}" ")ratelimit_lua\"" _rl_pos)
  if(NOT _rl_pos EQUAL -1)
    message(FATAL_ERROR "lua/${_rl_kind}.lua or its parts contain the raw string delimiter )ratelimit_lua\"")
  endif()
  string(REPLACE ";" " " _rl_files_text "${_rl_files}")
  file(WRITE "${PROJECT_BINARY_DIR}/generated/lua/${_rl_kind}.lua.tmp" "${_rl_body}")
  configure_file("${PROJECT_BINARY_DIR}/generated/lua/${_rl_kind}.lua.tmp" "${PROJECT_BINARY_DIR}/generated/lua/${_rl_kind}.lua" COPYONLY)
  string(APPEND _rl_entries "    {\"${_rl_kind}\", \"${_rl_kind}.lua\", \"${_rl_files_text}\", \"${_rl_sha}\",\n     R\"ratelimit_lua(${_rl_body})ratelimit_lua\",\n     \"@RL_LIBRARY@_${_rl_kind}\"},\n")
  string(APPEND _rl_all "${_rl_kind}:${_rl_sha}\n")
  string(APPEND _rl_lib "redis.register_function('@RL_LIBRARY@_${_rl_kind}', function(KEYS, ARGV)\n${_rl_body}\nend)\n")
endforeach()
# The Redis Functions library (FUNCTION LOAD) holds every script; its name carries a hash of their
# content, so each version of the scripts is its own library and versions never replace each other's.
string(SHA1 _rl_all_sha "${_rl_all}")
string(SUBSTRING "${_rl_all_sha}" 0 12 _rl_all_sha)
set(_rl_library "ratelimit_${_rl_all_sha}")
string(REPLACE "@RL_LIBRARY@" "${_rl_library}" _rl_entries "${_rl_entries}")
# The library's source as FUNCTION LOAD takes it (redis::detail::function_library_code() builds the same
# text; a test compares them), for redis-cli and the benchmarks.
string(REPLACE "@RL_LIBRARY@" "${_rl_library}" _rl_lib "#!lua name=@RL_LIBRARY@\n${_rl_lib}")
file(WRITE "${PROJECT_BINARY_DIR}/generated/lua/library.lua.tmp" "${_rl_lib}")
configure_file("${PROJECT_BINARY_DIR}/generated/lua/library.lua.tmp" "${PROJECT_BINARY_DIR}/generated/lua/library.lua" COPYONLY)
string(APPEND _rl_text "${_rl_entries}};\n\n")
string(APPEND _rl_text "/// The name of the Redis Functions library of these scripts (`ratelimit_` and 12 hex digits of a hash\n")
string(APPEND _rl_text "/// of their content); `redis::detail::function_library_code()` is its source.\n")
string(APPEND _rl_text "inline constexpr std::string_view kFunctionLibrary = \"${_rl_library}\";\n\n")
string(APPEND _rl_text "}  // namespace detail\n}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE\n}  // namespace ratelimit::redis\n")
# Rewrite only on change, so an unchanged configure rebuilds nothing.
file(WRITE "${_rl_header}.tmp" "${_rl_text}")
configure_file("${_rl_header}.tmp" "${_rl_header}" COPYONLY)

add_library(ratelimit_redis INTERFACE)
add_library(ratelimit::redis ALIAS ratelimit_redis)
set_target_properties(ratelimit_redis PROPERTIES EXPORT_NAME redis)
target_include_directories(ratelimit_redis INTERFACE $<BUILD_INTERFACE:${_rl_gen_dir}>)
target_link_libraries(ratelimit_redis INTERFACE ratelimit::ratelimit ratelimit::hiredis)

# TLS (include/ratelimit/redis/README.md "TLS"): OpenSSL does TLS on the sockets the connections own, hiredis stays the
# RESP codec. Optional: on when OpenSSL is found (Debian: libssl-dev); without it `ConnectionOptions::tls` is refused.
find_package(OpenSSL QUIET)
option(RATELIMIT_TLS "TLS for the Redis backend (needs OpenSSL)" ${OPENSSL_FOUND})
if(RATELIMIT_TLS)
  if(NOT OPENSSL_FOUND)
    message(FATAL_ERROR "RATELIMIT_TLS is ON but OpenSSL was not found (Debian: apt-get install libssl-dev)")
  endif()
  target_link_libraries(ratelimit_redis INTERFACE OpenSSL::SSL OpenSSL::Crypto)
  target_compile_definitions(ratelimit_redis INTERFACE RATELIMIT_TLS=1)
endif()

# ratelimit::redis_compiled (README.md "Compile cost"): the separately compiled form for a program of this build
# tree (the installed package config makes the same target in the consuming project). A static library of one generated unit, <ratelimit/redis/src.hpp>, which compiles the core's and the Redis
# limiters of the five policies with the default clock once; RATELIMIT_SEPARATE_COMPILATION is PUBLIC, so every unit
# that links it is built in that mode, as it must be. Built only when something links it.
file(CONFIGURE OUTPUT "${PROJECT_BINARY_DIR}/generated/redis_compiled.cpp"
     CONTENT "// The one unit that compiles the separately compiled limiters (CMake target ratelimit::redis_compiled).\n#include <ratelimit/redis/src.hpp>\n")
add_library(ratelimit_redis_compiled STATIC EXCLUDE_FROM_ALL "${PROJECT_BINARY_DIR}/generated/redis_compiled.cpp")
add_library(ratelimit::redis_compiled ALIAS ratelimit_redis_compiled)
target_link_libraries(ratelimit_redis_compiled PUBLIC ratelimit::redis)
target_compile_definitions(ratelimit_redis_compiled PUBLIC RATELIMIT_SEPARATE_COMPILATION)
# Position-independent: it may be linked into a shared library of the user's, as the headers may.
set_target_properties(ratelimit_redis_compiled PROPERTIES UNITY_BUILD OFF POSITION_INDEPENDENT_CODE ON)

if(RATELIMIT_INSTALL)
  # Own export set: the package config loads it (and looks for hiredis) only for COMPONENTS redis.
  install(TARGETS ratelimit_redis EXPORT ratelimitRedisTargets)
  install(FILES "${_rl_header}" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ratelimit/redis/detail)
  install(EXPORT ratelimitRedisTargets NAMESPACE ratelimit:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ratelimit)
  install(FILES "${PROJECT_SOURCE_DIR}/cmake/RatelimitFindHiredis.cmake"
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ratelimit)
endif()
