# cmake -DNM=<nm> -DOBJECT=<object file> [-DPATTERN=<regex>] -P emits_no_code.cmake
# Fails when the object of a unit that only includes a header holds a symbol of namespace ratelimit (an inline
# function a vtable or a global's initialiser pulled in, a guard variable, ...) or a dynamic initialiser:
# including a header must cost compile time only, never code in every object of the user's program.
# PATTERN replaces what counts as ours (e.g. the separately compiled limiters' names).
if(NOT NM OR NOT OBJECT)
  message(FATAL_ERROR "usage: cmake -DNM=<nm> -DOBJECT=<object file> [-DPATTERN=<regex>] -P emits_no_code.cmake")
endif()
if(NOT PATTERN)
  set(PATTERN "ratelimit::|_GLOBAL__sub_I")
endif()
execute_process(COMMAND "${NM}" -C --defined-only "${OBJECT}" OUTPUT_VARIABLE symbols ERROR_VARIABLE errors
                RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${NM} failed on ${OBJECT}: ${errors}")
endif()
string(REPLACE "\n" ";" symbols "${symbols}")
set(ours "")
set(count 0)
foreach(line IN LISTS symbols)
  if(line MATCHES "${PATTERN}")
    math(EXPR count "${count} + 1")
    if(count LESS_EQUAL 12)
      string(SUBSTRING "${line}" 0 200 line)
      string(APPEND ours "  ${line}\n")
    endif()
  endif()
endforeach()
if(count GREATER 0)
  message(FATAL_ERROR "${OBJECT}: defines ${count} symbols matching ${PATTERN} (the first 12):\n${ours}")
endif()
message(STATUS "${OBJECT}: no symbol matching ${PATTERN}")
