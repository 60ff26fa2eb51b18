# Under mpirun with no --threads, each process takes its share of this machine's cores (cores / the
# job's processes on this machine), not all of them: 2 processes on n cores run max(1, n/2) threads each.
execute_process(COMMAND nproc OUTPUT_VARIABLE cores OUTPUT_STRIP_TRAILING_WHITESPACE)
math(EXPR expected "${cores} / 2")
if(expected LESS 1)
  set(expected 1)
endif()
execute_process(COMMAND ${MPIEXEC} -np 2 --oversubscribe ${CPDIT} generate --preset flux-tiny --height 32 --width 32
                        --steps 1 --verbose --out ${WORK}.safetensors
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun run failed: ${rc}\n${out}\n${err}")
endif()
if(NOT out MATCHES "2 mpi ranks[^\n]*, ${expected} threads per rank")
  message(FATAL_ERROR "expected ${expected} threads per rank on ${cores} cores for 2 processes:\n${out}")
endif()
