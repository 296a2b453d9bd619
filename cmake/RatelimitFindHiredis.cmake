# Finds hiredis and defines the imported target ratelimit::hiredis (and RATELIMIT_HIREDIS_FOUND).
# Used by the build and, installed next to the package config, by find_package(ratelimit COMPONENTS redis).
#
# Order: hiredis's own CMake config (hiredis >= 1.0 exports hiredis::hiredis), then the config Debian ships
# for 0.14 (HiredisConfig.cmake: variables only, no target), then pkg-config (hiredis.pc).
if(TARGET ratelimit::hiredis)
  set(RATELIMIT_HIREDIS_FOUND TRUE)
  return()
endif()
set(RATELIMIT_HIREDIS_FOUND FALSE)

find_package(hiredis CONFIG QUIET)
if(TARGET hiredis::hiredis)
  add_library(ratelimit::hiredis INTERFACE IMPORTED GLOBAL)
  set_target_properties(ratelimit::hiredis PROPERTIES INTERFACE_LINK_LIBRARIES hiredis::hiredis)
  set(RATELIMIT_HIREDIS_FOUND TRUE)
  return()
endif()

# Debian's HiredisConfigVersion.cmake fails without a requested version, so ask for the 0.x series.
find_package(Hiredis 0.13 CONFIG QUIET)
if(Hiredis_FOUND AND HIREDIS_INCLUDE_DIRS AND HIREDIS_LIBRARIES)
  add_library(ratelimit::hiredis INTERFACE IMPORTED GLOBAL)
  set_target_properties(ratelimit::hiredis PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${HIREDIS_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${HIREDIS_LIBRARIES}")
  set(RATELIMIT_HIREDIS_FOUND TRUE)
  return()
endif()

find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(RATELIMIT_PC_HIREDIS QUIET IMPORTED_TARGET GLOBAL hiredis)
  if(TARGET PkgConfig::RATELIMIT_PC_HIREDIS)
    add_library(ratelimit::hiredis INTERFACE IMPORTED GLOBAL)
    set_target_properties(ratelimit::hiredis PROPERTIES INTERFACE_LINK_LIBRARIES PkgConfig::RATELIMIT_PC_HIREDIS)
    set(RATELIMIT_HIREDIS_FOUND TRUE)
  endif()
endif()
