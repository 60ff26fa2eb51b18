# Two MPI processes given the same arguments but different model folders (an MPMD launch, each
# process in its own --wdir holding a `pipeline` copy; rank 1's has one config value changed) are
# refused before any work: every rank exits with the one line naming the file, and nothing is written.
# Weight files are compared by their size and header: another transformer file is refused too, and
# equal copies in different folders run.
include(${CMAKE_CURRENT_LIST_DIR}/every_rank_refused.cmake)
file(REMOVE_RECURSE ${WORK})
file(COPY ${DATA}/fixtures/wan_pipeline_tiny/pipeline/ DESTINATION ${WORK}/rank0/pipeline)
file(COPY ${DATA}/fixtures/wan_pipeline_tiny/pipeline/ DESTINATION ${WORK}/rank1/pipeline)
set(config ${WORK}/rank1/pipeline/transformer/config.json)
file(READ ${config} text)
string(REPLACE "\"ffn_dim\": 32" "\"ffn_dim\": 48" changed "${text}")
if(changed STREQUAL text)
  message(FATAL_ERROR "the fixture's transformer config has no \"ffn_dim\": 32 to change")
endif()
file(WRITE ${config} "${changed}")

set(args generate --model pipeline --steps 1 --frames 5 --height 32 --width 32 --text-tokens 8 --threads 1
         --random-embeddings
         --out ${WORK}/mixed.safetensors)
function(run_mpmd)
  execute_process(COMMAND ${MPIEXEC} -np 1 --oversubscribe --wdir ${WORK}/rank0 ${CPDIT} ${args}
                          : -np 1 --wdir ${WORK}/rank1 ${CPDIT} ${args}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  set(rc "${rc}" PARENT_SCOPE)
  set(err "${out}\n${err}" PARENT_SCOPE)
endfunction()

# Expects the one-line refusal naming `file` from each of the 2 ranks.
function(expect_refused file)
  run_mpmd()
  if(rc EQUAL 0)
    message(FATAL_ERROR "ranks with different models ran to the end:\n${err}")
  endif()
  expect_every_rank_refused("${err}" "cpdit: error: the MPI processes' models differ: rank 1's pipeline/${file} differs from rank 0's"
                            2 ${WORK}/mixed.safetensors)
endfunction()

expect_refused(transformer/config.json)

# The same config, another transformer weights file (the Wan fixture's other tiny network).
file(WRITE ${config} "${text}")
set(weights pipeline/transformer/diffusion_pytorch_model.safetensors)
file(COPY_FILE ${DATA}/fixtures/wan_tiny/weights.safetensors ${WORK}/rank1/${weights})
expect_refused(transformer/diffusion_pytorch_model.safetensors)

# Equal copies run.
file(COPY_FILE ${WORK}/rank0/${weights} ${WORK}/rank1/${weights})
run_mpmd()
if(NOT rc EQUAL 0 OR NOT EXISTS ${WORK}/mixed.safetensors)
  message(FATAL_ERROR "equal model copies in two folders were refused (${rc}):\n${err}")
endif()
