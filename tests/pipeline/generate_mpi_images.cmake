# Under mpirun only world rank 0 encodes the images of an image-to-video run (the VAE, CLIP) and every
# other process receives what it made: rank 1 runs in a folder whose copy of the Wan FLF2V pipeline has no
# image_encoder/ and no image_processor/ (the same relative --model through mpirun's per-process --wdir),
# and the latents are still bit for bit those of one process with two local ranks. A broken image
# encoder on rank 0 ends every process with its one error, before the communication timeout.
include(${CMAKE_CURRENT_LIST_DIR}/every_rank_refused.cmake)
file(REMOVE_RECURSE ${WORK})
set(case ${DATA}/fixtures/wan_i2v_pipeline)
set(full ${WORK}/rank0/pipeline)
file(COPY ${case}/first_last/pipeline/ DESTINATION ${full})
file(COPY ${case}/first_last/pipeline/ DESTINATION ${WORK}/rank1/pipeline)
file(REMOVE_RECURSE ${WORK}/rank1/pipeline/image_encoder ${WORK}/rank1/pipeline/image_processor)

set(args generate --model pipeline --embeddings ${case}/inputs.safetensors --frames 9 --height 48 --width 32
         --steps 2 --seed 3 --first-image ${case}/first.png --last-image ${case}/last.png --ring 2 --threads 1)
execute_process(COMMAND ${CPDIT} ${args} --out ${WORK}/local.safetensors WORKING_DIRECTORY ${WORK}/rank0
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "one-process run failed: ${rc}\n${err}")
endif()
execute_process(COMMAND ${MPIEXEC} -np 1 --oversubscribe --wdir ${WORK}/rank0 ${CPDIT} ${args} --out ${WORK}/mpi.safetensors
                        : -np 1 --wdir ${WORK}/rank1 ${CPDIT} ${args} --out ${WORK}/mpi.safetensors
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun with the image encoder on rank 0 only failed: ${rc}\n${out}\n${err}")
endif()
# The same code on the same conditioning and ranks: equal to the last bit.
execute_process(COMMAND ${CPDIT} diff ${WORK}/local.safetensors ${WORK}/mpi.safetensors --tolerance 0
                RESULT_VARIABLE rc OUTPUT_VARIABLE compared)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the mpirun latents differ from the one-process ones:\n${compared}")
endif()

# A broken image encoder on rank 0: every process ends with rank 0's error (exit 2), none times out.
file(WRITE ${full}/image_encoder/model.safetensors "not a safetensors file")
execute_process(COMMAND ${MPIEXEC} -np 1 --oversubscribe --wdir ${WORK}/rank0 ${CPDIT} ${args} --out ${WORK}/bad.safetensors
                        : -np 1 --wdir ${WORK}/rank1 ${CPDIT} ${args} --out ${WORK}/bad.safetensors
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "a broken image encoder on rank 0 gave '${rc}' (expected a non-zero exit):\n${out}\n${err}")
endif()
if(err MATCHES "timed out")
  message(FATAL_ERROR "a process waited for rank 0 until the timeout:\n${err}")
endif()
expect_every_rank_refused("${err}" "cpdit: error: [^\n]*model.safetensors" 2 ${WORK}/bad.safetensors)
