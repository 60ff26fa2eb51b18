# Runs flux-tiny from a prompt to pixels on 2 x 2 local ranks and under `mpirun -np 4` (where rank 0
# encodes the prompt for every process and the VAE decode is split over the processes), then compares
# the latents and the decoded image.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(args generate --preset flux-tiny --prompt "a red fox in the snow" --height 80 --width 48 --steps 3 --seed 9
         --ring 2 --ulysses 2 --threads 1)
execute_process(COMMAND ${CPDIT} ${args} --out ${WORK}/local.safetensors RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "local run failed: ${rc}")
endif()
execute_process(COMMAND ${MPIEXEC} -np 4 --oversubscribe ${CPDIT} ${args} --out ${WORK}/mpi.safetensors RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun run failed: ${rc}")
endif()
execute_process(COMMAND ${CPDIT} diff ${WORK}/local.safetensors ${WORK}/mpi.safetensors --tolerance 1e-5 RESULT_VARIABLE rc
                OUTPUT_VARIABLE compared)
if(NOT rc EQUAL 0 OR NOT compared MATCHES "image max_abs_diff")
  message(FATAL_ERROR "mpirun latents or image differ from the local-rank ones")
endif()
