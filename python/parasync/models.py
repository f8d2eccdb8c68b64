"""parasync-node's built-in softmax model, in NumPy, so a Python worker can
train it in one cluster with C++ workers (the protocol is the protocol,
whoever speaks it). The maths and the data shards are those of
core/engine/model.cpp and core/engine/dataset.cpp: the same signature, the
same variables (W: features x classes, row-major; b: classes), the same mean
cross-entropy and its gradient, rows shard_index, shard_index + num_shards, ...
of the same CSV file.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Union

import numpy as np
import numpy.typing as npt

from parasync.worker import Signature, VariableSpec

Array = npt.NDArray[np.float32]


def _is_number(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def read_csv(path: Union[str, os.PathLike[str]]) -> tuple[Array, Array]:
    """All rows of a CSV as parasync-node reads it: features, then the target
    in the last column; a first row holding a non-number is a header."""
    with open(path, encoding="utf-8-sig") as f:
        lines = [line for line in f if line.strip()]
    if lines and any(cell.strip() and not _is_number(cell) for cell in lines[0].split(",")):
        lines = lines[1:]
    if not lines:
        raise ValueError(f"{path}: no data rows; a CSV needs rows of numbers, the target in the last column")
    table = np.loadtxt(lines, delimiter=",", dtype=np.float32, ndmin=2)
    if table.shape[1] < 2:
        raise ValueError(f"{path} has 1 column; a CSV needs at least one feature column and the target")
    return table[:, :-1], table[:, -1]


def shard(features: npt.NDArray[Any], targets: npt.NDArray[Any], shard_index: int, num_shards: int
          ) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """Worker shard_index's rows of num_shards, as parasync-node takes them."""
    if not 0 <= shard_index < num_shards or shard_index >= len(features):
        raise ValueError(f"shard {shard_index} of {num_shards} would be empty: use fewer workers or more data")
    return features[shard_index::num_shards], targets[shard_index::num_shards]


def softmax_signature(dataset: str, feature_dim: int, classes: int, optimizer: str = "sgd") -> Signature:
    """The signature parasync-node's workers send for --model=softmax
    --dataset=<dataset> --optimizer=<optimizer>; ps:0 compares it field by
    field, so `dataset` must be the --dataset text the C++ workers were given."""
    return Signature(model="softmax", dataset=dataset, feature_dim=int(feature_dim), output_dim=int(classes),
                     optimizer=optimizer,
                     variables=[VariableSpec("W", (int(feature_dim), int(classes))), VariableSpec("b", (int(classes),))])


def softmax_loss_and_gradient(params: Mapping[str, Array], x: npt.NDArray[Any], labels: npt.NDArray[Any]
                              ) -> tuple[float, dict[str, Array]]:
    """Mean cross-entropy of a batch and its gradient (name -> array)."""
    logits = x @ params["W"] + params["b"]
    logits -= logits.max(axis=1, keepdims=True)  # keeps exp() finite
    exp = np.exp(logits)
    sum_exp = exp.sum(axis=1, keepdims=True)
    rows = np.arange(len(x))
    loss = float(np.mean(np.log(sum_exp[:, 0]) - logits[rows, labels]))
    probabilities = exp / sum_exp
    probabilities[rows, labels] -= 1.0
    probabilities /= len(x)
    return loss, {"W": x.T @ probabilities, "b": probabilities.sum(axis=0)}


def softmax_accuracy(params: Mapping[str, Array], x: npt.NDArray[Any], labels: npt.NDArray[Any]) -> float:
    """The share of rows of `x` whose most probable class is their label."""
    return float(np.mean(np.argmax(x @ params["W"] + params["b"], axis=1) == labels))
