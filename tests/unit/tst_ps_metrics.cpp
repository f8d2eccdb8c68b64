// What ps:0's metrics page (--metrics_port) says after steps it took
// in-process: the global step, the mode, each worker's steps, staleness,
// phase and the gradient bytes, line by line as Prometheus reads them.
#include "config/task_options.h"
#include "node/in_process_train_call.h"
#include "node/ps_task.h"
#include "support/train_requests.h"

#include <QTest>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

using namespace parasync;
using namespace std::chrono_literals;

namespace {

NodeOptions psOptions(proto::UpdateMode mode)
{
    NodeOptions options;
    options.cluster.ps = {parseHostPort("127.0.0.1:12222")};
    options.cluster.workers = {parseHostPort("127.0.0.1:12223"), parseHostPort("127.0.0.1:12224")};
    options.task = TaskId{JobName::Ps, 0};
    options.training.optimizer = "sgd";
    options.training.learningRate = 0.5f;
    options.training.mode.set_mode(mode);
    return options;
}

bool hasLine(const std::string &text, const std::string &line)
{
    return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

} // namespace

class TestPsMetrics : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void ps0ShowsTheClusterAfterTwoAsyncSteps()
    {
        PsTask ps(psOptions(proto::ASYNC), RpcSettings{}, [](const std::string &) {});
        proto::InitializeResponse initialized;
        QVERIFY(ps.initialize(testing::linearDemoInitialization(), &initialized).ok());
        std::vector<std::unique_ptr<InProcessTrainCall>> calls;
        for (int worker = 0; worker < 2; ++worker) {
            calls.push_back(std::make_unique<InProcessTrainCall>(ps));
            calls.back()->send(testing::linearDemoJoin(worker));
            proto::TrainResponse response;
            QVERIFY(calls.back()->receive(&response, 5s));
            QVERIFY(response.join().ready());
        }
        // Both computed from step 0: worker:1's lands one step stale.
        for (int worker = 0; worker < 2; ++worker) {
            proto::TrainRequest push = testing::pushOf(0, {1, 1}, 1.0f);
            push.mutable_push()->set_batch_loss(0.25f * float(worker + 1));
            push.mutable_push()->set_full_loss(std::nanf("")); // not measured this step, as a worker says it
            calls[size_t(worker)]->send(push);
            proto::TrainResponse response;
            QVERIFY(calls[size_t(worker)]->receive(&response, 5s));
            QCOMPARE(response.push().outcome(), proto::APPLIED);
        }

        const std::string text = ps.metricsText(ExpositionFormat::PrometheusText);
        QVERIFY2(text.find("\nparasync_task_info{task=\"ps:0\",version=\"") != std::string::npos, text.c_str());
        for (const std::string line : {
                 "parasync_global_step 2",
                 "parasync_mode_info{mode=\"async\"} 1",
                 "parasync_initialized 1",
                 "parasync_worker_steps_total{worker=\"0\"} 1",
                 "parasync_worker_steps_total{worker=\"1\"} 1",
                 "parasync_worker_applied_total{worker=\"1\"} 1",
                 "parasync_worker_dropped_total{worker=\"1\"} 0",
                 "parasync_worker_staleness_steps_total{worker=\"0\"} 0",
                 "parasync_worker_staleness_steps_total{worker=\"1\"} 1",
                 "parasync_worker_staleness_gradients_total{worker=\"1\"} 1",
                 "parasync_worker_batch_loss{worker=\"1\"} 0.5",
                 "parasync_chief_batch_loss 0.25",
                 "parasync_worker_phase{worker=\"0\",phase=\"training\"} 1",
                 "parasync_worker_phase{worker=\"0\",phase=\"dead\"} 0",
                 // Two pushes of two 4-byte values; the model is w and b.
                 "parasync_ps_gradient_bytes_total{ps=\"0\"} 16",
                 "parasync_ps_gradient_pushes_total{ps=\"0\"} 2",
                 "parasync_ps_updates_applied_total{ps=\"0\"} 2",
                 "parasync_step_gradient_bytes 8",
                 "parasync_ps_shard_bytes{ps=\"0\"} 8",
             })
            QVERIFY2(hasLine(text, line), qPrintable(QString::fromStdString(line + "\nnot in:\n" + text)));
        // Not measured yet: absent, not 0 (a 0 loss would read as a perfect model).
        QVERIFY2(text.find("\nparasync_full_loss ") == std::string::npos, text.c_str());
        QVERIFY2(text.find("\nparasync_worker_seconds_per_step{") == std::string::npos, text.c_str());

        const std::string open = ps.metricsText(ExpositionFormat::OpenMetrics);
        QVERIFY(open.ends_with("\n# EOF\n"));
        QVERIFY(hasLine(open, "# TYPE parasync_worker_steps counter"));

        ps.requestStop("the test is over");
        calls.clear();
    }

    // A ps task that never served: its own figures, no cluster view.
    void aPsTaskBeforeItsInitialisationShowsItsOwnFiguresOnly()
    {
        PsTask ps(psOptions(proto::SYNC), RpcSettings{}, [](const std::string &) {});
        const std::string text = ps.metricsText(ExpositionFormat::PrometheusText);
        QVERIFY2(hasLine(text, "parasync_ps_updates_applied_total{ps=\"0\"} 0"), text.c_str());
        QVERIFY2(hasLine(text, "parasync_initialized 0"), text.c_str());
        QVERIFY2(hasLine(text, "parasync_mode_info{mode=\"sync\"} 1"), text.c_str());
    }
};

QTEST_GUILESS_MAIN(TestPsMetrics)
#include "tst_ps_metrics.moc"
