# The Inspect tests run the cpdit binary: building test_io builds it too.
add_dependencies(test_io cpdit_app)
# The video test decodes what io::write_mp4 wrote through the FFmpeg libraries itself.
target_link_libraries(test_io PRIVATE PkgConfig::FFMPEG)
