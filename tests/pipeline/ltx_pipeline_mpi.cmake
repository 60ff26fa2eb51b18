# LTX-Video from its prompt under `mpirun -np 2` (ring 2): rank 0 alone runs the folder's T5 and
# broadcasts the embeddings and both text masks; the final latents and decoded video are diffusers'
# (ltx_pipeline_tiny) within 1e-4, the tolerance of test_pipeline's LtxPipelineParity on local ranks
# (summation order only; observed 3e-6 on both).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(case ${DATA}/fixtures/ltx_pipeline_tiny)
execute_process(COMMAND ${MPIEXEC} -np 2 --oversubscribe ${CPDIT} generate --model ${case}/pipeline
                        --prompt "a red fox trotting through snow" --text-tokens 24 --latents ${case}/inputs.safetensors
                        --steps 3 --frames 9 --height 64 --width 64 --threads 1 --ring 2 --out ${WORK}/mpi.safetensors
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun run failed: ${rc}")
endif()
execute_process(COMMAND ${CPDIT} inspect ${WORK}/mpi.safetensors OUTPUT_VARIABLE listing RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT listing MATCHES "video")
  message(FATAL_ERROR "the mpirun output holds no decoded video:\n${listing}")
endif()
execute_process(COMMAND ${CPDIT} diff ${WORK}/mpi.safetensors ${case}/expected.safetensors --tolerance 1e-4
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun latents or video differ from diffusers'")
endif()
