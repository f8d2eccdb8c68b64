// The run directory's readers against their writer: what RunLog writes to
// steps.jsonl and metrics.csv, readStepLog and readMetricsCsv give back,
// field by field; torn lines are counted, not read; a file that is not a
// Parasync metrics.csv is refused by name. And a worker's acknowledgement
// log, which the fault schedule's checker reads beside the step log.
#include "base/error.h"
#include "formats/acknowledgement_log.h"
#include "formats/run_log.h"
#include "formats/step_log_reader.h"
#include "formats/step_records.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <map>

using namespace parasync;

namespace {

proto::TelemetryEvent stepEvent(int64_t step, int worker, proto::PushOutcome outcome)
{
    proto::TelemetryEvent event;
    auto *s = event.mutable_step();
    s->set_global_step(step);
    s->set_wall_time(1700000000.25 + double(step));
    s->set_worker(worker);
    s->set_worker_clock(step * 10 + worker);
    s->set_staleness(worker * 3);
    s->set_computed_from_step(step - 1 - worker * 3);
    s->set_batch_loss(0.5f);
    s->set_full_loss(step % 2 == 0 ? 0.25f : std::nanf(""));
    s->set_outcome(outcome);
    s->set_contributions(1);
    s->set_compute_us(1000 + step);
    s->set_push_us(200);
    s->set_wait_us(worker == 1 ? 5000 : 0);
    s->set_learning_rate_scale(worker == 1 ? 0.25f : 1.0f);
    s->add_parameters(1.5f);
    s->add_parameters(9.75f);
    return event;
}

// Every record handed to it, as the visitor saw them.
class Recorder : public StepLogVisitor
{
public:
    void parameterNames(const std::vector<std::string> &names) override { parameters.push_back(names); }
    void metricNames(const std::vector<std::string> &names) override { metrics.push_back(names); }
    void variableNames(const std::vector<std::string> &names) override { variables.push_back(names); }
    void step(const StepRecord &step) override { steps.push_back(step); }
    void modeChange(const ModeMarker &change) override { changes.push_back(change); }
    void event(const proto::TelemetryEvent &event) override { events.push_back(event); }

    std::vector<std::vector<std::string>> parameters, metrics, variables;
    std::vector<StepRecord> steps;
    std::vector<ModeMarker> changes;
    std::vector<proto::TelemetryEvent> events;
};

proto::TelemetryEvent stepEvent(int64_t step, int worker, proto::PushOutcome outcome, int64_t leaseEpoch)
{
    proto::TelemetryEvent event = stepEvent(step, worker, outcome);
    event.mutable_step()->set_lease_epoch(leaseEpoch);
    return event;
}

// What a process that takes over writes after its replay.
proto::TelemetryEvent failoverEvent(int64_t globalStep, int64_t epoch)
{
    proto::TelemetryEvent event;
    event.mutable_failover()->set_global_step(globalStep);
    event.mutable_failover()->set_epoch(epoch);
    event.mutable_failover()->set_new_primary("10.0.0.2:2222");
    event.mutable_failover()->set_old_primary("10.0.0.1:2222");
    return event;
}

void append(const QString &path, const QByteArray &text)
{
    QFile file(path);
    QVERIFY(file.open(QIODevice::Append));
    QCOMPARE(file.write(text), text.size());
}

// The step log's step records in file order: global step and lease epoch.
std::vector<std::pair<int64_t, int64_t>> stepsIn(const QString &directory)
{
    StepLogReader reader(directory);
    Recorder seen;
    readStepLog(reader, seen);
    std::vector<std::pair<int64_t, int64_t>> steps;
    for (const StepRecord &step : seen.steps)
        steps.emplace_back(step.globalStep, step.leaseEpoch);
    return steps;
}

} // namespace

class TestStepRecords : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void whatRunLogWritesTheReadersGiveBack()
    {
        QTemporaryDir dir;
        {
            RunLog log(dir.path().toStdString(), {"w", "b"}, {"heldout_loss", "heldout_accuracy"}, {"hidden/w"});
            proto::TelemetryEvent joined;
            joined.mutable_worker_state()->set_wall_time(1700000000.0);
            joined.mutable_worker_state()->mutable_status()->set_worker_index(1);
            joined.mutable_worker_state()->mutable_status()->set_phase(proto::TRAINING);
            log.record(joined);
            log.record(stepEvent(1, 0, proto::APPLIED));
            log.record(stepEvent(2, 1, proto::DROPPED_STALE));
            proto::TelemetryEvent measured = stepEvent(2, 0, proto::APPLIED);
            measured.mutable_step()->add_metrics(0.125f);
            measured.mutable_step()->add_metrics(std::nanf("")); // not evaluated this time
            auto *summary = measured.mutable_step()->add_variable_summaries();
            summary->set_norm(3.0f);
            summary->set_distance_from_start(0.5f);
            summary->set_update_per_step(0.01f);
            auto *probe = measured.mutable_step()->mutable_staleness_probe();
            probe->set_stale_step(0);
            probe->set_fresh_step(2);
            probe->set_cosine(0.75f);
            probe->set_relative_error(0.5f);
            measured.mutable_step()->set_lease_epoch(3); // a replicated ps:0's
            log.record(measured);
            proto::TelemetryEvent change;
            change.mutable_mode_change()->set_global_step(2);
            change.mutable_mode_change()->set_wall_time(1700000002.5);
            change.mutable_mode_change()->mutable_previous()->set_mode(proto::ASYNC);
            change.mutable_mode_change()->mutable_current()->set_mode(proto::SSP);
            change.mutable_mode_change()->mutable_current()->set_staleness(4);
            change.mutable_mode_change()->set_requested_by("parasync-node --set_mode");
            log.record(change);
            proto::TelemetryEvent checkpoint;
            checkpoint.mutable_checkpoint()->set_global_step(2);
            checkpoint.mutable_checkpoint()->set_path("model.ckpt-2");
            log.record(checkpoint);
            log.record(stepEvent(3, 1, proto::APPLIED));
        }
        // A killed writer's torn last lines.
        append(dir.filePath(QStringLiteral("steps.jsonl")), "{\"type\":\"step\",\"global_st");
        append(dir.filePath(QStringLiteral("metrics.csv")), "4,1700000004.25,0,0.5");

        StepLogReader reader(dir.path());
        Recorder seen;
        const StepLogCounts counts = readStepLog(reader, seen);
        QCOMPARE(counts.records, int64_t(7));
        QCOMPARE(counts.skippedLines, int64_t(1));
        // Each list of names once, in the writer's order.
        QCOMPARE(seen.parameters, (std::vector<std::vector<std::string>>{{"w", "b"}}));
        QCOMPARE(seen.metrics, (std::vector<std::vector<std::string>>{{"heldout_loss", "heldout_accuracy"}}));
        QCOMPARE(seen.variables, (std::vector<std::vector<std::string>>{{"hidden/w"}}));
        QCOMPARE(seen.steps.size(), size_t(4));
        const StepRecord &first = seen.steps[0];
        QCOMPARE(first.globalStep, int64_t(1));
        QCOMPARE(first.wallTime, 1700000001.25);
        QCOMPARE(first.workerClock, int64_t(10));
        QCOMPARE(first.computeUs, int64_t(1001));
        QVERIFY(std::isnan(first.fullLoss));
        QCOMPARE(first.parameters, (std::vector<float>{1.5f, 9.75f}));
        QVERIFY(first.metrics.empty());
        QVERIFY(!first.probe);
        const StepRecord &dropped = seen.steps[1];
        QCOMPARE(dropped.outcome, proto::DROPPED_STALE);
        QVERIFY(!dropped.counted());
        QCOMPARE(dropped.staleness, int64_t(3));
        QCOMPARE(dropped.waitUs, int64_t(5000));
        QCOMPARE(dropped.learningRateScale, 0.25f);
        const StepRecord &measuredStep = seen.steps[2];
        QCOMPARE(measuredStep.fullLoss, 0.25f);
        QCOMPARE(measuredStep.metrics.size(), size_t(2));
        QCOMPARE(measuredStep.metrics[0], 0.125f);
        QVERIFY(std::isnan(measuredStep.metrics[1]));
        QCOMPARE(measuredStep.variables.size(), size_t(1));
        QCOMPARE(measuredStep.variables[0].norm, 3.0f);
        QCOMPARE(measuredStep.variables[0].updatePerStep, 0.01f);
        QVERIFY(measuredStep.probe);
        QCOMPARE(measuredStep.probe->freshStep - measuredStep.probe->staleStep, int64_t(2));
        QCOMPARE(measuredStep.probe->cosine, 0.75f);
        QCOMPARE(measuredStep.leaseEpoch, int64_t(3));
        QCOMPARE(measuredStep.parameters, first.parameters); // the epoch is no parameter
        QCOMPARE(first.leaseEpoch, int64_t(0));
        QCOMPARE(seen.changes.size(), size_t(1));
        QCOMPARE(seen.changes[0].current.mode(), proto::SSP);
        QCOMPARE(seen.changes[0].current.staleness(), 4);
        QCOMPARE(seen.changes[0].previous.mode(), proto::ASYNC);
        QCOMPARE(seen.changes[0].requestedBy, std::string("parasync-node --set_mode"));
        QCOMPARE(seen.events.size(), size_t(2));
        QCOMPARE(seen.events[0].worker_state().status().phase(), proto::TRAINING);
        QCOMPARE(seen.events[0].worker_state().status().worker_index(), 1);
        QCOMPARE(seen.events[1].checkpoint().path(), std::string("model.ckpt-2"));

        // metrics.csv: the applied steps only, the same values, the
        // parameters told from the metrics by their empty cells.
        const MetricsCsv csv = readMetricsCsv(dir.filePath(QStringLiteral("metrics.csv")));
        QCOMPARE(csv.parameterNames, (std::vector<std::string>{"w", "b"}));
        QCOMPARE(csv.metricNames, (std::vector<std::string>{"heldout_loss", "heldout_accuracy"}));
        QCOMPARE(csv.skippedLines, int64_t(1));
        QCOMPARE(csv.steps.size(), size_t(3));
        for (size_t i = 0; i < csv.steps.size(); ++i) {
            const StepRecord &fromLog = seen.steps[i == 0 ? 0 : i + 1];
            const StepRecord &row = csv.steps[i];
            QCOMPARE(row.globalStep, fromLog.globalStep);
            QCOMPARE(row.worker, fromLog.worker);
            QVERIFY(std::abs(row.wallTime - fromLog.wallTime) < 1e-6);
            QCOMPARE(row.batchLoss, fromLog.batchLoss);
            QCOMPARE(std::isnan(row.fullLoss), std::isnan(fromLog.fullLoss));
            QCOMPARE(row.parameters, fromLog.parameters);
            QCOMPARE(row.staleness, int64_t(-1)); // metrics.csv does not know it
        }
        QCOMPARE(csv.steps[1].metrics.size(), size_t(2));
        QCOMPARE(csv.steps[1].metrics[0], 0.125f);
        QVERIFY(csv.steps[0].metrics.empty()); // nothing measured on that row
        // Each worker's clock counted by its rows.
        QCOMPARE(csv.steps[0].workerClock, int64_t(1));
        QCOMPARE(csv.steps[1].workerClock, int64_t(2));
        QCOMPARE(csv.steps[2].workerClock, int64_t(1));
    }

    void aTakeoverSkipsWhatTheOldPrimaryWroteAndNothingAfter()
    {
        // One --logdir, two processes of a pair in turn. The old primary
        // wrote steps 1 and 2, and step 3 as a deposed primary (an update
        // that did not survive: the new one took over at 2).
        QTemporaryDir dir;
        {
            RunLog old(dir.path().toStdString(), {"w", "b"}, {}, {});
            for (int64_t step = 1; step <= 3; ++step) {
                proto::TelemetryEvent e = stepEvent(step, 0, proto::APPLIED);
                e.mutable_step()->set_lease_epoch(1);
                old.record(e);
            }
        }
        RunLog taker(dir.path().toStdString(), {"w", "b"}, {}, {});
        taker.skipStepsAlreadyLogged();
        // Its replay of the old primary's last events: those written are skipped.
        proto::TelemetryEvent replayed = stepEvent(2, 0, proto::APPLIED);
        replayed.mutable_step()->set_lease_epoch(1);
        taker.record(replayed);
        taker.stopSkipping();
        // Its own step 3, by the same worker at the same clock (the worker
        // sent the gradient again): written, as the fault schedule's checker
        // found it was not.
        proto::TelemetryEvent own = stepEvent(3, 0, proto::APPLIED);
        own.mutable_step()->set_lease_epoch(2);
        taker.record(own);
        taker.flush();
        StepLogReader reader(dir.path());
        Recorder seen;
        readStepLog(reader, seen);
        QCOMPARE(seen.steps.size(), size_t(4));
        QCOMPARE(seen.steps[1].globalStep, int64_t(2)); // once
        QCOMPARE(seen.steps[2].leaseEpoch, int64_t(1));
        QCOMPARE(seen.steps[3].globalStep, int64_t(3));
        QCOMPARE(seen.steps[3].leaseEpoch, int64_t(2));
    }

    // The fault schedule's finding: ps:0's primary, stopped (SIGSTOP) with
    // step records queued, was deposed; the backup that took over wrote
    // those steps from what it held, and the old primary, resumed, wrote
    // them again. Both logs are open at once here, as the two processes'
    // are, and each writes in batches of its own.
    void aDeposedPrimaryThatWritesLateDoesNotLogAStepTwice()
    {
        QTemporaryDir dir;
        RunLog deposed(dir.path().toStdString(), {"w", "b"}, {}, {});
        deposed.record(stepEvent(1, 0, proto::APPLIED, 1));
        deposed.flush();
        RunLog taker(dir.path().toStdString(), {"w", "b"}, {}, {});
        taker.skipStepsAlreadyLogged();
        // The old primary's sync step 2, two gradients, from what it held.
        taker.record(stepEvent(2, 0, proto::AGGREGATED, 1));
        taker.record(stepEvent(2, 1, proto::AGGREGATED, 1));
        taker.stopSkipping();
        taker.record(failoverEvent(2, 2));
        taker.record(stepEvent(3, 0, proto::APPLIED, 2)); // its own
        taker.flush();
        // The deposed one's queue, in two batches: the same step 2, and its
        // own step 3 under its old epoch (applied, never acknowledged: the
        // backup never got it), by the same worker at the same clock.
        deposed.record(stepEvent(2, 0, proto::AGGREGATED, 1));
        deposed.flush();
        deposed.record(stepEvent(2, 1, proto::AGGREGATED, 1));
        deposed.record(stepEvent(3, 0, proto::APPLIED, 1));
        deposed.record(stepEvent(4, 1, proto::APPLIED, 1)); // another never acknowledged
        deposed.flush();
        // The superseded step 4 is logged (a checker leaves it out by its
        // epoch); each of the others once, as the taker wrote it.
        QCOMPARE(stepsIn(dir.path()),
                 (std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 1}, {2, 1}, {3, 2}, {4, 1}}));
        const MetricsCsv csv = readMetricsCsv(dir.filePath(QStringLiteral("metrics.csv")));
        QCOMPARE(csv.steps.size(), size_t(5)); // a row for each record, once
    }

    // The other order: the old primary's late records are in the log before
    // the taker writes what it held; and the taker's own steps after the
    // replay are new updates, written whatever numbers they share with the
    // old one's records that did not survive.
    void aTakerDoesNotLogAgainWhatTheDeposedWroteLate()
    {
        QTemporaryDir dir;
        RunLog deposed(dir.path().toStdString(), {"w", "b"}, {}, {});
        RunLog taker(dir.path().toStdString(), {"w", "b"}, {}, {});
        taker.skipStepsAlreadyLogged(); // nothing of step 2 in the log yet
        deposed.record(stepEvent(2, 0, proto::AGGREGATED, 1));
        deposed.record(stepEvent(2, 1, proto::AGGREGATED, 1));
        deposed.record(stepEvent(3, 0, proto::APPLIED, 1)); // never acknowledged
        deposed.flush();
        taker.record(stepEvent(2, 0, proto::AGGREGATED, 1));
        taker.flush();
        taker.record(stepEvent(2, 1, proto::AGGREGATED, 1));
        taker.stopSkipping();
        taker.record(failoverEvent(2, 2));
        taker.record(stepEvent(3, 0, proto::APPLIED, 2)); // its own: the worker sent the gradient again
        taker.flush();
        QCOMPARE(stepsIn(dir.path()), (std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {2, 1}, {3, 1}, {3, 2}}));
    }

    void aDeposedPrimaryFollowsTheLogItsTakerRotated()
    {
        // The taker rotated steps.jsonl while the other was stopped: the
        // late batch goes to the new steps.jsonl, without the steps the
        // taker wrote, and its own rotations take the next free segment
        // numbers instead of renaming over the taker's.
        QTemporaryDir dir;
        RunLog deposed(dir.path().toStdString(), {"w", "b"}, {}, {});
        deposed.setMaxBytes(1024 * 1024); // 64 KiB segments
        RunLog taker(dir.path().toStdString(), {"w", "b"}, {}, {});
        taker.setMaxBytes(1024 * 1024);
        taker.record(failoverEvent(0, 2));
        int64_t step = 1;
        while (StepLogReader::segmentIndices(dir.path()).isEmpty()) {
            taker.record(stepEvent(step++, 0, proto::APPLIED, 2));
            taker.flush();
        }
        deposed.record(stepEvent(step - 1, 0, proto::APPLIED, 2)); // the taker's last, in segment 1
        deposed.flush();
        while (StepLogReader::segmentIndices(dir.path()).size() < 3) {
            deposed.record(stepEvent(step++, 0, proto::APPLIED, 2));
            deposed.flush();
        }
        taker.record(stepEvent(step++, 0, proto::APPLIED, 2));
        taker.flush();
        // Every step once, 1 to the last (compared as counts: QCOMPARE
        // prints only the start of a long vector).
        std::map<int64_t, int> times;
        for (const auto &[s, epoch] : stepsIn(dir.path()))
            ++times[s];
        for (int64_t s = 1; s < step; ++s)
            QVERIFY2(times[s] == 1, qPrintable(QStringLiteral("step %1 is in the log %2 times").arg(s).arg(times[s])));
        QCOMPARE(times.size(), size_t(step - 1));
    }

    void aSegmentCompressedWhileTheLogIsReadIsReadCompressed()
    {
        // The reader lists steps.jsonl.1 while it is plain; ps:0's
        // compressor replaces it with steps.jsonl.1.gz before the reader
        // gets to it. It was read as removed (its budget) and skipped whole.
        QTemporaryDir dir;
        append(dir.filePath(QStringLiteral("steps.jsonl.1")), "{\"type\":\"step\",\"global_step\":1}\n");
        append(dir.filePath(QStringLiteral("steps.jsonl")), "{\"type\":\"step\",\"global_step\":2}\n");
        StepLogReader reader(dir.path());
        QCOMPARE(QProcess::execute(QStringLiteral("gzip"), {dir.filePath(QStringLiteral("steps.jsonl.1"))}), 0);
        QByteArray line;
        QList<QByteArray> lines;
        while (reader.next(&line))
            lines << line;
        QCOMPARE(lines.size(), 2);
        QVERIFY(lines[0].contains("\"global_step\":1"));
    }

    void aWorkersAcknowledgementsAreAppendedWholeLines()
    {
        // --acknowledgement_log: a worker started again appends to the file
        // its last life left, one JSON line per acknowledged step.
        QTemporaryDir dir;
        const std::string path = dir.filePath(QStringLiteral("worker-1.jsonl")).toStdString();
        Acknowledgement a;
        a.worker = 1;
        a.workerClock = 57;
        a.update = 412;
        a.globalStep = 413;
        a.outcome = proto::AGGREGATED;
        a.leaseEpochs = {2, 1};
        a.answeredBy = {"10.232.3.2:2222", "host \"b\":2222"};
        a.time = 1796000000.125;
        for (int life = 0; life < 2; ++life) {
            AcknowledgementLog log(path);
            QVERIFY(log.record(a).empty());
            ++a.update;
        }
        QFile file(QString::fromStdString(path));
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QList<QByteArray> lines = file.readAll().split('\n');
        QCOMPARE(lines.size(), 3); // two lines and the empty rest after the last newline
        QVERIFY(lines[2].isEmpty());
        QJsonParseError error;
        const QJsonObject first = QJsonDocument::fromJson(lines[0], &error).object();
        QCOMPARE(error.error, QJsonParseError::NoError);
        QCOMPARE(first.value(QStringLiteral("worker")).toInt(), 1);
        QCOMPARE(first.value(QStringLiteral("worker_clock")).toInt(), 57);
        QCOMPARE(first.value(QStringLiteral("update")).toInt(), 412);
        QCOMPARE(first.value(QStringLiteral("global_step")).toInt(), 413);
        QCOMPARE(first.value(QStringLiteral("outcome")).toString(), QStringLiteral("aggregated"));
        QCOMPARE(first.value(QStringLiteral("lease_epochs")).toArray().at(0).toInt(), 2);
        QCOMPARE(first.value(QStringLiteral("answered_by")).toArray().at(1).toString(),
                 QStringLiteral("host \"b\":2222"));
        QCOMPARE(first.value(QStringLiteral("time")).toDouble(), 1796000000.125);
        QCOMPARE(QJsonDocument::fromJson(lines[1]).object().value(QStringLiteral("update")).toInt(), 413);

        // A file it cannot open is refused at start, saying which flag.
        try {
            AcknowledgementLog nowhere(dir.filePath(QStringLiteral("no/such/dir/w.jsonl")).toStdString());
            QFAIL("opened a file in a directory that does not exist");
        } catch (const InputError &e) {
            QVERIFY2(std::string(e.what()).find("--acknowledgement_log=") != std::string::npos, e.what());
        }
    }

    void aFileThatIsNotAMetricsCsvIsRefusedByName()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("metrics.csv"));
        append(path, "step,time,value\n1,2,3\n");
        try {
            readMetricsCsv(path);
            QFAIL("a CSV without global_step, wall_time and loss was read");
        } catch (const InputError &e) {
            const QString message = QString::fromStdString(e.what());
            QVERIFY2(message.contains(path) && message.contains(QStringLiteral("step,time,value"))
                         && message.contains(QStringLiteral("is it a Parasync metrics.csv?")),
                     qPrintable(message));
        }
        QVERIFY_THROWS_EXCEPTION(InputError, readMetricsCsv(dir.filePath(QStringLiteral("missing.csv"))));
    }
};

QTEST_GUILESS_MAIN(TestStepRecords)
#include "tst_step_records.moc"
