#!/usr/bin/python3
"""Checks a replicated cluster's history after a run of faults.

Reads what the workers were told (their --acknowledgement_log files), what
ps:0 logged (the step log in --logdir, every process of the pair writing to
it in turn) and what the ps processes said (their output), and verifies:

- every update a worker was told was applied is in the surviving history
  exactly once, unless its loss was reported in words;
- the surviving history has every global step from its first to its last,
  each made of one gradient (async, ssp) or of as many as it says (sync);
- no two processes of a pair acknowledged under one lease epoch, and no
  process acknowledged an update under an epoch after a higher epoch took
  over from a global step below it;
- the global step a worker was told never went back, unless a loss said so.

The surviving history: a process deposed by a higher lease epoch may have
logged steps that it never acknowledged (it applies before it asks its
backup and its lease). A step logged under epoch e above the global step at
which a higher epoch took over (its "failover" record) is not part of it.

Run it on a directory fault_schedule.py left:
    /usr/bin/python3 tests/faults/history_check.py RUN_DIR
"""

import argparse
import gzip
import json
import pathlib
import re
import statistics
import sys
from dataclasses import dataclass, field

COUNTED = ("applied", "aggregated")

# What a ps process says when acknowledged updates are gone (ps_task_membership.cpp,
# ps_task_replication.cpp): the steps taken a second time, or a takeover
# without the state, or without what the old primary acknowledged alone.
LOSS_RANGE = re.compile(r"global steps (\d+) to (\d+) are taken a second time")
EMPTY_TAKEOVER = re.compile(r"(ps:\d+) at (\S+) takes over as the pair's primary WITHOUT [^(]*\(epoch (\d+)\)")


@dataclass
class History:
    """What a run left, read once."""

    steps: list = field(default_factory=list)  # the step log's "step" records, in file order
    failovers: list = field(default_factory=list)  # its "failover" records
    acknowledgements: dict = field(default_factory=dict)  # worker -> its lines, in file order
    loss_ranges: list = field(default_factory=list)  # (first, last) global steps said lost
    empty_takeovers: list = field(default_factory=list)  # (ps index, epoch) taken over without state


@dataclass
class Verdict:
    violations: list = field(default_factory=list)
    reported_losses: int = 0  # acknowledged updates lost, each said in words
    acknowledged: int = 0  # updates workers were told were applied
    surviving_steps: int = 0
    superseded_records: int = 0  # logged by a deposed process, never acknowledged
    epochs: dict = field(default_factory=dict)  # ps index -> {epoch: address}
    failover_gaps: dict = field(default_factory=dict)  # ps index -> [seconds]

    def violate(self, words):
        self.violations.append(words)


def step_log_files(logdir):
    """The step log's rotated segments in order, then steps.jsonl."""
    logdir = pathlib.Path(logdir)
    segments = []
    for path in logdir.glob("steps.jsonl.*"):
        match = re.fullmatch(r"steps\.jsonl\.(\d+)(\.gz)?", path.name)
        if match:
            segments.append((int(match.group(1)), path))
    files = [path for _, path in sorted(segments)]
    if (logdir / "steps.jsonl").exists():
        files.append(logdir / "steps.jsonl")
    return files


def read_lines(path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                # A process killed in the middle of a write leaves half a
                # line at most at the end of a file; anywhere else it is a
                # damaged log, which the checker says.
                yield {"type": "unreadable", "where": f"{path.name}:{number}"}


def read_history(run_dir):
    run_dir = pathlib.Path(run_dir)
    history = History()
    for path in step_log_files(run_dir / "logdir"):
        for record in read_lines(path):
            kind = record.get("type")
            if kind == "step":
                history.steps.append(record)
            elif kind == "failover":
                history.failovers.append(record)
    for path in sorted((run_dir / "acknowledged").glob("worker-*.jsonl")):
        worker = int(path.stem.split("-")[1])
        history.acknowledgements[worker] = list(read_lines(path))
    for path in sorted((run_dir / "output").glob("*.log")):
        text = path.read_text(encoding="utf-8", errors="replace")
        history.loss_ranges += [(int(a), int(b)) for a, b in LOSS_RANGE.findall(text)]
        history.empty_takeovers += [
            (int(name.split(":")[1]), int(epoch)) for name, _, epoch in EMPTY_TAKEOVER.findall(text)
        ]
    return history


def surviving(history):
    """The step records that are the run's history, and those superseded."""
    kept, superseded = [], []
    for record in history.steps:
        epoch = record.get("lease_epoch", 0)
        step = record["global_step"]
        deposed = any(f.get("epoch", 0) > epoch and step > f["global_step"] for f in history.failovers)
        (superseded if deposed else kept).append(record)
    return kept, superseded


def same_process(history, logged_epoch, told_epoch):
    """Whether an update logged under one epoch and answered under another
    came from one process: no takeover began an epoch between them (a
    primary may serve on under a higher epoch without one)."""
    low, high = sorted((logged_epoch, told_epoch))
    return not any(low < f.get("epoch", 0) <= high for f in history.failovers)


def loss_reported(history, worker_line):
    """Whether the loss of this acknowledged update was said in words."""
    update = worker_line["update"]
    if any(first <= update <= last for first, last in history.loss_ranges):
        return True
    epochs = worker_line.get("lease_epochs") or [0]
    return any(ps == 0 and epoch > epochs[0] for ps, epoch in history.empty_takeovers)


def check_steps(kept, verdict):
    """Every global step once: one gradient, or a sync step's gradients."""
    by_step = {}
    for record in kept:
        if record.get("outcome") in COUNTED:
            by_step.setdefault(record["global_step"], []).append(record)
    verdict.surviving_steps = len(by_step)
    if not by_step:
        verdict.violate("the step log holds no applied update")
        return by_step
    first, last = min(by_step), max(by_step)
    missing = [s for s in range(first, last + 1) if s not in by_step]
    if missing:
        verdict.violate(f"{len(missing)} global steps missing from the surviving history, the first {missing[:5]}")
    for step, records in sorted(by_step.items()):
        aggregated = [r for r in records if r["outcome"] == "aggregated"]
        if aggregated and len(aggregated) == len(records):
            if len(records) != records[-1].get("contributions", 1):
                verdict.violate(
                    f"sync step {step}: {len(records)} gradients logged, {records[-1].get('contributions')} averaged"
                )
        elif len(records) != 1:
            who = ", ".join(f"worker:{r['worker']} clock {r['worker_clock']} epoch {r.get('lease_epoch', 0)}"
                            for r in records)
            verdict.violate(f"global step {step} applied {len(records)} times: {who}")
    return by_step


def check_acknowledged(history, by_step, verdict):
    """Every update a worker was told was applied, in the surviving history."""
    for worker, lines in sorted(history.acknowledgements.items()):
        for line in lines:
            if line.get("type") == "unreadable":
                verdict.violate(f"worker:{worker}'s acknowledgement log is damaged at {line['where']}")
                continue
            if line["outcome"] not in COUNTED:
                continue
            verdict.acknowledged += 1
            update = line["update"]
            epoch = (line.get("lease_epochs") or [0])[0]
            # The worker's own gradient, applied by the process that answered
            # it: one of a later epoch at the same step is another gradient.
            if any(r["worker"] == worker and same_process(history, r.get("lease_epoch", 0), epoch)
                   for r in by_step.get(update, [])):
                continue
            if loss_reported(history, line):
                verdict.reported_losses += 1
                continue
            deposed = [f for f in history.failovers if f.get("epoch", 0) > epoch and update > f["global_step"]]
            told = (f"worker:{worker} was told update {update} was {line['outcome']} (lease epochs "
                    f"{line.get('lease_epochs')}, answered by {line.get('answered_by')})")
            if deposed:
                verdict.violate(
                    f"{told} after epoch {deposed[0]['epoch']} took over at global step "
                    f"{deposed[0]['global_step']}: two processes of ps:0 acknowledged at once"
                )
            else:
                verdict.violate(f"{told}, and it is not in the surviving history, with no word of its loss")
        # Told the global step in order: it never goes back but where a loss said so.
        for before, after in zip(lines, lines[1:]):
            if "global_step" not in before or "global_step" not in after:
                continue
            if after["global_step"] < before["global_step"]:
                back_to = after["global_step"]
                said = any(first <= before["global_step"] <= last for first, last in history.loss_ranges)
                if not said and not any(ps == 0 for ps, _ in history.empty_takeovers):
                    verdict.violate(
                        f"worker:{worker} was told global step {before['global_step']}, then {back_to}: "
                        "the global step went back with no word of a loss"
                    )


def check_epochs(history, verdict):
    """One process per lease epoch of each pair."""
    for worker, lines in sorted(history.acknowledgements.items()):
        for line in lines:
            for ps, (epoch, address) in enumerate(zip(line.get("lease_epochs", []), line.get("answered_by", []))):
                holders = verdict.epochs.setdefault(ps, {})
                if holders.setdefault(epoch, address) != address:
                    verdict.violate(
                        f"ps:{ps} acknowledged under lease epoch {epoch} from two processes: "
                        f"{holders[epoch]} and {address} (worker:{worker}, update {line.get('update')})"
                    )


def failover_gaps(history, verdict):
    """Per ps task: from the last acknowledgement under an epoch to the first
    under the next, over every worker's lines (what a user waits)."""
    for ps in sorted(verdict.epochs):
        timeline = sorted(
            (line["time"], line["lease_epochs"][ps])
            for lines in history.acknowledgements.values()
            for line in lines
            if len(line.get("lease_epochs", [])) > ps
        )
        gaps = []
        last_time, epoch = None, None
        for time, seen in timeline:
            if epoch is not None and seen > epoch:
                gaps.append(time - last_time)
            if epoch is None or seen >= epoch:
                epoch, last_time = seen, time
        verdict.failover_gaps[ps] = gaps


def check(run_dir):
    history = read_history(run_dir)
    verdict = Verdict()
    if not history.acknowledgements:
        verdict.violate(f"no worker's acknowledgement log in {run_dir}/acknowledged")
    kept, superseded = surviving(history)
    verdict.superseded_records = len(superseded)
    by_step = check_steps(kept, verdict)
    check_acknowledged(history, by_step, verdict)
    check_epochs(history, verdict)
    failover_gaps(history, verdict)
    return verdict


def summary(verdict):
    lines = [
        f"acknowledged updates: {verdict.acknowledged}",
        f"surviving global steps: {verdict.surviving_steps} "
        f"({verdict.superseded_records} records of deposed processes left out)",
        f"acknowledged updates lost and reported: {verdict.reported_losses}",
    ]
    for ps, holders in sorted(verdict.epochs.items()):
        lines.append(f"ps:{ps} lease epochs: {len(holders)} ({', '.join(f'{e}: {a}' for e, a in sorted(holders.items()))})")
    for ps, gaps in sorted(verdict.failover_gaps.items()):
        if gaps:
            lines.append(
                f"ps:{ps} failovers seen by workers: {len(gaps)}, gap median {statistics.median(gaps):.3f} s, "
                f"max {max(gaps):.3f} s"
            )
    shown = verdict.violations[:20]
    lines.append(f"violations: {len(verdict.violations)}")
    lines += [f"  - {v}" for v in shown]
    if len(verdict.violations) > len(shown):
        lines.append(f"  ... and {len(verdict.violations) - len(shown)} more")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a directory fault_schedule.py left (logdir/, acknowledged/, output/)")
    args = parser.parse_args()
    if not (pathlib.Path(args.run_dir) / "logdir").is_dir():
        sys.exit(f"{args.run_dir} has no logdir/: give the directory fault_schedule.py printed at its end")
    verdict = check(args.run_dir)
    print(summary(verdict))
    sys.exit(1 if verdict.violations else 0)


if __name__ == "__main__":
    main()
