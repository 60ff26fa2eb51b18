# Two MPI processes launched with different --seed (an MPMD launch) are refused before any work:
# every rank exits with the one-line error and nothing is written.
include(${CMAKE_CURRENT_LIST_DIR}/every_rank_refused.cmake)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(args generate --preset flux-tiny --height 32 --width 32 --steps 1 --threads 1 --out ${WORK}/mixed.safetensors)
execute_process(COMMAND ${MPIEXEC} -np 1 --oversubscribe ${CPDIT} ${args} --seed 1 : -np 1 ${CPDIT} ${args} --seed 2
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "ranks with different arguments ran to the end:\n${out}\n${err}")
endif()
expect_every_rank_refused("${err}" "cpdit: error: the MPI processes were launched with different arguments \\(rank 1's differ from rank 0's\\)"
                          2 ${WORK}/mixed.safetensors)
# The same arguments on every process still run.
execute_process(COMMAND ${MPIEXEC} -np 2 --oversubscribe ${CPDIT} ${args} --seed 1 RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the same arguments on every process failed: ${err}")
endif()
