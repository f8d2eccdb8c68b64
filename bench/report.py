#!/usr/bin/env python3
"""Turns the raw samples of one bench run into the table, its JSON and BENCHMARKS.md.

Every figure is the median over repetitions, with its spread (min-max, n);
every ratio divides two figures of this same run, and its spread is the
min-max of the per-repetition ratios where the repetitions pair up.

  report.py --dir=RUN_DIR --machine=machine.json --command="scripts/bench.sh" [--markdown=BENCHMARKS.md]
"""

import argparse
import json
import math
import os
import re
import statistics
import sys


def load(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def summary(values):
    values = [v for v in values if measured(v)]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def fmt_signed(value, digits=None):
    """A difference: +1.0, −3.0 (a real minus sign), ±0.0."""
    if value is None:
        return "—"
    text = fmt(abs(value), digits)
    return ("±" if float(text.replace(",", "")) == 0 else "+" if value > 0 else "−") + text


def fmt(value, digits=None):
    if value is None:
        return "—"
    if digits is None:
        a = abs(value)
        digits = 0 if a >= 1000 else 1 if a >= 100 else 2 if a >= 1 else 3
    return f"{value:,.{digits}f}"


def fmt_summary(s, digits=None):
    if s is None:
        return "—"
    if s["n"] == 1:
        return fmt(s["median"], digits)
    return f"{fmt(s['median'], digits)} ({fmt(s['min'], digits)}–{fmt(s['max'], digits)}, n={s['n']})"


def measured(value):
    """A repetition that measured nothing is None in the JSON (its NaN) or NaN."""
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def ratio(a, b):
    """Median ratio of two sample lists, with the spread of per-repetition ratios."""
    sa, sb = summary(a), summary(b)
    if sa is None or sb is None:
        return None
    ma, mb = sa["median"], sb["median"]
    if mb == 0:
        return None
    per_rep = [x / y for x, y in zip(a, b) if measured(x) and measured(y) and y]
    r = {"median": ma / mb, "n": len(per_rep)}
    r["min"] = min(per_rep) if per_rep else r["median"]
    r["max"] = max(per_rep) if per_rep else r["median"]
    return r


def fmt_ratio(r):
    if r is None:
        return "—"
    if r["n"] <= 1:
        return f"{r['median']:.2f}×"
    return f"{r['median']:.2f}× ({r['min']:.2f}–{r['max']:.2f})"


class Report:
    def __init__(self):
        self.sections = []  # (title, header, rows, notes)
        self.targets = []   # (target, figure, met)
        self.data = {}

    def section(self, title, header, rows, notes=None):
        self.sections.append((title, header, rows, notes or []))

    def target(self, text, figure, met):
        self.targets.append((text, figure, "met" if met else ("missed" if met is not None else "not measured")))


ROUNDTRIP_COUNTERS = ("p50_us", "p99_us", "server_cpu_us", "client_cpu_us", "server_faults", "client_faults",
                      "server_allocs", "client_allocs", "server_large_allocs", "client_large_allocs")


def roundtrip_samples(doc):
    """{(kind, size): {"p50_us": [...], "p99_us": [...], "request_bytes": n, "response_bytes": n}}"""
    out = {}
    for b in doc.get("benchmarks", []):
        if b.get("run_type") != "iteration" or b.get("error_occurred"):
            continue
        kind, size = b["run_name"].split("/")[:2]
        entry = out.setdefault((kind, size), {key: [] for key in ROUNDTRIP_COUNTERS + ("rep",)})
        for key in ROUNDTRIP_COUNTERS:
            entry[key].append(b.get(key, float("nan")))
        entry["rep"].append(b.get("repetition_index", 0))
        entry["request_bytes"] = int(b["request_bytes"])
        entry["response_bytes"] = int(b["response_bytes"])
    # Pair repetitions by index so per-repetition ratios compare neighbours in time.
    for entry in out.values():
        order = sorted(range(len(entry["rep"])), key=lambda i: entry["rep"][i])
        for key in ROUNDTRIP_COUNTERS:
            entry[key] = [entry[key][i] for i in order]
    return out


def add_replication(report, doc):
    """The cost of a backup: the same step against a ps with and without one (--ps_backup_hosts)."""
    samples = roundtrip_samples(doc)
    rows = []
    results = {}
    for size, label in [("2", "2"), ("7850", "7,850"), ("1000000", "1,000,000")]:
        plain, replicated = samples.get(("step", size)), samples.get(("step_replicated", size))
        unleased = samples.get(("step_replicated_unleased", size))
        if not plain or not replicated:
            continue
        row = {
            "step_p50": summary(plain["p50_us"]), "replicated_p50": summary(replicated["p50_us"]),
            "p50 ratio": ratio(replicated["p50_us"], plain["p50_us"]),
            "step_p99": summary(plain["p99_us"]), "replicated_p99": summary(replicated["p99_us"]),
            "primary_cpu": summary(replicated["server_cpu_us"]), "plain_cpu": summary(plain["server_cpu_us"]),
        }
        # One worker, one step at a time: steps per second is 1e6 / p50.
        row["steps_per_s"] = 1e6 / row["step_p50"]["median"] if row["step_p50"] else None
        row["replicated_steps_per_s"] = 1e6 / row["replicated_p50"]["median"] if row["replicated_p50"] else None
        # The lease's own cost: the same pair with --ps_lease_ms=0.
        row["unleased_p50"] = summary(unleased["p50_us"]) if unleased else None
        row["lease ratio"] = ratio(replicated["p50_us"], unleased["p50_us"]) if unleased else None
        results[size] = row
        rows.append([label, fmt_summary(row["step_p50"]), fmt_summary(row["replicated_p50"]),
                     fmt_ratio(row["p50 ratio"]),
                     fmt_summary(row["unleased_p50"]) if row["unleased_p50"] else "–",
                     fmt_ratio(row["lease ratio"]) if row["lease ratio"] else "–",
                     fmt_summary(row["step_p99"]), fmt_summary(row["replicated_p99"]),
                     f"{row['steps_per_s']:,.0f}" if row["steps_per_s"] else "–",
                     f"{row['replicated_steps_per_s']:,.0f}" if row["replicated_steps_per_s"] else "–",
                     fmt_summary(row["plain_cpu"]), fmt_summary(row["primary_cpu"])])
    if not rows:
        return
    report.data["replication"] = results
    report.section(
        "2g. The cost of a backup: the same step against a replicated ps (µs)",
        ["parameters", "step p50", "with backup p50", "ratio", "backup without lease p50", "lease's ratio",
         "step p99", "with backup p99", "steps/s", "with backup steps/s", "ps CPU/step", "primary CPU/step"],
        rows,
        ["`step_replicated/N` in bench_roundtrip: the same worker step against a ps started with "
         "`--ps_backup_hosts` and its backup (`--job_name=ps_backup`) on this machine. The primary answers "
         "only once the backup has applied the gradient: one more round trip, and the push's bytes sent "
         "once more, per step. Steps/s is one worker stepping back to back (10⁶ / p50). The lease's cost: "
         "`step_replicated_unleased/N`, the same pair with `--ps_lease_ms=0`, against `step_replicated/N`; "
         "the primary checks its lease before each answer, and asks its backup's vote four times a lease "
         "beside the steps (no witness listens here)."])


def add_roundtrip(report, doc):
    samples = roundtrip_samples(doc)
    rows = []
    sizes = [("2", "2"), ("7850", "7,850"), ("1000000", "1,000,000")]
    results = {}
    for size, label in sizes:
        step, tcp, grpc = samples.get(("step", size)), samples.get(("tcp", size)), samples.get(("grpc", size))
        if not step:
            continue
        row = {
            "parameters": label,
            "bytes": f"{step['request_bytes']:,} / {step['response_bytes']:,}",
        }
        for name, s in (("tcp", tcp), ("grpc", grpc), ("step", step)):
            row[name + "_p50"] = summary(s["p50_us"]) if s else None
            row[name + "_p99"] = summary(s["p99_us"]) if s else None
        row["step/grpc p50"] = ratio(step["p50_us"], grpc["p50_us"]) if grpc else None
        row["step/tcp p50"] = ratio(step["p50_us"], tcp["p50_us"]) if tcp else None
        row["step/grpc p99"] = ratio(step["p99_us"], grpc["p99_us"]) if grpc else None
        row["step/tcp p99"] = ratio(step["p99_us"], tcp["p99_us"]) if tcp else None
        results[size] = row
        rows.append([label, row["bytes"],
                     fmt_summary(row["tcp_p50"]), fmt_summary(row["tcp_p99"]),
                     fmt_summary(row["grpc_p50"]), fmt_summary(row["grpc_p99"]),
                     fmt_summary(row["step_p50"]), fmt_summary(row["step_p99"]),
                     fmt_ratio(row["step/grpc p50"]), fmt_ratio(row["step/tcp p50"]),
                     fmt_ratio(row["step/grpc p99"]), fmt_ratio(row["step/tcp p99"])])
    cpu_rows = []
    for size, label in sizes:
        step, tcp, grpc = samples.get(("step", size)), samples.get(("tcp", size)), samples.get(("grpc", size))
        if not step:
            continue
        row = results[size]
        for name, s in (("tcp", tcp), ("grpc", grpc), ("step", step)):
            row[name + "_server_cpu"] = summary(s["server_cpu_us"]) if s else None
            row[name + "_client_cpu"] = summary(s["client_cpu_us"]) if s else None
        row["step/grpc server cpu"] = ratio(step["server_cpu_us"], grpc["server_cpu_us"]) if grpc else None
        row["step/grpc client cpu"] = ratio(step["client_cpu_us"], grpc["client_cpu_us"]) if grpc else None
        cpu_rows.append([label, fmt_summary(row["tcp_server_cpu"]), fmt_summary(row["grpc_server_cpu"]),
                         fmt_summary(row["step_server_cpu"]), fmt_ratio(row["step/grpc server cpu"]),
                         fmt_summary(row["tcp_client_cpu"]), fmt_summary(row["grpc_client_cpu"]),
                         fmt_summary(row["step_client_cpu"]), fmt_ratio(row["step/grpc client cpu"])])
    report.data["roundtrip"] = results
    report.section(
        "1–2. Round trip: raw TCP, raw gRPC stream, one worker step against a real ps (µs)",
        ["parameters", "bytes push / reply", "TCP p50", "TCP p99", "gRPC p50", "gRPC p99", "step p50", "step p99",
         "step/gRPC p50", "step/TCP p50", "step/gRPC p99", "step/TCP p99"],
        rows,
        ["Baselines carry exactly the step's bytes (serialized push request one way, push response back), "
         "against a child process; the step runs against `parasync-node --job_name=ps` (async, sgd), this "
         "program acting as worker:0 with WorkerTask's encoding (tensors in, Eigen vectors out), "
         "the gradient's computation excepted.",
         "Each repetition times every round trip of a Google Benchmark run; repetitions are randomly interleaved."])
    report.section(
        "1–2b. CPU time per round trip (µs): the far end (TCP echo, gRPC echo, ps) and the client process",
        ["parameters", "TCP server", "gRPC server", "ps", "ps/gRPC server", "TCP client", "gRPC client",
         "worker client", "worker/gRPC client"],
        cpu_rows,
        ["utime + stime of the whole process from /proc over a benchmark run, divided by its round trips: "
         "less disturbed by the machine's other load than latency (10 ms clock ticks, so small figures are coarse)."])
    fault_rows = []
    for size, label in sizes:
        step, tcp, grpc = samples.get(("step", size)), samples.get(("tcp", size)), samples.get(("grpc", size))
        if not step:
            continue
        cells = [label]
        for s in (tcp, grpc, step):
            cells.append(fmt_summary(summary(s["server_faults"])) if s else "")
        for s in (tcp, grpc, step):
            cells.append(fmt_summary(summary(s["client_faults"])) if s else "")
        results[size]["ps_faults"] = summary(step["server_faults"])
        results[size]["worker_faults"] = summary(step["client_faults"])
        fault_rows.append(cells)
    report.section(
        "1–2d. Minor page faults per round trip: the far end and the client process",
        ["parameters", "TCP server", "gRPC server", "ps", "TCP client", "gRPC client", "worker client"],
        fault_rows,
        ["minflt from /proc over a benchmark run, divided by its round trips: each fault is a page touched for "
         "the first time since it was mapped (~10 µs on these VMs). A buffer mapped afresh every step costs one "
         "per 4 KiB page; buffers the heap reuses cost none."])
    alloc_rows = []
    for size, label in sizes:
        step, grpc = samples.get(("step", size)), samples.get(("grpc", size))
        if not step or not grpc:
            continue
        cells = [label]
        for key in ("server_allocs", "server_large_allocs", "client_allocs", "client_large_allocs"):
            for s in (grpc, step):
                cells.append(fmt_summary(summary(s[key]), 1))
        for side in ("server", "client"):
            results[size][("ps" if side == "server" else "worker") + "_allocs"] = summary(step[side + "_allocs"])
            results[size][("ps" if side == "server" else "worker") + "_large_allocs"] = \
                summary(step[side + "_large_allocs"])
        alloc_rows.append(cells)
    if alloc_rows:
        report.section(
            "1–2f. Heap allocations per round trip: the bare gRPC echo against the step, far end and client",
            ["parameters", "gRPC server", "ps", "gRPC server ≥64 KiB", "ps ≥64 KiB", "gRPC client", "worker client",
             "gRPC client ≥64 KiB", "worker client ≥64 KiB"],
            alloc_rows,
            ["malloc, calloc, realloc and the aligned allocators, counted by bench/alloc_counter (preloaded into the "
             "echo server and the ps, linked into this program) over a benchmark run, divided by its round trips; "
             "≥64 KiB: calls of at least 64 KiB, the size of a tensor of 16,384 floats. The bare echo shows what "
             "gRPC allocates on its own for the same bytes; the difference is the step's."])
    floor_rows = []
    for size, label in sizes:
        tcp, grpc, raw = samples.get(("tcp", size)), samples.get(("grpc", size)), samples.get(("grpc_raw", size))
        if not (tcp and grpc):
            continue
        floors = results.setdefault(size, {})
        floors["grpc/tcp p50"] = ratio(grpc["p50_us"], tcp["p50_us"])
        floors["grpc_raw/tcp p50"] = ratio(raw["p50_us"], tcp["p50_us"]) if raw else None
        floor_rows.append([label, fmt_summary(summary(raw["p50_us"])) if raw else "—",
                           fmt_ratio(floors["grpc/tcp p50"]), fmt_ratio(floors["grpc_raw/tcp p50"]),
                           fmt_ratio(ratio(grpc["server_cpu_us"], tcp["server_cpu_us"])),
                           fmt_ratio(ratio(raw["server_cpu_us"], tcp["server_cpu_us"])) if raw else "—",
                           fmt_summary(summary(raw["server_large_allocs"]), 1) if raw else "—"])
    if floor_rows:
        report.section("1–2c. The transport's own cost: bare gRPC echoes against raw TCP, same bytes",
                       ["parameters", "raw gRPC p50 (µs)", "gRPC/TCP p50", "raw gRPC/TCP p50",
                        "gRPC/TCP server CPU", "raw gRPC/TCP server CPU", "raw gRPC server ≥64 KiB allocations"],
                       floor_rows,
                       ["With no Parasync code at all: what any step over gRPC pays before the ps does anything. "
                        "gRPC: protobuf messages (a `bytes` payload), as the step's. raw gRPC: the same stream "
                        "with gRPC ByteBuffers whose slices point at memory the process keeps, sent without a "
                        "copy and read without being parsed -- the least any tensor data path over gRPC can "
                        "cost (zero-copy buffers over the tensors' own memory would cost at least this)."])

    link_rows = []
    for size, label in sizes:
        linked, stream, tcp = samples.get(("step", size)), samples.get(("step_grpc", size)), samples.get(("tcp", size))
        if not (linked and stream and tcp):
            continue
        link_rows.append([label, fmt_summary(summary(linked["p50_us"])), fmt_summary(summary(stream["p50_us"])),
                          fmt_ratio(ratio(linked["p50_us"], stream["p50_us"])),
                          fmt_ratio(ratio(linked["p50_us"], tcp["p50_us"])),
                          fmt_ratio(ratio(stream["p50_us"], tcp["p50_us"])),
                          fmt_summary(summary(linked["server_cpu_us"])), fmt_summary(summary(stream["server_cpu_us"])),
                          fmt_summary(summary(linked["client_cpu_us"])), fmt_summary(summary(stream["client_cpu_us"]))])
    if link_rows:
        report.section("1–2g. The step with its tensors' values on a data link and on the gRPC stream",
                       ["parameters", "link p50 (µs)", "stream p50 (µs)", "link/stream p50", "link/TCP p50",
                        "stream/TCP p50", "ps CPU link (µs)", "ps CPU stream (µs)", "worker CPU link (µs)",
                        "worker CPU stream (µs)"],
                       link_rows,
                       ["`step/N` is the worker step as parasync-node's workers take it: a model of 64 KiB or more "
                        "offers a data link (core/wire/data_link.h), and the values go on a TCP socket beside the "
                        "Train stream. `step_grpc/N` is the same step, in the same run, with the join offering no "
                        "link (`--data_link=0`): the values on the stream, zero-copy ByteBuffers both ways. The "
                        "worker's CPU includes the link's I/O thread."])

    # Issue 13's goals, each beside the floor gRPC itself sets for the same
    # bytes: where the raw gRPC echo alone is above a goal, no step over gRPC
    # can meet it.
    def floor_note(size):
        row = results.get(size, {})
        parts = []
        if row.get("grpc/tcp p50"):
            parts.append(f"bare gRPC echo {fmt_ratio(row['grpc/tcp p50']).split(' ')[0]}")
        if row.get("grpc_raw/tcp p50"):
            parts.append(f"raw gRPC {fmt_ratio(row['grpc_raw/tcp p50']).split(' ')[0]}")
        return f"; the transport alone: {', '.join(parts)}" if parts else ""

    two = results.get("2")
    if two and two.get("step/grpc p50"):
        r = two["step/grpc p50"]
        report.target("2-parameter step ≤ 1.5× gRPC stream ping-pong (p50)", fmt_ratio(r), r and r["median"] <= 1.5)
    for size, label, bound in (("2", "2-parameter", 1.8), ("7850", "7,850-parameter", 2.0),
                               ("1000000", "1,000,000-parameter", 1.5)):
        row = results.get(size)
        if not row or "step/tcp p50" not in row:
            continue
        r = row["step/tcp p50"]
        report.target(f"{label} step p50 ≤ {bound}× raw TCP exchange of the same bytes", fmt_ratio(r) + floor_note(size),
                      r and r["median"] <= bound)
    big = results.get("1000000")
    if big and "step/tcp p99" in big:
        r = big["step/tcp p99"]
        report.target("1,000,000-parameter step p99 ≤ 3× raw TCP (p99)", fmt_ratio(r), r and r["median"] <= 3)
    if big and "ps_faults" in big:
        # "~0 faults": at most ps-lite's 4 per call, each side, where a
        # buffer mapped afresh every step costs ~1,000 (4 MB in 4 KiB pages).
        worst = max(big["ps_faults"]["median"], big["worker_faults"]["median"])
        report.target("1,000,000-parameter steady state: ~0 minor page faults per step, ps and worker (≤ 4, "
                      "ps-lite's figure; 4 MB mapped afresh would be ~1,000)",
                      f"ps {fmt(big['ps_faults']['median'], 2)}, worker {fmt(big['worker_faults']['median'], 2)}",
                      worst <= 4)
    if big and "ps_large_allocs" in big and samples.get(("grpc", "1000000")):
        # A tensor-sized buffer per step is any ≥64 KiB allocation beyond
        # those gRPC itself makes to receive the same bytes (its read slices).
        echo = samples[("grpc", "1000000")]
        extra_ps = big["ps_large_allocs"]["median"] - summary(echo["server_large_allocs"])["median"]
        extra_worker = big["worker_large_allocs"]["median"] - summary(echo["client_large_allocs"])["median"]
        report.target("1,000,000-parameter steady state: no tensor-sized (≥64 KiB) allocation per step beyond the "
                      "bare gRPC echo's",
                      f"ps {fmt_signed(extra_ps, 1)}, worker {fmt_signed(extra_worker, 1)} per step "
                      "(fewer than the echo's, where negative)",
                      max(extra_ps, extra_worker) < 0.5)


def add_python_step(report, doc, roundtrip):
    """The Python worker's step (bench/python_step.py) against the C++
    worker's step/ of bench_roundtrip, both against a real ps in this run."""
    cpp = roundtrip_samples(roundtrip) if roundtrip else {}
    by_size = {}
    for b in doc.get("benchmarks", []):
        entry = by_size.setdefault(b["size"], {})
        for key in ("push_p50_us", "push_p99_us", "round_trip_p50_us", "round_trip_p99_us", "faults_per_step"):
            entry.setdefault(key, []).append(b[key])
    rows, results = [], {}
    for size, label in (("7850", "7,850"), ("1000000", "1,000,000")):
        py = by_size.get(size)
        if not py:
            continue
        step = cpp.get(("step", size))
        row = {name: summary(py[name]) for name in py}
        row["cpp_step_p50"] = summary(step["p50_us"]) if step else None
        # Repetitions of the two programs ran at different times: the ratio
        # is of medians, its spread that of the per-repetition ratios.
        row["push/cpp p50"] = ratio(py["push_p50_us"], step["p50_us"]) if step else None
        row["round_trip/cpp p50"] = ratio(py["round_trip_p50_us"], step["p50_us"]) if step else None
        results[size] = row
        rows.append([label, fmt_summary(row["push_p50_us"]), fmt_summary(row["push_p99_us"]),
                     fmt_summary(row["round_trip_p50_us"]), fmt_summary(row["cpp_step_p50"]),
                     fmt_ratio(row["push/cpp p50"]), fmt_ratio(row["round_trip/cpp p50"]),
                     fmt_summary(row["faults_per_step"], 1)])
    report.data["python_step"] = results
    report.section(
        "1–2e. A Python worker's step against the C++ worker's (µs), the same ps and model shapes",
        ["parameters", "Python push p50", "Python push p99", "Python round trip p50", "C++ step p50",
         "push/C++ p50", "round trip/C++ p50", "Python faults/step"],
        rows,
        ["bench/python_step.py: python/parasync's Worker as worker:0 against `parasync-node --job_name=ps`. "
         "push is worker.push() whole (gradients encoded, round trip, parameters decoded into NumPy arrays); "
         "round trip leaves the request's encoding out, as bench_roundtrip's step/ does for the C++ worker."])
    big = results.get("1000000")
    if big:
        r = big["push/cpp p50"]
        report.target("Python worker's 1,000,000-parameter step ≤ 1.5× the C++ worker's (p50)", fmt_ratio(r),
                      r and r["median"] <= 1.5)


def by_name(doc, group):
    return {r["name"]: r for r in doc.get("results", []) if r["group"] == group}


def add_cluster(report, doc):
    steps = by_name(doc, "throughput_steps")
    grads = by_name(doc, "throughput_gradients")
    if steps:
        rows = []
        ratios = {}
        for workers in (1, 2, 4, 8):
            row = [str(workers)]
            base_g = grads.get(f"async/{workers}w", {}).get("samples")
            for mode in ("async", "sync", "ssp"):
                name = f"{mode}/{workers}w"
                row.append(fmt_summary(summary(steps.get(name, {}).get("samples", []))))
                row.append(fmt_summary(summary(grads.get(name, {}).get("samples", []))))
            for mode in ("sync", "ssp"):
                r = ratio(grads.get(f"{mode}/{workers}w", {}).get("samples"), base_g)
                ratios[(mode, workers)] = r
                row.append(fmt_ratio(r))
            rows.append(row)
        report.section(
            "3. Updates per second, demo model (linear, 2 parameters), 1 ps, real processes",
            ["workers", "async steps/s", "async gradients/s", "sync steps/s", "sync gradients/s", "ssp(4) steps/s",
             "ssp(4) gradients/s", "sync/async gradients", "ssp/async gradients"],
            rows,
            ["steps/s: growth of ps:0's global step. gradients/s: gradients applied or aggregated into a step "
             "(sum of WorkerStatus.applied). In sync one global step averages one gradient per live worker, so "
             "its steps/s is bounded by async's divided by the number of workers by definition; the targets "
             "compare gradients applied per second.",
             "Each cluster: `parasync-node` ps + N workers on free loopback ports, `--display_step=1000000000` (no per-step printing), measured "
             "over a window after a warm-up, through ps:0's GetClusterStatus. The machine has "
             f"{os.cpu_count()} cores: beyond that, workers share them."])
        switches = by_name(doc, "throughput_ps_switches")
        if switches:
            report.section(
                "3b. ps:0 context switches per applied gradient (the same runs)",
                ["workers", "async", "sync", "ssp(4)"],
                [[str(w)] + [fmt_summary(summary(switches.get(f"{m}/{w}w", {}).get("samples", [])), 1)
                             for m in ("async", "sync", "ssp")] for w in (1, 2, 4, 8)],
                ["Voluntary + involuntary context switches of all ps:0 threads (/proc/PID/task/*/status) over the "
                 "window, divided by the gradients applied in it: how often the ps's threads sleep and are woken "
                 "per gradient, a figure the machine's other load hardly moves."])
        for workers in (1, 2, 4, 8):
            for mode, bound in (("sync", 0.7), ("ssp", 0.9)):
                r = ratios.get((mode, workers))
                report.target(f"{mode} ≥ {bound}× async gradients applied/s, {workers} equal workers", fmt_ratio(r),
                              r and r["median"] >= bound)
    ps = by_name(doc, "ps_count")
    if ps:
        one, two = ps.get("1ps/2w", {}).get("samples"), ps.get("2ps/2w", {}).get("samples")
        report.section(
            "3c. 1,000,000 parameters (softmax 99,999×10 + 10), 2 workers, async: 2 ps against 1",
            ["ps tasks", "global steps/s", "ratio to 1 ps"],
            [["1", fmt_summary(summary(one or [])), "1.00×"],
             ["2", fmt_summary(summary(two or [])), fmt_ratio(ratio(two, one))]],
            ["Variables are placed round-robin per variable (replica_device_setter): with 2 ps, W (999,990 "
             "values) lives on ps:0 and b (10 values) on ps:1, so a second ps cannot halve the big transfer; "
             "it adds a second round trip per step."])
    add_many(report, doc)
    acc = by_name(doc, "accuracy")
    acc_steps = by_name(doc, "accuracy_steps")
    if acc:
        rows = []
        for mode in ("async", "sync", "ssp"):
            eq, st = f"{mode}/equal", f"{mode}/straggler 2ms"
            rows.append([mode, fmt_summary(summary(acc.get(eq, {}).get("samples", []))),
                         fmt_summary(summary(acc_steps.get(eq, {}).get("samples", []))),
                         fmt_summary(summary(acc.get(st, {}).get("samples", []))),
                         fmt_summary(summary(acc_steps.get(st, {}).get("samples", [])))])
        sync_st = acc.get("sync/straggler 2ms", {}).get("samples")
        ssp_st = acc.get("ssp/straggler 2ms", {}).get("samples")
        r = ratio(ssp_st, sync_st)
        report.section(
            "4. Time to accuracy: demo (ps + 2 workers) until |w−2| < 0.05 and |b−10| < 0.05",
            ["mode", "equal: s", "equal: global steps", "worker:1 +2 ms/step: s", "straggler: global steps"],
            rows,
            ["Seconds on ps:0's clock from the first step event to the first step whose parameters (the values "
             "the gradient was computed from, as the telemetry carries them) are within the target. ssp staleness 4. "
             "The straggler delay is set through TaskControl.SetStraggler before the chief starts.",
             f"ssp / sync time with the straggler: {fmt_ratio(r)}"])
        report.target("with the 2 ms straggler, ssp reaches the target in ≤ 0.6× sync's time", fmt_ratio(r),
                      r and r["median"] <= 0.6)
    tel = by_name(doc, "telemetry")
    if tel:
        none, attached = tel.get("none", {}).get("samples"), tel.get("watcher attached", {}).get("samples")
        r = ratio(attached, none)
        report.section(
            "5. Telemetry cost: demo cluster (async, 2 workers), the app's ClusterWatcher attached vs none",
            ["subscriber", "updates/s", "ratio to none"],
            [["none", fmt_summary(summary(none or [])), "1.00×"],
             ["ClusterWatcher", fmt_summary(summary(attached or [])), fmt_ratio(r)]],
            ["One cluster, alternating measurement windows with and without the watcher (which feeds a RunState "
             "and publishes snapshots to this thread's event loop, as in the app)."])
        report.target("telemetry attached costs ≤ 10% of updates/s", fmt_ratio(r), r and r["median"] >= 0.9)

    add_probe(report, doc)
    add_replicated_cluster(report, doc)


def add_probe(report, doc):
    """Issue 32: updates/s with the workers' staleness probe off, at its default and every 10 steps."""
    steps = by_name(doc, "probe")
    if not steps:
        return
    shapes = []
    for name in steps:
        shape = name.split(" probe ", 1)[0]
        if shape not in shapes:
            shapes.append(shape)
    rows = []
    results = {}
    for shape in shapes:
        off = steps.get(shape + " probe off", {}).get("samples")
        default = steps.get(shape + " probe every 100 (default)", {}).get("samples")
        often = steps.get(shape + " probe every 10", {}).get("samples")
        if not off or not default:
            continue
        r_default, r_often = ratio(default, off), ratio(often, off) if often else None
        results[shape] = {"off": summary(off), "default": summary(default), "ratio_default": r_default,
                          "ratio_every_10": r_often}
        rows.append([shape, fmt_summary(summary(off)), fmt_summary(summary(default)), fmt_ratio(r_default),
                     fmt_summary(summary(often or [])), fmt_ratio(r_often)])
        report.target(f"the staleness probe at its default costs ≤ 3% of updates/s ({shape})", fmt_ratio(r_default),
                      r_default and r_default["median"] >= 0.97)
    if not rows:
        return
    report.data["staleness_probe"] = results
    report.section(
        "5e. The cost of measuring staleness's cost: the workers' probe off, every 100 steps (default), every 10",
        ["shape", "global steps/s, probe off", "every 100", "ratio", "every 10", "ratio"],
        rows,
        ["bench_cluster `probe`: clusters of the same shape, one per setting in turn. On a probed step the worker "
         "reads every ps task's parameters (Snapshot) and computes its batch's gradient again before it pushes "
         "(`--staleness_probe_every`). softmax: 10 classes of blobs in 2 dimensions, learning rate 0.05."])


def add_replicated_cluster(report, doc):
    """Issue 15: updates/s of one cluster with and without a backup for ps:0 (bench_cluster's `replicated`)."""
    steps = by_name(doc, "replicated")
    if not steps:
        return
    cpu = by_name(doc, "replicated_ps_cpu")
    shapes = []
    for name in steps:
        shape = name.rsplit(" with", 1)[0]
        if shape not in shapes:
            shapes.append(shape)
    rows = []
    results = {}
    for shape in shapes:
        alone = steps.get(shape + " without", {}).get("samples")
        backed = steps.get(shape + " with a backup", {}).get("samples")
        unleased = steps.get(shape + " with a backup, no lease", {}).get("samples")
        if not alone or not backed:
            continue
        r = ratio(backed, alone)
        lease_ratio = ratio(backed, unleased) if unleased else None
        results[shape] = {"without": summary(alone), "with": summary(backed), "ratio": r,
                          "with, no lease": summary(unleased) if unleased else None, "lease ratio": lease_ratio}
        rows.append([shape, fmt_summary(summary(alone)), fmt_summary(summary(backed)), fmt_ratio(r),
                     fmt_summary(summary(unleased)) if unleased else "–",
                     fmt_ratio(lease_ratio) if lease_ratio else "–",
                     fmt_summary(summary(cpu.get(shape + " without", {}).get("samples") or [])),
                     fmt_summary(summary(cpu.get(shape + " with a backup", {}).get("samples") or []))])
    if not rows:
        return
    report.data["replicated_cluster"] = results
    report.section(
        "5d. The cost of a backup in updates/s: the same cluster with and without ps:0's backup",
        ["mode / workers", "global steps/s without", "with a backup", "ratio", "with a backup, no lease",
         "lease's ratio", "ps:0 CPU/gradient without (µs)", "with a backup (µs)"],
        rows,
        ["bench_cluster `replicated`: ps:0 alone, then ps:0 with a backup (`--ps_backup_hosts`, "
         "`--job_name=ps_backup`) on this machine, alternating per repetition. Every update waits for the backup "
         "to hold it before the worker hears of it; with more workers the waits overlap. The lease's cost: the "
         "same pair with `--ps_lease_ms=0` (no lease) against the default. 1M parameters: softmax "
         "on 99,999 features × 10 classes."])


def add_many(report, doc):
    """Issue 13: 1 ps + 8 to 64 workers (bench_cluster's `many` section)."""
    steps = by_name(doc, "many_steps")
    if not steps:
        return
    grads, cpu = by_name(doc, "many_gradients"), by_name(doc, "many_ps_cpu")
    rss, switches = by_name(doc, "many_ps_rss"), by_name(doc, "many_ps_switches")
    closed, nonfinite = by_name(doc, "many_step_closed"), by_name(doc, "many_nonfinite")
    modes = [m for m in ("async", "sync", "ssp") if any(n.startswith(m + "/") for n in steps)]
    counts = sorted({int(n.split("/")[1].rstrip("w")) for n in steps})
    base = counts[0]

    def samples(group, mode, workers):
        return group.get(f"{mode}/{workers}w", {}).get("samples", [])

    rows = []
    for workers in counts:
        for mode in modes:
            r = ratio(samples(cpu, mode, workers), samples(cpu, mode, base))
            rows.append([str(workers), mode if mode != "ssp" else "ssp(4)",
                         fmt_summary(summary(samples(steps, mode, workers))),
                         fmt_summary(summary(samples(grads, mode, workers))),
                         fmt_summary(summary(samples(cpu, mode, workers)), 1),
                         fmt_ratio(r) if workers != base else "1.00×",
                         fmt_summary(summary(samples(rss, mode, workers)), 1),
                         fmt_summary(summary(samples(switches, mode, workers)), 1)])
    diverged = sorted(n for n, r in nonfinite.items() if any(v > 0 for v in r["samples"] if measured(v)))
    notes = [
        "Each cluster: `parasync-node` ps + N workers on free loopback ports, the demo's flags with "
        "`--learning_rate=0.005` (the demo's 0.05 diverges in async and ssp from 32 workers on: a gradient is up "
        "to N updates stale, and ps:0 then rejects every gradient as non-finite); measured over a window after a "
        "warm-up, configurations interleaved. The machine has "
        f"{os.cpu_count()} cores: every worker shares them with ps:0.",
        "ps:0 CPU: utime + stime of the ps process (/proc/PID/stat, all threads) over the window, divided by the "
        "gradients applied or aggregated in it (sum of WorkerStatus.applied); 10 ms clock ticks. "
        f"÷ at {base}: the ratio to the same mode's figure with {base} workers (per-repetition spread); "
        "flat is 1×, linear growth in the worker count "
        f"is N/{base}. RSS: ps:0's VmRSS at the end of the window. Context switches: as in 3b.",
    ]
    if diverged:
        notes.append("Training diverged (gradients rejected as non-finite) in: " + ", ".join(diverged)
                     + "; their figures count applied gradients only.")
    report.section(f"3d. Many workers: 1 ps + {', '.join(map(str, counts))} workers, demo model, real processes",
                   ["workers", "mode", "steps/s", "gradients/s", "ps:0 CPU µs/gradient", f"÷ at {base} workers",
                    "ps:0 RSS MiB", "ctx switches/gradient"], rows, notes)
    report.data["many"] = {
        f"{mode}/{w}w": {"steps": summary(samples(steps, mode, w)), "gradients": summary(samples(grads, mode, w)),
                         "ps_cpu_us": summary(samples(cpu, mode, w)), "ps_rss_mib": summary(samples(rss, mode, w)),
                         "ps_switches": summary(samples(switches, mode, w))}
        for mode in modes for w in counts}
    top = counts[-1]
    if top == base:
        return
    bound = top / base
    for mode in modes:
        r = ratio(samples(cpu, mode, top), samples(cpu, mode, base))
        report.target(f"ps:0 CPU per gradient, {mode}: {top} workers ÷ {base} workers ≤ {top}/{base} "
                      "(grows at most linearly)", fmt_ratio(r), r and r["median"] <= bound)
    memory = {mode: ratio(samples(rss, mode, top), samples(rss, mode, base)) for mode in modes}
    report.target(f"ps:0 resident memory: {top} workers ÷ {base} workers ≤ {top}/{base} (grows at most linearly)",
                  ", ".join(f"{mode} {fmt_ratio(r)}" for mode, r in memory.items()),
                  all(r and r["median"] <= bound for r in memory.values()) if all(memory.values()) else None)
    if "sync" in modes:
        sync_steps = summary(samples(steps, "sync", top))
        flags = [v for v in samples(closed, "sync", top) if measured(v)]
        figure = "—" if not sync_steps else (f"{fmt_summary(sync_steps)} steps/s; closed in "
                                            f"{sum(1 for v in flags if v > 0)} of {len(flags)} windows")
        report.target(f"a sync step closes with {top} replicas (sync steps/s > 0)", figure,
                      (bool(flags) and all(v > 0 for v in flags)) if flags else None)


def add_app(report, latency, memory):
    rows = []
    if latency:
        # "app_latency" (2 workers) and "app_latency_<N>w": clusters the window
        # started; "app_latency_outside_<N>w": started by another program.
        groups = [("app_latency", 2, False)] + sorted(
            ((r["group"], int(m.group(2)), bool(m.group(1))) for r in latency.get("results", [])
             if (m := re.fullmatch(r"app_latency_(outside_)?(\d+)w", r["group"]))),
            key=lambda g: (g[2], g[1]))
        for group, workers, outside in dict.fromkeys(groups):
            lat = by_name(latency, group)
            who = f"{workers} workers" + (", started outside the app" if outside else "")
            for name, unit in (("p50", "ms"), ("p99", "ms"), ("max", "ms"), ("demo steps/s while watched", "steps/s"),
                               ("GUI thread running", "% of wall time"),
                               ("GUI thread waiting for a core", "% of wall time")):
                if name in lat:
                    label = f"GUI event-loop latency {name}" if unit == "ms" else name
                    rows.append([f"{label}, {who}", fmt_summary(summary(lat[name]["samples"])), unit])
            p99 = summary(lat.get("p99", {}).get("samples", []))
            if workers == 2 and not outside:
                report.target("GUI event-loop latency p99 < 50 ms at full demo speed (2 workers)",
                              fmt_summary(p99) + " ms" if p99 else "—", p99 and p99["median"] < 50)
            elif lat and not outside:
                report.target(f"GUI event-loop latency p99 < 50 ms with {workers} workers started from the window "
                              "(async, full speed)",
                              fmt_summary(p99) + " ms" if p99 else "—", p99 and p99["median"] < 50)
    if memory:
        mem = by_name(memory, "app_memory")
        for name in ("1M steps", "10M steps"):
            if name in mem:
                rows.append([f"resident memory after {name}", fmt_summary(summary(mem[name]["samples"])), "MiB"])
                rate = mem.get(name + " ingest rate")
                if rate:
                    rows.append([f"ingest rate up to {name}", fmt_summary(summary(rate["samples"])), "events/s"])
        flood = by_name(memory, "app_latency_flood")
        for name in ("p50", "p99"):
            if name in flood:
                rows.append([f"GUI latency {name} while flooded", fmt_summary(summary(flood[name]["samples"])), "ms"])
        ten = summary(mem.get("10M steps", {}).get("samples", []))
        report.target("app memory < 300 MB after 10 million steps", fmt_summary(ten) + " MiB" if ten else "—",
                      ten and ten["median"] * 1.048576 < 300)
    if rows:
        report.section(
            "6. The app's ingest (real MainWindow, ClusterWatcher, RunState; offscreen)",
            ["figure", "value", "unit"], rows,
            ["Latency: the demo cluster (real processes) at full speed, started from the window as a user starts "
             "it (the app's launcher runs its tasks) and watched by it; for comparison, the same cluster started "
             "by another program at the app's own priority, the window only watching. A probe thread "
             "posts a timestamped call to the GUI thread every 2 ms, the delay until it runs is the latency. "
             "With 2 workers, the demo's flags; with more than 8, `--learning_rate=0.005` (see 3d). GUI thread "
             "running / waiting for a core: from the scheduler (/proc/self/task/TID/schedstat) over the window: "
             "its own work, and the time it was ready to run while the cluster's processes held the cores.",
             "Memory: 10 million real demo steps would take about 12 minutes of the demo at full speed here "
             "(the steps/s above), beyond this run's budget, so a child process serves ps:0's "
             "telemetry protocol (GetClusterStatus + Watch) with demo-shaped step events as fast as the "
             "watcher reads them; the app's resident memory (VmRSS) is read when its RunState has ingested "
             "1 and 10 million step events."])


def add_sparse_step(report, doc):
    """A sparse model's step against a real ps, beside a raw TCP exchange of its bytes (bench_sparse_step)."""
    if not doc:
        return
    samples = roundtrip_samples(doc)
    tcp, step1, step10, grpc1 = (samples.get(key) for key in
                                  (("tcp", "1M"), ("step", "1M"), ("step", "10M"), ("step_grpc", "1M")))
    if not step1:
        return
    rows = []
    results = {}
    for name, label, s in (("tcp", "raw TCP, the same bytes", tcp), ("step_1M", "step, 1M-row table", step1),
                           ("step_10M", "step, 10M-row table", step10),
                           ("step_grpc_1M", "step on the gRPC stream, 1M-row table", grpc1)):
        if not s:
            continue
        row = {"bytes": (s["request_bytes"], s["response_bytes"]), "p50": summary(s["p50_us"]),
               "p99": summary(s["p99_us"]), "server_cpu": summary(s["server_cpu_us"]),
               "client_cpu": summary(s["client_cpu_us"])}
        row["vs tcp p50"] = ratio(s["p50_us"], tcp["p50_us"]) if tcp and s is not tcp else None
        results[name] = row
        rows.append([label, f"{row['bytes'][0]:,} / {row['bytes'][1]:,}", fmt_summary(row["p50"]),
                     fmt_summary(row["p99"]), fmt_ratio(row["vs tcp p50"]), fmt_summary(row["server_cpu"]),
                     fmt_summary(row["client_cpu"])])
    report.data["sparse_step"] = results
    if tcp:
        r = ratio(step1["p50_us"], tcp["p50_us"])
        report.target("sparse step (1,000 Zipf ids x 16 floats, 1 worker, 1 ps) p50 <= 1.5x raw TCP of the same "
                      "bytes", fmt_ratio(r), r["median"] <= 1.5 if r else None)
    if step10:
        r = ratio(step10["p50_us"], step1["p50_us"])
        # The same batches: the bytes differ only by a varint's length (the global step's).
        same_bytes = all(abs(step10[key] - step1[key]) <= 0.001 * step1[key]
                         for key in ("request_bytes", "response_bytes"))
        report.target("sparse step against a 10M-row table within 10 % of a 1M-row one (time; bytes the same)",
                      fmt_ratio(r) + ("; bytes the same" if same_bytes else "; bytes differ"),
                      (abs(r["median"] - 1) <= 0.10 and same_bytes) if r else None)
    report.section(
        "2s. A sparse model's step against a real ps, beside raw TCP (µs)",
        ["exchange", "bytes out / back", "p50", "p99", "÷ TCP p50", "ps CPU/step", "worker CPU/step"], rows,
        ["bench_sparse_step: this process plays a worker of a model with one 16-wide embedding table (Adagrad): "
         "each step pushes the row gradients of a batch of 1,000 ids drawn Zipf 1.1 over 1,000,000 ranks (about "
         "550 distinct after merging) and pulls the next batch's rows in the same exchange, as parasync-node's "
         "worker does, against a `parasync-node --job_name=ps` process on the data link (and, last row, on the "
         "gRPC stream). The same batches against a table of 1M and of 10M rows, made in a random order of ranks "
         "so that a batch's rows lie all over the table. Raw TCP: a blocking socket pair over loopback moving "
         "exactly the step's bytes each way."])


def add_sparse_table(report, doc):
    """A table's in-process gather + apply, and a 10M x 16 Adagrad table's memory over 4 ps (bench_sparse_table)."""
    if not doc:
        return
    runs = {}
    for b in doc.get("benchmarks", []):
        if b.get("run_type") != "iteration" or b.get("error_occurred"):
            continue
        runs.setdefault(b["run_name"], []).append(b)
    rows = []
    gather_apply = "gather + apply of a batch's rows, "
    reads_alone = "the same batches' reads alone, from memory laid out as "
    for name, label in (("BM_GatherApply/10000", gather_apply + "10K rows (in the caches: the work without memory's waits)"),
                        ("BM_GatherApply/1000000", gather_apply + "1M rows"),
                        ("BM_GatherApply/10000000", gather_apply + "10M rows"),
                        ("BM_ScatteredReads/rows:1000000/index:0", reads_alone + "1M rows' rows and state"),
                        ("BM_ScatteredReads/rows:10000000/index:0", reads_alone + "10M rows' rows and state"),
                        ("BM_ScatteredReads/rows:1000000/index:1", reads_alone + "1M rows with abseil's index"),
                        ("BM_ScatteredReads/rows:10000000/index:1", reads_alone + "10M rows with abseil's index"),
                        ("BM_ScatteredReads/rows:1000000/index:2", reads_alone + "1M rows with a one-line index slot"),
                        ("BM_ScatteredReads/rows:10000000/index:2", reads_alone + "10M rows with a one-line index slot")):
        if name not in runs:
            continue
        bs = runs[name]
        rows.append([label, fmt_summary(summary([b["real_time"] for b in bs])),
                     fmt(statistics.median(b["rows_per_step"] for b in bs), 0), "—", "—"])
    memory = next((bs for name, bs in runs.items() if name.startswith("BM_MemoryOver4Ps")), None)
    if memory:
        m = memory[0]
        rows.append(["10M x 16 Adagrad over 4 ps tasks", "—", f"{m['rows_per_ps_min']:,.0f}–{m['rows_per_ps_max']:,.0f}"
                     " a ps", f"{m['memory_MB']:,.0f} MB ({m['payload_MB']:,.0f} MB rows and state)",
                     f"{m['overhead_B_per_row']:.1f} B a row ({m['overhead_pct']:.1f} %)"])
        report.data["sparse_memory"] = {key: m[key] for key in ("rows_per_ps_min", "rows_per_ps_max", "memory_MB",
                                                                "payload_MB", "overhead_B_per_row", "overhead_pct")}
        report.target("sparse memory: 10M x 16 Adagrad over 4 ps, overhead over the rows and their state <= 25 %",
                      f"{m['overhead_pct']:.1f} % ({m['overhead_B_per_row']:.1f} B a row)", m["overhead_pct"] <= 25)
    if rows:
        report.section(
            "2t. An embedding table in-process: a step's rows and a 10M-row table's memory",
            ["what", "µs", "rows", "memory", "over the rows and their state"], rows,
            ["bench_sparse_table: engine/sparse_table.h alone, no process or wire. A batch: 1,000 ids drawn Zipf 1.1 "
             "over 1M ranks (10K for the 10K-row table), merged, each row gathered (made if new) and its gradient applied with "
             "Adagrad. Memory: the tables' own count of their bytes (payload, id index, the arena's slack), the "
             "rows split over 4 ps tasks by psOfRow as a cluster splits them. The reads alone: no table code, "
             "each row's two cache lines (and its index entry's control byte and slot, or a 16-byte slot alone) at "
             "random places in plain memory of the table's size, prefetched eight rows ahead as the table does: "
             "what this machine's memory charges for the size. Every table size sees the same batches (Zipf over 1M ranks), as in 2s."])


def add_partition_scaling(report, doc, number="5b", topology="", subject="Partitioned variables"):
    title = f"{number}. {subject} in a shaped network{topology}"
    if not doc or doc.get("skipped"):
        if doc:
            report.section(title, ["figure", "value"], [["skipped", doc["skipped"]]])
        return
    by_ps = {}
    for run in doc.get("runs", []):
        by_ps.setdefault(run["num_ps"], []).append(run)
    if not by_ps:
        return
    base = [r["steps_per_second"] for r in by_ps.get(1, [])]
    rows = []
    for num_ps in sorted(by_ps):
        runs = by_ps[num_ps]
        rate = [r["steps_per_second"] for r in runs]
        speedup = ratio(rate, base) if base else None
        linear = None
        if speedup:
            linear = {k: (v / num_ps if isinstance(v, float) else v) for k, v in speedup.items()}
        bounds = [min(r["ps_link_bound"], r["worker_link_bound"]) for r in runs if "ps_link_bound" in r]
        limit = ""
        bound_note = ""
        if bounds:
            which = "workers'" if statistics.median(r["worker_link_bound"] for r in runs) < statistics.median(
                r["ps_link_bound"] for r in runs) else "ps"
            limit = f"{statistics.median(bounds):.2f} ({which}); {statistics.median(rate) / statistics.median(bounds):.0%}"
            if base:
                # The same bound as a fraction of linear: what no ps count can pass.
                bound_linear = statistics.median(bounds) / statistics.median(base) / num_ps
                bound_note = (f"; the {which} links allow at most {bound_linear:.2f}× linear, "
                              f"{statistics.median(rate) / statistics.median(bounds):.0%} of it reached")
        rows.append([str(num_ps), fmt_summary(summary(rate), 2), fmt_ratio(speedup), fmt_ratio(linear),
                     f"{statistics.median(r['ps_bytes_per_step'] for r in runs) / 1e6:.2f}",
                     f"{statistics.median(r['ps_link_utilisation'] for r in runs):.0%}",
                     f"{statistics.median(r['worker_link_utilisation'] for r in runs):.0%}",
                     limit or "—",
                     f"{statistics.median(r['cpu_busy'] for r in runs):.0%}"])
        if num_ps > 1 and linear:
            kind = "sparse" if doc.get("workload") == "sparse" else "partitioned"
            report.target(f"{kind}: steps/s with {num_ps} ps >= 0.8x linear (shaped network{topology})",
                          fmt_ratio(linear) + bound_note, linear["median"] >= 0.8)
    worker_rate = doc.get("worker_rate", doc["rate"])
    links = (f"each host's link shaped to {doc['rate']} each way" if worker_rate == doc["rate"] else
             f"the ps hosts' links shaped to {doc['rate']} each way, the workers' to {worker_rate}")
    report.section(
        f"{title} (bench/partition_scaling.py)",
        ["ps tasks", "global steps/s", "speed-up over 1 ps", "÷ ps count (1 = linear)", "MB per step per ps",
         "ps link use", "worker link use", "most the links allow (whose); reached", "CPU busy"], rows,
        [f"Every task on a host of its own (a network namespace), {links}; delay: {doc.get('delay')}. "
         f"{doc.get('model', 'A softmax of 1,000,010 parameters (W [100000, 10] partitioned over the ps tasks)')}, "
         f"{doc['workers']} workers, async; {doc['rounds']} interleaved rounds of {doc['seconds']:g} s after a "
         "warm-up. Bytes and link use from the veth counters: a link's use is its busier direction against the "
         "shaped rate.",
         "Most the links allow: a ps link carries its share of each global step in its busier direction; a "
         "worker sends its gradient and then receives the parameters of its next step, so its step takes at "
         "least both through its own link, the workers stepping side by side. The smaller bound names the limit. "
         "Where the workers' links are the limit, more ps tasks cannot raise steps/s further: a worker moves its "
         "whole gradient whatever the ps count.",
         "CPU busy far below 100 % says the network, not the CPU, is the limit."])


def markdown(report, machine, command):
    lines = ["# Benchmarks", "",
             "Generated by `bench/report.py` from one run of:", "", "```sh", command, "```", "",
             "## Machine", ""]
    for key in ("cpu", "cores", "kernel", "load_before", "load_after", "date", "commit", "preset", "quick"):
        if key in machine:
            lines.append(f"- {key.replace('_', ' ')}: {machine[key]}")
    lines += ["", "Figures are medians over repetitions, with min–max and the number of repetitions in "
              "parentheses; ratios divide two figures of this run (spread: min–max of per-repetition ratios). "
              "The machine is shared: absolute figures drift between runs, ratios much less.", ""]
    lines += ["## Targets", "", "| target | this run | |", "| --- | --- | --- |"]
    for text, figure, met in report.targets:
        lines.append(f"| {text} | {figure} | {met} |")
    lines.append("")
    for title, header, rows, notes in report.sections:
        lines += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        for row in rows:
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        for note in notes:
            lines += [note, ""]
    return "\n".join(lines)


def text_table(report):
    out = []
    for title, header, rows, _ in report.sections:
        out.append(title)
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
        out.append("  ".join(h.ljust(w) for h, w in zip(header, widths)))
        for row in rows:
            out.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
        out.append("")
    out.append("Targets")
    for text, figure, met in report.targets:
        out.append(f"  [{met:>12}] {text}: {figure}")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--machine", required=True)
    parser.add_argument("--command", required=True)
    parser.add_argument("--markdown")
    parser.add_argument("--analysis",
                        help="the analysis (before/after, the targets, what was observed), linked from BENCHMARKS.md "
                             "by its path relative to the repository root")
    args = parser.parse_args()

    machine = load(args.machine) or {}
    report = Report()
    roundtrip = load(os.path.join(args.dir, "roundtrip.json"))
    if roundtrip:
        add_roundtrip(report, roundtrip)
    if roundtrip:
        add_replication(report, roundtrip)
    python_step = load(os.path.join(args.dir, "python_step.json"))
    if python_step:
        add_python_step(report, python_step, roundtrip)
    cluster = load(os.path.join(args.dir, "cluster.json"))
    if cluster:
        add_cluster(report, cluster)
    add_partition_scaling(report, load(os.path.join(args.dir, "partition_scaling.json")))
    add_partition_scaling(report, load(os.path.join(args.dir, "partition_scaling_fast_workers.json")), "5c",
                          ", the ps links the limit")
    add_partition_scaling(report, load(os.path.join(args.dir, "sparse_scaling.json")), "5f",
                          ", the ps links the limit", "Embedding tables (sparse parameters)")
    add_sparse_step(report, load(os.path.join(args.dir, "sparse_step.json")))
    add_sparse_table(report, load(os.path.join(args.dir, "sparse_table.json")))
    add_app(report, load(os.path.join(args.dir, "app_latency.json")), load(os.path.join(args.dir, "app_memory.json")))

    print(text_table(report))
    result = {"machine": machine, "command": args.command,
              "sections": [{"title": t, "header": h, "rows": r, "notes": n} for t, h, r, n in report.sections],
              "targets": [{"target": t, "figure": f, "status": m} for t, f, m in report.targets],
              "figures": report.data}
    with open(os.path.join(args.dir, "results.json"), "w") as f:
        json.dump(result, f, indent=2)
    print(f"\nwrote {os.path.join(args.dir, 'results.json')}")
    if args.markdown:
        text = markdown(report, machine, args.command)
        if args.analysis:
            # Linked, not copied: the analysis is written by hand and kept in one place.
            text += ("\n## Analysis\n\nWhat was changed in the engine with before and after figures, the targets "
                     f"missed and why, and what was observed while measuring: [{args.analysis}]({args.analysis}).\n")
        with open(args.markdown, "w") as f:
            f.write(text + "\n")
        print(f"wrote {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
