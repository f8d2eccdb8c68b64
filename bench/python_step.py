#!/usr/bin/python3
"""One Python worker step against a real parasync-node ps, as bench_roundtrip
measures the C++ worker's: the same model shapes (softmax 784x10 + 10 =
7,850 floats; 99,999x10 + 10 = 1,000,000), the same ps flags, this process
playing worker:0 (it initialises the ps as the chief would).

Two spans per step, each as a median over the steps of a repetition:
  push        worker.push(): the gradients encoded, the round trip, the
              answer's parameters decoded into NumPy arrays: what a Python
              worker's step costs its user;
  round_trip  the same with the request encoded beforehand: the span
              bench_roundtrip's step/ times for the C++ worker (its request
              is built before the clock starts, its answer parsed within).
Also the Python process's minor page faults per step.

  python_step.py --node=PATH --out=FILE.json [--quick]

Writes {"benchmarks": [{"size": "7850", "repetition": 0, "push_p50_us": ...,
"push_p99_us": ..., "round_trip_p50_us": ..., "round_trip_p99_us": ...,
"faults_per_step": ...}, ...]}. Not a test: nothing passes or fails here.
"""

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

import parasync
from parasync import tensors
from parasync.proto import parasync_pb2 as pb

SHAPES = {"7850": (784, 10, "blobs:10:784"), "1000000": (99999, 10, "blobs:10:99999")}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def start_ps(node, size, logs, data_link):
    features, classes, dataset = SHAPES[size]
    ps, worker = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    log = open(os.path.join(logs, f"python-step-ps-{size}.log"), "w") if logs else subprocess.DEVNULL
    process = subprocess.Popen([node, "--job_name=ps", "--task_index=0", f"--ps_hosts={ps}", f"--worker_hosts={worker}",
                                "--model=softmax", f"--dataset={dataset}", "--last_step=1000000000000"],
                               stdout=log, stderr=subprocess.STDOUT)
    cluster = parasync.ClusterConfig(ps=[ps], workers=[worker], task_index=0, data_link=data_link)
    signature = parasync.Signature(model="softmax", dataset=dataset, feature_dim=features, output_dim=classes,
                                   variables=[parasync.VariableSpec("W", (features, classes)),
                                              parasync.VariableSpec("b", (classes,))])
    return process, cluster, signature


def measure(node, size, steps, logs, data_link):
    process, cluster, signature = start_ps(node, size, logs, data_link)
    try:
        with parasync.Worker(cluster, signature, log=lambda line: None, serve_control=False) as worker:
            rng = np.random.default_rng(1)
            values = {v.name: rng.standard_normal(v.shape).astype(np.float32) * 0.01 for v in signature.variables}
            worker.initialize(values)
            worker.join()
            # A gradient of zeros leaves the parameters as they are, so many
            # steps run, and every value still travels and is applied.
            grads = {v.name: np.zeros(v.shape, np.float32) for v in signature.variables}
            for _ in range(max(5, steps // 10)):  # warm-up: channels, allocator, caches
                worker.push(grads, 0.5)
            push_us = []
            faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            for _ in range(steps):
                start = time.perf_counter()
                worker.push(grads, 0.5)
                push_us.append((time.perf_counter() - start) * 1e6)
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before
            # The C++ bench's span: the request built before the clock starts.
            stream = worker._streams[0]  # one ps: every variable is on ps:0
            trip_us = []
            link = stream.link is not None
            for _ in range(steps):
                head = pb.PushRequest(computed_from_step=worker.global_step, batch_loss=0.5, full_loss=float("nan"))
                if link:
                    # On a data link the values go from the arrays themselves:
                    # nothing to encode beforehand.
                    start = time.perf_counter()
                    stream.send_push(head, [grads["W"], grads["b"]])
                else:
                    request = tensors.encode_push(head, [grads["W"], grads["b"]])
                    start = time.perf_counter()
                    stream.send(request)
                answer = stream.receive_answer()
                trip_us.append((time.perf_counter() - start) * 1e6)
                worker.global_step = answer.message.global_step
        return {"data_link": link,
                "push_p50_us": statistics.median(push_us), "push_p99_us": percentile(push_us, 0.99),
                "round_trip_p50_us": statistics.median(trip_us), "round_trip_p99_us": percentile(trip_us, 0.99),
                "faults_per_step": faults / steps, "steps": steps}
    finally:
        process.kill()
        process.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node", default=os.environ.get("PARASYNC_NODE", "parasync-node"))
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true", help="2 repetitions of few steps")
    parser.add_argument("--repetitions", type=int, default=7)
    parser.add_argument("--data_link", type=int, choices=(0, 1), default=1,
                        help="0: the 1M step's values on the gRPC stream, as without a data link")
    args = parser.parse_args()
    repetitions = 2 if args.quick else args.repetitions
    steps = {"7850": 50 if args.quick else 400, "1000000": 10 if args.quick else 60}
    logs = os.environ.get("PARASYNC_BENCH_LOGS")
    results = []
    for repetition in range(repetitions):
        for size in SHAPES:
            figures = measure(args.node, size, steps[size], logs, bool(args.data_link))
            figures.update(size=size, repetition=repetition)
            results.append(figures)
            print(f"python step/{size} rep {repetition}: push p50 {figures['push_p50_us']:,.0f} us, "
                  f"round trip p50 {figures['round_trip_p50_us']:,.0f} us, "
                  f"{figures['faults_per_step']:.1f} faults/step"
                  + (", values on a data link" if figures["data_link"] else ""), flush=True)
    with open(args.out, "w") as f:
        json.dump({"benchmarks": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
