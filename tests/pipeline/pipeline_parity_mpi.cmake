# The guided Wan pipeline (wan_pipeline_tiny) under `mpirun -np 4` (ring 2 x Ulysses 2), through the
# parallel VAE decode: diffusers' final latents and decoded video, and what one local rank makes,
# within 1e-4 (test_pipeline's WanPipelineParity on local ranks).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(case ${DATA}/fixtures/wan_pipeline_tiny)
set(args generate --model ${case}/pipeline --embeddings ${case}/inputs.safetensors --latents ${case}/inputs.safetensors
         --steps 3 --frames 5 --height 48 --width 32 --threads 1)
execute_process(COMMAND ${MPIEXEC} -np 4 --oversubscribe ${CPDIT} ${args} --ring 2 --ulysses 2 --out ${WORK}/mpi.safetensors
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun run failed: ${rc}")
endif()
execute_process(COMMAND ${CPDIT} ${args} --ranks 1 --out ${WORK}/single.safetensors RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "one-rank run failed: ${rc}")
endif()
# The decoded video must be there for the comparisons below to cover it.
execute_process(COMMAND ${CPDIT} inspect ${WORK}/mpi.safetensors OUTPUT_VARIABLE listing RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT listing MATCHES "video")
  message(FATAL_ERROR "the mpirun output holds no decoded video:\n${listing}")
endif()
# 1e-4: the tolerance of the local-rank parity test (summation order only; observed 1e-5 on the
# latents, 4e-6 on the video).
foreach(reference ${case}/expected.safetensors ${WORK}/single.safetensors)
  execute_process(COMMAND ${CPDIT} diff ${WORK}/mpi.safetensors ${reference} --tolerance 1e-4 RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mpirun latents or video differ from ${reference}")
  endif()
endforeach()
