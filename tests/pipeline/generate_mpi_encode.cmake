# Under mpirun only world rank 0 encodes the prompt and every other process receives the embeddings:
# rank 1 runs in a folder whose copy of the Wan pipeline has no tokenizer/ and no text_encoder/ (the
# same relative --model through mpirun's per-process --wdir), and the latents are still bit for bit
# those of one process with two local ranks. A tokenizer that fails to load on rank 0 ends every
# process with its one error, before the communication timeout.
include(${CMAKE_CURRENT_LIST_DIR}/rank0_only.cmake)
file(REMOVE_RECURSE ${WORK})
# The tiny Wan pipeline with the UMT5 tokenizer and encoder the encode-prompt fixture uses (text_dim 16).
set(full ${WORK}/rank0/pipeline)
file(COPY ${DATA}/fixtures/wan_pipeline_tiny/pipeline/ DESTINATION ${full})
file(COPY ${DATA}/fixtures/tokenizer_t5_v2/ DESTINATION ${full}/tokenizer)
file(COPY ${DATA}/fixtures/encode_prompt/wan_text_encoder/ DESTINATION ${full}/text_encoder)
file(COPY ${DATA}/fixtures/wan_pipeline_tiny/pipeline/ DESTINATION ${WORK}/rank1/pipeline)

set(args generate --model pipeline --prompt "a red fox in the snow" --steps 2 --frames 5 --height 32 --width 32
         --text-tokens 16 --seed 3 --ring 2 --threads 1)
expect_made_on_rank0("the text encoders" "${args}" ${full}/tokenizer/spiece.model "not a sentencepiece model"
                     "cpdit: error: [^\n]*spiece.model")
