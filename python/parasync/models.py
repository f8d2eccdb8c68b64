"""parasync-node's built-in softmax model, in NumPy, so a Python worker can
train it in one cluster with C++ workers (the protocol is the protocol,
whoever speaks it). The maths and the data shards are those of
core/engine/model.cpp and core/engine/dataset.cpp: the same signature, the
same variables (W: features x classes, row-major; b: classes), the same mean
cross-entropy and its gradient, rows shard_index, shard_index + num_shards, ...
of the same CSV file.

Also the signatures of the sparse models (--model=sparse_lr, fm, fm:K;
core/engine/sparse_models.cpp), which parasync.pytorch's SparseLR and
FactorizationMachine train, on parasync.click_log's data.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Union

import numpy as np
import numpy.typing as npt

from parasync.sparse import TableSpec
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


# fm without a rank (core/engine/sparse_models.h).
DEFAULT_FM_RANK = 8
_MAX_FM_RANK = 1024


def sparse_model_rank(model: str) -> int:
    """0 for "sparse_lr", K for "fm:K" (8 for "fm"); raises ValueError for
    another name or a rank out of 1-1024, as parasync-node does."""
    if model == "sparse_lr":
        return 0
    if model == "fm":
        return DEFAULT_FM_RANK
    if model.startswith("fm:") and model[3:].isdigit() and 1 <= int(model[3:]) <= _MAX_FM_RANK:
        return int(model[3:])
    if model.startswith("fm:"):
        raise ValueError(f"the model '{model}' needs a rank from 1 to {_MAX_FM_RANK} after 'fm:' (e.g. fm:8), or "
                         f"write fm for {DEFAULT_FM_RANK}")
    raise ValueError(f"unknown sparse model '{model}'; sparse models: sparse_lr, fm, fm:K")


def sparse_signature(model: str, fields: int, dataset: str = "", optimizer: str = "sgd", seed: int = 1,
                     held_out: bool = False) -> Signature:
    """The signature parasync-node's workers send for --model=<model>
    (sparse_lr, fm, fm:K) on data of `fields` ids per sample (clicklog:F:...
    has F, clicklog 10), --dataset=<dataset> (the text the C++ workers were
    given, "" when none), --optimizer, --seed (the tables' seed: a new row's
    values come from it) and, with `held_out`, the metrics every worker given
    --eval_dataset or --eval_fraction declares. ps:0 compares it field by
    field and says which one differs."""
    rank = sparse_model_rank(model)
    if fields < 1:
        raise ValueError(f"the {model} model needs at least one field per sample, got {fields}")
    # Weights start at 0, as a linear model may; factors apart, since at
    # v = 0 every factor's gradient is 0 (sparse_models.cpp).
    tables = [TableSpec("weights", 1, 0, 0.0, seed)]
    if rank:
        tables.append(TableSpec("factors", rank, 0, 0.01, seed))
    return Signature(model="sparse_lr" if rank == 0 else f"fm:{rank}", dataset=dataset, feature_dim=int(fields),
                     output_dim=1, optimizer=optimizer, variables=[VariableSpec("bias", (1,))],
                     metric_names=("heldout_loss", "heldout_auc") if held_out else (), tables=tables)
