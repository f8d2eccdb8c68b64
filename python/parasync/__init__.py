"""Parasync workers in Python: train your own model (NumPy, PyTorch) through
Parasync's ps tasks, in async, sync or ssp, watched live by the app.

    import parasync
    cluster, args = parasync.parse_cluster()
    with parasync.Worker(cluster, signature) as worker:
        params = worker.join()
        while not worker.done:
            grads, loss = compute(params)
            params = worker.push(grads, loss).parameters

With --logdir the chief (worker:0) keeps checkpoints there in parasync-node's
format and restores from them (parasync.checkpoints), and writes TensorBoard
event files (parasync.summaries). Variables larger than --min_slice_bytes are
partitioned over the ps tasks as parasync-node partitions them
(parasync.placement); the arrays a worker pushes and gets back stay whole.
"""

from parasync.cluster import ClusterConfig, ClusterError, add_arguments, from_arguments, parse_cluster
from parasync.worker import JoinRefused, Signature, StepResult, Stopped, VariableSpec, Worker

__all__ = ["ClusterConfig", "ClusterError", "JoinRefused", "Signature", "StepResult", "Stopped", "VariableSpec",
           "Worker", "add_arguments", "from_arguments", "parse_cluster"]
