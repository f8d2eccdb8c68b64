// A ps task's embedding-table rows driven in-process, as a stranger's client
// speaking core/proto/parasync.proto would drive them: rows made on their
// first pull (and only then), row gradients applied per id by the cluster's
// optimizer, a sync step averaging row gradients id by id, and every malformed
// request refused with what to fix while nothing of it is applied and the
// cluster trains on.
#include "config/task_options.h"
#include "engine/sparse_table.h"
#include "node/in_process_train_call.h"
#include "node/ps_task.h"

#include <QTest>

#include <memory>
#include <string>
#include <vector>

using namespace parasync;
using namespace std::chrono_literals;

namespace {

constexpr float kLearningRate = 0.5f;
constexpr auto kAnswer = 5000ms;
constexpr int64_t kWidth = 4;
constexpr uint64_t kIdLimit = 1000;

// A model of one dense "bias" [1] and one table "embedding" of rows of 4,
// ids below 1000, rows starting at zero.
proto::ModelSignature sparseSignature()
{
    proto::ModelSignature signature;
    signature.set_model("sparse_test");
    signature.set_feature_dim(3);
    signature.set_output_dim(1);
    signature.set_optimizer("sgd");
    auto *bias = signature.add_variables();
    bias->set_name("bias");
    bias->add_shape(1);
    auto *table = signature.add_tables();
    table->set_name("embedding");
    table->set_row_width(kWidth);
    table->set_id_limit(kIdLimit);
    return signature;
}

proto::InitializeRequest sparseInitialization()
{
    proto::InitializeRequest request;
    request.set_origin("fresh");
    *request.mutable_signature() = sparseSignature();
    auto *bias = request.mutable_shard()->add_variables();
    bias->set_name("bias");
    bias->mutable_value()->add_shape(1);
    bias->mutable_value()->add_values(0.0f);
    return request;
}

// ps:`index` of a cluster of `numPs` ps tasks and two workers.
NodeOptions psOptions(proto::UpdateMode mode, int numPs = 1, int index = 0)
{
    NodeOptions options;
    for (int k = 0; k < numPs; ++k)
        options.cluster.ps.push_back(parseHostPort("127.0.0.1:" + std::to_string(13222 + k)));
    options.cluster.workers = {parseHostPort("127.0.0.1:13232"), parseHostPort("127.0.0.1:13233")};
    options.task = TaskId{JobName::Ps, index};
    options.training.optimizer = "sgd";
    options.training.learningRate = kLearningRate;
    options.training.mode.set_mode(mode);
    return options;
}

proto::TrainRequest join(int worker)
{
    proto::TrainRequest request;
    request.mutable_join()->set_worker_index(worker);
    *request.mutable_join()->mutable_signature() = sparseSignature();
    return request;
}

proto::TrainRequest pull(const std::vector<uint64_t> &ids, bool lookupOnly = false)
{
    proto::TrainRequest request;
    request.mutable_pull()->set_lookup_only(lookupOnly);
    auto *table = request.mutable_pull()->add_tables();
    table->mutable_ids()->Assign(ids.begin(), ids.end());
    return request;
}

// A push from global step `fromStep`: bias gradient 0, row gradient `value`
// for each value of each of `ids` (as given: sorted or not), and a pull of
// `next`.
proto::TrainRequest push(int64_t fromStep, const std::vector<uint64_t> &ids, float value,
                         const std::vector<uint64_t> &next = {})
{
    proto::TrainRequest request;
    auto *p = request.mutable_push();
    p->set_computed_from_step(fromStep);
    auto *bias = p->add_gradients();
    bias->add_shape(1);
    bias->add_values(0.0f);
    if (!ids.empty()) {
        auto *rows = p->add_row_gradients();
        rows->mutable_ids()->Assign(ids.begin(), ids.end());
        for (size_t i = 0; i < ids.size() * size_t(kWidth); ++i)
            rows->add_values(value);
    }
    if (!next.empty())
        p->add_pull()->mutable_ids()->Assign(next.begin(), next.end());
    return request;
}

class Ps
{
public:
    explicit Ps(const NodeOptions &options, RpcSettings rpc = {}) : m_task(options, rpc, [](const std::string &) {})
    {
        proto::InitializeResponse response;
        m_initialized = m_task.initialize(sparseInitialization(), &response).ok();
    }
    ~Ps()
    {
        m_task.requestStop("the test is over");
        m_calls.clear();
    }
    bool initialized() const { return m_initialized; }
    PsTask &task() { return m_task; }
    InProcessTrainCall &open() { return *m_calls.emplace_back(std::make_unique<InProcessTrainCall>(m_task)); }
    InProcessTrainCall *joined(int worker)
    {
        auto &call = open();
        call.send(join(worker));
        proto::TrainResponse response;
        if (!call.receive(&response, kAnswer) || !response.join().ready())
            return nullptr;
        return &call;
    }
    // The table's rows held here, as TaskStatus reports them.
    int64_t rows() { return m_task.taskStatus().tables(0).rows(); }
    int64_t globalStep() { return m_task.clusterStatus().global_step(); }
    // The row of `id` as the ps holds it (a checkpoint's snapshot); empty
    // when it holds none.
    std::vector<float> row(uint64_t id)
    {
        proto::SnapshotResponse snapshot;
        if (!m_task.snapshot(&snapshot).ok() || snapshot.shard().tables_size() != 1)
            return {};
        const proto::TableState &table = snapshot.shard().tables(0);
        for (int i = 0; i < table.ids_size(); ++i)
            if (table.ids(i) == id)
                return {table.values().begin() + i * kWidth, table.values().begin() + (i + 1) * kWidth};
        return {};
    }

private:
    PsTask m_task;
    bool m_initialized = false;
    std::vector<std::unique_ptr<InProcessTrainCall>> m_calls;
};

std::vector<float> filled(float value)
{
    return std::vector<float>(size_t(kWidth), value);
}

// The call's end, after a request it must refuse: the refusal's words.
QString refusal(InProcessTrainCall &call)
{
    const auto end = call.waitForEnd(kAnswer);
    if (!end)
        return QStringLiteral("(the call did not end)");
    if (end->code() != CallStatus::Code::InvalidArgument)
        return QStringLiteral("(ended with code %1: %2)")
            .arg(int(end->code()))
            .arg(QString::fromStdString(end->message()));
    return QString::fromStdString(end->message());
}

} // namespace

Q_DECLARE_METATYPE(parasync::proto::TrainRequest)

class TestSparsePs : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void aPullMakesRowsALookupDoesNot()
    {
        Ps ps(psOptions(proto::ASYNC));
        QVERIFY(ps.initialized());
        auto *worker = ps.joined(0);
        QVERIFY(worker);
        QCOMPARE(ps.rows(), int64_t(0));
        worker->send(pull({3, 7, 11}, true));
        proto::TrainResponse response;
        QVERIFY(worker->receive(&response, kAnswer));
        QCOMPARE(response.pull().rows(0).values_size(), 3 * int(kWidth));
        QCOMPARE(ps.rows(), int64_t(0)); // looked up, not made
        worker->send(pull({3, 7, 11}));
        QVERIFY(worker->receive(&response, kAnswer));
        QCOMPARE(std::vector<uint64_t>(response.pull().rows(0).ids().begin(), response.pull().rows(0).ids().end()),
                 (std::vector<uint64_t>{3, 7, 11}));
        QCOMPARE(ps.rows(), int64_t(3));
    }

    void rowGradientsMoveTheirRowsAndTheAnswerBringsTheNextBatch()
    {
        Ps ps(psOptions(proto::ASYNC));
        auto *worker = ps.joined(0);
        QVERIFY(worker);
        proto::TrainResponse response;
        worker->send(pull({5, 9}));
        QVERIFY(worker->receive(&response, kAnswer));
        // SGD: 0 - 0.5 * 2 = -1 for rows 5 and 9; the answer brings rows 9
        // (updated) and 20 (made now, zero).
        worker->send(push(0, {5, 9}, 2.0f, {9, 20}));
        QVERIFY(worker->receive(&response, kAnswer));
        QCOMPARE(response.push().outcome(), proto::APPLIED);
        QCOMPARE(response.push().rows_size(), 1);
        const auto &rows = response.push().rows(0);
        QCOMPARE(std::vector<uint64_t>(rows.ids().begin(), rows.ids().end()), (std::vector<uint64_t>{9, 20}));
        QCOMPARE(std::vector<float>(rows.values().begin(), rows.values().begin() + kWidth), filled(-1.0f));
        QCOMPARE(std::vector<float>(rows.values().begin() + kWidth, rows.values().end()), filled(0.0f));
        QCOMPARE(ps.row(5), filled(-1.0f));
        QCOMPARE(ps.rows(), int64_t(3));
        QCOMPARE(ps.globalStep(), int64_t(1));
        const proto::TaskStatusResponse status = ps.task().taskStatus();
        QCOMPARE(status.tables(0).rows_pushed(), int64_t(2));
        QCOMPARE(status.tables(0).rows_pulled(), int64_t(4));
    }

    void aSyncStepAveragesRowGradientsIdById()
    {
        Ps ps(psOptions(proto::SYNC));
        auto *a = ps.joined(0);
        auto *b = ps.joined(1);
        QVERIFY(a && b);
        proto::TrainResponse response;
        a->send(pull({1, 2}));
        QVERIFY(a->receive(&response, kAnswer));
        b->send(pull({2, 3}));
        QVERIFY(b->receive(&response, kAnswer));
        // Row 2 gets (2 + 4) / 2; rows 1 and 3 one gradient each, over the
        // step's two contributions: 2 / 2 and 4 / 2.
        a->send(push(0, {1, 2}, 2.0f));
        b->send(push(0, {2, 3}, 4.0f));
        QVERIFY(a->receive(&response, kAnswer));
        QCOMPARE(response.push().outcome(), proto::AGGREGATED);
        QVERIFY(b->receive(&response, kAnswer));
        QCOMPARE(ps.globalStep(), int64_t(1));
        QCOMPARE(ps.row(1), filled(-0.5f * 1.0f));
        QCOMPARE(ps.row(2), filled(-0.5f * 3.0f));
        QCOMPARE(ps.row(3), filled(-0.5f * 2.0f));
    }

    void malformedRowsAreRefusedAndNothingIsApplied_data()
    {
        QTest::addColumn<proto::TrainRequest>("request");
        QTest::addColumn<QString>("says");
        QTest::newRow("ids out of order") << push(0, {9, 5}, 1.0f) << QStringLiteral("send the ids ascending");
        QTest::newRow("an id twice") << push(0, {5, 5}, 1.0f) << QStringLiteral("each once");
        QTest::newRow("an id beyond id_limit")
            << push(0, {5, kIdLimit}, 1.0f) << QStringLiteral("is not below the table's id_limit 1000");
        QTest::newRow("a row never pulled") << push(0, {5, 77}, 1.0f) << QStringLiteral("row 77 was never pulled");
        proto::TrainRequest wide = push(0, {5, 9}, 1.0f);
        wide.mutable_push()->mutable_row_gradients(0)->add_values(1.0f);
        QTest::newRow("rows of another width")
            << wide << QStringLiteral("9 values for 2 ids, but the table's rows are 4 wide");
        proto::TrainRequest otherTable = push(0, {5, 9}, 1.0f);
        otherTable.mutable_push()->mutable_row_gradients(0)->set_table(1);
        QTest::newRow("a table the model lacks")
            << otherTable << QStringLiteral("names table 1, which the model does not declare (it has 1)");
        proto::TrainRequest twice = push(0, {5}, 1.0f);
        *twice.mutable_push()->add_row_gradients() = twice.push().row_gradients(0);
        QTest::newRow("one table twice") << twice << QStringLiteral("send one block per table, in table order");
        QTest::newRow("a pull beyond id_limit")
            << push(0, {5}, 1.0f, {kIdLimit + 5}) << QStringLiteral("pull[0] ('embedding'): id 1005 is not below");
        QTest::newRow("a pull of too many rows") << push(0, {5}, 1.0f, [] {
            std::vector<uint64_t> ids(600);
            for (size_t i = 0; i < ids.size(); ++i)
                ids[i] = i;
            return ids;
        }()) << QStringLiteral("more than --max_message_bytes=8192");
    }

    void malformedRowsAreRefusedAndNothingIsApplied()
    {
        QFETCH(proto::TrainRequest, request);
        QFETCH(QString, says);
        RpcSettings rpc;
        rpc.maxMessageBytes = 8192;
        Ps ps(psOptions(proto::ASYNC), rpc);
        auto *rogue = ps.joined(0);
        QVERIFY(rogue);
        proto::TrainResponse response;
        rogue->send(pull({5, 9}));
        QVERIFY(rogue->receive(&response, kAnswer));
        rogue->send(request);
        const QString why = refusal(*rogue);
        QVERIFY2(why.contains(says), qPrintable(why));
        // Nothing applied: the global step and the rows are as they were.
        QCOMPARE(ps.globalStep(), int64_t(0));
        QCOMPARE(ps.row(5), filled(0.0f));
        QCOMPARE(ps.rows(), int64_t(2));
        // And the cluster trains on: another worker's step goes through.
        auto *worker = ps.joined(1);
        QVERIFY(worker);
        worker->send(pull({5}));
        QVERIFY(worker->receive(&response, kAnswer));
        worker->send(push(0, {5}, 2.0f));
        QVERIFY(worker->receive(&response, kAnswer));
        QCOMPARE(response.push().outcome(), proto::APPLIED);
        QCOMPARE(ps.row(5), filled(-1.0f));
    }

    void aRowAnotherPsTaskHoldsIsRefused()
    {
        // ps:0 of two: a row hashed to ps:1 is not its to give or to move.
        Ps ps(psOptions(proto::ASYNC, 2, 0));
        auto *worker = ps.joined(0);
        QVERIFY(worker);
        uint64_t elsewhere = 0;
        while (psOfRow(elsewhere, 2) != 1)
            ++elsewhere;
        worker->send(pull({elsewhere}));
        const QString why = refusal(*worker);
        QVERIFY2(why.contains(QStringLiteral("lives on ps:1, not ps:0")), qPrintable(why));
        QCOMPARE(ps.rows(), int64_t(0));
    }

    void rowsOfADenseModelAreRefused()
    {
        // A push with rows to a cluster whose model declares no table.
        NodeOptions options = psOptions(proto::ASYNC);
        PsTask task(options, RpcSettings{}, [](const std::string &) {});
        proto::InitializeRequest dense = sparseInitialization();
        dense.mutable_signature()->clear_tables();
        proto::InitializeResponse initialized;
        QVERIFY(task.initialize(dense, &initialized).ok());
        InProcessTrainCall call(task);
        proto::TrainRequest hello = join(0);
        hello.mutable_join()->mutable_signature()->clear_tables();
        call.send(hello);
        proto::TrainResponse response;
        QVERIFY(call.receive(&response, kAnswer));
        QVERIFY(response.join().ready());
        call.send(push(0, {5}, 1.0f));
        const QString why = refusal(call);
        QVERIFY2(why.contains(QStringLiteral("the cluster's model has none")), qPrintable(why));
        task.requestStop("the test is over");
    }

    void aSignatureWithBadTablesIsRefusedAtInitialisation_data()
    {
        QTest::addColumn<int>("width");
        QTest::addColumn<QString>("name");
        QTest::addColumn<float>("stddev");
        QTest::addColumn<QString>("says");
        QTest::newRow("no width") << 0 << QStringLiteral("embedding") << 0.0f << QStringLiteral("give 1 to 4096");
        QTest::newRow("too wide") << 5000 << QStringLiteral("embedding") << 0.0f << QStringLiteral("give 1 to 4096");
        QTest::newRow("a variable's name") << 4 << QStringLiteral("bias") << 0.0f << QStringLiteral("taken by another");
        QTest::newRow("a quote in the name")
            << 4 << QStringLiteral("em\"b") << 0.0f << QStringLiteral("1-64 characters");
        QTest::newRow("negative stddev") << 4 << QStringLiteral("embedding") << -1.0f << QStringLiteral("give 0");
    }

    void aSignatureWithBadTablesIsRefusedAtInitialisation()
    {
        QFETCH(int, width);
        QFETCH(QString, name);
        QFETCH(float, stddev);
        QFETCH(QString, says);
        PsTask task(psOptions(proto::ASYNC), RpcSettings{}, [](const std::string &) {});
        proto::InitializeRequest request = sparseInitialization();
        auto *table = request.mutable_signature()->mutable_tables(0);
        table->set_row_width(width);
        table->set_name(name.toStdString());
        table->set_init_stddev(stddev);
        proto::InitializeResponse response;
        const CallStatus status = task.initialize(request, &response);
        QCOMPARE(status.code(), CallStatus::Code::InvalidArgument);
        QVERIFY2(QString::fromStdString(status.message()).contains(says), status.message().c_str());
    }
};

QTEST_GUILESS_MAIN(TestSparsePs)
#include "tst_sparse_ps.moc"
