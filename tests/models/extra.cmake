# The FLUX and Wan CLI tests run the cpdit binary: building test_models builds it.
add_dependencies(test_models cpdit_app)

# VAE decode split by rows over two Open MPI processes, checked against diffusers' sample with
# `cpdit diff` (tolerances: 1e-5 of each fixture's output range, 2.6 and 0.42).
if(MPI_CXX_FOUND AND MPIEXEC_EXECUTABLE)
  set(vae_mpirun ${MPIEXEC_EXECUTABLE} -np 2 --oversubscribe --allow-run-as-root)
  list(JOIN vae_mpirun " " vae_mpirun)
  foreach(vae_case "vae_kl_tiny;2.6e-5" "vae_wan_tiny;4.2e-6")
    list(GET vae_case 0 vae_name)
    list(GET vae_case 1 vae_tolerance)
    set(vae_dir ${CPDIT_TEST_DATA}/fixtures/${vae_name})
    set(vae_result ${CMAKE_CURRENT_BINARY_DIR}/models_mpi_${vae_name}.safetensors)
    add_test(NAME models.mpi.${vae_name}
             COMMAND sh -c "${vae_mpirun} $<TARGET_FILE:cpdit_app> forward --model ${vae_dir}/weights.safetensors \
--config ${vae_dir}/config.json --inputs ${vae_dir}/inputs.safetensors --threads 1 --output ${vae_result} \
&& $<TARGET_FILE:cpdit_app> diff ${vae_dir}/expected.safetensors ${vae_result} --tolerance ${vae_tolerance}")
    set_tests_properties(models.mpi.${vae_name} PROPERTIES TIMEOUT 300 LABELS "mpi;models")
  endforeach()
endif()

# LTX-Video with its text split across four Open MPI processes (ring 2 x Ulysses 2), per-token
# timesteps and padded text, against the same forward on one rank with `cpdit diff` (tolerance:
# 1e-5 of the sample's range, 4.54).
if(MPI_CXX_FOUND AND MPIEXEC_EXECUTABLE)
  set(ltx_dir ${CPDIT_TEST_DATA}/fixtures/ltx_video_per_token)
  set(ltx_mpirun ${MPIEXEC_EXECUTABLE} -np 4 --oversubscribe --allow-run-as-root)
  list(JOIN ltx_mpirun " " ltx_mpirun)
  set(ltx_forward $<TARGET_FILE:cpdit_app> forward --model ${CPDIT_TEST_DATA}/fixtures/ltx_tiny/weights.safetensors
      --config ${CPDIT_TEST_DATA}/fixtures/ltx_tiny/config.json --inputs ${ltx_dir}/inputs.safetensors --threads 1)
  list(JOIN ltx_forward " " ltx_forward)
  set(ltx_result ${CMAKE_CURRENT_BINARY_DIR}/models_mpi_ltx_video)
  add_test(NAME models.mpi.ltx_video_text_split
           COMMAND sh -c "${ltx_forward} --output ${ltx_result}_one.safetensors \
&& ${ltx_mpirun} ${ltx_forward} --ring 2 --ulysses 2 --output ${ltx_result}_four.safetensors \
&& $<TARGET_FILE:cpdit_app> diff ${ltx_result}_one.safetensors ${ltx_result}_four.safetensors --tolerance 4.5e-5")
  set_tests_properties(models.mpi.ltx_video_text_split PROPERTIES TIMEOUT 300 LABELS "mpi;models")
endif()

# The decode test reads the MP4 it wrote back through the FFmpeg libraries.
target_link_libraries(test_models PRIVATE PkgConfig::FFMPEG)
