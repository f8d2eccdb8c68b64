// Bad input on the wire and in the data: each gets a clear error, the
// server keeps serving, and nothing the cluster learned is lost.
#include "base/port_holder.h"
#include "support/cluster_harness.h"
#include "support/train_requests.h"
#include "wire/train_call.h"

#include <QFile>
#include <QTcpSocket>
#include <QTemporaryDir>
#include <QTest>

#include <limits>

using namespace parasync;
using namespace parasync::testing;
using namespace std::chrono_literals;

namespace {

// What a well-behaved linear-demo worker says about itself.
proto::TrainRequest joinAs(int worker)
{
    return linearDemoJoin(worker);
}

proto::TrainRequest push(int64_t fromStep, const std::vector<int> &sizes)
{
    return pushOf(fromStep, sizes, 0.5f);
}

// Opens a training stream to ps:0 as a (rogue) client and sends `requests`;
// returns the status the server ended the stream with.
grpc::Status sendOnTrainStream(const QString &address, const std::vector<proto::TrainRequest> &requests)
{
    auto stub = proto::ParameterService::NewStub(makeChannel(address.toStdString(), {}));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    context.set_wait_for_ready(true); // a loaded ps may drop the first connection: wait for one
    auto stream = stub->Train(&context);
    for (const auto &request : requests) {
        if (!stream->Write(request))
            break;
        proto::TrainResponse response;
        if (!stream->Read(&response))
            break;
    }
    stream->WritesDone();
    return stream->Finish();
}

// After a refused client: the cluster (ps:0 and worker:0) trains on, then
// both stop cleanly.
void trainsOnAndStopsCleanly(LocalCluster &cluster)
{
    proto::ClusterStatusResponse before;
    QVERIFY(cluster.clusterStatus(&before));
    QVERIFY(cluster.waitForStatus([&](const auto &s) { return s.global_step() > before.global_step() + 100; }));
    cluster.worker(0).terminate();
    QCOMPARE(cluster.worker(0).waitForExit(), 0);
    cluster.ps(0).terminate();
    QCOMPARE(cluster.ps(0).waitForExit(), 0);
}

} // namespace

class TestBadInput : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void roguePushesAreRefusedAndTheClusterKeepsTraining_data()
    {
        QTest::addColumn<int>("worker");
        QTest::addColumn<qint64>("fromStep");
        QTest::addColumn<QList<int>>("sizes");
        QTest::addColumn<QString>("expected");
        QTest::newRow("unknown task index")
            << 7 << qint64(0) << QList<int>{1, 1} << QStringLiteral("worker index 7 is not in the cluster");
        QTest::newRow("gradient of the wrong size")
            << 1 << qint64(0) << QList<int>{3, 1} << QStringLiteral("has shape [3], the variable [1]");
        QTest::newRow("too few gradient tensors")
            << 1 << qint64(0) << QList<int>{1} << QStringLiteral("1 gradient tensors");
        QTest::newRow("a step from the future")
            << 1 << qint64(1000000000) << QList<int>{1, 1} << QStringLiteral("from the future");
    }

    void roguePushesAreRefusedAndTheClusterKeepsTraining()
    {
        QFETCH(int, worker);
        QFETCH(qint64, fromStep);
        QFETCH(QList<int>, sizes);
        QFETCH(QString, expected);
        LocalCluster cluster(1, 2, {QStringLiteral("--last_step=100000000")});
        cluster.startPs(0);
        cluster.startWorker(0);
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.global_step() > 10; }));

        const auto status = sendOnTrainStream(
            cluster.psAddress(0), {joinAs(worker), push(fromStep, std::vector<int>(sizes.begin(), sizes.end()))});
        QCOMPARE(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
        QVERIFY2(QString::fromStdString(status.error_message()).contains(expected), status.error_message().c_str());

        trainsOnAndStopsCleanly(cluster);
    }

    // A cluster whose workers report the held-out loss: a client that sends
    // a metrics count other than 0 or the declared one, or declares other
    // metrics, is refused with what to fix, and training goes on.
    void roguePushWithTheWrongMetricCountIsRefused()
    {
        // Three workers: each rogue client below claims an index of its own.
        LocalCluster cluster(1, 3, {QStringLiteral("--last_step=100000000"), QStringLiteral("--eval_fraction=0.2")});
        cluster.startPs(0);
        cluster.startWorker(0);
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.global_step() > 10; }));
        proto::ClusterStatusResponse status;
        QVERIFY(cluster.clusterStatus(&status));
        QCOMPARE(status.signature().metric_names_size(), 1);
        QCOMPARE(status.signature().metric_names(0), std::string("heldout_loss"));

        proto::TrainRequest join = joinAs(1);
        join.mutable_join()->mutable_signature()->add_metric_names("heldout_loss");
        proto::TrainRequest threeValues = push(status.global_step(), {1, 1});
        for (float value : {0.1f, 0.2f, 0.3f})
            threeValues.mutable_push()->add_metrics(value);
        const auto refused = sendOnTrainStream(cluster.psAddress(0), {join, threeValues});
        QCOMPARE(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
        QVERIFY2(QString::fromStdString(refused.error_message())
                     .contains(QStringLiteral("pushed 3 metric values, but the cluster's signature declares 1 metric "
                                              "names: send one value per declared name")),
                 refused.error_message().c_str());

        const auto undeclared = sendOnTrainStream(cluster.psAddress(0), {joinAs(2)});
        QCOMPARE(undeclared.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
        QVERIFY2(QString::fromStdString(undeclared.error_message())
                     .contains(QStringLiteral("it reports the metrics none but the cluster's workers report "
                                              "heldout_loss")),
                 undeclared.error_message().c_str());

        trainsOnAndStopsCleanly(cluster);
    }

    // A join that says ps:0 acknowledged a negative global step is refused
    // with what to send; the cluster trains on.
    void aJoinWithANegativeAcknowledgedStepIsRefused()
    {
        LocalCluster cluster(1, 2, {QStringLiteral("--last_step=100000000")});
        cluster.startPs(0);
        cluster.startWorker(0);
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.global_step() > 10; }));
        proto::TrainRequest join = joinAs(1);
        join.mutable_join()->set_acknowledged_step(-5);
        const auto refused = sendOnTrainStream(cluster.psAddress(0), {join});
        QCOMPARE(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
        QVERIFY2(QString::fromStdString(refused.error_message())
                     .contains(QStringLiteral("acknowledged_step is -5: send the last global step ps:0 "
                                              "acknowledged, or 0 before the first")),
                 refused.error_message().c_str());
        trainsOnAndStopsCleanly(cluster);
    }

    // A stranger's Watch that resumes after a negative step is refused with
    // what to send; one that resumes after a step ps:0 never reached gets the
    // live events; the app's watcher and the cluster carry on.
    void aWatchThatResumesBeforeStepZeroIsRefused()
    {
        LocalCluster cluster(1, 1, {QStringLiteral("--last_step=100000000")});
        cluster.startPs(0);
        cluster.startWorker(0);
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.global_step() > 10; }));
        auto stub = proto::Telemetry::NewStub(makeChannel(cluster.psAddress(0).toStdString(), {}));
        for (const int64_t after : {int64_t(-1), std::numeric_limits<int64_t>::min()}) {
            grpc::ClientContext context;
            context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
            context.set_wait_for_ready(true);
            proto::WatchRequest request;
            request.set_resume_after_step(after);
            auto reader = stub->Watch(&context, request);
            proto::TelemetryBatch batch;
            QVERIFY(!reader->Read(&batch));
            const grpc::Status status = reader->Finish();
            QCOMPARE(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
            QVERIFY2(QString::fromStdString(status.error_message())
                         .contains(QStringLiteral("give the last global step seen (0 or more), or leave it unset")),
                     status.error_message().c_str());
        }
        {
            grpc::ClientContext context;
            context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
            context.set_wait_for_ready(true);
            proto::WatchRequest request;
            request.set_resume_after_step(std::numeric_limits<int64_t>::max());
            auto reader = stub->Watch(&context, request);
            // Live steps arrive; none is replayed (none is after that step).
            proto::TelemetryBatch batch;
            bool sawStep = false;
            while (!sawStep && reader->Read(&batch))
                for (const auto &event : batch.events())
                    sawStep = sawStep || event.has_step();
            QVERIFY(sawStep);
            context.TryCancel();
            reader->Finish();
        }
        trainsOnAndStopsCleanly(cluster);
    }

    // The same --task_index started twice: the second process is refused
    // with who holds the index, and the first trains on, counted once.
    void aSecondWorkerWithALiveWorkersIndexIsRefused()
    {
        LocalCluster cluster(1, 2, {QStringLiteral("--last_step=100000000")});
        cluster.startAll();
        QVERIFY(cluster.waitForStatus(
            [](const auto &s) { return s.global_step() > 10 && s.workers(1).phase() == proto::TRAINING; }));
        const qint64 holder = cluster.worker(1).pid();

        // Its own address (another port: on the same one it could not even
        // listen), the cluster's ps and the same index.
        const QString otherAddress = QStringLiteral("127.0.0.1:%1").arg(pickFreePort());
        NodeProcess second(
            QStringLiteral("worker:1 again"),
            {QStringLiteral("--ps_hosts=") + cluster.psAddress(0),
             QStringLiteral("--worker_hosts=") + cluster.workerAddress(0) + QLatin1Char(',') + otherAddress,
             QStringLiteral("--job_name=worker"), QStringLiteral("--task_index=1"),
             QStringLiteral("--last_step=100000000")});
        second.start();
        const qint64 claimant = second.pid();
        QCOMPARE(second.waitForExit(), 2);
        const QString said = second.output();
        QVERIFY2(said.contains(QStringLiteral("ps:0 refuses a second worker:1 (pid %1 on host '").arg(claimant))
                     && said.contains(QStringLiteral("worker:1 is pid %1 on host '").arg(holder))
                     && said.contains(QStringLiteral("Two processes cannot share --task_index=1")),
                 qPrintable(said));

        // The first is still worker:1, alive, and still stepping.
        proto::ClusterStatusResponse before;
        QVERIFY(cluster.clusterStatus(&before));
        QCOMPARE(before.workers(1).phase(), proto::TRAINING);
        QCOMPARE(before.workers(1).pid(), holder);
        QVERIFY(cluster.waitForStatus([&](const auto &s) {
            return s.workers(1).applied() > before.workers(1).applied() + 20 && s.workers(1).phase() == proto::TRAINING;
        }));
        // ps:0 logs the refusal too (waited for: its output reaches us through a pipe).
        QVERIFY2(cluster.ps(0).waitForOutput(QStringLiteral("refuses a second worker:1")),
                 qPrintable(cluster.ps(0).output()));
        QString report;
        QVERIFY2(cluster.stopAllCleanly(&report), qPrintable(report));
    }

    void oversizedMessagesAreRefusedAndTheTaskKeepsServing()
    {
        LocalCluster cluster(1, 2,
                             {QStringLiteral("--last_step=100000000"), QStringLiteral("--max_message_bytes=65536")});
        cluster.startPs(0);
        cluster.startWorker(0);
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.global_step() > 10; }));

        // 400 kB of gradient against a 64 kB limit.
        const auto status = sendOnTrainStream(cluster.psAddress(0), {joinAs(1), push(0, {100000, 1})});
        QCOMPARE(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
        QVERIFY2(describeRpcError(status).find("--max_message_bytes") != std::string::npos,
                 status.error_message().c_str());
        proto::ClusterStatusResponse before;
        QVERIFY(cluster.clusterStatus(&before));
        QVERIFY(cluster.waitForStatus([&](const auto &s) { return s.global_step() > before.global_step() + 100; }));

        // A worker whose model cannot fit one step in the limit is told so
        // at start, with the value to give.
        NodeProcess big(QStringLiteral("worker:1"),
                        cluster.clusterFlags()
                            + QStringList{QStringLiteral("--job_name=worker"), QStringLiteral("--task_index=1"),
                                          QStringLiteral("--model=softmax"), QStringLiteral("--dataset=blobs:10:2000"),
                                          QStringLiteral("--max_message_bytes=65536")});
        big.start();
        QCOMPARE(big.waitForExit(), 2);
        QVERIFY2(big.output().contains(QStringLiteral("20010 parameters"))
                     && big.output().contains(QStringLiteral("give every task --max_message_bytes=")),
                 qPrintable(big.output()));

        cluster.worker(0).terminate();
        QCOMPARE(cluster.worker(0).waitForExit(), 0);
        cluster.ps(0).terminate();
        QCOMPARE(cluster.ps(0).waitForExit(), 0);
    }

    void piecesOfAShardCutWrongAreRefusedAndInitialiseNothing()
    {
        // InitializeInPieces and ReadShard, as a hostile or broken client
        // calls them before the chief: each refused with what is wrong, the
        // ps task left waiting for its variables; the chief then initialises
        // it and the cluster trains.
        LocalCluster cluster(1, 1, {QStringLiteral("--last_step=100000000")});
        cluster.startPs(0);
        QVERIFY(cluster.ps(0).waitForOutput(QStringLiteral("waiting for the chief")));
        auto stub = proto::ParameterService::NewStub(makeChannel(cluster.psAddress(0).toStdString(), {}));
        const auto initializeInPieces = [&](const std::vector<proto::InitializeRequest> &messages, bool breakOff) {
            grpc::ClientContext context;
            context.set_deadline(std::chrono::system_clock::now() + 10s);
            context.set_wait_for_ready(true);
            proto::InitializeResponse response;
            auto writer = stub->InitializeInPieces(&context, &response);
            for (const auto &message : messages)
                writer->Write(message);
            if (breakOff)
                context.TryCancel();
            else
                writer->WritesDone();
            return writer->Finish();
        };
        proto::InitializeRequest head;
        head.set_origin("a rogue client");
        head.mutable_shard()->add_tables()->set_name("weights");
        proto::InitializeRequest unnamedTable;
        unnamedTable.mutable_shard()->add_tables()->set_name("factors");
        unnamedTable.mutable_shard()->mutable_tables(0)->add_ids(7);
        unnamedTable.mutable_shard()->mutable_tables(0)->add_values(1.0f);
        proto::InitializeRequest variableLater;
        variableLater.mutable_shard()->add_variables()->set_name("w");
        proto::InitializeRequest rowsOfWeights;
        rowsOfWeights.mutable_shard()->add_tables()->set_name("weights");
        rowsOfWeights.mutable_shard()->mutable_tables(0)->add_ids(7);
        rowsOfWeights.mutable_shard()->mutable_tables(0)->add_values(1.0f);

        const std::vector<std::pair<grpc::Status, std::string>> refusals{
            {initializeInPieces({}, false), "without a first message"},
            {initializeInPieces({head, unnamedTable}, false), "which the first message did not name"},
            {initializeInPieces({head, variableLater}, false), "send one TableState of rows"},
            {initializeInPieces({head, rowsOfWeights}, true), ""},
        };
        for (const auto &[status, said] : refusals) {
            QVERIFY2(!status.ok(), said.c_str());
            QVERIFY2(status.error_message().find(said) != std::string::npos, status.error_message().c_str());
        }
        {
            grpc::ClientContext context;
            context.set_deadline(std::chrono::system_clock::now() + 10s);
            auto reader = stub->ReadShard(&context, {});
            proto::SnapshotResponse piece;
            QVERIFY(!reader->Read(&piece));
            const grpc::Status status = reader->Finish();
            QCOMPARE(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
            QVERIFY2(status.error_message().find("not initialised") != std::string::npos,
                     status.error_message().c_str());
        }
        QVERIFY2(!cluster.ps(0).output().contains(QStringLiteral("variables initialised")),
                 qPrintable(cluster.ps(0).output()));

        cluster.startWorker(0);
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.global_step() > 10; }));
        QVERIFY2(cluster.ps(0).output().contains(QStringLiteral("variables initialised by the chief")),
                 qPrintable(cluster.ps(0).output()));
        trainsOnAndStopsCleanly(cluster);
    }

    void garbageBytesOnATaskPortDoNotHurtIt()
    {
        LocalCluster cluster(1, 1, {QStringLiteral("--last_step=100000000")});
        cluster.startPs(0);
        cluster.startWorker(0);
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.global_step() > 10; }));
        for (const QString &address : {cluster.psAddress(0), cluster.workerAddress(0)}) {
            QTcpSocket socket;
            socket.connectToHost(address.section(QLatin1Char(':'), 0, 0),
                                 address.section(QLatin1Char(':'), 1).toUShort());
            QVERIFY(socket.waitForConnected(5000));
            QByteArray garbage("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
            for (int i = 0; i < 4096; ++i)
                garbage.append(char((i * 131 + 7) & 0xff));
            socket.write(garbage);
            socket.waitForBytesWritten(5000);
            // The server answers or hangs up; either way it must go on serving.
            socket.waitForDisconnected(5000);
        }
        proto::ClusterStatusResponse before;
        QVERIFY(cluster.clusterStatus(&before));
        QVERIFY(cluster.waitForStatus([&](const auto &s) { return s.global_step() > before.global_step() + 100; }));
        QVERIFY(cluster.ps(0).isRunning() && cluster.worker(0).isRunning());
        cluster.worker(0).terminate();
        QCOMPARE(cluster.worker(0).waitForExit(), 0);
        cluster.ps(0).terminate();
        QCOMPARE(cluster.ps(0).waitForExit(), 0);
    }

    // A client that speaks gRPC but sends bytes that are no TrainRequest on
    // Train (the ps parses its stream itself: wire/train_call.h) is told so,
    // and the cluster trains on.
    void bytesThatAreNoTrainRequestAreRefused_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        QTest::newRow("a truncated varint") << QByteArray("\x08\xff", 2);
        QTest::newRow("a push whose length runs past the end") << QByteArray("\x12\x7f\x08\x01", 4);
        QTest::newRow("a push that claims 2 GB") << QByteArray("\x12\xff\xff\xff\xff\x07", 6);
    }

    void bytesThatAreNoTrainRequestAreRefused()
    {
        QFETCH(QByteArray, bytes);
        LocalCluster cluster(1, 1, {QStringLiteral("--last_step=100000000")});
        cluster.startPs(0);
        cluster.startWorker(0);
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.global_step() > 10; }));

        auto channel = makeChannel(cluster.psAddress(0).toStdString(), {});
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + 10s);
        context.set_wait_for_ready(true);
        std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
            grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
                channel.get(), grpc::internal::RpcMethod(trainMethodPath(), grpc::internal::RpcMethod::BIDI_STREAMING),
                &context));
        grpc::Slice slice(bytes.constData(), size_t(bytes.size()));
        QVERIFY(stream->Write(grpc::ByteBuffer(&slice, 1)));
        grpc::ByteBuffer answer;
        QVERIFY(!stream->Read(&answer)); // no answer: the stream ends
        const grpc::Status status = stream->Finish();
        QCOMPARE(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
        QVERIFY2(QString::fromStdString(status.error_message()).contains(u"not a parasync.proto.TrainRequest"),
                 status.error_message().c_str());

        trainsOnAndStopsCleanly(cluster);
    }

    void nonFiniteGradientsAreRejectedAndCounted()
    {
        // A user's CSV with one absurd row: its gradients overflow to inf/NaN.
        QTemporaryDir dir;
        const QString csv = dir.filePath(QStringLiteral("data.csv"));
        QFile file(csv);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write("x,y\n");
        for (int i = 0; i < 40; ++i) {
            const double x = -1.0 + i / 20.0;
            file.write(QByteArray::number(x) + ',' + QByteArray::number(2 * x + 10) + '\n');
        }
        file.write("3e38,-3e38\n");
        file.close();
        LocalCluster cluster(1, 1, {QStringLiteral("--dataset=csv:") + csv, QStringLiteral("--last_step=1500")},
                             dir.filePath(QStringLiteral("run")));
        cluster.startAll();
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report), qPrintable(report));
        QVERIFY2(cluster.ps(0).output().contains(QStringLiteral("NaN or infinite values")),
                 qPrintable(cluster.ps(0).output()));
        int rejected = 0;
        for (const auto &r : readStepLog(dir.filePath(QStringLiteral("run"))))
            rejected += r.value(QStringLiteral("outcome")).toString() == QStringLiteral("rejected_nonfinite");
        QVERIFY(rejected > 0);
        // The model the cluster kept is still finite and learned the good rows.
        const auto metrics = readMetrics(dir.filePath(QStringLiteral("run")));
        const double w = metrics.rows.back().at(metrics.column(QStringLiteral("w"))).toDouble();
        const double b = metrics.rows.back().at(metrics.column(QStringLiteral("b"))).toDouble();
        QVERIFY2(std::isfinite(w) && std::abs(b - 10) < 0.5, qPrintable(QStringLiteral("w=%1 b=%2").arg(w).arg(b)));
    }
};

QTEST_GUILESS_MAIN(TestBadInput)
#include "tst_bad_input.moc"
