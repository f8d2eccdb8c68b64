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

The worker's lines (its state lines, checkpoints, ...) go to the standard
logging module, logger "parasync.worker"; a program that configured no
logging sees them on stderr as parasync-node prints its own (parasync._log).
"""

from parasync._log import DATE_FORMAT as LOG_DATE_FORMAT, FORMAT as LOG_FORMAT
from parasync.cluster import ClusterConfig, ClusterError, add_arguments, from_arguments, parse_cluster
from parasync.sparse import TableError, TableSpec
from parasync.worker import JoinRefused, Signature, StepResult, Stopped, VariableSpec, Worker

__all__ = ["ClusterConfig", "ClusterError", "JoinRefused", "LOG_DATE_FORMAT", "LOG_FORMAT", "Signature",
           "StepResult", "Stopped", "TableError", "TableSpec", "VariableSpec", "Worker", "add_arguments",
           "from_arguments", "parse_cluster"]

# The release, CMake's PROJECT_VERSION (python/CMakeLists.txt checks that the
# two agree); pyproject.toml reads it from here.
__version__ = "0.1.0"
