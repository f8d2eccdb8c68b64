#!/usr/bin/python3
"""A PyTorch worker for parasync-node's built-in MLP (--model=mlp): it joins
a cluster of parasync-node ps tasks and C++ workers and trains the same
hidden/W, hidden/b, out/W and out/b through the same ps.

    # the ps and the C++ chief
    parasync-node --job_name=ps --task_index=0 --ps_hosts=127.0.0.1:2222 \
        --worker_hosts=127.0.0.1:2223,127.0.0.1:2224 --model=mlp --dataset=csv:digits.csv \
        --optimizer=adam --learning_rate=0.005 --last_step=2000
    parasync-node --job_name=worker --task_index=0 ...same flags...
    # this worker as worker:1
    PYTHONPATH=build/dev/python /usr/bin/python3 python/examples/torch_builtin_mlp.py --job_name=worker \
        --task_index=1 --ps_hosts=127.0.0.1:2222 --worker_hosts=127.0.0.1:2223,127.0.0.1:2224 \
        --dataset=csv:digits.csv --optimizer=adam
"""

import argparse
import sys

import numpy as np
import torch

import parasync
import parasync.pytorch
from parasync import models


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True, help="csv:PATH, the --dataset the C++ tasks were given")
    parser.add_argument("--optimizer", default="sgd", help="the cluster's --optimizer (default sgd)")
    parser.add_argument("--hidden_units", type=int, default=32,
                        help="the N of the cluster's --model=mlp:N (default 32, --model=mlp)")
    parser.add_argument("--batch_size", type=int, default=100, help="samples per step (default 100)")
    parser.add_argument("--display_step", type=int, default=100, help="print the loss every N steps")
    parser.add_argument("--seed", type=int, default=1, help="seed of the start values and the batches' order")
    cluster, args = parasync.parse_cluster(parser=parser)
    if not args.dataset.startswith("csv:"):
        parser.exit(2, f"{parser.prog}: --dataset={args.dataset}: this example reads csv:PATH\n")
    try:
        features, targets = models.read_csv(args.dataset[4:])
        x, y = models.shard(features, targets, cluster.task_index, len(cluster.workers))
        torch.manual_seed(args.seed)
        net = parasync.pytorch.BuiltinMLP(x.shape[1], int(targets.max()) + 1, args.hidden_units)
    except (OSError, ValueError) as e:
        parser.exit(2, f"{parser.prog}: {e}\n")
    x, labels = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
    rng = np.random.default_rng(args.seed * 7919 + cluster.task_index)
    signature = parasync.pytorch.builtin_signature(net, args.dataset, args.optimizer)

    try:
        with parasync.Worker(cluster, signature) as worker:
            trainer = parasync.pytorch.Trainer(worker, net)
            while not worker.done and not worker.stopping:
                batch = torch.from_numpy(rng.choice(len(x), size=min(args.batch_size, len(x)), replace=False))
                loss = torch.nn.functional.cross_entropy(net(x[batch]), labels[batch])
                step = trainer.step(loss)
                if step.outcome in ("applied", "aggregated") and step.global_step % args.display_step == 0:
                    with torch.no_grad():
                        accuracy = float((net(x).argmax(dim=1) == labels).float().mean())
                    print(f"worker:{cluster.task_index} step {step.global_step} (local {worker.clock}) "
                          f"loss {float(loss):.6f} accuracy {accuracy:.4f}", flush=True)
    except parasync.JoinRefused as e:
        print(f"{parser.prog}: {e}", file=sys.stderr)
        return 2
    except parasync.Stopped:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
