"""Validation against published measurements: the cases (``validation/``), kvroof's predictions
of them with and without engine profiles, the copy-size fit and its held-out errors."""
