// TensorBoard event files: the CRC-32C and TFRecord framing, TensorFlow's
// histogram buckets, a damaged file refused with a clear error, and the event
// file a real cluster's chief writes, read back by Parasync's reader, by an
// independent decoder (tests/support/tools/decode_tfevents.py) and by the run
// replay; its hparams and mode-change text read back as TensorBoard's plugins
// define them.
#include "base/error.h"
#include "formats/event_file.h"
#include "formats/tensorboard_plugins.h"
#include "orchestration/run_replay.h"
#include "orchestration/run_state.h"
#include "support/cluster_harness.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

using namespace parasync;
using namespace parasync::testing;

namespace {

std::map<std::string, float> scalars(const tensorboard::Event &event)
{
    std::map<std::string, float> values;
    for (const auto &value : event.summary().value())
        if (value.has_simple_value())
            values[value.tag()] = value.simple_value();
    return values;
}

const tensorboard::HistogramProto *findHistogram(const tensorboard::Event &event, const std::string &tag)
{
    for (const auto &value : event.summary().value())
        if (value.tag() == tag && value.has_histo())
            return &value.histo();
    return nullptr;
}

// The scalar summaries: every event but the file version, the hparams and
// the mode changes' text.
std::vector<tensorboard::Event> scalarEvents(const std::vector<tensorboard::Event> &events)
{
    std::vector<tensorboard::Event> kept;
    for (const auto &event : events)
        if (!scalars(event).empty())
            kept.push_back(event);
    return kept;
}

// The value under `tag` of the first event that has it, and that event's step.
const tensorboard::Summary::Value *findValue(const std::vector<tensorboard::Event> &events, const std::string &tag,
                                             int64_t *step = nullptr)
{
    for (const auto &event : events)
        for (const auto &value : event.summary().value())
            if (value.tag() == tag) {
                if (step)
                    *step = event.step();
                return &value;
            }
    return nullptr;
}

QByteArray readAll(const QString &path)
{
    QFile file(path);
    return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

bool writeAll(const QString &path, const QByteArray &bytes)
{
    QFile file(path);
    return file.open(QIODevice::WriteOnly | QIODevice::Truncate) && file.write(bytes) == bytes.size();
}

} // namespace

class TestTensorBoardEvents : public QObject
{
    Q_OBJECT

    // One real run shared by the tests that read its files.
    QTemporaryDir m_runDir;
    QString m_eventFile;

private Q_SLOTS:
    void crc32cHasItsKnownCheckValue()
    {
        const char check[] = "123456789";
        QCOMPARE(crc32c(check, 9), 0xE3069283u);
        QCOMPARE(crc32c("", 0), 0u);
        // The mask TFRecord puts on it.
        const uint32_t crc = 0xE3069283u;
        QCOMPARE(maskedCrc32c(check, 9), uint32_t(((crc >> 15) | (crc << 17)) + 0xa282ead8u));
    }

    void recordFramingIsLengthCrcDataCrc()
    {
        const std::string data = "hello";
        const std::string record = frameRecord(data);
        QCOMPARE(record.size(), size_t(8 + 4 + 5 + 4));
        QCOMPARE(uint8_t(record[0]), uint8_t(5)); // little-endian length
        for (int i = 1; i < 8; ++i)
            QCOMPARE(uint8_t(record[size_t(i)]), uint8_t(0));
        uint32_t lengthCrc = 0, dataCrc = 0;
        std::memcpy(&lengthCrc, record.data() + 8, 4);
        std::memcpy(&dataCrc, record.data() + 17, 4);
        QCOMPARE(lengthCrc, maskedCrc32c(record.data(), 8));
        QCOMPARE(record.substr(12, 5), data);
        QCOMPARE(dataCrc, maskedCrc32c(data.data(), data.size()));
    }

    void histogramUsesTensorFlowsBuckets()
    {
        const std::vector<double> values{-1.0, 0.0, 0.5, 2.0, 2.0, std::nan("")};
        const auto h = makeHistogram(values);
        QCOMPARE(h.num(), 5.0); // NaN left out
        QCOMPARE(h.min(), -1.0);
        QCOMPARE(h.max(), 2.0);
        QCOMPARE(h.sum(), 3.5);
        QCOMPARE(h.sum_squares(), 9.25);
        QCOMPARE(h.bucket_limit_size(), h.bucket_size());
        double total = 0;
        for (double count : h.bucket())
            total += count;
        QCOMPARE(total, 5.0);
        // Every value lies in (previous limit, limit] of a non-empty bucket,
        // limits ascend and the last one is DBL_MAX, as TensorFlow encodes.
        QCOMPARE(h.bucket_limit(h.bucket_limit_size() - 1), DBL_MAX);
        for (int i = 1; i < h.bucket_limit_size(); ++i)
            QVERIFY(h.bucket_limit(i) > h.bucket_limit(i - 1));
        for (double v : {-1.0, 0.0, 0.5, 2.0}) {
            int bucket = 0;
            while (h.bucket_limit(bucket) <= v)
                ++bucket;
            QVERIFY2(h.bucket(bucket) > 0, qPrintable(QStringLiteral("value %1").arg(v)));
            // TensorFlow's limits grow by 10 %: the bucket is narrow.
            if (v > 0)
                QVERIFY(h.bucket_limit(bucket) <= v * 1.1 + 1e-12);
        }
    }

    void damagedFilesAreRefusedWithTheReason()
    {
        QTemporaryDir dir;
        std::string path;
        {
            EventFileWriter writer(dir.path().toStdString());
            path = writer.path();
            tensorboard::Event event;
            event.set_step(7);
            auto *value = event.mutable_summary()->add_value();
            value->set_tag("loss");
            value->set_simple_value(0.25f);
            QVERIFY(writer.write(event));
        }
        QVERIFY(QFileInfo(QString::fromStdString(path)).fileName().startsWith(QStringLiteral("events.out.tfevents.")));
        const auto events = readEventFile(path);
        QCOMPARE(int(events.size()), 2);
        QCOMPARE(events[0].file_version(), std::string("brain.Event:2"));
        QCOMPARE(events[1].step(), int64_t(7));

        const QString qpath = QString::fromStdString(path);
        const QByteArray good = readAll(qpath);
        const auto refusal = [&](const QByteArray &bytes) -> QString {
            if (!writeAll(qpath, bytes))
                return QStringLiteral("(could not write)");
            try {
                readEventFile(path);
            } catch (const InputError &e) {
                return QString::fromUtf8(e.what());
            }
            return {};
        };
        QByteArray flipped = good;
        flipped[flipped.size() - 6] = char(flipped[flipped.size() - 6] ^ 0x40);
        QString message = refusal(flipped);
        QVERIFY2(message.contains(QStringLiteral("record 2")) && message.contains(QStringLiteral("CRC")),
                 qPrintable(message));
        message = refusal(good.left(good.size() - 3));
        QVERIFY2(message.contains(QStringLiteral("truncated")), qPrintable(message));
        message = refusal(QByteArray("not an event file at all"));
        QVERIFY2(message.contains(QStringLiteral("CRC")), qPrintable(message));
        message = refusal(QByteArray());
        QVERIFY2(message.contains(QStringLiteral("empty")), qPrintable(message));
    }

    void chiefOfARealRunWritesTheRunsMetrics()
    {
        QVERIFY(m_runDir.isValid());
        // Long enough (a second or more) that the chief's telemetry watch,
        // which brings the other worker's staleness, joins on a loaded machine.
        LocalCluster cluster(1, 2, {QStringLiteral("--mode=async"), QStringLiteral("--last_step=10000")},
                             m_runDir.path());
        cluster.startAll();
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report), qPrintable(report));

        const auto files = findEventFiles(m_runDir.path().toStdString());
        QCOMPARE(int(files.size()), 1);
        m_eventFile = QString::fromStdString(files.front());
        const auto events = readEventFile(files.front());
        QCOMPARE(events.front().file_version(), std::string("brain.Event:2"));
        // Every --display_step (100) global steps, and the last step, after
        // the hparams.
        QVERIFY(findValue(events, tensorboard_plugins::kSessionStartTag));
        const std::vector<tensorboard::Event> summaries = scalarEvents(events);
        QVERIFY2(summaries.size() >= 20, qPrintable(QString::number(summaries.size())));
        QCOMPARE(events.back().step(), int64_t(10000));

        // The run's metrics.csv, indexed by (global step, worker).
        const MetricsTable metrics = readMetrics(m_runDir.path());
        const int stepColumn = metrics.column(QStringLiteral("global_step"));
        const int workerColumn = metrics.column(QStringLiteral("worker"));
        const int lossColumn = metrics.column(QStringLiteral("loss"));
        const int wColumn = metrics.column(QStringLiteral("w"));
        const int bColumn = metrics.column(QStringLiteral("b"));
        QVERIFY(stepColumn >= 0 && workerColumn >= 0 && lossColumn >= 0 && wColumn >= 0 && bColumn >= 0);
        std::map<int64_t, const QStringList *> chiefRows;
        for (const auto &row : metrics.rows)
            if (row.at(workerColumn).toInt() == 0)
                chiefRows[row.at(stepColumn).toLongLong()] = &row;

        int matchedLoss = 0, matchedWeights = 0;
        std::set<std::string> stalenessTags;
        for (size_t i = 0; i < summaries.size(); ++i) {
            const auto &event = summaries[i];
            const auto values = scalars(event);
            for (const char *tag : {"loss", "w", "b"})
                QVERIFY2(values.count(tag), tag);
            if (i > 0)
                QVERIFY(values.count("updates_per_sec") && values.at("updates_per_sec") > 0);
            for (const auto &[tag, value] : values)
                if (tag.rfind("staleness/worker_", 0) == 0) {
                    stalenessTags.insert(tag);
                    QVERIFY(value >= 0);
                }
            // The loss is the chief's batch loss of the update at this step,
            // as metrics.csv recorded it (both keep the float exactly).
            const auto at = chiefRows.find(event.step());
            if (at != chiefRows.end()) {
                QCOMPARE(values.at("loss"), at->second->at(lossColumn).toFloat());
                ++matchedLoss;
            }
            // w and b are the parameters the chief holds after this step:
            // its next gradient is computed from them, and metrics.csv
            // records them with that gradient.
            const auto next = chiefRows.upper_bound(event.step());
            if (next != chiefRows.end()) {
                QCOMPARE(values.at("w"), next->second->at(wColumn).toFloat());
                QCOMPARE(values.at("b"), next->second->at(bColumn).toFloat());
                ++matchedWeights;
            }
            // pred = w x + b over the chief's 100 samples.
            const auto *pred = findHistogram(event, "pred");
            QVERIFY(pred);
            QCOMPARE(pred->num(), 100.0);
        }
        QVERIFY2(matchedLoss >= int(summaries.size()) - 1, qPrintable(QString::number(matchedLoss)));
        QVERIFY2(matchedWeights >= int(summaries.size()) - 2, qPrintable(QString::number(matchedWeights)));
        QVERIFY(stalenessTags.count("staleness/worker_0") && stalenessTags.count("staleness/worker_1"));
        // The last summary: the model converged (y = 2x + 10), and the
        // predictions centre on 10 (x is uniform in [-1, 1]).
        const auto last = scalars(events.back());
        QVERIFY(std::abs(last.at("w") - 2.0f) < 0.1f && std::abs(last.at("b") - 10.0f) < 0.1f);
        const auto *pred = findHistogram(events.back(), "pred");
        QVERIFY(std::abs(pred->sum() / pred->num() - 10.0) < 0.5);
        QVERIFY(pred->min() > 7.0 && pred->max() < 13.0);
    }

    void anIndependentDecoderReadsTheSameEvents()
    {
        if (m_eventFile.isEmpty())
            QSKIP("needs the event file of chiefOfARealRunWritesTheRunsMetrics");
        const QString python = QStringLiteral("/usr/bin/python3");
        QProcess probe;
        probe.start(python, {QStringLiteral("-c"), QStringLiteral("import crcmod")});
        if (!probe.waitForFinished(20000) || probe.exitCode() != 0)
            QSKIP("needs Debian's python3 with python3-crcmod (scripts/setup.sh installs it)");

        QProcess decoder;
        decoder.start(python,
                      {QStringLiteral(PARASYNC_SOURCE_DIR "/tests/support/tools/decode_tfevents.py"), m_eventFile});
        QVERIFY(decoder.waitForFinished(60000));
        QVERIFY2(decoder.exitCode() == 0, decoder.readAllStandardError().constData());
        const QJsonArray decoded = QJsonDocument::fromJson(decoder.readAllStandardOutput()).array();
        const auto events = readEventFile(m_eventFile.toStdString());
        QCOMPARE(qsizetype(decoded.size()), qsizetype(events.size()));
        QCOMPARE(decoded.at(0).toObject().value(QStringLiteral("file_version")).toString(),
                 QStringLiteral("brain.Event:2"));
        for (qsizetype i = 1; i < decoded.size(); ++i) {
            const QJsonObject object = decoded.at(i).toObject();
            const auto &event = events[size_t(i)];
            QCOMPARE(int64_t(object.value(QStringLiteral("step")).toInteger()), event.step());
            QCOMPARE(object.value(QStringLiteral("wall_time")).toDouble(), event.wall_time());
            const QJsonObject decodedScalars = object.value(QStringLiteral("scalars")).toObject();
            const auto values = scalars(event);
            QCOMPARE(size_t(decodedScalars.size()), values.size());
            if (values.empty())
                continue; // the hparams: plugin data, no scalar or histogram
            for (const auto &[tag, value] : values)
                QCOMPARE(float(decodedScalars.value(QString::fromStdString(tag)).toDouble()), value);
            const QJsonObject pred
                = object.value(QStringLiteral("histograms")).toObject().value(QStringLiteral("pred")).toObject();
            const auto *histogram = findHistogram(event, "pred");
            QVERIFY(histogram);
            QCOMPARE(pred.value(QStringLiteral("num")).toDouble(), histogram->num());
            QCOMPARE(pred.value(QStringLiteral("sum")).toDouble(), histogram->sum());
            QCOMPARE(int(pred.value(QStringLiteral("bucket")).toArray().size()), histogram->bucket_size());
        }
    }

    void aLogdirWithOnlyEventFilesReplaysTheChiefsRun()
    {
        if (m_eventFile.isEmpty())
            QSKIP("needs the event file of chiefOfARealRunWritesTheRunsMetrics");
        QTemporaryDir onlyEvents;
        QVERIFY(QFile::copy(m_eventFile, onlyEvents.filePath(QFileInfo(m_eventFile).fileName())));
        RunState state;
        const auto info = replayRunDirectory(onlyEvents.path().toStdString(), &state);
        const auto events = readEventFile(m_eventFile.toStdString());
        QCOMPARE(info.records, int64_t(events.size()));
        const RunSnapshot snapshot = state.snapshot();
        QCOMPARE(snapshot.globalStep, int64_t(10000));
        QCOMPARE(snapshot.parameterNames, (std::vector<std::string>{"w", "b"}));
        QCOMPARE(int(snapshot.parameterSeries.size()), 2);
        // The chief's variable summaries ("variables/w/norm", ...) are the
        // variables' series, not metrics.
        QCOMPARE(snapshot.variableNames, (std::vector<std::string>{"w", "b"}));
        QVERIFY(snapshot.variableSeries[0].norm.totalCount() > 0);
        QVERIFY(snapshot.metricNames.empty());
        QVERIFY(snapshot.batchLossByWorker.count(0));
        QCOMPARE(snapshot.batchLossByWorker.at(0).totalCount(), int64_t(scalarEvents(events).size()));

        // A damaged file is an error that names it, not a crash.
        QByteArray bytes = readAll(m_eventFile);
        const QString damaged = onlyEvents.filePath(QFileInfo(m_eventFile).fileName());
        QVERIFY(writeAll(damaged, bytes.left(bytes.size() / 2)));
        try {
            replayRunDirectory(onlyEvents.path().toStdString(), &state);
            QFAIL("a truncated event file was accepted");
        } catch (const InputError &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("truncated")), e.what());
        }
    }

    void hparamsAndModeChangesReadBackAsTensorBoardsPluginsDefineThem()
    {
        QTemporaryDir dir;
        LocalCluster cluster(1, 2,
                             {QStringLiteral("--mode=async"), QStringLiteral("--last_step=100000000"),
                              QStringLiteral("--learning_rate=0.03"), QStringLiteral("--batch_size=7"),
                              QStringLiteral("--optimizer=momentum")},
                             dir.path());
        cluster.startAll();
        // Both workers in, before a sync step that aggregates two.
        QVERIFY(cluster.waitForStatus([](const auto &s) {
            return s.global_step() > 300 && s.workers_size() == 2 && s.workers(0).worker_clock() > 0
                   && s.workers(1).worker_clock() > 0;
        }));
        proto::ModeConfig sync;
        sync.set_mode(proto::SYNC);
        sync.set_replicas_to_aggregate(2);
        proto::SetModeResponse switched;
        QVERIFY(cluster.setMode(sync, &switched).ok());
        // The chief writes the text as ps:0's telemetry brings the change.
        const auto files = [&] { return findEventFiles(dir.path().toStdString()); };
        QTRY_VERIFY_WITH_TIMEOUT(files().size() == 1
                                     && findValue(readEventFile(files().front()), tensorboard_plugins::kModeChangeTag),
                                 30000);
        QString report;
        QVERIFY2(cluster.stopAllCleanly(&report), qPrintable(report));
        const auto events = readEventFile(files().front());

        // The hparams: the session's flags, as TensorBoard's HParamsPluginData.
        const auto *start = findValue(events, tensorboard_plugins::kSessionStartTag);
        QVERIFY(start);
        QCOMPARE(start->metadata().plugin_data().plugin_name(), std::string("hparams"));
        tensorboard::HParamsPluginData session;
        QVERIFY(session.ParseFromString(start->metadata().plugin_data().content()));
        QCOMPARE(session.version(), 0);
        QVERIFY(session.has_session_start_info());
        const auto &hparams = session.session_start_info().hparams();
        QCOMPARE(hparams.at("mode").string_value(), std::string("async"));
        QCOMPARE(hparams.at("optimizer").string_value(), std::string("momentum"));
        QCOMPARE(hparams.at("batch_size").number_value(), 7.0);
        QCOMPARE(hparams.at("learning_rate").number_value(), 0.03);
        QCOMPARE(hparams.at("last_step").number_value(), 100000000.0);
        QVERIFY(!hparams.count("logdir")); // the session's model URI instead
        QCOMPARE(QDir(QString::fromStdString(session.session_start_info().model_uri())), QDir(dir.path()));
        // The experiment declares each flag with its type, and the metrics.
        const auto *declared = findValue(events, tensorboard_plugins::kExperimentTag);
        QVERIFY(declared);
        tensorboard::HParamsPluginData experiment;
        QVERIFY(experiment.ParseFromString(declared->metadata().plugin_data().content()));
        QCOMPARE(experiment.experiment().hparam_infos_size(), int(hparams.size()));
        for (const auto &info : experiment.experiment().hparam_infos())
            QCOMPARE(info.type(), hparams.at(info.name()).has_string_value() ? tensorboard::DATA_TYPE_STRING
                                                                             : tensorboard::DATA_TYPE_FLOAT64);
        QCOMPARE(experiment.experiment().hparam_infos(0).display_name().substr(0, 2), std::string("--"));
        QVERIFY(std::any_of(experiment.experiment().metric_infos().begin(),
                            experiment.experiment().metric_infos().end(),
                            [](const auto &m) { return m.name().tag() == "loss"; }));

        // The mode change: a text summary at its global step, in words.
        int64_t step = -1;
        const auto *text = findValue(events, tensorboard_plugins::kModeChangeTag, &step);
        QVERIFY(text);
        QCOMPARE(step, switched.global_step());
        QCOMPARE(text->metadata().plugin_data().plugin_name(), std::string("text"));
        tensorboard::TextPluginData textData;
        QVERIFY(textData.ParseFromString(text->metadata().plugin_data().content()));
        QCOMPARE(textData.version(), 0);
        QCOMPARE(text->tensor().dtype(), tensorboard::DT_STRING);
        QCOMPARE(text->tensor().tensor_shape().dim_size(), 0); // a scalar: one line
        QCOMPARE(text->tensor().string_val_size(), 1);
        const QString line = QString::fromStdString(text->tensor().string_val(0));
        QVERIFY2(line.startsWith(QStringLiteral("async \u2192 sync (replicas_to_aggregate=2"))
                     && line.contains(QStringLiteral("at global step %1").arg(switched.global_step()))
                     && line.endsWith(QStringLiteral("(requested by integration test)")),
                 qPrintable(line));
        int modeChanges = 0;
        for (const auto &event : events)
            for (const auto &value : event.summary().value())
                modeChanges += value.tag() == tensorboard_plugins::kModeChangeTag;
        QCOMPARE(modeChanges, 1);
    }
};

QTEST_GUILESS_MAIN(TestTensorBoardEvents)
#include "tst_tensorboard_events.moc"
