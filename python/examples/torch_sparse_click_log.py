#!/usr/bin/python3
"""A PyTorch worker for parasync-node's sparse models (--model=sparse_lr,
fm, fm:K) on its synthetic click log (--dataset=clicklog[:F:V[:S]]): an
EmbeddingBag(sparse=True) whose rows live on the ps tasks, trained in one
cluster with C++ workers; only each batch's rows travel (docs/sparse.md).

    N=build/dev/app/parasync-node/parasync-node
    C="--ps_hosts=127.0.0.1:2222,127.0.0.1:2225 --worker_hosts=127.0.0.1:2223,127.0.0.1:2224"
    T="--model=sparse_lr --dataset=clicklog --eval_dataset=clicklog --samples_per_shard=20000
       --optimizer=adagrad --learning_rate=0.2 --batch_size=100 --last_step=3000 --display_step=500"
    $N $C --job_name=ps --task_index=0 $T &
    $N $C --job_name=ps --task_index=1 $T &
    $N $C --job_name=worker --task_index=0 $T &
    # this worker as worker:1: the same --model, --dataset, --eval_dataset,
    # --samples_per_shard, --seed and --optimizer as the C++ tasks
    PYTHONPATH=build/dev/python /usr/bin/python3 python/examples/torch_sparse_click_log.py $C \\
        --job_name=worker --task_index=1 --model=sparse_lr --dataset=clicklog --eval_dataset=clicklog \\
        --samples_per_shard=20000 --optimizer=adagrad --batch_size=100

Its shard is the one parasync-node would draw for worker:1 (parasync.click_log
ports the generator). As the chief (worker:0) it scores the model on the
held-out draw every --display_step steps (heldout_loss, heldout_auc in the
step log), its rows looked up without being made.
"""

import argparse
import sys
import time

import numpy as np
import torch

import parasync
import parasync.pytorch
from parasync import click_log, models


def batches(samples, batch_size, rng):
    """Batches of row indices: epoch after epoch over the shard, each in a new order."""
    while True:
        order = rng.permutation(samples)
        for start in range(0, samples - batch_size + 1, batch_size):
            yield torch.from_numpy(order[start:start + batch_size])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="sparse_lr", help="sparse_lr, fm or fm:K: the cluster's --model")
    parser.add_argument("--dataset", default="",
                        help="the --dataset the C++ tasks were given, clicklog[:F:V[:S]] (default: none, clicklog)")
    parser.add_argument("--eval_dataset", default="",
                        help="the cluster's --eval_dataset (a click log), if the C++ workers were given one")
    parser.add_argument("--samples_per_shard", type=int, default=100, help="the cluster's --samples_per_shard")
    parser.add_argument("--seed", type=int, default=1, help="the cluster's --seed (data, tables' rows)")
    parser.add_argument("--optimizer", default="sgd", help="the cluster's --optimizer (sgd, momentum, adagrad, ftrl)")
    parser.add_argument("--batch_size", type=int, default=100, help="samples per step (default 100)")
    parser.add_argument("--display_step", type=int, default=100,
                        help="print the batch loss (and, as the chief, score the held-out data) every N steps")
    cluster, args = parasync.parse_cluster(parser=parser)
    try:
        shape = click_log.parse_spec(args.dataset or "clicklog")
        rank = models.sparse_model_rank(args.model)
        data = click_log.make_click_log(shape, args.seed, cluster.task_index, args.samples_per_shard)
        held_out = None
        if args.eval_dataset and cluster.is_chief:
            # The draw no worker trains on: the shard index after the workers'.
            held_out = click_log.make_click_log(click_log.parse_spec(args.eval_dataset), args.seed,
                                                len(cluster.workers), args.samples_per_shard)
    except ValueError as e:
        parser.exit(2, f"{parser.prog}: {e}\n")
    net = parasync.pytorch.FactorizationMachine(shape.fields, rank) if rank else parasync.pytorch.SparseLR(shape.fields)
    signature = parasync.pytorch.builtin_signature(net, args.dataset, args.optimizer, args.seed,
                                                   held_out=bool(args.eval_dataset))
    # Hashed ids are 64-bit: torch takes them as the int64 of the same bits.
    ids = torch.from_numpy(data.ids.view(np.int64))
    labels = torch.from_numpy(data.labels)
    batch_size = min(args.batch_size, len(labels))
    order = batches(len(labels), batch_size, np.random.default_rng(args.seed * 7919 + cluster.task_index))

    def score():
        """(held-out log loss, AUC) of the model the ps tasks hold now."""
        held_ids = torch.from_numpy(held_out.ids.view(np.int64))
        with trainer.lookup(held_ids), torch.no_grad():
            probabilities = torch.sigmoid(net(held_ids)).numpy()
        return {"heldout_loss": click_log.log_loss(probabilities, held_out.labels),
                "heldout_auc": click_log.area_under_roc(probabilities, held_out.labels)}

    try:
        with parasync.Worker(cluster, signature) as worker:
            trainer = parasync.pytorch.Trainer(worker, net)
            started = time.monotonic()
            batch = next(order)
            trainer.pull(ids[batch])  # the first batch's rows; then each step brings the next batch's
            scored_at = -1
            while not worker.done and not worker.stopping:
                metrics = None
                if held_out is not None and worker.global_step // args.display_step > scored_at // args.display_step:
                    metrics = score()
                    scored_at = worker.global_step
                loss = torch.nn.functional.binary_cross_entropy_with_logits(net(ids[batch]), labels[batch])
                next_batch = next(order)
                step = trainer.step(loss, metrics=metrics, pull=ids[next_batch])
                batch = next_batch
                if metrics:
                    print(f"held-out auc {metrics['heldout_auc']:.4f} loss {metrics['heldout_loss']:.4f} at global "
                          f"step {step.global_step}", flush=True)
                if step.outcome in ("applied", "aggregated") and step.global_step % args.display_step == 0:
                    print(f"worker:{cluster.task_index} step {step.global_step} (local {worker.clock}) batch loss "
                          f"{float(loss):.6f} bias {float(net.bias):.4f}", flush=True)
            print(f"worker:{cluster.task_index} done: {worker.clock} steps in {time.monotonic() - started:.1f} s, "
                  f"global step {worker.global_step}", flush=True)
    except parasync.JoinRefused as e:
        print(f"{parser.prog}: {e}", file=sys.stderr)
        return 2
    except parasync.Stopped:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
