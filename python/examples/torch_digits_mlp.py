#!/usr/bin/python3
"""A PyTorch MLP on the handwritten digits, trained by Python workers
through parasync-node ps tasks, scored on digits no worker trains on.

    N=build/dev/app/parasync-node/parasync-node
    C="--ps_hosts=127.0.0.1:2222 --worker_hosts=127.0.0.1:2223,127.0.0.1:2224"
    $N $C --job_name=ps --task_index=0 --optimizer=adam --learning_rate=0.01 --last_step=1000 --mode=async &
    export PYTHONPATH=build/dev/python
    /usr/bin/python3 python/examples/torch_digits_mlp.py $C --job_name=worker --task_index=0 &
    /usr/bin/python3 python/examples/torch_digits_mlp.py $C --job_name=worker --task_index=1

The digits (1,797 8x8 images) come with Debian's python3-sklearn. A fifth of
them, the same on every worker, is held out; the others are split between the
workers. Every --display_step of its steps the chief scores the model on the
held-out digits and reports it (metrics heldout_loss and heldout_accuracy:
the app draws them, metrics.csv and TensorBoard keep them); it prints the
held-out accuracy when the run ends.
"""

import argparse
import sys

import numpy as np
import torch
from sklearn.datasets import load_digits

import parasync
from parasync import pytorch


def held_out_split(eval_fraction, seed=12345):
    """(train x, train y), (held-out x, held-out y): the same split on every worker."""
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    held = int(round(len(x) * eval_fraction))
    return (x[order[held:]], y[order[held:]]), (x[order[:held]], y[order[:held]])


def held_out_score(net, x, y):
    """The metrics the chief reports: loss and accuracy on the held-out digits."""
    with torch.no_grad():
        logits = net(x)
        return {"heldout_loss": float(torch.nn.functional.cross_entropy(logits, y)),
                "heldout_accuracy": float((logits.argmax(dim=1) == y).float().mean())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, default=32, help="hidden units (default 32)")
    parser.add_argument("--batch_size", type=int, default=32, help="samples per step (default 32)")
    parser.add_argument("--optimizer", default="adam", help="the ps tasks' --optimizer (default adam)")
    parser.add_argument("--eval_fraction", type=float, default=0.2, help="share of the digits held out (0.2)")
    parser.add_argument("--display_step", type=int, default=100, help="the chief scores every N global steps")
    parser.add_argument("--seed", type=int, default=1, help="seed of the initial values and the batches")
    cluster, args = parasync.parse_cluster(parser=parser)
    if not 0 < args.eval_fraction < 1:
        parser.exit(2, f"{parser.prog}: --eval_fraction={args.eval_fraction}: give a share between 0 and 1\n")
    # Workers share the machine's cores with each other and the ps: one
    # thread each keeps them from stealing time from one another.
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    (train_x, train_y), (eval_x, eval_y) = held_out_split(args.eval_fraction)
    shard = slice(cluster.task_index, None, len(cluster.workers))
    x, y = torch.from_numpy(train_x[shard]), torch.from_numpy(train_y[shard])
    eval_x, eval_y = torch.from_numpy(eval_x), torch.from_numpy(eval_y)
    net = torch.nn.Sequential(torch.nn.Linear(64, args.hidden), torch.nn.ReLU(), torch.nn.Linear(args.hidden, 10))
    rng = np.random.default_rng(args.seed * 7919 + cluster.task_index)

    # Every worker declares the metrics; the chief measures them. The app
    # draws them beside the losses, metrics.csv and TensorBoard keep them.
    signature = pytorch.signature(net, f"digits-mlp-{args.hidden}", optimizer=args.optimizer,
                                  dataset=f"sklearn digits, {args.eval_fraction:g} held out",
                                  metric_names=("heldout_loss", "heldout_accuracy"))
    try:
        with parasync.Worker(cluster, signature) as worker:
            trainer = pytorch.Trainer(worker, net)
            while not worker.done and not worker.stopping:
                # As parasync-node's chief: every --display_step of its own
                # steps, on the parameters this step's gradient comes from.
                score = None
                if cluster.is_chief and worker.clock % args.display_step == 0:
                    score = held_out_score(net, eval_x, eval_y)
                batch = torch.from_numpy(rng.choice(len(x), size=min(args.batch_size, len(x)), replace=False))
                loss = torch.nn.functional.cross_entropy(net(x[batch]), y[batch])
                step = trainer.step(loss, metrics=score)
                if score:
                    print(f"worker:{cluster.task_index} step {step.global_step} (local {worker.clock}) "
                          f"loss {float(loss):.4f} held-out loss {score['heldout_loss']:.4f} "
                          f"held-out accuracy {score['heldout_accuracy']:.4f}", flush=True)
            if cluster.is_chief:
                final = held_out_score(net, eval_x, eval_y)
                print(f"held-out accuracy {final['heldout_accuracy']:.4f} at global step {worker.global_step} "
                      f"({len(eval_y)} digits no worker trained on)", flush=True)
    except parasync.JoinRefused as e:
        print(f"{parser.prog}: {e}", file=sys.stderr)
        return 2
    except parasync.Stopped:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
