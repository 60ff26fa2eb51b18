# Under mpirun only world rank 0 encodes the prompt and every other process receives the embeddings:
# rank 1 runs in a folder whose copy of the Wan pipeline has no tokenizer/ and no text_encoder/ (the
# same relative --model through mpirun's per-process --wdir), and the latents are still bit for bit
# those of one process with two local ranks. A tokenizer that fails to load on rank 0 ends every
# process with its one error, before the communication timeout.
include(${CMAKE_CURRENT_LIST_DIR}/every_rank_refused.cmake)
file(REMOVE_RECURSE ${WORK})
# The tiny Wan pipeline with the UMT5 tokenizer and encoder the encode-prompt fixture uses (text_dim 16).
set(full ${WORK}/rank0/pipeline)
file(COPY ${DATA}/fixtures/wan_pipeline_tiny/pipeline/ DESTINATION ${full})
file(COPY ${DATA}/fixtures/tokenizer_t5_v2/ DESTINATION ${full}/tokenizer)
file(COPY ${DATA}/fixtures/encode_prompt/wan_text_encoder/ DESTINATION ${full}/text_encoder)
file(COPY ${DATA}/fixtures/wan_pipeline_tiny/pipeline/ DESTINATION ${WORK}/rank1/pipeline)

set(args generate --model pipeline --prompt "a red fox in the snow" --steps 2 --frames 5 --height 32 --width 32
         --text-tokens 16 --seed 3 --ring 2 --threads 1)
execute_process(COMMAND ${CPDIT} ${args} --out ${WORK}/local.safetensors WORKING_DIRECTORY ${WORK}/rank0
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "one-process run failed: ${rc}\n${err}")
endif()
execute_process(COMMAND ${MPIEXEC} -np 1 --oversubscribe --wdir ${WORK}/rank0 ${CPDIT} ${args} --out ${WORK}/mpi.safetensors
                        : -np 1 --wdir ${WORK}/rank1 ${CPDIT} ${args} --out ${WORK}/mpi.safetensors
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun with the text encoders on rank 0 only failed: ${rc}\n${out}\n${err}")
endif()
# The same code on the same embeddings and ranks: equal to the last bit.
execute_process(COMMAND ${CPDIT} diff ${WORK}/local.safetensors ${WORK}/mpi.safetensors --tolerance 0
                RESULT_VARIABLE rc OUTPUT_VARIABLE compared)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the mpirun latents differ from the one-process ones:\n${compared}")
endif()

# A broken tokenizer on rank 0: every process ends with rank 0's error (exit 2), none times out.
file(WRITE ${full}/tokenizer/spiece.model "not a sentencepiece model")
execute_process(COMMAND ${MPIEXEC} -np 1 --oversubscribe --wdir ${WORK}/rank0 ${CPDIT} ${args} --out ${WORK}/bad.safetensors
                        : -np 1 --wdir ${WORK}/rank1 ${CPDIT} ${args} --out ${WORK}/bad.safetensors
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "a broken tokenizer on rank 0 gave '${rc}' (expected a non-zero exit):\n${out}\n${err}")
endif()
if(err MATCHES "timed out")
  message(FATAL_ERROR "a process waited for rank 0 until the timeout:\n${err}")
endif()
expect_every_rank_refused("${err}" "cpdit: error: [^\n]*spiece.model" 2 ${WORK}/bad.safetensors)
