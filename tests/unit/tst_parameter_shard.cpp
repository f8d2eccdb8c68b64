#include "engine/optimizer.h"
#include "engine/parameter_shard.h"

#include <QTest>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

using namespace parasync;

namespace {

// A shard of one variable of `count` values, all `start`, updated by plain
// SGD with learning rate 1: a gradient of all -1 adds 1 to every value.
std::unique_ptr<ParameterShard> shardOf(int count, float start = 0.0f)
{
    OptimizerOptions options;
    options.name = "sgd";
    options.learningRate = 1.0f;
    auto shard = std::make_unique<ParameterShard>(makeOptimizer(options));
    proto::ShardState state;
    auto *variable = state.add_variables();
    variable->set_name("w");
    variable->mutable_value()->add_shape(count);
    for (int i = 0; i < count; ++i)
        variable->mutable_value()->add_values(start);
    shard->load(state);
    return shard;
}

// Adds `by` to every value of a one-variable shard.
void addToEveryValue(ParameterShard &shard, const std::vector<float> &minusBy)
{
    shard.apply({std::span<const float>(minusBy)});
}

bool allEqualTo(std::span<const float> values, float expected)
{
    return std::all_of(values.begin(), values.end(), [&](float v) { return v == expected; });
}

} // namespace

class TestParameterShard : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    // An answer taken after a push sends the values after that push, though
    // another push updates the variable before the answer has gone.
    void aSnapshotKeepsTheValuesItWasTakenWith()
    {
        auto shard = shardOf(4);
        const std::vector<float> plusOne(4, -1.0f);
        addToEveryValue(*shard, plusOne);

        google::protobuf::RepeatedPtrField<proto::Tensor> shapes;
        ValuesSnapshot answer;
        shard->share(&shapes, &answer);
        QCOMPARE(shapes.size(), 1);
        QCOMPARE(shapes[0].shape_size(), 1);
        QCOMPARE(shapes[0].shape(0), 4);
        QCOMPARE(shapes[0].values_size(), 0); // the values are the snapshot's

        addToEveryValue(*shard, plusOne);
        QVERIFY(allEqualTo(answer.values()[0], 1.0f));
        QVERIFY(allEqualTo(shard->values(0), 2.0f));

        answer.release();
        QVERIFY(answer.empty());
        addToEveryValue(*shard, plusOne);
        QVERIFY(allEqualTo(shard->values(0), 3.0f));
    }

    // Without a snapshot out, an update is made where the values lie: no
    // copy, no buffer of its own (a 1M step's copy was 4 MB).
    void anUnheldVariableIsUpdatedInPlace()
    {
        auto shard = shardOf(1000);
        const std::vector<float> plusOne(1000, -1.0f);
        const float *where = shard->values(0).data();
        for (int step = 0; step < 10; ++step) {
            google::protobuf::RepeatedPtrField<proto::Tensor> shapes;
            ValuesSnapshot answer;
            shard->share(&shapes, &answer);
            answer.release(); // sent before the next push, as one worker's are
            addToEveryValue(*shard, plusOne);
        }
        QCOMPARE(shard->values(0).data(), where);
        QVERIFY(allEqualTo(shard->values(0), 10.0f));
        QCOMPARE(shard->retiredBuffers(), size_t(0));
    }

    // Many answers out at once (one per worker) cost a buffer each while
    // they are out; once they have gone, the shard keeps one spare.
    void buffersHeldByAnswersAreGivenBack()
    {
        auto shard = shardOf(100);
        const std::vector<float> plusOne(100, -1.0f);
        std::vector<ValuesSnapshot> out;
        for (int worker = 0; worker < 8; ++worker) {
            google::protobuf::RepeatedPtrField<proto::Tensor> shapes;
            out.emplace_back();
            shard->share(&shapes, &out.back());
            addToEveryValue(*shard, plusOne);
        }
        QCOMPARE(shard->retiredBuffers(), size_t(8));
        for (int worker = 0; worker < 8; ++worker)
            QVERIFY(allEqualTo(out[size_t(worker)].values()[0], float(worker)));
        out.clear();
        // The next updates reuse what the answers gave back.
        for (int step = 0; step < 3; ++step) {
            google::protobuf::RepeatedPtrField<proto::Tensor> shapes;
            ValuesSnapshot answer;
            shard->share(&shapes, &answer);
            addToEveryValue(*shard, plusOne);
        }
        QVERIFY2(shard->retiredBuffers() <= 2, std::to_string(shard->retiredBuffers()).c_str());
        QVERIFY(allEqualTo(shard->values(0), 11.0f));
    }

    // A snapshot outlives a restore (load) that replaces the variables.
    void aSnapshotSurvivesARestore()
    {
        auto shard = shardOf(16, 5.0f);
        google::protobuf::RepeatedPtrField<proto::Tensor> shapes;
        ValuesSnapshot answer;
        shard->share(&shapes, &answer);
        proto::ShardState restored = shard->save(0);
        restored.mutable_variables(0)->mutable_value()->set_values(3, 7.0f);
        shard->load(restored);
        QVERIFY(allEqualTo(answer.values()[0], 5.0f));
        QCOMPARE(shard->values(0)[3], 7.0f);
    }

    // Workers' threads answer outside the ps's lock while others update:
    // every answer reads the values of one moment, never half of one update
    // and half of the next. (Run under ThreadSanitizer in CI as well.)
    void answersReadWholeUpdatesWhileOthersApply()
    {
        auto shard = shardOf(100'000);
        const std::vector<float> plusOne(100'000, -1.0f);
        std::mutex guard; // the ps's lock
        std::atomic<int> torn{0};
        std::atomic<int> answered{0};
        const auto worker = [&] {
            for (int step = 0; step < 200; ++step) {
                ValuesSnapshot answer;
                float expected = 0;
                {
                    std::lock_guard lock(guard);
                    addToEveryValue(*shard, plusOne);
                    expected = shard->values(0)[0];
                    google::protobuf::RepeatedPtrField<proto::Tensor> shapes;
                    shard->share(&shapes, &answer);
                }
                // As a send would: every value, after the lock is let go.
                if (!allEqualTo(answer.values()[0], expected))
                    ++torn;
                ++answered;
            }
        };
        std::vector<std::thread> workers;
        for (int i = 0; i < 4; ++i)
            workers.emplace_back(worker);
        for (auto &t : workers)
            t.join();
        QCOMPARE(answered.load(), 800);
        QCOMPARE(torn.load(), 0);
        QVERIFY(allEqualTo(shard->values(0), 800.0f));
        QVERIFY2(shard->retiredBuffers() <= 4, std::to_string(shard->retiredBuffers()).c_str());
    }
};

QTEST_GUILESS_MAIN(TestParameterShard)
#include "tst_parameter_shard.moc"
