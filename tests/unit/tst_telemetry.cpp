// Telemetry fan-out and the run directory's step log: a slow subscriber
// never slows training and is told what it lost; the files are complete up
// to the last record.
#include "engine/telemetry_hub.h"
#include "formats/run_log.h"
#include "formats/step_log_reader.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QTest>

#include <mutex>
#include <random>

#include <map>

using namespace parasync;
using namespace std::chrono_literals;

namespace {

proto::TelemetryEvent stepEvent(int64_t step, int worker = 0)
{
    proto::TelemetryEvent event;
    auto *s = event.mutable_step();
    s->set_global_step(step);
    s->set_wall_time(1700000000.25 + double(step));
    s->set_worker(worker);
    s->set_worker_clock(step);
    s->set_batch_loss(0.5f);
    s->set_full_loss(std::nanf(""));
    s->set_outcome(proto::APPLIED);
    s->set_contributions(1);
    s->add_parameters(1.5f);
    s->add_parameters(9.75f);
    return event;
}

QStringList lines(const QString &path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return {};
    return QString::fromUtf8(file.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
}

} // namespace

class TestTelemetry : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    // A watcher that lost its stream resumes after the last step it saw:
    // the hub's recent events of later steps come first, in order, then
    // the live ones; a worker's state change (no step) is not replayed.
    void aResumedSubscriptionStartsWithTheStepsAfterItsLast()
    {
        TelemetryHub hub;
        for (int i = 1; i <= 10; ++i)
            hub.publish(stepEvent(i));
        proto::TelemetryEvent joined;
        joined.mutable_worker_state()->mutable_status()->set_worker_index(1);
        hub.publish(joined);
        auto resumed = hub.subscribe(0, 7);
        auto live = hub.subscribe();
        hub.publish(stepEvent(11));
        proto::TelemetryBatch batch;
        QVERIFY(resumed->next(&batch, 1s, 4096, 0ms));
        QCOMPARE(batch.events_size(), 4);
        for (int i = 0; i < 4; ++i)
            QCOMPARE(batch.events(i).step().global_step(), int64_t(8 + i));
        batch.Clear();
        QVERIFY(live->next(&batch, 1s, 4096, 0ms));
        QCOMPARE(batch.events_size(), 1);
        QCOMPARE(batch.events(0).step().global_step(), int64_t(11));
    }

    // What a ps that took over remembers (its predecessor published it)
    // goes to resumed subscriptions of earlier steps only, never to live ones.
    void rememberedEventsReachOnlyThoseWhoResumeBeforeThem()
    {
        TelemetryHub hub;
        auto live = hub.subscribe();
        auto resumedEarly = hub.subscribe(0, 3);
        auto resumedLate = hub.subscribe(0, 5);
        for (int i = 4; i <= 5; ++i)
            hub.remember(stepEvent(i));
        proto::TelemetryBatch batch;
        QVERIFY(resumedEarly->next(&batch, 1s, 4096, 0ms));
        QCOMPARE(batch.events_size(), 2);
        QCOMPARE(batch.events(1).step().global_step(), int64_t(5));
        batch.Clear();
        QVERIFY(resumedLate->next(&batch, 50ms, 4096, 0ms));
        QCOMPARE(batch.events_size(), 0);
        QVERIFY(live->next(&batch, 50ms, 4096, 0ms));
        QCOMPARE(batch.events_size(), 0);
        // ... and to a subscription that resumes after they were remembered.
        auto later = hub.subscribe(0, 0);
        QVERIFY(later->next(&batch, 1s, 4096, 0ms));
        QCOMPARE(batch.events_size(), 2);
    }

    // Only the last kRecentEvents are kept for resuming.
    void theRecentEventsAreBounded()
    {
        TelemetryHub hub;
        const int published = int(TelemetryHub::kRecentEvents) + 100;
        for (int i = 1; i <= published; ++i)
            hub.publish(stepEvent(i));
        auto resumed = hub.subscribe(0, 0);
        proto::TelemetryBatch batch;
        QVERIFY(resumed->next(&batch, 1s, 100000, 0ms));
        QCOMPARE(batch.events_size(), int(TelemetryHub::kRecentEvents));
        QCOMPARE(batch.events(0).step().global_step(), int64_t(101));
    }

    void subscriberReceivesEventsInOrder()
    {
        TelemetryHub hub;
        auto subscription = hub.subscribe();
        for (int i = 1; i <= 100; ++i)
            hub.publish(stepEvent(i));
        proto::TelemetryBatch batch;
        QVERIFY(subscription->next(&batch, 1s));
        QCOMPARE(batch.events_size(), 100);
        QCOMPARE(batch.lost_events(), 0);
        for (int i = 0; i < 100; ++i)
            QCOMPARE(batch.events(i).step().global_step(), i + 1);
    }

    void slowSubscriberLosesTheOldestEventsAndIsToldHowMany()
    {
        TelemetryHub hub;
        auto slow = hub.subscribe(10);
        auto fast = hub.subscribe(1000);
        for (int i = 1; i <= 25; ++i)
            hub.publish(stepEvent(i));
        proto::TelemetryBatch batch;
        slow->next(&batch, 1s);
        QCOMPARE(batch.events_size(), 10);
        QCOMPARE(batch.lost_events(), 15);
        QCOMPARE(batch.events(0).step().global_step(), 16); // the newest ten remain
        QCOMPARE(batch.events(9).step().global_step(), 25);
        proto::TelemetryBatch all;
        fast->next(&all, 1s);
        QCOMPARE(all.events_size(), 25); // one slow subscriber costs the others nothing
        QCOMPARE(all.lost_events(), 0);
    }

    void closingEndsEverySubscriptionAfterItDrains()
    {
        TelemetryHub hub;
        auto subscription = hub.subscribe();
        hub.publish(stepEvent(1));
        hub.close();
        proto::TelemetryBatch batch;
        QVERIFY(!subscription->next(&batch, 1s));
        QCOMPARE(batch.events_size(), 1);
    }

    // A backup that takes over writes what it holds of the last steps: the
    // log gets each step once, whether it is in the tail the backup read,
    // older than that tail (a log of more than a MiB), or new.
    void aTakeOverWritesEveryStepOnceHoweverLongTheLog()
    {
        QTemporaryDir dir;
        constexpr int kWritten = 6000; // about 2 MiB of step lines
        {
            RunLog log(dir.path().toStdString(), {"w", "b"});
            for (int i = 1; i <= kWritten; ++i)
                log.record(stepEvent(i));
        }
        QVERIFY(QFileInfo(dir.filePath(QStringLiteral("steps.jsonl"))).size() > (1 << 20));
        {
            RunLog log(dir.path().toStdString(), {"w", "b"});
            log.skipStepsAlreadyLogged();
            // What the backup holds: from long before the tail to past the end.
            for (int i = 10; i <= kWritten + 5; ++i)
                log.record(stepEvent(i));
        }
        std::map<int, int> perStep;
        for (const QString &line : lines(dir.filePath(QStringLiteral("steps.jsonl"))))
            ++perStep[QJsonDocument::fromJson(line.toUtf8()).object().value(QStringLiteral("global_step")).toInt()];
        QCOMPARE(int(perStep.size()), kWritten + 5);
        for (const auto &[step, count] : perStep)
            QVERIFY2(count == 1,
                     qPrintable(QStringLiteral("global step %1 is in the log %2 times").arg(step).arg(count)));
    }

    void stepLogAndMetricsAreWrittenAsTheRunGoes()
    {
        QTemporaryDir dir;
        {
            RunLog log(dir.path().toStdString(), {"w", "b"});
            for (int i = 1; i <= 3; ++i)
                log.record(stepEvent(i, i % 2));
            proto::TelemetryEvent change;
            change.mutable_mode_change()->set_global_step(3);
            change.mutable_mode_change()->mutable_previous()->set_mode(proto::ASYNC);
            change.mutable_mode_change()->mutable_current()->set_mode(proto::SYNC);
            change.mutable_mode_change()->set_requested_by("a \"quoted\" user");
            log.record(change);
            log.flush();
            // Flushed while the log is still open: what `tail -f` sees.
            const auto steps = lines(dir.filePath(QStringLiteral("steps.jsonl")));
            QCOMPARE(steps.size(), 4);
            for (const auto &line : steps)
                QVERIFY2(QJsonDocument::fromJson(line.toUtf8()).isObject(), qPrintable(line));
            const auto first = QJsonDocument::fromJson(steps[0].toUtf8()).object();
            QCOMPARE(first.value(QStringLiteral("global_step")).toInt(), 1);
            QCOMPARE(first.value(QStringLiteral("w")).toDouble(), 1.5);
            QCOMPARE(first.value(QStringLiteral("full_loss")).type(), QJsonValue::Null);
            QCOMPARE(first.value(QStringLiteral("wall_time")).toDouble(), 1700000001.25);
            const auto mode = QJsonDocument::fromJson(steps[3].toUtf8()).object();
            QCOMPARE(mode.value(QStringLiteral("type")).toString(), QStringLiteral("mode_change"));
            QCOMPARE(mode.value(QStringLiteral("requested_by")).toString(), QStringLiteral("a \"quoted\" user"));

            const auto metrics = lines(dir.filePath(QStringLiteral("metrics.csv")));
            QCOMPARE(metrics.size(), 4);
            QCOMPARE(metrics[0], QStringLiteral("global_step,wall_time,worker,loss,full_loss,w,b"));
            QVERIFY(metrics[1].startsWith(QStringLiteral("1,1700000001.250000,1,0.5,,1.5,9.75")));
        }
        // A restarted run appends: one header, the rows continue.
        {
            RunLog log(dir.path().toStdString(), {"w", "b"});
            log.record(stepEvent(4));
        }
        const auto metrics = lines(dir.filePath(QStringLiteral("metrics.csv")));
        QCOMPARE(metrics.size(), 5);
        QCOMPARE(metrics.filter(QStringLiteral("global_step")).size(), 1);
    }

    // A writer that falls behind holds the recorder back instead of letting
    // its queue grow: a burst far larger than the queue's bound arrives whole
    // and in order.
    void aBurstBeyondTheQueuesBoundLosesNoRecord()
    {
        QTemporaryDir dir;
        constexpr int kBurst = 100000;
        {
            RunLog log(dir.path().toStdString(), {"w", "b"});
            for (int i = 1; i <= kBurst; ++i)
                log.record(stepEvent(i, i % 2));
        }
        const auto steps = lines(dir.filePath(QStringLiteral("steps.jsonl")));
        QCOMPARE(steps.size(), kBurst);
        for (int i : {0, kBurst / 2, kBurst - 1})
            QCOMPARE(QJsonDocument::fromJson(steps[i].toUtf8()).object().value(QStringLiteral("global_step")).toInt(),
                     i + 1);
        QCOMPARE(lines(dir.filePath(QStringLiteral("metrics.csv"))).size(), kBurst + 1);
    }

    // A run directory on a file system that fills: the records stop on a
    // complete line, the failure is said at once with the step they stop
    // at, and once space is back they resume and say what is missing. A
    // real file system (a 128 KiB tmpfs this test mounts), not a stand-in.
    void aFullFileSystemIsReportedAndLeavesCompleteRecords()
    {
        QTemporaryDir mountPoint;
        QVERIFY(mountPoint.isValid());
        const QByteArray where = QFile::encodeName(mountPoint.path());
        if (QProcess::execute(QStringLiteral("mount"),
                              {QStringLiteral("-t"), QStringLiteral("tmpfs"), QStringLiteral("-o"),
                               QStringLiteral("size=128k"), QStringLiteral("tmpfs"), mountPoint.path()})
            != 0)
            QSKIP("mounting a small tmpfs needs root (CI runs as root)");
        const auto unmount = qScopeGuard([&] {
            QProcess::execute(QStringLiteral("umount"), {QStringLiteral("-l"), mountPoint.path()});
        });
        QDir dir(mountPoint.path());
        {
            QFile filler(dir.filePath(QStringLiteral("filler")));
            QVERIFY(filler.open(QIODevice::WriteOnly));
            QVERIFY(filler.write(QByteArray(48 * 1024, 'x')) == 48 * 1024);
        }
        std::mutex saidMutex;
        QStringList said;
        RunLog log(dir.filePath(QStringLiteral("run")).toStdString(), {"w", "b"});
        log.onProblem([&](const std::string &words) {
            std::lock_guard lock(saidMutex);
            said << QString::fromStdString(words);
        });
        int step = 0;
        while (log.problem().empty() && step < 5000) {
            log.record(stepEvent(++step));
            if (step % 50 == 0)
                log.flush();
        }
        log.flush();
        const QString problem = QString::fromStdString(log.problem());
        QVERIFY2(problem.contains(QStringLiteral("No space left on device")), qPrintable(problem));
        static const QRegularExpression stopsAt(QStringLiteral("stop at global step (\\d+), every line up to it"));
        const auto match = stopsAt.match(problem);
        QVERIFY2(match.hasMatch(), qPrintable(problem));
        const int keptThrough = match.captured(1).toInt();
        {
            std::lock_guard lock(saidMutex);
            QCOMPARE(said.size(), 1); // said once, at once
            QCOMPARE(said.front(), problem);
        }

        // What is there is whole: every line parses, the last is the step said.
        const auto readSteps = [&] {
            QFile file(dir.filePath(QStringLiteral("run/steps.jsonl")));
            file.open(QIODevice::ReadOnly);
            return file.readAll();
        };
        QByteArray bytes = readSteps();
        QVERIFY(bytes.endsWith('\n'));
        int last = 0;
        for (const QByteArray &line : bytes.split('\n')) {
            if (line.isEmpty())
                continue;
            const QJsonDocument json = QJsonDocument::fromJson(line);
            QVERIFY2(json.isObject(), line.constData());
            last = json.object().value(QStringLiteral("global_step")).toInt();
        }
        QCOMPARE(last, keptThrough);
        QVERIFY(keptThrough > 0 && keptThrough < step);
        const auto metrics = lines(dir.filePath(QStringLiteral("run/metrics.csv")));
        QVERIFY(!metrics.isEmpty());
        QVERIFY2(metrics.back().count(QLatin1Char(',')) == 6, qPrintable(metrics.back()));

        // Space comes back: the records resume and say what is missing.
        QVERIFY(dir.remove(QStringLiteral("filler")));
        // A step at a time, as a slow run records them, until one is written.
        const auto giveUpAt = std::chrono::steady_clock::now() + 3 * RunLog::kRetryAfter;
        do {
            log.record(stepEvent(++step));
            log.flush();
            if (!log.problem().empty())
                QTest::qWait(50);
        } while (!log.problem().empty() && std::chrono::steady_clock::now() < giveUpAt);
        QVERIFY2(log.problem().empty(), log.problem().c_str());
        {
            std::lock_guard lock(saidMutex);
            QCOMPARE(said.size(), 2);
            QVERIFY2(said.back().contains(QStringLiteral("resume at global step %1").arg(step)),
                     qPrintable(said.back()));
            QVERIFY2(said.back().contains(QStringLiteral("after global step %1 could not be written").arg(keptThrough)),
                     qPrintable(said.back()));
        }
        bytes = readSteps();
        QVERIFY(bytes.endsWith('\n'));
        const QList<QByteArray> all = bytes.trimmed().split('\n');
        QCOMPARE(QJsonDocument::fromJson(all.back()).object().value(QStringLiteral("global_step")).toInt(), step);
    }

    // With a budget the step log is rotated into compressed segments, read
    // back as one log, and its oldest segments go when the records outgrow
    // the budget -- said in records.json and to the log's owner.
    void aBudgetRotatesCompressesAndKeepsTheNewestSteps()
    {
        QTemporaryDir dir;
        constexpr int64_t kBudget = 2 << 20;
        // ~8 MB of step lines, about a fifth of it once compressed, and
        // ~1.3 MB of metrics.csv: more than the budget.
        constexpr int kSteps = 30000;
        QStringList said;
        std::mutex saidMutex;
        {
            RunLog log(dir.path().toStdString(), {"w", "b"});
            log.setMaxBytes(kBudget);
            log.onProblem([&](const std::string &words) {
                std::lock_guard lock(saidMutex);
                said << QString::fromStdString(words);
            });
            // Losses and parameters as a run has them: not a repeated text
            // that compresses a thousandfold.
            std::mt19937 random(7);
            std::uniform_real_distribution<float> value(0.f, 10.f);
            for (int i = 1; i <= kSteps; ++i) {
                proto::TelemetryEvent event = stepEvent(i);
                event.mutable_step()->set_batch_loss(value(random));
                event.mutable_step()->set_parameters(0, value(random));
                event.mutable_step()->set_parameters(1, value(random));
                log.record(event);
            }
        } // the writer and the compressor finish their work
        const QList<int> segments = StepLogReader::segmentIndices(dir.path());
        QVERIFY2(segments.size() >= 1, "the step log was never rotated");
        for (const int n : segments) {
            QVERIFY2(QFileInfo::exists(StepLogReader::segmentPath(dir.path(), n, true)),
                     qPrintable(QStringLiteral("segment %1 is not compressed").arg(n)));
            QVERIFY(!QFileInfo::exists(StepLogReader::segmentPath(dir.path(), n, false)));
        }
        // Read as one: every step from the first kept to the last, once, in order.
        StepLogReader reader(dir.path());
        QByteArray line;
        int first = 0;
        int expected = 0;
        while (reader.next(&line)) {
            const int step = QJsonDocument::fromJson(line).object().value(QStringLiteral("global_step")).toInt();
            if (first == 0)
                first = expected = step;
            QCOMPARE(step, expected);
            ++expected;
        }
        QCOMPARE(expected - 1, kSteps);
        // metrics.csv keeps every step.
        QCOMPARE(lines(dir.filePath(QStringLiteral("metrics.csv"))).size(), kSteps + 1);

        // The oldest went, and the run directory says through which step.
        qint64 total = 0;
        QStringList sizes;
        for (const QFileInfo &file : QDir(dir.path()).entryInfoList(QDir::Files)) {
            total += file.size();
            sizes << QStringLiteral("%1 %2").arg(file.fileName()).arg(file.size());
        }
        QVERIFY2(first > 1, qPrintable(QStringLiteral("nothing was removed: ") + sizes.join(QStringLiteral(", "))));
        QFile records(dir.filePath(QStringLiteral("records.json")));
        QVERIFY(records.open(QIODevice::ReadOnly));
        const QJsonObject note = QJsonDocument::fromJson(records.readAll()).object();
        QCOMPARE(note.value(QStringLiteral("removed_through_global_step")).toInt(), first - 1);
        QVERIFY2(note.value(QStringLiteral("said")).toString().contains(QStringLiteral("--logdir_max_mb")),
                 qPrintable(note.value(QStringLiteral("said")).toString()));
        {
            std::lock_guard lock(saidMutex);
            QVERIFY(!said.isEmpty());
            QVERIFY2(said.back().contains(QStringLiteral("holds global steps after %1").arg(first - 1)),
                     qPrintable(said.back()));
        }
        // Within the budget, give or take the segment being written and the
        // metrics.csv rows written since the last look.
        QVERIFY2(total <= kBudget + kBudget / 8,
                 qPrintable(QStringLiteral("%1 bytes for a budget of %2: ").arg(total).arg(kBudget)
                            + sizes.join(QStringLiteral(", "))));
    }

    void anUnwritableRunDirectoryIsAClearError()
    {
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("a-file"));
        QFile(file).open(QIODevice::WriteOnly);
        try {
            RunLog log(QString(file + QStringLiteral("/run")).toStdString(), {});
            QFAIL("a run directory inside a file was accepted");
        } catch (const std::exception &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("--logdir")), e.what());
        }
    }
};

QTEST_GUILESS_MAIN(TestTelemetry)
#include "tst_telemetry.moc"
