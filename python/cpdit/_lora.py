"""diffusers' LoRA methods on every pipeline (its LoraLoaderMixin's names): adapters loaded by name,
the active ones and their weights, fused at a scale. The engine applies the active ones at each call
beside the transformer's weights (``cpdit generate --lora FILE:WEIGHT``), which stay as loaded, so
switching adapters between calls reloads nothing; fused ones are merged into the weights they touch
(``--lora-merge``). A file is read and checked when it is loaded, and matched against the model at the
first call that uses it (a module that names no layer is refused then)."""

import os

from . import _cpdit


class LoraMethods:
    """Mixed into the pipelines: ``load_lora_weights``, ``set_adapters``, ``fuse_lora`` and the rest."""

    def _loras(self):
        if not hasattr(self, "_lora_state"):
            # name -> path (in load order); the active names and weights; the fused (name, scale) pairs
            self._lora_state = {"paths": {}, "low_noise": set(), "active": [], "weights": {}, "fused": [],
                                "enabled": True}
        return self._lora_state

    def load_lora_weights(self, pretrained_model_name_or_path_or_dict, adapter_name=None, weight_name=None,
                          load_into_transformer_2=False, **unused):
        """A LoRA file (``.safetensors``: diffusers/PEFT, kohya, ComfyUI, musubi-tuner or XLabs layout), or a
        folder holding ``weight_name`` (default ``pytorch_lora_weights.safetensors``), loaded as
        ``adapter_name`` (default ``default_N``) and made the one active adapter, at weight 1, as diffusers
        does; ``load_into_transformer_2=True`` puts it on Wan 2.2's low-noise expert instead."""
        state = self._loras()
        path = pretrained_model_name_or_path_or_dict
        if isinstance(path, dict):
            raise ValueError("load_lora_weights takes a LoRA file or folder path; a state dict of tensors is not supported")
        path = os.fspath(path)
        if os.path.isdir(path):
            path = os.path.join(path, weight_name or "pytorch_lora_weights.safetensors")
        if not os.path.isfile(path):
            raise ValueError(f"load_lora_weights: {path} is not a file")
        name = adapter_name if adapter_name is not None else f"default_{len(state['paths'])}"
        if not isinstance(name, str) or not name:
            raise ValueError(f"adapter_name must be a non-empty string, got {name!r}")
        if name in state["paths"]:
            raise ValueError(f"adapter name {name!r} is already in use; give another adapter_name")
        _cpdit.read_lora(path)  # a file the engine would refuse is refused here, at load
        state["paths"][name] = path
        if load_into_transformer_2:
            state["low_noise"].add(name)
        state["active"], state["weights"] = [name], {name: 1.0}

    def set_adapters(self, adapter_names, adapter_weights=None):
        """The adapters the next calls apply, by name, each at its weight (a number for all, a list of one
        per name, or None for 1.0); the loaded adapters not named are off."""
        state = self._loras()
        names = [adapter_names] if isinstance(adapter_names, str) else list(adapter_names)
        for name in names:
            if name not in state["paths"]:
                raise ValueError(f"adapter {name!r} is not loaded (loaded: {', '.join(state['paths']) or 'none'})")
        if adapter_weights is None or isinstance(adapter_weights, (int, float)):
            weights = [1.0 if adapter_weights is None else adapter_weights] * len(names)
        else:
            weights = list(adapter_weights)
        if len(weights) != len(names):
            raise ValueError(f"set_adapters: {len(names)} adapter names but {len(weights)} adapter_weights")
        for weight in weights:
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight != weight or abs(weight) == float("inf"):
                raise ValueError(f"adapter_weights must be finite numbers, got {weight!r}")
        state["active"], state["weights"] = names, {n: float(w) for n, w in zip(names, weights)}

    def get_active_adapters(self):
        """The names of the adapters the next call applies."""
        state = self._loras()
        return list(state["active"]) if state["enabled"] else []

    def get_list_adapters(self):
        """Every loaded adapter's name, by component (only the transformer takes adapters here)."""
        return {"transformer": list(self._loras()["paths"])}

    def disable_lora(self):
        """The next calls run without the active adapters (they stay loaded and active for enable_lora)."""
        self._loras()["enabled"] = False

    def enable_lora(self):
        self._loras()["enabled"] = True

    def delete_adapters(self, adapter_names):
        """Unloads the named adapters."""
        state = self._loras()
        for name in [adapter_names] if isinstance(adapter_names, str) else adapter_names:
            if name not in state["paths"]:
                raise ValueError(f"adapter {name!r} is not loaded")
            del state["paths"][name]
            state["low_noise"].discard(name)
            state["weights"].pop(name, None)
            state["active"] = [n for n in state["active"] if n != name]
            state["fused"] = [(n, scale) for n, scale in state["fused"] if n != name]

    def unload_lora_weights(self):
        """Unloads every adapter, fused ones included: the next calls run the base weights."""
        self.__dict__.pop("_lora_state", None)

    def fuse_lora(self, components=("transformer",), lora_scale=1.0, adapter_names=None, **unused):
        """diffusers' fuse_lora: W + lora_scale·ΔW of the named (default: active) adapters merged into the
        weights they touch (``cpdit generate --lora-merge``: computed at the next call, a copy of each such
        weight kept while the same adapters stay fused, no cost per step), whatever set_adapters says after,
        until unfuse_lora. Dense weights only: a GGUF-quantised base is refused at the call."""
        state = self._loras()
        if "transformer" not in components:
            raise ValueError(f"fuse_lora: cpdit's adapters are on the transformer; components={components!r}")
        names = state["active"] if adapter_names is None else list(adapter_names)
        for name in names:
            if name not in state["paths"]:
                raise ValueError(f"adapter {name!r} is not loaded")
        state["fused"] = [(n, float(lora_scale) * state["weights"].get(n, 1.0)) for n in names]
        state["active"] = [n for n in state["active"] if n not in names]  # fused, so not applied twice

    def unfuse_lora(self, components=("transformer",), **unused):
        """Undoes fuse_lora: the fused adapters are active again, at their set_adapters weights, beside the
        weights (as diffusers' LoRA layers are after unfusing)."""
        state = self._loras()
        state["active"] += [n for n, _ in state["fused"] if n in state["paths"] and n not in state["active"]]
        for name, _ in state["fused"]:
            state["weights"].setdefault(name, 1.0)
        state["fused"] = []

    def _lora_pairs(self):
        """The (path, weight, merged, low-noise expert) of each adapter of the next call: the fused ones, then
        the active ones when enabled."""
        if not hasattr(self, "_lora_state"):
            return []
        state = self._lora_state
        pairs = [(state["paths"][n], scale, True, n in state["low_noise"]) for n, scale in state["fused"]
                 if n in state["paths"]]
        if state["enabled"]:
            pairs += [(state["paths"][n], state["weights"][n], False, n in state["low_noise"]) for n in state["active"]]
        return pairs
