# CFG-parallel under mpirun: the guided Wan pipeline (wan_pipeline_tiny) with --cfg-parallel 2 on 2, 4 and 6
# processes (no split, Ulysses 2, ring 3 inside each group) gives one local rank's latents and diffusers'
# within 1e-4, as the local-rank test_pipeline's WanPipelineParity.CfgParallelMatchesDiffusersAndOneRank.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(case ${DATA}/fixtures/wan_pipeline_tiny)
set(args generate --model ${case}/pipeline --embeddings ${case}/inputs.safetensors --latents ${case}/inputs.safetensors
         --steps 3 --frames 5 --height 48 --width 32 --threads 1)
execute_process(COMMAND ${CPDIT} ${args} --ranks 1 --out ${WORK}/one.safetensors RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the one-rank run failed: ${rc}")
endif()
foreach(split "2;--cfg-parallel;2" "4;--cfg-parallel;2;--ulysses;2" "6;--cfg-parallel;2;--ring;3")
  list(POP_FRONT split np)
  execute_process(COMMAND ${MPIEXEC} -np ${np} --oversubscribe ${CPDIT} ${args} ${split} --out ${WORK}/mpi${np}.safetensors
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mpirun -np ${np} ${split} failed: ${rc}")
  endif()
  # 1e-4: the tolerance of the local-rank tests (ring summation order only; observed 1e-5).
  foreach(reference ${WORK}/one.safetensors ${case}/expected.safetensors)
    execute_process(COMMAND ${CPDIT} diff ${WORK}/mpi${np}.safetensors ${reference} --tolerance 1e-4 RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "mpirun -np ${np} ${split}: latents differ from ${reference}")
    endif()
  endforeach()
endforeach()
