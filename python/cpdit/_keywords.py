"""The engine's messages in the words of a Python call: the engine names what it refuses by the flags of
``cpdit generate`` (``--embeddings``, ``--steps``); a pipeline's call gives the same things as diffusers'
keywords, so its errors name those (``prompt_embeds=``, ``num_inference_steps=``)."""

import re

# Each flag the engine's messages name, as the keyword (or the ContextParallelConfig field) that gives the
# same in a pipeline's call. One table serves every class: no class takes both --init-image (the
# image-to-image classes' ``image``) and --first-image (the image-to-video classes' ``image``).
FLAG_KEYWORDS = {
    "--prompt": "prompt=",
    "--negative-prompt": "negative_prompt=",
    "--embeddings": "prompt_embeds=",
    "--random-embeddings": "random_embeddings=True",
    "--latents": "latents=",
    "--height": "height=",
    "--width": "width=",
    "--frames": "num_frames=",
    "--steps": "num_inference_steps=",
    "--sigmas": "sigmas=",
    "--seed": "generator=",
    "--guidance": "guidance_scale=",
    "--guidance-2": "guidance_scale_2=",
    "--true-cfg-scale": "true_cfg_scale=",
    "--text-tokens": "max_sequence_length=",
    "--init-image": "image=",
    "--first-image": "image=",
    "--last-image": "last_image=",
    "--strength": "strength=",
    "--ar-step": "ar_step=",
    "--base-num-frames": "base_num_frames=",
    "--overlap-history": "overlap_history=",
    "--addnoise-condition": "addnoise_condition=",
    "--decode-timestep": "decode_timestep=",
    "--decode-noise-scale": "decode_noise_scale=",
    "--dtype": "dtype=",
    "--ranks": "ranks=",
    "--ring": "ring_degree=",
    "--ulysses": "ulysses_degree=",
    "--cfg-parallel": "cfg_degree=",
    "--config": "config=",  # from_single_file's transformer config
}

# A flag, with the number it was given ("--ring 3": ring_degree=3) or the keyword a message already names
# beside it ("(--embeddings, prompt_embeds=)": named once).
_FLAG = re.compile(r"(--[a-z][a-z0-9-]*)(?: (-?\d[\w.]*)|, (\w+=))?")


def _keyword(match):
    flag, number, beside = match.groups()
    keyword = FLAG_KEYWORDS.get(flag)
    if keyword is None:
        return match.group(0)
    if number is not None:
        return keyword + number
    return keyword if beside in (None, keyword) else f"{keyword}, {beside}"


def keyword_message(message):
    """``message`` with each flag that has a keyword named by the keyword."""
    return _FLAG.sub(_keyword, message)


def with_keywords(error):
    """The engine's ValueError or RuntimeError again, its message naming keywords instead of flags; any
    other exception (one a callback raised, say) as it is."""
    if type(error) not in (ValueError, RuntimeError):
        return error
    message = keyword_message(str(error))
    return error if message == str(error) else type(error)(message)
