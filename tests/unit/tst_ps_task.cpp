// ps:0's training logic driven in-process: workers join, push and leave on
// Train streams with no server in between (InProcessTrainCall), and the
// global step, the holds and the refusals are what the mode and the wire
// path say they are; a watcher sees the steps on its Telemetry stream.
#include "config/task_options.h"
#include "node/in_process_train_call.h"
#include "node/ps_task.h"
#include "support/train_requests.h"

#include <QDeadlineTimer>
#include <QTest>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace parasync;
using namespace std::chrono_literals;

Q_DECLARE_METATYPE(parasync::CallStatus::Code)
Q_DECLARE_METATYPE(parasync::proto::TrainRequest)

namespace {

constexpr float kLearningRate = 0.5f;
// Generous: a ps that answers at all answers in microseconds.
constexpr auto kAnswer = 5000ms;

proto::ModeConfig modeConfig(proto::UpdateMode mode, int staleness = 0)
{
    proto::ModeConfig config;
    config.set_mode(mode);
    config.set_staleness(staleness);
    return config;
}

// ps:0 of a 1-ps, 2-worker cluster training the linear demo (w, b) with
// plain SGD, never start()ed: it serves no address.
NodeOptions psOptions(const proto::ModeConfig &mode, int64_t lastStep = 0)
{
    NodeOptions options;
    options.cluster.ps = {parseHostPort("127.0.0.1:12222")};
    options.cluster.workers = {parseHostPort("127.0.0.1:12223"), parseHostPort("127.0.0.1:12224")};
    options.task = TaskId{JobName::Ps, 0};
    options.training.optimizer = "sgd";
    options.training.learningRate = kLearningRate;
    options.training.mode = mode;
    options.training.lastStep = lastStep;
    return options;
}

// A join from process `pid` on `host` (a real worker sends both).
proto::TrainRequest joinAs(int worker, const std::string &model = "linear", int64_t pid = 0,
                           const std::string &host = {})
{
    proto::TrainRequest request = testing::linearDemoJoin(worker, model);
    request.mutable_join()->set_pid(pid);
    request.mutable_join()->set_host(host);
    return request;
}

proto::TrainRequest joinFrom(int worker, int64_t pid, const std::string &host)
{
    return joinAs(worker, "linear", pid, host);
}

// One gradient tensor of `shape` holding `count` values of `value`.
proto::TrainRequest pushTensor(const std::vector<int64_t> &shape, int count, float value = 1.0f)
{
    proto::TrainRequest request;
    auto *gradient = request.mutable_push()->add_gradients();
    for (int64_t d : shape)
        gradient->add_shape(d);
    for (int i = 0; i < count; ++i)
        gradient->add_values(value);
    auto *b = request.mutable_push()->add_gradients();
    b->add_shape(1);
    b->add_values(value);
    return request;
}

// A gradient of `value` for every value of every tensor of the given sizes.
proto::TrainRequest push(int64_t fromStep, float value, const std::vector<int> &sizes = {1, 1})
{
    return testing::pushOf(fromStep, sizes, value);
}

proto::TrainRequest leave(bool finished)
{
    proto::TrainRequest request;
    request.mutable_leave()->set_finished(finished);
    return request;
}

// The ps, the Train calls open to it, and what it logged.
class Ps
{
public:
    explicit Ps(const NodeOptions &options)
        : m_task(options, RpcSettings{}, [this](const std::string &line) {
            std::lock_guard lock(m_mutex);
            m_log.push_back(line);
        })
    {
        proto::InitializeResponse response;
        m_initialized = m_task.initialize(testing::linearDemoInitialization(), &response).ok();
    }
    // Stops the ps first: that releases held pushes, so that the calls end
    // (as they must before the ps goes) even when a test failed half-way.
    ~Ps()
    {
        m_task.requestStop("the test is over");
        m_calls.clear();
    }

    PsTask &task() { return m_task; }
    bool initialized() const { return m_initialized; }
    // A new Train stream, open until the ps goes.
    InProcessTrainCall &open() { return *m_calls.emplace_back(std::make_unique<InProcessTrainCall>(m_task)); }
    // A worker that has joined: its stream, or null if the join was not answered "ready".
    InProcessTrainCall *joined(int worker)
    {
        auto &call = open();
        call.send(joinAs(worker));
        proto::TrainResponse response;
        if (!call.receive(&response, kAnswer) || !response.join().ready())
            return nullptr;
        return &call;
    }

    proto::WorkerStatus worker(int index) { return m_task.clusterStatus().workers(index); }
    int64_t globalStep() { return m_task.clusterStatus().global_step(); }
    bool logged(const std::string &words)
    {
        std::lock_guard lock(m_mutex);
        for (const auto &line : m_log)
            if (line.find(words) != std::string::npos)
                return true;
        return false;
    }

private:
    std::mutex m_mutex;
    std::vector<std::string> m_log;
    PsTask m_task;
    bool m_initialized = false;
    std::vector<std::unique_ptr<InProcessTrainCall>> m_calls;
};

// A watcher of ps:0's telemetry (PsTask::watch on a thread of its own, as
// gRPC runs it) that keeps every batch until it saw what it waits for.
class Watcher final : private WatchStream
{
public:
    using Wanted = std::function<bool(const proto::TelemetryBatch &)>;
    Watcher(PsTask &ps, Wanted wanted) : m_wanted(std::move(wanted))
    {
        proto::WatchRequest request;
        request.set_include_status(true);
        m_thread = std::thread([this, &ps, request] {
            ps.watch(request, *this);
            std::lock_guard lock(m_mutex);
            m_ended = true;
            m_changed.notify_all();
        });
    }
    // Batches come every 50 ms: the next one ends the watch.
    ~Watcher()
    {
        {
            std::lock_guard lock(m_mutex);
            m_leave = true;
        }
        m_thread.join();
    }

    bool waitForBatches(size_t count)
    {
        std::unique_lock lock(m_mutex);
        return m_changed.wait_for(lock, kAnswer, [&] { return m_batches.size() >= count; });
    }
    // Whether the watch ended because the wanted batch came.
    bool waitForEnd()
    {
        std::unique_lock lock(m_mutex);
        return m_changed.wait_for(lock, kAnswer, [&] { return m_ended; });
    }
    std::vector<proto::TelemetryBatch> batches()
    {
        std::lock_guard lock(m_mutex);
        return m_batches;
    }

private:
    bool write(const proto::TelemetryBatch &batch) override
    {
        std::lock_guard lock(m_mutex);
        m_batches.push_back(batch);
        m_changed.notify_all();
        return !m_leave && !m_wanted(batch);
    }

    Wanted m_wanted;
    std::mutex m_mutex;
    std::condition_variable m_changed;
    std::vector<proto::TelemetryBatch> m_batches;
    bool m_leave = false;
    bool m_ended = false;
    std::thread m_thread;
};

} // namespace

class TestPsTask : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void syncModeAppliesOneAveragedGradientOnceBothWorkersPushed()
    {
        Ps ps(psOptions(modeConfig(proto::SYNC)));
        QVERIFY(ps.initialized());
        auto *worker0 = ps.joined(0);
        auto *worker1 = ps.joined(1);
        QVERIFY(worker0 && worker1);

        worker0->send(push(0, 1.0f));
        // Held at the barrier: no answer, and the global step has not moved.
        QTRY_COMPARE(ps.worker(0).phase(), proto::BLOCKED_BY_SYNC);
        proto::TrainResponse response;
        QVERIFY(!worker0->receive(&response, 0ms));
        QCOMPARE(ps.globalStep(), 0);

        worker1->send(push(0, 3.0f));
        for (auto *call : {worker0, worker1}) {
            QVERIFY(call->receive(&response, kAnswer));
            QCOMPARE(response.push().outcome(), proto::AGGREGATED);
            QCOMPARE(response.push().contributions(), 2);
            QCOMPARE(response.push().update(), 1);
            QCOMPARE(response.push().global_step(), 1);
            // One step of the mean gradient, 2: w = 0 - 0.5 * 2.
            QCOMPARE(response.push().parameters(0).values(0), -1.0f);
        }
        QCOMPARE(ps.globalStep(), 1);
        QCOMPARE(ps.worker(0).phase(), proto::TRAINING);
    }

    void asyncModeAppliesEveryGradientOnArrival()
    {
        Ps ps(psOptions(modeConfig(proto::ASYNC)));
        QVERIFY(ps.initialized());
        auto *worker0 = ps.joined(0);
        auto *worker1 = ps.joined(1);
        QVERIFY(worker0 && worker1);

        proto::TrainResponse response;
        worker0->send(push(0, 1.0f));
        QVERIFY(worker0->receive(&response, kAnswer));
        QCOMPARE(response.push().outcome(), proto::APPLIED);
        QCOMPARE(response.push().global_step(), 1);
        QCOMPARE(response.push().parameters(0).values(0), -0.5f);

        // Computed from step 0, applied at step 1: one step stale, still applied.
        worker1->send(push(0, 1.0f));
        QVERIFY(worker1->receive(&response, kAnswer));
        QCOMPARE(response.push().outcome(), proto::APPLIED);
        QCOMPARE(response.push().staleness(), 1);
        QCOMPARE(response.push().global_step(), 2);
        QCOMPARE(response.push().parameters(0).values(0), -1.0f);
        QCOMPARE(ps.globalStep(), 2);
    }

    // Zhang et al.'s rule on ps:0's update path: the learning rate divided
    // by the gradient's staleness, and the factor in the answer for the
    // worker to pass on to the other ps tasks.
    void underTheStalenessRuleAStaleGradientMovesTheModelLess()
    {
        proto::ModeConfig mode = modeConfig(proto::ASYNC);
        mode.set_learning_rate_by_staleness(true);
        Ps ps(psOptions(mode));
        QVERIFY(ps.initialized());
        auto *worker0 = ps.joined(0);
        auto *worker1 = ps.joined(1);
        QVERIFY(worker0 && worker1);

        proto::TrainResponse response;
        worker0->send(push(0, 1.0f)); // fresh: w = 0 - 0.5
        QVERIFY(worker0->receive(&response, kAnswer));
        QCOMPARE(response.push().learning_rate_scale(), 1.0f);
        worker1->send(push(0, 1.0f)); // one update old: still the whole rate, w = -1
        QVERIFY(worker1->receive(&response, kAnswer));
        QCOMPARE(response.push().staleness(), 1);
        QCOMPARE(response.push().learning_rate_scale(), 1.0f);
        QCOMPARE(response.push().parameters(0).values(0), -1.0f);
        worker0->send(push(0, 1.0f)); // two updates old: half the rate, w = -1 - 0.25
        QVERIFY(worker0->receive(&response, kAnswer));
        QCOMPARE(response.push().staleness(), 2);
        QCOMPARE(response.push().learning_rate_scale(), 0.5f);
        QCOMPARE(response.push().parameters(0).values(0), -1.25f);
        worker1->send(push(0, 1.0f)); // three: a third, w = -1.25 - 0.5 / 3
        QVERIFY(worker1->receive(&response, kAnswer));
        QCOMPARE(response.push().learning_rate_scale(), 1.0f / 3.0f);
        QCOMPARE(response.push().parameters(0).values(0), -1.25f - kLearningRate / 3.0f);
    }

    void sspHoldsTheWorkerThatRunsAheadOfTheStalenessBound()
    {
        Ps ps(psOptions(modeConfig(proto::SSP, 1)));
        QVERIFY(ps.initialized());
        auto *worker0 = ps.joined(0);
        auto *worker1 = ps.joined(1);
        QVERIFY(worker0 && worker1);

        proto::TrainResponse response;
        worker0->send(push(0, 1.0f));
        QVERIFY(worker0->receive(&response, kAnswer));
        // Clock 2 against the slowest worker's 0 + staleness 1: held after
        // the update, which is applied.
        worker0->send(push(1, 1.0f));
        QTRY_COMPARE(ps.worker(0).phase(), proto::BLOCKED_BY_STALENESS);
        QCOMPARE(ps.globalStep(), 2);
        QVERIFY(!worker0->receive(&response, 0ms));

        worker1->send(push(0, 1.0f));
        QVERIFY(worker1->receive(&response, kAnswer));
        QVERIFY(worker0->receive(&response, kAnswer));
        QCOMPARE(response.push().outcome(), proto::APPLIED);
        QCOMPARE(ps.globalStep(), 3);
    }

    void aStreamThatEndsWithoutGoodbyeMarksItsWorkerDeadAndClosesTheSyncStep()
    {
        Ps ps(psOptions(modeConfig(proto::SYNC)));
        QVERIFY(ps.initialized());
        auto *worker0 = ps.joined(0);
        auto *worker1 = ps.joined(1);
        QVERIFY(worker0 && worker1);

        worker0->send(push(0, 1.0f));
        QTRY_COMPARE(ps.worker(0).phase(), proto::BLOCKED_BY_SYNC);
        worker1->close();
        QVERIFY(worker1->waitForEnd(kAnswer));

        proto::TrainResponse response;
        QVERIFY(worker0->receive(&response, kAnswer));
        QCOMPARE(response.push().contributions(), 1);
        QCOMPARE(response.push().global_step(), 1);
        QCOMPARE(ps.worker(1).phase(), proto::DEAD);
        QCOMPARE(QString::fromStdString(ps.worker(1).reason()),
                 QStringLiteral("its training stream closed without a goodbye (process killed, or network cut)"));
        QVERIFY(ps.logged("worker:1 is dead"));
    }

    void workersThatReachTheLastStepAndLeaveFinishTheRun()
    {
        Ps ps(psOptions(modeConfig(proto::ASYNC), 2));
        QVERIFY(ps.initialized());
        auto *worker0 = ps.joined(0);
        auto *worker1 = ps.joined(1);
        QVERIFY(worker0 && worker1);

        proto::TrainResponse response;
        worker0->send(push(0, 1.0f));
        QVERIFY(worker0->receive(&response, kAnswer));
        QVERIFY(!response.push().done());
        worker1->send(push(1, 1.0f));
        QVERIFY(worker1->receive(&response, kAnswer));
        QVERIFY(response.push().done());
        // A push past the last step is answered "done" and not applied.
        worker0->send(push(1, 1.0f));
        QVERIFY(worker0->receive(&response, kAnswer));
        QVERIFY(response.push().done());
        QCOMPARE(ps.globalStep(), 2);

        worker0->send(leave(true));
        const auto end = worker0->waitForEnd(kAnswer);
        QVERIFY(end && end->ok());
        QCOMPARE(QString::fromStdString(ps.task().taskStatus().state()), QStringLiteral("serving"));
        worker1->send(leave(true));
        QVERIFY(worker1->waitForEnd(kAnswer));
        QCOMPARE(QString::fromStdString(ps.task().taskStatus().state()), QStringLiteral("finished"));
        QCOMPARE(ps.worker(0).phase(), proto::FINISHED);
    }

    void nonFiniteGradientsAreRejectedAndCounted()
    {
        Ps ps(psOptions(modeConfig(proto::ASYNC)));
        QVERIFY(ps.initialized());
        auto *worker0 = ps.joined(0);
        QVERIFY(worker0);

        proto::TrainResponse response;
        worker0->send(push(0, std::numeric_limits<float>::quiet_NaN()));
        QVERIFY(worker0->receive(&response, kAnswer));
        QCOMPARE(response.push().outcome(), proto::REJECTED_NONFINITE);
        QCOMPARE(response.push().parameters(0).values(0), 0.0f);
        QCOMPARE(ps.globalStep(), 0);
        QCOMPARE(ps.worker(0).nonfinite(), 1);
        QVERIFY(ps.logged("worker:0 pushed a gradient with NaN or infinite values (1 so far); rejected"));

        // The stream stays open: the next, finite, gradient is applied.
        worker0->send(push(0, 1.0f));
        QVERIFY(worker0->receive(&response, kAnswer));
        QCOMPARE(response.push().outcome(), proto::APPLIED);
        QCOMPARE(ps.globalStep(), 1);
    }

    void aWatcherSeesTheClusterStatusFirstThenEachStep()
    {
        Ps ps(psOptions(modeConfig(proto::ASYNC)));
        QVERIFY(ps.initialized());
        auto *worker0 = ps.joined(0);
        QVERIFY(worker0);
        Watcher watcher(ps.task(), [](const proto::TelemetryBatch &batch) {
            for (const auto &event : batch.events())
                if (event.has_step() && event.step().global_step() == 1)
                    return true;
            return false;
        });
        // Subscribed once the first batch came: the push's step is not missed.
        QVERIFY(watcher.waitForBatches(1));

        worker0->send(push(0, 1.0f));
        proto::TrainResponse response;
        QVERIFY(worker0->receive(&response, kAnswer));
        QVERIFY(watcher.waitForEnd());

        const auto batches = watcher.batches();
        QVERIFY(batches.front().has_status());
        QVERIFY(batches.front().status().initialized());
        QCOMPARE(batches.front().status().workers(0).phase(), proto::TRAINING);
        const auto &events = batches.back().events();
        const auto step = std::find_if(events.begin(), events.end(), [](const auto &e) { return e.has_step(); });
        QVERIFY(step != events.end());
        QCOMPARE(step->step().worker(), 0);
        QCOMPARE(step->step().outcome(), proto::APPLIED);
        QCOMPARE(step->step().computed_from_step(), 0);
        QVERIFY(!batches.back().cluster_finished());
    }

    void malformedRequestsEndTheStreamWithTheWireError_data()
    {
        QTest::addColumn<QList<proto::TrainRequest>>("requests");
        QTest::addColumn<CallStatus::Code>("code");
        QTest::addColumn<QString>("message");
        QTest::newRow("unknown worker index")
            << QList<proto::TrainRequest>{joinAs(7)} << CallStatus::Code::InvalidArgument
            << QStringLiteral(
                   "worker index 7 is not in the cluster (2 workers in --worker_hosts; a worker beyond them needs "
                   "--max_workers on every task): check --task_index, --worker_hosts and --max_workers");
        QTest::newRow("push before join")
            << QList<proto::TrainRequest>{push(0, 1.0f)} << CallStatus::Code::FailedPrecondition
            << QStringLiteral("push before join: send a JoinRequest first");
        QTest::newRow("gradient of the wrong size")
            << QList<proto::TrainRequest>{joinAs(1), pushTensor({1}, 3)} << CallStatus::Code::InvalidArgument
            << QStringLiteral("worker:1: gradient 0 has 3 values, the variable has 1");
        proto::TrainRequest futureProbe = push(0, 1.0f);
        futureProbe.mutable_push()->mutable_staleness_probe()->set_fresh_step(5);
        QTest::newRow("a staleness probe of parameters from the future")
            << QList<proto::TrainRequest>{joinAs(1), futureProbe} << CallStatus::Code::InvalidArgument
            << QStringLiteral("worker:1's staleness probe: stale_step 0 and fresh_step 5 are not in order up to the "
                              "global step 0: send the global steps of the parameters the two gradients were "
                              "computed at");
        proto::TrainRequest oddProbe = push(0, 1.0f);
        oddProbe.mutable_push()->mutable_staleness_probe()->set_cosine(2.0f);
        QTest::newRow("a staleness probe's cosine over 1")
            << QList<proto::TrainRequest>{joinAs(1), oddProbe} << CallStatus::Code::InvalidArgument
            << QStringLiteral("worker:1's staleness probe: cosine 2.000000 is not in [-1, 1]");
        proto::TrainRequest scaled = push(0, 1.0f);
        scaled.mutable_push()->set_learning_rate_scale(0.5f);
        QTest::newRow("a learning rate factor sent to ps:0")
            << QList<proto::TrainRequest>{joinAs(1), scaled} << CallStatus::Code::InvalidArgument
            << QStringLiteral("worker:1 sent ps:0 a learning_rate_scale: ps:0 chooses it "
                              "(PushResponse.learning_rate_scale); send it only to the other ps tasks, with the "
                              "decision");
        // The same number of values in another shape: refused, not applied
        // as if it were the variable's (a transposed matrix would be).
        QTest::newRow("gradient of another shape, same size")
            << QList<proto::TrainRequest>{joinAs(1), pushTensor({1, 1}, 1)} << CallStatus::Code::InvalidArgument
            << QStringLiteral("worker:1: gradient 0 (for 'w') has shape [1, 1], the variable [1]: push each "
                              "gradient in its variable's shape");
        QTest::newRow("gradient without a shape")
            << QList<proto::TrainRequest>{joinAs(1), pushTensor({}, 1)} << CallStatus::Code::InvalidArgument
            << QStringLiteral("worker:1: gradient 0 (for 'w') has shape [], the variable [1]: push each "
                              "gradient in its variable's shape");
        QTest::newRow("too few gradient tensors")
            << QList<proto::TrainRequest>{joinAs(1), push(0, 1.0f, {1})} << CallStatus::Code::InvalidArgument
            << QStringLiteral("worker:1: the push has 1 gradient tensors but ps:0 holds 2 variables");
        QTest::newRow("a step from the future")
            << QList<proto::TrainRequest>{joinAs(1), push(1000000000, 1.0f)} << CallStatus::Code::InvalidArgument
            << QStringLiteral("worker:1 pushed a gradient computed from global step 1000000000, but the global step "
                              "is only 0: a step from the future is refused");
        QTest::newRow("metrics nobody declared")
            << QList<proto::TrainRequest>{joinAs(1),
                                          [] {
                                              proto::TrainRequest request = push(0, 1.0f);
                                              request.mutable_push()->add_metrics(0.5f);
                                              return request;
                                          }()}
            << CallStatus::Code::InvalidArgument
            << QStringLiteral("worker:1 pushed 1 metric values, but the cluster's signature declares 0 metric names: "
                              "send one value per declared name, in their order, or none on a step that measured "
                              "nothing");
        QTest::newRow("variable summaries of another count")
            << QList<proto::TrainRequest>{joinAs(1),
                                          [] {
                                              proto::TrainRequest request = push(0, 1.0f);
                                              request.mutable_push()->add_variable_summaries()->set_norm(1.0f);
                                              return request;
                                          }()}
            << CallStatus::Code::InvalidArgument
            << QStringLiteral("worker:1 pushed 1 variable summaries, but the cluster's signature declares 2 "
                              "variables: send one per variable, in their order, or none on a step that measured "
                              "nothing");
        // w and b are two values: three would shift every chart's series.
        QTest::newRow("parameter values of another count")
            << QList<proto::TrainRequest>{joinAs(1),
                                          [] {
                                              proto::TrainRequest request = push(0, 1.0f);
                                              for (int i = 0; i < 3; ++i)
                                                  request.mutable_push()->add_parameter_view(1.0f);
                                              return request;
                                          }()}
            << CallStatus::Code::InvalidArgument
            << QStringLiteral("worker:1 sent 3 parameter values for the telemetry, but the model has 2: send every "
                              "value of a model of at most 16, or none");
        QTest::newRow("a staged push to ps:0")
            << QList<proto::TrainRequest>{joinAs(1),
                                          [] {
                                              proto::TrainRequest request = push(0, 1.0f);
                                              request.mutable_push()->set_staged(true);
                                              return request;
                                          }()}
            << CallStatus::Code::InvalidArgument
            << QStringLiteral("a staged push sent to ps:0: ps:0 decides on each push as it comes; stage gradients "
                              "only on the other ps tasks");
        QTest::newRow("another model")
            << QList<proto::TrainRequest>{joinAs(1, "softmax")} << CallStatus::Code::FailedPrecondition
            << QStringLiteral("ps:0 refuses worker:1: it trains model 'softmax' but the cluster trains 'linear'. "
                              "Give every task the same --model, --dataset and --optimizer");
    }

    // One identity per index: a second process that claims a live worker's
    // index is refused with who holds it, and counts for nothing.
    void secondProcessClaimingALiveIndexIsRefusedAndNamesTheHolder()
    {
        Ps ps(psOptions(modeConfig(proto::ASYNC)));
        QVERIFY(ps.initialized());
        auto &first = ps.open();
        first.send(joinFrom(1, 4242, "alpha"));
        proto::TrainResponse response;
        QVERIFY(first.receive(&response, kAnswer));
        QVERIFY(response.join().ready());
        first.send(push(0, 1.0f));
        QVERIFY(first.receive(&response, kAnswer));

        auto &second = ps.open();
        second.send(joinFrom(1, 777, "beta"));
        const auto status = second.waitForEnd(kAnswer);
        QVERIFY(status);
        QCOMPARE(status->code(), CallStatus::Code::AlreadyExists);
        const QString message = QString::fromStdString(status->message());
        QVERIFY2(message.startsWith(QStringLiteral(
                     "ps:0 refuses a second worker:1 (pid 777 on host 'beta'): worker:1 is pid 4242 on host "
                     "'alpha', in the cluster since ")),
                 qPrintable(message));
        QVERIFY2(message.endsWith(QStringLiteral(" s ago. Two processes cannot share --task_index=1: stop one of "
                                                 "them, or give this one its own index and address in --worker_hosts")),
                 qPrintable(message));

        // The second's departure did not mark the first dead; it trains on.
        QCOMPARE(ps.worker(1).phase(), proto::TRAINING);
        QCOMPARE(ps.worker(1).pid(), 4242);
        first.send(push(1, 1.0f));
        QVERIFY(first.receive(&response, kAnswer));
        QCOMPARE(response.push().outcome(), proto::APPLIED);
        QCOMPARE(ps.globalStep(), 2);
    }

    // A worker that reconnects (same process, new stream) takes its index
    // back, and the end of its old stream does not mark it dead.
    void sameProcessOnANewStreamKeepsItsIndex()
    {
        Ps ps(psOptions(modeConfig(proto::ASYNC)));
        QVERIFY(ps.initialized());
        auto &old = ps.open();
        old.send(joinFrom(1, 4242, "alpha"));
        proto::TrainResponse response;
        QVERIFY(old.receive(&response, kAnswer));
        auto &reconnected = ps.open();
        reconnected.send(joinFrom(1, 4242, "alpha"));
        QVERIFY(reconnected.receive(&response, kAnswer));
        QVERIFY(response.join().ready());
        old.close();
        QVERIFY(old.waitForEnd(kAnswer));
        QCOMPARE(ps.worker(1).phase(), proto::TRAINING);
        reconnected.send(push(0, 1.0f));
        QVERIFY(reconnected.receive(&response, kAnswer));
        QCOMPARE(response.push().outcome(), proto::APPLIED);
    }

    // One stream that joins as one index and then as another gives the first
    // up and takes the second (a hostile client once deadlocked ps:0 so).
    void aStreamThatChangesItsIndexGivesTheOldOneUp()
    {
        Ps ps(psOptions(modeConfig(proto::ASYNC)));
        QVERIFY(ps.initialized());
        auto &fickle = ps.open();
        proto::TrainResponse response;
        fickle.send(joinFrom(0, 4242, "alpha"));
        QVERIFY(fickle.receive(&response, kAnswer));
        fickle.send(joinFrom(1, 4242, "alpha"));
        QVERIFY(fickle.receive(&response, kAnswer));
        QVERIFY(response.join().ready());
        // worker:0's index is free again: another process takes it at once.
        auto *chief = ps.joined(0);
        QVERIFY(chief);
        chief->send(push(0, 1.0f));
        QVERIFY(chief->receive(&response, kAnswer));
        QCOMPARE(response.push().outcome(), proto::APPLIED);
    }

    // A killed worker started again may join before its old stream's end
    // reached the ps: the new process waits for that end and gets the index.
    void restartedWorkerGetsItsIndexOnceTheOldStreamEnds()
    {
        Ps ps(psOptions(modeConfig(proto::ASYNC)));
        // Longer than any stall of a loaded machine between the checks
        // below: the default second was outwaited once in CI.
        ps.task().setIdentityTimings({.oldStreamGrace = 60s, .holderHeardRecently = 2s});
        QVERIFY(ps.initialized());
        auto &killed = ps.open();
        killed.send(joinFrom(1, 4242, "alpha"));
        proto::TrainResponse response;
        QVERIFY(killed.receive(&response, kAnswer));
        auto &restarted = ps.open();
        restarted.send(joinFrom(1, 5151, "alpha"));
        // The ps has read the new join (and waits for the old stream's end).
        QDeadlineTimer deadline(kAnswer);
        auto progress = restarted.progress();
        while (progress.read == 0 && !deadline.hasExpired())
            progress = restarted.waitForProgress(progress, kAnswer);
        QCOMPARE(progress.read, uint64_t(1));
        QCOMPARE(progress.handled, uint64_t(0));
        killed.close();
        QVERIFY(restarted.receive(&response, kAnswer));
        QVERIFY(response.join().ready());
        QCOMPARE(ps.worker(1).pid(), 5151);
    }

    // A holder that has been silent a while may be dead with its connection
    // not yet noticed: the claimant is told to retry, in those words.
    void claimantOfASilentHoldersIndexIsToldToRetry()
    {
        Ps ps(psOptions(modeConfig(proto::ASYNC)));
        QVERIFY(ps.initialized());
        auto &silent = ps.open();
        silent.send(joinFrom(1, 4242, "alpha"));
        proto::TrainResponse response;
        QVERIFY(silent.receive(&response, kAnswer));
        // Claim until the holder has been silent long enough to be in doubt
        // (PsTask::IdentityTimings::holderHeardRecently); each claim is answered within about
        // a second.
        std::optional<CallStatus> status;
        QDeadlineTimer deadline(20s);
        do {
            auto &claimant = ps.open();
            claimant.send(joinFrom(1, 777, "beta"));
            status = claimant.waitForEnd(kAnswer);
            QVERIFY(status);
        } while (status->code() == CallStatus::Code::AlreadyExists && !deadline.hasExpired());
        QCOMPARE(status->code(), CallStatus::Code::RetryLater);
        const QString message = QString::fromStdString(status->message());
        QVERIFY2(message.startsWith(QStringLiteral("retry: the old connection of worker:1 (pid 4242 on host 'alpha', "
                                                   "in the cluster since ")),
                 qPrintable(message));
        QVERIFY2(
            message.endsWith(QStringLiteral(" s) is still open; ps:0 lets the index go once that connection closes")),
            qPrintable(message));
        QCOMPARE(ps.worker(1).pid(), 4242);
    }

    // A shard whose shape claims more values than it holds (here 2^62) is
    // refused before it replaces anything.
    void anInitializationWhoseShapeDoesNotDescribeItsValuesIsRefused()
    {
        PsTask task(psOptions(modeConfig(proto::ASYNC)), RpcSettings{}, [](const std::string &) {});
        proto::InitializeRequest request = testing::linearDemoInitialization();
        auto *w = request.mutable_shard()->mutable_variables(0)->mutable_value();
        w->set_shape(0, int64_t(1) << 31);
        w->add_shape(int64_t(1) << 31);
        proto::InitializeResponse response;
        const CallStatus status = task.initialize(request, &response);
        QCOMPARE(status.code(), CallStatus::Code::InvalidArgument);
        QCOMPARE(QString::fromStdString(status.message()),
                 QStringLiteral("the chief sent ps:0 'w' of shape [2147483648, 2147483648], but its signature "
                                "declares [1]: its checkpoint or the chief's state is corrupt"));
        // Declared so in the signature too, the values still do not fit it.
        proto::InitializeRequest both = request;
        both.mutable_signature()->mutable_variables(0)->set_shape(0, int64_t(1) << 31);
        both.mutable_signature()->mutable_variables(0)->add_shape(int64_t(1) << 31);
        const CallStatus refused = task.initialize(both, &response);
        QCOMPARE(refused.code(), CallStatus::Code::InvalidArgument);
        QVERIFY2(QString::fromStdString(refused.message()).contains(QStringLiteral("claims more than 2^31 values")),
                 refused.message().c_str());
        // Nothing was taken: a good initialisation still lands.
        QVERIFY(task.initialize(testing::linearDemoInitialization(), &response).ok());
        QVERIFY(response.initialized_now());
    }

    // ps:1 of two, with W [4, 2] split into two slices: the chief must send
    // it exactly W/part_1 (the placement's), and ps:0 refuses a worker that
    // splits W otherwise, naming the flag to align.
    void aShardThePlacementDoesNotGiveThisTaskIsRefused()
    {
        NodeOptions options = psOptions(modeConfig(proto::ASYNC));
        options.cluster.ps.push_back(parseHostPort("127.0.0.1:12225"));
        options.task.index = 1;
        PsTask task(options, RpcSettings{}, [](const std::string &) {});
        proto::InitializeRequest request;
        request.set_origin("fresh");
        auto *w = request.mutable_signature()->add_variables();
        w->set_name("W");
        w->add_shape(4);
        w->add_shape(2);
        w->add_slice_rows(2);
        w->add_slice_rows(2);
        const auto addPiece = [&request](const char *name, std::vector<int64_t> shape) {
            auto *piece = request.mutable_shard()->add_variables();
            piece->set_name(name);
            int64_t size = 1;
            for (const int64_t d : shape)
                size *= d;
            piece->mutable_value()->mutable_shape()->Assign(shape.begin(), shape.end());
            piece->mutable_value()->mutable_values()->Resize(int(size), 0.5f);
        };
        addPiece("W", {4, 2}); // whole, as a chief that did not partition sends it
        proto::InitializeResponse response;
        CallStatus status = task.initialize(request, &response);
        QCOMPARE(status.code(), CallStatus::Code::InvalidArgument);
        QCOMPARE(QString::fromStdString(status.message()),
                 QStringLiteral("the chief sent ps:1 'W' as its variable 0, but its signature places 'W/part_1' "
                                "there: give every task the same --ps_hosts"));
        request.mutable_shard()->clear_variables();
        addPiece("W/part_1", {2, 2});
        QVERIFY(task.initialize(request, &response).ok());
        QVERIFY(response.initialized_now());
    }

    // A stream that ends on a refused request is over like a cut one: its
    // worker is dead to ps:0, its index free again, and a sync step does
    // not wait for it.
    void aSyncStepDoesNotWaitForAWorkerWhoseStreamWasRefused()
    {
        Ps ps(psOptions(modeConfig(proto::SYNC)));
        QVERIFY(ps.initialized());
        auto *first = ps.joined(0);
        auto *second = ps.joined(1);
        QVERIFY(first && second);
        second->send(pushTensor({1}, 3)); // three values for w's one: refused
        QVERIFY(second->waitForEnd(kAnswer));
        QCOMPARE(ps.worker(1).phase(), proto::DEAD);
        QVERIFY(ps.logged("worker:1 is dead: its stream was refused: worker:1: gradient 0 has 3 values"));
        proto::TrainResponse response;
        first->send(push(0, 1.0f));
        QVERIFY(first->receive(&response, kAnswer));
        QCOMPARE(response.push().outcome(), proto::AGGREGATED);
        QCOMPARE(ps.globalStep(), 1);
        // The index is free: the worker, fixed and started again, joins.
        QVERIFY(ps.joined(1));
    }

    // A worker uploads to the other ps tasks while ps:0 decides: ps:1 holds
    // the staged gradient, answers only the decision that follows, and
    // applies it as that says -- once, or not at all.
    void aStagedGradientWaitsForPs0sDecision()
    {
        NodeOptions options = psOptions(modeConfig(proto::ASYNC));
        options.cluster.ps.push_back(parseHostPort("127.0.0.1:12225"));
        options.task.index = 1;
        PsTask task(options, RpcSettings{}, [](const std::string &) {});
        proto::InitializeRequest initialization = testing::linearDemoInitialization();
        initialization.mutable_shard()->mutable_variables()->DeleteSubrange(0, 1); // b only: w lives on ps:0
        proto::InitializeResponse initialized;
        QVERIFY(task.initialize(initialization, &initialized).ok());
        const auto staged = [](float value) {
            proto::TrainRequest request = push(0, value, {1});
            request.mutable_push()->set_staged(true);
            return request;
        };
        const auto decision = [](int64_t update, int contributions) {
            proto::TrainRequest request;
            request.mutable_push()->set_update(update);
            request.mutable_push()->set_contributions(contributions);
            return request;
        };
        {
            InProcessTrainCall call(task);
            call.send(joinAs(0));
            proto::TrainResponse response;
            QVERIFY(call.receive(&response, kAnswer));
            // Applied: the first answer is the decision's, with b moved once.
            call.send(staged(1.0f));
            call.send(decision(1, 1));
            QVERIFY(call.receive(&response, kAnswer));
            QCOMPARE(response.push().update(), 1);
            QCOMPARE(response.push().parameters(0).values(0), -kLearningRate);
            // Dropped by ps:0 (0 contributions): b stays where it was.
            call.send(staged(1.0f));
            call.send(decision(2, 0));
            QVERIFY(call.receive(&response, kAnswer));
            QCOMPARE(response.push().update(), 2);
            QCOMPARE(response.push().parameters(0).values(0), -kLearningRate);
            // ps:0 applied its slice at a quarter of the rate (a gradient
            // four updates old under the staleness rule): so does ps:1.
            call.send(staged(1.0f));
            proto::TrainRequest quarter = decision(3, 1);
            quarter.mutable_push()->set_learning_rate_scale(0.25f);
            call.send(quarter);
            QVERIFY(call.receive(&response, kAnswer));
            QCOMPARE(response.push().parameters(0).values(0), -kLearningRate - 0.25f * kLearningRate);
            call.send(leave(false));
            QVERIFY(call.waitForEnd(kAnswer));
        }
        // A factor ps:0 cannot have chosen is refused, and moves nothing.
        for (const float scale : {1.5f, -0.25f, std::numeric_limits<float>::quiet_NaN()}) {
            InProcessTrainCall call(task);
            call.send(joinAs(0));
            proto::TrainResponse response;
            QVERIFY(call.receive(&response, kAnswer));
            call.send(staged(1.0f));
            proto::TrainRequest odd = decision(10, 1);
            odd.mutable_push()->set_learning_rate_scale(scale);
            call.send(odd);
            const auto status = call.waitForEnd(kAnswer);
            QVERIFY(status);
            QCOMPARE(status->code(), CallStatus::Code::InvalidArgument);
            QVERIFY2(QString::fromStdString(status->message())
                         .contains(QStringLiteral("send ps:0's PushResponse.learning_rate_scale as it came, a number "
                                                  "in (0, 1], or none")),
                     status->message().c_str());
        }
        const auto refusal = [&task](const QList<proto::TrainRequest> &requests) {
            InProcessTrainCall call(task);
            for (const auto &request : requests)
                call.send(request);
            const auto status = call.waitForEnd(kAnswer);
            return status ? QString::fromStdString(status->message()) : QStringLiteral("(no end)");
        };
        proto::TrainRequest decisionWithGradients = push(0, 1.0f, {1});
        decisionWithGradients.mutable_push()->set_update(3);
        decisionWithGradients.mutable_push()->set_contributions(1);
        QCOMPARE(refusal({joinAs(0), staged(1.0f), decisionWithGradients}),
                 QStringLiteral("the decision on a staged push brings 1 gradients of its own: it carries update and "
                                "contributions only"));
        QCOMPARE(refusal({joinAs(0), staged(1.0f), staged(1.0f)}),
                 QStringLiteral("a second staged push before ps:0's decision on the first: send the decision (a push "
                                "with update and contributions, no gradients) first"));
        // A staged gradient is checked as it comes, as any gradient is.
        proto::TrainRequest misshapen = staged(1.0f);
        misshapen.mutable_push()->mutable_gradients(0)->add_shape(1);
        QVERIFY(refusal({joinAs(0), misshapen}).contains(QStringLiteral("has shape [1, 1], the variable [1]")));
        // None of it moved b.
        InProcessTrainCall call(task);
        call.send(joinAs(0));
        proto::TrainResponse response;
        QVERIFY(call.receive(&response, kAnswer));
        call.send(decision(4, 0));
        QVERIFY(call.receive(&response, kAnswer));
        QCOMPARE(response.push().parameters(0).values(0), -kLearningRate - 0.25f * kLearningRate);
        call.send(leave(false));
        QVERIFY(call.waitForEnd(kAnswer));
    }

    void aWorkerThatSplitsTheVariablesOtherwiseIsRefused()
    {
        PsTask task(psOptions(modeConfig(proto::ASYNC)), RpcSettings{}, [](const std::string &) {});
        proto::InitializeResponse initialized;
        QVERIFY(task.initialize(testing::linearDemoInitialization(), &initialized).ok());
        InProcessTrainCall call(task);
        proto::TrainRequest join = joinAs(1);
        auto *w = join.mutable_join()->mutable_signature()->mutable_variables(0);
        w->set_shape(0, 2);
        const auto refusedWith = [&call, &join] {
            call.send(join);
            const auto status = call.waitForEnd(kAnswer);
            return status ? QString::fromStdString(status->message()) : QStringLiteral("(no answer)");
        };
        QVERIFY(refusedWith().contains(QStringLiteral("of a different shape")));
        // The cluster's shape, split as the cluster does not (worker:0 now:
        // worker:1's refused call is not closed until it goes).
        join.mutable_join()->set_worker_index(0);
        w->set_shape(0, 1);
        w->add_slice_rows(1);
        w->add_slice_rows(0);
        InProcessTrainCall again(task);
        again.send(join);
        const auto status = again.waitForEnd(kAnswer);
        QVERIFY(status);
        QCOMPARE(status->code(), CallStatus::Code::FailedPrecondition);
        QVERIFY2(QString::fromStdString(status->message())
                     .endsWith(QStringLiteral("variable 'w': it splits it into 2 slices (rows 1, 0) but the "
                                              "cluster keeps it whole. Give every worker the same --min_slice_bytes")),
                 status->message().c_str());
    }

    // Metric names become metrics.csv columns and TensorBoard tags: names
    // that would break either are refused before anything is taken.
    void metricNamesThatWouldBreakTheRunDirectoryAreRefused_data()
    {
        QTest::addColumn<QStringList>("names");
        QTest::addColumn<QString>("message");
        QTest::newRow("a comma") << QStringList{QStringLiteral("loss,accuracy")}
                                 << QStringLiteral("metric name 'loss,accuracy' is not 1-64 characters of letters, "
                                                   "digits, '_', '.' or '-': rename the metric");
        QTest::newRow("empty") << QStringList{QString()} << QStringLiteral("metric name '' is not 1-64 characters");
        QTest::newRow("twice") << QStringList{QStringLiteral("accuracy"), QStringLiteral("accuracy")}
                               << QStringLiteral("metric name 'accuracy' is declared twice: declare each metric once");
        QStringList many;
        for (int i = 0; i < 33; ++i)
            many << QStringLiteral("m%1").arg(i);
        QTest::newRow("too many") << many
                                  << QStringLiteral("the signature declares 33 metric names, more than 32: report "
                                                    "fewer metrics");
    }

    // Variable names become step-log keys and TensorBoard tags too.
    void variableNamesThatWouldBreakTheRunDirectoryAreRefused_data()
    {
        QTest::addColumn<QStringList>("names");
        QTest::addColumn<QString>("message");
        QTest::newRow("a quote") << QStringList{QStringLiteral("w\""), QStringLiteral("b")}
                                 << QStringLiteral("variable name 'w\"' is not 1-128 characters of letters, digits, "
                                                   "'_', '.', '-', '/' or ':': rename the variable");
        QTest::newRow("empty") << QStringList{QString(), QStringLiteral("b")}
                               << QStringLiteral("variable name '' is not 1-128 characters");
        QTest::newRow("too long") << QStringList{QString(129, QLatin1Char('w')), QStringLiteral("b")}
                                  << QStringLiteral("variable name '") + QString(128, QLatin1Char('w'))
                                         + QStringLiteral("' is not 1-128 characters");
        QTest::newRow("twice") << QStringList{QStringLiteral("layer/0"), QStringLiteral("layer/0")}
                               << QStringLiteral("variable name 'layer/0' is declared twice: give each variable "
                                                 "its own name");
    }

    void variableNamesThatWouldBreakTheRunDirectoryAreRefused()
    {
        QFETCH(QStringList, names);
        QFETCH(QString, message);
        PsTask task(psOptions(modeConfig(proto::ASYNC)), RpcSettings{}, [](const std::string &) {});
        proto::InitializeRequest request = testing::linearDemoInitialization();
        for (int i = 0; i < names.size(); ++i) {
            request.mutable_signature()->mutable_variables(i)->set_name(names[i].toStdString());
            request.mutable_shard()->mutable_variables(i)->set_name(names[i].toStdString());
        }
        proto::InitializeResponse response;
        const CallStatus status = task.initialize(request, &response);
        QCOMPARE(status.code(), CallStatus::Code::InvalidArgument);
        QVERIFY2(QString::fromStdString(status.message()).startsWith(message), status.message().c_str());
        QVERIFY(task.initialize(testing::linearDemoInitialization(), &response).ok());
        QVERIFY(response.initialized_now());
    }

    void metricNamesThatWouldBreakTheRunDirectoryAreRefused()
    {
        QFETCH(QStringList, names);
        QFETCH(QString, message);
        PsTask task(psOptions(modeConfig(proto::ASYNC)), RpcSettings{}, [](const std::string &) {});
        proto::InitializeRequest request = testing::linearDemoInitialization();
        for (const QString &name : names)
            request.mutable_signature()->add_metric_names(name.toStdString());
        proto::InitializeResponse response;
        const CallStatus status = task.initialize(request, &response);
        QCOMPARE(status.code(), CallStatus::Code::InvalidArgument);
        QVERIFY2(QString::fromStdString(status.message()).startsWith(message), status.message().c_str());
        // Nothing was taken: a good initialisation still lands.
        QVERIFY(task.initialize(testing::linearDemoInitialization(), &response).ok());
        QVERIFY(response.initialized_now());
    }

    void malformedRequestsEndTheStreamWithTheWireError()
    {
        QFETCH(QList<proto::TrainRequest>, requests);
        QFETCH(CallStatus::Code, code);
        QFETCH(QString, message);
        Ps ps(psOptions(modeConfig(proto::ASYNC)));
        QVERIFY(ps.initialized());
        auto *healthy = ps.joined(0);
        QVERIFY(healthy);

        auto &rogue = ps.open();
        for (const auto &request : requests)
            rogue.send(request);
        const auto status = rogue.waitForEnd(kAnswer);
        QVERIFY(status);
        QCOMPARE(status->code(), code);
        QCOMPARE(QString::fromStdString(status->message()), message);

        // Nothing the cluster learned is lost, and it keeps training.
        proto::TrainResponse response;
        healthy->send(push(0, 1.0f));
        QVERIFY(healthy->receive(&response, kAnswer));
        QCOMPARE(response.push().outcome(), proto::APPLIED);
        QCOMPARE(response.push().parameters(0).values(0), -0.5f);
        QCOMPARE(ps.globalStep(), 1);
    }
};

QTEST_GUILESS_MAIN(TestPsTask)
#include "tst_ps_task.moc"
