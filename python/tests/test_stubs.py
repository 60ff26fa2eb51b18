"""The type stubs say what the native module has: every function and class of cpdit._cpdit is in
_cpdit.pyi with the parameters pybind11 reports for it, and every field of its classes; the package's
public names all carry docstrings; each pipeline's call signature is diffusers' names for what it takes."""

import ast
import inspect
import pathlib
import re

import cpdit
from cpdit import _cpdit

STUB = ast.parse((pathlib.Path(cpdit.__file__).parent / "_cpdit.pyi").read_text())


def public(names):
    return sorted(name for name in names if not name.startswith("_"))


def native_parameters(function):
    """The parameter names in pybind11's signature line, "name(a: int, b: str = '') -> None"."""
    line = function.__doc__.splitlines()[0]
    return re.findall(r"[(,] ?(\w+):", line[: line.rindex(") ->")])


def test_the_stub_has_every_function_and_class_of_the_module():
    functions = {node.name: node for node in STUB.body if isinstance(node, ast.FunctionDef)}
    classes = {node.name: node for node in STUB.body if isinstance(node, ast.ClassDef)}
    assert sorted([*functions, *classes]) == public(dir(_cpdit))
    for name, node in functions.items():
        stubbed = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
        assert stubbed == native_parameters(getattr(_cpdit, name)), name
    for name, node in classes.items():
        fields = [n.target.id for n in node.body if isinstance(n, ast.AnnAssign)]
        methods = [n.name for n in node.body if isinstance(n, ast.FunctionDef)]
        assert sorted(fields + methods) == public(dir(getattr(_cpdit, name))), name


def test_public_names_have_docstrings():
    for name in cpdit.__all__:
        thing = getattr(cpdit, name)
        if name != "__version__":
            assert inspect.getdoc(thing), name
    for function in (cpdit.attention.dispatch, cpdit.attention.backends):
        assert inspect.getdoc(function)
    pipelines = [getattr(cpdit, name) for name in cpdit.__all__ if name.endswith("Pipeline")]
    for pipeline in pipelines:
        for method in ("__call__", "from_pretrained", "from_single_file", "from_preset", "set_progress_bar_config"):
            assert inspect.getdoc(getattr(pipeline, method)), f"{pipeline.__name__}.{method}"
        assert pipeline.__name__ in inspect.getdoc(pipeline.__call__)


def test_each_pipeline_takes_its_own_keywords():
    def keywords(pipeline):
        return set(inspect.signature(pipeline.__call__).parameters)

    assert {"true_cfg_scale", "pooled_prompt_embeds"} <= keywords(cpdit.FluxPipeline)
    assert "num_frames" not in keywords(cpdit.FluxPipeline)
    assert {"prompt_embeds_mask", "negative_prompt_embeds_mask"} <= keywords(cpdit.QwenImagePipeline)
    assert {"ar_step", "fps", "overlap_history"} <= keywords(cpdit.SkyReelsV2DiffusionForcingPipeline)
    assert {"frame_rate", "prompt_attention_mask", "decode_timestep"} <= keywords(cpdit.LTXPipeline)
    assert "fps" not in keywords(cpdit.LTXPipeline) and "ar_step" not in keywords(cpdit.WanPipeline)
    assert {"image", "last_image", "num_frames"} <= keywords(cpdit.WanImageToVideoPipeline)
    assert "image" not in keywords(cpdit.WanPipeline) and "image" not in keywords(cpdit.FluxPipeline)
    assert {"image", "strength", "true_cfg_scale"} <= keywords(cpdit.FluxImg2ImgPipeline)
    assert {"image", "strength", "prompt_embeds_mask"} <= keywords(cpdit.QwenImageImg2ImgPipeline)
    # diffusers' default output types: images as PIL, Wan and SkyReels-V2 frames as numpy, LTX-Video PIL.
    defaults = {p.__name__: inspect.signature(p.__call__).parameters["output_type"].default
                for p in (cpdit.FluxPipeline, cpdit.WanPipeline, cpdit.SkyReelsV2DiffusionForcingPipeline,
                          cpdit.LTXPipeline)}
    assert defaults == {"FluxPipeline": "pil", "WanPipeline": "np", "SkyReelsV2DiffusionForcingPipeline": "np",
                        "LTXPipeline": "pil"}
