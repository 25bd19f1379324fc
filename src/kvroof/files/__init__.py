"""Files a user hands over, read as untrusted, and nothing else.

- :mod:`kvroof.files.reading`: bytes, text and JSON with a size cap, UTF-8, a nesting limit and
  no key written twice; one :class:`~kvroof.errors.SpecError` line naming the file otherwise.
- :mod:`kvroof.files.yaml_reading`: YAML with the same limits plus alias and duplicate-key
  checks (imports PyYAML, so it is loaded only by the commands that read YAML).

Writing (atomic outputs) is :mod:`kvroof.outputs`.
"""
