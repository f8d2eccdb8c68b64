// The chief's duties (node/chief_duties.h) driven as a worker's loop drives
// them, against a real ps:0 served in this process on a free loopback port:
// the variables initialised, saved and restored; another worker's
// checkpoints while it stands in for a dead chief; a stop that does not wait
// for the next checkpoint. tst_chief covers the same duties through whole
// parasync-node processes.
#include "base/error.h"
#include "base/port_holder.h"
#include "config/node_options.h"
#include "engine/dataset.h"
#include "engine/model.h"
#include "engine/parameter_shard.h"
#include "formats/checkpoint.h"
#include "node/chief_duties.h"
#include "node/ps_task.h"
#include "support/input_error_checks.h"
#include "wire/ps_client.h"
#include "wire/ps_server.h"

#include <QElapsedTimer>
#include <QStringList>
#include <QTemporaryDir>
#include <QTest>

#include <atomic>
#include <mutex>
#include <stop_token>
#include <thread>

using namespace parasync;
using namespace parasync::testing;

namespace {

// What tasks print, from whichever thread prints it.
class LogLines
{
public:
    ChiefDuties::Log sink()
    {
        return [this](const std::string &line) {
            std::lock_guard lock(m_mutex);
            m_lines << QString::fromStdString(line);
        };
    }
    bool contains(const QString &text) const
    {
        std::lock_guard lock(m_mutex);
        return std::any_of(m_lines.begin(), m_lines.end(), [&](const QString &line) { return line.contains(text); });
    }
    QString all() const
    {
        std::lock_guard lock(m_mutex);
        return m_lines.join(u'\n');
    }

private:
    mutable std::mutex m_mutex;
    QStringList m_lines;
};

// A one-ps, two-worker cluster on fresh loopback ports.
struct Cluster
{
    QString psHosts = QStringLiteral("--ps_hosts=127.0.0.1:%1").arg(pickFreePort());
    QString workerHosts
        = QStringLiteral("--worker_hosts=127.0.0.1:%1,127.0.0.1:%2").arg(pickFreePort()).arg(pickFreePort());

    NodeOptions options(const QString &job, int index, const QStringList &extra = {}) const
    {
        std::vector<std::string> args{"parasync-node", psHosts.toStdString(), workerHosts.toStdString(),
                                      "--job_name=" + job.toStdString(), "--task_index=" + std::to_string(index)};
        for (const QString &flag : extra)
            args.push_back(flag.toStdString());
        return parseNodeOptions(args, "");
    }
};

// ps:0 serving over gRPC, as parasync-node wires it, in this process until
// the test is done with it.
class Ps0
{
public:
    explicit Ps0(const Cluster &cluster)
        : m_options(cluster.options(QStringLiteral("ps"), 0))
        , m_task(m_options, {}, m_log.sink(), grpcPsTransport(m_options, {}, m_log.sink()))
    {
        m_task.start();
        m_thread = std::thread([this] { m_task.run(); });
    }
    ~Ps0()
    {
        m_task.requestStop("the test is over");
        m_thread.join();
    }

private:
    LogLines m_log;
    NodeOptions m_options;
    PsTask m_task;
    std::thread m_thread;
};

// What a worker has once started (WorkerTask::start()): its model, data and
// clients of the ps (over gRPC), and a stop the chief's duties follow.
struct Worker
{
    explicit Worker(NodeOptions options) : options(std::move(options))
    {
        const auto &training = this->options.training;
        DatasetOptions dataOptions;
        dataOptions.spec = defaultDatasetFor(training.model);
        dataOptions.shardIndex = this->options.task.index;
        dataOptions.numShards = this->options.cluster.numWorkers();
        dataOptions.seed = training.seed;
        dataOptions.classification = training.model != "linear";
        data = loadDataset(dataOptions);
        model
            = makeModel(training.model, data.featureDim(), data.numClasses > 0 ? data.numClasses : data.targets.cols());
        variables = model->initialVariables(training.seed);
        signature.set_model(model->name());
        signature.set_feature_dim(model->featureDim());
        signature.set_output_dim(model->outputDim());
        signature.set_optimizer(training.optimizer);
        for (const auto &v : variables) {
            auto *spec = signature.add_variables();
            spec->set_name(v.name);
            spec->mutable_shape()->Assign(v.shape.begin(), v.shape.end());
        }
        ps = makeGrpcPsClient({this->options.cluster.ps.front().toString()}, {});
    }

    std::unique_ptr<ChiefDuties> duties()
    {
        return std::make_unique<ChiefDuties>(options, signature, variables,
                                             VariablePlacement::fromSignature(signature, 1), data,
                                             std::vector<std::shared_ptr<PsClient>>{ps}, stop.get_token(), log.sink());
    }

    // The values ps:0 holds now, in model order.
    std::vector<float> psValues() const
    {
        proto::SnapshotResponse snapshot;
        if (!ps->snapshot(0, std::chrono::seconds(5), &snapshot).ok())
            return {};
        std::vector<float> values;
        for (const auto &variable : snapshot.shard().variables())
            values.insert(values.end(), variable.value().values().begin(), variable.value().values().end());
        return values;
    }

    NodeOptions options;
    Dataset data;
    std::unique_ptr<Model> model;
    std::vector<Variable> variables;
    proto::ModelSignature signature;
    std::shared_ptr<PsClient> ps; // over gRPC, to the ps:0 served in this process
    std::stop_source stop;
    LogLines log;
};

proto::PushResponse applied(int64_t globalStep, int actingChief)
{
    proto::PushResponse decision;
    decision.set_outcome(proto::APPLIED);
    decision.set_global_step(globalStep);
    decision.set_update(globalStep);
    decision.set_acting_chief(actingChief);
    return decision;
}

// ps:0's gRPC client, whose first `failures` snapshots answer UNAVAILABLE
// without asking, as a ps task does for a moment in a failover's gap or on
// a machine too loaded to answer its keepalive pings.
class SnapshotGap final : public PsClient
{
public:
    SnapshotGap(std::shared_ptr<PsClient> ps, int failures) : m_ps(std::move(ps)), m_failures(failures) {}

    const std::vector<std::string> &addresses() const override { return m_ps->addresses(); }
    CallResult taskStatus(size_t process, std::chrono::milliseconds deadline,
                          proto::TaskStatusResponse *response) override
    {
        return m_ps->taskStatus(process, deadline, response);
    }
    CallResult initialize(size_t process, const proto::InitializeRequest &request, std::chrono::milliseconds deadline,
                          proto::InitializeResponse *response) override
    {
        return m_ps->initialize(process, request, deadline, response);
    }
    CallResult snapshot(size_t process, std::chrono::milliseconds deadline, proto::SnapshotResponse *response) override
    {
        if (m_failures.fetch_sub(1) > 0)
            return {CallResult::Code::Unavailable, "not serving", "ps:0 does not serve yet (the test's gap)"};
        return m_ps->snapshot(process, deadline, response);
    }
    CallResult reportCheckpoint(size_t process, const proto::ReportCheckpointRequest &request,
                                std::chrono::milliseconds deadline) override
    {
        return m_ps->reportCheckpoint(process, request, deadline);
    }
    std::unique_ptr<PsStream> openStream(size_t process) override { return m_ps->openStream(process); }
    std::unique_ptr<TelemetryStream> watchTelemetry(size_t process, const proto::WatchRequest &request) override
    {
        return m_ps->watchTelemetry(process, request);
    }

private:
    std::shared_ptr<PsClient> m_ps;
    std::atomic<int> m_failures;
};

int checkpointsIn(const QTemporaryDir &dir)
{
    return int(CheckpointStore(dir.path().toStdString()).list().size());
}

} // namespace

class TestChiefDuties : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void theChiefRestoresTheVariablesFromItsNewestCheckpoint()
    {
        QTemporaryDir logdir;
        const QString logdirFlag = QStringLiteral("--logdir=") + logdir.path();
        std::vector<float> saved;
        {
            const Cluster cluster;
            const Ps0 ps(cluster);
            Worker chief(cluster.options(QStringLiteral("worker"), 0, {logdirFlag}));
            auto duties = chief.duties();
            QCOMPARE(duties->initializeVariables(), std::string());
            QVERIFY2(chief.log.contains(QStringLiteral("variables initialised (fresh, seed 1) at global step 0")),
                     qPrintable(chief.log.all()));
            duties->take(true);
            QVERIFY(duties->held());
            chief.stop.request_stop();
            duties->finish(true);
            QCOMPARE(checkpointsIn(logdir), 1);
            saved = chief.psValues();
            QVERIFY(!saved.empty());
        }

        // A new cluster, whose chief would draw other values from another
        // seed: it continues from the checkpoint instead.
        const Cluster cluster;
        const Ps0 ps(cluster);
        Worker chief(cluster.options(QStringLiteral("worker"), 0, {logdirFlag, QStringLiteral("--seed=7")}));
        auto duties = chief.duties();
        QCOMPARE(duties->initializeVariables(), std::string());
        QVERIFY2(chief.log.contains(QStringLiteral("variables initialised (restored from model.ckpt-0")),
                 qPrintable(chief.log.all()));
        QCOMPARE(chief.psValues(), saved);
    }

    void aCheckpointOfAnotherModelIsRefused()
    {
        QTemporaryDir logdir;
        const QString logdirFlag = QStringLiteral("--logdir=") + logdir.path();
        const Cluster cluster;
        const Ps0 ps(cluster);
        Worker linear(cluster.options(QStringLiteral("worker"), 0, {logdirFlag}));
        auto duties = linear.duties();
        QCOMPARE(duties->initializeVariables(), std::string());
        duties->take(true);
        duties->finish(true);
        QCOMPARE(checkpointsIn(logdir), 1);

        Worker softmax(cluster.options(QStringLiteral("worker"), 0, {logdirFlag, QStringLiteral("--model=softmax")}));
        auto other = softmax.duties();
        verifyMentions(inputErrorOf([&] { other->initializeVariables(); }),
                       {QStringLiteral("'linear' model"), QStringLiteral("--logdir")});
    }

    void anActingChiefKeepsCheckpointsUntilTheChiefReturns()
    {
        QTemporaryDir logdir;
        const Cluster cluster;
        const Ps0 ps(cluster);
        Worker chief(cluster.options(QStringLiteral("worker"), 0));
        QCOMPARE(chief.duties()->initializeVariables(), std::string());

        Worker second(
            cluster.options(QStringLiteral("worker"), 1,
                            {QStringLiteral("--logdir=") + logdir.path(), QStringLiteral("--save_checkpoint_secs=1"),
                             QStringLiteral("--chief_handover=1"), QStringLiteral("--display_step=10")}));
        auto duties = second.duties();
        QVERIFY(!duties->held());
        QVERIFY(!duties->evaluatesFullLoss(0));

        // ps:0 names worker:1 the acting chief.
        duties->afterStep(applied(5, 1), 0.5f, ChiefMeasurement{}, {});
        QVERIFY(duties->held());
        QVERIFY(second.log.contains(QStringLiteral("worker:1: the chief worker:0 is dead; taking over its duties")));
        // Measured on its first step, then once per --display_step global steps.
        QVERIFY(duties->evaluatesFullLoss(25));
        QVERIFY(!duties->evaluatesFullLoss(29));
        QVERIFY(duties->evaluatesFullLoss(31));
        QVERIFY(!duties->evaluatesFullLoss(35));
        QVERIFY(duties->evaluatesFullLoss(52));
        QTRY_VERIFY2_WITH_TIMEOUT(checkpointsIn(logdir) >= 1, qPrintable(second.log.all()), 15000);

        // worker:0 is back.
        duties->afterStep(applied(6, 0), 0.5f, ChiefMeasurement{}, {});
        QVERIFY(!duties->held());
        QVERIFY(second.log.contains(QStringLiteral("worker:1: the chief is back")));
        QVERIFY(!duties->evaluatesFullLoss(20));
        // Given back: the end of training is worker:0's to checkpoint.
        const int before = checkpointsIn(logdir);
        duties->finish(true);
        QCOMPARE(checkpointsIn(logdir), before);
    }

    // The final checkpoint is the run's result: a ps task that cannot answer
    // for a moment is waited for, not skipped for an older checkpoint.
    void theFinalCheckpointWaitsOutAPsTaskThatCannotAnswerForAMoment()
    {
        QTemporaryDir logdir;
        const Cluster cluster;
        const Ps0 ps(cluster);
        Worker chief(cluster.options(QStringLiteral("worker"), 0, {QStringLiteral("--logdir=") + logdir.path()}));
        chief.ps = std::make_shared<SnapshotGap>(chief.ps, 3);
        auto duties = chief.duties();
        QCOMPARE(duties->initializeVariables(), std::string());
        duties->take(true);
        chief.stop.request_stop();
        duties->finish(true);
        QCOMPARE(checkpointsIn(logdir), 1);
        QVERIFY2(chief.log.contains(QStringLiteral("final checkpoint: cannot read ps:0 yet: ps:0 does not serve yet")),
                 qPrintable(chief.log.all()));
        QVERIFY2(chief.log.contains(QStringLiteral("chief: saved checkpoint")), qPrintable(chief.log.all()));
    }

    void aStopDoesNotWaitForTheNextCheckpoint()
    {
        QTemporaryDir logdir;
        const Cluster cluster;
        const Ps0 ps(cluster);
        Worker chief(cluster.options(
            QStringLiteral("worker"), 0,
            {QStringLiteral("--logdir=") + logdir.path(), QStringLiteral("--save_checkpoint_secs=600")}));
        auto duties = chief.duties();
        QCOMPARE(duties->initializeVariables(), std::string());
        duties->take(true);

        QElapsedTimer timer;
        timer.start();
        chief.stop.request_stop();
        duties->finish(false);
        QVERIFY2(timer.elapsed() < 5000, qPrintable(QString::number(timer.elapsed())));
        // Stopped, not finished: no final checkpoint.
        QCOMPARE(checkpointsIn(logdir), 0);
    }
};

QTEST_GUILESS_MAIN(TestChiefDuties)
#include "tst_chief_duties.moc"
