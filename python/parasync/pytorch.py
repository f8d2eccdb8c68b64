"""Train a `torch.nn.Module` through Parasync's ps tasks.

    net = torch.nn.Sequential(...)
    with parasync.Worker(cluster, parasync.pytorch.signature(net, "digits-mlp", optimizer="adam")) as worker:
        trainer = parasync.pytorch.Trainer(worker, net)   # the chief declares, every worker joins
        while not worker.done:
            x, y = next_batch()
            trainer.step(torch.nn.functional.cross_entropy(net(x), y))

The module's trainable parameters are the model's variables, by their names
in `named_parameters()`. The chief (worker:0) gives the ps tasks its
module's initial values; every worker then trains on what the ps tasks hold.
The optimizer runs on the ps (its --optimizer and --learning_rate), so a
worker's step is: backward, push the gradients, load the fresh parameters.
Parameters and gradients cross as NumPy views of the tensors' memory
(CPU, float32); nothing is converted a value at a time.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np
import numpy.typing as npt
import torch

from parasync.worker import Signature, StepResult, VariableSpec, Worker


def _trainable(module: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter]]:
    return [(name, p) for name, p in module.named_parameters() if p.requires_grad]


def signature(module: torch.nn.Module, model: str, optimizer: str = "sgd", dataset: str = "",
              metric_names: Sequence[str] = ()) -> Signature:
    """The model a module declares: its trainable parameters, by name and
    shape. `model` names it for the cluster (ps:0 refuses a worker that
    declares another); `optimizer` must be the ps tasks' --optimizer;
    `metric_names` the metrics step() may report (see Signature)."""
    variables = [VariableSpec(name, tuple(p.shape)) for name, p in _trainable(module)]
    if not variables:
        raise ValueError("the module has no trainable parameters")
    return Signature(model=model, dataset=dataset, optimizer=optimizer, variables=variables,
                     metric_names=tuple(metric_names))


class Trainer:
    """Keeps a module's parameters those of the cluster (see the module's text)."""

    def __init__(self, worker: Worker, module: torch.nn.Module) -> None:
        """Raises ValueError when the module's parameters are not the
        worker's signature's variables; the chief initialises the ps tasks
        with the module's values; then joins (see Worker.join)."""
        self.worker = worker
        self.module = module
        self._parameters = _trainable(module)
        declared = [v.name for v in worker.signature.variables]
        if [name for name, _ in self._parameters] != declared:
            raise ValueError(f"the module's parameters {[n for n, _ in self._parameters]} are not the "
                             f"signature's variables {declared}: make the signature from this module")
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

    def step(self, loss: torch.Tensor, metrics: Optional[Mapping[str, float]] = None) -> StepResult:
        """One worker step for a batch's loss: backward, push (with the
        metrics measured before it, name -> value), load the cluster's fresh
        parameters. Returns the worker's StepResult."""
        for _, p in self._parameters:
            p.grad = None
        loss.backward()
        result = self.worker.push(self.gradients(), float(loss.detach()), metrics=metrics)
        self.load(result.parameters)
        return result


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


def builtin_signature(module: BuiltinMLP, dataset: str, optimizer: str = "sgd") -> Signature:
    """The signature parasync-node's workers send for --model=mlp (with
    BuiltinMLP's hidden units: --model=mlp:N unless 32) on --dataset=<dataset>
    with --optimizer=<optimizer>; ps:0 compares it field by field, so
    `dataset` must be the --dataset text the C++ workers were given."""
    if not isinstance(module, BuiltinMLP):
        raise TypeError("builtin_signature() describes a BuiltinMLP; for your own module use signature()")
    features, _ = module.get_parameter("hidden/W").shape
    classes = module.get_parameter("out/b").shape[0]
    base = signature(module, "mlp", optimizer=optimizer, dataset=dataset)
    base.feature_dim = int(features)
    base.output_dim = int(classes)
    return base
