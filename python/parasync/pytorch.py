"""Train a `torch.nn.Module` through Parasync's ps tasks.

    net = torch.nn.Sequential(...)
    with parasync.Worker(cluster, parasync.pytorch.signature(net, "digits-mlp", optimizer="adam")) as worker:
        trainer = parasync.pytorch.Trainer(worker, net)   # the chief declares, every worker joins
        while not worker.done and not worker.stopping:
            x, y = next_batch()
            trainer.step(torch.nn.functional.cross_entropy(net(x), y))

The module's trainable parameters are the model's variables, by their names
in `named_parameters()`. The chief (worker:0) gives the ps tasks its
module's initial values; every worker then trains on what the ps tasks hold.
The optimizer runs on the ps (its --optimizer and --learning_rate), so a
worker's step is: backward, push the gradients, load the fresh parameters.
Parameters and gradients cross as NumPy views of the tensors' memory
(CPU, float32); nothing is converted a value at a time.

Embeddings on the ps: a `torch.nn.Embedding(..., sparse=True)` or
`torch.nn.EmbeddingBag(..., sparse=True)` of the module is declared as an
embedding table (docs/sparse.md) named by its path in the module, rows of
`embedding_dim`: its rows live on the ps tasks, addressed by 64-bit ids, and
the module holds only the rows of the batch at hand. Its `num_embeddings` is
not a vocabulary (the ids are hashed, any 64-bit value): give it 1.

    net(ids)    # ids: int64 tensors of 64-bit ids, e.g. (batch, fields) for an EmbeddingBag

You give the module the ids themselves; before each forward the Trainer
remaps them to the row of the batch's rows that holds each (a pre-hook on
the embedding), so the module computes as if it held the whole table. Ids at
or above 2^63 go as the int64 of the same 64 bits (torch has no uint64:
`torch.from_numpy(ids.view(np.int64))`). Only the batch's distinct rows
travel, a step ahead as parasync-node's workers move them: the first
batch's rows with pull(), then each step() pushes the batch's row gradients
(the sparse gradient coalesced, one row per id) and brings the next batch's
rows (step(loss, pull=next_ids)) in the same exchange with each ps task:

    trainer.pull(ids)                                 # the first batch's rows
    while not worker.done and not worker.stopping:
        loss = loss_fn(net(ids), labels)
        next_ids, next_labels = next_batch()
        trainer.step(loss, pull=next_ids)             # this batch's row gradients out, the next batch's rows in
        ids, labels = next_ids, next_labels
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterator, Mapping, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt
import torch

from parasync import models
from parasync.sparse import TableError, TableSpec
from parasync.worker import Signature, StepResult, TableRows, VariableSpec, Worker

Embedding = Union[torch.nn.Embedding, torch.nn.EmbeddingBag]
# Ids for the module's embeddings: one tensor (or array) for every table, or table name -> ids.
BatchIds = Union[torch.Tensor, npt.ArrayLike, Mapping[str, Any]]


def sparse_embeddings(module: torch.nn.Module) -> list[tuple[str, Embedding]]:
    """The module's Embedding and EmbeddingBag modules made with
    sparse=True, by path: its tables. Raises ValueError for one the ps cannot
    hold (a padding_idx or max_norm, which assume a vocabulary of rows held
    here)."""
    found = []
    for name, m in module.named_modules():
        if not isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) or not m.sparse:
            continue
        if not name:
            raise ValueError("the module is itself a sparse embedding: make it a submodule of one, whose name "
                             "names its table")
        if m.padding_idx is not None or m.max_norm is not None:
            raise ValueError(f"embedding '{name}' has a padding_idx or max_norm: its rows live on the ps, addressed "
                             "by hashed ids, so neither applies; make it without them")
        found.append((name, m))
    return found


def _trainable(module: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter]]:
    """The dense variables: trainable parameters but the sparse embeddings' rows."""
    tables = {id(m.weight) for _, m in sparse_embeddings(module)}
    return [(name, p) for name, p in module.named_parameters() if p.requires_grad and id(p) not in tables]


def signature(module: torch.nn.Module, model: str, optimizer: str = "sgd", dataset: str = "",
              metric_names: Sequence[str] = (), init_stddev: Union[float, Mapping[str, float]] = 0.01,
              table_seed: int = 0) -> Signature:
    """The model a module declares: its trainable parameters, by name and
    shape, and its sparse embeddings as tables (see the module's text).
    `model` names it for the cluster (ps:0 refuses a worker that declares
    another); `optimizer` must be the ps tasks' --optimizer; `metric_names`
    the metrics step() may report (see Signature). A table's new rows are
    drawn N(0, init_stddev) truncated (a float for every table, or table
    name -> float; 0: zeros) from (table_seed, id): the module's own initial
    rows are not used."""
    variables = [VariableSpec(name, tuple(p.shape)) for name, p in _trainable(module)]
    tables = [TableSpec(name, int(m.embedding_dim), 0,
                        float(init_stddev.get(name, 0.01) if isinstance(init_stddev, Mapping) else init_stddev),
                        int(table_seed))
              for name, m in sparse_embeddings(module)]
    if not variables and not tables:
        raise ValueError("the module has no trainable parameters")
    return Signature(model=model, dataset=dataset, optimizer=optimizer, variables=variables,
                     metric_names=tuple(metric_names), tables=tables)


def _keys(ids: Any, table: str) -> torch.Tensor:
    """Ids as a flat int64 tensor of their 64 bits (see the module's text)."""
    if isinstance(ids, torch.Tensor):
        if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
            raise TableError(f"the ids of table '{table}' are a {ids.dtype} tensor: give integer ids (torch.int64)")
        if ids.dtype != torch.int64 and bool((ids < 0).any()):
            raise TableError(f"the ids of table '{table}' include negative {ids.dtype} values: give ids as int64 "
                             "(an id at or above 2^63 as the int64 of its 64 bits)")
        return ids.detach().cpu().reshape(-1).to(torch.int64)
    array = np.asarray(ids)
    if array.size == 0:
        return torch.zeros(0, dtype=torch.int64)
    if array.dtype.kind == "u":
        return torch.from_numpy(np.ascontiguousarray(array.astype(np.uint64).ravel()).view(np.int64))
    if array.dtype.kind == "i":
        if (array < 0).any():
            raise TableError(f"the ids of table '{table}' include negative values: give numpy uint64 ids, or int64 "
                             "tensors holding their 64 bits")
        return torch.from_numpy(array.astype(np.int64).ravel())
    raise TableError(f"the ids of table '{table}' are {array.dtype}: give integer ids (torch.int64, numpy uint64)")


@dataclasses.dataclass
class _BatchRows:
    """The rows an embedding holds now: its ids, distinct, ascending as
    int64 (what the pre-hook looks inputs up in), and the same as uint64."""
    keys: torch.Tensor
    ids: npt.NDArray[np.uint64]


class Trainer:
    """Keeps a module's parameters those of the cluster (see the module's text)."""

    def __init__(self, worker: Worker, module: torch.nn.Module) -> None:
        """Raises ValueError when the module's parameters are not the
        worker's signature's variables, or its sparse embeddings not its
        tables; the chief initialises the ps tasks with the module's values;
        then joins (see Worker.join)."""
        self.worker = worker
        self.module = module
        self._parameters = _trainable(module)
        declared = [v.name for v in worker.signature.variables]
        if [name for name, _ in self._parameters] != declared:
            raise ValueError(f"the module's parameters {[n for n, _ in self._parameters]} are not the "
                             f"signature's variables {declared}: make the signature from this module")
        self._embeddings = dict(sparse_embeddings(module))
        tables = [(t.name, int(t.row_width)) for t in worker.signature.tables]
        found = [(name, int(m.embedding_dim)) for name, m in self._embeddings.items()]
        if found != tables:
            raise ValueError(f"the module's sparse embeddings (name, embedding_dim) {found} are not the signature's "
                             f"tables (name, row_width) {tables}: make the signature from this module")
        self._rows: dict[str, _BatchRows] = {}
        for name, m in self._embeddings.items():
            m.register_forward_pre_hook(self._remap_hook(name))
        if worker.cluster.is_chief:
            worker.initialize({name: p.detach().cpu().numpy() for name, p in self._parameters},
                              origin=f"fresh from the chief's {type(module).__name__}")
        self.load(worker.join())

    def load(self, values: Mapping[str, npt.ArrayLike]) -> None:
        """Copies parameters (name -> array) into the module."""
        with torch.no_grad():
            for name, p in self._parameters:
                p.copy_(torch.from_numpy(np.asarray(values[name])))

    def gradients(self) -> dict[str, npt.NDArray[np.float32]]:
        """The module's gradients as arrays (zeros for a parameter the loss did not reach)."""
        return {name: p.grad.detach().cpu().numpy() if p.grad is not None else np.zeros(tuple(p.shape), np.float32)
                for name, p in self._parameters}

    def step(self, loss: torch.Tensor, metrics: Optional[Mapping[str, float]] = None,
             pull: Optional[BatchIds] = None) -> StepResult:
        """One worker step for a batch's loss: backward, push (with the
        metrics measured before it, name -> value), load the cluster's fresh
        parameters. Returns the worker's StepResult.
        With sparse embeddings, the push carries the batch's row gradients,
        and `pull` the next batch's ids (as pull() takes them), whose rows
        the answer brings: the embeddings hold them when step() returns.
        Without `pull` the embeddings hold no rows after the step: call
        pull() before the next forward."""
        for _, p in self._parameters:
            p.grad = None
        loss.backward()
        next_keys = self._keys_by_table(pull) if pull is not None else {}
        result = self.worker.push(self.gradients(), float(loss.detach()), metrics=metrics,
                                  row_gradients=self.row_gradients(),
                                  pull={name: keys.numpy().view(np.uint64) for name, keys in next_keys.items()})
        self.load(result.parameters)
        self._rows.clear()
        self._load_rows(next_keys, result.rows)
        return result

    # -- sparse embeddings ---------------------------------------------------------------------------------------

    def _keys_by_table(self, ids: BatchIds) -> dict[str, torch.Tensor]:
        """Per table, the distinct ids of `ids` (one set for every table, or
        table name -> ids), ascending as int64."""
        if not self._embeddings:
            raise TableError("the module has no sparse embeddings: there are no rows to pull")
        if isinstance(ids, Mapping):
            unknown = set(ids) - set(self._embeddings)
            if unknown:
                raise TableError(f"ids for {sorted(unknown)}, which are not sparse embeddings of the module "
                                 f"(its tables: {list(self._embeddings)})")
            given = dict(ids)
        else:
            given = {name: ids for name in self._embeddings}
        return {name: torch.unique(_keys(value, name)) for name, value in given.items()}

    def _load_rows(self, keys: Mapping[str, torch.Tensor], rows: Mapping[str, TableRows]) -> None:
        """Makes each embedding hold the rows of its keys, in their order (none
        for a table missing from `rows`: a push that ended the run brings none)."""
        for name, table_keys in keys.items():
            if name not in rows:
                continue
            module = self._embeddings[name]
            values = rows[name][1]
            module.weight = torch.nn.Parameter(torch.from_numpy(values))
            module.num_embeddings = int(values.shape[0])
            self._rows[name] = _BatchRows(table_keys, table_keys.numpy().view(np.uint64))

    def pull(self, ids: BatchIds, lookup_only: bool = False) -> None:
        """Makes the sparse embeddings hold the rows of `ids` (a tensor or
        array of ids for every table, or table name -> ids; int64 tensors, or
        numpy uint64), pulled from the ps tasks in one exchange each: before
        the first step, or before each step when step() is given no `pull`.
        With `lookup_only`, rows not made yet come at their initial values
        and are not kept (see lookup() to score data between steps)."""
        keys = self._keys_by_table(ids)
        rows = self.worker.pull({name: k.numpy().view(np.uint64) for name, k in keys.items()}, lookup_only)
        self._load_rows(keys, rows)

    @contextlib.contextmanager
    def lookup(self, ids: BatchIds) -> Iterator[None]:
        """Within it the embeddings hold the rows of `ids`, looked up without
        being made (an evaluation's: held-out data changes nothing); after
        it, the batch's rows again.

            with trainer.lookup(held_out_ids), torch.no_grad():
                probabilities = torch.sigmoid(net(held_out_ids))
        """
        saved = {name: (m.weight, m.num_embeddings) for name, m in self._embeddings.items()}
        saved_rows = dict(self._rows)
        try:
            self.pull(ids, lookup_only=True)
            yield
        finally:
            for name, (weight, count) in saved.items():
                self._embeddings[name].weight = weight
                self._embeddings[name].num_embeddings = count
            self._rows = saved_rows

    def row_gradients(self) -> dict[str, tuple[npt.NDArray[np.uint64], npt.NDArray[np.float32]]]:
        """The sparse embeddings' gradients as (ids, one row per id): the
        sparse gradient coalesced (a row the batch used twice, summed)."""
        out = {}
        for name, module in self._embeddings.items():
            grad = module.weight.grad
            if grad is None or name not in self._rows:
                continue
            if grad.is_sparse:
                grad = grad.coalesce()
                where, values = grad.indices()[0], grad.values()
            else:
                where, values = torch.arange(grad.shape[0]), grad
            out[name] = (self._rows[name].ids[where.numpy()], values.detach().cpu().numpy())
        return out

    def _remap_hook(self, name: str) -> Any:
        def remap(module: torch.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
            rows = self._rows.get(name)
            if rows is None:
                raise TableError(f"embedding '{name}' holds no rows: pull the batch's ids first (Trainer.pull "
                                 "before the first step, step(loss, pull=next_ids) for the next batch)")
            if not args or not isinstance(args[0], torch.Tensor):
                raise TableError(f"embedding '{name}' was called without its ids as the first positional "
                                 "argument: call it as module(ids, ...)")
            ids = args[0]
            flat = _keys(ids, name)
            at = torch.searchsorted(rows.keys, flat)
            count = rows.keys.numel()
            held = rows.keys[at.clamp(max=count - 1)] == flat if count else torch.zeros_like(flat, dtype=torch.bool)
            if not bool(held.all()):
                missing = int(flat[~held][0])
                raise TableError(f"id {missing & ((1 << 64) - 1)} of embedding '{name}' is not among the rows "
                                 "pulled for this batch: pull every id the forward uses")
            return (at.reshape(ids.shape),) + tuple(args[1:])
        return remap


class BuiltinMLP(torch.nn.Module):
    """parasync-node's --model=mlp as a module, so that PyTorch and C++
    workers train one model: a hidden layer of tanh units, then logits. Its
    parameters carry the C++ model's names, shapes and layout (hidden/W is
    features x hidden, row-major: x @ W, not torch.nn.Linear's W^T), so the
    signature builtin_signature() makes is the one the C++ workers send."""

    def __init__(self, features: int, classes: int, hidden: int = 32) -> None:
        super().__init__()
        if features < 1 or classes < 2 or hidden < 1:
            raise ValueError(f"an mlp needs features >= 1, classes >= 2 and hidden units >= 1 "
                             f"(given {features}, {classes}, {hidden})")
        self.hidden_units = int(hidden)
        # The C++ model's start: truncated normal at 1/sqrt(fan-in), zero biases.
        shapes = {"hidden/W": (features, hidden), "hidden/b": (hidden,),
                  "out/W": (hidden, classes), "out/b": (classes,)}
        for name, shape in shapes.items():
            value = torch.zeros(shape)
            if name.endswith("/W"):
                torch.nn.init.trunc_normal_(value, std=shape[0] ** -0.5, a=-2 * shape[0] ** -0.5,
                                            b=2 * shape[0] ** -0.5)
            self.register_parameter(name, torch.nn.Parameter(value))

    def _p(self, name: str) -> torch.Tensor:
        return self.get_parameter(name)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.tanh(x @ self._p("hidden/W") + self._p("hidden/b"))
        return hidden @ self._p("out/W") + self._p("out/b")


class SparseLR(torch.nn.Module):
    """parasync-node's --model=sparse_lr as a module: logistic regression over
    the ids, logit = bias + sum_f w[id_f]; table "weights" (rows of 1, an
    EmbeddingBag summing a sample's fields) and dense "bias" [1], as
    core/engine/sparse_models.cpp declares them. forward(ids): ids of
    (batch, fields) int64 -> logits (batch,)."""

    def __init__(self, fields: int) -> None:
        super().__init__()
        if fields < 1:
            raise ValueError(f"a sparse_lr model needs at least one field per sample, got {fields}")
        self.fields = int(fields)
        # num_embeddings 1: the rows live on the ps; the Trainer loads the batch's.
        self.weights = torch.nn.EmbeddingBag(1, 1, mode="sum", sparse=True)
        self.bias = torch.nn.Parameter(torch.zeros(1))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.weights(ids).squeeze(1) + self.bias


class FactorizationMachine(SparseLR):
    """parasync-node's --model=fm:K (Rendle, 2010): sparse_lr's terms plus
    sum_{f<g} <v[id_f], v[id_g]>, computed as (|sum_f v_f|^2 - sum_f |v_f|^2)
    / 2; tables "weights" (rows of 1) and "factors" (rows of K)."""

    def __init__(self, fields: int, rank: int = models.DEFAULT_FM_RANK) -> None:
        super().__init__(fields)
        models.sparse_model_rank(f"fm:{rank}")  # the rank's range, in parasync-node's words
        self.rank = int(rank)
        self.factors = torch.nn.Embedding(1, self.rank, sparse=True)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        v = self.factors(ids)  # batch x fields x K
        pairs = 0.5 * (v.sum(dim=1).pow(2) - v.pow(2).sum(dim=1)).sum(dim=1)
        return super().forward(ids) + pairs


def builtin_signature(module: Union[BuiltinMLP, SparseLR], dataset: str, optimizer: str = "sgd", seed: int = 1,
                      held_out: bool = False) -> Signature:
    """The signature parasync-node's workers send for --model=mlp (with
    BuiltinMLP's hidden units: --model=mlp:N unless 32), --model=sparse_lr
    (SparseLR) or --model=fm:K (FactorizationMachine) on --dataset=<dataset>
    with --optimizer=<optimizer> and --seed=<seed> (a sparse model's tables
    carry it); `held_out`: the C++ workers were given held-out data
    (--eval_dataset, --eval_fraction), and so declare its metrics. ps:0
    compares it field by field, so `dataset` must be the --dataset text the
    C++ workers were given ("" when they were given none)."""
    if isinstance(module, SparseLR):
        name = f"fm:{module.rank}" if isinstance(module, FactorizationMachine) else "sparse_lr"
        return models.sparse_signature(name, module.fields, dataset, optimizer, seed, held_out)
    if not isinstance(module, BuiltinMLP):
        raise TypeError("builtin_signature() describes a BuiltinMLP, SparseLR or FactorizationMachine; for your "
                        "own module use signature()")
    features, _ = module.get_parameter("hidden/W").shape
    classes = module.get_parameter("out/b").shape[0]
    base = signature(module, "mlp", optimizer=optimizer, dataset=dataset)
    base.feature_dim = int(features)
    base.output_dim = int(classes)
    if held_out:
        base.metric_names = ("heldout_loss", "heldout_accuracy")
    return base
