# Runs COMMAND ('|'-separated) and passes when it exits with a non-zero code within LIMIT seconds
# (default 90) and its output matches EXPECT: a fault must end the run, with the failing rank's
# message, and never hang.
string(REPLACE "|" ";" command "${COMMAND}")
if(NOT LIMIT)
  set(LIMIT 90)
endif()
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${LIMIT})
message("exit: ${rc}\nstdout:\n${out}\nstderr:\n${err}")
if(NOT rc MATCHES "^[0-9]+$" OR rc EQUAL 0)
  message(FATAL_ERROR "expected a non-zero exit code, got '${rc}'")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "output does not match '${EXPECT}'")
endif()
