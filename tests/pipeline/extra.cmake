# The command-line tests (generate, encode-prompt) run the cpdit binary: building test_pipeline builds it.
add_dependencies(test_pipeline cpdit_app)

# `cpdit generate` under mpirun (ranks as processes): the latents of the same run on local ranks,
# each process's share of the cores by default, and diffusers' latents for the guided Wan pipeline,
# serial and CFG-parallel.
if(MPI_CXX_FOUND AND MPIEXEC_EXECUTABLE)
  # A `cmake -P` script that runs cpdit under mpirun, with its own WORK folder in the build tree.
  function(add_mpi_script_test name script)
    add_test(NAME ${name}
             COMMAND ${CMAKE_COMMAND} -DCPDIT=$<TARGET_FILE:cpdit_app> -DMPIEXEC=${MPIEXEC_EXECUTABLE}
                     -DDATA=${CPDIT_TEST_DATA} -DWORK=${CMAKE_CURRENT_BINARY_DIR}/${name}
                     -P ${CMAKE_CURRENT_LIST_DIR}/${script})
    set_tests_properties(${name} PROPERTIES TIMEOUT 300 LABELS "mpi;pipeline"
                         ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;CPDIT_COMM_TIMEOUT_S=120")
  endfunction()
  add_mpi_script_test(generate_mpi_matches_local generate_mpi.cmake)
  add_mpi_script_test(generate_mpi_default_threads generate_mpi_threads.cmake)
  add_mpi_script_test(pipeline_parity_mpi pipeline_parity_mpi.cmake)
  add_mpi_script_test(generate_mpi_mismatched_arguments generate_mpi_arguments.cmake)
  add_mpi_script_test(pipeline_cfg_mpi pipeline_cfg_mpi.cmake)
  add_mpi_script_test(ltx_pipeline_mpi ltx_pipeline_mpi.cmake)
  add_mpi_script_test(generate_mpi_encode_on_rank0 generate_mpi_encode.cmake)
  add_mpi_script_test(generate_mpi_images_on_rank0 generate_mpi_images.cmake)
  add_mpi_script_test(generate_mpi_mismatched_models generate_mpi_model.cmake)
endif()

# The PNG and MP4 outputs of generate are read back in the tests (support/read_png.hpp, read_mp4.hpp).
target_link_libraries(test_pipeline PRIVATE PNG::PNG PkgConfig::FFMPEG)
