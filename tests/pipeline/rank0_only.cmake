# Shared by the mpirun scripts of what only world rank 0 makes (the prompt's embeddings, the images'
# encodings): `args` (a generate command line whose --model is the relative `pipeline`) run in
# ${WORK}/rank0 by one process with two local ranks, then by mpirun with rank 0 in ${WORK}/rank0 and rank
# 1 in ${WORK}/rank1 (whose folder lacks what rank 0 alone reads), must give the same latents bit for
# bit. Then `broken` (a file under ${WORK}/rank0) is overwritten with `broken_text`: every process must end
# with rank 0's error matching `pattern` (exit 2), none at the communication timeout. `what` names the
# rank-0 part in failures.
include(${CMAKE_CURRENT_LIST_DIR}/every_rank_refused.cmake)

function(expect_made_on_rank0 what args broken broken_text pattern)
  execute_process(COMMAND ${CPDIT} ${args} --out ${WORK}/local.safetensors WORKING_DIRECTORY ${WORK}/rank0
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "one-process run failed: ${rc}\n${err}")
  endif()
  set(mpirun ${MPIEXEC} -np 1 --oversubscribe --wdir ${WORK}/rank0 ${CPDIT} ${args})
  execute_process(COMMAND ${mpirun} --out ${WORK}/mpi.safetensors
                          : -np 1 --wdir ${WORK}/rank1 ${CPDIT} ${args} --out ${WORK}/mpi.safetensors
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mpirun with ${what} on rank 0 only failed: ${rc}\n${out}\n${err}")
  endif()
  # The same code on the same inputs and ranks: equal to the last bit.
  execute_process(COMMAND ${CPDIT} diff ${WORK}/local.safetensors ${WORK}/mpi.safetensors --tolerance 0
                  RESULT_VARIABLE rc OUTPUT_VARIABLE compared)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the mpirun latents differ from the one-process ones:\n${compared}")
  endif()

  file(WRITE ${broken} "${broken_text}")
  execute_process(COMMAND ${mpirun} --out ${WORK}/bad.safetensors
                          : -np 1 --wdir ${WORK}/rank1 ${CPDIT} ${args} --out ${WORK}/bad.safetensors
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$")
    message(FATAL_ERROR "a broken ${what} on rank 0 gave '${rc}' (expected a non-zero exit):\n${out}\n${err}")
  endif()
  if(err MATCHES "timed out")
    message(FATAL_ERROR "a process waited for rank 0 until the timeout:\n${err}")
  endif()
  expect_every_rank_refused("${err}" "${pattern}" 2 ${WORK}/bad.safetensors)
endfunction()
