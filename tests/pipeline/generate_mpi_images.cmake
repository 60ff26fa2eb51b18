# Under mpirun only world rank 0 encodes the images of an image-to-video run (the VAE, CLIP) and every
# other process receives what it made: rank 1 runs in a folder whose copy of the Wan FLF2V pipeline has no
# image_encoder/ and no image_processor/ (the same relative --model through mpirun's per-process --wdir),
# and the latents are still bit for bit those of one process with two local ranks. A broken image
# encoder on rank 0 ends every process with its one error, before the communication timeout.
include(${CMAKE_CURRENT_LIST_DIR}/rank0_only.cmake)
file(REMOVE_RECURSE ${WORK})
set(case ${DATA}/fixtures/wan_i2v_pipeline)
set(full ${WORK}/rank0/pipeline)
file(COPY ${case}/first_last/pipeline/ DESTINATION ${full})
file(COPY ${case}/first_last/pipeline/ DESTINATION ${WORK}/rank1/pipeline)
file(REMOVE_RECURSE ${WORK}/rank1/pipeline/image_encoder ${WORK}/rank1/pipeline/image_processor)

set(args generate --model pipeline --embeddings ${case}/inputs.safetensors --frames 9 --height 48 --width 32
         --steps 2 --seed 3 --first-image ${case}/first.png --last-image ${case}/last.png --ring 2 --threads 1)
expect_made_on_rank0("the image encoder" "${args}" ${full}/image_encoder/model.safetensors "not a safetensors file"
                     "cpdit: error: [^\n]*model.safetensors")
