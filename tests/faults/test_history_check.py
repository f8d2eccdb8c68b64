"""The checker of fault_schedule.py on histories written here: it passes a
sound one and names each kind of violation a broken replicated ps could
leave, so that its "violations: 0" after a run means something."""

import json
import pathlib
import tempfile
import unittest

import history_check

A, B = "10.232.1.2:2222", "10.232.3.2:2222"  # ps:0's primary and backup


def step(global_step, worker, clock, epoch=1, outcome="applied", contributions=1):
    return {"type": "step", "global_step": global_step, "worker": worker, "worker_clock": clock,
            "outcome": outcome, "contributions": contributions, "lease_epoch": epoch}


def told(worker, update, epoch=1, address=A, outcome="applied", time=0.0):
    return {"worker": worker, "worker_clock": update, "update": update, "global_step": update, "outcome": outcome,
            "lease_epochs": [epoch], "answered_by": [address], "time": time or float(update)}


class RunDirectory:
    """A run directory as fault_schedule.py leaves it."""

    def __init__(self):
        self.temporary = tempfile.TemporaryDirectory()
        self.path = pathlib.Path(self.temporary.name)
        for sub in ("logdir", "acknowledged", "output"):
            (self.path / sub).mkdir()

    def write(self, steps, acknowledgements, outputs=()):
        with open(self.path / "logdir" / "steps.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in steps)
        for worker, lines in acknowledgements.items():
            with open(self.path / "acknowledged" / f"worker-{worker}.jsonl", "w") as f:
                f.writelines(json.dumps(line) + "\n" for line in lines)
        for n, text in enumerate(outputs):
            (self.path / "output" / f"ps-{n}.log").write_text(text)
        return history_check.check(self.path)


def failover(global_step, epoch):
    return {"type": "failover", "global_step": global_step, "epoch": epoch, "new_primary": B, "old_primary": A}


class HistoryCheckTest(unittest.TestCase):
    def setUp(self):
        self.run = RunDirectory()
        self.addCleanup(self.run.temporary.cleanup)

    def test_a_sound_history_passes(self):
        steps = [step(s, s % 2, s) for s in range(1, 11)]
        verdict = self.run.write(steps, {0: [told(0, s) for s in range(2, 11, 2)],
                                         1: [told(1, s) for s in range(1, 11, 2)]})
        self.assertEqual(verdict.violations, [])
        self.assertEqual(verdict.acknowledged, 10)
        self.assertEqual(verdict.surviving_steps, 10)

    def test_a_failover_that_kept_everything_passes(self):
        # The deposed primary logged 6 and 7 and acknowledged neither; the
        # new primary took over at 5 under epoch 2.
        steps = [step(s, 0, s) for s in range(1, 6)] + [step(6, 0, 6), step(7, 0, 7), failover(5, 2)]
        steps += [step(s, 0, s, epoch=2) for s in range(6, 10)]
        acks = [told(0, s) for s in range(1, 6)] + [told(0, s, epoch=2, address=B, time=s + 10) for s in range(6, 10)]
        verdict = self.run.write(steps, {0: acks})
        self.assertEqual(verdict.violations, [])
        self.assertEqual(verdict.superseded_records, 2)
        self.assertEqual(verdict.failover_gaps[0], [11.0])  # from the last under epoch 1 (5) to the first under 2 (16)

    def test_an_acknowledged_update_missing_is_a_violation(self):
        steps = [step(s, 0, s) for s in range(1, 6)] + [step(6, 1, 6)]
        verdict = self.run.write(steps, {0: [told(0, s) for s in range(1, 7)]})
        self.assertEqual(len(verdict.violations), 1)
        self.assertIn("worker:0 was told update 6 was applied", verdict.violations[0])
        self.assertIn("with no word of its loss", verdict.violations[0])

    def test_two_primaries_acknowledging_are_a_violation(self):
        # The deposed primary acknowledged update 6 after epoch 2 took over at 5.
        steps = [step(s, 0, s) for s in range(1, 7)] + [failover(5, 2)]
        steps += [step(s, 1, s, epoch=2) for s in range(6, 9)]
        verdict = self.run.write(steps, {0: [told(0, s) for s in range(1, 7)],
                                         1: [told(1, s, epoch=2, address=B) for s in range(6, 9)]})
        self.assertEqual(len(verdict.violations), 1)
        self.assertIn("two processes of ps:0 acknowledged at once", verdict.violations[0])

    def test_a_loss_said_in_words_is_counted_not_violated(self):
        steps = [step(s, 0, s) for s in range(1, 7)] + [failover(5, 2)]
        steps += [step(s, 1, s, epoch=2) for s in range(6, 9)]
        output = ("ps:0 at 10.232.3.2:2222 holds global step 5, but worker:0 had global step 6 acknowledged: "
                  "1 update is lost. ... global steps 6 to 6 are taken a second time\n")
        verdict = self.run.write(steps, {0: [told(0, s) for s in range(1, 7)] + [told(0, 7, epoch=2, address=B)]},
                                 [output])
        # Worker 0's update 7 is worker:1's in the history: lost without a word.
        self.assertEqual(verdict.reported_losses, 1)
        self.assertEqual(len(verdict.violations), 1, verdict.violations)
        self.assertIn("update 7", verdict.violations[0])

    def test_a_takeover_without_what_was_acknowledged_alone_reports_the_loss(self):
        # The primary served alone from 5 and died; the backup, which held 4,
        # took over under epoch 2 and said so.
        steps = [step(s, 0, s) for s in range(1, 8)] + [failover(4, 2)]
        steps += [step(s, 0, s + 10, epoch=2) for s in range(5, 9)]
        output = (f"ps:0 at {B} takes over as the pair's primary WITHOUT the updates that {A} acknowledged alone "
                  "(epoch 2), at global step 4: ...\n")
        acks = [told(0, s) for s in range(1, 8)] + [told(0, 8, epoch=2, address=B)]
        acks[-1]["global_step"] = 8
        verdict = self.run.write(steps, {0: acks}, [output])
        self.assertEqual(verdict.violations, [])
        self.assertEqual(verdict.reported_losses, 3)  # 5, 6 and 7

    def test_two_processes_under_one_epoch_are_a_violation(self):
        steps = [step(s, s % 2, s) for s in range(1, 5)]
        verdict = self.run.write(steps, {0: [told(0, 2), told(0, 4)], 1: [told(1, 1), told(1, 3, address=B)]})
        self.assertEqual(len(verdict.violations), 1)
        self.assertIn("under lease epoch 1 from two processes", verdict.violations[0])

    def test_a_step_applied_twice_is_a_violation(self):
        steps = [step(s, 0, s) for s in range(1, 5)] + [step(4, 1, 9)]
        verdict = self.run.write(steps, {0: [told(0, s) for s in range(1, 5)]})
        self.assertEqual(len(verdict.violations), 1)
        self.assertIn("global step 4 applied 2 times", verdict.violations[0])

    def test_a_missing_step_is_a_violation(self):
        steps = [step(s, 0, s) for s in (1, 2, 4)]
        verdict = self.run.write(steps, {0: [told(0, s) for s in (1, 2, 4)]})
        self.assertEqual(len(verdict.violations), 1)
        self.assertIn("1 global steps missing", verdict.violations[0])

    def test_a_sync_step_short_of_its_gradients_is_a_violation(self):
        steps = [step(1, 0, 1, outcome="aggregated", contributions=2), step(1, 1, 1, outcome="aggregated",
                                                                             contributions=2),
                 step(2, 0, 2, outcome="aggregated", contributions=2)]
        verdict = self.run.write(steps, {0: [told(0, 1, outcome="aggregated"), told(0, 2, outcome="aggregated")]})
        self.assertEqual(len(verdict.violations), 1)
        self.assertIn("sync step 2: 1 gradients logged, 2 averaged", verdict.violations[0])

    def test_a_global_step_going_back_is_a_violation(self):
        steps = [step(s, 0, s) for s in range(1, 6)]
        lines = [told(0, s) for s in range(1, 6)]
        lines[4]["global_step"] = 2
        verdict = self.run.write(steps, {0: lines})
        self.assertEqual(len(verdict.violations), 1)
        self.assertIn("the global step went back", verdict.violations[0])

    def test_a_half_written_line_is_a_violation(self):
        steps = [step(s, 0, s) for s in range(1, 3)]
        self.run.write(steps, {0: [told(0, 1), told(0, 2)]})
        with open(self.run.path / "acknowledged" / "worker-0.jsonl", "a") as f:
            f.write('{"worker": 0, "upd')
        verdict = history_check.check(self.run.path)
        self.assertEqual(len(verdict.violations), 1)
        self.assertIn("damaged", verdict.violations[0])


if __name__ == "__main__":
    unittest.main()
