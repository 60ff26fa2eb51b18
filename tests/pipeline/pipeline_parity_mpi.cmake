# The guided Wan pipeline (wan_pipeline_tiny) under `mpirun -np 4` (ring 2 x Ulysses 2): diffusers'
# final latents within 1e-4, as on local ranks (test_pipeline's WanPipelineParity).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(case ${DATA}/fixtures/wan_pipeline_tiny)
execute_process(COMMAND ${MPIEXEC} -np 4 --oversubscribe ${CPDIT} generate --model ${case}/pipeline
                        --embeddings ${case}/inputs.safetensors --latents ${case}/inputs.safetensors --steps 3 --frames 5
                        --height 48 --width 32 --ring 2 --ulysses 2 --threads 1 --out ${WORK}/mpi.safetensors
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun run failed: ${rc}")
endif()
# 1e-4: the tolerance of the local-rank parity test (summation order only; observed 1e-5).
execute_process(COMMAND ${CPDIT} diff ${WORK}/mpi.safetensors ${case}/expected.safetensors --tolerance 1e-4
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun latents differ from diffusers' guided latents")
endif()
