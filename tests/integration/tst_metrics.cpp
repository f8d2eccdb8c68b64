// --metrics_port as an operator meets it: a real Prometheus (Debian's
// /usr/bin/prometheus) scrapes a training cluster of real parasync-node
// processes, and its HTTP API answers with the global step rising, each
// worker's series, a slowed worker flagged as a straggler, and the recording
// rules of docs/prometheus/parasync.rules.yml (checked by promtool first).
#include "base/port_holder.h"
#include "support/cluster_harness.h"

#include <httplib.h>

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <chrono>
#include <optional>
#include <thread>

using namespace parasync;
using namespace parasync::testing;
using namespace std::chrono_literals;

namespace {

const QString kRules = QStringLiteral(PARASYNC_SOURCE_DIR "/docs/prometheus/parasync.rules.yml");

std::optional<httplib::Result> httpGet(uint16_t port, const std::string &path, const std::string &accept = {})
{
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(2);
    client.set_read_timeout(5);
    httplib::Headers headers;
    if (!accept.empty())
        headers.emplace("Accept", accept);
    auto result = client.Get(path, headers);
    if (!result)
        return std::nullopt;
    return result;
}

// A Prometheus server of its own: a temporary storage directory, a free
// port, a scrape every second.
class Prometheus
{
public:
    Prometheus(const QString &directory, const QStringList &targets) : m_port(pickFreePort())
    {
        QFile config(directory + QStringLiteral("/prometheus.yml"));
        if (!config.open(QIODevice::WriteOnly))
            return;
        QString text = QStringLiteral("global:\n"
                                      "  scrape_interval: 1s\n"
                                      "  scrape_timeout: 1s\n"
                                      "  evaluation_interval: 1s\n"
                                      "rule_files:\n"
                                      "  - %1\n"
                                      "scrape_configs:\n"
                                      "  - job_name: parasync\n"
                                      "    static_configs:\n"
                                      "      - targets: [%2]\n")
                           .arg(kRules, QLatin1Char('"') + targets.join(QStringLiteral("\", \"")) + QLatin1Char('"'));
        config.write(text.toUtf8());
        config.close();
        m_process.setProcessChannelMode(QProcess::MergedChannels);
        m_process.start(QStringLiteral("/usr/bin/prometheus"),
                        {QStringLiteral("--config.file=") + config.fileName(),
                         QStringLiteral("--storage.tsdb.path=") + directory + QStringLiteral("/data"),
                         QStringLiteral("--web.listen-address=127.0.0.1:%1").arg(m_port),
                         QStringLiteral("--log.level=warn")});
        m_process.waitForStarted(10000);
    }
    ~Prometheus()
    {
        if (m_process.state() != QProcess::NotRunning) {
            m_process.terminate();
            if (!m_process.waitForFinished(10000))
                m_process.kill();
            m_process.waitForFinished(5000);
        }
    }
    QString output()
    {
        m_output += QString::fromUtf8(m_process.readAll());
        return m_output;
    }
    bool running() const { return m_process.state() == QProcess::Running; }

    // The instant vector `query` evaluates to now, through the HTTP API
    // (/api/v1/query); empty while Prometheus has no such series (or is not
    // up yet).
    QJsonArray query(const QString &query)
    {
        httplib::Params params{{"query", query.toStdString()}};
        httplib::Client client("127.0.0.1", m_port);
        client.set_connection_timeout(2);
        client.set_read_timeout(10);
        auto result = client.Get("/api/v1/query", params, httplib::Headers());
        if (!result || result->status != 200)
            return {};
        const QJsonObject answer = QJsonDocument::fromJson(QByteArray::fromStdString(result->body)).object();
        if (answer.value(QStringLiteral("status")).toString() != QStringLiteral("success"))
            return {};
        return answer.value(QStringLiteral("data")).toObject().value(QStringLiteral("result")).toArray();
    }
    // Whether Prometheus evaluates `expression` without an error (its answer
    // may be empty); the error otherwise.
    QString evaluationError(const QString &expression)
    {
        httplib::Params params{{"query", expression.toStdString()}};
        httplib::Client client("127.0.0.1", m_port);
        client.set_read_timeout(10);
        auto result = client.Get("/api/v1/query", params, httplib::Headers());
        if (!result)
            return QStringLiteral("no answer: ") + QString::fromStdString(httplib::to_string(result.error()));
        const QJsonObject answer = QJsonDocument::fromJson(QByteArray::fromStdString(result->body)).object();
        if (answer.value(QStringLiteral("status")).toString() == QStringLiteral("success"))
            return {};
        return answer.value(QStringLiteral("error")).toString();
    }
    // The value of the first series `query` returns, once it returns one
    // that `accept` takes; nullopt after `timeout`.
    std::optional<double> waitForValue(const QString &expression, const std::function<bool(double)> &accept,
                                       std::chrono::milliseconds timeout = 60s)
    {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < deadline && running()) {
            const QJsonArray series = query(expression);
            if (!series.isEmpty()) {
                const double value
                    = series.first().toObject().value(QStringLiteral("value")).toArray().at(1).toString().toDouble();
                if (accept(value))
                    return value;
            }
            // Prometheus scrapes once a second; asking ten times as often finds a change soon enough.
            std::this_thread::sleep_for(100ms);
        }
        return std::nullopt;
    }

private:
    uint16_t m_port;
    QProcess m_process;
    QString m_output;
};

const auto any = [](double) { return true; };

} // namespace

class TestMetrics : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        if (!QFile::exists(QStringLiteral("/usr/bin/prometheus"))
            || !QFile::exists(QStringLiteral("/usr/bin/promtool")))
            QSKIP("Debian's prometheus package is not installed (scripts/setup.sh installs it)");
    }

    void theRecordingRulesAreValid()
    {
        QProcess promtool;
        promtool.setProcessChannelMode(QProcess::MergedChannels);
        promtool.start(QStringLiteral("/usr/bin/promtool"), {QStringLiteral("check"), QStringLiteral("rules"), kRules});
        QVERIFY(promtool.waitForFinished(30000));
        const QString output = QString::fromUtf8(promtool.readAll());
        QVERIFY2(promtool.exitStatus() == QProcess::NormalExit && promtool.exitCode() == 0, qPrintable(output));
        QVERIFY2(output.contains(QStringLiteral("SUCCESS")), qPrintable(output));
    }

    void aRealPrometheusScrapesATrainingCluster()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        // Two ps tasks (the second holds a shard only), three workers of
        // which the third is slowed: 10 ms a step against 110 ms.
        LocalCluster cluster(2, 3,
                             {QStringLiteral("--model=softmax"), QStringLiteral("--eval_fraction=0.2"),
                              QStringLiteral("--compute_ms=10"), QStringLiteral("--compute_jitter=0"),
                              QStringLiteral("--last_step=0"), QStringLiteral("--display_step=20")},
                             dir.path());
        std::vector<uint16_t> ports;
        QStringList targets;
        for (int i = 0; i < 5; ++i) {
            ports.push_back(pickFreePort());
            targets << QStringLiteral("127.0.0.1:%1").arg(ports.back());
        }
        const auto metricsFlag = [&](int i) { return QStringLiteral("--metrics_port=%1").arg(ports[size_t(i)]); };
        cluster.startPs(0, {metricsFlag(0)});
        cluster.startPs(1, {metricsFlag(1)});
        cluster.startWorker(0, {metricsFlag(2)});
        cluster.startWorker(1, {metricsFlag(3)});
        cluster.startWorker(2, {metricsFlag(4), QStringLiteral("--straggler_ms=100")});
        QVERIFY2(cluster.ps(0).waitForOutput(
                     QStringLiteral("serves its metrics for Prometheus at http://127.0.0.1:%1/metrics").arg(ports[0])),
                 qPrintable(cluster.ps(0).output()));
        for (int i = 0; i < 3; ++i)
            QVERIFY2(cluster.waitForWorkerTraining(i), qPrintable(cluster.worker(i).output()));

        // What Prometheus will read, asked directly first: the ps task's
        // page in both formats.
        const auto page = httpGet(ports[0], "/metrics");
        QVERIFY(page);
        QCOMPARE((*page)->status, 200);
        QVERIFY2((*page)->body.find("\nparasync_global_step ") != std::string::npos, (*page)->body.c_str());
        QVERIFY((*page)->body.find("parasync_mode_info{mode=\"async\"} 1") != std::string::npos);
        const auto openMetrics = httpGet(ports[0], "/metrics", "application/openmetrics-text;version=1.0.0");
        QVERIFY(openMetrics);
        QVERIFY((*openMetrics)->body.ends_with("# EOF\n"));

        Prometheus prometheus(dir.path(), targets);
        const auto first = prometheus.waitForValue(QStringLiteral("parasync_global_step"), any);
        QVERIFY2(first, qPrintable(prometheus.output()));
        const auto later = prometheus.waitForValue(QStringLiteral("parasync_global_step"),
                                                   [&](double step) { return step > *first; });
        QVERIFY2(later, qPrintable(QStringLiteral("the global step stayed at %1").arg(*first)));
        qInfo("Prometheus read the global step at %.0f, then %.0f", *first, *later);

        // Every task answers its scrapes.
        QVERIFY2(prometheus.waitForValue(QStringLiteral("count(up{job=\"parasync\"} == 1)"),
                                         [](double up) { return up == 5; }),
                 qPrintable(prometheus.output()));
        // ps:0's per-worker series, each worker's own, and the shard-only ps task's.
        QVERIFY(prometheus.waitForValue(QStringLiteral("parasync_worker_steps_total{worker=\"1\"}"),
                                        [](double steps) { return steps > 0; }));
        QVERIFY(prometheus.waitForValue(QStringLiteral("parasync_worker_held_seconds_total{worker=\"0\"}"), any));
        QVERIFY(prometheus.waitForValue(QStringLiteral("parasync_local_steps_total{instance=\"%1\"}").arg(targets[4]),
                                        [](double steps) { return steps > 0; }));
        QVERIFY(prometheus.waitForValue(
            QStringLiteral("parasync_task_info{instance=\"%1\",task=\"worker:2\"}").arg(targets[4]),
            [](double info) { return info == 1; }));
        QVERIFY(prometheus.waitForValue(QStringLiteral("parasync_ps_gradient_bytes_total{ps=\"1\"}"),
                                        [](double bytes) { return bytes > 0; }));
        QVERIFY(prometheus.waitForValue(QStringLiteral("parasync_chief_metric{metric=\"heldout_accuracy\"}"),
                                        [](double accuracy) { return accuracy >= 0 && accuracy <= 1; }));
        // The recording rules evaluate over the scraped series.
        QVERIFY(prometheus.waitForValue(QStringLiteral("parasync:worker_steps_per_second:rate1m{worker=\"0\"}"),
                                        [](double rate) { return rate > 0; }));

        // The slowed worker is flagged, the others are not.
        const auto flagged = std::chrono::steady_clock::now();
        QVERIFY2(prometheus.waitForValue(QStringLiteral("parasync_worker_straggler{worker=\"2\"}"),
                                         [](double flag) { return flag == 1; }),
                 qPrintable(cluster.ps(0).output()));
        qInfo("Prometheus saw worker:2 flagged %.1f s after it began asking",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - flagged).count());
        QCOMPARE(prometheus.query(QStringLiteral("parasync_worker_straggler == 1")).size(), 1);
        QVERIFY(prometheus.waitForValue(QStringLiteral("parasync:stragglers"), [](double n) { return n == 1; }));

        // Every query of the dashboard in docs/ is one Prometheus evaluates.
        QFile dashboard(QStringLiteral(PARASYNC_SOURCE_DIR "/docs/prometheus/parasync.dashboard.json"));
        QVERIFY(dashboard.open(QIODevice::ReadOnly));
        int queries = 0;
        for (const QJsonValue panel :
             QJsonDocument::fromJson(dashboard.readAll()).object().value(QStringLiteral("panels")).toArray())
            for (const QJsonValue target : panel.toObject().value(QStringLiteral("targets")).toArray()) {
                const QString expression = target.toObject().value(QStringLiteral("expr")).toString();
                const QString error = prometheus.evaluationError(expression);
                QVERIFY2(error.isEmpty(), qPrintable(expression + QStringLiteral(": ") + error));
                ++queries;
            }
        QVERIFY(queries >= 10);

        QString report;
        QVERIFY2(cluster.stopAllCleanly(&report), qPrintable(report));
    }

    // A port another process holds: the task refuses to start and says which flag to change.
    void aMetricsPortInUseIsRefusedNamingTheFlag()
    {
        const uint16_t port = pickFreePort();
        HeldPort held(port);
        QVERIFY(held.ok());
        LocalCluster cluster(1, 1, {QStringLiteral("--last_step=10")});
        NodeProcess &ps = cluster.startPs(0, {QStringLiteral("--metrics_port=%1").arg(port)});
        QCOMPARE(ps.waitForExit(), 2);
        QVERIFY2(ps.output().contains(QStringLiteral("--metrics_port=%1: cannot serve the metrics").arg(port)),
                 qPrintable(ps.output()));
        QVERIFY2(ps.output().contains(QStringLiteral("already in use")), qPrintable(ps.output()));
    }
};

QTEST_GUILESS_MAIN(TestMetrics)
#include "tst_metrics.moc"
