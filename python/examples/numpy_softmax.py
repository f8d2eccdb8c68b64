#!/usr/bin/python3
"""A NumPy worker for parasync-node's softmax model, as the seeds' MNIST
softmax trains it: it joins a cluster of parasync-node ps tasks (and, if you
like, C++ workers) and trains the same W and b through the same ps.

    # the ps and the chief, as the README's softmax example starts them
    parasync-node --job_name=ps --task_index=0 --ps_hosts=127.0.0.1:2222 \
        --worker_hosts=127.0.0.1:2223,127.0.0.1:2224 --model=softmax --dataset=csv:digits.csv --last_step=2000
    parasync-node --job_name=worker --task_index=0 ...same flags...
    # this worker as worker:1
    PYTHONPATH=build/dev/python /usr/bin/python3 python/examples/numpy_softmax.py --job_name=worker \
        --task_index=1 --ps_hosts=127.0.0.1:2222 --worker_hosts=127.0.0.1:2223,127.0.0.1:2224 \
        --dataset=csv:digits.csv
"""

import argparse
import sys

import numpy as np

import parasync
from parasync import models


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True, help="csv:PATH, the --dataset the C++ tasks were given")
    parser.add_argument("--optimizer", default="sgd", help="the cluster's --optimizer (default sgd)")
    parser.add_argument("--batch_size", type=int, default=100, help="samples per step (default 100)")
    parser.add_argument("--display_step", type=int, default=100, help="print the loss every N steps")
    parser.add_argument("--seed", type=int, default=1, help="seed of the batches' order")
    cluster, args = parasync.parse_cluster(parser=parser)
    if not args.dataset.startswith("csv:"):
        parser.exit(2, f"{parser.prog}: --dataset={args.dataset}: this example reads csv:PATH\n")
    try:
        features, targets = models.read_csv(args.dataset[4:])
        x, y = models.shard(features, targets, cluster.task_index, len(cluster.workers))
    except (OSError, ValueError) as e:
        parser.exit(2, f"{parser.prog}: {e}\n")
    classes = int(targets.max()) + 1
    labels = y.astype(np.int64)
    rng = np.random.default_rng(args.seed * 7919 + cluster.task_index)
    signature = models.softmax_signature(args.dataset, x.shape[1], classes, args.optimizer)

    try:
        with parasync.Worker(cluster, signature) as worker:
            params = worker.join()
            while not worker.done and not worker.stopping:
                batch = rng.choice(len(x), size=min(args.batch_size, len(x)), replace=False)
                loss, grads = models.softmax_loss_and_gradient(params, x[batch], labels[batch])
                step = worker.push(grads, loss)
                params = step.parameters
                if step.outcome in ("applied", "aggregated") and step.global_step % args.display_step == 0:
                    print(f"worker:{cluster.task_index} step {step.global_step} (local {worker.clock}) "
                          f"loss {loss:.6f} accuracy {models.softmax_accuracy(params, x, labels):.4f}", flush=True)
    except parasync.JoinRefused as e:
        print(f"{parser.prog}: {e}", file=sys.stderr)
        return 2
    except parasync.Stopped:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
