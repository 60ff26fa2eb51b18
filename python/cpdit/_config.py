"""A component's config as diffusers' FrozenDict shows it: a dict whose keys read as attributes too."""


class Config(dict):
    """``config["scaling_factor"]`` and ``config.scaling_factor`` alike; a missing key is an AttributeError
    when read as an attribute, as on any object."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None
