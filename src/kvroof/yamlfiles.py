"""Old import path of :mod:`kvroof.files.yaml_reading`, kept so that code importing
``kvroof.yamlfiles`` still works; new code imports from ``kvroof.files.yaml_reading``."""

from kvroof.files.yaml_reading import (
    YAML_LOADERS,
    load_packaged_yaml,
    load_yaml_file,
    load_yaml_text,
)

__all__ = ["YAML_LOADERS", "load_packaged_yaml", "load_yaml_file", "load_yaml_text"]
