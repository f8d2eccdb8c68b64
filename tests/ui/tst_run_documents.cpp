// What a real run exports besides the charts' images: the step timeline as a
// Chrome trace (loadable in Perfetto / chrome://tracing), every chart as a
// vector PDF, the one-page run report, and `parasync --headless --open` on a
// --logdir that holds only the chief's TensorBoard event files.
#include "formats/event_file.h"
#include "support/cluster_harness.h"
#include "ui/charts/chart_exporter.h"
#include "ui/charts/run_charts_view.h"
#include "ui/models/run_loader.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <map>

using namespace parasync;
using namespace parasync::testing;
using namespace parasync::ui;
using namespace std::chrono_literals;

namespace {

// Runs a poppler tool; empty when it is not installed or fails.
QString poppler(const QString &tool, const QStringList &arguments)
{
    const QString program = QStandardPaths::findExecutable(tool);
    if (program.isEmpty())
        return {};
    QProcess process;
    process.start(program, arguments);
    if (!process.waitForFinished(60000) || process.exitCode() != 0)
        return {};
    return QString::fromUtf8(process.readAllStandardOutput());
}

QString pdfText(const QString &path)
{
    // pdftotext breaks lines as laid out (join them so phrases match) and
    // keeps the fonts' ligatures (spell them out).
    return poppler(QStringLiteral("pdftotext"), {path, QStringLiteral("-")})
        .simplified()
        .replace(QChar(0xFB01), QStringLiteral("fi"))
        .replace(QChar(0xFB02), QStringLiteral("fl"));
}

} // namespace

class TestRunDocuments : public QObject
{
    Q_OBJECT

    QTemporaryDir m_dir;
    QString m_logdir;
    QString m_export;
    std::shared_ptr<const RunSnapshot> m_run;
    QList<ExportableChart *> m_charts;
    std::unique_ptr<RunChartsView> m_view;

private Q_SLOTS:
    void initTestCase()
    {
        // A real cluster: async, then sync from global step ~1000 on, so the
        // trace has sync-barrier waits and the report a mode change.
        m_logdir = m_dir.filePath(QStringLiteral("run"));
        LocalCluster cluster(1, 2, {QStringLiteral("--mode=async"), QStringLiteral("--last_step=4000")}, m_logdir);
        cluster.startAll();
        QVERIFY(cluster.waitForStatus([](const auto &status) { return status.global_step() >= 1000; }, 60s));
        proto::ModeConfig sync;
        sync.set_mode(proto::SYNC);
        QVERIFY(cluster.setMode(sync).ok());
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report), qPrintable(report));

        const LoadedRun run = RunLoader::loadNow(m_logdir);
        QVERIFY2(run.snapshot, qPrintable(run.error));
        m_run = run.snapshot;
        QCOMPARE(m_run->modeChanges.size(), size_t(1));
        m_view = std::make_unique<RunChartsView>();
        m_view->resize(1200, 800);
        m_view->setSnapshot(m_run);
        m_export = m_dir.filePath(QStringLiteral("export"));
        QStringList written;
        QString error;
        QVERIFY2(m_view->exportAll(m_export, &written, &error, m_logdir), qPrintable(error));
        m_charts = m_view->charts();
    }

    void traceHasEveryWorkersStepsAsComputePushAndWait()
    {
        QFile file(m_export + QStringLiteral("/trace.json"));
        QVERIFY(file.open(QIODevice::ReadOnly));
        QJsonParseError parseError;
        const QJsonDocument document = QJsonDocument::fromJson(file.readAll(), &parseError);
        QVERIFY2(parseError.error == QJsonParseError::NoError, qPrintable(parseError.errorString()));
        const QJsonArray events = document.object().value(QStringLiteral("traceEvents")).toArray();
        QVERIFY(!events.isEmpty());

        // Thread names: ps:0 and each worker with its address.
        std::map<int, QString> threadNames;
        for (const auto &value : events) {
            const QJsonObject e = value.toObject();
            if (e.value(QStringLiteral("ph")).toString() == QStringLiteral("M")
                && e.value(QStringLiteral("name")).toString() == QStringLiteral("thread_name"))
                threadNames[e.value(QStringLiteral("tid")).toInt()]
                    = e.value(QStringLiteral("args")).toObject().value(QStringLiteral("name")).toString();
        }
        QCOMPARE(threadNames.size(), size_t(3));
        QVERIFY(threadNames.begin()->second.startsWith(QStringLiteral("ps:0 (127.0.0.1:")));
        int workerTid[2] = {-1, -1};
        for (const auto &[tid, name] : threadNames)
            for (int w = 0; w < 2; ++w)
                if (name.startsWith(QStringLiteral("worker:%1").arg(w))
                    && name.endsWith(QString::fromStdString(m_run->workerHosts.at(size_t(w)))))
                    workerTid[w] = tid;
        QVERIFY(workerTid[0] >= 0 && workerTid[1] >= 0);

        // The step log, per worker: steps and their compute times.
        std::map<int, int> stepsOf;
        std::map<int, qint64> computeUsOf;
        for (const QJsonObject &record : readStepLog(m_logdir)) {
            if (record.value(QStringLiteral("type")).toString() != QStringLiteral("step"))
                continue;
            const int worker = record.value(QStringLiteral("worker")).toInt();
            ++stepsOf[worker];
            computeUsOf[worker] += record.value(QStringLiteral("compute_us")).toInteger();
        }

        bool sawModeChange = false;
        for (int w = 0; w < 2; ++w) {
            struct Span
            {
                QString name;
                double ts, dur;
            };
            std::vector<Span> spans;
            for (const auto &value : events) {
                const QJsonObject e = value.toObject();
                if (e.value(QStringLiteral("ph")).toString() == QStringLiteral("i"))
                    sawModeChange
                        |= e.value(QStringLiteral("name")).toString().startsWith(QStringLiteral("mode: sync"));
                if (e.value(QStringLiteral("ph")).toString() != QStringLiteral("X")
                    || e.value(QStringLiteral("tid")).toInt() != workerTid[w])
                    continue;
                spans.push_back({e.value(QStringLiteral("name")).toString(), e.value(QStringLiteral("ts")).toDouble(),
                                 e.value(QStringLiteral("dur")).toDouble()});
                QVERIFY(spans.back().ts >= 0 && spans.back().dur >= 0);
            }
            std::map<QString, int> count;
            double computeUs = 0;
            for (const Span &s : spans) {
                ++count[s.name];
                if (s.name == QStringLiteral("compute"))
                    computeUs += s.dur;
            }
            // One compute per step in the step log, a push after each (the
            // last one's round trip is not measured), and sync-barrier waits.
            QCOMPARE(count[QStringLiteral("compute")], stepsOf[w]);
            QVERIFY(count[QStringLiteral("push")] >= stepsOf[w] - 1);
            QVERIFY2(count[QStringLiteral("wait")] > 0, qPrintable(QStringLiteral("worker:%1 never waited").arg(w)));
            QVERIFY2(std::abs(computeUs - double(computeUsOf[w])) <= 0.02 * double(computeUsOf[w]) + 50,
                     qPrintable(QStringLiteral("%1 vs %2").arg(computeUs).arg(computeUsOf[w])));
            // compute and push alternate without overlapping; every wait
            // lies inside a push.
            std::stable_sort(spans.begin(), spans.end(), [](const Span &a, const Span &b) { return a.ts < b.ts; });
            double busyUntil = 0, pushFrom = -1, pushTo = -1;
            for (const Span &s : spans) {
                if (s.name == QStringLiteral("wait")) {
                    QVERIFY(s.ts >= pushFrom - 0.5 && s.ts + s.dur <= pushTo + 0.5);
                    continue;
                }
                QVERIFY2(s.ts >= busyUntil - 0.5,
                         qPrintable(QStringLiteral("%1 at %2 overlaps").arg(s.name).arg(s.ts)));
                busyUntil = s.ts + s.dur;
                if (s.name == QStringLiteral("push")) {
                    pushFrom = s.ts;
                    pushTo = s.ts + s.dur;
                }
            }
        }
        QVERIFY(sawModeChange);
    }

    void everyChartIsAOnePageVectorPdfWithItsText()
    {
        if (QStandardPaths::findExecutable(QStringLiteral("pdfinfo")).isEmpty())
            QSKIP("needs poppler-utils (pdfinfo, pdftotext, pdfimages; scripts/setup.sh installs them)");
        for (ExportableChart *chart : std::as_const(m_charts)) {
            const QString path = m_export + QLatin1Char('/') + chart->exportName() + QStringLiteral(".pdf");
            QFile file(path);
            QVERIFY2(file.open(QIODevice::ReadOnly) && file.read(5) == "%PDF-", qPrintable(path));
            const QString info = poppler(QStringLiteral("pdfinfo"), {path});
            QVERIFY2(info.contains(QRegularExpression(QStringLiteral("Pages:\\s+1\\n"))), qPrintable(info));
            QVERIFY2(
                info.contains(
                    QStringLiteral("%1 x %2 pts").arg(chart->exportSize().width()).arg(chart->exportSize().height())),
                qPrintable(info));
            // Vector: no raster image inside; the title is text.
            const QStringList images = poppler(QStringLiteral("pdfimages"), {QStringLiteral("-list"), path})
                                           .split(QLatin1Char('\n'), Qt::SkipEmptyParts);
            QCOMPARE(images.size(), 2); // the two header lines of an empty list
            // The heading drawn may say more than title(); its longest word is there.
            QString word;
            for (const QString &w : chart->title().split(QRegularExpression(QStringLiteral("[^A-Za-z]+"))))
                if (w.size() > word.size())
                    word = w;
            QVERIFY2(pdfText(path).contains(word), qPrintable(chart->title()));
        }
        const QString loss = pdfText(m_export + QStringLiteral("/loss.pdf"));
        QVERIFY(loss.contains(QStringLiteral("global step")) && loss.contains(QStringLiteral("worker:1 batch loss")));
        QVERIFY(loss.contains(QStringLiteral("sync @ %1").arg(m_run->modeChanges.front().globalStep)));
    }

    void runReportIsOnePageWithTheClusterFlagsModesAndFinalFigures()
    {
        if (QStandardPaths::findExecutable(QStringLiteral("pdfinfo")).isEmpty())
            QSKIP("needs poppler-utils (scripts/setup.sh installs them)");
        const QString path = m_export + QStringLiteral("/run_report.pdf");
        const QString info = poppler(QStringLiteral("pdfinfo"), {path});
        QVERIFY2(info.contains(QRegularExpression(QStringLiteral("Pages:\\s+1\\n"))), qPrintable(info));
        QVERIFY(info.contains(QStringLiteral("842 x 595 pts")));
        const QString text = pdfText(path);
        for (const QString &expected :
             {QStringLiteral("Parasync run report"), QStringLiteral("Cluster"), QStringLiteral("Flags"),
              QStringLiteral("Mode changes"), QStringLiteral("Final figures"), QStringLiteral("--last_step=4000"),
              QStringLiteral("started in async"),
              QStringLiteral("step %1: sync").arg(m_run->modeChanges.front().globalStep),
              QStringLiteral("global step 4000 of 4000, finished"), QString::fromStdString(m_run->psHosts.front()),
              QString::fromStdString(m_run->workerHosts.back()), QStringLiteral("worker:1:"),
              QStringLiteral("Loss by global step"), QStringLiteral("Step interleaving")})
            QVERIFY2(text.contains(expected), qPrintable(expected + QStringLiteral(" not in: ") + text.left(1500)));
        // The final w and b are the run's: metrics.csv's last row.
        const MetricsTable metrics = readMetrics(m_logdir);
        const QStringList &last = metrics.rows.back();
        const double w = last.at(metrics.column(QStringLiteral("w"))).toDouble();
        const double b = last.at(metrics.column(QStringLiteral("b"))).toDouble();
        QVERIFY2(
            text.contains(QStringLiteral("w = %1, b = %2").arg(QString::number(w, 'g', 6), QString::number(b, 'g', 6))),
            qPrintable(text.left(1500)));
        QVERIFY(std::abs(w - 2) < 0.1 && std::abs(b - 10) < 0.1);

        // The charts on the page can be read: their axis titles ("global
        // step" under the timeline, loss and parameter charts) print at 3.5 pt
        // or more, not shrunk with the whole chart into its cell.
        const QString boxes
            = poppler(QStringLiteral("pdftotext"), {QStringLiteral("-bbox"), path, QStringLiteral("-")});
        const QRegularExpression word(
            QStringLiteral("yMin=\"([0-9.]+)\" xMax=\"[0-9.]+\" yMax=\"([0-9.]+)\">global</word>"));
        QList<double> heights;
        for (auto it = word.globalMatch(boxes); it.hasNext();) {
            const auto match = it.next();
            heights << match.captured(2).toDouble() - match.captured(1).toDouble();
        }
        QVERIFY2(heights.size() >= 4, qPrintable(boxes.left(2000)));
        for (const double height : heights)
            QVERIFY2(height >= 3.5, qPrintable(QStringLiteral("a chart label %1 pt high").arg(height)));
    }

    void headlessOpenOfAnEventFilesOnlyLogdirExportsTheChiefsRun()
    {
        // What a chief on another machine leaves: its event files only.
        const auto files = findEventFiles(m_logdir.toStdString());
        QCOMPARE(files.size(), size_t(1));
        const QString eventFile = QString::fromStdString(files.front());
        const QString onlyEvents = m_dir.filePath(QStringLiteral("chief-only"));
        QVERIFY(QDir().mkpath(onlyEvents));
        QVERIFY(QFile::copy(eventFile, onlyEvents + QLatin1Char('/') + QFileInfo(eventFile).fileName()));

        const QString out = m_dir.filePath(QStringLiteral("chief-export"));
        QProcess app;
        app.setProcessChannelMode(QProcess::MergedChannels);
        app.start(QStringLiteral(PARASYNC_APP), {QStringLiteral("--headless"), QStringLiteral("--open=") + onlyEvents,
                                                 QStringLiteral("--export=") + out});
        QVERIFY(app.waitForFinished(120000));
        const QString output = QString::fromUtf8(app.readAll());
        QVERIFY2(app.exitStatus() == QProcess::NormalExit && app.exitCode() == 0, qPrintable(output));
        QVERIFY2(output.contains(QStringLiteral("global step 4000")), qPrintable(output));
        for (const char *name : {"loss.png", "loss.pdf", "parameters.csv", "run_report.pdf", "trace.json"})
            QVERIFY2(QFile::exists(out + QLatin1Char('/') + QLatin1String(name)), name);
        // The w series is the event file's: one point per summary.
        QFile csv(out + QStringLiteral("/parameters.csv"));
        QVERIFY(csv.open(QIODevice::ReadOnly));
        const QString table = QString::fromUtf8(csv.readAll());
        const auto events = readEventFile(eventFile.toStdString());
        // Summaries with scalars; not the file version nor the hparams.
        const auto summaries = std::count_if(events.begin(), events.end(), [](const auto &event) {
            const auto &values = event.summary().value();
            return std::any_of(values.begin(), values.end(), [](const auto &v) { return v.has_simple_value(); });
        });
        QCOMPARE(int(table.count(QRegularExpression(QStringLiteral("^w,"), QRegularExpression::MultilineOption))),
                 int(summaries));

        // A damaged event file: a clear error and exit code 2, no crash.
        QFile damaged(onlyEvents + QLatin1Char('/') + QFileInfo(eventFile).fileName());
        QVERIFY(damaged.open(QIODevice::ReadWrite));
        damaged.seek(damaged.size() / 2);
        damaged.write("garbage!");
        damaged.close();
        QProcess again;
        again.setProcessChannelMode(QProcess::MergedChannels);
        again.start(QStringLiteral(PARASYNC_APP), {QStringLiteral("--headless"), QStringLiteral("--open=") + onlyEvents,
                                                   QStringLiteral("--export=") + out + QStringLiteral("-2")});
        QVERIFY(again.waitForFinished(120000));
        const QString complaint = QString::fromUtf8(again.readAll());
        QCOMPARE(again.exitStatus(), QProcess::NormalExit);
        QCOMPARE(again.exitCode(), 2);
        QVERIFY2(complaint.contains(QStringLiteral("CRC"))
                     && complaint.contains(QStringLiteral("events.out.tfevents.")),
                 qPrintable(complaint));
    }
};

QTEST_MAIN(TestRunDocuments)
#include "tst_run_documents.moc"
