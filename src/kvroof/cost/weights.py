"""What a forward pass of a deployment reads of the weights from HBM
(:func:`weights_read_per_rank`), from the deployment's cost terms.

What one rank stores, by part, and the share of the routed experts ``N`` tokens touch are in
:mod:`kvroof.cost.weight_bytes` (re-exported here): the sharding rules and the expected-touched
formula are described there.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import scalar_or_array, token_value
from kvroof.cost.deployment import Deployment
from kvroof.cost.terms import weights_read
from kvroof.cost.weight_bytes import (
    WeightBytes,
    touched_expert_share,
    touched_share,
    weight_bytes_per_rank,
)

__all__ = [
    "WeightBytes",
    "touched_expert_share",
    "touched_share",
    "weight_bytes_per_rank",
    "weights_read_per_rank",
]


def weights_read_per_rank(dep: Deployment, tokens: ArrayLike) -> Any:
    """Weight bytes one rank reads from HBM in a forward pass over ``tokens`` tokens (one
    iteration): the always-read part plus the expected touched share of the routed experts."""
    n = token_value("tokens", tokens)
    read = weights_read(dep.terms, n)
    return read if type(read) is float else scalar_or_array(np.asarray(read, dtype=np.float64))
